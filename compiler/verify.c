/* verify.c: the schedule verifier's machine (verify_setup.c sets up a
 * run and checks its end state). Instantiates the symbolic program of
 * every lowered collective for each of the N ranks and executes all of
 * them together, tracking what every slot of every moved buffer holds:
 * which slice, and which ranks' contributions (a bitset).
 * requires: a lowered schedule (lower.c).
 * ensures (else an error naming rank, step and slice):
 *  1. exactness: every rank ends with exactly the collective's result,
 *     each contribution counted once and in the right slot, and every
 *     slice of every region op computed exactly once, after its inputs;
 *  2. every send matches one receive of the same size and tag, in the
 *     order they were posted per (sender, receiver), as NCCL pairs them
 *     (so MPI, which pairs by tag, pairs them alike), and no rank waits
 *     forever,
 *     also under NCCL's rules: the adjacent sends and receives of a lane
 *     are one group, each rank runs its groups one after another in the
 *     order it posted them, and a transfer moves only while the groups of
 *     both its ends run (no send completes early into a buffer);
 *  3. no buffer is read or written while a transfer into (or read while a
 *     transfer out of) it is in flight;
 *  4. exposure: transfers waited with no compute since their post, and
 *     whether the schedule is tail-free. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

/* ---- slots ---- */

/* The cells of buffer b (after rotation) on rank r; NULL when nothing
 * moves in b. */
Cell *
vf_cells(V *v, int r, int b)
{
	return v->rk[r].cells[b];
}

static int
vf_rotated(const BufRef *br, int r, int i)
{
	return br->buf + sched_ix(&br->rot, r, i);
}

/* The slot of slice s in buffer b on rank r, or -1 with an error. */
static int
vf_slot(V *v, int r, int b, int s, int part)
{
	const Buf *bf = vf_buf(v, b);
	int lo = bf->own ? r * bf->nslots : 0;

	if (part < 0 || part >= bf->nparts)
		return vf_fail(v, r, s, "%s has no part %d", bf->name, part), -1;
	if (bf->kind == BK_TEMP)
		return part;
	if (s < lo || s >= lo + bf->nslots)
		return vf_fail(v, r, s, "slice %d is not held by %s on rank %d (it holds %d..%d)",
		               s, bf->name, r, lo, lo + bf->nslots - 1), -1;
	return part * bf->nslots + s - lo;
}

/* Resolves a one-slice reference to its cell; NULL after an error. */
static Cell *
vf_ref(V *v, int r, int i, const BufRef *br, int *slice, int *bufno, int *slotno)
{
	int s, b = vf_rotated(br, r, i);

	vf_sel(&br->sel, r, i, &s, 1);
	*slice = s;
	if (b < 0 || b >= v->c->bufs.n)
		return vf_fail(v, r, s, "no buffer %d", b), NULL;
	if (!vf_cells(v, r, b))
		return vf_fail(v, r, s, "%s is moved but not declared as moved", vf_buf(v, b)->name),
		       NULL;
	if (s < 0 || s >= v->c->nslices)
		return vf_fail(v, r, s, "slice %d out of range 0..%d", s, v->c->nslices - 1), NULL;
	int slot = vf_slot(v, r, b, s, sched_ix(&br->part, r, i));
	if (slot < 0)
		return NULL;
	if (bufno)
		*bufno = b, *slotno = slot;
	return &vf_cells(v, r, b)[slot];
}

/* The checks of reading a cell that should hold slice s. */
static int
vf_read(V *v, int r, const Cell *c, int s, const char *name)
{
	char tmp[128];

	if (c->nrecv)
		return vf_fail(v, r, s, "reads %s while a transfer into it is in flight", name);
	if (c->slice != s)
		return vf_fail(v, r, s, "reads %s expecting slice %d, but it holds %s", name, s,
		               vf_cell_str(v, c, tmp, sizeof tmp));
	return RUN_OK;
}

static int
vf_write(V *v, int r, const Cell *c, int s, const char *name)
{
	if (c->nrecv)
		return vf_fail(v, r, s, "writes %s while a transfer into it is in flight", name);
	if (c->nsend)
		return vf_fail(v, r, s, "overwrites %s while a send from it is in flight", name);
	return RUN_OK;
}

/* ---- compute ---- */

int
vf_bit(unsigned char *b, int s)
{
	return b[s / 8] >> (s % 8) & 1;
}

/* Does a region node read a moved buffer completely filled? The gathered
 * data of slice s is whole when it comes from the owner of s alone
 * (all_gather) or from every rank (all_reduce). */
static int
vf_complete(const V *v, const Cell *c, int s)
{
	if (v->c->node->op == OP_ALL_REDUCE)
		return vf_same(v, c, ORG_ALL);
	return vf_same(v, c, s / (v->c->nslices / v->N));
}

