/* progress.c: the table of transfers in flight, and the progress modes that
 * move them while the rank computes (see "CPU PROGRESS" in cfrt.h).
 * invariant: ctx->unwaited counts slots not FREE and ctx->active slots
 * ACTIVE; the table and both counts change only under ctx->mu, and only
 * the application's thread grows the table or frees slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* panel by default: the generated fuse schedules need transfers to move
 * while the rank computes. make bench (mlp, fuse(ring), 4 ranks on 2
 * cores): panel 85.4 ms, none 93.4, thread 93.6; with none each step's
 * transfer moved only inside its wait (20.1 ms outside compute per pass
 * against 3.0 ms with panel). tests/runtime/progress_bench.c (one GEMM and
 * one big transfer) showed none ahead by 1-4% on busy cores, and thread
 * ahead by 8-20% where cores are spare. */
#define DEFAULT_MODE PROG_PANEL

/* Pause of the progress thread between two tests of the table: 20 us hid
 * more than 100 or 500 us in the same benchmark. */
enum { NAP_NS = 20000 };

static const char *const mode_names[] = {"none", "panel", "thread"};

const char *cfrt_progress_name(const cfrt_ctx *ctx)
{
	return mode_names[ctx->mode];
}

static int parse_mode(cfrt_ctx *ctx, int *mode)
{
	return cfrti_env_choice(ctx, "CFRT_PROGRESS", mode_names, 3,
	                        DEFAULT_MODE, mode);
}

/* Tests every ACTIVE slot once. Requires mu held. A test that fails marks
 * the slot DONE with its error, for the wait to report. */
static void test_active(cfrt_ctx *ctx)
{
	for (int i = 0; i < ctx->nx && ctx->active > 0; i++) {
		xfer *x = &ctx->x[i];
		int flag = 0, rc;
		if (x->state != X_ACTIVE)
			continue;
		rc = MPI_Test(&x->r, &flag, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			x->mpi_err = rc;
		if (flag || rc != MPI_SUCCESS) {
			x->state = X_DONE;
			ctx->active--;
		}
	}
}

static void *progress_main(void *arg)
{
	cfrt_ctx *ctx = arg;
	struct timespec nap = {0, NAP_NS};
	pthread_mutex_lock(&ctx->mu);
	while (!ctx->stop) {
		if (ctx->active == 0) {
			pthread_cond_wait(&ctx->cv, &ctx->mu);
			continue;
		}
		test_active(ctx);
		pthread_mutex_unlock(&ctx->mu);
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&ctx->mu);
	}
	pthread_mutex_unlock(&ctx->mu);
	return NULL;
}

int cfrti_progress_start(cfrt_ctx *ctx)
{
	int mode, provided = MPI_THREAD_SINGLE;
	int rc = parse_mode(ctx, &mode);
	if (rc != CFRT_OK)
		return rc;
	if (mode == PROG_THREAD) {
		MPI_Query_thread(&provided);
		if (provided != MPI_THREAD_MULTIPLE) {
			if (ctx->base.job_rank == 0)
				fprintf(stderr, "cfrt: CFRT_PROGRESS=thread needs "
				        "MPI_THREAD_MULTIPLE from MPI_Init_thread; "
				        "using panel\n");
			mode = PROG_PANEL;
		}
	}
	ctx->mode = mode;
	if (mode != PROG_THREAD)
		return CFRT_OK;
	if (pthread_create(&ctx->thread, NULL, progress_main, ctx) != 0)
		return cfrti_err(ctx, CFRT_ENOMEM, "cannot start the progress "
		                 "thread");
	ctx->thread_on = 1;
	return CFRT_OK;
}

void cfrti_progress_stop(cfrt_ctx *ctx)
{
	if (!ctx->thread_on)
		return;
	pthread_mutex_lock(&ctx->mu);
	ctx->stop = 1;
	pthread_cond_signal(&ctx->cv);
	pthread_mutex_unlock(&ctx->mu);
	pthread_join(ctx->thread, NULL);
	ctx->thread_on = 0;
}

/* Called by long compute between pieces. Only the panel mode tests here:
 * the thread mode has its thread, the none mode waits for cfrt_wait. */
