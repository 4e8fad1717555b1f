/* The log-sum-exp that cfrt_attention_lse saves and cfrt_attention_grad_lse
 * takes back, on sizes that fit no block (B = 2, H = 6, S = 7, Dh = 5),
 * with 6, 3 and 1 key/value heads (multi-head, grouped-query,
 * multi-query), causal or not, in one call and in query slices of 3 rows
 * (3 + 3 + 1, each with its q_offset), f32 and f64, on head-split views
 * of [B,S,H*Dh] tensors as generated code has them: out equals
 * cfrt_attention's bit for bit and lse a double reference; the backward
 * from lse equals the recomputing cfrt_attention_grad and the double
 * reference, its dk and dv summed over the slices. lse views of the wrong
 * shape or type are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

enum { B = 2, H = 6, S = 7, Dh = 5, QN = B * S * H * Dh, LN = B * H * S };

/* Element (b,h,s,d) of a [B,S,nh*Dh] tensor. */
static int64_t ix(int nh, int64_t b, int64_t h, int64_t s, int64_t d)
{
	return (b * S + s) * nh * Dh + h * Dh + d;
}

/* Its [B,nh,S,Dh] view. */
static cfrt_view heads(void *p, cfrt_dtype t, int nh)
{
	cfrt_view v = cfrt_view_contig(p, t, 3, (int64_t[]){B, S, nh * Dh});
	return cfrt_view_permute(cfrt_view_split(v, 2, nh, Dh),
	                         (int[]){0, 2, 1, 3});
}

/* The double reference of attention with hk key/value heads: lse
 * [B,H,S], out, and the gradients of sum(dout * out): dq, and dk, dv of
 * hk heads. */
typedef struct ref {
	double lse[LN], out[QN], dq[QN], dk[QN], dv[QN];
} ref;

static void reference(const double *q, const double *k, const double *v,
                      const double *dout, int hk, int causal, ref *r)
{
	double c = 1.0 / sqrt((double)Dh);
	memset(r, 0, sizeof *r);
	for (int b = 0; b < B; b++)
	for (int h = 0; h < H; h++)
	for (int i = 0; i < S; i++) {
		int kh = h / (H / hk), n = causal ? i + 1 : S;
		double s[S], m = -INFINITY, sum = 0, delta = 0;
		for (int j = 0; j < n; j++) {
			s[j] = 0;
			for (int d = 0; d < Dh; d++)
				s[j] += q[ix(H, b, h, i, d)] * k[ix(hk, b, kh, j, d)] * c;
			m = fmax(m, s[j]);
		}
		for (int j = 0; j < n; j++)
			sum += exp(s[j] - m);
		r->lse[(b * H + h) * S + i] = m + log(sum);
		for (int j = 0; j < n; j++) {
			s[j] = exp(s[j] - m) / sum; /* P */
			for (int d = 0; d < Dh; d++)
				r->out[ix(H, b, h, i, d)] += s[j] * v[ix(hk, b, kh, j, d)];
		}
		for (int d = 0; d < Dh; d++)
			delta += dout[ix(H, b, h, i, d)] * r->out[ix(H, b, h, i, d)];
		for (int j = 0; j < n; j++) {
			double dp = 0;
			for (int d = 0; d < Dh; d++)
				dp += dout[ix(H, b, h, i, d)] * v[ix(hk, b, kh, j, d)];
			double ds = s[j] * (dp - delta) * c;
			for (int d = 0; d < Dh; d++) {
				r->dq[ix(H, b, h, i, d)] += ds * k[ix(hk, b, kh, j, d)];
				r->dk[ix(hk, b, kh, j, d)] += ds * q[ix(H, b, h, i, d)];
				r->dv[ix(hk, b, kh, j, d)] += s[j] * dout[ix(H, b, h, i, d)];
			}
		}
	}
}

/* Runtime buffers of a case: q, k, v, dout, out and out2 (the plain
 * call's), lse, and the gradients of both paths. */
enum { Q, K, V, G, O, O2, L, DQ, DK, DV, DQ2, DK2, DV2, NB };

typedef struct lcase {
	cfrt_dtype t;
	int hk, causal, rows;
	void *d[NB];
	double x[G + 1][QN]; /* q, k, v, dout as rounded to t */
} lcase;

