/* xfer.c: the transfer table, groups, waits, NCCL point-to-point and
 * collectives (the cfrti_xfer_start and cfrti_xfer_wait of
 * runtime/common/transfer.c, which holds the public transfer calls).
 * ensures: after cfrti_xfer_init, ctx->xt.nccl[g] spans the ranks of
 * group g of the context's grid (split from one communicator over the
 * job, ncclCommSplit; one group: the job's), a transfer goes over the
 * current group's (cfrt_use_group), and ctx->xt.s is the high-priority
 * stream of them all; a transfer starts on its
 * stream after an event of the compute stream recorded when it is
 * issued, so after every compute call before it; the transfers of one
 * cfrt group are one NCCL group (sends and receives of a step issued
 * together, as NCCL needs to avoid deadlock); cfrt_wait makes the compute
 * stream wait on the transfer's completion event and never blocks the
 * host (copy-engine transfers: see ce.c). */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static const char *const api_of[] = {
	"ncclSend", "ncclRecv", "ncclAllGather", "ncclReduceScatter",
	"ncclAllReduce", "ncclSend/ncclRecv (all_to_all)"
};

static ncclDataType_t nccl_type(cfrt_dtype t)
{
	switch (t) {
	case CFRT_F64: return ncclFloat64;
	case CFRT_BF16: return ncclBfloat16;
	case CFRT_F16: return ncclFloat16;
	default: return ncclFloat32;
	}
}

/* ---- the module: setting, NCCL, init and fini --------------------------- */

/* CFRT_TRANSFER: nccl (default), ce, or none (benchmarks only). Touches
 * no device: read before the modules' init. */
int cfrti_xfer_mode(cfrt_ctx *ctx)
{
	static const char *const names[] = {"nccl", "ce", "none"}; /* xmode */
	return cfrti_env_choice(ctx, "CFRT_TRANSFER", names, 3, XM_NCCL,
	                        &ctx->xt.mode);
}

/* The communicator of the current group. */
static ncclComm_t nccl_comm(const cfrt_ctx *ctx)
{
	return ctx->xt.nccl[ctx->base.cur];
}

/* An NCCL result as a status (as cfrti_cuda): the message adds NCCL's
 * last error. */
static int nccl_status(cfrt_ctx *ctx, ncclResult_t e, const char *call)
{
	if (e == ncclSuccess)
		return CFRT_OK;
	const char *last = nccl_comm(ctx) ? ncclGetLastError(nccl_comm(ctx)) : "";
	return cfrti_err(ctx, CFRT_ECOMM, "%s failed: %s%s%s", call,
	                 ncclGetErrorString(e), last && *last ? ": " : "",
	                 last ? last : "");
}

/* NCCL over the job's ranks (*job): rank 0's unique id, broadcast by MPI
 * (without MPI the job is one rank). */
static int nccl_job(cfrt_ctx *ctx, ncclComm_t *job)
{
	cfrti_base *b = &ctx->base;
	ncclUniqueId id;
	int rc = CFRT_OK;
	if (b->job_rank == 0)
		rc = nccl_status(ctx, ncclGetUniqueId(&id), "ncclGetUniqueId");
	if (b->job == MPI_COMM_NULL) /* no MPI: this process alone (base.c) */
		return rc != CFRT_OK ? rc : nccl_status(ctx, ncclCommInitRank(job, 1, id, 0),
		                                        "ncclCommInitRank");
	int ok = rc == CFRT_OK, all = 0;
	int mrc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, b->job);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpi(ctx, mrc, "MPI_Allreduce");
	if (!all)
		return rc != CFRT_OK ? rc : cfrti_err(ctx, CFRT_ECOMM,
		                                      "rank 0 has no NCCL id");
	mrc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, b->job);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpi(ctx, mrc, "MPI_Bcast");
	return nccl_status(ctx, ncclCommInitRank(job, b->job_size, id, b->job_rank),
	                   "ncclCommInitRank");
}

/* The application's communicator (CFRT_OPT_NCCL_COMM) as the job's,
 * when it spans the job's ranks in their order, on the context's device. */
