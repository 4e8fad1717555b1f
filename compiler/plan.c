/* plan.c: the memory plan (plan.h). For every item of every lowered
 * collective and every plain stage: the views of its operands; for every
 * transfer whether it goes through staging; for every transfer label how
 * many rounds are in flight at once; and the workspace layout, where a
 * value lives from the first to the last stage that touches it (the
 * stages of one joint call, plan_joint, as one stage; the value between
 * them, which the call does not make, nowhere) and a collective's
 * scratch during its stage, objects whose stages overlap placed apart.
 * requires: a lowered schedule (lower.c).
 * ensures: every item and plain stage planned; every value some stage
 * touches (and is no input, weight or output) and every scratch buffer
 * and staging area placed in [0, wsbytes), aligned to PLAN_ALIGN; with
 * Graph.saved_ws, a value may instead be placed in the saved buffer
 * ([0, the forward graph's savedbytes)) where no saved tensor is live
 * in its stages (the forward's before the stage that writes it, the
 * backward's after the last stage that reads it); verify_prog.c proves
 * the layout, and verify_mem.c the rest. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct Pl {
	Plan *p;       /* NULL: one collective's items alone (plan_coll) */
	const Graph *g;
	Arena *a;
	const Coll *c;
	PColl *pc;
	int sg;        /* the collective's group (Group.id) */
} Pl;

