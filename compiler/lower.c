/* lower.c: lowering. Rewrites every collective together with its region
 * into a step program (FuseAG, FuseRS, FuseA2A, all_reduce = FuseRS then
 * FuseAG; ring, bidir, pairwise; granularity m) or into the vanilla and
 * slice(k) baselines, and orders all stages.
 * requires: a Sched from region_sched (regions found); every
 * collective's Node.sched set.
 * ensures: every collective lowered per the choice the schedule rules
 * give it (sched_use: auto resolved, what does not apply replaced),
 * stages in an order that respects every dependency; nonzero after
 * errors, every one reported. plan.c plans the result's memory and
 * verify_prog.c proves both. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "sched.h"

typedef struct Lower {
	Graph *g;
	Arena *a;
	Diag *d;
	Coll *c;
	Phase *ph;    /* the phase being built */
	int lane;     /* the lane items go to */
	int nlabel;   /* transfer labels handed out in c */
} Lower;

/* ---- index expressions and references ---- */

static Ix
ix_k(int k) /* the constant k */
{
	return (Ix){IX_AFFINE, 0, 0, k, 0};
}

static Ix
ix_r(int b, int c, int n) /* (r + b*i + c) mod n */
{
	return (Ix){IX_AFFINE, 1, b, c, n};
}

static Ix
ix_i(int c, int n) /* (i + c), mod n when n > 0 */
{
	return (Ix){IX_AFFINE, 0, 1, c, n};
}

static Ix
ix_partner(int b, int c, int n) /* partner of r in round b*i + c */
{
	return (Ix){IX_PARTNER, 0, b, c, n};
}

/* The slice of lane t of chunk q: q * P + t. */
static Sel
sel_one(Ix chunk, int P, int t)
{
	return (Sel){chunk, ix_k(t), P, 1, 1};
}

/* cnt slices lo, lo + stride, ... */
static Sel
sel_span(Ix lo, int cnt, int stride)
{
	return (Sel){ix_k(0), lo, 0, cnt, stride};
}

static BufRef
ref(int b, Sel s)
{
	return (BufRef){b, ix_k(0), s, ix_k(0)};
}

static BufRef
ref_rot(int b, Ix rot, Sel s)
{
	return (BufRef){b, rot, s, ix_k(0)};
}

static BufRef
ref_part(int b, Ix part, Sel s)
{
	return (BufRef){b, ix_k(0), s, part};
}

static Guard
gd(int lo, int hi)
{
	return (Guard){lo, hi, 0, 0};
}

/* The last of R rounds, when there is more than one. */
static Guard
gd_last(int R)
{
	return gd(R > 1 ? R - 1 : 1, R - 1);
}

/* Only when r has a partner in round i + aoff. */
static Guard
gd_act(int lo, int hi, int aoff)
{
	return (Guard){lo, hi, 1, aoff};
}

/* ---- building phases ---- */

static void
lw_phase(Lower *L, const char *name, int nrounds, int nlanes)
{
	Phase *ph = arena_alloc(L->a, sizeof *ph);

	ph->name = name;
	ph->nrounds = nrounds;
	ph->nlanes = nlanes;
	vec_push(L->a, &L->c->phases, ph);
	L->ph = ph;
	L->lane = 0;
}

/* Appends an item to the current lane; phase_prune drops those whose
 * guard admits no round. */
static Item *
lw_item(Lower *L, ItemKind k, Guard g)
{
	Item *it = arena_alloc(L->a, sizeof *it);

	it->kind = k;
	it->g = g;
	vec_push(L->a, &L->ph->lanes[L->lane], it);
	return it;
}

static void
lw_xfer(Lower *L, ItemKind k, Guard g, BufRef b, Ix peer, int label, Ix round)
{
	Item *it = lw_item(L, k, g);

	it->u.xfer.buf = b;
	it->u.xfer.peer = peer;
	it->u.xfer.label = label;
	it->u.xfer.round = round;
	it->u.xfer.tag = L->lane;
}

static void
lw_wait(Lower *L, Guard g, int label, Ix round)
{
	Item *it = lw_item(L, IT_WAIT, g);

	it->u.wait.label = label;
	it->u.wait.round = round;
}

static void
lw_move(Lower *L, ItemKind k, Guard g, BufRef dst, BufRef src)
{
	Item *it = lw_item(L, k, g);

	it->u.move.dst = dst;
	it->u.move.src = src;
}

static void
lw_coll(Lower *L, Guard g, int label, Ix round, Sel sel, int blocking)
{
	Item *it = lw_item(L, IT_COLL, g);

	it->u.coll.op = L->c->node->op;
	it->u.coll.src = L->c->bin;
	it->u.coll.dst = L->c->bout;
	it->u.coll.sel = sel;
	it->u.coll.label = label;
	it->u.coll.round = round;
	it->u.coll.blocking = blocking;
}

static int
lw_label(Lower *L)
{
	return L->nlabel++;
}

static int
lw_index(const Coll *c, const RNode *rn)
{
	for (int i = 0; i < c->region.n; i++)
		if (c->region.v[i] == rn)
			return i;
	die("region node %s not in its region", rn->node->out->name);
}

/* Computes the nodes of side on sel, in order. The last one's result goes
 * to *last (accumulated when beta) when last is given, else every result
 * goes to its region buffer. */
