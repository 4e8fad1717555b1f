/* region.c: region discovery (region_sched). A Coll for every collective,
 * and for each the maximal slice-local region of compute it can be fused
 * with: upstream (the ops that feed a reduce_scatter, all_reduce or
 * all_to_all) and downstream (the ops an all_gather or all_reduce feeds).
 * Downstream, a matmul that sums over the region's dim (dW = X^T dY in
 * the backward) joins as an accumulating node (RNode.acc): each slice's
 * product is added into its whole result.
 * requires: a graph with locality (graph_fill_locality); the schedule
 * rules give every Coll's N, nslices and (but for all_reduce, whose dim is
 * the one with the largest region) dim.
 * ensures: an all_reduce's c->dim; c->pre, c->post, c->region (pre then
 * post, each in topological order, RNode.from resolved) and c->stops
 * filled; every node in at most one region (owner[node id]); no region
 * reads a value that depends on its own collective from outside the
 * region; the stages, every region contracted into its collective's,
 * have an order (region_order): no two regions wait for each other. */
#include <stdlib.h>
#include <string.h>

#include "sched.h"

/* How far an upstream region grows. */
typedef enum UpMode {
	UP_PARTIAL, /* the ops producing partial sums: row-parallel (Alg. 3) */
	UP_QUERY    /* any slice-local op, up to and including an attention
	             * (query-split, Alg. 4; all_to_all, Alg. 5) */
} UpMode;

typedef struct Finder {
	Graph *g;
	Arena *a;
	Coll **owner;  /* by node id */
	int *vdim;     /* by value id: dim of a value of the region grown, -1 */
	char *taint;   /* by value id: depends on the collective grown */
	int dry;       /* trial: claim nothing, record nothing */
	int nslices;   /* of the collective being grown */
	int count;     /* nodes taken by the last grow */
} Finder;

static Node *
rg_node(const Finder *F, int k)
{
	return F->g->nodes.v[k];
}

static const char *
rg_dim(const Finder *F, const Value *v, int d)
{
	return value_dim_name(F->a, v, d);
}

static int
rg_split_along(const Value *v, int d)
{
	return value_rank_extent(v, d) != v->shape[d];
}

static const char *
rg_where(const Finder *F, const Node *n)
{
	return arena_printf(F->a, "%s:%d", F->g->file, n->loc.line);
}

static void
rg_reset(Finder *F)
{
	for (int i = 0; i < F->g->values.n; i++)
		F->vdim[i] = -1;
	F->count = 0;
}

static void
rg_stop(Finder *F, Coll *c, Node *n, int up, const char *why)
{
	if (F->dry)
		return;
	Stop *s = arena_alloc(F->a, sizeof *s);
	s->node = n;
	s->up = up;
	s->why = why;
	vec_push(F->a, &c->stops, s);
}

/* Takes n into the region: its result cut along odim, input i along
 * idim[i] (-1: whole); odim -1: n sums its whole result over the slices
 * (rnode_sums), which nothing downstream reads slice by slice. */
static void
rg_take_dims(Finder *F, Coll *c, Vec *side, Node *n, int odim, const int *idim)
{
	F->vdim[n->out->id] = odim;
	F->count++;
	if (F->dry)
		return;
	RNode *rn = arena_alloc(F->a, sizeof *rn);
	rn->node = n;
	rn->odim = odim;
	rn->buf = -1;
	for (int i = 0; i < n->nin; i++) {
		rn->idim[i] = idim[i];
		rn->from[i] = -1;
	}
	F->owner[n->id] = c;
	vec_push(F->a, side, rn);
}

/* Takes n with its result cut along odim and its inputs as its
 * slice-locality maps them. */
static void
rg_take(Finder *F, Coll *c, Vec *side, Node *n, int odim)
{
	int idim[MAXIN];

	for (int i = 0; i < n->nin; i++)
		idim[i] = n->inmap[i][odim];
	rg_take_dims(F, c, side, n, odim, idim);
}

