/* comm.c: transfer starts (the cfrti_xfer_start of runtime/common/transfer.c,
 * which holds the public transfer calls), groups and cfrt_sync.
 * requires: the context's communicator has MPI_ERRORS_RETURN.
 * ensures: every transfer that started holds a slot of the transfer table
 * until its wait; blocking collectives are a start and a wait, so they are
 * traced and progressed like the others. */
#include <stdio.h>

#include "backend.h"

static const char *const mpi_call[] = {
	"MPI_Isend", "MPI_Irecv", "MPI_Iallgather", "MPI_Ireduce_scatter_block",
	"MPI_Iallreduce", "MPI_Ialltoall"
};

static int mpi_start(cfrt_ctx *ctx, const xdesc *d, MPI_Request *r)
{
	MPI_Datatype dt = d->t == CFRT_F32 ? MPI_FLOAT : MPI_DOUBLE;
	MPI_Comm comm = ctx->base.comm;
	int n = (int)d->count;
	const void *send = d->send;
	switch (d->kind) {
	case T_SEND:
		return MPI_Isend(send, n, dt, d->peer, d->tag, comm, r);
	case T_RECV:
		return MPI_Irecv(d->recv, n, dt, d->peer, d->tag, comm, r);
	case T_AG:
		return MPI_Iallgather(send, n, dt, d->recv, n, dt, comm, r);
	case T_RS:
		return MPI_Ireduce_scatter_block(send, d->recv, n, dt, MPI_SUM,
		                                 comm, r);
	case T_AR:
		if (send == d->recv)
			send = MPI_IN_PLACE;
		return MPI_Iallreduce(send, d->recv, n, dt, MPI_SUM, comm, r);
	case T_A2A:
		return MPI_Ialltoall(send, n, dt, d->recv, n, dt, comm, r);
	}
	return MPI_ERR_INTERN;
}

int cfrti_xfer_start(cfrt_ctx *ctx, const char *api, const xdesc *d,
                     cfrt_req *req)
{
	MPI_Request r;
	ctx->base.api = api;
	int rc = cfrti_gone(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_check_xfer(ctx, d, req, 1);
	if (rc == CFRT_OK)
		rc = cfrti_xfer_reserve(ctx);
	if (rc != CFRT_OK)
		return rc;
	int span = cfrti_trace_xfer(ctx, d, TRK_XFER);
	cfrti_span *sp = cfrti_trace_at(ctx, span);
	if (sp)
		sp->t0 = cfrti_trace_ns(ctx, cfrti_now());
	int mrc = mpi_start(ctx, d, &r);
	if (mrc != MPI_SUCCESS)
		return cfrti_mpi(ctx, mrc, mpi_call[d->kind]);
	cfrti_xfer_add(ctx, span, r, d, req);
	return CFRT_OK;
}

int cfrt_group_begin(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_group_begin";
	return cfrti_set_group(ctx, 1);
}

int cfrt_group_end(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_group_end";
	return cfrti_set_group(ctx, 0);
}

int cfrt_sync(cfrt_ctx *ctx)
{
	ctx->base.api = "cfrt_sync";
	int rc = cfrti_gone(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_not_in_group(ctx);
	return rc != CFRT_OK ? rc : cfrti_xfer_wait_all_slots(ctx);
}