int64_t
plan_align(int64_t bytes)
{
	return (bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
}

int64_t
plan_eval(const PExpr *e, const int64_t val[NPV])
{
	int64_t x = e->add;

	for (int v = 0; v < NPV; v++)
		x += e->c[v] * val[v];
	return e->mul * x;
}

int
plan_esize(const Coll *c)
{
	return dtype_size[c->node->in[0]->dtype];
}

int64_t
plan_temp_extent(const Coll *c, const Buf *b, int d)
{
	int64_t e = value_rank_extent(b->v, d);

	return d == b->dim ? e / c->nslices : e;
}

int
plan_rank_var(int k, int sg)
{
	return k == sg ? PV_R : PV_G + k;
}

int
plan_stage_group(const Stage *st)
{
	const Node *n = st->u.node;

	if (st->kind == ST_COLL)
		return st->u.coll->node->a.coll.group->id;
	for (int j = -1; j < n->nin; j++)
		for (int k = 0; k < MAXGROUPS; k++)
			if ((j < 0 ? n->out : n->in[j])->dist.p[k].kind != DI_REPL)
				return k;
	return -1;
}

int
plan_ix_mod(const Ix *x)
{
	if (x->kind == IX_PARTNER || x->n == 0)
		return 0;
	/* r itself and constants in range need no mod */
	return !((x->a == 1 && !x->b && !x->c) || (!x->a && !x->b && x->c >= 0 && x->c < x->n));
}

static Ix
ix_const(int k)
{
	return (Ix){IX_AFFINE, 0, 0, k, 0};
}

/* ---- views ---- */

static PExpr
pe_slices(int64_t ext) /* ext * s */
{
	PExpr e = {.mul = ext};

	e.c[PV_S] = 1;
	return e;
}

static void
pv_cut(PView *v, int dim, PExpr start, int64_t len)
{
	if (v->ncut == MAXCUT)
		die("plan: more than %d cuts of one view", MAXCUT);
	v->cut[v->ncut++] = (PCut){dim, start, len};
}

static PView
pv_value(const Value *v)
{
	PView w = {.base = PB_VALUE, .id = v->id, .rot = ix_const(0), .part = ix_const(0)};

	return w;
}

/* The dims of view v (full: those of its base, uncut). */
static int
pv_dims(const Pl *L, const PView *v, int64_t *dims, int64_t *full)
{
	const Value *val;
	int nd;

	if (v->base == PB_STAGE) {
		memcpy(dims, v->dims, sizeof v->dims[0] * (size_t)v->nd);
		memcpy(full, v->dims, sizeof v->dims[0] * (size_t)v->nd);
		return v->nd;
	}
	if (v->base == PB_TEMP) {
		const Buf *b = L->c->bufs.v[v->id];
		nd = b->v->ndim;
		for (int d = 0; d < nd; d++)
			dims[d] = full[d] = plan_temp_extent(L->c, b, d);
		return nd;
	}
	val = L->g->values.v[v->id];
	nd = val->ndim;
	for (int d = 0; d < nd; d++)
		dims[d] = full[d] = value_rank_extent(val, d);
	for (int k = 0; k < v->ncut; k++)
		dims[v->cut[k].dim] = v->cut[k].len;
	return nd;
}

/* Is view v one contiguous run: every dim before the outermost cut one
 * has extent 1, every dim after it is whole? */
static int
pv_contig(const Pl *L, const PView *v)
{
	int64_t dims[MAXDIM], full[MAXDIM];
	int nd = pv_dims(L, v, dims, full), j = 0;

	while (j < nd && dims[j] == full[j])
		j++;
	if (j == nd)
		return 1; /* nothing cut */
	for (int d = 0; d < j; d++)
		if (dims[d] != 1)
			return 0;
	for (int d = j + 1; d < nd; d++)
		if (dims[d] != full[d])
			return 0;
	return 1;
}

static int64_t
pv_elems(const Pl *L, const PView *v)
{
	int64_t dims[MAXDIM], full[MAXDIM], n = 1;
	int nd = pv_dims(L, v, dims, full);

	for (int d = 0; d < nd; d++)
		n *= dims[d];
	return n;
}

/* A view of the slices s .. s+cnt-1 (PV_S) of buffer reference r; slot
 * (an expression of the first slot's slice index) overrides PV_S when
 * given. */
static PView
pv_ref_at(const Pl *L, const BufRef *r, int cnt, const PExpr *slot)
{
	const Coll *c = L->c;
	const Buf *b = c->bufs.v[r->buf];
	PView v;

	if (b->kind == BK_TEMP) {
		v = (PView){.base = PB_TEMP, .id = b->set, .rot = r->rot, .part = ix_const(0)};
		if (r->buf != b->set) {
			if (r->rot.kind != IX_AFFINE || r->rot.a || r->rot.b || r->rot.c)
				die("plan: a rotated reference to member %d of a set", r->buf - b->set);
			v.rot = ix_const(r->buf - b->set);
		}
		if (cnt != 1)
			die("plan: %d slices of scratch buffer %s", cnt, b->name);
		return v;
	}
	v = pv_value(b->v);
	if (cnt < b->nslots) {
		int64_t se = value_rank_extent(b->v, b->dim) / b->nslots;
		PExpr st = slot ? *slot : pe_slices(se);
		st.mul = se;
		if (b->own)
			st.c[PV_R] -= b->nslots;
		pv_cut(&v, b->dim, st, se * cnt);
	}
	if (b->nparts > 1) {
		int64_t pe = value_rank_extent(b->v, b->pdim) / b->nparts;
		PExpr st = {.mul = pe};
		st.c[PV_PART] = 1;
		v.part = r->part;
		pv_cut(&v, b->pdim, st, pe);
	}
	return v;
}

/* All of buffer b: the value, or the scratch buffer. */
static PView
pv_whole(const Pl *L, int b)
{
	const Buf *bf = L->c->bufs.v[b];

	if (bf->kind == BK_VALUE)
		return pv_value(bf->v);
	return (PView){.base = PB_TEMP, .id = bf->set, .rot = ix_const(b - bf->set),
	               .part = ix_const(0)};
}

static PView
pv_ref(const Pl *L, const BufRef *r, int cnt)
{
	return pv_ref_at(L, r, cnt, NULL);
}

/* A contiguous staging view of label lb's side, shaped like v; block:
 * the view is block u of blk elements in the slot. */
static PView
pv_stage(const Pl *L, int lb, int side, const PView *like, int64_t blk)
{
	PView s = {.base = PB_STAGE, .id = lb, .rot = ix_const(0), .part = ix_const(0),
	           .side = side, .blk = blk};
	int64_t full[MAXDIM];

	s.nd = pv_dims(L, like, s.dims, full);
	return s;
}

static unsigned
pe_vars(const PExpr *e)
{
	unsigned m = 0;

	for (int v = 0; v < NPV; v++)
		m |= e->c[v] ? 1u << v : 0;
	return m;
}

/* The PV_* a view's offsets use, as bits. */
static unsigned
pv_vars(const PView *v)
{
	unsigned m = 0;

	for (int k = 0; k < v->ncut; k++)
		m |= pe_vars(&v->cut[k].start);
	return m;
}

/* ---- items ---- */

static PLabel *
pl_label(Pl *L, int lb)
{
	if (lb < 0 || lb >= L->pc->nlab)
		die("plan: label %d out of range", lb);
	return &L->pc->lab[lb];
}

static void
pl_stage_need(Pl *L, int lb, int side, int64_t elems)
{
	PLabel *l = pl_label(L, lb);

	l->staged[side] = 1;
	if (elems > l->stage_elems[side])
		l->stage_elems[side] = elems;
}

static void pl_window(const Node *n, int j, PView *v, int sg);
static void pl_qoff(const Node *n, PItem *p, int sg);

static void
pl_compute(Pl *L, const Item *it, PItem *p)
{
	const Coll *c = L->c;
	const RNode *rn = c->region.v[it->u.comp.rn];
	const Node *n = rn->node;
	const Sel *sel = &it->u.comp.sel;
	int cnt;

	p->loop = sel->cnt > 1 && sel->stride != 1;
	cnt = p->loop ? 1 : sel->cnt;
	p->view[0] = pv_ref(L, &it->u.comp.dst, cnt);
	for (int j = 0; j < n->nin; j++) {
		PView *v = &p->view[1 + j];
		if (rn->inbuf[j] >= 0) {
			BufRef br = {rn->inbuf[j], ix_const(0), *sel, ix_const(0)};
			*v = rn->idim[j] < 0 ? pv_whole(L, rn->inbuf[j]) : pv_ref(L, &br, cnt);
			continue;
		}
		*v = pv_value(n->in[j]);
		if (rn->idim[j] >= 0) {
			int64_t se = value_rank_extent(n->in[j], rn->idim[j]) / c->nslices;
			pv_cut(v, rn->idim[j], pe_slices(se), se * cnt);
		}
	}
	for (int j = 0; j < n->nin; j++)
		pl_window(n, j, &p->view[1 + j], L->sg);
	p->nview = 1 + n->nin;
	if (n->lse) { /* the log-sum-exp rows of the slices of the result */
		PView *v = &p->view[p->nview++];
		int64_t se = value_rank_extent(n->lse, rn->odim) / c->nslices;
		*v = pv_value(n->lse);
		pv_cut(v, rn->odim, pe_slices(se), se * cnt);
	}
	pl_qoff(n, p, L->sg);
}

static void
pl_move(Pl *L, const Item *it, PItem *p)
{
	p->view[0] = pv_ref(L, &it->u.move.dst, it->u.move.dst.sel.cnt);
	p->nview = 1;
	if (it->kind != IT_ZERO)
		p->view[p->nview++] = pv_ref(L, &it->u.move.src, it->u.move.src.sel.cnt);
}

static void
pl_xfer(Pl *L, const Item *it, PItem *p)
{
	int lb = it->u.xfer.label;
	PLabel *l = pl_label(L, lb);

	l->kind = it->kind;
	l->lane = it->u.xfer.tag;
	p->view[0] = pv_ref(L, &it->u.xfer.buf, 1);
	p->nview = 1;
	p->count = pv_elems(L, &p->view[0]);
	if (pv_contig(L, &p->view[0]))
		return;
	p->staged = 1;
	p->stage = pv_stage(L, lb, 0, &p->view[0], 0);
	pl_stage_need(L, lb, 0, p->count);
	l->unpack |= it->kind == IT_RECV;
}

/* ---- library collectives ---- */

/* Whether one side of a collective is a single block: this rank's slice
 * of an all_gather's input or of a reduce_scatter's result, or an
 * all_reduce's chunk. */
static int
coll_one_block(const Item *it, int recv)
{
	int op = it->u.coll.op;

	return op == OP_ALL_REDUCE || it->u.coll.sel.cnt == 1 ||
	       (op == OP_ALL_GATHER && !recv) || (op == OP_REDUCE_SCATTER && recv);
}

/* The chunk's slice base + k_u * u + k_r * r (the slot index expression
 * of a block). */
static PExpr
pe_block(int64_t ku, int64_t kr)
{
	PExpr e = {.mul = 1};

	e.c[PV_BASE] = 1;
	e.c[PV_U] = ku;
	e.c[PV_R] = kr;
	return e;
}

/* Block u of one side: rank u's slice base + u * stride, this rank's
 * slice base + r * stride, the chunk itself (all_reduce), or, for what an
 * all_to_all receives, part u of this rank's slot. */
static PView
pl_block(Pl *L, const Item *it, int recv, int one)
{
	const Buf *b = L->c->bufs.v[recv ? it->u.coll.dst : it->u.coll.src];
	int op = it->u.coll.op, stride = it->u.coll.sel.stride;
	BufRef br = {recv ? it->u.coll.dst : it->u.coll.src, ix_const(0), it->u.coll.sel, ix_const(0)};
	PExpr slot;
	PView v;

	if (op == OP_ALL_REDUCE)
		slot = pe_block(0, 0);
	else if (one || (op == OP_ALL_TO_ALL && recv))
		slot = pe_block(0, stride);
	else
		slot = pe_block(stride, 0);
	v = pv_ref_at(L, &br, 1, &slot);
	if (op == OP_ALL_TO_ALL && recv && !one) {
		/* the part is rank u's: PV_PART stands for u */
		for (int k = 0; k < v.ncut; k++)
			if (v.cut[k].dim == b->pdim && b->nparts > 1) {
				v.cut[k].start.c[PV_PART] = 0;
				v.cut[k].start.c[PV_U] = 1;
			}
	}
	return v;
}

/* Whether the N blocks of a side lie in one contiguous run in rank order
 * (the library's layout), and the view of that run. */
static int
pl_run(Pl *L, const Item *it, int recv, PView *run)
{
	const Buf *b = L->c->bufs.v[recv ? it->u.coll.dst : it->u.coll.src];
	const Sel *sel = &it->u.coll.sel;
	PView blk = pl_block(L, it, recv, 0);

	if (it->u.coll.op == OP_ALL_TO_ALL && recv) {
		/* block u is part u of the only slot: the whole buffer */
		*run = pv_value(b->v);
		return b->nparts == sel->cnt && b->nslots == 1 && pv_contig(L, &blk);
	}
	if (b->own || b->nparts > 1 || sel->stride != 1 || !pv_contig(L, &blk))
		return 0;
	PExpr base = pe_block(0, 0);
	BufRef br = {recv ? it->u.coll.dst : it->u.coll.src, ix_const(0), *sel, ix_const(0)};
	*run = pv_ref_at(L, &br, sel->cnt, &base);
	return 1;
}

static void
pl_side(Pl *L, const Item *it, PItem *p, int recv)
{
	const Buf *b = L->c->bufs.v[recv ? it->u.coll.dst : it->u.coll.src];
	PSide *s = &p->side[recv];
	int one = coll_one_block(it, recv);

	s->nblock = one ? 1 : it->u.coll.sel.cnt;
	if (b->kind == BK_VALUE) {
		if (one) {
			s->view = pl_block(L, it, recv, 1);
			if (pv_contig(L, &s->view))
				return;
		} else if (pl_run(L, it, recv, &s->view)) {
			return;
		}
	}
	s->staged = 1;
	s->view = pl_block(L, it, recv, one);
	s->stage = pv_stage(L, it->u.coll.label, recv, &s->view, one ? 0 : p->count);
	pl_stage_need(L, it->u.coll.label, recv, p->count * s->nblock);
}

static void
pl_coll(Pl *L, const Item *it, PItem *p)
{
	PLabel *l = pl_label(L, it->u.coll.label);
	const Buf *src = L->c->bufs.v[it->u.coll.src];

	l->kind = IT_COLL;
	l->coll = it;
	l->blocking = it->u.coll.blocking;
	p->count = src->slot_elems;
	for (int recv = 0; recv < 2; recv++)
		pl_side(L, it, p, recv);
	if (p->side[1].staged && !l->blocking)
		l->usebase = pv_vars(&p->side[1].view) >> PV_BASE & 1;
}

static void
pl_item(Pl *L, const Item *it)
{
	PItem *p = arena_alloc(L->a, sizeof *p);

	L->pc->item[it->id] = p;
	switch (it->kind) {
	case IT_COMPUTE: pl_compute(L, it, p); break;
	case IT_ADD: case IT_COPY: case IT_ZERO: pl_move(L, it, p); break;
	case IT_SEND: case IT_RECV: pl_xfer(L, it, p); break;
	case IT_COLL: pl_coll(L, it, p); break;
	case IT_WAIT: pl_label(L, it->u.wait.label); break;
	case IT_HOST: break; /* its plain stage's plan: plain[u.host.stage] */
	}
}

/* ---- labels: how many rounds of one label are in flight at once ---- */

/* The label of a transfer or wait item, its round in *round; -1 for any
 * other item. */
static int
item_label(const Item *it, const Ix **round)
{
	switch (it->kind) {
	case IT_SEND:
	case IT_RECV: *round = &it->u.xfer.round; return it->u.xfer.label;
	case IT_COLL: *round = &it->u.coll.round; return it->u.coll.label;
	case IT_WAIT: *round = &it->u.wait.round; return it->u.wait.label;
	default: return -1;
	}
}

typedef struct Win {
	Pl *L;
	int *posted;  /* [label][round]: 1 + the rank that posted it and has
	               * not waited, else anything else */
	int *lo;      /* by label: the oldest round posted (maxround: none) */
	int *n;       /* by label: rounds posted and not waited */
	int maxround, r;
} Win;

/* A post marks its round and widens its label's window back to the
 * oldest round still posted; a wait clears its round. */
static void
win_track(Win *w, const Item *it, int r, int i)
{
	const Ix *x;
	int lb = item_label(it, &x);

	if (lb < 0)
		return;
	int *row = w->posted + (size_t)lb * (size_t)w->maxround, mine = 1 + r;
	int rd = sched_ix(x, r, i);
	if (rd < 0 || rd >= w->maxround)
		die("plan: round %d of label %d out of range", rd, lb);
	if (it->kind == IT_WAIT) {
		if (row[rd] != mine)
			return; /* never posted: the wait is skipped */
		row[rd] = 0;
		if (--w->n[lb] == 0)
			w->lo[lb] = w->maxround;
		while (w->lo[lb] < w->maxround && row[w->lo[lb]] != mine)
			w->lo[lb]++;
		return;
	}
	if (row[rd] != mine)
		w->n[lb]++;
	row[rd] = mine;
	if (rd < w->lo[lb])
		w->lo[lb] = rd;
	while (row[w->lo[lb]] != mine)
		w->lo[lb]++;
	PLabel *l = &w->L->pc->lab[lb];
	if (rd - w->lo[lb] + 1 > l->slots)
		l->slots = rd - w->lo[lb] + 1;
}

/* Simulates every rank: the rounds of one label posted and not yet
 * waited always fit in a window of `slots` consecutive rounds. */
static void
pl_windows(Pl *L)
{
	const Coll *c = L->c;
	Win w = {L, NULL, NULL, NULL, 1, 0};
	Arena *t = arena_scratch(L->a);
	ArenaMark mark = arena_mark(t);

	for (int k = 0; k < c->phases.n; k++)
		w.maxround += ((Phase *)c->phases.v[k])->nrounds + 3;
	w.posted = arena_alloc(t, ((size_t)L->pc->nlab * (size_t)w.maxround + 1) * sizeof *w.posted);
	w.lo = arena_alloc(t, ((size_t)L->pc->nlab + 1) * sizeof *w.lo);
	w.n = arena_alloc(t, ((size_t)L->pc->nlab + 1) * sizeof *w.n);
	/* a symmetric program's ranks have the same windows (sched.h) */
	for (int r = 0, nr = sched_symmetric(c) ? 1 : c->N; r < nr; r++) {
		for (int lb = 0; lb < L->pc->nlab; lb++)
			w.lo[lb] = w.maxround, w.n[lb] = 0;
		SchedPos p = {0};
		for (const Item *it; (it = sched_next(c, r, &p));)
			win_track(&w, it, r, p.i);
	}
	arena_release(t, mark);
	for (int lb = 0; lb < L->pc->nlab; lb++)
		if (L->pc->lab[lb].slots < 1)
			L->pc->lab[lb].slots = 1;
}

static void
pl_coll_plan(Pl *L, const Coll *c)
{
	PColl *pc = arena_alloc(L->a, sizeof *pc);
	int nlab = c->nlabels;

	L->c = c;
	L->pc = pc;
	pc->plan = L->p;
	pc->c = c;
	pc->item = arena_alloc(L->a, (size_t)(c->nitems + 1) * sizeof *pc->item);
	pc->nlab = nlab;
	pc->lab = arena_alloc(L->a, (size_t)(nlab + 1) * sizeof *pc->lab);
	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++) {
				const Item *it = ph->lanes[t].v[j];
				const Ix *x;
				int lb = item_label(it, &x);
				pl_item(L, it);
				if (lb >= 0)
					pc->lab[lb].used = 1;
			}
	}
	pl_windows(L);
	for (int lb = 0; lb < nlab; lb++)
		for (int side = 0; side < 2; side++)
			pc->lab[lb].slot_bytes[side] = plan_align(pc->lab[lb].stage_elems[side] *
			                                          plan_esize(c));
	pc->off = arena_alloc(L->a, (size_t)(c->bufs.n + 1) * sizeof *pc->off);
}

