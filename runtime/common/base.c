/* base.c: the shared part of the context life cycle, and error reporting.
 * ensures: a context holds a private duplicate of the application's
 * communicator with MPI_ERRORS_RETURN, so MPI failures come back as statuses
 * and cfrt_fail, not MPI, decides how the job ends; a failed cfrt_init or
 * cfrt_finalize leaves its message where cfrt_last_error(NULL) finds it. */
#include <math.h>
#include <pthread.h>
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

/* The live contexts of the process, and the last ones cfrt_finalize freed
 * with their error modes: a call can tell a context from a freed one
 * without reading its memory. The process default error mode: -1 until
 * CFRT_ERRORS is read. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static const cfrt_ctx **live;
static int nlive, caplive;
enum { NDEAD = 64 };
static struct dead { const cfrt_ctx *ctx; int errors; } dead[NDEAD];
static int dead_next;
static int default_errors = -1;

static int live_add(const cfrt_ctx *ctx)
{
	int ok = 1;
	pthread_mutex_lock(&live_mu);
	if (nlive == caplive) {
		int cap = caplive ? 2 * caplive : 8;
		const cfrt_ctx **n = realloc(live, (size_t)cap * sizeof *n);
		if (n) {
			live = n;
			caplive = cap;
		}
		ok = n != NULL;
	}
	if (ok)
		live[nlive++] = ctx;
	for (int i = 0; ok && i < NDEAD; i++)
		if (dead[i].ctx == ctx)
			dead[i].ctx = NULL; /* the address is a context again */
	pthread_mutex_unlock(&live_mu);
	return ok;
}

static void live_del(const cfrt_ctx *ctx, int errors)
{
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < nlive; i++)
		if (live[i] == ctx) {
			live[i] = live[--nlive];
			break;
		}
	dead[dead_next] = (struct dead){ctx, errors};
	dead_next = (dead_next + 1) % NDEAD;
	pthread_mutex_unlock(&live_mu);
}

/* 1: live; 0: unknown; -1: freed by cfrt_finalize (*errors: its mode). */
static int live_state(const cfrt_ctx *ctx, int *errors)
{
	int st = 0;
	pthread_mutex_lock(&live_mu);
	for (int i = 0; ctx && i < nlive && !st; i++)
		st = live[i] == ctx;
	for (int i = 0; ctx && !st && i < NDEAD; i++)
		if (dead[i].ctx == ctx) {
			st = -1;
			*errors = dead[i].errors;
		}
	pthread_mutex_unlock(&live_mu);
	return st;
}

int cfrti_live(const cfrt_ctx *ctx)
{
	int mode;
	return live_state(ctx, &mode) == 1;
}

static int process_errors(void)
{
	if (default_errors < 0) {
		const char *s = getenv("CFRT_ERRORS");
		default_errors = s && strcmp(s, "return") == 0 ? CFRT_ERRORS_RETURN
		                                               : CFRT_ERRORS_ABORT;
	}
	return default_errors;
}

int cfrt_set_errors(int mode)
{
	if (mode != CFRT_ERRORS_ABORT && mode != CFRT_ERRORS_RETURN)
		return CFRT_EINVAL;
	int old = process_errors();
	default_errors = mode;
	return old;
}

int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
{
	cfrti_base *b = cfrti_base_of(ctx);
	va_list ap;
	if (b->failed)
		return status; /* the first failure's message stays */
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
	if (b->alarm != MPI_COMM_NULL)
		MPI_Comm_free(&b->alarm);
	b->comm = MPI_COMM_NULL;
	free(b->bufs);
	b->bufs = NULL;
	b->nbufs = 0;
}

/* Group g's communicator, rank and size become the context's. */
static void set_current(cfrti_base *b, int g)
{
	b->cur = g;
	b->comm = b->grp[g].comm;
	b->rank = b->grp[g].rank;
	b->size = b->grp[g].size;
}

