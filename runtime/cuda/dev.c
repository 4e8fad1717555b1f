/* dev.c: the low layer of the backend: CUDA and cuBLAS errors, the
 * device (chosen once per process), its compute stream and libraries,
 * streams for the modules above, memory (cfrt_alloc's buffers, the
 * attention workspace), host copies and the clock. Knows nothing of
 * transfers or GEMM plans.
 * ensures: after cfrti_dev_init the context holds the device, a compute
 * stream of the lowest priority and a cuBLAS and a cuBLASLt handle on it;
 * CUDA and cuBLAS failures come back as statuses with messages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kern.h"

/* The device of this process, chosen by its first context (-1: none yet):
 * a second context (the driver's serial reference on MPI_COMM_SELF) must
 * not move the process to another device. */
static int process_device = -1;

int cfrti_cuda(cfrt_ctx *ctx, cudaError_t e, const char *call)
{
	if (e == cudaSuccess)
		return CFRT_OK;
	return cfrti_err(ctx, e == cudaErrorMemoryAllocation ? CFRT_ENOMEM :
	                 CFRT_EDEVICE, "%s failed: %s", call,
	                 cudaGetErrorString(e));
}

int cfrti_blas(cfrt_ctx *ctx, cublasStatus_t e, const char *call)
{
	if (e == CUBLAS_STATUS_SUCCESS)
		return CFRT_OK;
	return cfrti_err(ctx, e == CUBLAS_STATUS_ALLOC_FAILED ? CFRT_ENOMEM :
	                 CFRT_EDEVICE, "%s failed: %s", call,
	                 cublasGetStatusString(e));
}

int cfrti_check_dtype(cfrt_ctx *ctx, cfrt_dtype t)
{
	if (t == CFRT_F32 || t == CFRT_F64 || t == CFRT_BF16 || t == CFRT_F16)
		return CFRT_OK;
	return cfrti_err(ctx, CFRT_EINVAL, "unknown dtype %d", (int)t);
}

int cfrti_ws_reserve(cfrt_ctx *ctx, size_t bytes)
{
	if (ctx->dev.ws_bytes >= bytes)
		return CFRT_OK;
	/* cudaFree waits for the device: nothing still reads the old one */
	cudaFree(ctx->dev.ws);
	ctx->dev.ws = NULL;
	ctx->dev.ws_bytes = 0;
	int rc = cfrti_cuda(ctx, cudaMalloc(&ctx->dev.ws, bytes), "cudaMalloc");
	if (rc == CFRT_OK)
		ctx->dev.ws_bytes = bytes;
	return rc;
}

/* ---- device choice ---------------------------------------------------- */

/* This process's rank among the processes of its node, from the launcher's
 * environment, or -1. */
static int env_local_rank(void)
{
	static const char *const names[] = {
		"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
		"MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMI_LOCAL_RANK",
		"LOCAL_RANK" /* torchrun */
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *s = getenv(names[i]);
		if (s && *s)
			return atoi(s);
	}
	return -1;
}

/* CFRT_DEVICE, else the local rank (launcher, else the rank among the
 * ranks of comm, the whole job, that share this node; 0 without MPI)
 * modulo the number of devices. Collective over comm when the fallback is
 * needed. */
static int choose_device(MPI_Comm comm, int *dev)
{
	int n = 0, local = env_local_rank();
	const char *s = getenv("CFRT_DEVICE");
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1)
		return -1;
	if (s && *s) {
		*dev = atoi(s);
		return *dev >= 0 && *dev < n ? 0 : -1;
	}
	if (local < 0 && comm == MPI_COMM_NULL) {
		local = 0; /* no MPI, no launcher: this process alone */
	} else if (local < 0) {
		MPI_Comm node;
		if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0,
		                        MPI_INFO_NULL, &node) != MPI_SUCCESS)
			return -1;
		MPI_Comm_rank(node, &local);
		MPI_Comm_free(&node);
	}
	*dev = local % n;
	return 0;
}

/* ---- init and fini ---------------------------------------------------- */

