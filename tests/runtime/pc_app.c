/* An application built out of tree against an installed cfrt
 * (mpicc pc_app.c $(pkg-config --cflags --libs cfrt)), written the way
 * generated code uses the runtime: a row-parallel GEMM Y = X W, with X
 * split by columns and W by rows over the ranks, reduce-scattered by rows
 * of Y, as a FuseRS ring (CommFuse Algorithm 2). Checks the result against
 * the serial product and against the vanilla schedule (GEMM, then
 * cfrt_reduce_scatter); prints "pc_app: ok" on rank 0, exits non-zero on a
 * mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfrt.h"

#if CFRT_API_VERSION != 1
#error "pc_app was written for cfrt API version 1"
#endif

enum { MS = 16, KL = 32, NC = 24 }; /* rows of Y per rank, K per rank, N */

typedef struct shard {
	int r, p;
	float *x, *w; /* X[:, r*KL..] as [p*MS, KL]; W[r*KL.., :] as [KL, NC] */
} shard;

/* FuseRS: step i computes the partial product of row slice l = r-i-1 and
 * adds it (GEMM beta = 1) to the running sum received from prev, which it
 * passes on to next; the last step computes this rank's own slice l = r
 * with nothing left in flight. Returns the buffer holding Y's rows. */
static float *fuse_rs(cfrt_ctx *ctx, const shard *s, float *buf[2])
{
	cfrt_req req[2] = {{0, 0}, {0, 0}};
	int cur = 0;
	for (int i = 0; i < s->p; i++) {
		int l = ((s->r - i - 1) % s->p + s->p) % s->p;
		cfrt_where(ctx, "fuse_rs:y", i);
		CFRT_TRY(ctx, cfrt_wait(ctx, &req[1])); /* partial sum of slice l */
		cfrt_what(ctx, "y += x @ w", l);
		CFRT_TRY(ctx, cfrt_gemm(ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS,
		                        MS, NC, KL, 1.0, s->x + l * MS * KL, KL, 0,
		                        s->w, NC, 0, i > 0 ? 1.0 : 0.0, buf[cur],
		                        NC, 0, 1));
		if (i == s->p - 1)
			break;
		CFRT_TRY(ctx, cfrt_wait(ctx, &req[0])); /* buf[1-cur] is free */
		CFRT_TRY(ctx, cfrt_group_begin(ctx));
		cfrt_what(ctx, "send y", l);
		CFRT_TRY(ctx, cfrt_isend(ctx, buf[cur], MS * NC, CFRT_F32,
		                         (s->r + 1) % s->p, 0, &req[0]));
		cfrt_what(ctx, "recv y", ((l - 1) % s->p + s->p) % s->p);
		CFRT_TRY(ctx, cfrt_irecv(ctx, buf[1 - cur], MS * NC, CFRT_F32,
		                         (s->r + s->p - 1) % s->p, 0, &req[1]));
		CFRT_TRY(ctx, cfrt_group_end(ctx));
		cur = 1 - cur;
	}
	CFRT_TRY(ctx, cfrt_wait(ctx, &req[0]));
	return buf[cur];
}

/* Vanilla: the whole partial product, then a blocking reduce-scatter. */
static void vanilla(cfrt_ctx *ctx, const shard *s, float *part, float *y)
{
	cfrt_where(ctx, "vanilla:y", 0);
	cfrt_what(ctx, "p = x @ w", -1);
	CFRT_TRY(ctx, cfrt_gemm(ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS,
	                        s->p * MS, NC, KL, 1.0, s->x, KL, 0, s->w, NC, 0,
	                        0.0, part, NC, 0, 1));
	cfrt_what(ctx, "y = reduce_scatter(p)", -1);
	CFRT_TRY(ctx, cfrt_reduce_scatter(ctx, part, y, MS * NC, CFRT_F32));
}

