/* mlp_mpi.c: the MLP of examples/mlp.cf written by hand with MPI and
 * OpenBLAS, the baselines of `make bench`. Plain: all-gather, then the
 * whole compute, then MPI_Reduce_scatter_block. With --overlap K, as a
 * careful MPI programmer overlaps by hand: this rank's rows cut into K
 * chunks, every chunk's MPI_Iallgather posted at once, and chunk c's
 * GEMM, GELU, GEMM run while the later chunks' gathers and the earlier
 * chunks' MPI_Ireduce_scatter_block are in flight (MPI_Testall between
 * the calls drives their progress; Open MPI moves shared-memory
 * messages only inside MPI calls).
 *
 *   mpirun -n N mlp_mpi B S D [--iters N] [--warmup N] [--check]
 *                             [--compute-only | --comm-only | --overlap K]
 *
 * Same sizes (F = 4 D), same per-rank layout and same values as the
 * generated model (cfrt_uniform with the driver's seeds): rank r holds
 * x[:, r*S/N:(r+1)*S/N, :], columns r*F/N.. of w1 and rows r*F/N.. of w2,
 * and gets y[:, r*S/N:(r+1)*S/N, :].
 *
 * The gathered rows are left in the order MPI_Allgather gives them,
 * [N][B][S/N][D], and computed in that order: every op is row-wise, so
 * no copy is needed to bring them into [B][S][D], and block q of the
 * product is exactly what rank q gets from MPI_Reduce_scatter_block.
 *
 * GELU is the runtime's (runtime/mpi/ew.c, gelu_f32): the tanh form in
 * float, tanh folded into one expf of an argument held to [-80, 80],
 * without branches; the same formula, so the baseline pays for GELU
 * what the generated code pays.
 *
 * --compute-only runs the same GEMM, gelu, GEMM without the two
 * collectives (the "unsplit compute alone" of ECT), --comm-only the two
 * collectives without the compute. --check gathers y to
 * rank 0 and compares it with a serial computation of whole tensors
 * (GELU there in double from its definition, so the float GELU is
 * checked too).
 * Prints one line like the generated driver: time_ms is the median over
 * iterations of the slowest rank's time, span_ms of the time from the
 * first rank's start to the last rank's end. Depends on cfrt.h only for the
 * inline test-data functions; links MPI and CBLAS, not libcfrt. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cfrt.h"
#include "median.h"

/* Seeds of x, w1, w2, y: the driver numbers tensors in table order. */
#define SEED(k) (1000u + (uint64_t)(k))

typedef struct opts {
	int64_t b, s, d;
	int iters, warmup, check, compute_only, comm_only;
	int overlap; /* chunks of the overlapped baseline; 0: plain */
} opts;

typedef struct mlp {
	int64_t rows, d, f;   /* B*S gathered rows; D; F/N columns of w1 */
	int64_t blk;          /* elements of one rank's x or y: B*(S/N)*D */
	float *x, *w1, *w2;   /* this rank's shards */
	float *xg, *h, *p, *y; /* gathered x, gelu(x w1), h w2, result */
	int chunks;           /* --overlap: chunks of this rank's rows */
	MPI_Request *req;     /* --overlap: 2 per chunk, gather then reduce */
} mlp;

static void
usage_exit(int rank)
{
	if (rank == 0)
		fprintf(stderr, "usage: mlp_mpi B S D [--iters N] [--warmup N] "
		        "[--check] [--compute-only | --comm-only | --overlap K]\n");
	MPI_Finalize();
	exit(2);
}

