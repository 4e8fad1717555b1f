/* attn.c: scaled dot-product attention and its backward from the GEMM and
 * softmax pieces.
 * ensures: row i of a call with q_offset o equals row o+i of attention over
 * all queries: a row's scores, mask and softmax depend only on that query,
 * o + i and the whole K/V (query-split attention relies on it). Likewise
 * the backward's dq rows; its dk and dv are sums over the query rows, so
 * those of query slices add up to the whole call's. With grouped-query
 * attention (k and v have fewer heads), query head h reads key/value head
 * h / (H / Hk), and that head's dk and dv sum the group's. The forward
 * can also write each row's log-sum-exp (cfrt_attention_lse), and the
 * backward take it instead of the row's max and sum over its scores. */
#include <math.h>

#include "backend.h"

/* Keys that row i of a call sees: 0 .. keys - 1. */
static int64_t row_keys(int64_t i, int64_t sk, int causal, int64_t q_offset)
{
	return causal && q_offset + i + 1 < sk ? q_offset + i + 1 : sk;
}

/* The log-sum-exp of head (b, h)'s rows, as a lane (p NULL: no lse). */
static lane lse_lane(const cfrt_view *lse, int64_t b, int64_t h)
{
	lane l = {lse ? cfrti_head_at(lse, b, h) : NULL,
	          lse ? lse->stride[2] : 0, lse ? lse->t : CFRT_F64};
	return l;
}

/* Scores of one head in the workspace become the probabilities of each
 * row's keys, 0 after them: their masked softmax, whose log-sum-exp goes
 * to lse when lse.p is set; or (read) exp(s - lse) from the lse that the
 * forward wrote, without a pass for the row's max and sum. */
static void probs(cfrt_ctx *ctx, const gemm_args *s, int causal,
                  int64_t q_offset, lane lse, int read)
{
	int64_t done = 0;
	for (int64_t i = 0; i < s->m; i++) {
		lane row = {(char *)s->c + i * s->n * (int64_t)cfrt_dtype_size(s->t),
		            1, s->t};
		int64_t n = row_keys(i, s->n, causal, q_offset);
		if (read && s->t == CFRT_F32) {
			cfrti_exp_rows_f32((float *)(void *)row.p, (const float *)(void *)row.p, n,
			                   s->n, (float)lane_get(lse, i));
		} else if (read) {
			double l = lane_get(lse, i);
			for (int64_t j = 0; j < s->n; j++)
				lane_set_prob(row, j, j < n ? exp_prob(row.t, lane_get(row, j) - l) : 0.0);
		} else {
			double l = cfrti_softmax_lane(row, row, n, s->n);
			if (lse.p)
				lane_set(lse, i, l);
		}
		tick(ctx, &done, s->n);
	}
}

int cfrti_attention(cfrt_ctx *ctx, const cfrti_attn *a)
{
	const cfrt_view *q = a->q, *k = a->k, *v = a->v, *out = a->out;
	double t0 = cfrti_begin(ctx, a->api);
	int rc = cfrti_attn_check(ctx, out, a->lse, q, k, v, a->q_offset);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	rc = cfrti_ws_reserve(ctx, (size_t)(sq * sk) * cfrt_dtype_size(q->t));
	if (rc != CFRT_OK || cfrt_view_numel(q) == 0)
		return rc;
	/* scores = q k^T / sqrt(Dh) into the workspace; out = scores v */
	gemm_args s = {q->t, q->t, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh,
	               1.0 / sqrt((double)dh), 0.0, NULL, NULL, ctx->ws,
	               cfrti_head_ld(q), cfrti_head_ld(k), sk, 0, 0, 0, 1, NULL};
	gemm_args o = {q->t, q->t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, 1.0,
	               0.0, ctx->ws, NULL, NULL, sk, cfrti_head_ld(v),
	               cfrti_head_ld(out), 0, 0, 0, 1, NULL};
	int64_t grp = q->dim[1] / k->dim[1];
	for (int64_t b = 0; b < q->dim[0]; b++)
		for (int64_t h = 0; h < q->dim[1]; h++) {
			s.a = cfrti_head_at(q, b, h);
			s.b = cfrti_head_at(k, b, h / grp);
			o.b = cfrti_head_at(v, b, h / grp);
			o.c = cfrti_head_at(out, b, h);
			rc = cfrti_gemm_check(ctx, &s);
			if (rc == CFRT_OK)
				rc = cfrti_gemm_check(ctx, &o);
			if (rc != CFRT_OK)
				return rc;
			cfrti_gemm_run(ctx, &s);
			probs(ctx, &s, a->causal, a->q_offset, lse_lane(a->lse, b, h), 0);
			cfrti_gemm_run(ctx, &o);
		}
	return cfrti_end_out(ctx, t0, out, a->lse, NULL);
}