static int
vf_inputs(V *v, int r, const RNode *rn, int s)
{
	const char *out = rn->node->out->name;
	char tmp[128];

	for (int j = 0; j < rn->node->nin; j++) {
		const char *name = rn->node->in[j]->name;
		if (rn->from[j] >= 0 && !vf_bit(v->rk[r].made[rn->from[j]], s))
			return vf_fail(v, r, s, "computes %s[%d] from %s[%d] before that is computed", out, s,
			               name, s);
		if (rn->from[j] >= 0 || rn->inbuf[j] < 0)
			continue;
		int slot = vf_slot(v, r, rn->inbuf[j], s, 0);
		if (slot < 0)
			return RUN_ERR;
		const Cell *c = &vf_cells(v, r, rn->inbuf[j])[slot];
		if (c->nrecv)
			return vf_fail(v, r, s, "computes %s[%d] from %s while a transfer into it is in "
			               "flight", out, s, name);
		if (c->slice != s || !vf_complete(v, c, s))
			return vf_fail(v, r, s, "computes %s[%d] from %s, which holds %s%s", out, s, name,
			               vf_cell_str(v, c, tmp, sizeof tmp), c->slice == s ? ": not all of it yet" : "");
	}
	return RUN_OK;
}

/* Writes the result of a region node for slice s (the u-th of the item)
 * into a moved buffer: this rank's contribution, added to what is there
 * when beta. */
static int
vf_result(V *v, int r, int i, const Item *it, int u, int s)
{
	const BufRef *d = &it->u.comp.dst;
	int b = vf_rotated(d, r, i), ds;
	const char *name = vf_buf(v, b)->name;
	char tmp[128];
	Cell mine = {.slice = s, .org = r};

	vf_sel(&d->sel, r, i, &ds, 1);
	ds += u * d->sel.stride;
	if (ds != s)
		return vf_fail(v, r, s, "stores slice %d where slice %d of %s is declared", s, ds, name);
	int slot = vf_slot(v, r, b, s, sched_ix(&d->part, r, i));
	if (slot < 0)
		return RUN_ERR;
	Cell *c = &vf_cells(v, r, b)[slot];
	if (vf_write(v, r, c, s, name))
		return RUN_ERR;
	if (!it->u.comp.beta) {
		vf_drop(v, c);
		c->slice = s, c->org = r;
		return RUN_OK;
	}
	if (c->slice != s)
		return vf_fail(v, r, s, "accumulates slice %d into %s, which holds %s", s, name,
		               vf_cell_str(v, c, tmp, sizeof tmp));
	if (!vf_union(v, c, &mine))
		return vf_fail(v, r, s, "counts rank %d's part of slice %d twice", r, s);
	return RUN_OK;
}

/* The accumulating node whose whole result buffer b is, or -1. */
static int
vf_acc_of(const V *v, int b)
{
	for (int k = 0; k < v->c->region.n; k++) {
		const RNode *rn = v->c->region.v[k];
		if (rnode_sums(rn) && rn->buf == b)
			return k;
	}
	return -1;
}

/* How many slices region node k has computed on rank r. */
static int
vf_nmade(const V *v, int r, int k)
{
	int n = 0;

	for (int s = 0; s < v->c->nslices; s++)
		n += vf_bit(v->rk[r].made[k], s);
	return n;
}

/* An accumulating node adds each slice's product to a result set to zero
 * before the first (a GEMM with beta = 0 may start the sum instead). */
static int
vf_summing(V *v, int r, const Item *it, int s)
{
	const RNode *rn = v->c->region.v[it->u.comp.rn];
	int n = vf_nmade(v, r, it->u.comp.rn);
	const char *name = rn->node->out->name;

	if (it->u.comp.dst.buf != rn->buf)
		return vf_fail(v, r, s, "sums slice %d of %s into a buffer not its own", s, name);
	if (!it->u.comp.beta && n > 0)
		return vf_fail(v, r, s, "writes slice %d's part of %s over the %d slice%s summed before",
		               s, name, n, n == 1 ? "" : "s");
	if (it->u.comp.beta && !v->rk[r].zeroed[it->u.comp.rn])
		return vf_fail(v, r, s, "adds slice %d's part into %s before it is set to zero", s, name);
	return RUN_OK;
}

static int
vf_compute(V *v, int r, int i, const Item *it)
{
	const Coll *c = v->c;
	const RNode *rn = c->region.v[it->u.comp.rn];
	int first, s;
	Rank *R = &v->rk[r];

	vf_sel(&it->u.comp.sel, r, i, &first, 1);
	if (rnode_sums(rn) && vf_summing(v, r, it, first))
		return RUN_ERR;
	for (int u = 0; u < it->u.comp.sel.cnt; u++) {
		s = first + u * it->u.comp.sel.stride;
		if (s < 0 || s >= c->nslices)
			return vf_fail(v, r, s, "computes %s on slice %d of %d", rn->node->out->name, s,
			               c->nslices);
		if (vf_inputs(v, r, rn, s))
			return RUN_ERR;
		if (vf_bit(R->made[it->u.comp.rn], s))
			return vf_fail(v, r, s, "computes slice %d of %s twice", s, rn->node->out->name);
		R->made[it->u.comp.rn][s / 8] |= (unsigned char)(1 << (s % 8));
		int dst = vf_rotated(&it->u.comp.dst, r, i);
		if (dst < 0 || dst >= c->bufs.n)
			return vf_fail(v, r, s, "stores %s in no buffer", rn->node->out->name);
		if (vf_cells(v, r, dst) && vf_result(v, r, i, it, u, s))
			return RUN_ERR;
	}
	R->ncomp++;
	if (!R->inrun)
		R->nrun++, R->inrun = 1;
	return RUN_OK;
}

