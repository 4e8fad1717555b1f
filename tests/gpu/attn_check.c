/* attn_check: cfrt_attention on one GPU, the fused kernel (CFRT_ATTN=flash)
 * against the two-GEMM path (CFRT_ATTN=gemm) and, for the smaller cases, a
 * double-precision reference on the host from the same rounded inputs.
 * The cases cover Dh 16 to 128 (and Dh 8 and misaligned rows, which have
 * no fused kernel: both paths are then the GEMM path), sequence lengths
 * that are not multiples of the kernel's blocks, causal and not, query
 * split (q and out rows q_offset.. of the whole sequence, Sq < Sk), heads
 * interleaved in [B,S,H*Dh], and peaked softmaxes (q scaled by 8). The fused
 * kernel must not write outside out's view. Then the benchmark shape (B=16,
 * H=8, S=4096, Dh=128, causal, bf16): median of 20 calls of each path,
 * bracketed by cfrt_wtime (which synchronises the compute stream; the
 * stream is private, so no cudaEvent can be put on it from here).
 * Prints "attn_check: CASE: ... ok" (or MISMATCH) per case and
 * "attn_check: all ok" at the end; exits 1 on any mismatch. Run it under
 * mpirun -n 1 (mpirun --allow-run-as-root -n 1 attn_check [--no-bench]). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"

#define TOL 1e-2 /* max |x - y| / max |y|; u = 2^-9 for bf16, see run.sh */
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
	{"bf16 Dh128 S4096 B16 H8 causal [B,S,D]", CFRT_BF16, 16, 8, 4096, 4096,
	 128, 0, 1, INTERLEAVED, 0, 0},
};

/* q, k, v, out of a case: buffers of Sk rows each, out's a second time
 * (its initial contents), and the views. */
typedef struct qkv {
	void *buf[4];
	int64_t n; /* elements per buffer */
	cfrt_view q, k, v, o;
} qkv;

static double to_double(const uint16_t *p, cfrt_dtype t, int64_t i)
{
	uint32_t x = p[i];
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
	size_t bytes = (size_t)x->n * 2;
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
}

static void free_qkv(cfrt_ctx *ctx, qkv *x)
{
	for (int i = 0; i < 4; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, x->buf[i]));
}

static int attend(cfrt_ctx *ctx, const char *mode, const acase *c,
                  const qkv *x)
{
	setenv("CFRT_ATTN", mode, 1);
	return cfrt_attention(ctx, &x->o, &x->q, &x->k, &x->v, c->causal,
	                      c->q_offset);
}

/* Element offset of [b,h,i,d] of v in its buffer base. */
static int64_t at(const cfrt_view *v, const void *base, int64_t b, int64_t h,
                  int64_t i, int64_t d)
{
	return ((const char *)v->p - (const char *)base) / 2 + b * v->stride[0] +
	       h * v->stride[1] + i * v->stride[2] + d * v->stride[3];
}

/* out of the case in double, [B,H,Sq,Dh] dense, from host copies. */
static double *reference(const acase *c, const qkv *x, uint16_t *h[3])
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

/* max |got - want| / max |want| over out's view; want NULL: dense ref. */
static double rel_err(const acase *c, const qkv *x, const uint16_t *got,
                      const uint16_t *want, const double *ref)
{
	double e = 0, w = 0;
	for (int64_t b = 0; b < c->b; b++)
	for (int64_t h = 0; h < c->h; h++)
	for (int64_t i = 0; i < c->sq; i++)
	for (int64_t d = 0; d < c->dh; d++) {
		int64_t o = at(&x->o, x->buf[3], b, h, i, d);
		double y = want ? to_double(want, c->t, o) :
		           ref[((b * c->h + h) * c->sq + i) * c->dh + d];
		double dif = fabs(to_double(got, c->t, o) - y);
		e = isnan(dif) ? INFINITY : fmax(e, dif); /* NaN on either side */
		w = fmax(w, fabs(y));
	}
	return e / (w > 0 ? w : 1);
}

/* Elements of out's buffer outside its view that differ from before. */
static int64_t clobbered(const acase *c, const qkv *x, const uint16_t *got,
                         const uint16_t *before)
{
	char *in = calloc((size_t)x->n, 1);
	int64_t bad = 0;
	for (int64_t b = 0; b < c->b; b++)
	for (int64_t h = 0; h < c->h; h++)
	for (int64_t i = 0; i < c->sq; i++)
		memset(in + at(&x->o, x->buf[3], b, h, i, 0), 1, (size_t)c->dh);
	for (int64_t i = 0; i < x->n; i++)
		bad += !in[i] && got[i] != before[i];
	free(in);
	return bad;
}

