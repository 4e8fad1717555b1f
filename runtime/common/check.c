/* check.c: argument checks of the compute ops (fill, elementwise, scan,
 * norms, softmax), and cfrt_fill_uniform, which is cfrt_fill_global over
 * the whole tensor. ensures: a check that passes leaves views that the
 * backends' line walks and kernels can take as they are. */
#include "common.h"

/* dst is a window at offs of a tensor of dims gdims. */
static int check_window(cfrt_ctx *ctx, const cfrt_view *dst,
                        const int64_t *gdims, const int64_t *offs)
{
	if (!gdims || !offs)
		return cfrti_err(ctx, CFRT_EINVAL, "null global dims or offsets");
	for (int d = 0; d < dst->nd; d++)
		if (offs[d] < 0 || offs[d] + dst->dim[d] > gdims[d])
			return cfrti_err(ctx, CFRT_EINVAL, "dim %d: window %lld+%lld "
			                 "exceeds the global extent %lld", d,
			                 (long long)offs[d], (long long)dst->dim[d],
			                 (long long)gdims[d]);
	return CFRT_OK;
}

int cfrti_check_fill(cfrt_ctx *ctx, const cfrt_view *dst,
                     const int64_t *gdims, const int64_t *offs)
{
	int rc = cfrti_check_view(ctx, dst, "dst");
	return rc != CFRT_OK ? rc : check_window(ctx, dst, gdims, offs);
}

int cfrt_fill_uniform(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed)
{
	int64_t zero[CFRT_MAX_DIMS] = {0};
	return cfrt_fill_global(ctx, dst, seed, dst ? dst->dim : NULL, zero);
}

int cfrti_check_binary(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *a, const cfrt_view *b, cfrt_view *bb)
{
	int rc = cfrti_check_same(ctx, dst, a, "dst", "a");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, b, "b");
	if (rc == CFRT_OK && b->t != dst->t)
		rc = cfrti_err(ctx, CFRT_EINVAL, "views b and dst have different "
		               "dtypes");
	if (rc == CFRT_OK)
		rc = cfrti_broadcast_to(ctx, b, dst, bb);
	return rc;
}

int cfrti_check_scan(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim)
{
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc == CFRT_OK && (dim < 0 || dim >= dst->nd))
		rc = cfrti_err(ctx, CFRT_EINVAL, "dim %d of a %d-d view", dim,
		               dst->nd);
	return rc;
}

int cfrti_check_rows(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, const cfrt_view *gamma,
                     const cfrt_view *beta, double eps)
{
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	int64_t n = rc == CFRT_OK ? dst->dim[dst->nd - 1] : 0;
	if (rc == CFRT_OK && gamma)
		rc = cfrti_check_vec(ctx, gamma, n, dst->t, "gamma");
	if (rc == CFRT_OK && beta)
		rc = cfrti_check_vec(ctx, beta, n, dst->t, "beta");
	if (rc == CFRT_OK && !(eps >= 0.0))
		rc = cfrti_err(ctx, CFRT_EINVAL, "eps %g is negative", eps);
	return rc;
}
