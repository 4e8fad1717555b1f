/* predict.c: the predicted time of a lowered collective on a machine
 * profile, by running its per-rank step program (the one verify.c
 * proves) for all N ranks at once on the profile's rates.
 * requires: a lowered Coll (lower.c) whose program verify_coll proves
 * (every transfer matched, no deadlock), and a profile (profile.c).
 * ensures: the time from the stage's start until its last rank ends and
 * its last transfer lands; or Prediction.err naming the rate the profile
 * lacks.
 *
 * The model (docs/PROFILE.md):
 *  - each rank runs its items in order, as its memory plan runs them
 *    (plan_coll): compute items take their queue in turn, one call per
 *    slice where the plan loops over a chunk's slices, slowed by the
 *    profile's slowdown for as many transfers of the rank as are moving
 *    when one starts; a staged transfer's pack takes the queue before
 *    its post, its unpack after its wait;
 *  - a transfer is posted when every compute item before it has ended;
 *    where the profile says `defer` (GPUs with NCCL: its kernel waits
 *    for the SMs), one posted right before a compute item starts when
 *    that item ends, and moves at the profile's defer rates;
 *    a send and its receive (matched as MPI does: in post order per
 *    sender, receiver and tag) move once both are posted and the link
 *    from sender to receiver is free, taking the profile's time for
 *    their bytes with as many transfers at once at the busier end as
 *    move there on average over its time (runs repeated until that
 *    settles: predict_coll);
 *  - a library collective starts when every rank has posted it;
 *  - a wait holds the compute queue until its transfer has landed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"

typedef struct PX {
	ItemKind kind;
	int rank, peer, tag, label, round;
	double bytes, tpost, t0, t1;
	int match;    /* the other end's record, or -1 */
	double tdone; /* when a wait at either end saw it land; 0: not yet */
	double unpack; /* a staged receive: elements its wait unpacks */
	int ord;       /* its place among its rank's records (PRank.xs) */
	int defer;     /* posted behind compute: starts when that ends */
} PX;

typedef struct PCI {
	int label, round, nposted;
	double tmax, t1; /* starts when the last rank posts it; nominal end */
	double tdone;    /* when a wait saw it land (Profile.overlap < 1) */
	char *posted;    /* by rank: posted (1), waited (2) */
	int k;           /* its profile_coll_index */
	const PItem *up; /* its post's plan when its result is staged: each
	                  * rank's wait unpacks side[1].nblock blocks of count */
} PCI;

typedef struct PRank {
	SchedPos pos;
	const Item *cur; /* the item it is at (blocked on), or NULL */
	int round;       /* cur's round */
	double tc;       /* when its compute queue is free */
	double alone;    /* its compute, no slowdown */
	double xfer;     /* its sends' time */
	int *xs;         /* its transfer records, in post order */
	int nxs, capxs;
	int pend;        /* a blocking collective it waits for, or -1 */
	int done;
} PRank;

typedef struct Sim {
	Arena *a;
	const Coll *c;
	const PColl *pc; /* its memory plan: calls, packs and unpacks */
	const Profile *pf;
	int N, esz, dt;
	PRank *rk;
	PX *x;
	int nx, capx;
	PCI *ci;
	int nci, capci;
	double *link; /* N * N: when the link from s to d is free */
	Prediction *pr;
	int spans;
	double clock; /* GEMMs' and attention's time factor (profile_clock) */
	const struct Conc *conc; /* the run before's, or NULL */
	double guest;  /* a hosted collective's predicted time (IT_HOST) */
} Sim;

/* What a run tells the next about its transfers: for rank r's j-th
 * record (of n[r]), a send, the transfers at once at its busier end
 * over its time, conc[r][j] (0: none). */
typedef struct Conc {
	double **conc;
	int *n;
} Conc;

enum { RECENT = 32 }; /* transfer records of a rank looked at for overlap */
enum { MAXRUN = 30 };  /* runs of a collective at most (predict_coll) */

static void
sim_span(Sim *S, int r, int q, double t0, double t1, const char *what)
{
	Prediction *pr = S->pr;

	if (!S->spans || t1 <= t0)
		return;
	pr->span = arena_grow(S->a, pr->span, pr->nspan, &pr->capspan, 64, sizeof *pr->span);
	pr->span[pr->nspan++] = (PSpan){r, q, t0, t1, what};
}

/* The first reason the run cannot price its collective. */
static void
sim_err(Sim *S, const char *msg)
{
	if (!S->pr->err)
		S->pr->err = msg;
}

/* Why profile pf cannot price an op of type dt: its `what` rate. */
static const char *
no_rate(Arena *a, const Profile *pf, const char *what, int dt)
{
	return arena_printf(a, "the profile %s has no %s rate for %s (cfrt-calibrate --type %s "
	                    "measures it)", pf->name, what, dtype_name[dt], dtype_name[dt]);
}

/* ---- compute costs ---- */

static double
elems_of(const int64_t *d, int nd)
{
	double e = 1;

	for (int i = 0; i < nd; i++)
		e *= (double)d[i];
	return e;
}

/* Per-rank dims of v, dim cut (when >= 0) scaled by f. */
static void
cut_dims(const Value *v, int cut, double f, int64_t *d)
{
	for (int i = 0; i < v->ndim; i++)
		d[i] = value_rank_extent(v, i);
	if (cut >= 0 && cut < v->ndim) {
		d[cut] = (int64_t)llround((double)d[cut] * f);
		if (d[cut] < 1)
			d[cut] = 1;
	}
}

