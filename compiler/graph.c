/* graph.c: analyses and dumps of the dependency graph.
 *
 * requires: a Graph from sema_build.
 * ensures: graph_fill_locality sets every node's slice-locality (Node.local,
 * Node.inmap) from its op class; graph_check dies on a broken invariant;
 * graph_dump writes the same text for the same graph. */
#include <string.h>

#include "cf.h"

Value *
graph_add(Arena *a, Graph *g, Node *n, Value *v)
{
	v->id = g->values.n;
	vec_push(a, &g->values, v);
	n->id = g->nodes.n;
	vec_push(a, &g->nodes, n);
	n->out = v;
	v->def = n;
	for (int i = 0; i < n->nin; i++)
		vec_push(a, &n->in[i]->uses, n);
	return v;
}

/* ---- value helpers ---- */

int64_t
value_rank_extent(const Value *v, int d)
{
	const Group *g = dist_split_group(&v->dist, d);

	return g ? v->shape[d] / g->size : v->shape[d];
}

int64_t
value_elems(const Value *v)
{
	int64_t n = 1;

	for (int d = 0; d < v->ndim; d++)
		n *= v->shape[d];
	return n;
}

int64_t
value_rank_elems(const Value *v)
{
	int64_t n = 1;

	for (int d = 0; d < v->ndim; d++)
		n *= value_rank_extent(v, d);
	return n;
}

const char *
value_what(const Value *v)
{
	return v->expr ? v->expr : v->name;
}

const char *
value_uname(const Value *v)
{
	return v->outname ? v->outname : v->name;
}

const char *
value_dim_name(Arena *a, const Value *v, int d)
{
	const char *l = d >= 0 && d < v->ndim ? v->label[d] : NULL;

	for (int i = 0; l && i < v->ndim; i++)
		if (i != d && v->label[i] && strcmp(v->label[i], l) == 0)
			l = NULL;
	return l ? l : arena_printf(a, "%d", d);
}

/* "repl", "split S over tp", "partial over tp"; over several groups the
 * splits in dim order, then the partial sums: "split B over dp, S over
 * tp", "split B over dp, partial over tp" */
const char *
dist_str(Arena *a, const Value *v)
{
	const char *s = "";
	int nsplit = 0;

	for (int d = 0; d < v->ndim; d++) {
		const Group *g = dist_split_group(&v->dist, d);
		if (g)
			s = arena_printf(a, "%s%s%s over %s", s, nsplit++ ? ", " : "split ",
			                 value_dim_name(a, v, d), g->name);
	}
	for (int k = 0; k < MAXGROUPS; k++)
		if (v->dist.p[k].kind == DI_PARTIAL)
			s = arena_printf(a, "%s%spartial over %s", s, *s ? ", " : "",
			                 v->dist.p[k].group->name);
	return *s ? s : "repl";
}

const char *
graph_sched_str(Arena *a, const SchedChoice *s)
{
	switch (s->kind) {
	case SK_VANILLA: return "vanilla";
	case SK_AUTO: return "auto";
	case SK_SLICE: return arena_printf(a, "slice(%d)", s->k);
	case SK_FUSE: break;
	}
	return arena_printf(a, "fuse(%s%s%s)", topo_name[s->topo],
	                    s->m > 1 ? arena_printf(a, ", m = %d", s->m) : "",
	                    s->query ? ", split = query" : "");
}