void cfrti_progress_poll(cfrt_ctx *ctx)
{
	if (ctx->mode != PROG_PANEL || ctx->active == 0)
		return;
	pthread_mutex_lock(&ctx->mu);
	test_active(ctx);
	pthread_mutex_unlock(&ctx->mu);
}

/* Makes sure a FREE slot exists, so that cfrti_xfer_add, which runs after
 * the transfer has started, cannot fail. */
int cfrti_xfer_reserve(cfrt_ctx *ctx)
{
	int rc = CFRT_OK;
	pthread_mutex_lock(&ctx->mu);
	if (ctx->unwaited == ctx->nx) {
		int cap = ctx->nx ? 2 * ctx->nx : 16;
		xfer *x = realloc(ctx->x, (size_t)cap * sizeof *x);
		if (x) {
			memset(x + ctx->nx, 0, (size_t)(cap - ctx->nx) * sizeof *x);
			ctx->x = x;
			ctx->nx = cap;
		} else {
			rc = cfrti_err(ctx, CFRT_ENOMEM, "no memory for the "
			               "transfer table");
		}
	}
	pthread_mutex_unlock(&ctx->mu);
	return rc;
}

void cfrti_xfer_add(cfrt_ctx *ctx, int span, MPI_Request r, const xdesc *d,
                    cfrt_req *req)
{
	pthread_mutex_lock(&ctx->mu);
	int i = 0;
	while (ctx->x[i].state != X_FREE)
		i++;
	xfer *x = &ctx->x[i];
	x->r = r;
	x->state = X_ACTIVE;
	x->mpi_err = MPI_SUCCESS;
	x->span = span;
	x->kind = d->kind;
	x->peer = d->peer;
	x->grp = ctx->base.cur;
	ctx->unwaited++;
	ctx->active++;
	req->slot = i + 1;
	req->gen = x->gen;
	pthread_cond_signal(&ctx->cv);
	pthread_mutex_unlock(&ctx->mu);
}

/* The watchdog ended the wait on x: the message names what it waits for
 * (the peer, or the collective's group); the context fails. */
static int stuck(cfrt_ctx *ctx, const xfer *x)
{
	static const char *const coll[] = {"", "", "an all_gather", "a reduce_scatter",
	                                   "an all_reduce", "an all_to_all"};
	const cfrti_base *b = &ctx->base;
	const struct cfrti_group *g = &b->grp[x->grp];
	char what[160];
	if (x->kind == T_SEND || x->kind == T_RECV)
		snprintf(what, sizeof what, "%s rank %d of group %d (job rank %d)",
		         x->kind == T_SEND ? "a send to" : "a receive from", x->peer, x->grp,
		         b->job_rank + (x->peer - g->rank) * g->stride);
	else
		snprintf(what, sizeof what, "%s over the %d ranks of group %d: one of "
		         "them has not joined it", coll[x->kind], g->size, x->grp);
	int rc = cfrti_err(ctx, CFRT_ETIMEOUT, "waited %g s (CFRT_TIMEOUT) for %s",
	                   b->timeout, what);
	cfrti_fail_ctx(ctx, rc);
	return rc;
}

/* Frees slot x. Requires mu held and x not FREE. */
static void release(cfrt_ctx *ctx, xfer *x)
{
	cfrti_span *sp = cfrti_trace_at(ctx, x->span);
	if (sp)
		sp->t1 = cfrti_trace_ns(ctx, cfrti_now());
	x->state = X_FREE;
	x->gen++;
	ctx->unwaited--;
}

/* Completes slot x and frees it. Requires mu held and x not FREE. Returns
 * a cfrt status; *mpirc: MPI's error code. A wait that another rank's
 * notice or the watchdog ended leaves the slot ACTIVE. */
static int finish(cfrt_ctx *ctx, xfer *x, int *mpirc)
{
	*mpirc = x->mpi_err;
	if (x->state == X_ACTIVE) {
		int rc = cfrti_block(ctx, &x->r, mpirc);
		if (rc == CFRT_ETIMEOUT)
			return stuck(ctx, x);
		if (rc != CFRT_OK)
			return rc;
		ctx->active--;
	}
	release(ctx, x);
	return CFRT_OK;
}

