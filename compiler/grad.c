/* grad.c: reverse-mode differentiation as a pass on the dependency graph
 * (DESIGN.md section 6). From the forward graph it builds the backward
 * graph, an ordinary graph that the region, lowering, plan and verify
 * passes take as they take the forward: the gradient of each op's inputs
 * is its vector-Jacobian product (the vjp column of ops.def), collectives
 * transpose (all_gather <-> reduce_scatter on the same dim and group,
 * all_to_all(x, A, B) -> all_to_all(dY, B, A), all_reduce -> all_reduce),
 * gradients that reach a value twice are summed, and a gradient spread
 * otherwise than its tensor is moved there by a collective per group
 * where they differ (a weight replicated over the group that splits the
 * data gets a gradient partial over it, all-reduced: data parallelism;
 * on a grid, a weight split over tp and replicated over dp gets one split
 * over tp and partial over dp).
 *
 * Every gradient is a global tensor spread over the ranks like the values
 * of the forward: the gradient of a split value is split the same way,
 * that of a partial sum replicated (each rank's part gets the whole
 * gradient), that of a replicated value replicated, partial or split.
 *
 * The backward reads forward values: inputs and outputs from the io
 * struct, weights from theirs, and every other value from the saved
 * buffer that the forward fills (HO_SAVED, a result of the forward
 * that lives there). Only local shards are saved: a value that an
 * all_gather made is gathered again in the backward from its saved shard
 * (Megatron's choice), by an all_gather node of the backward graph,
 * unless the spec says `save` of it (Value.keep): then it is saved whole.
 * A value `recompute` names (Value.recompute, sema_recompute.c) is not
 * saved either: the backward computes it again, its node's twin placed
 * before its first use, from what the backward reads (recompute()).
 * Each differentiated attention also saves a value the spec does not
 * name: the log-sum-exp of its query rows (Node.lse, a second result of
 * the forward's attention node), from which its backward rebuilds the
 * softmax without a statistics pass (the flash-attention way).
 *
 * requires: a checked forward graph with its graph facts.
 * ensures: g->bwd passes graph_check; its outputs are d_NAME for every in
 * and weight of g, in that order, spread like their tensors (with
 * accumulate, a weight's is the grads struct's old value plus the
 * gradient: an add whose second input is HO_ACC); g->saved
 * lists the saved values with their offsets; every attention of g that
 * the backward differentiates has its lse, a value of g; or NULL and
 * errors reported, g unchanged. */
#include <string.h>

#include "plan.h"

typedef struct Bw {
	Arena *a;
	Diag *d;
	Graph *g;      /* the forward */
	Graph *b;      /* the backward being built */
	Value **copy;  /* by forward Value.id: the value in b, or NULL */
	Vec *grads;    /* by forward Value.id: gradient contributions in b */
	const char **gname; /* by forward Value.id: an in's, weight's or
	                     * output's gradient's interface name */
	StrMap taken;  /* C spelling -> the value of either graph spelt so, or
	                * the forward value whose gradient's name it is */
	Vec saved;     /* forward values the backward reads from the saved
	                * buffer, marked so when the pass succeeds */
	Vec sleaf;     /* their leaves in b (saved.v[i]'s is sleaf.v[i]),
	                * which take its offsets */
	int err;
} Bw;

typedef void (*Vjp)(Bw *B, const Node *n, Value *dy);

/* ---- names ---- */

/* base, or base_2, base_3, ...: a C name no tensor of either graph has. */
static const char *
fresh_name(Bw *B, const char *base)
{
	const char *s = base;

	for (int k = 2; strmap_get(&B->taken, cname_of(B->a, s)); k++)
		s = arena_printf(B->a, "%s_%d", base, k);
	return s;
}

/* Names the gradient of forward value v (an in, weight or output) for the
 * interface, d_NAME, and keeps the name: it may name no tensor of the
 * forward, and must be a name C allows. */
static void
grad_name(Bw *B, Value *v)
{
	const char *n = arena_printf(B->a, "d_%s", value_uname(v));
	const char *cn = cname_of(B->a, n), *why = cname_refused(B->a, cn, B->g->name);
	const Value *w = strmap_put(B->a, &B->taken, cn, v);

	if (!why && w)
		why = arena_printf(B->a, "tensor %s (line %d) has that name", w->name, w->nloc.line);
	if (why) {
		diag_error(B->d, v->nloc, "the gradient of %s would be named %s in the "
		           "backward pass, but %s: rename one of them", v->name, cn, why);
		B->err = 1;
	}
	B->gname[v->id] = n;
}

/* ---- building the backward graph ---- */

static Value *
new_value(Bw *B, const Value *like, Dist dist, const char *name)
{
	Value *v = arena_alloc(B->a, sizeof *v);

	v->dtype = like->dtype;
	v->ndim = like->ndim;
	memcpy(v->shape, like->shape, sizeof v->shape);
	memcpy(v->label, like->label, sizeof v->label);
	v->dist = dist;
	v->role = R_ACT;
	v->loc = like->loc;
	v->nloc = like->nloc;
	v->name = name;
	return v;
}

/* A node of b made for forward node at (its place in the source and its
 * layer), with inputs in[0..nin). */
static Node *
new_node(Bw *B, const Node *at, OpKind op, int nin, Value *const *in)
{
	Node *n = arena_alloc(B->a, sizeof *n);

	n->op = op;
	n->loc = at->loc;
	n->layer = at->layer;
	n->lname = at->lname;
	n->nin = nin;
	for (int i = 0; i < nin; i++)
		n->in[i] = in[i];
	if (op_info[op].cls == CL_COLL)
		n->a.coll.dim = n->a.coll.dim2 = -1;
	return n;
}

/* Adds n defining v to b. */
static Value *
commit(Bw *B, Node *n, Value *v)
{
	graph_add(B->a, B->b, n, v);
	strmap_put(B->a, &B->taken, value_cname(B->a, v), v);
	return v;
}

