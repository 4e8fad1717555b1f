/* Compute ops against naive host loops in double: GEMM and matmul, copy on
 * strided views, elementwise ops, norms, softmax, scan, fill; and the
 * errors of bad arguments. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h" /* cfrti_matmul_fold, white-box below */
#include "unit.h"

static const cfrt_dtype types[] = {CFRT_F32, CFRT_F64};

/* ---- GEMM ---- */

static double at(const double *x, int64_t ld, int tr, int64_t i, int64_t j)
{
	return tr ? x[j * ld + i] : x[i * ld + j];
}

/* Reference of one batch entry; beta = 0 overwrites (NaN in c ignored). */
static void naive_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       double alpha, const double *a, int64_t lda,
                       const double *b, int64_t ldb, double beta, double *c,
                       int64_t ldc)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			double s = 0.0;
			for (int64_t p = 0; p < k; p++)
				s += at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
			double old = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
			c[i * ldc + j] = alpha * s + old;
		}
}

/* One configuration: batch 3, padded leading dims, B shared by the batch
 * (stride 0) when beta = 1, C starting as NaN when beta = 0. */
static void gemm_case(cfrt_dtype t, int ta, int tb, double beta)
{
	const int64_t m = 5, n = 6, k = 7, batch = 3;
	int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
	int64_t sa = (ta ? k : m) * lda + 4, sb = beta == 0.0 ? (tb ? n : k) * ldb : 0;
	int64_t sc = m * ldc + 1;
	int64_t na = sa * batch, nb = (tb ? n : k) * ldb * batch, nc = sc * batch;
	double *a = malloc(sizeof(double) * (size_t)(na + nb + 2 * nc));
	double *b = a + na, *c = b + nb, *want = c + nc;
	ut_uniform(a, na, 1, t);
	ut_uniform(b, nb, 2, t);
	ut_uniform(c, nc, 3, t);
	for (int64_t i = 0; beta == 0.0 && i < nc; i++)
		c[i] = NAN;
	memcpy(want, c, sizeof(double) * (size_t)nc);
	void *da = ut_alloc(na, t), *db = ut_alloc(nb, t), *dc = ut_alloc(nc, t);
	ut_put(da, a, na, t);
	ut_put(db, b, nb, t);
	ut_put(dc, c, nc, t);
	int rc = cfrt_gemm(ut_ctx, t, ta ? CFRT_TRANS : CFRT_NOTRANS,
	                   tb ? CFRT_TRANS : CFRT_NOTRANS, m, n, k, 0.75, da, lda,
	                   sa, db, ldb, sb, beta, dc, ldc, sc, batch);
	CU_ASSERT_EQUAL(rc, CFRT_OK);
	for (int64_t i = 0; i < batch; i++)
		naive_gemm(ta, tb, m, n, k, 0.75, a + i * sa, lda, b + i * sb, ldb,
		           beta, want + i * sc, ldc);
	ut_get(c, dc, nc, t);
	for (int64_t i = 0; i < nc; i++) /* padding keeps its NaN */
		if (isnan(want[i]) && isnan(c[i]))
			c[i] = want[i] = 0.0;
	CU_ASSERT(ut_maxrel(c, want, nc) <= ut_tol(t));
	cfrt_free(ut_ctx, da);
	cfrt_free(ut_ctx, db);
	cfrt_free(ut_ctx, dc);
	free(a);
}

static void test_gemm(void)
{
	for (int ti = 0; ti < 2; ti++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++) {
				gemm_case(types[ti], ta, tb, 0.0);
				gemm_case(types[ti], ta, tb, 1.0);
			}
}

/* c[2,3,4,6] = a (rows 1..5 of a [2,3,8,5] tensor) @ b^T, with b a
 * permuted view of a [6,5] buffer broadcast over the batch dims; beta 1. */
static void test_matmul_views(void)
{
	for (int ti = 0; ti < 2; ti++) {
		cfrt_dtype t = types[ti];
		double a[2 * 3 * 8 * 5], b[6 * 5], c[2 * 3 * 4 * 6], want[2 * 3 * 4 * 6];
		ut_uniform(a, 240, 4, t);
		ut_uniform(b, 30, 5, t);
		ut_uniform(c, 144, 6, t);
		memcpy(want, c, sizeof c);
		void *da = ut_alloc(240, t), *db = ut_alloc(30, t), *dc = ut_alloc(144, t);
		ut_put(da, a, 240, t);
		ut_put(db, b, 30, t);
		ut_put(dc, c, 144, t);
		cfrt_view va = cfrt_view_contig(da, t, 4, (int64_t[]){2, 3, 8, 5});
		cfrt_view vb = cfrt_view_contig(db, t, 2, (int64_t[]){6, 5});
		cfrt_view vc = cfrt_view_contig(dc, t, 4, (int64_t[]){2, 3, 4, 6});
		va = cfrt_view_slice(va, 2, 1, 4);
		vb = cfrt_view_permute(vb, (int[]){1, 0});
		CU_ASSERT_EQUAL(cfrt_matmul(ut_ctx, &vc, &va, &vb, 2.0, 1.0), CFRT_OK);
		for (int bh = 0; bh < 6; bh++)
			naive_gemm(0, 1, 4, 6, 5, 2.0, a + bh * 40 + 5, 5, b, 5, 1.0,
			           want + bh * 24, 6);
		ut_get(c, dc, 144, t);
		CU_ASSERT(ut_maxrel(c, want, 144) <= ut_tol(t));
		cfrt_free(ut_ctx, da);
		cfrt_free(ut_ctx, db);
		cfrt_free(ut_ctx, dc);
	}
}

