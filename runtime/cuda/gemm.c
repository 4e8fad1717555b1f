/* gemm.c: row-major strided batched GEMM through cuBLAS, matmul on views,
 * and attention and its backward: cuDNN's fused attention (dnn.c) or
 * the fused kernels of flash.cu and flash_bwd.cu for bf16 and f16 where
 * they apply, else GEMMs around the masked softmax kernel (and,
 * backward, the softmax backward kernel).
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

/* Attention keeps at most this many bytes of scores and probabilities
 * (the fused backward: of its row statistics and f32 dq sums). */
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
	if (g.cin && g.cin != g.c) {
		/* no cuBLASLt plan for cfrt_matmul_add's shape: its addend
		 * copied into c, then added to as cuBLAS does */
		size_t es = cfrt_dtype_size(g.ct);
		rc = CFRT_OK;
		for (int64_t i = 0; rc == CFRT_OK && i < g.batch; i++)
			rc = cfrti_cuda(ctx, cudaMemcpy2DAsync((char *)g.c + (size_t)(i * g.sc) * es,
			                (size_t)g.ldc * es, (const char *)g.cin + (size_t)(i * g.sc) * es,
			                (size_t)g.ldc * es, (size_t)g.n * es, (size_t)g.m,
			                cudaMemcpyDeviceToDevice, ctx->dev.cs), "cudaMemcpy2DAsync");
		if (rc != CFRT_OK)
			return rc;
		g.cin = NULL;
	}
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
	               lda, ldb, ldc, stride_a, stride_b, stride_c, batch, NULL};
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

/* c = alpha a @ b + beta c, or with cin (an addend laid out as c, not
 * NULL) beta cin: cfrt_matmul and cfrt_matmul_add after their checks. */
static int matmul_into(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                       const cfrt_view *b, double alpha, double beta, const void *cin)
{
	cfrt_view ae, be, ce;
	gemm_args g = {0};
	int rc = cfrti_matmul_args(ctx, c, a, b, alpha, beta, &g, &ae, &be);
	if (rc != CFRT_OK)
		return rc;
	ce = *c;
	merge_batch_dims((cfrt_view *[3]){&ce, &ae, &be});
	cfrti_matmul_batch(&g, &ce, &ae, &be);
	g.cin = cin;
	rc = cfrti_gemm_check(ctx, &g);
	return rc != CFRT_OK ? rc : cfrti_dev_check(ctx, cfrti_matmul_run(ctx, &g, &ce,
	                                            &ae, &be), c, NULL, NULL);
}

int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta)
{
	int rc = cfrti_enter(ctx, "cfrt_matmul");
	return rc != CFRT_OK ? rc : matmul_into(ctx, c, a, b, alpha, beta, NULL);
}

/* d laid out as c: every element of one at the other's offset. */
static int same_layout(const cfrt_view *c, const cfrt_view *d)
{
	for (int i = 0; i < c->nd; i++)
		if (c->dim[i] > 1 && c->stride[i] != d->stride[i])
			return 0;
	return 1;
}

int cfrt_matmul_add(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                    const cfrt_view *b, const cfrt_view *d, double alpha)
{
	int rc = cfrti_enter(ctx, "cfrt_matmul_add");
	if (rc == CFRT_OK)
		rc = cfrti_check_matmul_add(ctx, c, d);
	if (rc != CFRT_OK)
		return rc;
	/* cuBLASLt reads C and writes D apart for the 16-bit types; else
	 * (and for d in place) the sum is made in c: d copied there, then
	 * the product added */
	if (cfrti_view_eq(c, d) || !same_layout(c, d) || ctx->lt.mode == GM_CUBLAS ||
	    (c->t != CFRT_BF16 && c->t != CFRT_F16)) {
		if (!cfrti_view_eq(c, d))
			rc = cfrt_copy(ctx, c, d);
		return rc != CFRT_OK ? rc : cfrt_matmul(ctx, c, a, b, alpha, 1.0);
	}
	return matmul_into(ctx, c, a, b, alpha, 1.0, d->p);
}

/* ---- attention ---------------------------------------------------------- */

/* The type of the scores: F32, F64 for F64 inputs. */
static cfrt_dtype score_type(cfrt_dtype t)
{
	return t == CFRT_F64 ? CFRT_F64 : CFRT_F32;
}

/* The probabilities of nh heads (q's type), after their scores at the
 * start of the workspace. */
