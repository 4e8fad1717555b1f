/* gqa_check.c: grouped-query attention (k and v with fewer heads than q)
 * against the same attention with each key/value head repeated for its
 * query heads, forward and backward, through the runtime's API alone: on
 * the CUDA backend in bf16 (cuDNN's fused attention, CFRT_ATTN=cudnn, the
 * fused kernels, CFRT_ATTN=flash, and the GEMM path, CFRT_ATTN=gemm) and f32 (the GEMM path), on the MPI backend
 * in f32 and f64. out and dq must equal those of the repeated heads; the
 * dk and dv of a key/value head the sum of its repeats' (summed here in
 * double). Errors as max |got - want| / max |want| per tensor; a wrong
 * head mapping gives errors of order 1. The same through the saved
 * log-sum-exp: cfrt_attention_lse's out must be cfrt_attention's bit for
 * bit and its lse that of the repeated heads, and cfrt_attention_grad_lse
 * from it must give the repeated heads' dq, dk and dv as the recomputing
 * backward does (errors "lse ..."). Run under mpirun -n 1; prints one
 * line per case and "gqa_check: all ok" or "MISMATCH". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cfrt.h"

typedef struct gcase {
	int64_t b, h, hk, sq, sk, dh, q_offset;
	int causal;
} gcase;

static const gcase cases[] = {
	{2, 8, 2, 256, 256, 64, 0, 1},
	{1, 8, 1, 96, 256, 128, 160, 1}, /* multi-query, a query slice */
	{2, 4, 2, 100, 100, 64, 0, 0},   /* odd rows, no mask */
	{1, 6, 3, 64, 64, 32, 0, 1},
};

/* Element i of a host buffer of type t as a double. */
static double elem(const void *h, cfrt_dtype t, int64_t i)
{
	if (t == CFRT_F64)
		return ((const double *)h)[i];
	if (t == CFRT_F32)
		return ((const float *)h)[i];
	uint32_t u = (uint32_t)((const uint16_t *)h)[i] << 16; /* bf16 */
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* A contiguous [b,h,s,dh] tensor on the device: its buffer and view;
 * with dh 0, the [b,h,s] log-sum-exp of a query tensor of type t. */
typedef struct tens {
	void *p;
	cfrt_view v;
	int64_t n;
} tens;

static tens tens_new(cfrt_ctx *ctx, cfrt_dtype t, const gcase *c, int64_t h,
                     int64_t s, uint64_t seed)
{
	tens x = {NULL, {0}, c->b * h * s * c->dh};
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x.p, (size_t)x.n * cfrt_dtype_size(t)));
	x.v = cfrt_view_contig(x.p, t, 4, (int64_t[]){c->b, h, s, c->dh});
	if (seed)
		CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &x.v, seed));
	return x;
}

static tens lse_new(cfrt_ctx *ctx, cfrt_dtype t, const gcase *c)
{
	gcase one = *c;
	one.dh = 1;
	tens x = tens_new(ctx, CFRT_LSE_TYPE(t), &one, c->h, c->sq, 0);
	x.v.nd = 3;
	return x;
}

/* Do two tensors hold the same bytes? */
static int same(cfrt_ctx *ctx, const tens *a, const tens *b)
{
	size_t n = (size_t)a->n * cfrt_dtype_size(a->v.t);
	char *x = malloc(n), *y = malloc(n);
	CFRT_TRY(ctx, cfrt_sync(ctx));
	CFRT_TRY(ctx, cfrt_download(ctx, x, a->p, n));
	CFRT_TRY(ctx, cfrt_download(ctx, y, b->p, n));
	int eq = !memcmp(x, y, n);
	free(x);
	free(y);
	return eq;
}