/* A leaf of b: a forward value read there, or an output gradient. */
static Value *
leaf(Bw *B, const Value *like, Role role, const char *name)
{
	Node *n = new_node(B, like->def, role == R_WEIGHT ? OP_WEIGHT : OP_INPUT, 0, NULL);
	Value *v = commit(B, n, new_value(B, like, like->dist, name));

	v->role = role;
	vec_push(B->a, role == R_WEIGHT ? &B->b->weights : &B->b->inputs, v);
	return v;
}

/* The schedule of a collective of the backward made for forward
 * collective at (NULL: the model's default): at's own choice, which the
 * schedule rules adapt to the twin (schedrule.c: SF_TWIN). */
static SchedChoice *
sched_for(Bw *B, const Node *at)
{
	if (!at || at->sched == &B->g->defsched)
		return &B->b->defsched;
	SchedChoice *s = arena_alloc(B->a, sizeof *s);
	*s = *at->sched;
	s->from = SF_TWIN;
	return s;
}

/* The collective op over group g moving x to the spread `to` (x's but
 * over g). */
static Value *
coll(Bw *B, const Node *at, OpKind op, Value *x, Group *g, int dim, int dim2, Dist to,
     const char *name, SchedChoice *how)
{
	Node *n = new_node(B, at, op, 1, &x);

	n->a.coll.dim = dim;
	n->a.coll.dim2 = dim2;
	n->a.coll.group = g;
	n->sched = how;
	return commit(B, n, new_value(B, x, to, name));
}

static Value *fwd(Bw *B, Value *v);

/* Forward value v computed again in the backward (`recompute`): its
 * node's twin, with the same attributes, on its inputs as the backward
 * reads them (saved, gathered again or recomputed themselves), added to
 * b where the first use of v asks for it; a collective under its
 * forward's schedule choice. An attention's twin computes no log-sum-exp:
 * the backward reads the forward's (attn_lse). */
static Value *
recompute(Bw *B, Value *v)
{
	const Node *f = v->def;
	Value *in[MAXIN];

	for (int i = 0; i < f->nin; i++)
		in[i] = fwd(B, f->in[i]);
	Node *n = new_node(B, f, f->op, f->nin, in);
	n->a = f->a;
	if (op_info[f->op].cls == CL_COLL)
		n->sched = sched_for(B, f);
	return commit(B, n, new_value(B, v, v->dist, v->name));
}

/* The forward value v as the backward reads it: an input, output or
 * weight as such; a value an all_gather made, gathered again from its
 * shard; one `recompute` names, computed again; any other saved by the
 * forward. */
static Value *
fwd(Bw *B, Value *v)
{
	Value **c = &B->copy[v->id];

	if (*c)
		return *c;
	if (v->role != R_ACT) {
		*c = leaf(B, v, v->role == R_WEIGHT ? R_WEIGHT : R_IN, v->name);
		(*c)->outname = v->outname; /* the io struct names it so */
	} else if (v->def->op == OP_ALL_GATHER && !v->keep) {
		const Node *ag = v->def;
		Value *x = fwd(B, ag->in[0]);
		*c = coll(B, ag, OP_ALL_GATHER, x, ag->a.coll.group, ag->a.coll.dim, -1, v->dist,
		          v->name, sched_for(B, ag));
	} else if (v->recompute && !v->keep) {
		*c = recompute(B, v);
	} else {
		vec_push(B->a, &B->saved, v);
		*c = leaf(B, v, R_IN, v->name);
		(*c)->home = HO_SAVED;
		vec_push(B->a, &B->sleaf, *c);
	}
	return *c;
}

static void
no_rule(Bw *B, const Node *n, const char *why)
{
	diag_error(B->d, n->loc, "no backward rule for %s yet%s", graph_node_str(B->a, n), why);
	B->err = 1;
}

/* "split S over tp" for x spread as want. */
static const char *
want_str(Bw *B, const Value *x, Dist want)
{
	Value w = *x;

	w.dist = want;
	return dist_str(B->a, &w);
}

/* The spread of the gradient of a value spread as x: over each group, a
 * partial sum's is replicated (each rank's part gets the whole gradient),
 * any other's like x. */
static Dist
grad_spread(Dist x)
{
	for (int k = 0; k < MAXGROUPS; k++)
		if (x.p[k].kind == DI_PARTIAL)
			x.p[k] = (DistPart){DI_REPL, 0, NULL};
	return x;
}

/* The collective over group k that moves that group's part of h to
 * want's, when it can move now: pass 0 the reductions (a partial sum
 * reduce-scattered or all-reduced), pass 1 the others (a split gathered or
 * exchanged), neither to a dim another group splits; else -1. */
static int
fit_op(const Dist *h, const Dist *want, int k, int pass)
{
	DistPart a = h->p[k], b = want->p[k];

	if (a.kind == b.kind && (a.kind != DI_SPLIT || a.dim == b.dim))
		return -1;
	if (b.kind == DI_SPLIT && dist_split_group(h, b.dim))
		return -1;
	if (a.kind == DI_PARTIAL && pass == 0)
		return b.kind == DI_SPLIT ? OP_REDUCE_SCATTER : b.kind == DI_REPL ? OP_ALL_REDUCE : -1;
	if (a.kind == DI_SPLIT && pass == 1)
		return b.kind == DI_REPL ? OP_ALL_GATHER : b.kind == DI_SPLIT ? OP_ALL_TO_ALL : -1;
	return -1;
}

/* The groups over which x is replicated and want splits it (along a dim
 * no other group splits), made split at once: each rank keeps its own
 * slice, no transfer (a scale by 1 whose result is split, which reads
 * the rank's window of its replicated operand: plan.c, pl_window).
 * Taken before the collectives: less data moves after it. */
static Value *
fit_local(Bw *B, const Node *at, Value *x, Dist want, const char *name)
{
	Dist to = x->dist;
	int any = 0;

	for (int k = 0; k < MAXGROUPS; k++)
		if (x->dist.p[k].kind == DI_REPL && want.p[k].kind == DI_SPLIT &&
		    !dist_split_group(&to, want.p[k].dim))
			to.p[k] = want.p[k], any = 1;
	if (!any)
		return x;
	const char *nm = graph_dist_eq(to, want) ? name :
	                 fresh_name(B, arena_printf(B->a, "%s_own", name));
	Node *n = new_node(B, at, OP_SCALE, 1, &x);
	n->a.scale = 1.0;
	return commit(B, n, new_value(B, x, to, nm));
}