/* cfrt_matmul_add: c[2,3,4,6] = a (rows 1..5 of a [2,3,8,5] tensor) @ b^T
 * + d, d a tensor apart (c starting as NaN: written, not read), then d
 * being c (the sum in place); a d that overlaps c without being c is
 * refused. */
static void test_matmul_add(void)
{
	for (int ti = 0; ti < 2; ti++) {
		cfrt_dtype t = types[ti];
		double a[240], b[30], c[144], d[144], want[144];
		ut_uniform(a, 240, 7, t);
		ut_uniform(b, 30, 8, t);
		ut_uniform(d, 144, 9, t);
		for (int i = 0; i < 144; i++)
			c[i] = NAN;
		void *da = ut_alloc(240, t), *db = ut_alloc(30, t), *dc = ut_alloc(144, t);
		void *dd = ut_alloc(144, t);
		ut_put(da, a, 240, t);
		ut_put(db, b, 30, t);
		ut_put(dc, c, 144, t);
		ut_put(dd, d, 144, t);
		cfrt_view va = cfrt_view_contig(da, t, 4, (int64_t[]){2, 3, 8, 5});
		cfrt_view vb = cfrt_view_contig(db, t, 2, (int64_t[]){6, 5});
		cfrt_view vc = cfrt_view_contig(dc, t, 4, (int64_t[]){2, 3, 4, 6});
		cfrt_view vd = cfrt_view_contig(dd, t, 4, (int64_t[]){2, 3, 4, 6});
		va = cfrt_view_slice(va, 2, 1, 4);
		vb = cfrt_view_permute(vb, (int[]){1, 0});
		CU_ASSERT_EQUAL(cfrt_matmul_add(ut_ctx, &vc, &va, &vb, &vd, 2.0), CFRT_OK);
		memcpy(want, d, sizeof d);
		for (int bh = 0; bh < 6; bh++)
			naive_gemm(0, 1, 4, 6, 5, 2.0, a + bh * 40 + 5, 5, b, 5, 1.0,
			           want + bh * 24, 6);
		ut_get(c, dc, 144, t);
		CU_ASSERT(ut_maxrel(c, want, 144) <= ut_tol(t));
		/* in place: d is c, and holds the first sum */
		CU_ASSERT_EQUAL(cfrt_matmul_add(ut_ctx, &vc, &va, &vb, &vc, 2.0), CFRT_OK);
		for (int bh = 0; bh < 6; bh++)
			naive_gemm(0, 1, 4, 6, 5, 2.0, a + bh * 40 + 5, 5, b, 5, 1.0,
			           want + bh * 24, 6);
		ut_get(c, dc, 144, t);
		CU_ASSERT(ut_maxrel(c, want, 144) <= ut_tol(t));
		/* d one row into c: overlapping, not c */
		cfrt_view vo = cfrt_view_contig((char *)dc + 6 * cfrt_dtype_size(t), t, 4,
		                                (int64_t[]){2, 3, 4, 6});
		vo.dim[0] = vc.dim[0] = va.dim[0] = 1;
		CU_ASSERT_EQUAL(cfrt_matmul_add(ut_ctx, &vc, &va, &vb, &vo, 2.0), CFRT_EINVAL);
		cfrt_free(ut_ctx, da);
		cfrt_free(ut_ctx, db);
		cfrt_free(ut_ctx, dc);
		cfrt_free(ut_ctx, dd);
	}
}

/* A [S, B, F] tensor @ a [F, D] weight, as generated code calls it on a
 * sequence-first layout, in the views that fold into one GEMM of S * B
 * rows and in those that do not (against the naive loops either way):
 * fold 1: the whole of a [4, 3, 9] buffer (its first 7 columns, K cut);
 * c rows 1..2 of dim 0; a row of each batch entry (B = 1 after a cut of
 * dim 1 of a [4, 3, 9] buffer: rows 9 apart); fold 0: rows 0..1 of dim 1
 * of 3 (batch entries 27 apart, 2 rows a run); a batched b; a transposed
 * a (a view of the buffer as [7, 12]). White-box: cfrti_matmul_fold's
 * g.m and the dims left. */