static int nccl_app(cfrt_ctx *ctx, ncclComm_t *job)
{
	cfrti_base *b = &ctx->base;
	ncclComm_t c = (ncclComm_t)b->opts.nccl_comm;
	int n = -1, r = -1, dev = -1;
	if (!c || ncclCommCount(c, &n) != ncclSuccess ||
	    ncclCommUserRank(c, &r) != ncclSuccess || ncclCommCuDevice(c, &dev) != ncclSuccess)
		return cfrti_err(ctx, CFRT_EINVAL, "the application's NCCL "
		                 "communicator is not one NCCL knows");
	if (n != b->job_size || r != b->job_rank)
		return cfrti_err(ctx, CFRT_EINVAL, "the application's NCCL "
		                 "communicator has this process as rank %d of %d; "
		                 "the context's communicator as rank %d of %d",
		                 r, n, b->job_rank, b->job_size);
	if (dev != b->device)
		return cfrti_err(ctx, CFRT_EINVAL, "the application's NCCL "
		                 "communicator is on device %d, the context on "
		                 "device %d", dev, b->device);
	*job = c;
	return CFRT_OK;
}

/* A communicator per group of the grid: the job's, split as base.c splits
 * the MPI one (group g's ranks share every coordinate but their rank in
 * g, which orders them); one group: the job's itself. The job's is the
 * application's (CFRT_OPT_NCCL_COMM), else made here. */
static int nccl_setup(cfrt_ctx *ctx)
{
	cfrti_base *b = &ctx->base;
	ncclComm_t job = NULL;
	int app = (b->opts.flags & CFRT_OPT_NCCL_COMM) != 0;
	int rc = app ? nccl_app(ctx, &job) : nccl_job(ctx, &job);
	if (rc != CFRT_OK || b->ngroups == 1) {
		ctx->xt.nccl[0] = job;
		ctx->xt.app_nccl = app;
		return rc;
	}
	for (int g = 0; rc == CFRT_OK && g < b->ngroups; g++) {
		int c = b->grp[g].rank;
		rc = nccl_status(ctx, ncclCommSplit(job, b->job_rank - c * b->grp[g].stride, c,
		                                    &ctx->xt.nccl[g], NULL), "ncclCommSplit");
	}
	if (!app)
		ncclCommDestroy(job);
	return rc;
}

/* The NCCL stream, the fence and the communicator (collective over the
 * context's ranks). */
int cfrti_xfer_init(cfrt_ctx *ctx)
{
	int rc = cfrti_dev_stream(ctx, 1, &ctx->xt.s);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaEventCreateWithFlags(&ctx->xt.fence,
		                cudaEventDisableTiming), "cudaEventCreate");
	if (rc == CFRT_OK)
		rc = nccl_setup(ctx);
	return rc;
}

/* Frees the slots and NCCL; after a failed init too. */
void cfrti_xfer_fini(cfrt_ctx *ctx)
{
	xfer_table *t = &ctx->xt;
	for (int i = 0; i < t->nx; i++) {
		cudaEventDestroy(t->x[i]->done);
		cudaEventDestroy(t->x[i]->ready);
		free(t->x[i]);
	}
	free(t->x);
	free(t->group);
	for (int g = t->app_nccl; g < CFRT_MAX_GROUPS; g++)
		if (t->nccl[g])
			ncclCommDestroy(t->nccl[g]);
	if (t->fence)
		cudaEventDestroy(t->fence);
	if (t->s)
		cudaStreamDestroy(t->s);
	memset(t, 0, sizeof *t);
}

/* ---- slots -------------------------------------------------------------- */

