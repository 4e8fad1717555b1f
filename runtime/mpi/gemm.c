/* gemm.c: row-major strided batched GEMM through CBLAS, and matmul on views.
 * requires: arguments pass cfrti_gemm_check before cfrti_gemm_run.
 * ensures: while a transfer has not been waited on (panel progress mode),
 * each GEMM runs as row panels with a progress test after each; the cut
 * depends only on the shapes and on that condition, so results are the
 * same on every run of a program. */
#include <cblas.h>

#include "backend.h"

/* Panels: each CBLAS call packs op(B) again, so a panel needs many rows
 * for the packing to stay cheap: at least PANEL_MIN_ROWS (512 rows keep
 * the loss to ~1-4% in tests/runtime/progress_bench.c, where 32-row panels
 * doubled the GEMM time), and about PANEL_FLOPS of work (~1-3 ms on one
 * core) when the rows are short. */
#define PANEL_FLOPS (256.0 * 1024 * 1024)
enum { PANEL_MIN_ROWS = 512 };

/* Rows per panel: all of them unless a transfer awaits progress. */
static int64_t panel_rows(const cfrt_ctx *ctx, const gemm_args *g)
{
	if (ctx->mode != PROG_PANEL || ctx->unwaited == 0)
		return g->m;
	double per_row = 2.0 * (double)g->n * (double)g->k + 1.0;
	int64_t rows = (int64_t)(PANEL_FLOPS / per_row);
	if (rows < PANEL_MIN_ROWS)
		rows = PANEL_MIN_ROWS;
	rows = (rows + 15) / 16 * 16; /* whole register tiles */
	return rows < g->m ? rows : g->m;
}

/* Rows [r0, r0+rows) of batch entry b. */
static void gemm_panel(const gemm_args *g, int64_t b, int64_t r0, int64_t rows)
{
	int64_t es = (int64_t)cfrt_dtype_size(g->t);
	int64_t aoff = g->ta == CFRT_NOTRANS ? r0 * g->lda : r0;
	const char *a = (const char *)g->a + (b * g->sa + aoff) * es;
	const char *bm = (const char *)g->b + b * g->sb * es;
	char *c = (char *)g->c + (b * g->sc + r0 * g->ldc) * es;
	enum CBLAS_TRANSPOSE ta = g->ta == CFRT_TRANS ? CblasTrans : CblasNoTrans;
	enum CBLAS_TRANSPOSE tb = g->tb == CFRT_TRANS ? CblasTrans : CblasNoTrans;
	if (g->t == CFRT_F32)
		cblas_sgemm(CblasRowMajor, ta, tb, (int)rows, (int)g->n, (int)g->k,
		            (float)g->alpha, (const float *)(const void *)a,
		            (int)g->lda, (const float *)(const void *)bm,
		            (int)g->ldb, (float)g->beta, (float *)(void *)c,
		            (int)g->ldc);
	else
		cblas_dgemm(CblasRowMajor, ta, tb, (int)rows, (int)g->n, (int)g->k,
		            g->alpha, (const double *)(const void *)a, (int)g->lda,
		            (const double *)(const void *)bm, (int)g->ldb, g->beta,
		            (double *)(void *)c, (int)g->ldc);
}

/* Never fails: arguments are checked, CBLAS returns nothing. */
int cfrti_gemm_run(cfrt_ctx *ctx, const gemm_args *g)
{
	if (g->m == 0 || g->n == 0)
		return CFRT_OK;
	int64_t step = panel_rows(ctx, g);
	for (int64_t b = 0; b < g->batch; b++)
		for (int64_t r0 = 0; r0 < g->m; r0 += step) {
			gemm_panel(g, b, r0, g->m - r0 < step ? g->m - r0 : step);
			cfrti_progress_poll(ctx);
		}
	return CFRT_OK;
}

int cfrt_gemm(cfrt_ctx *ctx, cfrt_dtype t, cfrt_trans transa,
              cfrt_trans transb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, int64_t stride_a,
              const void *b, int64_t ldb, int64_t stride_b, double beta,
              void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
	double t0 = cfrti_begin(ctx, "cfrt_gemm");
	gemm_args g = {t, t, transa, transb, m, n, k, alpha, beta, a, b, c,
	               lda, ldb, ldc, stride_a, stride_b, stride_c, batch, NULL};
	int rc = cfrti_gemm_check(ctx, &g);
	if (rc != CFRT_OK)
		return rc;
	cfrti_gemm_run(ctx, &g);
	return cfrti_end(ctx, t0, CFRT_OK);
}

int cfrt_matmul_add(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                    const cfrt_view *b, const cfrt_view *d, double alpha)
{
	int rc = cfrti_check_matmul_add(ctx, c, d);
	if (rc == CFRT_OK && !cfrti_view_eq(c, d))
		rc = cfrt_copy(ctx, c, d);
	return rc != CFRT_OK ? rc : cfrt_matmul(ctx, c, a, b, alpha, 1.0);
}

int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta)
{
	double t0 = cfrti_begin(ctx, "cfrt_matmul");
	cfrt_view ae, be, ce = *c;
	gemm_args g = {0};
	int rc = cfrti_matmul_args(ctx, c, a, b, alpha, beta, &g, &ae, &be);
	if (rc != CFRT_OK)
		return rc;
	cfrti_matmul_fold(&g, &ce, &ae, &be);
	cfrti_matmul_batch(&g, &ce, &ae, &be);
	rc = cfrti_gemm_check(ctx, &g);
	if (rc != CFRT_OK)
		return rc;
	cfrti_matmul_run(ctx, &g, &ce, &ae, &be);
	return cfrti_end_out(ctx, t0, c, NULL, NULL);
}