static void matmul_fold_case(cfrt_dtype t, int cut, int want_fold)
{
	enum { S = 4, B = 3, F = 9, K = 7, D = 5 };
	double a[S * B * F], b[S * K * D], c[S * B * D], want[S * B * D];
	ut_uniform(a, S * B * F, 11, t);
	ut_uniform(b, S * K * D, 12, t);
	ut_uniform(c, S * B * D, 13, t);
	memcpy(want, c, sizeof c);
	void *da = ut_alloc(S * B * F, t), *db = ut_alloc(S * K * D, t), *dc = ut_alloc(S * B * D, t);
	ut_put(da, a, S * B * F, t);
	ut_put(db, b, S * K * D, t);
	ut_put(dc, c, S * B * D, t);
	cfrt_view va = cfrt_view_slice(cfrt_view_contig(da, t, 3, (int64_t[]){S, B, F}), 2, 0, K);
	cfrt_view vb = cfrt_view_contig(db, t, 2, (int64_t[]){K, D});
	cfrt_view vc = cfrt_view_contig(dc, t, 3, (int64_t[]){S, B, D});
	int64_t s0 = 0, ns = S, b0 = 0, nb = B;
	switch (cut) {
	case 1: s0 = 1, ns = 2; break;             /* dim 0: still whole runs */
	case 2: b0 = 2, nb = 1; break;             /* one row an entry */
	case 3: nb = 2; break;                     /* 2 rows of 3 an entry */
	}
	va = cfrt_view_slice(cfrt_view_slice(va, 0, s0, ns), 1, b0, nb);
	vc = cfrt_view_slice(cfrt_view_slice(vc, 0, s0, ns), 1, b0, nb);
	if (cut == 4) /* b batched: one matrix an entry */
		vb = cfrt_view_contig(db, t, 3, (int64_t[]){S, K, D});
	if (cut == 5) /* a transposed: a[s, b, k] = buffer[k, s * B + b] */
		va = cfrt_view_permute(cfrt_view_split(cfrt_view_contig(da, t, 2,
		                       (int64_t[]){K, S * B}), 1, S, B), (int[]){1, 2, 0});
	gemm_args g = {0};
	cfrt_view ae, be, ce = vc;
	CU_ASSERT_EQUAL(cfrti_matmul_args(ut_ctx, &vc, &va, &vb, 1.5, 1.0, &g, &ae, &be), CFRT_OK);
	cfrti_matmul_fold(&g, &ce, &ae, &be);
	CU_ASSERT_EQUAL(g.m, want_fold ? ns * nb : nb);
	CU_ASSERT_EQUAL(ce.nd, want_fold ? 2 : 3);
	CU_ASSERT_EQUAL(cfrt_matmul(ut_ctx, &vc, &va, &vb, 1.5, 1.0), CFRT_OK);
	for (int64_t i = s0; i < s0 + ns; i++)
		naive_gemm(cut == 5, 0, nb, D, K, 1.5, cut == 5 ? a + i * B : a + (i * B + b0) * F,
		           cut == 5 ? S * B : F, b + (cut == 4 ? i * K * D : 0), D, 1.0,
		           want + (i * B + b0) * D, D);
	ut_get(c, dc, S * B * D, t);
	CU_ASSERT(ut_maxrel(c, want, S * B * D) <= ut_tol(t));
	cfrt_free(ut_ctx, da);
	cfrt_free(ut_ctx, db);
	cfrt_free(ut_ctx, dc);
}

static void test_matmul_fold(void)
{
	for (int ti = 0; ti < 2; ti++) {
		matmul_fold_case(types[ti], 0, 1);
		matmul_fold_case(types[ti], 1, 1);
		matmul_fold_case(types[ti], 2, 1);
		matmul_fold_case(types[ti], 3, 0);
		matmul_fold_case(types[ti], 4, 0);
		matmul_fold_case(types[ti], 5, 0);
	}
}

/* ---- views: copy, head split and merge ---- */

static void test_copy_heads(void)
{
	const int64_t B = 2, S = 3, H = 4, Dh = 2, n = B * S * H * Dh;
	double x[48], y[48], z[48];
	ut_uniform(x, n, 7, CFRT_F64);
	void *dx = ut_alloc(n, CFRT_F64), *dy = ut_alloc(n, CFRT_F64);
	void *dz = ut_alloc(n, CFRT_F64);
	ut_put(dx, x, n, CFRT_F64);
	cfrt_view vx = cfrt_view_contig(dx, CFRT_F64, 3, (int64_t[]){B, S, H * Dh});
	cfrt_view heads = cfrt_view_permute(cfrt_view_split(vx, 2, H, Dh),
	                                    (int[]){0, 2, 1, 3});
	cfrt_view vy = cfrt_view_contig(dy, CFRT_F64, 4, (int64_t[]){B, H, S, Dh});
	CU_ASSERT_EQUAL(cfrt_copy(ut_ctx, &vy, &heads), CFRT_OK);
	ut_get(y, dy, n, CFRT_F64);
	int ok = 1;
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t s = 0; s < S; s++)
				for (int64_t d = 0; d < Dh; d++)
					ok &= y[((b * H + h) * S + s) * Dh + d] ==
					      x[(b * S + s) * H * Dh + h * Dh + d];
	CU_ASSERT(ok);
	/* merge back: [B,H,S,Dh] read as [B,S,H,Dh] into [B,S,H*Dh] */
	cfrt_view vz = cfrt_view_contig(dz, CFRT_F64, 3, (int64_t[]){B, S, H * Dh});
	cfrt_view merged = cfrt_view_permute(vy, (int[]){0, 2, 1, 3});
	CU_ASSERT_EQUAL(cfrt_copy(ut_ctx, &(cfrt_view){0}, &merged), CFRT_EINVAL);
	vz = cfrt_view_split(vz, 2, H, Dh);
	CU_ASSERT_EQUAL(cfrt_copy(ut_ctx, &vz, &merged), CFRT_OK);
	ut_get(z, dz, n, CFRT_F64);
	CU_ASSERT(memcmp(z, x, sizeof(double) * (size_t)n) == 0);
	cfrt_free(ut_ctx, dx);
	cfrt_free(ut_ctx, dy);
	cfrt_free(ut_ctx, dz);
}