static int
vf_move(V *v, int r, int i, const Item *it)
{
	int sd, ss, k = vf_acc_of(v, vf_rotated(&it->u.move.dst, r, i));

	if (k >= 0) {
		int n = vf_nmade(v, r, k);
		vf_sel(&it->u.move.dst.sel, r, i, &sd, 1);
		const char *name = ((RNode *)v->c->region.v[k])->node->out->name;
		if (it->kind != IT_ZERO)
			return vf_fail(v, r, sd, "%s %s, the sum of an accumulating node",
			               it->kind == IT_ADD ? "adds into" : "copies over", name);
		if (n > 0)
			return vf_fail(v, r, sd, "sets %s to zero after %d slice%s summed into it", name,
			               n, n == 1 ? "" : "s");
		v->rk[r].zeroed[k] = 1;
		return RUN_OK;
	}
	Cell *d = vf_ref(v, r, i, &it->u.move.dst, &sd, NULL, NULL), *s;
	const char *dn = d ? vf_buf(v, vf_rotated(&it->u.move.dst, r, i))->name : "";

	if (!d || vf_write(v, r, d, sd, dn))
		return RUN_ERR;
	if (it->kind == IT_ZERO) {
		vf_drop(v, d);
		d->slice = sd;
		return RUN_OK;
	}
	if (!(s = vf_ref(v, r, i, &it->u.move.src, &ss, NULL, NULL)))
		return RUN_ERR;
	if (vf_read(v, r, s, ss, vf_buf(v, vf_rotated(&it->u.move.src, r, i))->name))
		return RUN_ERR;
	if (ss != sd)
		return vf_fail(v, r, sd, "%s slice %d into slice %d of %s",
		               it->kind == IT_ADD ? "adds" : "copies", ss, sd, dn);
	if (it->kind == IT_COPY) {
		vf_copy(v, d, s);
		return RUN_OK;
	}
	if (d->slice != sd)
		return vf_read(v, r, d, sd, dn);
	if (!vf_union(v, d, s))
		return vf_fail(v, r, sd, "adds into %s a contribution it already holds: counted twice",
		               dn);
	return RUN_OK;
}

/* ---- point-to-point transfers ---- */

static int
vf_xnew(V *v)
{
	if (v->freex >= 0) {
		int k = v->freex;
		v->freex = v->x[k].match;
		return k;
	}
	v->x = arena_grow(v->t, v->x, v->nx, &v->capx, 256, sizeof *v->x);
	return v->nx++;
}

static void
vf_live_add(V *v, Rank *R, int k)
{
	R->live = arena_grow(v->t, R->live, R->nlive, &R->cap, 16, sizeof *R->live);
	R->live[R->nlive++] = k;
}

/* The live record of rank r posted as (label, round), or -1. */
static int
vf_find(const V *v, int r, int label, int round)
{
	const Rank *R = &v->rk[r];

	for (int j = 0; j < R->nlive; j++) {
		const Xfer *x = &v->x[R->live[j]];
		if (x->label == label && x->round == round)
			return R->live[j];
	}
	return -1;
}

/* The oldest unmatched record at rank `at` of kind k with the other end
 * `from`, whatever its tag: a pair's messages in post order, as NCCL
 * pairs them (vf_post holds MPI's pairing by tag to the same). */
static int
vf_oldest(const V *v, int at, ItemKind k, int from)
{
	const Rank *R = &v->rk[at];

	for (int j = 0; j < R->nlive; j++) {
		const Xfer *x = &v->x[R->live[j]];
		if (x->kind == k && x->match < 0 && x->peer == from)
			return R->live[j];
	}
	return -1;
}

/* Pairs send s with receive q and delivers the data. Each record is
 * released twice: when its rank waits for it and when its match's does
 * (the receiver's wait still reads the send's record). */
static int
vf_pair(V *v, int s, int q)
{
	Xfer *xs = &v->x[s], *xq = &v->x[q];
	Cell *from = &vf_cells(v, xs->rank, xs->buf)[xs->slot];
	Cell *to = &vf_cells(v, xq->rank, xq->buf)[xq->slot];
	char tmp[128];

	Cell got = *from;

	if (v->sym) /* what rank 0 receives is what rank -d sends: turned by -d */
		vf_turn(v, &got, from, -xs->peer);
	from = &got;
	xs->match = q, xq->match = s;
	if (xs->epoch != xq->epoch)
		return vf_fail(v, xq->rank, xq->slice, "its receive from rank %d (posted at step %d) "
		               "pairs with a send rank %d posts at step %d on the other side of a "
		               "hosted collective's program: that program's transfers, on the same "
		               "ranks, could pair with either", xs->rank, xq->step, xs->rank, xs->step);
	if (xs->size != xq->size)
		return vf_fail(v, xq->rank, xq->slice, "receives %lld elements from rank %d, which "
		               "sends %lld (its step %d)", (long long)xq->size, xs->rank,
		               (long long)xs->size, xs->step);
	if (from->slice != xq->slice)
		return vf_fail(v, xq->rank, xq->slice, "receive from rank %d expects slice %d but gets "
		               "%s (rank %d step %d): sends out of order or a wrong slice",
		               xs->rank, xq->slice, vf_cell_str(v, from, tmp, sizeof tmp), xs->rank,
		               xs->step);
	vf_copy(v, to, from);
	if (v->sym)
		vf_drop(v, &got);
	return v->pc ? vm_pair(v, xs, xq) : RUN_OK;
}

