/* sema_infer.c: shape and distribution inference, one function per op
 * kind, by the rules of docs/LANGUAGE.md ("How values are spread over the
 * groups"): each group's part by the rules of one group (graph.c), a dim
 * split over one group at most; a collective acts on one group.
 * requires: a checked call: arity, tensor arguments evaluated, one dtype.
 * ensures: the result's shape, labels and distribution, and the node's
 * attributes (transposes aside); or NULL with the error reported. */
#include <limits.h>
#include <string.h>

#include "sema.h"

/* Each infer_* function gets the checked call (tensor arguments in c->v,
 * same dtype) and the pending node n (inputs set) and returns the result,
 * not yet committed. */

static int
whole_sum(Sema *S, const Call *c, int i)
{
	if (!dist_count(&c->v[i]->dist, DI_PARTIAL))
		return 1;
	diag_error(S->d, c->arg[i]->loc, "%s of a partial sum: reduce it first "
	           "(reduce_scatter or all_reduce)", c->fn);
	return 0;
}

/* A matmul operand with its transpose applied. */
typedef struct View {
	int n;
	int64_t shape[MAXDIM];
	const char *label[MAXDIM];
	Dist dist;
} View;

static View
view(const Value *v, int t)
{
	View w = {.n = v->ndim, .dist = v->dist};

	memcpy(w.shape, v->shape, sizeof w.shape);
	memcpy(w.label, v->label, sizeof w.label);
	if (t && v->ndim >= 2) {
		int a = v->ndim - 2, b = v->ndim - 1, map[MAXDIM];
		int64_t s = w.shape[a];
		const char *l = w.label[a];
		w.shape[a] = w.shape[b], w.shape[b] = s;
		w.label[a] = w.label[b], w.label[b] = l;
		for (int d = 0; d < v->ndim; d++)
			map[d] = d == a ? b : d == b ? a : d;
		dist_remap(&w.dist, map, v->ndim);
	}
	return w;
}

static int
mm_shapes(Sema *S, const Call *c, const Node *n, const View *a, const View *b)
{
	const char *sa = sema_shape_str(S, c->v[0]), *sb = sema_shape_str(S, c->v[1]);
	const char *ta = n->a.mm.ta ? ".T" : "", *tb = n->a.mm.tb ? ".T" : "";
	int64_t k = a->shape[a->n - 1], kb = b->shape[b->n - 2];

	if (b->n > 2 && b->n != a->n) {
		diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not match: a "
		           "batched right operand needs as many dimensions as the left",
		           sa, ta, sb, tb);
		return 0;
	}
	if (k != kb) {
		diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not match: "
		           "%lld != %lld", sa, ta, sb, tb, (long long)k, (long long)kb);
		return 0;
	}
	for (int d = 0; d < b->n - 2; d++)
		if (a->shape[d] != b->shape[d]) {
			diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not "
			           "match: the batch dimensions differ", sa, ta, sb, tb);
			return 0;
		}
	return 1;
}

/* The matmul rules of LANGUAGE.md, on the transposed views. */
static int
mm_dist(Sema *S, const Call *c, const View *a, const View *b, Dist *r)
{
	int clash;

	if (graph_dist_mm(a->dist, a->n, b->dist, b->n, r, &clash))
		return 1;
	if (clash >= 0) {
		diag_error(S->d, c->e->loc, "cannot multiply %s (%s) by %s (%s): dimension %d "
		           "of the product would be split over two groups",
		           sema_text(S, c->arg[0]), dist_str(S->a, c->v[0]),
		           sema_text(S, c->arg[1]), dist_str(S->a, c->v[1]), clash);
		return 0;
	}
	diag_error(S->d, c->e->loc, "cannot multiply %s (%s) by %s (%s): split the "
	           "rows of the left or the columns of the right with the other "
	           "replicated, or both along K over one group",
	           sema_text(S, c->arg[0]), dist_str(S->a, c->v[0]),
	           sema_text(S, c->arg[1]), dist_str(S->a, c->v[1]));
	return 0;
}