/* Query-key pairs that a causal mask leaves to the query rows o .. o+sq-1
 * over sk keys: row j sees keys 0 .. j, as both runtimes mask them. */
static double
visible_pairs(double o, double sq, double sk)
{
	double lo = o + 1, hi = o + sq, n = 0, a = hi < sk ? hi : sk;

	if (a >= lo) /* rows that see fewer keys than there are */
		n += (lo + a) * (a - lo + 1) / 2;
	if (hi > sk) /* rows that see them all */
		n += (hi - (lo > sk + 1 ? lo : sk + 1) + 1) * sk;
	return n;
}

/* Seconds per unit of B H Sq Sk Dh of an attention at key length sk, in
 * two parts: c[0] that every query-key pair costs, masked or not, and
 * c[1] that only the pairs a causal mask leaves cost (scaled by the share
 * they are of all pairs). Both come from the unmasked and the causal rate
 * (flop = mult * 4 B H Sq Sk Dh, half of it with the mask): a backend
 * that computes the masked scores and skips only their softmax has both,
 * one that skips masked blocks c[0] = 0. -1: no rate measured. */
static int
attn_unit(const PTable *full, const PTable *causal, double sk, double mult, double c[2])
{
	double rf = profile_rate(full, sk), rc = profile_rate(causal, sk);

	if (rf <= 0 && rc <= 0)
		return -1;
	if (rc <= 0) { /* unmasked alone: the mask saves its share */
		c[0] = 0, c[1] = 4 * mult / rf;
		return 0;
	}
	double tc = 2 * mult / rc, tf = rf > 0 ? 4 * mult / rf : 2 * tc;
	c[1] = 2 * (tf - tc);
	if (c[1] < 0)
		c[1] = 0;
	if (c[1] > tf)
		c[1] = tf;
	c[0] = tf - c[1];
	return 0;
}

/* The share of its query-key pairs that a causal attention computing the
 * query rows of slices u0 .. u0+nu-1 of sel (each 1/nsl of q's dim 2),
 * or all rows when qcut is 0, of rank r, round i, leaves: the rows'
 * offset decides it, which a query split exploits and a ring exposes
 * (ranks computing early and late slices in one step). Over a group that
 * splits q's rows the rank's own rows; over another group, their mean
 * over its ranks. shift: the bottom-right mask's Sk - Sq. */
static double
visible_share(const Value *q, double sk, double shift, int qcut, const Sel *sel, int u0, int nu,
              int nsl, int r, int i, const Group *cg)
{
	const Group *g = dist_split_group(&q->dist, 2);
	double ext = (double)value_rank_extent(q, 2), rows = qcut ? ext / nsl : ext;
	double pairs = 0, n = 0;
	int lo = 0, hi = 1;

	if (g && g != cg)
		hi = g->size;
	else if (g)
		lo = r, hi = r + 1;
	if (!qcut)
		u0 = 0, nu = 1;
	for (int j = lo; j < hi; j++)
		for (int u = u0; u < u0 + nu; u++) {
			double o = shift + (g ? j * ext : 0);
			if (qcut) {
				int s = sched_ix(&sel->hi, r, i) * sel->per + sched_ix(&sel->lo, r, i) +
				        u * sel->stride;
				o += s * ext / nsl;
			}
			pairs += visible_pairs(o, rows, sk);
			n += rows * sk;
		}
	return pairs / n;
}

/* Does a view of v cut along dim cut (-1: whole) keep its dims but the
 * last as one run of rows, row after row? A cut of the first dim or of
 * the last does; one between does only where the dims before it have
 * one index each. */
static int
keeps_rows(const Value *v, int cut)
{
	if (cut < 0 || cut >= v->ndim - 1)
		return 1;
	for (int d = 0; d < cut; d++)
		if (value_rank_extent(v, d) > 1)
			return 0;
	return 1;
}

/* Does a backend that loops over a batch (`batch loop`: the CPU's) run
 * matmul n, its output cut along odim and its first input along ic, as
 * one GEMM of all its rows (cfrti_matmul_fold): b one matrix for every
 * batch entry, a not transposed, both a and the output whole runs of
 * rows? */
static int
mm_folds(const Node *n, int odim, int ic)
{
	const Value *b = n->in[1];

	if (n->a.mm.ta)
		return 0;
	for (int d = 0; d < b->ndim - 2; d++)
		if (value_rank_extent(b, d) > 1)
			return 0;
	return keeps_rows(n->in[0], ic) && keeps_rows(n->out, odim);
}

/* Seconds of node n computing the part of its per-rank work that the
 * cuts leave: its output cut along odim (-1: whole) and input i along
 * idim[i] (-1: whole), each by f; share: of an attention's query-key
 * pairs, those its causal mask leaves (visible_share; < 0: the whole
 * call's); beta: a matmul that adds to its output (its extra reading
 * priced by Profile.acc). err set when the profile lacks the rate. */
