/* swiglu_check: the fused SwiGLU calls on the CUDA backend (issue 52),
 * cfrt_swiglu (silu(a) * b), cfrt_swiglu_da (dy * b * silu'(a)) and
 * cfrt_swiglu_db (dy * silu(a)), each against
 *   - a double reference computed here from the values the device holds
 *     (f32 within 2e-5, bf16 within 4e-3, f16 within 1e-3: one rounding
 *     of a float computation), and
 *   - the unfused calls cfc made before it fused them (cfrt_silu then
 *     cfrt_mul; cfrt_mul then cfrt_silu_grad; cfrt_silu then cfrt_mul),
 *     which round two or three times: both within 3 times the
 *     tolerance of the reference and of each other (each error printed);
 * relative to |ref| + 1e-2 max |ref| (silu' crosses zero near a = -1.28),
 * a in [-6, 6), b and dy in [-1, 1). Layouts (kernels.cu's ew_run): flat
 * runs of 1, 7 and 3001 x 48 elements (16-byte vectors and a tail), one
 * a base one element off (the general kernel), a [3001, 40] column slice
 * of [3001, 56] rows at column 8 (16-byte rows: ew_rows) and a [3001, 47]
 * slice of [3001, 48] rows at column 1 (general); elements outside a
 * slice keep their bits.
 * Prints "swiglu_check: CASE: ok" or "... MISMATCH (...)" per case, then
 * "swiglu_check: all ok" or "swiglu_check: N failed"; exits 1 on a
 * failure.
 *   mpirun -n 1 swiglu_check */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "hostval.h"

static int nbad;

/* A view of r rows of c elements, rows ld apart, off elements into its
 * buffer. */
typedef struct Lay {
	const char *name;
	int64_t r, c, ld, off;
} Lay;

/* the buffers of one case: operands, fused results, unfused results, the
 * unfused calls' scratch */
enum { A, B, G, F, DA, DB, UF, UDA, UDB, S, NBUF };

static const char *tname(cfrt_dtype t)
{
	return t == CFRT_F32 ? "f32" : t == CFRT_BF16 ? "bf16" : "f16";
}

static double silu(double x)
{
	return x / (1.0 + exp(-x));
}

static double d_silu(double x)
{
	double s = 1.0 / (1.0 + exp(-x));
	return s * (1.0 + x * (1.0 - s));
}

/* the reference of op k (0 swiglu, 1 swiglu_da, 2 swiglu_db) */
static double ref(int k, double a, double b, double g)
{
	return k == 0 ? silu(a) * b : k == 1 ? g * b * d_silu(a) : g * silu(a);
}

/* One op's results: fused (buffer fu), unfused (un), outside the slice
 * the bits of before (h0). */
static void compare(const char *what, cfrt_dtype t, const Lay *L, int k,
                    unsigned char *const *h, const unsigned char *h0, int fu,
                    int un, int64_t nb, double tol)
{
	double maxref = 0, ef = 0, eu = 0, ed = 0;
	size_t es = cfrt_dtype_size(t);
	for (int64_t i = 0; i < L->r; i++)
		for (int64_t j = 0; j < L->c; j++) {
			int64_t x = L->off + i * L->ld + j;
			double r = ref(k, host_elem(t, h[A], x), host_elem(t, h[B], x),
			               host_elem(t, h[G], x));
			maxref = fmax(maxref, fabs(r));
		}
	double floor = 1e-2 * maxref + 1e-30;
	char *in = calloc((size_t)nb, 1);
	for (int64_t i = 0; i < L->r; i++)
		for (int64_t j = 0; j < L->c; j++) {
			int64_t x = L->off + i * L->ld + j;
			double r = ref(k, host_elem(t, h[A], x), host_elem(t, h[B], x),
			               host_elem(t, h[G], x));
			double f = host_elem(t, h[fu], x), u = host_elem(t, h[un], x);
			double sc = fabs(r) + floor;
			ef = fmax(ef, isfinite(f) ? fabs(f - r) / sc : INFINITY);
			eu = fmax(eu, isfinite(u) ? fabs(u - r) / sc : INFINITY);
			ed = fmax(ed, isfinite(f) && isfinite(u) ? fabs(f - u) / sc : INFINITY);
			in[x] = 1;
		}
	int kept = 1;
	for (int64_t x = 0; x < nb; x++)
		if (!in[x] && memcmp(h[fu] + x * es, h0 + x * es, es))
			kept = 0;
	free(in);
	int ok = ef <= tol && eu <= 3 * tol && ed <= 3 * tol && kept;
	printf("swiglu_check: %s %s %s: fused err %.3g, unfused err %.3g, apart %.3g%s: %s\n",
	       what, tname(t), L->name, ef, eu, ed, kept ? "" : ", wrote outside its view",
	       ok ? "ok" : "MISMATCH");
	nbad += !ok;
}

