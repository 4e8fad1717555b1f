/* common.h: private to the backends of cfrt; what they share.
 *
 * Files: view.c (view checks, line walk), check.c (argument checks of the
 * compute ops), matmul.c (GEMM and matmul arguments, matmul's batch loop,
 * attention checks). Their names differ from the backends' files: one
 * archive holds both.
 *
 * Compiled once, with no backend header: the shared code calls the
 * backend only through the hooks declared at the end of this file, which
 * every backend defines. Messages of a failed check are the same on every
 * backend. */
#ifndef CFRT_COMMON_H
#define CFRT_COMMON_H

#include <stdint.h>

#include "cfrt.h"

/* view.c: a line is the run of elements along one axis with the other
 * indices fixed; ops walk lines. */
int cfrti_check_view(cfrt_ctx *ctx, const cfrt_view *v, const char *what);
int cfrti_check_same(cfrt_ctx *ctx, const cfrt_view *a, const cfrt_view *b,
                     const char *an, const char *bn);
int cfrti_check_vec(cfrt_ctx *ctx, const cfrt_view *g, int64_t n,
                    cfrt_dtype t, const char *what);
int cfrti_broadcast_to(cfrt_ctx *ctx, const cfrt_view *b,
                       const cfrt_view *shape, cfrt_view *out);
int64_t cfrti_line_count(const cfrt_view *v, int axis);
char *cfrti_line_at(const cfrt_view *v, const cfrt_view *shape, int axis,
                    int64_t line);

/* check.c: the checks of cfrt_fill_global, cfrt_add/cfrt_mul (*bb: b
 * broadcast to dst), cfrt_scan, and of the norms and softmax (gamma and
 * beta may be NULL). */
int cfrti_check_fill(cfrt_ctx *ctx, const cfrt_view *dst,
                     const int64_t *gdims, const int64_t *offs);
int cfrti_check_binary(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *a, const cfrt_view *b,
                       cfrt_view *bb);
int cfrti_check_scan(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim);
int cfrti_check_rows(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, const cfrt_view *gamma,
                     const cfrt_view *beta, double eps);

/* matmul.c: the GEMM behind cfrt_gemm, cfrt_matmul and cfrt_attention,
 * row-major. ct: the type of C (the CUDA backend's attention scores are
 * F32 for 16-bit inputs; t elsewhere). */
typedef struct gemm_args {
	cfrt_dtype t, ct;
	cfrt_trans ta, tb;
	int64_t m, n, k;
	double alpha, beta;
	const void *a, *b;
	void *c;
	int64_t lda, ldb, ldc, sa, sb, sc, batch;
} gemm_args;
int cfrti_gemm_check(cfrt_ctx *ctx, const gemm_args *g);

/* cfrt_matmul in three steps: matmul_args checks c = a @ b, expands a and
 * b to c's batch dims (*ae, *be) and fills g but for its matrices and
 * batch; matmul_batch sets those from c, a and b (c's innermost batch dim
 * is g's batch); matmul_run runs one GEMM per index of the outer ones. */
int cfrti_matmul_args(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                      const cfrt_view *b, double alpha, double beta,
                      gemm_args *g, cfrt_view *ae, cfrt_view *be);
void cfrti_matmul_batch(gemm_args *g, const cfrt_view *c, const cfrt_view *a,
                        const cfrt_view *b);
int cfrti_matmul_run(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                     const cfrt_view *a, const cfrt_view *b);

/* Attention: the checks of cfrt_attention; the row stride of the [S,Dh]
 * matrices of a [B,H,S,Dh] view and its element [b,h,0,0]. */
int cfrti_attn_check(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                     const cfrt_view *k, const cfrt_view *v,
                     int64_t q_offset);
int64_t cfrti_head_ld(const cfrt_view *v);
char *cfrti_head_at(const cfrt_view *v, int64_t b, int64_t h);

/* ---- hooks: defined by each backend ------------------------------------ */

/* Writes "API: message" into the context (the public call running);
 * returns status. */
int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* OK for a dtype the backend computes on, else the error. */
int cfrti_check_dtype(cfrt_ctx *ctx, cfrt_dtype t);
/* Runs a GEMM that passed cfrti_gemm_check. */
int cfrti_gemm_run(cfrt_ctx *ctx, const gemm_args *g);

#endif /* CFRT_COMMON_H */
