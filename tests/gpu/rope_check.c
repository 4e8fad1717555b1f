/* rope_check: cfrt_rope on the CUDA backend at sizes where its kernels
 * share a position's angles among the lines at that position (rows x
 * Dh/2 of 2^16 or more): 16-byte vectors where the layout allows
 * (kernels.cu's rope_vec: the last dim contiguous, Dh/2 whole vectors,
 * the other strides and the bases aligned), else a thread per (position,
 * pair) (rope_positions: here a base one element off, or Dh/2 = 18),
 * against
 *   - a double reference computed here (f32 within 1e-5, bf16 within
 *     8e-3, f16 within 1e-3, from the same rounded inputs), and
 *   - the same rows in slices of 256 positions (pos0 = the slice's first
 *     row), which take the thread-per-pair kernel (rope_pairs): the
 *     kernels do the same arithmetic, so the bits must be equal;
 * forward and inverse, positions along dim 2 of [B,H,S,Dh] (packed, and
 * heads split out of [B,S,H*Dh] rows as the layer has them), along dim 1
 * of [B,S,H,Dh] (lines between the position and the pair), odd sizes
 * (S 3001, Dh 48: a last block of fewer positions), extent-1 dims
 * ([1,1,S,Dh]: one line a position) and many lines a position (130 of
 * them: blocks of a part of a position's lines); and the rope read from
 * (written into) the heads of [B,S,H*Dh] rows into (from) packed heads,
 * as the generated code calls it, bit for bit against a copy and the rope.
 * Prints "rope_check: CASE: ok" or "... MISMATCH (...)" per case, then
 * "rope_check: all ok" or "rope_check: N failed"; exits 1 on a failure.
 *   mpirun -n 1 rope_check */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"
#include "hostval.h"

enum { NB = 2, NH = 3, NS = 2048, DH = 128, SLICE = 256 };

static int nbad;

/* the offset of the element at index idx[4] of view v, in elements */
static int64_t at(const cfrt_view *v, const int64_t idx[4])
{
	int64_t o = 0;
	for (int d = 0; d < 4; d++)
		o += idx[d] * v->stride[d];
	return o;
}

static const char *tname(cfrt_dtype t)
{
	return t == CFRT_F32 ? "f32" : t == CFRT_BF16 ? "bf16" : "f16";
}

/* One case: the view of dims dim4 and strides st (covering the n
 * elements of their product) off elements into its storage, positions
 * along dim, forward or inverse. */
