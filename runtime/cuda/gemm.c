/* gemm.c: row-major strided batched GEMM through cuBLAS, matmul on views,
 * and attention: the fused kernel of flash.cu for bf16 and f16 where it
 * applies, else two GEMMs around a masked softmax kernel.
 * requires: arguments pass cfrti_gemm_check before cfrti_gemm_run.
 * ensures: a row-major C = op(A) op(B) is cuBLAS's column-major
 * C^T = op(B)^T op(A)^T, so no operand is copied; 16-bit types run on the
 * tensor cores with f32 accumulation, f32 without TF32; batches whose
 * matrices follow each other in A and C over a shared B become one GEMM
 * with more rows (one large GEMM runs faster than many small ones);
 * 16-bit GEMMs go through cuBLASLt with a tuned algorithm (lt.c). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kern.h"

/* Attention keeps at most this many bytes of scores and probabilities. */
#define ATTN_WS_MAX ((size_t)2 << 30)

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
	int rc = cfrti_lt_gemm(ctx, &g);
	if (rc != CFRT_ENOTSUP)
		return rc;
	float af = (float)g.alpha, bf = (float)g.beta;
	int dbl = g.t == CFRT_F64;
	cublasComputeType_t ct = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
	const void *alpha = dbl ? (const void *)&g.alpha : (const void *)&af;
	const void *beta = dbl ? (const void *)&g.beta : (const void *)&bf;
	cublasStatus_t st = cublasGemmStridedBatchedEx(ctx->dev.blas, op_of(g.tb),
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
	int rc = cfrti_enter(ctx, "cfrt_gemm");
	if (rc == CFRT_OK)
		rc = cfrti_gemm_check(ctx, &g);
	return rc != CFRT_OK ? rc : cfrti_gemm_run(ctx, &g);
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

int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta)
{
	cfrt_view ae, be, ce;
	gemm_args g = {0};
	int rc = cfrti_enter(ctx, "cfrt_matmul");
	if (rc == CFRT_OK)
		rc = cfrti_matmul_args(ctx, c, a, b, alpha, beta, &g, &ae, &be);
	if (rc != CFRT_OK)
		return rc;
	ce = *c;
	merge_batch_dims((cfrt_view *[3]){&ce, &ae, &be});
	cfrti_matmul_batch(&g, &ce, &ae, &be);
	rc = cfrti_gemm_check(ctx, &g);
	return rc != CFRT_OK ? rc : cfrti_matmul_run(ctx, &g, &ce, &ae, &be);
}

/* ---- attention ---------------------------------------------------------- */

/* Heads hn.. (nh of them) of batch entry b: scores = q k^T / sqrt(Dh) in
 * the workspace (type st), masked softmax into probs (q's type) after
 * them, out = probs v; each step one batched GEMM or one kernel. */
static int attn_heads(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                      const cfrt_view *k, const cfrt_view *v, int64_t b,
                      int64_t h0, int64_t nh, int causal, int64_t q_offset)
{
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	cfrt_dtype st = q->t == CFRT_F64 ? CFRT_F64 : CFRT_F32;
	char *probs = (char *)ctx->dev.ws +
	              (size_t)(nh * sq * sk) * cfrt_dtype_size(st);
	gemm_args s = {q->t, st, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh,
	               1.0 / sqrt((double)dh), 0.0, cfrti_head_at(q, b, h0),
	               cfrti_head_at(k, b, h0), ctx->dev.ws, cfrti_head_ld(q),
	               cfrti_head_ld(k), sk, q->stride[1], k->stride[1], sq * sk,
	               nh};
	gemm_args o = {q->t, q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0,
	               0.0, probs, cfrti_head_at(v, b, h0),
	               cfrti_head_at(out, b, h0), sk, cfrti_head_ld(v),
	               cfrti_head_ld(out), sq * sk, v->stride[1], out->stride[1],
	               nh};
	int rc = cfrti_gemm_check(ctx, &s);
	if (rc == CFRT_OK)
		rc = cfrti_gemm_check(ctx, &o);
	if (rc == CFRT_OK)
		rc = cfrti_gemm_run(ctx, &s);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_attn_softmax(ctx->dev.cs, q->t,
		                ctx->dev.ws, probs, nh * sq, sq, sk, causal, q_offset),
		                "attention softmax kernel");
	return rc != CFRT_OK ? rc : cfrti_gemm_run(ctx, &o);
}

/* CFRT_ATTN, read at every call: flash (default: the fused kernel
 * wherever it applies) or gemm (always the two GEMMs, for comparison). */
static int attn_mode(cfrt_ctx *ctx, int *flash)
{
	static const char *const names[] = {"gemm", "flash"}; /* *flash */
	return cfrti_env_choice(ctx, "CFRT_ATTN", names, 2, 1, flash);
}

/* A [B,H,S,Dh] view for the fused kernel: st[2] the row stride. */
static kview attn_kview(const cfrt_view *v)
{
	kview k = kv_of(v);
	k.st[2] = cfrti_head_ld(v);
	return k;
}

int cfrt_attention(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                   const cfrt_view *k, const cfrt_view *v, int causal,
                   int64_t q_offset)
{
	int flash = 0;
	int rc = cfrti_enter(ctx, "cfrt_attention");
	if (rc == CFRT_OK)
		rc = cfrti_attn_check(ctx, out, q, k, v, q_offset);
	if (rc == CFRT_OK)
		rc = attn_mode(ctx, &flash);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = q->dim[2], sk = k->dim[2], nh = q->dim[1];
	if (cfrt_view_numel(q) == 0)
		return CFRT_OK;
	if (flash) {
		cudaError_t e = (cudaError_t)cfrtk_flash_attn(ctx->dev.cs, q->t,
			attn_kview(out), attn_kview(q), attn_kview(k), attn_kview(v),
			causal, q_offset);
		if (e != cudaErrorNotSupported)
			return cfrti_cuda(ctx, e, "flash attention kernel");
	}
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