static void
lw_region(Lower *L, Guard g, const Vec *side, Sel sel, const BufRef *last, int beta)
{
	for (int k = 0; k < side->n; k++) {
		RNode *rn = side->v[k];
		Item *it = lw_item(L, IT_COMPUTE, g);
		it->u.comp.rn = lw_index(L->c, rn);
		it->u.comp.sel = sel;
		if (last && k == side->n - 1) {
			it->u.comp.dst = *last;
			it->u.comp.beta = beta;
		} else {
			it->u.comp.dst = ref(rn->buf, sel);
			it->u.comp.beta = rnode_sums(rn);
		}
	}
}

/* Produces the partial of sel into dst: the region when there is one
 * (beta: accumulate), else a copy (or add) of the input. */
static void
lw_partial(Lower *L, Guard g, Sel sel, BufRef dst, int beta)
{
	Coll *c = L->c;

	if (c->pre.n)
		lw_region(L, g, &c->pre, sel, &dst, beta);
	else
		lw_move(L, beta ? IT_ADD : IT_COPY, g, dst, ref(c->bin, sel));
}

static int lw_temps(Lower *L, const char *base, int count, Value *v);

static int
lw_last_is_matmul(const Coll *c)
{
	return c->pre.n && ((RNode *)c->pre.v[c->pre.n - 1])->node->op == OP_MATMUL;
}

/* dst += the partial of sel: GEMM beta = 1 when the region ends in a
 * matmul, else through a scratch buffer. */
static void
lw_accum(Lower *L, Guard g, Sel sel, BufRef dst)
{
	if (!L->c->pre.n || lw_last_is_matmul(L->c)) {
		lw_partial(L, g, sel, dst, 1);
		return;
	}
	BufRef part = ref(lw_temps(L, "part", 1, L->c->node->in[0]), sel);
	lw_partial(L, g, sel, part, 0);
	lw_move(L, IT_ADD, g, dst, part);
}

/* ---- buffers ---- */

static int
lw_buf(Lower *L, const char *name, BufKind k, Value *v, int dim, int nslots)
{
	Coll *c = L->c;
	Buf *b = arena_alloc(L->a, sizeof *b);

	b->name = name;
	b->kind = k;
	b->v = v;
	b->dim = dim;
	b->nslots = nslots;
	b->nparts = 1;
	b->pdim = -1;
	b->set = c->bufs.n;
	b->nset = 1;
	b->elems = value_rank_elems(v) / (k == BK_TEMP ? c->nslices : 1);
	b->slot_elems = b->elems / nslots;
	vec_push(L->a, &c->bufs, b);
	return c->bufs.n - 1;
}

/* The buffer of graph value v: all nslices slices along dim, or (own)
 * only this rank's. */
static int
lw_value(Lower *L, Value *v, int dim, int own, int xfer)
{
	Coll *c = L->c;

	for (int i = 0; i < c->bufs.n; i++) {
		Buf *b = c->bufs.v[i];
		if (b->kind == BK_VALUE && b->v == v) {
			b->xfer |= xfer;
			return i;
		}
	}
	int b = lw_buf(L, v->name, BK_VALUE, v, dim, own ? c->nslices / c->N : c->nslices);
	((Buf *)c->bufs.v[b])->own = own;
	((Buf *)c->bufs.v[b])->xfer = xfer;
	return b;
}

/* count rotating scratch buffers of one slice of v; returns the first. */
static int
lw_temps(Lower *L, const char *base, int count, Value *v)
{
	int first = L->c->bufs.n;

	for (int k = 0; k < count; k++) {
		const char *name = L->c->P > 1 ? arena_printf(L->a, "%s%d_%d", base, L->lane, k)
		                               : arena_printf(L->a, "%s%d", base, k);
		int id = lw_buf(L, name, BK_TEMP, v, L->c->dim, 1);
		Buf *b = L->c->bufs.v[id];
		b->xfer = 1;
		b->set = first;
		b->nset = count;
		b->stem = base;
		b->lane = L->lane;
	}
	return first;
}

/* Buffers of the collective's input and result. */
static void
lw_io_bufs(Lower *L, int keep_in)
{
	Coll *c = L->c;
	Node *n = c->node;
	Value *in = n->in[0], *out = n->out;

	c->bin = -1;
	if (n->op == OP_ALL_GATHER) {
		c->bin = lw_value(L, in, c->dim, 1, 1);
		c->bout = lw_value(L, out, c->dim, 0, 1);
		return;
	}
	if (keep_in || !c->pre.n || coll_keeps_input(n))
		c->bin = lw_value(L, in, c->dim, 0, 1);
	if (n->op == OP_ALL_TO_ALL) {
		c->bout = lw_value(L, out, c->dim, 1, 1);
		Buf *b = c->bufs.v[c->bout];
		b->nparts = c->N;
		b->pdim = n->a.coll.dim;
		b->slot_elems = b->elems / (b->nslots * b->nparts);
	} else {
		c->bout = lw_value(L, out, c->dim, n->op == OP_REDUCE_SCATTER, 1);
	}
}

/* Region buffers: every region value sliced along its own dim; the
 * collective's input is materialized (bin) only when keep_in. */
