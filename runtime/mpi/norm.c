/* norm.c: layer norm, RMS norm and softmax over the last dim, and their
 * backward. requires: views checked; ensures: each row is read, reduced in
 * double, and written once, so dst may be src (dx may be dy or x). */
#include <math.h>
#include <string.h>

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
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
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

/* v, or +0 when zero: a select on the bits, so that no branch depends on
 * the values (GCC turns a ?: or a product by the condition into one) */
static inline float zero_if(float v, int zero)
{
	uint32_t u;
	memcpy(&u, &v, sizeof u);
	u &= (uint32_t)zero - 1u;
	memcpy(&v, &u, sizeof u);
	return v;
}

void cfrti_exp_rows_f32(float *d, const float *s, int64_t n, int64_t len, float sub)
{
	/* no branch on the values: the scores decide which exponents fall
	 * below the limit, and with a branch per element a causal attention
	 * [2, 2, 1024, 64] on one core took 39-48 ms on scores spread over
	 * [-16, 16] against 21-28 ms on close ones; now 19-27 and 19-20
	 * (e^F32_EXP_LIM is above FLT_MIN: an exponent held there gives a
	 * normal number) */
	for (int64_t i = 0; i < n; i++) {
		float x = s[i] - sub;
		d[i] = zero_if(expf(x < F32_EXP_LIM ? F32_EXP_LIM : x), x < F32_EXP_LIM);
	}
	for (int64_t i = n; i < len; i++)
		d[i] = 0.0f;
}

/* cfrti_softmax_lane of f32 runs of stride 1 (softmax rows, attention's
 * score rows in the workspace; dst may be src): one exp per element, in
 * float, summed in double. */
static double softmax_f32(float *d, const float *s, int64_t n, int64_t len)
{
	float max = -INFINITY;
	double sum = 0.0;
	for (int64_t i = 0; i < n; i++)
		max = s[i] > max ? s[i] : max; /* maxss; fmaxf is a call */
	cfrti_exp_rows_f32(d, s, n, len, max);
	for (int64_t i = 0; i < n; i++)
		sum += d[i];
	float inv = (float)(1.0 / sum);
	for (int64_t i = 0; i < n; i++) {
		float p = d[i] * inv;
		d[i] = zero_if(p, p < FLT_MIN);
	}
	return max + log(sum);
}

