/* median.h: the one median of the tools: cfrt-calibrate's points and
 * the bench programs' reports (bench/mix.c, mlp_mpi.c, gemm_split.c; the
 * generated driver has its own, the same rule). The mean of the two
 * middle values of an even count (cfrt-calibrate took the upper one until
 * 2026-12-07). */
#ifndef CF_BENCH_MEDIAN_H
#define CF_BENCH_MEDIAN_H

#include <stdlib.h>

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of t[0..n), n > 0; sorts t. */
static double
median(double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

#endif