static void
lw_region_bufs(Lower *L, int keep_in)
{
	Coll *c = L->c;

	lw_io_bufs(L, keep_in);
	for (int i = 0; i < c->region.n; i++) {
		RNode *rn = c->region.v[i];
		Value *v = rn->node->out;
		if (rnode_sums(rn))
			rn->buf = lw_buf(L, v->name, BK_VALUE, v, -1, 1);
		else
			rn->buf = v == c->node->in[0] ? c->bin : lw_value(L, v, rn->odim, 0, 0);
	}
	for (int i = 0; i < c->region.n; i++) {
		RNode *rn = c->region.v[i];
		for (int j = 0; j < rn->node->nin; j++)
			rn->inbuf[j] = rn->from[j] >= 0 ? ((RNode *)c->region.v[rn->from[j]])->buf :
			               rn->node->in[j] == c->node->out ? c->bout : -1;
	}
}

/* ---- ring lowerings ---- */

/* Direction of lane t: bidir sends the upper half of the lanes the other
 * way round the ring. */
static int
lw_dir(const Coll *c, int t)
{
	return c->how.topo == TP_BIDIR && t >= c->P / 2 ? -1 : 1;
}

/* FuseRS on a ring with GEMM accumulation (beta = 1) into the received
 * buffer: usable when a step's receive has other lanes' compute to hide
 * under before its consumer (P >= 2). Lane t, round i computes chunk
 * l = r - dir*(i+1): its own chunk comes last. */
static void
lw_rs_ring_beta(Lower *L, int dst)
{
	Coll *c = L->c;
	int N = c->N, R = N, P = c->P, t = L->lane, dir = lw_dir(c, t);
	int acc = lw_temps(L, "acc", 2, c->node->in[0]);
	int LS = lw_label(L), LR = lw_label(L);
	Sel l = sel_one(ix_r(-dir, -dir, N), P, t), next = sel_one(ix_r(-dir, -2 * dir, N), P, t);
	Sel own = sel_one(ix_r(0, 0, N), P, t);
	BufRef cur = ref_rot(acc, ix_i(0, 2), l);

	lw_wait(L, gd(1, R - 1), LR, ix_i(-1, 0));
	lw_partial(L, gd(0, R - 2 < 0 ? -1 : 0), l, cur, 0);
	lw_partial(L, gd(1, R - 2), l, cur, 1);
	lw_partial(L, gd(R - 1, R - 1), own, ref(dst, own), R > 1);
	/* the last send leaves the buffer the next receive fills; waiting for
	 * it before this step's send keeps the send and receive adjacent:
	 * one group, as NCCL needs (verify.c) */
	lw_wait(L, gd(1, R - 1), LS, ix_i(-1, 0));
	lw_xfer(L, IT_SEND, gd(0, R - 2), cur, ix_r(0, dir, N), LS, ix_i(0, 0));
	lw_xfer(L, IT_RECV, gd(0, R - 3), ref_rot(acc, ix_i(1, 2), next), ix_r(0, -dir, N), LR,
	        ix_i(0, 0));
	lw_xfer(L, IT_RECV, gd(R - 2, R - 2), ref(dst, own), ix_r(0, -dir, N), LR, ix_i(0, 0));
}

/* FuseRS on a ring as Algorithm 2 writes it: compute the partial into a
 * scratch buffer, then wait for the running sum from prev and add it; the
 * transfer hides under the compute. */
static void
lw_rs_ring_add(Lower *L, int dst)
{
	Coll *c = L->c;
	int N = c->N, R = N, P = c->P, t = L->lane, dir = lw_dir(c, t);
	int part = lw_temps(L, "part", 2, c->node->in[0]);
	int rb = lw_temps(L, "recv", 1, c->node->in[0]);
	int LS = lw_label(L), LR = lw_label(L);
	Sel l = sel_one(ix_r(-dir, -dir, N), P, t), own = sel_one(ix_r(0, 0, N), P, t);
	BufRef cur = ref_rot(part, ix_i(0, 2), l), in = ref(rb, l);

	lw_wait(L, gd(2, R - 1), LS, ix_i(-2, 0));
	lw_partial(L, gd(0, R - 2), l, cur, 0);
	lw_partial(L, gd(R - 1, R - 1), own, ref(dst, own), 0);
	lw_wait(L, gd(1, R - 1), LR, ix_i(-1, 0));
	lw_move(L, IT_ADD, gd(1, R - 2), cur, in);
	lw_move(L, IT_ADD, gd_last(R), ref(dst, own), in);
	lw_xfer(L, IT_SEND, gd(0, R - 2), cur, ix_r(0, dir, N), LS, ix_i(0, 0));
	lw_xfer(L, IT_RECV, gd(0, R - 2), ref(rb, sel_one(ix_r(-dir, -2 * dir, N), P, t)),
	        ix_r(0, -dir, N), LR, ix_i(0, 0));
	lw_wait(L, gd_last(R), LS, ix_i(-1, 0));
}

/* Accumulating with GEMM beta = 1 pays when the last op of the region is
 * a matmul and the receive has other lanes' compute to hide under. */
static int
lw_use_beta(const Coll *c)
{
	return c->P >= 2 && lw_last_is_matmul(c);
}

