/* ew.c: copy, deterministic fill, elementwise ops, the sequence scan and
 * the backward ops of the scan and of broadcasting (the sum over leading
 * dims). requires: views checked by cfrti_check_*; ensures: each op walks
 * the lines of dst along its last dim (the scans: along their scanned dim)
 * and tests transfers between lines in the panel progress mode. */
#include <math.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "backend.h"

static void copy_lines(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *src)
{
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	int64_t es = (int64_t)cfrt_dtype_size(dst->t);
	int flat = dst->stride[ax] == 1 && src->stride[ax] == 1;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		char *d = cfrti_line_at(dst, dst, ax, l);
		const char *s = cfrti_line_at(src, dst, ax, l);
		if (flat)
			memmove(d, s, (size_t)(n * es));
		for (int64_t i = 0; !flat && i < n; i++)
			memcpy(d + i * dst->stride[ax] * es,
			       s + i * src->stride[ax] * es, (size_t)es);
		tick(ctx, &done, n);
	}
}

int cfrt_copy(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	double t0 = cfrti_begin(ctx, "cfrt_copy");
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc != CFRT_OK)
		return rc;
	copy_lines(ctx, dst, src);
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

/* Row-major index in the global tensor of the first element of line `line`
 * (along the last dim) of the window dst at offs. */
static uint64_t global_index(const cfrt_view *dst, const int64_t *gdims,
                             const int64_t *offs, int64_t line)
{
	uint64_t g = (uint64_t)offs[dst->nd - 1], stride = 1;
	for (int d = dst->nd - 2; d >= 0; d--) {
		stride *= (uint64_t)gdims[d + 1];
		g += (uint64_t)(offs[d] + line % dst->dim[d]) * stride;
		line /= dst->dim[d];
	}
	return g;
}