/* The error mode, the watchdog and the finite check from opts and the
 * environment; the notice receive of error mode return, on a duplicate
 * of the job of its own (collective in either mode). */
static int lib_setup(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	const char *t = getenv("CFRT_TIMEOUT"), *c = getenv("CFRT_CHECK");
	char *end = NULL;
	b->errors = b->opts.flags & CFRT_OPT_ERRORS ? b->opts.errors : process_errors();
	if (t && *t) {
		b->timeout = strtod(t, &end);
		if (*end || !(b->timeout >= 0) || !isfinite(b->timeout))
			return cfrti_err(ctx, CFRT_EINVAL, "CFRT_TIMEOUT=%s: use seconds, "
			                 "a number >= 0 (0: no watchdog)", t);
	}
	if (b->opts.flags & CFRT_OPT_TIMEOUT)
		b->timeout = b->opts.timeout;
	if (c && *c && strcmp(c, "finite") != 0)
		return cfrti_err(ctx, CFRT_EINVAL, "CFRT_CHECK=%s: use finite", c);
	b->check_finite = c && *c;
	if (b->job == MPI_COMM_NULL) /* no MPI (a CUDA context from torchrun): */
		return CFRT_OK;          /* no failure notices; the watchdog holds */
	int rc = MPI_Comm_dup(b->job, &b->alarm);
	if (rc != MPI_SUCCESS) {
		b->alarm = MPI_COMM_NULL;
		return cfrti_mpi(ctx, rc, "MPI_Comm_dup");
	}
	MPI_Comm_set_errhandler(b->alarm, MPI_ERRORS_RETURN);
	if (b->errors != CFRT_ERRORS_RETURN || b->job_size == 1)
		return CFRT_OK;
	b->alarm_in = calloc(1, sizeof *b->alarm_in);
	if (!b->alarm_in)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the failure notice");
	return cfrti_mpi(ctx, MPI_Irecv(b->alarm_in, (int)sizeof *b->alarm_in, MPI_BYTE,
	                                MPI_ANY_SOURCE, 1, b->alarm, &b->alarm_rq),
	                 "MPI_Irecv");
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
	rc = lib_setup(ctx);
	if (rc == CFRT_OK)
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
	int gone = 0;
	init_msg[0] = 0;
	if (!out)
		return init_fail(CFRT_EINVAL, "null context pointer");
	if (live_state(*out, &gone) == 1)
		return init_fail(CFRT_EINVAL, "*ctx holds a live context already "
		                 "(model %s): cfrt_finalize it before making another "
		                 "there", cfrti_cbase_of(*out)->model);
	*out = NULL;
	if (ngroups < 1 || ngroups > CFRT_MAX_GROUPS || !sizes)
		return init_fail(CFRT_EINVAL, "%d groups: a context has 1 to %d",
		                 ngroups, CFRT_MAX_GROUPS);
	if (opts && opts->flags & ~(CFRT_OPT_STREAM | CFRT_OPT_NCCL_COMM |
	                            CFRT_OPT_ERRORS | CFRT_OPT_TIMEOUT))
		return init_fail(CFRT_EINVAL, "unknown option flags %#x",
		                 opts->flags);
	if (opts && opts->flags & CFRT_OPT_ERRORS && opts->errors != CFRT_ERRORS_ABORT &&
	    opts->errors != CFRT_ERRORS_RETURN)
		return init_fail(CFRT_EINVAL, "error mode %d: use CFRT_ERRORS_ABORT "
		                 "or CFRT_ERRORS_RETURN", opts->errors);
	if (opts && opts->flags & CFRT_OPT_TIMEOUT &&
	    (!(opts->timeout >= 0) || !isfinite(opts->timeout)))
		return init_fail(CFRT_EINVAL, "timeout %g s: use a number >= 0 "
		                 "(0: no watchdog)", opts->timeout);
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
	b->alarm = MPI_COMM_NULL;
	b->alarm_rq = MPI_REQUEST_NULL;
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
	if (rc == CFRT_OK && !live_add(ctx))
		rc = cfrti_err(ctx, CFRT_ENOMEM, "no memory for the table of contexts");
	if (rc != CFRT_OK) {
		snprintf(init_msg, sizeof init_msg, "%s", b->err);
		cfrti_alarm_close(ctx);
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
	int errors = b->errors;
	b->api = "cfrt_finalize";
	b->in_group = 0;
	/* a failed context abandons its transfers and writes no trace: its
	 * peers may never come to the trace's collective */
	int rc = cfrti_ctx_drain(ctx);
	int trc = b->failed ? CFRT_OK : cfrti_trace_write(ctx);
	rc = rc != CFRT_OK ? rc : trc;
	cfrti_trace_free(ctx);
	cfrti_alarm_close(ctx);
	if (rc != CFRT_OK)
		snprintf(init_msg, sizeof init_msg, "%s", b->err);
	live_del(ctx, errors);
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
	MPI_Request r;
	int mrc;
	b->api = "cfrt_barrier";
	int rc = cfrti_gone(ctx);
	if (rc != CFRT_OK)
		return rc;
	cfrti_trace_flush(ctx);
	if (b->job == MPI_COMM_NULL)
		return cfrti_err(ctx, CFRT_ENOTSUP, "a context made without MPI "
		                 "(MPI_COMM_NULL) has no barrier");
	rc = cfrti_mpi(ctx, MPI_Ibarrier(b->job, &r), "MPI_Ibarrier");
	if (rc == CFRT_OK)
		rc = cfrti_block(ctx, &r, &mrc);
	if (rc == CFRT_ETIMEOUT) {
		rc = cfrti_err(ctx, rc, "waited %g s (CFRT_TIMEOUT) for the other %d "
		               "ranks of the job: one of them has not come", b->timeout,
		               b->job_size - 1);
		cfrti_fail_ctx(ctx, rc);
	}
	return rc != CFRT_OK ? rc : cfrti_mpi(ctx, mrc, "MPI_Ibarrier");
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
	case CFRT_EFAILED: return "the context failed before";
	case CFRT_ETIMEOUT: return "a wait timed out (CFRT_TIMEOUT)";
	case CFRT_EPEER: return "another rank failed";
	case CFRT_ENONFINITE: return "a NaN or Inf was computed (CFRT_CHECK=finite)";
	default: return "unknown status";
	}
}