int cfrti_xfer_wait(cfrt_ctx *ctx, cfrt_req *req)
{
	int s = req->slot, rc = MPI_SUCCESS, st = CFRT_OK;
	if (s == 0)
		return CFRT_OK;
	if (s < 0 || s > ctx->nx)
		return cfrti_err(ctx, CFRT_EINVAL, "request handle %d was not "
		                 "made by this context", s);
	pthread_mutex_lock(&ctx->mu);
	xfer *x = &ctx->x[s - 1];
	if (x->gen == req->gen && x->state != X_FREE)
		st = finish(ctx, x, &rc);
	pthread_mutex_unlock(&ctx->mu);
	if (st != CFRT_OK)
		return st;
	req->slot = 0;
	req->gen = 0;
	return cfrti_mpi(ctx, rc, "MPI_Wait");
}

/* A failed context's transfers, which no peer may ever complete. A
 * receive is cancelled (one that matched a message already completes).
 * A send stays: Open MPI cannot cancel one, and a send left pending holds
 * its communicator's id on this rank alone and, worse, reaches the next
 * communicator the peer makes with that id out of sequence, which then
 * never delivers (the next cfrt_init hung in MPI_Comm_dup): cfrti_settle
 * has the peers take them. A collective can be neither cancelled nor
 * freed (MPI forbids both): its handle is dropped. Requires mu held. */
static void abandon(cfrt_ctx *ctx, xfer *x)
{
	if (x->state == X_ACTIVE && x->kind == T_SEND)
		return;
	if (x->state == X_ACTIVE && x->kind == T_RECV) {
		int flag = 0;
		MPI_Cancel(&x->r);
		for (double end = cfrti_now() + 10.0; !flag && cfrti_now() < end;)
			MPI_Test(&x->r, &flag, MPI_STATUS_IGNORE);
		if (!flag)
			MPI_Request_free(&x->r);
	}
	if (x->state == X_ACTIVE)
		ctx->active--;
	release(ctx, x);
}

/* The job rank of rank `peer` of group g, and the rank in group g of job
 * rank j (which shares every other coordinate with this rank). */
static int job_of(const cfrti_base *b, int g, int peer)
{
	return b->job_rank + (peer - b->grp[g].rank) * b->grp[g].stride;
}

static int grank_of(const cfrti_base *b, int g, int j)
{
	return j / b->grp[g].stride % b->grp[g].size;
}

/* Receives n messages from src on comm into scratch, whatever they hold. */
static int take(MPI_Comm comm, int src, int n)
{
	for (int k = 0; k < n; k++) {
		MPI_Status st;
		int bytes = 0, rc = MPI_Probe(src, MPI_ANY_TAG, comm, &st);
		if (rc == MPI_SUCCESS)
			rc = MPI_Get_count(&st, MPI_BYTE, &bytes);
		char *tmp = malloc(bytes > 0 ? (size_t)bytes : 1);
		if (rc == MPI_SUCCESS)
			rc = MPI_Recv(tmp, bytes, MPI_BYTE, src, st.MPI_TAG, comm,
			              MPI_STATUS_IGNORE);
		free(tmp);
		if (rc != MPI_SUCCESS)
			return rc;
	}
	return MPI_SUCCESS;
}

/* Collective over the job at cfrt_finalize, on the notice communicator:
 * every rank's sends that no receive took (a failed context's, and the
 * failure notices) are counted to their receivers, who take them, so
 * that no message of this context is left in flight when its
 * communicators are freed. A context that did not fail has none: one
 * barrier and one all-to-all of counts. */