/* Rows r*MS.. of the serial product from the whole X and W. */
static void serial(cfrt_ctx *ctx, const shard *s, float *y)
{
	int64_t m = s->p * MS, k = s->p * KL;
	float *x, *w;
	CFRT_TRY(ctx, cfrt_alloc(ctx, (void **)&x, sizeof(float) * (size_t)(m * k)));
	CFRT_TRY(ctx, cfrt_alloc(ctx, (void **)&w, sizeof(float) * (size_t)(k * NC)));
	cfrt_view vx = cfrt_view_contig(x, CFRT_F32, 2, (int64_t[]){m, k});
	cfrt_view vw = cfrt_view_contig(w, CFRT_F32, 2, (int64_t[]){k, NC});
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &vx, 1));
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &vw, 2));
	CFRT_TRY(ctx, cfrt_gemm(ctx, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS, MS, NC,
	                        k, 1.0, x + s->r * MS * k, k, 0, w, NC, 0, 0.0, y,
	                        NC, 0, 1));
	cfrt_free(ctx, x);
	cfrt_free(ctx, w);
}

/* max |a - b| / max(1, |b|); a NaN counts as infinite (fmax would drop
 * it). */
static double maxrel(const float *a, const float *b)
{
	double m = 0;
	for (int i = 0; i < MS * NC; i++) {
		double e = fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i]));
		m = isnan(e) ? INFINITY : fmax(m, e);
	}
	return m;
}

/* Each rank fills its shards of the global X [p*MS, p*KL] and W [p*KL, NC]. */
static void make_shard(cfrt_ctx *ctx, shard *s)
{
	s->r = cfrt_rank(ctx);
	s->p = cfrt_size(ctx);
	int64_t m = s->p * MS, k = s->p * KL;
	CFRT_TRY(ctx, cfrt_alloc(ctx, (void **)&s->x, sizeof(float) * (size_t)(m * KL)));
	CFRT_TRY(ctx, cfrt_alloc(ctx, (void **)&s->w, sizeof(float) * KL * NC));
	cfrt_view vx = cfrt_view_contig(s->x, CFRT_F32, 2, (int64_t[]){m, KL});
	cfrt_view vw = cfrt_view_contig(s->w, CFRT_F32, 2, (int64_t[]){KL, NC});
	CFRT_TRY(ctx, cfrt_fill_global(ctx, &vx, 1, (int64_t[]){m, k},
	                               (int64_t[]){0, s->r * KL}));
	CFRT_TRY(ctx, cfrt_fill_global(ctx, &vw, 2, (int64_t[]){k, NC},
	                               (int64_t[]){s->r * KL, 0}));
}

/* A buffer of n floats from the runtime. */
static float *rt_floats(cfrt_ctx *ctx, int64_t n)
{
	void *p;
	CFRT_TRY(ctx, cfrt_alloc(ctx, &p, sizeof(float) * (size_t)n));
	return p;
}

int main(int argc, char **argv)
{
	static float got[3][MS * NC]; /* host copies: fuse_rs, vanilla, serial */
	cfrt_ctx *ctx;
	shard s;
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "pc_app"));
	make_shard(ctx, &s);
	float *buf[2] = {rt_floats(ctx, MS * NC), rt_floats(ctx, MS * NC)};
	float *part = rt_floats(ctx, (int64_t)size * MS * NC);
	float *y_van = rt_floats(ctx, MS * NC), *y_ref = rt_floats(ctx, MS * NC);
	float *y = fuse_rs(ctx, &s, buf);
	vanilla(ctx, &s, part, y_van);
	serial(ctx, &s, y_ref);
	CFRT_TRY(ctx, cfrt_download(ctx, got[0], y, sizeof got[0]));
	CFRT_TRY(ctx, cfrt_download(ctx, got[1], y_van, sizeof got[1]));
	CFRT_TRY(ctx, cfrt_download(ctx, got[2], y_ref, sizeof got[2]));
	double e1 = maxrel(got[0], got[2]), e2 = maxrel(got[0], got[1]);
	double e = fmax(e1, e2), all;
	MPI_Allreduce(&e, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (s.r == 0)
		printf("pc_app: %d ranks, max rel err %.2g vs serial, %.2g vs "
		       "vanilla: %s\n", size, e1, e2, all <= 1e-5 ? "ok" : "MISMATCH");
	float *bufs[] = {s.x, s.w, buf[0], buf[1], part, y_van, y_ref};
	for (int i = 0; i < 7; i++)
		cfrt_free(ctx, bufs[i]);
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return all <= 1e-5 ? 0 : 1;
}
