/* transfer.c: transfer checks and the public transfer calls: point-to-point,
 * collectives (blocking ones are a start and a wait), cfrt_wait and
 * cfrt_waitall, over the backend's cfrti_xfer_start and cfrti_xfer_wait;
 * the group state behind cfrt_group_begin and cfrt_group_end.
 * ensures: a nested group, a blocking collective inside a transfer group
 * and a wait inside one fail with EINVAL before the backend sees them. */
#include <limits.h>

#include "common.h"

/* Elements in the send and the receive buffer of d. */
static void buffer_counts(int size, const xdesc *d, int64_t *ns, int64_t *nr)
{
	int64_t many = d->count * size;
	*ns = d->kind == T_RS || d->kind == T_A2A ? many : d->count;
	*nr = d->kind == T_AG || d->kind == T_A2A ? many : d->count;
	if (d->kind == T_SEND)
		*nr = 0;
	if (d->kind == T_RECV)
		*ns = 0;
}

/* int_counts: the backend's counts are C ints (MPI's). */
static int check_count(cfrt_ctx *ctx, int64_t count, int int_counts)
{
	if (int_counts && (count < 0 || count > INT_MAX))
		return cfrti_err(ctx, CFRT_EINVAL, "count %lld is outside "
		                 "0..INT_MAX", (long long)count);
	if (count < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "count %lld is negative",
		                 (long long)count);
	return CFRT_OK;
}

int cfrti_check_xfer(cfrt_ctx *ctx, const xdesc *d, const cfrt_req *req,
                     int int_counts)
{
	int size = cfrti_base_of(ctx)->size;
	int64_t ns, nr;
	if (!req)
		return cfrti_err(ctx, CFRT_EINVAL, "null request pointer");
	int rc = cfrti_check_dtype(ctx, d->t);
	if (rc == CFRT_OK)
		rc = check_count(ctx, d->count, int_counts);
	if (rc != CFRT_OK)
		return rc;
	buffer_counts(size, d, &ns, &nr);
	if ((ns > 0 && !d->send) || (nr > 0 && !d->recv))
		return cfrti_err(ctx, CFRT_EINVAL, "null buffer for %lld "
		                 "elements", (long long)(ns > 0 && !d->send ? ns : nr));
	if (d->kind > T_RECV)
		return CFRT_OK;
	if (d->peer < 0 || d->peer >= size)
		return cfrti_err(ctx, CFRT_EINVAL, "peer %d is not a rank of the "
		                 "%d-rank group", d->peer, size);
	if (d->tag < 0 || d->tag > 32767)
		return cfrti_err(ctx, CFRT_EINVAL, "tag %d is outside 0..32767",
		                 d->tag);
	return CFRT_OK;
}

int cfrti_not_in_group(cfrt_ctx *ctx)
{
	if (cfrti_base_of(ctx)->in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "wait inside a transfer group "
		                 "(its transfers start at cfrt_group_end)");
	return CFRT_OK;
}

int cfrti_set_group(cfrt_ctx *ctx, int open)
{
	cfrti_base *b = cfrti_base_of(ctx);
	if (b->in_group == open)
		return cfrti_err(ctx, CFRT_EINVAL, open ? "transfer groups do not "
		                 "nest" : "no transfer group is open");
	b->in_group = open;
	return CFRT_OK;
}

static int blocking(cfrt_ctx *ctx, const char *api, const xdesc *d)
{
	cfrt_req req = {0, 0};
	cfrti_base *b = cfrti_base_of(ctx);
	b->api = api;
	if (b->in_group)
		return cfrti_err(ctx, CFRT_EINVAL, "a blocking collective inside "
		                 "a transfer group");
	int rc = cfrti_xfer_start(ctx, api, d, &req);
	return rc != CFRT_OK ? rc : cfrti_xfer_wait(ctx, &req);
}

int cfrt_isend(cfrt_ctx *ctx, const void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req)
{
	xdesc d = {T_SEND, buf, NULL, count, t, peer, tag};
	return cfrti_xfer_start(ctx, "cfrt_isend", &d, req);
}

int cfrt_irecv(cfrt_ctx *ctx, void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req)
{
	xdesc d = {T_RECV, NULL, buf, count, t, peer, tag};
	return cfrti_xfer_start(ctx, "cfrt_irecv", &d, req);
}

/* Each collective NAME of kind K is a blocking cfrt_NAME and a
 * nonblocking cfrt_iNAME, as cfrt.h declares them: cfrt_all_gather,
 * cfrt_reduce_scatter, cfrt_all_reduce, cfrt_all_to_all and their
 * cfrt_i forms. */
#define COLLECTIVE(NAME, K)                                                  \
	int cfrt_##NAME(cfrt_ctx *ctx, const void *send, void *recv,         \
	                int64_t count, cfrt_dtype t)                         \
	{                                                                    \
		xdesc d = {K, send, recv, count, t, 0, 0};                   \
		return blocking(ctx, "cfrt_" #NAME, &d);                     \
	}                                                                    \
	int cfrt_i##NAME(cfrt_ctx *ctx, const void *send, void *recv,        \
	                 int64_t count, cfrt_dtype t, cfrt_req *req)         \
	{                                                                    \
		xdesc d = {K, send, recv, count, t, 0, 0};                   \
		return cfrti_xfer_start(ctx, "cfrt_i" #NAME, &d, req);       \
	}
COLLECTIVE(all_gather, T_AG)
COLLECTIVE(reduce_scatter, T_RS)
COLLECTIVE(all_reduce, T_AR)
COLLECTIVE(all_to_all, T_A2A)
#undef COLLECTIVE

int cfrt_wait(cfrt_ctx *ctx, cfrt_req *req)
{
	int rc = cfrti_enter(ctx, "cfrt_wait");
	if (rc == CFRT_OK)
		rc = cfrti_not_in_group(ctx);
	if (rc == CFRT_OK && !req)
		rc = cfrti_err(ctx, CFRT_EINVAL, "null request pointer");
	return rc != CFRT_OK ? rc : cfrti_xfer_wait(ctx, req);
}

int cfrt_waitall(cfrt_ctx *ctx, int n, cfrt_req *reqs)
{
	int rc = cfrti_enter(ctx, "cfrt_waitall");
	if (rc == CFRT_OK)
		rc = cfrti_not_in_group(ctx);
	if (rc == CFRT_OK && n > 0 && !reqs)
		rc = cfrti_err(ctx, CFRT_EINVAL, "null request array");
	for (int i = 0; rc == CFRT_OK && i < n; i++)
		rc = cfrti_xfer_wait(ctx, &reqs[i]);
	return rc;
}