static int
vf_post(V *v, int r, int i, const Item *it)
{
	Rank *R = &v->rk[r];
	int s, b, slot, peer = sched_ix(&it->u.xfer.peer, r, i);
	int round = sched_ix(&it->u.xfer.round, r, i), send = it->kind == IT_SEND;
	Cell *c = vf_ref(v, r, i, &it->u.xfer.buf, &s, &b, &slot);

	if (!c)
		return RUN_ERR;
	if (peer < 0 || peer >= v->N || peer == r)
		return vf_fail(v, r, s, "%s rank %d", send ? "sends to" : "receives from", peer);
	if (vf_find(v, r, it->u.xfer.label, round) >= 0)
		return vf_fail(v, r, s, "posts transfer %d of round %d twice", it->u.xfer.label, round);
	if (send ? vf_read(v, r, c, s, vf_buf(v, b)->name) : vf_write(v, r, c, s, vf_buf(v, b)->name))
		return RUN_ERR;
	int k = vf_xnew(v);
	if (!R->open)
		R->ngrp++, R->open = 1;
	v->x[k] = (Xfer){it->kind, r, peer, it->u.xfer.tag, it->u.xfer.label, round, b, slot, s,
	                 sched_ix(&it->u.xfer.buf.part, r, i), R->step, R->ncomp,
	                 vf_buf(v, b)->slot_elems, -1, 2, 0, R->ngrp - 1, 0, R->epoch};
	send ? c->nsend++ : c->nrecv++;
	vf_live_add(v, R, k);
	R->lastpost = R->ncomp;
	if (v->pc && vm_post(v, r, i, it, &v->x[k]))
		return RUN_ERR;
	/* the other side: on rank peer, its oldest from r; turned, rank 0's
	 * oldest from -peer (rank peer's from 0, turned back by peer) */
	int other = v->sym ? vf_oldest(v, 0, send ? IT_RECV : IT_SEND, (v->N - peer) % v->N)
	                   : vf_oldest(v, peer, send ? IT_RECV : IT_SEND, r);
	if (other < 0)
		return RUN_OK;
	/* paired in post order, the pair's k-th send with its k-th receive:
	 * MPI, which pairs by tag, pairs them alike when their tags agree */
	if (v->x[other].tag != it->u.xfer.tag)
		return vf_fail(v, r, s, "its %s rank %d (tag %d) pairs in post order, as NCCL "
		               "pairs them, with a %s of tag %d, not of its tag as MPI pairs "
		               "them", send ? "send to" : "receive from", peer, it->u.xfer.tag,
		               send ? "receive" : "send", v->x[other].tag);
	return send ? vf_pair(v, k, other) : vf_pair(v, other, k);
}

static void
vf_release(V *v, int k)
{
	if (--v->x[k].refs == 0) {
		v->x[k].match = v->freex;
		v->freex = k;
	}
}

static void
vf_live_del(Rank *R, int k)
{
	for (int j = 0; j < R->nlive; j++)
		if (R->live[j] == k) {
			memmove(R->live + j, R->live + j + 1, (size_t)(R->nlive - j - 1) * sizeof *R->live);
			R->nlive--;
			return;
		}
}

static void
vf_exposure(Rank *R, int comp)
{
	if (R->ncomp == comp) {
		R->exposed++;
		if (R->nrun > R->exp_run)
			R->exp_run = R->nrun;
	}
	R->inrun = 0;
}

static void
vf_msg(V *v, const Xfer *q)
{
	const Xfer *s = &v->x[q->match];

	if (!v->want_msgs)
		return;
	v->msgs = arena_grow(v->t, v->msgs, v->nmsg, &v->capmsg, 64, sizeof *v->msgs);
	/* the sender is q's peer: in a symmetric run s is rank 0's own send
	 * that, turned, is the peer's send to rank 0 at the same step */
	v->msgs[v->nmsg++] = (VerifyMsg){q->peer, s->step, q->rank, v->rk[q->rank].step, q->slice};
}

/* Completes this rank's side of transfer k if its other side is posted. */
static int
vf_wait_xfer(V *v, int r, int k)
{
	Rank *R = &v->rk[r];
	Xfer *x = &v->x[k];

	if (x->match < 0 || !x->fin)
		return RUN_BLOCKED;
	Cell *c = &vf_cells(v, r, x->buf)[x->slot];
	x->kind == IT_SEND ? c->nsend-- : c->nrecv--;
	x->waited = 1;
	vf_exposure(R, x->comp);
	if (x->kind == IT_RECV)
		vf_msg(v, x);
	vf_live_del(R, k);
	vf_release(v, x->match);
	vf_release(v, k);
	return RUN_OK;
}

