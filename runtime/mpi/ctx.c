/* ctx.c: this backend's part of the context life cycle (the hooks of
 * runtime/common/base.c), entry and exit of calls, memory.
 * ensures: a context that cfrt_init returns has its progress mode running
 * and, with CFRT_TRACE, a trace file name of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* Contexts this process has created: names the trace files. */
static int contexts_made;

double cfrti_begin(cfrt_ctx *ctx, const char *api)
{
	ctx->base.api = api;
	return ctx->trace_path ? cfrti_now() : 0.0;
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
	if (status == CFRT_OK && ctx->trace_path)
		cfrti_trace_add(ctx, ctx->base.api + 5, t0, cfrti_now(), 0);
	return status;
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

/* The per-process trace file name, or NULL when CFRT_TRACE is unset. */
static char *trace_path(int world_rank)
{
	const char *prefix = getenv("CFRT_TRACE");
	if (!prefix || !*prefix)
		return NULL;
	size_t n = strlen(prefix) + 48;
	char *s = malloc(n);
	if (!s)
		return NULL;
	if (contexts_made == 0)
		snprintf(s, n, "%s.rank%d.json", prefix, world_rank);
	else
		snprintf(s, n, "%s.rank%d.ctx%d.json", prefix, world_rank,
		         contexts_made);
	return s;
}

/* The backend's part of a fresh context: trace origin (the earliest clock
 * of the group, so rank timelines line up), the transfer table's lock,
 * the trace file and the progress mode. */
int cfrti_ctx_setup(cfrt_ctx *ctx)
{
	double t = cfrti_now();
	int rc = MPI_Allreduce(&t, &ctx->origin, 1, MPI_DOUBLE, MPI_MIN,
	                       ctx->base.job);
	if (rc != MPI_SUCCESS)
		return cfrti_mpi(ctx, rc, "MPI_Allreduce");
	pthread_mutex_init(&ctx->mu, NULL);
	pthread_cond_init(&ctx->cv, NULL);
	ctx->trace_path = trace_path(ctx->base.world_rank);
	rc = cfrti_progress_start(ctx);
	if (rc == CFRT_OK)
		contexts_made++;
	return rc;
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
	free(ctx->ev);
	free(ctx->trace_path);
	free(ctx);
}

int cfrti_ctx_drain(cfrt_ctx *ctx)
{
	int rc = cfrti_xfer_wait_all_slots(ctx);
	int trc = cfrti_trace_write(ctx);
	return rc != CFRT_OK ? rc : trc;
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
