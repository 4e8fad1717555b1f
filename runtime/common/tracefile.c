/* tracefile.c: the trace of a context (CFRT_TRACE): the spans the backend
 * records, and the one Chrome trace JSON file of the whole job that rank 0
 * of the context writes at cfrt_finalize.
 * ensures: the file is {"traceEvents": [...]}: per rank (pid = rank in
 * the context) a process_name and a thread_name per track lane used; an
 * "X" event per span, on a lane of its track where no other X event
 * overlaps it (lanes assigned greedily by start time); per point-to-point
 * message a flow, "s" at the send's start and "f" (bp "e") inside the
 * matching receive, their id made of sender, receiver and message number.
 * Tracing never fails a traced call: a span past the cap is counted in
 * dropped_events. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Default cap of spans per rank (CFRT_TRACE_EVENTS): about 13 MiB. */
enum { DEFAULT_MAX = 1 << 16 };

/* Tid of lane l of track k: tracks apart by 1000, sorted by tid. */
enum { LANES = 1000 };

typedef struct cfrti_trace {
	cfrti_span *sp;
	int n, cap, max;
	long dropped;
	double origin;    /* cfrti_now() of time 0 */
	int64_t *sent;    /* per job rank: messages started to it, */
	int64_t *recvd;   /* and from it */
	char *path;       /* the file, on rank 0 */
} cfrti_trace;

/* Contexts this process has begun to make (cfrt_init): the k-th
 * further one adds .ctx<k>. */
static int contexts_made;

/* The file: <prefix>.json for the process's first context over the whole
 * of MPI_COMM_WORLD; .ctx<k> for its k-th further context, .rank<W> when
 * the context spans fewer ranks (W: world rank of its rank 0, the
 * writer), so that several such contexts never share a name. */
static char *trace_file(const cfrti_base *b, const char *prefix, int made)
{
	int world = 0;
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	size_t n = strlen(prefix) + 64;
	char *s = malloc(n);
	if (!s)
		return NULL;
	int k = snprintf(s, n, "%s", prefix);
	if (made > 0)
		k += snprintf(s + k, n - (size_t)k, ".ctx%d", made);
	if (b->job_size < world)
		k += snprintf(s + k, n - (size_t)k, ".rank%d", b->world_rank);
	snprintf(s + k, n - (size_t)k, ".json");
	return s;
}

int cfrti_trace_open(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	const char *prefix = getenv("CFRT_TRACE"), *max = getenv("CFRT_TRACE_EVENTS");
	int made = contexts_made++;
	if (!prefix || !*prefix)
		return CFRT_OK;
	if (b->job == MPI_COMM_NULL)
		return cfrti_err(ctx, CFRT_ENOTSUP, "CFRT_TRACE=%s: a context made "
		                 "without MPI (MPI_COMM_NULL) writes no trace", prefix);
	cfrti_trace *t = calloc(1, sizeof *t);
	if (t) {
		b->trace = t;
		t->max = max && atoi(max) > 0 ? atoi(max) : DEFAULT_MAX;
		t->sent = calloc((size_t)b->job_size, sizeof *t->sent);
		t->recvd = calloc((size_t)b->job_size, sizeof *t->recvd);
		t->path = b->job_rank == 0 ? trace_file(b, prefix, made) : NULL;
	}
	/* every rank learns of a failure (none waits for one that left),
	 * and the reduction is the barrier that lines up the ranks' time 0 */
	int bad = !t || !t->sent || !t->recvd || (b->job_rank == 0 && !t->path), any;
	int rc = cfrti_mpi(ctx, MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, b->job),
	                   "MPI_Allreduce");
	if (rc == CFRT_OK && any)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the trace%s",
		                 bad ? "" : " on another rank");
	if (t)
		t->origin = cfrti_now();
	return rc;
}

void cfrti_trace_free(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace *t = b->trace;
	if (!t)
		return;
	free(t->sp);
	free(t->sent);
	free(t->recvd);
	free(t->path);
	free(t);
	b->trace = NULL;
}

