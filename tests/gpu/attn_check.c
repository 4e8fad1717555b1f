/* attn_check: cfrt_attention and cfrt_attention_grad on one GPU, cuDNN's
 * fused attention (CFRT_ATTN=cudnn, by name: a shape cuDNN should take
 * and refuses is an error) and the fused kernels (CFRT_ATTN=flash)
 * against the GEMM path (CFRT_ATTN=gemm) and,
 * for the smaller cases, a double-precision reference on the host from the
 * same rounded inputs (the backward's: q, k, v, dout and the forward's
 * out as the GPU rounded it). The cases cover Dh 16 to 128 (and Dh 8 and
 * misaligned rows, which have no fused kernel: both paths are then the
 * GEMM path; f32 has none either), sequence lengths that are not
 * multiples of the kernels' blocks, causal and not, query split (q, out,
 * dout and dq rows q_offset.. of the whole sequence, Sq < Sk: dk and dv
 * are then that slice's part; a quarter of 4096 queries at each offset),
 * heads interleaved in [B,S,H*Dh], and
 * peaked softmaxes (q scaled by 8). The kernels must not write outside
 * out's, dq's, dk's and dv's views; gradients passed as NULL are not
 * written, and the others are those of the full call. The saved
 * log-sum-exp: cfrt_attention_lse on both paths leaves out as
 * cfrt_attention does, bit for bit, and its lse agrees across the paths
 * and with the double reference; cfrt_attention_grad_lse from the fused
 * forward's lse agrees on both paths with the recomputing backward and
 * with the reference. Then the benchmark shape (B=16, H=8, S=4096,
 * Dh=128, causal, bf16): median of 20 calls of each path, forward and
 * backward (the backward also from the saved lse), bracketed by
 * cfrt_wtime (which
 * synchronises the compute stream; the stream is private, so no cudaEvent
 * can be put on it from here).
 * Prints "attn_check: CASE: ... ok" (or MISMATCH) per case (the
 * backward's as "grad CASE") and "attn_check: all ok" at the end; exits 1
 * on any mismatch. Run it under mpirun -n 1
 * (mpirun --allow-run-as-root -n 1 attn_check [--no-bench]); with
 * --no-cudnn (a build without cuDNN) it checks only that CFRT_ATTN=cudnn
 * fails there with CFRT_ENOTSUP. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "median.h"

/* max |x - y| / max |y|: u = 2^-9 for bf16, see run.sh; the backward's
 * roundings of P and dS to bf16 gave ~4e-3 in a host model of the kernel;
 * f32 (no TF32) differs by the order of its sums only (~2e-6 modelled). */
#define TOL 1e-2
#define TOL_F32 1e-5
/* the lse (f32 from f32 sums on every path) against the double reference,
 * relative to its largest value: leaving out one key of a thousand
 * shifts a row by ~1e-3 */
#define TOL_LSE 1e-4
#define REPS 20

enum layout { HEADS, INTERLEAVED, PADDED }; /* [B,H,S,Dh], [B,S,H*Dh](+4) */

typedef struct acase {
	const char *name;
	cfrt_dtype t;
	int64_t b, h, sq, sk, dh, q_offset; /* q, out: rows q_offset.. of Sk */
	int causal, layout, sharp, ref;
} acase;

