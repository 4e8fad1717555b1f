/* ce.c: point-to-point transfers by the copy engines (CFRT_TRANSFER=ce):
 * the receiver pulls the data from the sender's buffer, mapped into its
 * address space by CUDA IPC, with cudaMemcpyAsync on a high-priority
 * stream per peer. No SM takes part in moving the data.
 *
 * Protocol, per transfer (MPI messages on the context's communicator):
 *  1. isend: the sender records ready event R on its compute stream and
 *     sends READY {allocation handle, offset, bytes, R's handle}.
 *  2. irecv: the receiver records event L on its compute stream (its buffer
 *     is free after the compute issued so far).
 *  3. Once READY has arrived (tested at every runtime call and in waits),
 *     the receiver enqueues on its copy stream: wait L, wait R, the copy,
 *     record done event D; then sends DONE {D's handle}.
 *  4. Receiver's wait: its compute stream waits on D.
 *     Sender's wait: blocks the host until DONE has arrived (the receiver
 *     has enqueued the copy), makes its compute stream wait on D, and
 *     sends ACK {D}.
 * Invariants: an IPC event is recorded again only after every waiter has
 * called cudaStreamWaitEvent on its last record: R is released when DONE
 * arrives (the receiver waited on R before sending it), D when its ACK
 * has arrived and the receiver's own wait has waited on it (a stream
 * waits for the record that is the last when it is told to: D recorded
 * again before that wait made it wait for a later copy, whichever copy
 * ended first. 4 H100s, fuse(bidir) of bench-gpu's case a, traced: rank
 * 0 waited for each receive of one lane a step after the other lane's
 * next receive had taken its D, so its compute waited for that copy:
 * gaps of 0.385-0.392 ms, 3 or 4 a pass in the last five passes of
 * bench/results/2026-11-28-H100-lease14-16-c0f7eec/lease14-trace-a-bidir-ce.json.gz).
 * A receiver issues the copies
 * from one peer in the order of its receives, so DONE k answers send k
 * (MPI keeps the order of messages of one tag between two ranks). Hosts
 * block only in the sender's wait, and while blocked they keep issuing
 * the copies whose READY has arrived, so a schedule that completes under
 * MPI's rendezvous sends completes here. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* ---- this process's IPC events -------------------------------------- */

