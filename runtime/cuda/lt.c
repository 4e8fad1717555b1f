/* lt.c: 16-bit GEMMs through cuBLASLt with an algorithm chosen once per
 * shape (CFRT_GEMM). cuBLAS's own choice for a shape is one heuristic
 * guess; on H200 the fastest of cuBLASLt's first eight answers ran up to
 * 12% faster than it for the row blocks a fused schedule computes (bench
 * gemm_probe: 16384 x 4096 x 4096 bf16, 0.87 ms against 0.77 ms).
 *   tune       (default) the first call of each shape times each of the
 *              heuristic's answers on the compute stream, into a scratch
 *              output, and keeps the fastest;
 *   heuristic  the heuristic's first answer (the same on every run);
 *   cublas     no cuBLASLt: cublasGemmStridedBatchedEx.
 * A shape is everything the choice depends on: types, transposes, sizes,
 * leading dimensions, batch strides, whether beta is 0 and the pointers'
 * alignment. Tuned choices may differ between runs and ranks, and with
 * them the rounding of the sums; heuristic and cublas do not.
 * requires: g passed cfrti_gemm_check; runs on ctx->dev.cs.
 * ensures: cfrti_lt_gemm returns CFRT_ENOTSUP, having launched nothing,
 * when cuBLASLt is off or has no algorithm for the shape. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

enum { LT_ANSWERS = 8, LT_REPS = 3, LT_MAXPLANS = 256 };

typedef struct lt_key {
	cfrt_dtype t, ct;
	cfrt_trans ta, tb;
	int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
	int beta0, align;
} lt_key;

struct lt_plan {
	lt_key key;
	int ok; /* cuBLASLt has an algorithm for it */
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, lc; /* of cuBLAS's A (our b), B, C */
	cublasLtMatmulAlgo_t algo;
};

/* CFRT_GEMM. Touches no device: read before the modules' init. */
int cfrti_lt_mode(cfrt_ctx *ctx)
{
	static const char *const names[] = {"tune", "heuristic", "cublas"};
	return cfrti_env_choice(ctx, "CFRT_GEMM", names, 3, GM_TUNE,
	                        &ctx->lt.mode);
}

/* The largest power of two up to 256 dividing every address. */
static int align_of(const gemm_args *g)
{
	uintptr_t p = (uintptr_t)g->a | (uintptr_t)g->b | (uintptr_t)g->c |
	              (uintptr_t)g->cin | 256;
	return (int)(p & -p);
}

static lt_key key_of(const gemm_args *g)
{
	lt_key k;
	memset(&k, 0, sizeof k); /* padding too: keys compare with memcmp */
	k.t = g->t, k.ct = g->ct, k.ta = g->ta, k.tb = g->tb;
	k.m = g->m, k.n = g->n, k.k = g->k;
	k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
	k.sa = g->sa, k.sb = g->sb, k.sc = g->sc, k.batch = g->batch;
	k.beta0 = g->beta == 0.0;
	k.align = align_of(g);
	return k;
}

static cudaDataType_t lt_type(cfrt_dtype t)
{
	return t == CFRT_BF16 ? CUDA_R_16BF : t == CFRT_F16 ? CUDA_R_16F :
	       CUDA_R_32F;
}