static const acase cases[] = {
	{"bf16 Dh64 S1000 causal", CFRT_BF16, 2, 4, 1000, 1000, 64, 0, 1,
	 HEADS, 0, 1},
	{"bf16 Dh128 S1000 full [B,S,D]", CFRT_BF16, 2, 4, 1000, 1000, 128, 0,
	 0, INTERLEAVED, 0, 1},
	{"bf16 Dh16 S1000 causal [B,S,D] sharp", CFRT_BF16, 2, 3, 1000, 1000,
	 16, 0, 1, INTERLEAVED, 1, 1},
	{"bf16 Dh128 q 700..999 of 1000 causal [B,S,D]", CFRT_BF16, 1, 4, 300,
	 1000, 128, 700, 1, INTERLEAVED, 0, 1},
	{"f16 Dh64 q 300..499 of 1000 causal sharp", CFRT_F16, 2, 2, 200, 1000,
	 64, 300, 1, HEADS, 1, 1},
	{"f16 Dh48 q 100..176 of 333 full [B,S,D]", CFRT_F16, 2, 2, 77, 333,
	 48, 100, 0, INTERLEAVED, 0, 1},
	{"f16 Dh128 S513 causal sharp", CFRT_F16, 1, 2, 513, 513, 128, 0, 1,
	 HEADS, 1, 1},
	{"bf16 Dh96 S130 causal [B,S,D]", CFRT_BF16, 1, 2, 130, 130, 96, 0, 1,
	 INTERLEAVED, 0, 1},
	{"bf16 Dh32 q 64..191 of 200 causal", CFRT_BF16, 1, 3, 128, 200, 32, 64,
	 1, HEADS, 0, 1},
	{"bf16 Dh128 Sq1 at 999 of 1000 causal [B,S,D]", CFRT_BF16, 4, 8, 1,
	 1000, 128, 999, 1, INTERLEAVED, 0, 1},
	{"bf16 Dh8 S100 causal (GEMM path)", CFRT_BF16, 1, 2, 100, 100, 8, 0, 1,
	 HEADS, 0, 1},
	{"bf16 Dh64 rows H*Dh+4 causal (GEMM path)", CFRT_BF16, 1, 2, 100, 100,
	 64, 0, 1, PADDED, 0, 1},
	{"bf16 Dh128 q 1024..2047 of 4096 causal [B,S,D]", CFRT_BF16, 1, 2,
	 1024, 4096, 128, 1024, 1, INTERLEAVED, 0, 1},
	{"f16 Dh128 q 3072..4095 of 4096 causal", CFRT_F16, 1, 2, 1024, 4096,
	 128, 3072, 1, HEADS, 0, 1},
	{"f16 Dh64 q 512..767 of 1024 causal [B,S,D] sharp", CFRT_F16, 2, 4, 256,
	 1024, 64, 512, 1, INTERLEAVED, 1, 1},
	{"f32 Dh64 q 300..499 of 1000 causal", CFRT_F32, 2, 2, 200, 1000, 64,
	 300, 1, HEADS, 0, 1},
	{"f32 Dh48 S333 full [B,S,D] sharp", CFRT_F32, 1, 3, 333, 333, 48, 0, 0,
	 INTERLEAVED, 1, 1},
	{"bf16 Dh128 S4096 B16 H8 causal [B,S,D]", CFRT_BF16, 16, 8, 4096, 4096,
	 128, 0, 1, INTERLEAVED, 0, 0},
};

static double tol(cfrt_dtype t)
{
	return t == CFRT_F32 ? TOL_F32 : TOL;
}

/* q, k, v, out of a case: buffers of Sk rows each, out's a second time
 * (its initial contents), and the views; the [B,H,Sq] f32 log-sum-exp
 * of cfrt_attention_lse. */
typedef struct qkv {
	void *buf[4], *lbuf;
	int64_t n; /* elements per buffer */
	cfrt_view q, k, v, o, l;
} qkv;

/* Element i of a host copy of a buffer of type t. */
static double to_double(const void *h, cfrt_dtype t, int64_t i)
{
	if (t == CFRT_F32)
		return ((const float *)h)[i];
	uint32_t x = ((const uint16_t *)h)[i];
	if (t == CFRT_BF16) {
		uint32_t u = x << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	int e = (int)(x >> 10 & 31), m = (int)(x & 1023);
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
	                                 : ldexp(m + 1024, e - 25);
	return x >> 15 ? -v : v;
}

/* [B,H,rows,Dh] at p in the case's layout. */
static cfrt_view layout_view(void *p, const acase *c, int64_t rows)
{
	int64_t d = c->h * c->dh;
	if (c->layout == HEADS)
		return cfrt_view_contig(p, c->t, 4,
		                        (int64_t[]){c->b, c->h, rows, c->dh});
	cfrt_view v = cfrt_view_contig(p, c->t, 3, (int64_t[]){c->b, rows,
		d + (c->layout == PADDED ? 4 : 0)});
	v = cfrt_view_split(cfrt_view_slice(v, 2, 0, d), 2, c->h, c->dh);
	return cfrt_view_permute(v, (const int[]){0, 2, 1, 3});
}

static int64_t row_elems(const acase *c)
{
	return c->h * c->dh + (c->layout == PADDED ? 4 : 0);
}

static void make_qkv(cfrt_ctx *ctx, const acase *c, qkv *x)
{
	x->n = c->b * c->sk * row_elems(c);
	size_t bytes = (size_t)x->n * cfrt_dtype_size(c->t);
	for (int i = 0; i < 4; i++) {
		CFRT_TRY(ctx, cfrt_alloc(ctx, &x->buf[i], bytes));
		cfrt_view all = cfrt_view_contig(x->buf[i], c->t, 1, &x->n);
		CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, (uint64_t)i + 1));
		if (i == 0 && c->sharp)
			CFRT_TRY(ctx, cfrt_scale(ctx, &all, &all, 8.0));
	}
	x->q = cfrt_view_slice(layout_view(x->buf[0], c, c->sk), 2,
	                       c->q_offset, c->sq);
	x->k = layout_view(x->buf[1], c, c->sk);
	x->v = layout_view(x->buf[2], c, c->sk);
	x->o = cfrt_view_slice(layout_view(x->buf[3], c, c->sk), 2,
	                       c->q_offset, c->sq);
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x->lbuf, (size_t)(c->b * c->h * c->sq) *
	                         sizeof(float)));
	x->l = cfrt_view_contig(x->lbuf, CFRT_F32, 3,
	                        (int64_t[]){c->b, c->h, c->sq});
}