/* The non-tensor arguments of n, each with a leading ", ". */
static const char *
node_extra(Arena *a, const Node *n)
{
	const Value *x = n->nin ? n->in[0] : NULL;

	switch (n->op) {
	case OP_SCALE: return arena_printf(a, ", %g", n->a.scale);
	case OP_SPLIT_HEADS: return arena_printf(a, ", %d", n->a.heads);
	case OP_SUB: return n->a.rsub ? ", reversed" : "";
	case OP_ROPE: case OP_ROPE_GRAD:
		return arena_printf(a, ", %g%s%s", n->a.rope.base, n->a.rope.dim == x->ndim - 2 ?
		                    "" : ", ", n->a.rope.dim == x->ndim - 2 ? "" :
		                    value_dim_name(a, x, n->a.rope.dim));
	case OP_LAYERNORM: case OP_RMSNORM: case OP_LAYERNORM_GRAD: case OP_RMSNORM_GRAD:
		return n->a.eps != 1e-5 ? arena_printf(a, ", eps = %g", n->a.eps) : "";
	case OP_ATTENTION: case OP_ATTN_DQ: case OP_ATTN_DK: case OP_ATTN_DV:
		return n->a.causal ? ", causal" : "";
	case OP_SCAN: case OP_SCAN_GRAD:
		return arena_printf(a, ", %s, %g", value_dim_name(a, x, n->a.scan.dim),
		                    n->a.scan.decay);
	case OP_ALL_GATHER: case OP_REDUCE_SCATTER:
		return arena_printf(a, ", %s", value_dim_name(a, x, n->a.coll.dim));
	case OP_ALL_TO_ALL:
		return arena_printf(a, ", %s, %s", value_dim_name(a, x, n->a.coll.dim),
		                    value_dim_name(a, x, n->a.coll.dim2));
	default: return "";
	}
}

/* n as a call; input names inside n's own layer instance lose its prefix
 * when rel is set ("xa" for "block0.attn0.xa" in block0.attn0). */
static const char *
node_str(Arena *a, const Node *n, int rel)
{
	size_t k = rel && n->layer ? strlen(n->layer) : 0;
	const char *s;

	if (op_info[n->op].cls == CL_LEAF)
		return op_info[n->op].name;
	s = arena_printf(a, "%s(", op_info[n->op].name);
	for (int i = 0; i < n->nin; i++) {
		const char *name = n->in[i]->name;
		int t = n->op == OP_MATMUL && (i ? n->a.mm.tb : n->a.mm.ta);
		if (k && strncmp(name, n->layer, k) == 0 && name[k] == '.')
			name += k + 1;
		s = arena_printf(a, "%s%s%s%s", s, i ? ", " : "", name, t ? ".T" : "");
	}
	return arena_printf(a, "%s%s)", s, node_extra(a, n));
}

const char *
graph_node_str(Arena *a, const Node *n)
{
	return node_str(a, n, 0);
}

/* ---- slice-locality ---- */

static void
local_ew(Node *n, int nd)
{
	n->local = (1u << nd) - 1;
	for (int i = 0; i < n->nin; i++) {
		int off = nd - n->in[i]->ndim;
		for (int d = off; d < nd; d++)
			n->inmap[i][d] = d - off;
	}
}

/* rows of the inputs of the result's rank (x, and the backward's dy and
 * y); the others (gamma, beta) whole */
static void
local_row(Node *n, int nd)
{
	n->local = (1u << (nd - 1)) - 1;
	for (int i = 0; i < n->nin; i++)
		for (int d = 0; d < nd - 1 && n->in[i]->ndim == nd; d++)
			n->inmap[i][d] = d;
}

/* [..., M, K] @ [K, N] or [..., K, N]: batch dims, M and N; a 2-d
 * [M, K] @ [..., K, N] (grad.c's) holds no batch dim */
static void
local_mm(Node *n, int nd)
{
	int na = n->in[0]->ndim, nb = n->in[1]->ndim;

	if (n->a.mm.sum) {
		/* a.T @ b summed over the leading dims: a slice of the rows
		 * (columns) of the result is the product of the same slice of
		 * a's (b's) last dim; no slice of it depends on one slice of a
		 * leading dim */
		n->local = 3;
		n->inmap[0][0] = n->in[0]->ndim - 1;
		n->inmap[1][1] = nb - 1;
		return;
	}
	n->local = (1u << nd) - 1;
	for (int d = 0; d < nd - 2; d++) {
		n->inmap[0][d] = na > 2 ? d : -1;
		n->inmap[1][d] = nb > 2 ? d : -1;
	}
	n->inmap[0][nd - 2] = n->a.mm.ta ? na - 1 : na - 2;
	n->inmap[1][nd - 1] = n->a.mm.tb ? nb - 2 : nb - 1;
}

