/* trace.c: Chrome trace event output (CFRT_TRACE).
 * ensures: the file is one JSON object {"traceEvents": [...]}: metadata
 * events naming the process and its two threads, then one "X" event per
 * compute call (tid 0) and per transfer (tid 1), ts/dur in microseconds.
 * Tracing never fails the traced call: an event that finds no memory is
 * dropped and counted in the process metadata. */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

void cfrti_trace_name(const cfrt_ctx *ctx, const char *what, char *buf,
                      size_t n)
{
	snprintf(buf, n, "%s step %d: %s", ctx->base.op, ctx->base.step, what);
}

void cfrti_trace_add(cfrt_ctx *ctx, const char *what, double t0, double t1,
                     int tid)
{
	if (ctx->nev == ctx->capev) {
		int cap = ctx->capev ? 2 * ctx->capev : 1024;
		trace_ev *ev = realloc(ctx->ev, (size_t)cap * sizeof *ev);
		if (!ev) {
			ctx->dropped++;
			return;
		}
		ctx->ev = ev;
		ctx->capev = cap;
	}
	trace_ev *e = &ctx->ev[ctx->nev++];
	if (tid == 0)
		cfrti_trace_name(ctx, what, e->name, sizeof e->name);
	else
		snprintf(e->name, sizeof e->name, "%s", what);
	e->t0 = t0;
	e->t1 = t1;
	e->tid = tid;
}

/* Writes s as a JSON string literal. */
static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void put_meta(FILE *f, const cfrt_ctx *ctx)
{
	int pid = ctx->base.world_rank;
	char name[160];
	snprintf(name, sizeof name, "rank %d of %s (%d ranks)", ctx->base.job_rank,
	         ctx->base.model, ctx->base.job_size);
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
	        "\"args\":{\"name\":", pid);
	put_string(f, name);
	fprintf(f, ",\"dropped_events\":%ld}},\n", ctx->dropped);
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"thread_name\","
	        "\"args\":{\"name\":\"compute\"}},\n", pid);
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"name\":\"thread_name\","
	        "\"args\":{\"name\":\"communication\"}}", pid);
}

int cfrti_trace_write(cfrt_ctx *ctx)
{
	if (!ctx->trace_path)
		return CFRT_OK;
	FILE *f = fopen(ctx->trace_path, "w");
	if (!f)
		return cfrti_err(ctx, CFRT_EIO, "cannot write trace %s",
		                 ctx->trace_path);
	fprintf(f, "{\"traceEvents\":[\n");
	put_meta(f, ctx);
	for (int i = 0; i < ctx->nev; i++) {
		const trace_ev *e = &ctx->ev[i];
		fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":",
		        ctx->base.world_rank, e->tid);
		put_string(f, e->name);
		fprintf(f, ",\"ts\":%.3f,\"dur\":%.3f}",
		        1e6 * (e->t0 - ctx->origin), 1e6 * (e->t1 - e->t0));
	}
	fprintf(f, "\n],\"displayTimeUnit\":\"ms\"}\n");
	if (fclose(f) != 0)
		return cfrti_err(ctx, CFRT_EIO, "cannot write trace %s",
		                 ctx->trace_path);
	return CFRT_OK;
}
