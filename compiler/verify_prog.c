/* verify_prog.c: the proof of a whole program. Every lowered collective
 * is proved by the machine of verify.c, its memory plan by the checks of
 * verify_mem.c along with it; a collective identical to one already
 * proved (the layers of a model repeat) shares that proof. Then the plan's
 * plain stages, on every rank, and the workspace: every object inside it
 * and aligned, and any two objects that share memory never touched in a
 * common stage. Every runtime call, of the parallel program and of the
 * serial reference, gets views whose shapes agree as the runtime requires
 * (verify_call.c).
 * requires: a lowered schedule and, unless NULL, its plan.
 * ensures: Coll.verified and .stats set for every collective; else an
 * internal error naming what failed (rank, step, slice and element). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

/* The numbering of values met in one fingerprint. */
typedef struct Fp {
	int *seen;  /* by Value.id: number + 1, 0 unseen */
	int *list;  /* the ids numbered, to reset */
	int nseen;
} Fp;

typedef struct Print {
	Arena *t;
	unsigned char *b;
	size_t n, cap;
} Print;

static void
vf_put(Print *p, const void *x, size_t n)
{
	if (p->n + n > p->cap) {
		unsigned char *b = arena_alloc(p->t, 2 * (p->n + n) + 256);
		if (p->n)
			memcpy(b, p->b, p->n);
		p->b = b;
		p->cap = 2 * (p->n + n) + 256;
	}
	memcpy(p->b + p->n, x, n);
	p->n += n;
}

static void
vf_put_int(Print *p, int64_t x)
{
	vf_put(p, &x, sizeof x);
}

/* A value as the proof sees it: its number in this fingerprint and the
 * facts the proof reads (shape, type, distribution). */
static void
fp_value(Fp *F, Print *p, const Value *v)
{
	if (!F->seen[v->id]) {
		F->list[F->nseen] = v->id;
		F->seen[v->id] = ++F->nseen;
	}
	int64_t x[] = {F->seen[v->id], v->ndim, v->dtype, v->role};
	vf_put(p, x, sizeof x);
	vf_put(p, v->shape, sizeof v->shape);
	for (int k = 0; k < MAXGROUPS; k++) {
		const DistPart *d = &v->dist.p[k];
		int64_t y[] = {d->kind, d->dim, d->group ? d->group->size : 0};
		vf_put(p, y, sizeof y);
	}
}

static void
fp_ix(Print *p, const Ix *x)
{
	int64_t y[] = {x->kind, x->a, x->b, x->c, x->n};

	vf_put(p, y, sizeof y);
}

static void
fp_expr(Print *p, const PExpr *e)
{
	vf_put_int(p, e->mul);
	vf_put(p, e->c, sizeof e->c);
	vf_put_int(p, e->add);
}

static void
fp_view(Fp *F, const PColl *pc, Print *p, const PView *v)
{
	int64_t x[] = {v->base, v->base == PB_VALUE ? -1 : v->id, v->side, v->blk, v->nd, v->ncut};

	vf_put(p, x, sizeof x);
	if (v->base == PB_VALUE)
		fp_value(F, p, pc->plan->s->g->values.v[v->id]);
	fp_ix(p, &v->rot);
	fp_ix(p, &v->part);
	vf_put(p, v->dims, sizeof v->dims[0] * (size_t)v->nd);
	for (int k = 0; k < v->ncut; k++) {
		vf_put_int(p, v->cut[k].dim);
		fp_expr(p, &v->cut[k].start);
		vf_put_int(p, v->cut[k].len);
	}
}

static void
fp_plan(Fp *F, const PColl *pc, Print *p)
{
	for (int lb = 0; lb < pc->nlab; lb++) {
		const PLabel *l = &pc->lab[lb];
		int64_t x[] = {l->kind, l->used, l->slots, l->blocking, l->unpack, l->usebase,
		               l->staged[0], l->staged[1], l->stage_elems[0], l->stage_elems[1],
		               l->slot_bytes[0], l->slot_bytes[1]};
		vf_put(p, x, sizeof x);
	}
	for (int id = 0; id < pc->c->nitems; id++) {
		const PItem *it = pc->item[id];
		int64_t x[] = {it->nview, it->loop, it->qoff, it->staged, it->count};
		vf_put(p, x, sizeof x);
		for (int k = 0; k < it->nview; k++)
			fp_view(F, pc, p, &it->view[k]);
		if (it->qoff)
			fp_expr(p, &it->qstart);
		if (it->staged)
			fp_view(F, pc, p, &it->stage);
		for (int s = 0; s < 2; s++) {
			int64_t y[] = {it->side[s].staged, it->side[s].nblock};
			vf_put(p, y, sizeof y);
			if (!it->side[s].nblock)
				continue;
			fp_view(F, pc, p, &it->side[s].view);
			if (it->side[s].staged)
				fp_view(F, pc, p, &it->side[s].stage);
		}
	}
}

