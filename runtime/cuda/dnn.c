/* dnn.c: attention and its backward through cuDNN's backend graph API
 * (ctx->dnn), for bf16 and f16, when the backend was built with cuDNN 9
 * (CFRT_HAVE_CUDNN; scripts/cuda-libs.sh finds it). The graphs are the
 * ones cudnn-frontend builds for scaled dot-product attention (its
 * CompositeSDPANode and CompositeSDPABackwardNode, no dropout or bias),
 * which cuDNN's fused attention engines recognise:
 *   forward   S = Q K^T * scale, the causal mask (row + q_offset >= col,
 *             the frontend's top-left diagonal moved right by q_offset),
 *             M = rowmax S, E = exp(S - M), Z = rowsum E, the saved
 *             Stats = M + log Z (our lse: natural log, the max
 *             included), O = (E / Z) V;
 *   backward  delta = rowsum(dO * O), P = exp(S - Stats) masked,
 *             dV = P^T dO, dS = P (dO V^T - delta) * scale, dK = dS^T Q,
 *             dQ = dS K (summed in f32, then rounded); grouped heads
 *             sum dK and dV over a key/value head's query heads.
 * An execution plan is made once per shape (every dim and stride, the
 * type, the mask, which outputs) on the first call of that shape, from
 * cuDNN's heuristic (mode A): its first engine configuration that
 * finalizes. Plans, and shapes that have none, are kept until fini.
 * requires: views passed cfrti_attn_check (or _grad_check); calls run
 * on ctx->dev.cs, the cuDNN handle's stream.
 * ensures: cfrti_dnn_attention(_grad) return CFRT_ENOTSUP, having
 * launched nothing and left no message, for a call cuDNN cannot take:
 * another type, a head size that is not a multiple of 16 up to 128,
 * strides or addresses off 16 bytes, a backward needing more than
 * DNN_WS_MAX of scratch, no plan (strict: a plan refused is an error
 * naming cuDNN's reason instead, for CFRT_ATTN=cudnn). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#ifndef CFRT_HAVE_CUDNN

int cfrti_dnn_have(void)
{
	return 0;
}

int cfrti_dnn_init(cfrt_ctx *ctx)
{
	(void)ctx;
	return CFRT_OK;
}

void cfrti_dnn_fini(cfrt_ctx *ctx)
{
	(void)ctx;
}

int cfrti_dnn_attention(cfrt_ctx *ctx, const cfrti_attn *a, int strict)
{
	(void)ctx, (void)a, (void)strict;
	return CFRT_ENOTSUP;
}

int cfrti_dnn_attention_grad(cfrt_ctx *ctx, const cfrti_attn *g, int strict)
{
	(void)ctx, (void)g, (void)strict;
	return CFRT_ENOTSUP;
}

#else /* CFRT_HAVE_CUDNN */

#include <cudnn_graph.h>

/* Unique ids of the tensors a plan reads and writes (virtual ones are
 * numbered from U_VIRTUAL). */
enum {
	U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEGINF, U_OFFSET, U_SQ,
	U_DO, U_DQ, U_DK, U_DV, U_ONE, U_DQACC, U_DELTA, U_VIRTUAL = 100
};

/* The causal diagonal: none, through (0, 0), moved right by q_offset
 * (U_OFFSET), at the bottom right (row + Sk - Sq >= col: U_OFFSET holds
 * Sk, U_SQ Sq; cudnn-frontend's bottom-right alignment, the same mask
 * when q_offset = Sk - Sq, which the engines know since cuDNN 9.7). */
enum mask { M_NONE, M_CAUSAL, M_SHIFT, M_BOTTOM_RIGHT };

/* The most bytes of scratch a backward keeps in the workspace (f32 dq
 * sums and the rest, grad_scratch); larger calls go to the fused kernel,
 * which steps over the batch (gemm.c's ATTN_WS_MAX). */
#define DNN_WS_MAX ((size_t)2 << 30)

/* Descriptors of one graph and its plan, all freed together. */
enum { G_MAXDESC = 256 };

/* The views of a call, in a key's strides. */
enum kslot { K_Q, K_K, K_V, K_O, K_LSE, K_DO, K_DQ, K_DK, K_DV, K_N };

typedef struct dnn_key {
	int grad;   /* 0 forward, 1 backward */
	cfrt_dtype t;
	int mask; /* enum mask */
	int stats;  /* forward: the lse is written */
	int64_t b, h, hk, sq, sk, dh;
	int64_t st[9][4]; /* strides: the views of enum kslot */
} dnn_key;

typedef struct dnn_plan {
	dnn_key key;
	int ok; /* 0: cuDNN has no plan for the shape */
	cudnnBackendDescriptor_t plan;
	int64_t ws; /* bytes of the plan's workspace */
	cudnnBackendDescriptor_t d[G_MAXDESC];
	int nd;
} dnn_plan;

struct dnn_state {
	cudnnHandle_t h; /* made on the first call, on ctx->dev.cs */
	size_t version;
	dnn_plan **plans;
	int nplans, cap;
};

int cfrti_dnn_have(void)
{
	return 1;
}

int cfrti_dnn_init(cfrt_ctx *ctx)
{
	ctx->dnn = calloc(1, sizeof *ctx->dnn);
	return ctx->dnn ? CFRT_OK : cfrti_err(ctx, CFRT_ENOMEM, "out of memory");
}

