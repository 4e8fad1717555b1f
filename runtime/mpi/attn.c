/* attn.c: scaled dot-product attention from the GEMM and softmax pieces.
 * ensures: row i of a call with q_offset o equals row o+i of attention over
 * all queries: a row's scores, mask and softmax depend only on that query,
 * o + i and the whole K/V (query-split attention relies on it). */
#include <math.h>

#include "backend.h"

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
	int rc = cfrti_attn_check(ctx, out, q, k, v, q_offset);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	rc = cfrti_ws_reserve(ctx, (size_t)(sq * sk) * cfrt_dtype_size(q->t));
	if (rc != CFRT_OK || cfrt_view_numel(q) == 0)
		return rc;
	/* scores = q k^T / sqrt(Dh) into the workspace; out = scores v */
	gemm_args s = {q->t, q->t, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh,
	               1.0 / sqrt((double)dh), 0.0, NULL, NULL, ctx->ws,
	               cfrti_head_ld(q), cfrti_head_ld(k), sk, 0, 0, 0, 1};
	gemm_args o = {q->t, q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0,
	               0.0, ctx->ws, NULL, NULL, sk, cfrti_head_ld(v),
	               cfrti_head_ld(out), 0, 0, 0, 1};
	for (int64_t b = 0; b < q->dim[0]; b++)
		for (int64_t h = 0; h < q->dim[1]; h++) {
			s.a = cfrti_head_at(q, b, h);
			s.b = cfrti_head_at(k, b, h);
			o.b = cfrti_head_at(v, b, h);
			o.c = cfrti_head_at(out, b, h);
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
