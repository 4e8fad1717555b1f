/* Attention against a naive reference, causal or not, and query-split
 * attention (slices of the queries with their q_offset) against whole
 * attention, on head-split views of [B,S,H*Dh] tensors as generated code
 * uses them. */
#include <math.h>
#include <stdlib.h>

#include "unit.h"

enum { B = 2, H = 3, S = 6, Dh = 4, N = B * S * H * Dh };

/* Element (b,h,s,d) of a [B,S,H*Dh] tensor. */
static int64_t ix(int64_t b, int64_t h, int64_t s, int64_t d)
{
	return (b * S + s) * H * Dh + h * Dh + d;
}

static void naive_attention(const double *q, const double *k, const double *v,
                            int causal, double *out)
{
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < S; i++) {
				double p[S], max = -INFINITY, sum = 0;
				int n = causal ? i + 1 : S;
				for (int j = 0; j < n; j++) {
					p[j] = 0;
					for (int d = 0; d < Dh; d++)
						p[j] += q[ix(b, h, i, d)] * k[ix(b, h, j, d)];
					p[j] /= sqrt((double)Dh);
					max = fmax(max, p[j]);
				}
				for (int j = 0; j < n; j++)
					sum += p[j] = exp(p[j] - max);
				for (int d = 0; d < Dh; d++) {
					double o = 0;
					for (int j = 0; j < n; j++)
						o += p[j] / sum * v[ix(b, h, j, d)];
					out[ix(b, h, i, d)] = o;
				}
			}
}

/* [B,H,S,Dh] view of a [B,S,H*Dh] buffer. */
static cfrt_view heads(void *p, cfrt_dtype t)
{
	cfrt_view v = cfrt_view_contig(p, t, 3, (int64_t[]){B, S, H * Dh});
	return cfrt_view_permute(cfrt_view_split(v, 2, H, Dh), (int[]){0, 2, 1, 3});
}

/* Runs attention over query slices of `rows` rows (rows = S: whole). */
static void run_slices(cfrt_dtype t, void *dq, void *dk, void *dv, void *dout,
                       int causal, int64_t rows)
{
	cfrt_view q = heads(dq, t), k = heads(dk, t), v = heads(dv, t);
	cfrt_view out = heads(dout, t);
	for (int64_t s0 = 0; s0 < S; s0 += rows) {
		cfrt_view qs = cfrt_view_slice(q, 2, s0, rows);
		cfrt_view os = cfrt_view_slice(out, 2, s0, rows);
		CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &os, &qs, &k, &v, causal, s0),
		                CFRT_OK);
	}
}

static void attention_case(cfrt_dtype t, int causal)
{
	double q[N], k[N], v[N], want[N], whole[N], split[N];
	ut_uniform(q, N, 21, t);
	ut_uniform(k, N, 22, t);
	ut_uniform(v, N, 23, t);
	void *dq = ut_alloc(N, t), *dk = ut_alloc(N, t), *dv = ut_alloc(N, t);
	void *dout = ut_alloc(N, t);
	ut_put(dq, q, N, t);
	ut_put(dk, k, N, t);
	ut_put(dv, v, N, t);
	naive_attention(q, k, v, causal, want);
	run_slices(t, dq, dk, dv, dout, causal, S);
	ut_get(whole, dout, N, t);
	CU_ASSERT(ut_maxrel(whole, want, N) <= ut_tol(t));
	for (int64_t rows = 1; rows < S; rows++) {
		if (S % rows)
			continue;
		CU_ASSERT_EQUAL(cfrt_memset_zero(ut_ctx, dout, N * cfrt_dtype_size(t)),
		                CFRT_OK);
		run_slices(t, dq, dk, dv, dout, causal, rows);
		ut_get(split, dout, N, t);
		CU_ASSERT(ut_maxrel(split, whole, N) <= ut_tol(t) / 10);
	}
	cfrt_free(ut_ctx, dq);
	cfrt_free(ut_ctx, dk);
	cfrt_free(ut_ctx, dv);
	cfrt_free(ut_ctx, dout);
}

static void test_attention(void)
{
	for (int causal = 0; causal < 2; causal++) {
		attention_case(CFRT_F32, causal);
		attention_case(CFRT_F64, causal);
	}
}

static void test_attention_errors(void)
{
	float x[N];
	cfrt_view q = heads(x, CFRT_F32);
	cfrt_view k = cfrt_view_slice(q, 3, 0, Dh / 2);
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &q, &q, &k, &k, 0, 0), CFRT_EINVAL);
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &q, &q, &q, &q, 1, -1), CFRT_EINVAL);
	cfrt_view t = cfrt_view_permute(q, (int[]){0, 1, 3, 2});
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &t, &t, &t, &t, 0, 0), CFRT_EINVAL);
	/* out's last dim strided: the GEMM writing rows of out would miss it */
	float y[2 * N];
	cfrt_view o = q;
	o.p = y;
	for (int d = 0; d < 4; d++)
		o.stride[d] *= 2;
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &o, &q, &q, &q, 0, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention: out "
	                       "needs a unit stride in its last dim");
}

void ut_register_attention(void)
{
	CU_pSuite s = CU_add_suite("attention", NULL, NULL);
	CU_add_test(s, "whole and query-split, causal or not, f32/f64",
	            test_attention);
	CU_add_test(s, "shape and offset errors", test_attention_errors);
}
