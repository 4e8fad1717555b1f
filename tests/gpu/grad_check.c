/* grad_check: the backward calls of the CUDA backend (cfrt_layernorm_grad,
 * cfrt_rmsnorm_grad, cfrt_softmax_grad, cfrt_sum_leading, cfrt_scan_grad)
 * on one GPU, in f32, bf16 and f16, against a double-precision reference on the
 * host from the same rounded inputs. The cases cover rows longer than a
 * block and shorter than a warp, column slices of wider buffers (whose
 * other columns must not change), gamma NULL or a view of stride 2, dx =
 * dy in place, softmax's y from cfrt_softmax, a scan along the first, a
 * middle and the last dim, sums into a dst of 1, 2 and all the dims (a
 * copy) and over no rows at all (dst = 0), and views with no element.
 * The norms' rows held in registers (contiguous rows of at most 8192,
 * grad.cu's norm_grad_rows_reg) and the general kernel (longer rows, odd
 * lengths on both sides of the bound), and the sum's two-pass path for
 * contiguous rows (odd row and column counts, more rows than a chunk)
 * beside the general one (strided views, several dst dims). The
 * forward norms (cfrt_layernorm, cfrt_rmsnorm: LNF, RMSF) too, whose
 * fast kernel is the same kind (kernels.cu's norm_rows_reg): they read
 * dy as their input, so that in place is out = dy. cfrt_rmsnorm_grad_rows
 * twice a case: its dx checked (RMSD, in place: dx = dy) and its rows,
 * dy * xhat (RMSR), each against the double reference (rows: of
 * rmsnorm then mul, the calls it stands for). The norms' warp-per-row
 * kernels of both passes (rows of whole 16-byte vectors, at most 512 of
 * them, contiguous gamma: grad.cu's norm_grad_rows_warp, kernels.cu's
 * norm_rows_warp) and the sum's 16-byte columns (sum_rows_part_vec)
 * have cases of their own, full and partial last rounds of lanes.
 * Prints "grad_check: CASE: ... ok" (or MISMATCH) per case and
 * "grad_check: all ok" at the end; exits 1 on any mismatch. Run it under
 * mpirun -n 1 (mpirun --allow-run-as-root -n 1 grad_check). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "hostval.h"

/* max |x - y| / max |y|: f32 accumulation differs from the double
 * reference by ~1e-6 of the largest value; bf16 adds one rounding of its
 * result, u = 2^-9 (tests/gpu/run.sh). */
#define TOL_F32 1e-5
#define TOL_BF16 1e-2
#define EPS 1e-5
#define DECAY 0.8
enum { PAD = 3 }; /* extra columns of a strided tensor's buffer */

enum op { LN, RMS, SOFTMAX, SUM, SCAN, LNF, RMSF, RMSD, RMSR };
static const char *const op_names[] = {"layernorm_grad", "rmsnorm_grad",
                                       "softmax_grad", "sum_leading",
                                       "scan_grad", "layernorm", "rmsnorm",
                                       "rmsnorm_grad_rows dx",
                                       "rmsnorm_grad_rows rows"};

typedef struct gcase {
	int op, nd;
	int64_t dim[4]; /* x's (SUM: src's) */
	int strided;    /* every view a column slice of a wider buffer */
	int gamma;      /* norms: with gamma */
	int inplace;    /* dx is dy */
	int arg;        /* SCAN: the dim; SUM: dst's number of dims */
} gcase;