/* x (a gradient) spread as want: split at once where it is replicated
 * (fit_local), then by the collectives that move it there, one per group
 * where the two differ: the reductions first (less data moves after
 * them); the last takes the name. NULL with an error when no collective
 * does. */
static Value *
fit(Bw *B, const Node *at, Value *x, Dist want, const char *name, SchedChoice *how)
{
	x = fit_local(B, at, x, want, name);
	while (!graph_dist_eq(x->dist, want)) {
		int k = 0, op = -1;
		for (int pass = 0; pass < 2 && op < 0; pass++)
			for (k = 0; k < MAXGROUPS && (op = fit_op(&x->dist, &want, k, pass)) < 0; k++)
				;
		if (op < 0) {
			no_rule(B, at, arena_printf(B->a, ": its gradient is %s where %s is wanted",
			                            dist_str(B->a, x), want_str(B, x, want)));
			return NULL;
		}
		DistPart a = x->dist.p[k], b = want.p[k];
		Dist to = x->dist;
		to.p[k] = b;
		const char *nm = graph_dist_eq(to, want) ? name :
		                 fresh_name(B, arena_printf(B->a, "%s_%s", name, a.group->name));
		x = coll(B, at, op, x, a.group, op == OP_ALL_REDUCE ? -1 : a.kind == DI_SPLIT ?
		         a.dim : b.dim, op == OP_ALL_TO_ALL ? b.dim : -1, to, nm, how);
		x = fit_local(B, at, x, want, name);
	}
	return x;
}

/* A compute node of b: op(in...) shaped like `like`, spread as dist. */
static Value *
compute(Bw *B, const Node *at, OpKind op, int nin, Value *const *in, const Value *like, Dist dist,
        const char *name)
{
	return commit(B, new_node(B, at, op, nin, in), new_value(B, like, dist, name));
}

/* dy op x, elementwise (x may be a suffix of dy's shape, broadcast): its
 * spread by the rules of add and mul. */
static Value *
ew(Bw *B, const Node *at, OpKind op, Value *dy, Value *x, const char *name)
{
	Dist r, xd = x->dist;
	Value *in[2] = {dy, x};
	int map[MAXDIM];

	for (int d = 0; d < x->ndim; d++)
		map[d] = d + dy->ndim - x->ndim;
	dist_remap(&xd, map, x->ndim);
	if (!graph_dist_ew(op, dy->dist, xd, &r, NULL)) {
		no_rule(B, at, arena_printf(B->a, ": its gradient is %s, %s is %s", dist_str(B->a, dy),
		                            x->name, dist_str(B->a, x)));
		return NULL;
	}
	return compute(B, at, op, 2, in, dy, r, name);
}

/* op(dy, x, y), elementwise, x and y of dy's shape: its spread by the
 * rules of mul, pair by pair (op is linear in dy). */
static Value *
ew3(Bw *B, const Node *at, OpKind op, Value *dy, Value *x, Value *y, const char *name)
{
	Dist r, r2;
	Value *in[3] = {dy, x, y};

	if (!graph_dist_ew(op, dy->dist, x->dist, &r, NULL) ||
	    !graph_dist_ew(op, r, y->dist, &r2, NULL)) {
		no_rule(B, at, arena_printf(B->a, ": its gradient is %s, %s is %s and %s is %s",
		                            dist_str(B->a, dy), x->name, dist_str(B->a, x), y->name,
		                            dist_str(B->a, y)));
		return NULL;
	}
	return compute(B, at, op, 3, in, dy, r2, name);
}

/* The sum of gradients a and b of one tensor. A partial sum that add
 * cannot take as it is is made whole first, over each group where the
 * other is not partial too: spread like the other there, or replicated.
 * Two splits of one group along different dims (the gradients of a
 * replicated value, split as two of its uses split their results): b
 * moves to a's (an all_to_all). */
static Value *
sum2(Bw *B, const Node *at, Value *a, Value *b, const char *name)
{
	Value *in[2] = {a, b};
	Dist r;

	for (int i = 0; i < 2 && !graph_dist_ew(OP_ADD, in[0]->dist, in[1]->dist, &r, NULL); i++) {
		Dist want = in[i]->dist, other = grad_spread(in[!i]->dist);
		for (int k = 0; k < MAXGROUPS; k++)
			if (want.p[k].kind == DI_PARTIAL && in[!i]->dist.p[k].kind != DI_PARTIAL)
				want.p[k] = other.p[k];
		if (graph_dist_eq(want, in[i]->dist))
			continue;
		const char *pn = fresh_name(B, arena_printf(B->a, "%s_sum", name));
		in[i] = fit(B, at, in[i], want, pn, sched_for(B, NULL));
		if (!in[i])
			return NULL;
	}
	Dist want = in[1]->dist;
	for (int k = 0; k < MAXGROUPS; k++)
		if (want.p[k].kind == DI_SPLIT && in[0]->dist.p[k].kind == DI_SPLIT)
			want.p[k] = in[0]->dist.p[k];
	if (!graph_dist_eq(want, in[1]->dist) &&
	    !(in[1] = fit(B, at, in[1], want, fresh_name(B, arena_printf(B->a, "%s_sum", name)),
	                  sched_for(B, NULL))))
		return NULL;
	if (!graph_dist_ew(OP_ADD, in[0]->dist, in[1]->dist, &r, NULL)) {
		no_rule(B, at, arena_printf(B->a, ": its gradients are %s and %s",
		                            dist_str(B->a, in[0]), dist_str(B->a, in[1])));
		return NULL;
	}
	return compute(B, at, OP_ADD, 2, in, in[0], r, fresh_name(B, name));
}

/* The gradient of forward value v: the sum of what reached it. */
static Value *
total(Bw *B, const Value *v, const char *name)
{
	Vec *gs = &B->grads[v->id];
	Value *t = gs->n ? gs->v[0] : NULL;

	for (int k = 1; k < gs->n && t; k++)
		t = sum2(B, v->def, t, gs->v[k], name);
	return t;
}

