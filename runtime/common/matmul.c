/* matmul.c: the arguments of cfrt_gemm, cfrt_matmul, cfrt_attention and
 * cfrt_attention_grad, the batch loop of cfrt_matmul, and the public
 * attention calls (on the backends' cfrti_attention and
 * cfrti_attention_grad).
 * ensures: a gemm_args that passes cfrti_gemm_check has dims and leading
 * dims that fit an int (CBLAS and cuBLAS take ints), ld >= the columns of
 * its matrix, and no null matrix that the GEMM would touch. */
#include <limits.h>

#include "common.h"

static int small(int64_t x)
{
	return x >= 0 && x <= INT_MAX;
}

static int check_shapes(cfrt_ctx *ctx, const gemm_args *g)
{
	int64_t ka = g->ta == CFRT_NOTRANS ? g->k : g->m;
	int64_t kb = g->tb == CFRT_NOTRANS ? g->n : g->k;
	if (!small(g->m) || !small(g->n) || !small(g->k) || g->batch < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "m %lld, n %lld, k %lld, batch "
		                 "%lld out of range", (long long)g->m,
		                 (long long)g->n, (long long)g->k,
		                 (long long)g->batch);
	if (!small(g->lda) || g->lda < (ka > 1 ? ka : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "lda %lld is smaller than the "
		                 "%lld columns of A", (long long)g->lda,
		                 (long long)ka);
	if (!small(g->ldb) || g->ldb < (kb > 1 ? kb : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "ldb %lld is smaller than the "
		                 "%lld columns of B", (long long)g->ldb,
		                 (long long)kb);
	if (!small(g->ldc) || g->ldc < (g->n > 1 ? g->n : 1))
		return cfrti_err(ctx, CFRT_EINVAL, "ldc %lld is smaller than the "
		                 "%lld columns of C", (long long)g->ldc,
		                 (long long)g->n);
	return CFRT_OK;
}

int cfrti_gemm_check(cfrt_ctx *ctx, const gemm_args *g)
{
	int rc = cfrti_check_dtype(ctx, g->t);
	if (rc == CFRT_OK)
		rc = cfrti_check_dtype(ctx, g->ct);
	if (rc != CFRT_OK)
		return rc;
	if ((g->ta != CFRT_NOTRANS && g->ta != CFRT_TRANS) ||
	    (g->tb != CFRT_NOTRANS && g->tb != CFRT_TRANS))
		return cfrti_err(ctx, CFRT_EINVAL, "transa/transb must be "
		                 "CFRT_NOTRANS or CFRT_TRANS");
	rc = check_shapes(ctx, g);
	if (rc != CFRT_OK)
		return rc;
	if (g->sa < 0 || g->sb < 0 || g->sc < 0 ||
	    (g->sc == 0 && g->batch > 1 && g->m * g->n > 0))
		return cfrti_err(ctx, CFRT_EINVAL, "batch strides %lld %lld %lld: "
		                 "negative, or C shared by batches",
		                 (long long)g->sa, (long long)g->sb,
		                 (long long)g->sc);
	if (g->batch > 0 && g->m * g->n > 0 &&
	    (!g->c || (g->k > 0 && (!g->a || !g->b))))
		return cfrti_err(ctx, CFRT_EINVAL, "null matrix pointer");
	return CFRT_OK;
}

/* ---- matmul ------------------------------------------------------------- */

/* The layout of the matrix in the last two dims of v (rows x cols): which
 * dim has unit stride decides the transposition, the other gives ld. */
static int mat_layout(cfrt_ctx *ctx, const cfrt_view *v, const char *what,
                      int out, cfrt_trans *tr, int64_t *ld)
{
	int64_t rows = v->dim[v->nd - 2], cols = v->dim[v->nd - 1];
	int64_t sr = v->stride[v->nd - 2], sc = v->stride[v->nd - 1];
	if (cols <= 1 || sc == 1) {
		*tr = CFRT_NOTRANS;
		*ld = rows <= 1 ? (cols > 1 ? cols : 1) : sr;
		return CFRT_OK;
	}
	if (!out && (rows <= 1 || sr == 1)) {
		*tr = CFRT_TRANS;
		*ld = cols <= 1 ? (rows > 1 ? rows : 1) : sc;
		return CFRT_OK;
	}
	return cfrti_err(ctx, CFRT_EINVAL, "matrix %s needs a unit stride in %s",
	                 what, out ? "its last dim" : "one of its last two dims");
}

/* *out = v with c's batch dims: v's own batch dims right-aligned, extent 1
 * or missing ones broadcast (stride 0). */
static int expand_batch(cfrt_ctx *ctx, const cfrt_view *v, const cfrt_view *c,
                        const char *what, cfrt_view *out)
{
	int lead = c->nd - v->nd;
	if (lead < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "%s has more dims than c", what);
	*out = *c;
	out->p = v->p;
	for (int d = 0; d < c->nd; d++) {
		int vd = d - lead;
		int mat = d >= c->nd - 2;
		out->dim[d] = mat ? v->dim[vd] : c->dim[d];
		out->stride[d] = vd < 0 || (!mat && v->dim[vd] == 1) ? 0 : v->stride[vd];
		if (!mat && vd >= 0 && v->dim[vd] != 1 && v->dim[vd] != c->dim[d])
			return cfrti_err(ctx, CFRT_EINVAL, "batch dim %d of %s does "
			                 "not match c", vd, what);
	}
	return CFRT_OK;
}

static int matmul_check(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                        const cfrt_view *b)
{
	int rc = cfrti_check_view(ctx, c, "c");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, a, "a");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, b, "b");
	if (rc != CFRT_OK)
		return rc;
	if (a->t != c->t || b->t != c->t)
		return cfrti_err(ctx, CFRT_EINVAL, "a, b and c differ in dtype");
	if (a->nd < 2 || b->nd < 2 || c->nd < 2)
		return cfrti_err(ctx, CFRT_EINVAL, "a, b and c need 2 dims or more");
	int64_t m = c->dim[c->nd - 2], n = c->dim[c->nd - 1];
	int64_t k = a->dim[a->nd - 1];
	if (a->dim[a->nd - 2] != m || b->dim[b->nd - 2] != k ||
	    b->dim[b->nd - 1] != n)
		return cfrti_err(ctx, CFRT_EINVAL, "[%lld,%lld] @ [%lld,%lld] does "
		                 "not give [%lld,%lld]", (long long)m, (long long)k,
		                 (long long)b->dim[b->nd - 2],
		                 (long long)b->dim[b->nd - 1], (long long)m,
		                 (long long)n);
	return CFRT_OK;
}