PColl *
plan_coll(Arena *a, const Graph *g, const Coll *c)
{
	Pl L = {.g = g, .a = a, .sg = c->node->a.coll.group->id};

	pl_coll_plan(&L, c);
	return L.pc;
}

/* ---- plain stages: one op on whole per-rank tensors ---- */

/* Cuts view v of input j of n to this rank's window: where n's result is
 * split along d (over a group whose rank is a variable of stage group
 * sg) and the input holds all of the dim d maps to, the rows of that dim
 * for the result's rows (in proportion: head split and merge turn D = H *
 * Dh rows into H heads). A group of one rank has the whole dim: no cut
 * (a region may slice that dim, as over one rank it is split over none,
 * and the window, cut after the slice, would leave it). */
static void
pl_window(const Node *n, int j, PView *v, int sg)
{
	const Value *x = n->in[j], *o = n->out;

	for (int d = 0; d < o->ndim; d++) {
		const Group *g = dist_split_group(&o->dist, d), *h;
		int xd = n->inmap[j][d]; /* graph.c: slice-locality */
		if (!g || xd < 0 || g->size == 1)
			continue;
		if ((h = dist_split_group(&x->dist, xd)) && h != g) /* the rules refuse it */
			die("plan: %s split along %d over %s, its input %s over %s", o->name, d, g->name,
			    x->name, h->name);
		if (h)
			continue;
		int64_t le = value_rank_extent(o, d) * x->shape[xd] / o->shape[d];
		PExpr st = {.mul = le};
		st.c[plan_rank_var(g->id, sg)] = 1;
		pv_cut(v, xd, st, le);
	}
}

