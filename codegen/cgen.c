/* cgen.c: what the C generators share: C names of tensors, views, the
 * workspace layout, and the runtime call of one op.
 * requires: a checked graph. ensures: the same graph always gives the same
 * text (names and offsets depend only on graph order). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cgen.h"

static int
cmp_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Is s the C name of a tensor, or (stem "in") in0, in1, ...? */
static int
tensor_name(const Cg *c, const char *s, int numbered)
{
	size_t n = strlen(s);

	if (bsearch(&s, c->sorted, (size_t)c->g->values.n, sizeof *c->sorted, cmp_str))
		return 1;
	for (int i = 0; numbered && i < c->g->values.n; i++) {
		const char *t = c->sorted[i];
		if (!strncmp(t, s, n) && t[n] && strspn(t + n, "0123456789") == strlen(t + n))
			return 1;
	}
	return 0;
}

const char *
cg_avoid(Cg *c, const char *want)
{
	return tensor_name(c, want, 0) ? arena_printf(c->a, "cf_%s", want) : want;
}

/* Every tensor under its name, or its output name (sema checked that these
 * may reach the C and differ: cnames.c). */
static void
name_values(Cg *c)
{
	const Graph *g = c->g;

	c->cname = arena_alloc(c->a, (size_t)g->values.n * sizeof *c->cname);
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		c->cname[i] = value_cname(c->a, v);
	}
	c->sorted = arena_alloc(c->a, (size_t)(g->values.n + 1) * sizeof *c->sorted);
	memcpy(c->sorted, c->cname, (size_t)g->values.n * sizeof *c->sorted);
	qsort(c->sorted, (size_t)g->values.n, sizeof *c->sorted, cmp_str);
	for (int i = 1; i < g->values.n; i++)
		if (!strcmp(c->sorted[i - 1], c->sorted[i]))
			die("codegen: two tensors named %s", c->sorted[i]);
}

static void
name_locals(Cg *c)
{
	static const char *const want[NLOCAL] = {
#define X(id, s) s,
		CG_LOCALS(X)
#undef X
	};

	for (int k = 0; k < NLOCAL; k++)
		c->loc[k] = tensor_name(c, want[k], k == LC_IN) ? arena_printf(c->a, "cf_%s", want[k])
		                                                : want[k];
}