static int64_t elems(const lcase *c, int i)
{
	return i == L ? LN : i == K || i == V || i == DK || i == DV ||
	       i == DK2 || i == DV2 ? B * S * c->hk * Dh : QN;
}

static void lcase_make(lcase *c)
{
	for (int i = 0; i < NB; i++)
		c->d[i] = ut_alloc(elems(c, i), c->t);
	for (int i = Q; i <= G; i++) {
		ut_uniform(c->x[i], elems(c, i), 41 + (uint64_t)i, c->t);
		ut_put(c->d[i], c->x[i], elems(c, i), c->t);
	}
}

static void lcase_free(lcase *c)
{
	for (int i = 0; i < NB; i++)
		cfrt_free(ut_ctx, c->d[i]);
}

/* The [B,nh,S,Dh] view of buffer i, rows r0..r0+n when sliced. */
static cfrt_view view(const lcase *c, int i, int64_t r0, int64_t n, int sliced)
{
	int kv = elems(c, i) != QN;
	cfrt_view v = heads(c->d[i], c->t, kv ? c->hk : H);
	return sliced ? cfrt_view_slice(v, 2, r0, n) : v;
}

/* Forward of the case, slice by slice: out and lse from
 * cfrt_attention_lse, out2 from cfrt_attention. */
static void forward(lcase *c)
{
	cfrt_view k = view(c, K, 0, 0, 0), v = view(c, V, 0, 0, 0);
	cfrt_view lse = cfrt_view_contig(c->d[L], c->t == CFRT_F64 ? CFRT_F64 :
	                                 CFRT_F32, 3, (int64_t[]){B, H, S});
	for (int64_t r0 = 0; r0 < S; r0 += c->rows) {
		int64_t n = S - r0 < c->rows ? S - r0 : c->rows;
		cfrt_view q = view(c, Q, r0, n, 1), o = view(c, O, r0, n, 1);
		cfrt_view o2 = view(c, O2, r0, n, 1);
		cfrt_view l = cfrt_view_slice(lse, 2, r0, n);
		CU_ASSERT_EQUAL(cfrt_attention_lse(ut_ctx, &o, &l, &q, &k, &v,
		                                   c->causal, r0), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_attention(ut_ctx, &o2, &q, &k, &v, c->causal,
		                               r0), CFRT_OK);
	}
}

/* Backward slice by slice, from lse (lse = 1: into DQ, DK, DV) or
 * recomputing (into DQ2, DK2, DV2); dk and dv summed over the slices on
 * the host into dk, dv; dq downloaded whole. */
static void backward(lcase *c, int lse, double *dq, double *dk, double *dv)
{
	int g = lse ? DQ : DQ2;
	int64_t nk = elems(c, DK);
	double part[QN];
	cfrt_view k = view(c, K, 0, 0, 0), v = view(c, V, 0, 0, 0);
	cfrt_view dkv = view(c, g + 1, 0, 0, 0), dvv = view(c, g + 2, 0, 0, 0);
	cfrt_view all = cfrt_view_contig(c->d[L], c->t == CFRT_F64 ? CFRT_F64 :
	                                 CFRT_F32, 3, (int64_t[]){B, H, S});
	memset(dk, 0, sizeof(double) * (size_t)nk);
	memset(dv, 0, sizeof(double) * (size_t)nk);
	for (int64_t r0 = 0; r0 < S; r0 += c->rows) {
		int64_t n = S - r0 < c->rows ? S - r0 : c->rows;
		cfrt_view q = view(c, Q, r0, n, 1), o = view(c, O, r0, n, 1);
		cfrt_view dout = view(c, G, r0, n, 1), dqv = view(c, g, r0, n, 1);
		cfrt_view l = cfrt_view_slice(all, 2, r0, n);
		CU_ASSERT_EQUAL(cfrt_attention_grad_lse(ut_ctx, &dqv, &dkv, &dvv,
		                &q, &k, &v, &o, &dout, lse ? &l : NULL, c->causal,
		                r0), CFRT_OK);
		ut_get(part, c->d[g + 1], nk, c->t);
		for (int64_t e = 0; e < nk; e++)
			dk[e] += part[e];
		ut_get(part, c->d[g + 2], nk, c->t);
		for (int64_t e = 0; e < nk; e++)
			dv[e] += part[e];
	}
	ut_get(dq, c->d[g], QN, c->t);
}