/* Why dim d of v cannot be cut into the collective's slices, or NULL. */
static const char *
rg_cut(const Finder *F, const Value *v, int d)
{
	if (v->shape[d] % F->nslices == 0)
		return NULL;
	return arena_printf(F->a, "%s (%lld) of %s does not divide into %d slices",
	                    rg_dim(F, v, d), (long long)v->shape[d], v->name, F->nslices);
}

/* Why a slice of input i (outside the region) cannot be had along f. */
static const char *
rg_outside(const Finder *F, const Node *n, int i, int f)
{
	const Value *v = n->in[i];

	if (F->taint[v->id])
		return arena_printf(F->a, "needs %s, which waits for the whole collective", v->name);
	if (f >= 0 && rg_split_along(v, f))
		return arena_printf(F->a, "needs all of %s along %s, but it is split over %s",
		                    v->name, rg_dim(F, v, f), dist_split_group(&v->dist, f)->name);
	return f >= 0 ? rg_cut(F, v, f) : NULL;
}

/* A result split along the region's dim has rows of its own on each rank,
 * not the region's slices. */
static const char *
rg_own_split(const Finder *F, const Value *v, int d)
{
	if (!rg_split_along(v, d))
		return NULL;
	return arena_printf(F->a, "%s is split along %s over %s: its rows are not the region's "
	                    "slices", v->name, rg_dim(F, v, d), dist_split_group(&v->dist, d)->name);
}

static const char *
rg_unlocal(const Finder *F, const Node *n, int e)
{
	return arena_printf(F->a, "not slice-local along %s%s", rg_dim(F, n->out, e),
	                    op_info[n->op].cls == CL_SCAN ? ": a scan needs the whole sequence" :
	                    op_info[n->op].cls == CL_PACK ? ": coalescing's copy of whole tensors" : "");
}

/* NULL when the output of n can be cut along e with every input of the
 * region sliced along its own region dim; else why not. */
static const char *
rg_down_dim(const Finder *F, const Node *n, int e)
{
	const char *why;

	if (!(n->local >> e & 1))
		return rg_unlocal(F, n, e);
	if ((why = rg_cut(F, n->out, e)))
		return why;
	for (int i = 0; i < n->nin; i++) {
		const Value *v = n->in[i];
		int f = n->inmap[i][e], have = F->vdim[v->id];
		if (have < 0) {
			if ((why = rg_outside(F, n, i, f)))
				return why;
		} else if (f != have) {
			return f < 0 ? arena_printf(F->a, "needs all of %s along %s", v->name,
			                            rg_dim(F, v, have)) : rg_unlocal(F, n, e);
		}
	}
	return rg_own_split(F, n->out, e);
}

/* The dim of n's output that follows the region, or -1 with *why: the
 * reason given for the dim the first region input maps to, the natural
 * candidate. */
static int
rg_down_pick(const Finder *F, const Node *n, const char **why)
{
	int natural = -1;

	for (int e = 0; e < n->out->ndim; e++)
		if (!rg_down_dim(F, n, e))
			return e;
	for (int i = 0; i < n->nin && natural < 0; i++) {
		int have = F->vdim[n->in[i]->id];
		for (int e = 0; have >= 0 && e < n->out->ndim && natural < 0; e++)
			if (n->inmap[i][e] == have)
				natural = e;
		if (natural < 0 && have >= 0 && have < n->out->ndim)
			natural = have;
	}
	*why = rg_down_dim(F, n, natural >= 0 ? natural : 0);
	return -1;
}

static int
rg_reads_region(const Finder *F, const Node *n)
{
	for (int i = 0; i < n->nin; i++)
		if (F->vdim[n->in[i]->id] >= 0)
			return 1;
	return 0;
}