static const char *
lw_rs_name(Lower *L)
{
	Coll *c = L->c;
	const char *alg = c->how.query ? "query-split attention, Algorithm 4" :
	                  c->pre.n ? "row-parallel, Algorithms 2-3" : "no region, ring reduce-scatter";
	return arena_printf(L->a, "FuseRS %s (%s)", topo_name[c->how.topo], alg);
}

/* The reduce-scatter half, leaving rank r's reduced slices in dst. */
static void
lw_rs_ring(Lower *L, int dst)
{
	Coll *c = L->c;

	lw_phase(L, lw_rs_name(L), c->N, c->P);
	for (int t = 0; t < c->P; t++) {
		L->lane = t;
		if (lw_use_beta(c))
			lw_rs_ring_beta(L, dst);
		else
			lw_rs_ring_add(L, dst);
	}
}

/* FuseAG on a ring (Algorithm 1): lane t, round i computes chunk
 * l = r - dir*i, the one in hand (its own first), while forwarding it to
 * next and receiving the following one from prev. copy: start by copying
 * the own input slice into the result. */
static void
lw_ag_ring(Lower *L, int copy)
{
	Coll *c = L->c;
	int N = c->N, R = N, P = c->P;

	lw_phase(L, arena_printf(L->a, "FuseAG %s (Algorithm 1)", topo_name[c->how.topo]), R, P);
	for (int t = 0; t < P; t++) {
		int dir = lw_dir(c, t), LS = lw_label(L), LR = lw_label(L);
		Sel l = sel_one(ix_r(-dir, 0, N), P, t), own = sel_one(ix_r(0, 0, N), P, t);
		L->lane = t;
		if (copy)
			lw_move(L, IT_COPY, gd(0, 0), ref(c->bout, own), ref(c->bin, own));
		lw_wait(L, gd(1, R - 1), LR, ix_i(-1, 0));
		lw_xfer(L, IT_SEND, gd(0, R - 2), ref(c->bout, l), ix_r(0, dir, N), LS, ix_i(0, 0));
		lw_xfer(L, IT_RECV, gd(0, R - 2), ref(c->bout, sel_one(ix_r(-dir, -dir, N), P, t)),
		        ix_r(0, -dir, N), LR, ix_i(0, 0));
		lw_region(L, gd(0, R - 1), &c->post, l, NULL, 0);
		lw_wait(L, gd(1, R - 1), LS, ix_i(-1, 0));
	}
}

/* ---- pairwise (round-robin) lowerings ---- */

/* FuseAG pairwise: own slice first; then in round i the slice of the
 * partner of round i. Exchanges run two rounds ahead so that a round with
 * no partner (odd N) leaves nothing exposed. */
static void
lw_ag_pair(Lower *L, int copy)
{
	Coll *c = L->c;
	int N = c->N, R = sched_rounds(N), P = c->P, LS[MAXLANE], LR[MAXLANE];

	lw_phase(L, "FuseAG pairwise: own slice, exchanges of rounds 0-1 posted", 1, P);
	for (int t = 0; t < P; t++) {
		Sel own = sel_one(ix_r(0, 0, N), P, t);
		L->lane = t;
		LS[t] = lw_label(L), LR[t] = lw_label(L);
		if (copy)
			lw_move(L, IT_COPY, gd(0, 0), ref(c->bout, own), ref(c->bin, own));
		for (int k = 0; k < 2 && k < R; k++) {
			Ix p = ix_partner(0, k, N);
			lw_xfer(L, IT_SEND, gd_act(0, 0, k), ref(c->bout, own), p, LS[t], ix_k(k));
			lw_xfer(L, IT_RECV, gd_act(0, 0, k), ref(c->bout, sel_one(p, P, t)), p, LR[t], ix_k(k));
		}
		lw_region(L, gd(0, 0), &c->post, own, NULL, 0);
	}
	lw_phase(L, "FuseAG pairwise (round-robin, appendix A.3)", R, P);
	for (int t = 0; t < P; t++) {
		Ix p2 = ix_partner(1, 2, N), p = ix_partner(1, 0, N);
		L->lane = t;
		lw_xfer(L, IT_SEND, gd_act(0, R - 3, 2), ref(c->bout, sel_one(ix_r(0, 0, N), P, t)),
		        p2, LS[t], ix_i(2, 0));
		lw_xfer(L, IT_RECV, gd_act(0, R - 3, 2), ref(c->bout, sel_one(p2, P, t)), p2, LR[t],
		        ix_i(2, 0));
		lw_wait(L, gd_act(0, R - 1, 0), LR[t], ix_i(0, 0));
		lw_region(L, gd_act(0, R - 1, 0), &c->post, sel_one(p, P, t), NULL, 0);
		lw_wait(L, gd_act(0, R - 1, 0), LS[t], ix_i(0, 0));
	}
}

/* Round i of a pairwise exchange that computes the partner's slice into
 * one of three rotating send buffers (sb < 0: into the collective's kept
 * input). Waits run whether or not r plays round i, so that a round sat
 * out holds nothing up. recv_dst: where the partner's data lands (-1:
 * rotating receive buffers). */
