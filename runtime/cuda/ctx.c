/* ctx.c: context life cycle, device choice, error reporting, memory.
 * ensures: a context holds a private duplicate of the application's
 * communicator with MPI_ERRORS_RETURN, one device (chosen once per
 * process), a compute stream, a high-priority NCCL stream, a cuBLAS handle
 * on the compute stream and an NCCL communicator over the duplicate; CUDA,
 * NCCL, cuBLAS and MPI failures come back as statuses with messages. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* The message of the last failed cfrt_init of this process. */
static char init_msg[512];

/* The device of this process, chosen by its first context (-1: none yet):
 * a second context (the driver's serial reference on MPI_COMM_SELF) must
 * not move the process to another device. */
static int process_device = -1;

int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ctx->err, sizeof ctx->err, "%s: ", ctx->api);
	va_start(ap, fmt);
	vsnprintf(ctx->err + n, sizeof ctx->err - (size_t)n, fmt, ap);
	va_end(ap);
	return status;
}

int cfrti_cuda(cfrt_ctx *ctx, cudaError_t e, const char *call)
{
	if (e == cudaSuccess)
		return CFRT_OK;
	return cfrti_err(ctx, e == cudaErrorMemoryAllocation ? CFRT_ENOMEM :
	                 CFRT_EDEVICE, "%s failed: %s", call,
	                 cudaGetErrorString(e));
}

int cfrti_nccl(cfrt_ctx *ctx, ncclResult_t e, const char *call)
{
	if (e == ncclSuccess)
		return CFRT_OK;
	const char *last = ctx->nccl ? ncclGetLastError(ctx->nccl) : "";
	return cfrti_err(ctx, CFRT_ECOMM, "%s failed: %s%s%s", call,
	                 ncclGetErrorString(e), last && *last ? ": " : "",
	                 last ? last : "");
}

int cfrti_blas(cfrt_ctx *ctx, cublasStatus_t e, const char *call)
{
	if (e == CUBLAS_STATUS_SUCCESS)
		return CFRT_OK;
	return cfrti_err(ctx, e == CUBLAS_STATUS_ALLOC_FAILED ? CFRT_ENOMEM :
	                 CFRT_EDEVICE, "%s failed: %s", call,
	                 cublasGetStatusString(e));
}

int cfrti_mpierr(cfrt_ctx *ctx, int rc, const char *call)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "MPI error %d", rc);
	return cfrti_err(ctx, CFRT_ECOMM, "%s failed: %s", call, s);
}

/* Entry of a public call: names it for messages, and moves the copy-engine
 * handshakes that have arrived (a transfer starts as soon as its peer is
 * ready, not only at its wait). */
int cfrti_begin(cfrt_ctx *ctx, const char *api)
{
	ctx->api = api;
	return ctx->ce_open > 0 ? cfrti_ce_progress(ctx) : CFRT_OK;
}

/* After a kernel launch: the launch error, if any. */
int cfrti_launched(cfrt_ctx *ctx, const char *what)
{
	return cfrti_cuda(ctx, cudaGetLastError(), what);
}

int cfrti_check_dtype(cfrt_ctx *ctx, cfrt_dtype t)
{
	if (t == CFRT_F32 || t == CFRT_F64 || t == CFRT_BF16 || t == CFRT_F16)
		return CFRT_OK;
	return cfrti_err(ctx, CFRT_EINVAL, "unknown dtype %d", (int)t);
}

int cfrti_ws_reserve(cfrt_ctx *ctx, size_t bytes)
{
	if (ctx->ws_bytes >= bytes)
		return CFRT_OK;
	/* cudaFree waits for the device: nothing still reads the old one */
	cudaFree(ctx->ws);
	ctx->ws = NULL;
	ctx->ws_bytes = 0;
	int rc = cfrti_cuda(ctx, cudaMalloc(&ctx->ws, bytes), "cudaMalloc");
	if (rc == CFRT_OK)
		ctx->ws_bytes = bytes;
	return rc;
}

/* ---- device choice ---------------------------------------------------- */

/* This process's rank among the processes of its node, from the launcher's
 * environment, or -1. */
static int env_local_rank(void)
{
	static const char *const names[] = {
		"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
		"MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMI_LOCAL_RANK"
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const char *s = getenv(names[i]);
		if (s && *s)
			return atoi(s);
	}
	return -1;
}