static void
rg_taint(Finder *F, const Value *src)
{
	memset(F->taint, 0, (size_t)F->g->values.n);
	F->taint[src->id] = 1;
	for (int k = src->def->id + 1; k < F->g->nodes.n; k++) {
		Node *n = rg_node(F, k);
		for (int i = 0; i < n->nin; i++)
			if (F->taint[n->in[i]->id])
				F->taint[n->out->id] = 1;
	}
}

/* Why n can join no region: a collective, or in another region; else NULL. */
static const char *
rg_taken(const Finder *F, const Node *n)
{
	const Coll *o = F->owner[n->id];

	if (op_info[n->op].cls == CL_COLL)
		return "another collective";
	if (o)
		return arena_printf(F->a, "fused into %s %s", op_info[o->node->op].name,
		                    o->node->out->name);
	return NULL;
}

/* Why n, reading the region, cannot join it as a whole, or NULL. */
static const char *
rg_down_block(const Finder *F, const Node *n)
{
	const char *why = rg_taken(F, n);

	if (why)
		return why;
	if (dist_count(&n->out->dist, DI_PARTIAL))
		return "produces partial sums, fused with their reduction";
	return NULL;
}

/* Does n read a value of the region along a dim it sums over? */
static int
rg_sums(const Finder *F, const Node *n)
{
	for (int i = 0; i < n->nin; i++)
		if (graph_sum_dim(n, i, F->vdim[n->in[i]->id]) >= 0)
			return 1;
	return 0;
}

/* NULL when n can sum its result over the region's slices: a matmul
 * whose region input is cut along a summed dim (graph_sum_dim), the
 * other input cut along the dim summed with it (dims gets both); else
 * why not. The FuseAG consumer of the backward: dW = X^T dY accumulated
 * slice by slice as the slices of X (or dY) arrive. */
static const char *
rg_acc_dims(const Finder *F, const Node *n, int *dims)
{
	int want[MAXIN] = {-1, -1};
	const char *why;

	for (int i = 0; i < 2; i++) {
		int have = F->vdim[n->in[i]->id], o = graph_sum_dim(n, i, have);
		if (have < 0)
			continue;
		if (o < 0)
			return arena_printf(F->a, "sums %s over no dimension it is sliced along",
			                    n->in[i]->name);
		if ((want[i] >= 0 && want[i] != have) || (want[1 - i] >= 0 && want[1 - i] != o))
			return arena_printf(F->a, "reads %s and %s along dims not summed together",
			                    n->in[0]->name, n->in[1]->name);
		want[i] = have, want[1 - i] = o;
	}
	for (int i = 0; i < 2; i++) {
		const Value *in = n->in[i];
		if (F->vdim[in->id] >= 0)
			continue;
		if ((why = rg_outside(F, n, i, want[i])))
			return why;
		/* the gather of that input sums it as its slices arrive */
		if (in->def->op == OP_ALL_GATHER && in->def->a.coll.dim == want[i])
			return arena_printf(F->a, "sums %s, a gathered tensor: fused with its all_gather",
			                    in->name);
	}
	dims[0] = want[0], dims[1] = want[1];
	return NULL;
}

/* Grows the region that src (the collective's result, cut along d)
 * feeds, in topological order. */
static void
rg_down(Finder *F, Coll *c, Value *src, int d)
{
	rg_reset(F);
	F->vdim[src->id] = d;
	rg_taint(F, src);
	for (int k = src->def->id + 1; k < F->g->nodes.n; k++) {
		Node *n = rg_node(F, k);
		const char *why;
		int e, dims[MAXIN];
		if (!rg_reads_region(F, n))
			continue;
		if ((why = rg_down_block(F, n)))
			rg_stop(F, c, n, 0, why);
		else if ((e = rg_down_pick(F, n, &why)) >= 0)
			rg_take(F, c, &c->post, n, e);
		/* not slice-local: it may still sum over the slices */
		else if (rg_sums(F, n) && !(why = rg_acc_dims(F, n, dims)))
			rg_take_dims(F, c, &c->post, n, -1, dims);
		else
			rg_stop(F, c, n, 0, why);
	}
}