static opts
parse_opts(int argc, char **argv, int rank, int n)
{
	opts o = {0, 0, 0, 5, 1, 0, 0, 0, 0};

	if (argc < 4)
		usage_exit(rank);
	o.b = atoll(argv[1]);
	o.s = atoll(argv[2]);
	o.d = atoll(argv[3]);
	for (int i = 4; i < argc; i++) {
		int more = i + 1 < argc;
		if (!strcmp(argv[i], "--iters") && more)
			o.iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && more)
			o.warmup = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--check"))
			o.check = 1;
		else if (!strcmp(argv[i], "--compute-only"))
			o.compute_only = 1;
		else if (!strcmp(argv[i], "--comm-only"))
			o.comm_only = 1;
		else if (!strcmp(argv[i], "--overlap") && more)
			o.overlap = atoi(argv[++i]);
		else
			usage_exit(rank);
	}
	if (o.b < 1 || o.s < 1 || o.d < 1 || o.s % n || (4 * o.d) % n ||
	    o.iters < 1 || o.warmup < 0 || o.b * (o.s / n) * o.d > 1 << 30 ||
	    (o.compute_only && o.comm_only) || o.overlap < 0 ||
	    (o.overlap && (o.compute_only || o.comm_only ||
	                   (o.b * (o.s / n)) % o.overlap)))
		usage_exit(rank);
	return o;
}

static float *
falloc(int64_t n)
{
	float *p = calloc((size_t)n, sizeof *p);

	if (!p) {
		fprintf(stderr, "mlp_mpi: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

/* dst[i][j] for i < rows, j < cols = element (r0 + i, c0 + j) of the global
 * row-major matrix of gcols columns with the given seed. */
static void
fill(float *dst, uint64_t seed, int64_t rows, int64_t cols, int64_t gcols,
     int64_t r0, int64_t c0)
{
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < cols; j++)
			dst[i * cols + j] = (float)cfrt_uniform(seed,
			    (uint64_t)((r0 + i) * gcols + c0 + j), CFRT_F32);
}

/* 0.5 x (1 + tanh u), u = 0.7978845608 (x + 0.044715 x^3), in float as
 * x - x / (exp(2u) + 1), 2u held to [-80, 80] by conditional moves
 * (expf's overflow and underflow paths are slow; exp(+-80) is exact
 * enough): the runtime's gelu_f32. */
static void
gelu(float *v, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float x = v[i];
		float u2 = 2.0f * 0.7978845608f * (x + 0.044715f * x * x * x);
		u2 = u2 < -80.0f ? -80.0f : u2;
		u2 = u2 > 80.0f ? 80.0f : u2;
		v[i] = x - x / (expf(u2) + 1.0f);
	}
}

/* GELU's definition in double, for the check: the float GELU above is
 * checked with the rest. */
static void
gelu_ref(float *v, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		double x = v[i];
		v[i] = (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 *
		                                     (x + 0.044715 * x * x * x))));
	}
}

/* xg (rows x d) @ w1 (d x f) -> h, act, h @ w2 (f x d) -> p. */
static void
compute_with(int64_t rows, int64_t d, int64_t f, const float *xg,
             const float *w1, const float *w2, float *h, float *p,
             void (*act)(float *, int64_t))
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)f,
	            (int)d, 1.0f, xg, (int)d, w1, (int)f, 0.0f, h, (int)f);
	act(h, rows * f);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)d,
	            (int)f, 1.0f, h, (int)f, w2, (int)d, 0.0f, p, (int)d);
}

static void
compute(int64_t rows, int64_t d, int64_t f, const float *xg, const float *w1,
        const float *w2, float *h, float *p)
{
	compute_with(rows, d, f, xg, w1, w2, h, p, gelu);
}

/* Drives the transfers in flight (Open MPI progresses them only inside
 * MPI calls). */
static void
poke(mlp *m, int nreq)
{
	int done;

	MPI_Testall(nreq, m->req, &done, MPI_STATUSES_IGNORE);
}

/* --overlap: chunk c of the rows, cr of this rank's B*S/N rows, is
 * gathered into xg + c N cr D as [N][cr][D] (rank q's chunk c at block
 * q), computed there, and reduce-scattered into y + c cr D: block q of
 * the chunk's product is the chunk c of rank q's rows, so y is this
 * rank's rows in the plain baseline's order. */
