/* progress_bench: which CPU progress mode hides a transfer best.
 * Every rank sends a large message round the ring while it runs a large
 * GEMM, with one context per CFRT_PROGRESS mode (none, panel, thread),
 * and rank 0 prints medians over the repetitions of the slowest rank's
 * times: the GEMM alone, the transfer alone, and GEMM + transfer
 * overlapped; hidden = (gemm + comm - overlap) / min(gemm, comm).
 *   mpirun -np 2 progress_bench [M K N MiB reps]   (defaults 1024 1024 1024 32 9)
 * Run it with OPENBLAS_NUM_THREADS=1 when ranks share the cores. */
#include <stdio.h>
#include <stdlib.h>

#include "cfrt.h"
#include "median.h"

typedef struct bench {
	int64_t m, k, n, len; /* GEMM shape; message in floats */
	int reps;
	float *a, *b, *c, *s, *r;
} bench;

enum { GEMM, COMM, BOTH, NT };
enum { NMODE = 3 };

static void start_ring(cfrt_ctx *ctx, bench *b, cfrt_req req[2])
{
	int r = cfrt_rank(ctx), p = cfrt_size(ctx);
	CFRT_TRY(ctx, cfrt_group_begin(ctx));
	CFRT_TRY(ctx, cfrt_isend(ctx, b->s, b->len, CFRT_F32, (r + 1) % p, 0,
	                         &req[0]));
	CFRT_TRY(ctx, cfrt_irecv(ctx, b->r, b->len, CFRT_F32, (r + p - 1) % p, 0,
	                         &req[1]));
	CFRT_TRY(ctx, cfrt_group_end(ctx));
}

static void gemm(cfrt_ctx *ctx, bench *b)
{
	CFRT_TRY(ctx, cfrt_gemm(ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS, b->m,
	                        b->n, b->k, 1.0, b->a, b->k, 0, b->b, b->n, 0, 0.0,
	                        b->c, b->n, 0, 1));
}

/* Seconds of one run of `what` on the slowest rank. */
static double run_once(cfrt_ctx *ctx, bench *b, int what)
{
	cfrt_req req[2];
	double dt, worst;
	CFRT_TRY(ctx, cfrt_barrier(ctx));
	double t0 = cfrt_wtime(ctx);
	if (what != GEMM)
		start_ring(ctx, b, req);
	if (what != COMM)
		gemm(ctx, b);
	if (what != GEMM)
		CFRT_TRY(ctx, cfrt_waitall(ctx, 2, req));
	dt = cfrt_wtime(ctx) - t0;
	MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return worst;
}

static float *floats(cfrt_ctx *ctx, int64_t n, uint64_t seed)
{
	void *p;
	CFRT_TRY(ctx, cfrt_alloc(ctx, &p, sizeof(float) * (size_t)n));
	cfrt_view v = cfrt_view_contig(p, CFRT_F32, 1, &n);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &v, seed));
	return p;
}

static const char *const modes[NMODE] = {"none", "panel", "thread"};

/* Runs the measurements of the modes in turn, repetition after repetition,
 * so that load from outside spreads over all modes alike; t[mode][what][i]
 * is the time of repetition i. */
static void measure(cfrt_ctx *ctx[NMODE], bench *b, double *t[NMODE][NT])
{
	for (int i = -1; i < b->reps; i++) /* i = -1: warm-up */
		for (int mode = 0; mode < NMODE; mode++)
			for (int what = 0; what < NT; what++) {
				double dt = run_once(ctx[mode], b, what);
				if (i >= 0)
					t[mode][what][i] = dt;
			}
}

/* Median of n times, in milliseconds; sorts t. */
static double median_ms(double *t, int n)
{
	return 1e3 * median(t, n);
}

static void report(cfrt_ctx *ctx[NMODE], bench *b, double *t[NMODE][NT])
{
	for (int mode = 0; mode < NMODE; mode++) {
		double ms[NT];
		for (int what = 0; what < NT; what++)
			ms[what] = median_ms(t[mode][what], b->reps);
		double hidden = (ms[GEMM] + ms[COMM] - ms[BOTH]) /
		                (ms[GEMM] < ms[COMM] ? ms[GEMM] : ms[COMM]);
		printf("%-7s %9.2f %9.2f %11.2f %9.0f%%\n",
		       cfrt_progress_name(ctx[mode]), ms[GEMM], ms[COMM], ms[BOTH],
		       100.0 * hidden);
	}
}

static void run(bench *b, int rank)
{
	cfrt_ctx *ctx[NMODE];
	double *t[NMODE][NT];
	int size;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int mode = 0; mode < NMODE; mode++) {
		setenv("CFRT_PROGRESS", modes[mode], 1);
		CFRT_TRY(NULL, cfrt_init(&ctx[mode], MPI_COMM_WORLD, size,
		                         "progress_bench"));
		for (int what = 0; what < NT; what++)
			t[mode][what] = malloc(sizeof(double) * (size_t)b->reps);
	}
	b->a = floats(ctx[0], b->m * b->k, 1);
	b->b = floats(ctx[0], b->k * b->n, 2);
	b->c = floats(ctx[0], b->m * b->n, 3);
	b->s = floats(ctx[0], b->len, 4);
	b->r = floats(ctx[0], b->len, 5);
	measure(ctx, b, t);
	if (rank == 0)
		report(ctx, b, t);
	float *bufs[] = {b->a, b->b, b->c, b->s, b->r};
	for (int i = 0; i < 5; i++)
		cfrt_free(ctx[0], bufs[i]);
	for (int mode = 0; mode < NMODE; mode++) {
		for (int what = 0; what < NT; what++)
			free(t[mode][what]);
		CFRT_TRY(NULL, cfrt_finalize(ctx[mode]));
	}
}

int main(int argc, char **argv)
{
	int provided, rank;
	bench b = {1024, 1024, 1024, 32, 9, NULL, NULL, NULL, NULL, NULL};
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc == 6) {
		b.m = atoll(argv[1]);
		b.k = atoll(argv[2]);
		b.n = atoll(argv[3]);
		b.len = atoll(argv[4]);
		b.reps = atoi(argv[5]);
	}
	b.len = b.len * 1024 * 1024 / (int64_t)sizeof(float);
	if (rank == 0)
		printf("gemm %lldx%lldx%lld f32, %lld MiB round the ring, median of "
		       "%d\nmode      gemm ms   comm ms  overlap ms    hidden\n",
		       (long long)b.m, (long long)b.k, (long long)b.n,
		       (long long)(b.len * 4 >> 20), b.reps);
	run(&b, rank);
	MPI_Finalize();
	return 0;
}