/* ---- backward ----------------------------------------------------------- */

/* dS = P * (dP - delta) in place over the dP block of one head, delta_i =
 * rowsum(dout_i * out_i); masked scores have P = 0, so dS = 0 there (a
 * row with every key masked has P = 0 throughout, as the forward gives). */
static void softmax_grad_scores(cfrt_ctx *ctx, const gemm_args *dp,
                                const char *probs, const char *out,
                                int64_t ldo, const char *dout, int64_t ldg,
                                int64_t dh)
{
	int64_t es = (int64_t)cfrt_dtype_size(dp->t), done = 0;
	for (int64_t i = 0; i < dp->m; i++) {
		lane o = {(char *)out + i * ldo * es, 1, dp->t};
		lane g = {(char *)dout + i * ldg * es, 1, dp->t};
		lane p = {(char *)probs + i * dp->n * es, 1, dp->t};
		lane d = {(char *)dp->c + i * dp->n * es, 1, dp->t};
		double delta = 0.0;
		for (int64_t e = 0; e < dh; e++)
			delta += lane_get(g, e) * lane_get(o, e);
		for (int64_t j = 0; j < dp->n; j++)
			lane_set(d, j, lane_get(p, j) * (lane_get(d, j) - delta));
		tick(ctx, &done, dp->n + dh);
	}
}

/* v = 0 (NULL: nothing): the dk or dv of no queries. */
static void zero_heads(const cfrt_view *v)
{
	for (int64_t l = 0; v && l < cfrti_line_count(v, 3); l++) {
		lane r = lane_of(v, v, 3, l);
		for (int64_t e = 0; e < v->dim[3]; e++)
			lane_set(r, e, 0.0);
	}
}

/* The five GEMMs of the backward of one head; the matrices' pointers are
 * set per head, those of a NULL gradient stay NULL. */
typedef struct grad_gemms {
	gemm_args s, gv, dp, gq, gk;
} grad_gemms;

static grad_gemms grad_setup(const cfrti_attn *w, char *probs, char *dscores)
{
	const cfrt_view *q = w->q, *k = w->k, *dout = w->dout;
	int64_t sq = q->dim[2], sk = k->dim[2], dh = q->dim[3];
	double scale = 1.0 / sqrt((double)dh);
	cfrt_dtype t = q->t;
	grad_gemms g = {
		{t, t, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh, scale, 0.0, NULL,
		 NULL, probs, cfrti_head_ld(q), cfrti_head_ld(k), sk, 0, 0, 0, 1, NULL},
		{t, t, CFRT_TRANS, CFRT_NOTRANS, sk, dh, sq, 1.0, 0.0, probs, NULL,
		 NULL, sk, cfrti_head_ld(dout), w->dv ? cfrti_head_ld(w->dv) : dh,
		 0, 0, 0, 1, NULL},
		{t, t, CFRT_NOTRANS, CFRT_TRANS, sq, sk, dh, 1.0, 0.0, NULL, NULL,
		 dscores, cfrti_head_ld(dout), cfrti_head_ld(w->v), sk, 0, 0, 0, 1, NULL},
		{t, t, CFRT_NOTRANS, CFRT_NOTRANS, sq, dh, sk, scale, 0.0, dscores,
		 NULL, NULL, sk, cfrti_head_ld(k), w->dq ? cfrti_head_ld(w->dq) : dh,
		 0, 0, 0, 1, NULL},
		{t, t, CFRT_TRANS, CFRT_NOTRANS, sk, dh, sq, scale, 0.0, dscores,
		 NULL, NULL, sk, cfrti_head_ld(q), w->dk ? cfrti_head_ld(w->dk) : dh,
		 0, 0, 0, 1, NULL}};
	return g;
}