/* ---- elementwise ops on a strided view: rows 2..5 of dim 1 of [3,6,5] ---- */

enum { EW_N = 3 * 6 * 5, NSPREAD = 20 };

static double gelu(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) * (x + 0.044715 * x * x * x)));
}

/* Element i of the full [3,6,5] tensor is in the slice. */
static int in_slice(int64_t i)
{
	int64_t s = i / 5 % 6;
	return s >= 2 && s < 6;
}

typedef int (*unary_op)(cfrt_ctx *, const cfrt_view *, const cfrt_view *);

/* dst = f(src) on the slice, in place; outside the slice nothing moves. */
static void unary_case(cfrt_dtype t, unary_op op, double (*f)(double))
{
	double x[EW_N], got[EW_N], want[EW_N];
	ut_uniform(x, EW_N, 8, t);
	for (int64_t i = 0; i < EW_N; i++)
		x[i] *= 4.0;
	void *d = ut_alloc(EW_N, t);
	ut_put(d, x, EW_N, t);
	cfrt_view v = cfrt_view_contig(d, t, 3, (int64_t[]){3, 6, 5});
	v = cfrt_view_slice(v, 1, 2, 4);
	CU_ASSERT_EQUAL(op(ut_ctx, &v, &v), CFRT_OK);
	for (int64_t i = 0; i < EW_N; i++)
		want[i] = in_slice(i) ? f(x[i]) : x[i];
	ut_get(got, d, EW_N, t);
	CU_ASSERT(ut_maxrel(got, want, EW_N) <= ut_tol(t));
	cfrt_free(ut_ctx, d);
}

static double silu(double x)
{
	return x / (1.0 + exp(-x));
}

static double relu(double x)
{
	return x > 0 ? x : 0;
}

static double halve(double x)
{
	return -0.5 * x;
}

static int scale_op(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	return cfrt_scale(ctx, dst, src, -0.5);
}

static void test_unary(void)
{
	for (int ti = 0; ti < 2; ti++) {
		unary_case(types[ti], cfrt_gelu, gelu);
		unary_case(types[ti], cfrt_silu, silu);
		unary_case(types[ti], cfrt_relu, relu);
		unary_case(types[ti], scale_op, halve);
	}
}

/* Scaling by 0 zeroes the slice in place even where it held NaN or Inf:
 * generated code zeroes accumulators in uninitialised workspaces so (a
 * NaN left by the allocator's earlier user made d_wd NaN on a GPU). */
static void test_scale_zero(void)
{
	for (int ti = 0; ti < 2; ti++) {
		cfrt_dtype t = types[ti];
		double x[EW_N], got[EW_N];
		for (int64_t i = 0; i < EW_N; i++)
			x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -(double)i;
		void *d = ut_alloc(EW_N, t);
		ut_put(d, x, EW_N, t);
		cfrt_view v = cfrt_view_slice(cfrt_view_contig(d, t, 3, (int64_t[]){3, 6, 5}),
		                              1, 2, 4);
		CU_ASSERT_EQUAL(cfrt_scale(ut_ctx, &v, &v, 0.0), CFRT_OK);
		ut_get(got, d, EW_N, t);
		int bad = 0;
		for (int64_t i = 0; i < EW_N; i++)
			if (in_slice(i) ? got[i] != 0.0 || signbit(got[i])
			                : !(isnan(x[i]) ? isnan(got[i]) : got[i] == x[i]))
				bad++;
		CU_ASSERT_EQUAL(bad, 0);
		cfrt_free(ut_ctx, d);
	}
}

/* dst (contiguous [3,4,5]) = slice op b, b a [5] bias or a same-shape view. */
static void binary_case(cfrt_dtype t, int mul, int bias)
{
	double x[EW_N], y[EW_N], got[60], want[60];
	ut_uniform(x, EW_N, 9, t);
	ut_uniform(y, 60, 10, t);
	void *dx = ut_alloc(EW_N, t), *dy = ut_alloc(60, t), *dd = ut_alloc(60, t);
	ut_put(dx, x, EW_N, t);
	ut_put(dy, y, 60, t);
	cfrt_view a = cfrt_view_slice(cfrt_view_contig(dx, t, 3, (int64_t[]){3, 6, 5}),
	                              1, 2, 4);
	cfrt_view b = bias ? cfrt_view_contig(dy, t, 1, (int64_t[]){5})
	                   : cfrt_view_contig(dy, t, 3, (int64_t[]){3, 4, 5});
	cfrt_view d = cfrt_view_contig(dd, t, 3, (int64_t[]){3, 4, 5});
	int rc = mul ? cfrt_mul(ut_ctx, &d, &a, &b) : cfrt_add(ut_ctx, &d, &a, &b);
	CU_ASSERT_EQUAL(rc, CFRT_OK);
	for (int64_t i = 0; i < 60; i++) {
		double u = x[(i / 20) * 30 + 10 + i % 20], v = y[bias ? i % 5 : i];
		want[i] = mul ? u * v : u + v;
	}
	ut_get(got, dd, 60, t);
	CU_ASSERT(ut_maxrel(got, want, 60) <= ut_tol(t));
	cfrt_free(ut_ctx, dx);
	cfrt_free(ut_ctx, dy);
	cfrt_free(ut_ctx, dd);
}