static char *probs_of(cfrt_ctx *ctx, const cfrt_view *q, int64_t sk,
                      int64_t nh)
{
	return (char *)ctx->dev.ws + (size_t)(nh * q->dim[2] * sk) *
	       cfrt_dtype_size(score_type(q->t));
}

/* The key/value head of query head h (grouped-query attention: H / Hk
 * query heads a key/value head). */
static int64_t kv_head(const cfrt_view *q, const cfrt_view *k, int64_t h)
{
	return h / (q->dim[1] / k->dim[1]);
}

/* The batch stride of k's (or v's) heads under nh query heads from h0:
 * one key/value head for all of them when the heads are grouped (the
 * callers keep a chunk inside one group). */
static int64_t kv_stride(const cfrt_view *q, const cfrt_view *k)
{
	return q->dim[1] == k->dim[1] ? k->stride[1] : 0;
}

/* scores = q k^T / sqrt(Dh) of heads h0.. (nh of them) of batch entry b,
 * at the start of the workspace. */
static gemm_args scores_gemm(cfrt_ctx *ctx, const cfrt_view *q,
                             const cfrt_view *k, int64_t b, int64_t h0,
                             int64_t nh)
{
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	gemm_args s = {q->t, score_type(q->t), CFRT_NOTRANS, CFRT_TRANS, sq, sk,
	               dh, 1.0 / sqrt((double)dh), 0.0, cfrti_head_at(q, b, h0),
	               cfrti_head_at(k, b, kv_head(q, k, h0)), ctx->dev.ws,
	               cfrti_head_ld(q), cfrti_head_ld(k), sk, q->stride[1],
	               kv_stride(q, k), sq * sk, nh, NULL};
	return s;
}

/* The log-sum-exp rows of heads h0.. of batch entry b for the softmax
 * kernel (lse NULL: none); read: P from them. */
static klse lse_rows(const cfrt_view *lse, int64_t b, int64_t h0, int read)
{
	klse l = {NULL, {0, 0, 0}, b, h0, read};
	for (int d = 0; lse && d < 3; d++)
		l.st[d] = lse->stride[d];
	l.p = lse ? (char *)lse->p : NULL;
	return l;
}

/* Runs the scores GEMM s (s->batch heads) and their masked softmax into
 * probs, with their log-sum-exp as lse says. */
static int attn_probs(cfrt_ctx *ctx, const gemm_args *s, char *probs,
                      int causal, int64_t q_offset, klse lse)
{
	int rc = cfrti_gemm_run(ctx, s);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_attn_softmax(ctx->dev.cs,
		                s->t, s->c, probs, s->batch * s->m, s->m, s->n,
		                causal, q_offset, lse), "attention softmax kernel");
	return rc;
}

/* Heads hn.. (nh of them) of batch entry b: scores and probabilities in
 * the workspace (attn_probs, writing the lse when given), out = probs v;
 * each step one batched GEMM or one kernel. */
static int attn_heads(cfrt_ctx *ctx, const cfrti_attn *a, int64_t b,
                      int64_t h0, int64_t nh)
{
	const cfrt_view *q = a->q, *k = a->k, *v = a->v, *out = a->out;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	char *probs = probs_of(ctx, q, sk, nh);
	gemm_args s = scores_gemm(ctx, q, k, b, h0, nh);
	gemm_args o = {q->t, q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0,
	               0.0, probs, cfrti_head_at(v, b, kv_head(q, v, h0)),
	               cfrti_head_at(out, b, h0), sk, cfrti_head_ld(v),
	               cfrti_head_ld(out), sq * sk, kv_stride(q, v), out->stride[1],
	               nh, NULL};
	int rc = cfrti_gemm_check(ctx, &s);
	if (rc == CFRT_OK)
		rc = cfrti_gemm_check(ctx, &o);
	if (rc == CFRT_OK)
		rc = attn_probs(ctx, &s, probs, a->causal, a->q_offset,
		                lse_rows(a->lse, b, h0, 0));
	return rc != CFRT_OK ? rc : cfrti_gemm_run(ctx, &o);
}

/* Heads per step of the GEMM path (their scores and probabilities in at
 * most ATTN_WS_MAX bytes, one head at least, at most max); reserves the
 * workspace. */
static int attn_chunk(cfrt_ctx *ctx, const cfrt_view *q, int64_t sk,
                      int64_t max, int64_t *chunk)
{
	size_t per_head = (size_t)(q->dim[2] * sk) * (cfrt_dtype_size(q->t) +
	                  cfrt_dtype_size(score_type(q->t)));
	int64_t c = (int64_t)(ATTN_WS_MAX / per_head);
	*chunk = c < 1 ? 1 : c > max ? max : c;
	return cfrti_ws_reserve(ctx, per_head * (size_t)*chunk);
}