const char *cfrt_last_error(const cfrt_ctx *ctx)
{
	int mode;
	return ctx && live_state(ctx, &mode) == 1 ? cfrti_cbase_of(ctx)->err : init_msg;
}

void cfrt_fail(cfrt_ctx *ctx, int status)
{
	const char *msg = cfrt_last_error(ctx);
	int code = status < 0 ? -status : 1;
	int up = 0, down = 0, wr = -1, mode;
	char dev[32] = "";
	if (ctx && live_state(ctx, &mode) != 1)
		ctx = NULL; /* freed, or never made: its message is init_msg */
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
		if (b->failed) /* its message names rank, op and step */
			fprintf(stderr, "cfrt: %s [model %s, world rank %d%s]\n", msg,
			        b->model, wr, dev);
		else
			fprintf(stderr, "cfrt: rank %d: op %s step %d: %s [model %s, "
			        "world rank %d%s]\n", b->job_rank, b->op, b->step, msg,
			        b->model, wr, dev);
	} else if (strncmp(msg, "cfrt_init", 9) != 0) {
		fprintf(stderr, "cfrt: rank %d: %s\n", wr, msg);
	} else {
		fprintf(stderr, "cfrt: rank %d: op init step 0: %s\n", wr, msg);
	}
	fflush(stderr);
	if (up && !down)
		MPI_Abort(MPI_COMM_WORLD, code);
	_Exit(code);
}