int cfrti_dev_stream(cfrt_ctx *ctx, int high, cudaStream_t *s)
{
	int lo = 0, hi = 0;
	int rc = cfrti_cuda(ctx, cudaDeviceGetStreamPriorityRange(&lo, &hi),
	                    "cudaDeviceGetStreamPriorityRange");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamCreateWithPriority(s,
		                cudaStreamNonBlocking, high ? hi : lo),
		                "cudaStreamCreate");
	return rc;
}

/* cuBLAS and cuBLASLt on the compute stream. */
static int libraries(cfrt_ctx *ctx)
{
	dev_state *d = &ctx->dev;
	int rc = cfrti_blas(ctx, cublasCreate(&d->blas), "cublasCreate");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetStream(d->blas, d->cs),
		                "cublasSetStream");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaMalloc(&d->blas_ws, BLAS_WS), "cudaMalloc");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetWorkspace(d->blas, d->blas_ws,
		                BLAS_WS), "cublasSetWorkspace");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasLtCreate(&d->lt), "cublasLtCreate");
	if (rc == CFRT_OK && ctx->base.check_finite)
		rc = cfrti_cuda(ctx, cudaMalloc((void **)&d->chk, 3 * sizeof *d->chk),
		                "cudaMalloc");
	if (rc == CFRT_OK && ctx->base.check_finite)
		rc = cfrti_cuda(ctx, cudaMallocHost((void **)&d->chk_host,
		                3 * sizeof *d->chk_host), "cudaMallocHost");
	/* no TF32: f32 GEMMs round like f32 */
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetMathMode(d->blas,
		                CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
	return rc;
}

/* The application's stream (CFRT_OPT_STREAM) and its device. */
static int app_stream(cfrt_ctx *ctx)
{
	cudaStream_t s = (cudaStream_t)ctx->base.opts.stream;
	int dev = -1;
	int rc = cfrti_cuda(ctx, cudaStreamGetDevice(s, &dev), "cudaStreamGetDevice");
	if (rc != CFRT_OK)
		return cfrti_err(ctx, CFRT_EINVAL, "the application's stream: %s",
		                 ctx->base.err + strlen(ctx->base.api) + 2);
	ctx->base.device = dev;
	if (process_device < 0)
		process_device = dev;
	ctx->dev.cs = s;
	return cfrti_cuda(ctx, cudaSetDevice(dev), "cudaSetDevice");
}

/* The device (chosen once per process; the application's stream's when
 * it gives one), its compute stream (the application's, else one of the
 * lowest priority) and libraries. */
int cfrti_dev_init(cfrt_ctx *ctx)
{
	if (ctx->base.opts.flags & CFRT_OPT_STREAM) {
		int rc = app_stream(ctx);
		return rc != CFRT_OK ? rc : libraries(ctx);
	}
	if (process_device < 0 && choose_device(ctx->base.job, &process_device))
		return cfrti_err(ctx, CFRT_EDEVICE, "no CUDA device (or "
		                 "CFRT_DEVICE names none)");
	ctx->base.device = process_device;
	int rc = cfrti_cuda(ctx, cudaSetDevice(ctx->base.device),
	                    "cudaSetDevice");
	if (rc == CFRT_OK)
		rc = cfrti_dev_stream(ctx, 0, &ctx->dev.cs);
	ctx->dev.own_cs = ctx->dev.cs != NULL;
	if (rc == CFRT_OK)
		rc = libraries(ctx);
	return rc;
}

/* Frees the libraries, the compute stream and every buffer; after a
 * failed init too. */
void cfrti_dev_fini(cfrt_ctx *ctx)
{
	dev_state *d = &ctx->dev;
	if (d->lt)
		cublasLtDestroy(d->lt);
	if (d->blas)
		cublasDestroy(d->blas);
	if (d->cs && d->own_cs)
		cudaStreamDestroy(d->cs);
	cudaFree(d->ws);
	cudaFree(d->blas_ws);
	cudaFree(d->chk);
	cudaFreeHost(d->chk_host);
	for (int i = 0; i < d->nal; i++)
		cudaFree(d->al[i].base);
	free(d->al);
	memset(d, 0, sizeof *d);
}

