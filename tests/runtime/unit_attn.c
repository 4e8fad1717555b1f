/* Attention against a naive reference, causal or not, and query-split
 * attention (slices of the queries with their q_offset) against whole
 * attention, on head-split views of [B,S,H*Dh] tensors as generated code
 * uses them. Its backward against the naive formulas and against central
 * differences of cfrt_attention itself, the query-split backward (dk and
 * dv of slices add up to the whole ones), NULL gradients, and errors.
 * Grouped-query attention (fewer key/value heads) against attention with
 * each key/value head repeated for its query heads, forward and backward
 * (a key/value head's dk and dv: the sum of its repeats'). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

enum { B = 2, H = 3, S = 6, Dh = 4, N = B * S * H * Dh };

/* Element (b,h,s,d) of a [B,S,H*Dh] tensor. */
static int64_t ix(int64_t b, int64_t h, int64_t s, int64_t d)
{
	return (b * S + s) * H * Dh + h * Dh + d;
}

/* p[0..n) = the probabilities of query i of head (b, h) over its n
 * unmasked keys; returns n. */
static int naive_probs(const double *q, const double *k, int b, int h, int i,
                       int causal, double *p)
{
	double max = -INFINITY, sum = 0;
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
	for (int j = 0; j < n; j++)
		p[j] /= sum;
	return n;
}

static void naive_attention(const double *q, const double *k, const double *v,
                            int causal, double *out)
{
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < S; i++) {
				double p[S];
				int n = naive_probs(q, k, b, h, i, causal, p);
				for (int d = 0; d < Dh; d++) {
					double o = 0;
					for (int j = 0; j < n; j++)
						o += p[j] * v[ix(b, h, j, d)];
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

/* ---- backward ------------------------------------------------------------ */

/* The backward of naive_attention for query rows r0..r0+rows (the global
 * positions of a query slice), from the formulas of cfrt.h: dq of those
 * rows (the others 0), dk and dv summed over those rows only. */
static void naive_grad(const double *q, const double *k, const double *v,
                       const double *out, const double *dout, int causal,
                       int r0, int rows, double *dq, double *dk, double *dv)
{
	double c = 1.0 / sqrt((double)Dh);
	memset(dq, 0, N * sizeof *dq);
	memset(dk, 0, N * sizeof *dk);
	memset(dv, 0, N * sizeof *dv);
	for (int b = 0; b < B; b++)
	for (int h = 0; h < H; h++)
	for (int i = r0; i < r0 + rows; i++) {
		double p[S], delta = 0;
		int n = naive_probs(q, k, b, h, i, causal, p);
		for (int d = 0; d < Dh; d++)
			delta += dout[ix(b, h, i, d)] * out[ix(b, h, i, d)];
		for (int j = 0; j < n; j++) {
			double dp = 0;
			for (int d = 0; d < Dh; d++)
				dp += dout[ix(b, h, i, d)] * v[ix(b, h, j, d)];
			double ds = p[j] * (dp - delta);
			for (int d = 0; d < Dh; d++) {
				dq[ix(b, h, i, d)] += ds * k[ix(b, h, j, d)] * c;
				dk[ix(b, h, j, d)] += ds * q[ix(b, h, i, d)] * c;
				dv[ix(b, h, j, d)] += p[j] * dout[ix(b, h, i, d)];
			}
		}
	}
}

/* Runtime buffers of a backward test, [B,S,H*Dh] each, and their inputs
 * on the host (as rounded to t). */
enum { Q, K, V, O, G, DQ, DK, DV, NBUF };
typedef struct gbufs {
	cfrt_dtype t;
	void *d[NBUF];
	double x[G + 1][N]; /* q, k, v, out, dout */
} gbufs;

/* q, k, v and dout from seeds; out from cfrt_attention (whole, causal). */
static void gbufs_make(gbufs *g, cfrt_dtype t, int causal)
{
	g->t = t;
	for (int i = 0; i < NBUF; i++)
		g->d[i] = ut_alloc(N, t);
	for (int i = Q; i <= G; i++) {
		ut_uniform(g->x[i], N, 31 + (uint64_t)i, t);
		ut_put(g->d[i], g->x[i], N, t);
	}
	cfrt_view q = heads(g->d[Q], t), k = heads(g->d[K], t);
	cfrt_view v = heads(g->d[V], t), o = heads(g->d[O], t);
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &o, &q, &k, &v, causal, 0),
	                CFRT_OK);
	ut_get(g->x[O], g->d[O], N, t);
}