/* CFRT_DEVICE, else the local rank (launcher, else the rank among the
 * ranks of comm that share this node) modulo the number of devices.
 * Collective over comm when the fallback is needed. */
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
	if (local < 0) {
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

/* ---- init and finalize ------------------------------------------------ */

static int init_fail(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int init_fail(int status, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(init_msg, sizeof init_msg, "cfrt_init: ");
	va_start(ap, fmt);
	vsnprintf(init_msg + n, sizeof init_msg - (size_t)n, fmt, ap);
	va_end(ap);
	return status;
}

/* CFRT_TRANSFER: nccl (default), ce, or none (benchmarks only). */
static int transfer_mode(cfrt_ctx *ctx)
{
	const char *s = getenv("CFRT_TRANSFER");
	if (!s || !*s || !strcmp(s, "nccl"))
		ctx->xmode = XM_NCCL;
	else if (!strcmp(s, "ce"))
		ctx->xmode = XM_CE;
	else if (!strcmp(s, "none"))
		ctx->xmode = XM_NONE;
	else
		return cfrti_err(ctx, CFRT_EINVAL, "CFRT_TRANSFER=%s: use nccl, "
		                 "ce or none", s);
	return CFRT_OK;
}

/* NCCL over the context's ranks: rank 0's unique id, broadcast by MPI. */
static int nccl_setup(cfrt_ctx *ctx)
{
	ncclUniqueId id;
	int rc = CFRT_OK;
	if (ctx->rank == 0)
		rc = cfrti_nccl(ctx, ncclGetUniqueId(&id), "ncclGetUniqueId");
	int ok = rc == CFRT_OK, all = 0;
	int mrc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, ctx->comm);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpierr(ctx, mrc, "MPI_Allreduce");
	if (!all)
		return rc != CFRT_OK ? rc : cfrti_err(ctx, CFRT_ECOMM,
		                                      "rank 0 has no NCCL id");
	mrc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, ctx->comm);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpierr(ctx, mrc, "MPI_Bcast");
	return cfrti_nccl(ctx, ncclCommInitRank(&ctx->nccl, ctx->size, id,
	                                        ctx->rank), "ncclCommInitRank");
}

