/* gemm_split.c: decomposition loss, the cost of computing one GEMM in
 * pieces (DESIGN.md section 4): C (M x N) = A (M x K) B (K x N), f32,
 * row-major through CBLAS, once whole and then as P row pieces of M/P rows
 * (one CBLAS call each, as a sliced or fused schedule issues them), for
 * each P given.
 *
 *   mpirun -n R gemm_split M K N P... [--iters N] [--warmup N]
 *
 * Every rank runs the same GEMMs at the same time, so under mpirun the
 * ranks share the cores as the models' ranks do. Prints, on rank 0, one
 * line per P: "pieces=P time_ms=T loss=L" with T the median over
 * iterations of the slowest rank's time and L = T / T(whole) - 1. */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "median.h"

enum { MAXP = 16 };

typedef struct opts {
	int m, k, n, np, pieces[MAXP];
	int iters, warmup;
} opts;

static void
usage_exit(int rank)
{
	if (rank == 0)
		fprintf(stderr, "usage: gemm_split M K N P... [--iters N] "
		        "[--warmup N]  (each P divides M; at most %d)\n", MAXP - 1);
	MPI_Finalize();
	exit(2);
}

static opts
parse_opts(int argc, char **argv, int rank)
{
	opts o = {0, 0, 0, 1, {1}, 9, 2};

	if (argc < 5)
		usage_exit(rank);
	o.m = atoi(argv[1]);
	o.k = atoi(argv[2]);
	o.n = atoi(argv[3]);
	for (int i = 4; i < argc; i++) {
		int more = i + 1 < argc;
		if (!strcmp(argv[i], "--iters") && more)
			o.iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && more)
			o.warmup = atoi(argv[++i]);
		else if (o.np < MAXP && atoi(argv[i]) > 0)
			o.pieces[o.np++] = atoi(argv[i]);
		else
			usage_exit(rank);
	}
	if (o.m < 1 || o.k < 1 || o.n < 1 || o.iters < 1 || o.warmup < 0)
		usage_exit(rank);
	for (int i = 0; i < o.np; i++)
		if (o.m % o.pieces[i])
			usage_exit(rank);
	return o;
}

static void
gemm_pieces(const opts *o, int p, const float *a, const float *b, float *c)
{
	int rows = o->m / p;

	for (int i = 0; i < p; i++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, o->n,
		            o->k, 1.0f, a + (size_t)i * rows * o->k, o->k, b, o->n,
		            0.0f, c + (size_t)i * rows * o->n, o->n);
}

/* Median over iterations of the slowest rank's milliseconds. */
static double
time_pieces(const opts *o, int p, const float *a, const float *b, float *c)
{
	double *t = calloc((size_t)o->iters, sizeof *t);

	for (int i = 0; i < o->warmup; i++)
		gemm_pieces(o, p, a, b, c);
	for (int i = 0; i < o->iters; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		gemm_pieces(o, p, a, b, c);
		double dt = MPI_Wtime() - t0;
		MPI_Allreduce(&dt, &t[i], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	}
	double med = median(t, o->iters);
	free(t);
	return med * 1e3;
}

int
main(int argc, char **argv)
{
	int rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	opts o = parse_opts(argc, argv, rank);
	float *a = malloc((size_t)o.m * o.k * sizeof *a);
	float *b = malloc((size_t)o.k * o.n * sizeof *b);
	float *c = malloc((size_t)o.m * o.n * sizeof *c);
	if (!a || !b || !c) {
		fprintf(stderr, "gemm_split: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t i = 0; i < (size_t)o.m * o.k; i++)
		a[i] = (float)((i * 7919u) % 1000) / 1000.0f - 0.5f;
	for (size_t i = 0; i < (size_t)o.k * o.n; i++)
		b[i] = (float)((i * 104729u) % 1000) / 1000.0f - 0.5f;
	double whole = 0;
	for (int i = 0; i < o.np; i++) {
		double ms = time_pieces(&o, o.pieces[i], a, b, c);
		if (i == 0)
			whole = ms;
		if (rank == 0)
			printf("gemm m=%d k=%d n=%d pieces=%d time_ms=%.4f loss=%.4f\n",
			       o.m, o.k, o.n, o.pieces[i], ms, ms / whole - 1);
	}
	free(a), free(b), free(c);
	MPI_Finalize();
	return 0;
}