static void free_qkv(cfrt_ctx *ctx, qkv *x)
{
	for (int i = 0; i < 4; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, x->buf[i]));
	CFRT_TRY(ctx, cfrt_free(ctx, x->lbuf));
}

static int attend(cfrt_ctx *ctx, const char *mode, const acase *c,
                  const qkv *x)
{
	setenv("CFRT_ATTN", mode, 1);
	return cfrt_attention(ctx, &x->o, &x->q, &x->k, &x->v, c->causal,
	                      c->q_offset);
}

/* attend, also writing the lse into x->l. */
static int attend_lse(cfrt_ctx *ctx, const char *mode, const acase *c,
                      const qkv *x)
{
	setenv("CFRT_ATTN", mode, 1);
	return cfrt_attention_lse(ctx, &x->o, &x->l, &x->q, &x->k, &x->v,
	                          c->causal, c->q_offset);
}

/* Element offset of [b,h,i,d] of v in its buffer base. */
static int64_t at(const cfrt_view *v, const void *base, int64_t b, int64_t h,
                  int64_t i, int64_t d)
{
	return ((const char *)v->p - (const char *)base) /
	       (int64_t)cfrt_dtype_size(v->t) + b * v->stride[0] +
	       h * v->stride[1] + i * v->stride[2] + d * v->stride[3];
}

/* out of the case in double, [B,H,Sq,Dh] dense, from host copies; its
 * log-sum-exp, [B,H,Sq], into lse. */
static double *reference(const acase *c, const qkv *x, void *h[3], double *lse)
{
	int64_t dh = c->dh;
	double *r = calloc((size_t)(c->b * c->h * c->sq * dh), sizeof *r);
	double *p = malloc((size_t)c->sk * sizeof *p);
	double *qi = malloc((size_t)dh * sizeof *qi);
	for (int64_t b = 0; b < c->b; b++)
	for (int64_t hh = 0; hh < c->h; hh++)
	for (int64_t i = 0; i < c->sq; i++) {
		int64_t nk = c->causal && c->q_offset + i + 1 < c->sk ?
		             c->q_offset + i + 1 : c->sk;
		double m = -INFINITY, sum = 0;
		for (int64_t d = 0; d < dh; d++)
			qi[d] = to_double(h[0], c->t, at(&x->q, x->buf[0], b, hh, i, d));
		for (int64_t j = 0; j < nk; j++) {
			double s = 0;
			int64_t kj = at(&x->k, x->buf[1], b, hh, j, 0);
			for (int64_t d = 0; d < dh; d++)
				s += qi[d] * to_double(h[1], c->t, kj + d);
			p[j] = s / sqrt((double)dh);
			m = fmax(m, p[j]);
		}
		for (int64_t j = 0; j < nk; j++)
			sum += p[j] = exp(p[j] - m);
		lse[(b * c->h + hh) * c->sq + i] = m + log(sum);
		double *o = r + ((b * c->h + hh) * c->sq + i) * dh;
		for (int64_t j = 0; j < nk; j++) {
			int64_t vj = at(&x->v, x->buf[2], b, hh, j, 0);
			for (int64_t d = 0; d < dh; d++)
				o[d] += p[j] / sum * to_double(h[2], c->t, vj + d);
		}
	}
	free(p);
	free(qi);
	return r;
}

/* max |got - want| / max |want| over view v (in buffer base, host copies
 * got and want); want NULL: the dense [B,H,S,Dh] reference ref. */
static double rel_err(const cfrt_view *v, const void *base, const void *got,
                      const void *want, const double *ref)
{
	double e = 0, w = 0;
	int64_t n = v->dim[0] * v->dim[1] * v->dim[2] * v->dim[3];
	for (int64_t r = 0; r < n; r++) {
		int64_t d = r % v->dim[3], i = r / v->dim[3] % v->dim[2];
		int64_t h = r / v->dim[3] / v->dim[2] % v->dim[1];
		int64_t o = at(v, base, r / v->dim[3] / v->dim[2] / v->dim[1], h, i, d);
		double y = want ? to_double(want, v->t, o) : ref[r];
		double dif = fabs(to_double(got, v->t, o) - y);
		e = isnan(dif) ? INFINITY : fmax(e, dif); /* NaN on either side */
		w = fmax(w, fabs(y));
	}
	return e / (w > 0 ? w : 1);
}