static void
contribute(Bw *B, const Value *v, Value *g)
{
	if (g)
		vec_push(B->a, &B->grads[v->id], g);
}

static const char *
dname(Bw *B, const Value *v)
{
	return fresh_name(B, arena_printf(B->a, "d_%s", v->name));
}

/* ---- the rules (the vjp column of ops.def) ---- */

/* dy made whole, by all_gathers, over each group that splits it along a
 * dim of mask that forward node n's result is not split along by that
 * group: a gradient of a replicated value may come split anywhere
 * (grad_of), but an op not local along a dim (the last of a row op, the
 * scan's, attention's Sq and Dh) needs it whole there. */
static Value *
whole_on(Bw *B, const Node *n, Value *dy, unsigned mask)
{
	Dist want = dy->dist;

	for (int k = 0; k < MAXGROUPS; k++) {
		DistPart p = dy->dist.p[k], o = n->out->dist.p[k];
		if (p.kind == DI_SPLIT && (mask >> p.dim & 1u) &&
		    !(o.kind == DI_SPLIT && o.dim == p.dim))
			want.p[k] = (DistPart){DI_REPL, 0, NULL};
	}
	if (graph_dist_eq(want, dy->dist))
		return dy;
	return fit(B, n, dy, want, fresh_name(B, arena_printf(B->a, "%s_whole", dy->name)),
	           sched_for(B, NULL));
}

/* A node of b for forward node n: op(in...) shaped like `like`, spread
 * as dist, with n's attributes (causal, the scan's dim and decay), named
 * name or else d_LIKE. */
static Value *
like_node(Bw *B, const Node *n, OpKind op, int nin, Value *const *in, const Value *like,
          Dist dist, const char *name)
{
	Node *m = new_node(B, n, op, nin, in);

	m->a = n->a;
	return commit(B, m, new_value(B, like, dist, name ? name : dname(B, like)));
}

/* The dist of v with its last two dims swapped. */
static Dist
transposed(const Value *v, int t)
{
	Dist d = v->dist;
	int a = v->ndim - 2, map[MAXDIM];

	for (int k = 0; k < v->ndim; k++)
		map[k] = k < a ? k : 2 * a + 1 - k;
	if (t)
		dist_remap(&d, map, v->ndim);
	return d;
}

/* Do the rules of matmul take a (transposed if ta) times b (if tb)? */
static int
mm_fits(const Value *a, const Value *b, int ta, int tb, Dist *r)
{
	return graph_dist_mm(transposed(a, ta), a->ndim, transposed(b, tb), b->ndim, r, NULL);
}

/* a @ b (transposes ta, tb) shaped like `like`: NULL when the rules of
 * matmul refuse the operands' spread. */
static Value *
mm(Bw *B, const Node *at, Value *a, Value *b, int ta, int tb, const Value *like)
{
	Dist r;
	Value *in[2] = {a, b};

	if (!mm_fits(a, b, ta, tb, &r)) {
		no_rule(B, at, arena_printf(B->a, ": %s (%s) times %s (%s)", a->name,
		                            dist_str(B->a, a), b->name, dist_str(B->a, b)));
		return NULL;
	}
	Node *n = new_node(B, at, OP_MATMUL, 2, in);
	n->a.mm.ta = ta;
	n->a.mm.tb = tb;
	return commit(B, n, new_value(B, like, r, dname(B, like)));
}

/* a.T @ b summed over the leading dims ([..., M, K] and [..., M, N] to
 * [K, N]): the gradient of a 2-d weight that multiplies batched
 * activations. Contracted dims split alike give a partial sum. */
/* The rule of a.T @ b summed over the leading dims for one group's parts
 * (last: the last dim of a and b); 0 when none applies. */
static int
part_mm_sum(DistPart da, DistPart db, int last, DistPart *r)
{
	*r = (DistPart){DI_REPL, 0, NULL};
	if (da.kind == DI_REPL && db.kind == DI_REPL)
		return 1;
	if ((da.kind == DI_PARTIAL && db.kind == DI_REPL) ||
	    (da.kind == DI_REPL && db.kind == DI_PARTIAL))
		*r = da.kind == DI_PARTIAL ? da : db;
	else if (da.kind == DI_SPLIT && db.kind == DI_SPLIT && da.dim == db.dim && da.dim < last)
		*r = (DistPart){DI_PARTIAL, 0, da.group};
	else if (da.kind == DI_SPLIT && da.dim == last && db.kind == DI_REPL)
		*r = (DistPart){DI_SPLIT, 0, da.group};
	else if (db.kind == DI_SPLIT && db.dim == last && da.kind == DI_REPL)
		*r = (DistPart){DI_SPLIT, 1, db.group};
	else
		return 0;
	return 1;
}

/* a.T @ b summed over the leading dims ([..., M, K] and [..., M, N] to
 * [K, N]): the gradient of a 2-d weight that multiplies batched
 * activations. Contracted dims split alike give a partial sum. */
static int
mm_sum_fits(const Value *a, const Value *b, Dist *r)
{
	int ok = 1;

	*r = (Dist){0};
	for (int k = 0; k < MAXGROUPS; k++)
		ok &= part_mm_sum(a->dist.p[k], b->dist.p[k], a->ndim - 1, &r->p[k]);
	return ok && dist_clash(r) < 0;
}

static Value *
mm_sum(Bw *B, const Node *at, Value *a, Value *b, const Value *like)
{
	Dist r;
	Value *in[2] = {a, b};

	if (!mm_sum_fits(a, b, &r)) {
		no_rule(B, at, arena_printf(B->a, ": %s (%s) times %s (%s) summed over the batch",
		                            a->name, dist_str(B->a, a), b->name, dist_str(B->a, b)));
		return NULL;
	}
	Node *n = new_node(B, at, OP_MATMUL, 2, in);
	n->a.mm.ta = 1;
	n->a.mm.sum = 1;
	return commit(B, n, new_value(B, like, r, dname(B, like)));
}

