/* shard.h: what the test applications of the generated mlp share
 * (split_app.c, cmake/main.c): a tensor of the header's dims, filled as
 * the driver fills it (cfrt_fill_global by global index, so that a shard
 * holds the same values as those elements of the whole tensor), and the
 * error of this rank's shard of an output against the serial reference's
 * whole tensor. Included once per program: static functions. */
#include <math.h>
#include <stdlib.h>

#include <cfrt.h>

typedef struct tensor {
	int nd, split;
	int64_t dims[4], rank_dims[4];
	uint64_t seed; /* 0: an output, not filled */
	void *buf;
} tensor;

static int64_t
numel(const int64_t *d, int nd)
{
	int64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= d[i];
	return n;
}

/* Allocates this rank's shard of t (whole: all of it) of f32 and fills it
 * from t->seed. */
static void
tensor_alloc(cfrt_ctx *ctx, tensor *t, int whole)
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

/* max |mine - ref| / max |ref| over this rank's shard of an f32 tensor. */
static double
shard_err(cfrt_ctx *ctx, const tensor *mine, cfrt_ctx *rctx, const tensor *ref)
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