static void gbufs_free(gbufs *g)
{
	for (int i = 0; i < NBUF; i++)
		cfrt_free(ut_ctx, g->d[i]);
}

/* Buffer i, NaN throughout: what a gradient call leaves unwritten shows. */
static void poison(gbufs *g, int i)
{
	double nan[N];
	for (int e = 0; e < N; e++)
		nan[e] = NAN;
	ut_put(g->d[i], nan, N, g->t);
}

/* Query rows of buffer i: r0..r0+rows of its [B,H,S,Dh] view. */
static cfrt_view rows_of(const gbufs *g, int i, int r0, int rows)
{
	return cfrt_view_slice(heads(g->d[i], g->t), 2, r0, rows);
}

/* cfrt_attention_grad for query rows r0.. (q_offset r0) into the DQ, DK
 * and DV buffers; want: which of dq, dk, dv (bits 1, 2, 4) to compute. */
static int grad_rows(const gbufs *g, int causal, int r0, int rows, int want)
{
	cfrt_view q = rows_of(g, Q, r0, rows), o = rows_of(g, O, r0, rows);
	cfrt_view dout = rows_of(g, G, r0, rows), dq = rows_of(g, DQ, r0, rows);
	cfrt_view k = heads(g->d[K], g->t), v = heads(g->d[V], g->t);
	cfrt_view dk = heads(g->d[DK], g->t), dv = heads(g->d[DV], g->t);
	return cfrt_attention_grad(ut_ctx, want & 1 ? &dq : NULL,
	                           want & 2 ? &dk : NULL, want & 4 ? &dv : NULL,
	                           &q, &k, &v, &o, &dout, causal, r0);
}

/* Downloads the three gradients (dq: only rows r0..r0+rows, 0 elsewhere). */
static void grads_get(const gbufs *g, int r0, int rows, double got[3][N])
{
	for (int i = 0; i < 3; i++)
		ut_get(got[i], g->d[DQ + i], N, g->t);
	for (int e = 0; e < N; e++) {
		int s = (int)(e / (H * Dh) % S);
		if (s < r0 || s >= r0 + rows)
			got[0][e] = 0;
	}
}

static void grad_vs_naive(cfrt_dtype t, int causal)
{
	gbufs g;
	double want[3][N], got[3][N];
	gbufs_make(&g, t, causal);
	for (int i = DQ; i <= DV; i++)
		poison(&g, i);
	CU_ASSERT_EQUAL(grad_rows(&g, causal, 0, S, 7), CFRT_OK);
	grads_get(&g, 0, S, got);
	naive_grad(g.x[Q], g.x[K], g.x[V], g.x[O], g.x[G], causal, 0, S,
	           want[0], want[1], want[2]);
	for (int i = 0; i < 3; i++)
		CU_ASSERT(ut_maxrel(got[i], want[i], N) <= ut_tol(t));
	gbufs_free(&g);
}

static void test_grad_naive(void)
{
	for (int causal = 0; causal < 2; causal++) {
		grad_vs_naive(CFRT_F64, causal);
		grad_vs_naive(CFRT_F32, causal);
	}
}

/* L = sum(w * out) over query rows r0..r0+rows of cfrt_attention(q, k, v)
 * with q_offset r0, from the inputs in g->x (f64). */
static double loss(gbufs *g, const double *w, int causal, int r0, int rows)
{
	double out[N], l = 0;
	for (int i = Q; i <= V; i++)
		ut_put(g->d[i], g->x[i], N, CFRT_F64);
	cfrt_view q = rows_of(g, Q, r0, rows), o = rows_of(g, O, r0, rows);
	cfrt_view k = heads(g->d[K], CFRT_F64), v = heads(g->d[V], CFRT_F64);
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &o, &q, &k, &v, causal, r0),
	                CFRT_OK);
	ut_get(out, g->d[O], N, CFRT_F64);
	for (int e = 0; e < N; e++) {
		int s = (int)(e / (H * Dh) % S);
		if (s >= r0 && s < r0 + rows)
			l += w[e] * out[e];
	}
	return l;
}