static Value *
infer_matmul(Sema *S, Call *c, Node *n)
{
	for (int i = 0; i < 2; i++)
		if (c->v[i]->ndim < 2) {
			diag_error(S->d, c->arg[i]->loc, "matmul needs operands of 2 or more "
			           "dimensions, but %s has 1", sema_text(S, c->arg[i]));
			return NULL;
		}
	View a = view(c->v[0], n->a.mm.ta), b = view(c->v[1], n->a.mm.tb);
	if (!mm_shapes(S, c, n, &a, &b))
		return NULL;
	Value *r = sema_proto(S, NULL);
	r->dtype = c->v[0]->dtype;
	r->ndim = a.n;
	for (int d = 0; d < a.n - 1; d++) {
		r->shape[d] = a.shape[d];
		r->label[d] = a.label[d];
	}
	r->shape[a.n - 1] = b.shape[b.n - 1];
	r->label[a.n - 1] = b.label[b.n - 1];
	return mm_dist(S, c, &a, &b, &r->dist) ? r : NULL;
}

/* Elementwise a (op) b, b's dist already moved into a's dims. */
static int
ew_dist(Sema *S, const Call *c, OpKind op, Dist a, Dist b, Dist *r)
{
	const char *verb = op == OP_ADD ? "add" : op == OP_SUB ? "subtract" : "multiply";
	const char *x, *y, *dx, *dy;
	int clash, pp = 0, pr = 0;

	if (graph_dist_ew(op, a, b, r, &clash))
		return 1;
	x = sema_text(S, c->arg[0]), y = sema_text(S, c->arg[1]);
	dx = dist_str(S->a, c->v[0]), dy = dist_str(S->a, c->v[1]);
	for (int k = 0; k < MAXGROUPS; k++) {
		DistKind ka = a.p[k].kind, kb = b.p[k].kind;
		pp |= ka == DI_PARTIAL && kb == DI_PARTIAL;
		pr |= (ka == DI_PARTIAL || kb == DI_PARTIAL) && (ka == DI_REPL || kb == DI_REPL);
	}
	if (clash >= 0)
		diag_error(S->d, c->e->loc, "cannot %s %s (%s) and %s (%s): dimension %d of "
		           "the result would be split over two groups", verb, x, dx, y, dy, clash);
	else if (pp && op == OP_MUL)
		diag_error(S->d, c->e->loc, "cannot multiply %s (%s) by %s (%s): a product "
		           "of partial sums is no partial sum; reduce one first", x, dx, y, dy);
	else if ((op == OP_ADD || op == OP_SUB) && pr)
		diag_error(S->d, c->e->loc, "cannot %s %s (%s) and %s (%s): the "
		           "replicated value would be counted once per rank; reduce the "
		           "partial sum first (reduce_scatter or all_reduce)", verb, x, dx, y, dy);
	else
		diag_error(S->d, c->e->loc, "cannot %s %s (%s) and %s (%s): they are "
		           "spread differently; gather or reduce one first", verb, x, dx, y, dy);
	return 0;
}

/* add, sub, mul: equal shapes, or one a suffix of the other (broadcast);
 * the larger goes first (add and mul commute exactly; a sub so turned
 * is marked reversed: in[1] - in[0]). */
static Value *
infer_ew(Sema *S, Call *c, Node *n)
{
	int big = c->v[1]->ndim > c->v[0]->ndim;
	Value *a = c->v[big], *b = c->v[!big];
	int off = a->ndim - b->ndim;

	n->in[0] = a;
	n->in[1] = b;
	if (n->op == OP_SUB)
		n->a.rsub = big;
	for (int d = 0; d < b->ndim; d++)
		if (b->shape[d] != a->shape[d + off]) {
			diag_error(S->d, c->e->loc, "%s shapes %s and %s do not match: they "
			           "must be equal, or one a suffix of the other", c->fn,
			           sema_shape_str(S, c->v[0]), sema_shape_str(S, c->v[1]));
			return NULL;
		}
	Value *r = sema_proto(S, a);
	for (int d = 0; d < b->ndim; d++)
		if (!r->label[d + off])
			r->label[d + off] = b->label[d];
	Dist bd = b->dist;
	int map[MAXDIM];
	for (int d = 0; d < b->ndim; d++)
		map[d] = d + off;
	dist_remap(&bd, map, b->ndim);
	return ew_dist(S, c, n->op, a->dist, bd, &r->dist) ? r : NULL;
}

