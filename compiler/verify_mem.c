/* verify_mem.c: the proof of the memory plan, element by element.
 *
 * The machine of verify.c runs every rank's program and calls these
 * checks at each item, with the item's slices, parts and rounds resolved
 * for that rank. Every object a stage touches (a value's per-rank
 * storage, each scratch buffer, each label's staging) is a dense row-major
 * array; a view of it is an affine map from the view's indexes to the
 * object's elements. The schedule says which block of which object each
 * operand is (slice s of a buffer along its dim, part p along its part
 * dim, or the whole); these checks derive that block here, from the
 * buffer's definition, and require the view the plan builds (its cuts
 * applied as cfrt_view_slice applies them) to be the same map: the same
 * elements in the same order. On top of that:
 *  - a transfer handed to the library as count elements from a pointer
 *    is one contiguous run of exactly those elements; a staged one packs
 *    and unpacks its block through a staging slot inside its staging;
 *  - both ends of every message, and the blocks of every library
 *    collective, are the same elements of the global tensor (the same box
 *    of global indexes);
 *  - request and staging slots: a post takes slot round mod slots, which
 *    must be free, and the wait finds its round there;
 *  - a causal attention's query offset is the global row of its first
 *    query, and the log-sum-exp an attention saves goes to the rows of
 *    the slices it computes (the whole of it in a plain stage);
 *  - plain stages read exactly the rows of each input that the rows of
 *    their result need (the op's slice-locality), on every rank;
 *  - several groups: a value split over a group other than the run's (the
 *    collective's, or a plain stage's) holds the rows of the run's context
 *    there (V.grank: ranks 0, 1 and the last of each group the checks
 *    read, vm_contexts; every check is affine in each rank);
 *  - the workspace: every object inside it and aligned, and objects that
 *    overlap in memory never touched in a common stage.
 * requires: the schedule's own checks of verify.c passed at the item.
 * ensures: RUN_ERR through vf_fail, naming rank, step, slice and element,
 * for any planned access that is not the schedule's. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

/* A block of an object: per dim, elements [lo, lo + ext). */
typedef struct Box {
	int obj;
	int nd;
	int64_t lo[MAXDIM], ext[MAXDIM];
} Box;

/* ---- objects ---- */

static int
vm_nvalues(const V *v)
{
	return v->plan->s->g->values.n;
}

static const Value *
vm_value(const V *v, int id)
{
	return v->plan->s->g->values.v[id];
}

/* Object numbers: values by Value.id, then the collective's buffers, then
 * two staging areas per label. */
static int
vm_obj_temp(const V *v, int b)
{
	return vm_nvalues(v) + b;
}

static int
vm_obj_stage(const V *v, int label, int side)
{
	return vm_nvalues(v) + v->c->bufs.n + 2 * label + side;
}

static int64_t
vm_slot_elems(const V *v, int label, int side)
{
	return v->pc->lab[label].slot_bytes[side] / plan_esize(v->c);
}

/* The dims of object o, as vm_init cached them. */
static int
vm_obj_dims(const V *v, int o, int64_t *dims)
{
	memcpy(dims, v->odims[o], sizeof v->odims[o]);
	return v->ond[o];
}

/* The dims of object o, from its definition. */
static int
vm_obj_dims_of(const V *v, int o, int64_t *dims)
{
	int nv = vm_nvalues(v);

	if (o < nv) {
		const Value *x = vm_value(v, o);
		for (int d = 0; d < x->ndim; d++)
			dims[d] = value_rank_extent(x, d);
		return x->ndim;
	}
	if (o < nv + v->c->bufs.n) {
		const Buf *b = v->c->bufs.v[o - nv];
		for (int d = 0; d < b->v->ndim; d++)
			dims[d] = plan_temp_extent(v->c, b, d);
		return b->v->ndim;
	}
	int lb = (o - nv - v->c->bufs.n) / 2, side = (o - nv - v->c->bufs.n) % 2;
	dims[0] = v->pc->lab[lb].slots * vm_slot_elems(v, lb, side);
	return 1;
}

static const char *
vm_obj_name(const V *v, int o, char *buf, size_t n)
{
	int nv = vm_nvalues(v);

	if (o < nv)
		snprintf(buf, n, "%s", vm_value(v, o)->name);
	else if (o < nv + v->c->bufs.n)
		snprintf(buf, n, "scratch %s", ((Buf *)v->c->bufs.v[o - nv])->name);
	else
		snprintf(buf, n, "the staging of transfer #%d", (o - nv - v->c->bufs.n) / 2);
	return buf;
}

/* The whole of object o as a box. */
static Box
vm_whole(const V *v, int o)
{
	Box x;

	x.obj = o;
	x.nd = v->ond[o];
	memcpy(x.ext, v->odims[o], (size_t)x.nd * sizeof x.ext[0]);
	memset(x.lo, 0, (size_t)x.nd * sizeof x.lo[0]);
	return x;
}

/* The view of a box: the object's row-major strides. */
static MView
vm_box_view(const V *v, const Box *x)
{
	int64_t dims[MAXDIM], st = 1;
	MView m = {.obj = x->obj, .nd = x->nd};

	vm_obj_dims(v, x->obj, dims);
	for (int d = x->nd - 1; d >= 0; d--) {
		m.dim[d] = x->ext[d];
		m.stride[d] = st;
		m.off += x->lo[d] * st;
		st *= dims[d];
	}
	return m;
}

/* ---- what the schedule says ---- */

/* cnt slices from slice s (part `part`) of buffer b on rank r: the
 * buffer's definition (sched.h): a value holds slices along its dim
 * (this rank's only, when own) and, when parted, nparts blocks along
 * pdim; a scratch buffer holds one slice. */
static Box
vm_box_ref(const V *v, int r, int b, int s, int part, int cnt)
{
	const Buf *bf = v->c->bufs.v[b];

	if (bf->kind == BK_TEMP)
		return vm_whole(v, vm_obj_temp(v, b));
	Box x = vm_whole(v, bf->v->id);
	if (bf->dim < 0) /* an accumulating node's whole result */
		return x;
	int64_t se = x.ext[bf->dim] / bf->nslots;
	x.lo[bf->dim] = (s - (bf->own ? r * bf->nslots : 0)) * se;
	x.ext[bf->dim] = se * cnt;
	if (bf->nparts > 1) {
		int64_t pe = x.ext[bf->pdim] / bf->nparts;
		if (bf->pdim == bf->dim)
			die("verify: buffer %s parted along its own dim", bf->name);
		x.lo[bf->pdim] = part * pe;
		x.ext[bf->pdim] = pe;
	}
	return x;
}