static void
lw_pair_round(Lower *L, int sb, int rb, int LS, int LR, BufRef recv_dst)
{
	Coll *c = L->c;
	int N = c->N, R = sched_rounds(N), P = c->P, t = L->lane;
	Ix p = ix_partner(1, 0, N);
	Sel ps = sel_one(p, P, t);
	BufRef cur = sb >= 0 ? ref_rot(sb, ix_i(0, 3), ps) : ref(c->bin, ps);

	lw_wait(L, gd_act(3, R - 1, -3), LS, ix_i(-3, 0));
	lw_partial(L, gd_act(0, R - 1, 0), ps, cur, 0);
	lw_xfer(L, IT_SEND, gd_act(0, R - 1, 0), cur, p, LS, ix_i(0, 0));
	if (rb >= 0)
		recv_dst = ref_rot(rb, ix_i(0, 3), sel_one(ix_r(0, 0, N), P, t));
	lw_xfer(L, IT_RECV, gd_act(0, R - 1, 0), recv_dst, p, LR, ix_i(0, 0));
}

/* FuseRS pairwise: y starts at zero; round i computes the partner's
 * partial and exchanges it; a received partial is added two rounds later.
 * The own slice is computed last, after every exchange. */
static void
lw_rs_pair(Lower *L, int dst)
{
	Coll *c = L->c;
	int N = c->N, R = sched_rounds(N), P = c->P, sb[MAXLANE], rb[MAXLANE], LS[MAXLANE], LR[MAXLANE];

	lw_phase(L, "FuseRS pairwise (round-robin, appendix A.3)", R, P);
	for (int t = 0; t < P; t++) {
		Sel own = sel_one(ix_r(0, 0, N), P, t);
		L->lane = t;
		sb[t] = lw_temps(L, "send", 3, c->node->in[0]);
		rb[t] = lw_temps(L, "recv", 3, c->node->in[0]);
		LS[t] = lw_label(L), LR[t] = lw_label(L);
		lw_move(L, IT_ZERO, gd(0, 0), ref(dst, own), ref(dst, own));
		lw_pair_round(L, sb[t], rb[t], LS[t], LR[t], ref(dst, own));
		lw_wait(L, gd_act(2, R - 1, -2), LR[t], ix_i(-2, 0));
		lw_move(L, IT_ADD, gd_act(2, R - 1, -2), ref(dst, own),
		        ref_rot(rb[t], ix_i(-2, 3), own));
	}
	lw_phase(L, "FuseRS pairwise: own slice last", 1, P);
	for (int t = 0; t < P; t++) {
		Sel own = sel_one(ix_r(0, 0, N), P, t);
		L->lane = t;
		lw_accum(L, gd(0, 0), own, ref(dst, own));
		for (int k = R - 3 < 0 ? 0 : R - 3; k < R; k++)
			lw_wait(L, gd_act(0, 0, k), LS[t], ix_k(k));
		for (int k = R - 2 < 0 ? 0 : R - 2; k < R; k++) {
			lw_wait(L, gd_act(0, 0, k), LR[t], ix_k(k));
			lw_move(L, IT_ADD, gd_act(0, 0, k), ref(dst, own), ref(rb[t] + k % 3, own));
		}
	}
}

/* ---- all_to_all (Algorithm 5) ---- */

/* The result block of part q (the rank the data comes from) for lane t. */
static BufRef
lw_a2a_out(const Coll *c, Ix q, int t)
{
	return ref_part(c->bout, q, sel_one(ix_r(0, 0, c->N), c->P, t));
}

/* Does the region of an all_to_all compute into its kept input
 * (coll_keeps_input) rather than into send buffers? */
static int
lw_a2a_keeps(const Coll *c)
{
	return c->pre.n && coll_keeps_input(c->node);
}

/* The own slice of lane t, computed last, into the result (and, when the
 * input is kept, into the input first). */
static void
lw_a2a_own(Lower *L, Guard g, int t)
{
	Coll *c = L->c;
	Sel own = sel_one(ix_r(0, 0, c->N), c->P, t);
	BufRef out = lw_a2a_out(c, ix_r(0, 0, c->N), t);

	if (!lw_a2a_keeps(c)) {
		lw_partial(L, g, own, out, 0);
		return;
	}
	lw_partial(L, g, own, ref(c->bin, own), 0);
	lw_move(L, IT_COPY, g, out, ref(c->bin, own));
}

/* FuseA2A on a ring: round i computes the slice of rank j = r+i+1 and
 * sends it there, receiving from r-i-1; the own slice is computed last,
 * straight into the result. */
static void
lw_a2a_ring(Lower *L)
{
	Coll *c = L->c;
	int N = c->N, R = N, P = c->P;

	lw_phase(L, "FuseA2A ring (Algorithm 5)", R, P);
	for (int t = 0; t < P; t++) {
		L->lane = t;
		int send = c->pre.n && !lw_a2a_keeps(c);
		int sb = send ? lw_temps(L, "send", 2, c->node->in[0]) : -1;
		int LS = lw_label(L), LR = lw_label(L);
		Sel j = sel_one(ix_r(1, 1, N), P, t);
		BufRef cur = send ? ref_rot(sb, ix_i(0, 2), j) : ref(c->bin, j);
		lw_wait(L, gd(2, R - 1), LS, ix_i(-2, 0));
		if (c->pre.n)
			lw_partial(L, gd(0, R - 2), j, cur, 0);
		lw_a2a_own(L, gd(R - 1, R - 1), t);
		lw_xfer(L, IT_SEND, gd(0, R - 2), cur, ix_r(1, 1, N), LS, ix_i(0, 0));
		lw_xfer(L, IT_RECV, gd(0, R - 2), lw_a2a_out(c, ix_r(-1, -1, N), t), ix_r(-1, -1, N),
		        LR, ix_i(0, 0));
		lw_wait(L, gd(1, R - 1), LR, ix_i(-1, 0));
		lw_wait(L, gd_last(R), LS, ix_i(-1, 0));
	}
}