static int ev_new(cfrt_ctx *ctx)
{
	ipc_ev **n = realloc(ctx->ce.ev, (size_t)(ctx->ce.nev + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for an event");
	ctx->ce.ev = n;
	ipc_ev *e = calloc(1, sizeof *e);
	if (!e)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for an event");
	e->id = ctx->ce.nev;
	e->req[0] = e->req[1] = MPI_REQUEST_NULL;
	int rc = cfrti_cuda(ctx, cudaEventCreateWithFlags(&e->e,
	                    cudaEventDisableTiming | cudaEventInterprocess),
	                    "cudaEventCreate");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaIpcGetEventHandle(&e->h, e->e),
		                "cudaIpcGetEventHandle");
	if (rc != CFRT_OK) {
		if (e->e)
			cudaEventDestroy(e->e);
		free(e);
		return rc;
	}
	ctx->ce.ev[ctx->ce.nev++] = e;
	return CFRT_OK;
}

static int ev_idle(const ipc_ev *e)
{
	return !e->busy && !e->own_wait && e->req[0] == MPI_REQUEST_NULL &&
	       e->req[1] == MPI_REQUEST_NULL;
}

/* An idle event, marked busy; NULL on failure. */
static ipc_ev *ev_get(cfrt_ctx *ctx)
{
	for (int i = 0; i < ctx->ce.nev; i++)
		if (ev_idle(ctx->ce.ev[i])) {
			ctx->ce.ev[i]->busy = 1;
			return ctx->ce.ev[i];
		}
	if (ev_new(ctx) != CFRT_OK)
		return NULL;
	ctx->ce.ev[ctx->ce.nev - 1]->busy = 1;
	return ctx->ce.ev[ctx->ce.nev - 1];
}

/* Tests an event's messages; an ACK that arrived releases the D it names. */
static int ev_test(cfrt_ctx *ctx, ipc_ev *e)
{
	int flag = 0, rc = MPI_SUCCESS;
	if (e->req[0] != MPI_REQUEST_NULL)
		rc = MPI_Test(&e->req[0], &flag, MPI_STATUS_IGNORE);
	if (rc == MPI_SUCCESS && e->req[1] != MPI_REQUEST_NULL) {
		rc = MPI_Test(&e->req[1], &flag, MPI_STATUS_IGNORE);
		if (rc == MPI_SUCCESS && flag && e->wait_ack) {
			e->wait_ack = 0;
			if (e->ack < 0 || e->ack >= ctx->ce.nev)
				return cfrti_err(ctx, CFRT_ECOMM, "ACK names event "
				                 "%d of %d", e->ack, ctx->ce.nev);
			ctx->ce.ev[e->ack]->busy = 0;
		}
	}
	return cfrti_mpi(ctx, rc, "MPI_Test");
}

/* ---- peers' memory, events and streams ------------------------------- */

static int remote_mem_of(cfrt_ctx *ctx, int peer, const ce_ready *m,
                         char **base)
{
	ce_state *c = &ctx->ce;
	for (int i = 0; i < c->nrmem; i++)
		if (c->rmem[i].peer == peer && c->rmem[i].serial == m->serial) {
			*base = c->rmem[i].base;
			return CFRT_OK;
		}
	remote_mem *n = realloc(c->rmem, (size_t)(c->nrmem + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for a peer mapping");
	c->rmem = n;
	void *p = NULL;
	int rc = cfrti_cuda(ctx, cudaIpcOpenMemHandle(&p, m->mem,
	                    cudaIpcMemLazyEnablePeerAccess),
	                    "cudaIpcOpenMemHandle");
	if (rc != CFRT_OK)
		return rc;
	c->rmem[c->nrmem++] = (remote_mem){peer, m->serial, p};
	*base = p;
	return CFRT_OK;
}

/* Event id of peer, opened from handle h on first use; this process's own
 * event when peer is this rank. */
static int remote_ev_of(cfrt_ctx *ctx, int peer, int id,
                        const cudaIpcEventHandle_t *h, cudaEvent_t *e)
{
	if (id < 0)
		return cfrti_err(ctx, CFRT_ECOMM, "bad event id %d", id);
	if (peer == ctx->base.rank) {
		if (id >= ctx->ce.nev)
			return cfrti_err(ctx, CFRT_ECOMM, "bad event id %d", id);
		*e = ctx->ce.ev[id]->e;
		return CFRT_OK;
	}
	if (id >= ctx->ce.npeer_ev[peer]) {
		cudaEvent_t *n = realloc(ctx->ce.peer_ev[peer], (size_t)(id + 1) *
		                         sizeof *n);
		if (!n)
			return cfrti_err(ctx, CFRT_ENOMEM, "no memory for events");
		for (int i = ctx->ce.npeer_ev[peer]; i <= id; i++)
			n[i] = NULL;
		ctx->ce.peer_ev[peer] = n;
		ctx->ce.npeer_ev[peer] = id + 1;
	}
	cudaEvent_t *slot = &ctx->ce.peer_ev[peer][id];
	if (!*slot) {
		int rc = cfrti_cuda(ctx, cudaIpcOpenEventHandle(slot, *h),
		                    "cudaIpcOpenEventHandle");
		if (rc != CFRT_OK)
			return rc;
	}
	*e = *slot;
	return CFRT_OK;
}

/* The copy stream of peer, made on first use (high priority). */
static int ce_stream(cfrt_ctx *ctx, int peer, cudaStream_t *s)
{
	int rc = CFRT_OK;
	if (!ctx->ce.s[peer])
		rc = cfrti_dev_stream(ctx, 1, &ctx->ce.s[peer]);
	*s = ctx->ce.s[peer];
	return rc;
}

/* ---- starting ---------------------------------------------------------- */

/* 1: the handshake of a send. */
static int start_send(cfrt_ctx *ctx, xfer *x)
{
	size_t bytes = (size_t)x->d.count * cfrt_dtype_size(x->d.t);
	ce_ready *m = &x->ready_msg;
	memset(m, 0, sizeof *m);
	m->bytes = bytes;
	m->ptr = (uint64_t)(uintptr_t)x->d.send;
	if (bytes > 0 && x->d.peer != ctx->base.rank) {
		const alloc_rec *a = cfrti_alloc_of(ctx, x->d.send, bytes);
		if (!a)
			return cfrti_err(ctx, CFRT_EINVAL, "copy-engine transfers "
			                 "need buffers from cfrt_alloc");
		int rc = cfrti_alloc_handle(ctx, a, &m->mem);
		if (rc != CFRT_OK)
			return rc;
		m->serial = a->serial;
		m->offset = (uint64_t)((const char *)x->d.send - a->base);
	}
	ipc_ev *r = ev_get(ctx);
	if (!r)
		return CFRT_ENOMEM;
	x->ev_id = r->id;
	m->ev = r->h;
	m->ev_id = r->id;
	cfrti_span *sp = cfrti_trace_at(ctx, x->span);
	if (sp) /* the send's span: from here to its wait on the compute stream */
		sp->ev[0] = cfrti_tr_mark(ctx, ctx->dev.cs);
	int rc = cfrti_cuda(ctx, cudaEventRecord(r->e, ctx->dev.cs),
	                    "cudaEventRecord");
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Isend(m, (int)sizeof *m, MPI_BYTE,
		               x->d.peer, CE_TAG_READY, ctx->base.comm,
		               &x->mreq[0]), "MPI_Isend");
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Irecv(&x->done_msg, (int)sizeof x->done_msg,
		               MPI_BYTE, x->d.peer, CE_TAG_DONE, ctx->base.comm,
		               &x->mreq[1]), "MPI_Irecv");
	if (rc != CFRT_OK)
		r->busy = 0;
	return rc;
}

/* 2: a receive, queued behind the earlier ones from the same peer. */
static int start_recv(cfrt_ctx *ctx, xfer *x)
{
	int p = x->d.peer;
	int rc = cfrti_cuda(ctx, cudaEventRecord(x->ready, ctx->dev.cs),
	                    "cudaEventRecord");
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Irecv(&x->ready_msg,
		               (int)sizeof x->ready_msg, MPI_BYTE, p, CE_TAG_READY,
		               ctx->base.comm, &x->mreq[0]), "MPI_Irecv");
	if (rc != CFRT_OK)
		return rc;
	x->next_fifo = NULL;
	if (ctx->ce.fifo_tail[p])
		ctx->ce.fifo_tail[p]->next_fifo = x;
	else
		ctx->ce.fifo_head[p] = x;
	ctx->ce.fifo_tail[p] = x;
	return CFRT_OK;
}

