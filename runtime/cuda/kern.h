/* kern.h: the device kernels of the CUDA backend (kernels.cu, grad.cu,
 * flash.cu, flash_bwd.cu), callable from C. Every launcher enqueues on
 * stream s and returns the launch's cudaError_t (0 on success); views
 * arrive checked and with their dims collapsed (ops.c), strides in
 * elements. */
#ifndef CFRT_CUDA_KERN_H
#define CFRT_CUDA_KERN_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "cfrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A view as kernels see it: p at element [0,...,0]. */
typedef struct kview {
	char *p;
	int nd;
	int64_t dim[CFRT_MAX_DIMS];
	int64_t st[CFRT_MAX_DIMS];
} kview;

/* The kview of a checked view: the same dims and strides. */
static inline kview kv_of(const cfrt_view *v)
{
	kview k = {(char *)v->p, v->nd, {0}, {0}};
	for (int d = 0; d < v->nd; d++) {
		k.dim[d] = v->dim[d];
		k.st[d] = v->stride[d];
	}
	return k;
}

/* Elementwise ops: dst = f(a) or f(a, b); b has dst's dims (broadcast
 * strides 0), unused by K_COPY and the SCALAR and UNARY rows of
 * runtime/common/ew.def. K_COPY, then one op per row of ew.def; the
 * *_GRAD ops are a * f'(b), the backward of activation f; K_RSUB is
 * b - a; K_SWIGLU silu(a) * b, K_SWIGLU_DB a * silu(b) (a: dy). The
 * GATE_DA rows (K_SWIGLU_DA: a * c * silu'(b), a: dy, b: the forward's
 * a, c: its b) take a third operand: cfrtk_elementwise3, no arg. */
enum kop {
	K_COPY,
#define EW(name, NAME, kind, fn) K_##NAME,
#include "common/ew.def"
#undef EW
};

/* Row ops over the last dim of dst and src (same dims): gamma and beta are
 * 1-d vectors of that length (p NULL: absent). */
enum krow { KR_LAYERNORM, KR_RMSNORM, KR_SOFTMAX };

int cfrtk_elementwise(cudaStream_t s, cfrt_dtype t, int op, kview dst,
                      kview a, kview b, double arg);
int cfrtk_elementwise3(cudaStream_t s, cfrt_dtype t, int op, kview dst,
                       kview a, kview b, kview c);
int cfrtk_rows(cudaStream_t s, cfrt_dtype t, int op, kview dst, kview src,
               kview gamma, kview beta, double eps);
/* rev = 0: cfrt_scan; rev = 1: cfrt_scan_grad, the scan from the last
 * element back. */
int cfrtk_scan(cudaStream_t s, cfrt_dtype t, kview dst, kview src, int dim,
               double decay, int rev);
/* cfrt_rope over the last dim of dst and src (same dims, nd >= 2): the
 * row at index i of dim `dim` (< nd - 1) is at position pos0 + i; sign -1
 * turns back (the backward). */
int cfrtk_rope(cudaStream_t s, cfrt_dtype t, kview dst, kview src, int dim,
               double base, int64_t pos0, double sign);
int cfrtk_fill(cudaStream_t s, cfrt_dtype t, kview dst, uint64_t seed,
               const int64_t *gdims, const int64_t *offs);

/* CFRT_CHECK=finite: *key (device memory, all ones before the first
 * call) becomes the least of i * 4 + kind over the elements i of v
 * (row-major over its dims) that are no finite number, kind 0 a NaN, 1
 * +Inf, 2 -Inf; v has at least one element. */
int cfrtk_nonfinite(cudaStream_t s, cfrt_dtype t, kview v,
                    unsigned long long *key);

/* Backward (grad.cu). cfrtk_rows_grad: dx of row op `op` over the last
 * dim, from dy and x (KR_SOFTMAX: y, the forward's result), all of dx's
 * dims; gamma as in cfrtk_rows (norms; eps theirs); hr.p not NULL (norms):
 * also hr = dy * xhat, the rows of gamma's gradient, read before dx is
 * written (dx may still be dy or x). cfrtk_sum_leading:
 * dst = the sum over the index space of lead (src's leading dims and
 * strides; p unused) of src, a view of dst's dims (src's trailing ones)
 * at each leading index's offset; no leading index: dst = 0. */