/* ---- transfer groups, as NCCL runs them ---- */

/* Whether group g of rank r has been launched: posted and closed. */
static int
vf_launched(const Rank *R, int g)
{
	return g < R->ngrp - R->open;
}

/* The step of rank r's first unfinished transfer of group g, or -1. */
static int
vf_grp_step(const V *v, int r, int g)
{
	const Rank *R = &v->rk[r];

	for (int j = 0; j < R->nlive; j++) {
		const Xfer *x = &v->x[R->live[j]];
		if (x->grp == g && !x->fin)
			return x->step;
	}
	return -1;
}

/* Runs the groups at the head of each rank's queue: a transfer moves when
 * the groups of both its ends run, a group ends when all its transfers
 * have moved, and the next one starts. Sets *progress when anything moved. */
static void
vf_device(V *v, int *progress)
{
	for (int moved = 1; moved;) {
		moved = 0;
		for (int r = 0; r < v->nr; r++) {
			Rank *R = &v->rk[r];
			if (!vf_launched(R, R->gdone))
				continue;
			int pending = 0;
			for (int j = 0; j < R->nlive; j++) {
				Xfer *x = &v->x[R->live[j]];
				if (x->grp != R->gdone || x->fin)
					continue;
				Xfer *m = x->match >= 0 ? &v->x[x->match] : NULL;
				const Rank *P = m ? &v->rk[m->rank] : NULL;
				if (m && m->grp == P->gdone && vf_launched(P, m->grp))
					x->fin = m->fin = moved = 1;
				else
					pending = 1;
			}
			if (!pending)
				R->gdone++, moved = 1;
		}
		*progress |= moved;
	}
}

/* ---- library collectives ---- */

/* Marks (delta 1) or releases (-1) the cells ci touches on rank r. */
static int
vf_coll_mark(V *v, const CollInst *ci, int r, int delta)
{
	char what[64];

	for (int dir = 0; dir < 2; dir++) {
		int b = dir ? ci->it->u.coll.dst : ci->it->u.coll.src;
		for (int e = 0, s, part; e < ci->cnt; e++) {
			if (!vf_elem(ci, r, dir, e, &s, &part))
				continue;
			int slot = vf_slot(v, r, b, s, part);
			if (slot < 0)
				return RUN_ERR;
			Cell *c = &vf_cells(v, r, b)[slot];
			snprintf(what, sizeof what, "%s (in %s)", vf_buf(v, b)->name,
			         op_info[ci->it->u.coll.op].name);
			if (delta > 0 && (dir ? vf_write(v, r, c, s, what) : vf_read(v, r, c, s, what)))
				return RUN_ERR;
			*(dir ? &c->nrecv : &c->nsend) += delta;
		}
	}
	return RUN_OK;
}

/* The cell of slice s of buffer b (part 0) on rank u; in a symmetric run,
 * rank 0's cell of that slice turned back by u, turned by u, in *tmp (the
 * caller drops it). NULL after an error. */
static const Cell *
vf_cell_of(V *v, int u, int b, int s, Cell *tmp)
{
	int at = v->sym ? 0 : u, s0 = v->sym ? sched_turn(v->c, s, -u) : s;
	int slot = vf_slot(v, at, b, s0, 0);

	if (slot < 0)
		return NULL;
	if (!v->sym)
		return &vf_cells(v, u, b)[slot];
	vf_turn(v, tmp, &vf_cells(v, 0, b)[slot], u);
	return tmp;
}

/* Element e of a collective as every rank gets it: rank e's slice s
 * (gathers, all_to_all), or the union of every rank's contribution to s
 * (reductions), into *out (a fresh cell: the caller drops it). */
static int
vf_coll_elem(V *v, const CollInst *ci, int e, int s, Cell *out)
{
	int op = ci->it->u.coll.op, src = ci->it->u.coll.src;
	int gather = op == OP_ALL_GATHER || op == OP_ALL_TO_ALL;
	char tmp[128];

	*out = (Cell){s, ORG_NONE, 0, 0};
	for (int u = gather ? e : 0; u < (gather ? e + 1 : v->N); u++) {
		Cell turned;
		const Cell *sc = vf_cell_of(v, u, src, s, &turned);
		if (!sc)
			return RUN_ERR;
		int rc = sc->slice != s ? vf_fail(v, u, s, "gives %s slice %d but holds %s",
		                                  op_info[op].name, s,
		                                  vf_cell_str(v, sc, tmp, sizeof tmp)) :
		         !vf_union(v, out, sc) ? vf_fail(v, 0, s, "%s counts a part of slice %d "
		                                         "twice", op_info[op].name, s) : RUN_OK;
		if (v->sym)
			vf_drop(v, &turned);
		if (rc)
			return rc;
	}
	return RUN_OK;
}

/* The collective's effect, once every rank has posted it: element e of
 * rank q's result is rank e's slice (gathers, all_to_all) or the union of
 * every rank's contribution (reductions). A reduction's element is the
 * same on every rank that gets it: made once, copied to each (an
 * all_reduce over N ranks is then N unions of an element, not N * N). */
