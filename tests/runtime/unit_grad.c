/* Backward ops against independent references: the grads of layer norm,
 * RMS norm, softmax, the scan, sigmoid, exp (dy * y by cfrt_mul) and rope
 * (the inverse turn) against central finite differences of
 * their forward calls in f64 (L = sum(w * f(x)), w random, h = 1e-6),
 * each f32 grad against the f64 grad of the same inputs, cfrt_sum_leading
 * against a naive loop; on odd shapes, column slices of wider buffers
 * (whose other columns must not change), gamma or none, in place (dx is
 * dy), empty views; and the errors of bad arguments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

enum { PAD = 3 }; /* extra columns of a strided tensor's buffer */
#define EPS 1e-5
#define DECAY 0.8
#define FD_H 1e-6
#define FD_TOL 1e-6
#define ROPE_BASE 100.0
#define ROPE_POS 5

/* A tensor under test: view v of a buffer of n elements, h its contents
 * on the host as last uploaded. Strided: the buffer's last dim is PAD
 * wider and v is its columns 1..dim[nd-1]. Values are multiples of 2^-23
 * in [-1, 1): the same numbers in f32 and f64. */
typedef struct tens {
	void *buf;
	double *h;
	int64_t n;
	cfrt_view v;
} tens;

static tens tens_new(cfrt_dtype t, int nd, const int64_t *dim, int strided,
                     uint64_t seed)
{
	int64_t bd[CFRT_MAX_DIMS];
	tens x = {NULL, NULL, 1, {0}};
	for (int d = 0; d < nd; d++) {
		bd[d] = dim[d] + (strided && d == nd - 1 ? PAD : 0);
		x.n *= bd[d];
	}
	x.buf = ut_alloc(x.n, t);
	x.h = malloc(sizeof(double) * (size_t)(x.n + 1));
	ut_uniform(x.h, x.n, seed, CFRT_F32);
	ut_put(x.buf, x.h, x.n, t);
	x.v = cfrt_view_contig(x.buf, t, nd, bd);
	if (strided)
		x.v = cfrt_view_slice(x.v, nd - 1, 1, dim[nd - 1]);
	return x;
}

static void tens_free(tens *x)
{
	cfrt_free(ut_ctx, x->buf);
	free(x->h);
}

/* Offset in x's buffer of element k (row-major) of its view. */
static int64_t tens_off(const tens *x, int64_t k)
{
	int64_t off = ((char *)x->v.p - (char *)x->buf) /
	              (int64_t)cfrt_dtype_size(x->v.t);
	for (int d = x->v.nd - 1; d >= 0; d--) {
		off += k % x->v.dim[d] * x->v.stride[d];
		k /= x->v.dim[d];
	}
	return off;
}

/* The view's elements of buffer contents b, row-major, into out. */
static void tens_elems(const tens *x, const double *b, double *out)
{
	for (int64_t k = 0; k < cfrt_view_numel(&x->v); k++)
		out[k] = b[tens_off(x, k)];
}

/* Downloads x's buffer; 1 when every element outside its view still
 * holds the value last uploaded. got: the buffer's contents. */
static int tens_get(const tens *x, double *got)
{
	char *in = calloc((size_t)x->n + 1, 1);
	int ok = 1;
	ut_get(got, x->buf, x->n, x->v.t);
	for (int64_t k = 0; k < cfrt_view_numel(&x->v); k++)
		in[tens_off(x, k)] = 1;
	for (int64_t j = 0; j < x->n; j++)
		ok &= in[j] || got[j] == x->h[j];
	free(in);
	return ok;
}

/* ---- grads of the row ops and the scan against finite differences ---- */

enum gop { LN, RMS, SOFTMAX, SCAN, SIGMOID, EXP, ROPE };

typedef struct gcase {
	int op;
	int nd;
	int64_t dim[4];
	int strided; /* x, y, dy, dx column slices of wider buffers */
	int gamma;   /* norms: with gamma (and beta: layer norm) */
	int inplace; /* dx is dy */
	int sdim;    /* the scan's dim; rope's positions' */
} gcase;