/* Rank r's rank in group k: r itself in the run's group, else the
 * context's. */
static int
vm_rank_in(const V *v, int r, int k)
{
	return k == v->sg ? r : v->grank[k];
}

/* The global indexes a box of rank r covers: a value split along d over
 * a group holds rows rank * extent ... of d (its rank in that group); a
 * scratch buffer holding slice s of its value sits at that slice's rows. */
static Box
vm_global(const V *v, int r, const Box *x, int s)
{
	Box g = *x;
	const Value *val;
	int nv = vm_nvalues(v);

	if (x->obj < nv) {
		val = vm_value(v, x->obj);
	} else {
		const Buf *b = v->c->bufs.v[x->obj - nv];
		val = b->v;
		g.lo[b->dim] += (int64_t)s * plan_temp_extent(v->c, b, b->dim);
	}
	g.obj = val->id;
	for (int k = 0; k < MAXGROUPS; k++)
		if (val->dist.p[k].kind == DI_SPLIT)
			g.lo[val->dist.p[k].dim] += (int64_t)vm_rank_in(v, r, k) *
			                            value_rank_extent(val, val->dist.p[k].dim);
	return g;
}

/* Do two boxes of global indexes cover the same elements (of the same
 * tensor, or of a collective's input and result)? */
static int
vm_global_eq(const Box *a, const Box *b)
{
	if (a->nd != b->nd)
		return 0;
	for (int d = 0; d < a->nd; d++)
		if (a->lo[d] != b->lo[d] || a->ext[d] != b->ext[d])
			return 0;
	return 1;
}