static void check(cfrt_ctx *ctx, const char *name, cfrt_dtype t,
                  const int64_t dim4[4], const int64_t st[4], int dim,
                  int inverse, int64_t off)
{
	int64_t n = off, dh = dim4[3], half = dh / 2;
	for (int d = 0; d < 4; d++)
		n += (dim4[d] - 1) * st[d];
	n++;
	size_t es = cfrt_dtype_size(t), bytes = (size_t)n * es;
	unsigned char *h = malloc(bytes), *r1 = malloc(bytes), *r2 = malloc(bytes);
	void *src, *d1, *d2;
	if (!h || !r1 || !r2)
		abort();
	CFRT_TRY(ctx, cfrt_alloc(ctx, &src, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &d1, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &d2, bytes));
	host_fill(ctx, t, src, n, h, 11);
	cfrt_view vs = cfrt_view_contig((char *)src + off * es, t, 4, dim4), v1, v2;
	for (int d = 0; d < 4; d++)
		vs.stride[d] = st[d];
	v1 = vs, v2 = vs;
	v1.p = (char *)d1 + off * es, v2.p = (char *)d2 + off * es;
	/* whole: a kernel that shares the angles; slices of SLICE rows (the
	 * last of fewer): per pair */
	CFRT_TRY(ctx, cfrt_rope(ctx, &v1, &vs, dim, 10000.0, 0, inverse));
	for (int64_t r = 0; r < dim4[dim]; r += SLICE) {
		int64_t k = dim4[dim] - r < SLICE ? dim4[dim] - r : SLICE;
		cfrt_view a = cfrt_view_slice(vs, dim, r, k);
		cfrt_view b = cfrt_view_slice(v2, dim, r, k);
		CFRT_TRY(ctx, cfrt_rope(ctx, &b, &a, dim, 10000.0, r, inverse));
	}
	CFRT_TRY(ctx, cfrt_download(ctx, r1, d1, bytes));
	CFRT_TRY(ctx, cfrt_download(ctx, r2, d2, bytes));
	double worst = 0;
	double tol = t == CFRT_F32 ? 1e-5 : t == CFRT_F16 ? 1e-3 : 8e-3;
	int64_t differ = 0, idx[4];
	for (idx[0] = 0; idx[0] < dim4[0]; idx[0]++)
		for (idx[1] = 0; idx[1] < dim4[1]; idx[1]++)
			for (idx[2] = 0; idx[2] < dim4[2]; idx[2]++)
				for (idx[3] = 0; idx[3] < half; idx[3]++) {
					int64_t j = idx[3], o1 = off + at(&vs, idx), o2;
					int64_t k[4] = {idx[0], idx[1], idx[2], j + half};
					o2 = off + at(&vs, k);
					double ang = (double)idx[dim] *
					             pow(10000.0, -2.0 * (double)j / (double)dh);
					double c = cos(ang), s = (inverse ? -1 : 1) * sin(ang);
					double x1 = host_elem(t, h, o1), x2 = host_elem(t, h, o2);
					double e1 = fabs(host_elem(t, r1, o1) - (x1 * c - x2 * s));
					double e2 = fabs(host_elem(t, r1, o2) - (x2 * c + x1 * s));
					worst = fmax(worst, fmax(e1, e2));
					differ += memcmp(r1 + o1 * es, r2 + o1 * es, es) != 0;
					differ += memcmp(r1 + o2 * es, r2 + o2 * es, es) != 0;
				}
	int ok = worst <= tol && differ == 0;
	nbad += !ok;
	printf("rope_check: %s %s%s: vs double %.2e (tol %.0e), %lld elements "
	       "differ from the per-pair kernel's: %s\n", name, tname(t),
	       inverse ? " inverse" : "", worst, tol, (long long)differ,
	       ok ? "ok" : "MISMATCH");
	fflush(stdout);
	CFRT_TRY(ctx, cfrt_free(ctx, src));
	CFRT_TRY(ctx, cfrt_free(ctx, d1));
	CFRT_TRY(ctx, cfrt_free(ctx, d2));
	free(h), free(r1), free(r2);
}

/* the row-major strides of dims d */
/* The generated code's rope through a head view (plan.c's plan_joint,
 * cg_par.c's emit_rope_heads): forward, the heads of [B,S,H*Dh] rows into packed
 * [B,H,S,Dh]; inverse, packed heads into the heads of [B,S,H*Dh] rows;
 * bit for bit against the head split (merge) as a copy and the rope on
 * packed heads, which the cases above check against double. */
static void check_heads(cfrt_ctx *ctx, cfrt_dtype t, int inverse)
{
	int64_t d4[4] = {NB, NH, NS, DH}, n = NB * NH * NS * DH;
	size_t es = cfrt_dtype_size(t), bytes = (size_t)n * es;
	unsigned char *r1 = malloc(bytes), *r2 = malloc(bytes), *h = malloc(bytes);
	void *src, *d1, *d2, *tmp;
	if (!r1 || !r2 || !h)
		abort();
	CFRT_TRY(ctx, cfrt_alloc(ctx, &src, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &d1, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &d2, bytes));
	CFRT_TRY(ctx, cfrt_alloc(ctx, &tmp, bytes));
	host_fill(ctx, t, src, n, h, 23);
	int64_t flat[3] = {NB, NS, NH * DH};
	cfrt_view fs = cfrt_view_contig(src, t, 3, flat), f1 = cfrt_view_contig(d1, t, 3, flat);
	cfrt_view f2 = cfrt_view_contig(d2, t, 3, flat);
	cfrt_view ps = cfrt_view_contig(src, t, 4, d4), p1 = cfrt_view_contig(d1, t, 4, d4);
	cfrt_view p2 = cfrt_view_contig(d2, t, 4, d4), pt = cfrt_view_contig(tmp, t, 4, d4);
	if (!inverse) { /* split then rope */
		cfrt_view hv = cfrt_view_heads(fs, NH);
		CFRT_TRY(ctx, cfrt_rope(ctx, &p1, &hv, 2, 10000.0, 0, 0));
		CFRT_TRY(ctx, cfrt_copy(ctx, &pt, &hv));
		CFRT_TRY(ctx, cfrt_rope(ctx, &p2, &pt, 2, 10000.0, 0, 0));
	} else { /* rope_grad then merge */
		cfrt_view h1 = cfrt_view_heads(f1, NH), h2 = cfrt_view_heads(f2, NH);
		CFRT_TRY(ctx, cfrt_rope(ctx, &h1, &ps, 2, 10000.0, 0, 1));
		CFRT_TRY(ctx, cfrt_rope(ctx, &pt, &ps, 2, 10000.0, 0, 1));
		CFRT_TRY(ctx, cfrt_copy(ctx, &h2, &pt));
	}
	CFRT_TRY(ctx, cfrt_download(ctx, r1, d1, bytes));
	CFRT_TRY(ctx, cfrt_download(ctx, r2, d2, bytes));
	int ok = memcmp(r1, r2, bytes) == 0;
	nbad += !ok;
	printf("rope_check: %s through a head view, %s: %s\n",
	       inverse ? "inverse into the heads of [B,S,H*Dh]" : "forward from the heads of [B,S,H*Dh]",
	       t == CFRT_F32 ? "f32" : t == CFRT_BF16 ? "bf16" : "f16",
	       ok ? "ok" : "MISMATCH (bits differ from the copy and the rope)");
	fflush(stdout);
	CFRT_TRY(ctx, cfrt_free(ctx, src));
	CFRT_TRY(ctx, cfrt_free(ctx, d1));
	CFRT_TRY(ctx, cfrt_free(ctx, d2));
	CFRT_TRY(ctx, cfrt_free(ctx, tmp));
	free(r1), free(r2), free(h);
}