static const gcase cases[] = {
	{LN, 3, {2, 3, 1000}, 1, 1, 0, 0},
	{LN, 2, {5, 7}, 0, 0, 0, 0},
	{LN, 2, {64, 4096}, 0, 1, 1, 0},
	{LN, 2, {3, 0}, 1, 1, 0, 0},
	{RMS, 3, {2, 3, 1000}, 1, 1, 0, 0},
	{RMS, 2, {5, 7}, 0, 0, 0, 0},
	{RMS, 2, {64, 4096}, 1, 0, 1, 0},
	{SOFTMAX, 3, {3, 5, 777}, 1, 0, 0, 0},
	{SOFTMAX, 2, {64, 2048}, 0, 0, 1, 0},
	{SOFTMAX, 2, {4, 7}, 0, 0, 0, 0},
	{SUM, 3, {8, 16, 300}, 0, 0, 0, 1},
	{SUM, 3, {8, 16, 300}, 1, 0, 0, 2},
	{SUM, 3, {4, 1000, 64}, 0, 0, 0, 1},
	{SUM, 3, {2, 3, 37}, 1, 0, 0, 3},
	{SUM, 2, {0, 5}, 0, 0, 0, 1},
	{RMS, 2, {7, 8192}, 0, 1, 0, 0},
	{RMS, 2, {3, 8193}, 0, 1, 0, 0},
	{RMS, 3, {2, 5, 4097}, 1, 1, 1, 0},
	{RMS, 2, {9, 33}, 0, 1, 0, 0},
	{LN, 2, {5, 8192}, 1, 1, 0, 0},
	{LN, 2, {3, 9001}, 0, 1, 0, 0},
	{SUM, 3, {3, 1037, 129}, 0, 0, 0, 1},
	{SUM, 2, {4099, 4096}, 0, 0, 0, 1},
	{SUM, 2, {17, 1}, 0, 0, 0, 1},
	{SUM, 3, {3, 1037, 129}, 1, 0, 0, 1},
	{RMSF, 2, {64, 4096}, 0, 1, 0, 0},
	{RMSF, 3, {2, 5, 4097}, 1, 1, 1, 0},
	{RMSF, 2, {3, 8193}, 0, 0, 0, 0},
	{RMSF, 2, {5, 7}, 0, 1, 0, 0},
	{LNF, 2, {9, 1000}, 1, 1, 0, 0},
	{LNF, 2, {3, 9001}, 0, 1, 1, 0},
	{RMSD, 2, {64, 4096}, 0, 1, 0, 0},
	{RMSR, 2, {64, 4096}, 0, 1, 0, 0},
	{RMSD, 3, {2, 5, 4097}, 1, 1, 1, 0},
	{RMSR, 3, {2, 5, 4097}, 1, 1, 0, 0},
	{RMSD, 2, {3, 8193}, 0, 1, 0, 0},
	{RMSR, 2, {3, 8193}, 0, 0, 0, 0},
	{RMSR, 2, {9, 33}, 1, 1, 0, 0},
	/* a warp a row (grad.cu's norm_grad_rows_warp, kernels.cu's
	 * norm_rows_warp: rows of whole 16-byte vectors, at most 512 of
	 * them; 2056 and 24: a last round of fewer lanes) and the sum's
	 * 16-byte columns (sum_rows_part_vec) */
	{RMS, 2, {33, 2048}, 0, 1, 0, 0},
	{LN, 2, {6, 1000}, 0, 0, 1, 0},
	{LN, 2, {7, 2056}, 0, 1, 0, 0},
	{RMSD, 2, {5, 24}, 0, 1, 1, 0},
	{RMSR, 2, {9, 2056}, 0, 1, 0, 0},
	{RMSF, 2, {33, 2048}, 0, 1, 0, 0},
	{LNF, 2, {6, 1000}, 0, 1, 1, 0},
	{SUM, 2, {1000, 520}, 0, 0, 0, 1},
	{SUM, 3, {2, 333, 24}, 0, 0, 0, 1},
	{SCAN, 3, {4, 100, 33}, 1, 0, 0, 1},
	{SCAN, 2, {16, 1000}, 0, 0, 1, 1},
	{SCAN, 2, {50, 7}, 1, 0, 0, 0},
	{SCAN, 2, {0, 7}, 0, 0, 0, 0},
};

/* A tensor on the device: view v of buf (n elements), h its bytes on the
 * host. Strided: the buffer's last dim is PAD wider, v its columns 1... */
typedef struct dtens {
	void *buf;
	int64_t n;
	cfrt_view v;
	unsigned char *h;
} dtens;

static double elem(const dtens *x, int64_t j)
{
	return host_elem(x->v.t, x->h, j);
}

static void dt_download(cfrt_ctx *ctx, dtens *x)
{
	size_t bytes = (size_t)x->n * cfrt_dtype_size(x->v.t);
	CFRT_TRY(ctx, cfrt_download(ctx, x->h, x->buf, bytes));
}