int64_t cfrti_trace_ns(const cfrt_ctx *ctx, double t)
{
	const cfrti_trace *tr = cfrti_cbase_of(ctx)->trace;
	double ns = (t - tr->origin) * 1e9;
	return (int64_t)(ns < 0 ? 0 : ns + 0.5);
}

cfrti_span *cfrti_trace_at(cfrt_ctx *ctx, int i)
{
	cfrti_trace *t = cfrti_base_of(ctx)->trace;
	return t && i >= 0 && i < t->n ? &t->sp[i] : NULL;
}

int cfrti_trace_begin(cfrt_ctx *ctx, const char *call, int track)
{
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace *t = b->trace;
	if (!t)
		return -1;
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 1024;
		cap = cap < t->max ? cap : t->max;
		cfrti_span *sp = cap > t->cap ? realloc(t->sp, (size_t)cap * sizeof *sp) : NULL;
		if (!sp) {
			t->dropped++;
			return -1;
		}
		t->sp = sp;
		t->cap = cap;
	}
	cfrti_span *s = &t->sp[t->n];
	memset(s, 0, sizeof *s);
	s->t0 = s->t1 = -1;
	s->ev[0] = s->ev[1] = -1;
	s->track = track;
	s->kind = -1;
	s->peer = -1;
	s->step = b->step;
	s->slice = b->slice;
	snprintf(s->call, sizeof s->call, "%s", call);
	snprintf(s->op, sizeof s->op, "%s", b->op);
	snprintf(s->what, sizeof s->what, "%s", b->what);
	return t->n++;
}

/* The rank in the job of peer, a rank of the current group: the grid's
 * coordinates but the current group's are this rank's (cfrt.h). */
static int job_peer(const cfrti_base *b, int peer)
{
	return b->job_rank + (peer - b->rank) * b->grp[b->cur].stride;
}

int cfrti_trace_xfer(cfrt_ctx *ctx, const xdesc *d, int track)
{
	static const char *const calls[] = {
		"send", "recv", "all_gather", "reduce_scatter", "all_reduce",
		"all_to_all"
	};
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace *t = b->trace;
	if (!t)
		return -1;
	int p = d->kind <= T_RECV ? job_peer(b, d->peer) : -1;
	int64_t msg = -1;
	if (p >= 0)
		msg = d->kind == T_SEND ? t->sent[p]++ : t->recvd[p]++;
	int i = cfrti_trace_begin(ctx, calls[d->kind], track);
	cfrti_span *s = cfrti_trace_at(ctx, i);
	if (!s)
		return -1;
	s->kind = (int)d->kind;
	s->peer = p;
	s->msg = msg;
	int64_t per = d->count * (int64_t)cfrt_dtype_size(d->t);
	s->bytes = d->kind == T_RS || d->kind == T_A2A ? per * b->size : per;
	return i;
}

/* ---- writing ------------------------------------------------------------ */

/* A growing string. */
typedef struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...)
{
	va_list ap;
	for (int tries = 0; tries < 2 && !s->oom; tries++) {
		va_start(ap, fmt);
		int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			s->oom = 1;
			return;
		}
		if (s->p && s->n + (size_t)k < s->cap) {
			s->n += (size_t)k;
			return;
		}
		size_t cap = 2 * (s->cap + (size_t)k) + 4096;
		char *p = realloc(s->p, cap);
		if (!p)
			s->oom = 1;
		else
			s->p = p, s->cap = cap;
	}
}