int cfrti_ce_start(cfrt_ctx *ctx, xfer *x)
{
	x->issued = 0;
	x->mreq[0] = x->mreq[1] = MPI_REQUEST_NULL;
	int rc = x->d.kind == T_SEND ? start_send(ctx, x) : start_recv(ctx, x);
	if (rc == CFRT_OK)
		ctx->ce.open++;
	return rc;
}

/* ---- 3: issuing copies ------------------------------------------------- */

/* The source of a copy whose READY message m came from peer. */
static int copy_source(cfrt_ctx *ctx, int peer, const ce_ready *m,
                       const char **src)
{
	char *base = NULL;
	if (peer == ctx->base.rank || m->bytes == 0) {
		*src = (const char *)(uintptr_t)m->ptr;
		return CFRT_OK;
	}
	int rc = remote_mem_of(ctx, peer, m, &base);
	*src = base + m->offset;
	return rc;
}

/* Enqueues the copy and announces it: DONE to the sender, ACK awaited. */
static int issue(cfrt_ctx *ctx, xfer *x)
{
	const ce_ready *m = &x->ready_msg;
	size_t bytes = (size_t)x->d.count * cfrt_dtype_size(x->d.t);
	int p = x->d.peer;
	const char *src = NULL;
	cudaEvent_t r;
	cudaStream_t s = NULL;
	if (m->bytes != bytes)
		return cfrti_err(ctx, CFRT_ECOMM, "rank %d sends %llu bytes, the "
		                 "receive expects %zu", p,
		                 (unsigned long long)m->bytes, bytes);
	int rc = copy_source(ctx, p, m, &src);
	if (rc == CFRT_OK)
		rc = remote_ev_of(ctx, p, m->ev_id, &m->ev, &r);
	if (rc == CFRT_OK)
		rc = ce_stream(ctx, p, &s);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamWaitEvent(s, x->ready, 0),
		                "cudaStreamWaitEvent");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamWaitEvent(s, r, 0),
		                "cudaStreamWaitEvent");
	cfrti_span *sp = cfrti_trace_at(ctx, x->span);
	if (sp && rc == CFRT_OK) /* the receive's span: the copy */
		sp->ev[0] = cfrti_tr_mark(ctx, s);
	if (rc == CFRT_OK && bytes > 0)
		rc = cfrti_cuda(ctx, cudaMemcpyAsync(x->d.recv, src, bytes,
		                cudaMemcpyDefault, s), "cudaMemcpyAsync");
	if (sp && rc == CFRT_OK)
		sp->ev[1] = cfrti_tr_mark(ctx, s);
	ipc_ev *d = rc == CFRT_OK ? ev_get(ctx) : NULL;
	if (!d)
		return rc != CFRT_OK ? rc : CFRT_ENOMEM;
	x->ev_id = d->id;
	d->done = (ce_done){d->h, d->id, 0};
	d->wait_ack = 1;
	d->own_wait = 1;
	rc = cfrti_cuda(ctx, cudaEventRecord(d->e, s), "cudaEventRecord");
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Isend(&d->done, (int)sizeof d->done,
		               MPI_BYTE, p, CE_TAG_DONE, ctx->base.comm,
		               &d->req[0]), "MPI_Isend");
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Irecv(&d->ack, 1, MPI_INT32_T, p,
		               CE_TAG_ACK, ctx->base.comm, &d->req[1]),
		               "MPI_Irecv");
	x->issued = 1;
	ctx->ce.fifo_head[p] = x->next_fifo;
	if (!ctx->ce.fifo_head[p])
		ctx->ce.fifo_tail[p] = NULL;
	return rc;
}

