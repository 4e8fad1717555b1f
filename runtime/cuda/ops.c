/* ops.c: copy, deterministic fill, elementwise ops, norms, softmax, the
 * scan, and the backward ops of the norms, softmax, the scan and of
 * broadcasting (the sum over leading dims), on the compute stream.
 * requires: views checked by cfrti_check_*; ensures: every op is enqueued
 * on ctx->dev.cs after the calls before it; views reach the kernels with their
 * dims collapsed, so a contiguous tensor is one flat run whatever its
 * shape (and a contiguous copy is a cudaMemcpyAsync). */
#include <string.h>

#include "backend.h"
#include "kern.h"

static void kv_drop(kview *v, int n, int d)
{
	for (int i = 0; i < n; i++) {
		for (int e = d; e + 1 < v[i].nd; e++) {
			v[i].dim[e] = v[i].dim[e + 1];
			v[i].st[e] = v[i].st[e + 1];
		}
		v[i].nd--;
	}
}

/* Collapses n views of one index space (v[0]'s dims; the others have the
 * same dims, some with broadcast strides 0): extent-1 dims go, and dims d,
 * d+1 merge where every view steps over d as over a whole run of d+1.
 * Afterwards every view covers the same elements in the same order. */
static void collapse(kview *v, int n)
{
	for (int d = v[0].nd - 1; d >= 0 && v[0].nd > 1; d--)
		if (v[0].dim[d] == 1)
			kv_drop(v, n, d);
	for (int d = v[0].nd - 2; d >= 0; d--) {
		int ok = 1;
		for (int i = 0; i < n; i++)
			ok &= v[i].st[d] == v[i].st[d + 1] * v[i].dim[d + 1];
		if (!ok)
			continue;
		for (int i = 0; i < n; i++) {
			v[i].dim[d] *= v[i].dim[d + 1];
			v[i].st[d] = v[i].st[d + 1];
		}
		kv_drop(v, n, d + 1);
	}
}

/* A copy as plain memory copies when the layout allows: a flat run, or
 * rows with unit stride. Returns 1 when it took the copy (*rc: status). */
static int copy_fast(cfrt_ctx *ctx, kview d, kview s, size_t es, int *rc)
{
	if (d.nd == 1 && d.st[0] == 1 && s.st[0] == 1) {
		if (d.p != s.p)
			*rc = cfrti_cuda(ctx, cudaMemcpyAsync(d.p, s.p,
			                 (size_t)d.dim[0] * es,
			                 cudaMemcpyDeviceToDevice, ctx->dev.cs),
			                 "cudaMemcpyAsync");
		return 1;
	}
	if (d.nd == 2 && d.st[1] == 1 && s.st[1] == 1 &&
	    d.st[0] >= d.dim[1] && s.st[0] >= d.dim[1]) {
		*rc = cfrti_cuda(ctx, cudaMemcpy2DAsync(d.p, (size_t)d.st[0] * es,
		                 s.p, (size_t)s.st[0] * es, (size_t)d.dim[1] * es,
		                 (size_t)d.dim[0], cudaMemcpyDeviceToDevice,
		                 ctx->dev.cs), "cudaMemcpy2DAsync");
		return 1;
	}
	return 0;
}

int cfrt_copy(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	int rc = cfrti_enter(ctx, "cfrt_copy");
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	kview v[2] = {kv_of(dst), kv_of(src)};
	collapse(v, 2);
	if (copy_fast(ctx, v[0], v[1], cfrt_dtype_size(dst->t), &rc))
		return cfrti_dev_check(ctx, rc, dst, NULL, NULL);
	rc = cfrtk_elementwise(ctx->dev.cs, dst->t, K_COPY, v[0], v[1], v[1], 0.0);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "copy kernel"), dst, NULL, NULL);
}

int cfrt_fill_global(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed,
                     const int64_t *global_dims, const int64_t *offsets)
{
	int rc = cfrti_enter(ctx, "cfrt_fill_global");
	if (rc == CFRT_OK)
		rc = cfrti_check_fill(ctx, dst, global_dims, offsets);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	rc = cfrtk_fill(ctx->dev.cs, dst->t, kv_of(dst), seed, global_dims,
	                offsets);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "fill kernel"), dst, NULL, NULL);
}

static int unary(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                 const cfrt_view *src, int op, double arg)
{
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, dst, src, "dst", "src");
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	kview v[2] = {kv_of(dst), kv_of(src)};
	collapse(v, 2);
	rc = cfrtk_elementwise(ctx->dev.cs, dst->t, op, v[0], v[1], v[1], arg);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "elementwise kernel"), dst, NULL, NULL);
}