static dtens dt_new(cfrt_ctx *ctx, cfrt_dtype t, int nd, const int64_t *dim,
                    int strided, uint64_t seed)
{
	int64_t bd[CFRT_MAX_DIMS];
	dtens x = {NULL, 1, {0}, NULL};
	for (int d = 0; d < nd; d++) {
		bd[d] = dim[d] + (strided && d == nd - 1 ? PAD : 0);
		x.n *= bd[d];
	}
	size_t bytes = (size_t)x.n * cfrt_dtype_size(t);
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x.buf, bytes));
	cfrt_view all = cfrt_view_contig(x.buf, t, 1, &x.n);
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &all, seed));
	x.v = cfrt_view_contig(x.buf, t, nd, bd);
	if (strided)
		x.v = cfrt_view_slice(x.v, nd - 1, 1, dim[nd - 1]);
	x.h = malloc(bytes + 4);
	dt_download(ctx, &x);
	return x;
}

static void dt_free(cfrt_ctx *ctx, dtens *x)
{
	CFRT_TRY(ctx, cfrt_free(ctx, x->buf));
	free(x->h);
}

/* Offset in x's buffer of element k (row-major) of its view. */
static int64_t dt_off(const dtens *x, int64_t k)
{
	int64_t off = ((char *)x->v.p - (char *)x->buf) /
	              (int64_t)cfrt_dtype_size(x->v.t);
	for (int d = x->v.nd - 1; d >= 0; d--) {
		off += k % x->v.dim[d] * x->v.stride[d];
		k /= x->v.dim[d];
	}
	return off;
}

static double at(const dtens *x, int64_t k)
{
	return elem(x, dt_off(x, k));
}

/* The operands of a case: x (SUM: src; SOFTMAX: y = softmax of the
 * random x), dy, gamma (every other element when strided), out (dx, or
 * the sum's dst; dy itself in place). */
typedef struct ops {
	dtens x, dy, g, out;
	dtens other; /* RMSD, RMSR: the output of the two not checked */
} ops;

static ops make_ops(cfrt_ctx *ctx, const gcase *c, cfrt_dtype t)
{
	ops o;
	int64_t n = c->dim[c->nd - 1], gn = 2 * n;
	o.x = dt_new(ctx, t, c->nd, c->dim, c->strided, 1);
	if (c->op == SOFTMAX && cfrt_view_numel(&o.x.v) > 0) {
		CFRT_TRY(ctx, cfrt_scale(ctx, &o.x.v, &o.x.v, 4.0));
		CFRT_TRY(ctx, cfrt_softmax(ctx, &o.x.v, &o.x.v));
		dt_download(ctx, &o.x);
	}
	o.dy = dt_new(ctx, t, c->nd, c->dim, c->strided, 2);
	o.g = dt_new(ctx, t, 1, &gn, 0, 3);
	o.g.v.dim[0] = n;
	o.g.v.stride[0] = c->strided ? 2 : 1;
	if (c->op == SUM)
		o.out = dt_new(ctx, t, c->arg, c->dim + c->nd - c->arg, c->strided,
		               4);
	else
		o.out = c->inplace ? o.dy : dt_new(ctx, t, c->nd, c->dim,
		                                   c->strided, 4);
	if (c->op == RMSD || c->op == RMSR)
		o.other = dt_new(ctx, t, c->nd, c->dim, c->strided, 5);
	return o;
}

static void free_ops(cfrt_ctx *ctx, const gcase *c, ops *o)
{
	dt_free(ctx, &o->x);
	dt_free(ctx, &o->dy);
	dt_free(ctx, &o->g);
	if (c->op == SUM || !c->inplace)
		dt_free(ctx, &o->out);
	if (c->op == RMSD || c->op == RMSR)
		dt_free(ctx, &o->other);
}