/* The registered buffer that holds p, or NULL. */
static const struct cfrti_buf *buf_of(const cfrti_base *b, const char *p)
{
	for (int i = 0; i < b->nbufs; i++)
		if (p >= b->bufs[i].base && p < b->bufs[i].base + b->bufs[i].bytes)
			return &b->bufs[i];
	return NULL;
}

int cfrt_check_arg(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what)
{
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = "cfrt_check_arg";
	if (!what)
		what = "an argument";
	if (!bytes)
		return CFRT_OK;
	if (!p)
		return cfrti_err(ctx, CFRT_EINVAL, "%s (%zu bytes) is a null pointer", what, bytes);
	const struct cfrti_buf *r = buf_of(b, p);
	size_t have = r ? (size_t)(r->base + r->bytes - (const char *)p) : 0;
	if (r && have < bytes)
		return cfrti_err(ctx, CFRT_EINVAL, "%s needs %zu bytes, but its %s buffer "
		                 "has %zu from there", what, bytes,
		                 r->alloc ? "cfrt_alloc" : "registered", have);
	return cfrti_check_mem(ctx, p, bytes, what, r != NULL);
}

int cfrt_check_ptr(cfrt_ctx *ctx, const void *p, const char *what)
{
	cfrti_base_of(ctx)->api = "cfrt_check_ptr";
	if (!p)
		return cfrti_err(ctx, CFRT_EINVAL, "%s is a null pointer",
		                 what ? what : "an argument");
	return CFRT_OK;
}

