/* null_arg.c: an application that hands the generated forward pass a null
 * weight. The job must end, the message naming the weight as the spec
 * does ("weight w2"), not an operand of some runtime call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlp.h"

/* Bytes of a shard of nd dims (the header's _RANK_DIMS), f32. */
static size_t
bytes(const int64_t *dims, int nd)
{
	size_t n = sizeof(float);

	for (int d = 0; d < nd; d++)
		n *= (size_t)dims[d];
	return n;
}

int
main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	mlp_weights w;
	mlp_io io;
	void *ws, *x, *w1, *y;

	MPI_Init(&argc, &argv);
	if (cfrt_init(&ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp") != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x, bytes((int64_t[])MLP_x_RANK_DIMS, MLP_x_NDIM)));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &w1, bytes((int64_t[])MLP_w1_RANK_DIMS, MLP_w1_NDIM)));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &y, bytes((int64_t[])MLP_y_RANK_DIMS, MLP_y_NDIM)));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, mlp_workspace_bytes()));
	w.w1 = w1;
	w.w2 = NULL; /* forgotten */
	io.x = x;
	io.y = y;
	mlp_forward(ctx, &w, &io, ws);
	fprintf(stderr, "null_arg: the forward pass returned\n");
	cfrt_finalize(ctx);
	MPI_Finalize();
	return 0;
}
