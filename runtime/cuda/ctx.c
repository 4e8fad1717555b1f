/* ctx.c: the top of the backend: its part of the context life cycle (the
 * hooks of runtime/common/base.c). The only file that knows every module;
 * the order below is the layering of backend.h.
 * ensures: a context is set up module by module from the bottom up (dev,
 * dnn, trace, ce, xfer; lt has nothing to make) and freed from the top down,
 * each module freeing only what it made; a failed setup is freed the same way
 * (every fini accepts a module that was never, or only partly, made). */
#include <stdlib.h>

#include "backend.h"

/* Without MPI: the application's NCCL communicator says the job's ranks;
 * without one the job is this process alone. */
int cfrti_app_job(const cfrt_opts *opts, int *rank, int *size, char *msg, size_t n)
{
	*rank = 0;
	*size = 1;
	if (!opts || !(opts->flags & CFRT_OPT_NCCL_COMM))
		return CFRT_OK;
	ncclComm_t c = (ncclComm_t)opts->nccl_comm;
	if (!c || ncclCommCount(c, size) != ncclSuccess ||
	    ncclCommUserRank(c, rank) != ncclSuccess) {
		snprintf(msg, n, "no MPI communicator (MPI_COMM_NULL), and the "
		         "application's NCCL communicator is not one NCCL knows");
		return CFRT_EINVAL;
	}
	return CFRT_OK;
}

cfrt_ctx *cfrti_ctx_new(void)
{
	return calloc(1, sizeof(cfrt_ctx));
}

/* The settings first, so that a bad one fails before any device work;
 * then the modules from the bottom up. */
int cfrti_ctx_setup(cfrt_ctx *ctx)
{
	int rc = cfrti_xfer_mode(ctx);
	if (rc == CFRT_OK && ctx->xt.mode == XM_CE && ctx->base.ngroups > 1)
		rc = cfrti_err(ctx, CFRT_ENOTSUP, "%d groups: copy-engine transfers "
		               "(CFRT_TRANSFER=ce) run contexts of one group; NCCL "
		               "runs a grid", ctx->base.ngroups);
	if (rc == CFRT_OK && ctx->xt.mode == XM_CE && ctx->base.job == MPI_COMM_NULL)
		rc = cfrti_err(ctx, CFRT_ENOTSUP, "copy-engine transfers "
		               "(CFRT_TRANSFER=ce) exchange their handles over MPI: "
		               "a context made without MPI (MPI_COMM_NULL) uses NCCL");
	if (rc == CFRT_OK)
		rc = cfrti_lt_mode(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_dev_init(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_dnn_init(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_tr_init(ctx, ctx->dev.cs);
	if (rc == CFRT_OK)
		rc = cfrti_ce_init(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_xfer_init(ctx);
	return rc;
}

/* Every transfer waited on, every copy-engine handshake answered, then
 * all work of the device. */
int cfrti_ctx_drain(cfrt_ctx *ctx)
{
	int rc = cfrti_xfer_wait_all(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_ce_drain(ctx);
	cfrti_trace_flush(ctx);
	if (rc == CFRT_OK)
		rc = cfrti_cuda(ctx, cudaDeviceSynchronize(),
		                "cudaDeviceSynchronize");
	if (rc == CFRT_OK)
		cfrti_tr_resolve(ctx);
	return rc;
}

/* The modules from the top down: each frees what it made. */
void cfrti_ctx_free(cfrt_ctx *ctx)
{
	cfrti_xfer_fini(ctx);
	cfrti_ce_fini(ctx);
	cfrti_tr_fini(ctx);
	cfrti_dnn_fini(ctx);
	cfrti_lt_fini(ctx);
	cfrti_dev_fini(ctx);
	cfrti_free_comms(ctx);
	free(ctx);
}

const char *cfrt_backend_name(void)
{
	return "cuda+nccl+cublas";
}

const char *cfrt_progress_name(const cfrt_ctx *ctx)
{
	(void)ctx;
	return "device";
}