/* dst = a op b, b broadcast to dst. */
static int binary(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                  const cfrt_view *a, const cfrt_view *b, int op)
{
	cfrt_view bb;
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_binary(ctx, dst, a, b, &bb);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	kview v[3] = {kv_of(dst), kv_of(a), kv_of(&bb)};
	collapse(v, 3);
	rc = cfrtk_elementwise(ctx->dev.cs, dst->t, op, v[0], v[1], v[2], 0.0);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "elementwise kernel"), dst, NULL, NULL);
}

/* The GATE rows: dst = op(x, y[, z]), views of one shape (z NULL: none;
 * xn, yn, zn name them in messages). */
static int gate(cfrt_ctx *ctx, const char *api, const cfrt_view *dst,
                const cfrt_view *x, const char *xn, const cfrt_view *y,
                const char *yn, const cfrt_view *z, const char *zn, int op)
{
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_gate(ctx, dst, x, xn, y, yn, z, zn);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	kview v[4] = {kv_of(dst), kv_of(x), kv_of(y), kv_of(z ? z : y)};
	collapse(v, 4);
	rc = cfrtk_elementwise3(ctx->dev.cs, dst->t, op, v[0], v[1], v[2], v[3]);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "elementwise kernel"), dst, NULL, NULL);
}

/* ---- the elementwise ops of runtime/common/ew.def ---- */

#define EW_SCALAR(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *src, double s) \
	{ \
		return unary(ctx, "cfrt_" #name, dst, src, K_##NAME, s); \
	}
#define EW_UNARY(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *src) \
	{ \
		return unary(ctx, "cfrt_" #name, dst, src, K_##NAME, 0.0); \
	}
#define EW_BINARY(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *a, const cfrt_view *b) \
	{ \
		return binary(ctx, "cfrt_" #name, dst, a, b, K_##NAME); \
	}
#define EW_GRAD EW_BINARY
#define EW_GATE(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *a, const cfrt_view *b) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, a, "a", b, "b", NULL, NULL, \
		            K_##NAME); \
	}
#define EW_GATE_DB(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *dy, const cfrt_view *a) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, dy, "dy", a, "a", NULL, NULL, \
		            K_##NAME); \
	}
#define EW_GATE_DA(name, NAME) \
	int cfrt_##name(cfrt_ctx *ctx, const cfrt_view *dst, \
	                const cfrt_view *dy, const cfrt_view *a, \
	                const cfrt_view *b) \
	{ \
		return gate(ctx, "cfrt_" #name, dst, dy, "dy", a, "a", b, "b", \
		            K_##NAME); \
	}
#define EW(name, NAME, kind, fn) EW_##kind(name, NAME)
#include "common/ew.def"
#undef EW

int cfrt_rope(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double base, int64_t pos0, int inverse)
{
	int rc = cfrti_enter(ctx, "cfrt_rope");
	if (rc == CFRT_OK)
		rc = cfrti_check_rope(ctx, dst, src, dim, base, pos0);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	rc = cfrtk_rope(ctx->dev.cs, dst->t, kv_of(dst), kv_of(src), dim, base,
	                pos0, inverse ? -1.0 : 1.0);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "rope kernel"), dst, NULL, NULL);
}

static int rows(cfrt_ctx *ctx, const char *api, int op, const cfrt_view *dst,
                const cfrt_view *src, const cfrt_view *gamma,
                const cfrt_view *beta, double eps)
{
	kview none = {NULL, 1, {0}, {0}};
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_rows(ctx, dst, src, gamma, beta, eps);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	rc = cfrtk_rows(ctx->dev.cs, dst->t, op, kv_of(dst), kv_of(src),
	                gamma ? kv_of(gamma) : none, beta ? kv_of(beta) : none,
	                eps);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "row kernel"), dst, NULL, NULL);
}

int cfrt_layernorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                   const cfrt_view *gamma, const cfrt_view *beta, double eps)
{
	return rows(ctx, "cfrt_layernorm", KR_LAYERNORM, dst, src, gamma, beta,
	            eps);
}

int cfrt_rmsnorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                 const cfrt_view *gamma, double eps)
{
	return rows(ctx, "cfrt_rmsnorm", KR_RMSNORM, dst, src, gamma, NULL, eps);
}

int cfrt_softmax(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	return rows(ctx, "cfrt_softmax", KR_SOFTMAX, dst, src, NULL, NULL, 0.0);
}

int cfrt_scan(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double decay)
{
	int rc = cfrti_enter(ctx, "cfrt_scan");
	if (rc == CFRT_OK)
		rc = cfrti_check_scan(ctx, dst, src, dim);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	rc = cfrtk_scan(ctx->dev.cs, dst->t, kv_of(dst), kv_of(src), dim, decay,
	                0);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "scan kernel"), dst, NULL, NULL);
}

/* ---- backward ---- */