/* Elements of buffer base (n elements) outside view v that differ from
 * before (host copies got and before). */
static int64_t clobbered(const cfrt_view *v, const void *base, int64_t n,
                         const void *got, const void *before)
{
	char *in = calloc((size_t)n, 1);
	size_t es = cfrt_dtype_size(v->t);
	int64_t bad = 0;
	for (int64_t b = 0; b < v->dim[0]; b++)
	for (int64_t h = 0; h < v->dim[1]; h++)
	for (int64_t i = 0; i < v->dim[2]; i++)
		memset(in + at(v, base, b, h, i, 0), 1, (size_t)v->dim[3]);
	for (int64_t i = 0; i < n; i++)
		bad += !in[i] && memcmp((const char *)got + i * (int64_t)es,
		                        (const char *)before + i * (int64_t)es, es);
	free(in);
	return bad;
}

static void *download(cfrt_ctx *ctx, const void *buf, int64_t n, cfrt_dtype t)
{
	void *h = malloc((size_t)n * cfrt_dtype_size(t));
	CFRT_TRY(ctx, cfrt_download(ctx, h, buf, (size_t)n * cfrt_dtype_size(t)));
	return h;
}

/* max |got - want| / max |want| of n f32 values against want (f32), or
 * against ref (double) when want is NULL. */
static double lse_err(const float *got, const float *want, const double *ref,
                      int64_t n)
{
	double e = 0, w = 0;
	for (int64_t i = 0; i < n; i++) {
		double y = want ? want[i] : ref[i], dif = fabs(got[i] - y);
		e = isnan(dif) ? INFINITY : fmax(e, dif);
		w = fmax(w, fabs(y));
	}
	return e / (w > 0 ? w : 1);
}

/* The paths compared: each against gemm (G) and the reference. */
static const char *const modes[] = {"flash", "gemm", "cudnn"};
enum { NM = 3, G = 1 };

/* The forward with the lse on every path: out the same values as the
 * plain call's on that path (host copies plain[m]), the lse of each path
 * against gemm's and against ref (NULL: none); 1 on a mismatch. */
static int run_lse(cfrt_ctx *ctx, const acase *c, const qkv *x,
                   void *const plain[NM], const double *ref)
{
	int64_t nl = c->b * c->h * c->sq;
	float *l[NM];
	int same = 1;
	double eg[NM] = {0}, er = 0;
	for (int m = 0; m < NM; m++) {
		CFRT_TRY(ctx, attend_lse(ctx, modes[m], c, x));
		void *o = download(ctx, x->buf[3], x->n, c->t);
		same &= rel_err(&x->o, x->buf[3], o, plain[m], NULL) == 0;
		free(o);
		l[m] = download(ctx, x->lbuf, nl, CFRT_F32);
	}
	int ok = same;
	for (int m = 0; m < NM; m++) {
		eg[m] = lse_err(l[m], l[G], NULL, nl);
		if (ref)
			er = fmax(er, lse_err(l[m], NULL, ref, nl));
		ok &= eg[m] <= TOL_LSE;
	}
	ok &= er <= TOL_LSE;
	printf("attn_check: lse %s: out %s the plain call's, lse flash cudnn "
	       "vs gemm %.2e %.2e", c->name, same ? "is" : "is NOT", eg[0],
	       eg[2]);
	if (ref)
		printf(", vs double reference %.2e", er);
	printf(": %s\n", ok ? "ok" : "MISMATCH");
	for (int m = 0; m < NM; m++)
		free(l[m]);
	return !ok;
}

/* Runs a case; 0 when every path (and the reference) agree with gemm
 * and none writes outside out (each starts from other contents). */
