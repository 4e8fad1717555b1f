/* check.c: argument checks of the compute ops (fill, elementwise, scan,
 * norms, softmax) and of their backward ops, and cfrt_fill_uniform, which
 * is cfrt_fill_global over the whole tensor. ensures: a check that passes
 * leaves views that the backends' line walks and kernels can take as they
 * are. */
#include "common.h"

/* dst is a window at offs of a tensor of dims gdims. */
static int check_window(cfrt_ctx *ctx, const cfrt_view *dst,
                        const int64_t *gdims, const int64_t *offs)
{
	if (!gdims || !offs)
		return cfrti_err(ctx, CFRT_EINVAL, "null global dims or offsets");
	for (int d = 0; d < dst->nd; d++)
		if (offs[d] < 0 || offs[d] + dst->dim[d] > gdims[d])
			return cfrti_err(ctx, CFRT_EINVAL, "dim %d: window %lld+%lld "
			                 "exceeds the global extent %lld", d,
			                 (long long)offs[d], (long long)dst->dim[d],
			                 (long long)gdims[d]);
	return CFRT_OK;
}

int cfrti_check_fill(cfrt_ctx *ctx, const cfrt_view *dst,
                     const int64_t *gdims, const int64_t *offs)
{
	int rc = cfrti_check_view(ctx, dst, "dst");
	return rc != CFRT_OK ? rc : check_window(ctx, dst, gdims, offs);
}

int cfrt_fill_uniform(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed)
{
	int64_t zero[CFRT_MAX_DIMS] = {0};
	return cfrt_fill_global(ctx, dst, seed, dst ? dst->dim : NULL, zero);
}

/* a and b: the same elements in the same places. */
int cfrti_view_eq(const cfrt_view *a, const cfrt_view *b)
{
	if (a->p != b->p || a->t != b->t || a->nd != b->nd)
		return 0;
	for (int d = 0; d < a->nd; d++)
		if (a->dim[d] != b->dim[d] || (a->dim[d] > 1 && a->stride[d] != b->stride[d]))
			return 0;
	return 1;
}

/* The bytes from v's lowest element to past its highest. */
static void byte_span(const cfrt_view *v, uintptr_t *lo, uintptr_t *hi)
{
	intptr_t l = 0, h = 0;
	for (int d = 0; d < v->nd; d++) {
		if (v->dim[d] == 0) {
			*lo = *hi = (uintptr_t)v->p;
			return;
		}
		intptr_t e = (intptr_t)(v->stride[d] * (v->dim[d] - 1));
		if (e < 0)
			l += e;
		else
			h += e;
	}
	size_t es = cfrt_dtype_size(v->t);
	*lo = (uintptr_t)v->p + (uintptr_t)(l * (intptr_t)es);
	*hi = (uintptr_t)v->p + (uintptr_t)((h + 1) * (intptr_t)es);
}

/* cfrt_matmul_add's result c and addend d: one dtype, the same dims, and
 * d either c itself or apart from it. */
int cfrti_check_matmul_add(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *d)
{
	int rc = cfrti_check_same(ctx, c, d, "c", "d");
	if (rc != CFRT_OK || cfrti_view_eq(c, d))
		return rc;
	uintptr_t cl, ch, dl, dh;
	byte_span(c, &cl, &ch);
	byte_span(d, &dl, &dh);
	if (cl < dh && dl < ch && cfrt_view_numel(c) > 0)
		return cfrti_err(ctx, CFRT_EINVAL, "the addend d overlaps the result c "
		                 "without being c");
	return CFRT_OK;
}

int cfrti_check_binary(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *a, const cfrt_view *b, cfrt_view *bb)
{
	int rc = cfrti_check_same(ctx, dst, a, "dst", "a");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, b, "b");
	if (rc == CFRT_OK && b->t != dst->t)
		rc = cfrti_err(ctx, CFRT_EINVAL, "views b and dst have different "
		               "dtypes");
	if (rc == CFRT_OK)
		rc = cfrti_broadcast_to(ctx, b, dst, bb);
	return rc;
}

int cfrti_check_gate(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *x,
                     const char *xn, const cfrt_view *y, const char *yn,
                     const cfrt_view *z, const char *zn)
{
	int rc = cfrti_check_same(ctx, dst, x, "dst", xn);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, dst, y, "dst", yn);
	if (rc == CFRT_OK && z)
		rc = cfrti_check_same(ctx, dst, z, "dst", zn);
	return rc;
}

/* a and b (named an, bn) of one dtype and shape, dim one of their dims. */
static int check_lines(cfrt_ctx *ctx, const cfrt_view *a, const cfrt_view *b,
                       const char *an, const char *bn, int dim)
{
	int rc = cfrti_check_same(ctx, a, b, an, bn);
	if (rc == CFRT_OK && (dim < 0 || dim >= a->nd))
		rc = cfrti_err(ctx, CFRT_EINVAL, "dim %d of a %d-d view", dim,
		               a->nd);
	return rc;
}