static int
vf_coll_apply(V *v, const CollInst *ci)
{
	int op = ci->it->u.coll.op, dst = ci->it->u.coll.dst;
	int gather = op == OP_ALL_GATHER || op == OP_ALL_TO_ALL;
	Cell *made = gather ? NULL : arena_alloc(v->t, (size_t)ci->cnt * sizeof *made);
	char *have = gather ? NULL : arena_alloc(v->t, (size_t)ci->cnt);
	int rc = RUN_OK;

	for (int q = 0; q < v->nr && rc == RUN_OK; q++)
		for (int e = 0, s, part; e < ci->cnt && rc == RUN_OK; e++) {
			if (!vf_elem(ci, q, 1, e, &s, &part))
				continue;
			int slot = vf_slot(v, q, dst, s, part);
			if (slot < 0) {
				rc = RUN_ERR;
				break;
			}
			Cell *d = &vf_cells(v, q, dst)[slot], one;
			if (gather && !(rc = vf_coll_elem(v, ci, e, s, &one))) {
				vf_drop(v, d);
				vf_copy(v, d, &one);
				vf_drop(v, &one);
			} else if (!gather && !have[e] && !(rc = vf_coll_elem(v, ci, e, s, &made[e]))) {
				have[e] = 1;
			}
			if (!gather && rc == RUN_OK) {
				vf_drop(v, d);
				vf_copy(v, d, &made[e]);
			}
		}
	for (int e = 0; !gather && e < ci->cnt; e++)
		if (have[e])
			vf_drop(v, &made[e]);
	if (rc)
		return rc;
	return v->pc ? vm_coll_apply(v, ci) : RUN_OK;
}

static CollInst *
vf_ci_new(V *v, const Item *it, int label, int round, const int *s, int n)
{
	v->ci = arena_grow(v->t, v->ci, v->nci, &v->capci, 8, sizeof *v->ci);
	if (label < 0 || label >= v->nlabel || round < 0)
		die("verify: collective #%d of round %d", label, round);
	CiMap *m = &v->cimap[label];
	while (m->n <= round) {
		m->k = arena_grow(v->t, m->k, m->n, &m->cap, 16, sizeof *m->k);
		m->k[m->n++] = -1;
	}
	m->k[round] = v->nci;
	CollInst *ci = &v->ci[v->nci++];
	*ci = (CollInst){it, label, round, n, arena_alloc(v->t, (size_t)n * sizeof(int)), 0,
	                 arena_alloc(v->t, (size_t)v->N * sizeof(int)), arena_alloc(v->t, (size_t)v->N),
	                 0};
	memcpy(ci->s, s, (size_t)n * sizeof(int));
	return ci;
}

static int
vf_coll_post(V *v, int r, int i, const Item *it)
{
	Rank *R = &v->rk[r];
	int k = R->ncoll++, n, *s = v->sel;
	int round = sched_ix(&it->u.coll.round, r, i), rc = RUN_OK;
	CollInst *ci;

	n = vf_sel(&it->u.coll.sel, r, i, s, MAXGROUP);
	if (it->u.coll.op != OP_ALL_REDUCE && n != v->N)
		rc = vf_fail(v, r, s[0], "a chunk of %s names %d slices, not one per rank",
		             op_info[it->u.coll.op].name, n);
	else if (k == v->nci)
		vf_ci_new(v, it, it->u.coll.label, round, s, n)->epoch = R->epoch;
	ci = rc ? NULL : &v->ci[k];
	if (ci && ci->epoch != R->epoch)
		rc = vf_fail(v, r, s[0], "posts collective #%d on the other side of a hosted "
		             "collective's program than the first rank that posted it", k);
	if (ci && (ci->it->u.coll.op != it->u.coll.op || ci->cnt != n || ci->label != it->u.coll.label ||
	           ci->round != round || memcmp(ci->s, s, (size_t)n * sizeof *s)))
		rc = vf_fail(v, r, s[0], "collective #%d differs from the one the first rank posted", k);
	if (rc || vf_coll_mark(v, ci, r, 1))
		return RUN_ERR;
	ci->state[r] = 1;
	ci->comp[r] = R->ncomp;
	R->lastpost = R->ncomp;
	if (v->pc && vm_coll_post(v, r, i, ci))
		return RUN_ERR;
	if (it->u.coll.blocking)
		R->pend = k;
	/* in a symmetric run every rank posts it with rank 0 */
	ci->nposted = v->sym ? v->N : ci->nposted + 1;
	if (ci->nposted == v->N)
		return vf_coll_apply(v, ci);
	return RUN_OK;
}

static int
vf_coll_wait(V *v, int r, int k)
{
	CollInst *ci = &v->ci[k];

	if (ci->nposted < v->N)
		return RUN_BLOCKED;
	if (vf_coll_mark(v, ci, r, -1))
		return RUN_ERR;
	ci->state[r] = 2;
	vf_exposure(&v->rk[r], ci->comp[r]);
	return v->pc ? vm_coll_wait(v, r, ci) : RUN_OK;
}

