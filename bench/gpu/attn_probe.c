/* attn_probe.c: our attention on one GPU, through cuDNN (CFRT_ATTN=cudnn)
 * and our fused kernels (CFRT_ATTN=flash), at issue 11's shape: B=16,
 * H=8, S=4096, Dh=128, causal, bf16, [B,H,S,Dh] contiguous, forward
 * (cfrt_attention_lse) and backward from the saved lse
 * (cfrt_attention_grad_lse: dq, dk, dv); then the steps of query-split
 * attention, a quarter of the queries (rows r S/4.., q_offset r S/4)
 * against all the keys, r = 0..3. bench/gpu/attn_sdpa.py times
 * PyTorch's SDPA on the same shapes; bench/gpu/attn_probe.sh puts both
 * side by side.
 *
 *   mpirun -n 1 attn_probe [--iters N]
 *
 * Prints "attn_probe: impl=ours-MODE shape=SHAPE dir=fwd|bwd ms=T" (T:
 * median of N calls (20) after 3 warm-ups, each bracketed by cfrt_wtime,
 * which waits for the compute stream), SHAPE "full" or "q/4@r". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "median.h"

enum { B = 16, H = 8, S = 4096, DH = 128 };

typedef struct bufs {
	cfrt_view q, k, v, o, l, g, dq, dk, dv; /* g: dout */
	void *p[9];
} bufs;

static void make(cfrt_ctx *ctx, bufs *x)
{
	int64_t d4[4] = {B, H, S, DH}, d3[3] = {B, H, S}, n = (int64_t)B * H * S * DH;
	cfrt_view *v[9] = {&x->q, &x->k, &x->v, &x->o, &x->l, &x->g, &x->dq,
	                   &x->dk, &x->dv};
	for (int i = 0; i < 9; i++) {
		int lse = i == 4;
		size_t bytes = lse ? (size_t)(B * H * S) * 4 : (size_t)n * 2;
		CFRT_TRY(ctx, cfrt_alloc(ctx, &x->p[i], bytes));
		*v[i] = lse ? cfrt_view_contig(x->p[i], CFRT_F32, 3, d3) :
		        cfrt_view_contig(x->p[i], CFRT_BF16, 4, d4);
		if (!lse)
			CFRT_TRY(ctx, cfrt_fill_uniform(ctx, v[i], (uint64_t)i + 1));
	}
}

/* One call: the forward of rows q0.. (sq of them), or its backward. */
static void call(cfrt_ctx *ctx, const bufs *x, int64_t q0, int64_t sq, int bwd)
{
	cfrt_view q = cfrt_view_slice(x->q, 2, q0, sq);
	cfrt_view o = cfrt_view_slice(x->o, 2, q0, sq);
	cfrt_view l = cfrt_view_slice(x->l, 2, q0, sq);
	cfrt_view g = cfrt_view_slice(x->g, 2, q0, sq);
	cfrt_view dq = cfrt_view_slice(x->dq, 2, q0, sq);
	if (!bwd)
		CFRT_TRY(ctx, cfrt_attention_lse(ctx, &o, &l, &q, &x->k, &x->v, 1, q0));
	else
		CFRT_TRY(ctx, cfrt_attention_grad_lse(ctx, &dq, &x->dk, &x->dv, &q,
		         &x->k, &x->v, &o, &g, &l, 1, q0));
}

static double median_ms(cfrt_ctx *ctx, const bufs *x, int64_t q0, int64_t sq,
                        int bwd, int iters)
{
	double *ms = malloc((size_t)iters * sizeof *ms), med;
	for (int i = 0; i < 3; i++)
		call(ctx, x, q0, sq, bwd);
	for (int i = 0; i < iters; i++) {
		double t0 = cfrt_wtime(ctx);
		call(ctx, x, q0, sq, bwd);
		ms[i] = (cfrt_wtime(ctx) - t0) * 1e3;
	}
	med = median(ms, iters);
	free(ms);
	return med;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {"cudnn", "flash"};
	cfrt_ctx *ctx;
	bufs x;
	int size, iters = argc > 2 && !strcmp(argv[1], "--iters") ?
	                  atoi(argv[2]) : 20;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "attn_probe"));
	make(ctx, &x);
	for (int m = 0; m < 2; m++) {
		setenv("CFRT_ATTN", modes[m], 1);
		for (int r = -1; r < 4; r++) {
			int64_t q0 = r < 0 ? 0 : r * (S / 4), sq = r < 0 ? S : S / 4;
			char shape[16];
			snprintf(shape, sizeof shape, r < 0 ? "full" : "q/4@%d", r);
			for (int bwd = 0; bwd < 2; bwd++)
				printf("attn_probe: impl=ours-%s shape=%s dir=%s ms=%.3f\n",
				       modes[m], shape, bwd ? "bwd" : "fwd",
				       median_ms(ctx, &x, q0, sq, bwd, iters));
			fflush(stdout);
		}
	}
	for (int i = 0; i < 9; i++)
		CFRT_TRY(ctx, cfrt_free(ctx, x.p[i]));
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return 0;
}