static const char *
vm_box_str(const Box *x, char *buf, size_t n)
{
	size_t k = 0;

	k += (size_t)snprintf(buf, n, "[");
	for (int d = 0; d < x->nd && k < n; d++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld:%lld", d ? ", " : "",
		                      (long long)x->lo[d], (long long)(x->lo[d] + x->ext[d]));
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

/* ---- what the plan builds ---- */

static int64_t
vm_volume(const MView *m)
{
	int64_t n = 1;

	for (int d = 0; d < m->nd; d++)
		n *= m->dim[d];
	return n;
}

/* The same map with extent-1 dims dropped and dims that continue each
 * other merged: two views are the same elements in the same order iff
 * their canonical forms are equal. */
static MView
vm_canon(const MView *m)
{
	MView c = {.obj = m->obj, .off = m->off};

	for (int d = 0; d < m->nd; d++) {
		if (m->dim[d] == 1)
			continue;
		if (c.nd && c.stride[c.nd - 1] == m->dim[d] * m->stride[d]) {
			c.dim[c.nd - 1] *= m->dim[d];
			c.stride[c.nd - 1] = m->stride[d];
			continue;
		}
		c.dim[c.nd] = m->dim[d];
		c.stride[c.nd++] = m->stride[d];
	}
	return c;
}

static int
vm_same(const MView *a, const MView *b)
{
	if (a->obj == b->obj && a->off == b->off && a->nd == b->nd &&
	    !memcmp(a->dim, b->dim, (size_t)a->nd * sizeof a->dim[0]) &&
	    !memcmp(a->stride, b->stride, (size_t)a->nd * sizeof a->stride[0]))
		return 1;
	MView x = vm_canon(a), y = vm_canon(b);

	if (vm_volume(&x) == 0 || vm_volume(&y) == 0)
		return vm_volume(&x) == vm_volume(&y);
	if (x.obj != y.obj || x.off != y.off || x.nd != y.nd)
		return 0;
	for (int d = 0; d < x.nd; d++)
		if (x.dim[d] != y.dim[d] || x.stride[d] != y.stride[d])
			return 0;
	return 1;
}

/* One contiguous run of elements (or none). */
static int
vm_contig(const MView *m)
{
	MView c = vm_canon(m);

	return vm_volume(&c) == 0 || c.nd == 0 || (c.nd == 1 && c.stride[0] == 1);
}

/* The element of view m at row-major position k of its dims. */
static int64_t
vm_addr(const MView *m, int64_t k)
{
	int64_t a = m->off;

	for (int d = m->nd - 1; d >= 0; d--) {
		a += k % m->dim[d] * m->stride[d];
		k /= m->dim[d];
	}
	return a;
}

static int vm_fail(V *v, int r, int s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
vm_fail(V *v, int r, int s, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return vf_fail(v, r, s, "memory plan: %s", msg);
}

/* Requires the planned view `got` of an operand to be the block `want`
 * of the schedule; else names the first element where they part. */
static int
vm_check(V *v, int r, int s, const char *what, const MView *got, const Box *want)
{
	MView w = vm_box_view(v, want);
	char gn[96], wn[96], bs[160];
	int64_t n = vm_volume(got);

	if (vm_same(got, &w))
		return RUN_OK;
	vm_obj_name(v, want->obj, wn, sizeof wn);
	vm_obj_name(v, got->obj, gn, sizeof gn);
	vm_box_str(want, bs, sizeof bs);
	if (n != vm_volume(&w))
		return vm_fail(v, r, s, "%s has %lld elements where the schedule has %lld (%s%s)", what,
		               (long long)n, (long long)vm_volume(&w), wn, bs);
	for (int64_t k = 0; k < n; k++) {
		int64_t a = vm_addr(got, k), b = vm_addr(&w, k);
		if (got->obj != w.obj || a != b)
			return vm_fail(v, r, s, "%s: element %lld is %s[%lld], but the schedule's "
			               "block %s%s has %s[%lld] there", what, (long long)k, gn, (long long)a,
			               wn, bs, wn, (long long)b);
	}
	return vm_fail(v, r, s, "%s: same elements in another order", what);
}

/* The run-time integers of an item of rank r in round i: the ranks in
 * the other groups are the context's. */
static void
vm_vals(const V *v, int64_t *val, int r, int64_t s, int64_t part, int64_t u, int64_t base)
{
	val[PV_S] = s;
	val[PV_R] = r;
	val[PV_PART] = part;
	val[PV_U] = u;
	val[PV_BASE] = base;
	for (int k = 0; k < MAXGROUPS; k++)
		val[PV_G + k] = v->grank[k];
}

static int vm_cuts(V *v, int r, const PView *pv, const int64_t *val, MView *m, int check);

/* The whole base of pv as m (a staging view: itself, in slot k). */
static int
vm_base(V *v, int r, int i, const PView *pv, const int64_t *val, int k, MView *m)
{
	int64_t dims[MAXDIM], st = 1;

	*m = (MView){0};
	if (pv->base == PB_STAGE) {
		int64_t se = vm_slot_elems(v, pv->id, pv->side), n = 1;
		m->obj = vm_obj_stage(v, pv->id, pv->side);
		m->off = k * se + (pv->blk ? val[PV_U] * pv->blk : 0);
		m->nd = pv->nd;
		for (int d = pv->nd - 1; d >= 0; d--) {
			m->dim[d] = pv->dims[d];
			m->stride[d] = n;
			n *= pv->dims[d];
		}
		if (k < 0 || k >= v->pc->lab[pv->id].slots || m->off < k * se || m->off + n > (k + 1) * se)
			return vm_fail(v, r, (int)val[PV_S], "a staging view of %lld elements at %lld "
			               "leaves slot %d of transfer #%d (%lld elements)", (long long)n,
			               (long long)m->off, k, pv->id, (long long)se);
		return RUN_OK;
	}
	if (pv->base == PB_TEMP) {
		const Buf *b = v->c->bufs.v[pv->id];
		int rot = sched_ix(&pv->rot, r, i);
		if (rot < 0 || rot >= b->nset)
			return vm_fail(v, r, (int)val[PV_S], "scratch %s has %d members, not %d", b->name,
			               b->nset, rot + 1);
		m->obj = vm_obj_temp(v, pv->id + rot);
	} else {
		m->obj = pv->id;
	}
	m->nd = vm_obj_dims(v, m->obj, dims);
	for (int d = m->nd - 1; d >= 0; d--) {
		m->dim[d] = dims[d];
		m->stride[d] = st;
		st *= dims[d];
	}
	return RUN_OK;
}

/* The view pv builds for rank r in round i with the integers val (its
 * part from its own index), in slot k of a staging; RUN_ERR when a cut
 * leaves its base. */
static int
vm_view(V *v, int r, int i, const PView *pv, int64_t *val, int k, MView *m)
{
	if (vm_base(v, r, i, pv, val, k, m))
		return RUN_ERR;
	val[PV_PART] = sched_ix(&pv->part, r, i);
	return vm_cuts(v, r, pv, val, m, 1);
}

/* Applies pv's cuts to m; check: a cut that leaves its base is an error
 * (else it is arithmetic only, for vm_sym). */
static int
vm_cuts(V *v, int r, const PView *pv, const int64_t *val, MView *m, int check)
{
	char name[96];

	for (int c = 0; c < pv->ncut; c++) {
		const PCut *x = &pv->cut[c];
		int64_t at = plan_eval(&x->start, val);
		if (x->dim < 0 || x->dim >= m->nd)
			die("verify: a cut of dim %d of a %d-d view", x->dim, m->nd);
		if (check && (at < 0 || x->len < 0 || at + x->len > m->dim[x->dim]))
			return vm_fail(v, r, (int)val[PV_S], "a cut [%lld, %lld) of dim %d leaves %s "
			               "(extent %lld)", (long long)at, (long long)(at + x->len), x->dim,
			               vm_obj_name(v, m->obj, name, sizeof name), (long long)m->dim[x->dim]);
		m->off += at * m->stride[x->dim];
		m->dim[x->dim] = x->len;
	}
	return RUN_OK;
}

/* A transfer handed to the library as count elements from the first of
 * view m (the schedule's block want) moves exactly the block only when the
 * block is one run; else names the first element the run gets wrong. */
static int
vm_run(V *v, int r, int s, const char *what, const MView *m, const Box *want)
{
	char name[96];
	int64_t n = vm_volume(m);

	if (vm_contig(m))
		return RUN_OK;
	vm_obj_name(v, m->obj, name, sizeof name);
	for (int64_t k = 0; k < n; k++)
		if (vm_addr(m, k) != m->off + k) {
			char bs[160];
			return vm_fail(v, r, s, "%s is %lld elements from one pointer, but its block "
			               "%s of %s is strided: element %lld of the run is %s[%lld], where the "
			               "block has %s[%lld]", what, (long long)n,
			               vm_box_str(want, bs, sizeof bs), name, (long long)k, name,
			               (long long)(m->off + k), name, (long long)vm_addr(m, k));
		}
	return RUN_OK;
}

/* What the schedule says an operand is, as a function of the rank, the
 * slice and the part: cnt slices of buffer buf, or (rn set) input j of a
 * region node, or (lse set) the log-sum-exp of a region node or plain
 * stage. */
typedef struct Want {
	int buf, cnt;
	const RNode *rn;
	int j;
	const Ix *part;    /* the part index of the reference, or NULL */
	const Node *plain; /* or input j (-1: the result) of a plain stage */
	int lse;           /* the lse of rn or plain (Node.lse) */
} Want;

static Box vm_input(const V *v, int r, const RNode *rn, int j, int s, int cnt);

static Box vm_plain_want(const V *v, const Node *n, int j, int r);

/* The log-sum-exp rows of cnt slices from s of region node rn: the
 * slices of its result's rows, in the lse's own storage, which has the
 * result's dims but the last and, like the result, no split along the
 * region's dim (region.c). */
static Box
vm_lse_box(const V *v, const RNode *rn, int s, int cnt)
{
	Box w = vm_whole(v, rn->node->lse->id);
	int64_t se = w.ext[rn->odim] / v->c->nslices;

	w.lo[rn->odim] = s * se;
	w.ext[rn->odim] = se * cnt;
	return w;
}

static Box
vm_want(const V *v, const Want *w, int r, int64_t s, int64_t part)
{
	if (w->lse)
		return w->plain ? vm_whole(v, w->plain->lse->id) : vm_lse_box(v, w->rn, (int)s, w->cnt);
	if (w->plain)
		return w->j < 0 ? vm_whole(v, w->plain->out->id) : vm_plain_want(v, w->plain, w->j, r);
	if (w->rn)
		return vm_input(v, r, w->rn, w->j, (int)s, w->cnt);
	return vm_box_ref(v, r, w->buf, (int)s, (int)part, w->cnt);
}

/* The ranks d at which a symmetric run checks rank 0's item again, turned
 * by d: its slice s (owner q) and its part (when parted) wrap around at
 * d = N - q and d = N - part; on each stretch between wraps both the plan
 * and the schedule are affine in d, so two points of each stretch (d = 0
 * being rank 0's own check) prove it. Returns how many, in ds. */
static int
vm_turns(const V *v, int s, int part, int *ds)
{
	int N = v->N, q = s / (v->c->nslices / N), n = 0;
	int cand[5] = {1, N - q, N - q + 1, part >= 0 ? N - part : N, part >= 0 ? N - part + 1 : N};

	for (int k = 0; k < 5; k++) {
		int d = cand[k], dup = 0;
		for (int j = 0; j < n; j++)
			dup |= ds[j] == d;
		if (d > 0 && d < N && !dup)
			ds[n++] = d;
	}
	return n;
}

/* In a symmetric run (V.sym) rank 0 alone is run; rank d runs the same
 * item with the slice and the part turned by d: the view must be the
 * schedule's block there too (vm_turns says at which d to look; a part
 * must be indexed alike). */
static const char *vm_what(char *buf, size_t n, const Node *nd, int j, const char *what);

static int
vm_sym(V *v, int i, const PView *pv, int s0, const Want *w, const Node *nd, int j,
       const char *what)
{
	char buf[128];

	int ds[5], part = w->part && pv->ncut ? sched_ix(w->part, 0, i) : -1, n;

	if (part >= 0 && memcmp(&pv->part, w->part, sizeof pv->part))
		return vm_fail(v, 0, s0, "%s: its part is not indexed as the schedule's",
		               vm_what(buf, sizeof buf, nd, j, what));
	if (v->turns) {
		n = vm_turns(v, s0, part, ds);
	} else { /* a chunk the same on every rank: affine in the rank alone */
		ds[0] = 1, ds[1] = v->N - 1;
		n = 1 + (v->N > 2);
	}
	for (int k = 0; k < n; k++) {
		int d = ds[k], s = v->turns ? sched_turn(v->c, s0, d) : s0;
		int64_t val[NPV];
		MView m, e;
		vm_vals(v, val, d, s, 0, 0, 0);
		if (vm_view(v, d, i, pv, val, 0, &m))
			return RUN_ERR;
		Box b = vm_want(v, w, d, s, w->part ? sched_ix(w->part, d, i) : 0);
		e = vm_box_view(v, &b);
		if (!vm_same(&m, &e) && vm_check(v, d, s, vm_what(buf, sizeof buf, nd, j, what), &m, &b))
			return RUN_ERR;
	}
	return RUN_OK;
}

/* How to name an operand: what, or the result (j < 0) or input j of nd. */
static const char *
vm_what(char *buf, size_t n, const Node *nd, int j, const char *what)
{
	if (!nd)
		return what;
	if (j < 0)
		snprintf(buf, n, "the result of %s", nd->out->name);
	else
		snprintf(buf, n, "input %d (%s) of %s", j, nd->in[j]->name, nd->out->name);
	return buf;
}

/* Builds the planned view of an operand and checks it against what the
 * schedule says (for every rank, in a symmetric run); named by what, or
 * (n set) as the result (j = -1) or input j of n, when it fails; the view
 * in *got unless NULL. */
static int
vm_operand(V *v, int r, int i, const PView *pv, int64_t *val, const Want *w, const Node *n,
           int j, const char *what, MView *got)
{
	MView m, e;
	char buf[128];
	Box want = vm_want(v, w, r, val[PV_S], w->part ? sched_ix(w->part, r, i) : 0);

	if (vm_view(v, r, i, pv, val, 0, &m))
		return RUN_ERR;
	if (got)
		*got = m;
	e = vm_box_view(v, &want);
	if (!vm_same(&m, &e) && vm_check(v, r, (int)val[PV_S], vm_what(buf, sizeof buf, n, j, what),
	                                 &m, &want))
		return RUN_ERR;
	if (v->sym && vm_sym(v, i, pv, (int)val[PV_S], w, n, j, what))
		return RUN_ERR;
	return RUN_OK;
}

/* ---- compute and moves ---- */

static const PItem *
vm_item(const V *v, const Item *it)
{
	return v->pc->item[it->id];
}

static int
vm_rotated(const BufRef *br, int r, int i)
{
	return br->buf + sched_ix(&br->rot, r, i);
}

/* The block input j of region node rn reads for cnt slices from s: the
 * rows the rank's share of the result needs (vm_plain_want), cut along
 * the region's dim to the slices; a scratch buffer holds just that. */
static Box
vm_input(const V *v, int r, const RNode *rn, int j, int s, int cnt)
{
	int b = rn->inbuf[j];

	if (b >= 0 && ((Buf *)v->c->bufs.v[b])->kind == BK_TEMP)
		return vm_whole(v, vm_obj_temp(v, b));
	Box w = vm_plain_want(v, rn->node, j, r);
	if (rn->idim[j] >= 0) {
		int64_t se = w.ext[rn->idim[j]] / v->c->nslices;
		w.lo[rn->idim[j]] = s * se;
		w.ext[rn->idim[j]] = se * cnt;
	}
	return w;
}

/* A causal attention's query offset (a rope's first position) must be the
 * global row of its first query (row); in a symmetric run also on the
 * other ranks vm_sym looks at, the slice turned with the rank where the
 * schedule turns it (the offset is affine in both). */
static int
vm_qoff(V *v, int r, const Node *n, const PItem *p, const Want *q, int s)
{
	int qd = op_pos_dim(n);
	int ds[6] = {0}, nd = 1;

	if (v->sym && v->turns) {
		nd += vm_turns(v, s, -1, ds + 1);
	} else if (v->sym) { /* the same slice on every rank, as in vm_sym */
		ds[nd++] = 1;
		if (v->N > 2)
			ds[nd++] = v->N - 1;
	}
	for (int k = 0; k < nd; k++) {
		int rk = r + ds[k], sk = k && v->turns ? sched_turn(v->c, s, ds[k]) : s;
		int64_t val[NPV];
		vm_vals(v, val, rk, sk, 0, 0, 0);
		Box b = vm_want(v, q, rk, sk, 0);
		int64_t want = vm_global(v, rk, &b, sk).lo[qd];
		int64_t got = p->qoff ? plan_eval(&p->qstart, val) : 0;
		const char *what = op_attn(n->op) ? "query" : "position";
		if (got != want)
			return vm_fail(v, r, s, "%s gets %s offset %lld, but its first row is global "
			               "row %lld%s", n->out->name, what, (long long)got, (long long)want,
			               k ? arena_printf(v->t, " (on rank %d)", rk) : "");
	}
	return RUN_OK;
}

/* How to name the log-sum-exp operand of attention n. */
static const char *
vm_lse_what(V *v, const Node *n)
{
	return arena_printf(v->t, "the log-sum-exp %s of %s", n->lse->name, n->out->name);
}

int
vm_compute(V *v, int r, int i, const Item *it)
{
	const RNode *rn = v->c->region.v[it->u.comp.rn];
	const Node *n = rn->node;
	const PItem *p = vm_item(v, it);
	const Sel *sel = &it->u.comp.sel;
	int s0, calls = p->loop ? sel->cnt : 1, cnt = p->loop ? 1 : sel->cnt;
	const BufRef *d = &it->u.comp.dst;
	MView ops[MAXIN + 2];
	int nops = n->nin + 1 + (n->lse != NULL);
	char why[512];

	if (p->nview != n->nin + 1 + (n->lse != NULL))
		return vm_fail(v, r, -1, "%s has %d operands planned, not %d", n->out->name, p->nview,
		               n->nin + 1 + (n->lse != NULL));
	vf_sel(sel, r, i, &s0, 1);
	for (int u = 0; u < calls; u++) {
		int s = s0 + u * sel->stride;
		int64_t val[NPV];
		vm_vals(v, val, r, s, 0, u, 0);
		Want out = {.buf = vm_rotated(d, r, i), .cnt = cnt, .part = &d->part};
		if (vm_operand(v, r, i, &p->view[0], val, &out, n, -1, NULL, &ops[0]))
			return RUN_ERR;
		for (int j = 0; j < n->nin; j++) {
			Want in = {.cnt = cnt, .rn = rn, .j = j};
			vm_vals(v, val, r, s, 0, u, 0);
			if (vm_operand(v, r, i, &p->view[1 + j], val, &in, n, j, NULL, &ops[1 + j]))
				return RUN_ERR;
			if (j == 0 && op_pos(n) && vm_qoff(v, r, n, p, &in, s))
				return RUN_ERR;
		}
		Want lse = {.cnt = cnt, .rn = rn, .lse = 1};
		vm_vals(v, val, r, s, 0, u, 0);
		if (n->lse && vm_operand(v, r, i, &p->view[1 + n->nin], val, &lse, NULL, 0,
		                         vm_lse_what(v, n), &ops[1 + n->nin]))
			return RUN_ERR;
		if (vc_call(n, ops, nops, why, sizeof why))
			return vf_fail(v, r, s, "%s", why);
	}
	return RUN_OK;
}

int
vm_move(V *v, int r, int i, const Item *it)
{
	const PItem *p = vm_item(v, it);
	MView m[2];
	int s;

	vf_sel(&it->u.move.dst.sel, r, i, &s, 1);
	if (p->nview != (it->kind == IT_ZERO ? 1 : 2))
		return vm_fail(v, r, s, "a move has %d views planned, not %d", p->nview,
		               it->kind == IT_ZERO ? 1 : 2);
	for (int k = 0; k < p->nview; k++) {
		const BufRef *br = k ? &it->u.move.src : &it->u.move.dst;
		int64_t val[NPV];
		Want w = {.buf = vm_rotated(br, r, i), .cnt = br->sel.cnt, .part = &br->part};
		vm_vals(v, val, r, s, 0, 0, 0);
		if (vm_operand(v, r, i, &p->view[k], val, &w, NULL, 0, k ? "the source of a copy" :
		               "the destination of a copy", &m[k]))
			return RUN_ERR;
	}
	/* cfrt_copy and cfrt_add take views of the same dims */
	int same = p->nview < 2 || m[0].nd == m[1].nd;
	for (int d = 0; p->nview == 2 && same && d < m[0].nd; d++)
		same = m[0].dim[d] == m[1].dim[d];
	return same ? RUN_OK : vf_fail(v, r, s, "the runtime call of a %s would be refused: its "
	                               "views differ in shape", it->kind == IT_ADD ? "sum" : "copy");
}

/* ---- request and staging slots ---- */

static int *
vm_req(V *v, int r, int label, int k)
{
	return &v->rk[r].req[label * v->maxslots + k];
}

/* The slot of (label, round), after checking the round can have one. */
static int
vm_slot(V *v, int r, int label, int round, int s)
{
	const PLabel *l = &v->pc->lab[label];

	if (l->blocking)
		return 0;
	if (round < 0)
		return vm_fail(v, r, s, "round %d of transfer #%d has no request slot", round, label), -1;
	return round % l->slots;
}

/* A post takes its slot, which must be free. */
static int
vm_take(V *v, int r, int label, int round, int s)
{
	int k = vm_slot(v, r, label, round, s);

	if (k < 0)
		return -1;
	if (v->pc->lab[label].blocking)
		return k;
	int *q = vm_req(v, r, label, k);
	if (*q >= 0)
		return vm_fail(v, r, s, "transfer #%d of round %d takes slot %d, which still holds "
		               "round %d: its request would be lost", label, round, k, *q), -1;
	*q = round;
	return k;
}

/* ---- point-to-point transfers ---- */

int
vm_post(V *v, int r, int i, const Item *it, const Xfer *x)
{
	const PItem *p = vm_item(v, it);
	int64_t val[NPV];
	MView m, st;
	Box want = vm_box_ref(v, r, x->buf, x->slice, x->part, 1);
	const char *what = it->kind == IT_SEND ? "the data of a send" : "the data of a receive";
	int k = vm_take(v, r, x->label, x->round, x->slice);

	Want w = {.buf = x->buf, .cnt = 1, .part = &it->u.xfer.buf.part};

	vm_vals(v, val, r, x->slice, 0, 0, 0);
	if (k < 0 || vm_operand(v, r, i, &p->view[0], val, &w, NULL, 0, what, NULL) ||
	    vm_view(v, r, i, &p->view[0], val, 0, &m))
		return RUN_ERR;
	if (p->count != vm_volume(&m))
		return vm_fail(v, r, x->slice, "%s passes %lld elements; its block has %lld", what,
		               (long long)p->count, (long long)vm_volume(&m));
	if (!p->staged)
		return vm_run(v, r, x->slice, what, &m, &want);
	if (vm_view(v, r, i, &p->stage, val, k, &st))
		return RUN_ERR;
	if (vm_volume(&st) != p->count || !vm_contig(&st))
		return vm_fail(v, r, x->slice, "%s is staged in %lld elements, not its %lld", what,
		               (long long)vm_volume(&st), (long long)p->count);
	return RUN_OK;
}

/* Both ends of a message are the same global elements. In a symmetric
 * run, q stands for the receive of rank d = s's peer, turned back by d. */
int
vm_pair(V *v, const Xfer *s, const Xfer *q)
{
	int d = v->sym ? s->peer : 0, rq = q->rank + d, sq = q->slice, pq = q->part;
	char a[160], b[160];

	if (v->sym) {
		sq = sched_turn(v->c, q->slice, d);
		pq = ((Buf *)v->c->bufs.v[q->buf])->nparts > 1 ? (q->part + d) % v->N : q->part;
	}
	Box bs = vm_box_ref(v, s->rank, s->buf, s->slice, s->part, 1);
	Box bq = vm_box_ref(v, rq, q->buf, sq, pq, 1);
	Box gs = vm_global(v, s->rank, &bs, s->slice), gq = vm_global(v, rq, &bq, sq);
	if (vm_global_eq(&gs, &gq))
		return RUN_OK;
	return vm_fail(v, q->rank, q->slice, "rank %d receives global elements %s of %s from rank "
	               "%d, which sends %s of %s", rq, vm_box_str(&gq, b, sizeof b),
	               vm_value(v, gq.obj)->name, s->rank, vm_box_str(&gs, a, sizeof a),
	               vm_value(v, gs.obj)->name);
}

/* A wait finds its round in its slot (x: the transfer it completes, or
 * NULL when this rank posted none of that round). */
int
vm_wait(V *v, int r, int label, int round, const Xfer *x)
{
	const PLabel *l = &v->pc->lab[label];

	if (l->blocking || round < 0)
		return RUN_OK;
	int k = round % l->slots, *q = vm_req(v, r, label, k);
	if (!x)
		return *q == round ? vm_fail(v, r, -1, "waits for round %d of transfer #%d, which "
		                             "it did not post, but slot %d says it did", round, label, k)
		                   : RUN_OK;
	if (*q != round)
		return vm_fail(v, r, x->slice, "waits for round %d of transfer #%d in slot %d, which "
		               "holds round %d: the wait would be skipped", round, label, k, *q);
	*q = -1;
	return RUN_OK;
}

/* ---- library collectives ---- */

/* The block the schedule gives element e of collective ci on side dir,
 * for rank r; 0 when the element does not touch r. */
static int
vm_coll_block(V *v, const CollInst *ci, int r, int dir, int e, Box *b, int *s)
{
	int part, buf = dir ? ci->it->u.coll.dst : ci->it->u.coll.src;

	if (!vf_elem(ci, r, dir, e, s, &part))
		return 0;
	*b = vm_box_ref(v, r, buf, *s, part, 1);
	return 1;
}

/* Checks one side of a collective: block u of the library's buffer (at
 * u * count) must be the u-th block the schedule names for this rank,
 * through the view handed over or through staging slot k. base: the
 * chunk base the plan's views get. */
static int
vm_side_at(V *v, int r, int i, const CollInst *ci, int dir, int k, int64_t base)
{
	const PItem *p = vm_item(v, ci->it);
	const PSide *sd = &p->side[dir];
	const char *what = dir ? "what a collective receives" : "what a collective sends";
	int64_t val[NPV];
	MView run, m;
	Box want;
	int u = 0, s;
	char bs[160], name[96];

	vm_vals(v, val, r, 0, 0, 0, base);
	if (!sd->staged && vm_view(v, r, i, &sd->view, val, 0, &run))
		return RUN_ERR;
	if (!sd->staged && (!vm_contig(&run) || vm_volume(&run) != p->count * sd->nblock))
		return vm_fail(v, r, -1, "%s is handed over as %lld elements from one pointer, which "
		               "are not one run of %d block%s of %lld", what, (long long)vm_volume(&run),
		               sd->nblock, sd->nblock == 1 ? "" : "s", (long long)p->count);
	for (int e = 0; e < ci->cnt; e++) {
		if (!vm_coll_block(v, ci, r, dir, e, &want, &s))
			continue;
		if (u >= sd->nblock)
			return vm_fail(v, r, s, "%s has more blocks than the plan's %d", what, sd->nblock);
		if (!sd->staged) {
			MView blk = vm_box_view(v, &want), w = vm_canon(&blk);
			int64_t at = vm_canon(&run).off + u * p->count;
			if (!vm_contig(&blk) || vm_volume(&blk) != p->count || blk.obj != run.obj ||
			    (p->count && w.off != at))
				return vm_fail(v, r, s, "%s: block %d of the library's buffer is not the "
				               "schedule's block %s of %s", what, u,
				               vm_box_str(&want, bs, sizeof bs),
				               vm_obj_name(v, want.obj, name, sizeof name));
		} else {
			vm_vals(v, val, r, s, 0, u, base);
			MView st;
			if (vm_view(v, r, i, &sd->view, val, 0, &m) || vm_check(v, r, s, what, &m, &want) ||
			    vm_view(v, r, i, &sd->stage, val, k, &st))
				return RUN_ERR;
			MView canon = vm_canon(&st);
			int64_t at = vm_volume(&canon) ? canon.off : 0;
			if (!vm_contig(&st) || vm_volume(&st) != p->count ||
			    at != k * vm_slot_elems(v, ci->it->u.coll.label, dir) + u * p->count)
				return vm_fail(v, r, s, "%s: block %d is staged at element %lld, not at block "
				               "%d of slot %d", what, u, (long long)at, u, k);
		}
		u++;
	}
	if (u != sd->nblock)
		return vm_fail(v, r, -1, "%s has %d blocks, the plan %d", what, u, sd->nblock);
	return RUN_OK;
}

/* vm_side_at for rank r and, in a symmetric run (every rank posts the
 * same chunk; its blocks are affine in the rank), for ranks 1 and N - 1. */
static int
vm_side(V *v, int r, int i, const CollInst *ci, int dir, int k, int64_t base)
{
	int rs[3] = {r, 1, v->N - 1};

	for (int j = 0; j < (v->sym ? 3 : 1); j++)
		if ((!j || rs[j] != rs[j - 1]) && vm_side_at(v, rs[j], i, ci, dir, k, base))
			return RUN_ERR;
	return RUN_OK;
}

int
vm_coll_post(V *v, int r, int i, const CollInst *ci)
{
	int k = vm_take(v, r, ci->label, ci->round, ci->s[0]);

	if (k < 0 || vm_side(v, r, i, ci, 0, k, ci->s[0]))
		return RUN_ERR;
	if (!v->pc->lab[ci->label].blocking) {
		v->rk[r].cbase[ci->label * v->maxslots + k] = ci->s[0];
		/* what is received in place is checked now; what is staged at the
		 * wait, where it is unpacked */
		if (vm_item(v, ci->it)->side[1].staged)
			return RUN_OK;
	}
	return vm_side(v, r, i, ci, 1, k, ci->s[0]);
}

/* The unpack at the wait builds its views from the saved base, or from
 * 0 when the plan says the unpack does not depend on it. */
int
vm_coll_wait(V *v, int r, const CollInst *ci)
{
	const PLabel *l = &v->pc->lab[ci->label];
	int k = vm_slot(v, r, ci->label, ci->round, ci->s[0]);

	if (l->blocking)
		return RUN_OK;
	if (k < 0)
		return RUN_ERR;
	int *q = vm_req(v, r, ci->label, k);
	if (*q != ci->round)
		return vm_fail(v, r, ci->s[0], "waits for round %d of collective #%d in slot %d, which "
		               "holds round %d", ci->round, ci->label, k, *q);
	*q = -1;
	if (!vm_item(v, ci->it)->side[1].staged)
		return RUN_OK;
	int64_t base = l->usebase ? v->rk[r].cbase[ci->label * v->maxslots + k] : 0;
	return vm_side(v, r, 0, ci, 1, k, base);
}

/* Every block a collective delivers is the same global elements as the
 * block it comes from. */
int
vm_coll_apply(V *v, const CollInst *ci)
{
	int op = ci->it->u.coll.op, gather = op == OP_ALL_GATHER || op == OP_ALL_TO_ALL;
	char a[160], b[160];
	int qs[3] = {0, 1, v->N - 1};
	/* a sum's element e: the global block the first rank to get it got,
	 * which every rank's contribution matched (checked[e]); a later rank
	 * that gets the same block matches them too (the same equality) */
	Box *first = gather ? NULL : arena_alloc(v->t, (size_t)ci->cnt * sizeof *first);
	char *checked = gather ? NULL : arena_alloc(v->t, (size_t)ci->cnt);

	/* in a symmetric run the boxes are affine in the receiving rank: its
	 * first two and its last prove the others */
	for (int j = 0, nq = v->sym ? 3 : v->N; j < nq; j++)
		for (int e = 0, s, t, q = v->sym ? qs[j] : j; e < ci->cnt; e++) {
			Box got, from;
			if (v->sym && j && q == qs[j - 1])
				break;
			if (!vm_coll_block(v, ci, q, 1, e, &got, &s))
				continue;
			Box gg = vm_global(v, q, &got, s);
			if (!gather && checked[e] && vm_global_eq(&gg, &first[e]))
				continue;
			if (!gather && !checked[e])
				first[e] = gg, checked[e] = 1;
			/* the source element: rank e's own (all_gather), rank e's
			 * element q (all_to_all), every rank's element e (sums) */
			int se = op == OP_ALL_TO_ALL ? q : e;
			for (int u = gather ? e : 0; u < (gather ? e + 1 : v->N); u++) {
				if (!vm_coll_block(v, ci, u, 0, se, &from, &t))
					return vm_fail(v, u, s, "gives no block %d to %s", se, op_info[op].name);
				Box gf = vm_global(v, u, &from, t);
				if (!vm_global_eq(&gg, &gf))
					return vm_fail(v, q, s, "%s delivers global elements %s of rank %d's %s "
					               "where %s of %s belong", op_info[op].name,
					               vm_box_str(&gf, a, sizeof a), u, vm_value(v, gf.obj)->name,
					               vm_box_str(&gg, b, sizeof b), vm_value(v, gg.obj)->name);
			}
		}
	return RUN_OK;
}

/* ---- setup ---- */

/* The objects' dims (values only when there is no collective). */
void
vm_objects(V *v)
{
	int n = vm_nvalues(v) + (v->c ? v->c->bufs.n + 2 * v->pc->nlab : 0);

	v->odims = arena_alloc(v->t, ((size_t)n + 1) * sizeof *v->odims);
	v->ond = arena_alloc(v->t, ((size_t)n + 1) * sizeof *v->ond);
	for (int o = 0; o < n; o++)
		v->ond[o] = vm_obj_dims_of(v, o, v->odims[o]);
}

void
vm_init(V *v)
{
	v->maxslots = 1;
	for (int lb = 0; lb < v->pc->nlab; lb++)
		if (v->pc->lab[lb].slots > v->maxslots)
			v->maxslots = v->pc->lab[lb].slots;
	size_t n = (size_t)(v->pc->nlab + 1) * (size_t)v->maxslots;
	for (int r = 0; r < v->nr; r++) {
		Rank *R = &v->rk[r];
		R->req = arena_alloc(v->t, n * sizeof *R->req);
		R->cbase = arena_alloc(v->t, n * sizeof *R->cbase);
		for (size_t j = 0; j < n; j++)
			R->req[j] = -1;
	}
	vm_objects(v);
}

/* ---- plain stages ---- */

/* The block of input j that a plain stage needs on rank r: along the
 * dims that the result's split dims map to (the op's slice-locality, or a
 * right-aligned broadcast of an elementwise operand), the result's global
 * rows (by its rank in each group that splits it); every other dim
 * whole. */
static Box
vm_plain_want(const V *v, const Node *n, int j, int r)
{
	const Value *o = n->out, *x = n->in[j];
	Box b = vm_whole(v, x->id);

	for (int d = 0; d < o->ndim; d++) {
		const Group *g = dist_split_group(&o->dist, d);
		int xd = n->inmap[j][d];
		if (!g || xd < 0)
			continue;
		/* rows of o map to rows of x in proportion (head split and merge
		 * turn D = H * Dh rows into H heads) */
		int64_t rk = vm_rank_in(v, r, g->id);
		int64_t le = value_rank_extent(o, d), xs = x->shape[xd], os = o->shape[d];
		int64_t held = dist_split_group(&x->dist, xd) ? rk * value_rank_extent(x, xd) : 0;
		b.lo[xd] = rk * le * xs / os - held;
		b.ext[xd] = le * xs / os;
	}
	return b;
}

/* The groups that split x, as bits by Group.id. */
static unsigned
vm_split_groups(const Value *x)
{
	unsigned m = 0;

	for (int k = 0; k < MAXGROUPS; k++)
		m |= x->dist.p[k].kind == DI_SPLIT ? 1u << k : 0;
	return m;
}

/* The groups that split n's result or an input. */
static unsigned
vm_node_groups(const Node *n)
{
	unsigned m = vm_split_groups(n->out);

	for (int j = 0; j < n->nin; j++)
		m |= vm_split_groups(n->in[j]);
	return m;
}

/* The checks of a plain stage for rank r (in group v->sg) and the context. */
static int
vm_plain_at(V *v, const Node *n, const PItem *p, int r)
{
	int64_t val[NPV];
	Want out = {.plain = n, .j = -1}, in[MAXIN];
	MView ops[MAXIN + 2];
	char why[512];

	vm_vals(v, val, r, -1, 0, 0, 0);
	if (vm_operand(v, r, 0, &p->view[0], val, &out, n, -1, NULL, &ops[0]))
		return RUN_ERR;
	for (int j = 0; j < n->nin; j++) {
		in[j] = (Want){.plain = n, .j = j};
		vm_vals(v, val, r, -1, 0, 0, 0);
		if (vm_operand(v, r, 0, &p->view[1 + j], val, &in[j], n, j, NULL, &ops[1 + j]))
			return RUN_ERR;
	}
	if (op_pos(n) && vm_qoff(v, r, n, p, &in[0], 0))
		return RUN_ERR;
	Want lse = {.plain = n, .lse = 1};
	vm_vals(v, val, r, -1, 0, 0, 0);
	if (n->lse && vm_operand(v, r, 0, &p->view[1 + n->nin], val, &lse, NULL, 0,
	                         vm_lse_what(v, n), &ops[1 + n->nin]))
		return RUN_ERR;
	if (vc_call(n, ops, n->nin + 1 + (n->lse != NULL), why, sizeof why))
		return vf_fail(v, r, -1, "%s", why);
	return RUN_OK;
}

int
vm_plain(V *v, const Node *n, const PItem *p)
{
	int (*ctx)[MAXGROUPS];
	unsigned mask = vm_node_groups(n) | plan_item_vars(p) >> PV_G |
	                (v->sg >= 0 ? 1u << v->sg : 0);
	int nview = n->nin + 1 + (n->lse != NULL);

	if (p->nview != nview)
		return vm_fail(v, 0, -1, "%s has %d operands planned, not %d", n->out->name, p->nview,
		               nview);
	/* both sides are affine in each rank: equal at 0 and 1, and in bounds
	 * at 0 and N - 1, of every group (vm_contexts), they are equal and in
	 * bounds on every rank */
	int nc = vm_contexts(v->t, &v->plan->s->g->groups, mask, &ctx);
	v->ctx = mask & ~(v->sg >= 0 ? 1u << v->sg : 0);
	for (int c = 0; c < nc; c++) {
		memcpy(v->grank, ctx[c], sizeof v->grank);
		if (vm_plain_at(v, n, p, v->sg >= 0 ? v->grank[v->sg] : 0))
			return RUN_ERR;
	}
	return RUN_OK;
}

/* ---- several groups: the ranks of the others ---- */

unsigned
vm_coll_groups(const Coll *c, const PColl *pc)
{
	unsigned m = 0;

	for (int b = 0; b < c->bufs.n; b++)
		m |= vm_split_groups(((Buf *)c->bufs.v[b])->v);
	for (int i = 0; i < c->region.n; i++)
		m |= vm_node_groups(((RNode *)c->region.v[i])->node);
	for (int id = 0; id < c->nitems; id++)
		m |= plan_item_vars(pc->item[id]) >> PV_G;
	return m & ~(1u << c->node->a.coll.group->id);
}

/* Test point i (0, 1, the last) of a group of n ranks, -1 when it repeats
 * an earlier one. */
static int
vm_point(int i, int n)
{
	int r = i == 0 ? 0 : i == 1 ? 1 : n - 1;

	return r >= n || (i == 2 && r <= 1) ? -1 : r;
}

int
vm_contexts(Arena *t, const Vec *groups, unsigned mask, int (**ctx)[MAXGROUPS])
{
	int idx[MAXGROUPS] = {0}, n = 0, cap = 1, ng = groups ? groups->n : 0;

	for (int k = 0; k < ng; k++)
		cap *= mask >> k & 1 ? 3 : 1;
	*ctx = arena_alloc(t, (size_t)cap * sizeof **ctx);
	for (;;) {
		int ok = 1, *c = (*ctx)[n];
		for (int k = 0; k < MAXGROUPS; k++) {
			c[k] = k < ng && mask >> k & 1 ? vm_point(idx[k], ((Group *)groups->v[k])->size) : 0;
			ok &= c[k] >= 0;
		}
		n += ok;
		int k = 0;
		while (k < ng && (!(mask >> k & 1) || ++idx[k] == 3))
			idx[k++] = 0;
		if (k == ng)
			return n;
	}
}
