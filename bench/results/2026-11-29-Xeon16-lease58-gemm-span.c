/* 2026-11-29-Xeon16-lease58-gemm-span.c (lease 58): is a short GEMM's span over
 * the ranks (cfrt-calibrate's CPU
 * timing) its own time, or barrier exit skew on top? Every rank runs
 * the same m x 512 x 512 sgemm at once; for m in the args: median over
 * reps of (a) the span from the first rank's start to the last rank's
 * end of one call, (b) the slowest rank's own time of one call, (c) the
 * span of 16 calls back to back, over 16, and (d) the spread of the
 * ranks' start times after the barrier. Build: mpicc -O2 -o span THIS
 * $(pkg-config --cflags --libs openblas); run: mpirun -n N span 128 512 ... */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

static double med(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	int rank, reps = 31;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	float *a = malloc(sizeof(float) * 4096 * 512), *b = malloc(sizeof(float) * 512 * 512),
	      *c = malloc(sizeof(float) * 4096 * 512);
	for (int i = 0; i < 4096 * 512; i++)
		a[i] = (float)(i % 7) / 7, c[i] = 0;
	for (int i = 0; i < 512 * 512; i++)
		b[i] = (float)(i % 5) / 5;
	for (int ai = 1; ai < argc; ai++) {
		int m = atoi(argv[ai]);
		double span[64], own[64], run[64], sk[64];
		for (int mode = 0; mode < 2; mode++)
			for (int r = 0; r < reps; r++) {
				int calls = mode ? 16 : 1;
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				for (int i = 0; i < calls; i++)
					cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, 512, 512,
					            1, a, 512, b, 512, 0, c, 512);
				double t1 = MPI_Wtime(), mine[4] = {t1 - t0, -t0, t1, t0}, all[4];
				MPI_Allreduce(mine, all, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (mode) {
					run[r] = (all[1] + all[2]) / calls;
				} else {
					span[r] = all[1] + all[2];
					own[r] = all[0];
					sk[r] = all[3] + all[1];
				}
			}
		double fl = 2.0 * m * 512 * 512 / 1e9;
		if (rank == 0)
			printf("m=%d span1 %.4f ms (%.1f GF) own1 %.4f ms (%.1f GF) run16 %.4f ms (%.1f GF) start skew %.4f ms\n",
			       m, 1e3 * med(span, reps), fl / med(span, reps), 1e3 * med(own, reps),
			       fl / med(own, reps), 1e3 * med(run, reps), fl / med(run, reps),
			       1e3 * med(sk, reps));
	}
	MPI_Finalize();
	return 0;
}
