/* gemm.c: row-major strided batched GEMM through cuBLAS, matmul on views,
 * and attention from two GEMMs around a masked softmax kernel.
 * requires: arguments pass cfrti_gemm_check before cfrti_gemm_run.
 * ensures: a row-major C = op(A) op(B) is cuBLAS's column-major
 * C^T = op(B)^T op(A)^T, so no operand is copied; 16-bit types run on the
 * tensor cores with f32 accumulation, f32 without TF32; batches whose
 * matrices follow each other in A and C over a shared B become one GEMM
 * with more rows (one large GEMM runs faster than many small ones). */
#include <limits.h>
#include <math.h>

#include "backend.h"
#include "kern.h"

/* Attention keeps at most this many bytes of scores and probabilities. */
#define ATTN_WS_MAX ((size_t)2 << 30)

static int small(int64_t x)
{
	return x >= 0 && x <= INT_MAX;
}

static int check_shapes(cfrt_ctx *ctx, const gemm_args *g)
{
	int64_t ka = g->ta == CFRT_NOTRANS ? g->k : g->m;
	int64_t kb = g->tb == CFRT_NOTRANS ? g->n : g->k;
	if (!small(g->m) || !small(g->n) || !small(g->k) || g->batch < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "m %lld, n %lld, k %lld, batch "
		                 "%lld out of range", (long long)g->m,
		                 (long long)g->n, (long long)g->k,
		                 (long long)g->batch);
	if (!small(g->lda) || g->lda < (ka > 1 ? ka : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "lda %lld is smaller than the "
		                 "%lld columns of A", (long long)g->lda,
		                 (long long)ka);
	if (!small(g->ldb) || g->ldb < (kb > 1 ? kb : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "ldb %lld is smaller than the "
		                 "%lld columns of B", (long long)g->ldb,
		                 (long long)kb);
	if (!small(g->ldc) || g->ldc < (g->n > 1 ? g->n : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "ldc %lld is smaller than the "
		                 "%lld columns of C", (long long)g->ldc,
		                 (long long)g->n);
	return CFRT_OK;
}

int cfrti_gemm_check(cfrt_ctx *ctx, const gemm_args *g)
{
	int rc = cfrti_check_dtype(ctx, g->t);
	if (rc == CFRT_OK)
		rc = cfrti_check_dtype(ctx, g->ct);
	if (rc != CFRT_OK)
		return rc;
	if ((g->ta != CFRT_NOTRANS && g->ta != CFRT_TRANS) ||
	    (g->tb != CFRT_NOTRANS && g->tb != CFRT_TRANS))
		return cfrti_err(ctx, CFRT_EINVAL, "transa/transb must be "
		                 "CFRT_NOTRANS or CFRT_TRANS");
	rc = check_shapes(ctx, g);
	if (rc != CFRT_OK)
		return rc;
	if (g->sa < 0 || g->sb < 0 || g->sc < 0 ||
	    (g->sc == 0 && g->batch > 1 && g->m * g->n > 0))
		return cfrti_err(ctx, CFRT_EINVAL, "batch strides %lld %lld %lld: "
		                 "negative, or C shared by batches",
		                 (long long)g->sa, (long long)g->sb,
		                 (long long)g->sc);
	if (g->batch > 0 && g->m * g->n > 0 &&
	    (!g->c || (g->k > 0 && (!g->a || !g->b))))
		return cfrti_err(ctx, CFRT_EINVAL, "null matrix pointer");
	return CFRT_OK;
}

static cudaDataType_t cuda_type(cfrt_dtype t)
{
	switch (t) {
	case CFRT_F64: return CUDA_R_64F;
	case CFRT_BF16: return CUDA_R_16BF;
	case CFRT_F16: return CUDA_R_16F;
	default: return CUDA_R_32F;
	}
}

static cublasOperation_t op_of(cfrt_trans t)
{
	return t == CFRT_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/* Batches stacked in A and C over one B: rows of one GEMM. */
static void fold_batch(gemm_args *g)
{
	if (g->batch > 1 && g->ta == CFRT_NOTRANS && g->sb == 0 &&
	    g->sa == g->m * g->lda && g->sc == g->m * g->ldc &&
	    g->m * g->batch <= INT_MAX) {
		g->m *= g->batch;
		g->batch = 1;
	}
}

int cfrti_gemm_run(cfrt_ctx *ctx, const gemm_args *in)
{
	gemm_args g = *in;
	if (g.m == 0 || g.n == 0 || g.batch == 0)
		return CFRT_OK;
	fold_batch(&g);
	if (g.batch > INT_MAX)
		return cfrti_err(ctx, CFRT_EINVAL, "batch %lld is over INT_MAX",
		                 (long long)g.batch);
	float af = (float)g.alpha, bf = (float)g.beta;
	int dbl = g.t == CFRT_F64;
	cublasComputeType_t ct = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
	const void *alpha = dbl ? (const void *)&g.alpha : (const void *)&af;
	const void *beta = dbl ? (const void *)&g.beta : (const void *)&bf;
	cublasStatus_t st = cublasGemmStridedBatchedEx(ctx->blas, op_of(g.tb),
		op_of(g.ta), (int)g.n, (int)g.m, (int)g.k, alpha, g.b,
		cuda_type(g.t), (int)g.ldb, g.sb, g.a, cuda_type(g.t), (int)g.lda,
		g.sa, beta, g.c, cuda_type(g.ct), (int)g.ldc, g.sc, (int)g.batch,
		ct, CUBLAS_GEMM_DEFAULT);
	return cfrti_blas(ctx, st, "cublasGemmStridedBatchedEx");
}

int cfrt_gemm(cfrt_ctx *ctx, cfrt_dtype t, cfrt_trans transa,
              cfrt_trans transb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, int64_t stride_a,
              const void *b, int64_t ldb, int64_t stride_b, double beta,
              void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
	gemm_args g = {t, t, transa, transb, m, n, k, alpha, beta, a, b, c,
	               lda, ldb, ldc, stride_a, stride_b, stride_c, batch};
	int rc = cfrti_begin(ctx, "cfrt_gemm");
	if (rc == CFRT_OK)
		rc = cfrti_gemm_check(ctx, &g);
	return rc != CFRT_OK ? rc : cfrti_gemm_run(ctx, &g);
}

/* The layout of the matrix in the last two dims of v (rows x cols): which
 * dim has unit stride decides the transposition, the other gives ld. */
static int mat_layout(cfrt_ctx *ctx, const cfrt_view *v, const char *what,
                      int out, cfrt_trans *tr, int64_t *ld)
{
	int64_t rows = v->dim[v->nd - 2], cols = v->dim[v->nd - 1];
	int64_t sr = v->stride[v->nd - 2], sc = v->stride[v->nd - 1];
	if (cols <= 1 || sc == 1) {
		*tr = CFRT_NOTRANS;
		*ld = rows <= 1 ? (cols > 1 ? cols : 1) : sr;
		return CFRT_OK;
	}
	if (!out && (rows <= 1 || sr == 1)) {
		*tr = CFRT_TRANS;
		*ld = cols <= 1 ? (rows > 1 ? rows : 1) : sc;
		return CFRT_OK;
	}
	return cfrti_err(ctx, CFRT_EINVAL, "matrix %s needs a unit stride in %s",
	                 what, out ? "its last dim" : "one of its last two dims");
}

/* *out = v with c's batch dims: v's own batch dims right-aligned, extent 1
 * or missing ones broadcast (stride 0). */
static int expand_batch(cfrt_ctx *ctx, const cfrt_view *v, const cfrt_view *c,
                        const char *what, cfrt_view *out)
{
	int lead = c->nd - v->nd;
	if (lead < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "%s has more dims than c", what);
	*out = *c;
	out->p = v->p;
	for (int d = 0; d < c->nd; d++) {
		int vd = d - lead;
		int mat = d >= c->nd - 2;
		out->dim[d] = mat ? v->dim[vd] : c->dim[d];
		out->stride[d] = vd < 0 || (!mat && v->dim[vd] == 1) ? 0 : v->stride[vd];
		if (!mat && vd >= 0 && v->dim[vd] != 1 && v->dim[vd] != c->dim[d])
			return cfrti_err(ctx, CFRT_EINVAL, "batch dim %d of %s does "
			                 "not match c", vd, what);
	}
	return CFRT_OK;
}

static int matmul_check(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                        const cfrt_view *b)
{
	int rc = cfrti_check_view(ctx, c, "c");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, a, "a");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, b, "b");
	if (rc != CFRT_OK)
		return rc;
	if (a->t != c->t || b->t != c->t)
		return cfrti_err(ctx, CFRT_EINVAL, "a, b and c differ in dtype");
	if (a->nd < 2 || b->nd < 2 || c->nd < 2)
		return cfrti_err(ctx, CFRT_EINVAL, "a, b and c need 2 dims or more");
	int64_t m = c->dim[c->nd - 2], n = c->dim[c->nd - 1];
	int64_t k = a->dim[a->nd - 1];
	if (a->dim[a->nd - 2] != m || b->dim[b->nd - 2] != k ||
	    b->dim[b->nd - 1] != n)
		return cfrti_err(ctx, CFRT_EINVAL, "[%lld,%lld] @ [%lld,%lld] does "
		                 "not give [%lld,%lld]", (long long)m, (long long)k,
		                 (long long)b->dim[b->nd - 2],
		                 (long long)b->dim[b->nd - 1], (long long)m,
		                 (long long)n);
	return CFRT_OK;
}

/* Merges batch dims d, d+1 of c, a and b (expanded to c's dims) where
 * each steps over d as over a whole run of d+1. */
static void merge_batch_dims(cfrt_view *v[3])
{
	for (int d = v[0]->nd - 4; d >= 0; d--) {
		int ok = 1;
		for (int i = 0; i < 3; i++)
			ok &= v[i]->stride[d] == v[i]->stride[d + 1] * v[i]->dim[d + 1];
		if (!ok)
			continue;
		for (int i = 0; i < 3; i++) {
			cfrt_view *w = v[i];
			w->dim[d] *= w->dim[d + 1];
			w->stride[d] = w->stride[d + 1];
			for (int e = d + 1; e + 1 < w->nd; e++) {
				w->dim[e] = w->dim[e + 1];
				w->stride[e] = w->stride[e + 1];
			}
			w->nd--;
		}
	}
}

/* g's batch = the innermost batch dim of c (1 when c is a matrix). */
static void set_batch(gemm_args *g, const cfrt_view *c, const cfrt_view *a,
                      const cfrt_view *b)
{
	int ib = c->nd - 3;
	g->batch = ib >= 0 ? c->dim[ib] : 1;
	g->sa = ib >= 0 ? a->stride[ib] : 0;
	g->sb = ib >= 0 ? b->stride[ib] : 0;
	g->sc = ib >= 0 ? c->stride[ib] : 0;
}


/* One GEMM per index of the batch dims outside the innermost one. */
static int matmul_run(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                      const cfrt_view *a, const cfrt_view *b)
{
	int ib = c->nd - 3, rc = CFRT_OK;
	cfrt_view cb = *c, ab = *a, bb = *b;
	if (ib < 0)
		return cfrti_gemm_run(ctx, g);
	cb.nd = ab.nd = bb.nd = ib + 1;
	for (int64_t l = 0; rc == CFRT_OK && l < cfrti_line_count(&cb, ib); l++) {
		g->a = cfrti_line_at(&ab, &cb, ib, l);
		g->b = cfrti_line_at(&bb, &cb, ib, l);
		g->c = cfrti_line_at(&cb, &cb, ib, l);
		rc = cfrti_gemm_run(ctx, g);
	}
	return rc;
}

/* The layouts of a, b and c: transpositions and leading dims. */
static int matmul_layout(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                         const cfrt_view *ae, const cfrt_view *be)
{
	cfrt_trans tc;
	int rc = mat_layout(ctx, ae, "a", 0, &g->ta, &g->lda);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, be, "b", 0, &g->tb, &g->ldb);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, c, "c", 1, &tc, &g->ldc);
	return rc;
}