double cfrti_softmax_lane(lane dst, lane src, int64_t n, int64_t len)
{
	if (dst.t == CFRT_F32 && src.t == CFRT_F32 && dst.s == 1 && src.s == 1)
		return softmax_f32((float *)(void *)dst.p, (const float *)(void *)src.p, n, len);
	double max = -INFINITY, sum = 0.0;
	for (int64_t i = 0; i < n; i++)
		max = fmax(max, lane_get(src, i));
	for (int64_t i = 0; i < n; i++)
		sum += exp_prob(src.t, lane_get(src, i) - max);
	for (int64_t i = 0; i < n; i++)
		lane_set_prob(dst, i, exp_prob(src.t, lane_get(src, i) - max) / sum);
	for (int64_t i = n; i < len; i++)
		lane_set(dst, i, 0.0);
	return max + log(sum);
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
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

/* ---- backward: each row reduced first, then dx written element by
 * element from dy and x at that element, so dx may be dy or x ---- */

/* gamma[i], or 1 without gamma (its lane's p is NULL). */
static double gain(lane g, int64_t i)
{
	return g.p ? lane_get(g, i) : 1.0;
}

/* dx of one row of n > 0 elements: layer norm (rms = 0) or RMS norm
 * (rms = 1), with g = dy * gamma as in cfrt.h. */
static void norm_grad_lane(lane dx, lane dy, lane x, lane gm, int64_t n,
                           double eps, int rms, const lane *hr)
{
	double mean = 0.0, var = 0.0, sg = 0.0, sgx = 0.0;
	for (int64_t i = 0; i < n && !rms; i++)
		mean += lane_get(x, i);
	mean /= (double)n;
	for (int64_t i = 0; i < n; i++) {
		double u = lane_get(x, i) - mean;
		var += u * u;
	}
	double r = 1.0 / sqrt(var / (double)n + eps);
	double xs = rms ? 1.0 : r; /* xhat = (x - mean) * xs; RMS: x */
	for (int64_t i = 0; i < n; i++) {
		double g = lane_get(dy, i) * gain(gm, i);
		sg += g;
		sgx += g * (lane_get(x, i) - mean) * xs;
	}
	sg /= (double)n;
	sgx /= (double)n;
	for (int64_t i = 0; i < n; i++) {
		double d = lane_get(dy, i), g = d * gain(gm, i), u = lane_get(x, i) - mean;
		if (hr) { /* dy * xhat, read before dx is written */
			/* xhat rounded to the rows' type first, as cfrt_rmsnorm
			 * stores it and cfrt_mul reads it: the fused call's rows
			 * are bitwise those of the two calls it replaces */
			double xh = u * r;
			if (hr->t == CFRT_F32)
				xh = (float)xh;
			lane_set(*hr, i, d * xh);
		}
		lane_set(dx, i, rms ? r * g - u * r * r * r * sgx
		                    : r * (g - sg - u * r * sgx));
	}
}

/* hr: NULL, or the rows of gamma's gradient (dy * xhat) to write too. */
static int norm_grad(cfrt_ctx *ctx, const char *api, const cfrt_view *dx,
                     const cfrt_view *dy, const cfrt_view *x,
                     const cfrt_view *gamma, double eps, int rms,
                     const cfrt_view *hr)
{
	double t0 = cfrti_begin(ctx, api);
	int rc = cfrti_check_rows_grad(ctx, dx, dy, x, "x", gamma, eps);
	if (rc == CFRT_OK && hr)
		rc = cfrti_check_same(ctx, hr, dx, "rows", "dx");
	if (rc != CFRT_OK)
		return rc;
	int ax = dx->nd - 1;
	int64_t n = dx->dim[ax], lines = cfrti_line_count(dx, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane h = hr ? lane_of(hr, dx, ax, l) : lane_of(dx, dx, ax, l);
		norm_grad_lane(lane_of(dx, dx, ax, l), lane_of(dy, dx, ax, l),
		               lane_of(x, dx, ax, l), vec_lane(gamma), n, eps, rms,
		               hr ? &h : NULL);
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dx, hr, NULL);
}

int cfrt_layernorm_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                        const cfrt_view *dy, const cfrt_view *x,
                        const cfrt_view *gamma, double eps)
{
	return norm_grad(ctx, "cfrt_layernorm_grad", dx, dy, x, gamma, eps, 0, NULL);
}

int cfrt_rmsnorm_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *x, const cfrt_view *gamma, double eps)
{
	return norm_grad(ctx, "cfrt_rmsnorm_grad", dx, dy, x, gamma, eps, 1, NULL);
}

int cfrt_rmsnorm_grad_rows(cfrt_ctx *ctx, const cfrt_view *dx,
                           const cfrt_view *rows, const cfrt_view *dy,
                           const cfrt_view *x, const cfrt_view *gamma,
                           double eps)
{
	return norm_grad(ctx, "cfrt_rmsnorm_grad_rows", dx, dy, x, gamma, eps, 1,
	                 rows);
}

int cfrt_softmax_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *y)
{
	double t0 = cfrti_begin(ctx, "cfrt_softmax_grad");
	int rc = cfrti_check_rows_grad(ctx, dx, dy, y, "y", NULL, 0.0);
	if (rc != CFRT_OK)
		return rc;
	int ax = dx->nd - 1;
	int64_t n = dx->dim[ax], lines = cfrti_line_count(dx, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dx, dx, ax, l), g = lane_of(dy, dx, ax, l);
		lane p = lane_of(y, dx, ax, l);
		double s = 0.0;
		for (int64_t i = 0; i < n; i++)
			s += lane_get(g, i) * lane_get(p, i);
		for (int64_t i = 0; i < n; i++)
			lane_set(d, i, lane_get(p, i) * (lane_get(g, i) - s));
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dx, NULL, NULL);
}
