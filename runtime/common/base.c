/* base.c: the shared part of the context life cycle, and error reporting.
 * ensures: a context holds a private duplicate of the application's
 * communicator with MPI_ERRORS_RETURN, so MPI failures come back as statuses
 * and cfrt_fail, not MPI, decides how the job ends; a failed cfrt_init or
 * cfrt_finalize leaves its message where cfrt_last_error(NULL) finds it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

/* The message of the last failed cfrt_init (or cfrt_finalize) of this
 * process: no context exists to hold it. Written only by the thread
 * calling cfrt_init. */
static char init_msg[512];

int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
{
	cfrti_base *b = cfrti_base_of(ctx);
	va_list ap;
	int n = snprintf(b->err, sizeof b->err, "%s: ", b->api);
	va_start(ap, fmt);
	vsnprintf(b->err + n, sizeof b->err - (size_t)n, fmt, ap);
	va_end(ap);
	return status;
}

int cfrti_mpi(cfrt_ctx *ctx, int rc, const char *call)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (rc == MPI_SUCCESS)
		return CFRT_OK;
	if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "MPI error %d", rc);
	return cfrti_err(ctx, CFRT_ECOMM, "%s failed: %s", call, s);
}

int cfrti_env_choice(cfrt_ctx *ctx, const char *var, const char *const *names,
                     int n, int def, int *out)
{
	const char *s = getenv(var);
	char list[128] = "";
	size_t len = 0;
	*out = def;
	if (!s || !*s)
		return CFRT_OK;
	for (int i = 0; i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return CFRT_OK;
		}
		len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0,
		                        "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
		                        names[i]);
	}
	return cfrti_err(ctx, CFRT_EINVAL, "%s=%s: use %s", var, s, list);
}

/* CLOCK_MONOTONIC: never steps back. */
double cfrti_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

/* The communicators of the grid's groups: group g's ranks share every
 * coordinate but c[g] (cfrt.h); one group is the job itself. */
static int split_groups(cfrt_ctx *ctx, const int *sizes)
{
	cfrti_base *b = cfrti_base_of(ctx);
	int stride = 1;
	for (int g = 0; g < b->ngroups; g++) {
		struct cfrti_group *q = &b->grp[g];
		int c = b->job_rank / stride % sizes[g];
		q->rank = c;
		q->size = sizes[g];
		q->stride = stride;
		q->comm = b->job;
		if (b->ngroups > 1 && b->job != MPI_COMM_NULL) {
			int rc = MPI_Comm_split(b->job, b->job_rank - c * stride, c,
			                        &q->comm);
			if (rc != MPI_SUCCESS) {
				q->comm = b->job;
				return cfrti_mpi(ctx, rc, "MPI_Comm_split");
			}
			MPI_Comm_set_errhandler(q->comm, MPI_ERRORS_RETURN);
		}
		stride *= sizes[g];
	}
	return CFRT_OK;
}

void cfrti_free_comms(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	for (int g = 0; g < b->ngroups; g++)
		if (b->grp[g].comm != MPI_COMM_NULL && b->grp[g].comm != b->job)
			MPI_Comm_free(&b->grp[g].comm);
	if (b->job != MPI_COMM_NULL)
		MPI_Comm_free(&b->job);
	b->comm = MPI_COMM_NULL;
}

/* Group g's communicator, rank and size become the context's. */
static void set_current(cfrti_base *b, int g)
{
	b->cur = g;
	b->comm = b->grp[g].comm;
	b->rank = b->grp[g].rank;
	b->size = b->grp[g].size;
}

/* The shared fields of a fresh context on the duplicated communicator,
 * then the backend's setup. */
static int ctx_setup(cfrt_ctx *ctx, const char *model, const int *sizes)
{
	cfrti_base *b = cfrti_base_of(ctx);
	snprintf(b->model, sizeof b->model, "%s", model);
	snprintf(b->op, sizeof b->op, "-");
	b->step = -1;
	b->slice = -1;
	b->device = -1;
	b->api = "cfrt_init";
	if (b->job != MPI_COMM_NULL) {
		MPI_Comm_rank(b->job, &b->job_rank);
		MPI_Comm_size(b->job, &b->job_size);
		MPI_Comm_rank(MPI_COMM_WORLD, &b->world_rank);
	} else {
		b->world_rank = b->job_rank; /* set by cfrt_init_opts */
	}
	int rc = split_groups(ctx, sizes);
	if (rc != CFRT_OK)
		return rc;
	set_current(b, 0);
	rc = cfrti_trace_open(ctx);
	return rc != CFRT_OK ? rc : cfrti_ctx_setup(ctx);
}