int cfrti_buf_add(cfrt_ctx *ctx, const void *p, size_t bytes, int alloc)
{
	cfrti_base *b = cfrti_base_of(ctx);
	struct cfrti_buf *n = realloc(b->bufs, (size_t)(b->nbufs + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the buffer table");
	b->bufs = n;
	b->bufs[b->nbufs++] = (struct cfrti_buf){p, bytes, alloc};
	return CFRT_OK;
}

void cfrti_mem_add(cfrt_ctx *ctx, long long bytes)
{
	cfrti_base *b = cfrti_base_of(ctx);
	b->mem_live = (size_t)((long long)b->mem_live + bytes);
	if (b->mem_live > b->mem_peak)
		b->mem_peak = b->mem_live;
}

size_t cfrt_mem_live(cfrt_ctx *ctx)
{
	return cfrti_live(ctx) == 1 ? cfrti_base_of(ctx)->mem_live : 0;
}

size_t cfrt_mem_peak(cfrt_ctx *ctx)
{
	return cfrti_live(ctx) == 1 ? cfrti_base_of(ctx)->mem_peak : 0;
}

void cfrt_mem_reset_peak(cfrt_ctx *ctx)
{
	if (cfrti_live(ctx) == 1)
		cfrti_base_of(ctx)->mem_peak = cfrti_base_of(ctx)->mem_live;
}

int cfrti_buf_del(cfrt_ctx *ctx, const void *p)
{
	cfrti_base *b = cfrti_base_of(ctx);
	for (int i = b->nbufs - 1; i >= 0; i--)
		if (b->bufs[i].base == p) {
			b->bufs[i] = b->bufs[--b->nbufs];
			return CFRT_OK;
		}
	return cfrti_err(ctx, CFRT_EINVAL, "%p is not a buffer of this context", p);
}

int cfrt_register(cfrt_ctx *ctx, const void *p, size_t bytes)
{
	cfrti_base_of(ctx)->api = "cfrt_register";
	if (!p || !bytes)
		return cfrti_err(ctx, CFRT_EINVAL, "a buffer of %zu bytes at %p", bytes, p);
	return cfrti_buf_add(ctx, p, bytes, 0);
}

int cfrt_unregister(cfrt_ctx *ctx, const void *p)
{
	cfrti_base_of(ctx)->api = "cfrt_unregister";
	return cfrti_buf_del(ctx, p);
}

/* ---- library use: liveness, error modes, notices, the watchdog ------- */

int cfrt_check_ctx(const cfrt_ctx *ctx, const char *entry)
{
	int mode;
	if (!entry)
		entry = "cfrt_check_ctx";
	if (!ctx) {
		snprintf(init_msg, sizeof init_msg, "%s: null context (cfrt_init "
		         "was not called, or failed)", entry);
		return CFRT_EINVAL;
	}
	int st = live_state(ctx, &mode);
	if (st == -1)
		snprintf(init_msg, sizeof init_msg, "%s: the context was finalized "
		         "(cfrt_finalize freed it)", entry);
	else if (st == 0)
		snprintf(init_msg, sizeof init_msg, "%s: %p is no context of "
		         "cfrt_init", entry, (const void *)ctx);
	if (st != 1)
		return CFRT_EINVAL;
	return cfrti_cbase_of(ctx)->failed ? CFRT_EFAILED : CFRT_OK;
}

int cfrt_failure(const cfrt_ctx *ctx)
{
	int mode;
	if (!ctx || live_state(ctx, &mode) != 1)
		return CFRT_EINVAL;
	return cfrti_cbase_of(ctx)->failed;
}

int cfrt_raise(cfrt_ctx *ctx, int status)
{
	int mode = process_errors();
	if (status == CFRT_OK)
		return CFRT_OK;
	if (!ctx || live_state(ctx, &mode) != 1) {
		if (mode == CFRT_ERRORS_ABORT)
			cfrt_fail(NULL, status);
		return status;
	}
	if (cfrti_base_of(ctx)->errors == CFRT_ERRORS_ABORT)
		cfrt_fail(ctx, status);
	cfrti_fail_ctx(ctx, status);
	return status;
}

void cfrti_fail_ctx(cfrt_ctx *ctx, int status)
{
	cfrti_base *b = cfrti_base_of(ctx);
	char msg[sizeof b->err];
	if (b->failed)
		return;
	if (!b->err[0])
		snprintf(b->err, sizeof b->err, "%s", cfrt_strerror(status));
	snprintf(msg, sizeof msg, "%s", b->err);
	snprintf(b->err, sizeof b->err, "rank %d: op %.63s step %d: %.400s", b->job_rank,
	         b->op, b->step, msg);
	b->failed = status;
	if (b->errors != CFRT_ERRORS_RETURN || b->job_size == 1 || b->alarm == MPI_COMM_NULL)
		return;
	b->alarm_out = calloc(1, sizeof *b->alarm_out);
	b->alarm_sends = calloc((size_t)b->job_size, sizeof *b->alarm_sends);
	if (!b->alarm_out || !b->alarm_sends)
		return; /* the peers' watchdogs are left to end their waits */
	b->alarm_out->rank = b->job_rank;
	b->alarm_out->status = status;
	snprintf(b->alarm_out->msg, sizeof b->alarm_out->msg, "%.500s", b->err);
	for (int p = 0; p < b->job_size; p++) {
		b->alarm_sends[p] = MPI_REQUEST_NULL;
		if (p != b->job_rank)
			MPI_Isend(b->alarm_out, (int)sizeof *b->alarm_out, MPI_BYTE, p, 1,
			          b->alarm, &b->alarm_sends[p]);
	}
}

int cfrti_gone(cfrt_ctx *ctx)
{
	return cfrti_base_of(ctx)->failed ? CFRT_EFAILED : CFRT_OK;
}

/* Another rank's notice came: this context fails with its message. */
static int notice_came(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	struct cfrti_notice *n = b->alarm_in;
	n->msg[sizeof n->msg - 1] = 0;
	cfrti_err(ctx, CFRT_EPEER, "another rank failed (%s)", n->msg);
	cfrti_fail_ctx(ctx, CFRT_EPEER);
	return CFRT_EPEER;
}

int cfrti_block(cfrt_ctx *ctx, MPI_Request *r, int *mpirc)
{
	return cfrti_block_within(ctx, r, mpirc, cfrti_base_of(ctx)->timeout);
}

int cfrti_block_within(cfrt_ctx *ctx, MPI_Request *r, int *mpirc, double timeout)
{
	cfrti_base *b = cfrti_base_of(ctx);
	int flag = 0, idx = MPI_UNDEFINED;
	if (timeout <= 0 && b->alarm_rq == MPI_REQUEST_NULL) {
		*mpirc = MPI_Wait(r, MPI_STATUS_IGNORE);
		return CFRT_OK;
	}
	if (timeout <= 0) {
		MPI_Request rq[2] = {*r, b->alarm_rq};
		*mpirc = MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);
		*r = rq[0];
		b->alarm_rq = rq[1];
		return idx == 1 ? notice_came(ctx) : CFRT_OK;
	}
	double end = cfrti_now() + timeout;
	for (;;) {
		*mpirc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
		if (flag || *mpirc != MPI_SUCCESS)
			return CFRT_OK;
		if (b->alarm_rq != MPI_REQUEST_NULL) {
			MPI_Test(&b->alarm_rq, &flag, MPI_STATUS_IGNORE);
			if (flag)
				return notice_came(ctx);
		}
		if (cfrti_now() > end)
			return CFRT_ETIMEOUT;
	}
}

void cfrti_alarm_close(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	if (b->alarm_rq != MPI_REQUEST_NULL) {
		MPI_Cancel(&b->alarm_rq);
		MPI_Wait(&b->alarm_rq, MPI_STATUS_IGNORE);
	}
	free(b->alarm_in);
	b->alarm_in = NULL;
	if (!b->alarm_sends)
		return;
	/* notices are small: sent eagerly, done at once; one that is not
	 * after a second is let go, its buffer with it */
	int done = 0;
	for (double end = cfrti_now() + 1.0; !done && cfrti_now() < end;)
		MPI_Testall(b->job_size, b->alarm_sends, &done, MPI_STATUSES_IGNORE);
	for (int p = 0; !done && p < b->job_size; p++)
		if (b->alarm_sends[p] != MPI_REQUEST_NULL)
			MPI_Request_free(&b->alarm_sends[p]);
	if (done)
		free(b->alarm_out);
	free(b->alarm_sends);
	b->alarm_out = NULL;
	b->alarm_sends = NULL;
}

int cfrti_err_nonfinite(cfrt_ctx *ctx, const char *what, double x, int64_t at,
                        int64_t n)
{
	cfrti_base *b = cfrti_base_of(ctx);
	char sl[32] = "";
	if (b->slice >= 0)
		snprintf(sl, sizeof sl, " (slice %d)", b->slice);
	return cfrti_err(ctx, CFRT_ENONFINITE, "CFRT_CHECK=finite: %s of %s%s "
	                 "holds %s at element %lld of %lld: the first op that made "
	                 "one on this rank", what, b->what[0] ? b->what : "this call",
	                 sl, isnan(x) ? "a NaN" : x > 0 ? "+Inf" : "-Inf",
	                 (long long)at, (long long)n);
}

int cfrti_check_finite(cfrt_ctx *ctx, const cfrt_view *v, const char *what)
{
	if (!v || cfrt_view_numel(v) == 0 || (v->t != CFRT_F32 && v->t != CFRT_F64))
		return CFRT_OK;
	int ax = v->nd - 1;
	int64_t n = v->dim[ax], lines = cfrti_line_count(v, ax), s = v->stride[ax];
	for (int64_t l = 0; l < lines; l++) {
		const char *p = cfrti_line_at(v, v, ax, l);
		for (int64_t i = 0; i < n; i++) {
			double x = v->t == CFRT_F32 ? (double)((const float *)(const void *)p)[i * s]
			                            : ((const double *)(const void *)p)[i * s];
			if (!isfinite(x))
				return cfrti_err_nonfinite(ctx, what, x, l * n + i, lines * n);
		}
	}
	return CFRT_OK;
}