/* swiglu(a, b) = silu(a) * b: a and b of one shape (no broadcast), a no
 * partial sum (silu is not linear), b spread as a mul's operand may be. */
static Value *
infer_swiglu(Sema *S, Call *c, Node *n)
{
	Value *a = c->v[0], *b = c->v[1];
	int same = a->ndim == b->ndim;

	for (int d = 0; same && d < a->ndim; d++)
		same = a->shape[d] == b->shape[d];
	if (!same) {
		diag_error(S->d, c->e->loc, "swiglu shapes %s and %s differ: they must be "
		           "equal (no broadcast)", sema_shape_str(S, a), sema_shape_str(S, b));
		return NULL;
	}
	if (!whole_sum(S, c, 0))
		return NULL;
	Value *r = sema_proto(S, a);
	for (int d = 0; d < a->ndim; d++)
		if (!r->label[d])
			r->label[d] = b->label[d];
	(void)n;
	return ew_dist(S, c, OP_MUL, a->dist, b->dist, &r->dist) ? r : NULL;
}

/* gelu, silu, relu, scale */
static Value *
infer_unary(Sema *S, Call *c, Node *n)
{
	if (n->op != OP_SCALE && !whole_sum(S, c, 0))
		return NULL;
	return sema_proto(S, c->v[0]);
}

/* layernorm, rmsnorm, softmax: over the last dimension */
static Value *
infer_row(Sema *S, Call *c, Node *n)
{
	static const char *const pname[] = {"", "gamma", "beta"};
	const Value *x = c->v[0];
	int last = x->ndim - 1;

	(void)n;
	if (!whole_sum(S, c, 0))
		return NULL;
	if (dist_split_group(&x->dist, last)) {
		diag_error(S->d, c->arg[0]->loc, "%s needs the whole last dimension, but "
		           "%s is %s: all_gather it first", c->fn, sema_text(S, c->arg[0]),
		           sema_dist_desc(S, x));
		return NULL;
	}
	for (int i = 1; i < c->nargs; i++) {
		const Value *p = c->v[i];
		if (p->ndim != 1 || p->shape[0] != x->shape[last]) {
			diag_error(S->d, c->arg[i]->loc, "the %s of %s must have shape "
			           "[%lld], but %s has %s", pname[i], c->fn,
			           (long long)x->shape[last], sema_text(S, c->arg[i]), sema_shape_str(S, p));
			return NULL;
		}
		if (!dist_is_repl(&p->dist)) {
			diag_error(S->d, c->arg[i]->loc, "the %s of %s must be replicated, "
			           "but %s is %s", pname[i], c->fn, sema_text(S, c->arg[i]),
			           sema_dist_desc(S, p));
			return NULL;
		}
	}
	return sema_proto(S, x);
}

static int
heads_count(Sema *S, Call *c, int64_t *h)
{
	if (!sema_eval(S, c->sc, c->arg[1], h))
		return 0;
	if (*h <= 0 || *h > INT_MAX) {
		diag_error(S->d, c->arg[1]->loc, "split_heads needs 1 to %d heads, but "
		           "%s is %lld", INT_MAX, sema_text(S, c->arg[1]), (long long)*h);
		return 0;
	}
	return 1;
}

/* The label of the head dim when a dim labelled d splits into heads
 * labelled h: what follows "h*" in d (H*Dh by H: Dh), else d/h. */
static const char *
head_label(Sema *S, const char *d, const char *h)
{
	size_t k = h ? strlen(h) : 0;

	if (!d || !h)
		return NULL;
	if (strncmp(d, h, k) == 0 && d[k] == '*' && d[k + 1])
		return d + k + 1;
	return arena_printf(S->a, "%s/%s", d, h);
}

