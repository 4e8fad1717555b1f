/* ctx.c: this backend's part of the context life cycle (the hooks of
 * runtime/common/base.c), entry and exit of calls, memory.
 * ensures: a context that cfrt_init returns has its progress mode running;
 * with CFRT_TRACE every compute call that succeeds is a span of the
 * trace, timed on the host. */
#define _DEFAULT_SOURCE /* mincore */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
	return cfrti_gone(ctx);
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

int cfrti_end_out(cfrt_ctx *ctx, double t0, const cfrt_view *o1,
                  const cfrt_view *o2, const cfrt_view *o3)
{
	int rc = CFRT_OK;
	if (ctx->base.check_finite) {
		const cfrt_view *o[3] = {o1, o2, o3};
		static const char *const name[3] = {"the result", "the 2nd result",
		                                    "the 3rd result"};
		for (int i = 0; rc == CFRT_OK && i < 3; i++)
			rc = cfrti_check_finite(ctx, o[i], name[i]);
	}
	return cfrti_end(ctx, t0, rc);
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
	unsigned dev = ctx->base.opts.flags & (CFRT_OPT_STREAM | CFRT_OPT_NCCL_COMM);
	if (dev)
		return cfrti_err(ctx, CFRT_ENOTSUP, "the mpi backend has no CUDA "
		                 "stream or NCCL communicator to take (cfrt_opts "
		                 "flags %#x)", dev);
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
	int rc = cfrti_xfer_wait_all_slots(ctx);
	int src = cfrti_settle(ctx);
	return rc != CFRT_OK ? rc : src;
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

/* 1 when the page of p is mapped. */
static int mapped(const char *p)
{
	static long page;
	unsigned char in;
	if (!page)
		page = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
	return mincore((void *)a, 1, &in) == 0;
}

/* Any host memory will do; a buffer of no registry (cfrt_check_arg
 * checked those) must have its first and last byte mapped: a buffer
 * whose missing part would be unmapped memory, or a wild pointer. */
int cfrti_check_mem(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what,
                    int known)
{
	const char *c = p;
	if (known)
		return CFRT_OK;
	if (!mapped(c))
		return cfrti_err(ctx, CFRT_EINVAL, "%s (%zu bytes at %p) is not mapped "
		                 "memory", what, bytes, p);
	if (!mapped(c + bytes - 1))
		return cfrti_err(ctx, CFRT_EINVAL, "%s needs %zu bytes from %p, but its "
		                 "last byte is not mapped memory: the buffer is too small",
		                 what, bytes, p);
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
	int rc = cfrti_buf_add(ctx, *ptr, bytes, 1);
	if (rc != CFRT_OK) {
		free(*ptr);
		*ptr = NULL;
		return rc;
	}
	cfrti_mem_add(ctx, (long long)bytes);
	return rc;
}

/* A buffer of another context, or of none, is freed too: the registry
 * only serves cfrt_check_arg. */
int cfrt_free(cfrt_ctx *ctx, void *ptr)
{
	int live = cfrti_live(ctx);
	cfrti_base *b = live ? cfrti_base_of(ctx) : NULL;
	for (int i = live ? b->nbufs - 1 : -1; ptr && i >= 0; i--)
		if (b->bufs[i].base == ptr && b->bufs[i].alloc) {
			cfrti_mem_add(ctx, -(long long)b->bufs[i].bytes);
			b->bufs[i] = b->bufs[--b->nbufs];
			break;
		}
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