static void
lw_a2a_pair(Lower *L)
{
	Coll *c = L->c;
	int N = c->N, R = sched_rounds(N), P = c->P, LS[MAXLANE], LR[MAXLANE];

	lw_phase(L, "FuseA2A pairwise (round-robin)", R, P);
	for (int t = 0; t < P; t++) {
		L->lane = t;
		int sb = lw_a2a_keeps(c) ? -1 : lw_temps(L, "send", 3, c->node->in[0]);
		LS[t] = lw_label(L), LR[t] = lw_label(L);
		lw_pair_round(L, sb, -1, LS[t], LR[t], lw_a2a_out(c, ix_partner(1, 0, N), t));
		lw_wait(L, gd_act(2, R - 1, -2), LR[t], ix_i(-2, 0));
	}
	lw_phase(L, "FuseA2A pairwise: own slice last", 1, P);
	for (int t = 0; t < P; t++) {
		L->lane = t;
		lw_a2a_own(L, gd(0, 0), t);
		for (int k = R - 3 < 0 ? 0 : R - 3; k < R; k++)
			lw_wait(L, gd_act(0, 0, k), LS[t], ix_k(k));
		for (int k = R - 2 < 0 ? 0 : R - 2; k < R; k++)
			lw_wait(L, gd_act(0, 0, k), LR[t], ix_k(k));
	}
}

/* ---- baselines ---- */

/* The chunk j = i (plus off) of slice(k): the slices q*k + j of every rank
 * q, or just slice j for all_reduce. */
static Sel
lw_chunk(const Coll *c, int off)
{
	int ar = c->node->op == OP_ALL_REDUCE;

	return sel_span(ix_i(off, 0), ar ? 1 : c->N, c->P);
}

/* slice(k): chunk j's nonblocking collective overlaps chunk j+1's
 * compute; every chunk is waited at the end (reductions) or just before
 * its compute (gathers). */
static void
lw_slice(Lower *L)
{
	Coll *c = L->c;
	int k = c->P, LC = lw_label(L), op = c->node->op;

	if (op == OP_ALL_GATHER) {
		lw_phase(L, "slice: first chunk's all_gather", 1, 1);
		lw_coll(L, gd(0, 0), LC, ix_k(0), lw_chunk(c, 0), 0);
		lw_phase(L, "slice: all_gather of chunk i+1 overlaps compute of chunk i", k, 1);
		lw_coll(L, gd(0, k - 2), LC, ix_i(1, 0), lw_chunk(c, 1), 0);
		lw_wait(L, gd(0, k - 1), LC, ix_i(0, 0));
		lw_region(L, gd(0, k - 1), &c->post, lw_chunk(c, 0), NULL, 0);
		return;
	}
	lw_phase(L, arena_printf(L->a, "slice: compute chunk i, then its nonblocking %s",
	                         op_info[op].name), k, 1);
	lw_region(L, gd(0, k - 1), &c->pre, lw_chunk(c, 0), NULL, 0);
	lw_coll(L, gd(0, k - 1), LC, ix_i(0, 0), lw_chunk(c, 0), 0);
	lw_phase(L, op == OP_ALL_REDUCE ? "slice: wait chunk i, compute on it" :
	         "slice: wait for every chunk", k, 1);
	lw_wait(L, gd(0, k - 1), LC, ix_i(0, 0));
	lw_region(L, gd(0, k - 1), &c->post, lw_chunk(c, 0), NULL, 0);
}

/* vanilla: the whole region, then one blocking collective (gathers: the
 * other way round). */
static void
lw_vanilla(Lower *L)
{
	Coll *c = L->c;
	Sel all = sel_span(ix_k(0), c->nslices, 1);

	lw_phase(L, arena_printf(L->a, "vanilla: whole compute, blocking %s",
	                         op_info[c->node->op].name), 1, 1);
	lw_region(L, gd(0, 0), &c->pre, all, NULL, 0);
	lw_coll(L, gd(0, 0), lw_label(L), ix_k(0), all, 1);
	lw_region(L, gd(0, 0), &c->post, all, NULL, 0);
}

static void
lw_fuse(Lower *L)
{
	Coll *c = L->c;
	int pair = c->how.topo == TP_PAIRWISE;

	switch (c->node->op) {
	case OP_ALL_GATHER:
		(pair ? lw_ag_pair : lw_ag_ring)(L, 1);
		break;
	case OP_REDUCE_SCATTER:
		(pair ? lw_rs_pair : lw_rs_ring)(L, c->bout);
		break;
	case OP_ALL_REDUCE:
		(pair ? lw_rs_pair : lw_rs_ring)(L, c->bout);
		(pair ? lw_ag_pair : lw_ag_ring)(L, 0);
		break;
	default:
		(pair ? lw_a2a_pair : lw_a2a_ring)(L);
		break;
	}
}

