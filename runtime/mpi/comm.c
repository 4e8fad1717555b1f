/* comm.c: point-to-point transfers, collectives, waits and groups.
 * requires: the context's communicator has MPI_ERRORS_RETURN.
 * ensures: every transfer that started holds a slot of the transfer table
 * until its wait; blocking collectives are a start and a wait, so they are
 * traced and progressed like the others. */
#include <limits.h>
#include <stdio.h>

#include "backend.h"

typedef enum xkind { T_SEND, T_RECV, T_AG, T_RS, T_AR, T_A2A } xkind;

/* One transfer to start. count: elements sent or received (p2p), per rank
 * (all_gather, reduce_scatter, all_to_all), in all (all_reduce). */
typedef struct xdesc {
	xkind kind;
	const void *send;
	void *recv;
	int64_t count;
	cfrt_dtype t;
	int peer, tag;
} xdesc;

static const char *const mpi_call[] = {
	"MPI_Isend", "MPI_Irecv", "MPI_Iallgather", "MPI_Ireduce_scatter_block",
	"MPI_Iallreduce", "MPI_Ialltoall"
};

static const char *const coll_name[] = {
	"", "", "all_gather", "reduce_scatter", "all_reduce", "all_to_all"
};

/* Elements in the send and the receive buffer of d. */
static void buffer_counts(const cfrt_ctx *ctx, const xdesc *d, int64_t *ns,
                          int64_t *nr)
{
	int64_t many = d->count * ctx->base.size;
	*ns = d->kind == T_RS || d->kind == T_A2A ? many : d->count;
	*nr = d->kind == T_AG || d->kind == T_A2A ? many : d->count;
	if (d->kind == T_SEND)
		*nr = 0;
	if (d->kind == T_RECV)
		*ns = 0;
}

static int check_desc(cfrt_ctx *ctx, const xdesc *d)
{
	int64_t ns, nr;
	int rc = cfrti_check_dtype(ctx, d->t);
	if (rc != CFRT_OK)
		return rc;
	if (d->count < 0 || d->count > INT_MAX)
		return cfrti_err(ctx, CFRT_EINVAL, "count %lld is outside "
		                 "0..INT_MAX", (long long)d->count);
	buffer_counts(ctx, d, &ns, &nr);
	if ((ns > 0 && !d->send) || (nr > 0 && !d->recv))
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %lld "
		                 "elements", (long long)(ns > 0 && !d->send ? ns : nr));
	if (d->kind > T_RECV)
		return CFRT_OK;
	if (d->peer < 0 || d->peer >= ctx->base.size)
		return cfrti_err(ctx, CFRT_EINVAL, "peer %d is not a rank of the "
		                 "%d-rank group", d->peer, ctx->base.size);
	if (d->tag < 0 || d->tag > 32767)
		return cfrti_err(ctx, CFRT_EINVAL, "tag %d is outside 0..32767",
		                 d->tag);
	return CFRT_OK;
}

static int mpi_start(cfrt_ctx *ctx, const xdesc *d, MPI_Request *r)
{
	MPI_Datatype dt = d->t == CFRT_F32 ? MPI_FLOAT : MPI_DOUBLE;
	int n = (int)d->count;
	const void *send = d->send;
	switch (d->kind) {
	case T_SEND:
		return MPI_Isend(send, n, dt, d->peer, d->tag, ctx->base.comm, r);
	case T_RECV:
		return MPI_Irecv(d->recv, n, dt, d->peer, d->tag, ctx->base.comm, r);
	case T_AG:
		return MPI_Iallgather(send, n, dt, d->recv, n, dt, ctx->base.comm, r);
	case T_RS:
		return MPI_Ireduce_scatter_block(send, d->recv, n, dt, MPI_SUM,
		                                 ctx->base.comm, r);
	case T_AR:
		if (send == d->recv)
			send = MPI_IN_PLACE;
		return MPI_Iallreduce(send, d->recv, n, dt, MPI_SUM, ctx->base.comm, r);
	case T_A2A:
		return MPI_Ialltoall(send, n, dt, d->recv, n, dt, ctx->base.comm, r);
	}
	return MPI_ERR_INTERN;
}

