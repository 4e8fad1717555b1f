/* ctx.c: context life cycle, error reporting, memory.
 * ensures: a context holds a private duplicate of the application's
 * communicator with MPI_ERRORS_RETURN, so MPI failures come back as statuses
 * and cfrt_fail, not MPI, decides how the job ends. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* The message of the last failed cfrt_init of this process (no context
 * exists to hold it). Written only by the thread calling cfrt_init. */
static char init_msg[512];

/* Contexts this process has created: names the trace files. */
static int contexts_made;

double cfrti_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cfrti_begin(cfrt_ctx *ctx, const char *api)
{
	ctx->api = api;
	return ctx->trace_path ? cfrti_now() : 0.0;
}

/* Closes a compute call: a successful one becomes a trace event named after
 * the call without its "cfrt_" prefix. */
int cfrti_end(cfrt_ctx *ctx, double t0, int status)
{
	if (status == CFRT_OK && ctx->trace_path)
		cfrti_trace_add(ctx, ctx->api + 5, t0, cfrti_now(), 0);
	return status;
}

int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ctx->err, sizeof ctx->err, "%s: ", ctx->api);
	va_start(ap, fmt);
	vsnprintf(ctx->err + n, sizeof ctx->err - (size_t)n, fmt, ap);
	va_end(ap);
	return status;
}

int cfrti_mpierr(cfrt_ctx *ctx, int rc, const char *call)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "MPI error %d", rc);
	return cfrti_err(ctx, CFRT_ECOMM, "%s failed: %s", call, s);
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

/* Fills a fresh context on the duplicated communicator: ranks, trace
 * origin (the earliest clock of the group, so rank timelines line up). */
static int ctx_setup(cfrt_ctx *ctx, const char *model)
{
	int rc;
	snprintf(ctx->model, sizeof ctx->model, "%s", model);
	snprintf(ctx->op, sizeof ctx->op, "-");
	ctx->step = -1;
	ctx->api = "cfrt_init";
	MPI_Comm_rank(ctx->comm, &ctx->rank);
	MPI_Comm_size(ctx->comm, &ctx->size);
	MPI_Comm_rank(MPI_COMM_WORLD, &ctx->world_rank);
	double t = cfrti_now();
	rc = MPI_Allreduce(&t, &ctx->origin, 1, MPI_DOUBLE, MPI_MIN, ctx->comm);
	if (rc != MPI_SUCCESS)
		return cfrti_mpierr(ctx, rc, "MPI_Allreduce");
	pthread_mutex_init(&ctx->mu, NULL);
	pthread_cond_init(&ctx->cv, NULL);
	ctx->trace_path = trace_path(ctx->world_rank);
	return cfrti_progress_start(ctx);
}

static void ctx_free(cfrt_ctx *ctx)
{
	cfrti_progress_stop(ctx);
	pthread_mutex_destroy(&ctx->mu);
	pthread_cond_destroy(&ctx->cv);
	MPI_Comm_free(&ctx->comm);
	free(ctx->x);
	free(ctx->ws);
	free(ctx->ev);
	free(ctx->trace_path);
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
	contexts_made++;
	*out = ctx;
	return CFRT_OK;
}

int cfrt_finalize(cfrt_ctx *ctx)
{
	if (!ctx)
		return CFRT_OK;
	ctx->api = "cfrt_finalize";
	ctx->in_group = 0;
	int rc = cfrti_xfer_wait_all_slots(ctx);
	int trc = cfrti_trace_write(ctx);
	if (rc == CFRT_OK)
		rc = trc;
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
	return "mpi+openblas";
}

double cfrt_wtime(cfrt_ctx *ctx)
{
	(void)ctx; /* compute is synchronous here */
	return cfrti_now();
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
		        "world rank %d]\n", ctx->rank, ctx->op, ctx->step, msg,
		        ctx->model, wr);
	else
		fprintf(stderr, "cfrt: rank %d: op init step 0: %s\n", wr, msg);
	fflush(stderr);
	if (up && !down)
		MPI_Abort(MPI_COMM_WORLD, code);
	_Exit(code);
}

int cfrt_alloc(cfrt_ctx *ctx, void **ptr, size_t bytes)
{
	ctx->api = "cfrt_alloc";
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