static void plan_free(dnn_plan *p)
{
	for (int i = p->nd - 1; i >= 0; i--)
		cudnnBackendDestroyDescriptor(p->d[i]);
	free(p);
}

void cfrti_dnn_fini(cfrt_ctx *ctx)
{
	struct dnn_state *s = ctx->dnn;
	if (!s)
		return;
	for (int i = 0; i < s->nplans; i++)
		plan_free(s->plans[i]);
	free(s->plans);
	if (s->h)
		cudnnDestroy(s->h);
	free(s);
	ctx->dnn = NULL;
}

/* ---- graph building ------------------------------------------------------ */

/* A graph under construction: st is the first failure (later calls do
 * nothing), what the failing call was. */
typedef struct gb {
	dnn_plan *p;
	cudnnStatus_t st;
	const char *what;
	cudnnBackendDescriptor_t op[48];
	int nop;
	int64_t uid; /* the next virtual tensor's */
	cudnnDataType_t io; /* q's type */
} gb;

typedef cudnnBackendDescriptor_t desc;

static desc make(gb *g, cudnnBackendDescriptorType_t t, const char *what)
{
	desc d = NULL;
	if (g->st != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (g->p->nd == G_MAXDESC) {
		g->st = CUDNN_STATUS_INTERNAL_ERROR;
		g->what = "too many descriptors";
		return NULL;
	}
	g->st = cudnnBackendCreateDescriptor(t, &d);
	g->what = what;
	if (g->st == CUDNN_STATUS_SUCCESS)
		g->p->d[g->p->nd++] = d;
	return d;
}

static void set(gb *g, desc d, cudnnBackendAttributeName_t a,
                cudnnBackendAttributeType_t t, int64_t n, const void *v)
{
	if (g->st == CUDNN_STATUS_SUCCESS)
		g->st = cudnnBackendSetAttribute(d, a, t, n, v);
}

static void done(gb *g, desc d)
{
	if (g->st == CUDNN_STATUS_SUCCESS)
		g->st = cudnnBackendFinalize(d);
}

static void set_desc(gb *g, desc d, cudnnBackendAttributeName_t a, desc v)
{
	set(g, d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}

/* A 4-d tensor: uid > 0 one the variant pack names, else a virtual one. */
static desc tensor(gb *g, int64_t uid, cudnnDataType_t t, const int64_t dim[4],
                   const int64_t st[4], int byval)
{
	desc d = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
	int64_t align = 16;
	bool virt = uid == 0, bv = byval != 0;
	if (virt)
		uid = g->uid++;
	set(g, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
	set(g, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
	set(g, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st);
	set(g, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	set(g, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	set(g, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
	set(g, d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
	done(g, d);
	return d;
}

/* A virtual tensor of dims d0..d3, packed. */
static desc vt(gb *g, cudnnDataType_t t, int64_t d0, int64_t d1, int64_t d2,
               int64_t d3)
{
	int64_t dim[4] = {d0, d1, d2, d3};
	int64_t st[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
	return tensor(g, 0, t, dim, st, 0);
}

/* A scalar passed by value at execution. */
static desc scalar(gb *g, int64_t uid, cudnnDataType_t t)
{
	static const int64_t one[4] = {1, 1, 1, 1};
	return tensor(g, uid, t, one, one, 1);
}

/* An operation of type t with its n descriptor attributes names[i] =
 * vals[i] (NULL: left unset), added to the graph's. */
static void operation(gb *g, cudnnBackendDescriptorType_t t, const char *what,
                      int n, const cudnnBackendAttributeName_t *names,
                      const desc *vals)
{
	desc op = make(g, t, what);
	for (int i = 0; i < n; i++)
		if (vals[i])
			set_desc(g, op, names[i], vals[i]);
	done(g, op);
	if (g->st == CUDNN_STATUS_SUCCESS)
		g->op[g->nop++] = op;
}

/* y = mode(x, b, t) (b, t NULL where the mode has fewer inputs), computed
 * in prec; axis: GEN_INDEX's. */
static desc pw_axis(gb *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                    desc x, desc b, desc t, desc y, int64_t axis)
{
	desc pd = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
	set(g, pd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	set(g, pd, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (mode == CUDNN_POINTWISE_GEN_INDEX)
		set(g, pd, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	done(g, pd);
	operation(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
	          "pointwise operation", 5, (const cudnnBackendAttributeName_t[]){
	          CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
	          CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
	          CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
	          CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
	          CUDNN_ATTR_OPERATION_POINTWISE_YDESC}, (const desc[]){pd, x, b,
	          t, y});
	return y;
}

static desc pw(gb *g, cudnnPointwiseMode_t mode, desc x, desc b, desc y)
{
	return pw_axis(g, mode, CUDNN_DATA_FLOAT, x, b, NULL, y, 0);
}

static desc reduce(gb *g, cudnnReduceTensorOp_t how, desc x, desc y)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT;
	desc rd = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
	set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR,
	    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
	set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
	done(g, rd);
	operation(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
	          "reduction operation", 3, (const cudnnBackendAttributeName_t[]){
	          CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
	          CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
	          CUDNN_ATTR_OPERATION_REDUCTION_DESC}, (const desc[]){x, y, rd});
	return y;
}

/* c = a b, batched over the two leading dims (b's broadcast over
 * grouped heads). */
static desc matmul(gb *g, desc a, desc b, desc c)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT;
	desc md = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
	set(g, md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
	done(g, md);
	operation(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
	          "matmul operation", 4, (const cudnnBackendAttributeName_t[]){
	          CUDNN_ATTR_OPERATION_MATMUL_ADESC,
	          CUDNN_ATTR_OPERATION_MATMUL_BDESC,
	          CUDNN_ATTR_OPERATION_MATMUL_CDESC,
	          CUDNN_ATTR_OPERATION_MATMUL_DESC}, (const desc[]){a, b, c, md});
	return c;
}

static desc reshape(gb *g, desc x, desc y)
{
	operation(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
	          "reshape operation", 2, (const cudnnBackendAttributeName_t[]){
	          CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
	          CUDNN_ATTR_OPERATION_RESHAPE_YDESC}, (const desc[]){x, y});
	return y;
}

/* ---- the attention graphs ------------------------------------------------ */

static cudnnDataType_t dnn_type(cfrt_dtype t)
{
	return t == CFRT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

/* View i (enum kslot) of the key as a [B,H,S,D] tensor of type t; transposed: its
 * last two dims swapped (K^T, V^T). */
static desc key_tensor(gb *g, const dnn_key *k, int i, int64_t uid,
                       cudnnDataType_t t, int64_t h, int64_t s, int64_t d,
                       int transposed)
{
	int64_t dim[4] = {k->b, h, s, d};
	int64_t st[4] = {k->st[i][0], k->st[i][1], k->st[i][2], k->st[i][3]};
	if (transposed) {
		dim[2] = d, dim[3] = s;
		st[2] = k->st[i][3], st[3] = k->st[i][2];
	}
	return tensor(g, uid, t, dim, st, 0);
}

/* The causal mask on scores s: keeps s where row + q_offset >= col, -inf
 * elsewhere (cudnn-frontend's diagonal band, its right bound at the
 * diagonal, top left or bottom right). */
static desc causal_mask(gb *g, const dnn_key *k, desc s)
{
	cudnnDataType_t i32 = CUDNN_DATA_INT32, f = CUDNN_DATA_FLOAT;
	int64_t b = k->b, h = k->h, sq = k->sq, sk = k->sk;
	desc row = pw_axis(g, CUDNN_POINTWISE_GEN_INDEX, f, s, NULL, NULL,
	                   vt(g, i32, b, h, sq, sk), 2);
	desc col = pw_axis(g, CUDNN_POINTWISE_GEN_INDEX, f, s, NULL, NULL,
	                   vt(g, i32, b, h, sq, sk), 3);
	if (k->mask != M_CAUSAL)
		row = pw_axis(g, CUDNN_POINTWISE_ADD, i32, row,
		              scalar(g, U_OFFSET, i32), NULL,
		              vt(g, i32, b, h, sq, sk), 0);
	if (k->mask == M_BOTTOM_RIGHT)
		row = pw_axis(g, CUDNN_POINTWISE_SUB, i32, row,
		              scalar(g, U_SQ, i32), NULL,
		              vt(g, i32, b, h, sq, sk), 0);
	desc keep = pw_axis(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row,
	                    col, NULL, vt(g, CUDNN_DATA_BOOLEAN, b, h, sq, sk), 0);
	return pw_axis(g, CUDNN_POINTWISE_BINARY_SELECT, f, s,
	               scalar(g, U_NEGINF, f), keep, vt(g, f, b, h, sq, sk), 0);
}

/* The [B,H,Sq,1] f32 tensor of the statistics (view 4's strides). */
static desc stats_tensor(gb *g, const dnn_key *k, int64_t uid)
{
	int64_t dim[4] = {k->b, k->h, k->sq, 1};
	int64_t st[4] = {k->st[K_LSE][0], k->st[K_LSE][1], k->st[K_LSE][2], 1};
	return tensor(g, uid, CUDNN_DATA_FLOAT, dim, st, 0);
}

/* S = Q K^T * scale, causal-masked. */
static desc scores(gb *g, const dnn_key *k, desc q, desc kt)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT;
	int64_t b = k->b, h = k->h, sq = k->sq, sk = k->sk;
	desc s = matmul(g, q, kt, vt(g, f, b, h, sq, sk));
	s = pw(g, CUDNN_POINTWISE_MUL, s, scalar(g, U_SCALE, f),
	       vt(g, f, b, h, sq, sk));
	return s;
}

/* The tensors of q, k^T, v (v^T: the backward's dO V^T) and out. */
typedef struct qkvo {
	desc q, kt, v, o;
} qkvo;

static qkvo qkvo_of(gb *g, const dnn_key *k, int v_transposed)
{
	int64_t h = k->h, sq = k->sq, sk = k->sk, dh = k->dh;
	qkvo t = {key_tensor(g, k, K_Q, U_Q, g->io, h, sq, dh, 0),
	          key_tensor(g, k, K_K, U_K, g->io, k->hk, sk, dh, 1),
	          key_tensor(g, k, K_V, U_V, g->io, k->hk, sk, dh, v_transposed),
	          key_tensor(g, k, K_O, U_O, g->io, h, sq, dh, 0)};
	return t;
}

static void forward_graph(gb *g, const dnn_key *k)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT, io = g->io;
	int64_t b = k->b, h = k->h, sq = k->sq, sk = k->sk;
	qkvo t = qkvo_of(g, k, 0);
	desc s = scores(g, k, t.q, t.kt);
	if (k->mask != M_NONE)
		s = causal_mask(g, k, s);
	desc m = reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, vt(g, f, b, h, sq, 1));
	desc e = pw(g, CUDNN_POINTWISE_SUB, s, m, vt(g, f, b, h, sq, sk));
	e = pw(g, CUDNN_POINTWISE_EXP, e, NULL, vt(g, f, b, h, sq, sk));
	desc z = reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, vt(g, f, b, h, sq, 1));
	desc lz = pw(g, CUDNN_POINTWISE_LOG, z, NULL, vt(g, f, b, h, sq, 1));
	pw(g, CUDNN_POINTWISE_ADD, m, lz, k->stats ? stats_tensor(g, k, U_STATS) :
	   vt(g, f, b, h, sq, 1));
	desc p = pw(g, CUDNN_POINTWISE_DIV, e, z, vt(g, io, b, h, sq, sk));
	matmul(g, p, t.v, t.o);
}

/* [B,H,Sk,Sq] of type t over the [B,H,Sq,Sk] scores x: their transpose. */
static desc transposed(gb *g, const dnn_key *k, desc x, cudnnDataType_t t)
{
	int64_t dim[4] = {k->b, k->h, k->sk, k->sq};
	int64_t st[4] = {k->h * k->sq * k->sk, k->sq * k->sk, 1, k->sk};
	return reshape(g, x, tensor(g, 0, t, dim, st, 0));
}

/* out = a b into the [B,Hk,Sk,Dh] gradient view i: summed over each key/
 * value head's query heads when they are grouped. */
static void grouped_matmul(gb *g, const dnn_key *k, desc a, desc b, int i,
                           int64_t uid)
{
	desc out = key_tensor(g, k, i, uid, g->io, k->hk, k->sk, k->dh, 0);
	if (k->h == k->hk) {
		matmul(g, a, b, out);
		return;
	}
	desc full = matmul(g, a, b, vt(g, g->io, k->b, k->h, k->sk, k->dh));
	reduce(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

static void backward_graph(gb *g, const dnn_key *k)
{
	cudnnDataType_t f = CUDNN_DATA_FLOAT, io = g->io;
	int64_t b = k->b, h = k->h, sq = k->sq, sk = k->sk, dh = k->dh;
	qkvo t = qkvo_of(g, k, 1);
	desc q = t.q, kt = t.kt, vtr = t.v, o = t.o;
	desc dout = key_tensor(g, k, K_DO, U_DO, io, h, sq, dh, 0);
	int64_t ddim[4] = {b, h, sq, 1}, dst[4] = {h * sq, sq, 1, 1};
	desc dlt = pw(g, CUDNN_POINTWISE_MUL, dout, o, vt(g, f, b, h, sq, dh));
	dlt = reduce(g, CUDNN_REDUCE_TENSOR_ADD, dlt, vt(g, f, b, h, sq, 1));
	dlt = pw(g, CUDNN_POINTWISE_MUL, dlt, scalar(g, U_ONE, f),
	         tensor(g, U_DELTA, f, ddim, dst, 0));
	desc s = scores(g, k, q, kt);
	s = pw(g, CUDNN_POINTWISE_SUB, s, stats_tensor(g, k, U_STATS),
	       vt(g, f, b, h, sq, sk));
	if (k->mask != M_NONE)
		s = causal_mask(g, k, s);
	desc p = pw(g, CUDNN_POINTWISE_EXP, s, NULL, vt(g, f, b, h, sq, sk));
	grouped_matmul(g, k, transposed(g, k, p, io), dout, K_DV, U_DV);
	desc ds = matmul(g, dout, vtr, vt(g, f, b, h, sq, sk));
	ds = pw(g, CUDNN_POINTWISE_SUB, ds, dlt, vt(g, f, b, h, sq, sk));
	ds = pw(g, CUDNN_POINTWISE_MUL, ds, p, vt(g, f, b, h, sq, sk));
	ds = pw(g, CUDNN_POINTWISE_MUL, ds, scalar(g, U_SCALE, f),
	        vt(g, f, b, h, sq, sk));
	grouped_matmul(g, k, transposed(g, k, ds, io), q, K_DK, U_DK);
	int64_t kdim[4] = {b, k->hk, sk, dh};
	desc kk = reshape(g, kt, tensor(g, 0, io, kdim, k->st[K_K], 0));
	int64_t adim[4] = {b, h, sq, dh}, ast[4] = {h * sq * dh, sq * dh, dh, 1};
	desc acc = matmul(g, ds, kk, tensor(g, U_DQACC, f, adim, ast, 0));
	pw(g, CUDNN_POINTWISE_IDENTITY, acc, NULL,
	   tensor(g, U_DQ, io, adim, k->st[K_DQ], 0));
}

/* ---- plans ----------------------------------------------------------------- */

enum { MAX_CONFIGS = 16 };

/* cuDNN's status and its last message, into the context (strict) or
 * nowhere: CFRT_ENOTSUP then, which sends the call to the fused kernel. */
static int refused(cfrt_ctx *ctx, int strict, cudnnStatus_t st,
                   const char *what)
{
	char why[256] = "";
	cudnnGetLastErrorString(why, sizeof why);
	if (!strict)
		return CFRT_ENOTSUP;
	return cfrti_err(ctx, CFRT_EDEVICE, "cuDNN attention: %s: %s%s%s", what,
	                 cudnnGetErrorString(st), *why ? ": " : "", why);
}

/* The first of the heuristic's configurations for the graph of g's ops
 * whose execution plan finalizes, into g->p. */
static void find_plan(struct dnn_state *s, gb *g)
{
	desc graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
	                  "operation graph");
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nop, g->op);
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
	    &s->h);
	done(g, graph);
	desc heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristic");
	cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
	set_desc(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
	set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	done(g, heur);
	desc cfg[MAX_CONFIGS];
	int64_t n = 0;
	for (int i = 0; i < MAX_CONFIGS; i++)
		cfg[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "heuristic");
	if (g->st == CUDNN_STATUS_SUCCESS)
		g->st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
			CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CONFIGS, &n, cfg);
	if (g->st == CUDNN_STATUS_SUCCESS && n == 0)
		g->st = CUDNN_STATUS_NOT_SUPPORTED;
	for (int64_t i = 0; g->st == CUDNN_STATUS_SUCCESS && i < n; i++) {
		desc plan = NULL;
		cudnnStatus_t st = cudnnBackendCreateDescriptor(
			CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(plan,
				CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
				&s->h);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendSetAttribute(plan,
				CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
				CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
		if (st == CUDNN_STATUS_SUCCESS)
			st = cudnnBackendFinalize(plan);
		if (st == CUDNN_STATUS_SUCCESS) {
			g->p->d[g->p->nd++] = plan; /* nd < G_MAXDESC: make left one */
			g->p->plan = plan;
			g->st = cudnnBackendGetAttribute(plan,
				CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
				1, &n, &g->p->ws);
			return;
		}
		if (plan)
			cudnnBackendDestroyDescriptor(plan);
		if (i == n - 1) {
			g->st = st;
			g->what = "no execution plan finalizes";
		}
	}
}

/* The handle, made on the first call, on the compute stream (set at
 * every call: a host call, cheap, and right should the stream change). */
static int dnn_handle(cfrt_ctx *ctx, int strict)
{
	struct dnn_state *s = ctx->dnn;
	cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
	if (!s->h)
		st = cudnnCreate(&s->h);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnSetStream(s->h, ctx->dev.cs);
	if (st != CUDNN_STATUS_SUCCESS) {
		if (s->h)
			cudnnDestroy(s->h);
		s->h = NULL;
		return refused(ctx, strict, st, "cudnnCreate");
	}
	s->version = cudnnGetVersion();
	return CFRT_OK;
}

/* The plan of key k, made on first use (a shape cuDNN refuses is kept
 * too, as refused); CFRT_ENOTSUP (or the refusal, strict) when there is
 * none. */
static int plan_of(cfrt_ctx *ctx, const dnn_key *k, int strict,
                   dnn_plan **out)
{
	struct dnn_state *s = ctx->dnn;
	int rc = dnn_handle(ctx, strict);
	if (rc != CFRT_OK)
		return rc;
	if (s->version == 91000 || s->version == 91001) /* as cudnn-frontend */
		return refused(ctx, strict, CUDNN_STATUS_NOT_SUPPORTED, "cuDNN "
		               "9.10.0 and 9.10.1 have known attention bugs");
	for (int i = 0; i < s->nplans; i++)
		if (!memcmp(&s->plans[i]->key, k, sizeof *k)) {
			*out = s->plans[i];
			return s->plans[i]->ok ? CFRT_OK : refused(ctx, strict,
			       CUDNN_STATUS_NOT_SUPPORTED, "no plan for this shape");
		}
	if (s->nplans == s->cap) {
		int cap = s->cap ? 2 * s->cap : 16;
		dnn_plan **pl = realloc(s->plans, (size_t)cap * sizeof *pl);
		if (!pl)
			return cfrti_err(ctx, CFRT_ENOMEM, "out of memory");
		s->plans = pl, s->cap = cap;
	}
	dnn_plan *p = calloc(1, sizeof *p);
	if (!p)
		return cfrti_err(ctx, CFRT_ENOMEM, "out of memory");
	gb g = {p, CUDNN_STATUS_SUCCESS, "", {0}, 0, U_VIRTUAL, dnn_type(k->t)};
	p->key = *k;
	if (k->grad)
		backward_graph(&g, k);
	else
		forward_graph(&g, k);
	find_plan(s, &g);
	p->ok = g.st == CUDNN_STATUS_SUCCESS;
	s->plans[s->nplans++] = p;
	*out = p;
	return p->ok ? CFRT_OK : refused(ctx, strict, g.st, g.what);
}

/* Runs plan p on the tensors uid[i] at ptr[i] (i < n), with the
 * workspace at the start of the context's. */
static int execute(cfrt_ctx *ctx, const dnn_plan *p, const int64_t *uid,
                   void **ptr, int64_t n)
{
	desc vp = NULL;
	void *ws = ctx->dev.ws;
	cudnnStatus_t st = cudnnBackendCreateDescriptor(
		CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
		                              CUDNN_TYPE_INT64, n, uid);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendSetAttribute(vp,
			CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n,
			ptr);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
		                              CUDNN_TYPE_VOID_PTR, 1, &ws);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendFinalize(vp);
	if (st == CUDNN_STATUS_SUCCESS)
		st = cudnnBackendExecute(ctx->dnn->h, p->plan, vp);
	if (vp)
		cudnnBackendDestroyDescriptor(vp);
	return st == CUDNN_STATUS_SUCCESS ? CFRT_OK :
	       refused(ctx, 1, st, "cudnnBackendExecute");
}

/* ---- the calls ------------------------------------------------------------- */

/* 16-byte aligned rows: cuDNN's attention loads them in 16-byte pieces. */
static int aligned(const cfrt_view *v)
{
	size_t es = cfrt_dtype_size(v->t);
	int ok = (uintptr_t)v->p % 16 == 0;
	for (int d = 0; d < 3; d++)
		ok &= (size_t)v->stride[d] * es % 16 == 0;
	return ok && v->stride[3] == 1;
}

/* Whether cuDNN's fused attention can take the views of a (dq, dk, dv,
 * dout: the backward's): bf16 or f16, a head size that is a multiple
 * of 16 up to 128, every row and head 16-byte aligned, the lse's rows
 * unit-strided from a 16-byte address, the causal diagonal inside int32,
 * not a single query and key. */
static int expressible(const cfrti_attn *a)
{
	const cfrt_view *v[] = {a->q, a->k, a->v, a->out, a->dout, a->dq, a->dk,
	                        a->dv};
	int64_t dh = a->q->dim[3], sq = a->q->dim[2], sk = a->k->dim[2];
	int ok = (a->q->t == CFRT_BF16 || a->q->t == CFRT_F16) && dh % 16 == 0 &&
	         dh <= 128 && !(sq == 1 && sk == 1) && sk <= INT32_MAX &&
	         a->q_offset + sq <= INT32_MAX;
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		ok &= !v[i] || aligned(v[i]);
	return ok && (!a->lse || ((uintptr_t)a->lse->p % 16 == 0 &&
	                          a->lse->stride[2] == 1));
}

/* Packed [B,H,S,D] strides. */
static void packed(int64_t st[4], int64_t h, int64_t s, int64_t d)
{
	st[0] = h * s * d, st[1] = s * d, st[2] = d, st[3] = 1;
}

static void key_views(dnn_key *k, const cfrti_attn *a)
{
	const cfrt_view *v[K_N] = {a->q, a->k, a->v, a->out, a->lse, a->dout,
	                           a->dq, a->dk, a->dv};
	for (int i = 0; i < K_N; i++)
		for (int d = 0; v[i] && d < v[i]->nd; d++)
			k->st[i][d] = v[i]->stride[d];
}

/* The key of a's call (grad: the backward's); views a leaves NULL are
 * packed scratch, the lse's too. */
static dnn_key key_of(const cfrt_ctx *ctx, const cfrti_attn *a, int grad)
{
	dnn_key k;
	memset(&k, 0, sizeof k); /* padding too: keys compare with memcmp */
	const cfrt_view *q = a->q;
	int64_t o = a->q_offset;
	k.grad = grad, k.t = q->t;
	k.mask = !a->causal ? M_NONE : o == 0 ? M_CAUSAL :
	         o == a->k->dim[2] - q->dim[2] && ctx->dnn->version >= 90700 ?
	         M_BOTTOM_RIGHT : M_SHIFT;
	k.stats = grad || a->lse;
	k.b = q->dim[0], k.h = q->dim[1], k.hk = a->k->dim[1];
	k.sq = q->dim[2], k.sk = a->k->dim[2], k.dh = q->dim[3];
	key_views(&k, a);
	if (!a->lse)
		packed(k.st[K_LSE], k.h, k.sq, 1);
	if (grad && !a->dq)
		packed(k.st[K_DQ], k.h, k.sq, k.dh);
	if (grad && !a->dk)
		packed(k.st[K_DK], k.hk, k.sk, k.dh);
	if (grad && !a->dv)
		packed(k.st[K_DV], k.hk, k.sk, k.dh);
	return k;
}

/* The scalars of a call, passed by value (offset, sq: enum mask's). */
typedef struct scalars {
	float scale, neginf, one;
	int32_t offset, sq;
} scalars;

static scalars scalars_of(const cfrt_ctx *ctx, const dnn_key *k,
                          const cfrti_attn *a)
{
	/* cudnn-frontend masks with the lowest float before cuDNN 9.10 */
	scalars c = {(float)(1.0 / sqrt((double)k->dh)),
	             ctx->dnn->version < 91000 ? -3.40282347e38f : -INFINITY,
	             1.0f, (int32_t)(k->mask == M_BOTTOM_RIGHT ? k->sk :
	             a->q_offset), (int32_t)k->sq};
	return c;
}

/* Variant pack entries common to both graphs; returns their count. */
static int64_t common_pack(const dnn_key *k, const cfrti_attn *a,
                           scalars *c, int64_t *uid, void **ptr)
{
	int64_t n = 0;
	uid[n] = U_Q, ptr[n++] = a->q->p;
	uid[n] = U_K, ptr[n++] = a->k->p;
	uid[n] = U_V, ptr[n++] = a->v->p;
	uid[n] = U_O, ptr[n++] = a->out->p;
	uid[n] = U_SCALE, ptr[n++] = &c->scale;
	if (k->mask != M_NONE)
		uid[n] = U_NEGINF, ptr[n++] = &c->neginf;
	if (k->mask == M_SHIFT || k->mask == M_BOTTOM_RIGHT)
		uid[n] = U_OFFSET, ptr[n++] = &c->offset;
	if (k->mask == M_BOTTOM_RIGHT)
		uid[n] = U_SQ, ptr[n++] = &c->sq;
	if (k->stats)
		uid[n] = U_STATS, ptr[n++] = a->lse->p;
	return n;
}

static int forward(cfrt_ctx *ctx, const dnn_plan *p, const cfrti_attn *a)
{
	int64_t uid[16];
	void *ptr[16];
	scalars c = scalars_of(ctx, &p->key, a);
	int64_t n = common_pack(&p->key, a, &c, uid, ptr);
	return execute(ctx, p, uid, ptr, n);
}

/* The keys a causal call's queries see: the first q_offset + Sq (all of
 * them without the mask). */
static int64_t keys_seen(const cfrti_attn *a)
{
	int64_t sk = a->k->dim[2], last = a->q_offset + a->q->dim[2];
	return a->causal && last < sk ? last : sk;
}

/* Those keys' rows of k (or v, dk, dv; NULL: NULL). */
static const cfrt_view *seen(const cfrti_attn *a, const cfrt_view *v,
                             cfrt_view *buf)
{
	if (!v)
		return NULL;
	*buf = cfrt_view_slice(*v, 2, 0, keys_seen(a));
	return buf;
}

int cfrti_dnn_attention(cfrt_ctx *ctx, const cfrti_attn *a, int strict)
{
	dnn_plan *p = NULL;
	cfrti_attn t = *a;
	cfrt_view kv[2];
	if (!expressible(a))
		return CFRT_ENOTSUP;
	int rc = dnn_handle(ctx, strict);
	if (rc != CFRT_OK)
		return rc;
	t.k = seen(a, a->k, &kv[0]), t.v = seen(a, a->v, &kv[1]);
	dnn_key k = key_of(ctx, &t, 0);
	rc = plan_of(ctx, &k, strict, &p);
	if (rc == CFRT_OK)
		rc = cfrti_ws_reserve(ctx, (size_t)p->ws);
	return rc != CFRT_OK ? rc : forward(ctx, p, &t);
}

static size_t round256(size_t x)
{
	return (x + 255) & ~(size_t)255;
}

/* What the backward keeps after the plans' workspace: the f32 sums of
 * dq and the f32 rows of delta, and for what the call leaves out, the
 * lse and out of a forward that makes the lse, dq, dk and dv (zero
 * bytes where the call has them). */
enum { W_DQACC, W_DELTA, W_LSE, W_OUT, W_DQ, W_DK, W_DV, W_N };

/* The scratch views of the backward g in the workspace from base (byte
 * offsets off, W_N + 1 of them), into ga (the call with scratch for what
 * it leaves out) and fa (the forward that makes the lse, when g has
 * none). With base NULL only the offsets are filled. */
static void grad_scratch(const cfrti_attn *g, char *base, size_t *off,
                         cfrt_view sv[W_N], cfrti_attn *ga, cfrti_attn *fa)
{
	const cfrt_view *q = g->q, *k = g->k;
	int64_t qd[4] = {q->dim[0], q->dim[1], q->dim[2], q->dim[3]};
	int64_t kd[4] = {k->dim[0], k->dim[1], k->dim[2], k->dim[3]};
	size_t es = cfrt_dtype_size(q->t), nq = (size_t)(qd[0] * qd[1] * qd[2]);
	size_t nk = (size_t)(kd[0] * kd[1] * kd[2] * kd[3]);
	size_t bytes[W_N] = {nq * (size_t)qd[3] * 4, nq * 4,
	                     g->lse ? 0 : nq * 4, g->lse ? 0 : nq * (size_t)qd[3] * es,
	                     g->dq ? 0 : nq * (size_t)qd[3] * es,
	                     g->dk ? 0 : nk * es, g->dv ? 0 : nk * es};
	off[0] = 0;
	for (int i = 0; i < W_N; i++)
		off[i + 1] = off[i] + round256(bytes[i]);
	for (int i = 0; i < W_N; i++) {
		int kv = i == W_DK || i == W_DV, f32 = i < W_LSE;
		sv[i] = cfrt_view_contig(base ? base + off[i] : NULL,
		                         f32 || i == W_LSE ? CFRT_F32 : q->t,
		                         i == W_DELTA || i == W_LSE ? 3 : 4,
		                         kv ? kd : qd);
	}
	*ga = *g;
	*fa = *g;
	fa->out = &sv[W_OUT], fa->lse = &sv[W_LSE];
	ga->lse = g->lse ? g->lse : &sv[W_LSE];
	ga->dq = g->dq ? g->dq : &sv[W_DQ];
	ga->dk = g->dk ? g->dk : &sv[W_DK];
	ga->dv = g->dv ? g->dv : &sv[W_DV];
}

static int backward(cfrt_ctx *ctx, const dnn_plan *p, const cfrti_attn *g,
                    const cfrt_view sv[W_N])
{
	int64_t uid[24];
	void *ptr[24];
	scalars c = scalars_of(ctx, &p->key, g);
	int64_t n = common_pack(&p->key, g, &c, uid, ptr);
	uid[n] = U_DO, ptr[n++] = g->dout->p;
	uid[n] = U_DQ, ptr[n++] = g->dq->p;
	uid[n] = U_DK, ptr[n++] = g->dk->p;
	uid[n] = U_DV, ptr[n++] = g->dv->p;
	uid[n] = U_ONE, ptr[n++] = &c.one;
	uid[n] = U_DQACC, ptr[n++] = sv[W_DQACC].p;
	uid[n] = U_DELTA, ptr[n++] = sv[W_DELTA].p;
	int rc = CFRT_OK;
	if (ctx->dnn->version < 90600) /* cuDNN zeroes the sums itself since */
		rc = cfrti_cuda(ctx, cudaMemsetAsync(sv[W_DQACC].p, 0,
		                (size_t)cfrt_view_numel(&sv[W_DQACC]) * 4,
		                ctx->dev.cs), "cudaMemsetAsync");
	return rc != CFRT_OK ? rc : execute(ctx, p, uid, ptr, n);
}

/* Rows r0.. of a [B,H,S,D] view as one 2-d region of rows of width
 * bytes, height of them, pitch apart (height 0: nothing), or 0 where
 * they are not: the dims with more than one entry, ordered by stride,
 * merged where one steps over a whole run of the next, must come down
 * to two at most, the inner one of unit stride. */
typedef struct region {
	char *p;
	size_t pitch, width, height;
} region;

static int rows_region(const cfrt_view *v, int64_t r0, region *r)
{
	int64_t d[4], st[4], md[4], ms[4];
	int n = 0, m = 0;
	size_t es = cfrt_dtype_size(v->t);
	for (int i = 0; i < 4; i++) {
		int64_t dim = i == 2 ? v->dim[2] - r0 : v->dim[i], j = n++;
		for (; j > 0 && st[j - 1] < v->stride[i]; j--)
			d[j] = d[j - 1], st[j] = st[j - 1];
		d[j] = dim, st[j] = v->stride[i];
	}
	r->p = (char *)v->p + (size_t)(r0 * v->stride[2]) * es;
	r->height = 1;
	for (int i = n - 1; i >= 0; i--) {
		if (d[i] == 0)
			r->height = 0;
		if (d[i] <= 1)
			continue;
		if (m > 0 && st[i] == ms[m - 1] * md[m - 1])
			md[m - 1] *= d[i];
		else
			md[m] = d[i], ms[m] = st[i], m++;
	}
	if (m > 2 || (m > 0 && ms[0] != 1))
		return 0;
	r->width = (size_t)(m > 0 ? md[0] : 1) * es;
	r->pitch = m > 1 ? (size_t)ms[1] * es : r->width;
	r->height *= m > 1 ? (size_t)md[1] : 1;
	return 1;
}

static int zero_region(cfrt_ctx *ctx, const region *r)
{
	if (!r->p || r->height == 0)
		return CFRT_OK;
	return cfrti_cuda(ctx, cudaMemset2DAsync(r->p, r->pitch, 0, r->width,
	                  r->height, ctx->dev.cs), "cudaMemset2DAsync");
}

/* A causal query slice sees only the first keys: the call runs on those
 * (t), and the rows of dk and dv after them are zeros (z), where each is
 * one 2-d memset; else t is g. */
static void cut_keys(const cfrti_attn *g, cfrti_attn *t, cfrt_view kv[4],
                     region z[2])
{
	int64_t ske = keys_seen(g);
	memset(z, 0, 2 * sizeof *z);
	*t = *g;
	if (ske == g->k->dim[2] || (g->dk && !rows_region(g->dk, ske, &z[0])) ||
	    (g->dv && !rows_region(g->dv, ske, &z[1]))) {
		memset(z, 0, 2 * sizeof *z);
		return;
	}
	t->k = seen(g, g->k, &kv[0]), t->v = seen(g, g->v, &kv[1]);
	t->dk = seen(g, g->dk, &kv[2]), t->dv = seen(g, g->dv, &kv[3]);
}

int cfrti_dnn_attention_grad(cfrt_ctx *ctx, const cfrti_attn *g, int strict)
{
	dnn_plan *pb = NULL, *pf = NULL;
	cfrt_view sv[W_N], kv[4];
	cfrti_attn t, ga, fa;
	region z[2];
	size_t off[W_N + 1];
	if (!expressible(g))
		return CFRT_ENOTSUP;
	int rc = dnn_handle(ctx, strict);
	if (rc != CFRT_OK)
		return rc;
	cut_keys(g, &t, kv, z);
	grad_scratch(&t, NULL, off, sv, &ga, &fa);
	if (off[W_N] > DNN_WS_MAX)
		return CFRT_ENOTSUP;
	dnn_key kb = key_of(ctx, &ga, 1), kf = key_of(ctx, &fa, 0);
	rc = plan_of(ctx, &kb, strict, &pb);
	if (rc == CFRT_OK && !g->lse)
		rc = plan_of(ctx, &kf, strict, &pf);
	if (rc != CFRT_OK)
		return rc;
	size_t base = round256((size_t)(pf && pf->ws > pb->ws ? pf->ws : pb->ws));
	rc = cfrti_ws_reserve(ctx, base + off[W_N]);
	for (int i = 0; rc == CFRT_OK && i < 2; i++)
		rc = zero_region(ctx, &z[i]);
	if (rc != CFRT_OK)
		return rc;
	grad_scratch(&t, (char *)ctx->dev.ws + base, off, sv, &ga, &fa);
	if (pf)
		rc = forward(ctx, pf, &fa);
	return rc != CFRT_OK ? rc : backward(ctx, pb, &ga, sv);
}

#endif /* CFRT_HAVE_CUDNN */