static void test_binary(void)
{
	for (int ti = 0; ti < 2; ti++)
		for (int mul = 0; mul < 2; mul++)
			for (int bias = 0; bias < 2; bias++)
				binary_case(types[ti], mul, bias);
	float x[4];
	cfrt_view a = cfrt_view_contig(x, CFRT_F32, 2, (int64_t[]){1, 4});
	cfrt_view b = cfrt_view_contig(x, CFRT_F32, 1, (int64_t[]){3});
	CU_ASSERT_EQUAL(cfrt_add(ut_ctx, &a, &a, &b), CFRT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfrt_last_error(ut_ctx), "does not broadcast"));
}

/* ---- rows: layernorm, rmsnorm, softmax over the last dim ---- */

enum { R = 6, D = 8 };

static void ref_rows(int op, const double *x, const double *g, const double *b,
                     double eps, double *y)
{
	for (int r = 0; r < R; r++) {
		const double *xr = x + r * D;
		double mean = 0, var = 0, max = -INFINITY, sum = 0;
		for (int i = 0; i < D; i++) {
			mean += (op == 0 ? xr[i] : 0) / D;
			max = fmax(max, xr[i]);
		}
		for (int i = 0; i < D; i++) {
			var += (xr[i] - mean) * (xr[i] - mean) / D;
			sum += exp(xr[i] - max);
		}
		for (int i = 0; i < D; i++)
			y[r * D + i] = op == 2 ? exp(xr[i] - max) / sum
			               : (xr[i] - mean) / sqrt(var + eps) *
			                 (g ? g[i] : 1) + (b ? b[i] : 0);
	}
}

/* op 0 layernorm, 1 rmsnorm, 2 softmax; affine: with gamma (and beta). */
static void rows_case(cfrt_dtype t, int op, int affine, double shift)
{
	double x[R * D], g[D], b[D], got[R * D], want[R * D];
	ut_uniform(x, R * D, 11, t);
	ut_uniform(g, D, 12, t);
	ut_uniform(b, D, 13, t);
	for (int i = 0; i < R * D; i++)
		x[i] = t == CFRT_F32 ? (float)(x[i] * 3 + shift) : x[i] * 3 + shift;
	void *dx = ut_alloc(R * D, t), *dg = ut_alloc(D, t), *db = ut_alloc(D, t);
	ut_put(dx, x, R * D, t);
	ut_put(dg, g, D, t);
	ut_put(db, b, D, t);
	cfrt_view v = cfrt_view_contig(dx, t, 2, (int64_t[]){R, D});
	cfrt_view vg = cfrt_view_contig(dg, t, 1, (int64_t[]){D});
	cfrt_view vb = cfrt_view_contig(db, t, 1, (int64_t[]){D});
	const cfrt_view *pg = affine ? &vg : NULL, *pb = affine && op == 0 ? &vb : NULL;
	int rc = op == 0 ? cfrt_layernorm(ut_ctx, &v, &v, pg, pb, 1e-5)
	         : op == 1 ? cfrt_rmsnorm(ut_ctx, &v, &v, pg, 1e-5)
	                   : cfrt_softmax(ut_ctx, &v, &v);
	CU_ASSERT_EQUAL(rc, CFRT_OK);
	ref_rows(op, x, affine ? g : NULL, pb ? b : NULL, 1e-5, want);
	ut_get(got, dx, R * D, t);
	CU_ASSERT(ut_maxrel(got, want, R * D) <= 10 * ut_tol(t));
	cfrt_free(ut_ctx, dx);
	cfrt_free(ut_ctx, dg);
	cfrt_free(ut_ctx, db);
}

static void test_rows(void)
{
	for (int ti = 0; ti < 2; ti++)
		for (int op = 0; op < 3; op++) {
			rows_case(types[ti], op, 0, 0.0);
			rows_case(types[ti], op, 1, 0.5);
		}
	rows_case(CFRT_F32, 2, 0, 1000.0); /* softmax stays finite */
}

/* f32 softmax of widely spread scores: below the exponent limit
 * (F32_EXP_LIM, -87.3) and for -inf a weight is exactly 0, above it a
 * normal number even near FLT_MIN; a NaN score makes its row NaN (the
 * selects that replaced branches must not hide it). */