/* Query heads in the step from h of at most chunk: inside h's group of
 * heads that share a key/value head (grouped-query attention). */
static int64_t attn_step(const cfrt_view *q, const cfrt_view *k, int64_t h,
                         int64_t chunk)
{
	int64_t grp = q->dim[1] / k->dim[1], left = q->dim[1] - h;
	if (grp > 1 && grp - h % grp < left)
		left = grp - h % grp;
	return left < chunk ? left : chunk;
}

/* CFRT_ATTN, read at every call: cudnn (dnn.c's graphs, where cuDNN
 * takes the call, else the fused kernel; default when the backend was
 * built with cuDNN), flash (the fused kernel wherever it applies; the
 * default without cuDNN) or gemm (always the two GEMMs, for comparison).
 * *strict: cudnn was asked for by name (dnn.c's strict). */
enum attn_mode { ATTN_GEMM, ATTN_FLASH, ATTN_CUDNN };

static int attn_mode(cfrt_ctx *ctx, int *mode, int *strict)
{
	static const char *const names[] = {"gemm", "flash", "cudnn"};
	int rc = cfrti_env_choice(ctx, "CFRT_ATTN", names, 3, cfrti_dnn_have() ?
	                          ATTN_CUDNN : ATTN_FLASH, mode);
	const char *s = getenv("CFRT_ATTN");
	*strict = rc == CFRT_OK && *mode == ATTN_CUDNN && s && *s;
	if (*strict && !cfrti_dnn_have())
		rc = cfrti_err(ctx, CFRT_ENOTSUP, "CFRT_ATTN=cudnn: cuDNN not "
		               "available: built without cudnn");
	return rc;
}

/* A [B,H,S,Dh] view for the fused kernel: st[2] the row stride. */
static kview attn_kview(const cfrt_view *v)
{
	kview k = kv_of(v);
	k.st[2] = cfrti_head_ld(v);
	return k;
}

static int attention_run(cfrt_ctx *ctx, const cfrti_attn *a)
{
	const cfrt_view *q = a->q, *k = a->k;
	int mode = ATTN_FLASH, strict = 0;
	int rc = cfrti_enter(ctx, a->api);
	if (rc == CFRT_OK)
		rc = cfrti_attn_check(ctx, a->out, a->lse, q, k, a->v, a->q_offset);
	if (rc == CFRT_OK)
		rc = attn_mode(ctx, &mode, &strict);
	if (rc != CFRT_OK || cfrt_view_numel(q) == 0)
		return rc;
	if (mode == ATTN_CUDNN) {
		rc = cfrti_dnn_attention(ctx, a, strict);
		if (rc != CFRT_ENOTSUP)
			return rc;
	}
	if (mode != ATTN_GEMM) {
		kview kl = {0};
		if (a->lse)
			kl = kv_of(a->lse);
		cudaError_t e = (cudaError_t)cfrtk_flash_attn(ctx->dev.cs, q->t,
			attn_kview(a->out), attn_kview(q), attn_kview(k),
			attn_kview(a->v), a->causal, a->q_offset, kl);
		if (e != cudaErrorNotSupported)
			return cfrti_cuda(ctx, e, "flash attention kernel");
	}
	int64_t chunk, n, nh = q->dim[1];
	rc = attn_chunk(ctx, q, k->dim[2], nh, &chunk);
	for (int64_t b = 0; rc == CFRT_OK && b < q->dim[0]; b++)
		for (int64_t h = 0; rc == CFRT_OK && h < nh; h += n) {
			n = attn_step(q, k, h, chunk);
			rc = attn_heads(ctx, a, b, h, n);
		}
	return rc;
}

int cfrti_attention(cfrt_ctx *ctx, const cfrti_attn *a)
{
	return cfrti_dev_check(ctx, attention_run(ctx, a), a->out, a->lse, NULL);
}

/* ---- attention backward ------------------------------------------------- */

/* The dk or dv of no queries: zeros, head by head (NULL: nothing). */
static int zero_heads(cfrt_ctx *ctx, const cfrt_view *v)
{
	int rc = CFRT_OK;
	size_t es = v ? cfrt_dtype_size(v->t) : 0;
	for (int64_t b = 0; v && rc == CFRT_OK && b < v->dim[0]; b++)
		for (int64_t h = 0; rc == CFRT_OK && h < v->dim[1]; h++)
			rc = cfrti_cuda(ctx, cudaMemset2DAsync(cfrti_head_at(v, b, h),
			                (size_t)cfrti_head_ld(v) * es, 0,
			                (size_t)v->dim[3] * es, (size_t)v->dim[2],
			                ctx->dev.cs), "cudaMemset2DAsync");
	return rc;
}