static Value *sum_to(Bw *B, const Node *at, Value *g, const Value *x, const char *name);

/* C = A.T @ op(B), A batched [..., K, M] and B 2-d: dB = A @ dC (dB.T
 * = dC.T @ A.T when B is transposed) summed over the batch: the batched
 * product [..., K, N] ([..., N, K]), then its sum over the leading dims
 * (sum_to: a split of them makes a partial sum). */
static Value *
mm_sum_ta(Bw *B, const Node *n, Value *dy, Value *a, const Value *b, int tb)
{
	Value *rows = arena_alloc(B->a, sizeof *rows);
	int nd = a->ndim;

	*rows = *a;
	rows->shape[nd - 2 + tb] = a->shape[nd - 2];
	rows->label[nd - 2 + tb] = a->label[nd - 2];
	rows->shape[nd - 1 - tb] = dy->shape[nd - 1];
	rows->label[nd - 1 - tb] = dy->label[nd - 1];
	rows->name = arena_printf(B->a, "%s_rows", b->name);
	Value *g = tb ? mm(B, n, dy, a, 1, 1, rows) : mm(B, n, a, dy, 0, 0, rows);
	return g ? sum_to(B, n, g, b, dname(B, b)) : NULL;
}

/* Do the rules take both products of vjp_matmul with dy as it is? fa
 * and fb spread as the operands (their reads in the backward are). */
static int
vjp_matmul_fits(const Node *n, const Value *dy, const Value *fa, const Value *fb)
{
	int ta = n->a.mm.ta, tb = n->a.mm.tb, bcast = fa->ndim > 2 && fb->ndim == 2;
	Dist r;

	if (!(ta ? mm_fits(fb, dy, tb, 1, &r) : mm_fits(dy, fb, 0, !tb, &r)))
		return 0;
	if (bcast && ta) /* mm_sum_ta's batched product, then its sum */
		return tb ? mm_fits(dy, fa, 1, 1, &r) : mm_fits(fa, dy, 0, 0, &r);
	if (bcast)
		return tb ? mm_sum_fits(dy, fa, &r) : mm_sum_fits(fa, dy, &r);
	return tb ? mm_fits(dy, fa, 1, ta, &r) : mm_fits(fa, dy, !ta, 0, &r);
}

/* C = op(A) @ op(B): dA = dC @ op(B)^T, dB = op(A)^T @ dC, each stored
 * as its operand is (a transposed operand gets the transposed product);
 * a 2-d B under batched A gets the product summed over the batch (a
 * transposed batched A: mm_sum_ta). A dC
 * that the rules do not take as it comes (split where C is replicated,
 * along a dim that a product would contract with a replicated operand)
 * is gathered there first. */
static void
vjp_matmul(Bw *B, const Node *n, Value *dy)
{
	Value *a = n->in[0], *b = n->in[1];
	int ta = n->a.mm.ta, tb = n->a.mm.tb, bcast = a->ndim > 2 && b->ndim == 2;

	if (!vjp_matmul_fits(n, dy, a, b) && !(dy = whole_on(B, n, dy, ~0u)))
		return;
	if (!ta)
		contribute(B, a, mm(B, n, dy, fwd(B, b), 0, !tb, a));
	else
		contribute(B, a, mm(B, n, fwd(B, b), dy, tb, 1, a));
	if (bcast && ta)
		contribute(B, b, mm_sum_ta(B, n, dy, fwd(B, a), b, tb));
	else if (bcast)
		contribute(B, b, tb ? mm_sum(B, n, dy, fwd(B, a), b) : mm_sum(B, n, fwd(B, a), dy, b));
	else if (!tb)
		contribute(B, b, mm(B, n, fwd(B, a), dy, !ta, 0, b));
	else
		contribute(B, b, mm(B, n, dy, fwd(B, a), 1, ta, b));
}

/* g summed over its leading dims down to the shape of x (a broadcast
 * operand's gradient; g itself when the shapes are equal): a split of a
 * summed dim makes a partial sum, one of a kept dim moves with it. */
static Value *
sum_to(Bw *B, const Node *at, Value *g, const Value *x, const char *name)
{
	if (!g || g->ndim == x->ndim)
		return g;
	int off = g->ndim - x->ndim;
	Dist d = g->dist;

	for (int k = 0; k < MAXGROUPS; k++)
		if (d.p[k].kind == DI_SPLIT && d.p[k].dim < off)
			d.p[k] = (DistPart){DI_PARTIAL, 0, d.p[k].group};
		else if (d.p[k].kind == DI_SPLIT)
			d.p[k].dim -= off;
	return compute(B, at, OP_SUM_LEADING, 1, &g, x, d, name);
}

/* a + b, b the same shape as a or a suffix of it (broadcast) */
static void
vjp_add(Bw *B, const Node *n, Value *dy)
{
	contribute(B, n->in[0], dy);
	contribute(B, n->in[1], sum_to(B, n, dy, n->in[1], dname(B, n->in[1])));
}

/* -g, shaped like `like` (g's shape), spread as g. */
static Value *
negated(Bw *B, const Node *at, Value *g, const Value *like, const char *name)
{
	if (!g)
		return NULL;
	Node *m = new_node(B, at, OP_SCALE, 1, &g);
	m->a.scale = -1;
	return commit(B, m, new_value(B, like, g->dist, name));
}

/* a - b, b as for add: da = dy, db = -dy summed to b's shape; reversed
 * (b - a) the other way round */
static void
vjp_sub(Bw *B, const Node *n, Value *dy)
{
	Value *a = n->in[0], *b = n->in[1];
	int rev = n->a.rsub;

	contribute(B, a, rev ? negated(B, n, dy, a, dname(B, a)) : dy);
	Value *g = sum_to(B, n, dy, b, rev ? dname(B, b) : fresh_name(B, arena_printf(B->a,
	                  "%s_sum", dname(B, b))));
	contribute(B, b, rev ? g : negated(B, n, g, b, dname(B, b)));
}