static void
forward_overlap(mlp *m)
{
	int k = m->chunks, n = (int)(m->rows * m->d / m->blk);
	int64_t cblk = m->blk / k, crows = m->rows / k;
	MPI_Request *g = m->req, *rs = m->req + k;

	for (int c = 0; c < k; c++)
		MPI_Iallgather(m->x + c * cblk, (int)cblk, MPI_FLOAT,
		               m->xg + (int64_t)c * n * cblk, (int)cblk, MPI_FLOAT,
		               MPI_COMM_WORLD, &g[c]);
	for (int c = 0; c < k; c++) {
		float *xc = m->xg + (int64_t)c * n * cblk;
		float *hc = m->h + c * crows * m->f;
		float *pc = m->p + (int64_t)c * n * cblk;
		MPI_Wait(&g[c], MPI_STATUS_IGNORE);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)crows,
		            (int)m->f, (int)m->d, 1.0f, xc, (int)m->d, m->w1,
		            (int)m->f, 0.0f, hc, (int)m->f);
		poke(m, k + c);
		gelu(hc, crows * m->f);
		poke(m, k + c);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)crows,
		            (int)m->d, (int)m->f, 1.0f, hc, (int)m->f, m->w2,
		            (int)m->d, 0.0f, pc, (int)m->d);
		MPI_Ireduce_scatter_block(pc, m->y + c * cblk, (int)cblk, MPI_FLOAT,
		                          MPI_SUM, MPI_COMM_WORLD, &rs[c]);
		poke(m, k + c + 1);
	}
	MPI_Waitall(k, rs, MPI_STATUSES_IGNORE);
}

static void
forward(mlp *m, const opts *o)
{
	if (o->overlap) {
		forward_overlap(m);
		return;
	}
	if (!o->compute_only)
		MPI_Allgather(m->x, (int)m->blk, MPI_FLOAT, m->xg, (int)m->blk,
		              MPI_FLOAT, MPI_COMM_WORLD);
	if (!o->comm_only)
		compute(m->rows, m->d, m->f, m->xg, m->w1, m->w2, m->h, m->p);
	if (!o->compute_only)
		MPI_Reduce_scatter_block(m->p, m->y, (int)m->blk, MPI_FLOAT,
		                         MPI_SUM, MPI_COMM_WORLD);
}

