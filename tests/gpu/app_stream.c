/* app_stream.c: an application that runs a generated model (mlp, built by
 * runtime/cuda/cuda.mk) on its own CUDA stream and NCCL communicator, as
 * PyTorch would (cfrt_init_opts with CFRT_OPT_STREAM | CFRT_OPT_NCCL_COMM).
 * On its stream, with no host synchronisation until the end: it garbles
 * the output, keeps the stream busy (large device copies), writes the
 * input just before the forward, copies the output right after it, then
 * garbles input and output again; ITERS times. Each copied output must
 * equal the serial reference's (a context of its own, made the usual way)
 * to 1e-5: work of the forward that ran outside the stream's order would
 * read a garbled input or be garbled itself.
 * Prints "app_stream: N ranks, iter I: max_rel_err E: ok" per iteration
 * and "app_stream: all ok". Run under mpirun (tests/gpu/run.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mlp.h"

enum { ITERS = 3, BUSY = 24 };
#define BUSY_BYTES ((size_t)64 << 20)

#define CK(call)                                                             \
	do {                                                                 \
		cudaError_t e_ = (call);                                     \
		if (e_ != cudaSuccess) {                                     \
			fprintf(stderr, "app_stream: %s: %s\n", #call,       \
			        cudaGetErrorString(e_));                     \
			MPI_Abort(MPI_COMM_WORLD, 1);                        \
		}                                                            \
	} while (0)

static size_t numel(const int64_t *d, int nd)
{
	size_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= (size_t)d[i];
	return n;
}

/* The application's NCCL communicator over MPI_COMM_WORLD. */
static ncclComm_t app_nccl(int rank, int size)
{
	ncclUniqueId id;
	ncclComm_t c;
	if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (ncclCommInitRank(&c, size, id, rank) != ncclSuccess)
		MPI_Abort(MPI_COMM_WORLD, 1);
	return c;
}

/* The whole output of the serial reference (tp = 1: shards are whole
 * tensors), from the same weights and input, in a context of its own. */
static float *reference(const mlp_weights *w, const void *x, size_t ybytes)
{
	cfrt_ctx *r;
	void *y, *ws;
	float *host = malloc(ybytes);
	CFRT_TRY(NULL, cfrt_init(&r, MPI_COMM_SELF, 1, "mlp_ref"));
	CFRT_TRY(r, cfrt_alloc(r, &y, ybytes));
	CFRT_TRY(r, cfrt_alloc(r, &ws, mlp_ref_workspace_bytes()));
	mlp_io io = {x, y};
	CFRT_TRY(r, mlp_ref_forward(r, w, &io, ws));
	CFRT_TRY(r, cfrt_download(r, host, y, ybytes));
	CFRT_TRY(r, cfrt_free(r, y));
	CFRT_TRY(r, cfrt_free(r, ws));
	CFRT_TRY(NULL, cfrt_finalize(r));
	return host;
}

static double max_rel_err(const float *a, const float *b, size_t n)
{
	double e = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		e = d > e || d != d ? d : e;
		m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
	}
	return m > 0 ? e / m : e;
}

/* Fills a tensor of the model with its seed, as the driver does. */
static void fill(cfrt_ctx *ctx, void *p, int nd, const int64_t *dims,
                 uint64_t seed)
{
	cfrt_view v = cfrt_view_contig(p, MLP_DTYPE, nd, dims);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &v, seed));
}

int main(int argc, char **argv)
{
	int rank, size, ok = 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 1) { /* whole tensors: the reference's are this rank's */
		if (rank == 0)
			fprintf(stderr, "app_stream: built for tp = 1, run on 1 rank\n");
		MPI_Finalize();
		return 1;
	}
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ncclComm_t nc = app_nccl(rank, size);
	cfrt_opts o = {.flags = CFRT_OPT_STREAM | CFRT_OPT_NCCL_COMM, .stream = s, .nccl_comm = nc};
	cfrt_ctx *ctx;
	int sizes[1] = {MLP_GROUP_SIZE};
	CFRT_TRY(NULL, cfrt_init_opts(&ctx, MPI_COMM_WORLD, 1, sizes, "mlp", &o));

	/* the application's memory (cudaMalloc, as a framework's allocator) */
	const int64_t xd[] = MLP_x_RANK_DIMS, yd[] = MLP_y_RANK_DIMS,
	              w1d[] = MLP_w1_RANK_DIMS, w2d[] = MLP_w2_RANK_DIMS;
	size_t es = cfrt_dtype_size(MLP_DTYPE), xb = numel(xd, MLP_x_NDIM) * es,
	       yb = numel(yd, MLP_y_NDIM) * es;
	void *x0, *x, *y, *yout, *ws, *w1, *w2, *busy[2];
	float *host[ITERS];
	CK(cudaMalloc(&x0, xb));
	CK(cudaMalloc(&x, xb));
	CK(cudaMalloc(&y, yb));
	CK(cudaMalloc(&yout, yb * ITERS));
	CK(cudaMalloc(&ws, mlp_workspace_bytes()));
	CK(cudaMalloc(&w1, numel(w1d, MLP_w1_NDIM) * es));
	CK(cudaMalloc(&w2, numel(w2d, MLP_w2_NDIM) * es));
	CK(cudaMalloc(&busy[0], BUSY_BYTES));
	CK(cudaMalloc(&busy[1], BUSY_BYTES));
	for (int i = 0; i < ITERS; i++)
		CK(cudaMallocHost((void **)&host[i], yb));
	fill(ctx, x0, MLP_x_NDIM, xd, MLP_x_SEED);
	fill(ctx, w1, MLP_w1_NDIM, w1d, MLP_w1_SEED);
	fill(ctx, w2, MLP_w2_NDIM, w2d, MLP_w2_SEED);
	CK(cudaStreamSynchronize(s));
	mlp_weights w = {w1, w2};
	float *want = reference(&w, x0, yb);

	mlp_io io = {x, y};
	for (int i = 0; i < ITERS; i++) {
		CK(cudaMemsetAsync(y, 0xff, yb, s)); /* NaN */
		for (int k = 0; k < BUSY; k++)
			CK(cudaMemcpyAsync(busy[k % 2], busy[1 - k % 2], BUSY_BYTES,
			                   cudaMemcpyDeviceToDevice, s));
		CK(cudaMemcpyAsync(x, x0, xb, cudaMemcpyDeviceToDevice, s));
		CFRT_TRY(ctx, mlp_forward(ctx, &w, &io, ws));
		CK(cudaMemcpyAsync((char *)yout + i * yb, y, yb,
		                   cudaMemcpyDeviceToDevice, s));
		CK(cudaMemsetAsync(x, 0xff, xb, s));
		CK(cudaMemsetAsync(y, 0xff, yb, s));
	}
	for (int i = 0; i < ITERS; i++)
		CK(cudaMemcpyAsync(host[i], (char *)yout + i * yb, yb,
		                   cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	for (int i = 0; i < ITERS; i++) {
		double e = max_rel_err(host[i], want, yb / es);
		int good = e <= 1e-5;
		ok &= good;
		printf("app_stream: %d ranks, iter %d: max_rel_err %.3e: %s\n", size,
		       i, e, good ? "ok" : "MISMATCH");
	}
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	/* the context leaves the stream and the communicator to their owner */
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	if (ncclCommDestroy(nc) != ncclSuccess)
		ok = 0;
	if (ok)
		printf("app_stream: all ok\n");
	for (int i = 0; i < ITERS; i++)
		cudaFreeHost(host[i]);
	free(want);
	MPI_Finalize();
	return ok ? 0 : 1;
}