static int run_case(cfrt_ctx *ctx, const acase *c)
{
	qkv x;
	void *got[NM];
	int64_t bad = 0;
	double eg[NM], er = 0;
	make_qkv(ctx, c, &x);
	cfrt_view all = cfrt_view_contig(x.buf[3], c->t, 1, &x.n);
	for (int m = 0; m < NM; m++) {
		CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, 99 + (uint64_t)m));
		void *before = download(ctx, x.buf[3], x.n, c->t);
		CFRT_TRY(ctx, attend(ctx, modes[m], c, &x));
		got[m] = download(ctx, x.buf[3], x.n, c->t);
		bad += clobbered(&x.o, x.buf[3], x.n, got[m], before);
		free(before);
	}
	for (int m = 0; m < NM; m++)
		eg[m] = rel_err(&x.o, x.buf[3], got[m], got[G], NULL);
	double *lref = malloc((size_t)(c->b * c->h * c->sq) * sizeof *lref);
	if (c->ref) {
		void *h[3];
		for (int i = 0; i < 3; i++)
			h[i] = download(ctx, x.buf[i], x.n, c->t);
		double *ref = reference(c, &x, h, lref);
		for (int m = 0; m < NM; m++)
			er = fmax(er, rel_err(&x.o, x.buf[3], got[m], NULL, ref));
		free(ref);
		for (int i = 0; i < 3; i++)
			free(h[i]);
	}
	int lbad = run_lse(ctx, c, &x, got, c->ref ? lref : NULL);
	free(lref);
	int ok = eg[0] <= tol(c->t) && eg[2] <= tol(c->t) && er <= tol(c->t) &&
	         bad == 0;
	printf("attn_check: %s: flash cudnn vs gemm %.2e %.2e", c->name, eg[0],
	       eg[2]);
	if (c->ref)
		printf(", vs double reference %.2e", er);
	printf(", %lld written outside out: %s\n", (long long)bad,
	       ok ? "ok" : "MISMATCH");
	for (int m = 0; m < NM; m++)
		free(got[m]);
	free_qkv(ctx, &x);
	return !ok + lbad;
}

/* ---- backward ------------------------------------------------------------ */

/* dout, dq, dk, dv of a case: buffers like q's (Sk rows), dout from seed 5,
 * the gradients' from seeds 6.. (values that a call must overwrite in
 * their views and keep outside), and the views (dout, dq: rows
 * q_offset..). */
typedef struct grads {
	void *buf[4];
	cfrt_view v[4]; /* dout, dq, dk, dv */
} grads;

static void fill_grads(cfrt_ctx *ctx, const acase *c, const qkv *x, grads *d)
{
	for (int i = 1; i < 4; i++) {
		cfrt_view all = cfrt_view_contig(d->buf[i], c->t, 1, &x->n);
		CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, (uint64_t)i + 5));
	}
}

static void make_grads(cfrt_ctx *ctx, const acase *c, const qkv *x, grads *d)
{
	for (int i = 0; i < 4; i++) {
		CFRT_TRY(ctx, cfrt_alloc(ctx, &d->buf[i], (size_t)x->n *
		                         cfrt_dtype_size(c->t)));
		d->v[i] = layout_view(d->buf[i], c, c->sk);
		if (i < 2)
			d->v[i] = cfrt_view_slice(d->v[i], 2, c->q_offset, c->sq);
	}
	cfrt_view all = cfrt_view_contig(d->buf[0], c->t, 1, &x->n);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, 5));
	fill_grads(ctx, c, x, d);
}

static void free_grads(cfrt_ctx *ctx, grads *d)
{
	for (int i = 0; i < 4; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, d->buf[i]));
}

/* cfrt_attention_grad of the case on path mode; want: which of dq, dk,
 * dv (bits 1, 2, 4) to compute, the others NULL; lse: from x->l
 * (cfrt_attention_grad_lse), else recomputed. */
static int attend_grad(cfrt_ctx *ctx, const char *mode, const acase *c,
                       const qkv *x, const grads *d, int want, int lse)
{
	const cfrt_view *dq = want & 1 ? &d->v[1] : NULL;
	const cfrt_view *dk = want & 2 ? &d->v[2] : NULL;
	const cfrt_view *dv = want & 4 ? &d->v[3] : NULL;
	setenv("CFRT_ATTN", mode, 1);
	if (lse)
		return cfrt_attention_grad_lse(ctx, dq, dk, dv, &x->q, &x->k, &x->v,
		                               &x->o, &d->v[0], &x->l, c->causal,
		                               c->q_offset);
	return cfrt_attention_grad(ctx, dq, dk, dv, &x->q, &x->k, &x->v, &x->o,
	                           &d->v[0], c->causal, c->q_offset);
}

/* [Sk,Dh] of head (b, h) of view v (in buffer base, host copy hc). */
static double *head_rows(const acase *c, const cfrt_view *v, const void *base,
                         const void *hc, int64_t b, int64_t h, int64_t rows)
{
	double *r = malloc((size_t)(rows * c->dh) * sizeof *r);
	for (int64_t j = 0; j < rows; j++)
		for (int64_t d = 0; d < c->dh; d++)
			r[j * c->dh + d] = to_double(hc, c->t, at(v, base, b, h, j, d));
	return r;
}

