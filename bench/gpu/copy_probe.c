/* copy_probe.c: the copies of the Llama layer's step (issue 52) on one
 * GPU, each way the CUDA backend can make them: a contiguous copy (the
 * tp = 1 gather, `attn0.xa = t1`) by cudaMemcpyAsync, as cfrt_copy makes
 * it, and by the elementwise copy kernel on the same flat run (kernels.cu's
 * ew_flat); the head split of q and of k ([S, H, Dh] rows into [H, S, Dh],
 * ew_rows). Sizes: 8, 32 and 112 MiB of bf16 (k's split, q's and the
 * MLP's hidden rows).
 *
 *   copy_probe
 *
 * Prints "copy_probe: WHAT MiB: T ms, G GB/s" (T: median of 20 calls
 * after 3 warm-ups, each between two CUDA events; G counts the bytes read
 * and written). Exits 1 when a call fails. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/kern.h"

enum { ITERS = 20, S = 4096, DH = 128 };

static int cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

#define OK(call) do { int rc_ = (int)(call); if (rc_) { \
	fprintf(stderr, "copy_probe: %s: error %d\n", #call, rc_); exit(1); } } while (0)

/* how: 0 cudaMemcpyAsync of the flat run, 1 the kernel on it, 2 the head
 * split of rows of h heads */
static float run(cudaStream_t s, int how, void *d, void *a, int64_t n, int h)
{
	kview vd = {d, 1, {n}, {1}}, va = {a, 1, {n}, {1}};
	if (how == 2) {
		int64_t dims[3] = {h, n / h / DH, DH};
		vd.nd = va.nd = 3;
		for (int k = 0; k < 3; k++)
			vd.dim[k] = va.dim[k] = dims[k];
		vd.st[0] = dims[1] * DH, vd.st[1] = DH, vd.st[2] = 1;
		va.st[0] = DH, va.st[1] = (int64_t)h * DH, va.st[2] = 1;
	}
	cudaEvent_t e0, e1;
	float t[ITERS];
	OK(cudaEventCreate(&e0));
	OK(cudaEventCreate(&e1));
	for (int i = -3; i < ITERS; i++) {
		OK(cudaEventRecord(e0, s));
		if (how == 0)
			OK(cudaMemcpyAsync(d, a, (size_t)n * 2, cudaMemcpyDeviceToDevice, s));
		else
			OK(cfrtk_elementwise(s, CFRT_BF16, K_COPY, vd, va, va, 0.0));
		OK(cudaEventRecord(e1, s));
		OK(cudaEventSynchronize(e1));
		if (i >= 0)
			OK(cudaEventElapsedTime(&t[i], e0, e1));
	}
	qsort(t, ITERS, sizeof t[0], cmp);
	return t[ITERS / 2];
}

int main(void)
{
	static const char *const what[] = {"cudaMemcpyAsync", "copy kernel (flat)",
	                                   "head split"};
	int mib[3] = {8, 32, 112}, heads[3] = {8, 32, 0};
	cudaStream_t s;
	void *a, *d;
	OK(cudaStreamCreate(&s));
	OK(cudaMalloc(&a, (size_t)112 << 20));
	OK(cudaMalloc(&d, (size_t)112 << 20));
	OK(cudaMemset(a, 0, (size_t)112 << 20));
	for (int k = 0; k < 3; k++)
		for (int how = 0; how < 3; how++) {
			int64_t n = ((int64_t)mib[k] << 20) / 2;
			if (how == 2 && !heads[k])
				continue;
			float ms = run(s, how, d, a, n, heads[k]);
			printf("copy_probe: %s %d MiB: %.4f ms, %.0f GB/s\n", what[how],
			       mib[k], ms, 2.0 * n * 2 / (ms * 1e6));
		}
	return 0;
}
