/* train.c: trains the transformer block of block.cf with plain SGD on
 * synthetic data, with the forward and backward passes cfc generated:
 *
 *   cfc examples/train/block.cf --backward --emit=h,c -o DIR
 *   mpicc -Iruntime -IDIR examples/train/train.c DIR/block.c libcfrt.a ...
 *   mpirun -n 4 ./train [STEPS [LR [LOSSFILE]]]
 *
 * The task: map a fixed input batch x to a fixed target t (both uniform in
 * [-1, 1), the same on every run), loss = mean((y - t)^2) / 2 over the
 * whole output. Each step runs the forward (which saves what the backward
 * reads), the loss and its gradient dy = (y - t) / n on this rank's rows
 * of y, the backward (every weight gradient, spread like its weight: the
 * replicated layer norm weights get all-reduced gradients), and
 * w -= lr * dw on this rank's shard of every weight. Rank 0 prints the
 * first and last loss and writes every step's loss to LOSSFILE. The loss
 * is the same on every schedule the block is compiled with, to rounding.
 *
 * Host arithmetic goes through cfrt_download and cfrt_upload, so the
 * program runs on either runtime (libcfrt or libcfrt_cuda). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

/* One weight: its shapes, and where it and its gradient are in the
 * weights and grads structs. */
typedef struct Param {
	const char *name;
	int nd;
	int64_t dims[CFRT_MAX_DIMS], rank_dims[CFRT_MAX_DIMS];
	int split;
	void **w, **g; /* the struct fields */
} Param;

static block_weights W;
static block_grads G;

#define P(n) {#n, BLOCK_##n##_NDIM, BLOCK_##n##_DIMS, BLOCK_##n##_RANK_DIMS, \
              BLOCK_##n##_SPLIT, &W.n, &G.d_##n}
static Param params[] = {
	P(g1), P(b1), P(wq), P(wk), P(wv), P(wo), P(g2), P(b2), P(w1), P(w2),
};
#undef P
enum { NPARAM = sizeof params / sizeof params[0] };

static int64_t
numel(const int64_t *dims, int nd)
{
	int64_t n = 1;

	for (int d = 0; d < nd; d++)
		n *= dims[d];
	return n;
}

/* A buffer of n floats on the context's device. */
static void *
alloc_f32(cfrt_ctx *ctx, int64_t n)
{
	void *p;

	CFRT_TRY(ctx, cfrt_alloc(ctx, &p, (size_t)n * sizeof(float)));
	return p;
}

/* This rank's shard of the global tensor of dims[0..nd) with values
 * uniform in [-scale, scale) (seed), or all `one` when scale is 0. */
static void *
shard(cfrt_ctx *ctx, int nd, const int64_t *dims, const int64_t *rank_dims, int split,
      uint64_t seed, double scale, float one)
{
	int64_t n = numel(rank_dims, nd), off[CFRT_MAX_DIMS] = {0};
	void *p = alloc_f32(ctx, n);
	cfrt_view v = cfrt_view_contig(p, CFRT_F32, nd, rank_dims);

	if (split >= 0)
		off[split] = cfrt_rank(ctx) * rank_dims[split];
	if (scale == 0) {
		float *h = malloc((size_t)n * sizeof *h);
		for (int64_t i = 0; i < n; i++)
			h[i] = one;
		CFRT_TRY(ctx, cfrt_upload(ctx, p, h, (size_t)n * sizeof *h));
		free(h);
		return p;
	}
	CFRT_TRY(ctx, cfrt_fill_global(ctx, &v, seed, dims, off));
	CFRT_TRY(ctx, cfrt_scale(ctx, &v, &v, scale));
	return p;
}

/* p -= lr * g, n floats, through the host. */
static void
sgd(cfrt_ctx *ctx, void *p, const void *g, int64_t n, double lr, float *hp, float *hg)
{
	CFRT_TRY(ctx, cfrt_download(ctx, hp, p, (size_t)n * sizeof *hp));
	CFRT_TRY(ctx, cfrt_download(ctx, hg, g, (size_t)n * sizeof *hg));
	for (int64_t i = 0; i < n; i++)
		hp[i] -= (float)(lr * hg[i]);
	CFRT_TRY(ctx, cfrt_upload(ctx, p, hp, (size_t)n * sizeof *hp));
}