int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta)
{
	cfrt_view ae, be, ce;
	gemm_args g = {0};
	int rc = cfrti_begin(ctx, "cfrt_matmul");
	if (rc == CFRT_OK)
		rc = matmul_check(ctx, c, a, b);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, a, c, "a", &ae);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, b, c, "b", &be);
	if (rc == CFRT_OK)
		rc = matmul_layout(ctx, &g, c, &ae, &be);
	if (rc != CFRT_OK)
		return rc;
	ce = *c;
	merge_batch_dims((cfrt_view *[3]){&ce, &ae, &be});
	g.t = g.ct = c->t;
	g.m = c->dim[c->nd - 2];
	g.n = c->dim[c->nd - 1];
	g.k = a->dim[a->nd - 1];
	g.alpha = alpha;
	g.beta = beta;
	g.a = ae.p;
	g.b = be.p;
	g.c = ce.p;
	set_batch(&g, &ce, &ae, &be);
	rc = cfrti_gemm_check(ctx, &g);
	return rc != CFRT_OK ? rc : matmul_run(ctx, &g, &ce, &ae, &be);
}

/* ---- attention ---------------------------------------------------------- */

static int check_4d(cfrt_ctx *ctx, const cfrt_view *v, const char *what,
                    cfrt_dtype t)
{
	int rc = cfrti_check_view(ctx, v, what);
	if (rc != CFRT_OK)
		return rc;
	if (v->nd != 4 || v->t != t)
		return cfrti_err(ctx, CFRT_EINVAL, "%s must be a 4-d [B,H,S,Dh] "
		                 "view of q's dtype", what);
	if (v->dim[3] > 1 && v->stride[3] != 1)
		return cfrti_err(ctx, CFRT_EINVAL, "%s needs a unit stride in its "
		                 "last dim", what);
	return CFRT_OK;
}

