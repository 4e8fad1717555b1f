/* ctx.c: this backend's part of the context life cycle (the hooks of
 * runtime/common/base.c), entry and exit of calls, memory.
 * ensures: a context that cfrt_init returns has its progress mode running;
 * with CFRT_TRACE every compute call that succeeds is a span of the
 * trace, timed on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

double cfrti_begin(cfrt_ctx *ctx, const char *api)
{
	ctx->base.api = api;
	return ctx->base.trace ? cfrti_now() : 0.0;
}

/* The entry of the public transfer calls (common.h): they are traced by
 * their slots, not as compute calls. */
int cfrti_enter(cfrt_ctx *ctx, const char *api)
{
	ctx->base.api = api;
	return CFRT_OK;
}

/* Closes a compute call: a successful one becomes a trace event named after
 * the call without its "cfrt_" prefix. */
int cfrti_end(cfrt_ctx *ctx, double t0, int status)
{
	cfrti_span *s = NULL;
	if (status == CFRT_OK && ctx->base.trace)
		s = cfrti_trace_at(ctx, cfrti_trace_begin(ctx, ctx->base.api + 5, TRK_COMPUTE));
	if (s) {
		s->t0 = cfrti_trace_ns(ctx, t0);
		s->t1 = cfrti_trace_ns(ctx, cfrti_now());
	}
	return status;
}

/* Compute spans end in cfrti_end. */
void cfrti_trace_flush(cfrt_ctx *ctx)
{
	(void)ctx;
}

int cfrti_check_dtype(cfrt_ctx *ctx, cfrt_dtype t)
{
	if (t == CFRT_F32 || t == CFRT_F64)
		return CFRT_OK;
	if (t == CFRT_BF16 || t == CFRT_F16)
		return cfrti_err(ctx, CFRT_ENOTSUP,
		                 "%s is not supported by the mpi backend",
		                 t == CFRT_BF16 ? "bf16" : "f16");
	return cfrti_err(ctx, CFRT_EINVAL, "unknown dtype %d", (int)t);
}

static void *zalloc(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

int cfrti_ws_reserve(cfrt_ctx *ctx, size_t bytes)
{
	if (ctx->ws_bytes >= bytes)
		return CFRT_OK;
	free(ctx->ws);
	ctx->ws_bytes = 0;
	ctx->ws = zalloc(bytes);
	if (!ctx->ws)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for a %zu-byte "
		                 "workspace", bytes);
	ctx->ws_bytes = bytes;
	return CFRT_OK;
}

/* The backend's part of a fresh context: the transfer table's lock and
 * the progress mode. */
int cfrti_ctx_setup(cfrt_ctx *ctx)
{
	if (ctx->base.opts.flags)
		return cfrti_err(ctx, CFRT_ENOTSUP, "the mpi backend has no CUDA "
		                 "stream or NCCL communicator to take (cfrt_opts "
		                 "flags %#x)", ctx->base.opts.flags);
	pthread_mutex_init(&ctx->mu, NULL);
	pthread_cond_init(&ctx->cv, NULL);
	return cfrti_progress_start(ctx);
}

int cfrti_app_job(const cfrt_opts *opts, int *rank, int *size, char *msg, size_t n)
{
	(void)opts;
	*rank = 0;
	*size = 0;
	snprintf(msg, n, "no MPI communicator (MPI_COMM_NULL): the %s backend "
	         "runs on MPI", cfrt_backend_name());
	return CFRT_ENOTSUP;
}

cfrt_ctx *cfrti_ctx_new(void)
{
	return calloc(1, sizeof(cfrt_ctx));
}

void cfrti_ctx_free(cfrt_ctx *ctx)
{
	cfrti_progress_stop(ctx);
	pthread_mutex_destroy(&ctx->mu);
	pthread_cond_destroy(&ctx->cv);
	cfrti_free_comms(ctx);
	free(ctx->x);
	free(ctx->ws);
	free(ctx);
}

int cfrti_ctx_drain(cfrt_ctx *ctx)
{
	return cfrti_xfer_wait_all_slots(ctx);
}

const char *cfrt_backend_name(void)
{
	return "mpi+openblas";
}

double cfrt_wtime(cfrt_ctx *ctx)
{
	(void)ctx; /* compute is synchronous here */
	return cfrti_now();
}

/* Any host memory will do. */
int cfrti_check_mem(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what)
{
	(void)ctx, (void)p, (void)bytes, (void)what;
	return CFRT_OK;
}

int cfrt_alloc(cfrt_ctx *ctx, void **ptr, size_t bytes)
{
	ctx->base.api = "cfrt_alloc";
	*ptr = NULL;
	if (bytes == 0)
		return CFRT_OK;
	*ptr = zalloc(bytes);
	if (!*ptr)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for %zu bytes",
		                 bytes);
	return CFRT_OK;
}

int cfrt_free(cfrt_ctx *ctx, void *ptr)
{
	(void)ctx;
	free(ptr);
	return CFRT_OK;
}

/* Null buffers with bytes > 0 are the caller's bug: EINVAL, not a crash. */
static int bytes_copy(cfrt_ctx *ctx, const char *api, void *dst,
                      const void *src, size_t bytes)
{
	double t0 = cfrti_begin(ctx, api);
	if (bytes > 0 && (!dst || !src))
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes > 0)
		memcpy(dst, src, bytes);
	return cfrti_end(ctx, t0, CFRT_OK);
}

int cfrt_upload(cfrt_ctx *ctx, void *dst, const void *host_src, size_t bytes)
{
	return bytes_copy(ctx, "cfrt_upload", dst, host_src, bytes);
}

int cfrt_download(cfrt_ctx *ctx, void *host_dst, const void *src,
                  size_t bytes)
{
	return bytes_copy(ctx, "cfrt_download", host_dst, src, bytes);
}

int cfrt_memset_zero(cfrt_ctx *ctx, void *dst, size_t bytes)
{
	double t0 = cfrti_begin(ctx, "cfrt_memset_zero");
	if (bytes > 0 && !dst)
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %zu bytes",
		                 bytes);
	if (bytes > 0)
		memset(dst, 0, bytes);
	return cfrti_end(ctx, t0, CFRT_OK);
}