/* The global row of the first query of attention n, whose query operand
 * (input 0) this rank views as q: the starts of q's cuts along the query
 * dim, and the rows before this rank's when q is split along it. */
static PExpr
pl_qstart(const Node *n, const PView *q, int sg)
{
	const Value *x = n->in[0];
	int qd = op_pos_dim(n);
	const Group *g = dist_split_group(&x->dist, qd);
	PExpr e = {.mul = 1};

	for (int k = 0; k < q->ncut; k++) {
		const PCut *c = &q->cut[k];
		if (c->dim != qd)
			continue;
		for (int v = 0; v < NPV; v++)
			e.c[v] += c->start.mul * c->start.c[v];
		e.add += c->start.mul * c->start.add;
	}
	if (g)
		e.c[plan_rank_var(g->id, sg)] += value_rank_extent(x, qd);
	return e;
}

/* A causal attention's query offset or a rope's first position, when it
 * is not 0. */
static void
pl_qoff(const Node *n, PItem *p, int sg)
{
	if (!op_pos(n))
		return;
	p->qstart = pl_qstart(n, &p->view[1], sg);
	for (int v = 0; v < NPV; v++)
		p->qoff |= p->qstart.c[v] != 0;
	p->qoff |= p->qstart.add != 0;
}

static PItem *
pl_plain(const Node *n, Arena *a, int sg)
{
	PItem *p = arena_alloc(a, sizeof *p);

	p->view[0] = pv_value(n->out);
	for (int j = 0; j < n->nin; j++) {
		p->view[1 + j] = pv_value(n->in[j]);
		pl_window(n, j, &p->view[1 + j], sg);
	}
	p->nview = 1 + n->nin;
	if (n->lse)
		p->view[p->nview++] = pv_value(n->lse);
	pl_qoff(n, p, sg);
	return p;
}