static void test_softmax_spread(void)
{
	static const float x[4][D] = {
		{0, -10, -50, -87, -87.2f, -87.4f, -100, -1e30f},
		{1, 2, NAN, 3, 4, 5, 6, 7},
		{-INFINITY, 0, -INFINITY, 0, -1, -2, -3, -90},
		{5, 5, 5, 5, 5, 5, 5, 5}};
	float y[4][D];
	cfrt_view v = cfrt_view_contig(y, CFRT_F32, 2, (int64_t[]){4, D});
	cfrt_view vx = cfrt_view_contig((void *)x, CFRT_F32, 2, (int64_t[]){4, D});

	CU_ASSERT_EQUAL_FATAL(cfrt_softmax(ut_ctx, &v, &vx), CFRT_OK);
	for (int r = 0; r < 4; r++) {
		double max = -INFINITY, sum = 0;
		for (int i = 0; i < D; i++)
			max = x[r][i] > max ? x[r][i] : max;
		for (int i = 0; i < D; i++)
			sum += x[r][i] - max < -87.3 ? 0 : exp(x[r][i] - max);
		for (int i = 0; i < D; i++) {
			double want = x[r][i] - max < -87.3 ? 0 : exp(x[r][i] - max) / sum;
			int ok = r == 1 ? isnan(y[r][i])
			         : want == 0 ? y[r][i] == 0 && !signbit(y[r][i])
			                     : fabs(y[r][i] - want) <= 1e-6 * want && y[r][i] >= FLT_MIN;
			CU_ASSERT(ok);
		}
	}
}

static double sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

static double gelu_grad(double x)
{
	double c = sqrt(2.0 / acos(-1.0)), k = 0.044715, t = tanh(c * (x + k * x * x * x));
	return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x);
}

/* ---- the fused SwiGLU and its backward ---- */

static double d_silu(double x)
{
	double s = 1.0 / (1.0 + exp(-x));
	return s * (1.0 + x * (1.0 - s));
}

/* swiglu(a, b) = silu(a) * b, swiglu_da(dy, a, b) = dy * b * silu'(a),
 * swiglu_db(dy, a) = dy * silu(a), each against its double reference:
 * slice 1 the rows 2..5 of dim 1 of a [3,6,5] tensor (strided; outside
 * it dst keeps what it held), slice 0 n contiguous elements (odd
 * sizes). */
static void swiglu_case(cfrt_dtype t, int64_t n, int slice)
{
	int64_t m = slice ? EW_N : n;
	double *x = malloc(sizeof(double) * (size_t)(6 * m)), *y = x + m, *g = y + m;
	double *got = g + m, *want = got + m, *keep = want + m;
	ut_uniform(x, m, 31, t);
	ut_uniform(y, m, 32, t);
	ut_uniform(g, m, 33, t);
	for (int64_t i = 0; i < m; i++)
		x[i] *= 6.0; /* silu's curve, both tails */
	void *da = ut_alloc(m, t), *db = ut_alloc(m, t), *dg = ut_alloc(m, t), *dd = ut_alloc(m, t);
	ut_put(da, x, m, t);
	ut_put(db, y, m, t);
	ut_put(dg, g, m, t);
	ut_put(dd, g, m, t);
	cfrt_view v[4];
	void *buf[4] = {dd, da, db, dg};
	for (int k = 0; k < 4; k++) {
		v[k] = slice ? cfrt_view_contig(buf[k], t, 3, (int64_t[]){3, 6, 5})
		             : cfrt_view_contig(buf[k], t, 1, &n);
		if (slice)
			v[k] = cfrt_view_slice(v[k], 1, 2, 4);
	}
	memcpy(keep, g, sizeof(double) * (size_t)m);
	for (int op = 0; op < 3; op++) {
		int rc = op == 0 ? cfrt_swiglu(ut_ctx, &v[0], &v[1], &v[2])
		       : op == 1 ? cfrt_swiglu_da(ut_ctx, &v[0], &v[3], &v[1], &v[2])
		                 : cfrt_swiglu_db(ut_ctx, &v[0], &v[3], &v[1]);
		CU_ASSERT_EQUAL(rc, CFRT_OK);
		for (int64_t i = 0; i < m; i++) {
			double sa = x[i] / (1.0 + exp(-x[i]));
			double r = op == 0 ? sa * y[i] : op == 1 ? g[i] * y[i] * d_silu(x[i]) : g[i] * sa;
			want[i] = !slice || in_slice(i) ? r : keep[i];
		}
		ut_get(got, dd, m, t);
		double err = ut_maxrel(got, want, m);
		if (err > ut_tol(t))
			printf("\nswiglu op %d, %s, n %lld, slice %d: rel err %g\n", op,
			       t == CFRT_F32 ? "f32" : "f64", (long long)m, slice, err);
		CU_ASSERT(err <= ut_tol(t));
		memcpy(keep, got, sizeof(double) * (size_t)m);
	}
	cfrt_free(ut_ctx, da);
	cfrt_free(ut_ctx, db);
	cfrt_free(ut_ctx, dg);
	cfrt_free(ut_ctx, dd);
	free(x);
}

/* f32: the fused ops give the very floats of the unfused calls that cfc
 * made before it fused them (silu then mul; mul then silu_grad; silu
 * then mul); a broadcast operand or another dtype is refused. */