static const gcase gcases[] = {
	{LN, 4, {2, 3, 2, 7}, 0, 1, 0, 0},
	{LN, 2, {3, 7}, 1, 0, 0, 0},
	{LN, 2, {3, 7}, 1, 1, 1, 0},
	{LN, 2, {4, 1}, 0, 1, 0, 0},
	{RMS, 4, {2, 3, 2, 7}, 0, 0, 0, 0},
	{RMS, 2, {3, 7}, 1, 1, 0, 0},
	{RMS, 2, {3, 7}, 1, 0, 1, 0},
	{RMS, 2, {4, 1}, 0, 1, 0, 0},
	{SOFTMAX, 4, {2, 3, 2, 7}, 0, 0, 0, 0},
	{SOFTMAX, 2, {3, 7}, 1, 0, 0, 0},
	{SOFTMAX, 2, {3, 7}, 1, 0, 1, 0},
	{SCAN, 3, {2, 5, 3}, 0, 0, 0, 1},
	{SCAN, 3, {2, 5, 3}, 1, 0, 0, 0},
	{SCAN, 3, {2, 3, 7}, 1, 0, 1, 2},
	{SCAN, 3, {2, 3, 7}, 0, 0, 0, 1},
	{SIGMOID, 3, {2, 3, 7}, 0, 0, 0, 0},
	{SIGMOID, 2, {3, 7}, 1, 0, 1, 0},
	{EXP, 3, {2, 3, 7}, 0, 0, 0, 0},
	{EXP, 2, {3, 7}, 1, 0, 1, 0},
	{ROPE, 4, {2, 3, 5, 6}, 0, 0, 0, 2},
	{ROPE, 4, {2, 5, 3, 6}, 0, 0, 0, 1}, /* [B, S, H, Dh] */
	{ROPE, 2, {3, 8}, 1, 0, 0, 0},
	{ROPE, 3, {2, 7, 2}, 1, 0, 1, 1},
	{ROPE, 3, {4, 3, 2}, 1, 0, 0, 0},
};

/* The operands of a case in type t: gamma (every other element of its
 * buffer when strided) and beta, x, the forward's y, dy (its values are
 * the weights w of L) and dx (dy itself in place). */
typedef struct gargs {
	const gcase *c;
	tens g, b, x, y, dy, dx;
} gargs;

static gargs gargs_new(const gcase *c, cfrt_dtype t)
{
	gargs a = {c, {0}, {0}, {0}, {0}, {0}, {0}};
	int64_t d = c->dim[c->nd - 1], gd[2] = {d, 2};
	a.g = tens_new(t, 2, gd, 0, 21);
	a.g.v = cfrt_view_slice(a.g.v, 1, 0, 1);
	a.g.v.nd = 1;
	if (!c->strided)
		a.g.v.stride[0] = 1;
	a.b = tens_new(t, 1, &d, 0, 22);
	a.x = tens_new(t, c->nd, c->dim, c->strided, 23);
	a.y = tens_new(t, c->nd, c->dim, c->strided, 24);
	a.dy = tens_new(t, c->nd, c->dim, c->strided, 25);
	a.dx = c->inplace ? a.dy : tens_new(t, c->nd, c->dim, c->strided, 26);
	return a;
}

static void gargs_free(gargs *a)
{
	tens *all[] = {&a->g, &a->b, &a->x, &a->y, &a->dy, &a->dx};
	for (int i = 0; i < (a->c->inplace ? 5 : 6); i++)
		tens_free(all[i]);
}