/* Issues, peer by peer in order, the receives whose READY has arrived. */
int cfrti_ce_progress(cfrt_ctx *ctx)
{
	int rc = CFRT_OK;
	for (int p = 0; rc == CFRT_OK && p < ctx->base.size; p++)
		while (rc == CFRT_OK && ctx->ce.fifo_head[p]) {
			xfer *x = ctx->ce.fifo_head[p];
			int flag = 0;
			rc = cfrti_mpi(ctx, MPI_Test(&x->mreq[0], &flag,
			               MPI_STATUS_IGNORE), "MPI_Test");
			if (rc != CFRT_OK || !flag)
				break;
			rc = issue(ctx, x);
		}
	for (int i = 0; rc == CFRT_OK && i < ctx->ce.nev; i++)
		rc = ev_test(ctx, ctx->ce.ev[i]);
	return rc;
}

/* Entry of a public call: names it for messages, and moves the copy-engine
 * handshakes that have arrived (a transfer starts as soon as its peer is
 * ready, not only at its wait). */
int cfrti_enter(cfrt_ctx *ctx, const char *api)
{
	ctx->base.api = api;
	if (ctx->base.failed)
		return cfrti_gone(ctx);
	cfrti_tr_call(ctx, api, ctx->dev.cs);
	return ctx->ce.open > 0 ? cfrti_ce_progress(ctx) : CFRT_OK;
}

/* ---- 4: waiting -------------------------------------------------------- */

static int wait_recv(cfrt_ctx *ctx, xfer *x)
{
	int rc = CFRT_OK;
	while (rc == CFRT_OK && !x->issued)
		rc = cfrti_ce_progress(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamWaitEvent(ctx->dev.cs,
		                ctx->ce.ev[x->ev_id]->e, 0), "cudaStreamWaitEvent");
	if (rc == CFRT_OK)
		ctx->ce.ev[x->ev_id]->own_wait = 0;
	return rc;
}