/* ---- what the printer needs ---- */

static unsigned
ix_need(const Ix *x)
{
	if (x->kind == IX_PARTNER)
		return PN_R | PN_PARTNER;
	return (x->a ? PN_R : 0) | (plan_ix_mod(x) ? PN_MOD : 0);
}

static unsigned
sel_need(const Sel *s)
{
	return ix_need(&s->lo) | (s->per ? ix_need(&s->hi) : 0);
}

static unsigned
view_need(const Coll *c, const PView *v)
{
	unsigned n = 0;

	if (v->base == PB_TEMP && c && ((Buf *)c->bufs.v[v->id])->nset > 1)
		n |= ix_need(&v->rot);
	for (int k = 0; k < v->ncut; k++) {
		n |= v->cut[k].start.c[PV_R] ? PN_R : 0;
		n |= v->cut[k].start.c[PV_PART] ? ix_need(&v->part) : 0;
	}
	return n;
}

unsigned
plan_item_vars(const PItem *p)
{
	unsigned m = p->qoff ? pe_vars(&p->qstart) : 0;

	for (int k = 0; k < p->nview; k++)
		m |= pv_vars(&p->view[k]);
	for (int k = 0; k < 2; k++)
		m |= p->side[k].nblock ? pv_vars(&p->side[k].view) : 0;
	return m;
}

static const Sel *
item_sel(const Item *it)
{
	switch (it->kind) {
	case IT_COMPUTE: return &it->u.comp.sel;
	case IT_ADD: case IT_COPY: case IT_ZERO: return &it->u.move.dst.sel;
	case IT_SEND: case IT_RECV: return &it->u.xfer.buf.sel;
	case IT_COLL: return &it->u.coll.sel;
	default: return NULL;
	}
}

static unsigned
item_need(const Coll *c, const Item *it, const PItem *p)
{
	unsigned n = it->g.active ? PN_R | PN_PARTNER : 0;
	const Ix *rd;

	if (item_label(it, &rd) >= 0)
		n |= ix_need(rd);
	if (it->kind == IT_SEND || it->kind == IT_RECV)
		n |= ix_need(&it->u.xfer.peer);
	if (it->kind == IT_WAIT)
		return n;
	/* the trace line (cfrt_what) names the item's slice even where no
	 * view uses it: a collective over a group of 1 copies slice r */
	if (item_sel(it))
		n |= sel_need(item_sel(it));
	if (plan_item_vars(p) & 1u << PV_R)
		n |= PN_R;
	for (int k = 0; k < p->nview; k++)
		n |= view_need(c, &p->view[k]);
	for (int s = 0; it->kind == IT_COLL && s < 2; s++)
		n |= view_need(c, &p->side[s].view);
	return n;
}

/* A plain stage's expressions: the rank is its result's in the group the
 * result is split over (the window of an operand is cut to it). */
static unsigned
plain_need(const PItem *p)
{
	unsigned n = 0;

	for (int j = 0; j < p->nview; j++)
		n |= view_need(NULL, &p->view[j]);
	if (plan_item_vars(p) & 1u << PV_R)
		n |= PN_R;
	return n;
}

static unsigned
coll_need(const Coll *c, const PColl *pc)
{
	unsigned n = 0;

	for (int ph = 0; ph < c->phases.n; ph++) {
		const Phase *f = c->phases.v[ph];
		for (int t = 0; t < f->nlanes; t++)
			for (int j = 0; j < f->lanes[t].n; j++) {
				const Item *it = f->lanes[t].v[j];
				n |= item_need(c, it, pc->item[it->id]);
			}
	}
	return n;
}


/* The PV_G + k of every view and offset of p, as bits k. */
static unsigned
item_granks(const PItem *p)
{
	return plan_item_vars(p) >> PV_G;
}

static void
pl_need(Plan *P)
{
	const Sched *s = P->s;

	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		unsigned n, gr = 0;
		if (st->kind == ST_COMPUTE) {
			n = plain_need(P->plain[k]);
			gr = item_granks(P->plain[k]);
		} else {
			const PColl *pc = P->coll[ci++];
			n = coll_need(st->u.coll, pc);
			for (int id = 0; id < st->u.coll->nitems; id++)
				gr |= item_granks(pc->item[id]);
		}
		if (n & PN_R && P->group[k] >= 0)
			P->rank_used[P->group[k]] = 1;
		for (int g = 0; g < s->g->groups.n; g++)
			if (gr >> g & 1)
				P->rank_used[g] = 1;
		P->need |= n;
	}
}

/* ---- the workspace ---- */

/* An object to place: bytes, live from stage lo to stage hi, in the
 * workspace (space 0) or the saved buffer (space 1). */
typedef struct Obj {
	int64_t bytes, off;
	int lo, hi;
	int64_t *out; /* where its offset goes; NULL: placed already (a saved
	               * tensor, at its offset in space 1) */
	char *spill;  /* not NULL: it may go to space 1, and *spill says
	               * whether it did */
	int space;
	int twin;     /* an object whose bytes it may take (the input of the
	               * elementwise stage that makes it, read there last),
	               * or -1 */
} Obj;