static void test_swiglu_unfused(void)
{
	enum { N = 1001 };
	float a[N], b[N], dy[N], f[N], u[N], s[N];
	for (int i = 0; i < N; i++) {
		a[i] = (float)((i * 37 % 401) - 200) / 16.0f;
		b[i] = (float)((i * 11 % 97) - 48) / 32.0f;
		dy[i] = (float)((i * 7 % 53) - 26) / 8.0f;
	}
	int64_t n = N;
	cfrt_view va = cfrt_view_contig(a, CFRT_F32, 1, &n), vb = cfrt_view_contig(b, CFRT_F32, 1, &n);
	cfrt_view vg = cfrt_view_contig(dy, CFRT_F32, 1, &n), vf = cfrt_view_contig(f, CFRT_F32, 1, &n);
	cfrt_view vu = cfrt_view_contig(u, CFRT_F32, 1, &n), vs = cfrt_view_contig(s, CFRT_F32, 1, &n);
	CU_ASSERT_EQUAL(cfrt_swiglu(ut_ctx, &vf, &va, &vb), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_silu(ut_ctx, &vs, &va), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mul(ut_ctx, &vu, &vs, &vb), CFRT_OK);
	CU_ASSERT(memcmp(f, u, sizeof f) == 0);
	CU_ASSERT_EQUAL(cfrt_swiglu_db(ut_ctx, &vf, &vg, &va), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mul(ut_ctx, &vu, &vg, &vs), CFRT_OK);
	CU_ASSERT(memcmp(f, u, sizeof f) == 0);
	CU_ASSERT_EQUAL(cfrt_swiglu_da(ut_ctx, &vf, &vg, &va, &vb), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mul(ut_ctx, &vs, &vg, &vb), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_silu_grad(ut_ctx, &vu, &vs, &va), CFRT_OK);
	CU_ASSERT(memcmp(f, u, sizeof f) == 0);
	cfrt_view bias = cfrt_view_contig(b, CFRT_F32, 1, (int64_t[]){1});
	CU_ASSERT_EQUAL(cfrt_swiglu(ut_ctx, &vf, &va, &bias), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_swiglu: view dst [1001] and "
	                       "view b [1] differ in shape");
	cfrt_view wide = cfrt_view_contig(a, CFRT_F64, 1, (int64_t[]){N / 2});
	cfrt_view half = cfrt_view_contig(f, CFRT_F32, 1, (int64_t[]){N / 2});
	CU_ASSERT_EQUAL(cfrt_swiglu_da(ut_ctx, &half, &half, &half, &wide), CFRT_EINVAL);
}

static void test_swiglu(void)
{
	static const int64_t sizes[] = {1, 7, 3001 * 3};
	for (int ti = 0; ti < 2; ti++) {
		swiglu_case(types[ti], EW_N, 1);
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
			swiglu_case(types[ti], sizes[k], 0);
	}
}

/* the gradient of gelu at x times dy = 1 */
static int gelu_grad_op(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *x)
{
	float one[NSPREAD];
	for (int i = 0; i < NSPREAD; i++)
		one[i] = 1.0f;
	cfrt_view dy = cfrt_view_contig(one, CFRT_F32, 1, (int64_t[]){NSPREAD});
	return cfrt_gelu_grad(ctx, dst, &dy, x);
}

/* f32 activations of widely spread values, past the exponent's bounds
 * (+-80, held there without branches) on both sides: within 1e-6 of
 * max(1, |x|) of the double reference; a NaN stays NaN. */
static void test_activation_spread(void)
{
	static const float x[NSPREAD] = {-300, -200, -100, -45, -44.7f, -40, -10, -1, -0.1f, 0,
	                                 0.1f, 1, 10, 40, 44.7f, 45, 100, 200, 300, NAN};
	static const struct {
		unary_op op;
		double (*f)(double);
	} acts[] = {{cfrt_gelu, gelu}, {cfrt_silu, silu}, {cfrt_sigmoid, sigmoid},
	            {gelu_grad_op, gelu_grad}};
	float y[NSPREAD];
	cfrt_view v = cfrt_view_contig(y, CFRT_F32, 1, (int64_t[]){NSPREAD});
	cfrt_view vx = cfrt_view_contig((void *)x, CFRT_F32, 1, (int64_t[]){NSPREAD});

	for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
		CU_ASSERT_EQUAL_FATAL(acts[k].op(ut_ctx, &v, &vx), CFRT_OK);
		for (int i = 0; i < NSPREAD; i++) {
			double want = acts[k].f(x[i]), tol = 1e-6 * fmax(1.0, fabs(x[i]));
			int ok = isnan(x[i]) ? isnan(y[i]) : fabs(y[i] - want) <= tol;
			if (!ok)
				printf("\nactivation %zu of %g: %.9g, want %.9g\n", k, x[i], y[i], want);
			CU_ASSERT(ok);
		}
	}
}

/* ---- scan along the middle and the first dim, in place ---- */

static void test_scan(void)
{
	for (int ti = 0; ti < 2; ti++)
		for (int dim = 0; dim < 2; dim++) {
			cfrt_dtype t = types[ti];
			double x[30], got[30], want[30];
			int64_t dims[3] = {2, 5, 3}, st[3] = {15, 3, 1};
			ut_uniform(x, 30, 14, t);
			void *d = ut_alloc(30, t);
			ut_put(d, x, 30, t);
			cfrt_view v = cfrt_view_contig(d, t, 3, dims);
			CU_ASSERT_EQUAL(cfrt_scan(ut_ctx, &v, &v, dim, 0.9), CFRT_OK);
			for (int64_t i = 0; i < 30; i++) {
				int64_t pos = i / st[dim] % dims[dim];
				want[i] = x[i] + (pos ? 0.9 * want[i - st[dim]] : 0.0);
			}
			ut_get(got, d, 30, t);
			CU_ASSERT(ut_maxrel(got, want, 30) <= ut_tol(t));
			cfrt_free(ut_ctx, d);
		}
}