static int slot_new(cfrt_ctx *ctx)
{
	xfer **n = realloc(ctx->xt.x, (size_t)(ctx->xt.nx + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for a transfer slot");
	ctx->xt.x = n;
	xfer *x = calloc(1, sizeof *x);
	if (!x)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for a transfer slot");
	x->id = ctx->xt.nx;
	int rc = cfrti_cuda(ctx, cudaEventCreateWithFlags(&x->done,
	                    cudaEventDisableTiming), "cudaEventCreate");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaEventCreateWithFlags(&x->ready,
		                cudaEventDisableTiming), "cudaEventCreate");
	if (rc != CFRT_OK) {
		if (x->done)
			cudaEventDestroy(x->done);
		free(x);
		return rc;
	}
	ctx->xt.x[ctx->xt.nx++] = x;
	return CFRT_OK;
}

/* A free slot (its state is set by whoever starts it); NULL on failure
 * (message in ctx). */
static xfer *slot_get(cfrt_ctx *ctx)
{
	for (int i = 0; i < ctx->xt.nx; i++)
		if (ctx->xt.x[i]->state == X_FREE)
			return ctx->xt.x[i];
	return slot_new(ctx) == CFRT_OK ? ctx->xt.x[ctx->xt.nx - 1] : NULL;
}

static void slot_release(xfer *x)
{
	x->state = X_FREE;
	x->gen++;
}

/* ---- NCCL --------------------------------------------------------------- */

static ncclResult_t nccl_call(cfrt_ctx *ctx, const xdesc *d)
{
	ncclDataType_t dt = nccl_type(d->t);
	size_t n = (size_t)d->count, es = cfrt_dtype_size(d->t);
	ncclComm_t c = nccl_comm(ctx);
	cudaStream_t s = ctx->xt.s;
	ncclResult_t r = ncclSuccess;
	switch (d->kind) {
	case T_SEND: return ncclSend(d->send, n, dt, d->peer, c, s);
	case T_RECV: return ncclRecv(d->recv, n, dt, d->peer, c, s);
	case T_AG: return ncclAllGather(d->send, d->recv, n, dt, c, s);
	case T_RS: return ncclReduceScatter(d->send, d->recv, n, dt, ncclSum, c, s);
	case T_AR: return ncclAllReduce(d->send, d->recv, n, dt, ncclSum, c, s);
	case T_A2A:
		for (int j = 0; r == ncclSuccess && j < ctx->base.size; j++) {
			r = ncclSend((const char *)d->send + (size_t)j * n * es, n, dt,
			             j, c, s);
			if (r == ncclSuccess)
				r = ncclRecv((char *)d->recv + (size_t)j * n * es, n, dt,
				             j, c, s);
		}
		return r;
	}
	return ncclInvalidArgument;
}

/* What goes on the transfer stream next runs after the compute so far. */
static int after_compute(cfrt_ctx *ctx)
{
	int rc = cfrti_cuda(ctx, cudaEventRecord(ctx->xt.fence, ctx->dev.cs),
	                    "cudaEventRecord");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamWaitEvent(ctx->xt.s, ctx->xt.fence, 0),
		                "cudaStreamWaitEvent");
	return rc;
}

/* Issues slots[0..n) as one NCCL group on xs, after the compute so far. */
static int nccl_issue(cfrt_ctx *ctx, xfer *const *slots, int n)
{
	int rc = after_compute(ctx);
	if (rc == CFRT_OK)
		rc = nccl_status(ctx, ncclGroupStart(), "ncclGroupStart");
	if (rc != CFRT_OK)
		return rc;
	int e0 = ctx->base.trace ? cfrti_tr_mark(ctx, ctx->xt.s) : -1;
	for (int i = 0; rc == CFRT_OK && i < n; i++)
		rc = nccl_status(ctx, nccl_call(ctx, &slots[i]->d),
		                api_of[slots[i]->d.kind]);
	int erc = nccl_status(ctx, ncclGroupEnd(), "ncclGroupEnd");
	rc = rc != CFRT_OK ? rc : erc;
	int e1 = e0 >= 0 && rc == CFRT_OK ? cfrti_tr_mark(ctx, ctx->xt.s) : -1;
	for (int i = 0; e1 >= 0 && i < n; i++) { /* the group runs as one */
		cfrti_span *sp = cfrti_trace_at(ctx, slots[i]->span);
		if (sp)
			sp->ev[0] = e0, sp->ev[1] = e1;
	}
	for (int i = 0; rc == CFRT_OK && i < n; i++) {
		rc = cfrti_cuda(ctx, cudaEventRecord(slots[i]->done, ctx->xt.s),
		                "cudaEventRecord");
		slots[i]->state = X_ACTIVE;
	}
	return rc;
}

/* ---- CFRT_TRANSFER=none ------------------------------------------------- */