int cfrti_matmul_args(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                      const cfrt_view *b, double alpha, double beta,
                      gemm_args *g, cfrt_view *ae, cfrt_view *be)
{
	cfrt_trans tc;
	int rc = matmul_check(ctx, c, a, b);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, a, c, "a", ae);
	if (rc == CFRT_OK)
		rc = expand_batch(ctx, b, c, "b", be);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, ae, "a", 0, &g->ta, &g->lda);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, be, "b", 0, &g->tb, &g->ldb);
	if (rc == CFRT_OK)
		rc = mat_layout(ctx, c, "c", 1, &tc, &g->ldc);
	if (rc != CFRT_OK)
		return rc;
	g->t = g->ct = c->t;
	g->m = c->dim[c->nd - 2];
	g->n = c->dim[c->nd - 1];
	g->k = a->dim[a->nd - 1];
	g->alpha = alpha;
	g->beta = beta;
	return CFRT_OK;
}

/* The stride from row to row of v's dims 0 .. nd-2 (its batch dims and
 * its matrix's rows, ld apart) taken as one run of rows, or 0 when they
 * are not one: each dim of more than one index steps over a whole run of
 * the dims inside it. */
static int64_t row_run(const cfrt_view *v, int64_t ld)
{
	int64_t step = 0, span = 0;
	for (int d = v->nd - 2; d >= 0; d--) {
		int64_t s = d == v->nd - 2 ? ld : v->stride[d];
		if (v->dim[d] <= 1)
			continue;
		if (step && s != span)
			return 0;
		if (!step)
			step = s;
		span = s * v->dim[d];
	}
	return step ? step : ld;
}