int cfrti_dev_check(cfrt_ctx *ctx, int rc, const cfrt_view *o1,
                    const cfrt_view *o2, const cfrt_view *o3)
{
	static const char *const name[3] = {"the result", "the 2nd result",
	                                    "the 3rd result"};
	const cfrt_view *o[3] = {o1, o2, o3};
	dev_state *d = &ctx->dev;
	if (rc != CFRT_OK || !ctx->base.check_finite)
		return rc;
	/* the call's span ends with its own work, before the check's */
	cfrti_tr_close(ctx, d->cs);
	rc = cfrti_cuda(ctx, cudaMemsetAsync(d->chk, 0xff, 3 * sizeof *d->chk, d->cs),
	                "cudaMemsetAsync");
	for (int i = 0; i < 3 && rc == CFRT_OK; i++)
		if (o[i] && cfrt_view_numel(o[i]) > 0)
			rc = cfrti_cuda(ctx, (cudaError_t)cfrtk_nonfinite(d->cs, o[i]->t,
			                kv_of(o[i]), d->chk + i), "finite check kernel");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaMemcpyAsync(d->chk_host, d->chk, 3 * sizeof *d->chk,
		                cudaMemcpyDeviceToHost, d->cs), "cudaMemcpyAsync");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamSynchronize(d->cs), "cudaStreamSynchronize");
	for (int i = 0; i < 3 && rc == CFRT_OK; i++) {
		unsigned long long k = d->chk_host[i];
		if (!o[i] || cfrt_view_numel(o[i]) == 0 || k == ~0ull)
			continue;
		double x = (k & 3) == 0 ? NAN : (k & 3) == 1 ? INFINITY : -INFINITY;
		return cfrti_err_nonfinite(ctx, name[i], x, (int64_t)(k >> 2),
		                           cfrt_view_numel(o[i]));
	}
	return rc;
}

double cfrt_wtime(cfrt_ctx *ctx)
{
	/* a failure here shows at the next call that checks */
	cfrti_tr_close(ctx, ctx->dev.cs);
	cudaStreamSynchronize(ctx->dev.cs);
	return cfrti_now();
}

/* ---- memory ----------------------------------------------------------- */

/* Device (or managed) memory: what a kernel or cuBLAS can read. */
int cfrti_check_mem(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what,
                    int known)
{
	(void)known; /* cfrt_register'ed memory must be the device's too */
	struct cudaPointerAttributes at;

	if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
		cudaGetLastError(); /* clear it: the pointer is the user's error */
		return cfrti_err(ctx, CFRT_EINVAL, "%s (%zu bytes) is no pointer CUDA knows", what,
		                 bytes);
	}
	if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged)
		return cfrti_err(ctx, CFRT_EINVAL, "%s (%zu bytes) is host memory, not device "
		                 "memory (cfrt_alloc)", what, bytes);
	const alloc_rec *a = cfrti_alloc_of(ctx, p, 1);
	const char *c = p;
	if (a && c + bytes > a->base + a->bytes)
		return cfrti_err(ctx, CFRT_EINVAL, "%s needs %zu bytes, but its cfrt_alloc "
		                 "buffer has %zu from there", what, bytes,
		                 (size_t)(a->base + a->bytes - c));
	return CFRT_OK;
}

/* The allocation that holds [p, p+bytes), or NULL. */
const alloc_rec *cfrti_alloc_of(cfrt_ctx *ctx, const void *p, size_t bytes)
{
	const char *c = p;
	for (int i = 0; i < ctx->dev.nal; i++) {
		const alloc_rec *a = &ctx->dev.al[i];
		if (c >= a->base && c + bytes <= a->base + a->bytes)
			return a;
	}
	return NULL;
}