/* The dim of input 1 - i that dim d of input i is summed with in a
 * matmul (the contraction, and for a summed a.T @ b every leading dim),
 * or -1: slices of both along these dims give partial sums of the whole
 * result, which an accumulating region node adds up (region.c). */
int
graph_sum_dim(const Node *n, int i, int d)
{
	const Value *a = n->in[0], *b = n->in[1];
	int ka, kb;

	if (n->op != OP_MATMUL || i < 0 || i > 1 || d < 0)
		return -1;
	if (n->a.mm.sum)
		return a->ndim == b->ndim && d < a->ndim - 1 ? d : -1;
	ka = n->a.mm.ta ? a->ndim - 2 : a->ndim - 1;
	kb = n->a.mm.tb ? b->ndim - 1 : b->ndim - 2;
	if (i == 0)
		return d == ka ? kb : -1;
	return d == kb ? ka : -1;
}

/* leading dims (q, k, v alike) and Sq (q only) */
static void
local_attn(Node *n, int nd)
{
	n->local = (1u << (nd - 1)) - 1;
	for (int d = 0; d < nd - 2; d++)
		for (int i = 0; i < 3; i++)
			n->inmap[i][d] = d;
	n->inmap[0][nd - 2] = nd - 2;
}

/* the gradients of attention (q, k, v, out, dout): leading dims only (a
 * row of dk or dv depends on every query, one of dq on the whole
 * softmax row) */
static void
local_attn_grad(Node *n, int nd)
{
	n->local = (1u << (nd - 2)) - 1;
	for (int d = 0; d < nd - 2; d++)
		for (int i = 0; i < n->nin; i++)
			n->inmap[i][d] = d;
}

/* a sum over the leading dims of its input: the others */
static void
local_sum(Node *n, int nd)
{
	int off = n->in[0]->ndim - nd;

	n->local = (1u << nd) - 1;
	for (int d = 0; d < nd; d++)
		n->inmap[0][d] = d + off;
}

/* split_heads [..., S, D] -> [..., H, S, Dh]: H <- D, S <- S;
 * merge_heads [..., H, S, Dh] -> [..., S, D]: S <- S, D <- H */
static void
local_heads(Node *n, int nd)
{
	int lead = n->op == OP_SPLIT_HEADS ? nd - 3 : nd - 2;

	for (int d = 0; d < lead; d++)
		n->inmap[0][d] = d;
	/* both ways, the dim after the leading ones maps to the one after it
	 * and back: H <- D, S <- S; S <- S, D <- H */
	n->local = (1u << (lead + 2)) - 1;
	n->inmap[0][lead] = lead + 1;
	n->inmap[0][lead + 1] = lead;
}

static void
local_scan(Node *n, int nd)
{
	for (int d = 0; d < nd; d++)
		if (d != n->a.scan.dim) {
			n->local |= 1u << d;
			n->inmap[0][d] = d;
		}
}

void
graph_fill_locality(Graph *g)
{
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		int nd = n->out->ndim;

		n->local = 0;
		for (int j = 0; j < MAXIN; j++)
			for (int d = 0; d < MAXDIM; d++)
				n->inmap[j][d] = -1;
		switch (op_info[n->op].cls) {
		case CL_EW: local_ew(n, nd); break;
		case CL_ROW: local_row(n, nd); break;
		case CL_MM: local_mm(n, nd); break;
		case CL_ATTN: local_attn(n, nd); break;
		case CL_ATTN_GRAD: local_attn_grad(n, nd); break;
		case CL_SUM: local_sum(n, nd); break;
		case CL_HEADS: local_heads(n, nd); break;
		case CL_SCAN: local_scan(n, nd); break;
		case CL_LEAF: case CL_COLL: case CL_PACK: break;
		}
	}
}