static double
node_cost(const Profile *pf, const Node *n, int odim, const int *idim, double f,
          double share, int beta, const char **what)
{
	int64_t o[MAXDIM], in[MAXIN][MAXDIM];
	int dt = n->out->dtype, cls = op_info[n->op].cls;

	cut_dims(n->out, odim, f, o);
	for (int i = 0; i < n->nin; i++)
		cut_dims(n->in[i], idim ? idim[i] : -1, f, in[i]);
	double eo = elems_of(o, n->out->ndim);
	if (cls == CL_MM) {
		const Value *A = n->in[0];
		int nd = A->ndim, od = n->out->ndim, ic = idim ? idim[0] : -1;
		double N = (double)o[od - 1], M = eo / N, K, calls = 1;
		if (n->a.mm.sum) {
			/* the generated cf_matmul_sum: one GEMM over the rows of the
			 * leading dims, one per index of those before a cut one */
			K = elems_of(in[0], nd) / (double)in[0][nd - 1];
			if (ic >= 1 && ic <= nd - 2)
				calls = elems_of(in[0], ic), K /= calls;
		} else {
			K = (double)in[0][n->a.mm.ta && nd >= 2 ? nd - 2 : nd - 1];
			if (pf->batch_loop && od >= 3 && !mm_folds(n, odim, ic))
				calls = elems_of(o, od - 2), M /= calls;
		}
		double t = calls * profile_gemm(&pf->gemm[dt], M, N, K);
		if (t < 0) {
			*what = "gemm";
			return 0;
		}
		/* a piece of a GEMM costs at least its share of the whole: the
		 * same flop in more calls (bench/gemm_split.c: -6% to +5%, on
		 * the Xeons and on 2 cores). Between the grid's points the
		 * table's noise made pieces cheaper than the whole, and auto
		 * took slice(k) for it: 4 ranks on 2 cores, mlp's slice(4)
		 * predicted 5% less compute than vanilla, measured 8% more. */
		if (f < 1)
			t = fmax(t, f * node_cost(pf, n, -1, NULL, 1, -1, 0, what));
		return beta ? t + eo * dtype_size[dt] * pf->acc[dt] : t;
	}
	if (cls == CL_ATTN || cls == CL_ATTN_GRAD) {
		const int64_t *q = in[0], *k = in[1];
		double P = (double)q[0] * (double)q[1] * (double)q[2] * (double)k[2] * (double)q[3];
		int grad = cls == CL_ATTN_GRAD && (pf->attn_grad[0][dt].n || pf->attn_grad[1][dt].n);
		/* a backward node computes one of dq, dk and dv: a third of the
		 * three calls attn_grad measures; without those, the forward's
		 * time (the three took 1.9-3.1 times it at 1024 keys, in three
		 * profiles of 4 ranks on 2 cores) */
		double mult = grad ? 2.5 / 3 : 1, c[2];
		const PTable *t = grad ? pf->attn_grad[0] : pf->attn[0];
		if (attn_unit(&t[dt], grad ? &pf->attn_grad[1][dt] : &pf->attn[1][dt],
		              (double)k[2], mult, c) < 0) {
			*what = "attn";
			return 0;
		}
		if (!n->a.causal)
			share = 1;
		else if (share < 0)
			share = visible_pairs((double)op_causal_shift(n), (double)q[2], (double)k[2]) /
			        ((double)q[2] * (double)k[2]);
		return P * (c[0] + c[1] * share);
	}
	double bytes = eo;
	for (int i = 0; i < n->nin; i++)
		bytes += elems_of(in[i], n->in[i]->ndim);
	bytes *= dtype_size[dt];
	double rate = pf->op[dt][n->op] > 0 ? pf->op[dt][n->op] : profile_ew(pf, dt, bytes);
	if (rate <= 0) {
		*what = "ew";
		return 0;
	}
	return bytes / rate;
}

/* Does node n's time follow the GPU's clock (profile_clock): GEMMs and
 * attention, which keep it at its power limit? */
static int
clocked(const Node *n)
{
	int cls = op_info[n->op].cls;

	return cls == CL_MM || cls == CL_ATTN || cls == CL_ATTN_GRAD;
}

/* Seconds of compute item it of rank r, round i: one call over the
 * chunk's slices, or one per slice where the plan loops over them (a
 * chunk of slices that are not adjacent: slice(k)'s, 1/k of each rank's
 * block apart, are k * N calls of 1/(k N) of the rows each). */
static double
sim_compute(Sim *S, const Item *it, int r, int i)
{
	const RNode *rn = S->c->region.v[it->u.comp.rn];
	const Node *n = rn->node;
	const Sel *sel = &it->u.comp.sel;
	const char *what = NULL;
	int cls = op_info[n->op].cls, cnt = sel->cnt > 0 ? sel->cnt : 1;
	int calls = S->pc->item[it->id]->loop ? cnt : 1, per = cnt / calls;
	double f = (double)per / S->c->nslices, t = 0;

	for (int u = 0; u < calls; u++) {
		double share = -1;
		if ((cls == CL_ATTN || cls == CL_ATTN_GRAD) && n->a.causal) {
			const Value *q = n->in[0], *k = n->in[1];
			share = visible_share(q, (double)value_rank_extent(k, 2),
			                      (double)op_causal_shift(n), rn->idim[0] == 2, sel,
			                      u * per, per, S->c->nslices, r, i,
			                      S->c->node->a.coll.group);
		}
		t += node_cost(S->pf, n, rn->odim, rn->idim, f, share, it->u.comp.beta, &what);
	}
	if (clocked(n))
		t *= S->clock;
	if (what)
		sim_err(S, no_rate(S->a, S->pf, what, S->dt));
	return t;
}