/* split_heads: [..., S, D] -> [..., H, S, D/H] */
static Value *
infer_split_heads(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int nd = x->ndim;
	int64_t h;

	if (!heads_count(S, c, &h) || !whole_sum(S, c, 0))
		return NULL;
	if (nd < 2 || nd >= MAXDIM) {
		diag_error(S->d, c->arg[0]->loc, "split_heads needs [..., S, D] with 2 to "
		           "%d dimensions, but %s has %d", MAXDIM - 1, sema_text(S, c->arg[0]), nd);
		return NULL;
	}
	if (x->shape[nd - 1] % h) {
		diag_error(S->d, c->arg[1]->loc, "split_heads: %s (%lld) does not divide "
		           "into %lld heads", value_dim_name(S->a, x, nd - 1),
		           (long long)x->shape[nd - 1], (long long)h);
		return NULL;
	}
	Value *r = sema_proto(S, x);
	r->ndim = nd + 1;
	r->shape[nd - 2] = h;
	r->label[nd - 2] = c->arg[1]->kind == E_NAME ? c->arg[1]->u.name : NULL;
	r->shape[nd - 1] = x->shape[nd - 2];
	r->label[nd - 1] = x->label[nd - 2];
	r->shape[nd] = x->shape[nd - 1] / h;
	r->label[nd] = head_label(S, x->label[nd - 1], r->label[nd - 2]);
	n->a.heads = (int)h;
	/* a split of S stays on S; a split of D moves onto the heads, which
	 * must then divide over the group */
	const Group *g = dist_split_group(&x->dist, nd - 1);
	if (g && h % g->size) {
		diag_error(S->d, c->arg[1]->loc, "split_heads: %lld heads do not divide "
		           "evenly over group %s (%d)", (long long)h, g->name, g->size);
		return NULL;
	}
	int map[MAXDIM];
	for (int d = 0; d < nd; d++)
		map[d] = d == nd - 2 ? nd - 1 : d == nd - 1 ? nd - 2 : d;
	dist_remap(&r->dist, map, nd);
	return r;
}

/* The label of H*Dh: D when Dh is split_heads' "D/H", else "H*Dh". */
static const char *
merged_label(Sema *S, const char *h, const char *dh)
{
	size_t n = dh ? strlen(dh) : 0, k = h ? strlen(h) : 0;

	if (!h || !dh)
		return NULL;
	if (n > k + 1 && dh[n - k - 1] == '/' && strcmp(dh + n - k, h) == 0)
		return arena_strndup(S->a, dh, n - k - 1);
	return arena_printf(S->a, "%s*%s", h, dh);
}

/* merge_heads: [..., H, S, Dh] -> [..., S, H*Dh] */
static Value *
infer_merge_heads(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int nd = x->ndim;

	(void)n;
	if (!whole_sum(S, c, 0))
		return NULL;
	if (nd < 3) {
		diag_error(S->d, c->arg[0]->loc, "merge_heads needs [..., H, S, Dh], but "
		           "%s has %d dimension%s", sema_text(S, c->arg[0]), nd, nd == 1 ? "" : "s");
		return NULL;
	}
	if (dist_split_group(&x->dist, nd - 1)) {
		diag_error(S->d, c->arg[0]->loc, "merge_heads needs whole heads, but %s is %s",
		           sema_text(S, c->arg[0]), sema_dist_desc(S, x));
		return NULL;
	}
	Value *r = sema_proto(S, x);
	r->ndim = nd - 1;
	r->shape[nd - 3] = x->shape[nd - 2];
	r->label[nd - 3] = x->label[nd - 2];
	r->shape[nd - 2] = x->shape[nd - 3] * x->shape[nd - 1];
	r->label[nd - 2] = merged_label(S, x->label[nd - 3], x->label[nd - 1]);
	r->label[nd - 1] = NULL;
	r->shape[nd - 1] = 0;
	int map[MAXDIM];
	for (int d = 0; d < nd - 1; d++)
		map[d] = d == nd - 3 ? nd - 2 : d == nd - 2 ? nd - 3 : d;
	dist_remap(&r->dist, map, nd - 1);
	return r;
}