/* y = f(x). */
static int forward(const gargs *a)
{
	const cfrt_view *g = a->c->gamma ? &a->g.v : NULL;
	switch (a->c->op) {
	case LN:
		return cfrt_layernorm(ut_ctx, &a->y.v, &a->x.v, g,
		                      g ? &a->b.v : NULL, EPS);
	case RMS:
		return cfrt_rmsnorm(ut_ctx, &a->y.v, &a->x.v, g, EPS);
	case SOFTMAX:
		return cfrt_softmax(ut_ctx, &a->y.v, &a->x.v);
	case SIGMOID:
		return cfrt_sigmoid(ut_ctx, &a->y.v, &a->x.v);
	case EXP:
		return cfrt_exp(ut_ctx, &a->y.v, &a->x.v);
	case ROPE:
		return cfrt_rope(ut_ctx, &a->y.v, &a->x.v, a->c->sdim, ROPE_BASE, ROPE_POS, 0);
	default:
		return cfrt_scan(ut_ctx, &a->y.v, &a->x.v, a->c->sdim, DECAY);
	}
}

/* dx from dy (softmax, sigmoid, exp: from y = f(x), computed first). */
static int backward(const gargs *a)
{
	const cfrt_view *g = a->c->gamma ? &a->g.v : NULL;
	int op = a->c->op;
	int rc = op == SOFTMAX || op == SIGMOID || op == EXP ? forward(a) : CFRT_OK;
	if (rc != CFRT_OK)
		return rc;
	switch (op) {
	case SIGMOID:
		return cfrt_sigmoid_grad(ut_ctx, &a->dx.v, &a->dy.v, &a->y.v);
	case EXP:
		return cfrt_mul(ut_ctx, &a->dx.v, &a->dy.v, &a->y.v);
	case ROPE:
		return cfrt_rope(ut_ctx, &a->dx.v, &a->dy.v, a->c->sdim, ROPE_BASE, ROPE_POS, 1);
	case LN:
		return cfrt_layernorm_grad(ut_ctx, &a->dx.v, &a->dy.v, &a->x.v, g,
		                           EPS);
	case RMS:
		return cfrt_rmsnorm_grad(ut_ctx, &a->dx.v, &a->dy.v, &a->x.v, g,
		                         EPS);
	case SOFTMAX:
		return cfrt_softmax_grad(ut_ctx, &a->dx.v, &a->dy.v, &a->y.v);
	default:
		return cfrt_scan_grad(ut_ctx, &a->dx.v, &a->dy.v, a->c->sdim,
		                      DECAY);
	}
}

/* dx of the case in its type, row-major into got; 1 when dx's buffer
 * outside its view is untouched. */
static int grad_of(const gargs *a, double *got)
{
	double *buf = malloc(sizeof(double) * (size_t)(a->dx.n + 1));
	CU_ASSERT_EQUAL(backward(a), CFRT_OK);
	int ok = tens_get(&a->dx, buf);
	tens_elems(&a->dx, buf, got);
	free(buf);
	return ok;
}

/* L = sum(w * f(x)) with x's host values as they are now (f64). */
static double loss(gargs *a, const double *w)
{
	double L = 0.0;
	ut_put(a->x.buf, a->x.h, a->x.n, CFRT_F64);
	CU_ASSERT_EQUAL(forward(a), CFRT_OK);
	ut_get(a->y.h, a->y.buf, a->y.n, CFRT_F64);
	for (int64_t k = 0; k < cfrt_view_numel(&a->y.v); k++)
		L += w[k] * a->y.h[tens_off(&a->y, k)];
	return L;
}

/* dL/dx by central differences, one element of x at a time. */
static void fd_grad(gargs *a, const double *w, double *fd)
{
	for (int64_t k = 0; k < cfrt_view_numel(&a->x.v); k++) {
		int64_t j = tens_off(&a->x, k);
		double x0 = a->x.h[j];
		a->x.h[j] = x0 + FD_H;
		double lp = loss(a, w);
		a->x.h[j] = x0 - FD_H;
		double lm = loss(a, w);
		a->x.h[j] = x0;
		fd[k] = (lp - lm) / (2 * FD_H);
	}
	ut_put(a->x.buf, a->x.h, a->x.n, CFRT_F64);
}

/* The f64 grad against finite differences, the f32 grad against the f64
 * one; dx's buffer outside its view unchanged in both. */