/* Elements of the slices a BufRef names. */
static double
ref_elems(const Coll *c, const BufRef *br)
{
	const Buf *b = c->bufs.v[br->buf];

	return (double)b->slot_elems * (br->sel.cnt > 0 ? br->sel.cnt : 1);
}

/* Seconds of moving n runs of bytes each, k operands of them (a copy
 * reads one and writes one: 2), one call per run. */
static double
move_time(Sim *S, double bytes, double k, int n)
{
	double rate = profile_ew(S->pf, S->dt, bytes * k);

	if (rate <= 0) {
		sim_err(S, no_rate(S->a, S->pf, "ew", S->dt));
		return 0;
	}
	return n * bytes * k / rate;
}

static double
sim_move(Sim *S, const Item *it)
{
	double e = ref_elems(S->c, &it->u.move.dst) * S->esz;

	return move_time(S, e, it->kind == IT_ADD ? 3 : it->kind == IT_COPY ? 2 : 1, 1);
}

static int moving(const Sim *S, int r, double t);

static double
slowed(Sim *S, int r, double t)
{
	int n = moving(S, r, S->rk[r].tc);

	return !n ? t : S->pf->defer_sd > 0 ? t * S->pf->defer_sd : t * profile_slowdown(S->pf, n);
}

/* Rank r's compute queue busy for t seconds of its own (slowed while its
 * transfers move), as span what. */
static void
sim_busy(Sim *S, int r, double t, const char *what)
{
	PRank *R = &S->rk[r];

	R->alone += t;
	t = slowed(S, r, t);
	sim_span(S, r, 0, R->tc, R->tc + t, what);
	R->tc += t;
}

/* The copies of a staged transfer's nblock blocks of elems elements
 * each between its memory and its staging, on r's queue. */
static void
sim_stage(Sim *S, int r, double elems, int nblock, const char *what)
{
	if (elems > 0)
		sim_busy(S, r, move_time(S, elems * S->esz, 2, nblock), what);
}

/* ---- transfers ---- */

/* The p2p time of bytes with conc transfers at once at a rank (the
 * average over the transfer's time, so a share): between two classes
 * measured, linear between their times; under the first, the first's;
 * over the last, on along the line through the last two, never down: the
 * ports the last class filled are shared by more (case c's
 * reduce-scatter under fuse(pairwise, m=2) on 4 H200s with copy engines,
 * traced: 64 MiB pulls of 0.51-0.67 ms with more at once than the
 * profile's 4, which gives 0.400). */
static double
p2p_time(Sim *S, double bytes, double conc)
{
	const Profile *pf = S->pf;
	int lo = -1, hi = -1, below = -1; /* below: the class measured under lo */

	for (int c = 0; c < MAXCONC; c++) { /* profile_conc ascends */
		if (!pf->p2p[c].n)
			continue;
		if (profile_conc[c] <= conc)
			below = lo, lo = c;
		if (hi < 0 && profile_conc[c] >= conc)
			hi = c;
	}

	if (lo < 0 && hi < 0) {
		sim_err(S, arena_printf(S->a, "the profile %s has no p2p times", S->pf->name));
		return 0;
	}
	if (lo < 0)
		return profile_bytes(&pf->p2p[hi], bytes);
	double tl = profile_bytes(&pf->p2p[lo], bytes);
	if (hi < 0) { /* over the last class (lo) */
		if (below < 0)
			return tl;
		double tb = profile_bytes(&pf->p2p[below], bytes);
		return tl + fmax(0, tl - tb) * (conc - profile_conc[lo]) /
		            (profile_conc[lo] - profile_conc[below]);
	}
	double th = profile_bytes(&pf->p2p[hi], bytes);
	if (hi == lo)
		return th;
	return tl + (th - tl) * (conc - profile_conc[lo]) / (profile_conc[hi] - profile_conc[lo]);
}

/* Transfers of rank r moving at time t (among its recent ones). */
static int
moving(const Sim *S, int r, double t)
{
	const PRank *R = &S->rk[r];
	int n = 0;

	for (int j = R->nxs - 1; j >= 0 && j >= R->nxs - RECENT; j--) {
		const PX *x = &S->x[R->xs[j]];
		if (x->match >= 0 && x->t0 <= t && t < x->t1)
			n++;
	}
	return n;
}

static const char *
xfer_what(Sim *S, const PX *x)
{
	return arena_printf(S->a, "%s %d %s rank %d", x->kind == IT_SEND ? "send" : "recv",
	                    x->round, x->kind == IT_SEND ? "to" : "from", x->peer);
}

/* Send s meets receive q: both move from the later post, once the link
 * is free. */
static void
sim_pair(Sim *S, int s, int q)
{
	PX *xs = &S->x[s], *xq = &S->x[q];
	double *lk = &S->link[(size_t)xs->rank * (size_t)S->N + (size_t)xq->rank];
	double t0 = fmax(fmax(xs->tpost, xq->tpost), *lk);
	const Conc *cc = S->conc;
	double conc = cc && xs->ord < cc->n[xs->rank] && cc->conc[xs->rank][xs->ord] > 0 ?
	              cc->conc[xs->rank][xs->ord] :
	              1 + fmax(moving(S, xs->rank, t0), moving(S, xq->rank, t0));
	double d = p2p_time(S, xs->bytes, conc);

	xs->match = q, xq->match = s;
	xs->t0 = xq->t0 = t0;
	xs->t1 = xq->t1 = *lk = t0 + d;
	S->rk[xs->rank].xfer += d;
	sim_span(S, xs->rank, 1, t0, t0 + d, xfer_what(S, xs));
	sim_span(S, xq->rank, 2, t0, t0 + d, xfer_what(S, xq));
}