int cfrti_check_scan(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim)
{
	return check_lines(ctx, dst, src, "dst", "src", dim);
}

int cfrti_check_scan_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                          const cfrt_view *dy, int dim)
{
	return check_lines(ctx, dx, dy, "dx", "dy", dim);
}

/* gamma and beta (each may be NULL) fit rows of n elements of type t; eps
 * is not negative (nor NaN). */
static int check_affine(cfrt_ctx *ctx, int64_t n, cfrt_dtype t,
                        const cfrt_view *gamma, const cfrt_view *beta,
                        double eps)
{
	int rc = CFRT_OK;
	if (gamma)
		rc = cfrti_check_vec(ctx, gamma, n, t, "gamma");
	if (rc == CFRT_OK && beta)
		rc = cfrti_check_vec(ctx, beta, n, t, "beta");
	if (rc == CFRT_OK && !(eps >= 0.0))
		rc = cfrti_err(ctx, CFRT_EINVAL, "eps %g is negative", eps);
	return rc;
}

int cfrti_check_rows(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, const cfrt_view *gamma,
                     const cfrt_view *beta, double eps)
{
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc == CFRT_OK)
		rc = check_affine(ctx, dst->dim[dst->nd - 1], dst->t, gamma, beta,
		                  eps);
	return rc;
}

int cfrti_check_rope(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim, double base, int64_t pos0)
{
	int rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc != CFRT_OK)
		return rc;
	if (dst->nd < 2 || dst->dim[dst->nd - 1] % 2)
		return cfrti_err(ctx, CFRT_EINVAL, "rope needs a view of at least 2 "
		                 "dims with an even last dim");
	if (dim < 0 || dim >= dst->nd - 1)
		return cfrti_err(ctx, CFRT_EINVAL, "rope's positions along dim %d of "
		                 "a %d-d view: not one of its dims but the last", dim,
		                 dst->nd);
	if (!(base > 1.0) || pos0 < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "rope base %g is not above 1 or "
		                 "position %lld is negative", base, (long long)pos0);
	return CFRT_OK;
}

int cfrti_check_rows_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                          const cfrt_view *dy, const cfrt_view *x,
                          const char *xn, const cfrt_view *gamma, double eps)
{
	int rc = cfrti_check_same(ctx, dx, dy, "dx", "dy");
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, dx, x, "dx", xn);
	if (rc == CFRT_OK)
		rc = check_affine(ctx, dx->dim[dx->nd - 1], dx->t, gamma, NULL,
		                  eps);
	return rc;
}

int cfrti_check_sum_leading(cfrt_ctx *ctx, const cfrt_view *dst,
                            const cfrt_view *src)
{
	int rc = cfrti_check_view(ctx, dst, "dst");
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, src, "src");
	if (rc != CFRT_OK)
		return rc;
	if (dst->t != src->t)
		return cfrti_err(ctx, CFRT_EINVAL, "views dst and src have "
		                 "different dtypes");
	int lead = src->nd - dst->nd;
	if (lead < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "view dst has %d dims, more "
		                 "than the %d of src", dst->nd, src->nd);
	for (int d = 0; d < dst->nd; d++)
		if (dst->dim[d] != src->dim[lead + d])
			return cfrti_err(ctx, CFRT_EINVAL, "dim %d of dst has extent "
			                 "%lld, dim %d of src %lld: dst must have the "
			                 "last dims of src", d, (long long)dst->dim[d],
			                 lead + d, (long long)src->dim[lead + d]);
	return CFRT_OK;
}

/* cfrt.h declares every op of ew.def with its kind's signature: a row
 * added there without its declaration, or a declaration that drifts from
 * its row, stops the build here (each backend defines the op from the
 * row, and its definition must agree with cfrt.h too). */
typedef int ew_sig_SCALAR(cfrt_ctx *, const cfrt_view *, const cfrt_view *,
                          double);
typedef int ew_sig_UNARY(cfrt_ctx *, const cfrt_view *, const cfrt_view *);
typedef int ew_sig_BINARY(cfrt_ctx *, const cfrt_view *, const cfrt_view *,
                          const cfrt_view *);
typedef ew_sig_BINARY ew_sig_GRAD;
typedef ew_sig_BINARY ew_sig_GATE;
typedef ew_sig_BINARY ew_sig_GATE_DB;
typedef int ew_sig_GATE_DA(cfrt_ctx *, const cfrt_view *, const cfrt_view *,
                           const cfrt_view *, const cfrt_view *);
#define EW(name, NAME, kind, fn) \
	_Static_assert(_Generic(&cfrt_##name, ew_sig_##kind *: 1, default: 0), \
	               "cfrt.h declares cfrt_" #name " as ew.def's " #kind " row");
#include "ew.def"
#undef EW
