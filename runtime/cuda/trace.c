/* trace.c: the spans of the trace (CFRT_TRACE; runtime/common/tracefile.c
 * keeps and writes them) timed on the device: a CUDA event recorded on a
 * span's stream before and after its work, resolved into times at the
 * context's drain with cudaEventElapsedTime against a base event recorded
 * at init, whose host time is read right after a cudaEventSynchronize on
 * it (the origin of the trace is taken after a barrier, so ranks line up).
 * Layer 0: it knows streams only as arguments, and calls nothing above it.
 * ensures: the host never waits for the device here but at init and at
 * the drain; events come from a pool that grows to twice
 * CFRT_TRACE_EVENTS and is never reused; a span whose events could not be
 * had keeps t0 = -1 and is counted as dropped. Tracing never fails a
 * call. A compute call's span begins at its entry (cfrti_enter) and ends
 * at the next call's entry, or at cfrti_trace_flush (cfrt_where,
 * cfrt_what, cfrt_barrier) or a host copy, whichever comes first. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

enum { BLOCK = 256 };

/* Events recorded so far on a stream; -1 when none could be had. */
int cfrti_tr_mark(cfrt_ctx *ctx, cudaStream_t s)
{
	trace_state *t = &ctx->tr;
	if (!ctx->base.trace || !t->base)
		return -1;
	if (t->nev == t->cap) {
		int cap = t->cap + BLOCK < t->max ? t->cap + BLOCK : t->max;
		cudaEvent_t *ev = cap > t->cap ? realloc(t->ev, (size_t)cap * sizeof *ev) : NULL;
		if (!ev)
			return -1;
		t->ev = ev;
		for (; t->cap < cap; t->cap++)
			if (cudaEventCreate(&t->ev[t->cap]) != cudaSuccess)
				break;
		if (t->nev == t->cap)
			return -1;
	}
	if (cudaEventRecord(t->ev[t->nev], s) != cudaSuccess)
		return -1;
	return t->nev++;
}

int cfrti_tr_init(cfrt_ctx *ctx, cudaStream_t cs)
{
	trace_state *t = &ctx->tr;
	const char *max = getenv("CFRT_TRACE_EVENTS");
	t->open = -1;
	t->cs = cs;
	if (!ctx->base.trace)
		return CFRT_OK;
	t->max = 2 * (max && atoi(max) > 0 ? atoi(max) : 1 << 16);
	if (cudaEventCreate(&t->base) != cudaSuccess ||
	    cudaEventRecord(t->base, cs) != cudaSuccess ||
	    cudaEventSynchronize(t->base) != cudaSuccess)
		return cfrti_err(ctx, CFRT_EDEVICE, "the trace's base event failed: %s",
		                 cudaGetErrorString(cudaGetLastError()));
	t->base_ns = cfrti_trace_ns(ctx, cfrti_now());
	return CFRT_OK;
}

/* The public calls that are not compute: transfers and their waits. */
static int is_compute(const char *api)
{
	static const char *const calls[] = {
		"cfrt_wait", "cfrt_waitall", "cfrt_sync", "cfrt_group_begin",
		"cfrt_group_end", "cfrt_all_gather", "cfrt_reduce_scatter",
		"cfrt_all_reduce", "cfrt_all_to_all"
	};
	if (strncmp(api, "cfrt_i", 6) == 0) /* cfrt_isend, cfrt_iall_gather */
		return 0;
	for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
		if (strcmp(api, calls[i]) == 0)
			return 0;
	return 1;
}

void cfrti_tr_close(cfrt_ctx *ctx, cudaStream_t cs)
{
	cfrti_span *s = cfrti_trace_at(ctx, ctx->tr.open);
	ctx->tr.open = -1;
	if (s)
		s->ev[1] = cfrti_tr_mark(ctx, cs);
}

void cfrti_tr_call(cfrt_ctx *ctx, const char *api, cudaStream_t cs)
{
	if (!ctx->base.trace)
		return;
	cfrti_tr_close(ctx, cs);
	if (!is_compute(api))
		return;
	int i = cfrti_trace_begin(ctx, api + 5, TRK_COMPUTE);
	cfrti_span *s = cfrti_trace_at(ctx, i);
	if (s && (s->ev[0] = cfrti_tr_mark(ctx, cs)) >= 0)
		ctx->tr.open = i;
}

/* ns of event e from the origin, or -1. */
static int64_t event_ns(cfrt_ctx *ctx, int e)
{
	float ms = 0;
	trace_state *t = &ctx->tr;
	if (e < 0 || e >= t->nev || cudaEventElapsedTime(&ms, t->base, t->ev[e]) != cudaSuccess)
		return -1;
	return t->base_ns + (int64_t)((double)ms * 1e6 + 0.5);
}

/* After the device has finished: every span's times from its events. */
void cfrti_tr_resolve(cfrt_ctx *ctx)
{
	for (int i = 0; cfrti_trace_at(ctx, i); i++) {
		cfrti_span *s = cfrti_trace_at(ctx, i);
		if (s->ev[0] < 0 && s->ev[1] < 0)
			continue;
		s->t0 = event_ns(ctx, s->ev[0]);
		s->t1 = event_ns(ctx, s->ev[1]);
		if (s->t0 < 0 || s->t1 < 0)
			s->t0 = s->t1 = -1;
	}
	cudaGetLastError(); /* an event never recorded: the span is dropped */
}

void cfrti_tr_fini(cfrt_ctx *ctx)
{
	trace_state *t = &ctx->tr;
	for (int i = 0; i < t->cap; i++)
		cudaEventDestroy(t->ev[i]);
	if (t->base)
		cudaEventDestroy(t->base);
	free(t->ev);
	memset(t, 0, sizeof *t);
	t->open = -1;
}

void cfrti_trace_flush(cfrt_ctx *ctx)
{
	if (ctx->tr.open >= 0)
		cfrti_tr_close(ctx, ctx->tr.cs);
}