static void packed(const int64_t d[4], int64_t st[4])
{
	st[3] = 1;
	for (int k = 2; k >= 0; k--)
		st[k] = st[k + 1] * d[k + 1];
}

int main(int argc, char **argv)
{
	cfrt_ctx *ctx;
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CFRT_TRY(NULL, cfrt_init(&ctx, MPI_COMM_WORLD, size, "rope_check"));
	int64_t bhsd[4] = {NB, NH, NS, DH}, bshd[4] = {NB, NS, NH, DH};
	int64_t pk[4], split[4] = {NS * NH * DH, DH, NH * DH, 1}; /* heads of [B,S,H*Dh] */
	int64_t lines[4] = {NS * NH * DH, NH * DH, DH, 1};
	int64_t odd[4] = {1, 3, 3001, 48}, podd[4];
	int64_t one[4] = {1, 1, 8192, DH}, pone[4];
	int64_t many[4] = {1, 1024, 130, DH}, pmany[4];
	int64_t d36[4] = {1, 2, 4096, 36}, p36[4];
	packed(bhsd, pk), packed(odd, podd), packed(one, pone);
	packed(many, pmany), packed(d36, p36);
	cfrt_dtype all[3] = {CFRT_F32, CFRT_BF16, CFRT_F16};
	for (int inv = 0; inv < 2; inv++) {
		for (int k = 0; k < 3; k++)
			check(ctx, "[B,H,S,Dh] dim 2", all[k], bhsd, pk, 2, inv, 0);
		check(ctx, "heads of [B,S,H*Dh] dim 2", CFRT_BF16, bhsd, split, 2, inv, 0);
		check(ctx, "[B,S,H,Dh] dim 1", CFRT_F32, bshd, lines, 1, inv, 0);
		check(ctx, "[B,S,H,Dh] dim 1", CFRT_BF16, bshd, lines, 1, inv, 0);
		check(ctx, "[1,3,3001,48] dim 2", CFRT_BF16, odd, podd, 2, inv, 0);
		check(ctx, "[1,3,3001,48] dim 2", CFRT_F32, odd, podd, 2, inv, 0);
		check(ctx, "[1,1,8192,Dh] dim 2", CFRT_BF16, one, pone, 2, inv, 0);
		check(ctx, "[1,1024,130,Dh] dim 1", CFRT_BF16, many, pmany, 1, inv, 0);
		/* the general kernel (rope_positions): unaligned, Dh/2 odd */
		check(ctx, "[B,H,S,Dh] dim 2, one element off", CFRT_BF16, bhsd, pk, 2,
		      inv, 1);
		check(ctx, "[1,2,4096,36] dim 2", CFRT_BF16, d36, p36, 2, inv, 0);
		check(ctx, "[1,2,4096,36] dim 2", CFRT_F32, d36, p36, 2, inv, 0);
		for (int k = 0; k < 3; k++)
			check_heads(ctx, all[k], inv);
	}
	if (nbad)
		printf("rope_check: %d failed\n", nbad);
	else
		printf("rope_check: all ok\n");
	CFRT_TRY(NULL, cfrt_finalize(ctx));
	MPI_Finalize();
	return nbad != 0;
}