/* The collective rank r posted as (label, round) and has not waited, or
 * -1. */
static int
vf_coll_find(const V *v, int r, int label, int round)
{
	if (label < 0 || label >= v->nlabel || round < 0 || round >= v->cimap[label].n)
		return -1;
	int k = v->cimap[label].k[round];
	return k >= 0 && v->ci[k].state[r] == 1 ? k : -1;
}

static int
vf_wait(V *v, int r, int i, const Item *it)
{
	int round = sched_ix(&it->u.wait.round, r, i);
	int k = vf_find(v, r, it->u.wait.label, round);

	if (k >= 0) {
		const Xfer x = v->x[k];
		int rc = vf_wait_xfer(v, r, k);
		if (rc == RUN_OK && v->pc)
			return vm_wait(v, r, it->u.wait.label, round, &x);
		return rc;
	}
	k = vf_coll_find(v, r, it->u.wait.label, round);
	if (k >= 0)
		return vf_coll_wait(v, r, k);
	return v->pc && v->pc->lab[it->u.wait.label].kind != IT_COLL ?
	       vm_wait(v, r, it->u.wait.label, round, NULL) : RUN_OK;
}

/* ---- running the ranks ---- */

const Phase *
vf_phase(const V *v, int ph)
{
	return v->c->phases.v[ph];
}

/* Moves rank r's cursor to its next item whose phase and lane exist. */
void
vf_advance(V *v, Rank *R)
{
	const Coll *c = v->c;

	R->k++;
	if (R->ph < c->phases.n && R->k >= vf_phase(v, R->ph)->lanes[R->t].n)
		R->open = 0; /* a lane's last transfers end their group */
	while (R->ph < c->phases.n) {
		const Phase *ph = vf_phase(v, R->ph);
		if (R->k < ph->lanes[R->t].n)
			break;
		R->k = 0;
		if (++R->t < ph->nlanes)
			continue;
		R->t = 0;
		if (++R->i < ph->nrounds)
			continue;
		R->i = 0;
		R->ph++;
	}
	R->done = R->ph >= c->phases.n;
	if (!R->done)
		R->step = v->base[R->ph] + R->i * vf_phase(v, R->ph)->nlanes + R->t;
}


/* Does rank r's buffer b hold what a reader of its whole value may read
 * now: nothing moving into it; the result complete (vf_expect); a value
 * made before the stage as it came (this rank's part); a region value
 * with every slice computed? */
static int
vf_host_reads(V *v, int r, int b, const char *what)
{
	const Coll *c = v->c;
	const Buf *bf = c->bufs.v[b];
	const Cell *cells = vf_cells(v, r, b);
	int lo = bf->own ? r * bf->nslots : 0, outside = vf_outside(c, bf);
	char tmp[128];

	for (int k = 0; !outside && b != c->bout && k < c->region.n; k++) {
		const RNode *rn = c->region.v[k];
		if (rn->node->out == bf->v && vf_nmade(v, r, k) < c->nslices)
			return vf_fail(v, r, -1, "%s reads %s before all its slices are computed", what,
			               bf->v->name);
	}
	for (int part = 0; cells && part < bf->nparts; part++)
		for (int s = lo; s < lo + bf->nslots; s++) {
			const Cell *cl = &cells[part * bf->nslots + s - lo];
			if (cl->nrecv)
				return vf_fail(v, r, s, "%s reads %s while a transfer into it is in flight",
				               what, bf->v->name);
			int ok = b == c->bout ? cl->slice == s && vf_same(v, cl, vf_expect(v, part, s))
			       : outside ? cl->slice == s && cl->org == r : cl->slice == s;
			if (!ok)
				return vf_fail(v, r, s, "%s reads %s slice %d before the collective is done "
				               "with it: it holds %s", what, bf->v->name, s,
				               vf_cell_str(v, cl, tmp, sizeof tmp));
		}
	return RUN_OK;
}

/* An IT_HOST item (order.c): a plain stage, or another collective's
 * whole program, run under the collective's transfers. What it runs
 * reads a buffer of the collective only as vf_host_reads allows and
 * writes none; it counts as compute. A hosted collective's program is
 * proved on its own (verify_sched proves every collective); beside this
 * one it is sound when every transfer of this one pairs with one posted
 * on the same side of the hosted program (Rank.epoch, vf_pair): its
 * transfers then pair with none of this one's on any rank, as NCCL
 * pairs a pair's transfers in post order and MPI by tag, and the groups
 * this one posted before it need none posted after it, so under NCCL's
 * rule (each rank's groups in post order) neither waits on the other. */