/* The tensor's elements as doubles (a new array). */
static double *host(cfrt_ctx *ctx, const tens *x)
{
	size_t es = cfrt_dtype_size(x->v.t);
	void *h = malloc((size_t)x->n * es);
	double *d = malloc(sizeof(double) * (size_t)x->n);
	CFRT_TRY(ctx, cfrt_sync(ctx));
	CFRT_TRY(ctx, cfrt_download(ctx, h, x->p, (size_t)x->n * es));
	for (int64_t i = 0; i < x->n; i++)
		d[i] = elem(h, x->v.t, i);
	free(h);
	return d;
}

/* r = x [b,hk,s,dh] with head j repeated h / hk times. */
static void repeat(cfrt_ctx *ctx, const tens *r, const tens *x, int64_t h, int64_t hk)
{
	for (int64_t i = 0; i < h; i++) {
		cfrt_view d = cfrt_view_slice(r->v, 1, i, 1);
		cfrt_view s = cfrt_view_slice(x->v, 1, i / (h / hk), 1);
		CFRT_TRY(ctx, cfrt_copy(ctx, &d, &s));
	}
}

/* max |got - want| / max |want|; want of the repeated heads summed over
 * each group when grp > 1 (dk, dv). */
static double err(const double *got, const double *rep, const gcase *c, int64_t hk,
                  int grp)
{
	int64_t per = (grp ? c->sk : c->sq) * c->dh, nh = grp ? hk : c->h;
	double num = 0, den = 0;
	for (int64_t b = 0; b < c->b; b++)
		for (int64_t h = 0; h < nh; h++)
			for (int64_t e = 0; e < per; e++) {
				double w = 0;
				int64_t g = grp ? c->h / hk : 1;
				for (int64_t j = 0; j < g; j++)
					w += rep[(b * c->h + h * g + j) * per + e];
				num = fmax(num, fabs(got[(b * nh + h) * per + e] - w));
				den = fmax(den, fabs(w));
			}
	return den > 0 ? num / den : num;
}