/* ---- distributions ---- */

Dist
dist_one(DistKind k, int dim, Group *g)
{
	Dist d = {0};

	if (k != DI_REPL)
		d.p[g->id] = (DistPart){k, k == DI_SPLIT ? dim : 0, g};
	return d;
}

int
dist_count(const Dist *d, DistKind k)
{
	int n = 0;

	for (int i = 0; i < MAXGROUPS; i++)
		n += d->p[i].kind == k;
	return n;
}

int
dist_is_repl(const Dist *d)
{
	return dist_count(d, DI_REPL) == MAXGROUPS;
}

Group *
dist_group(const Dist *d, DistKind k)
{
	for (int i = 0; i < MAXGROUPS; i++)
		if (d->p[i].kind == k)
			return d->p[i].group;
	return NULL;
}

Group *
dist_split_group(const Dist *d, int dim)
{
	for (int i = 0; i < MAXGROUPS; i++)
		if (d->p[i].kind == DI_SPLIT && d->p[i].dim == dim)
			return d->p[i].group;
	return NULL;
}

void
dist_remap(Dist *d, const int *map, int n)
{
	for (int i = 0; i < MAXGROUPS; i++)
		if (d->p[i].kind == DI_SPLIT && d->p[i].dim < n)
			d->p[i].dim = map[d->p[i].dim];
}

int
dist_clash(const Dist *d)
{
	for (int i = 0; i < MAXGROUPS; i++)
		for (int j = i + 1; j < MAXGROUPS; j++)
			if (d->p[i].kind == DI_SPLIT && d->p[j].kind == DI_SPLIT &&
			    d->p[i].dim == d->p[j].dim)
				return d->p[i].dim;
	return -1;
}

/* ---- distribution rules (LANGUAGE.md, "How values are spread") ----
 * Each applies to every group's part on its own (the ops are linear in
 * each operand, so parts over independent axes of the grid compose); a
 * result that two groups would split along one dim is refused. */

static int
part_eq(DistPart a, DistPart b)
{
	if (a.kind != b.kind)
		return 0;
	return a.kind != DI_SPLIT || a.dim == b.dim;
}

int
graph_dist_eq(Dist a, Dist b)
{
	for (int i = 0; i < MAXGROUPS; i++)
		if (!part_eq(a.p[i], b.p[i]))
			return 0;
	return 1;
}

int
graph_dist_same(Dist a, Dist b)
{
	for (int i = 0; i < MAXGROUPS; i++) {
		const Group *g = a.p[i].group ? a.p[i].group : b.p[i].group;
		if (!part_eq(a.p[i], b.p[i]) && !(g && g->size == 1))
			return 0;
	}
	return 1;
}

