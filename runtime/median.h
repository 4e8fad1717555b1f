/* median.h: the one median: cfrt-calibrate's points, cfc's reading of
 * a profile (compiler/profile.c), the bench programs' reports (bench/
 * mix.c, mlp_mpi.c, gemm_split.c and the probes of bench/gpu) and the
 * timing tests (tests/runtime/progress_bench.c, tests/gpu/attn_check.c).
 * The generated driver (codegen/driver_main.c.in) keeps a copy of the
 * same rule: it is compiled against the installed cfrt.h alone. The mean
 * of the two middle values of an even count (cfrt-calibrate took the
 * upper one until 2026-12-07). */
#ifndef CF_BENCH_MEDIAN_H
#define CF_BENCH_MEDIAN_H

#include <stdlib.h>

static inline int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of t[0..n), n > 0; sorts t. */
static inline double
median(double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

#endif