static int run(cfrt_ctx *ctx, const gcase *c, cfrt_dtype t, const char *mode, double tol)
{
	setenv("CFRT_ATTN", mode, 1);
	tens q = tens_new(ctx, t, c, c->h, c->sq, 1), k = tens_new(ctx, t, c, c->hk, c->sk, 2);
	tens v = tens_new(ctx, t, c, c->hk, c->sk, 3), g = tens_new(ctx, t, c, c->h, c->sq, 4);
	tens kr = tens_new(ctx, t, c, c->h, c->sk, 0), vr = tens_new(ctx, t, c, c->h, c->sk, 0);
	tens o = tens_new(ctx, t, c, c->h, c->sq, 0), orp = tens_new(ctx, t, c, c->h, c->sq, 0);
	tens dq = tens_new(ctx, t, c, c->h, c->sq, 0), dqr = tens_new(ctx, t, c, c->h, c->sq, 0);
	tens dk = tens_new(ctx, t, c, c->hk, c->sk, 0), dv = tens_new(ctx, t, c, c->hk, c->sk, 0);
	tens dkr = tens_new(ctx, t, c, c->h, c->sk, 0), dvr = tens_new(ctx, t, c, c->h, c->sk, 0);
	tens ol = tens_new(ctx, t, c, c->h, c->sq, 0), l = lse_new(ctx, t, c);
	tens lr = lse_new(ctx, t, c), olr = tens_new(ctx, t, c, c->h, c->sq, 0);
	tens dql = tens_new(ctx, t, c, c->h, c->sq, 0), dkl = tens_new(ctx, t, c, c->hk, c->sk, 0);
	tens dvl = tens_new(ctx, t, c, c->hk, c->sk, 0);
	tens *all[] = {&q, &k, &v, &g, &kr, &vr, &o, &orp, &dq, &dqr, &dk, &dv, &dkr, &dvr,
	               &ol, &l, &lr, &olr, &dql, &dkl, &dvl};
	repeat(ctx, &kr, &k, c->h, c->hk);
	repeat(ctx, &vr, &v, c->h, c->hk);
	CFRT_TRY(ctx, cfrt_attention(ctx, &o.v, &q.v, &k.v, &v.v, c->causal, c->q_offset));
	CFRT_TRY(ctx, cfrt_attention(ctx, &orp.v, &q.v, &kr.v, &vr.v, c->causal, c->q_offset));
	CFRT_TRY(ctx, cfrt_attention_grad(ctx, &dq.v, &dk.v, &dv.v, &q.v, &k.v, &v.v, &o.v, &g.v,
	                                  c->causal, c->q_offset));
	CFRT_TRY(ctx, cfrt_attention_grad(ctx, &dqr.v, &dkr.v, &dvr.v, &q.v, &kr.v, &vr.v,
	                                  &orp.v, &g.v, c->causal, c->q_offset));
	CFRT_TRY(ctx, cfrt_attention_lse(ctx, &ol.v, &l.v, &q.v, &k.v, &v.v, c->causal,
	                                 c->q_offset));
	CFRT_TRY(ctx, cfrt_attention_lse(ctx, &olr.v, &lr.v, &q.v, &kr.v, &vr.v, c->causal,
	                                 c->q_offset));
	CFRT_TRY(ctx, cfrt_attention_grad_lse(ctx, &dql.v, &dkl.v, &dvl.v, &q.v, &k.v, &v.v,
	                                      &ol.v, &g.v, &l.v, c->causal, c->q_offset));
	const tens *got[7] = {&o, &dq, &dk, &dv, &dql, &dkl, &dvl};
	const tens *rep[7] = {&orp, &dqr, &dkr, &dvr, &dqr, &dkr, &dvr};
	static const int grp[7] = {0, 0, 1, 1, 0, 1, 1}; /* dk, dv: group sums */
	double e[8], worst = 0;
	for (int i = 0; i < 7; i++) {
		double *a = host(ctx, got[i]), *b = host(ctx, rep[i]);
		e[i] = err(a, b, c, c->hk, grp[i]);
		worst = fmax(worst, e[i]);
		free(a);
		free(b);
	}
	double *a = host(ctx, &l), *b = host(ctx, &lr);
	gcase flat = *c;
	flat.dh = 1;
	e[7] = err(a, b, &flat, c->hk, 0);
	free(a);
	free(b);
	int eq = same(ctx, &o, &ol), bad = !(worst <= tol) || !(e[7] <= tol) || !eq;
	printf("gqa_check: %s %s B=%lld H=%lld Hk=%lld Sq=%lld Sk=%lld Dh=%lld q_offset=%lld "
	       "causal=%d: out %.3g dq %.3g dk %.3g dv %.3g; lse %.3g, its out %s, dq %.3g "
	       "dk %.3g dv %.3g (tol %.0e)%s\n",
	       t == CFRT_BF16 ? "bf16" : t == CFRT_F32 ? "f32" : "f64", mode, (long long)c->b,
	       (long long)c->h, (long long)c->hk, (long long)c->sq, (long long)c->sk,
	       (long long)c->dh, (long long)c->q_offset, c->causal, e[0], e[1], e[2], e[3],
	       e[7], eq ? "the same" : "DIFFERENT", e[4], e[5], e[6], tol,
	       bad ? " MISMATCH" : "");
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, all[i]->p));
	return bad;
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int bad = 0, gpu = argc > 1 && !strcmp(argv[1], "--gpu");
	MPI_Init(&argc, &argv);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, 1, "gqa_check"));
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (gpu) {
			bad += run(ctx, &cases[i], CFRT_BF16, "cudnn", 2e-2);
			bad += run(ctx, &cases[i], CFRT_BF16, "flash", 2e-2);
			bad += run(ctx, &cases[i], CFRT_BF16, "gemm", 2e-2);
			bad += run(ctx, &cases[i], CFRT_F32, "gemm", 1e-5);
		} else {
			bad += run(ctx, &cases[i], CFRT_F32, "-", 1e-5);
			bad += run(ctx, &cases[i], CFRT_F64, "-", 1e-12);
		}
	}
	printf("gqa_check: %s\n", bad ? "MISMATCH" : "all ok");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return bad ? 1 : 0;
}