/* a * b, b as for add: da = dy * b, db = dy * a summed to b's shape */
static void
vjp_mul(Bw *B, const Node *n, Value *dy)
{
	Value *a = n->in[0], *b = n->in[1];
	int bc = a->ndim != b->ndim;

	contribute(B, a, ew(B, n, OP_MUL, dy, fwd(B, b), dname(B, a)));
	Value *g = ew(B, n, OP_MUL, dy, fwd(B, a), bc ? fresh_name(B, arena_printf(B->a,
	              "%s_rows", dname(B, b))) : dname(B, b));
	contribute(B, b, g ? sum_to(B, n, g, b, dname(B, b)) : NULL);
}

static void
vjp_scale(Bw *B, const Node *n, Value *dy)
{
	contribute(B, n->in[0], like_node(B, n, OP_SCALE, 1, &dy, n->in[0], dy->dist, NULL));
}

/* gelu, silu, relu: dx = dy * act'(x), one op of the runtime each;
 * sigmoid: dx = dy * y (1 - y) from its result y. */
static void
vjp_act(Bw *B, const Node *n, Value *dy)
{
	OpKind op = n->op == OP_GELU ? OP_GELU_GRAD : n->op == OP_SILU ? OP_SILU_GRAD :
	            n->op == OP_RELU ? OP_RELU_GRAD : OP_SIGMOID_GRAD;
	Value *at = fwd(B, n->op == OP_SIGMOID ? n->out : n->in[0]);

	contribute(B, n->in[0], ew(B, n, op, dy, at, dname(B, n->in[0])));
}

/* swiglu(a, b) = silu(a) * b: da = dy * b * silu'(a) (swiglu_da), db =
 * dy * silu(a) (swiglu_db), one pass each, reading a and b as the
 * backward has them (saved or recomputed); silu(a) is never saved. */
static void
vjp_swiglu(Bw *B, const Node *n, Value *dy)
{
	Value *a = n->in[0], *b = n->in[1], *fa = fwd(B, a);

	contribute(B, a, ew3(B, n, OP_SWIGLU_DA, dy, fa, fwd(B, b), dname(B, a)));
	contribute(B, b, ew(B, n, OP_SWIGLU_DB, dy, fa, dname(B, b)));
}

/* y = exp(x): dx = dy * y. */
static void
vjp_exp(Bw *B, const Node *n, Value *dy)
{
	contribute(B, n->in[0], ew(B, n, OP_MUL, dy, fwd(B, n->out), dname(B, n->in[0])));
}

/* y = rope(x): each pair of x turned by its position's angles, so dx is
 * dy turned back by the same angles (rope_grad, at the same positions). */
static void
vjp_rope(Bw *B, const Node *n, Value *dy)
{
	if ((dy = whole_on(B, n, dy, 1u << (dy->ndim - 1))))
		contribute(B, n->in[0], like_node(B, n, OP_ROPE_GRAD, 1, &dy, n->in[0], dy->dist,
		                                  NULL));
}

/* layernorm(x, gamma, beta), rmsnorm(x, gamma): dx from the runtime's
 * *_grad call; dgamma = dy * xhat summed over the rows, xhat the norm of
 * x without gamma and beta (recomputed); dbeta = dy summed over the rows.
 * Rows split over a group make the sums partial: fit() all-reduces them
 * onto the replicated gamma and beta (Megatron's sequence-parallel norm). */
static void
vjp_norm(Bw *B, const Node *n, Value *dy)
{
	Value *x = n->in[0];
	OpKind g = n->op == OP_LAYERNORM ? OP_LAYERNORM_GRAD : OP_RMSNORM_GRAD;

	if (!(dy = whole_on(B, n, dy, 1u << (dy->ndim - 1))))
		return;
	Value *in[3] = {dy, fwd(B, x), n->nin > 1 ? fwd(B, n->in[1]) : NULL};
	contribute(B, x, like_node(B, n, g, n->nin > 1 ? 3 : 2, in, x, dy->dist, NULL));
	if (n->nin > 1) {
		Value *xh = like_node(B, n, n->op, 1, &in[1], x, x->dist,
		                      fresh_name(B, arena_printf(B->a, "%s_hat", x->name)));
		Value *gx = ew(B, n, OP_MUL, dy, xh, fresh_name(B, arena_printf(B->a, "%s_rows",
		               dname(B, n->in[1]))));
		contribute(B, n->in[1], gx ? sum_to(B, n, gx, n->in[1], dname(B, n->in[1])) : NULL);
	}
	if (n->nin > 2)
		contribute(B, n->in[2], sum_to(B, n, dy, n->in[2], dname(B, n->in[2])));
}

/* y = softmax(x): dx = y * (dy - rowsum(dy * y)) */
static void
vjp_softmax(Bw *B, const Node *n, Value *dy)
{
	if (!(dy = whole_on(B, n, dy, 1u << (dy->ndim - 1))))
		return;
	Value *in[2] = {dy, fwd(B, n->out)};
	contribute(B, n->in[0], like_node(B, n, OP_SOFTMAX_GRAD, 2, in, n->in[0], dy->dist, NULL));
}

/* split_heads and merge_heads undo each other: the gradient through one
 * is the other, spread as that op spreads dy (sema_infer.c): the heads
 * H of [..., H, S, Dh] and the features D of [..., S, D] move into each
 * other, S and the leading dims stay. dy comes split as x's result is,
 * or (x replicated) anywhere but where the other op cannot take it:
 * merge_heads needs whole heads (Dh), split_heads a split of D that
 * gives each rank whole heads. */