int
graph_value_same(const Value *a, const Value *b)
{
	if (a->ndim != b->ndim || a->dtype != b->dtype || !graph_dist_same(a->dist, b->dist))
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

/* [..., M, K] @ [K, N] or [..., K, N], and (made by grad.c only) a 2-d
 * [M, K] @ [..., K, N], broadcast over the batch: a's dims are the
 * result's last ones (aoff before them). */
static int
part_mm(DistPart da, int an, DistPart db, int bn, DistPart *r)
{
	int ak = an - 1, bk = bn - 2, bnn = bn - 1, batched = bn > 2;
	int nd = an > bn ? an : bn, aoff = nd - an;

	*r = (DistPart){DI_REPL, 0, NULL};
	if (da.kind == DI_REPL && db.kind == DI_REPL)
		return 1;
	if (da.kind == DI_PARTIAL && db.kind == DI_REPL) {
		*r = da;
		return 1;
	}
	if (da.kind == DI_REPL && db.kind == DI_PARTIAL) {
		*r = db;
		return 1;
	}
	if (da.kind == DI_SPLIT && db.kind == DI_REPL && da.dim != ak) {
		*r = (DistPart){DI_SPLIT, da.dim + aoff, da.group};
		return 1;
	}
	if (da.kind == DI_REPL && db.kind == DI_SPLIT &&
	    (db.dim == bnn || (batched && db.dim < bk))) {
		*r = (DistPart){DI_SPLIT, db.dim == bnn ? nd - 1 : db.dim, db.group};
		return 1;
	}
	if (da.kind == DI_SPLIT && db.kind == DI_SPLIT) {
		if (da.dim == ak && db.dim == bk) {
			*r = (DistPart){DI_PARTIAL, 0, da.group};
			return 1;
		}
		if (batched && !aoff && da.dim == db.dim && da.dim < bk) {
			*r = da;
			return 1;
		}
	}
	return 0;
}

/* Every group's part by its rule: 0 when one refuses or two groups
 * split one dim (then *clash, if asked, is that dim). */
static int
dist_rule_end(int ok, const Dist *r, int *clash)
{
	int c = ok ? dist_clash(r) : -1;

	if (clash)
		*clash = c;
	return ok && c < 0;
}

int
graph_dist_mm(Dist da, int an, Dist db, int bn, Dist *r, int *clash)
{
	int ok = 1;

	*r = (Dist){0};
	for (int i = 0; i < MAXGROUPS; i++)
		ok &= part_mm(da.p[i], an, db.p[i], bn, &r->p[i]);
	return dist_rule_end(ok, r, clash);
}

static int
part_ew(OpKind op, DistPart a, DistPart b, DistPart *r)
{
	int mul = op != OP_ADD && op != OP_SUB; /* mul and the *_GRAD ops: linear in a */

	if (part_eq(a, b) && !(a.kind == DI_PARTIAL && mul)) {
		*r = a;
		return 1;
	}
	if ((a.kind == DI_REPL && b.kind == DI_SPLIT) ||
	    (a.kind == DI_SPLIT && b.kind == DI_REPL)) {
		*r = a.kind == DI_SPLIT ? a : b;
		return 1;
	}
	if (mul && ((a.kind == DI_PARTIAL && b.kind == DI_REPL) ||
	            (a.kind == DI_REPL && b.kind == DI_PARTIAL))) {
		*r = a.kind == DI_PARTIAL ? a : b;
		return 1;
	}
	return 0;
}

int
graph_dist_ew(OpKind op, Dist a, Dist b, Dist *r, int *clash)
{
	int ok = 1;

	*r = (Dist){0};
	for (int i = 0; i < MAXGROUPS; i++)
		ok &= part_ew(op, a.p[i], b.p[i], &r->p[i]);
	return dist_rule_end(ok, r, clash);
}

/* ---- invariants ---- */

static void
check_value(const Value *v, int i)
{
	if (v->id != i || !v->name || !v->def || (v->def->out != v && v->def->lse != v))
		die("value %d (%s): bad id, name or definition", i, v->name ? v->name : "?");
	if (v->dtype <= DT_NONE || v->dtype >= NDTYPE || v->ndim < 1 || v->ndim > MAXDIM)
		die("value %s: bad dtype or rank", v->name);
	for (int d = 0; d < v->ndim; d++)
		if (v->shape[d] <= 0)
			die("value %s: extent %d is %lld", v->name, d, (long long)v->shape[d]);
	for (int k = 0; k < MAXGROUPS; k++) {
		const DistPart *p = &v->dist.p[k];
		if (p->kind != DI_REPL && (!p->group || p->group->id != k))
			die("value %s: distributed without its group %d", v->name, k);
		if (p->kind == DI_SPLIT && (p->dim < 0 || p->dim >= v->ndim ||
		                            v->shape[p->dim] % p->group->size))
			die("value %s: bad split dimension %d", v->name, p->dim);
	}
	if (dist_clash(&v->dist) >= 0)
		die("value %s: dimension %d split over two groups", v->name, dist_clash(&v->dist));
}

static void
check_node(const Node *n, int i)
{
	if (n->id != i || n->op < 0 || n->op >= NOP || !n->out || n->out->def != n)
		die("node %d: bad id, op or output", i);
	if (n->nin < 0 || n->nin > MAXIN || (op_info[n->op].cls == CL_LEAF) != (n->nin == 0))
		die("node %d (%s): bad input count %d", i, op_info[n->op].name, n->nin);
	for (int j = 0; j < n->nin; j++) {
		const Value *x = n->in[j];
		if (!x || !x->def || x->def->id >= n->id)
			die("node %d (%s): input %d is not defined before it", i,
			    op_info[n->op].name, j);
	}
	if (op_info[n->op].cls == CL_COLL && (!n->a.coll.group || !n->sched))
		die("node %d (%s): collective without a group or schedule", i,
		    op_info[n->op].name);
	if (n->lse && (n->op != OP_ATTENTION || n->lse->def != n ||
	               n->lse->ndim != n->out->ndim - 1))
		die("node %d (%s): a log-sum-exp that is not an attention's", i,
		    op_info[n->op].name);
}

static void
check_role(const Vec *vs, Role r, const char *what)
{
	for (int i = 0; i < vs->n; i++)
		if (((const Value *)vs->v[i])->role != r)
			die("%s %d has the wrong role", what, i);
}

void
graph_check(const Graph *g)
{
	if (!g || !g->name || !g->file)
		die("graph without a name");
	for (int i = 0; i < g->values.n; i++)
		check_value(g->values.v[i], i);
	int nlse = 0;
	for (int i = 0; i < g->nodes.n; i++) {
		check_node(g->nodes.v[i], i);
		nlse += ((const Node *)g->nodes.v[i])->lse != NULL;
	}
	if (g->values.n != g->nodes.n + nlse)
		die("%d values but %d nodes and %d log-sum-exps", g->values.n, g->nodes.n, nlse);
	check_role(&g->inputs, R_IN, "input");
	check_role(&g->weights, R_WEIGHT, "weight");
	check_role(&g->outputs, R_OUT, "output");
}

/* ---- the text dump ---- */

enum { NCOL = 9 };

/* Prints rows of cells in columns two spaces apart, no trailing blanks. */
static void
table_print(FILE *f, const char *indent, const char **cells, int nrow, int ncol)
{
	size_t w[NCOL] = {0};

	for (int r = 0; r < nrow; r++)
		for (int c = 0; c < ncol; c++) {
			size_t l = strlen(cells[r * ncol + c]);
			if (l > w[c])
				w[c] = l;
		}
	for (int r = 0; r < nrow; r++) {
		const char **row = cells + r * ncol;
		int last = ncol - 1;
		while (last > 0 && !row[last][0])
			last--;
		fputs(indent, f);
		for (int c = 0; c <= last; c++)
			fprintf(f, "%-*s%s", c < last ? (int)w[c] : 0, row[c], c < last ? "  " : "\n");
	}
}

static const char *
shape_cell(Arena *a, const Value *v, int rank)
{
	const char *s = "[";

	for (int d = 0; d < v->ndim; d++) {
		int64_t x = rank ? value_rank_extent(v, d) : v->shape[d];
		if (!rank && v->label[d])
			s = arena_printf(a, "%s%s%s=%lld", s, d ? ", " : "", v->label[d], (long long)x);
		else
			s = arena_printf(a, "%s%s%lld", s, d ? ", " : "", (long long)x);
	}
	return arena_printf(a, "%s]", s);
}

static const char *
local_cell(Arena *a, const Node *n)
{
	const char *s = "";

	for (int d = 0; d < n->out->ndim; d++)
		if (n->local & (1u << d))
			s = arena_printf(a, "%s%s%s", s, *s ? " " : "", value_dim_name(a, n->out, d));
	return *s ? s : "-";
}

static void
dump_header(FILE *f, const Graph *g)
{
	Arena *a = g->arena;
	const char *s = "";

	fprintf(f, "model %s  (%s)\n", g->name, g->file);
	fprintf(f, "type    %s\n", dtype_name[g->dtype]);
	for (int i = 0; i < g->sizes.n; i++) {
		const Size *z = g->sizes.v[i];
		s = arena_printf(a, "%s%s%s=%lld%s", s, i ? ", " : "", z->name,
		                 (long long)z->val, z->overridden ? " (-D)" : "");
	}
	fprintf(f, "sizes   %s\n", *s ? s : "-");
	s = "";
	for (int i = 0; i < g->groups.n; i++) {
		const Group *gr = g->groups.v[i];
		s = arena_printf(a, "%s%s%s=%d%s", s, i ? ", " : "", gr->name, gr->size,
		                 gr->overridden ? " (-D)" : "");
	}
	fprintf(f, "groups  %s\n\n", *s ? s : "-");
}

static void
dump_values(FILE *f, const Graph *g)
{
	static const char *const head[NCOL] = {"tensor", "role", "type", "shape", "dist",
	                                       "per rank", "op", "local", "at"};
	Arena *a = g->arena;
	int nrow = g->values.n + 1;
	const char **cells = arena_alloc(a, (size_t)nrow * NCOL * sizeof *cells);

	memcpy(cells, head, sizeof head);
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		const Node *n = v->def;
		const char **row = cells + (i + 1) * NCOL;
		row[0] = v->name;
		row[1] = v->home == HO_SAVED && !g->fwd ? "saved" : role_name[v->role];
		row[2] = dtype_name[v->dtype];
		row[3] = shape_cell(a, v, 0);
		row[4] = dist_str(a, v);
		row[5] = shape_cell(a, v, 1);
		row[6] = node_str(a, n, 1);
		row[7] = local_cell(a, n);
		if (v != n->out) { /* an attention's log-sum-exp */
			row[6] = arena_printf(a, "lse of %s", row[6]);
			row[7] = "-";
		}
		row[8] = arena_printf(a, "%s:%d:%d", g->file, n->loc.line, n->loc.col);
	}
	table_print(f, "", cells, nrow, NCOL);
}