static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cfrt_dtype t,
                             int64_t rows, int64_t cols, int64_t ld,
                             int64_t batch, int64_t stride)
{
	int32_t nb = (int32_t)batch;
	cublasStatus_t st = cublasLtMatrixLayoutCreate(l, lt_type(t),
		(uint64_t)rows, (uint64_t)cols, ld);
	if (st == CUBLAS_STATUS_SUCCESS && batch > 1)
		st = cublasLtMatrixLayoutSetAttribute(*l,
			CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb);
	if (st == CUBLAS_STATUS_SUCCESS && batch > 1)
		st = cublasLtMatrixLayoutSetAttribute(*l,
			CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
			sizeof stride);
	return st;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * operation and layouts of that, and the heuristic's answers. */
static int describe(cfrt_ctx *ctx, lt_plan *p, const gemm_args *g,
                    cublasLtMatmulHeuristicResult_t *res, int *nres)
{
	cublasOperation_t opa = g->tb == CFRT_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opb = g->ta == CFRT_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasLtMatmulPreference_t pref = NULL;
	uint64_t ws = BLAS_WS;
	uint32_t al = (uint32_t)p->key.align;
	cublasStatus_t st = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F,
	                                             CUDA_R_32F);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulDescSetAttribute(p->op,
			CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulDescSetAttribute(p->op,
			CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = opa == CUBLAS_OP_N ?
			layout(&p->la, g->t, g->n, g->k, g->ldb, g->batch, g->sb) :
			layout(&p->la, g->t, g->k, g->n, g->ldb, g->batch, g->sb);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = opb == CUBLAS_OP_N ?
			layout(&p->lb, g->t, g->k, g->m, g->lda, g->batch, g->sa) :
			layout(&p->lb, g->t, g->m, g->k, g->lda, g->batch, g->sa);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = layout(&p->lc, g->ct, g->n, g->m, g->ldc, g->batch, g->sc);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulPreferenceCreate(&pref);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulPreferenceSetAttribute(pref,
			CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
	static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
		CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
	};
	for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
		st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &al,
		                                          sizeof al);
	*nres = 0;
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasLtMatmulAlgoGetHeuristic(ctx->dev.lt, p->op, p->la, p->lb,
			p->lc, p->lc, pref, ctx->lt.mode == GM_TUNE ? LT_ANSWERS : 1,
			res, nres);
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	/* no answer (or an unsupported shape) is not an error: cuBLAS runs it */
	return st == CUBLAS_STATUS_SUCCESS || st == CUBLAS_STATUS_NOT_SUPPORTED ?
	       CFRT_OK : cfrti_blas(ctx, st, "cublasLtMatmulAlgoGetHeuristic");
}

static cublasStatus_t lt_run(cfrt_ctx *ctx, const lt_plan *p,
                             const cublasLtMatmulAlgo_t *algo,
                             const gemm_args *g, void *d)
{
	float alpha = (float)g->alpha, beta = (float)g->beta;
	return cublasLtMatmul(ctx->dev.lt, p->op, &alpha, g->b, p->la, g->a, p->lb,
	                      &beta, g->cin ? g->cin : g->c, p->lc, d, p->lc, algo,
	                      ctx->dev.blas_ws,
	                      BLAS_WS, ctx->dev.cs);
}

/* Bytes from C's first element to just past its last. */
static size_t c_span(const gemm_args *g)
{
	int64_t n = (g->batch - 1) * g->sc + (g->m - 1) * g->ldc + g->n;
	return (size_t)n * cfrt_dtype_size(g->ct);
}

/* Times each answer LT_REPS times into scratch d (after one untimed
 * run) and returns the index of the fastest median, or -1. */
static int fastest(cfrt_ctx *ctx, const lt_plan *p, const gemm_args *g,
                   const cublasLtMatmulHeuristicResult_t *res, int nres,
                   void *d)
{
	cudaEvent_t e[LT_REPS + 1];
	int best = -1, ne = 0;
	float best_ms = 0;
	for (; ne <= LT_REPS; ne++)
		if (cudaEventCreate(&e[ne]) != cudaSuccess)
			goto out;
	for (int i = 0; i < nres; i++) {
		float t[LT_REPS];
		int ok = lt_run(ctx, p, &res[i].algo, g, d) == CUBLAS_STATUS_SUCCESS;
		for (int r = 0; ok && r <= LT_REPS; r++) {
			ok = cudaEventRecord(e[r], ctx->dev.cs) == cudaSuccess;
			if (ok && r < LT_REPS)
				ok = lt_run(ctx, p, &res[i].algo, g, d) ==
				     CUBLAS_STATUS_SUCCESS;
		}
		ok = ok && cudaEventSynchronize(e[LT_REPS]) == cudaSuccess;
		for (int r = 0; ok && r < LT_REPS; r++)
			ok = cudaEventElapsedTime(&t[r], e[r], e[r + 1]) == cudaSuccess;
		if (!ok) {
			cudaGetLastError();
			continue;
		}
		/* the median of three */
		float lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
		float med = t[2] < lo ? lo : t[2] > hi ? hi : t[2];
		if (best < 0 || med < best_ms)
			best = i, best_ms = med;
	}
out:
	while (ne > 0)
		cudaEventDestroy(e[--ne]);
	return best;
}

/* A new plan for g's shape: its algorithm, or ok = 0. */
static int plan_new(cfrt_ctx *ctx, lt_plan *p, const gemm_args *g)
{
	cublasLtMatmulHeuristicResult_t res[LT_ANSWERS];
	int nres = 0, pick = 0;
	int rc = describe(ctx, p, g, res, &nres);
	if (rc != CFRT_OK || nres == 0)
		return rc;
	if (ctx->lt.mode == GM_TUNE && nres > 1) {
		/* stream-ordered scratch: no device-wide synchronization */
		void *d = NULL;
		if (cudaMallocAsync(&d, c_span(g), ctx->dev.cs) == cudaSuccess) {
			pick = fastest(ctx, p, g, res, nres, d);
			cudaFreeAsync(d, ctx->dev.cs);
		} else {
			cudaGetLastError(); /* no room to tune: the first answer */
		}
		if (pick < 0)
			pick = 0;
	}
	p->algo = res[pick].algo;
	p->ok = 1;
	return CFRT_OK;
}

static void plan_free(lt_plan *p)
{
	if (p->op)
		cublasLtMatmulDescDestroy(p->op);
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->lc)
		cublasLtMatrixLayoutDestroy(p->lc);
	memset(p, 0, sizeof *p);
}

