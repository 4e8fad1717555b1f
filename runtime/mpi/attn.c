/* attn.c: scaled dot-product attention from the GEMM and softmax pieces.
 * ensures: row i of a call with q_offset o equals row o+i of attention over
 * all queries: a row's scores, mask and softmax depend only on that query,
 * o + i and the whole K/V (query-split attention relies on it). */
#include <math.h>

#include "backend.h"

static int check_4d(cfrt_ctx *ctx, const cfrt_view *v, const char *what,
                    cfrt_dtype t)
{
	int rc = cfrti_check_view(ctx, v, what);
	if (rc != CFRT_OK)
		return rc;
	if (v->nd != 4 || v->t != t)
		return cfrti_err(ctx, CFRT_EINVAL, "%s must be a 4-d [B,H,S,Dh] "
		                 "view of q's dtype", what);
	if (v->dim[3] > 1 && v->stride[3] != 1)
		return cfrti_err(ctx, CFRT_EINVAL, "%s needs a unit stride in its "
		                 "last dim", what);
	return CFRT_OK;
}

static int check_qkv(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                     const cfrt_view *k, const cfrt_view *v)
{
	int rc = cfrti_check_view(ctx, q, "q");
	if (rc == CFRT_OK)
		rc = check_4d(ctx, q, "q", q->t);
	if (rc == CFRT_OK)
		rc = check_4d(ctx, k, "k", q->t);
	if (rc == CFRT_OK)
		rc = check_4d(ctx, v, "v", q->t);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, out, q, "out", "q");
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, v, k, "v", "k");
	if (rc != CFRT_OK)
		return rc;
	if (k->dim[0] != q->dim[0] || k->dim[1] != q->dim[1] ||
	    k->dim[3] != q->dim[3] || q->dim[3] < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q [%lld,%lld,_,%lld] and k "
		                 "[%lld,%lld,_,%lld] disagree on B, H or Dh",
		                 (long long)q->dim[0], (long long)q->dim[1],
		                 (long long)q->dim[3], (long long)k->dim[0],
		                 (long long)k->dim[1], (long long)k->dim[3]);
	return CFRT_OK;
}

/* Row stride of the [S,Dh] matrices of v: any value >= Dh when S <= 1. */
static int64_t ld_of(const cfrt_view *v)
{
	return v->dim[2] > 1 ? v->stride[2] : v->dim[3];
}

/* Element [b,h,0,0] of v. */
static char *head(const cfrt_view *v, int64_t b, int64_t h)
{
	int64_t off = b * v->stride[0] + h * v->stride[1];
	return (char *)v->p + off * (int64_t)cfrt_dtype_size(v->t);
}

/* Scores of one head in the workspace: masked softmax of each row. */
static void softmax_scores(cfrt_ctx *ctx, const gemm_args *s, int causal,
                           int64_t q_offset)
{
	int64_t done = 0;
	for (int64_t i = 0; i < s->m; i++) {
		int64_t n = causal && q_offset + i + 1 < s->n ? q_offset + i + 1 : s->n;
		lane row = {(char *)s->c + i * s->n * (int64_t)cfrt_dtype_size(s->t),
		            1, s->t};
		cfrti_softmax_lane(row, row, n, s->n);
		tick(ctx, &done, s->n);
	}
}

int cfrt_attention(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                   const cfrt_view *k, const cfrt_view *v, int causal,
                   int64_t q_offset)
{
	double t0 = cfrti_begin(ctx, "cfrt_attention");
	int rc = check_qkv(ctx, out, q, k, v);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	if (q_offset < 0 || sk < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q_offset %lld is negative or "
		                 "there are no keys", (long long)q_offset);
	rc = cfrti_ws_reserve(ctx, (size_t)(sq * sk) * cfrt_dtype_size(q->t));
	if (rc != CFRT_OK || cfrt_view_numel(q) == 0)
		return rc;
	/* scores = q k^T / sqrt(Dh) into the workspace; out = scores v */
	gemm_args s = {q->t, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh,
	               1.0 / sqrt((double)dh), 0.0, NULL, NULL, ctx->ws,
	               ld_of(q), ld_of(k), sk, 0, 0, 0, 1};
	gemm_args o = {q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0, 0.0,
	               ctx->ws, NULL, NULL, sk, ld_of(v), ld_of(out), 0, 0, 0, 1};
	for (int64_t b = 0; b < q->dim[0]; b++)
		for (int64_t h = 0; h < q->dim[1]; h++) {
			s.a = head(q, b, h);
			s.b = head(k, b, h);
			o.b = head(v, b, h);
			o.c = head(out, b, h);
			rc = cfrti_gemm_check(ctx, &s);
			if (rc == CFRT_OK)
				rc = cfrti_gemm_check(ctx, &o);
			if (rc != CFRT_OK)
				return rc;
			cfrti_gemm_run(ctx, &s);
			softmax_scores(ctx, &s, causal, q_offset);
			cfrti_gemm_run(ctx, &o);
		}
	return cfrti_end(ctx, t0, CFRT_OK);
}