static const char *
coll_cell(Arena *a, const Node *n)
{
	const Value *x = n->in[0];
	const char *g = n->a.coll.group->name;

	switch (n->op) {
	case OP_ALL_TO_ALL:
		return arena_printf(a, "%s -> %s over %s", value_dim_name(a, x, n->a.coll.dim),
		                    value_dim_name(a, x, n->a.coll.dim2), g);
	case OP_ALL_REDUCE:
		return arena_printf(a, "over %s", g);
	default:
		return arena_printf(a, "along %s over %s", value_dim_name(a, x, n->a.coll.dim), g);
	}
}

static void
dump_schedule(FILE *f, const Graph *g)
{
	Arena *a = g->arena;
	const char **cells = arena_alloc(a, ((size_t)g->nodes.n + 1) * 5 * sizeof *cells);
	int nrow = 0;

	fprintf(f, "\nschedule (default %s):\n", graph_sched_str(a, &g->defsched));
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		const char **row = cells + nrow * 5;
		if (op_info[n->op].cls != CL_COLL)
			continue;
		row[0] = n->out->name;
		row[1] = op_info[n->op].name;
		row[2] = coll_cell(a, n);
		row[3] = graph_sched_str(a, n->sched);
		row[4] = n->sched == &g->defsched ? "(default)" : "";
		nrow++;
	}
	if (nrow)
		table_print(f, "  ", cells, nrow, 5);
	else
		fputs("  no collectives\n", f);
}

void
graph_dump(FILE *f, const Graph *g)
{
	dump_header(f, g);
	dump_values(f, g);
	dump_schedule(f, g);
	if (!g->bwd)
		return;
	fprintf(f, "\nbackward of model %s (saved: %lld bytes per rank)\n", g->name,
	        (long long)g->savedbytes);
	dump_values(f, g->bwd);
	dump_schedule(f, g->bwd);
}