int cfrt_fill_global(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed,
                     const int64_t *global_dims, const int64_t *offsets)
{
	double t0 = cfrti_begin(ctx, "cfrt_fill_global");
	int rc = cfrti_check_fill(ctx, dst, global_dims, offsets);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	for (int64_t l = 0; l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l);
		uint64_t g = global_index(dst, global_dims, offsets, l);
		for (int64_t i = 0; i < n; i++)
			lane_set(d, i, cfrt_uniform(seed, g + (uint64_t)i, dst->t));
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

typedef double (*unary_fn)(double x, double arg);

/* s = 0 is a zero fill: the generated code zeroes accumulators so, and
 * their memory (a workspace from the application's allocator) may hold
 * NaN or Inf, which 0 * x would keep. */
static double f_scale(double x, double s)
{
	return s == 0 ? 0 : s * x;
}

static double f_gelu(double x, double unused)
{
	(void)unused;
	return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double f_silu(double x, double unused)
{
	(void)unused;
	return x / (1.0 + exp(-x));
}

static double f_relu(double x, double unused)
{
	(void)unused;
	return x > 0.0 ? x : 0.0;
}

static double f_sigmoid(double x, double unused)
{
	(void)unused;
	return 1.0 / (1.0 + exp(-x));
}

static double f_exp(double x, double unused)
{
	(void)unused;
	return exp(x);
}

/* x held to [lo, hi], a NaN kept: on x86 by maxss and minss, which
 * return their second operand when one is NaN, without a branch on the
 * values (GCC compiles the ?: form to compare-and-jump, mispredicted on
 * values of both signs past the bounds). */
static inline float held(float x, float lo, float hi)
{
#if defined(__SSE__)
	return _mm_cvtss_f32(_mm_min_ss(_mm_set_ss(hi), _mm_max_ss(_mm_set_ss(lo), _mm_set_ss(x))));
#else
	return x < lo ? lo : x > hi ? hi : x;
#endif
}

/* expf of an argument held to [-80, 80]: the activations below need
 * exp(+-80) at most to be exact in float (x / (1 + e^80) is x times
 * 1.8e-35), and expf outside takes its slow overflow and underflow
 * paths, which the pre-activations of a layer reach often. Held with
 * branches, GELU on one core took 3.0 ns an element on values in
 * [-8, 8) and 10.9 on values in [-200, 200); held without, 3.4 on both
 * (in make bench's 4-rank mlp a GELU call went from 12.0-13.8 ms to
 * 7.8). */
static inline float exp_held(float x)
{
	return expf(held(x, -80.0f, 80.0f));
}

/* max(x, 0), a NaN giving 0 as x > 0 ? x : 0 does (maxss returns its
 * second operand then), without a branch on x's sign: on values of both
 * signs, as a layer's pre-activations have, the branch was mispredicted
 * and relu took 4.4 ns an element on one core of the 2-core machine,
 * longer than GELU's 3.6. */
static inline float relu_f32(float x)
{
#if defined(__SSE__)
	return _mm_cvtss_f32(_mm_max_ss(_mm_set_ss(x), _mm_setzero_ps()));
#else
	return x > 0.0f ? x : 0.0f;
#endif
}

/* 1 where y > 0, else 0 (a NaN too), without a branch, as relu_f32 */
static inline float step_f32(float y)
{
#if defined(__SSE__)
	__m128 gt = _mm_cmpgt_ss(_mm_set_ss(y), _mm_setzero_ps());
	return _mm_cvtss_f32(_mm_and_ps(gt, _mm_set_ss(1.0f)));
#else
	return y > 0.0f ? 1.0f : 0.0f;
#endif
}

/* GELU (tanh form) in float, tanh(u) = 1 - 2 / (exp(2u) + 1) folded in:
 * 0.5 x (1 + tanh u) = x - x / (exp(2u) + 1). */
static inline float gelu_f32(float x)
{
	float u = 0.7978845608f * (x + 0.044715f * x * x * x);
	return x - x / (exp_held(2.0f * u) + 1.0f);
}

static inline float d_gelu_f32(float x)
{
	const float c = 0.7978845608f, k = 0.044715f;
	float t = 1.0f - 2.0f / (exp_held(2.0f * c * (x + k * x * x * x)) + 1.0f);
	return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * k * x * x);
}

static inline float sigmoid_f32(float x)
{
	return 1.0f / (1.0f + exp_held(-x));
}

static inline float d_silu_f32(float x)
{
	float s = sigmoid_f32(x);
	return s * (1.0f + x * (1.0f - s));
}

/* f on a line of f32 elements of stride 1, in float math and without the
 * per-element type tests of lanes; 0 when f has no such loop. On the
 * GPU machines' Xeons, 4 ranks, the f32 MLP's GELU took 37.7 ms of its
 * 70.7 ms forward with tanh in double through f and lanes, 10.9 ms in
 * float. */
static int unary_f32(float *d, const float *x, int64_t n, unary_fn f, double arg)
{
	float a = (float)arg;

	if (f == f_gelu)
		for (int64_t i = 0; i < n; i++)
			d[i] = gelu_f32(x[i]);
	else if (f == f_silu)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] / (1.0f + exp_held(-x[i]));
	else if (f == f_sigmoid)
		for (int64_t i = 0; i < n; i++)
			d[i] = sigmoid_f32(x[i]);
	else if (f == f_exp)
		for (int64_t i = 0; i < n; i++)
			d[i] = expf(x[i]);
	else if (f == f_relu)
		for (int64_t i = 0; i < n; i++)
			d[i] = relu_f32(x[i]);
	else if (f == f_scale)
		for (int64_t i = 0; i < n; i++)
			d[i] = a == 0 ? 0.0f : a * x[i];
	else
		return 0;
	return 1;
}

static int is_f32_run(lane l)
{
	return l.t == CFRT_F32 && l.s == 1;
}

static int unary(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                 const cfrt_view *src, unary_fn f, double arg)
{
	double t0 = cfrti_begin(ctx, api);
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l), s = lane_of(src, dst, ax, l);
		if (!is_f32_run(d) || !is_f32_run(s) ||
		    !unary_f32((float *)(void *)d.p, (const float *)(void *)s.p, n, f, arg))
			for (int64_t i = 0; i < n; i++)
				lane_set(d, i, f(lane_get(s, i), arg));
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

/* The derivatives of the activations, for their backward ops. */
static double d_gelu(double x, double unused)
{
	const double c = 0.7978845608028654, k = 0.044715;
	double t = tanh(c * (x + k * x * x * x));
	(void)unused;
	return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x);
}

