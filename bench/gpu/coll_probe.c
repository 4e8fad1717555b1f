/* coll_probe.c: the library collectives timed each way a profile or a
 * pass meets them, through the runtime, to tell why cfrt-calibrate's
 * `coll` points and a pass disagree (bench-gpu's vanilla rows with NCCL:
 * a reduce-scatter of 256 MiB blocks on 4 H100s, 2.5 ms in the profile,
 * 1.87-1.96 ms between a pass and its compute alone).
 *
 *   mpirun -n N coll_probe [--mib B] [--reps R]
 *
 * B MiB blocks (default 256). For all_gather and reduce_scatter, each a
 * median of R runs (default 9) of the slowest rank, timed as calibrate
 * times a point (barrier, wtime, the call, cfrt_sync, wtime):
 *
 *   f32       the count in f32 elements, as cfrt-calibrate calls it
 *   bf16      the same bytes in bf16 elements, as a bf16 pass calls it
 *   burst4    four calls back to back, per call
 *   after     behind a bf16 16384x4096x4096 GEMM queued just before it,
 *             as a vanilla pass runs it: the GEMM and the collective
 *             timed together, less the GEMM timed alone
 *
 * Prints "op=OP way=W ms=T" lines on rank 0. On 4 H100s every way gave
 * 2.47-2.53 ms: the profile was right, and the pass's GEMM ran faster
 * between its collectives than back to back (the clock: docs/PROFILE.md,
 * bench/results/2026-11-27-H100-lease12-13-a1ce802/clock.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "median.h"

typedef struct Probe {
	cfrt_ctx *ctx;
	int size, rank;
	size_t blk;       /* bytes of a block */
	void *send, *recv; /* the collective's buffers: size blocks each */
	void *a, *b, *c;   /* the GEMM's */
} Probe;

enum { GM = 16384, GN = 4096, GK = 4096, MAXREPS = 64 };

static void
die(Probe *P, int rc, const char *what)
{
	if (rc == CFRT_OK)
		return;
	fprintf(stderr, "coll_probe: rank %d: %s: %s\n", P->rank, what,
	        cfrt_last_error(P->ctx));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static int
coll(Probe *P, int op, cfrt_dtype t)
{
	int64_t n = (int64_t)(P->blk / cfrt_dtype_size(t));
	return op ? cfrt_reduce_scatter(P->ctx, P->send, P->recv, n, t)
	          : cfrt_all_gather(P->ctx, P->send, P->recv, n, t);
}

static int
gemm(Probe *P)
{
	return cfrt_gemm(P->ctx, CFRT_BF16, CFRT_NOTRANS, CFRT_NOTRANS, GM, GN, GK, 1, P->a, GK,
	                 0, P->b, GN, 0, 0, P->c, GN, 0, 1);
}

/* How a way runs: a GEMM first or not, then calls collectives of type t
 * back to back (none: the GEMM alone). */
typedef struct Way {
	const char *name;
	cfrt_dtype t;
	int calls, gemm;
} Way;

static const Way gemm_way = {"gemm", CFRT_BF16, 0, 1};
static const Way ways[] = {
	{"f32", CFRT_F32, 1, 0}, {"bf16", CFRT_BF16, 1, 0},
	{"burst4", CFRT_BF16, 4, 0}, {"after", CFRT_BF16, 1, 1},
};

/* The median over reps of the slowest rank's time of way w of op, per
 * collective call (the GEMM alone: per GEMM). */
static double
timed(Probe *P, int op, const Way *w, int reps)
{
	double t[MAXREPS];
	int per = w->calls > 0 ? w->calls : 1;

	for (int i = -1; i < reps; i++) { /* i = -1: a warm-up */
		die(P, cfrt_barrier(P->ctx), "cfrt_barrier");
		double t0 = cfrt_wtime(P->ctx);
		if (w->gemm)
			die(P, gemm(P), "cfrt_gemm");
		for (int k = 0; k < w->calls; k++)
			die(P, coll(P, op, w->t), "the collective");
		die(P, cfrt_sync(P->ctx), "cfrt_sync");
		double mine = (cfrt_wtime(P->ctx) - t0) / per, all;
		MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (i >= 0)
			t[i] = all;
	}
	return median(t, reps);
}

int
main(int argc, char **argv)
{
	Probe P = {0};
	int mib = 256, reps = 9;

	MPI_Init(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mib") && i + 1 < argc)
			mib = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: coll_probe [--mib B] [--reps R]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (mib < 1 || reps < 1 || reps > MAXREPS) {
		fprintf(stderr, "coll_probe: --mib >= 1, 1 <= --reps <= %d\n", MAXREPS);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Comm_size(MPI_COMM_WORLD, &P.size);
	MPI_Comm_rank(MPI_COMM_WORLD, &P.rank);
	if (cfrt_init(&P.ctx, MPI_COMM_WORLD, P.size, "coll_probe") != CFRT_OK) {
		fprintf(stderr, "coll_probe: cfrt_init: %s\n", cfrt_last_error(P.ctx));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	P.blk = (size_t)mib << 20;
	die(&P, cfrt_alloc(P.ctx, &P.send, P.blk * (size_t)P.size), "cfrt_alloc");
	die(&P, cfrt_alloc(P.ctx, &P.recv, P.blk * (size_t)P.size), "cfrt_alloc");
	die(&P, cfrt_alloc(P.ctx, &P.a, (size_t)GM * GK * 2), "cfrt_alloc");
	die(&P, cfrt_alloc(P.ctx, &P.b, (size_t)GK * GN * 2), "cfrt_alloc");
	die(&P, cfrt_alloc(P.ctx, &P.c, (size_t)GM * GN * 2), "cfrt_alloc");
	int64_t na = (int64_t)GM * GK, nb = (int64_t)GK * GN;
	cfrt_view va = cfrt_view_contig(P.a, CFRT_BF16, 1, &na);
	cfrt_view vb = cfrt_view_contig(P.b, CFRT_BF16, 1, &nb);
	die(&P, cfrt_fill_uniform(P.ctx, &va, 1), "cfrt_fill_uniform");
	die(&P, cfrt_fill_uniform(P.ctx, &vb, 2), "cfrt_fill_uniform");

	double g = timed(&P, 0, &gemm_way, reps);
	if (P.rank == 0)
		printf("gemm %dx%dx%d bf16 ms=%.4f\n", GM, GN, GK, g * 1e3);
	static const char *const ops[] = {"all_gather", "reduce_scatter"};
	for (int op = 0; op < 2; op++)
		for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
			double s = timed(&P, op, &ways[w], reps) - (ways[w].gemm ? g : 0);
			if (P.rank == 0)
				printf("op=%s way=%s mib=%d ranks=%d ms=%.4f\n", ops[op], ways[w].name, mib,
				       P.size, s * 1e3);
		}
	cfrt_finalize(P.ctx);
	MPI_Finalize();
	return 0;
}
