/* A program that fails on purpose, for tests/t-runtime.sh: the job must end
 * at once with "cfrt: rank R: op OP step S: ..." and a non-zero status,
 * never hang. MPI is initialised with plain MPI_Init.
 *   fault arg       the last rank passes a bad lda to cfrt_gemm at step 2
 *                   of a ring while the others wait for its message;
 *   fault truncate  rank 0 receives 4 elements of an 8-element message;
 *   fault size      cfrt_init is told the group has 2 ranks more;
 *   fault fallback  prints the progress mode (CFRT_PROGRESS=thread falls
 *                   back to panel without MPI_THREAD_MULTIPLE), exits 0. */
#include <stdio.h>
#include <string.h>

#include "cfrt.h"

enum { STEPS = 5, N = 1024 };

/* Ring steps as generated code makes them; the last rank breaks step 2. */
static void ring_with_bad_gemm(cfrt_ctx *ctx)
{
	static float buf[2][N], a[16], c[16];
	int r = cfrt_rank(ctx), p = cfrt_size(ctx);
	for (int step = 0; step < STEPS; step++) {
		cfrt_req req[2];
		cfrt_where(ctx, "fault_ring", step);
		int bad = step == 2 && r == p - 1;
		CFRT_TRY(ctx, cfrt_gemm(ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS,
		                        2, 2, 4, 1.0, a, bad ? 2 : 4, 0, a, 2, 0,
		                        0.0, c, 2, 0, 1));
		CFRT_TRY(ctx, cfrt_group_begin(ctx));
		CFRT_TRY(ctx, cfrt_isend(ctx, buf[step % 2], N, CFRT_F32,
		                         (r + 1) % p, step, &req[0]));
		CFRT_TRY(ctx, cfrt_irecv(ctx, buf[(step + 1) % 2], N, CFRT_F32,
		                         (r + p - 1) % p, step, &req[1]));
		CFRT_TRY(ctx, cfrt_group_end(ctx));
		CFRT_TRY(ctx, cfrt_waitall(ctx, 2, req));
	}
}

static void truncated_receive(cfrt_ctx *ctx)
{
	static double buf[8];
	cfrt_req req = {0, 0};
	int r = cfrt_rank(ctx), p = cfrt_size(ctx);
	cfrt_where(ctx, "short_recv", 1);
	if (r == 1 % p)
		CFRT_TRY(ctx, cfrt_isend(ctx, buf, 8, CFRT_F64, 0, 3, &req));
	if (r == 0)
		CFRT_TRY(ctx, cfrt_irecv(ctx, buf, 4, CFRT_F64, 1 % p, 3, &req));
	CFRT_TRY(ctx, cfrt_wait(ctx, &req));
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int size;
	const char *mode = argc > 1 ? argv[1] : "arg";
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int expect = strcmp(mode, "size") == 0 ? size + 2 : size;
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, expect, "fault"));
	if (strcmp(mode, "fallback") == 0 && cfrt_rank(ctx) == 0)
		printf("progress %s\n", cfrt_progress_name(ctx));
	if (strcmp(mode, "arg") == 0)
		ring_with_bad_gemm(ctx);
	if (strcmp(mode, "truncate") == 0)
		truncated_receive(ctx);
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return 0;
}