static int wait_send(cfrt_ctx *ctx, xfer *x)
{
	int flag = 0, rc = CFRT_OK;
	cudaEvent_t d;
	double end = cfrti_now() + ctx->base.timeout;
	while (rc == CFRT_OK && !flag) {
		rc = cfrti_mpi(ctx, MPI_Test(&x->mreq[1], &flag,
		               MPI_STATUS_IGNORE), "MPI_Test");
		if (rc == CFRT_OK && !flag)
			rc = cfrti_ce_progress(ctx);
		if (rc == CFRT_OK && !flag && ctx->base.timeout > 0 && cfrti_now() > end) {
			rc = cfrti_err(ctx, CFRT_ETIMEOUT, "waited %g s (CFRT_TIMEOUT) for "
			               "rank %d of the group to copy what this rank sends it",
			               ctx->base.timeout, x->d.peer);
			cfrti_fail_ctx(ctx, rc);
		}
	}
	if (rc == CFRT_OK) /* DONE came, so READY was received */
		rc = cfrti_mpi(ctx, MPI_Wait(&x->mreq[0], MPI_STATUS_IGNORE),
		               "MPI_Wait");
	if (rc == CFRT_OK)
		rc = remote_ev_of(ctx, x->d.peer, x->done_msg.ev_id,
		                  &x->done_msg.ev, &d);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamWaitEvent(ctx->dev.cs, d, 0),
		                "cudaStreamWaitEvent");
	cfrti_span *sp = cfrti_trace_at(ctx, x->span);
	if (sp && rc == CFRT_OK)
		sp->ev[1] = cfrti_tr_mark(ctx, ctx->dev.cs);
	ipc_ev *r = ctx->ce.ev[x->ev_id];
	r->ack = x->done_msg.ev_id;
	if (rc == CFRT_OK)
		rc = cfrti_mpi(ctx, MPI_Isend(&r->ack, 1, MPI_INT32_T, x->d.peer,
		               CE_TAG_ACK, ctx->base.comm, &r->req[0]),
		               "MPI_Isend");
	r->busy = 0;
	return rc;
}

int cfrti_ce_wait(cfrt_ctx *ctx, xfer *x)
{
	ctx->ce.open--;
	return x->d.kind == T_SEND ? wait_send(ctx, x) : wait_recv(ctx, x);
}

/* Until every message of every event has completed (at finalize, after
 * every transfer was waited on: the ACKs still owed come from the peers'
 * waits, which they reach at their finalize at the latest). */
int cfrti_ce_drain(cfrt_ctx *ctx)
{
	int rc = CFRT_OK, idle = 0;
	while (rc == CFRT_OK && !idle) {
		rc = cfrti_ce_progress(ctx);
		idle = 1;
		for (int i = 0; i < ctx->ce.nev; i++)
			idle &= ev_idle(ctx->ce.ev[i]);
	}
	return rc;
}

/* ---- init and fini ----------------------------------------------------- */

/* The tables per peer; streams, events and mappings are made on first
 * use. */
int cfrti_ce_init(cfrt_ctx *ctx)
{
	ce_state *c = &ctx->ce;
	size_t n = (size_t)ctx->base.size;
	c->s = calloc(n, sizeof *c->s);
	c->fifo_head = calloc(n, sizeof *c->fifo_head);
	c->fifo_tail = calloc(n, sizeof *c->fifo_tail);
	c->peer_ev = calloc(n, sizeof *c->peer_ev);
	c->npeer_ev = calloc(n, sizeof *c->npeer_ev);
	if (!c->s || !c->fifo_head || !c->fifo_tail || !c->peer_ev ||
	    !c->npeer_ev)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for peer tables");
	return CFRT_OK;
}

/* Releases this process's events, the peers' events and memory opened
 * here, and the copy streams; after a failed init too. */
void cfrti_ce_fini(cfrt_ctx *ctx)
{
	ce_state *c = &ctx->ce;
	for (int i = 0; i < c->nev; i++) {
		cudaEventDestroy(c->ev[i]->e);
		free(c->ev[i]);
	}
	for (int p = 0; c->peer_ev && c->npeer_ev && p < ctx->base.size; p++) {
		for (int i = 0; i < c->npeer_ev[p]; i++)
			if (c->peer_ev[p][i])
				cudaEventDestroy(c->peer_ev[p][i]);
		free(c->peer_ev[p]);
	}
	for (int i = 0; i < c->nrmem; i++)
		cudaIpcCloseMemHandle(c->rmem[i].base);
	for (int p = 0; c->s && p < ctx->base.size; p++)
		if (c->s[p])
			cudaStreamDestroy(c->s[p]);
	free(c->ev);
	free(c->rmem);
	free(c->s);
	free(c->fifo_head);
	free(c->fifo_tail);
	free(c->peer_ev);
	free(c->npeer_ev);
	memset(c, 0, sizeof *c);
}