/* The IPC handle of an allocation, made on first use. */
int cfrti_alloc_handle(cfrt_ctx *ctx, const alloc_rec *ca,
                       cudaIpcMemHandle_t *h)
{
	alloc_rec *a = &ctx->dev.al[ca - ctx->dev.al];
	if (!a->has_handle) {
		int rc = cfrti_cuda(ctx, cudaIpcGetMemHandle(&a->h, a->base),
		                    "cudaIpcGetMemHandle");
		if (rc != CFRT_OK)
			return rc;
		a->has_handle = 1;
	}
	*h = a->h;
	return CFRT_OK;
}

static int alloc_add(cfrt_ctx *ctx, void *p, size_t bytes)
{
	dev_state *d = &ctx->dev;
	alloc_rec *n = realloc(d->al, (size_t)(d->nal + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the allocation "
		                 "table");
	d->al = n;
	d->al[d->nal++] = (alloc_rec){p, bytes, ++d->serials, 0, {{0}}};
	cfrti_mem_add(ctx, (long long)bytes);
	return CFRT_OK;
}

int cfrt_alloc(cfrt_ctx *ctx, void **ptr, size_t bytes)
{
	ctx->base.api = "cfrt_alloc";
	*ptr = NULL;
	if (bytes == 0)
		return CFRT_OK;
	void *p = NULL;
	int rc = cfrti_cuda(ctx, cudaMalloc(&p, bytes), "cudaMalloc");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaMemsetAsync(p, 0, bytes, ctx->dev.cs),
		                "cudaMemsetAsync");
	if (rc == CFRT_OK)
		rc = alloc_add(ctx, p, bytes);
	if (rc != CFRT_OK) {
		cudaFree(p);
		return rc;
	}
	*ptr = p;
	return CFRT_OK;
}

int cfrt_free(cfrt_ctx *ctx, void *ptr)
{
	ctx->base.api = "cfrt_free";
	if (!ptr)
		return CFRT_OK;
	for (int i = 0; i < ctx->dev.nal; i++)
		if (ctx->dev.al[i].base == ptr) {
			cfrti_mem_add(ctx, -(long long)ctx->dev.al[i].bytes);
			ctx->dev.al[i] = ctx->dev.al[--ctx->dev.nal];
			/* cudaFree waits for the work that uses it */
			return cfrti_cuda(ctx, cudaFree(ptr), "cudaFree");
		}
	return cfrti_err(ctx, CFRT_EINVAL, "%p is not a buffer of this context",
	                 ptr);
}

/* A synchronous copy between host and device memory after earlier compute. */
static int host_copy(cfrt_ctx *ctx, const char *api, void *dst,
                     const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	ctx->base.api = api;
	if (bytes > 0 && (!dst || !src))
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes == 0)
		return CFRT_OK;
	cfrti_tr_call(ctx, api, ctx->dev.cs);
	int rc = cfrti_cuda(ctx, cudaMemcpyAsync(dst, src, bytes, kind,
	                    ctx->dev.cs), "cudaMemcpyAsync");
	cfrti_tr_close(ctx, ctx->dev.cs);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamSynchronize(ctx->dev.cs),
		                "cudaStreamSynchronize");
	return rc;
}

int cfrt_upload(cfrt_ctx *ctx, void *dst, const void *host_src, size_t bytes)
{
	return host_copy(ctx, "cfrt_upload", dst, host_src, bytes,
	                 cudaMemcpyHostToDevice);
}

int cfrt_download(cfrt_ctx *ctx, void *host_dst, const void *src,
                  size_t bytes)
{
	return host_copy(ctx, "cfrt_download", host_dst, src, bytes,
	                 cudaMemcpyDeviceToHost);
}

int cfrt_memset_zero(cfrt_ctx *ctx, void *dst, size_t bytes)
{
	ctx->base.api = "cfrt_memset_zero";
	if (bytes > 0 && !dst)
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes == 0)
		return CFRT_OK;
	cfrti_tr_call(ctx, "cfrt_memset_zero", ctx->dev.cs);
	return cfrti_cuda(ctx, cudaMemsetAsync(dst, 0, bytes, ctx->dev.cs),
	                  "cudaMemsetAsync");
}