/* Everything the proof of c reads, as bytes: two collectives with the
 * same fingerprint have the same proof (the layers of a model repeat).
 * Items come from the zeroing arena, so their bytes are all defined; the
 * plan is written field by field, each value as its first-seen number
 * and its facts. */
static void
vf_fingerprint(Fp *F, const Coll *c, const PColl *pc, Print *p)
{
	int64_t head[] = {c->N, c->node->a.coll.group->id, c->nslices, c->node->op, c->bin,
	                  c->bout, c->region.n, c->bufs.n, c->phases.n};

	p->n = 0;
	F->nseen = 0;
	vf_put(p, head, sizeof head);
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		int64_t x[] = {bf->kind, bf->own, bf->nslots, bf->nparts, bf->xfer, bf->slot_elems,
		               vf_outside(c, bf), bf->dim, bf->pdim, bf->set, bf->nset};
		vf_put(p, x, sizeof x);
		fp_value(F, p, bf->v);
	}
	for (int k = 0; k < c->region.n; k++) {
		const RNode *rn = c->region.v[k];
		int64_t x[] = {rn->node->op, op_pos(rn->node),
		               rn->odim, rn->node->lse != NULL};
		vf_put(p, x, sizeof x);
		vf_put_int(p, rn->node->nin);
		vf_put(p, rn->from, sizeof rn->from);
		vf_put(p, rn->inbuf, sizeof rn->inbuf);
		vf_put(p, rn->idim, sizeof rn->idim);
		fp_value(F, p, rn->node->out);
		for (int j = 0; j < rn->node->nin; j++)
			fp_value(F, p, rn->node->in[j]);
		if (rn->node->lse)
			fp_value(F, p, rn->node->lse);
	}
	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		vf_put_int(p, ph->nrounds);
		vf_put_int(p, ph->nlanes);
		for (int t = 0; t < ph->nlanes; t++) {
			vf_put_int(p, ph->lanes[t].n);
			for (int j = 0; j < ph->lanes[t].n; j++)
				vf_put(p, ph->lanes[t].v[j], sizeof(Item));
		}
	}
	if (pc)
		fp_plan(F, pc, p);
}


/* ---- the workspace ---- */

/* An object of the workspace (space 0) or of the saved buffer (space
 * 1): bytes at off, touched from stage lo to hi. */
typedef struct WsObj {
	int64_t off, bytes;
	int lo, hi;
	const char *name;
	int space;
	int vid; /* the value it holds, or -1 (scratch, staging) */
} WsObj;

typedef struct Ws {
	Arena *t;
	WsObj *o;
	int n, cap;
	int *lo, *hi; /* by Value.id: the stages that touch it, -1: none */
} Ws;

static void
ws_obj(Ws *w, int64_t off, int64_t bytes, int lo, int hi, const char *name)
{
	w->o = arena_grow(w->t, w->o, w->n, &w->cap, 64, sizeof *w->o);
	w->o[w->n++] = (WsObj){off, bytes, lo, hi, name, 0, -1};
}

static void
ws_touch(Ws *w, const PView *v, int stage)
{
	if (v->base != PB_VALUE)
		return;
	if (w->lo[v->id] < 0 || stage < w->lo[v->id])
		w->lo[v->id] = stage;
	if (stage > w->hi[v->id])
		w->hi[v->id] = stage;
}

static void
ws_touch_item(Ws *w, const PItem *p, int stage)
{
	for (int k = 0; k < p->nview; k++)
		ws_touch(w, &p->view[k], stage);
	for (int s = 0; s < 2; s++)
		if (p->side[s].nblock)
			ws_touch(w, &p->side[s].view, stage);
}

static int
ws_cmp(const void *x, const void *y)
{
	const WsObj *a = x, *b = y;

	if (a->space != b->space)
		return a->space - b->space;
	return (a->off > b->off) - (a->off < b->off);
}

/* The objects of the workspace: each value some stage touches, live
 * from the first such stage to the last (a joint call's stages as one:
 * it reads all its operands and writes all its results at once; its
 * intermediate is touched by none); each collective's scratch and
 * staging, live in its stage (a hosted one's from its host's on). */