/* C = alpha op(A) B + beta C for heads hb.. of view b and hc.. of view c
 * (nh of them) of batch entry b, A (m x k, transposed when ta) from the
 * workspace at a. */
static gemm_args grad_gemm(cfrt_trans ta, int64_t m, int64_t k,
                           double alpha, double beta, const char *a,
                           int64_t lda, const cfrt_view *bv, int64_t hb,
                           const cfrt_view *cv, int64_t hc, int64_t b,
                           int64_t nh)
{
	int64_t stride_a = cv->dim[2] * bv->dim[2]; /* Sq Sk */
	gemm_args g = {cv->t, cv->t, ta, CFRT_NOTRANS, m, cv->dim[3], k, alpha,
	               beta, a, cfrti_head_at(bv, b, hb), cfrti_head_at(cv, b, hc),
	               lda, cfrti_head_ld(bv), cfrti_head_ld(cv), stride_a,
	               bv->stride[1], cv->stride[1], nh, NULL};
	return g;
}

/* Heads h0.. (nh of them) of batch entry b on the GEMM path: P as the
 * forward has it (attn_probs; from the lse when given), dv = P^T dout,
 * dP = dout v^T over the scores, dS = P (dP - delta) over P, dq = dS k / sqrt(Dh) and
 * dk = dS^T q / sqrt(Dh); each step one batched GEMM or one kernel, those
 * of NULL gradients skipped. Every GEMM is checked before any runs. With
 * grouped heads (k and v have fewer), nh is 1 and dk and dv of the key/
 * value head kh are added to those of the group's earlier query heads
 * (written by the first). */
static int grad_heads(cfrt_ctx *ctx, const cfrti_attn *g, int64_t b,
                      int64_t h0, int64_t nh)
{
	const cfrt_view *q = g->q, *k = g->k, *dout = g->dout;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	int64_t kh = kv_head(q, k, h0), grp = q->dim[1] / k->dim[1];
	double scale = 1.0 / sqrt((double)dh), beta = h0 % grp ? 1.0 : 0.0;
	char *probs = probs_of(ctx, q, sk, nh);
	gemm_args none = {0}, s = scores_gemm(ctx, q, k, b, h0, nh);
	gemm_args gv = g->dv ? grad_gemm(CFRT_TRANS, sk, sq, 1.0, beta, probs, sk,
	                                 dout, h0, g->dv, kh, b, nh) : none;
	gemm_args gq = g->dq ? grad_gemm(CFRT_NOTRANS, sq, sk, scale, 0.0, probs,
	                                 sk, k, kh, g->dq, h0, b, nh) : none;
	gemm_args gk = g->dk ? grad_gemm(CFRT_TRANS, sk, sq, scale, beta, probs,
	                                 sk, q, h0, g->dk, kh, b, nh) : none;
	gemm_args dp = {q->t, s.ct, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh, 1.0,
	                0.0, cfrti_head_at(dout, b, h0),
	                cfrti_head_at(g->v, b, kh), ctx->dev.ws,
	                cfrti_head_ld(dout), cfrti_head_ld(g->v), sk,
	                dout->stride[1], kv_stride(q, g->v), sq * sk, nh, NULL};
	int rc = cfrti_gemm_check(ctx, &s), ds = g->dq || g->dk;
	if (rc == CFRT_OK && ds)
		rc = cfrti_gemm_check(ctx, &dp);
	if (rc == CFRT_OK && g->dv)
		rc = cfrti_gemm_check(ctx, &gv);
	if (rc == CFRT_OK && g->dq)
		rc = cfrti_gemm_check(ctx, &gq);
	if (rc == CFRT_OK && g->dk)
		rc = cfrti_gemm_check(ctx, &gk);
	if (rc == CFRT_OK)
		rc = attn_probs(ctx, &s, probs, g->causal, g->q_offset,
		                lse_rows(g->lse, b, h0, 1));
	if (rc == CFRT_OK && g->dv)
		rc = cfrti_gemm_run(ctx, &gv);
	if (rc != CFRT_OK || !ds)
		return rc;
	rc = cfrti_gemm_run(ctx, &dp);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_attn_dscores(ctx->dev.cs,
		                q->t, probs, ctx->dev.ws, kv_of(dout),
		                kv_of(g->out), b, h0, nh * sq, sq, sk, g->causal,
		                g->q_offset), "attention softmax backward kernel");
	if (rc == CFRT_OK && g->dq)
		rc = cfrti_gemm_run(ctx, &gq);
	return rc != CFRT_OK || !g->dk ? rc : cfrti_gemm_run(ctx, &gk);
}

