/* gemm_probe.c: one row-major GEMM C (M x N) = A (M x K) B (K x N) + beta C
 * on one GPU, timed through each way cuBLAS offers it, to tell which
 * one a runtime should call (issue 5: our GEMM against torch.matmul's):
 *
 *   gemm          cublasGemmEx, CUBLAS_GEMM_DEFAULT
 *   strided       cublasGemmStridedBatchedEx with one batch
 *   lt#i          cublasLtMatmul with heuristic answer i (i < --algos)
 *
 * all with f32 accumulation on the same inputs (uniform in [-1, 1),
 * rounded to bf16, truncated to f16) and a 32 MiB workspace, as the
 * backend gives cuBLAS.
 *
 *   gemm_probe [--type bf16|f16|f32] [--iters N] [--algos N] [--burst N]
 *              [--heat MS] [--cool MS] [--gap MS] M,N,K[,BETA]...
 *
 * Prints one line per way and shape:
 *   "m=M n=N k=K beta=B way=W ms=T tflops=F" (T: median of --iters runs
 * timed with events after 3 warm-ups; F counts 2MNK flops).
 * --burst N times N calls back to back in each run (T per call), as a
 * schedule's GEMMs run, instead of one call after an idle host sync;
 * --heat MS first keeps the GPU busy with the same call for MS
 * milliseconds, as a benchmark that has been running for a while has:
 * a GPU at its power limit lowers its clock, and a probe that times
 * single calls on an idle GPU reads its boost clock.
 * --cool MS and --gap MS time how fast that comes and goes: each timed run
 * then has its own heat, after MS milliseconds of an idle GPU (--cool),
 * and is itself MS milliseconds after the heat's end (--gap). */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "median.h"

enum { MAXSHAPES = 32, MAXALGOS = 16 };
#define WS_BYTES ((size_t)32 << 20)

typedef struct shape {
	int m, n, k;
	float beta;
} shape;

typedef struct probe {
	cudaDataType_t t;
	size_t esize;
	int iters, algos, burst;
	float heat, cool, gap; /* cool, gap < 0: unset */
	cudaStream_t s;
	cublasHandle_t blas;
	cublasLtHandle_t lt;
	void *ws, *a, *b, *c;
	cudaEvent_t e0, e1;
} probe;

static void
die(const char *what, const char *why)
{
	fprintf(stderr, "gemm_probe: %s: %s\n", what, why);
	exit(1);
}

static void
cuda(cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		die(what, cudaGetErrorString(e));
}

static int
blas_ok(cublasStatus_t e, const char *what)
{
	if (e == CUBLAS_STATUS_SUCCESS)
		return 1;
	fprintf(stderr, "gemm_probe: %s: %s\n", what, cublasGetStatusString(e));
	return 0;
}

static void
usage_exit(void)
{
	fprintf(stderr, "usage: gemm_probe [--type bf16|f16|f32] [--iters N] "
	        "[--algos N] [--burst N] [--heat MS] [--cool MS] [--gap MS] M,N,K[,BETA]...\n");
	exit(2);
}