/* s as a JSON string literal. */
static void put_str(sbuf *o, const char *s)
{
	put(o, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20)
			put(o, "\\u%04x", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

/* ns as microseconds, exactly: ts + dur of an event is its end. */
static void put_us(sbuf *o, const char *key, int64_t ns)
{
	put(o, ",\"%s\":%lld.%03lld", key, (long long)(ns / 1000), (long long)(ns % 1000));
}

static int by_start(const void *a, const void *b)
{
	const cfrti_span *x = a, *y = b;
	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	return (x->t1 > y->t1) - (x->t1 < y->t1);
}

static void put_thread(sbuf *o, int pid, int track, int lane)
{
	char name[64];
	int k = track == TRK_COMPUTE ? snprintf(name, sizeof name, "compute") :
	        track == TRK_XFER ? snprintf(name, sizeof name, "communication") :
	        snprintf(name, sizeof name, "copy engine from rank %d", track - TRK_COPY);
	if (lane > 0)
		snprintf(name + k, sizeof name - (size_t)k, " %d", lane + 1);
	int tid = track * LANES + lane;
	put(o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":",
	    pid, tid);
	put_str(o, name);
	put(o, "}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
	    "\"args\":{\"sort_index\":%d}}", pid, tid, tid);
}

/* Flow id of message msg from job rank src to dst: unique in the file. */
static long long flow_id(int src, int dst, int n, int64_t msg)
{
	return (((long long)src * n + dst) << 24) + msg + 1;
}

static void put_span(sbuf *o, const cfrti_base *b, const cfrti_span *s, int tid)
{
	int pid = b->job_rank;
	put(o, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":", pid, tid);
	char name[160];
	/* a call outside the model's ops is named for when it ran: before any
	 * op ("setup: fill_global", the driver's fills), or between passes
	 * ("between passes: download"), not "- step -1: fill_global" */
	int outside = !strcmp(s->op, "-");
	int k = outside ? snprintf(name, sizeof name, "%s", s->step < 0 ? "setup" : "between passes") :
	        snprintf(name, sizeof name, "%s step %d", s->op, s->step);
	if (s->slice >= 0)
		k += snprintf(name + k, sizeof name - (size_t)k, " slice %d", s->slice);
	k += snprintf(name + k, sizeof name - (size_t)k, ": %s", s->call);
	if (s->peer >= 0)
		snprintf(name + k, sizeof name - (size_t)k, " %s %d", s->kind == T_SEND ? "to" :
		         "from", s->peer);
	put_str(o, name);
	put_us(o, "ts", s->t0);
	put_us(o, "dur", s->t1 - s->t0);
	put(o, ",\"args\":{\"op\":");
	put_str(o, s->op);
	put(o, ",\"step\":%d,\"slice\":%d,\"tensors\":", s->step, s->slice);
	put_str(o, s->what);
	if (s->kind >= 0)
		put(o, ",\"bytes\":%lld", (long long)s->bytes);
	if (s->peer >= 0)
		put(o, ",\"peer\":%d,\"msg\":%lld", s->peer, (long long)s->msg);
	put(o, "}}");
	if (s->kind == T_SEND) {
		put(o, ",\n{\"ph\":\"s\",\"cat\":\"message\",\"name\":\"message\",\"id\":%lld,"
		    "\"pid\":%d,\"tid\":%d", flow_id(pid, s->peer, b->job_size, s->msg), pid, tid);
		put_us(o, "ts", s->t1 > s->t0 ? s->t0 + 1 : s->t0);
		put(o, "}");
	} else if (s->kind == T_RECV) {
		put(o, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"message\",\"name\":\"message\","
		    "\"id\":%lld,\"pid\":%d,\"tid\":%d", flow_id(s->peer, pid, b->job_size, s->msg),
		    pid, tid);
		put_us(o, "ts", s->t1 > s->t0 ? s->t1 - 1 : s->t0);
		put(o, "}");
	}
}

/* This rank's part of the file: its process row, its lanes, its spans.
 * Lanes: per track, spans by start time, each on the first lane whose
 * last span has ended (end <= start: touching spans share a lane); a
 * span that finds all LANES busy is dropped, never drawn over another.
 * Sorts the trace's spans in place: it is written once, at the end. */
static void put_rank(sbuf *o, const cfrti_base *b, cfrti_trace *t)
{
	int64_t end[LANES];
	int nlanes = 0, track = -1, n = 0;
	long dropped = t->dropped;
	char name[160];
	for (int i = 0; i < t->n; i++)
		if (t->sp[i].t0 >= 0 && t->sp[i].t1 >= t->sp[i].t0)
			t->sp[n++] = t->sp[i];
		else
			dropped++;
	qsort(t->sp, (size_t)n, sizeof *t->sp, by_start);
	for (int j = 0; j < n; j++) {
		const cfrti_span *s = &t->sp[j];
		if (s->track != track) {
			track = s->track;
			nlanes = 0;
		}
		int l = 0;
		while (l < nlanes && end[l] > s->t0)
			l++;
		if (l == LANES) {
			dropped++;
			continue;
		}
		if (l == nlanes) {
			nlanes++;
			end[l] = s->t1;
			put_thread(o, b->job_rank, track, l);
		}
		end[l] = s->t1 > end[l] ? s->t1 : end[l];
		put_span(o, b, s, track * LANES + l);
	}
	snprintf(name, sizeof name, "rank %d of %s (%d ranks)", b->job_rank, b->model, b->job_size);
	put(o, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":",
	    b->job_rank);
	put_str(o, name);
	put(o, ",\"world_rank\":%d,\"dropped_events\":%ld}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
	    "\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}", b->world_rank, dropped,
	    b->job_rank, b->job_rank);
}

/* Rank 0 writes the parts of every rank (its own first) into its file. */
static int write_file(cfrt_ctx *ctx, const char *all, size_t n)
{
	cfrti_base *b = cfrti_base_of(ctx);
	FILE *f = fopen(b->trace->path, "w");
	if (!f)
		return cfrti_err(ctx, CFRT_EIO, "cannot write trace %s", b->trace->path);
	fprintf(f, "{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":"
	        "\"process_labels\",\"args\":{\"labels\":\"cfrt\"}}");
	fwrite(all, 1, n, f);
	fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"%s\","
	        "\"ranks\":%d,\"backend\":\"%s\"}}\n", b->model, b->job_size,
	        cfrt_backend_name());
	if (fclose(f) != 0)
		return cfrti_err(ctx, CFRT_EIO, "cannot write trace %s", b->trace->path);
	return CFRT_OK;
}

int cfrti_trace_write(cfrt_ctx *ctx)
{
	cfrti_base *b = cfrti_base_of(ctx);
	cfrti_trace *t = b->trace;
	sbuf o = {0};
	int rc = CFRT_OK, len, ok = 1, *lens = NULL, *offs = NULL;
	char *all = NULL;
	size_t total = 0;
	if (!t)
		return CFRT_OK;
	put_rank(&o, b, t);
	len = o.oom || o.n > (size_t)1 << 30 ? 0 : (int)o.n;
	if (b->job_rank == 0) {
		lens = calloc((size_t)b->job_size, sizeof *lens);
		offs = calloc((size_t)b->job_size, sizeof *offs);
		ok = lens && offs;
	}
	int mrc = MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, b->job);
	for (int r = 0; ok && b->job_rank == 0 && r < b->job_size; r++) {
		offs[r] = (int)total;
		total += (size_t)lens[r];
	}
	if (ok && b->job_rank == 0)
		ok = total < (size_t)1 << 31 && (all = malloc(total + 1)) != NULL;
	if (mrc == MPI_SUCCESS) /* rank 0 has room, or nobody sends */
		mrc = MPI_Bcast(&ok, 1, MPI_INT, 0, b->job);
	if (mrc == MPI_SUCCESS && ok)
		mrc = MPI_Gatherv(o.p, len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, b->job);
	if (mrc != MPI_SUCCESS)
		rc = cfrti_mpi(ctx, mrc, "MPI_Gatherv");
	else if (!ok || o.oom || (len == 0 && o.n > 0))
		rc = cfrti_err(ctx, CFRT_ENOMEM, "no memory for the trace");
	if (rc == CFRT_OK && b->job_rank == 0)
		rc = write_file(ctx, all, total);
	free(all);
	free(lens);
	free(offs);
	free(o.p);
	return rc;
}