/* q [..., Hq, Sq, Dh], k and v [..., Hk, Sk, Dh]: Hk == Hq, or fewer key
 * and value heads that each serve Hq / Hk query heads (grouped-query and
 * multi-query attention). */
static int
attn_shapes(Sema *S, const Call *c, int causal)
{
	const Value *q = c->v[0], *k = c->v[1], *v = c->v[2];
	int nd = q->ndim, ok = nd >= 2 && k->ndim == nd && v->ndim == nd;

	for (int d = 0; ok && d < nd; d++)
		ok = k->shape[d] == v->shape[d] && (d == nd - 2 || q->shape[d] == k->shape[d] ||
		     (d == nd - 3 && k->shape[d] > 0 && q->shape[d] % k->shape[d] == 0));
	if (!ok) {
		diag_error(S->d, c->e->loc, "attention shapes %s, %s and %s do not match: "
		           "q must be [..., H, Sq, Dh] and k, v [..., Hk, Sk, Dh] with Hk "
		           "dividing H", sema_shape_str(S, q), sema_shape_str(S, k),
		           sema_shape_str(S, v));
		return 0;
	}
	/* bottom-right: query i sees keys j <= i + (Sk - Sq); with more
	 * queries than keys the first rows would see none */
	if (causal && q->shape[nd - 2] > k->shape[nd - 2]) {
		diag_error(S->d, c->e->loc, "causal attention needs no more queries than "
		           "keys (the last query sees every key), but has %lld and %lld",
		           (long long)q->shape[nd - 2], (long long)k->shape[nd - 2]);
		return 0;
	}
	return 1;
}

/* With fewer key/value heads than query heads, a split of the heads must
 * give every rank whole groups: the key/value heads divide over it. */
static int
attn_groups(Sema *S, const Call *c, const Dist *r)
{
	const Value *q = c->v[0], *k = c->v[1];
	int hd = q->ndim - 3;
	const Group *g = hd >= 0 ? dist_split_group(r, hd) : NULL;

	if (!g || q->shape[hd] == k->shape[hd] || k->shape[hd] % g->size == 0)
		return 1;
	diag_error(S->d, c->e->loc, "attention with %lld key/value head%s for %lld query heads "
	           "is split over %s (%d ranks): every rank needs whole groups, so the "
	           "key/value heads must divide over it", (long long)k->shape[hd],
	           k->shape[hd] == 1 ? "" : "s", (long long)q->shape[hd], g->name, g->size);
	return 0;
}

/* Over each group: q split along Sq (k, v whole), or all split along one
 * leading dim, or some split and the others replicated (sliced locally). */
static int
attn_dist(Sema *S, const Call *c, Dist *r)
{
	int nd = c->v[0]->ndim;

	*r = (Dist){0};
	for (int i = 0; i < 3; i++) {
		const Value *x = c->v[i];
		if (!whole_sum(S, c, i))
			return 0;
		if (i > 0 && dist_split_group(&x->dist, nd - 2)) {
			diag_error(S->d, c->arg[i]->loc, "attention needs the whole keys and "
			           "values along the sequence: all_gather them first");
			return 0;
		}
		if (dist_split_group(&x->dist, nd - 1)) {
			diag_error(S->d, c->arg[i]->loc, "attention needs whole heads, but %s "
			           "is %s", sema_text(S, c->arg[i]), sema_dist_desc(S, x));
			return 0;
		}
		for (int k = 0; k < MAXGROUPS; k++) {
			DistPart p = x->dist.p[k], *rp = &r->p[k];
			if (p.kind != DI_SPLIT)
				continue;
			if (rp->kind == DI_SPLIT && rp->dim != p.dim) {
				diag_error(S->d, c->e->loc, "attention operands are split differently: "
				           "%s (%s), %s (%s), %s (%s)",
				           sema_text(S, c->arg[0]), dist_str(S->a, c->v[0]),
				           sema_text(S, c->arg[1]), dist_str(S->a, c->v[1]),
				           sema_text(S, c->arg[2]), dist_str(S->a, c->v[2]));
				return 0;
			}
			*rp = p;
		}
	}
	if (dist_clash(r) >= 0) {
		diag_error(S->d, c->e->loc, "attention operands split dimension %d over two "
		           "groups: %s (%s), %s (%s), %s (%s)", dist_clash(r),
		           sema_text(S, c->arg[0]), dist_str(S->a, c->v[0]),
		           sema_text(S, c->arg[1]), dist_str(S->a, c->v[1]),
		           sema_text(S, c->arg[2]), dist_str(S->a, c->v[2]));
		return 0;
	}
	return 1;
}