static void
setup(mlp *m, const opts *o, int r, int n)
{
	int64_t sl = o->s / n, fg = 4 * o->d;

	m->rows = o->b * o->s;
	m->d = o->d;
	m->f = fg / n;
	m->blk = o->b * sl * o->d;
	m->x = falloc(m->blk);
	m->w1 = falloc(m->d * m->f);
	m->w2 = falloc(m->f * m->d);
	m->xg = falloc(m->rows * m->d);
	m->h = falloc(m->rows * m->f);
	m->p = falloc(m->rows * m->d);
	m->y = falloc(m->blk);
	m->chunks = o->overlap;
	m->req = NULL;
	if (o->overlap) {
		m->req = calloc(2 * (size_t)o->overlap, sizeof *m->req);
		if (!m->req) {
			fprintf(stderr, "mlp_mpi: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (int i = 0; i < 2 * o->overlap; i++)
			m->req[i] = MPI_REQUEST_NULL;
	}
	for (int64_t b = 0; b < o->b; b++) /* x[b] rows r*sl.. of [S, D] */
		fill(m->x + b * sl * o->d, SEED(0), sl, o->d, o->d,
		     b * o->s + r * sl, 0);
	fill(m->w1, SEED(1), o->d, m->f, fg, 0, r * m->f);
	fill(m->w2, SEED(2), m->f, o->d, o->d, r * m->f, 0);
	for (int q = 0; q < n; q++) /* compute-only: each block holds our x */
		memcpy(m->xg + q * m->blk, m->x, (size_t)m->blk * sizeof *m->x);
}

/* CLOCK_MONOTONIC, the clock of cfrt_wtime: one for all ranks of a node. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* As the generated driver: medians in ms of the slowest rank's time and,
 * in *span_ms, of the first start to the last end over the ranks. */
static double
run_timed(mlp *m, const opts *o, double *span_ms)
{
	double *t = calloc(2 * (size_t)o->iters, sizeof *t), *span = t + o->iters;

	for (int i = 0; i < o->warmup; i++)
		forward(m, o);
	for (int i = 0; i < o->iters; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		forward(m, o);
		double t1 = now();
		double mine[3] = {t1 - t0, -t0, t1}, all[3];
		MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		t[i] = all[0];
		span[i] = all[1] + all[2];
	}
	double med = median(t, o->iters);
	*span_ms = median(span, o->iters) * 1e3;
	free(t);
	return med * 1e3;
}

/* Max |y - ref| / max |ref| over the whole output, on rank 0 (0 elsewhere):
 * ref from whole x, w1, w2 on one process. */
static double
check(const mlp *m, const opts *o, int r, int n)
{
	int64_t sl = o->s / n, fg = 4 * o->d, all = o->b * o->s * o->d;
	float *got = r == 0 ? falloc(all) : NULL;
	double maxdiff = 0, maxref = 0;

	MPI_Gather(m->y, (int)m->blk, MPI_FLOAT, got, (int)m->blk, MPI_FLOAT, 0,
	           MPI_COMM_WORLD);
	if (r != 0)
		return 0;
	float *x = falloc(all), *w1 = falloc(o->d * fg), *w2 = falloc(fg * o->d);
	float *h = falloc(o->b * o->s * fg), *y = falloc(all);
	fill(x, SEED(0), o->b * o->s, o->d, o->d, 0, 0);
	fill(w1, SEED(1), o->d, fg, fg, 0, 0);
	fill(w2, SEED(2), fg, o->d, o->d, 0, 0);
	compute_with(o->b * o->s, o->d, fg, x, w1, w2, h, y, gelu_ref);
	for (int q = 0; q < n; q++) /* got: [N][B][S/N][D] */
		for (int64_t b = 0; b < o->b; b++)
			for (int64_t i = 0; i < sl * o->d; i++) {
				double a = got[(q * o->b + b) * sl * o->d + i];
				double e = y[(b * o->s + q * sl) * o->d + i];
				maxdiff = fmax(maxdiff, a == a ? fabs(a - e) : INFINITY);
				maxref = fmax(maxref, fabs(e));
			}
	free(x), free(w1), free(w2), free(h), free(y), free(got);
	return maxref > 0 ? maxdiff / maxref : maxdiff;
}

int
main(int argc, char **argv)
{
	int r, n;
	mlp m;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	opts o = parse_opts(argc, argv, r, n);
	setup(&m, &o, r, n);
	double span_ms;
	double ms = run_timed(&m, &o, &span_ms);
	int checked = o.check && !o.compute_only && !o.comm_only;
	double err = checked ? check(&m, &o, r, n) : 0;
	if (r == 0) {
		printf("model=mlp_mpi ranks=%d backend=mpi+openblas progress=%s "
		       "time_ms=%.4f", n, o.compute_only ? "compute-only" :
		       o.comm_only ? "comm-only" : o.overlap ? "overlap" : "mpi", ms);
		if (o.overlap)
			printf(" chunks=%d", o.overlap);
		if (checked)
			printf(" max_rel_err=%.3e", err);
		printf(" span_ms=%.4f\n", span_ms);
	}
	free(m.x), free(m.w1), free(m.w2), free(m.xg), free(m.h), free(m.p);
	free(m.y), free(m.req);
	MPI_Finalize();
	return 0;
}