/* dL/dx by central differences for x = q, k, v (q: rows r0.. only). */
static void central_diff(gbufs *g, const double *w, int causal, int r0,
                         int rows, double fd[3][N])
{
	const double h = 1e-6;
	for (int i = Q; i <= V; i++)
		for (int e = 0; e < N; e++) {
			int s = (int)(e / (H * Dh) % S);
			fd[i][e] = 0;
			if (i == Q && (s < r0 || s >= r0 + rows))
				continue;
			double x = g->x[i][e];
			g->x[i][e] = x + h;
			double lp = loss(g, w, causal, r0, rows);
			g->x[i][e] = x - h;
			double lm = loss(g, w, causal, r0, rows);
			g->x[i][e] = x;
			fd[i][e] = (lp - lm) / (2 * h);
		}
}

/* The gradients of L = sum(dout * out) against central differences of
 * L (f64, h = 1e-6), whole and for the query slice 2..5 (partial dk, dv). */
static void test_grad_central_diff(void)
{
	static const int slice[][2] = {{0, S}, {2, S - 2}};
	for (int causal = 0; causal < 2; causal++)
		for (int c = 0; c < 2; c++) {
			int r0 = slice[c][0], rows = slice[c][1];
			gbufs g;
			double got[3][N], fd[3][N];
			gbufs_make(&g, CFRT_F64, causal);
			CU_ASSERT_EQUAL(grad_rows(&g, causal, r0, rows, 7), CFRT_OK);
			grads_get(&g, r0, rows, got);
			central_diff(&g, g.x[G], causal, r0, rows, fd);
			for (int i = 0; i < 3; i++)
				CU_ASSERT(ut_maxrel(got[i], fd[i], N) < 1e-6);
			gbufs_free(&g);
		}
}

/* Query slices of every size that divides S, each with its q_offset: the
 * sums of their dk and dv are the whole call's, their dq rows its rows. */
static void test_grad_query_split(void)
{
	for (int causal = 0; causal < 2; causal++) {
		gbufs g;
		double whole[3][N], got[3][N], sum[2][N];
		gbufs_make(&g, CFRT_F64, causal);
		CU_ASSERT_EQUAL(grad_rows(&g, causal, 0, S, 7), CFRT_OK);
		grads_get(&g, 0, S, whole);
		for (int rows = 1; rows < S; rows++) {
			if (S % rows)
				continue;
			double dq[N] = {0};
			memset(sum, 0, sizeof sum);
			for (int r0 = 0; r0 < S; r0 += rows) {
				poison(&g, DK);
				poison(&g, DV);
				CU_ASSERT_EQUAL(grad_rows(&g, causal, r0, rows, 7),
				                CFRT_OK);
				grads_get(&g, r0, rows, got);
				for (int e = 0; e < N; e++) {
					dq[e] += got[0][e];
					sum[0][e] += got[1][e];
					sum[1][e] += got[2][e];
				}
			}
			CU_ASSERT(ut_maxrel(dq, whole[0], N) <= ut_tol(CFRT_F64));
			CU_ASSERT(ut_maxrel(sum[0], whole[1], N) <= ut_tol(CFRT_F64));
			CU_ASSERT(ut_maxrel(sum[1], whole[2], N) <= ut_tol(CFRT_F64));
		}
		gbufs_free(&g);
	}
}

/* Each subset of dq, dk, dv: the ones asked for equal the full call's
 * bit for bit, the others are not touched; no query rows: dk = dv = 0. */
static void test_grad_null(void)
{
	gbufs g;
	double full[3][N], got[3][N], old[N];
	gbufs_make(&g, CFRT_F32, 1);
	CU_ASSERT_EQUAL(grad_rows(&g, 1, 1, 4, 7), CFRT_OK);
	grads_get(&g, 1, 4, full);
	for (int want = 0; want < 7; want++) {
		for (int i = DQ; i <= DV; i++)
			poison(&g, i);
		CU_ASSERT_EQUAL(grad_rows(&g, 1, 1, 4, want), CFRT_OK);
		grads_get(&g, 1, 4, got);
		for (int i = 0; i < 3; i++) {
			if (want >> i & 1) {
				CU_ASSERT(memcmp(got[i], full[i], sizeof got[i]) == 0);
				continue;
			}
			int kept = 0;
			ut_get(old, g.d[DQ + i], N, g.t);
			for (int e = 0; e < N; e++)
				kept += isnan(old[e]) != 0;
			CU_ASSERT_EQUAL(kept, N);
		}
	}
	int zero = 0;
	CU_ASSERT_EQUAL(grad_rows(&g, 1, 6, 0, 7), CFRT_OK);
	grads_get(&g, 6, 0, got);
	for (int e = 0; e < N; e++)
		zero += got[1][e] == 0 && got[2][e] == 0;
	CU_ASSERT_EQUAL(zero, N);
	gbufs_free(&g);
}