/* Streams, events, cuBLAS and NCCL on the chosen device. */
static int device_setup(cfrt_ctx *ctx)
{
	int lo = 0, hi = 0;
	int rc = cfrti_cuda(ctx, cudaSetDevice(ctx->device), "cudaSetDevice");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaDeviceGetStreamPriorityRange(&lo, &hi),
		                "cudaDeviceGetStreamPriorityRange");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamCreateWithPriority(&ctx->cs,
		                cudaStreamNonBlocking, lo), "cudaStreamCreate");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamCreateWithPriority(&ctx->xs,
		                cudaStreamNonBlocking, hi), "cudaStreamCreate");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaEventCreateWithFlags(&ctx->fence,
		                cudaEventDisableTiming), "cudaEventCreate");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasCreate(&ctx->blas), "cublasCreate");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetStream(ctx->blas, ctx->cs),
		                "cublasSetStream");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaMalloc(&ctx->blas_ws, BLAS_WS), "cudaMalloc");
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetWorkspace(ctx->blas, ctx->blas_ws,
		                BLAS_WS), "cublasSetWorkspace");
	/* no TF32: f32 GEMMs round like f32 */
	if (rc == CFRT_OK)
		rc = cfrti_blas(ctx, cublasSetMathMode(ctx->blas,
		                CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
	if (rc == CFRT_OK)
		rc = nccl_setup(ctx);
	return rc;
}

static int ctx_setup(cfrt_ctx *ctx, const char *model)
{
	snprintf(ctx->model, sizeof ctx->model, "%s", model);
	snprintf(ctx->op, sizeof ctx->op, "-");
	ctx->step = -1;
	ctx->api = "cfrt_init";
	MPI_Comm_rank(ctx->comm, &ctx->rank);
	MPI_Comm_size(ctx->comm, &ctx->size);
	MPI_Comm_rank(MPI_COMM_WORLD, &ctx->world_rank);
	int rc = transfer_mode(ctx);
	if (rc != CFRT_OK)
		return rc;
	if (process_device < 0 && choose_device(ctx->comm, &process_device))
		return cfrti_err(ctx, CFRT_EDEVICE, "no CUDA device (or "
		                 "CFRT_DEVICE names none)");
	ctx->device = process_device;
	ctx->ce = calloc((size_t)ctx->size, sizeof *ctx->ce);
	ctx->fifo_head = malloc((size_t)ctx->size * sizeof *ctx->fifo_head);
	ctx->fifo_tail = malloc((size_t)ctx->size * sizeof *ctx->fifo_tail);
	ctx->peer_ev = calloc((size_t)ctx->size, sizeof *ctx->peer_ev);
	ctx->npeer_ev = calloc((size_t)ctx->size, sizeof *ctx->npeer_ev);
	if (!ctx->ce || !ctx->fifo_head || !ctx->fifo_tail || !ctx->peer_ev ||
	    !ctx->npeer_ev)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for peer tables");
	for (int p = 0; p < ctx->size; p++)
		ctx->fifo_head[p] = ctx->fifo_tail[p] = -1;
	return device_setup(ctx);
}

static void ctx_free(cfrt_ctx *ctx)
{
	cfrti_xfer_free_all(ctx);
	cfrti_ce_free(ctx);
	if (ctx->nccl)
		ncclCommDestroy(ctx->nccl);
	if (ctx->blas)
		cublasDestroy(ctx->blas);
	for (int p = 0; ctx->ce && p < ctx->size; p++)
		if (ctx->ce[p])
			cudaStreamDestroy(ctx->ce[p]);
	if (ctx->fence)
		cudaEventDestroy(ctx->fence);
	if (ctx->cs)
		cudaStreamDestroy(ctx->cs);
	if (ctx->xs)
		cudaStreamDestroy(ctx->xs);
	cudaFree(ctx->ws);
	cudaFree(ctx->blas_ws);
	for (int i = 0; i < ctx->nal; i++)
		cudaFree(ctx->al[i].base);
	MPI_Comm_free(&ctx->comm);
	free(ctx->al);
	free(ctx->ce);
	free(ctx->fifo_head);
	free(ctx->fifo_tail);
	free(ctx->peer_ev);
	free(ctx->npeer_ev);
	free(ctx->group);
	free(ctx);
}

int cfrt_init(cfrt_ctx **out, MPI_Comm comm, int expected_size,
              const char *model_name)
{
	const char *model = model_name ? model_name : "(unnamed)";
	int size = 0, rc;
	*out = NULL;
	init_msg[0] = 0;
	rc = MPI_Comm_size(comm, &size);
	if (rc != MPI_SUCCESS)
		return init_fail(CFRT_ECOMM, "MPI_Comm_size failed (%d)", rc);
	if (size != expected_size)
		return init_fail(CFRT_ESIZE, "model %s was compiled for a group "
		                 "of %d ranks, but the communicator has %d",
		                 model, expected_size, size);
	cfrt_ctx *ctx = calloc(1, sizeof *ctx);
	if (!ctx)
		return init_fail(CFRT_ENOMEM, "no memory for the context");
	rc = MPI_Comm_dup(comm, &ctx->comm);
	if (rc != MPI_SUCCESS) {
		free(ctx);
		return init_fail(CFRT_ECOMM, "MPI_Comm_dup failed (%d)", rc);
	}
	MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
	rc = ctx_setup(ctx, model);
	if (rc != CFRT_OK) {
		snprintf(init_msg, sizeof init_msg, "%s", ctx->err);
		ctx_free(ctx);
		return rc;
	}
	*out = ctx;
	return CFRT_OK;
}

int cfrt_finalize(cfrt_ctx *ctx)
{
	if (!ctx)
		return CFRT_OK;
	ctx->api = "cfrt_finalize";
	ctx->in_group = 0;
	int rc = cfrti_xfer_wait_all(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_ce_drain(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaDeviceSynchronize(),
		                "cudaDeviceSynchronize");
	if (rc != CFRT_OK)
		snprintf(init_msg, sizeof init_msg, "%s", ctx->err);
	ctx_free(ctx);
	return rc;
}

int cfrt_rank(const cfrt_ctx *ctx)
{
	return ctx->rank;
}

int cfrt_size(const cfrt_ctx *ctx)
{
	return ctx->size;
}

const char *cfrt_backend_name(void)
{
	return "cuda+nccl+cublas";
}

const char *cfrt_progress_name(const cfrt_ctx *ctx)
{
	(void)ctx;
	return "device";
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cfrt_wtime(cfrt_ctx *ctx)
{
	/* a failure here shows at the next call that checks */
	cudaStreamSynchronize(ctx->cs);
	return now();
}

int cfrt_barrier(cfrt_ctx *ctx)
{
	ctx->api = "cfrt_barrier";
	int rc = MPI_Barrier(ctx->comm);
	return rc == MPI_SUCCESS ? CFRT_OK : cfrti_mpierr(ctx, rc, "MPI_Barrier");
}

void cfrt_where(cfrt_ctx *ctx, const char *op, int step)
{
	snprintf(ctx->op, sizeof ctx->op, "%s", op ? op : "-");
	ctx->step = step;
}

const char *cfrt_strerror(int status)
{
	switch (status) {
	case CFRT_OK: return "success";
	case CFRT_EINVAL: return "invalid argument";
	case CFRT_ENOTSUP: return "not supported by this backend";
	case CFRT_ENOMEM: return "out of memory";
	case CFRT_ESIZE: return "communicator size differs from the compiled group";
	case CFRT_ECOMM: return "communication failed";
	case CFRT_EDEVICE: return "compute library failed";
	case CFRT_EIO: return "trace file could not be written";
	default: return "unknown status";
	}
}

const char *cfrt_last_error(const cfrt_ctx *ctx)
{
	return ctx ? ctx->err : init_msg;
}

void cfrt_fail(cfrt_ctx *ctx, int status)
{
	const char *msg = cfrt_last_error(ctx);
	int code = status < 0 ? -status : 1;
	int up = 0, down = 0, wr = -1;
	if (!*msg)
		msg = cfrt_strerror(status);
	MPI_Initialized(&up);
	MPI_Finalized(&down);
	if (up && !down)
		MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	if (ctx)
		fprintf(stderr, "cfrt: rank %d: op %s step %d: %s [model %s, "
		        "world rank %d, device %d]\n", ctx->rank, ctx->op,
		        ctx->step, msg, ctx->model, wr, ctx->device);
	else
		fprintf(stderr, "cfrt: rank %d: op init step 0: %s\n", wr, msg);
	fflush(stderr);
	if (up && !down)
		MPI_Abort(MPI_COMM_WORLD, code);
	_Exit(code);
}

/* ---- memory ----------------------------------------------------------- */

/* The allocation that holds [p, p+bytes), or NULL. */
const alloc_rec *cfrti_alloc_of(cfrt_ctx *ctx, const void *p, size_t bytes)
{
	const char *c = p;
	for (int i = 0; i < ctx->nal; i++) {
		const alloc_rec *a = &ctx->al[i];
		if (c >= a->base && c + bytes <= a->base + a->bytes)
			return a;
	}
	return NULL;
}

/* The IPC handle of an allocation, made on first use. */
int cfrti_alloc_handle(cfrt_ctx *ctx, const alloc_rec *ca,
                       cudaIpcMemHandle_t *h)
{
	alloc_rec *a = &ctx->al[ca - ctx->al];
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
	alloc_rec *n = realloc(ctx->al, (size_t)(ctx->nal + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the allocation "
		                 "table");
	ctx->al = n;
	ctx->al[ctx->nal++] = (alloc_rec){p, bytes, ++ctx->serials, 0, {{0}}};
	return CFRT_OK;
}

int cfrt_alloc(cfrt_ctx *ctx, void **ptr, size_t bytes)
{
	ctx->api = "cfrt_alloc";
	*ptr = NULL;
	if (bytes == 0)
		return CFRT_OK;
	void *p = NULL;
	int rc = cfrti_cuda(ctx, cudaMalloc(&p, bytes), "cudaMalloc");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaMemsetAsync(p, 0, bytes, ctx->cs),
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
	ctx->api = "cfrt_free";
	if (!ptr)
		return CFRT_OK;
	for (int i = 0; i < ctx->nal; i++)
		if (ctx->al[i].base == ptr) {
			ctx->al[i] = ctx->al[--ctx->nal];
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
	ctx->api = api;
	if (bytes > 0 && (!dst || !src))
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes == 0)
		return CFRT_OK;
	int rc = cfrti_cuda(ctx, cudaMemcpyAsync(dst, src, bytes, kind, ctx->cs),
	                    "cudaMemcpyAsync");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamSynchronize(ctx->cs),
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
	ctx->api = "cfrt_memset_zero";
	if (bytes > 0 && !dst)
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes == 0)
		return CFRT_OK;
	return cfrti_cuda(ctx, cudaMemsetAsync(dst, 0, bytes, ctx->cs),
	                  "cudaMemsetAsync");
}