/* The fused kernels' views of batch entries b0.. (nb of them). */
static kgrad grad_kviews(const cfrti_attn *g, int64_t b0, int64_t nb)
{
	const cfrt_view *v[9] = {g->dq, g->dk, g->dv, g->q, g->k, g->v, g->out,
	                         g->dout, g->lse};
	kview kv[9];
	for (int i = 0; i < 9; i++) {
		memset(&kv[i], 0, sizeof kv[i]);
		if (v[i]) {
			cfrt_view s = cfrt_view_slice(*v[i], 0, b0, nb);
			kv[i] = i == 8 ? kv_of(&s) : attn_kview(&s); /* lse: 3-d */
		}
	}
	kgrad k = {kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7],
	           kv[8]};
	return k;
}

/* The fused backward, over batch entries in steps whose workspace stays
 * under ATTN_WS_MAX (one entry at least); CFRT_ENOTSUP, having done
 * nothing, where it does not apply. */
static int grad_flash(cfrt_ctx *ctx, const cfrti_attn *g)
{
	int64_t nb = g->q->dim[0];
	kgrad kg = grad_kviews(g, 0, nb);
	size_t all = cfrtk_flash_attn_grad_ws(g->q->t, &kg);
	if (all == 0)
		return CFRT_ENOTSUP;
	size_t per = all / (size_t)nb;
	int64_t step = (int64_t)(ATTN_WS_MAX / per);
	step = step < 1 ? 1 : step > nb ? nb : step;
	int rc = cfrti_ws_reserve(ctx, per * (size_t)step);
	for (int64_t b0 = 0; rc == CFRT_OK && b0 < nb; b0 += step) {
		kg = grad_kviews(g, b0, nb - b0 < step ? nb - b0 : step);
		rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_flash_attn_grad(ctx->dev.cs,
		                g->q->t, &kg, g->causal, g->q_offset, ctx->dev.ws),
		                "flash attention backward kernels");
	}
	return rc;
}

static int attention_grad_run(cfrt_ctx *ctx, const cfrti_attn *g)
{
	const cfrt_view *q = g->q, *k = g->k;
	int mode = ATTN_FLASH, strict = 0, want = g->dq || g->dk || g->dv;
	int rc = cfrti_enter(ctx, g->api);
	if (rc == CFRT_OK)
		rc = cfrti_attn_grad_check(ctx, g->dq, g->dk, g->dv, q, k, g->v,
		                           g->out, g->dout, g->lse, g->q_offset);
	if (rc == CFRT_OK)
		rc = attn_mode(ctx, &mode, &strict);
	if (rc != CFRT_OK || !want || cfrt_view_numel(k) == 0)
		return rc;
	if (q->dim[2] == 0) { /* no queries: no contribution to dk and dv */
		rc = zero_heads(ctx, g->dk);
		return rc != CFRT_OK ? rc : zero_heads(ctx, g->dv);
	}
	if (mode == ATTN_CUDNN) {
		rc = cfrti_dnn_attention_grad(ctx, g, strict);
		if (rc != CFRT_ENOTSUP)
			return rc;
	}
	if (mode != ATTN_GEMM) {
		rc = grad_flash(ctx, g);
		if (rc != CFRT_ENOTSUP)
			return rc;
	}
	/* grouped heads: one query head a step, as the key/value head's dk
	 * and dv sum the group's */
	int64_t chunk, nh = q->dim[1];
	rc = attn_chunk(ctx, q, k->dim[2], nh == k->dim[1] ? nh : 1, &chunk);
	for (int64_t b = 0; rc == CFRT_OK && b < q->dim[0]; b++)
		for (int64_t h = 0; rc == CFRT_OK && h < nh; h += chunk)
			rc = grad_heads(ctx, g, b, h, nh - h < chunk ? nh - h : chunk);
	return rc;
}

int cfrti_attention_grad(cfrt_ctx *ctx, const cfrti_attn *g)
{
	return cfrti_dev_check(ctx, attention_grad_run(ctx, g), g->dq, g->dk, g->dv);
}