static int check_qkv(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                     const cfrt_view *k, const cfrt_view *v)
{
	int rc = cfrti_check_view(ctx, q, "q");
	if (rc == CFRT_OK)
		rc = check_4d(ctx, q, "q", q->t);
	if (rc == CFRT_OK)
		rc = check_4d(ctx, k, "k", q->t);
	if (rc == CFRT_OK)
		rc = check_4d(ctx, v, "v", q->t);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, out, q, "out", "q");
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, v, k, "v", "k");
	if (rc != CFRT_OK)
		return rc;
	if (k->dim[0] != q->dim[0] || k->dim[1] != q->dim[1] ||
	    k->dim[3] != q->dim[3] || q->dim[3] < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q [%lld,%lld,_,%lld] and k "
		                 "[%lld,%lld,_,%lld] disagree on B, H or Dh",
		                 (long long)q->dim[0], (long long)q->dim[1],
		                 (long long)q->dim[3], (long long)k->dim[0],
		                 (long long)k->dim[1], (long long)k->dim[3]);
	return CFRT_OK;
}

/* Row stride of the [S,Dh] matrices of v: any value >= Dh when S <= 1. */
static int64_t ld_of(const cfrt_view *v)
{
	return v->dim[2] > 1 ? v->stride[2] : v->dim[3];
}