static int call(cfrt_ctx *ctx, const gcase *c, ops *o)
{
	const cfrt_view *g = c->gamma ? &o->g.v : NULL;
	switch (c->op) {
	case LN:
		return cfrt_layernorm_grad(ctx, &o->out.v, &o->dy.v, &o->x.v, g,
		                           EPS);
	case RMS:
		return cfrt_rmsnorm_grad(ctx, &o->out.v, &o->dy.v, &o->x.v, g,
		                         EPS);
	case SOFTMAX:
		return cfrt_softmax_grad(ctx, &o->out.v, &o->dy.v, &o->x.v);
	case SUM:
		return cfrt_sum_leading(ctx, &o->out.v, &o->x.v);
	case RMSD:
		return cfrt_rmsnorm_grad_rows(ctx, &o->out.v, &o->other.v, &o->dy.v,
		                              &o->x.v, g, EPS);
	case RMSR:
		return cfrt_rmsnorm_grad_rows(ctx, &o->other.v, &o->out.v, &o->dy.v,
		                              &o->x.v, g, EPS);
	case LNF:
		return cfrt_layernorm(ctx, &o->out.v, &o->dy.v, g, NULL, EPS);
	case RMSF:
		return cfrt_rmsnorm(ctx, &o->out.v, &o->dy.v, g, EPS);
	default:
		return cfrt_scan_grad(ctx, &o->out.v, &o->dy.v, c->arg, DECAY);
	}
}

/* dx of one row of n elements, as cfrt.h writes it, from x (SOFTMAX: y),
 * dy and gamma g. */
static void ref_row(int op, const double *x, const double *dy,
                    const double *g, int64_t n, double *dx)
{
	double mean = 0, var = 0, sg = 0, sgx = 0, s = 0;
	if (op == LNF || op == RMSF) { /* the forward of dy's row */
		for (int64_t i = 0; i < n; i++)
			mean += op == LNF ? dy[i] / (double)n : 0;
		for (int64_t i = 0; i < n; i++)
			var += (dy[i] - mean) * (dy[i] - mean) / (double)n;
		for (int64_t i = 0; i < n; i++)
			dx[i] = (dy[i] - mean) / sqrt(var + EPS) * g[i];
		return;
	}
	if (op == RMSR) { /* dy * xhat */
		for (int64_t i = 0; i < n; i++)
			var += x[i] * x[i] / (double)n;
		for (int64_t i = 0; i < n; i++)
			dx[i] = dy[i] * (x[i] / sqrt(var + EPS));
		return;
	}
	if (op == RMSD)
		op = RMS;
	for (int64_t i = 0; i < n; i++) {
		mean += op == LN ? x[i] / (double)n : 0;
		s += dy[i] * x[i];
	}
	for (int64_t i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean) / (double)n;
	double inv = 1 / sqrt(var + EPS), xs = op == LN ? inv : 1;
	for (int64_t i = 0; i < n; i++) {
		sg += dy[i] * g[i] / (double)n;
		sgx += dy[i] * g[i] * (x[i] - mean) * xs / (double)n;
	}
	for (int64_t i = 0; i < n; i++) {
		double gi = dy[i] * g[i], u = x[i] - mean;
		dx[i] = op == SOFTMAX ? x[i] * (dy[i] - s)
		        : op == RMS ? inv * gi - u * inv * inv * inv * sgx
		                    : inv * (gi - sg - u * inv * sgx);
	}
}

/* The rows' grads, row r at want + r * n. */
static void ref_rows(const gcase *c, const ops *o, double *want)
{
	int64_t n = c->dim[c->nd - 1], total = cfrt_view_numel(&o->x.v);
	double *x = malloc(sizeof(double) * (size_t)(3 * n + 1));
	double *dy = x + n, *g = dy + n;
	for (int64_t i = 0; i < n; i++)
		g[i] = c->gamma ? at(&o->g, i) : 1;
	for (int64_t r = 0; n > 0 && r * n < total; r++) {
		for (int64_t i = 0; i < n; i++) {
			x[i] = at(&o->x, r * n + i);
			dy[i] = at(&o->dy, r * n + i);
		}
		ref_row(c->op, x, dy, g, n, want + r * n);
	}
	free(x);
}

