/* A program that CMake builds (tests/e2e/cmake/CMakeLists.txt) against
 * the C that cfc_generate made of examples/mlp.cf with tp = 2: it runs the
 * forward pass on the 2 ranks of MPI_COMM_WORLD and the serial reference
 * on each rank, on the same data, and prints each rank's max relative
 * error of its shard of y; it exits 1 when one is over 1e-5. */
#include <stdio.h>

#include "mlp.h"
#include "../shard.h"

enum { X, W1, W2, Y, NT };

static const tensor model[NT] = {
	{MLP_x_NDIM, MLP_x_SPLIT, MLP_x_DIMS, MLP_x_RANK_DIMS, MLP_x_SEED, NULL},
	{MLP_w1_NDIM, MLP_w1_SPLIT, MLP_w1_DIMS, MLP_w1_RANK_DIMS, MLP_w1_SEED, NULL},
	{MLP_w2_NDIM, MLP_w2_SPLIT, MLP_w2_DIMS, MLP_w2_RANK_DIMS, MLP_w2_SEED, NULL},
	{MLP_y_NDIM, MLP_y_SPLIT, MLP_y_DIMS, MLP_y_RANK_DIMS, 0, NULL},
};

/* The forward pass (or with whole, the reference) on tensors t. */
static void
run(cfrt_ctx *ctx, tensor *t, int whole)
{
	void *ws;

	for (int k = 0; k < NT; k++) {
		t[k] = model[k];
		tensor_alloc(ctx, &t[k], whole);
	}
	mlp_weights w = {.w1 = t[W1].buf, .w2 = t[W2].buf};
	mlp_io io = {.x = t[X].buf, .y = t[Y].buf};
	CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, whole ? mlp_ref_workspace_bytes() : mlp_workspace_bytes()));
	if (whole)
		mlp_ref_forward(ctx, &w, &io, ws);
	else
		mlp_forward(ctx, &w, &io, ws);
	cfrt_free(ctx, ws);
}

int
main(int argc, char **argv)
{
	cfrt_ctx *ctx, *rctx;
	tensor t[NT], rt[NT];

	MPI_Init(&argc, &argv);
	if (cfrt_init(&ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp") != CFRT_OK ||
	    cfrt_init(&rctx, MPI_COMM_SELF, 1, "mlp_ref") != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	run(ctx, t, 0);
	run(rctx, rt, 1);
	double err = shard_err(ctx, &t[Y], rctx, &rt[Y]);
	printf("cmake app: rank=%d max_rel_err=%.3e\n", cfrt_rank(ctx), err);
	for (int k = 0; k < NT; k++) {
		cfrt_free(ctx, t[k].buf);
		cfrt_free(rctx, rt[k].buf);
	}
	cfrt_finalize(rctx);
	cfrt_finalize(ctx);
	MPI_Finalize();
	return err <= 1e-5 ? 0 : 1;
}
