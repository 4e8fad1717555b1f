/* view.c: view checks and the line walk that every view op uses.
 * A line of a view along `axis` is the run of its elements with every other
 * index fixed; lines are numbered in row-major order of the other indices,
 * so line l of two views of the same dims covers the same elements. */
#include <stdio.h>

#include "common.h"

/* "[2,3,4]" */
static const char *dims_str(const cfrt_view *v, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (int d = 0; d < v->nd && k < n; d++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "",
		                      (long long)v->dim[d]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

int cfrti_check_view(cfrt_ctx *ctx, const cfrt_view *v, const char *what)
{
	if (!v)
		return cfrti_err(ctx, CFRT_EINVAL, "view %s is NULL", what);
	int rc = cfrti_check_dtype(ctx, v->t);
	if (rc != CFRT_OK)
		return rc;
	if (v->nd < 1 || v->nd > CFRT_MAX_DIMS)
		return cfrti_err(ctx, CFRT_EINVAL, "view %s has %d dims (1..%d "
		                 "allowed)", what, v->nd, CFRT_MAX_DIMS);
	for (int d = 0; d < v->nd; d++)
		if (v->dim[d] < 0 || v->stride[d] < 0)
			return cfrti_err(ctx, CFRT_EINVAL, "view %s has dim %d "
			                 "of extent %lld, stride %lld", what, d,
			                 (long long)v->dim[d],
			                 (long long)v->stride[d]);
	if (!v->p && cfrt_view_numel(v) > 0)
		return cfrti_err(ctx, CFRT_EINVAL, "view %s has a null pointer",
		                 what);
	return CFRT_OK;
}

/* Both views valid, of one dtype and the same dims. */
int cfrti_check_same(cfrt_ctx *ctx, const cfrt_view *a, const cfrt_view *b,
                     const char *an, const char *bn)
{
	char sa[96], sb[96];
	int rc = cfrti_check_view(ctx, a, an);
	if (rc == CFRT_OK)
		rc = cfrti_check_view(ctx, b, bn);
	if (rc != CFRT_OK)
		return rc;
	if (a->t != b->t)
		return cfrti_err(ctx, CFRT_EINVAL, "views %s and %s have "
		                 "different dtypes", an, bn);
	int same = a->nd == b->nd;
	for (int d = 0; same && d < a->nd; d++)
		same = a->dim[d] == b->dim[d];
	if (!same)
		return cfrti_err(ctx, CFRT_EINVAL, "view %s %s and view %s %s "
		                 "differ in shape", an, dims_str(a, sa, sizeof sa),
		                 bn, dims_str(b, sb, sizeof sb));
	return CFRT_OK;
}

/* g is a valid 1-d view of n elements of type t (gamma, beta). */
int cfrti_check_vec(cfrt_ctx *ctx, const cfrt_view *g, int64_t n, cfrt_dtype t,
                    const char *what)
{
	int rc = cfrti_check_view(ctx, g, what);
	if (rc != CFRT_OK)
		return rc;
	if (g->nd != 1 || g->dim[0] != n || g->t != t)
		return cfrti_err(ctx, CFRT_EINVAL, "%s must be a 1-d view of %lld "
		                 "elements of the input's dtype", what,
		                 (long long)n);
	return CFRT_OK;
}

/* *out = b with shape's dims: dims aligned at the right, each of b equal to
 * shape's or 1 (stride 0), missing leading dims of stride 0. */
int cfrti_broadcast_to(cfrt_ctx *ctx, const cfrt_view *b,
                       const cfrt_view *shape, cfrt_view *out)
{
	char sb[96], ss[96];
	int lead = shape->nd - b->nd;
	if (lead < 0)
		return cfrti_err(ctx, CFRT_EINVAL, "view %s has more dims than %s",
		                 dims_str(b, sb, sizeof sb),
		                 dims_str(shape, ss, sizeof ss));
	*out = *shape;
	out->p = b->p;
	for (int d = 0; d < shape->nd; d++) {
		int bd = d - lead;
		out->stride[d] = 0;
		if (bd < 0 || b->dim[bd] == 1)
			continue;
		if (b->dim[bd] != shape->dim[d])
			return cfrti_err(ctx, CFRT_EINVAL, "view %s does not "
			                 "broadcast to %s", dims_str(b, sb, sizeof sb),
			                 dims_str(shape, ss, sizeof ss));
		out->stride[d] = b->stride[bd];
	}
	return CFRT_OK;
}

int64_t cfrti_line_count(const cfrt_view *v, int axis)
{
	int64_t n = 1;
	for (int d = 0; d < v->nd; d++)
		if (d != axis)
			n *= v->dim[d];
	return n;
}

/* First element of line `line` of v, numbering lines by shape's dims (v has
 * shape's dims, or broadcast strides over them). */
char *cfrti_line_at(const cfrt_view *v, const cfrt_view *shape, int axis,
                    int64_t line)
{
	int64_t off = 0;
	for (int d = shape->nd - 1; d >= 0; d--) {
		if (d == axis || shape->dim[d] == 0)
			continue;
		off += (line % shape->dim[d]) * v->stride[d];
		line /= shape->dim[d];
	}
	return (char *)v->p + off * (int64_t)cfrt_dtype_size(v->t);
}