typedef struct Ws {
	Arena *t;
	Obj *o;
	int n, cap;
	int64_t end;
	int64_t lim;  /* space 1's bytes: the saved buffer's */
} Ws;

static void
ws_add(Ws *w, int64_t bytes, int lo, int hi, int64_t *out)
{
	w->o = arena_grow(w->t, w->o, w->n, &w->cap, 64, sizeof *w->o);
	w->o[w->n++] = (Obj){plan_align(bytes), -1, lo, hi, out, NULL, 0, -1};
}

static int
cmp_off(const void *x, const void *y)
{
	const Obj *a = *(Obj *const *)x, *b = *(Obj *const *)y;

	return (a->off > b->off) - (a->off < b->off);
}

/* The lowest offset in space sp where o overlaps none of objects
 * [0, k) of that space whose stages overlap its own. */
static int64_t
ws_fit(Ws *w, Obj **live, int k, int sp)
{
	Obj *o = &w->o[k];
	int n = 0;

	for (int j = 0; j < k; j++)
		if (w->o[j].space == sp && w->o[j].lo <= o->hi && o->lo <= w->o[j].hi)
			live[n++] = &w->o[j];
	qsort(live, (size_t)n, sizeof *live, cmp_off);
	int64_t at = 0;
	for (int j = 0; j < n; j++) {
		if (live[j]->off >= at + o->bytes)
			break;
		if (live[j]->off + live[j]->bytes > at)
			at = live[j]->off + live[j]->bytes;
	}
	return at;
}

/* Whether object k may take its twin's bytes: the twin placed, of its
 * size, dead after the stage that makes k, in a space k may use, and no
 * other object placed so far on those bytes in k's stages. */
static int
ws_takes(const Ws *w, int k)
{
	const Obj *o = &w->o[k], *t = &w->o[o->twin];

	if (t->off < 0 || t->bytes != o->bytes || t->hi != o->lo || (t->space && !o->spill))
		return 0;
	for (int j = 0; j < k; j++) {
		const Obj *x = &w->o[j];
		if (j != o->twin && x->off >= 0 && x->space == t->space && x->lo <= o->hi &&
		    o->lo <= x->hi && x->off < t->off + t->bytes && t->off < x->off + x->bytes)
			return 0;
	}
	return 1;
}

/* First fit: each object, in the order added, at the lowest offset where
 * it overlaps no placed object whose stages overlap its own; one that
 * may spill goes to the saved buffer where it fits there. */
static void
ws_place(Ws *w)
{
	Obj **live = arena_alloc(w->t, ((size_t)w->n + 1) * sizeof *live);

	for (int k = 0; k < w->n; k++) {
		Obj *o = &w->o[k];
		if (!o->out)
			continue;
		int64_t at = -1;
		if (o->twin >= 0 && ws_takes(w, k)) {
			const Obj *t = &w->o[o->twin];
			o->space = t->space;
			if (o->spill)
				*o->spill = (char)t->space;
			o->off = *o->out = t->off;
			continue;
		}
		if (o->spill) {
			o->space = 1;
			at = ws_fit(w, live, k, 1);
			if (at + o->bytes > w->lim)
				at = -1;
			*o->spill = at >= 0;
		}
		if (at < 0) {
			o->space = 0;
			at = ws_fit(w, live, k, 0);
			if (at + o->bytes > w->end)
				w->end = at + o->bytes;
		}
		o->off = at;
		*o->out = at;
	}
}

/* The saved tensors as objects of space 1, live in the stages where
 * their bytes hold them: on the forward from the stage that writes one
 * to the end of the pass, on the backward from its start to the last
 * stage that reads it (ns: past the last stage). */
static void
ws_saved(Plan *P, Ws *w, int *objof)
{
	const Graph *g = P->s->g;
	int ns = P->s->stages.n;

	w->lim = (g->fwd ? g->fwd : g)->savedbytes;
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		if (v->home != HO_SAVED)
			continue;
		int lo = 0, hi = ns;
		if (!g->fwd && P->first[i] >= 0)
			lo = P->first[i];
		if (g->fwd) {
			if (P->last[i] < 0)
				continue; /* never read: its bytes are free */
			hi = P->last[i];
		}
		objof[i] = w->n;
		ws_add(w, dtype_size[v->dtype] * value_rank_elems(v), lo, hi, NULL);
		w->o[w->n - 1].off = v->soff;
		w->o[w->n - 1].space = 1;
	}
}

const Node *
plan_whole(const Plan *P, int k)
{
	const Sched *s = P->s;
	const PItem *p = k < s->stages.n ? P->plain[k] : NULL;

	if (!p || sched_span_lo(s, k) != k)
		return NULL;
	for (int j = 0; j < p->nview; j++)
		if (p->view[j].ncut > 0)
			return NULL;
	return ((Stage *)s->stages.v[k])->u.node;
}

/* plan_whole's node where it is of kind op, else NULL. */
static const Node *
pl_whole(const Plan *P, int k, OpKind op)
{
	const Node *n = plan_whole(P, k);

	return n && n->op == op ? n : NULL;
}

/* Whether v, made by a stage and read by node b alone, may go unmade:
 * an activation of the workspace, no saved tensor. */
static int
pl_between(const Value *v, const Node *b)
{
	return v->role == R_ACT && v->home == HO_ROLE && v->uses.n == 1 && v->uses.v[0] == b;
}

