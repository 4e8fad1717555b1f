/* mmadd_check: cfrt_matmul_add on the CUDA backend (c = a @ b + d in one
 * cuBLASLt call for bf16 and f16, d read as its C), against
 *   - a double reference computed here from the device's inputs
 *     (cfrt_fill_uniform, in [-1, 1)): f32 within 1e-5, bf16 and f16
 *     within 1.6e-2, of the larger of 1 and the value, relative to the
 *     dot product's length (errors grow with K); and
 *   - the unfused path: cfrt_matmul into a buffer, then cfrt_add of d,
 *     within the same bound of it;
 * for d apart from c (cuBLASLt's C and D apart), d being c (the sum in
 * place), and d a view laid out otherwise than c (a transposed copy of
 * the values: the copy-then-accumulate path); b as is or transposed;
 * shapes [batch, M, K] @ [K, N]: 1 x 1 x 1 and the odd 3 x 7 x 13 @
 * 13 x 5, bf16, f16 and f32; and 64 rows of the Llama layer's residual
 * GEMM, 4096 @ 4096 x 4096 (b transposed), bf16 and f16.
 * Prints "mmadd_check: CASE: ok" or "... MISMATCH (...)" per case, then
 * "mmadd_check: all ok" or "mmadd_check: N failed"; exits 1 on a failure.
 *   mpirun -n 1 mmadd_check */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "hostval.h"

static int nbad;

static const char *tname(cfrt_dtype t)
{
	return t == CFRT_F32 ? "f32" : t == CFRT_BF16 ? "bf16" : "f16";
}

enum { APART, IN_PLACE, OTHER_LAYOUT };
static const char *const how_name[] = {"d apart", "d in place", "d laid out otherwise"};