static void grad_case(const gcase *c)
{
	gargs a = gargs_new(c, CFRT_F64), s = gargs_new(c, CFRT_F32);
	int64_t n = cfrt_view_numel(&a.x.v);
	double *w = malloc(sizeof(double) * (size_t)(4 * n + 1));
	double *fd = w + n, *got = fd + n, *got32 = got + n;
	tens_elems(&a.dy, a.dy.h, w);
	fd_grad(&a, w, fd);
	CU_ASSERT(grad_of(&a, got));
	CU_ASSERT(ut_maxrel(got, fd, n) <= FD_TOL);
	CU_ASSERT(grad_of(&s, got32));
	CU_ASSERT(ut_maxrel(got32, got, n) <= ut_tol(CFRT_F32));
	free(w);
	gargs_free(&a);
	gargs_free(&s);
}

static void test_grad_fd(void)
{
	for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++)
		grad_case(&gcases[i]);
}

/* Views with no element: every grad returns CFRT_OK and writes nothing. */
static void test_grad_empty(void)
{
	static const int64_t shapes[][2] = {{3, 0}, {0, 7}};
	for (int s = 0; s < 2; s++)
		for (int op = LN; op <= SCAN; op++) {
			gcase c = {op, 2, {shapes[s][0], shapes[s][1]}, s == 0, 1,
			           0, 0};
			gargs a = gargs_new(&c, CFRT_F64);
			double *got = malloc(sizeof(double) * (size_t)(a.dx.n + 1));
			CU_ASSERT_EQUAL(backward(&a), CFRT_OK);
			CU_ASSERT(tens_get(&a.dx, got));
			free(got);
			gargs_free(&a);
		}
}

/* ---- cfrt_sum_leading against a naive loop ---- */

/* src [lead0,3,4,5] (columns 1..5 of a wider buffer when strided) summed
 * into dst, its last nd dims (nd 4: a copy), dst strided too; dst starts
 * with other values, which the call must not add to. */
static void sum_case(cfrt_dtype t, int64_t lead0, int nd, int strided)
{
	int64_t sd[4] = {lead0, 3, 4, 5};
	tens src = tens_new(t, 4, sd, strided, 31);
	tens dst = tens_new(t, nd, sd + 4 - nd, strided, 32);
	int64_t ns = cfrt_view_numel(&src.v), nd_el = cfrt_view_numel(&dst.v);
	double *x = malloc(sizeof(double) * (size_t)(ns + 2 * nd_el));
	double *want = x + ns, *got = want + nd_el;
	tens_elems(&src, src.h, x);
	memset(want, 0, sizeof(double) * (size_t)nd_el);
	for (int64_t k = 0; k < ns; k++)
		want[k % nd_el] += x[k];
	double *all = malloc(sizeof(double) * (size_t)dst.n);
	CU_ASSERT_EQUAL(cfrt_sum_leading(ut_ctx, &dst.v, &src.v), CFRT_OK);
	CU_ASSERT(tens_get(&dst, all));
	tens_elems(&dst, all, got);
	CU_ASSERT(ut_maxrel(got, want, nd_el) <= ut_tol(t));
	free(all);
	free(x);
	tens_free(&src);
	tens_free(&dst);
}

static void test_sum_leading(void)
{
	static const cfrt_dtype types[] = {CFRT_F32, CFRT_F64};
	for (int ti = 0; ti < 2; ti++)
		for (int nd = 1; nd <= 4; nd++)
			for (int strided = 0; strided < 2; strided++)
				sum_case(types[ti], 2, nd, strided);
	sum_case(CFRT_F64, 0, 1, 0); /* no rows: dst becomes 0 */
	sum_case(CFRT_F64, 0, 3, 0);
}

/* ---- errors name the call and the problem ---- */

static void expect(int rc, int want, const char *msg)
{
	CU_ASSERT_EQUAL(rc, want);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), msg);
}