/* The sum's dst (k % its elements) and the reverse scan. */
static void ref_other(const gcase *c, const ops *o, double *want)
{
	int64_t ns = cfrt_view_numel(&o->x.v), nd = cfrt_view_numel(&o->out.v);
	if (c->op == SUM) {
		memset(want, 0, sizeof(double) * (size_t)nd);
		for (int64_t k = 0; k < ns; k++)
			want[k % nd] += at(&o->x, k);
		return;
	}
	int64_t inner = 1, len = c->dim[c->arg];
	for (int d = c->arg + 1; d < c->nd; d++)
		inner *= c->dim[d];
	for (int64_t k = nd - 1; k >= 0; k--) {
		double next = k / inner % len + 1 < len ? want[k + inner] : 0;
		want[k] = at(&o->dy, k) + DECAY * next;
	}
}

/* max |got - want| / max |want| over out's view (got: out's buffer as
 * downloaded into out.h); *bad: elements of the buffer outside the view
 * that differ from before. */
static double rel_err(const ops *o, const double *want,
                      const unsigned char *before, int64_t *bad)
{
	int64_t n = cfrt_view_numel(&o->out.v);
	size_t es = cfrt_dtype_size(o->out.v.t);
	char *in = calloc((size_t)o->out.n + 1, 1);
	double e = 0, w = 0;
	for (int64_t k = 0; k < n; k++) {
		double dif = fabs(at(&o->out, k) - want[k]);
		e = isnan(dif) ? INFINITY : fmax(e, dif);
		w = fmax(w, fabs(want[k]));
		in[dt_off(&o->out, k)] = 1;
	}
	*bad = 0;
	for (int64_t j = 0; j < o->out.n; j++)
		*bad += !in[j] && memcmp(o->out.h + j * (int64_t)es,
		                         before + j * (int64_t)es, es);
	free(in);
	return e / (w > 0 ? w : 1);
}

static void case_name(const gcase *c, cfrt_dtype t, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s %s [", op_names[c->op],
	                 t == CFRT_F32 ? "f32" : t == CFRT_F16 ? "f16" : "bf16");
	for (int d = 0; d < c->nd; d++)
		k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? "," : "",
		              (long long)c->dim[d]);
	k += snprintf(buf + k, n - (size_t)k, "]%s%s%s",
	              c->strided ? " strided" : "", c->gamma ? " gamma" : "",
	              c->inplace ? " in place" : "");
	if (c->op == SCAN)
		snprintf(buf + k, n - (size_t)k, " along dim %d", c->arg);
	if (c->op == SUM)
		snprintf(buf + k, n - (size_t)k, " into %d dim%s", c->arg,
		         c->arg > 1 ? "s" : "");
}

/* Runs a case; 0 when the call matches the reference. */
static int run_case(cfrt_ctx *ctx, const gcase *c, cfrt_dtype t)
{
	char name[160];
	ops o = make_ops(ctx, c, t);
	int64_t n = cfrt_view_numel(&o.out.v), bad;
	size_t bytes = (size_t)o.out.n * cfrt_dtype_size(t);
	unsigned char *before = malloc(bytes + 4);
	double *want = malloc(sizeof(double) * (size_t)(n + 1));
	memcpy(before, o.out.h, bytes);
	if (c->op == SUM || c->op == SCAN)
		ref_other(c, &o, want);
	else
		ref_rows(c, &o, want);
	int rc = call(ctx, c, &o);
	dt_download(ctx, &o.out);
	double e = rel_err(&o, want, before, &bad);
	int ok = rc == CFRT_OK && e <= (t == CFRT_F32 ? TOL_F32 : TOL_BF16) &&
	         bad == 0;
	case_name(c, t, name, sizeof name);
	printf("grad_check: %s: vs double reference %.2e, %lld written outside "
	       "the view%s%s: %s\n", name, e, (long long)bad,
	       rc == CFRT_OK ? "" : ", failed: ",
	       rc == CFRT_OK ? "" : cfrt_last_error(ctx), ok ? "ok" : "MISMATCH");
	free(before);
	free(want);
	free_ops(ctx, c, &o);
	return !ok;
}

int main(int argc, char **argv)
{
	static const cfrt_dtype types[] = {CFRT_F32, CFRT_BF16, CFRT_F16};
	cfrt_ctx *ctx;
	int bad = 0, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "grad_check"));
	for (int ti = 0; ti < 3; ti++)
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			bad += run_case(ctx, &cases[i], types[ti]);
	printf("grad_check: %s\n", bad ? "MISMATCH" : "all ok");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return bad ? 1 : 0;
}