/* ---- choices ---- */


/* Adds a note for --explain to the ones c has. */
static void
lw_note(Lower *L, Coll *c, const char *s)
{
	c->note = c->note ? arena_printf(L->a, "%s; %s", c->note, s) : s;
}

/* The choice c gets now that its region is known (the schedule rules:
 * schedrule.c), in *u; 0 when it cannot apply: the rules refuse it, or
 * its slices do not divide c's dimension. */
static int
lw_use(Lower *L, const Coll *c, SchedUse *u)
{
	int op = c->node->op;
	SchedRegion rg = {
		.ops = op == OP_ALL_GATHER ? c->post.n : c->pre.n + c->post.n,
		.post = c->post.n,
		.attention = region_has(&c->pre, OP_ATTENTION),
	};
	const Value *v = c->node->in[0];

	*u = sched_use(L->a, c->node, &c->want, &rg);
	if (u->err)
		return 0;
	if (c->dim < 0) /* an all_reduce with no dimension free to cut: whole */
		return u->nslices == 1;
	return v->shape[c->dim] % u->nslices == 0;
}

static void
lw_apply(Lower *L, Coll *c, const SchedUse *u)
{
	if (u->note)
		lw_note(L, c, u->note);
	sched_set_how(c, u);
}

/* c's choice as asked, which sema let through only where it applies. */
static void
lw_resolve(Lower *L, Coll *c)
{
	SchedUse u;

	if (!lw_use(L, c, &u)) {
		if (u.err)
			die("lower: %s, which sema let through", u.err);
		die("lower: %s cuts no dimension of %s into %lld slices", graph_sched_str(L->a, &u.how),
		    c->node->out->name, (long long)u.nslices);
	}
	lw_apply(L, c, &u);
}

/* Drops items whose guard admits no round and clamps the rest. */
static void
lw_prune(Phase *ph)
{
	for (int t = 0; t < ph->nlanes; t++) {
		Vec *v = &ph->lanes[t];
		int k = 0;
		for (int i = 0; i < v->n; i++) {
			Item *it = v->v[i];
			if (it->g.lo < 0)
				it->g.lo = 0;
			if (it->g.hi > ph->nrounds - 1)
				it->g.hi = ph->nrounds - 1;
			if (it->g.lo <= it->g.hi)
				v->v[k++] = it;
		}
		v->n = k;
	}
}

static int
lw_computes(const Phase *ph)
{
	for (int t = 0; t < ph->nlanes; t++)
		for (int i = 0; i < ph->lanes[t].n; i++)
			if (((Item *)ph->lanes[t].v[i])->kind <= IT_ZERO)
				return 1;
	return 0;
}

/* The one compute item of region node k that runs once in the whole
 * stage (one round, one slice, no partner guard), or NULL when k is
 * computed by several items, in several rounds or slices, or when a
 * guard decides whether it runs. */
static Item *
lw_single_compute(const Coll *c, int k)
{
	Item *one = NULL;
	int runs = 0;

	for (int i = 0; i < c->phases.n; i++) {
		const Phase *ph = c->phases.v[i];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++) {
				Item *it = ph->lanes[t].v[j];
				if (it->kind != IT_COMPUTE || it->u.comp.rn != k)
					continue;
				int lo = it->g.lo < 0 ? 0 : it->g.lo;
				int hi = it->g.hi > ph->nrounds - 1 ? ph->nrounds - 1 : it->g.hi;
				if (hi < lo)
					continue;
				if (it->g.active)
					return NULL;
				runs += (hi - lo + 1) * it->u.comp.sel.cnt;
				one = it;
			}
	}
	return runs == 1 ? one : NULL;
}

/* Sets every accumulating node's result to zero: the first items of
 * the stage, ahead of every slice's compute; except where one compute
 * item, run once, makes the whole sum (one slice: tp = 1): that GEMM
 * writes it with beta = 0 and no zero item is needed (the verifier
 * admits a sum started by beta = 0, vf_summing). */
static void
lw_acc_zero(Lower *L)
{
	Coll *c = L->c;
	Vec *lane = &((Phase *)c->phases.v[0])->lanes[0];
	Vec zeros = {0};

	for (int k = 0; k < c->region.n; k++) {
		RNode *rn = c->region.v[k];
		if (!rnode_sums(rn))
			continue;
		Item *one = lw_single_compute(c, k);
		if (one && one->u.comp.dst.buf == rn->buf) {
			one->u.comp.beta = 0;
			continue;
		}
		Item *it = arena_alloc(L->a, sizeof *it);
		it->kind = IT_ZERO;
		it->g = gd(0, 0);
		it->u.move.dst = it->u.move.src = ref(rn->buf, sel_one(ix_k(0), 1, 0));
		vec_push(L->a, &zeros, it);
	}
	for (int i = 0; i < lane->n; i++)
		vec_push(L->a, &zeros, lane->v[i]);
	*lane = zeros;
}