/* Record k meets the oldest unmatched opposite record at its peer from
 * its rank with its tag, if any. */
static void
sim_match(Sim *S, int k)
{
	PX *x = &S->x[k];
	int send = x->kind == IT_SEND, r = x->rank;
	const PRank *P = &S->rk[x->peer];

	if (x->match >= 0)
		return;
	for (int j = 0; j < P->nxs; j++) {
		const PX *o = &S->x[P->xs[j]];
		if (o->match < 0 && !o->defer && o->kind == (send ? IT_RECV : IT_SEND) && o->peer == r &&
		    o->tag == x->tag) {
			send ? sim_pair(S, k, P->xs[j]) : sim_pair(S, P->xs[j], k);
			return;
		}
	}
}

static void
sim_post(Sim *S, int r, const Item *it, int i)
{
	PRank *R = &S->rk[r];
	const PItem *p = S->pc->item[it->id];
	int peer = sched_ix(&it->u.xfer.peer, r, i), send = it->kind == IT_SEND;

	if (send && p->staged)
		sim_stage(S, r, (double)p->count, 1, "pack");
	S->x = arena_grow(S->a, S->x, S->nx, &S->capx, 256, sizeof *S->x);
	int k = S->nx++;
	S->x[k] = (PX){it->kind, r, peer, it->u.xfer.tag, it->u.xfer.label,
	               sched_ix(&it->u.xfer.round, r, i), ref_elems(S->c, &it->u.xfer.buf) * S->esz,
	               R->tc, 0, 0, -1, 0, !send && p->staged ? (double)p->count : 0, R->nxs, 0};
	R->xs = arena_grow(S->a, R->xs, R->nxs, &R->capxs, 64, sizeof *R->xs);
	R->xs[R->nxs++] = k;
	if (S->pf->defer_sd > 0) /* until the rank's next item (sim_release) */
		S->x[k].defer = 1;
	else
		sim_match(S, k);
}

/* Rank r has ended the compute item after their posts, or reached a
 * wait, a collective or its end: its deferred records (Profile.defer_sd)
 * start no earlier than now and meet their peers', in post order (they
 * are its newest: every item but a post releases them). */
static void
sim_release(Sim *S, int r)
{
	PRank *R = &S->rk[r];

	for (int j = R->nxs - RECENT > 0 ? R->nxs - RECENT : 0; j < R->nxs; j++) {
		PX *x = &S->x[R->xs[j]];
		if (x->defer) {
			x->defer = 0;
			x->tpost = fmax(x->tpost, R->tc);
			sim_match(S, R->xs[j]);
		}
	}
}

/* ---- library collectives ---- */

/* Seconds of a library collective over N ranks: the profile's table
 * when it was measured on N ranks, else a ring of p2p transfers. */
static double
coll_time(Sim *S, OpKind op, double block)
{
	const Profile *pf = S->pf;
	int k = profile_coll_index(op), N = S->N;

	if (N == 1)
		return 0;
	if (k >= 0 && pf->coll[k].n && pf->ranks == N)
		return profile_bytes(&pf->coll[k], block);
	double ew = profile_ew(pf, S->dt, 3 * block);
	if (ew <= 0)
		ew = INFINITY;
	switch (op) {
	case OP_ALL_REDUCE:
		return 2 * (N - 1) * p2p_time(S, block / N, 2) + (N - 1) * 3 * block / N / ew;
	case OP_REDUCE_SCATTER:
		return (N - 1) * (p2p_time(S, block, 2) + 3 * block / ew);
	default:
		return (N - 1) * p2p_time(S, block, 2);
	}
}

static PCI *
ci_get(Sim *S, int label, int round)
{
	for (int k = 0; k < S->nci; k++)
		if (S->ci[k].label == label && S->ci[k].round == round)
			return &S->ci[k];
	S->ci = arena_grow(S->a, S->ci, S->nci, &S->capci, 16, sizeof *S->ci);
	PCI *ci = &S->ci[S->nci++];
	*ci = (PCI){label, round, 0, 0, 0, 0, arena_alloc(S->a, (size_t)S->N), 0, NULL};
	return ci;
}

static void
sim_coll_post(Sim *S, int r, const Item *it, int i)
{
	PRank *R = &S->rk[r];
	const Buf *b = S->c->bufs.v[it->u.coll.src];
	const PItem *p = S->pc->item[it->id];
	int round = sched_ix(&it->u.coll.round, r, i);
	PCI *ci = ci_get(S, it->u.coll.label, round);
	double block = (double)b->slot_elems * S->esz;

	if (it->u.coll.op == OP_ALL_REDUCE)
		block *= it->u.coll.sel.cnt;
	if (p->side[0].staged)
		sim_stage(S, r, (double)p->count, p->side[0].nblock, "pack");
	ci->posted[r] = 1;
	ci->k = profile_coll_index(it->u.coll.op);
	ci->up = p->side[1].staged ? p : NULL;
	ci->tmax = fmax(ci->tmax, R->tc);
	if (++ci->nposted == S->N) {
		ci->t1 = ci->tmax + coll_time(S, it->u.coll.op, block);
		for (int q = 0; q < S->N; q++) {
			S->rk[q].xfer += ci->t1 - ci->tmax;
			sim_span(S, q, 3, ci->tmax, ci->t1, op_info[it->u.coll.op].name);
		}
	}
	if (it->u.coll.blocking)
		R->pend = (int)(ci - S->ci);
}