static void
vjp_heads(Bw *B, const Node *n, Value *dy)
{
	Value *x = n->in[0];
	OpKind op = n->op == OP_SPLIT_HEADS ? OP_MERGE_HEADS : OP_SPLIT_HEADS;
	int nd = dy->ndim, heads = op == OP_SPLIT_HEADS ? (int)x->shape[x->ndim - 3] : 0;
	int map[MAXDIM];
	const Group *g = dist_split_group(&dy->dist, nd - 1);

	if (g && (op == OP_MERGE_HEADS || heads % g->size) &&
	    !(dy = whole_on(B, n, dy, 1u << (nd - 1))))
		return;
	for (int d = 0; d < nd; d++)
		map[d] = d;
	if (op == OP_MERGE_HEADS) { /* [..., H, S, Dh] -> [..., S, H*Dh] */
		map[nd - 3] = nd - 2;
		map[nd - 2] = nd - 3;
	} else { /* [..., S, D] -> [..., H, S, D/H] */
		map[nd - 2] = nd - 1;
		map[nd - 1] = nd - 2;
	}
	Dist d = dy->dist;
	dist_remap(&d, map, nd);
	Value *dx = like_node(B, n, op, 1, &dy, x, d, NULL);
	if (op == OP_SPLIT_HEADS) /* merge_heads(x): x's heads */
		dx->def->a.heads = heads;
	contribute(B, x, dx);
}

/* The log-sum-exp rows of forward attention n, to be its second result
 * (Node.lse, a value of the forward graph once place_saved adds it;
 * until then its id is -1), saved and read by the backward as a saved
 * leaf: out's dims but the last (Dh), spread like out (never split along
 * Dh: attention is not local there), f32 (f64 in an f64 model), as
 * cfrt_attention_lse writes it. */
static Value *
attn_lse(Bw *B, const Node *n)
{
	const Value *o = n->out;
	Value *l = arena_alloc(B->a, sizeof *l);

	if (dist_split_group(&o->dist, o->ndim - 1))
		die("grad: attention %s split along its last dim", o->name);
	l->dtype = o->dtype == DT_F64 ? DT_F64 : DT_F32;
	l->ndim = o->ndim - 1;
	memcpy(l->shape, o->shape, sizeof l->shape[0] * (size_t)l->ndim);
	memcpy(l->label, o->label, sizeof l->label[0] * (size_t)l->ndim);
	l->dist = o->dist;
	l->role = R_ACT;
	l->loc = o->loc;
	l->nloc = o->nloc;
	l->name = fresh_name(B, arena_printf(B->a, "%s_lse", o->name));
	l->def = B->g->nodes.v[n->id];
	l->id = -1;
	strmap_put(B->a, &B->taken, value_cname(B->a, l), l);
	vec_push(B->a, &B->saved, l);
	Value *c = leaf(B, l, R_IN, l->name);
	c->home = HO_SAVED;
	vec_push(B->a, &B->sleaf, c);
	return c;
}

/* attention(q, k, v): the runtime's backward rebuilds the softmax from q,
 * k and the log-sum-exp the forward saved (attn_lse); dq, dk, dv are
 * three nodes of (q, k, v, out, dout, lse), each spread as dout over
 * every group (a rank's share of the result comes from the same share of
 * each operand: an operand split alike, or replicated and sliced),
 * except along the queries: with q split along Sq (k, v whole), dk and
 * dv are each rank's queries' part, partial sums over q's group, which
 * the transposed all_gather of k and v (a reduce_scatter) or an
 * all_reduce completes. dout whole along Sq and Dh unless the result is
 * split there (grad_of may hand a replicated result's gradient split). */
static void
vjp_attention(Bw *B, const Node *n, Value *dy)
{
	static const OpKind op[3] = {OP_ATTN_DQ, OP_ATTN_DK, OP_ATTN_DV};
	int nd = n->out->ndim;

	if (!(dy = whole_on(B, n, dy, 3u << (nd - 2))))
		return;
	Value *in[6] = {fwd(B, n->in[0]), fwd(B, n->in[1]), fwd(B, n->in[2]), fwd(B, n->out), dy,
	                attn_lse(B, n)};
	for (int i = 0; i < 3; i++) {
		Dist d = dy->dist;
		for (int k = 0; k < MAXGROUPS; k++)
			if (i > 0 && d.p[k].kind == DI_SPLIT && d.p[k].dim == nd - 2)
				d.p[k] = (DistPart){DI_PARTIAL, 0, d.p[k].group};
		contribute(B, n->in[i], like_node(B, n, op[i], 6, in, n->in[i], d, NULL));
	}
}

/* scan(x, dim, decay): the recurrence run backwards */
static void
vjp_scan(Bw *B, const Node *n, Value *dy)
{
	if ((dy = whole_on(B, n, dy, 1u << n->a.scan.dim)))
		contribute(B, n->in[0], like_node(B, n, OP_SCAN_GRAD, 1, &dy, n->in[0], dy->dist,
		                                  NULL));
}

/* A collective's transpose moves the gradient of its result to the spread
 * of its input's gradient: a partial sum's is replicated, a split's split
 * alike. all_gather -> reduce_scatter, reduce_scatter -> all_gather,
 * all_to_all(A, B) -> all_to_all(B, A), all_reduce -> all_reduce of a
 * partial gradient. */
static void
vjp_coll(Bw *B, const Node *n, Value *dy)
{
	const Value *x = n->in[0];

	contribute(B, x, fit(B, n, dy, grad_spread(x->dist), dname(B, x), sched_for(B, n)));
}

static const Vjp vjp[NOP] = {
#define OP(id, name, lo, hi, cls, tensors, infer, emit, vjp) [OP_##id] = vjp,
#include "ops.def"
#undef OP
};

/* ---- the pass ---- */

/* The spread the rules take the gradient dy of v in: over a group that
 * splits v, split alike; over one v is a partial sum over, replicated;
 * over the others as it is (a replicated value's gradient may be partial
 * or split). */
static Dist
grad_of(const Value *v, const Value *dy)
{
	Dist want = grad_spread(v->dist);

	for (int k = 0; k < MAXGROUPS; k++)
		if (v->dist.p[k].kind == DI_REPL)
			want.p[k] = dy->dist.p[k];
	return want;
}

/* Every op whose result has a gradient, last first. */
static void
backprop(Bw *B)
{
	const Graph *g = B->g;

	for (int k = g->nodes.n - 1; k >= 0; k--) {
		const Node *n = g->nodes.v[k];
		const Value *v = n->out;
		if (op_info[n->op].cls == CL_LEAF || !B->grads[v->id].n)
			continue;
		if (!vjp[n->op]) {
			no_rule(B, n, "");
			continue;
		}
		Value *dy = total(B, v, dname(B, v));
		if (dy)
			dy = fit(B, n, dy, grad_of(v, dy), dname(B, v), sched_for(B, NULL));
		if (dy)
			vjp[n->op](B, n, dy);
	}
}