/* Are all uses of v in the region of c (or c's collective itself)? */
static const Node *
rg_other_use(const Finder *F, const Coll *c, const Value *v)
{
	for (int i = 0; i < v->uses.n; i++) {
		const Node *u = v->uses.v[i];
		if (u != c->node && F->vdim[u->out->id] < 0)
			return u;
	}
	return NULL;
}

static const char *
rg_up_block(const Finder *F, const Coll *c, const Node *n, int f)
{
	const Node *u;
	const char *why = rg_taken(F, n);

	if (why)
		return why;
	if ((u = rg_other_use(F, c, n->out)))
		return arena_printf(F->a, "%s is also used by %s (%s)", n->out->name,
		                    op_info[u->op].name, rg_where(F, u));
	if (!(n->local >> f & 1))
		return rg_unlocal(F, n, f);
	for (int i = 0; i < n->nin; i++)
		if ((why = rg_outside(F, n, i, n->inmap[i][f])))
			return why;
	if ((why = rg_own_split(F, n->out, f)))
		return why;
	if (n->out == c->node->in[0] && n->out->role == R_OUT && !coll_keeps_input(c->node))
		return arena_printf(F->a, "%s is an output of the model, so it is computed whole",
		                    n->out->name);
	return rg_cut(F, n->out, f);
}

/* Does the region grow from n to its input in? Row-parallel: to an op
 * that makes partial sums over the collective's group g. */
static int
rg_extends(UpMode mode, const Node *n, const Value *in, const Group *g)
{
	if (op_info[in->def->op].cls == CL_LEAF)
		return 0;
	return mode == UP_PARTIAL ? in->dist.p[g->id].kind == DI_PARTIAL : n->op != OP_ATTENTION;
}

/* Grows the region that feeds p (cut along d), from the collective up,
 * in reverse topological order so that every consumer of a value is
 * decided before its producer. */
static void
rg_up(Finder *F, Coll *c, Value *p, int d, UpMode mode)
{
	rg_reset(F);
	memset(F->taint, 0, (size_t)F->g->values.n);
	if (op_info[p->def->op].cls == CL_LEAF)
		return;
	F->vdim[p->id] = d;
	for (int k = p->def->id; k >= 0; k--) {
		Node *n = rg_node(F, k);
		int f = F->vdim[n->out->id];
		const char *why;
		if (f == -1)
			continue;
		F->vdim[n->out->id] = -1;
		why = f < 0 ? arena_printf(F->a, "%s is read along two dimensions", n->out->name)
		            : rg_up_block(F, c, n, f);
		if (why) {
			rg_stop(F, c, n, 1, why);
			continue;
		}
		rg_take(F, c, &c->pre, n, f);
		for (int i = 0; i < n->nin; i++) {
			Value *in = n->in[i];
			int g = n->inmap[i][f];
			if (g < 0 || !rg_extends(mode, n, in, c->node->a.coll.group))
				continue;
			F->vdim[in->id] = F->vdim[in->id] == -1 || F->vdim[in->id] == g ? g : -2;
		}
	}
}

static int
rg_cmp_id(const void *x, const void *y)
{
	const RNode *a = *(RNode *const *)x, *b = *(RNode *const *)y;

	return (a->node->id > b->node->id) - (a->node->id < b->node->id);
}

int
region_has(const Vec *side, OpKind op)
{
	for (int i = 0; i < side->n; i++)
		if (((const RNode *)side->v[i])->node->op == op)
			return 1;
	return 0;
}

static Value *
rg_input(const Coll *c)
{
	return c->node->in[0];
}

/* The upstream region. A query split that reaches no attention falls
 * back to the row-parallel region, keeping the reasons it stopped. */