static int
ws_collect(const Plan *P, Ws *w, const int *call, const char *unmade, char *err, size_t n)
{
	const Sched *s = P->s;
	const Graph *g = s->g;

	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		if (P->plain[k]) {
			/* a hosted stage runs inside its host's (order.c) */
			int c0 = call[k], c1 = plan_call_end(P, call, k), lo = sched_span_lo(s, k);
			for (int j = 0; j < P->plain[k]->nview; j++) {
				const PView *v = &P->plain[k]->view[j];
				if (v->base == PB_VALUE && unmade[v->id])
					continue;
				ws_touch(w, v, lo < c0 ? lo : c0);
				ws_touch(w, v, k > c1 ? k : c1);
			}
			continue;
		}
		/* a hosted collective runs inside its host's stage too */
		const PColl *pc = P->coll[ci++];
		const Coll *c = pc->c;
		int lo = sched_span_lo(s, k);
		for (int id = 0; id < c->nitems; id++) {
			const PItem *p = pc->item[id];
			ws_touch_item(w, p, lo);
			ws_touch_item(w, p, k);
			for (int j = 0; j < p->nview; j++) {
				const PView *v = &p->view[j];
				if (v->base != PB_TEMP)
					continue;
				const Buf *bf = c->bufs.v[v->id];
				for (int m = 0; m < bf->nset; m++)
					if (pc->off[v->id + m] < 0) {
						snprintf(err, n, "scratch %s of %s is used but has no place in the "
						         "workspace", ((Buf *)c->bufs.v[v->id + m])->name,
						         c->node->out->name);
						return 1;
					}
			}
		}
		for (int b = 0; b < c->bufs.n; b++) {
			const Buf *bf = c->bufs.v[b];
			if (bf->kind == BK_TEMP && pc->off[b] >= 0)
				ws_obj(w, pc->off[b], bf->elems * plan_esize(c), lo, k,
				       arena_printf(s->arena, "scratch %s of %s", bf->name, c->node->out->name));
		}
		for (int lb = 0; lb < pc->nlab; lb++)
			for (int side = 0; side < 2; side++)
				if (pc->lab[lb].staged[side])
					ws_obj(w, pc->lab[lb].stage_off[side],
					       pc->lab[lb].slot_bytes[side] * pc->lab[lb].slots, lo, k,
					       arena_printf(s->arena, "staging of transfer #%d of %s", lb,
					                    c->node->out->name));
	}
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		int io = v->role == R_IN || v->role == R_WEIGHT || v->role == R_OUT;
		if (w->lo[i] < 0 || io) {
			if (P->off[i] >= 0 && io) {
				snprintf(err, n, "%s %s has a place in the workspace", role_name[v->role], v->name);
				return 1;
			}
			continue;
		}
		if (P->off[i] < 0) {
			snprintf(err, n, "%s is touched in stage %d but has no place in the workspace",
			         v->name, w->lo[i]);
			return 1;
		}
		if (P->in_saved[i] && !g->saved_ws) {
			snprintf(err, n, "%s is placed in the saved buffer, which this pass leaves "
			         "as it is", v->name);
			return 1;
		}
		ws_obj(w, P->off[i], dtype_size[v->dtype] * value_rank_elems(v), w->lo[i], w->hi[i],
		       v->name);
		w->o[w->n - 1].space = P->in_saved[i];
		w->o[w->n - 1].vid = i;
	}
	/* the saved buffer: each saved tensor where the forward writes it,
	 * its bytes held by it from the stage that writes it to past the
	 * forward's end, and on the backward from its start to the last
	 * stage that reads it */
	int ns = s->stages.n;
	for (int i = 0; i < g->values.n && g->saved_ws; i++) {
		const Value *v = g->values.v[i];
		if (v->home != HO_SAVED || (g->fwd && w->lo[i] < 0))
			continue;
		ws_obj(w, v->soff, dtype_size[v->dtype] * value_rank_elems(v),
		       g->fwd || w->lo[i] < 0 ? 0 : w->lo[i], g->fwd ? w->hi[i] : ns,
		       arena_printf(s->arena, "saved %s", v->name));
		w->o[w->n - 1].space = 1;
		w->o[w->n - 1].vid = i;
	}
	return 0;
}

/* Whether a and b, which share bytes in a common stage, are an
 * elementwise op's result in the place of an input it reads there for
 * the last time: the same bytes, the one's last stage the other's first,
 * a plain stage of its own (no joint call's: the call writes its result
 * while it reads its operands) that makes the later from the earlier,
 * laid out alike (graph_value_same: each element read before it is
 * written). */