/* Mismatched or missing views: EINVAL naming the view, nothing run. */
static void test_grad_errors(void)
{
	gbufs g;
	gbufs_make(&g, CFRT_F32, 0);
	cfrt_view q = heads(g.d[Q], CFRT_F32), k = heads(g.d[K], CFRT_F32);
	cfrt_view v = heads(g.d[V], CFRT_F32), o = heads(g.d[O], CFRT_F32);
	cfrt_view dq = heads(g.d[DQ], CFRT_F32), dk = heads(g.d[DK], CFRT_F32);
	cfrt_view dv = heads(g.d[DV], CFRT_F32), dout = heads(g.d[G], CFRT_F32);
	cfrt_view short_dk = cfrt_view_slice(dk, 2, 0, S - 1);
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &short_dk, &dv, &q, &k,
	                &v, &o, &dout, 1, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_grad: "
	                       "view dk [2,3,5,4] and view k [2,3,6,4] differ in "
	                       "shape");
	cfrt_view narrow = cfrt_view_slice(dout, 3, 0, Dh / 2);
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dk, &dv, &q, &k, &v,
	                &o, &narrow, 1, 0), CFRT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfrt_last_error(ut_ctx), "view dout"));
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dk, &dv, &q, &k, &v,
	                &o, NULL, 1, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_grad: "
	                       "view dout is NULL");
	cfrt_view dq64 = dq;
	dq64.t = CFRT_F64;
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq64, &dk, &dv, &q, &k, &v,
	                &o, &dout, 1, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_grad: "
	                       "dq must be a 4-d [B,H,S,Dh] view of q's dtype");
	cfrt_view tdv = cfrt_view_permute(dv, (int[]){0, 1, 3, 2});
	tdv.dim[2] = S, tdv.dim[3] = Dh; /* k's dims, Dh strided */
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dk, &tdv, &q, &k, &v,
	                &o, &dout, 1, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_grad: "
	                       "dv needs a unit stride in its last dim");
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dk, &dv, &q, &k, &v,
	                &o, &dout, 1, -1), CFRT_EINVAL);
	gbufs_free(&g);
}

/* ---- grouped-query attention ---- */

enum { GH = 4, GN = B * GH * S * Dh }; /* query heads; elements of q */

/* A contiguous [B,h,S,Dh] view and its buffer, filled from x (n = B*h*S*Dh). */
static cfrt_view gqa_view(void **buf, cfrt_dtype t, int64_t h, const double *x)
{
	int64_t n = B * h * S * Dh;
	*buf = ut_alloc(n, t);
	if (x)
		ut_put(*buf, x, n, t);
	return cfrt_view_contig(*buf, t, 4, (int64_t[]){B, h, S, Dh});
}

/* x of hk heads with head j repeated GH / hk times: [B,GH,S,Dh] into r. */
static void repeat_heads(const double *x, int hk, double *r)
{
	for (int b = 0; b < B; b++)
		for (int h = 0; h < GH; h++)
			memcpy(r + (b * GH + h) * S * Dh, x + (b * hk + h / (GH / hk)) * S * Dh,
			       sizeof(double) * S * Dh);
}

/* g of [B,GH,S,Dh] summed over each group of GH / hk heads into s. */
static void sum_groups(const double *g, int hk, double *s)
{
	memset(s, 0, sizeof(double) * B * hk * S * Dh);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < GH; h++)
			for (int e = 0; e < S * Dh; e++)
				s[(b * hk + h / (GH / hk)) * S * Dh + e] += g[(b * GH + h) * S * Dh + e];
}

/* Query rows r0..r0+rows of attention with hk key/value heads against the
 * same with them repeated: out, dq, dk, dv. */