static void
rg_up_coll(Finder *F, Coll *c)
{
	int q = c->node->op == OP_ALL_TO_ALL || c->want.query;
	Vec stops;

	rg_up(F, c, rg_input(c), c->dim, q ? UP_QUERY : UP_PARTIAL);
	if (!q || c->node->op == OP_ALL_TO_ALL || region_has(&c->pre, OP_ATTENTION) || F->dry)
		return;
	for (int i = 0; i < c->pre.n; i++)
		F->owner[((RNode *)c->pre.v[i])->node->id] = NULL;
	stops = c->stops;
	c->pre = c->stops = (Vec){0};
	c->note = "split=query: the region reaches no attention, so it is the row-parallel one";
	rg_up(F, c, rg_input(c), c->dim, UP_PARTIAL);
	for (int i = 0; i < stops.n; i++)
		vec_push(F->a, &c->stops, stops.v[i]);
}

/* all_reduce has no dim of its own: the one (dividing into nslices) with
 * the largest region, the first on ties. */
static int
rg_ar_dim(Finder *F, Coll *c)
{
	int best = -1, most = -1;
	Value *p = rg_input(c);

	F->dry = 1;
	F->nslices = c->nslices;
	for (int d = 0; d < p->ndim; d++) {
		if (p->shape[d] % c->nslices || dist_split_group(&p->dist, d))
			continue;
		c->dim = d;
		rg_up(F, c, p, d, c->want.query ? UP_QUERY : UP_PARTIAL);
		int n = F->count;
		rg_down(F, c, c->node->out, d);
		if (n + F->count > most)
			most = n + F->count, best = d;
	}
	F->dry = 0;
	return best;
}

static void
rg_link(Arena *a, Coll *c)
{
	if (c->pre.n > 1)
		qsort(c->pre.v, (size_t)c->pre.n, sizeof *c->pre.v, rg_cmp_id);
	c->region.n = 0;
	for (int s = 0; s < 2; s++) {
		Vec *side = s ? &c->post : &c->pre;
		for (int i = 0; i < side->n; i++) {
			RNode *rn = side->v[i];
			for (int j = 0; j < rn->node->nin; j++)
				for (int k = 0; k < c->region.n; k++)
					if (((RNode *)c->region.v[k])->node->out == rn->node->in[j])
						rn->from[j] = k;
			vec_push(a, &c->region, rn);
		}
	}
}

static int
rg_is_up(const Node *n)
{
	return n->op != OP_ALL_GATHER;
}

static int
rg_is_down(const Node *n)
{
	return n->op == OP_ALL_GATHER || n->op == OP_ALL_REDUCE;
}

/* ---- the stages, once regions are contracted ---- */

/* A min-heap of stage ids ready to run. */
typedef struct Heap {
	int *v, n;
} Heap;

static void
heap_push(Heap *h, int x)
{
	int k = h->n++;

	for (; k > 0 && h->v[(k - 1) / 2] > x; k = (k - 1) / 2)
		h->v[k] = h->v[(k - 1) / 2];
	h->v[k] = x;
}

static int
heap_pop(Heap *h)
{
	int top = h->v[0], x = h->v[--h->n], k = 0;

	for (int c; (c = 2 * k + 1) < h->n; k = c) {
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (x <= h->v[c])
			break;
		h->v[k] = h->v[c];
	}
	h->v[k] = x;
	return top;
}

/* The stage node n belongs to: its collective's (by the collective's
 * node id) or its own; -1 for leaves. */
static int
rg_stage_of(Coll *const *owner, const Node *n)
{
	if (op_info[n->op].cls == CL_LEAF)
		return -1;
	return owner[n->id] ? owner[n->id]->node->id : n->id;
}