static Value *
infer_attention(Sema *S, Call *c, Node *n)
{
	if (c->nargs == 4) {
		const Expr *ce = c->arg[3];
		if (ce->kind != E_NAME || strcmp(ce->u.name, "causal") != 0) {
			diag_error(S->d, ce->loc, "the fourth argument of attention can only "
			           "be 'causal'");
			return NULL;
		}
		n->a.causal = 1;
	}
	if (!attn_shapes(S, c, n->a.causal))
		return NULL;
	Value *r = sema_proto(S, c->v[0]);
	return attn_dist(S, c, &r->dist) && attn_groups(S, c, &r->dist) ? r : NULL;
}

/* The dimension of rope's x that holds the positions: the one named by
 * its third argument, else the one labelled S, else the first of two;
 * -1 (reported) when none or several could be. Never the last. */
static int
rope_dim(Sema *S, const Call *c)
{
	const Value *x = c->v[0];
	int d = -1, n = 0;

	if (c->nargs == 3) {
		d = sema_find_dim(S, x, c->arg[2], NULL, c->arg[0]);
		n = d >= 0;
	} else {
		for (int i = 0; i < x->ndim; i++)
			if (x->label[i] && strcmp(x->label[i], "S") == 0 && n++ == 0)
				d = i;
		if (n == 0 && x->ndim == 2)
			d = 0, n = 1;
		if (n != 1) {
			diag_error(S->d, c->arg[0]->loc, "rope cannot tell which dimension of %s "
			           "%s holds the positions: %s; name it, by label or position, as "
			           "the third argument: rope(%s, 10000, 1)", sema_text(S, c->arg[0]),
			           sema_shape_str(S, x), n ? "several are labelled S" :
			           "none is labelled S", sema_text(S, c->arg[0]));
			return -1;
		}
	}
	if (n == 1 && d == x->ndim - 1) {
		diag_error(S->d, (c->nargs == 3 ? c->arg[2] : c->arg[0])->loc, "rope turns the "
		           "pairs of the last dimension of %s %s: its positions must be in "
		           "another", sema_text(S, c->arg[0]), sema_shape_str(S, x));
		return -1;
	}
	return n == 1 ? d : -1;
}

/* rope(x [, base [, dim]]): the rotary position embedding of x [..., Dh]
 * over its last dim (even), row i of the position dim (rope_dim) at its
 * global position i. */
static Value *
infer_rope(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int last = x->ndim - 1;

	n->a.rope.base = 10000;
	if (c->nargs >= 2 && (!sema_number(c->arg[1], &n->a.rope.base) ||
	                      !(n->a.rope.base > 1))) {
		diag_error(S->d, c->arg[1]->loc, "the base of rope must be a number above 1, "
		           "such as 10000");
		return NULL;
	}
	if (!whole_sum(S, c, 0))
		return NULL;
	if (x->ndim < 2 || x->shape[last] % 2) {
		diag_error(S->d, c->arg[0]->loc, "rope needs [..., S, Dh] with an even Dh, but "
		           "%s is %s", sema_text(S, c->arg[0]), sema_shape_str(S, x));
		return NULL;
	}
	if ((n->a.rope.dim = rope_dim(S, c)) < 0)
		return NULL;
	if (dist_split_group(&x->dist, last)) {
		diag_error(S->d, c->arg[0]->loc, "rope needs the whole last dimension, but %s "
		           "is %s: all_gather it first", sema_text(S, c->arg[0]),
		           sema_dist_desc(S, x));
		return NULL;
	}
	return sema_proto(S, x);
}