static uint16_t *download(cfrt_ctx *ctx, const void *buf, int64_t n)
{
	uint16_t *h = malloc((size_t)n * 2);
	CFRT_TRY(ctx, cfrt_download(ctx, h, buf, (size_t)n * 2));
	return h;
}

/* Runs a case; 0 when flash, gemm (and the reference) agree. */
static int run_case(cfrt_ctx *ctx, const acase *c)
{
	qkv x;
	make_qkv(ctx, c, &x);
	uint16_t *before = download(ctx, x.buf[3], x.n);
	CFRT_TRY(ctx, attend(ctx, "flash", c, &x));
	uint16_t *fl = download(ctx, x.buf[3], x.n);
	cfrt_view all = cfrt_view_contig(x.buf[3], c->t, 1, &x.n);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, 99));
	CFRT_TRY(ctx, attend(ctx, "gemm", c, &x));
	uint16_t *gm = download(ctx, x.buf[3], x.n);
	double eg = rel_err(c, &x, fl, gm, NULL), er = 0;
	int64_t bad = clobbered(c, &x, fl, before);
	if (c->ref) {
		uint16_t *h[3];
		for (int i = 0; i < 3; i++)
			h[i] = download(ctx, x.buf[i], x.n);
		double *ref = reference(c, &x, h);
		er = fmax(rel_err(c, &x, fl, NULL, ref),
		          rel_err(c, &x, gm, NULL, ref));
		free(ref);
		for (int i = 0; i < 3; i++)
			free(h[i]);
	}
	int ok = eg <= TOL && er <= TOL && bad == 0;
	printf("attn_check: %s: flash vs gemm %.2e", c->name, eg);
	if (c->ref)
		printf(", vs double reference %.2e", er);
	printf(", %lld written outside out: %s\n", (long long)bad,
	       ok ? "ok" : "MISMATCH");
	free(before);
	free(fl);
	free(gm);
	free_qkv(ctx, &x);
	return !ok;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median ms of REPS calls of one path, after 3 warm-up calls. */
static double median_ms(cfrt_ctx *ctx, const char *mode, const acase *c,
                        const qkv *x)
{
	double ms[REPS];
	for (int i = 0; i < 3; i++)
		CFRT_TRY(ctx, attend(ctx, mode, c, x));
	for (int i = 0; i < REPS; i++) {
		double t0 = cfrt_wtime(ctx);
		CFRT_TRY(ctx, attend(ctx, mode, c, x));
		ms[i] = (cfrt_wtime(ctx) - t0) * 1e3;
	}
	qsort(ms, REPS, sizeof ms[0], cmp_double);
	return (ms[REPS / 2 - 1] + ms[REPS / 2]) / 2;
}

static void bench(cfrt_ctx *ctx, int layout)
{
	acase c = cases[sizeof cases / sizeof cases[0] - 1];
	c.layout = layout;
	qkv x;
	make_qkv(ctx, &c, &x);
	double flop = 2.0 * 2 * c.b * c.h * c.sq * c.sk * c.dh / 2;
	const char *modes[] = {"flash", "gemm"};
	for (int i = 0; i < 2; i++) {
		double ms = median_ms(ctx, modes[i], &c, &x);
		printf("attn_check: time %s B=%lld H=%lld S=%lld Dh=%lld causal "
		       "bf16 %s: %.3f ms, %.1f TFLOP/s\n", modes[i],
		       (long long)c.b, (long long)c.h, (long long)c.sq,
		       (long long)c.dh, layout == HEADS ? "[B,H,S,Dh]" : "[B,S,D]",
		       ms, flop / ms * 1e-9);
	}
	free_qkv(ctx, &x);
}

/* An unknown CFRT_ATTN is an invalid argument naming the variable. */
static int bad_mode(cfrt_ctx *ctx)
{
	qkv x;
	make_qkv(ctx, &cases[0], &x);
	int rc = attend(ctx, "fast", &cases[0], &x);
	int ok = rc == CFRT_EINVAL && strstr(cfrt_last_error(ctx), "CFRT_ATTN");
	printf("  cfrt_last_error: %s\n", cfrt_last_error(ctx));
	printf("attn_check: CFRT_ATTN=fast is rejected: %s\n",
	       ok ? "ok" : "MISMATCH");
	free_qkv(ctx, &x);
	return !ok;
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int bad = 0, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "attn_check"));
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		bad += run_case(ctx, &cases[i]);
	bad += bad_mode(ctx);
	if (!(argc > 1 && !strcmp(argv[1], "--no-bench"))) {
		bench(ctx, INTERLEAVED);
		bench(ctx, HEADS);
	}
	printf("attn_check: %s\n", bad ? "MISMATCH" : "all ok");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return bad ? 1 : 0;
}