int
region_order(const Graph *g, Coll *const *owner, int *order, char *left)
{
	Arena *t = arena_scratch(g->arena);
	ArenaMark mark = arena_mark(t);
	int n = g->nodes.n, nleft = 0, ne = 0, no = 0;
	int *need = arena_alloc(t, ((size_t)n + 1) * sizeof *need);
	int *first = arena_alloc(t, ((size_t)n + 2) * sizeof *first);
	Heap h = {arena_alloc(t, ((size_t)n + 1) * sizeof *h.v), 0};

	/* an edge from the stage of each input's producer to the stage
	 * reading it, as successor lists */
	for (int k = 0; k < n; k++) {
		const Node *nd = g->nodes.v[k];
		int me = rg_stage_of(owner, nd);
		nleft += me == nd->id;
		for (int i = 0; me >= 0 && i < nd->nin; i++) {
			int from = rg_stage_of(owner, nd->in[i]->def);
			if (from >= 0 && from != me)
				need[me]++, first[from + 1]++, ne++;
		}
	}
	for (int k = 0; k < n; k++)
		first[k + 1] += first[k];
	int *succ = arena_alloc(t, ((size_t)ne + 1) * sizeof *succ);
	int *fill = arena_alloc(t, ((size_t)n + 1) * sizeof *fill);
	for (int k = 0; k < n; k++) {
		const Node *nd = g->nodes.v[k];
		int me = rg_stage_of(owner, nd);
		for (int i = 0; me >= 0 && i < nd->nin; i++) {
			int from = rg_stage_of(owner, nd->in[i]->def);
			if (from >= 0 && from != me)
				succ[first[from] + fill[from]++] = me;
		}
		if (me == k && !need[k])
			heap_push(&h, k);
	}
	for (; h.n; nleft--) {
		int k = heap_pop(&h);
		order[no++] = k;
		for (int e = first[k]; e < first[k + 1]; e++)
			if (--need[succ[e]] == 0)
				heap_push(&h, succ[e]);
	}
	order[no] = -1;
	for (int k = 0; left && k < n; k++)
		left[k] = need[k] > 0;
	arena_release(t, mark);
	return nleft;
}

/* Is n in c's pre region? */
static int
rg_in_pre(const Coll *c, const Node *n)
{
	for (int i = 0; i < c->pre.n; i++)
		if (((const RNode *)c->pre.v[i])->node == n)
			return 1;
	return 0;
}

/* Takes node n out of c's post region, and with it the nodes after it
 * there that read it or what it computes (they would read it whole). */
static void
rg_drop(Finder *F, Coll *c, Node *n, const char *why)
{
	Arena *t = arena_scratch(F->a);
	ArenaMark mark = arena_mark(t);
	char *gone = arena_alloc(t, (size_t)F->g->nodes.n + 1);
	int k = 0;

	gone[n->id] = 1;
	for (int i = 0; i < c->post.n; i++) {
		RNode *rn = c->post.v[i];
		int out = gone[rn->node->id];
		for (int j = 0; j < rn->node->nin && !out; j++)
			out = gone[rn->node->in[j]->def->id];
		if (out) {
			gone[rn->node->id] = 1;
			F->owner[rn->node->id] = NULL;
		} else {
			c->post.v[k++] = rn;
		}
	}
	c->post.n = k;
	arena_release(t, mark);
	rg_stop(F, c, n, 0, why);
}

/* Contracted into their collectives' stages, two regions can read each
 * other's stages (the backward of two reduce_scatters whose inputs share
 * a tensor: each gathered gradient's region computes a part of the
 * other's): then the stages have no order. While so, the latest post
 * region node that reads another stage left unordered leaves its region
 * (rg_drop). One always exists: a pre region's values are read only in
 * it (rg_up_block), and a post region's nodes come after their
 * collective, so a cycle whose every edge ended at a collective or a pre
 * region would be a cycle of the graph. */
