/* An application that splits a 4-rank job into two tensor-parallel groups
 * of 2 (MPI_Comm_split) and runs the generated mlp model in each group on
 * different data. Each group checks its output shard against the serial
 * reference of its own data; rank 0 prints one line per group. */
#include <stdio.h>

#include "mlp.h"
#include "shard.h"

static void
tensors(tensor *t)
{
	tensor x = {MLP_x_NDIM, MLP_x_SPLIT, MLP_x_DIMS, MLP_x_RANK_DIMS, 0, NULL};
	tensor w1 = {MLP_w1_NDIM, MLP_w1_SPLIT, MLP_w1_DIMS, MLP_w1_RANK_DIMS, 0, NULL};
	tensor w2 = {MLP_w2_NDIM, MLP_w2_SPLIT, MLP_w2_DIMS, MLP_w2_RANK_DIMS, 0, NULL};
	tensor y = {MLP_y_NDIM, MLP_y_SPLIT, MLP_y_DIMS, MLP_y_RANK_DIMS, 0, NULL};
	t[0] = x, t[1] = w1, t[2] = w2, t[3] = y;
}

/* Runs the model on 4 tensors (x, w1, w2, y), whole or sharded. */
static void
run(cfrt_ctx *ctx, tensor *t, int whole, uint64_t seed)
{
	mlp_weights w;
	mlp_io io;
	void *ws;

	for (int k = 0; k < 4; k++) {
		t[k].seed = k < 3 ? seed + (uint64_t)k : 0;
		tensor_alloc(ctx, &t[k], whole);
	}
	w.w1 = t[1].buf, w.w2 = t[2].buf, io.x = t[0].buf, io.y = t[3].buf;
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
	int wr, ws;
	MPI_Comm tp;
	cfrt_ctx *ctx, *rctx;
	tensor t[4], rt[4];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	MPI_Comm_size(MPI_COMM_WORLD, &ws);
	int group = wr / MLP_GROUP_SIZE;
	MPI_Comm_split(MPI_COMM_WORLD, group, wr, &tp);
	if (cfrt_init(&ctx, tp, MLP_GROUP_SIZE, "mlp") != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	uint64_t seed = 100 + 10 * (uint64_t)group; /* each group its own data */
	tensors(t);
	run(ctx, t, 0, seed);
	if (cfrt_init(&rctx, MPI_COMM_SELF, 1, "mlp_ref") != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	tensors(rt);
	run(rctx, rt, 1, seed);
	double err = shard_err(ctx, &t[3], rctx, &rt[3]), all[64];
	MPI_Gather(&err, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (wr == 0)
		for (int r = 0; r < ws && r < 64; r++)
			printf("group=%d rank=%d max_rel_err=%.3e\n", r / MLP_GROUP_SIZE,
			       r % MLP_GROUP_SIZE, all[r]);
	for (int k = 0; k < 4; k++) {
		cfrt_free(ctx, t[k].buf);
		cfrt_free(rctx, rt[k].buf);
	}
	cfrt_finalize(rctx);
	cfrt_finalize(ctx);
	MPI_Comm_free(&tp);
	MPI_Finalize();
	return 0;
}