int cfrtk_rows_grad(cudaStream_t s, cfrt_dtype t, int op, kview dx, kview dy,
                    kview x, kview gamma, double eps, kview hr);
int cfrtk_sum_leading(cudaStream_t s, cfrt_dtype t, kview dst, kview src,
                      kview lead, void *ws);
/* The scratch bytes cfrtk_sum_leading's fast path needs for these views
 * (src's rows contiguous: partial sums of chunks of rows), 0 where it
 * does not apply; with ws NULL it takes the general kernel. */
size_t cfrtk_sum_leading_ws(cfrt_dtype t, kview dst, kview src, kview lead);

/* The log-sum-exp of the rows of one cfrtk_attn_softmax call: p NULL,
 * none; else row r's is element (b, h0 + r / sq, r % sq) of a [B,H,Sq]
 * view of the scores' type at p (strides st), which the call writes, or
 * (read) reads to make P = exp(s - lse) without the row's max and sum. */
typedef struct klse {
	char *p;
	int64_t st[3];
	int64_t b, h0;
	int read;
} klse;

/* Masked softmax of rows scores[i*sk .. i*sk+sk) (F32, or F64 when t is
 * F64) into probs of type t; row i is query q_offset + i % sq; causal masks
 * key j > that; lse as klse says. */
int cfrtk_attn_softmax(cudaStream_t s, cfrt_dtype t, const void *scores,
                       void *probs, int64_t rows, int64_t sq, int64_t sk,
                       int causal, int64_t q_offset, klse lse);

/* The GEMM path's softmax backward, in place over probs (type t, rows of
 * sk as cfrtk_attn_softmax wrote them): dS = P * (dP - delta), dP in dp
 * (F32, or F64 when t is F64, the same rows), delta = rowsum(dout * out)
 * of the row's query; row r is query r % sq of head h0 + r / sq of batch
 * entry b of the [B,H,Sq,Dh] views dout and out (unit last stride). */
int cfrtk_attn_dscores(cudaStream_t s, cfrt_dtype t, void *probs,
                       const void *dp, kview dout, kview out, int64_t b,
                       int64_t h0, int64_t rows, int64_t sq, int64_t sk,
                       int causal, int64_t q_offset);

/* Fused attention (flash.cu): out = softmax(q k^T / sqrt(Dh) [+ causal
 * mask]) v for views [B,H,S,Dh] as cfrt_attention takes them, st[2] the row
 * stride (cfrti_head_ld); lse (p NULL: none) the [B,H,Sq] F32 view of
 * cfrt_attention_lse, written. Returns cudaErrorNotSupported, launching
 * nothing, where the kernel does not apply: t not BF16 or F16, Dh not a
 * multiple of 16 in 16..128, Sq or Sk of 2^30 or more, or a pointer or
 * stride not 16-byte aligned; the caller then takes the GEMM path. */
int cfrtk_flash_attn(cudaStream_t s, cfrt_dtype t, kview out, kview q,
                     kview k, kview v, int causal, int64_t q_offset,
                     kview lse);

/* Fused attention backward (flash_bwd.cu): the views of
 * cfrt_attention_grad_lse as cfrtk_flash_attn takes them (st[2] the row
 * stride); dq, dk, dv have p NULL where not computed, lse where the
 * kernels recompute it. */
typedef struct kgrad {
	kview dq, dk, dv, q, k, v, out, dout, lse;
} kgrad;

/* The workspace bytes cfrtk_flash_attn_grad needs for g: f32 row
 * statistics (two a query row: the lse in log2 units, and delta) and,
 * with dq, an f32 dq sum; 0 where the kernel does not apply (the
 * conditions of cfrtk_flash_attn, for dq, dk, dv, dout and out too) or
 * nothing is to be done. */
size_t cfrtk_flash_attn_grad_ws(cfrt_dtype t, const kgrad *g);

/* dq, dk, dv of g (those not NULL) in the workspace ws of
 * cfrtk_flash_attn_grad_ws(t, g) bytes (contents ignored); returns
 * cudaErrorNotSupported, launching nothing, where the kernel does not
 * apply. */
int cfrtk_flash_attn_grad(cudaStream_t s, cfrt_dtype t, const kgrad *g,
                          int causal, int64_t q_offset, void *ws);

#ifdef __cplusplus
}
#endif

#endif /* CFRT_CUDA_KERN_H */