/* n bytes from s to d on the transfer stream, unless they are one place. */
static cudaError_t none_copy(cfrt_ctx *ctx, void *d, const void *s, size_t n)
{
	return d == s || n == 0 ? cudaSuccess :
	       cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, ctx->xt.s);
}

/* Nothing moves, but the compute must see data like the real data, as
 * bench/nocomm.c gives it on CPUs: with the received blocks left zero,
 * cuBLAS ran case b's first GEMM of bench-gpu in 4.85 ms against 6.375
 * on random data. A receive takes a copy of the last buffer this rank
 * sent when that has its size (a ring step sends and receives one slice),
 * zeroes otherwise; a collective fills its result from its own send
 * buffer. The copies are the receiver's share of a real transfer's memory
 * traffic; they go on the transfer stream after the compute so far, as a
 * transfer would, and nothing waits for them: the compute stream runs the
 * compute alone (with the copies on it, bench-gpu's fused rows of cases
 * a and c ran 0.05-0.46 ms longer, of 6-8, in the lease before). A
 * compute that reads a block before its copy lands reads the block's
 * older values: the time is what counts. */
static int none_fill(cfrt_ctx *ctx, const xdesc *d)
{
	size_t blk = (size_t)d->count * cfrt_dtype_size(d->t);
	int p = ctx->base.size;
	const char *s = d->send;
	char *r = d->recv;
	if (d->kind == T_SEND) {
		ctx->xt.sent = d->send;
		ctx->xt.sent_bytes = blk;
		return CFRT_OK;
	}
	if (blk == 0)
		return CFRT_OK;
	int rc = after_compute(ctx);
	if (rc != CFRT_OK)
		return rc;
	cudaError_t e = cudaSuccess;
	switch (d->kind) {
	case T_SEND:
		break;
	case T_RECV:
		e = ctx->xt.sent && blk == ctx->xt.sent_bytes ?
		    none_copy(ctx, r, ctx->xt.sent, blk) :
		    cudaMemsetAsync(r, 0, blk, ctx->xt.s);
		break;
	case T_AG: /* send blk, receive p blocks */
		for (int q = 0; q < p && e == cudaSuccess; q++)
			e = none_copy(ctx, r + (size_t)q * blk, s, blk);
		break;
	case T_RS: /* send p blocks, receive this rank's */
		e = none_copy(ctx, r, s + (size_t)ctx->base.rank * blk, blk);
		break;
	case T_AR:
		e = none_copy(ctx, r, s, blk);
		break;
	case T_A2A:
		e = none_copy(ctx, r, s, (size_t)p * blk);
		break;
	}
	return cfrti_cuda(ctx, e, "the copy of CFRT_TRANSFER=none");
}

/* ---- starting ----------------------------------------------------------- */

/* Queues x in the open group. */
static int group_add(cfrt_ctx *ctx, xfer *x)
{
	int *n = realloc(ctx->xt.group, (size_t)(ctx->xt.ngroup + 1) * sizeof *n);
	if (!n)
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the group");
	ctx->xt.group = n;
	ctx->xt.group[ctx->xt.ngroup++] = x->id;
	x->state = X_QUEUED;
	return CFRT_OK;
}

int cfrti_xfer_start(cfrt_ctx *ctx, const char *api, const xdesc *d,
                     cfrt_req *req)
{
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_xfer(ctx, d, req, 0);
	if (rc == CFRT_OK && ctx->xt.mode == XM_NONE) {
		*req = (cfrt_req){0, 0}; /* nothing moves: the null request */
		return none_fill(ctx, d);
	}
	xfer *x = rc == CFRT_OK ? slot_get(ctx) : NULL;
	if (!x)
		return rc != CFRT_OK ? rc : CFRT_ENOMEM;
	x->d = *d;
	x->ce = ctx->xt.mode == XM_CE && d->kind <= T_RECV;
	x->span = cfrti_trace_xfer(ctx, d, TRK_XFER);
	cfrti_span *sp = cfrti_trace_at(ctx, x->span);
	if (sp && x->ce && d->kind == T_RECV) /* the copy engine pulling from peer */
		sp->track = TRK_COPY + sp->peer;
	if (x->ce)
		rc = cfrti_ce_start(ctx, x);
	else if (ctx->base.in_group)
		rc = group_add(ctx, x);
	else
		rc = nccl_issue(ctx, &x, 1);
	if (rc != CFRT_OK) {
		slot_release(x);
		return rc;
	}
	if (x->ce) /* started at its call: copy engines need no group */
		x->state = X_ACTIVE;
	*req = (cfrt_req){x->id + 1, x->gen};
	return CFRT_OK;
}