static void check(cfrt_ctx *ctx, cfrt_dtype t, const Lay *L)
{
	int64_t nb = L->off + (L->r - 1) * L->ld + L->c;
	size_t es = cfrt_dtype_size(t), bytes = (size_t)nb * es;
	void *dev[NBUF];
	unsigned char *h[NBUF], *h0[3];
	cfrt_view v[NBUF];
	cfrt_view all = cfrt_view_contig(NULL, t, 1, &nb);
	double tol = t == CFRT_F32 ? 2e-5 : t == CFRT_BF16 ? 4e-3 : 1e-3;

	for (int k = 0; k < NBUF; k++) {
		if (!(h[k] = malloc(bytes)))
			abort();
		CFRT_TRY(ctx, cfrt_alloc(ctx, &dev[k], bytes));
		all.p = dev[k];
		CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, 100 + (uint64_t)k));
		if (k == A) /* silu's curve and both tails */
			CFRT_TRY(ctx, cfrt_scale(ctx, &all, &all, 6.0));
		v[k] = cfrt_view_contig((char *)dev[k] + L->off * (int64_t)es, t, 2,
		                        (int64_t[]){L->r, L->c});
		v[k].stride[0] = L->ld;
	}
	for (int k = 0; k < 3; k++) {
		if (!(h0[k] = malloc(bytes)))
			abort();
		CFRT_TRY(ctx, cfrt_download(ctx, h0[k], dev[F + k], bytes));
	}
	CFRT_TRY(ctx, cfrt_swiglu(ctx, &v[F], &v[A], &v[B]));
	CFRT_TRY(ctx, cfrt_swiglu_da(ctx, &v[DA], &v[G], &v[A], &v[B]));
	CFRT_TRY(ctx, cfrt_swiglu_db(ctx, &v[DB], &v[G], &v[A]));
	CFRT_TRY(ctx, cfrt_silu(ctx, &v[S], &v[A]));
	CFRT_TRY(ctx, cfrt_mul(ctx, &v[UF], &v[S], &v[B]));
	CFRT_TRY(ctx, cfrt_mul(ctx, &v[UDB], &v[G], &v[S]));
	CFRT_TRY(ctx, cfrt_mul(ctx, &v[S], &v[G], &v[B]));
	CFRT_TRY(ctx, cfrt_silu_grad(ctx, &v[UDA], &v[S], &v[A]));
	for (int k = 0; k < NBUF; k++)
		CFRT_TRY(ctx, cfrt_download(ctx, h[k], dev[k], bytes));
	compare("swiglu", t, L, 0, h, h0[0], F, UF, nb, tol);
	compare("swiglu_da", t, L, 1, h, h0[1], DA, UDA, nb, tol);
	compare("swiglu_db", t, L, 2, h, h0[2], DB, UDB, nb, tol);
	for (int k = 0; k < NBUF; k++) {
		CFRT_TRY(ctx, cfrt_free(ctx, dev[k]));
		free(h[k]);
	}
	for (int k = 0; k < 3; k++)
		free(h0[k]);
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "swiglu_check"));
	static const Lay lays[] = {
		{"flat 1", 1, 1, 1, 0},
		{"flat 7", 1, 7, 7, 0},
		{"flat 3001x48", 3001, 48, 48, 0},
		{"flat 1001 one element off", 1, 1001, 1001, 1},
		{"[3001,40] of [3001,56] at column 8", 3001, 40, 56, 8},
		{"[3001,47] of [3001,48] at column 1", 3001, 47, 48, 1},
	};
	cfrt_dtype types[3] = {CFRT_F32, CFRT_BF16, CFRT_F16};
	for (int k = 0; k < 3; k++)
		for (size_t l = 0; l < sizeof lays / sizeof lays[0]; l++)
			check(ctx, types[k], &lays[l]);
	if (nbad)
		printf("swiglu_check: %d failed\n", nbad);
	else
		printf("swiglu_check: all ok\n");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return nbad != 0;
}