static Value *
infer_scan(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = sema_find_dim(S, x, c->arg[1], NULL, c->arg[0]);

	n->a.scan.decay = 0.5;
	if (c->nargs == 3 && !sema_number(c->arg[2], &n->a.scan.decay)) {
		diag_error(S->d, c->arg[2]->loc, "the decay of scan must be a number, "
		           "such as 0.9");
		return NULL;
	}
	if (d < 0 || !whole_sum(S, c, 0))
		return NULL;
	if (dist_split_group(&x->dist, d)) {
		diag_error(S->d, c->arg[0]->loc, "scan along %s needs the whole sequence, "
		           "but %s is %s: all_gather it first", value_dim_name(S->a, x, d),
		           sema_text(S, c->arg[0]), sema_dist_desc(S, x));
		return NULL;
	}
	n->a.scan.dim = d;
	return sema_proto(S, x);
}

/* ---- collectives ----
 * A collective acts on one group: all_gather and all_to_all on the one
 * that splits the dim they name, reduce_scatter and all_reduce on the one
 * the partial sum is over (named by a last argument when it is over
 * several). The parts over the other groups pass through. */

/* The collective's input must be split along d (its argument 1): "all_gather
 * along S needs x split along S, but x is ...", with partial appended when
 * x is a partial sum; the group that splits it, or NULL. */
static Group *
need_split(Sema *S, const Call *c, int d, const char *prep, const char *partial)
{
	const Value *x = c->v[0];
	Group *g = dist_split_group(&x->dist, d);

	if (g)
		return g;
	const char *dn = value_dim_name(S->a, x, d), *xs = sema_text(S, c->arg[0]);
	diag_error(S->d, dist_count(&x->dist, DI_SPLIT) ? c->arg[1]->loc : c->arg[0]->loc,
	           "%s %s %s needs %s split along %s, but %s is %s%s", c->fn, prep, dn,
	           xs, dn, xs, sema_dist_desc(S, x),
	           dist_count(&x->dist, DI_PARTIAL) ? partial : "");
	return NULL;
}

/* The result's dim d, which the collective splits over g, must be split
 * over no other group. */
static int
dim_free(Sema *S, const Call *c, int d, const Group *g, const Expr *at)
{
	const Group *o = dist_split_group(&c->v[0]->dist, d);

	if (!o || o == g)
		return 1;
	diag_error(S->d, at->loc, "%s over %s cannot split %s along %s: it is split over %s "
	           "already, and a dimension is split over one group", c->fn, g->name,
	           sema_text(S, c->arg[0]), value_dim_name(S->a, c->v[0], d), o->name);
	return 0;
}

static Value *
infer_all_gather(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = sema_find_dim(S, x, c->arg[1], NULL, c->arg[0]);
	Group *g = d < 0 ? NULL :
	           need_split(S, c, d, "along", ": reduce it with reduce_scatter or all_reduce");

	if (!g)
		return NULL;
	Value *r = sema_proto(S, x);
	r->dist.p[g->id] = (DistPart){DI_REPL, 0, NULL};
	n->a.coll.dim = d;
	n->a.coll.group = g;
	return r;
}

/* The group a reduction sums over: the one its input is a partial sum
 * over, or the one argument gi names (when there, and needed when the
 * sum is over several); NULL after an error. */
