/* null_arg.c: an application that hands the generated forward pass a null
 * weight. The job must end, the message naming the weight as the spec
 * does ("weight w2"), not an operand of some runtime call. */
#include <stdio.h>
#include <stdlib.h>

#include "mlp.h"

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
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x, 2 * 16 * 64 * 4));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &w1, 64 * 128 * 4));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &y, 2 * 16 * 64 * 4));
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