/* ---- running the ranks ---- */

/* Holds r's compute queue until t; the gap is a wait span. */
static void
sim_hold(Sim *S, int r, double t)
{
	PRank *R = &S->rk[r];

	if (t > R->tc) {
		sim_span(S, r, 4, R->tc, t, "wait");
		R->tc = t;
	}
}

/* The record of what wait item it (round i) of rank r waits for: a
 * transfer (*x) or a collective (*ci); both NULL: nothing posted. */
static void
wait_target(Sim *S, int r, const Item *it, int i, PX **x, PCI **ci)
{
	PRank *R = &S->rk[r];
	int round = sched_ix(&it->u.wait.round, r, i);

	*x = NULL, *ci = NULL;
	for (int j = R->nxs - 1; j >= 0; j--) {
		PX *p = &S->x[R->xs[j]];
		if (p->label == it->u.wait.label && p->round == round) {
			*x = p;
			return;
		}
	}
	for (int k = 0; k < S->nci; k++)
		if (S->ci[k].label == it->u.wait.label && S->ci[k].round == round &&
		    S->ci[k].posted[r] == 1) {
			*ci = &S->ci[k];
			return;
		}
}

/* Can rank r run its current item now (its transfer is matched, its
 * collective posted by all)? */
static int
sim_ready(Sim *S, int r)
{
	PRank *R = &S->rk[r];
	PX *x;
	PCI *ci;

	if (R->pend >= 0)
		return S->ci[R->pend].nposted == S->N;
	if (R->cur->kind != IT_WAIT)
		return 1;
	wait_target(S, r, R->cur, R->round, &x, &ci);
	return x ? x->match >= 0 : ci ? ci->nposted == S->N : 1;
}

/* When rank r, waiting from tw, has transfer x: at its nominal end when
 * transfers move on their own (Profile.overlap 1) or it started while r
 * already waited; else only the share overlap of the time from its start
 * to tw (when r computed) counted, the rest passes from tw on. */
static double
landed(double ov, double t0, double t1, double tw)
{
	double d = t1 - t0;

	if (ov >= 1 || tw <= t0)
		return t1;
	return ov * (tw - t0) >= d ? tw : tw + (d - ov * (tw - t0));
}

static double
wait_end(Sim *S, PX *x, double tw)
{
	if (x->tdone > 0) /* the other end's wait saw it land */
		return x->tdone;
	x->tdone = S->x[x->match].tdone = landed(S->pf->defer_sd > 0 ? S->pf->defer_ov : S->pf->overlap,
	                                              x->t0, x->t1, tw);
	return x->tdone;
}

/* A library collective's overlap: its own, else the transfers'. */
static double
coll_overlap(const Sim *S, const PCI *ci)
{
	double ov = S->pf->overlap_coll[ci->k];

	return ov >= 0 ? ov : S->pf->overlap;
}

/* The same as wait_end for a library collective, at its overlap: the
 * first wait of any rank lands it for all. */
static double
coll_end(Sim *S, PCI *ci, double tw)
{
	if (ci->tdone <= 0)
		ci->tdone = landed(coll_overlap(S, ci), ci->tmax, ci->t1, tw);
	return ci->tdone;
}

/* Rank r has waited for collective ci: its result's unpack. */
static void
coll_waited(Sim *S, int r, PCI *ci)
{
	ci->posted[r] = 2;
	sim_hold(S, r, coll_end(S, ci, S->rk[r].tc));
	if (ci->up)
		sim_stage(S, r, (double)ci->up->count, ci->up->side[1].nblock, "unpack");
}

static void
sim_wait(Sim *S, int r, const Item *it, int i)
{
	PX *x;
	PCI *ci;

	wait_target(S, r, it, i, &x, &ci);
	if (x) {
		sim_hold(S, r, wait_end(S, x, S->rk[r].tc));
		sim_stage(S, r, x->unpack, 1, "unpack");
	}
	if (ci)
		coll_waited(S, r, ci);
}

/* Runs item it of rank r (round i), which sim_ready admits. */
static void
sim_item(Sim *S, int r, const Item *it, int i)
{
	double t;

	switch (it->kind) {
	case IT_COMPUTE:
	case IT_ADD:
	case IT_COPY:
	case IT_ZERO:
		t = it->kind == IT_COMPUTE ? sim_compute(S, it, r, i) : sim_move(S, it);
		sim_busy(S, r, t, it->kind == IT_COMPUTE ?
		         ((const RNode *)S->c->region.v[it->u.comp.rn])->node->out->name :
		         it->kind == IT_ADD ? "add" : it->kind == IT_COPY ? "copy" : "zero");
		sim_release(S, r);
		return;
	case IT_SEND:
	case IT_RECV:
		sim_post(S, r, it, i);
		return;
	case IT_COLL:
		sim_coll_post(S, r, it, i);
		return;
	case IT_WAIT:
		sim_wait(S, r, it, i);
		return;
	case IT_HOST: /* a plain stage or a collective run whole under the transfers */
		t = it->u.host.coll ? S->guest : predict_node(S->a, it->u.host.node, S->pf).compute;
		sim_busy(S, r, t, it->u.host.node->out->name);
		sim_release(S, r);
		return;
	}
}