void
cg_init(Cg *c, Arena *a, const Graph *g, const struct Plan *plan, FILE *f,
        const char *srcname, int lines, int whole)
{
	memset(c, 0, sizeof *c);
	c->a = a;
	c->g = g;
	c->plan = plan;
	c->whole = whole;
	c->prefix = g->name;
	c->ws = g->fwd ? "CF_BW" : "CF_WS";
	char *up = arena_strdup(a, g->name);
	for (char *p = up; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	c->upper = up;
	emit_init(&c->e, f, lines ? srcname : NULL, NULL);
	name_values(c);
	name_locals(c);
}

int64_t
cg_extent(const Cg *c, const Value *v, int d)
{
	return c->whole ? v->shape[d] : value_rank_extent(v, d);
}

const char *
cg_dims(const Cg *c, const Value *v)
{
	int64_t dims[MAXDIM];

	for (int d = 0; d < v->ndim; d++)
		dims[d] = cg_extent(c, v, d);
	return cg_dims_of(c->a, v->ndim, dims);
}

long long
cg_job_size(const Graph *g)
{
	long long n = 1;

	for (int k = 0; k < g->groups.n; k++)
		n *= ((Group *)g->groups.v[k])->size;
	return n;
}

const char *
cg_group_sizes(Cg *c)
{
	int64_t n[MAXGROUPS];
	int ng = c->g->groups.n;

	for (int k = 0; k < ng; k++)
		n[k] = ((Group *)c->g->groups.v[k])->size;
	if (!ng)
		n[ng++] = 1;
	return cg_dims_of(c->a, ng, n);
}

const char *
cg_split_groups(Arena *a, const Value *v)
{
	int64_t g[MAXDIM];

	for (int d = 0; d < v->ndim; d++) {
		const Group *q = dist_split_group(&v->dist, d);
		g[d] = q ? q->id : -1;
	}
	return cg_dims_of(a, v->ndim, g);
}

const char *
cg_dims_of(Arena *a, int nd, const int64_t *dims)
{
	char buf[256];
	size_t n = 0;

	buf[n++] = '{';
	for (int d = 0; d < nd && n < sizeof buf; d++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", d ? ", " : "",
		                      (long long)dims[d]);
	snprintf(buf + n, sizeof buf - n, "}");
	return arena_strdup(a, buf);
}

const char *
cg_dtype(DType t)
{
	switch (t) {
	case DT_F32: return "CFRT_F32";
	case DT_F64: return "CFRT_F64";
	case DT_BF16: return "CFRT_BF16";
	case DT_F16: return "CFRT_F16";
	default: die("no runtime type for %d", (int)t);
	}
}

/* Does some node of g, or of its backward graph, satisfy pred? */
static int
uses_op(const Graph *g, int (*pred)(const Node *))
{
	for (int i = 0; i < g->nodes.n; i++)
		if (pred(g->nodes.v[i]))
			return 1;
	return g->bwd && uses_op(g->bwd, pred);
}

static int is_trans(const Node *n) { return n->op == OP_MATMUL && (n->a.mm.ta || n->a.mm.tb); }
static int is_sum(const Node *n) { return n->op == OP_MATMUL && n->a.mm.sum; }

/* Emits only the helpers this model needs: no unused static functions. */
void
cg_helpers(Cg *c)
{
	Emitter *e = &c->e;

	if (uses_op(c->g, is_trans)) {
		emit(e, "/* The last two dims of v swapped: a transposed matmul operand. */\n");
		emit_func(e, "static cfrt_view\ncf_transpose(cfrt_view v)");
		emit(e, "int64_t d = v.dim[v.nd - 1], s = v.stride[v.nd - 1];\n\n");
		emit(e, "v.dim[v.nd - 1] = v.dim[v.nd - 2];\n");
		emit(e, "v.stride[v.nd - 1] = v.stride[v.nd - 2];\n");
		emit(e, "v.dim[v.nd - 2] = d;\n");
		emit(e, "v.stride[v.nd - 2] = s;\n");
		emit(e, "return v;\n");
		emit_close(e, "\n");
	}
	if (uses_op(c->g, is_sum)) {
		emit(e, "/* v without its first dim (of extent 1, or folded into the next). */\n");
		emit_func(e, "static cfrt_view\ncf_drop_lead(cfrt_view v)");
		emit_open(e, "for (int d = 0; d < v.nd - 1; d++)");
		emit(e, "v.dim[d] = v.dim[d + 1];\nv.stride[d] = v.stride[d + 1];\n");
		emit_close(e, "");
		emit(e, "v.nd--;\n");
		emit(e, "return v;\n");
		emit_close(e, "\n");
		emit(e, "/* out (+)= a.T @ b summed over the leading dims of a [..., K, M] and\n"
		        " * b [..., K, N]: one GEMM over the rows of the leading dims that\n"
		        " * continue each other in both, one per index of the first leading\n"
		        " * dim where they do not (a slice along S of [B, S, D]). */\n");
		emit_func(e, "static int\ncf_matmul_sum(cfrt_ctx *ctx, const cfrt_view *out, "
		             "cfrt_view a, cfrt_view b,\n              double beta)");
		emit_open(e, "while (a.nd > 2 && a.stride[0] == a.dim[1] * a.stride[1] &&\n"
		             "       b.stride[0] == b.dim[1] * b.stride[1])");
		emit(e, "a.dim[1] *= a.dim[0];\nb.dim[1] *= b.dim[0];\n");
		emit(e, "a = cf_drop_lead(a);\nb = cf_drop_lead(b);\n");
		emit_close(e, "");
		emit_open(e, "if (a.nd == 2)");
		emit(e, "cfrt_view at = cf_transpose(a);\n\n");
		emit(e, "return cfrt_matmul(ctx, out, &at, &b, 1.0, beta);\n");
		emit_close(e, "");
		emit_open(e, "for (int64_t l = 0; l < a.dim[0]; l++)");
		emit(e, "int rc = cf_matmul_sum(ctx, out, cf_drop_lead(cfrt_view_slice(a, 0, l, 1)),\n"
		        "                       cf_drop_lead(cfrt_view_slice(b, 0, l, 1)), l ? 1.0 : beta);\n\n");
		emit(e, "if (rc)\n\treturn rc;\n");
		emit_close(e, "");
		emit(e, "return 0;\n");
		emit_close(e, "\n");
	}
}

const char *
cg_node_str(Cg *c, const Node *n)
{
	const char *s = arena_printf(c->a, "%s = %s(", n->out->name, op_info[n->op].name);

	for (int i = 0; i < n->nin; i++)
		s = arena_printf(c->a, "%s%s%s", s, i ? ", " : "", n->in[i]->name);
	return arena_printf(c->a, "%s)", s);
}

void
cg_comment(Cg *c, const Node *n)
{
	emit(&c->e, "/* %s  %s:%d */\n", cg_node_str(c, n), c->g->file, n->loc.line);
}

void
cg_what(Cg *c, const char *what, const char *slice)
{
	emit(&c->e, "cfrt_what(%s, \"%s\", %s);\n", c->loc[LC_CTX], what, slice ? slice : "-1");
}

static void
call(Cg *c, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CFRT_PROPAGATE(ctx, fn(ctx, args)); with the arguments after ctx as
 * fmt: a failure returns from the entry point under the error mode. */
static void
call(Cg *c, const char *fn, const char *fmt, ...)
{
	va_list ap;

	emit(&c->e, "CFRT_PROPAGATE(%s, %s(%s, ", c->loc[LC_CTX], fn, c->loc[LC_CTX]);
	va_start(ap, fmt);
	emit_v(&c->e, fmt, ap);
	va_end(ap);
	emit(&c->e, "));\n");
}

static const char *
fn_name(Cg *c, const Node *n)
{
	return arena_printf(c->a, "cfrt_%s", op_info[n->op].name);
}

/* The operands of one op's call: C expressions of cfrt_view lvalues
 * (lse: an attention's log-sum-exp, or NULL); q_offset: the global index
 * of the first query row (attention); beta: 1 to accumulate into out
 * (matmul). */
typedef struct Operands {
	const char *out;
	const char *const *in;
	const char *lse;
	const char *q_offset;
	int beta;
} Operands;

/* a.T @ b summed over the leading dims (cf_matmul_sum). */
static void
op_matmul_sum(Cg *c, const Operands *x)
{
	call(c, "cf_matmul_sum", "&%s, %s, %s, %s", x->out, x->in[0], x->in[1],
	     x->beta ? "1.0" : "0.0");
}

/* matmul n's product of in0 and in1 into out: cfrt_matmul (beta 1: added
 * to out), or with addend (a C view, not NULL) cfrt_matmul_add */
static void
matmul_call(Cg *c, const Node *n, const char *out, const char *in0, const char *in1, int beta,
            const char *addend)
{
	const char *a = in0, *b = in1;

	if (n->a.mm.ta || n->a.mm.tb) {
		emit_begin(&c->e);
		if (n->a.mm.ta)
			emit(&c->e, "cfrt_view %s = cf_transpose(%s);\n", c->loc[LC_AT], in0);
		if (n->a.mm.tb)
			emit(&c->e, "cfrt_view %s = cf_transpose(%s);\n", c->loc[LC_BT], in1);
		a = n->a.mm.ta ? c->loc[LC_AT] : a;
		b = n->a.mm.tb ? c->loc[LC_BT] : b;
	}
	if (addend)
		call(c, "cfrt_matmul_add", "&%s, &%s, &%s, &%s, 1.0", out, a, b, addend);
	else
		call(c, "cfrt_matmul", "&%s, &%s, &%s, 1.0, %s", out, a, b, beta ? "1.0" : "0.0");
	if (n->a.mm.ta || n->a.mm.tb)
		emit_close(&c->e, "");
}

static void
op_matmul(Cg *c, const Node *n, const Operands *x)
{
	if (n->a.mm.sum)
		op_matmul_sum(c, x);
	else
		matmul_call(c, n, x->out, x->in[0], x->in[1], x->beta, NULL);
}

void
cg_matmul_add(Cg *c, const Node *n, const char *out, const char *const *in, const char *addend)
{
	matmul_call(c, n, out, in[0], in[1], 0, addend);
}

/* add, mul, swiglu, and the backward's gelu_grad, silu_grad, relu_grad,
 * sigmoid_grad, softmax_grad, swiglu_db:
 * cfrt_NAME(ctx, out, a, b) */
static void
op_binary(Cg *c, const Node *n, const Operands *x)
{
	call(c, n->op == OP_SUB && n->a.rsub ? "cfrt_rsub" : fn_name(c, n), "&%s, &%s, &%s", x->out,
	     x->in[0], x->in[1]);
}

/* swiglu_da: cfrt_NAME(ctx, out, dy, a, b) */
static void
op_ternary(Cg *c, const Node *n, const Operands *x)
{
	call(c, fn_name(c, n), "&%s, &%s, &%s, &%s", x->out, x->in[0], x->in[1], x->in[2]);
}

/* gelu, silu, relu, sigmoid, exp, softmax, the backward's sum_leading:
 * cfrt_NAME(ctx, out, x) */
static void
op_unary(Cg *c, const Node *n, const Operands *x)
{
	call(c, fn_name(c, n), "&%s, &%s", x->out, x->in[0]);
}

/* x as a C literal of type double that reads back as x: %.17g round-trips
 * every finite double (subnormals too), and a point is added where it
 * has none, so that -0 stays -0.0 (the int -0 is +0.0) and a whole
 * number is no int. Sema admits finite numbers only. */
static const char *
c_double(Cg *c, double x)
{
	if (!isfinite(x))
		die("a constant that is no finite double: %g", x);
	const char *s = arena_printf(c->a, "%.17g", x);
	return strpbrk(s, ".e") ? s : arena_printf(c->a, "%s.0", s);
}

static void
op_scale(Cg *c, const Node *n, const Operands *x)
{
	call(c, "cfrt_scale", "&%s, &%s, %s", x->out, x->in[0], c_double(c, n->a.scale));
}

/* layernorm, rmsnorm: cfrt_NAME(ctx, out, x, then each optional operand
 * (gamma, beta) or NULL, eps) */
static void
op_norm(Cg *c, const Node *n, const Operands *x)
{
	const char *opt = "";

	for (int i = 1; i < op_info[n->op].maxarg; i++)
		opt = arena_printf(c->a, "%s, %s", opt, i < n->nin ?
		                   arena_printf(c->a, "&%s", x->in[i]) : "NULL");
	call(c, fn_name(c, n), "&%s, &%s%s, %s", x->out, x->in[0], opt, c_double(c, n->a.eps));
}

/* the backward's layernorm_grad, rmsnorm_grad: cfrt_NAME(ctx, dx, dy, x,
 * gamma or NULL, eps) */
static void
op_norm_grad(Cg *c, const Node *n, const Operands *x)
{
	call(c, fn_name(c, n), "&%s, &%s, &%s, %s, %s", x->out, x->in[0], x->in[1],
	     n->nin > 2 ? arena_printf(c->a, "&%s", x->in[2]) : "NULL", c_double(c, n->a.eps));
}

void
cg_rmsnorm_grad_rows(Cg *c, const Node *n, const char *dx, const char *rows,
                     const char *const *in)
{
	call(c, "cfrt_rmsnorm_grad_rows", "&%s, &%s, &%s, &%s, %s, %s", dx, rows, in[0], in[1],
	     n->nin > 2 ? arena_printf(c->a, "&%s", in[2]) : "NULL", c_double(c, n->a.eps));
}

/* rope, and the backward's rope_grad (the inverse turn): cfrt_rope(ctx,
 * out, x, the dim of the positions, base, position of x's first row
 * along it, inverse) */
static void
op_rope(Cg *c, const Node *n, const Operands *x)
{
	call(c, "cfrt_rope", "&%s, &%s, %d, %s, %s, %d", x->out, x->in[0], n->a.rope.dim,
	     c_double(c, n->a.rope.base), x->q_offset ? x->q_offset : "0", n->op == OP_ROPE_GRAD);
}

void
cg_rope_heads(Cg *c, const Node *rope, const Node *heads, const char *out, const char *in,
              const char *q_offset)
{
	int split = heads->op == OP_SPLIT_HEADS;
	const char *hv = c->loc[LC_HV];

	/* split: in is the flat tensor, out the heads; merge: out is flat */
	emit_begin(&c->e);
	emit(&c->e, "cfrt_view %s = cfrt_view_heads(%s, %s.dim[%s.nd - 3]);\n", hv,
	     split ? in : out, split ? out : in, split ? out : in);
	call(c, "cfrt_rope", "&%s, &%s, %d, %s, %s, %d", split ? out : hv, split ? hv : in,
	     rope->a.rope.dim, c_double(c, rope->a.rope.base), q_offset ? q_offset : "0",
	     rope->op == OP_ROPE_GRAD);
	emit_close(&c->e, "");
}

/* split_heads, merge_heads: one cfrt_copy between the [..., S, H*Dh]
 * tensor seen as its heads [..., H, S, Dh] (cfrt_view_heads) and the heads. */
static void
op_heads(Cg *c, const Node *n, const Operands *x)
{
	int split = n->op == OP_SPLIT_HEADS;
	const char *flat = split ? x->in[0] : x->out, *heads = split ? x->out : x->in[0];

	emit_begin(&c->e);
	emit(&c->e, "cfrt_view %s = cfrt_view_heads(%s, %s.dim[%s.nd - 3]);\n", c->loc[LC_HV], flat, heads,
	     heads);
	if (split)
		call(c, "cfrt_copy", "&%s, &%s", heads, c->loc[LC_HV]);
	else
		call(c, "cfrt_copy", "&%s, &%s", c->loc[LC_HV], heads);
	emit_close(&c->e, "");
}

/* The query offset of attention (or its gradient) n: the global row of
 * its first query (x->q_offset; NULL: 0), moved by Sk - Sq when its
 * causal mask is aligned bottom-right with fewer queries than keys. */
static const char *
attn_qoff(Cg *c, const Node *n, const Operands *x)
{
	int64_t sh = op_causal_shift(n);

	if (!sh)
		return x->q_offset ? x->q_offset : "0";
	if (!x->q_offset)
		return arena_printf(c->a, "%lld", (long long)sh);
	return arena_printf(c->a, "(%s) + %lld", x->q_offset, (long long)sh);
}

/* attention: cfrt_attention, or with a saved log-sum-exp (x->lse)
 * cfrt_attention_lse writing it too */
static void
op_attention(Cg *c, const Node *n, const Operands *x)
{
	const char *const *l = c->loc;

	emit_begin(&c->e);
	emit(&c->e, "cfrt_view %s = cfrt_view_fold(%s, 4), %s = cfrt_view_fold(%s, 4),\n"
	     "          %s = cfrt_view_fold(%s, 4), %s = cfrt_view_fold(%s, 4);\n",
	     l[LC_O4], x->out, l[LC_Q4], x->in[0], l[LC_K4], x->in[1], l[LC_V4], x->in[2]);
	if (x->lse) {
		emit(&c->e, "cfrt_view %s = cfrt_view_fold(%s, 3);\n", l[LC_L3], x->lse);
		call(c, "cfrt_attention_lse", "&%s, &%s, &%s, &%s, &%s, %d, %s", l[LC_O4], l[LC_L3],
		     l[LC_Q4], l[LC_K4], l[LC_V4], n->a.causal, attn_qoff(c, n, x));
	} else {
		call(c, "cfrt_attention", "&%s, &%s, &%s, &%s, %d, %s", l[LC_O4], l[LC_Q4], l[LC_K4],
		     l[LC_V4], n->a.causal, attn_qoff(c, n, x));
	}
	emit_close(&c->e, "");
}

/* the backward's attention_dq, _dk, _dv (q, k, v, out, dout, lse): one
 * cfrt_attention_grad_lse for the gradients of nodes n[0..2] (dq, dk,
 * dv; NULL: not asked for), from the forward's saved log-sum-exp. One
 * call computes all three at the cost of one (cuDNN's and the fused
 * kernel's backward make dq, dk and dv together): the stages emit the
 * siblings of one attention as one call where they can (cg_par.c). */
void
cg_attn_grads(Cg *c, const Node *const n[3], const char *const out[3], const char *const *in,
              const char *q_offset)
{
	const char *const *l = c->loc;
	static const int loc[3] = {LC_DQ4, LC_DK4, LC_DV4};
	const char *g[3] = {"NULL", "NULL", "NULL"};
	const Node *any = n[0] ? n[0] : n[1] ? n[1] : n[2];
	const Operands x = {NULL, in, NULL, q_offset, 0};

	emit_begin(&c->e);
	for (int i = 0; i < 3; i++)
		if (n[i]) {
			emit(&c->e, "cfrt_view %s = cfrt_view_fold(%s, 4);\n", l[loc[i]], out[i]);
			g[i] = arena_printf(c->a, "&%s", l[loc[i]]);
		}
	emit(&c->e, "cfrt_view %s = cfrt_view_fold(%s, 4), %s = cfrt_view_fold(%s, 4),\n"
	     "          %s = cfrt_view_fold(%s, 4), %s = cfrt_view_fold(%s, 4),\n"
	     "          %s = cfrt_view_fold(%s, 4);\n", l[LC_Q4], in[0],
	     l[LC_K4], in[1], l[LC_V4], in[2], l[LC_Y4], in[3], l[LC_DY4], in[4]);
	emit(&c->e, "cfrt_view %s = cfrt_view_fold(%s, 3);\n", l[LC_L3], in[5]);
	call(c, "cfrt_attention_grad_lse", "%s, %s, %s, &%s, &%s, &%s, &%s, &%s, &%s, %d, %s", g[0],
	     g[1], g[2], l[LC_Q4], l[LC_K4], l[LC_V4], l[LC_Y4], l[LC_DY4], l[LC_L3], any->a.causal,
	     attn_qoff(c, any, &x));
	emit_close(&c->e, "");
}

/* one attention gradient alone: the other two NULL */
static void
op_attn_grad(Cg *c, const Node *n, const Operands *x)
{
	int w = n->op == OP_ATTN_DQ ? 0 : n->op == OP_ATTN_DK ? 1 : 2;
	const Node *nn[3] = {NULL, NULL, NULL};
	const char *out[3] = {NULL, NULL, NULL};

	nn[w] = n;
	out[w] = x->out;
	cg_attn_grads(c, nn, out, x->in, x->q_offset);
}

/* scan, and the backward's scan_grad: cfrt_NAME(ctx, out, x, dim, decay) */
static void
op_scan(Cg *c, const Node *n, const Operands *x)
{
	call(c, fn_name(c, n), "&%s, &%s, %d, %s", x->out, x->in[0], n->a.scan.dim,
	     c_double(c, n->a.scan.decay));
}

/* elements [at, at + n) of the 1-d view packed copied to or from the
 * whole of the contiguous view other, seen as 1-d (coalesce.c) */
static void
pack_copy(Cg *c, const char *packed, const char *other, int64_t at, int64_t n, int into)
{
	const char *l = c->loc[LC_DST], *r = c->loc[LC_SRC], *k = c->loc[LC_K];

	emit_begin(&c->e);
	emit(&c->e, "const int64_t %s[1] = {%lld};\n", k, (long long)n);
	emit(&c->e, "cfrt_view %s = cfrt_view_slice(%s, 0, %lld, %lld);\n", into ? l : r, packed,
	     (long long)at, (long long)n);
	emit(&c->e, "cfrt_view %s = cfrt_view_contig(%s.p, %s.t, 1, %s);\n", into ? r : l, other,
	     other, k);
	call(c, "cfrt_copy", "&%s, &%s", l, r);
	emit_close(&c->e, "");
}

/* pack: each input copied into its slot of the 1-d result, the padding
 * after the last slot zeroed */
static void
op_pack(Cg *c, const Node *n, const Operands *x)
{
	int64_t end = 0;

	for (int j = 0; j < n->nin; j++) {
		int64_t len = value_rank_elems(n->in[j]);
		pack_copy(c, x->out, x->in[j], n->a.pack.off[j], len, 1);
		end = n->a.pack.off[j] + len > end ? n->a.pack.off[j] + len : end;
	}
	if (end == n->out->shape[0])
		return;
	emit_begin(&c->e);
	emit(&c->e, "cfrt_view %s = cfrt_view_slice(%s, 0, %lld, %lld);\n", c->loc[LC_DST], x->out,
	     (long long)end, (long long)(n->out->shape[0] - end));
	call(c, "cfrt_scale", "&%s, &%s, 0.0", c->loc[LC_DST], c->loc[LC_DST]);
	emit_close(&c->e, "");
}

/* unpack: the result copied out of its slot of the packed input */
static void
op_unpack(Cg *c, const Node *n, const Operands *x)
{
	pack_copy(c, x->in[0], x->out, n->a.pack.at, value_rank_elems(n->out), 0);
}

typedef void (*OpEmit)(Cg *, const Node *, const Operands *);

/* The emit column of ops.def: NULL for leaves and collectives. */
static const OpEmit op_emit[NOP] = {
#define OP(id, name, lo, hi, cls, tensors, infer, emit, vjp) [OP_##id] = emit,
#include "ops.def"
#undef OP
};

void
cg_op(Cg *c, const Node *n, const char *out, const char *const *in,
      const char *lse, const char *q_offset, int beta)
{
	const Operands x = {out, in, lse, q_offset, beta};

	if (!op_emit[n->op])
		die("cg_op: %s is no compute op", op_info[n->op].name);
	op_emit[n->op](c, n, &x);
}

const char *
cg_role_word(const Value *v)
{
	Role r = v->role;

	if (v->home == HO_GRADS)
		return r == R_IN ? "output gradient" : "gradient";
	if (v->home == HO_ACC)
		return "accumulated gradient";
	return r == R_IN ? "input" : r == R_WEIGHT ? "weight" : r == R_OUT ? "output" : "tensor";
}

/* An interface tensor's pointer: a field of the weights, grads or io
 * struct (an accumulated gradient's old value: its result's field). */
static const char *
arg_ptr(Cg *c, const Value *v)
{
	int k = v->role == R_WEIGHT ? LC_W : v->home == HO_GRADS || v->home == HO_ACC ? LC_GR : LC_IO;

	return arena_printf(c->a, "%s->%s", c->loc[k], c->cname[(v->home == HO_ACC ? v->acc : v)->id]);
}

int64_t
cg_saved_bytes(const Cg *c)
{
	const Graph *f = c->g->fwd ? c->g->fwd : c->g;

	return c->whole ? f->ref_savedbytes : f->savedbytes;
}

/* The structs of buffers (weights, io, grads) that the argument checks
 * read a field of: each is checked not to be NULL first. */
static void
check_structs(Cg *c, const char *used)
{
	static const struct { int loc; const char *what, *type; } st[] = {
		{LC_W, "the weights", "weights"},
		{LC_IO, "the inputs and outputs", "io"},
		{LC_GR, "the gradients", "grads"},
	};
	int need[3] = {0, 0, 0};

	for (int i = 0; i < c->g->values.n; i++) {
		const Value *v = c->g->values.v[i];
		if (!used[i] || v->role == R_ACT || v->home == HO_SAVED)
			continue;
		int k = v->role == R_WEIGHT ? LC_W : v->home == HO_GRADS || v->home == HO_ACC ? LC_GR
		                                                                            : LC_IO;
		for (int s = 0; s < 3; s++)
			need[s] |= st[s].loc == k;
	}
	for (int s = 0; s < 3; s++)
		if (need[s])
			emit(&c->e, "CFRT_PROPAGATE(%s, cfrt_check_ptr(%s, %s, \"%s (%s_%s *)\"));\n",
			     c->loc[LC_CTX], c->loc[LC_CTX], c->loc[st[s].loc], st[s].what,
			     c->prefix, st[s].type);
}

void
cg_check_args(Cg *c, const char *fn, const char *used, int64_t wsbytes)
{
	const char *ctx = c->loc[LC_CTX];
	int saved = 0, weights = 0, io = 0;

	for (int i = 0; i < c->g->values.n; i++) {
		const Value *v = c->g->values.v[i];
		weights |= used[i] && v->role == R_WEIGHT;
		io |= used[i] && v->role == R_IN && v->home == HO_ROLE;
	}
	if (!weights)
		emit(&c->e, "(void)%s;\n", c->loc[LC_W]);
	if (c->g->fwd && !io) /* the backward: the forward's io struct */
		emit(&c->e, "(void)%s;\n", c->loc[LC_IO]);
	/* the context first (a null or finalized one is not read), then
	 * each struct the checks below read a buffer of */
	emit(&c->e, "CFRT_PROPAGATE(%s, cfrt_check_ctx(%s, \"%s\"));\n", ctx, ctx, fn);
	emit(&c->e, "cfrt_where(%s, \"%s\", 0);\n", ctx, fn);
	check_structs(c, used);
	for (int i = 0; i < c->g->values.n; i++) {
		const Value *v = c->g->values.v[i];
		if (used[i] && !c->whole && c->plan && c->plan->in_saved[i])
			saved = 1; /* a tensor of the pass in the saved buffer */
		if (!used[i] || v->role == R_ACT)
			continue;
		if (v->home == HO_SAVED) {
			saved = 1;
			continue;
		}
		int64_t n = dtype_size[v->dtype] * (c->whole ? value_elems(v) : value_rank_elems(v));
		emit(&c->e, "CFRT_PROPAGATE(%s, cfrt_check_arg(%s, %s, %lld, \"%s %s\"));\n", ctx,
		     ctx, arg_ptr(c, v), (long long)n, cg_role_word(v), value_uname(v));
	}
	if (saved)
		emit(&c->e, "CFRT_PROPAGATE(%s, cfrt_check_arg(%s, %s, %lld, \"the saved "
		     "activations\"));\n", ctx, ctx, c->loc[LC_SAVED], (long long)cg_saved_bytes(c));
	else if (c->g->fwd || c->g->bwd)
		emit(&c->e, "(void)%s;\n", c->loc[LC_SAVED]);
	if (wsbytes)
		emit(&c->e, "CFRT_PROPAGATE(%s, cfrt_check_arg(%s, %s, %lld, \"the workspace\"));\n",
		     ctx, ctx, c->loc[LC_WS], (long long)wsbytes);
	else
		emit(&c->e, "(void)%s;\n", c->loc[LC_WS]);
	emit(&c->e, "\n");
}

const char *
cg_ws_name(Cg *c, const Value *v)
{
	return arena_printf(c->a, "%s_%s", c->ws, c->cname[v->id]);
}

int
cg_saves_lse(const Graph *g)
{
	for (int i = 0; i < g->saved.n; i++) {
		const Value *v = g->saved.v[i];
		if (v->def->lse == v)
			return 1;
	}
	return 0;
}

void
cg_saved_defines(Cg *c)
{
	const Graph *g = c->g;

	if (!g->bwd)
		return;
	emit(&c->e, "/* The saved activations (%lld bytes%s): what the backward pass\n"
	        " * reads of the forward's values, bytes from the start of the buffer%s */\n",
	     (long long)cg_saved_bytes(c), c->whole ? ", whole tensors" : " per rank",
	     cg_saves_lse(g) ? "\n * (and each attention's log-sum-exp rows, cfrt_attention_lse)." : ".");
	for (int i = 0; i < g->saved.n; i++) {
		const Value *v = g->saved.v[i];
		emit(&c->e, "#define CF_SAVED_%s %lld /* %s%s */\n", c->cname[v->id],
		     (long long)(c->whole ? v->ref_soff : v->soff), v->name,
		     v->def->lse == v ? arena_printf(c->a, ": lse of %s", v->def->out->name) : "");
	}
	emit(&c->e, "\n");
	emit_func(&c->e, "size_t\n%s_%ssaved_bytes(void)", c->prefix, c->whole ? "ref_" : "");
	emit(&c->e, "return %lld;\n", (long long)cg_saved_bytes(c));
	emit_close(&c->e, "\n");
}

static const char *
storage(Cg *c, const Value *v)
{
	if (v->home == HO_SAVED)
		return arena_printf(c->a, "(void *)((const char *)%s + CF_SAVED_%s)", c->loc[LC_SAVED],
		                    c->cname[v->id]);
	switch (v->role) {
	case R_IN: return arena_printf(c->a, "(void *)%s", arg_ptr(c, v));
	case R_OUT: case R_WEIGHT: return arg_ptr(c, v);
	default:
		if (!c->whole && c->plan && c->plan->in_saved[v->id])
			return arena_printf(c->a, "(char *)%s + %s", c->loc[LC_SAVED], cg_ws_name(c, v));
		return arena_printf(c->a, "(char *)%s + %s", c->loc[LC_WS], cg_ws_name(c, v));
	}
}

void
cg_view(Cg *c, const Value *v)
{
	emit(&c->e, "cfrt_view %s = cfrt_view_contig(%s, %s, %d, (int64_t[])%s);\n",
	     c->cname[v->id], storage(c, v), cg_dtype(v->dtype), v->ndim, cg_dims(c, v));
}

void
cg_views(Cg *c, const char *used, const int64_t *off)
{
	for (int i = 0; i < c->g->values.n; i++) {
		const Value *v = c->g->values.v[i];
		int io = v->role == R_IN || v->role == R_WEIGHT || v->role == R_OUT;
		if (used[i] && (io || off[i] >= 0))
			cg_view(c, v);
	}
}