static int
ws_in_place(const Plan *P, const int *call, const WsObj *a, const WsObj *b)
{
	const Sched *s = P->s;
	const Graph *g = s->g;

	if (a->hi > b->hi) {
		const WsObj *t = a;
		a = b, b = t;
	}
	int k = b->lo;
	if (a->vid < 0 || b->vid < 0 || a->hi != k || a->off != b->off || a->bytes != b->bytes ||
	    !P->plain[k] || sched_span_lo(s, k) != k || call[k] != k ||
	    (k + 1 < s->stages.n && call[k + 1] == k))
		return 0;
	const Node *n = ((Stage *)s->stages.v[k])->u.node;
	const Value *x = g->values.v[a->vid], *y = g->values.v[b->vid];
	if (n->out != y || op_info[n->op].cls != CL_EW || !graph_value_same(x, y))
		return 0;
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] == x)
			return 1;
	return 0;
}

/* Every object inside the workspace and aligned; any two that share
 * memory live in stages apart. */
static int
ws_check(const Plan *P, char *err, size_t n)
{
	int nv = P->s->g->values.n;
	Ws w = {.t = arena_scratch(P->s->arena)};
	int rc = 0;

	w.lo = arena_alloc(w.t, ((size_t)nv + 1) * sizeof *w.lo);
	w.hi = arena_alloc(w.t, ((size_t)nv + 1) * sizeof *w.hi);
	for (int i = 0; i < nv; i++)
		w.lo[i] = w.hi[i] = -1;
	int ns = P->s->stages.n;
	int *call = arena_alloc(w.t, ((size_t)ns + 1) * sizeof *call);
	char *unmade = arena_alloc(w.t, (size_t)nv + 1);
	plan_calls(P, call, unmade); /* the calls as the code generator makes them */
	rc = ws_collect(P, &w, call, unmade, err, n);
	if (w.n)
		qsort(w.o, (size_t)w.n, sizeof *w.o, ws_cmp);
	const Graph *g = P->s->g;
	int64_t lim[2] = {P->wsbytes, (g->fwd ? g->fwd : g)->savedbytes};
	for (int i = 0; i < w.n && !rc; i++) {
		const WsObj *a = &w.o[i];
		if (a->off < 0 || a->off % PLAN_ALIGN || a->off + a->bytes > lim[a->space]) {
			snprintf(err, n, "%s at [%lld, %lld) is not an aligned part of the %s "
			         "(%lld bytes)", a->name, (long long)a->off, (long long)(a->off + a->bytes),
			         a->space ? "saved buffer" : "workspace", (long long)lim[a->space]);
			rc = 1;
		}
		for (int j = i + 1; j < w.n && !rc && w.o[j].space == a->space &&
		                    w.o[j].off < a->off + a->bytes; j++) {
			const WsObj *b = &w.o[j];
			if (b->bytes && a->bytes && a->lo <= b->hi && b->lo <= a->hi &&
			    !ws_in_place(P, call, a, b)) {
				snprintf(err, n, "%s at [%lld, %lld) and %s at [%lld, %lld) overlap, and "
				         "stage %d touches both", a->name, (long long)a->off,
				         (long long)(a->off + a->bytes), b->name, (long long)b->off,
				         (long long)(b->off + b->bytes), a->lo > b->lo ? a->lo : b->lo);
				rc = 1;
			}
		}
	}
	return rc;
}

/* The serial reference: every value with a place of its own whole, in
 * [0, ref_wsbytes), apart from every other; aliases only where a
 * collective passes its input on. */
static int
ws_check_ref(const Plan *P, char *err, size_t n)
{
	const Graph *g = P->s->g;
	Ws w = {.t = arena_scratch(P->s->arena)};
	int rc = 0;

	for (int i = 0; i < g->values.n && !rc; i++) {
		const Value *v = g->values.v[i];
		int a = P->ref_alias[i];
		if (a >= 0 && !(v->def && op_info[v->def->op].cls == CL_COLL && v->role != R_OUT &&
		                P->ref_alias[a] < 0)) {
			snprintf(err, n, "reference: %s shares the storage of %s", v->name,
			         ((Value *)g->values.v[a])->name);
			rc = 1;
		}
		if (P->ref_off[i] >= 0)
			ws_obj(&w, P->ref_off[i], dtype_size[v->dtype] * value_elems(v), 0, 0, v->name);
	}
	if (w.n)
		qsort(w.o, (size_t)w.n, sizeof *w.o, ws_cmp);
	for (int i = 0; i + 1 < w.n && !rc; i++)
		if (w.o[i].off + w.o[i].bytes > w.o[i + 1].off) {
			snprintf(err, n, "reference: %s and %s overlap", w.o[i].name, w.o[i + 1].name);
			rc = 1;
		}
	if (!rc && w.n && w.o[w.n - 1].off + w.o[w.n - 1].bytes > P->ref_wsbytes) {
		snprintf(err, n, "reference: %s ends past the workspace", w.o[w.n - 1].name);
		rc = 1;
	}
	return rc;
}