/* Rank r's current item (fetched when it has none); NULL: r is done. */
static const Item *
sim_cur(Sim *S, int r)
{
	PRank *R = &S->rk[r];

	if (!R->cur && !R->done) {
		R->cur = sched_next(S->c, r, &R->pos);
		R->round = R->pos.i;
		R->done = !R->cur && R->pend < 0;
		/* no compute after the posts: they start now (sim_ready
		 * admits a wait on one only once it has met its peer's) */
		if (!R->cur || R->cur->kind == IT_WAIT || R->cur->kind == IT_COLL)
			sim_release(S, r);
	}
	return R->cur;
}

/* One step of the whole job: of the ranks that can go on, the one whose
 * compute queue is free first runs its next item (at equal times, a post
 * before a compute, so that a transfer posted at t is seen as moving by
 * compute that starts at t). 0 when every rank is done; -1 when none
 * can go on. */
static int
sim_step(Sim *S)
{
	int best = -1, bestc = 0, left = 0;

	for (int r = 0; r < S->N; r++) {
		PRank *R = &S->rk[r];
		if (!sim_cur(S, r) && R->pend < 0)
			continue;
		left = 1;
		if (!sim_ready(S, r))
			continue;
		int comp = R->pend < 0 && R->cur->kind <= IT_ZERO;
		if (best < 0 || R->tc < S->rk[best].tc || (R->tc == S->rk[best].tc && comp < bestc))
			best = r, bestc = comp;
	}
	if (best < 0)
		return left ? -1 : 0;
	PRank *R = &S->rk[best];
	if (R->pend >= 0) { /* the blocking collective it posted has ended */
		coll_waited(S, best, &S->ci[R->pend]);
		R->pend = -1;
		return 1;
	}
	sim_item(S, best, R->cur, R->round);
	R->cur = NULL;
	return 1;
}

/* The transfers of rank r moving on average over [a, b), each counted
 * by the share of it that they overlap (a transfer's own counts 1). */
static double
avg_moving(const Sim *S, int r, double a, double b)
{
	const PRank *R = &S->rk[r];
	double n = 0;

	if (b <= a)
		return 1;
	for (int j = 0; j < R->nxs; j++) {
		const PX *y = &S->x[R->xs[j]];
		double o = fmin(b, y->t1) - fmax(a, y->t0);
		if (y->match >= 0 && o > 0)
			n += o / (b - a);
	}
	return n;
}

/* What run S tells the next of its sends: the transfers at once at the
 * busier end over each one's time. */
static Conc
sim_conc(Sim *S)
{
	Conc c = {arena_alloc(S->a, (size_t)S->N * sizeof *c.conc),
	          arena_alloc(S->a, (size_t)S->N * sizeof *c.n)};

	for (int r = 0; r < S->N; r++) {
		const PRank *R = &S->rk[r];
		c.n[r] = R->nxs;
		c.conc[r] = arena_alloc(S->a, (size_t)(R->nxs ? R->nxs : 1) * sizeof **c.conc);
		for (int j = 0; j < R->nxs; j++) {
			const PX *x = &S->x[R->xs[j]];
			c.conc[r][j] = x->kind == IT_SEND && x->match >= 0 ?
			        fmax(avg_moving(S, r, x->t0, x->t1),
			             avg_moving(S, S->x[x->match].rank, x->t0, x->t1)) : 0;
		}
	}
	return c;
}

/* One run of the step programs, GEMMs and attention at clock times
 * their rates' time, each send at the transfers at once that *in (when
 * given) says; *out (when given) gets this run's. */
static Prediction
sim_run(Arena *a, const PColl *pc, const Coll *c, const Profile *pf, int want_spans,
        double clock, const Conc *in, Conc *out, double guest)
{
	Prediction pr = {0};
	Sim S = {.a = a, .c = c, .pc = pc, .pf = pf, .N = c->N,
	         .esz = dtype_size[c->node->in[0]->dtype],
	         .dt = c->node->in[0]->dtype, .pr = &pr, .spans = want_spans, .clock = clock,
	         .conc = in, .guest = guest};

	S.rk = arena_alloc(a, (size_t)S.N * sizeof *S.rk);
	S.link = arena_alloc(a, (size_t)S.N * (size_t)S.N * sizeof *S.link);
	for (int r = 0; r < S.N; r++)
		S.rk[r].pend = -1;
	int rc;
	while ((rc = sim_step(&S)) > 0)
		;
	if (rc < 0) {
		pr.err = "the program blocks (the verifier would have refused it)";
		return pr;
	}
	int busiest = 0;
	for (int r = 0; r < S.N; r++) {
		double end = S.rk[r].tc;
		for (int j = 0; j < S.rk[r].nxs; j++)
			end = fmax(end, S.x[S.rk[r].xs[j]].t1);
		pr.total = fmax(pr.total, end);
		if (S.rk[r].alone > S.rk[busiest].alone)
			busiest = r;
	}
	for (int k = 0; k < S.nci; k++)
		pr.total = fmax(pr.total, S.ci[k].t1);
	pr.compute = S.rk[busiest].alone;
	pr.xfer = S.rk[busiest].xfer;
	if (out)
		*out = sim_conc(&S);
	return pr;
}