/* Uniform [-1, 1) from a 64-bit hash of i, rounded to the probe's type. */
static void
fill_host(void *dst, size_t n, cudaDataType_t t, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull + seed;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		float v = (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f;
		uint32_t u;
		memcpy(&u, &v, 4);
		if (t == CUDA_R_32F) {
			((float *)dst)[i] = v;
		} else if (t == CUDA_R_16BF) {
			((uint16_t *)dst)[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
		} else {
			/* f16: |v| < 1, so the exponent stays in range */
			uint32_t s = (u >> 16) & 0x8000, e = (u >> 23) & 0xFF, f = u & 0x7FFFFF;
			((uint16_t *)dst)[i] = e < 103 ? (uint16_t)s :
			        e < 113 ? (uint16_t)(s | ((f | 0x800000) >> (126 - e))) :
			        (uint16_t)(s | (e - 112) << 10 | f >> 13);
		}
	}
}

static void *
dev_filled(size_t n, cudaDataType_t t, size_t esize, uint64_t seed)
{
	void *h = malloc(n * esize), *d;
	if (!h)
		die("malloc", "out of memory");
	fill_host(h, n, t, seed);
	cuda(cudaMalloc(&d, n * esize), "cudaMalloc");
	cuda(cudaMemcpy(d, h, n * esize, cudaMemcpyHostToDevice), "cudaMemcpy");
	free(h);
	return d;
}

/* ---- the ways ---- */

typedef struct way {
	const char *name;
	int (*run)(probe *, const shape *, void *);
	void *arg;
} way;

static int
run_gemm(probe *p, const shape *sh, void *arg)
{
	float one = 1.0f;
	(void)arg;
	return blas_ok(cublasGemmEx(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, sh->n, sh->m,
	               sh->k, &one, p->b, p->t, sh->n, p->a, p->t, sh->k, &sh->beta,
	               p->c, p->t, sh->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
	               "cublasGemmEx");
}

static int
run_strided(probe *p, const shape *sh, void *arg)
{
	float one = 1.0f;
	(void)arg;
	return blas_ok(cublasGemmStridedBatchedEx(p->blas, CUBLAS_OP_N, CUBLAS_OP_N,
	               sh->n, sh->m, sh->k, &one, p->b, p->t, sh->n, 0, p->a, p->t,
	               sh->k, 0, &sh->beta, p->c, p->t, sh->n, 0, 1,
	               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
	               "cublasGemmStridedBatchedEx");
}

/* cuBLASLt's operation and layouts of one shape, and its heuristic answers */
typedef struct ltplan {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulHeuristicResult_t res[MAXALGOS];
	int nres, pick;
} ltplan;

static int
lt_plan(probe *p, const shape *sh, ltplan *q)
{
	cublasLtMatmulPreference_t pref;
	size_t ws = WS_BYTES;
	int ok = blas_ok(cublasLtMatmulDescCreate(&q->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
	                 "cublasLtMatmulDescCreate");
	/* column-major C^T (n x m) = B^T (n x k) A^T (k x m) */
	ok = ok && blas_ok(cublasLtMatrixLayoutCreate(&q->lb, p->t, sh->n, sh->k, sh->n), "layout");
	ok = ok && blas_ok(cublasLtMatrixLayoutCreate(&q->la, p->t, sh->k, sh->m, sh->k), "layout");
	ok = ok && blas_ok(cublasLtMatrixLayoutCreate(&q->lc, p->t, sh->n, sh->m, sh->n), "layout");
	ok = ok && blas_ok(cublasLtMatmulPreferenceCreate(&pref), "preference");
	ok = ok && blas_ok(cublasLtMatmulPreferenceSetAttribute(pref,
	                   CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "preference");
	ok = ok && blas_ok(cublasLtMatmulAlgoGetHeuristic(p->lt, q->op, q->lb, q->la, q->lc,
	                   q->lc, pref, p->algos, q->res, &q->nres), "cublasLtMatmulAlgoGetHeuristic");
	return ok;
}

static int
run_lt(probe *p, const shape *sh, void *arg)
{
	ltplan *q = arg;
	float one = 1.0f;
	return blas_ok(cublasLtMatmul(p->lt, q->op, &one, p->b, q->lb, p->a, q->la, &sh->beta,
	               p->c, q->lc, p->c, q->lc, &q->res[q->pick].algo, p->ws, WS_BYTES, p->s),
	               "cublasLtMatmul");
}

/* ms of one run of p->burst calls of w, timed with events */
static float
time_burst(probe *p, const shape *sh, const way *w)
{
	float t;

	cuda(cudaEventRecord(p->e0, p->s), "cudaEventRecord");
	for (int j = 0; j < p->burst; j++)
		w->run(p, sh, w->arg);
	cuda(cudaEventRecord(p->e1, p->s), "cudaEventRecord");
	cuda(cudaEventSynchronize(p->e1), "cudaEventSynchronize");
	cuda(cudaEventElapsedTime(&t, p->e0, p->e1), "cudaEventElapsedTime");
	return t;
}

static void
idle(float ms)
{
	long long ns = (long long)(ms * 1e6f);
	struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};

	if (ns > 0)
		nanosleep(&ts, NULL);
}

/* p->heat ms of back-to-back runs of w */
static void
heat(probe *p, const shape *sh, const way *w)
{
	for (float hot = 0; hot < p->heat;)
		hot += time_burst(p, sh, w);
}

/* Median ms per call of p->iters runs after 3 warm-ups (and p->heat ms
 * of calls, once or, with --cool or --gap, before each run); < 0 when a
 * call fails. */
static float
time_way(probe *p, const shape *sh, const way *w)
{
	double t[256];
	int n = p->iters < 256 ? p->iters : 256, each = p->cool >= 0 || p->gap >= 0;

	for (int i = 0; i < 3; i++)
		if (!w->run(p, sh, w->arg))
			return -1;
	if (!each)
		heat(p, sh, w);
	for (int i = 0; i < n; i++) {
		if (each) {
			idle(p->cool);
			heat(p, sh, w);
			idle(p->gap);
		}
		t[i] = time_burst(p, sh, w) / (float)p->burst;
	}
	return (float)median(t, n);
}

static void
report(const shape *sh, const char *name, float ms)
{
	double fl = 2.0 * sh->m * sh->n * (double)sh->k;
	if (ms < 0)
		printf("m=%d n=%d k=%d beta=%g way=%s ms=fail\n", sh->m, sh->n, sh->k,
		       sh->beta, name);
	else
		printf("m=%d n=%d k=%d beta=%g way=%s ms=%.4f tflops=%.1f\n", sh->m, sh->n,
		       sh->k, sh->beta, name, ms, fl / (ms * 1e9));
	fflush(stdout);
}

static void
probe_shape(probe *p, const shape *sh)
{
	way ways[] = {{"gemm", run_gemm, NULL}, {"strided", run_strided, NULL}};
	ltplan q;
	char name[32];

	for (size_t i = 0; i < sizeof ways / sizeof *ways; i++)
		report(sh, ways[i].name, time_way(p, sh, &ways[i]));
	if (!lt_plan(p, sh, &q))
		return;
	for (q.pick = 0; q.pick < q.nres; q.pick++) {
		way w = {name, run_lt, &q};
		snprintf(name, sizeof name, "lt#%d", q.pick);
		report(sh, name, time_way(p, sh, &w));
	}
	cublasLtMatrixLayoutDestroy(q.la);
	cublasLtMatrixLayoutDestroy(q.lb);
	cublasLtMatrixLayoutDestroy(q.lc);
	cublasLtMatmulDescDestroy(q.op);
}

int
main(int argc, char **argv)
{
	probe p = {.t = CUDA_R_16BF, .esize = 2, .iters = 20, .algos = 8, .burst = 1,
	           .cool = -1, .gap = -1};
	shape sh[MAXSHAPES];
	int nsh = 0;
	size_t ma = 0, mb = 0, mc = 0;

	for (int i = 1; i < argc; i++) {
		int more = i + 1 < argc;
		if (!strcmp(argv[i], "--type") && more) {
			const char *t = argv[++i];
			p.t = !strcmp(t, "f32") ? CUDA_R_32F : !strcmp(t, "f16") ? CUDA_R_16F :
			      !strcmp(t, "bf16") ? CUDA_R_16BF : (usage_exit(), CUDA_R_16BF);
			p.esize = p.t == CUDA_R_32F ? 4 : 2;
		} else if (!strcmp(argv[i], "--iters") && more) {
			p.iters = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--algos") && more) {
			p.algos = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--burst") && more) {
			p.burst = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--heat") && more) {
			p.heat = (float)atof(argv[++i]);
		} else if (!strcmp(argv[i], "--cool") && more) {
			p.cool = (float)atof(argv[++i]);
		} else if (!strcmp(argv[i], "--gap") && more) {
			p.gap = (float)atof(argv[++i]);
		} else if (nsh < MAXSHAPES) {
			shape *q = &sh[nsh++];
			q->beta = 0;
			if (sscanf(argv[i], "%d,%d,%d,%f", &q->m, &q->n, &q->k, &q->beta) < 3 ||
			    q->m < 1 || q->n < 1 || q->k < 1)
				usage_exit();
		} else {
			usage_exit();
		}
	}
	if (!nsh || p.iters < 1 || p.algos < 1 || p.algos > MAXALGOS || p.burst < 1 ||
	    p.heat < 0)
		usage_exit();
	for (int i = 0; i < nsh; i++) {
		size_t m = (size_t)sh[i].m, n = (size_t)sh[i].n, k = (size_t)sh[i].k;
		ma = m * k > ma ? m * k : ma;
		mb = k * n > mb ? k * n : mb;
		mc = m * n > mc ? m * n : mc;
	}
	cuda(cudaStreamCreate(&p.s), "cudaStreamCreate");
	cuda(cudaEventCreate(&p.e0), "cudaEventCreate");
	cuda(cudaEventCreate(&p.e1), "cudaEventCreate");
	cuda(cudaMalloc(&p.ws, WS_BYTES), "cudaMalloc");
	if (!blas_ok(cublasCreate(&p.blas), "cublasCreate") ||
	    !blas_ok(cublasSetStream(p.blas, p.s), "cublasSetStream") ||
	    !blas_ok(cublasSetWorkspace(p.blas, p.ws, WS_BYTES), "cublasSetWorkspace") ||
	    !blas_ok(cublasLtCreate(&p.lt), "cublasLtCreate"))
		return 1;
	p.a = dev_filled(ma, p.t, p.esize, 1);
	p.b = dev_filled(mb, p.t, p.esize, 2);
	p.c = dev_filled(mc, p.t, p.esize, 3);
	for (int i = 0; i < nsh; i++)
		probe_shape(&p, &sh[i]);
	return 0;
}
