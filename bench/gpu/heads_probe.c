/* heads_probe.c: one step of bench-gpu's case c (examples/attention.cf
 * at B=16, S=4096, D=4096, 32 heads, on 4 GPUs: per rank 8 heads of 128)
 * on one GPU, call by call as the generated code makes them: the Q
 * projection of a slice of the gathered rows (cfrt_matmul), its head
 * split into q (cfrt_copy of a permuted view), and the pack of a slice of
 * xa for its send; each for the whole sequence and for the 512-row slices
 * of fuse(bidir), first on a rested GPU, then after 0.5 s of the whole
 * projection. Then checks the head split exactly: every 512-row slice
 * copied (the kernel's rows path), and the same with each head's first 3
 * columns left out (misaligned: its general path), against the source
 * read back on the host.
 *
 *   mpirun -n 1 heads_probe
 *
 * Prints "heads_probe: WHAT rows N: T ms" (T: median of 20 calls after 3
 * warm-ups, each between two cfrt_wtime, which wait for the device) and
 * "heads_probe: check WHAT: K of N elements differ"; exits 1 when any
 * does or a call fails. */
#include <stdio.h>
#include <stdlib.h>

#include "cfrt.h"
#include "median.h"

enum { B = 16, S = 4096, D = 4096, F = 1024, H = 8, DH = 128, SLICE = 512, ITERS = 20 };

static cfrt_ctx *ctx;
static cfrt_view xa, wq, t1, q, stage;

enum { PROJECT, SPLIT, PACK, NWHAT };
static const char *const what_name[] = {"project", "split heads", "pack"};

/* call w on the rows s*rows .. of the sequence */
static int
call(int w, int64_t rows, int64_t s)
{
	cfrt_view o, a;

	switch (w) {
	case PROJECT:
		o = cfrt_view_slice(t1, 1, s * rows, rows);
		a = cfrt_view_slice(xa, 1, s * rows, rows);
		return cfrt_matmul(ctx, &o, &a, &wq, 1.0, 0.0);
	case SPLIT:
		o = cfrt_view_slice(q, 2, s * rows, rows);
		a = cfrt_view_heads(cfrt_view_slice(t1, 1, s * rows, rows), H);
		return cfrt_copy(ctx, &o, &a);
	default:
		a = cfrt_view_slice(xa, 1, s * rows, rows);
		o = cfrt_view_contig(stage.p, CFRT_BF16, 3, (int64_t[]){B, rows, D});
		return cfrt_copy(ctx, &o, &a);
	}
}

static double
median_ms(int w, int64_t rows)
{
	double t[ITERS];

	for (int i = 0; i < 3; i++)
		CFRT_TRY(ctx, call(w, rows, 0));
	for (int i = 0; i < ITERS; i++) {
		double t0 = cfrt_wtime(ctx);
		CFRT_TRY(ctx, call(w, rows, i % (S / rows)));
		t[i] = (cfrt_wtime(ctx) - t0) * 1e3;
	}
	return median(t, ITERS);
}

/* q after every slice's head split (columns from skip on); the number of
 * its elements that differ from t1's (zero where skipped) */
static long
check(int64_t skip)
{
	size_t nq = (size_t)B * H * S * DH, nt = (size_t)B * S * F;
	unsigned short *hq = malloc(nq * 2), *ht = malloc(nt * 2);
	long bad = 0;

	if (!hq || !ht) {
		fprintf(stderr, "heads_probe: out of memory\n");
		exit(1);
	}
	CFRT_TRY(ctx, cfrt_memset_zero(ctx, q.p, nq * 2));
	for (int64_t s = 0; s < S / SLICE; s++) {
		cfrt_view o = cfrt_view_slice(q, 2, s * SLICE, SLICE);
		cfrt_view a = cfrt_view_heads(cfrt_view_slice(t1, 1, s * SLICE, SLICE), H);
		o = cfrt_view_slice(o, 3, skip, DH - skip);
		a = cfrt_view_slice(a, 3, skip, DH - skip);
		CFRT_TRY(ctx, cfrt_copy(ctx, &o, &a));
	}
	CFRT_TRY(ctx, cfrt_download(ctx, hq, q.p, nq * 2));
	CFRT_TRY(ctx, cfrt_download(ctx, ht, t1.p, nt * 2));
	for (size_t b = 0; b < B; b++)
		for (size_t h = 0; h < H; h++)
			for (size_t s = 0; s < S; s++)
				for (size_t d = 0; d < DH; d++) {
					unsigned short want = d < (size_t)skip ? 0 : ht[(b * S + s) * F + h * DH + d];
					bad += hq[((b * H + h) * S + s) * DH + d] != want;
				}
	free(hq);
	free(ht);
	return bad;
}

int
main(int argc, char **argv)
{
	void *p[5];
	size_t n[5] = {(size_t)B * S * D, (size_t)D * F, (size_t)B * S * F, (size_t)B * H * S * DH,
	               (size_t)B * S * D};
	static const int rows[2] = {S, SLICE};
	long bad = 0;

	MPI_Init(&argc, &argv);
	CFRT_TRY(ctx, cfrt_init(&ctx, MPI_COMM_WORLD, 1, "heads_probe"));
	for (int i = 0; i < 5; i++)
		CFRT_TRY(ctx, cfrt_alloc(ctx, &p[i], n[i] * 2));
	xa = cfrt_view_contig(p[0], CFRT_BF16, 3, (int64_t[]){B, S, D});
	wq = cfrt_view_contig(p[1], CFRT_BF16, 2, (int64_t[]){D, F});
	t1 = cfrt_view_contig(p[2], CFRT_BF16, 3, (int64_t[]){B, S, F});
	q = cfrt_view_contig(p[3], CFRT_BF16, 4, (int64_t[]){B, H, S, DH});
	stage = cfrt_view_contig(p[4], CFRT_BF16, 3, (int64_t[]){B, S, D});
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &xa, 1));
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &wq, 2));
	CFRT_TRY(ctx, cfrt_fill_uniform(ctx, &t1, 3));
	for (int hot = 0; hot < 2; hot++) {
		if (hot) {
			double t0 = cfrt_wtime(ctx);
			while (cfrt_wtime(ctx) - t0 < 0.5)
				for (int i = 0; i < 8; i++)
					CFRT_TRY(ctx, call(PROJECT, S, 0));
		}
		for (int w = 0; w < NWHAT; w++)
			for (int k = 0; k < 2; k++)
				printf("heads_probe: %s rows %d: %.4f ms%s\n", what_name[w], rows[k],
				       median_ms(w, rows[k]), hot ? " (after 0.5 s of projections)" : "");
	}
	for (int64_t skip = 0; skip <= 3; skip += 3) {
		long k = check(skip);
		printf("heads_probe: check %s: %ld of %lld elements differ\n",
		       skip ? "columns 3.. of each head (general path)" : "512-row slices (rows path)",
		       k, (long long)B * H * S * DH);
		bad += k;
	}
	cfrt_finalize(ctx);
	MPI_Finalize();
	return bad != 0;
}
