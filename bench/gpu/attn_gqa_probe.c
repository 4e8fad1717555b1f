/* attn_gqa_probe.c: our attention at the Llama-3-8B layer's shape on one
 * GPU (B 1, 32 query heads, 8 key/value heads, S 4096, Dh 128, causal,
 * bf16), in the ways a layer can call it, to find where its backward
 * loses against cuDNN SDPA's (bench/gpu/layer1.sh's limit, which gets K
 * and V expanded to 32 heads):
 *   gqa-bshd   q, k, v as the layer has them: heads split out of
 *              [B, S, H*Dh] rows (strided [B,H,S,Dh] views);
 *   gqa-bhsd   the same, packed [B,H,S,Dh];
 *   mha-bhsd   k and v expanded to 32 heads (no grouping; what SDPA's
 *              cuDNN backend is timed on);
 * each through cuDNN (CFRT_ATTN=cudnn) and our fused kernels
 * (CFRT_ATTN=flash), forward (cfrt_attention_lse) and backward from the
 * saved lse (cfrt_attention_grad_lse) and without it
 * (cfrt_attention_grad, which recomputes the lse).
 *
 *   mpirun -n 1 attn_gqa_probe [--iters N]
 *
 * Prints "attn_gqa_probe: impl=ours-MODE shape=SHAPE dir=fwd|bwd|bwd-nolse
 * ms=T" (T: the median of N calls (20) after 3 warm-ups, each between two
 * cfrt_wtime calls, which wait for the compute stream). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "median.h"

enum { B = 1, H = 32, HK = 8, S = 4096, DH = 128 };

/* q, k, v, out, lse, dout, dq, dk, dv */
typedef struct bufs {
	cfrt_view v[9];
	void *p[9];
} bufs;

/* A [B,nh,S,DH] view of p: packed, or heads split out of [B,S,nh*DH]. */
static cfrt_view heads(void *p, int64_t nh, int bshd)
{
	int64_t d4[4] = {B, nh, S, DH};
	cfrt_view v = cfrt_view_contig(p, CFRT_BF16, 4, d4);
	if (bshd) {
		v.stride[0] = S * nh * DH, v.stride[1] = DH;
		v.stride[2] = nh * DH, v.stride[3] = 1;
	}
	return v;
}

static void make(cfrt_ctx *ctx, bufs *x, int hk, int bshd)
{
	for (int i = 0; i < 9; i++) {
		int kv = i == 1 || i == 2 || i == 7 || i == 8;
		int64_t nh = kv ? hk : H, d3[3] = {B, H, S};
		size_t bytes = i == 4 ? (size_t)(B * H * S) * 4 :
		               (size_t)(B * nh * S * DH) * 2;
		CFRT_TRY(ctx, cfrt_alloc(ctx, &x->p[i], bytes));
		x->v[i] = i == 4 ? cfrt_view_contig(x->p[i], CFRT_F32, 3, d3) :
		          heads(x->p[i], nh, bshd);
		if (i != 4)
			CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &x->v[i], (uint64_t)i + 1));
	}
}

static void drop(cfrt_ctx *ctx, bufs *x)
{
	for (int i = 0; i < 9; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, x->p[i]));
}

/* dir 0: forward, 1: backward from the lse, 2: backward without it. */
static void call(cfrt_ctx *ctx, const bufs *x, int dir)
{
	const cfrt_view *v = x->v;
	if (dir == 0)
		CFRT_TRY(ctx, cfrt_attention_lse(ctx, &v[3], &v[4], &v[0], &v[1],
		         &v[2], 1, 0));
	else if (dir == 1)
		CFRT_TRY(ctx, cfrt_attention_grad_lse(ctx, &v[6], &v[7], &v[8],
		         &v[0], &v[1], &v[2], &v[3], &v[5], &v[4], 1, 0));
	else
		CFRT_TRY(ctx, cfrt_attention_grad(ctx, &v[6], &v[7], &v[8], &v[0],
		         &v[1], &v[2], &v[3], &v[5], 1, 0));
}

static double median_ms(cfrt_ctx *ctx, const bufs *x, int dir, int iters)
{
	double *ms = malloc((size_t)iters * sizeof *ms), med;
	if (!ms)
		abort();
	for (int i = 0; i < 3; i++)
		call(ctx, x, dir);
	for (int i = 0; i < iters; i++) {
		double t0 = cfrt_wtime(ctx);
		call(ctx, x, dir);
		ms[i] = (cfrt_wtime(ctx) - t0) * 1e3;
	}
	med = median(ms, iters);
	free(ms);
	return med;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {"cudnn", "flash"};
	static const char *const dirs[] = {"fwd", "bwd", "bwd-nolse"};
	static const struct { const char *name; int hk, bshd; } shapes[] = {
		{"gqa-bshd", HK, 1}, {"gqa-bhsd", HK, 0}, {"mha-bhsd", H, 0}};
	cfrt_ctx *ctx;
	int size, iters = argc > 2 && !strcmp(argv[1], "--iters") ?
	                  atoi(argv[2]) : 20;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "attn_gqa_probe"));
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		bufs x;
		make(ctx, &x, shapes[s].hk, shapes[s].bshd);
		for (int m = 0; m < 2; m++) {
			setenv("CFRT_ATTN", modes[m], 1);
			for (int dir = 0; dir < 3; dir++)
				printf("attn_gqa_probe: impl=ours-%s shape=%s dir=%s "
				       "ms=%.3f\n", modes[m], shapes[s].name, dirs[dir],
				       median_ms(ctx, &x, dir, iters));
			fflush(stdout);
		}
		drop(ctx, &x);
	}
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return 0;
}