int cfrti_settle(cfrt_ctx *ctx)
{
	cfrti_base *b = &ctx->base;
	int n = b->job_size, w = CFRT_MAX_GROUPS + 1, mrc = MPI_SUCCESS, rc = CFRT_OK;
	int *out = calloc((size_t)(2 * n * w), sizeof *out), *in = out + n * w;
	MPI_Request r;
	if (!out)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory to settle the transfers");
	if (b->alarm_rq != MPI_REQUEST_NULL) {
		MPI_Cancel(&b->alarm_rq);
		MPI_Wait(&b->alarm_rq, MPI_STATUS_IGNORE); /* a notice, or none */
	}
	int got_from = b->alarm_in && b->alarm_in->msg[0] ? b->alarm_in->rank : -1;
	/* every rank has cancelled its receives: a send still pending after
	 * this barrier was taken by no receive. The watchdog allows twice
	 * its time here: a rank may spend it in a wait before it fails and
	 * comes (one that skipped a call is here while its peers wait). */
	mrc = MPI_Ibarrier(b->alarm, &r);
	if (mrc == MPI_SUCCESS)
		rc = cfrti_block_within(ctx, &r, &mrc, 2 * b->timeout);
	if (rc == CFRT_ETIMEOUT)
		rc = cfrti_err(ctx, rc, "waited %g s (twice CFRT_TIMEOUT) for the other %d "
		               "ranks of the job to finalize the context", 2 * b->timeout, n - 1);
	pthread_mutex_lock(&ctx->mu);
	for (int i = 0; i < ctx->nx; i++) {
		xfer *x = &ctx->x[i];
		int flag = 0;
		if (x->state == X_ACTIVE && x->kind == T_SEND)
			MPI_Test(&x->r, &flag, MPI_STATUS_IGNORE);
		if (x->state == X_ACTIVE && x->kind == T_SEND && !flag)
			out[job_of(b, x->grp, x->peer) * w + x->grp]++;
		else if (x->state == X_ACTIVE && x->kind == T_SEND)
			x->state = X_DONE;
	}
	pthread_mutex_unlock(&ctx->mu);
	for (int p = 0; b->alarm_sends && p < n; p++)
		out[p * w + CFRT_MAX_GROUPS] = p != b->job_rank;
	if (rc == CFRT_OK && mrc == MPI_SUCCESS)
		mrc = MPI_Ialltoall(out, w, MPI_INT, in, w, MPI_INT, b->alarm, &r);
	if (rc == CFRT_OK && mrc == MPI_SUCCESS)
		rc = cfrti_block(ctx, &r, &mrc);
	for (int s = 0; rc == CFRT_OK && mrc == MPI_SUCCESS && s < n; s++) {
		for (int g = 0; mrc == MPI_SUCCESS && g < b->ngroups; g++)
			mrc = take(b->grp[g].comm, grank_of(b, g, s), in[s * w + g]);
		if (mrc == MPI_SUCCESS)
			mrc = take(b->alarm, s, in[s * w + CFRT_MAX_GROUPS] - (s == got_from));
	}
	free(out);
	/* now every pending send has been taken: complete them */
	pthread_mutex_lock(&ctx->mu);
	for (int i = 0; i < ctx->nx; i++)
		if (ctx->x[i].state != X_FREE && ctx->x[i].kind == T_SEND) {
			if (ctx->x[i].state == X_ACTIVE && rc == CFRT_OK && mrc == MPI_SUCCESS)
				MPI_Wait(&ctx->x[i].r, MPI_STATUS_IGNORE);
			else if (ctx->x[i].state == X_ACTIVE)
				MPI_Request_free(&ctx->x[i].r);
			ctx->active -= ctx->x[i].state == X_ACTIVE;
			release(ctx, &ctx->x[i]);
		}
	pthread_mutex_unlock(&ctx->mu);
	if (b->alarm_sends && rc == CFRT_OK && mrc == MPI_SUCCESS) {
		MPI_Waitall(n, b->alarm_sends, MPI_STATUSES_IGNORE);
		free(b->alarm_sends);
		free(b->alarm_out);
		b->alarm_sends = NULL;
		b->alarm_out = NULL;
	}
	return rc != CFRT_OK ? rc : cfrti_mpi(ctx, mrc, "settling the transfers");
}

int cfrti_xfer_wait_all_slots(cfrt_ctx *ctx)
{
	int rc = MPI_SUCCESS, st = CFRT_OK;
	pthread_mutex_lock(&ctx->mu);
	for (int i = 0; i < ctx->nx; i++) {
		if (ctx->x[i].state == X_FREE)
			continue;
		if (ctx->base.failed) {
			abandon(ctx, &ctx->x[i]);
			continue;
		}
		int r;
		st = finish(ctx, &ctx->x[i], &r);
		if (st != CFRT_OK) /* failed now: abandoned with the rest */
			i--;
		else if (rc == MPI_SUCCESS)
			rc = r;
	}
	pthread_mutex_unlock(&ctx->mu);
	return st != CFRT_OK ? st : cfrti_mpi(ctx, rc, "MPI_Wait");
}
