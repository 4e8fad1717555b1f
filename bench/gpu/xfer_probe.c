/* xfer_probe.c: what one step of a fused ring costs on this machine, in
 * its parts: the step's transfer alone, a GEMM alone, and both at once (as
 * a fused schedule issues them), through the runtime, so with the transfer
 * mode CFRT_TRANSFER selects (nccl or ce).
 *
 *   mpirun -n N xfer_probe MIB GEMM_M [--bidir] [--iters N]
 *
 * Each rank sends MIB MiB to rank r+1 and receives as much from r-1 (with
 * --bidir also the other way round, half the bytes each way, as
 * fuse(bidir) splits a step), in one group; the GEMM is bf16
 * [GEMM_M x 4096] x [4096 x 4096]. Prints on rank 0, for each of
 * transfer, gemm and both, the median over --iters of the slowest rank's
 * time, and the transfer's bandwidth per direction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "median.h"

enum { KD = 4096, MAXIT = 256 };

typedef struct probe {
	cfrt_ctx *ctx;
	int r, n, bidir, gm;
	int64_t elems; /* bf16 elements moved each way */
	void *send[2], *recv[2], *a, *b, *c;
} probe;

static int step(probe *p, int xfer, int gemm)
{
	cfrt_req rq[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
	int64_t half = p->bidir ? p->elems / 2 : p->elems;
	int nx = 0;
	if (xfer) {
		CFRT_TRY(p->ctx, cfrt_group_begin(p->ctx));
		for (int d = 0; d <= p->bidir; d++) {
			int to = (p->r + (d ? -1 : 1) + p->n) % p->n;
			int from = (p->r + (d ? 1 : -1) + p->n) % p->n;
			CFRT_TRY(p->ctx, cfrt_isend(p->ctx, p->send[d], half, CFRT_BF16,
			                            to, d, &rq[nx++]));
			CFRT_TRY(p->ctx, cfrt_irecv(p->ctx, p->recv[d], half, CFRT_BF16,
			                            from, d, &rq[nx++]));
		}
		CFRT_TRY(p->ctx, cfrt_group_end(p->ctx));
	}
	if (gemm)
		CFRT_TRY(p->ctx, cfrt_gemm(p->ctx, CFRT_BF16, CFRT_NOTRANS,
		                           CFRT_NOTRANS, p->gm, KD, KD, 1.0, p->a,
		                           KD, 0, p->b, KD, 0, 0.0, p->c, KD, 0, 1));
	return cfrt_waitall(p->ctx, nx, rq);
}

/* Median ms over iters of the slowest rank. */
static double timed(probe *p, int iters, int xfer, int gemm)
{
	double t[MAXIT];
	for (int i = 0; i < 3; i++)
		if (step(p, xfer, gemm) != CFRT_OK)
			return -1;
	for (int i = 0; i < iters; i++) {
		double mine, all;
		cfrt_barrier(p->ctx);
		double t0 = cfrt_wtime(p->ctx);
		if (step(p, xfer, gemm) != CFRT_OK)
			return -1;
		mine = cfrt_wtime(p->ctx) - t0;
		MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		t[i] = all * 1e3;
	}
	return median(t, iters);
}

static int alloc_all(probe *p)
{
	size_t xb = (size_t)p->elems * 2, gb = (size_t)p->gm * KD * 2;
	for (int d = 0; d < 2; d++) {
		CFRT_TRY(p->ctx, cfrt_alloc(p->ctx, &p->send[d], xb));
		CFRT_TRY(p->ctx, cfrt_alloc(p->ctx, &p->recv[d], xb));
	}
	CFRT_TRY(p->ctx, cfrt_alloc(p->ctx, &p->a, gb));
	CFRT_TRY(p->ctx, cfrt_alloc(p->ctx, &p->b, (size_t)KD * KD * 2));
	CFRT_TRY(p->ctx, cfrt_alloc(p->ctx, &p->c, gb));
	cfrt_view va = cfrt_view_contig(p->a, CFRT_BF16, 2, (int64_t[]){p->gm, KD});
	cfrt_view vb = cfrt_view_contig(p->b, CFRT_BF16, 2, (int64_t[]){KD, KD});
	CFRT_TRY(p->ctx, cfrt_fill_uniform(p->ctx, &va, 1));
	return cfrt_fill_uniform(p->ctx, &vb, 2);
}

int main(int argc, char **argv)
{
	probe p = {0};
	int iters = 20, mib = 0;
	MPI_Init(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bidir"))
			p.bidir = 1;
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!mib)
			mib = atoi(argv[i]);
		else
			p.gm = atoi(argv[i]);
	}
	if (mib < 1 || p.gm < 1 || iters < 1 || iters > MAXIT) {
		fprintf(stderr, "usage: xfer_probe MIB GEMM_M [--bidir] [--iters N]\n");
		MPI_Finalize();
		return 2;
	}
	p.elems = (int64_t)mib << 19; /* MiB of bf16 */
	int size;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (cfrt_init(&p.ctx, MPI_COMM_WORLD, size, "xfer_probe") != CFRT_OK) {
		fprintf(stderr, "xfer_probe: %s\n", cfrt_last_error(NULL));
		MPI_Finalize();
		return 1;
	}
	p.r = cfrt_rank(p.ctx);
	p.n = cfrt_size(p.ctx);
	if (alloc_all(&p) != CFRT_OK)
		MPI_Abort(MPI_COMM_WORLD, 1);
	double tx = timed(&p, iters, 1, 0), tg = timed(&p, iters, 0, 1);
	double tb = timed(&p, iters, 1, 1);
	if (tx < 0 || tg < 0 || tb < 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (p.r == 0)
		printf("xfer_probe: ranks=%d backend=%s %s MiB=%d gemm_m=%d "
		       "transfer_ms=%.3f gbps_per_dir=%.1f gemm_ms=%.3f both_ms=%.3f "
		       "hidden=%.2f\n", p.n, cfrt_backend_name(),
		       p.bidir ? "bidir" : "ring", mib, p.gm, tx,
		       (double)p.elems * 2 / (p.bidir ? 2 : 1) / (tx * 1e6), tg, tb,
		       tx > 0 ? 1 - (tb - (tg > tx ? tg : tx)) / (tg < tx ? tg : tx) : 0);
	cfrt_finalize(p.ctx);
	MPI_Finalize();
	return 0;
}