int
plan_joint(const Plan *P, int k, const Node *n[3], int *unmade)
{
	const Node *a, *b, *c;

	/* dx = rmsnorm_grad(dy, x, gamma); xhat = rmsnorm(x); rows =
	 * mul(dy, xhat) either way round */
	if ((a = pl_whole(P, k, OP_RMSNORM_GRAD)) && (b = pl_whole(P, k + 1, OP_RMSNORM)) &&
	    (c = pl_whole(P, k + 2, OP_MUL)) && b->nin == 1 && a->nin >= 2 &&
	    b->in[0] == a->in[1] && b->a.eps == a->a.eps && pl_between(b->out, c) &&
	    P->group[k + 1] == P->group[k] && P->group[k + 2] == P->group[k] &&
	    ((c->in[0] == a->in[0] && c->in[1] == b->out) ||
	     (c->in[1] == a->in[0] && c->in[0] == b->out)) &&
	    c->out->dtype == a->out->dtype) {
		n[0] = a, n[1] = b, n[2] = c, *unmade = 1;
		return 3;
	}
	/* t = matmul(x, w) (no summed weight gradient); y = add(t, d) or
	 * add(d, t), d and y shaped as t */
	if ((a = pl_whole(P, k, OP_MATMUL)) && (b = pl_whole(P, k + 1, OP_ADD)) &&
	    !a->a.mm.sum && a->nin == 2 && b->nin == 2 && pl_between(a->out, b) &&
	    P->group[k + 1] == P->group[k]) {
		const Value *d = b->in[0] == a->out ? b->in[1] : b->in[0];
		if (d != a->out && graph_value_same(a->out, b->out) && graph_value_same(d, b->out)) {
			n[0] = a, n[1] = b, *unmade = 0;
			return 2;
		}
	}
	/* t = split_heads(x); q = rope(t); or t = rope_grad(dq); d =
	 * merge_heads(t) */
	a = pl_whole(P, k, OP_SPLIT_HEADS), b = NULL;
	if (a)
		b = pl_whole(P, k + 1, OP_ROPE);
	else if ((a = pl_whole(P, k, OP_ROPE_GRAD)))
		b = pl_whole(P, k + 1, OP_MERGE_HEADS);
	if (b && b->in[0] == a->out && pl_between(a->out, b) && P->group[k + 1] == P->group[k]) {
		n[0] = a, n[1] = b, *unmade = 0;
		return 2;
	}
	return 0;
}

void
plan_calls(const Plan *P, int *call, char *unmade)
{
	int ns = P->s->stages.n;

	for (int k = 0; k < ns; k++)
		call[k] = k;
	for (int k = 0; k < ns; k++) {
		const Node *n[3];
		int u, m = plan_joint(P, k, n, &u);
		if (!m)
			continue;
		for (int j = 1; j < m; j++)
			call[k + j] = k;
		unmade[n[u]->out->id] = 1;
		k += m - 1;
	}
}

int
plan_call_end(const Plan *P, const int *call, int k)
{
	int end = call[k];

	while (end + 1 < P->s->stages.n && call[end + 1] == call[k])
		end++;
	return end;
}

/* The input of plain stage k whose bytes the value it makes may take:
 * an elementwise op of an input of its own type, shape and spread
 * (graph_value_same), reading that input for the last time, and running
 * alone (not hosted in a collective's stage, not part of a joint call:
 * plan_joint's mul and add read their operands in the call's first
 * stage); -1: none. Each element is read before it is written, by every
 * backend's kernels. */
static int
ws_twin(const Plan *P, int k, const Value *v)
{
	const Sched *s = P->s;
	const Node *n = P->plain[k] ? ((Stage *)s->stages.v[k])->u.node : NULL;

	if (!n || n->out != v || sched_span_lo(s, k) != k || op_info[n->op].cls != CL_EW ||
	    P->call[k] != k || (k + 1 < s->stages.n && P->call[k + 1] == k))
		return -1;
	for (int i = 0; i < n->nin; i++) {
		const Value *x = n->in[i];
		if (P->last[x->id] != k || !graph_value_same(x, v))
			continue;
		return x->id;
	}
	return -1;
}

static int
is_io(const Value *v)
{
	return v->role == R_IN || v->role == R_WEIGHT || v->role == R_OUT;
}

static void
pl_touch(Plan *P, const PView *v, int stage)
{
	if (v->base != PB_VALUE)
		return;
	P->used[v->id] = 1;
	if (P->first[v->id] < 0 || stage < P->first[v->id])
		P->first[v->id] = stage;
	if (stage > P->last[v->id])
		P->last[v->id] = stage;
}

/* The stages that touch every value. */
static void
pl_liveness(Plan *P)
{
	const Sched *s = P->s;

	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		if (P->plain[k]) {
			/* hosted (order.c): live through its host's stage too;
			 * in a joint call (plan_joint), through all its stages,
			 * its intermediate nowhere */
			int lo = sched_span_lo(s, k), c0 = P->call[k], c1 = plan_call_end(P, P->call, k);
			for (int j = 0; j < P->plain[k]->nview; j++) {
				const PView *v = &P->plain[k]->view[j];
				if (v->base == PB_VALUE && P->unmade[v->id])
					continue;
				pl_touch(P, v, lo < c0 ? lo : c0);
				pl_touch(P, v, k > c1 ? k : c1);
			}
			continue;
		}
		/* a hosted collective's too (order.c's 2b) */
		const PColl *pc = P->coll[ci++];
		int lo = sched_span_lo(s, k);
		for (int id = 0; id < pc->c->nitems; id++) {
			const PItem *p = pc->item[id];
			for (int j = 0; j < p->nview; j++) {
				pl_touch(P, &p->view[j], lo);
				pl_touch(P, &p->view[j], k);
			}
			for (int side = 0; side < 2; side++)
				if (p->side[side].nblock) {
					pl_touch(P, &p->side[side].view, lo);
					pl_touch(P, &p->side[side].view, k);
				}
		}
	}
}

/* By buffer: the rotating sets some item's view names (a phase pruned of
 * every item leaves its scratch unused). */
static char *
pl_temps_used(Arena *t, const PColl *pc)
{
	char *used = arena_alloc(t, (size_t)pc->c->bufs.n + 1);

	for (int id = 0; id < pc->c->nitems; id++) {
		const PItem *p = pc->item[id];
		for (int k = 0; k < p->nview; k++)
			if (p->view[k].base == PB_TEMP)
				used[p->view[k].id] = 1;
	}
	return used;
}