static Group *
need_partial(Sema *S, const Call *c, int gi)
{
	const Value *x = c->v[0];
	const Expr *ge = gi < c->nargs ? c->arg[gi] : NULL;
	int np = dist_count(&x->dist, DI_PARTIAL);

	if (!np) {
		diag_error(S->d, c->arg[0]->loc, "%s needs a partial sum, but %s is %s",
		           c->fn, sema_text(S, c->arg[0]), sema_dist_desc(S, x));
		return NULL;
	}
	if (!ge && np == 1)
		return dist_group(&x->dist, DI_PARTIAL);
	if (!ge) {
		const char *args = sema_text(S, c->arg[0]);
		for (int i = 1; i < gi; i++)
			args = arena_printf(S->a, "%s, %s", args, sema_text(S, c->arg[i]));
		diag_error(S->d, c->e->loc, "%s is %s: name the group %s sums over as its last "
		           "argument, as in %s(%s, %s)", sema_text(S, c->arg[0]), sema_dist_desc(S, x),
		           c->fn, c->fn, args, dist_group(&x->dist, DI_PARTIAL)->name);
		return NULL;
	}
	Sym *gs = ge->kind == E_NAME ? sema_lookup(c->sc, ge->u.name) : NULL;
	if (!gs || gs->kind != SY_GROUP) {
		diag_error(S->d, ge->loc, "the last argument of %s names the group it sums over, "
		           "but %s is no group", c->fn, sema_text(S, ge));
		return NULL;
	}
	if (gs->bad)
		return NULL;
	if (x->dist.p[gs->u.group->id].kind != DI_PARTIAL) {
		diag_error(S->d, ge->loc, "%s over %s needs a partial sum over %s, but %s is %s",
		           c->fn, gs->u.group->name, gs->u.group->name, sema_text(S, c->arg[0]),
		           sema_dist_desc(S, x));
		return NULL;
	}
	return gs->u.group;
}

static Value *
infer_reduce_scatter(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = sema_find_dim(S, x, c->arg[1], NULL, c->arg[0]);
	Group *g = d < 0 ? NULL : need_partial(S, c, 2);

	if (!g || !dim_free(S, c, d, g, c->arg[1]) ||
	    !sema_divides(S, x, d, g, c->arg[1]->loc, NULL, c->arg[0]))
		return NULL;
	Value *r = sema_proto(S, x);
	r->dist.p[g->id] = (DistPart){DI_SPLIT, d, g};
	n->a.coll.dim = d;
	n->a.coll.group = g;
	return r;
}

static Value *
infer_all_reduce(Sema *S, Call *c, Node *n)
{
	Group *g = need_partial(S, c, 1);

	if (!g)
		return NULL;
	Value *r = sema_proto(S, c->v[0]);
	r->dist.p[g->id] = (DistPart){DI_REPL, 0, NULL};
	n->a.coll.group = g;
	return r;
}

static Value *
infer_all_to_all(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d1 = sema_find_dim(S, x, c->arg[1], NULL, c->arg[0]);
	int d2 = sema_find_dim(S, x, c->arg[2], NULL, c->arg[0]);
	Group *g;

	if (d1 < 0 || d2 < 0)
		return NULL;
	if (d1 == d2) {
		diag_error(S->d, c->arg[2]->loc, "all_to_all needs two different dimensions");
		return NULL;
	}
	if (!(g = need_split(S, c, d1, "from", "")) || !dim_free(S, c, d2, g, c->arg[2]) ||
	    !sema_divides(S, x, d2, g, c->arg[2]->loc, NULL, c->arg[0]))
		return NULL;
	Value *r = sema_proto(S, x);
	r->dist.p[g->id].dim = d2;
	n->a.coll.dim = d1;
	n->a.coll.dim2 = d2;
	n->a.coll.group = g;
	return r;
}

typedef Value *(*Infer)(Sema *, Call *, Node *);

static const Infer infer_fn[NOP] = {
#define OP(id, name, lo, hi, cls, tensors, infer, emit, vjp) [OP_##id] = infer,
#include "ops.def"
#undef OP
};

Value *
sema_infer(Sema *S, Call *c, Node *n)
{
	if (!infer_fn[n->op])
		die("no inference for op %s", op_info[n->op].name);
	return infer_fn[n->op](S, c, n);
}