static int
vf_host(V *v, int r, const Item *it)
{
	const Coll *c = v->c, *hc = it->u.host.coll;
	Rank *R = &v->rk[r];
	const char *what = hc ? arena_printf(v->t, "its hosted collective %s", hc->node->out->name)
	                      : arena_printf(v->t, "its hosted stage %s", it->u.host.node->out->name);

	for (int j = -1; j < (hc ? hc->region.n : 0); j++) {
		const Node *nd = j < 0 ? it->u.host.node : ((RNode *)hc->region.v[j])->node;
		for (int b = 0; b < c->bufs.n; b++) {
			const Buf *bf = c->bufs.v[b];
			if (bf->kind != BK_VALUE)
				continue;
			if (bf->v == nd->out || (nd->lse && bf->v == nd->lse))
				return vf_fail(v, r, -1, "%s writes %s, a buffer of the collective", what,
				               bf->v->name);
			int reads = 0;
			for (int i = 0; i < nd->nin; i++)
				reads |= nd->in[i] == bf->v;
			if (reads && vf_host_reads(v, r, b, what))
				return RUN_ERR;
		}
	}
	if (hc)
		R->epoch++;
	R->ncomp++;
	if (!R->inrun)
		R->nrun++, R->inrun = 1;
	return RUN_OK;
}

static int
vf_item(V *v, int r, const Item *it)
{
	Rank *R = &v->rk[r];
	int i = R->i;

	/* the next item that is not a transfer ends the group */
	if (it->kind != IT_SEND && it->kind != IT_RECV)
		R->open = 0;
	if (R->pend >= 0) {
		int rc = vf_coll_wait(v, r, R->pend);
		if (rc == RUN_OK)
			R->pend = -1;
		return rc;
	}
	if (!sched_guard(&it->g, r, i, v->N))
		return RUN_OK;
	v->turns = v->sym && sched_turns(v->c, it);
	switch (it->kind) {
	case IT_COMPUTE:
		if (vf_compute(v, r, i, it))
			return RUN_ERR;
		return v->pc ? vm_compute(v, r, i, it) : RUN_OK;
	case IT_ADD:
	case IT_COPY:
	case IT_ZERO:
		if (vf_move(v, r, i, it))
			return RUN_ERR;
		return v->pc ? vm_move(v, r, i, it) : RUN_OK;
	case IT_SEND:
	case IT_RECV:
		return vf_post(v, r, i, it);
	case IT_COLL:
		if (vf_coll_post(v, r, i, it))
			return RUN_ERR;
		return R->pend >= 0 ? vf_item(v, r, it) : RUN_OK;
	case IT_WAIT:
		return vf_wait(v, r, i, it);
	case IT_HOST:
		return vf_host(v, r, it);
	}
	return RUN_OK;
}

/* Runs rank r until it finishes or blocks; 1 when it made progress. */
static int
vf_run_rank(V *v, int r, int *progress)
{
	Rank *R = &v->rk[r];

	while (!R->done) {
		const Phase *ph = vf_phase(v, R->ph);
		int rc = vf_item(v, r, ph->lanes[R->t].v[R->k]);
		if (rc == RUN_BLOCKED)
			return RUN_OK;
		if (rc == RUN_ERR)
			return RUN_ERR;
		*progress = 1;
		vf_advance(v, R);
	}
	return RUN_OK;
}

/* What blocked rank r waits for, as an error. */
static int
vf_deadlock(V *v, int r)
{
	Rank *R = &v->rk[r];
	const Item *it = vf_phase(v, R->ph)->lanes[R->t].v[R->k];

	if (R->pend >= 0 || it->kind == IT_COLL)
		return vf_fail(v, r, -1, "waits forever for a %s that not every rank posts",
		               op_info[v->c->node->op].name);
	int k = vf_find(v, r, it->u.wait.label, sched_ix(&it->u.wait.round, r, R->i));
	if (k < 0)
		return vf_fail(v, r, -1, "waits forever for a collective that not every rank posts");
	const Xfer *x = &v->x[k];
	if (x->match >= 0) {
		const Xfer *m = &v->x[x->match];
		const Rank *P = &v->rk[m->rank];
		int own = x->grp != R->gdone;
		int q = own ? r : m->rank, g = own ? R->gdone : P->gdone;
		return vf_fail(v, r, x->slice, "waits forever: its %s rank %d (posted at step %d) "
		               "cannot move: rank %d first runs its transfer group of step %d, "
		               "which cannot end (NCCL runs each rank's groups in the order "
		               "posted; a step's sends and receives belong in one group)",
		               x->kind == IT_SEND ? "send to" : "receive from", x->peer, x->step,
		               q, vf_grp_step(v, q, g));
	}
	return vf_fail(v, r, x->slice, "waits forever: its %s rank %d (tag %d, posted at step %d) "
	               "has no matching %s on rank %d%s", x->kind == IT_SEND ? "send to" :
	               "receive from", x->peer, x->tag, x->step, x->kind == IT_SEND ? "receive" :
	               "send", x->peer, v->rk[x->peer].done ? ", which has finished" : "");
}

int
vf_run(V *v)
{
	for (;;) {
		int progress = 0, done = 1;
		for (int r = 0; r < v->nr; r++)
			if (vf_run_rank(v, r, &progress))
				return RUN_ERR;
		vf_device(v, &progress);
		for (int r = 0; r < v->nr; r++)
			done &= v->rk[r].done;
		if (done)
			return RUN_OK;
		if (!progress)
			for (int r = 0; r < v->nr; r++)
				if (!v->rk[r].done)
					return vf_deadlock(v, r);
	}
}