static lt_plan *plan_of(cfrt_ctx *ctx, const gemm_args *g, int *rc)
{
	lt_key k = key_of(g);
	*rc = CFRT_OK;
	for (int i = 0; i < ctx->lt.nplans; i++)
		if (!memcmp(&ctx->lt.plans[i].key, &k, sizeof k))
			return &ctx->lt.plans[i];
	if (ctx->lt.nplans == LT_MAXPLANS)
		return NULL; /* more shapes than plans: cuBLAS runs the rest */
	if (!ctx->lt.plans) {
		ctx->lt.plans = calloc(LT_MAXPLANS, sizeof *ctx->lt.plans);
		if (!ctx->lt.plans) {
			*rc = cfrti_err(ctx, CFRT_ENOMEM, "no memory for GEMM plans");
			return NULL;
		}
	}
	lt_plan *p = &ctx->lt.plans[ctx->lt.nplans++];
	p->key = k;
	*rc = plan_new(ctx, p, g);
	return p;
}

int cfrti_lt_gemm(cfrt_ctx *ctx, const gemm_args *g)
{
	int rc = CFRT_OK;
	if (ctx->lt.mode == GM_CUBLAS || (g->t != CFRT_BF16 && g->t != CFRT_F16))
		return CFRT_ENOTSUP;
	const lt_plan *p = plan_of(ctx, g, &rc);
	if (rc != CFRT_OK)
		return rc;
	if (!p || !p->ok)
		return CFRT_ENOTSUP;
	return cfrti_blas(ctx, lt_run(ctx, p, &p->algo, g, g->c), "cublasLtMatmul");
}

/* The plans (made on first use: lt.c has no init). */
void cfrti_lt_fini(cfrt_ctx *ctx)
{
	for (int i = 0; i < ctx->lt.nplans; i++)
		plan_free(&ctx->lt.plans[i]);
	free(ctx->lt.plans);
	ctx->lt.plans = NULL;
	ctx->lt.nplans = 0;
}