/* Runs g when its output is wanted. */
static int gemm_if(cfrt_ctx *ctx, const gemm_args *g, const void *want)
{
	int rc = want ? cfrti_gemm_check(ctx, g) : CFRT_OK;
	if (rc == CFRT_OK && want)
		cfrti_gemm_run(ctx, g);
	return rc;
}

/* Head (b, h), with key/value head kh: P = masked softmax(q k^T /
 * sqrt(Dh)) as the forward has it in the workspace's first block
 * (recomputed, or from the saved lse), dv = P^T dout, dP = dout v^T in
 * the second, dS = P * (dP - delta) over dP, dq = dS k / sqrt(Dh) and
 * dk = dS^T q / sqrt(Dh); dk and dv added to what the group's earlier
 * query heads left there unless h is its first (first). */
static int grad_head(cfrt_ctx *ctx, grad_gemms *g, const cfrti_attn *w,
                     int64_t b, int64_t h, int64_t kh, int first)
{
	g->s.a = g->gk.b = cfrti_head_at(w->q, b, h);
	g->s.b = g->gq.b = cfrti_head_at(w->k, b, kh);
	g->gv.b = g->dp.a = cfrti_head_at(w->dout, b, h);
	g->dp.b = cfrti_head_at(w->v, b, kh);
	g->gv.c = w->dv ? cfrti_head_at(w->dv, b, kh) : NULL;
	g->gq.c = w->dq ? cfrti_head_at(w->dq, b, h) : NULL;
	g->gk.c = w->dk ? cfrti_head_at(w->dk, b, kh) : NULL;
	g->gv.beta = g->gk.beta = first ? 0.0 : 1.0;
	const void *ds = w->dq ? (const void *)w->dq : w->dk; /* dS is wanted */
	int rc = cfrti_gemm_check(ctx, &g->s);
	if (rc != CFRT_OK)
		return rc;
	cfrti_gemm_run(ctx, &g->s);
	probs(ctx, &g->s, w->causal, w->q_offset, lse_lane(w->lse, b, h),
	      w->lse != NULL);
	rc = gemm_if(ctx, &g->gv, w->dv);
	if (rc == CFRT_OK)
		rc = gemm_if(ctx, &g->dp, ds);
	if (rc == CFRT_OK && ds)
		softmax_grad_scores(ctx, &g->dp, g->s.c,
		                    cfrti_head_at(w->out, b, h), cfrti_head_ld(w->out),
		                    g->dp.a, cfrti_head_ld(w->dout), w->q->dim[3]);
	if (rc == CFRT_OK)
		rc = gemm_if(ctx, &g->gq, w->dq);
	return rc != CFRT_OK ? rc : gemm_if(ctx, &g->gk, w->dk);
}

int cfrti_attention_grad(cfrt_ctx *ctx, const cfrti_attn *w)
{
	double t0 = cfrti_begin(ctx, w->api);
	int rc = cfrti_attn_grad_check(ctx, w->dq, w->dk, w->dv, w->q, w->k,
	                               w->v, w->out, w->dout, w->lse, w->q_offset);
	if (rc != CFRT_OK)
		return rc;
	int64_t sq = w->q->dim[2], sk = w->k->dim[2];
	size_t block = (size_t)(sq * sk) * cfrt_dtype_size(w->q->t);
	if (sq == 0) { /* no queries: no contribution to dk and dv */
		zero_heads(w->dk);
		zero_heads(w->dv);
		return cfrti_end_out(ctx, t0, w->dk, w->dv, NULL);
	}
	if (!w->dq && !w->dk && !w->dv)
		return cfrti_end_out(ctx, t0, NULL, NULL, NULL);
	rc = cfrti_ws_reserve(ctx, 2 * block);
	if (rc != CFRT_OK)
		return rc;
	char *pblock = ctx->ws; /* P, then dP and dS */
	grad_gemms g = grad_setup(w, pblock, pblock + block);
	int64_t grp = w->q->dim[1] / w->k->dim[1];
	for (int64_t b = 0; rc == CFRT_OK && b < w->q->dim[0]; b++)
		for (int64_t h = 0; rc == CFRT_OK && h < w->q->dim[1]; h++)
			rc = grad_head(ctx, &g, w, b, h, h / grp, h % grp == 0);
	return rc != CFRT_OK ? rc : cfrti_end_out(ctx, t0, w->dq, w->dk, w->dv);
}