static int start(cfrt_ctx *ctx, const xdesc *d, cfrt_req *req)
{
	char what[48], name[96];
	MPI_Request r;
	if (!req)
		return cfrti_err(ctx, CFRT_EINVAL, "null request pointer");
	int rc = check_desc(ctx, d);
	if (rc == CFRT_OK)
		rc = cfrti_xfer_reserve(ctx);
	if (rc != CFRT_OK)
		return rc;
	if (d->kind == T_SEND || d->kind == T_RECV)
		snprintf(what, sizeof what, "%s %d (%lld el)",
		         d->kind == T_SEND ? "send to" : "recv from", d->peer,
		         (long long)d->count);
	else
		snprintf(what, sizeof what, "%s (%lld el)", coll_name[d->kind],
		         (long long)d->count);
	cfrti_trace_name(ctx, what, name, sizeof name);
	double t0 = cfrti_now();
	int mrc = mpi_start(ctx, d, &r);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpierr(ctx, mrc, mpi_call[d->kind]);
	cfrti_xfer_add(ctx, name, t0, r, req);
	return CFRT_OK;
}

static int blocking(cfrt_ctx *ctx, const xdesc *d)
{
	cfrt_req req = {0, 0};
	if (ctx->base.in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "a blocking collective inside "
		                 "a transfer group");
	int rc = start(ctx, d, &req);
	return rc != CFRT_OK ? rc : cfrti_xfer_wait(ctx, &req);
}

int cfrt_isend(cfrt_ctx *ctx, const void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req)
{
	xdesc d = {T_SEND, buf, NULL, count, t, peer, tag};
	ctx->base.api = "cfrt_isend";
	return start(ctx, &d, req);
}

int cfrt_irecv(cfrt_ctx *ctx, void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req)
{
	xdesc d = {T_RECV, NULL, buf, count, t, peer, tag};
	ctx->base.api = "cfrt_irecv";
	return start(ctx, &d, req);
}

int cfrt_group_begin(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_group_begin";
	if (ctx->base.in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "transfer groups do not nest");
	ctx->base.in_group = 1;
	return CFRT_OK;
}

int cfrt_group_end(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_group_end";
	if (!ctx->base.in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "no transfer group is open");
	ctx->base.in_group = 0;
	return CFRT_OK;
}

/* A wait inside a group would deadlock on backends that issue the group's
 * transfers only at cfrt_group_end: reject it here too. */
static int not_in_group(cfrt_ctx *ctx)
{
	if (ctx->base.in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "wait inside a transfer group "
		                 "(its transfers start at cfrt_group_end)");
	return CFRT_OK;
}

int cfrt_wait(cfrt_ctx *ctx, cfrt_req *req)
{
	ctx->base.api = "cfrt_wait";
	int rc = not_in_group(ctx);
	if (rc == CFRT_OK && !req)
		rc = cfrti_err(ctx, CFRT_EINVAL, "null request pointer");
	return rc != CFRT_OK ? rc : cfrti_xfer_wait(ctx, req);
}

int cfrt_waitall(cfrt_ctx *ctx, int n, cfrt_req *reqs)
{
	ctx->base.api = "cfrt_waitall";
	int rc = not_in_group(ctx);
	if (rc == CFRT_OK && n > 0 && !reqs)
		rc = cfrti_err(ctx, CFRT_EINVAL, "null request array");
	for (int i = 0; rc == CFRT_OK && i < n; i++)
		rc = cfrti_xfer_wait(ctx, &reqs[i]);
	return rc;
}

int cfrt_sync(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_sync";
	int rc = not_in_group(ctx);
	return rc != CFRT_OK ? rc : cfrti_xfer_wait_all_slots(ctx);
}

int cfrt_all_gather(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t)
{
	xdesc d = {T_AG, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_all_gather";
	return blocking(ctx, &d);
}

int cfrt_iall_gather(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req)
{
	xdesc d = {T_AG, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_iall_gather";
	return start(ctx, &d, req);
}

int cfrt_reduce_scatter(cfrt_ctx *ctx, const void *send, void *recv,
                        int64_t count, cfrt_dtype t)
{
	xdesc d = {T_RS, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_reduce_scatter";
	return blocking(ctx, &d);
}

int cfrt_ireduce_scatter(cfrt_ctx *ctx, const void *send, void *recv,
                         int64_t count, cfrt_dtype t, cfrt_req *req)
{
	xdesc d = {T_RS, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_ireduce_scatter";
	return start(ctx, &d, req);
}

int cfrt_all_reduce(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t)
{
	xdesc d = {T_AR, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_all_reduce";
	return blocking(ctx, &d);
}

int cfrt_iall_reduce(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req)
{
	xdesc d = {T_AR, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_iall_reduce";
	return start(ctx, &d, req);
}

int cfrt_all_to_all(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t)
{
	xdesc d = {T_A2A, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_all_to_all";
	return blocking(ctx, &d);
}

int cfrt_iall_to_all(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req)
{
	xdesc d = {T_A2A, send, recv, count, t, 0, 0};
	ctx->base.api = "cfrt_iall_to_all";
	return start(ctx, &d, req);
}
