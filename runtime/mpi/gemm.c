/* gemm.c: row-major strided batched GEMM through CBLAS, and matmul on views.
 * requires: arguments pass cfrti_gemm_check before cfrti_gemm_run.
 * ensures: while a transfer has not been waited on (panel progress mode),
 * each GEMM runs as row panels with a progress test after each; the cut depends only on the shapes and on that condition, so
 * results are the same on every run of a program. */
#include <cblas.h>
#include <limits.h>

#include "backend.h"

/* Panels: each CBLAS call packs op(B) again, so a panel needs many rows
 * for the packing to stay cheap: at least PANEL_MIN_ROWS (512 rows keep
 * the loss to ~1-4% in tests/runtime/progress_bench.c, where 32-row panels
 * doubled the GEMM time), and about PANEL_FLOPS of work (~1-3 ms on one
 * core) when the rows are short. */
#define PANEL_FLOPS (256.0 * 1024 * 1024)
enum { PANEL_MIN_ROWS = 512 };

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

void cfrti_gemm_run(cfrt_ctx *ctx, const gemm_args *g)
{
	if (g->m == 0 || g->n == 0)
		return;
	int64_t step = panel_rows(ctx, g);
	for (int64_t b = 0; b < g->batch; b++)
		for (int64_t r0 = 0; r0 < g->m; r0 += step) {
			gemm_panel(g, b, r0, g->m - r0 < step ? g->m - r0 : step);
			cfrti_progress_poll(ctx);
		}
}

int cfrt_gemm(cfrt_ctx *ctx, cfrt_dtype t, cfrt_trans transa,
              cfrt_trans transb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, int64_t stride_a,
              const void *b, int64_t ldb, int64_t stride_b, double beta,
              void *c, int64_t ldc, int64_t stride_c, int64_t batch)
{
	double t0 = cfrti_begin(ctx, "cfrt_gemm");
	gemm_args g = {t, transa, transb, m, n, k, alpha, beta, a, b, c,
	               lda, ldb, ldc, stride_a, stride_b, stride_c, batch};
	int rc = cfrti_gemm_check(ctx, &g);
	if (rc != CFRT_OK)
		return rc;
	cfrti_gemm_run(ctx, &g);
	return cfrti_end(ctx, t0, CFRT_OK);
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
static void matmul_run(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                       const cfrt_view *a, const cfrt_view *b)
{
	int ib = c->nd - 3;
	cfrt_view cb = *c, ab = *a, bb = *b;
	if (ib < 0) {
		cfrti_gemm_run(ctx, g);
		return;
	}
	cb.nd = ab.nd = bb.nd = ib + 1;
	for (int64_t l = 0; l < cfrti_line_count(&cb, ib); l++) {
		g->a = cfrti_line_at(&ab, &cb, ib, l);
		g->b = cfrti_line_at(&bb, &cb, ib, l);
		g->c = cfrti_line_at(&cb, &cb, ib, l);
		cfrti_gemm_run(ctx, g);
	}
}

int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta)
{
	double t0 = cfrti_begin(ctx, "cfrt_matmul");
	cfrt_view ae, be;
	cfrt_trans tc;
	gemm_args g = {0};
	int rc = matmul_check(ctx, c, a, b);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, a, c, "a", &ae);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, b, c, "b", &be);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, &ae, "a", 0, &g.ta, &g.lda);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, &be, "b", 0, &g.tb, &g.ldb);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, c, "c", 1, &tc, &g.ldc);
	if (rc != CFRT_OK)
		return rc;
	g.t = c->t;
	g.m = c->dim[c->nd - 2];
	g.n = c->dim[c->nd - 1];
	g.k = a->dim[a->nd - 1];
	g.alpha = alpha;
	g.beta = beta;
	g.a = ae.p;
	g.b = be.p;
	g.c = c->p;
	set_batch(&g, c, &ae, &be);
	rc = cfrti_gemm_check(ctx, &g);
	if (rc != CFRT_OK)
		return rc;
	matmul_run(ctx, &g, c, &ae, &be);
	return cfrti_end(ctx, t0, CFRT_OK);
}