void cfrti_matmul_fold(gemm_args *g, cfrt_view *c, cfrt_view *a, cfrt_view *b)
{
	int nd = c->nd;
	if (nd < 3 || g->ta != CFRT_NOTRANS)
		return;
	int64_t rows = 1;
	for (int d = 0; d < nd - 2; d++) {
		if (b->dim[d] > 1 && b->stride[d] != 0)
			return;
		rows *= c->dim[d];
	}
	rows *= g->m;
	int64_t lc = row_run(c, g->ldc), la = row_run(a, g->lda);
	if (!lc || !la || lc < g->n || la < g->k)
		return;
	g->m = rows;
	g->ldc = lc;
	g->lda = la;
	cfrt_view *v[3] = {c, a, b};
	int64_t ld[3] = {lc, la, b->stride[nd - 2]};
	for (int i = 0; i < 3; i++) {
		v[i]->dim[0] = i == 2 ? v[i]->dim[nd - 2] : rows;
		v[i]->stride[0] = ld[i];
		v[i]->dim[1] = v[i]->dim[nd - 1];
		v[i]->stride[1] = v[i]->stride[nd - 1];
		v[i]->nd = 2;
	}
}

void cfrti_matmul_batch(gemm_args *g, const cfrt_view *c, const cfrt_view *a,
                        const cfrt_view *b)
{
	int ib = c->nd - 3;
	g->a = a->p;
	g->b = b->p;
	g->c = c->p;
	g->batch = ib >= 0 ? c->dim[ib] : 1;
	g->sa = ib >= 0 ? a->stride[ib] : 0;
	g->sb = ib >= 0 ? b->stride[ib] : 0;
	g->sc = ib >= 0 ? c->stride[ib] : 0;
}

int cfrti_matmul_run(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                     const cfrt_view *a, const cfrt_view *b)
{
	int ib = c->nd - 3, rc = CFRT_OK;
	cfrt_view cb = *c, ab = *a, bb = *b;
	const char *cin = g->cin; /* an addend laid out as c, from c's start */
	if (ib < 0)
		return cfrti_gemm_run(ctx, g);
	cb.nd = ab.nd = bb.nd = ib + 1;
	for (int64_t l = 0; rc == CFRT_OK && l < cfrti_line_count(&cb, ib); l++) {
		g->a = cfrti_line_at(&ab, &cb, ib, l);
		g->b = cfrti_line_at(&bb, &cb, ib, l);
		g->c = cfrti_line_at(&cb, &cb, ib, l);
		if (cin)
			g->cin = cin + ((char *)g->c - (char *)c->p);
		rc = cfrti_gemm_run(ctx, g);
	}
	return rc;
}

/* ---- attention ---------------------------------------------------------- */

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
		rc = check_4d(ctx, out, "out", q->t);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, out, q, "out", "q");
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, v, k, "v", "k");
	if (rc != CFRT_OK)
		return rc;
	if (k->dim[0] != q->dim[0] || k->dim[1] < 1 ||
	    q->dim[1] % k->dim[1] != 0 || k->dim[3] != q->dim[3] ||
	    q->dim[3] < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q [%lld,%lld,_,%lld] and k "
		                 "[%lld,%lld,_,%lld] disagree on B or Dh, or k's "
		                 "heads do not divide q's",
		                 (long long)q->dim[0], (long long)q->dim[1],
		                 (long long)q->dim[3], (long long)k->dim[0],
		                 (long long)k->dim[1], (long long)k->dim[3]);
	return CFRT_OK;
}

/* The log-sum-exp rows of q (NULL: none): [B,H,Sq] of CFRT_LSE_TYPE. */
static int check_lse(cfrt_ctx *ctx, const cfrt_view *lse, const cfrt_view *q)
{
	int rc = lse ? cfrti_check_view(ctx, lse, "lse") : CFRT_OK;
	if (rc != CFRT_OK || !lse)
		return rc;
	if (lse->nd != 3 || lse->t != CFRT_LSE_TYPE(q->t) ||
	    lse->dim[0] != q->dim[0] || lse->dim[1] != q->dim[1] ||
	    lse->dim[2] != q->dim[2])
		return cfrti_err(ctx, CFRT_EINVAL, "lse must be a 3-d view "
		                 "[%lld,%lld,%lld] (q's B, H, Sq) of %s",
		                 (long long)q->dim[0], (long long)q->dim[1],
		                 (long long)q->dim[2],
		                 q->t == CFRT_F64 ? "f64" : "f32");
	return CFRT_OK;
}