static double d_silu(double x, double unused)
{
	double s = 1.0 / (1.0 + exp(-x));
	(void)unused;
	return s * (1.0 + x * (1.0 - s));
}

static double d_relu(double x, double unused)
{
	(void)unused;
	return x > 0.0 ? 1.0 : 0.0;
}

/* of y = sigmoid(x), from y */
static double d_sigmoid(double y, double unused)
{
	(void)unused;
	return y * (1.0 - y);
}

/* The binary ops without f: x + y, x * y, x - y, y - x (B_NAME of the
 * BINARY rows of ew.def; -Wswitch names one bin_op lacks). */
enum binop { B_ADD, B_MUL, B_SUB, B_RSUB };

static double bin_op(enum binop op, double x, double y)
{
	switch (op) {
	case B_ADD: return x + y;
	case B_MUL: return x * y;
	case B_SUB: return x - y;
	case B_RSUB: return y - x;
	}
	return NAN; /* not reached: every binop has its case */
}

/* d = x * f(y), or without f x op y (B_ADD, ...), on lines of f32
 * elements of stride 1, in float math, as unary_f32; 0 when f has no
 * such loop. Float add and mul round as the lanes' double math does
 * (double's 53 bits hold the exact sum or product of two floats, or
 * round it harmlessly: 53 >= 2 * 24 + 2), at five times the speed (an
 * f32 add on 2 ranks of the 2-core machine: 4.1-4.7 GB/s through lanes,
 * 22-25 GB/s here). */
static int binary_f32(float *d, const float *x, const float *y, int64_t n, unary_fn f,
                      enum binop op)
{
	if (!f && op == B_MUL)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] * y[i];
	else if (!f && op == B_ADD)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] + y[i];
	else if (!f && op == B_SUB)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] - y[i];
	else if (!f && op == B_RSUB)
		for (int64_t i = 0; i < n; i++)
			d[i] = y[i] - x[i];
	else if (f == d_gelu)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] * d_gelu_f32(y[i]);
	else if (f == d_relu) /* x times 1 or 0, exact in float as in double */
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] * step_f32(y[i]);
	else if (f == d_silu)
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] * d_silu_f32(y[i]);
	else if (f == d_sigmoid) /* y: the forward's sigmoid */
		for (int64_t i = 0; i < n; i++)
			d[i] = x[i] * (y[i] * (1.0f - y[i]));
	else
		return 0;
	return 1;
}

/* dst = a op b (f NULL: B_ADD, B_MUL, B_SUB, B_RSUB) or a * f(b) (op
 * B_MUL: the backward of activation f), b broadcast to dst. */
static int binary_f(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                    const cfrt_view *a, const cfrt_view *b, enum binop op,
                    unary_fn f)
{
	double t0 = cfrti_begin(ctx, api);
	cfrt_view bb;
	int rc = cfrti_check_binary(ctx, dst, a, b, &bb);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l), x = lane_of(a, dst, ax, l);
		lane y = lane_of(&bb, dst, ax, l);
		if (!is_f32_run(d) || !is_f32_run(x) || !is_f32_run(y) ||
		    !binary_f32((float *)(void *)d.p, (const float *)(void *)x.p,
		                (const float *)(void *)y.p, n, f, op))
			for (int64_t i = 0; i < n; i++) {
				double u = lane_get(x, i), v = lane_get(y, i);
				if (f)
					v = f(v, 0.0);
				lane_set(d, i, bin_op(op, u, v));
			}
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

static int binary(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                  const cfrt_view *a, const cfrt_view *b, enum binop op)
{
	return binary_f(ctx, api, dst, a, b, op, NULL);
}

/* The GATE rows of ew.def (f: silu, df its derivative): dst = f(x) * y
 * (G_FWD, x = a, y = b), x * f(y) (G_DB, x = dy, y = a), x * z * df(y)
 * (G_DA, x = dy, y = a, z = b): one pass each, computed in double and
 * rounded once. */
enum gate { G_FWD, G_DB, G_DA };