static void
pl_workspace(Plan *P)
{
	const Sched *s = P->s;
	const Graph *g = s->g;
	Ws w = {arena_scratch(s->arena), NULL, 0, 0, 0, 0};
	ArenaMark mark = arena_mark(w.t);
	int nv = g->values.n, ns = s->stages.n;
	int *objof = arena_alloc(w.t, ((size_t)nv + 1) * sizeof *objof);
	for (int i = 0; i < nv; i++)
		objof[i] = -1;
	if (g->saved_ws)
		ws_saved(P, &w, objof);
	/* the values by their first stage, in id order within one (a
	 * counting sort: a pass over the values per stage is quadratic) */
	int *at = arena_alloc(w.t, ((size_t)ns + 1) * sizeof *at);
	int *byfirst = arena_alloc(w.t, ((size_t)nv + 1) * sizeof *byfirst);
	for (int i = 0; i < nv; i++)
		if (P->first[i] >= 0)
			at[P->first[i] + 1]++;
	for (int k = 0; k < ns; k++)
		at[k + 1] += at[k];
	int *fill = arena_alloc(w.t, ((size_t)ns + 1) * sizeof *fill);
	memcpy(fill, at, ((size_t)ns + 1) * sizeof *at);
	for (int i = 0; i < nv; i++)
		if (P->first[i] >= 0)
			byfirst[fill[P->first[i]]++] = i;

	for (int k = 0, ci = 0; k < ns; k++) {
		for (int j = at[k]; j < at[k + 1]; j++) {
			int i = byfirst[j];
			const Value *v = g->values.v[i];
			if (P->used[i] && !is_io(v)) {
				int x = ws_twin(P, k, v);
				objof[i] = w.n;
				ws_add(&w, dtype_size[v->dtype] * value_rank_elems(v), k, P->last[i],
				       &P->off[i]);
				if (g->saved_ws)
					w.o[w.n - 1].spill = &P->in_saved[i];
				if (x >= 0)
					w.o[w.n - 1].twin = objof[x];
			}
		}
		if (P->plain[k])
			continue;
		/* scratch and staging live in the stage; a hosted
		 * collective's from its host's on, beside the host's */
		PColl *pc = P->coll[ci++];
		const Coll *c = pc->c;
		char *used = pl_temps_used(w.t, pc);
		int lo = sched_span_lo(s, k);
		for (int b = 0; b < c->bufs.n; b++) {
			const Buf *bf = c->bufs.v[b];
			pc->off[b] = -1;
			if (bf->kind == BK_TEMP && used[bf->set])
				ws_add(&w, bf->elems * plan_esize(c), lo, k, &pc->off[b]);
		}
		for (int lb = 0; lb < pc->nlab; lb++)
			for (int side = 0; side < 2; side++)
				if (pc->lab[lb].staged[side])
					ws_add(&w, pc->lab[lb].slot_bytes[side] * pc->lab[lb].slots, lo, k,
					       &pc->lab[lb].stage_off[side]);
	}
	ws_place(&w);
	P->wsbytes = w.end;
	arena_release(w.t, mark);
}

/* The serial reference: every value but the io ones whole in its own
 * place; a collective's result (an output aside) shares its input's. */
static void
pl_reference(Plan *P, Arena *a)
{
	const Graph *g = P->s->g;
	int64_t off = 0;

	P->ref_off = arena_alloc(a, (size_t)(g->values.n + 1) * sizeof *P->ref_off);
	P->ref_alias = arena_alloc(a, (size_t)(g->values.n + 1) * sizeof *P->ref_alias);
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		P->ref_off[i] = P->ref_alias[i] = -1;
		if (v->def && op_info[v->def->op].cls == CL_COLL && v->role != R_OUT) {
			int x = v->def->in[0]->id;
			P->ref_alias[i] = P->ref_alias[x] >= 0 ? P->ref_alias[x] : x;
			continue;
		}
		if (is_io(v))
			continue;
		P->ref_off[i] = off;
		off += plan_align(dtype_size[v->dtype] * value_elems(v));
	}
	P->ref_wsbytes = off;
}

Plan *
plan_sched(const Sched *s)
{
	Arena *a = s->arena;
	Plan *P = arena_alloc(a, sizeof *P);
	int nv = s->g->values.n;
	Pl L = {.p = P, .g = s->g, .a = a};

	P->s = s;
	P->off = arena_alloc(a, (size_t)(nv + 1) * sizeof *P->off);
	P->used = arena_alloc(a, (size_t)nv + 1);
	P->in_saved = arena_alloc(a, (size_t)nv + 1);
	P->first = arena_alloc(a, (size_t)(nv + 1) * sizeof *P->first);
	P->last = arena_alloc(a, (size_t)(nv + 1) * sizeof *P->last);
	for (int i = 0; i < nv; i++)
		P->off[i] = P->first[i] = P->last[i] = -1;
	P->coll = arena_alloc(a, (size_t)(s->colls.n + 1) * sizeof *P->coll);
	P->plain = arena_alloc(a, (size_t)(s->stages.n + 1) * sizeof *P->plain);
	P->group = arena_alloc(a, (size_t)(s->stages.n + 1) * sizeof *P->group);
	P->rank_used = arena_alloc(a, (size_t)s->g->groups.n + 1);
	P->call = arena_alloc(a, (size_t)(s->stages.n + 1) * sizeof *P->call);
	P->unmade = arena_alloc(a, (size_t)nv + 1);
	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		P->group[k] = plan_stage_group(st);
		if (st->kind == ST_COMPUTE) {
			P->plain[k] = pl_plain(st->u.node, a, P->group[k]);
			continue;
		}
		L.sg = P->group[k];
		pl_coll_plan(&L, st->u.coll);
		P->coll[ci++] = L.pc;
	}
	plan_calls(P, P->call, P->unmade);
	pl_liveness(P);
	pl_workspace(P);
	pl_reference(P, a);
	pl_need(P);
	return P;
}

int
plan_nests(const Plan *p)
{
	for (int k = 0; p && k < p->s->stages.n; k++) {
		const Stage *st = p->s->stages.v[k];
		if (st->kind == ST_COLL && st->host1)
			return 1;
	}
	return 0;
}