int cfrti_attn_check(cfrt_ctx *ctx, const cfrt_view *out,
                     const cfrt_view *lse, const cfrt_view *q,
                     const cfrt_view *k, const cfrt_view *v, int64_t q_offset)
{
	int rc = check_qkv(ctx, out, q, k, v);
	if (rc != CFRT_OK)
		return rc;
	if (q_offset < 0 || k->dim[2] < 1)
		return cfrti_err(ctx, CFRT_EINVAL, "q_offset %lld is negative or "
		                 "there are no keys", (long long)q_offset);
	return check_lse(ctx, lse, q);
}

/* A gradient view: a [B,H,S,Dh] view of like's dims and dtype with a unit
 * stride in its last dim. */
static int check_grad(cfrt_ctx *ctx, const cfrt_view *g, const cfrt_view *like,
                      const char *what, const char *like_name)
{
	int rc = check_4d(ctx, g, what, like->t);
	return rc != CFRT_OK ? rc : cfrti_check_same(ctx, g, like, what,
	                                             like_name);
}

int cfrti_attn_grad_check(cfrt_ctx *ctx, const cfrt_view *dq,
                          const cfrt_view *dk, const cfrt_view *dv,
                          const cfrt_view *q, const cfrt_view *k,
                          const cfrt_view *v, const cfrt_view *out,
                          const cfrt_view *dout, const cfrt_view *lse,
                          int64_t q_offset)
{
	int rc = cfrti_attn_check(ctx, out, lse, q, k, v, q_offset);
	if (rc == CFRT_OK)
		rc = check_grad(ctx, dout, out, "dout", "out");
	if (rc == CFRT_OK && dq)
		rc = check_grad(ctx, dq, q, "dq", "q");
	if (rc == CFRT_OK && dk)
		rc = check_grad(ctx, dk, k, "dk", "k");
	if (rc == CFRT_OK && dv)
		rc = check_grad(ctx, dv, v, "dv", "v");
	return rc;
}

/* Any value >= Dh when S <= 1. */
int64_t cfrti_head_ld(const cfrt_view *v)
{
	return v->dim[2] > 1 ? v->stride[2] : v->dim[3];
}

char *cfrti_head_at(const cfrt_view *v, int64_t b, int64_t h)
{
	int64_t off = b * v->stride[0] + h * v->stride[1];
	return (char *)v->p + off * (int64_t)cfrt_dtype_size(v->t);
}

/* The public attention calls, on the backend's hooks. */
int cfrt_attention(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                   const cfrt_view *k, const cfrt_view *v, int causal,
                   int64_t q_offset)
{
	cfrti_attn a = {"cfrt_attention", q, k, v, out, NULL, NULL, NULL, NULL,
	                NULL, causal, q_offset};
	return cfrti_attention(ctx, &a);
}

int cfrt_attention_lse(cfrt_ctx *ctx, const cfrt_view *out,
                       const cfrt_view *lse, const cfrt_view *q,
                       const cfrt_view *k, const cfrt_view *v, int causal,
                       int64_t q_offset)
{
	cfrti_attn a = {"cfrt_attention_lse", q, k, v, out, lse, NULL, NULL,
	                NULL, NULL, causal, q_offset};
	return cfrti_attention(ctx, &a);
}

int cfrt_attention_grad(cfrt_ctx *ctx, const cfrt_view *dq,
                        const cfrt_view *dk, const cfrt_view *dv,
                        const cfrt_view *q, const cfrt_view *k,
                        const cfrt_view *v, const cfrt_view *out,
                        const cfrt_view *dout, int causal, int64_t q_offset)
{
	cfrti_attn a = {"cfrt_attention_grad", q, k, v, out, NULL, dq, dk, dv,
	                dout, causal, q_offset};
	return cfrti_attention_grad(ctx, &a);
}

int cfrt_attention_grad_lse(cfrt_ctx *ctx, const cfrt_view *dq,
                            const cfrt_view *dk, const cfrt_view *dv,
                            const cfrt_view *q, const cfrt_view *k,
                            const cfrt_view *v, const cfrt_view *out,
                            const cfrt_view *dout, const cfrt_view *lse,
                            int causal, int64_t q_offset)
{
	cfrti_attn a = {"cfrt_attention_grad_lse", q, k, v, out, lse, dq, dk,
	                dv, dout, causal, q_offset};
	return cfrti_attention_grad(ctx, &a);
}