static void lse_case(cfrt_dtype t, int hk, int causal, int rows)
{
	lcase c = {t, hk, causal, rows, {0}, {{0}}};
	static ref r;
	static double got[3][QN], rec[3][QN], out[2][QN], lse[LN];
	int64_t nk = elems(&c, DK);
	size_t ob = (size_t)QN * cfrt_dtype_size(t);
	lcase_make(&c);
	reference(c.x[Q], c.x[K], c.x[V], c.x[G], hk, causal, &r);
	forward(&c);
	char *o1 = malloc(ob), *o2 = malloc(ob);
	CU_ASSERT_EQUAL(cfrt_download(ut_ctx, o1, c.d[O], ob), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_download(ut_ctx, o2, c.d[O2], ob), CFRT_OK);
	CU_ASSERT(memcmp(o1, o2, ob) == 0);
	free(o1);
	free(o2);
	ut_get(out[0], c.d[O], QN, t);
	ut_get(lse, c.d[L], LN, t == CFRT_F64 ? CFRT_F64 : CFRT_F32);
	CU_ASSERT(ut_maxrel(out[0], r.out, QN) <= ut_tol(t));
	CU_ASSERT(ut_maxrel(lse, r.lse, LN) <= ut_tol(t));
	backward(&c, 1, got[0], got[1], got[2]);
	backward(&c, 0, rec[0], rec[1], rec[2]);
	const double *want[3] = {r.dq, r.dk, r.dv};
	for (int i = 0; i < 3; i++) {
		int64_t n = i ? nk : QN;
		CU_ASSERT(ut_maxrel(got[i], rec[i], n) <= ut_tol(t));
		CU_ASSERT(ut_maxrel(got[i], want[i], n) <= ut_tol(t));
		CU_ASSERT(ut_maxrel(rec[i], want[i], n) <= ut_tol(t));
	}
	lcase_free(&c);
}

static void test_lse(void)
{
	static const int hks[] = {H, 3, 1};
	for (int k = 0; k < 3; k++)
		for (int causal = 0; causal < 2; causal++)
			for (int rows = 3; rows <= S; rows += S - 3) {
				lse_case(CFRT_F32, hks[k], causal, rows);
				lse_case(CFRT_F64, hks[k], causal, rows);
			}
}

/* lse of the wrong shape or type: EINVAL naming it, nothing run. */
static void test_lse_errors(void)
{
	lcase c = {CFRT_F32, 3, 1, S, {0}, {{0}}};
	lcase_make(&c);
	cfrt_view q = view(&c, Q, 0, 0, 0), k = view(&c, K, 0, 0, 0);
	cfrt_view v = view(&c, V, 0, 0, 0), o = view(&c, O, 0, 0, 0);
	cfrt_view g = view(&c, G, 0, 0, 0), dq = view(&c, DQ, 0, 0, 0);
	cfrt_view lse = cfrt_view_contig(c.d[L], CFRT_F32, 3, (int64_t[]){B, H, S});
	cfrt_view short_lse = cfrt_view_slice(lse, 2, 0, S - 1), l64 = lse;
	l64.t = CFRT_F64;
	CU_ASSERT_EQUAL(cfrt_attention_lse(ut_ctx, &o, &short_lse, &q, &k, &v, 1,
	                                   0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_lse: lse "
	                       "must be a 3-d view [2,6,7] (q's B, H, Sq) of f32");
	CU_ASSERT_EQUAL(cfrt_attention_grad_lse(ut_ctx, &dq, NULL, NULL, &q, &k,
	                &v, &o, &g, &l64, 1, 0), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_attention_grad_lse: "
	                       "lse must be a 3-d view [2,6,7] (q's B, H, Sq) of "
	                       "f32");
	cfrt_view flat = cfrt_view_contig(c.d[L], CFRT_F32, 1, (int64_t[]){LN});
	CU_ASSERT_EQUAL(cfrt_attention_lse(ut_ctx, &o, &flat, &q, &k, &v, 0, 0),
	                CFRT_EINVAL);
	lcase_free(&c);
}

void ut_register_lse(void)
{
	CU_pSuite s = CU_add_suite("attention with a saved log-sum-exp", NULL,
	                           NULL);
	CU_add_test(s, "forward and backward against the recomputing calls and "
	            "a double reference: odd sizes, GQA and MQA, causal query "
	            "slices, f32/f64", test_lse);
	CU_add_test(s, "lse shape and type errors", test_lse_errors);
}