/* ---- the whole program ---- */

static int
vp_plain(const Plan *P, char *err, size_t n, const Node **at)
{
	const Sched *s = P->s;
	/* vm_plain walks the ranks itself; failures are told for one */
	V v = {.plan = P, .err = err, .errlen = n, .t = arena_scratch(s->arena), .nr = 1};
	v.rk = arena_alloc(v.t, sizeof *v.rk);
	vm_objects(&v);
	int rc = 0;
	for (int k = 0; k < s->stages.n && !rc; k++) {
		const Stage *st = s->stages.v[k];
		if (st->kind != ST_COMPUTE)
			continue;
		const Node *nd = st->u.node;
		v.sg = P->group[k];
		v.N = v.sg >= 0 ? ((Group *)s->g->groups.v[v.sg])->size : 1;
		*at = nd;
		rc = vm_plain(&v, nd, P->plain[k]) != RUN_OK;
	}
	return rc;
}

static void
vp_error(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
vp_error(Diag *d, const char *fmt, ...)
{
	FILE *f = d && d->out ? d->out : stderr;
	va_list ap;

	fputs("cfc: internal error: verify: ", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	if (d)
		d->nerr++;
}

int
verify_sched(const Sched *s, const Plan *P, Diag *d)
{
	char err[1024];
	Arena *t = arena_scratch(s->arena);
	ArenaMark mark = arena_mark(t);
	Print *fp = arena_alloc(t, ((size_t)s->colls.n + 1) * sizeof *fp);
	int nv = s->g->values.n, rc = 0;
	Fp F = {arena_alloc(t, ((size_t)nv + 1) * sizeof(int)),
	        arena_alloc(t, ((size_t)nv + 1) * sizeof(int)), 0};
	const Node *at = NULL;

	for (int k = 0; k < s->colls.n && !rc; k++) {
		Coll *c = s->colls.v[k];
		const PColl *pc = P ? P->coll[k] : NULL;
		int j = 0;
		diag_tick(d, "verify", k, s->colls.n);
		fp[k].t = t;
		vf_fingerprint(&F, c, pc, &fp[k]);
		for (int q = 0; q < F.nseen; q++)
			F.seen[F.list[q]] = 0;
		while (j < k && (fp[j].n != fp[k].n || memcmp(fp[j].b, fp[k].b, fp[k].n)))
			j++;
		if (j < k) {
			c->stats = ((Coll *)s->colls.v[j])->stats;
			c->verified = 1;
			continue;
		}
		if (!(rc = verify_coll(c, pc, &c->stats, err, sizeof err))) {
			c->verified = 1;
			continue;
		}
		vp_error(d, "collective %s schedule %s: %s", c->node->out->name,
		         sched_kind_str(s->arena, &c->how), err);
	}
	if (!rc && order_check(s, err, sizeof err)) {
		vp_error(d, "order: %s", err);
		rc = 1;
	}
	if (!rc && P && vp_plain(P, err, sizeof err, &at)) {
		vp_error(d, "stage %s = %s: %s", at->out->name, graph_node_str(s->arena, at), err);
		rc = 1;
	}
	for (int k = 0; k < s->g->nodes.n && !rc; k++) {
		const Node *nd = s->g->nodes.v[k];
		OpClass c = op_info[nd->op].cls;
		if (c != CL_LEAF && c != CL_COLL && vc_whole(nd, err, sizeof err)) {
			vp_error(d, "reference: %s = %s: %s", nd->out->name, graph_node_str(s->arena, nd),
			         err);
			rc = 1;
		}
	}
	if (!rc && P && (ws_check(P, err, sizeof err) || ws_check_ref(P, err, sizeof err))) {
		vp_error(d, "workspace: %s", err);
		rc = 1;
	}
	arena_release(t, mark);
	return rc;
}