static void gqa_case(cfrt_dtype t, int hk, int causal, int r0, int rows)
{
	int64_t nk = B * hk * S * Dh;
	double q[GN], k[GN], v[GN], dout[GN], kr[GN], vr[GN];
	double got[4][GN], want[4][GN], rep[2][GN];
	void *b[12];
	ut_uniform(q, GN, 31, t);
	ut_uniform(k, nk, 32, t);
	ut_uniform(v, nk, 33, t);
	ut_uniform(dout, GN, 34, t);
	repeat_heads(k, hk, kr);
	repeat_heads(v, hk, vr);
	cfrt_view vq = cfrt_view_slice(gqa_view(&b[0], t, GH, q), 2, r0, rows);
	cfrt_view vk = gqa_view(&b[1], t, hk, k), vv = gqa_view(&b[2], t, hk, v);
	cfrt_view vkr = gqa_view(&b[3], t, GH, kr), vvr = gqa_view(&b[4], t, GH, vr);
	cfrt_view vg = cfrt_view_slice(gqa_view(&b[5], t, GH, dout), 2, r0, rows);
	cfrt_view vo = cfrt_view_slice(gqa_view(&b[6], t, GH, NULL), 2, r0, rows);
	cfrt_view vor = cfrt_view_slice(gqa_view(&b[7], t, GH, NULL), 2, r0, rows);
	cfrt_view dq = cfrt_view_slice(gqa_view(&b[8], t, GH, NULL), 2, r0, rows);
	cfrt_view dk = gqa_view(&b[9], t, hk, NULL), dv = gqa_view(&b[10], t, hk, NULL);
	cfrt_view dkv = gqa_view(&b[11], t, GH, NULL); /* dk, then dv, repeated */
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &vo, &vq, &vk, &vv, causal, r0), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &vor, &vq, &vkr, &vvr, causal, r0), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dk, &dv, &vq, &vk, &vv, &vo, &vg,
	                                    causal, r0), CFRT_OK);
	ut_get(got[0], b[6], GN, t);
	ut_get(want[0], b[7], GN, t);
	ut_get(got[1], b[8], GN, t);
	ut_get(got[2], b[9], nk, t);
	ut_get(got[3], b[10], nk, t);
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, &dq, &dkv, NULL, &vq, &vkr, &vvr, &vor,
	                                    &vg, causal, r0), CFRT_OK);
	ut_get(want[1], b[8], GN, t);
	ut_get(rep[0], b[11], GN, t);
	CU_ASSERT_EQUAL(cfrt_attention_grad(ut_ctx, NULL, NULL, &dkv, &vq, &vkr, &vvr, &vor,
	                                    &vg, causal, r0), CFRT_OK);
	ut_get(rep[1], b[11], GN, t);
	sum_groups(rep[0], hk, want[2]);
	sum_groups(rep[1], hk, want[3]);
	for (int i = 0; i < 4; i++)
		CU_ASSERT(ut_maxrel(got[i], want[i], i < 2 ? GN : nk) <= ut_tol(t));
	for (int i = 0; i < 12; i++)
		cfrt_free(ut_ctx, b[i]);
}

static void test_gqa(void)
{
	for (int causal = 0; causal < 2; causal++)
		for (int hk = 1; hk <= 2; hk++) {
			gqa_case(CFRT_F64, hk, causal, 0, S);
			gqa_case(CFRT_F32, hk, causal, 0, S);
			gqa_case(CFRT_F64, hk, causal, 2, S - 3);
		}
}

void ut_register_attention(void)
{
	CU_pSuite s = CU_add_suite("attention", NULL, NULL);
	CU_add_test(s, "whole and query-split, causal or not, f32/f64",
	            test_attention);
	CU_add_test(s, "shape and offset errors", test_attention_errors);
	CU_add_test(s, "backward against the formulas, f64/f32",
	            test_grad_naive);
	CU_add_test(s, "backward against central differences, whole and "
	            "a query slice", test_grad_central_diff);
	CU_add_test(s, "backward of query slices adds up to the whole",
	            test_grad_query_split);
	CU_add_test(s, "backward: NULL gradients, no query rows",
	            test_grad_null);
	CU_add_test(s, "backward: shape, dtype, stride and offset errors",
	            test_grad_errors);
	CU_add_test(s, "grouped-query and multi-query attention, forward and "
	            "backward, against repeated key/value heads", test_gqa);
}