/* dq, dk, dv of the case in double, dense [B,H,Sq,Dh] and [B,H,Sk,Dh],
 * from host copies h of q, k, v, out (the forward's) and dout. */
static void grad_reference(const acase *c, const qkv *x, const grads *d,
                           void *h[5], double *r[3])
{
	int64_t dh = c->dh, sq = c->sq, sk = c->sk;
	double scale = 1 / sqrt((double)dh), *p = malloc((size_t)sk * sizeof *p);
	r[0] = calloc((size_t)(c->b * c->h * sq * dh), sizeof *r[0]);
	r[1] = calloc((size_t)(c->b * c->h * sk * dh), sizeof *r[1]);
	r[2] = calloc((size_t)(c->b * c->h * sk * dh), sizeof *r[2]);
	for (int64_t b = 0; b < c->b; b++)
	for (int64_t hh = 0; hh < c->h; hh++) {
		double *q = head_rows(c, &x->q, x->buf[0], h[0], b, hh, sq);
		double *k = head_rows(c, &x->k, x->buf[1], h[1], b, hh, sk);
		double *v = head_rows(c, &x->v, x->buf[2], h[2], b, hh, sk);
		double *o = head_rows(c, &x->o, x->buf[3], h[3], b, hh, sq);
		double *g = head_rows(c, &d->v[0], d->buf[0], h[4], b, hh, sq);
		int64_t hq = (b * c->h + hh) * sq * dh, hk = (b * c->h + hh) * sk * dh;
		for (int64_t i = 0; i < sq; i++) {
			int64_t nk = c->causal && c->q_offset + i + 1 < sk ?
			             c->q_offset + i + 1 : sk;
			double m = -INFINITY, sum = 0, delta = 0;
			for (int64_t e = 0; e < dh; e++)
				delta += g[i * dh + e] * o[i * dh + e];
			for (int64_t j = 0; j < nk; j++) {
				p[j] = 0;
				for (int64_t e = 0; e < dh; e++)
					p[j] += q[i * dh + e] * k[j * dh + e];
				m = fmax(m, p[j] *= scale);
			}
			for (int64_t j = 0; j < nk; j++)
				sum += p[j] = exp(p[j] - m);
			for (int64_t j = 0; j < nk; j++) {
				double dp = 0, pj = p[j] / sum;
				for (int64_t e = 0; e < dh; e++)
					dp += g[i * dh + e] * v[j * dh + e];
				double ds = pj * (dp - delta) * scale;
				for (int64_t e = 0; e < dh; e++) {
					r[0][hq + i * dh + e] += ds * k[j * dh + e];
					r[1][hk + j * dh + e] += ds * q[i * dh + e];
					r[2][hk + j * dh + e] += pj * g[i * dh + e];
				}
			}
		}
		free(q), free(k), free(v), free(o), free(g);
	}
	free(p);
}

/* The backward of a case on every path (from the fused forward's out,
 * and its lse): flash and cudnn against gemm and, for the smaller
 * cases, all against the double reference; then every path from the
 * saved lse against its recomputing run and the reference ("grad
 * lse"); nothing written outside dq's, dk's and dv's views. */
