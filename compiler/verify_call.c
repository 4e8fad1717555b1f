/* verify_call.c: the shapes of every runtime call. The runtime checks the
 * views of each compute call (runtime/common/check.c, view.c, matmul.c)
 * and ends the job when they disagree; here the same agreement is
 * required of the views the plan builds for the call, as the generated
 * code hands them over (codegen/cgen.c: cf_transpose of a transposed
 * matmul operand, cfrt_view_fold of attention's, cfrt_view_heads of a
 * head split or merge), so that a plan the runtime would refuse is one
 * the verifier could not prove, never one that is emitted.
 * requires: views of the result, the inputs and (n->lse) an attention's
 * log-sum-exp, in that order, as verify_mem.c resolves them.
 * ensures: 0 when every runtime check of the call's shapes would pass;
 * else 1 and why, naming the call, its operands and their dims. */
#include <stdarg.h>
#include <stdio.h>

#include "verify.h"
#define CFRT_DIMS_ONLY
#include "cfrt.h"

typedef struct Call {
	const Node *n;
	char *why;
	size_t nwhy;
} Call;

static const char *
dims(const MView *m, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");

	for (int d = 0; d < m->nd && k < n; d++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)m->dim[d]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

static int bad(Call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
bad(Call *c, const char *fmt, ...)
{
	va_list ap;
	size_t k = (size_t)snprintf(c->why, c->nwhy, "the runtime call of %s (%s) would be refused: ",
	                            c->n->out->name, op_info[c->n->op].name);

	if (k < c->nwhy) {
		va_start(ap, fmt);
		vsnprintf(c->why + k, c->nwhy - k, fmt, ap);
		va_end(ap);
	}
	return 1;
}

/* cfrti_check_same: the same dims */
static int
same(Call *c, const MView *a, const MView *b, const char *an, const char *bn)
{
	char sa[96], sb[96];
	int ok = a->nd == b->nd;

	for (int d = 0; ok && d < a->nd; d++)
		ok = a->dim[d] == b->dim[d];
	return ok ? 0 : bad(c, "%s %s and %s %s differ in shape", an, dims(a, sa, sizeof sa), bn,
	                    dims(b, sb, sizeof sb));
}

/* cfrti_broadcast_to: b's dims right-aligned against to's, each equal or 1 */
static int
broadcasts(Call *c, const MView *b, const MView *to)
{
	char sa[96], sb[96];
	int lead = to->nd - b->nd, ok = lead >= 0;

	for (int d = 0; ok && d < b->nd; d++)
		ok = b->dim[d] == 1 || b->dim[d] == to->dim[lead + d];
	return ok ? 0 : bad(c, "%s does not broadcast to %s", dims(b, sa, sizeof sa),
	                    dims(to, sb, sizeof sb));
}

/* cfrti_check_vec: a 1-d view of n elements (gamma, beta) */
static int
vec(Call *c, const MView *g, int64_t n, const char *what)
{
	char s[96];

	return g->nd == 1 && g->dim[0] == n ? 0 :
	       bad(c, "%s %s is no 1-d view of %lld elements", what, dims(g, s, sizeof s),
	           (long long)n);
}

/* cf_transpose */
static MView
transpose(MView m)
{
	int64_t d = m.dim[m.nd - 1], s = m.stride[m.nd - 1];

	m.dim[m.nd - 1] = m.dim[m.nd - 2];
	m.stride[m.nd - 1] = m.stride[m.nd - 2];
	m.dim[m.nd - 2] = d;
	m.stride[m.nd - 2] = s;
	return m;
}

/* cfrt_view_fold, as the generated code folds attention's views (nd 4)
 * and its log-sum-exp's (nd 3): the one fold of runtime/cfrt.h */
static MView
as_nd(MView v, int nd)
{
	v.nd = cfrt_dims_fold(v.nd, v.dim, v.stride, nd);
	return v;
}

/* mat_layout: a unit stride in one of the last two dims (the result's:
 * in its last) */
static int
layout(Call *c, const MView *m, const char *what, int out)
{
	int64_t rows = m->dim[m->nd - 2], cols = m->dim[m->nd - 1];

	if (cols <= 1 || m->stride[m->nd - 1] == 1 || (!out && (rows <= 1 || m->stride[m->nd - 2] == 1)))
		return 0;
	return bad(c, "matrix %s needs a unit stride in %s", what,
	           out ? "its last dim" : "one of its last two dims");
}

/* cfrt_matmul: [..., M, K] @ [..., K, N] -> [..., M, N], the batch dims
 * of a and b right-aligned against c's, each equal or 1 */
static int
matmul(Call *c, const MView *out, const MView *a, const MView *b)
{
	char sa[96], sb[96], so[96];
	const MView *v[2] = {a, b};

	if (a->nd < 2 || b->nd < 2 || out->nd < 2)
		return bad(c, "a, b and c need 2 dims or more");
	int64_t m = out->dim[out->nd - 2], n = out->dim[out->nd - 1], k = a->dim[a->nd - 1];
	if (a->dim[a->nd - 2] != m || b->dim[b->nd - 2] != k || b->dim[b->nd - 1] != n)
		return bad(c, "%s @ %s does not give %s", dims(a, sa, sizeof sa), dims(b, sb, sizeof sb),
		           dims(out, so, sizeof so));
	for (int i = 0; i < 2; i++) {
		int lead = out->nd - v[i]->nd;
		if (lead < 0)
			return bad(c, "%s has more dims than c %s", dims(v[i], sa, sizeof sa),
			           dims(out, so, sizeof so));
		for (int d = 0; d < v[i]->nd - 2; d++)
			if (v[i]->dim[d] != 1 && v[i]->dim[d] != out->dim[lead + d])
				return bad(c, "batch dim %d of %s does not match c %s", d,
				           dims(v[i], sa, sizeof sa), dims(out, so, sizeof so));
	}
	return layout(c, a, "a", 0) || layout(c, b, "b", 0) || layout(c, out, "c", 1);
}

/* cf_matmul_sum: out [M, N] = the sum over the leading dims of a
 * [..., K, M] transposed times b [..., K, N] */
static int
matmul_sum(Call *c, const MView *out, const MView *a, const MView *b)
{
	char sa[96], sb[96], so[96];
	int ok = a->nd == b->nd && a->nd >= 2 && out->nd == 2;

	for (int d = 0; ok && d < a->nd - 1; d++)
		ok = a->dim[d] == b->dim[d];
	if (!ok || out->dim[0] != a->dim[a->nd - 1] || out->dim[1] != b->dim[b->nd - 1])
		return bad(c, "%s transposed times %s summed over the leading dims does not give %s",
		           dims(a, sa, sizeof sa), dims(b, sb, sizeof sb), dims(out, so, sizeof so));
	return 0;
}

/* cfrt_view_heads(flat, H) as the heads [..., H, S, Dh] view, H the
 * heads view's dim nd - 3 (op_heads) */
static int
heads(Call *c, const MView *flat, const MView *h)
{
	char sa[96], sb[96];
	int nd = h->nd, ok = nd >= 3 && flat->nd + 1 == nd;
	int64_t H = ok ? h->dim[nd - 3] : 0;

	ok = ok && H > 0 && flat->dim[nd - 2] % H == 0;
	for (int d = 0; ok && d < nd - 3; d++)
		ok = flat->dim[d] == h->dim[d];
	ok = ok && h->dim[nd - 2] == flat->dim[nd - 3] && h->dim[nd - 1] == flat->dim[nd - 2] / H;
	return ok ? 0 : bad(c, "%s as %lld heads and %s differ in shape",
	                    dims(flat, sa, sizeof sa), (long long)H, dims(h, sb, sizeof sb));
}

/* check_4d: 4 dims, a unit stride in the last */
static int
four(Call *c, const MView *v, const char *what)
{
	char s[96];

	if (v->nd != 4)
		return bad(c, "%s %s is no 4-d [B,H,S,Dh] view", what, dims(v, s, sizeof s));
	if (v->dim[3] > 1 && v->stride[3] != 1)
		return bad(c, "%s needs a unit stride in its last dim", what);
	return 0;
}

/* cfrti_attn_check: q, k, v and out 4-d, out as q, v as k, k's B and Dh
 * q's and its heads dividing q's; lse [B, H, Sq] */
static int
attn(Call *c, const MView *out, const MView *lse, const MView *q, const MView *k,
     const MView *v)
{
	char sq[96], sk[96], sl[96];

	if (four(c, q, "q") || four(c, k, "k") || four(c, v, "v") || four(c, out, "out") ||
	    same(c, out, q, "out", "q") || same(c, v, k, "v", "k"))
		return 1;
	if (k->dim[0] != q->dim[0] || k->dim[1] < 1 || q->dim[1] % k->dim[1] || k->dim[3] != q->dim[3] ||
	    q->dim[3] < 1 || k->dim[2] < 1)
		return bad(c, "q %s and k %s disagree on B or Dh, k's heads do not divide q's, or "
		           "there are no keys", dims(q, sq, sizeof sq), dims(k, sk, sizeof sk));
	if (lse && (lse->nd != 3 || lse->dim[0] != q->dim[0] || lse->dim[1] != q->dim[1] ||
	            lse->dim[2] != q->dim[2]))
		return bad(c, "lse %s is not q %s's [B,H,Sq]", dims(lse, sl, sizeof sl),
		           dims(q, sq, sizeof sq));
	return 0;
}

static int
compute(Call *c, const MView *o, const MView *in, int nops)
{
	const Node *n = c->n;
	int nin = n->nin;
	int64_t last = in[0].dim[in[0].nd - 1];

	switch (n->op) {
	case OP_MATMUL: {
		if (n->a.mm.sum)
			return matmul_sum(c, o, &in[0], &in[1]);
		MView a = n->a.mm.ta ? transpose(in[0]) : in[0], b = n->a.mm.tb ? transpose(in[1]) : in[1];
		return matmul(c, o, &a, &b);
	}
	case OP_ADD: case OP_SUB: case OP_MUL: case OP_GELU_GRAD: case OP_SILU_GRAD: case OP_RELU_GRAD:
	case OP_SIGMOID_GRAD:
		return same(c, o, &in[0], "dst", "a") || broadcasts(c, &in[1], o);
	case OP_SWIGLU: case OP_SWIGLU_DB:
		return same(c, o, &in[0], "dst", n->op == OP_SWIGLU ? "a" : "dy") ||
		       same(c, o, &in[1], "dst", n->op == OP_SWIGLU ? "b" : "a");
	case OP_SWIGLU_DA:
		return same(c, o, &in[0], "dst", "dy") || same(c, o, &in[1], "dst", "a") ||
		       same(c, o, &in[2], "dst", "b");
	case OP_SCALE: case OP_GELU: case OP_SILU: case OP_RELU: case OP_SIGMOID: case OP_EXP:
	case OP_SOFTMAX: case OP_SCAN: case OP_SCAN_GRAD:
		return same(c, o, &in[0], "dst", "src");
	case OP_SOFTMAX_GRAD:
		return same(c, o, &in[0], "dx", "dy") || same(c, o, &in[1], "dx", "y");
	case OP_ROPE: case OP_ROPE_GRAD:
		if (same(c, o, &in[0], "dst", "src"))
			return 1;
		return o->nd >= 2 && o->dim[o->nd - 1] % 2 == 0 ? 0 :
		       bad(c, "rope needs a view of at least 2 dims with an even last dim");
	case OP_LAYERNORM: case OP_RMSNORM:
		return same(c, o, &in[0], "dst", "src") ||
		       (nin > 1 && vec(c, &in[1], last, "gamma")) ||
		       (nin > 2 && vec(c, &in[2], last, "beta"));
	case OP_LAYERNORM_GRAD: case OP_RMSNORM_GRAD:
		return same(c, o, &in[0], "dx", "dy") || same(c, o, &in[1], "dx", "x") ||
		       (nin > 2 && vec(c, &in[2], last, "gamma"));
	case OP_SUM_LEADING: {
		MView tail = in[0];
		char so[96], si[96];
		tail.nd = o->nd;
		if (o->nd <= in[0].nd)
			for (int d = 0; d < o->nd; d++)
				tail.dim[d] = in[0].dim[in[0].nd - o->nd + d];
		return o->nd <= in[0].nd && !same(c, o, &tail, "dst", "src") ? 0 :
		       bad(c, "dst %s does not have the last dims of src %s", dims(o, so, sizeof so),
		           dims(&in[0], si, sizeof si));
	}
	case OP_SPLIT_HEADS:
		return heads(c, &in[0], o);
	case OP_MERGE_HEADS:
		return heads(c, o, &in[0]);
	case OP_ATTENTION: {
		MView l = nops > nin + 1 ? as_nd(in[nin], 3) : (MView){0};
		MView o4 = as_nd(*o, 4), q = as_nd(in[0], 4), k = as_nd(in[1], 4), v = as_nd(in[2], 4);
		return attn(c, &o4, nops > nin + 1 ? &l : NULL, &q, &k, &v);
	}
	case OP_ATTN_DQ: case OP_ATTN_DK: case OP_ATTN_DV: {
		MView g = as_nd(*o, 4), x[5], l = as_nd(in[5], 3);
		static const char *const name[3] = {"dq", "dk", "dv"}, *const like[3] = {"q", "k", "v"};
		int w = n->op == OP_ATTN_DQ ? 0 : n->op == OP_ATTN_DK ? 1 : 2;
		for (int i = 0; i < 5; i++)
			x[i] = as_nd(in[i], 4);
		return attn(c, &x[3], &l, &x[0], &x[1], &x[2]) || four(c, &x[4], "dout") ||
		       same(c, &x[4], &x[3], "dout", "out") || four(c, &g, name[w]) ||
		       same(c, &g, &x[w], name[w], like[w]);
	}
	case OP_PACK: case OP_UNPACK:
		return vc_pack(n, o, in, c->why, c->nwhy);
	default:
		return bad(c, "no runtime call");
	}
}

int
vc_call(const Node *n, const MView *ops, int nops, char *why, size_t nwhy)
{
	Call c = {n, why, nwhy};

	if (nops < n->nin + 1)
		return bad(&c, "%d operands, not %d", nops, n->nin + 1);
	return compute(&c, &ops[0], &ops[1], nops - 1);
}

/* The call of n on whole dense tensors (the serial reference), its
 * operands those of the graph: the result, the inputs, an lse. */
static MView
dense(const Value *v)
{
	MView m = {.nd = v->ndim};
	int64_t st = 1;

	for (int d = v->ndim - 1; d >= 0; d--) {
		m.dim[d] = v->shape[d];
		m.stride[d] = st;
		st *= v->shape[d];
	}
	return m;
}

int
vc_whole(const Node *n, char *why, size_t nwhy)
{
	MView ops[MAXIN + 2];
	int k = 0;

	ops[k++] = dense(n->out);
	for (int j = 0; j < n->nin; j++)
		ops[k++] = dense(n->in[j]);
	if (n->lse)
		ops[k++] = dense(n->lse);
	return vc_call(n, ops, k, why, nwhy);
}