/* ---- waiting ------------------------------------------------------------ */

static int wait_slot(cfrt_ctx *ctx, xfer *x)
{
	int rc = x->ce ? cfrti_ce_wait(ctx, x) :
	         cfrti_cuda(ctx, cudaStreamWaitEvent(ctx->dev.cs, x->done, 0),
	                    "cudaStreamWaitEvent");
	slot_release(x);
	return rc;
}

int cfrti_xfer_wait(cfrt_ctx *ctx, cfrt_req *req)
{
	int i = req->slot - 1;
	uint32_t gen = req->gen;
	if (i < 0)
		return CFRT_OK;
	if (i >= ctx->xt.nx)
		return cfrti_err(ctx, CFRT_EINVAL, "request %d does not exist",
		                 req->slot);
	xfer *x = ctx->xt.x[i];
	*req = (cfrt_req){0, 0};
	if (x->state == X_FREE || x->gen != gen)
		return CFRT_OK; /* completed by an earlier wait or sync */
	if (x->state == X_QUEUED)
		return cfrti_err(ctx, CFRT_EINVAL, "wait on a transfer of an open "
		                 "group");
	return wait_slot(ctx, x);
}

int cfrti_xfer_wait_all(cfrt_ctx *ctx)
{
	int rc = CFRT_OK;
	for (int i = 0; rc == CFRT_OK && i < ctx->xt.nx; i++) {
		xfer *x = ctx->xt.x[i];
		if (x->state == X_QUEUED) /* a group never closed: not started */
			slot_release(x);
		if (x->state == X_ACTIVE)
			rc = wait_slot(ctx, x);
	}
	ctx->xt.ngroup = 0;
	return rc;
}

int cfrt_sync(cfrt_ctx *ctx)
{
	int rc = cfrti_enter(ctx, "cfrt_sync");
	if (rc == CFRT_OK)
		rc = cfrti_not_in_group(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_xfer_wait_all(ctx);
	if (rc == CFRT_OK && ctx->xt.mode == XM_NONE) /* none_fill's copies */
		rc = cfrti_cuda(ctx, cudaStreamSynchronize(ctx->xt.s),
		                "cudaStreamSynchronize");
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaStreamSynchronize(ctx->dev.cs),
		                "cudaStreamSynchronize");
	return rc;
}

int cfrt_group_begin(cfrt_ctx *ctx)
{
	int rc = cfrti_enter(ctx, "cfrt_group_begin");
	if (rc == CFRT_OK)
		rc = cfrti_set_group(ctx, 1);
	if (rc == CFRT_OK)
		ctx->xt.ngroup = 0;
	return rc;
}

/* Issues the group's NCCL transfers together (copy-engine ones started at
 * their calls: they need no grouping). */
int cfrt_group_end(cfrt_ctx *ctx)
{
	xfer *stack[16] = {NULL}, **slots = stack;
	int rc = cfrti_enter(ctx, "cfrt_group_end");
	if (rc == CFRT_OK)
		rc = cfrti_set_group(ctx, 0);
	if (rc != CFRT_OK)
		return rc;
	if (ctx->xt.ngroup == 0)
		return CFRT_OK;
	if (ctx->xt.ngroup > 16 && !(slots = malloc((size_t)ctx->xt.ngroup *
	                                         sizeof *slots)))
		return cfrti_err(ctx, CFRT_ENOMEM, "no memory for the group");
	for (int i = 0; i < ctx->xt.ngroup; i++)
		slots[i] = ctx->xt.x[ctx->xt.group[i]];
	rc = nccl_issue(ctx, slots, ctx->xt.ngroup);
	ctx->xt.ngroup = 0;
	if (slots != stack)
		free(slots);
	return rc;
}