static double gate_op(enum gate g, unary_fn f, unary_fn df, double x, double y,
                      double z)
{
	switch (g) {
	case G_FWD: return f(x, 0.0) * y;
	case G_DB: return x * f(y, 0.0);
	case G_DA: return x * z * df(y, 0.0);
	}
	return NAN; /* not reached: every gate has its case */
}

/* The same on lines of f32 elements of stride 1 in float math, as
 * unary_f32 and binary_f32: silu rounded to float, then the product,
 * each as the unfused silu, mul and silu_grad calls round them (the
 * fused op gives their very floats); 0 when f has no such loop. */
static int gate_f32(float *d, const float *x, const float *y, const float *z,
                    int64_t n, unary_fn f, enum gate g)
{
	if (f != f_silu)
		return 0;
	if (g == G_FWD)
		for (int64_t i = 0; i < n; i++) {
			float s = x[i] / (1.0f + exp_held(-x[i]));
			d[i] = s * y[i];
		}
	else if (g == G_DB)
		for (int64_t i = 0; i < n; i++) {
			float s = y[i] / (1.0f + exp_held(-y[i]));
			d[i] = x[i] * s;
		}
	else
		for (int64_t i = 0; i < n; i++) {
			float t = x[i] * z[i];
			d[i] = t * d_silu_f32(y[i]);
		}
	return 1;
}

/* dst = gate g of x, y and z (NULL but for G_DA), views of one shape;
 * xn, yn, zn name them in messages. */
static int gate(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                const cfrt_view *x, const char *xn, const cfrt_view *y,
                const char *yn, const cfrt_view *z, const char *zn,
                unary_fn f, unary_fn df, enum gate g)
{
	double t0 = cfrti_begin(ctx, api);
	int rc = cfrti_check_gate(ctx, dst, x, xn, y, yn, z, zn);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l), lx = lane_of(x, dst, ax, l);
		lane ly = lane_of(y, dst, ax, l), lz = z ? lane_of(z, dst, ax, l) : ly;
		if (!is_f32_run(d) || !is_f32_run(lx) || !is_f32_run(ly) || !is_f32_run(lz) ||
		    !gate_f32((float *)(void *)d.p, (const float *)(void *)lx.p,
		              (const float *)(void *)ly.p, (const float *)(void *)lz.p, n, f, g))
			for (int64_t i = 0; i < n; i++)
				lane_set(d, i, gate_op(g, f, df, lane_get(lx, i), lane_get(ly, i),
				                       lane_get(lz, i)));
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

int cfrt_rope(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double base, int64_t pos0, int inverse)
{
	double t0 = cfrti_begin(ctx, "cfrt_rope");
	int rc = cfrti_check_rope(ctx, dst, src, dim, base, pos0);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1;
	int64_t n = dst->dim[ax], half = n / 2, rows = dst->dim[dim], inner = 1;
	int64_t lines = cfrti_line_count(dst, ax), done = 0;
	double sign = inverse ? -1.0 : 1.0;
	for (int k = dim + 1; k < ax; k++) /* lines per step along dim */
		inner *= dst->dim[k];
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, ax, l), s = lane_of(src, dst, ax, l);
		double p = (double)(pos0 + l / inner % rows);
		for (int64_t j = 0; j < half; j++) {
			double a = p * pow(base, -2.0 * (double)j / (double)n);
			double c = cos(a), sn = sign * sin(a);
			double x1 = lane_get(s, j), x2 = lane_get(s, j + half);
			lane_set(d, j, x1 * c - x2 * sn);
			lane_set(d, j + half, x2 * c + x1 * sn);
		}
		tick(ctx, &done, n);
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

/* h_t = decay * h_{t-1} + src_t along dim into dst: forward (rev = 0, the
 * scan) or from the last element back (rev = 1, its backward). Each
 * element is read before it is written and never again: dst may be src. */
static void scan_lines(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *src, int dim, double decay, int rev)
{
	int64_t n = dst->dim[dim], lines = cfrti_line_count(dst, dim), done = 0;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		lane d = lane_of(dst, dst, dim, l), s = lane_of(src, dst, dim, l);
		double h = 0.0;
		for (int64_t k = 0; k < n; k++) {
			int64_t i = rev ? n - 1 - k : k;
			h = decay * h + lane_get(s, i);
			lane_set(d, i, h);
		}
		tick(ctx, &done, n);
	}
}