static void check(cfrt_ctx *ctx, cfrt_dtype t, int64_t nb, int64_t m, int64_t k, int64_t n,
                  int tb, int how)
{
	size_t es = cfrt_dtype_size(t);
	int64_t na = nb * m * k, nbv = k * n, nc = nb * m * n;
	unsigned char *ha = malloc((size_t)na * es), *hb = malloc((size_t)nbv * es);
	unsigned char *hd = malloc((size_t)nc * es), *r1 = malloc((size_t)nc * es);
	unsigned char *r2 = malloc((size_t)nc * es);
	void *a, *b, *c, *d, *p, *s;
	if (!ha || !hb || !hd || !r1 || !r2)
		abort();
	CFRT_TRY(ctx, cfrt_alloc(ctx, &a, (size_t)na * es));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &b, (size_t)nbv * es));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &c, (size_t)nc * es));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &d, (size_t)nc * es));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &p, (size_t)nc * es));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &s, (size_t)nc * es));
	host_fill(ctx, t, a, na, ha, 3);
	host_fill(ctx, t, b, nbv, hb, 5); /* [K, N], or read transposed as [N, K] */
	host_fill(ctx, t, d, nc, hd, 11);
	cfrt_view va = cfrt_view_contig(a, t, 3, (int64_t[]){nb, m, k});
	cfrt_view vb = tb ? cfrt_view_permute(cfrt_view_contig(b, t, 2, (int64_t[]){n, k}),
	                                      (int[]){1, 0})
	                  : cfrt_view_contig(b, t, 2, (int64_t[]){k, n});
	cfrt_view vc = cfrt_view_contig(c, t, 3, (int64_t[]){nb, m, n});
	cfrt_view vd = cfrt_view_contig(d, t, 3, (int64_t[]){nb, m, n});
	cfrt_view vp = cfrt_view_contig(p, t, 3, (int64_t[]){nb, m, n});
	cfrt_view vs = cfrt_view_contig(s, t, 3, (int64_t[]){nb, m, n});
	/* the unfused path: p = a @ b, s = p + d */
	CFRT_TRY(ctx, cfrt_matmul(ctx, &vp, &va, &vb, 1.0, 0.0));
	CFRT_TRY(ctx, cfrt_add(ctx, &vs, &vp, &vd));
	if (how == IN_PLACE) {
		CFRT_TRY(ctx, cfrt_copy(ctx, &vc, &vd));
		CFRT_TRY(ctx, cfrt_matmul_add(ctx, &vc, &va, &vb, &vc, 1.0));
	} else if (how == OTHER_LAYOUT) {
		/* d's values in a buffer laid out [nb, n, m], read as [nb, m, n] */
		cfrt_view vt = cfrt_view_permute(cfrt_view_contig(p, t, 3, (int64_t[]){nb, n, m}),
		                                  (int[]){0, 2, 1});
		CFRT_TRY(ctx, cfrt_copy(ctx, &vt, &vd));
		CFRT_TRY(ctx, cfrt_matmul_add(ctx, &vc, &va, &vb, &vt, 1.0));
	} else {
		CFRT_TRY(ctx, cfrt_matmul_add(ctx, &vc, &va, &vb, &vd, 1.0));
	}
	CFRT_TRY(ctx, cfrt_download(ctx, r1, c, (size_t)nc * es));
	CFRT_TRY(ctx, cfrt_download(ctx, r2, s, (size_t)nc * es));
	double worst = 0, apart = 0;
	double tol = (t == CFRT_F32 ? 1e-5 : 1.6e-2) * fmax(1, sqrt((double)k) / 8);
	for (int64_t q = 0; q < nb; q++)
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++) {
				double want = host_elem(t, hd, (q * m + i) * n + j);
				for (int64_t l = 0; l < k; l++)
					want += host_elem(t, ha, (q * m + i) * k + l) *
					        host_elem(t, hb, tb ? j * k + l : l * n + j);
				int64_t o = (q * m + i) * n + j;
				double got = host_elem(t, r1, o), other = host_elem(t, r2, o);
				worst = fmax(worst, fabs(got - want) / fmax(1, fabs(want)));
				apart = fmax(apart, fabs(got - other) / fmax(1, fabs(want)));
			}
	int ok = worst <= tol && apart <= tol && isfinite(worst) && isfinite(apart);
	nbad += !ok;
	printf("mmadd_check: %s [%lld,%lld,%lld] @ %s[%lld,%lld], %s: vs double %.2e, vs matmul "
	       "then add %.2e (tol %.1e): %s\n", tname(t), (long long)nb, (long long)m, (long long)k,
	       tb ? "T" : "", (long long)k, (long long)n, how_name[how], worst, apart, tol,
	       ok ? "ok" : "MISMATCH");
	fflush(stdout);
	CFRT_TRY(ctx, cfrt_free(ctx, a));
	CFRT_TRY(ctx, cfrt_free(ctx, b));
	CFRT_TRY(ctx, cfrt_free(ctx, c));
	CFRT_TRY(ctx, cfrt_free(ctx, d));
	CFRT_TRY(ctx, cfrt_free(ctx, p));
	CFRT_TRY(ctx, cfrt_free(ctx, s));
	free(ha), free(hb), free(hd), free(r1), free(r2);
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "mmadd_check"));
	cfrt_dtype types[3] = {CFRT_F32, CFRT_BF16, CFRT_F16};
	for (int ti = 0; ti < 3; ti++)
		for (int how = 0; how < 3; how++)
			for (int tb = 0; tb < 2; tb++) {
				check(ctx, types[ti], 1, 1, 1, 1, tb, how);
				check(ctx, types[ti], 3, 7, 13, 5, tb, how);
			}
	/* the layer's K and N, 64 rows (the double reference: 2^30 terms) */
	for (int ti = 1; ti < 3; ti++)
		check(ctx, types[ti], 1, 64, 4096, 4096, 1, APART);
	if (nbad)
		printf("mmadd_check: %d failed\n", nbad);
	else
		printf("mmadd_check: all ok\n");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return nbad != 0;
}