static void test_grad_errors(void)
{
	double a[24] = {0}, b[24] = {0};
	cfrt_view x23 = cfrt_view_contig(a, CFRT_F64, 2, (int64_t[]){2, 3});
	cfrt_view y32 = cfrt_view_contig(b, CFRT_F64, 2, (int64_t[]){3, 2});
	cfrt_view x24 = cfrt_view_contig(b, CFRT_F64, 2, (int64_t[]){2, 4});
	cfrt_view g4 = cfrt_view_contig(b, CFRT_F64, 1, (int64_t[]){4});
	cfrt_view f3 = cfrt_view_contig(b, CFRT_F32, 1, (int64_t[]){3});
	cfrt_view h3 = cfrt_view_contig(b, CFRT_BF16, 1, (int64_t[]){3});
	expect(cfrt_layernorm_grad(ut_ctx, &x23, &y32, &x23, NULL, EPS),
	       CFRT_EINVAL, "cfrt_layernorm_grad: view dx [2,3] and view dy "
	       "[3,2] differ in shape");
	expect(cfrt_rmsnorm_grad(ut_ctx, &x23, &x23, &x24, NULL, EPS),
	       CFRT_EINVAL, "cfrt_rmsnorm_grad: view dx [2,3] and view x "
	       "[2,4] differ in shape");
	expect(cfrt_layernorm_grad(ut_ctx, &x23, &x23, &x23, &g4, EPS),
	       CFRT_EINVAL, "cfrt_layernorm_grad: gamma must be a 1-d view of "
	       "3 elements of the input's dtype");
	expect(cfrt_rmsnorm_grad(ut_ctx, &x23, &x23, &x23, NULL, -1.0),
	       CFRT_EINVAL, "cfrt_rmsnorm_grad: eps -1 is negative");
	expect(cfrt_softmax_grad(ut_ctx, &x23, &x23, &x24), CFRT_EINVAL,
	       "cfrt_softmax_grad: view dx [2,3] and view y [2,4] differ in "
	       "shape");
	expect(cfrt_softmax_grad(ut_ctx, NULL, &x23, &x23), CFRT_EINVAL,
	       "cfrt_softmax_grad: view dx is NULL");
	expect(cfrt_scan_grad(ut_ctx, &x23, &x23, 2, DECAY), CFRT_EINVAL,
	       "cfrt_scan_grad: dim 2 of a 2-d view");
	expect(cfrt_scan_grad(ut_ctx, &x23, &y32, 0, DECAY), CFRT_EINVAL,
	       "cfrt_scan_grad: view dx [2,3] and view dy [3,2] differ in "
	       "shape");
	expect(cfrt_sum_leading(ut_ctx, &x23, &g4), CFRT_EINVAL,
	       "cfrt_sum_leading: view dst has 2 dims, more than the 1 of src");
	expect(cfrt_sum_leading(ut_ctx, &g4, &x23), CFRT_EINVAL,
	       "cfrt_sum_leading: dim 0 of dst has extent 4, dim 1 of src 3: "
	       "dst must have the last dims of src");
	expect(cfrt_sum_leading(ut_ctx, &x23, &y32), CFRT_EINVAL,
	       "cfrt_sum_leading: dim 0 of dst has extent 2, dim 0 of src 3: "
	       "dst must have the last dims of src");
	expect(cfrt_sum_leading(ut_ctx, &f3, &x23), CFRT_EINVAL,
	       "cfrt_sum_leading: views dst and src have different dtypes");
	expect(cfrt_sum_leading(ut_ctx, &h3, &h3), CFRT_ENOTSUP,
	       "cfrt_sum_leading: bf16 is not supported by the mpi backend");
}

void ut_register_grad(void)
{
	CU_pSuite s = CU_add_suite("grad", NULL, NULL);
	CU_add_test(s, "norm, softmax, scan, sigmoid, exp, rope grads vs finite differences",
	            test_grad_fd);
	CU_add_test(s, "grads of views with no element", test_grad_empty);
	CU_add_test(s, "sum_leading: 1-4 dims, strided, no rows",
	            test_sum_leading);
	CU_add_test(s, "grad error messages", test_grad_errors);
}