/* "2 x 4" */
static void layout_str(char *s, size_t n, int ngroups, const int *sizes)
{
	size_t k = 0;
	s[0] = 0;
	for (int g = 0; g < ngroups && k < n; g++)
		k += (size_t)snprintf(s + k, n - k, "%s%d", g ? " x " : "", sizes[g]);
}

int cfrt_init_opts(cfrt_ctx **out, MPI_Comm comm, int ngroups,
                   const int *sizes, const char *model_name,
                   const cfrt_opts *opts)
{
	const char *model = model_name ? model_name : "(unnamed)";
	int size = 0, rc;
	long long want = 1;
	char lay[128];
	*out = NULL;
	init_msg[0] = 0;
	if (ngroups < 1 || ngroups > CFRT_MAX_GROUPS || !sizes)
		return init_fail(CFRT_EINVAL, "%d groups: a context has 1 to %d",
		                 ngroups, CFRT_MAX_GROUPS);
	if (opts && opts->flags & ~(CFRT_OPT_STREAM | CFRT_OPT_NCCL_COMM))
		return init_fail(CFRT_EINVAL, "unknown option flags %#x",
		                 opts->flags);
	for (int g = 0; g < ngroups; g++) {
		if (sizes[g] < 1)
			return init_fail(CFRT_EINVAL, "group %d has %d ranks", g, sizes[g]);
		want *= sizes[g];
	}
	int job_rank = 0;
	if (comm == MPI_COMM_NULL) {
		char why[256];
		rc = cfrti_app_job(opts, &job_rank, &size, why, sizeof why);
		if (rc != CFRT_OK)
			return init_fail(rc, "%s", why);
	} else {
		rc = MPI_Comm_size(comm, &size);
		if (rc != MPI_SUCCESS)
			return init_fail(CFRT_ECOMM, "MPI_Comm_size failed (%d)", rc);
	}
	layout_str(lay, sizeof lay, ngroups, sizes);
	if (size != want && ngroups == 1)
		return init_fail(CFRT_ESIZE, "model %s was compiled for a group "
		                 "of %d ranks, but the communicator has %d",
		                 model, sizes[0], size);
	if (size != want)
		return init_fail(CFRT_ESIZE, "model %s was compiled for groups of "
		                 "%s = %lld ranks, but the communicator has %d",
		                 model, lay, want, size);
	cfrt_ctx *ctx = cfrti_ctx_new();
	if (!ctx)
		return init_fail(CFRT_ENOMEM, "no memory for the context");
	cfrti_base *b = cfrti_base_of(ctx);
	b->ngroups = ngroups;
	if (opts)
		b->opts = *opts;
	for (int g = 0; g < ngroups; g++)
		b->grp[g].comm = MPI_COMM_NULL;
	b->job = MPI_COMM_NULL;
	if (comm == MPI_COMM_NULL) {
		b->job_rank = job_rank;
		b->job_size = size;
	} else {
		rc = MPI_Comm_dup(comm, &b->job);
		if (rc != MPI_SUCCESS) {
			free(ctx);
			return init_fail(CFRT_ECOMM, "MPI_Comm_dup failed (%d)", rc);
		}
		MPI_Comm_set_errhandler(b->job, MPI_ERRORS_RETURN);
	}
	rc = ctx_setup(ctx, model, sizes);
	if (rc != CFRT_OK) {
		snprintf(init_msg, sizeof init_msg, "%s", b->err);
		cfrti_trace_free(ctx);
		cfrti_ctx_free(ctx);
		return rc;
	}
	*out = ctx;
	return CFRT_OK;
}

int cfrt_init_groups(cfrt_ctx **out, MPI_Comm comm, int ngroups,
                     const int *sizes, const char *model_name)
{
	return cfrt_init_opts(out, comm, ngroups, sizes, model_name, NULL);
}

int cfrt_init(cfrt_ctx **out, MPI_Comm comm, int expected_size,
              const char *model_name)
{
	return cfrt_init_groups(out, comm, 1, &expected_size, model_name);
}

int cfrt_use_group(cfrt_ctx *ctx, int g)
{
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = "cfrt_use_group";
	if (g < 0 || g >= b->ngroups)
		return cfrti_err(ctx, CFRT_EINVAL, "group %d: the context has %d",
		                 g, b->ngroups);
	if (b->in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "inside a transfer group");
	set_current(b, g);
	return CFRT_OK;
}

