/* A program that CMake builds (tests/e2e/cmake/CMakeLists.txt) against
 * the C that cfc_generate made of examples/mlp.cf with tp = 2: it runs the
 * forward pass on the 2 ranks of MPI_COMM_WORLD and the serial reference
 * on each rank, on the same data, and prints each rank's max relative
 * error of its shard of y; it exits 1 when one is over 1e-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlp.h"

enum { X, W1, W2, Y, NT };

typedef struct tensor {
	int nd, split;
	int64_t dims[4], rank_dims[4];
	uint64_t seed;
	void *buf;
} tensor;

static const tensor model[NT] = {
	{MLP_x_NDIM, MLP_x_SPLIT, MLP_x_DIMS, MLP_x_RANK_DIMS, MLP_x_SEED, NULL},
	{MLP_w1_NDIM, MLP_w1_SPLIT, MLP_w1_DIMS, MLP_w1_RANK_DIMS, MLP_w1_SEED, NULL},
	{MLP_w2_NDIM, MLP_w2_SPLIT, MLP_w2_DIMS, MLP_w2_RANK_DIMS, MLP_w2_SEED, NULL},
	{MLP_y_NDIM, MLP_y_SPLIT, MLP_y_DIMS, MLP_y_RANK_DIMS, 0, NULL},
};

static int64_t
numel(const int64_t *d, int nd)
{
	int64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= d[i];
	return n;
}

/* Allocates this rank's shard of t (or all of it) and fills it as the
 * driver does, from the header's seed by global index; y (seed 0) is
 * left unfilled. */
static void
alloc_fill(cfrt_ctx *ctx, tensor *t, int whole)
{
	int64_t off[4] = {0};
	const int64_t *d = whole ? t->dims : t->rank_dims;

	CFRT_TRY(ctx, cfrt_alloc(ctx, &t->buf, (size_t)numel(d, t->nd) * sizeof(float)));
	if (!t->seed)
		return;
	if (!whole && t->split >= 0)
		off[t->split] = cfrt_rank(ctx) * t->rank_dims[t->split];
	cfrt_view v = cfrt_view_contig(t->buf, CFRT_F32, t->nd, d);
	CFRT_TRY(ctx, cfrt_fill_global(ctx, &v, t->seed, t->dims, off));
}

/* The forward pass (or with whole, the reference) on tensors t. */
static void
run(cfrt_ctx *ctx, tensor *t, int whole)
{
	void *ws;

	for (int k = 0; k < NT; k++) {
		t[k] = model[k];
		alloc_fill(ctx, &t[k], whole);
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

/* max |mine - ref| / max |ref| over this rank's shard of y. */
static double
compare(cfrt_ctx *ctx, const tensor *mine, cfrt_ctx *rctx, const tensor *ref)
{
	int64_t n = numel(mine->rank_dims, mine->nd), rn = numel(ref->dims, ref->nd);
	float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)rn * sizeof *b);
	double md = 0, mr = 0;

	if (!a || !b)
		cfrt_fail(ctx, CFRT_ENOMEM);
	CFRT_TRY(ctx, cfrt_download(ctx, a, mine->buf, (size_t)n * sizeof *a));
	CFRT_TRY(rctx, cfrt_download(rctx, b, ref->buf, (size_t)rn * sizeof *b));
	for (int64_t i = 0; i < n; i++) {
		int64_t g = 0, mul = 1, k = i;
		for (int d = mine->nd - 1; d >= 0; d--) {
			int64_t x = k % mine->rank_dims[d];
			k /= mine->rank_dims[d];
			if (d == mine->split)
				x += cfrt_rank(ctx) * mine->rank_dims[d];
			g += x * mul;
			mul *= mine->dims[d];
		}
		md = fmax(md, fabs(a[i] - b[g]));
		mr = fmax(mr, fabs(b[g]));
	}
	free(a);
	free(b);
	return md / mr;
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
	double err = compare(ctx, &t[Y], rctx, &rt[Y]);
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