static void
rg_acyclic(Finder *F)
{
	Arena *t = arena_scratch(F->a);
	ArenaMark mark = arena_mark(t);
	int n = F->g->nodes.n, *order = arena_alloc(t, ((size_t)n + 1) * sizeof *order);
	char *left = arena_alloc(t, (size_t)n + 1);

	while (region_order(F->g, F->owner, order, left)) {
		Node *bad = NULL;
		const Value *via = NULL;
		for (int k = n - 1; k >= 0 && !bad; k--) {
			Node *nd = rg_node(F, k);
			Coll *c = F->owner[k];
			if (!c || !left[c->node->id] || rg_in_pre(c, nd))
				continue;
			for (int i = 0; i < nd->nin && !bad; i++) {
				int from = rg_stage_of(F->owner, nd->in[i]->def);
				if (from >= 0 && from != c->node->id && left[from])
					bad = nd, via = nd->in[i];
			}
		}
		if (!bad)
			die("region: the stages of %s have no order, and no post region makes it",
			    F->g->name);
		rg_drop(F, F->owner[bad->id], bad,
		        arena_printf(F->a, "reads %s, which waits for this collective's stage "
		                     "through another's", via->name));
	}
	arena_release(t, mark);
}

static void
region_find(Graph *g, Arena *a, Coll **colls, int ncoll, Coll **owner)
{
	Finder F = {.g = g, .a = a, .owner = owner};

	Arena *t = arena_scratch(a);
	ArenaMark mark = arena_mark(t);

	F.vdim = arena_alloc(t, ((size_t)g->values.n + 1) * sizeof *F.vdim);
	F.taint = arena_alloc(t, (size_t)g->values.n + 1);
	for (int i = 0; i < ncoll; i++)
		if (colls[i]->node->op == OP_ALL_REDUCE)
			colls[i]->dim = rg_ar_dim(&F, colls[i]);
	for (int i = 0; i < ncoll; i++)
		if (rg_is_up(colls[i]->node) && colls[i]->dim >= 0) {
			F.nslices = colls[i]->nslices;
			rg_up_coll(&F, colls[i]);
		}
	for (int i = 0; i < ncoll; i++)
		if (rg_is_down(colls[i]->node) && colls[i]->dim >= 0) {
			F.nslices = colls[i]->nslices;
			rg_down(&F, colls[i], colls[i]->node->out, colls[i]->dim);
		}
	rg_acyclic(&F);
	for (int i = 0; i < ncoll; i++)
		rg_link(a, colls[i]);
	arena_release(t, mark);
}

/* A collective as asked, cut as its first guess needs for the search:
 * the slices and (but for all_reduce) the dimension; auto counts on a
 * region until one is known. */
static Coll *
rg_coll_new(Arena *a, Node *n)
{
	Coll *c = arena_alloc(a, sizeof *c);

	c->arena = a;
	c->node = n;
	c->want = *n->sched;
	c->N = n->a.coll.group->size;
	c->bin = c->bout = -1;
	SchedUse u = sched_use(a, n, &c->want, NULL);
	sched_set_how(c, &u);
	c->dim = u.dim;
	return c;
}

Sched *
region_sched(Graph *g)
{
	Arena *a = g->arena, *t = arena_scratch(a);
	ArenaMark mark = arena_mark(t);
	int n = g->nodes.n, ncoll = 0;
	Sched *s = arena_alloc(a, sizeof *s);
	Coll **colls = arena_alloc(t, ((size_t)n + 1) * sizeof *colls);

	s->g = g;
	s->arena = a;
	s->auto_margin = AUTO_MARGIN_OF_PROFILE;
	s->byid = arena_alloc(a, ((size_t)n + 1) * sizeof *s->byid);
	s->owner = arena_alloc(a, ((size_t)n + 1) * sizeof *s->owner);
	for (int k = 0; k < n; k++) {
		Node *nd = g->nodes.v[k];
		if (op_info[nd->op].cls == CL_COLL)
			s->byid[k] = colls[ncoll++] = rg_coll_new(a, nd);
	}
	region_find(g, a, colls, ncoll, s->owner);
	arena_release(t, mark);
	return s;
}