int cfrt_group_rank(const cfrt_ctx *ctx, int g)
{
	const cfrti_base *b = cfrti_cbase_of(ctx);
	return g >= 0 && g < b->ngroups ? b->grp[g].rank : -1;
}

int cfrt_check_groups(cfrt_ctx *ctx, int ngroups, const int *sizes)
{
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = "cfrt_check_groups";
	int same = ngroups == b->ngroups;
	for (int g = 0; same && g < ngroups; g++)
		same = sizes[g] == b->grp[g].size;
	if (same)
		return CFRT_OK;
	int have[CFRT_MAX_GROUPS];
	char want[128], got[128];
	for (int g = 0; g < b->ngroups; g++)
		have[g] = b->grp[g].size;
	layout_str(want, sizeof want, ngroups, sizes);
	layout_str(got, sizeof got, b->ngroups, have);
	return cfrti_err(ctx, CFRT_ESIZE, "compiled for groups of %s ranks, "
	                 "but the context has groups of %s (cfrt_init_groups)",
	                 want, got);
}

int cfrt_finalize(cfrt_ctx *ctx)
{
	if (!ctx)
		return CFRT_OK;
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = "cfrt_finalize";
	b->in_group = 0;
	int rc = cfrti_ctx_drain(ctx);
	int trc = cfrti_trace_write(ctx); /* collective: also after a failure */
	rc = rc != CFRT_OK ? rc : trc;
	cfrti_trace_free(ctx);
	if (rc != CFRT_OK)
		snprintf(init_msg, sizeof init_msg, "%s", b->err);
	cfrti_ctx_free(ctx);
	return rc;
}

int cfrt_rank(const cfrt_ctx *ctx)
{
	return cfrti_cbase_of(ctx)->rank;
}

int cfrt_size(const cfrt_ctx *ctx)
{
	return cfrti_cbase_of(ctx)->size;
}

int cfrt_barrier(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = "cfrt_barrier";
	cfrti_trace_flush(ctx);
	if (b->job == MPI_COMM_NULL)
		return cfrti_err(ctx, CFRT_ENOTSUP, "a context made without MPI "
		                 "(MPI_COMM_NULL) has no barrier");
	return cfrti_mpi(ctx, MPI_Barrier(b->job), "MPI_Barrier");
}

void cfrt_where(cfrt_ctx *ctx, const char *op, int step)
{
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace_flush(ctx);
	snprintf(b->op, sizeof b->op, "%s", op ? op : "-");
	b->step = step;
	b->what[0] = 0;
	b->slice = -1;
}

void cfrt_what(cfrt_ctx *ctx, const char *what, int slice)
{
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace_flush(ctx);
	snprintf(b->what, sizeof b->what, "%s", what ? what : "");
	b->slice = slice;
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
	return ctx ? cfrti_cbase_of(ctx)->err : init_msg;
}

void cfrt_fail(cfrt_ctx *ctx, int status)
{
	const char *msg = cfrt_last_error(ctx);
	int code = status < 0 ? -status : 1;
	int up = 0, down = 0, wr = -1;
	char dev[32] = "";
	if (!*msg)
		msg = cfrt_strerror(status);
	MPI_Initialized(&up);
	MPI_Finalized(&down);
	if (up && !down)
		MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	if (ctx) {
		const cfrti_base *b = cfrti_cbase_of(ctx);
		if (b->device >= 0)
			snprintf(dev, sizeof dev, ", device %d", b->device);
		fprintf(stderr, "cfrt: rank %d: op %s step %d: %s [model %s, "
		        "world rank %d%s]\n", b->job_rank, b->op, b->step, msg,
		        b->model, wr, dev);
	} else {
		fprintf(stderr, "cfrt: rank %d: op init step 0: %s\n", wr, msg);
	}
	fflush(stderr);
	if (up && !down)
		MPI_Abort(MPI_COMM_WORLD, code);
	_Exit(code);
}

int cfrt_check_arg(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what)
{
	cfrti_base_of(ctx)->api = "cfrt_check_arg";
	if (!what)
		what = "an argument";
	if (!bytes)
		return CFRT_OK;
	if (!p)
		return cfrti_err(ctx, CFRT_EINVAL, "%s (%zu bytes) is a null pointer", what, bytes);
	return cfrti_check_mem(ctx, p, bytes, what);
}