static int run_grad_case(cfrt_ctx *ctx, const acase *c)
{
	qkv x;
	grads d;
	void *before[3], *got[2 * NM][3]; /* each path; then from the lse */
	double eg[NM][3] = {{0}}, el[3] = {0, 0, 0}, er[3] = {0, 0, 0};
	double erl[3] = {0, 0, 0};
	int64_t bad = 0;
	make_qkv(ctx, c, &x);
	CFRT_TRY(ctx, attend_lse(ctx, "flash", c, &x));
	make_grads(ctx, c, &x, &d);
	for (int i = 0; i < 3; i++)
		before[i] = download(ctx, d.buf[i + 1], x.n, c->t);
	for (int m = 0; m < 2 * NM; m++) {
		fill_grads(ctx, c, &x, &d);
		CFRT_TRY(ctx, attend_grad(ctx, modes[m % NM], c, &x, &d, 7, m >= NM));
		for (int i = 0; i < 3; i++) {
			got[m][i] = download(ctx, d.buf[i + 1], x.n, c->t);
			bad += clobbered(&d.v[i + 1], d.buf[i + 1], x.n, got[m][i],
			                 before[i]);
		}
	}
	for (int i = 0; i < 3; i++)
		for (int m = 0; m < NM; m++) {
			eg[m][i] = rel_err(&d.v[i + 1], d.buf[i + 1], got[m][i],
			                   got[G][i], NULL);
			el[i] = fmax(el[i], rel_err(&d.v[i + 1], d.buf[i + 1],
			                            got[m + NM][i], got[m][i], NULL));
		}
	if (c->ref) {
		void *h[5];
		double *r[3];
		for (int i = 0; i < 5; i++)
			h[i] = download(ctx, i < 4 ? x.buf[i] : d.buf[0], x.n, c->t);
		grad_reference(c, &x, &d, h, r);
		for (int i = 0; i < 3; i++) {
			for (int m = 0; m < 2 * NM; m++) {
				double e = rel_err(&d.v[i + 1], d.buf[i + 1], got[m][i],
				                   NULL, r[i]);
				if (m < NM)
					er[i] = fmax(er[i], e);
				else
					erl[i] = fmax(erl[i], e);
			}
			free(r[i]);
		}
		for (int i = 0; i < 5; i++)
			free(h[i]);
	}
	int ok = bad == 0, okl = bad == 0;
	for (int i = 0; i < 3; i++) {
		ok &= eg[0][i] <= tol(c->t) && eg[2][i] <= tol(c->t) &&
		      er[i] <= tol(c->t);
		okl &= el[i] <= tol(c->t) && erl[i] <= tol(c->t);
	}
	printf("attn_check: grad %s: dq dk dv flash vs gemm %.2e %.2e %.2e, "
	       "cudnn vs gemm %.2e %.2e %.2e", c->name, eg[0][0], eg[0][1],
	       eg[0][2], eg[2][0], eg[2][1], eg[2][2]);
	if (c->ref)
		printf(", vs double reference %.2e %.2e %.2e", er[0], er[1], er[2]);
	printf(", %lld written outside: %s\n", (long long)bad,
	       ok ? "ok" : "MISMATCH");
	printf("attn_check: grad lse %s: dq dk dv from the lse vs recomputed "
	       "(worst path) %.2e %.2e %.2e", c->name, el[0], el[1], el[2]);
	if (c->ref)
		printf(", vs double reference %.2e %.2e %.2e", erl[0], erl[1],
		       erl[2]);
	printf(": %s\n", okl ? "ok" : "MISMATCH");
	for (int i = 0; i < 3; i++) {
		free(before[i]);
		for (int m = 0; m < 2 * NM; m++)
			free(got[m][i]);
	}
	free_grads(ctx, &d);
	free_qkv(ctx, &x);
	return !ok + !okl;
}

/* Each path and each subset of dq, dk, dv on a case: the gradients asked
 * for equal the full call's (dk and dv bit for bit on flash and gemm;
 * dq, summed with atomics on the fused paths, and cuDNN's dk and dv,
 * whose plan may differ with the outputs it writes, within rounding),
 * the others stay as they were; then no query rows: dk = dv = 0. */
static int grad_subsets(cfrt_ctx *ctx, const acase *c)
{
	qkv x;
	grads d;
	int bad = 0;
	make_qkv(ctx, c, &x);
	CFRT_TRY(ctx, attend(ctx, "flash", c, &x));
	make_grads(ctx, c, &x, &d);
	for (int m = 0; m < NM; m++) {
		void *full[3], *before[3];
		CFRT_TRY(ctx, attend_grad(ctx, modes[m], c, &x, &d, 7, 0));
		for (int i = 0; i < 3; i++)
			full[i] = download(ctx, d.buf[i + 1], x.n, c->t);
		for (int want = 1; want < 7; want++) {
			fill_grads(ctx, c, &x, &d);
			for (int i = 0; i < 3; i++)
				before[i] = download(ctx, d.buf[i + 1], x.n, c->t);
			CFRT_TRY(ctx, attend_grad(ctx, modes[m], c, &x, &d, want, 0));
			for (int i = 0; i < 3; i++) {
				void *g = download(ctx, d.buf[i + 1], x.n, c->t);
				size_t bytes = (size_t)x.n * cfrt_dtype_size(c->t);
				if (!(want >> i & 1))
					bad += memcmp(g, before[i], bytes) != 0;
				else if (i == 0 || m == 2)
					bad += rel_err(&d.v[i + 1], d.buf[i + 1], g, full[i],
					               NULL) > tol(c->t);
				else
					bad += memcmp(g, full[i], bytes) != 0;
				free(g), free(before[i]);
			}
		}
		for (int i = 0; i < 3; i++)
			free(full[i]);
	}
	cfrt_view q0 = cfrt_view_slice(x.q, 2, 0, 0);
	cfrt_view o0 = cfrt_view_slice(x.o, 2, 0, 0);
	cfrt_view g0 = cfrt_view_slice(d.v[0], 2, 0, 0);
	CFRT_TRY(ctx, cfrt_attention_grad(ctx, NULL, &d.v[2], &d.v[3], &q0, &x.k,
	                                  &x.v, &o0, &g0, c->causal, 0));
	for (int i = 2; i < 4; i++) {
		void *g = download(ctx, d.buf[i], x.n, c->t);
		for (int64_t e = 0; e < x.n; e++)
			bad += to_double(g, c->t, e) != 0;
		free(g);
	}
	printf("attn_check: grad NULL gradients, no query rows (%s): %s\n",
	       c->name, bad ? "MISMATCH" : "ok");
	free_grads(ctx, &d);
	free_qkv(ctx, &x);
	return bad != 0;
}