static void
lw_coll_lower(Lower *L, Coll *c)
{
	L->c = c;
	L->nlabel = 0;
	lw_region_bufs(L, c->how.kind != SK_FUSE);
	if (c->how.kind == SK_FUSE)
		lw_fuse(L);
	else if (c->how.kind == SK_SLICE)
		lw_slice(L);
	else
		lw_vanilla(L);
	lw_acc_zero(L);
	for (int i = 0; i < c->phases.n; i++) {
		Phase *ph = c->phases.v[i];
		lw_prune(ph);
		if (lw_computes(ph))
			c->nsteps += ph->nrounds * ph->nlanes;
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++)
				((Item *)ph->lanes[t].v[j])->id = c->nitems++;
	}
	c->nlabels = L->nlabel;
}

/* ---- stage order ---- */

static void
lw_push_stage(Lower *L, Sched *s, int k)
{
	Stage *st = arena_alloc(L->a, sizeof *st);

	st->kind = s->byid[k] ? ST_COLL : ST_COMPUTE;
	if (s->byid[k])
		st->u.coll = s->byid[k], vec_push(L->a, &s->colls, s->byid[k]);
	else
		st->u.node = L->g->nodes.v[k];
	vec_push(L->a, &s->stages, st);
}

/* The stages in region_order's order: regions contracted into their
 * collective's stage, which region_sched left acyclic. */
static void
lw_order(Lower *L, Sched *s)
{
	Arena *t = arena_scratch(L->a);
	ArenaMark mark = arena_mark(t);
	int *order = arena_alloc(t, ((size_t)L->g->nodes.n + 1) * sizeof *order);

	if (region_order(L->g, s->owner, order, NULL))
		die("lower: the stages of %s depend on each other in a cycle", L->g->name);
	for (int i = 0; order[i] >= 0; i++)
		lw_push_stage(L, s, order[i]);
	arena_release(t, mark);
}

/* The items one rank runs, over all rounds. */
static int64_t
lw_items(const Coll *c)
{
	int64_t items = 0;

	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		for (int t = 0; t < ph->nlanes; t++)
			items += (int64_t)ph->nrounds * ph->lanes[t].n;
	}
	return items;
}

/* A program that is not symmetric (sched_symmetric) is proved by running
 * all N ranks, each through all its rounds: more than MAXPROOF items is
 * refused. Round-robin (pairwise) programs are never symmetric: the
 * message names the schedules that are; any other kind that is not is
 * said to be so (it should be: a gap of sched_symmetric). */
static void
lw_proof_size(Lower *L, const Coll *c)
{
	int64_t items = lw_items(c);

	if (items * c->N <= MAXPROOF || sched_symmetric(c))
		return;
	int rr = c->how.kind == SK_FUSE && c->how.topo == TP_PAIRWISE;
	diag_error(L->d, c->want.loc.line > 0 ? c->want.loc : c->node->loc, "%s on %s: proving "
	           "it means running %d ranks through %lld items each, more than cfc proves "
	           "(%lld in all); %s", graph_sched_str(L->a, &c->how), c->node->out->name, c->N,
	           (long long)items, (long long)MAXPROOF, rr ? "fuse(ring) and fuse(bidir), "
	           "vanilla and slice(k) are proved on one rank" : "this program is not the same "
	           "on every rank up to a rotation, so it cannot be proved on one rank");
}

/* ---- what choose.c asks: a collective lowered on trial ---- */

void
lower_reset(Coll *c, const char *note)
{
	c->bufs = (Vec){0};
	c->phases = (Vec){0};
	c->nsteps = c->nitems = c->nlabels = 0;
	c->note = note;
}

int
lower_try(Sched *s, Coll *c)
{
	Lower L = {.g = s->g, .a = s->arena};
	SchedUse u;

	if (!lw_use(&L, c, &u))
		return 0; /* the rules refuse it, or its slices do not divide */
	lw_apply(&L, c, &u);
	lw_coll_lower(&L, c);
	return 1;
}

int
lower_provable(const Coll *c)
{
	return lw_items(c) * c->N <= MAXPROOF || sched_symmetric(c);
}

void
lower_stages(Sched *s)
{
	Lower L = {.g = s->g, .a = s->arena};

	if (!s->stages.n)
		lw_order(&L, s);
}

int
lower_sched(Sched *s, Diag *d)
{
	Lower L = {.g = s->g, .a = s->arena, .d = d};
	int before = d->nerr;

	/* the stages first (regions fix them, not lowerings; choose.c may
	 * have ordered them already), then each collective as chosen */
	lower_stages(s);
	for (int k = 0; k < s->colls.n; k++) {
		Coll *c = s->colls.v[k];
		SchedChoice want = c->want;
		diag_tick(d, "lower", k, s->colls.n);
		if (c->picked)
			c->want = c->pick;
		lw_resolve(&L, c);
		lw_coll_lower(&L, c);
		lw_proof_size(&L, c);
		c->want = want; /* an auto choice is shown as asked */
		if (c->pick_note)
			lw_note(&L, c, c->pick_note);
		for (int j = 0; j < c->ncand && !c->picked; j++)
			if (!strcmp(sched_kind_str(L.a, &c->cand[j].how), sched_kind_str(L.a, &c->how)))
				c->used = j;
	}
	return d->nerr != before;
}