int
main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 300;
	double lr = argc > 2 ? atof(argv[2]) : 2.0;
	const char *lossfile = argc > 3 ? argv[3] : NULL;
	static const int64_t xd[] = BLOCK_x_DIMS, xr[] = BLOCK_x_RANK_DIMS;
	static const int64_t yd[] = BLOCK_y_DIMS, yr[] = BLOCK_y_RANK_DIMS;
	cfrt_ctx *ctx;

	MPI_Init(&argc, &argv);
	if (steps < 1 || !(lr > 0)) {
		fprintf(stderr, "usage: mpirun -n %d %s [STEPS [LR [LOSSFILE]]]\n",
		        BLOCK_GROUP_SIZE, argv[0]);
		MPI_Finalize();
		return 2;
	}
	if (cfrt_init(&ctx, MPI_COMM_WORLD, BLOCK_GROUP_SIZE, "block") != CFRT_OK) {
		fprintf(stderr, "train: %s\n", cfrt_last_error(NULL));
		MPI_Finalize();
		return 1;
	}
	int rank = cfrt_rank(ctx);

	/* weights: gammas 1, betas 0, matrices uniform with variance
	 * 1 / (3 fan_in); their gradients */
	for (int k = 0; k < NPARAM; k++) {
		Param *p = &params[k];
		double scale = p->nd == 2 ? 1.0 / sqrt((double)p->dims[0]) : 0;
		*p->w = shard(ctx, p->nd, p->dims, p->rank_dims, p->split, 100 + (uint64_t)k, scale,
		              p->name[0] == 'g' ? 1.0f : 0.0f);
		*p->g = alloc_f32(ctx, numel(p->rank_dims, p->nd));
	}
	/* the data: this rank's rows of x and of the target */
	int64_t ny = numel(yr, BLOCK_y_NDIM), nall = numel(yd, BLOCK_y_NDIM);
	void *x = shard(ctx, BLOCK_x_NDIM, xd, xr, BLOCK_x_SPLIT, 1, 1.0, 0);
	void *t = shard(ctx, BLOCK_y_NDIM, yd, yr, BLOCK_y_SPLIT, 2, 1.0, 0);
	void *y = alloc_f32(ctx, ny), *dy = alloc_f32(ctx, ny);
	void *dx = alloc_f32(ctx, numel(xr, BLOCK_x_NDIM));
	block_io io = {x, y};
	G.d_y = dy;
	G.d_x = dx; /* the input's gradient: written, not used here */
	void *saved, *ws, *bws;
	CFRT_TRY(ctx, cfrt_alloc(ctx, &saved, block_saved_bytes()));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, block_workspace_bytes()));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &bws, block_backward_workspace_bytes()));

	int64_t most = ny;
	for (int k = 0; k < NPARAM; k++)
		if (numel(params[k].rank_dims, params[k].nd) > most)
			most = numel(params[k].rank_dims, params[k].nd);
	float *h0 = malloc((size_t)most * sizeof *h0), *h1 = malloc((size_t)most * sizeof *h1);
	double *loss = malloc((size_t)steps * sizeof *loss);
	for (int s = 0; s < steps; s++) {
		CFRT_TRY(ctx, block_forward(ctx, &W, &io, saved, ws));
		/* loss and dy on this rank's rows */
		CFRT_TRY(ctx, cfrt_download(ctx, h0, y, (size_t)ny * sizeof *h0));
		CFRT_TRY(ctx, cfrt_download(ctx, h1, t, (size_t)ny * sizeof *h1));
		double l = 0;
		for (int64_t i = 0; i < ny; i++) {
			double e = (double)h0[i] - h1[i];
			l += e * e;
			h0[i] = (float)(e / (double)nall);
		}
		CFRT_TRY(ctx, cfrt_upload(ctx, dy, h0, (size_t)ny * sizeof *h0));
		MPI_Allreduce(&l, &loss[s], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		loss[s] /= 2.0 * (double)nall;
		CFRT_TRY(ctx, block_backward(ctx, &W, &io, saved, &G, bws));
		for (int k = 0; k < NPARAM; k++)
			sgd(ctx, *params[k].w, *params[k].g, numel(params[k].rank_dims, params[k].nd), lr,
			    h0, h1);
	}
	if (rank == 0) {
		printf("train: block (attention + MLP, %d ranks, %s): %d steps, lr %g, loss %.6f -> "
		       "%.6f\n", BLOCK_GROUP_SIZE, cfrt_backend_name(), steps, lr, loss[0],
		       loss[steps - 1]);
		FILE *f = lossfile ? fopen(lossfile, "w") : NULL;
		for (int s = 0; f && s < steps; s++)
			fprintf(f, "%d %.9e\n", s, loss[s]);
		if (f)
			fclose(f);
	}
	free(loss);
	free(h0);
	free(h1);
	for (int k = 0; k < NPARAM; k++) {
		cfrt_free(ctx, *params[k].w);
		cfrt_free(ctx, *params[k].g);
	}
	void *bufs[] = {x, t, y, dy, dx, saved, ws, bws};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		cfrt_free(ctx, bufs[i]);
	cfrt_finalize(ctx);
	MPI_Finalize();
	return 0;
}