int cfrt_scan(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double decay)
{
	double t0 = cfrti_begin(ctx, "cfrt_scan");
	int rc = cfrti_check_scan(ctx, dst, src, dim);
	if (rc != CFRT_OK)
		return rc;
	scan_lines(ctx, dst, src, dim, decay, 0);
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

int cfrt_scan_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                   int dim, double decay)
{
	double t0 = cfrti_begin(ctx, "cfrt_scan_grad");
	int rc = cfrti_check_scan_grad(ctx, dx, dy, dim);
	if (rc != CFRT_OK)
		return rc;
	scan_lines(ctx, dx, dy, dim, decay, 1);
	return cfrti_end_out(ctx, t0, dx, NULL, NULL);
}

/* Product of src's dims before its last nd (the rows that cfrt_sum_leading
 * adds up). */
static int64_t lead_count(const cfrt_view *src, int nd)
{
	int64_t n = 1;
	for (int d = 0; d < src->nd - nd; d++)
		n *= src->dim[d];
	return n;
}

/* Line l of dst (along its last dim) is the sum of lines k * lines + l of
 * src, k < lead: src's lines are numbered with its leading dims outermost.
 * A line is summed in double in the workspace, then written once. */
int cfrt_sum_leading(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	double t0 = cfrti_begin(ctx, "cfrt_sum_leading");
	int rc = cfrti_check_sum_leading(ctx, dst, src);
	if (rc != CFRT_OK)
		return rc;
	int ax = dst->nd - 1, sx = src->nd - 1;
	int64_t n = dst->dim[ax], lines = cfrti_line_count(dst, ax), done = 0;
	int64_t lead = lead_count(src, dst->nd);
	if (n > 0 && lines > 0)
		rc = cfrti_ws_reserve(ctx, (size_t)n * sizeof(double));
	if (rc != CFRT_OK)
		return rc;
	double *acc = ctx->ws;
	for (int64_t l = 0; n > 0 && l < lines; l++) {
		memset(acc, 0, (size_t)n * sizeof(double));
		for (int64_t k = 0; k < lead; k++) {
			lane s = lane_of(src, src, sx, k * lines + l);
			for (int64_t i = 0; i < n; i++)
				acc[i] += lane_get(s, i);
		}
		lane d = lane_of(dst, dst, ax, l);
		for (int64_t i = 0; i < n; i++)
			lane_set(d, i, acc[i]);
		tick(ctx, &done, n * (lead > 0 ? lead : 1));
	}
	return cfrti_end_out(ctx, t0, dst, NULL, NULL);
}

/* ---- the elementwise ops of runtime/common/ew.def ---- */

#define EW_SCALAR(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *src, double s) \
	{ \
		return unary(ctx, "cfrt_" #name, dst, src, f_##fn, s); \
	}
#define EW_UNARY(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *src) \
	{ \
		return unary(ctx, "cfrt_" #name, dst, src, f_##fn, 0.0); \
	}
#define EW_BINARY(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *a, const cfrt_view *b) \
	{ \
		return binary(ctx, "cfrt_" #name, dst, a, b, B_##NAME); \
	}
#define EW_GRAD(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *dy, const cfrt_view *x) \
	{ \
		return binary_f(ctx, "cfrt_" #name, dst, dy, x, B_MUL, d_##fn); \
	}
#define EW_GATE(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *a, const cfrt_view *b) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, a, "a", b, "b", NULL, NULL, \
		            f_##fn, d_##fn, G_FWD); \
	}
#define EW_GATE_DB(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *dy, const cfrt_view *a) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, dy, "dy", a, "a", NULL, NULL, \
		            f_##fn, d_##fn, G_DB); \
	}
#define EW_GATE_DA(name, NAME, fn) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *dy, const cfrt_view *a, \
	                const cfrt_view *b) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, dy, "dy", a, "a", b, "b", \
		            f_##fn, d_##fn, G_DA); \
	}
#define EW(name, NAME, kind, fn) EW_##kind(name, NAME, fn)
#include "common/ew.def"
#undef EW