/* A GPU's clock follows its average power (profile_clock): with the
 * profile's clock table, the collective runs again at the factor of the
 * share of its time the busiest rank computes, until that share settles
 * (a fixed point: a faster compute lowers the share; in test_predict's
 * example the factor goes 0.92, 0.9145, 0.9141). The first run and the
 * compute alone are at the factor of busy all the time: back to back,
 * compute keeps the GPU busy all the time (the clock moves in the next
 * three runs, then stays).
 * A transfer's time depends on the others moving with it, those that
 * start after it too: each run prices every send at the transfers at
 * once over its time in the run before (the first: those moving at its
 * start), until the collective's time settles (at most MAXRUN runs).
 * Priced at their start, the first transfer of a lane read the rate of
 * one alone while the next lane's moved beside it: 4 H100s, copy
 * engines, bench-gpu case c's reduce-scatter under fuse(bidir, m=2)
 * was priced at 1.43 ms and took 2.23-2.38 on the ranks in a trace
 * (lease 18; fuse(ring, m=2): 1.61, and 1.63-1.66 in another), and auto
 * took it. */
Prediction
predict_coll(Arena *a, const Graph *g, const Coll *c, const Profile *pf, int want_spans)
{
	const PColl *pc = plan_coll(a, g, c);
	Conc cc, in;
	double clock = profile_clock(pf, 1), guest = 0;
	/* a collective it hosts (order.c's 2b, which hosts one that hosts
	 * nothing): busy for that one's predicted time */
	SchedPos ps = {0};
	for (const Item *it; (it = sched_next(c, 0, &ps));)
		if (it->kind == IT_HOST && it->u.host.coll)
			guest += predict_coll(a, g, it->u.host.coll, pf, 0).total;
	Prediction pr = sim_run(a, pc, c, pf, 0, clock, NULL, &cc, guest);
	double alone = pr.compute;

	for (int i = 0; i < MAXRUN && !pr.err && pr.total > 0; i++) {
		double last = pr.total;
		if (i < 3) /* 1 without a clock table */
			clock = profile_clock(pf, fmin(1, pr.compute / pr.total));
		in = cc;
		pr = sim_run(a, pc, c, pf, 0, clock, &in, &cc, guest);
		if (i >= 2 && fabs(pr.total - last) <= 1e-9 * last) /* settled */
			break;
	}
	if (want_spans && !pr.err && pr.total > 0) /* the last run again, drawn */
		pr = sim_run(a, pc, c, pf, 1, clock, &in, NULL, guest);
	pr.compute = alone;
	return pr;
}

Prediction
predict_node(Arena *a, const Node *n, const Profile *pf)
{
	Prediction pr = {0};
	const char *what = NULL;

	pr.total = pr.compute = node_cost(pf, n, -1, NULL, 1, -1, 0, &what);
	if (clocked(n)) /* between others: busy */
		pr.total = pr.compute *= profile_clock(pf, 1);
	if (what)
		pr.err = no_rate(a, pf, what, n->out->dtype);
	return pr;
}

/* The first of cand[0..n) predicted within bound, to rounding (sums of
 * the same times in another order differ in the last bits); -1: none. */
static int
first_within(const Candidate *cand, int n, double bound)
{
	for (int k = 0; k < n; k++)
		if (!cand[k].pr.err && cand[k].pr.total <= bound * (1 + 1e-9))
			return k;
	return -1;
}

int
predict_pick(const Candidate *cand, int n, double slack, int *fastest)
{
	double lo = INFINITY;

	for (int k = 0; k < n; k++)
		if (!cand[k].pr.err)
			lo = fmin(lo, cand[k].pr.total);
	if (fastest) /* a tie is the simpler's */
		*fastest = first_within(cand, n, lo);
	return first_within(cand, n, lo + slack);
}

double
predict_margin(const Profile *pf)
{
	return pf && pf->backend && !strncmp(pf->backend, "cuda", 4) ? AUTO_MARGIN_GPU_PCT
	                                                              : AUTO_MARGIN_PCT;
}

Prediction
predict_pass(Arena *a, const Sched *s, int fastest)
{
	Prediction p = {0};

	for (int k = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		Prediction q = {0};
		if (st->host1)
			continue; /* its host's program runs it (order.c) */
		if (st->kind == ST_COMPUTE) {
			q = predict_node(a, st->u.node, s->profile);
		} else if (!fastest) {
			q = predict_coll(a, s->g, st->u.coll, s->profile, 0);
		} else {
			const Coll *c = st->u.coll;
			int f;
			predict_pick(c->cand, c->ncand, 0, &f);
			if (f >= 0)
				q = c->cand[f].pr;
		}
		if (q.err && !p.err)
			p.err = q.err;
		p.total += q.total;
		p.compute += q.compute;
	}
	return p;
}

int
predict_candidates(const Node *n, SchedChoice *out, int max)
{
	int k = 0;
	(void)n;

	if (k < max)
		out[k++] = (SchedChoice){.kind = SK_VANILLA};
	for (int s = 2; s <= 4 && k < max; s *= 2)
		out[k++] = (SchedChoice){.kind = SK_SLICE, .k = s};
	for (int t = 0; t < NTOPO; t++)
		for (int m = 1; m <= 2 && k < max; m++)
			out[k++] = (SchedChoice){.kind = SK_FUSE, .topo = (Topo)t, .m = m};
	return k;
}
