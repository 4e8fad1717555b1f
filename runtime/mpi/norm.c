/* norm.c: layer norm, RMS norm and softmax over the last dim.
 * requires: views checked; ensures: each row is read, reduced in double,
 * and written once, so dst may be src. */
#include <math.h>

#include "backend.h"

static lane vec_lane(const cfrt_view *g)
{
	lane l = {g ? g->p : NULL, g ? g->stride[0] : 0, g ? g->t : CFRT_F64};
	return l;
}

/* Public call api: rms = 0 layer norm, rms = 1 RMS norm (beta is NULL). */
static int norm_rows(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                     const cfrt_view *src, const cfrt_view *gamma,
                     const cfrt_view *beta, double eps, int rms)
{
	double t0 = cfrti_begin(ctx, api);
	int rc = cfrti_check_rows(ctx, dst, src, gamma, beta, eps);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	lane g = vec_lane(gamma), b = vec_lane(beta);
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l), s = lane_of(src, dst, ax, l);
		double mean = 0.0, var = 0.0;
		for (int64_t i = 0; i < n && !rms; i++)
			mean += lane_get(s, i);
		mean /= (double)n;
		for (int64_t i = 0; i < n; i++) {
			double x = lane_get(s, i) - mean;
			var += x * x;
		}
		double inv = 1.0 / sqrt(var / (double)n + eps);
		for (int64_t i = 0; i < n; i++) {
			double y = (lane_get(s, i) - mean) * inv;
			if (gamma)
				y *= lane_get(g, i);
			if (beta)
				y += lane_get(b, i);
			lane_set(d, i, y);
		}
		tick(ctx, &done, n);
	}
	return cfrti_end(ctx, t0, CFRT_OK);
}

int cfrt_layernorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                   const cfrt_view *gamma, const cfrt_view *beta, double eps)
{
	return norm_rows(ctx, "cfrt_layernorm", dst, src, gamma, beta, eps, 0);
}

int cfrt_rmsnorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                 const cfrt_view *gamma, double eps)
{
	return norm_rows(ctx, "cfrt_rmsnorm", dst, src, gamma, NULL, eps, 1);
}

void cfrti_softmax_lane(lane dst, lane src, int64_t n, int64_t len)
{
	double max = -INFINITY, sum = 0.0;
	for (int64_t i = 0; i < n; i++)
		max = fmax(max, lane_get(src, i));
	for (int64_t i = 0; i < n; i++)
		sum += exp(lane_get(src, i) - max);
	for (int64_t i = 0; i < n; i++)
		lane_set(dst, i, exp(lane_get(src, i) - max) / sum);
	for (int64_t i = n; i < len; i++)
		lane_set(dst, i, 0.0);
}

int cfrt_softmax(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	double t0 = cfrti_begin(ctx, "cfrt_softmax");
	int rc = cfrti_check_rows(ctx, dst, src, NULL, NULL, 0.0);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		cfrti_softmax_lane(lane_of(dst, dst, ax, l), lane_of(src, dst, ax, l),
		                   n, n);
		tick(ctx, &done, n);
	}
	return cfrti_end(ctx, t0, CFRT_OK);
}