/* --accumulate: weight v's gradient t added to the old value of the
 * grads struct's d_NAME, which the sum then overwrites in place (the add
 * reads each element once before writing it). */
static Value *
accumulate(Bw *B, Value *v, Value *t, const char *name)
{
	Value *old = leaf(B, t, R_IN, fresh_name(B, arena_printf(B->a, "%s_old", name)));
	Value *in[2] = {t, old};

	if (!strcmp(t->name, name)) { /* the sum takes the name */
		t->name = fresh_name(B, arena_printf(B->a, "%s_new", name));
		strmap_put(B->a, &B->taken, value_cname(B->a, t), t);
	}
	old->home = HO_ACC;
	Value *s = compute(B, v->def, OP_ADD, 2, in, t, t->dist, fresh_name(B, name));
	old->acc = s;
	return s;
}

/* The gradient of in or weight v, a result of b named name: spread like
 * v (or as the spec says, `grad split D over G`: a partial sum over G
 * reduce-scattered, ZeRO), zero when no output depends on v, its own
 * value (a copy) when it is an input of b or already another's result. */
static void
leaf_grad(Bw *B, Value *v, const char *name)
{
	Value *t = total(B, v, name);
	int gsplit = dist_count(&v->gdist, DI_SPLIT) > 0;
	Dist want = gsplit ? v->gdist : v->dist;

	for (int k = 0; t && gsplit && k < MAXGROUPS; k++) {
		const Group *g = want.p[k].group;
		if (want.p[k].kind != DI_SPLIT || v->dist.p[k].kind == DI_SPLIT ||
		    t->dist.p[k].kind == DI_PARTIAL)
			continue;
		diag_error(B->d, v->nloc, "the gradient of %s (%s) is no partial sum over %s, "
		           "so it cannot be reduce-scattered over %s (grad split): no data that %s "
		           "multiplies is split over %s", v->name, dist_str(B->a, t),
		           g->name, g->name, v->name, g->name);
		B->err = 1;
		return;
	}
	if (t)
		t = fit(B, v->def, t, want, name, sched_for(B, NULL));
	if (B->err)
		return;
	Node *n = NULL;
	if (!t) {
		Value *x = fwd(B, v);
		n = new_node(B, v->def, OP_SCALE, 1, &x);
		n->a.scale = 0.0;
	} else if (t->role != R_ACT) {
		n = new_node(B, v->def, OP_SCALE, 1, &t);
		n->a.scale = 1.0;
	}
	if (n)
		t = commit(B, n, new_value(B, v, want, name));
	if (B->b->accumulate && v->role == R_WEIGHT)
		t = accumulate(B, v, t, name);
	t->name = name;
	t->role = R_OUT;
	t->home = HO_GRADS;
	vec_push(B->a, &B->b->outputs, t);
}

/* The saved values become results of the forward that live in the saved
 * buffer, at their offsets there: a rank's shards, and whole tensors for
 * the reference. An attention's log-sum-exp joins the forward graph as
 * its node's second result. */
static void
place_saved(Bw *B)
{
	Graph *g = B->g;

	for (int i = 0; i < B->saved.n; i++) {
		Value *v = B->saved.v[i];
		if (v->id < 0) {
			v->id = g->values.n;
			vec_push(B->a, &g->values, v);
			v->def->lse = v;
		}
		v->role = R_OUT;
		v->home = HO_SAVED;
		vec_push(B->a, &g->saved, v);
		v->soff = g->savedbytes;
		v->ref_soff = g->ref_savedbytes;
		g->savedbytes += plan_align(dtype_size[v->dtype] * value_rank_elems(v));
		g->ref_savedbytes += plan_align(dtype_size[v->dtype] * value_elems(v));
		Value *l = B->sleaf.v[i];
		l->soff = v->soff;
		l->ref_soff = v->ref_soff;
	}
}

static Graph *
new_graph(Bw *B)
{
	Graph *b = arena_alloc(B->a, sizeof *b);
	const Graph *g = B->g;

	b->arena = g->arena;
	b->name = g->name;
	b->file = g->file;
	b->dtype = g->dtype;
	b->sizes = g->sizes;
	b->groups = g->groups;
	b->defsched = g->defsched;
	if (b->defsched.from != SF_BUILTIN)
		b->defsched.from = SF_TWIN;
	b->fwd = B->g;
	return b;
}

Graph *
grad_build(Graph *g, Diag *d, int accumulate)
{
	Bw B = {.a = g->arena, .d = d, .g = g};
	size_t nv = (size_t)g->values.n + 1;

	B.b = new_graph(&B);
	B.b->accumulate = accumulate;
	B.copy = arena_alloc(B.a, nv * sizeof *B.copy);
	B.grads = arena_alloc(B.a, nv * sizeof *B.grads);
	B.gname = arena_alloc(B.a, nv * sizeof *B.gname);
	for (int i = 0; i < g->values.n; i++)
		strmap_put(B.a, &B.taken, value_cname(B.a, g->values.v[i]), g->values.v[i]);
	const Vec *ends[3] = {&g->outputs, &g->inputs, &g->weights};
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < ends[k]->n; i++)
			grad_name(&B, ends[k]->v[i]);
	if (B.err)
		return NULL;
	for (int i = 0; i < g->outputs.n; i++) {
		Value *y = g->outputs.v[i], *dy = leaf(&B, y, R_IN, B.gname[y->id]);
		dy->home = HO_GRADS;
		contribute(&B, y, dy);
	}
	backprop(&B);
	for (int k = 1; k < 3 && !B.err; k++)
		for (int i = 0; i < ends[k]->n && !B.err; i++)
			leaf_grad(&B, ends[k]->v[i], B.gname[((Value *)ends[k]->v[i])->id]);
	if (B.err)
		return NULL;
	place_saved(&B);
	g->bwd = B.b;
	return B.b;
}
