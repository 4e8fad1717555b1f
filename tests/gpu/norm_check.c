/* norm_check: cfrt_rmsnorm and cfrt_layernorm on the CUDA backend, rows
 * that take each of the four row kernels of kernels.cu (norm_rows_warp:
 * a warp a row of at most 512 16-byte vectors; norm_rows_vec: 16 bytes
 * a thread, a block a row; norm_rows_reg: a row in registers;
 * norm_rows: any stride), against
 *   - a double reference computed here from the device's inputs
 *     (cfrt_fill_uniform, in [-1, 1); f32 within 1e-5, bf16 and f16
 *     within 1.6e-2 of the larger of 1 and the value), and
 *   - the same rows through a view the vector kernel cannot take (the
 *     rows one element apart from their storage's alignment: the
 *     register or the strided kernel), within the same bound of each
 *     other;
 * gamma (and beta) given or not, row lengths 4096 (16-bit: the warp
 * kernel; f32: 1024 vectors, the block kernel) and 1024 (the warp
 * kernel), 2056 (16-bit: 257 vectors, a last round of one lane; f32:
 * 514, the block kernel), 4100 (f32: vectors; 16-bit: not a whole
 * number of them), 12 and 7 (odd), 9000 (over 1024 vectors: the
 * register kernel) and ROWS rows of each (more than a block of the warp
 * kernel takes, and not a multiple of them).
 * Prints "norm_check: CASE: ok" or "... MISMATCH (...)" per case, then
 * "norm_check: all ok" or "norm_check: N failed"; exits 1 on a failure.
 *   mpirun -n 1 norm_check */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "hostval.h"

enum { ROWS = 7 };

static int nbad;

static const char *tname(cfrt_dtype t)
{
	return t == CFRT_F32 ? "f32" : t == CFRT_BF16 ? "bf16" : "f16";
}

/* One case: ROWS rows of d, rms or layer norm, with gamma (and beta, for
 * the layer norm) or without. */
static void check(cfrt_ctx *ctx, cfrt_dtype t, int64_t d, int rms, int affine)
{
	size_t es = cfrt_dtype_size(t);
	int64_t n = ROWS * d;
	/* storage for the rows twice: at 0 and one element on (+1) */
	size_t bytes = (size_t)(n + 1) * es, pb = (size_t)d * es;
	unsigned char *h = malloc(bytes), *hg = malloc(pb), *hb = malloc(pb);
	unsigned char *r1 = malloc(bytes), *r2 = malloc(bytes);
	void *x, *x1, *y1, *y2, *g, *b;
	if (!h || !hg || !hb || !r1 || !r2)
		abort();
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x1, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &y1, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &y2, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &g, pb));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &b, pb));
	/* the rows aligned (x1) and, the same values, one element on (x) */
	host_fill(ctx, t, x1, n, h, 7);
	CFRT_TRY(ctx, cfrt_upload(ctx, (unsigned char *)x + es, h, (size_t)n * es));
	host_fill(ctx, t, g, d, hg, 13);
	host_fill(ctx, t, b, d, hb, 17);
	int64_t dims[2] = {ROWS, d}, gd[1] = {d};
	cfrt_view va = cfrt_view_contig(x1, t, 2, dims);
	cfrt_view vu = cfrt_view_contig((unsigned char *)x + es, t, 2, dims);
	cfrt_view ya = cfrt_view_contig(y1, t, 2, dims);
	cfrt_view yu = cfrt_view_contig((unsigned char *)y2 + es, t, 2, dims);
	cfrt_view vg = cfrt_view_contig(g, t, 1, gd), vb = cfrt_view_contig(b, t, 1, gd);
	const cfrt_view *pg = affine ? &vg : NULL, *pbv = affine && !rms ? &vb : NULL;
	double eps = 1e-5;
	if (rms) {
		CFRT_TRY(ctx, cfrt_rmsnorm(ctx, &ya, &va, pg, eps));
		CFRT_TRY(ctx, cfrt_rmsnorm(ctx, &yu, &vu, pg, eps));
	} else {
		CFRT_TRY(ctx, cfrt_layernorm(ctx, &ya, &va, pg, pbv, eps));
		CFRT_TRY(ctx, cfrt_layernorm(ctx, &yu, &vu, pg, pbv, eps));
	}
	CFRT_TRY(ctx, cfrt_download(ctx, r1, y1, (size_t)n * es));
	CFRT_TRY(ctx, cfrt_download(ctx, r2, (unsigned char *)y2 + es, (size_t)n * es));
	double worst = 0, apart = 0, tol = t == CFRT_F32 ? 1e-5 : 1.6e-2;
	for (int64_t r = 0; r < ROWS; r++) {
		double mean = 0, var = 0;
		for (int64_t i = 0; i < d; i++)
			mean += host_elem(t, h, r * d + i);
		mean = rms ? 0 : mean / (double)d;
		for (int64_t i = 0; i < d; i++) {
			double u = host_elem(t, h, r * d + i) - mean;
			var += u * u;
		}
		double inv = 1 / sqrt(var / (double)d + eps);
		for (int64_t i = 0; i < d; i++) {
			double want = (host_elem(t, h, r * d + i) - mean) * inv;
			if (affine)
				want *= host_elem(t, hg, i);
			if (affine && !rms)
				want += host_elem(t, hb, i);
			double got = host_elem(t, r1, r * d + i), other = host_elem(t, r2, r * d + i);
			worst = fmax(worst, fabs(got - want) / fmax(1, fabs(want)));
			apart = fmax(apart, fabs(got - other) / fmax(1, fabs(want)));
		}
	}
	int ok = worst <= tol && apart <= tol && isfinite(worst) && isfinite(apart);
	nbad += !ok;
	printf("norm_check: %s %s D=%lld%s: vs double %.2e, aligned vs one element on %.2e "
	       "(tol %.1e): %s\n", rms ? "rmsnorm" : "layernorm", tname(t), (long long)d,
	       affine ? (rms ? " gamma" : " gamma beta") : "", worst, apart, tol,
	       ok ? "ok" : "MISMATCH");
	fflush(stdout);
	CFRT_TRY(ctx, cfrt_free(ctx, x));
	CFRT_TRY(ctx, cfrt_free(ctx, x1));
	CFRT_TRY(ctx, cfrt_free(ctx, y1));
	CFRT_TRY(ctx, cfrt_free(ctx, y2));
	CFRT_TRY(ctx, cfrt_free(ctx, g));
	CFRT_TRY(ctx, cfrt_free(ctx, b));
	free(h), free(hg), free(hb), free(r1), free(r2);
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "norm_check"));
	cfrt_dtype types[3] = {CFRT_F32, CFRT_BF16, CFRT_F16};
	int64_t lens[7] = {4096, 1024, 2056, 4100, 12, 7, 9000};
	for (int k = 0; k < 3; k++)
		for (int l = 0; l < 7; l++)
			for (int rms = 0; rms < 2; rms++)
				for (int aff = 0; aff < 2; aff++)
					check(ctx, types[k], lens[l], rms, aff);
	if (nbad)
		printf("norm_check: %d failed\n", nbad);
	else
		printf("norm_check: all ok\n");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return nbad != 0;
}