/* Element [b,h,0,0] of v. */
static char *head(const cfrt_view *v, int64_t b, int64_t h)
{
	int64_t off = b * v->stride[0] + h * v->stride[1];
	return (char *)v->p + off * (int64_t)cfrt_dtype_size(v->t);
}

/* Heads hn.. (nh of them) of batch entry b: scores = q k^T / sqrt(Dh) in
 * the workspace (type st), masked softmax into probs (q's type) after
 * them, out = probs v; each step one batched GEMM or one kernel. */
static int attn_heads(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                      const cfrt_view *k, const cfrt_view *v, int64_t b,
                      int64_t h0, int64_t nh, int causal, int64_t q_offset)
{
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	cfrt_dtype st = q->t == CFRT_F64 ? CFRT_F64 : CFRT_F32;
	char *probs = (char *)ctx->ws + (size_t)(nh * sq * sk) * cfrt_dtype_size(st);
	gemm_args s = {q->t, st, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh,
	               1.0 / sqrt((double)dh), 0.0, head(q, b, h0),
	               head(k, b, h0), ctx->ws, ld_of(q), ld_of(k), sk,
	               q->stride[1], k->stride[1], sq * sk, nh};
	gemm_args o = {q->t, q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0,
	               0.0, probs, head(v, b, h0), head(out, b, h0), sk,
	               ld_of(v), ld_of(out), sq * sk, v->stride[1],
	               out->stride[1], nh};
	int rc = cfrti_gemm_check(ctx, &s);
	if (rc == CFRT_OK)
		rc = cfrti_gemm_check(ctx, &o);
	if (rc == CFRT_OK)
		rc = cfrti_gemm_run(ctx, &s);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_attn_softmax(ctx->cs, q->t,
		                ctx->ws, probs, nh * sq, sq, sk, causal, q_offset),
		                "attention softmax kernel");
	return rc != CFRT_OK ? rc : cfrti_gemm_run(ctx, &o);
}

int cfrt_attention(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                   const cfrt_view *k, const cfrt_view *v, int causal,
                   int64_t q_offset)
{
	int rc = cfrti_begin(ctx, "cfrt_attention");
	if (rc == CFRT_OK)
		rc = check_qkv(ctx, out, q, k, v);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = q->dim[2], sk = k->dim[2], nh = q->dim[1];
	if (q_offset < 0 || sk < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q_offset %lld is negative or "
		                 "there are no keys", (long long)q_offset);
	if (cfrt_view_numel(q) == 0)
		return CFRT_OK;
	size_t per_head = (size_t)(sq * sk) * (cfrt_dtype_size(q->t) +
	                  (q->t == CFRT_F64 ? 8 : 4));
	int64_t chunk = (int64_t)(ATTN_WS_MAX / per_head);
	chunk = chunk < 1 ? 1 : chunk > nh ? nh : chunk;
	rc = cfrti_ws_reserve(ctx, per_head * (size_t)chunk);
	for (int64_t b = 0; rc == CFRT_OK && b < q->dim[0]; b++)
		for (int64_t h = 0; rc == CFRT_OK && h < nh; h += chunk)
			rc = attn_heads(ctx, out, q, k, v, b, h,
			                nh - h < chunk ? nh - h : chunk, causal,
			                q_offset);
	return rc;
}