/* Row op grads; xn names x in messages (y for softmax). */
static int rows_grad(cfrt_ctx *ctx, const char *api, int op,
                     const cfrt_view *dx, const cfrt_view *dy,
                     const cfrt_view *x, const char *xn,
                     const cfrt_view *gamma, double eps)
{
	kview none = {NULL, 1, {0}, {0}};
	int rc = cfrti_enter(ctx, api);
	if (rc == CFRT_OK)
		rc = cfrti_check_rows_grad(ctx, dx, dy, x, xn, gamma, eps);
	if (rc != CFRT_OK || cfrt_view_numel(dx) == 0)
		return rc;
	rc = cfrtk_rows_grad(ctx->dev.cs, dx->t, op, kv_of(dx), kv_of(dy),
	                     kv_of(x), gamma ? kv_of(gamma) : none, eps, none);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "row grad kernel"), dx, NULL, NULL);
}

int cfrt_rmsnorm_grad_rows(cfrt_ctx *ctx, const cfrt_view *dx,
                           const cfrt_view *rows, const cfrt_view *dy,
                           const cfrt_view *x, const cfrt_view *gamma,
                           double eps)
{
	kview none = {NULL, 1, {0}, {0}};
	int rc = cfrti_enter(ctx, "cfrt_rmsnorm_grad_rows");
	if (rc == CFRT_OK)
		rc = cfrti_check_rows_grad(ctx, dx, dy, x, "x", gamma, eps);
	if (rc == CFRT_OK)
		rc = cfrti_check_same(ctx, rows, dx, "rows", "dx");
	if (rc != CFRT_OK || cfrt_view_numel(dx) == 0)
		return rc;
	rc = cfrtk_rows_grad(ctx->dev.cs, dx->t, KR_RMSNORM, kv_of(dx),
	                     kv_of(dy), kv_of(x), gamma ? kv_of(gamma) : none,
	                     eps, kv_of(rows));
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "row grad kernel"), dx, rows, NULL);
}

int cfrt_layernorm_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                        const cfrt_view *dy, const cfrt_view *x,
                        const cfrt_view *gamma, double eps)
{
	return rows_grad(ctx, "cfrt_layernorm_grad", KR_LAYERNORM, dx, dy, x,
	                 "x", gamma, eps);
}

int cfrt_rmsnorm_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *x, const cfrt_view *gamma, double eps)
{
	return rows_grad(ctx, "cfrt_rmsnorm_grad", KR_RMSNORM, dx, dy, x, "x",
	                 gamma, eps);
}

int cfrt_softmax_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *y)
{
	return rows_grad(ctx, "cfrt_softmax_grad", KR_SOFTMAX, dx, dy, y, "y",
	                 NULL, 0.0);
}

/* Dims from .. from + nd - 1 of v at its first element (nd = 0: a single
 * element). */
static kview kv_dims(const cfrt_view *v, int from, int nd)
{
	kview k = {(char *)v->p, nd > 0 ? nd : 1, {1}, {0}};
	for (int d = 0; d < nd; d++) {
		k.dim[d] = v->dim[from + d];
		k.st[d] = v->stride[from + d];
	}
	return k;
}

/* dst and src's trailing dims collapse together, src's leading dims on
 * their own (the kernel walks them as one index space). */
int cfrt_sum_leading(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src)
{
	int rc = cfrti_enter(ctx, "cfrt_sum_leading");
	if (rc == CFRT_OK)
		rc = cfrti_check_sum_leading(ctx, dst, src);
	if (rc != CFRT_OK || cfrt_view_numel(dst) == 0)
		return rc;
	int lead = src->nd - dst->nd;
	kview v[2] = {kv_of(dst), kv_dims(src, lead, dst->nd)};
	kview l = kv_dims(src, 0, lead);
	collapse(v, 2);
	collapse(&l, 1);
	size_t ws = cfrtk_sum_leading_ws(dst->t, v[0], v[1], l);
	if (ws && cfrti_ws_reserve(ctx, ws) != CFRT_OK)
		return cfrti_cuda(ctx, cudaErrorMemoryAllocation, "sum kernel's scratch");
	rc = cfrtk_sum_leading(ctx->dev.cs, dst->t, v[0], v[1], l,
	                       ws ? ctx->dev.ws : NULL);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "sum kernel"), dst, NULL, NULL);
}

int cfrt_scan_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                   int dim, double decay)
{
	int rc = cfrti_enter(ctx, "cfrt_scan_grad");
	if (rc == CFRT_OK)
		rc = cfrti_check_scan_grad(ctx, dx, dy, dim);
	if (rc != CFRT_OK || cfrt_view_numel(dx) == 0)
		return rc;
	rc = cfrtk_scan(ctx->dev.cs, dx->t, kv_of(dx), kv_of(dy), dim, decay, 1);
	return cfrti_dev_check(ctx, cfrti_cuda(ctx, (cudaError_t)rc,
	                       "scan kernel"), dx, NULL, NULL);
}