/* One call of a path: the forward, or the backward when d is given
 * (from x's lse when lse is set). */
static int call(cfrt_ctx *ctx, const char *mode, const acase *c,
                const qkv *x, const grads *d, int lse)
{
	return d ? attend_grad(ctx, mode, c, x, d, 7, lse) : attend(ctx, mode, c, x);
}

/* Median ms of REPS calls of one path, after 3 warm-up calls. */
static double median_ms(cfrt_ctx *ctx, const char *mode, const acase *c,
                        const qkv *x, const grads *d, int lse)
{
	double ms[REPS];
	for (int i = 0; i < 3; i++)
		CFRT_TRY(ctx, call(ctx, mode, c, x, d, lse));
	for (int i = 0; i < REPS; i++) {
		double t0 = cfrt_wtime(ctx);
		CFRT_TRY(ctx, call(ctx, mode, c, x, d, lse));
		ms[i] = (cfrt_wtime(ctx) - t0) * 1e3;
	}
	return median(ms, REPS);
}

static void bench(cfrt_ctx *ctx, int layout)
{
	acase c = cases[sizeof cases / sizeof cases[0] - 1];
	c.layout = layout;
	qkv x;
	grads d;
	make_qkv(ctx, &c, &x);
	make_grads(ctx, &c, &x, &d);
	CFRT_TRY(ctx, attend_lse(ctx, "flash", &c, &x));
	/* the backward as 2.5 forwards: S again, dP, dV, dQ, dK (the fused
	 * path's pass for the row statistics uncounted) */
	double flop = 2.0 * 2 * c.b * c.h * c.sq * c.sk * c.dh / 2;
	static const char *const what[] = {"", "grad ", "grad lse "};
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < NM; i++) {
			double ms = median_ms(ctx, modes[i], &c, &x, g ? &d : NULL,
			                      g == 2);
			double f = g ? 2.5 * flop : flop;
			printf("attn_check: time %s%s B=%lld H=%lld S=%lld Dh=%lld "
			       "causal bf16 %s: %.3f ms, %.1f TFLOP/s\n",
			       what[g], modes[i], (long long)c.b,
			       (long long)c.h, (long long)c.sq, (long long)c.dh,
			       layout == HEADS ? "[B,H,S,Dh]" : "[B,S,D]", ms,
			       f / ms * 1e-9);
		}
	free_grads(ctx, &d);
	free_qkv(ctx, &x);
}

/* An unknown CFRT_ATTN is an invalid argument naming the variable;
 * nocudnn (a build without cuDNN): CFRT_ATTN=cudnn is CFRT_ENOTSUP
 * saying so. */
static int bad_mode(cfrt_ctx *ctx, const char *mode, int want,
                    const char *says)
{
	qkv x;
	make_qkv(ctx, &cases[0], &x);
	int rc = attend(ctx, mode, &cases[0], &x);
	int ok = rc == want && strstr(cfrt_last_error(ctx), says);
	printf("  cfrt_last_error: %s\n", cfrt_last_error(ctx));
	printf("attn_check: CFRT_ATTN=%s is rejected: %s\n", mode,
	       ok ? "ok" : "MISMATCH");
	free_qkv(ctx, &x);
	return !ok;
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int bad = 0, size;
	const char *opt = argc > 1 ? argv[1] : "";
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "attn_check"));
	if (!strcmp(opt, "--no-cudnn")) {
		bad += bad_mode(ctx, "cudnn", CFRT_ENOTSUP, "built without cudnn");
	} else {
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			bad += run_case(ctx, &cases[i]);
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			bad += run_grad_case(ctx, &cases[i]);
		bad += grad_subsets(ctx, &cases[0]);
		bad += bad_mode(ctx, "fast", CFRT_EINVAL, "CFRT_ATTN");
	}
	if (!*opt) {
		bench(ctx, INTERLEAVED);
		bench(ctx, HEADS);
	}
	printf("attn_check: %s\n", bad ? "MISMATCH" : "all ok");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return bad ? 1 : 0;
}