/* ---- fill: a shard filled alone equals the slice of the whole ---- */

static void test_fill(void)
{
	for (int ti = 0; ti < 2; ti++) {
		cfrt_dtype t = types[ti];
		int64_t g[3] = {4, 6, 5};
		double whole[120], shard[30], ref[120];
		void *dw = ut_alloc(120, t), *ds = ut_alloc(30, t);
		cfrt_view vw = cfrt_view_contig(dw, t, 3, g);
		cfrt_view vs = cfrt_view_contig(ds, t, 3, (int64_t[]){2, 3, 5});
		CU_ASSERT_EQUAL(cfrt_fill_uniform(ut_ctx, &vw, 42), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_fill_global(ut_ctx, &vs, 42, g,
		                                 (int64_t[]){1, 2, 0}), CFRT_OK);
		ut_get(whole, dw, 120, t);
		ut_get(shard, ds, 30, t);
		ut_uniform(ref, 120, 42, t);
		CU_ASSERT(memcmp(whole, ref, sizeof whole) == 0);
		int ok = 1;
		for (int i = 0; i < 30; i++) {
			int b = i / 15, s = i / 5 % 3, d = i % 5;
			ok &= shard[i] == whole[((1 + b) * 6 + 2 + s) * 5 + d];
			ok &= shard[i] >= -1.0 && shard[i] < 1.0;
		}
		CU_ASSERT(ok);
		CU_ASSERT_EQUAL(cfrt_fill_global(ut_ctx, &vs, 42, g,
		                                 (int64_t[]){3, 2, 0}), CFRT_EINVAL);
		cfrt_free(ut_ctx, dw);
		cfrt_free(ut_ctx, ds);
	}
}

/* ---- errors name the call and the problem ---- */

static void test_errors(void)
{
	float a[16] = {0}, c[16] = {0};
	int rc = cfrt_gemm(ut_ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS, 2, 2, 4,
	                   1.0, a, 2, 0, a, 2, 0, 0.0, c, 2, 0, 1);
	CU_ASSERT_EQUAL(rc, CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_gemm: lda 2 is "
	                       "smaller than the 4 columns of A");
	cfrt_view v = cfrt_view_contig(a, CFRT_BF16, 1, (int64_t[]){4});
	CU_ASSERT_EQUAL(cfrt_relu(ut_ctx, &v, &v), CFRT_ENOTSUP);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_relu: bf16 is not "
	                       "supported by the mpi backend");
	cfrt_view x = cfrt_view_contig(a, CFRT_F32, 2, (int64_t[]){2, 3});
	cfrt_view y = cfrt_view_contig(c, CFRT_F32, 2, (int64_t[]){3, 2});
	CU_ASSERT_EQUAL(cfrt_copy(ut_ctx, &y, &x), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_copy: view dst "
	                       "[3,2] and view src [2,3] differ in shape");
	x.nd = CFRT_MAX_DIMS + 1;
	CU_ASSERT_EQUAL(cfrt_softmax(ut_ctx, &x, &x), CFRT_EINVAL);
	CU_ASSERT_EQUAL(cfrt_scan(ut_ctx, &y, &y, 2, 1.0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_strerror(CFRT_ENOTSUP),
	                       "not supported by this backend");
}

void ut_register_compute(void)
{
	CU_pSuite s = CU_add_suite("compute", NULL, NULL);
	CU_add_test(s, "gemm: 4 transposes x f32/f64 x beta 0/1, batch", test_gemm);
	CU_add_test(s, "matmul on sliced, permuted, broadcast views", test_matmul_views);
	CU_add_test(s, "matmul_add: an addend apart, in place, overlapping", test_matmul_add);
	CU_add_test(s, "matmul folds [S, B, F] @ [F, D] into one GEMM where its views allow",
	            test_matmul_fold);
	CU_add_test(s, "copy: head split and merge", test_copy_heads);
	CU_add_test(s, "gelu, silu, relu, scale on a strided slice", test_unary);
	CU_add_test(s, "scale by 0 zeroes NaN and Inf", test_scale_zero);
	CU_add_test(s, "swiglu, swiglu_da, swiglu_db: double references, strided and odd sizes",
	            test_swiglu);
	CU_add_test(s, "swiglu's f32 results are the unfused calls'; shapes and dtypes checked",
	            test_swiglu_unfused);
	CU_add_test(s, "add, mul: same shape and bias broadcast", test_binary);
	CU_add_test(s, "layernorm, rmsnorm, softmax", test_rows);
	CU_add_test(s, "softmax of widely spread scores", test_softmax_spread);
	CU_add_test(s, "f32 activations of widely spread values and NaN", test_activation_spread);
	CU_add_test(s, "scan along dims 0 and 1", test_scan);
	CU_add_test(s, "fill: shard equals slice of whole", test_fill);
	CU_add_test(s, "error messages", test_errors);
}
