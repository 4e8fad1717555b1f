/* cfrt-calibrate: measures the machine it runs on for cfc's cost model
 * and writes the profile that `cfc --profile=FILE` reads
 * (docs/PROFILE.md). Run it under mpirun like an application, on as many
 * ranks as the models will use (at least 2 for the transfers):
 *
 *   mpirun -n 4 cfrt-calibrate -o machine.prof
 *
 * Every rank measures at once, as every rank computes at once in a real
 * run; a time is the median over repetitions of the span from the first
 * rank's start to the last rank's end when the ranks share a node (as the
 * generated driver and make bench time a run: with more ranks than cores
 * it counts the time a rank waits for a core), else of the slowest rank's
 * own time.
 * It measures, through the runtime's public API only (so the same source
 * calibrates the MPI backend and, linked with libcfrt_cuda, the GPUs):
 *   gemm   GEMM seconds on a grid of shapes (m, n, k), per element type;
 *   ew     bytes per second of elementwise adds;
 *   op     the same of every other op cfc's model prices by bytes (gelu,
 *          the norms, softmax, rope, their gradients, the heads' split
 *          and merge, ...);
 *   attn   attention flop per second by sequence length, without and
 *          with a causal mask (attn_causal: half the flop); attn_grad
 *          and attn_grad_causal the same of its backward from the saved
 *          log-sum-exp, dq, dk and dv by a call each as generated code
 *          calls them (2.5 times the forward's flop in all);
 *   p2p    seconds of one message by size, with 1, 2 and 4 transfers at
 *          once at each rank (one pair; the ring; both ring directions);
 *   coll   the library's all_gather, reduce_scatter, all_reduce and
 *          all_to_all by block size, on all the ranks;
 *   slowdown  a GEMM's time while the ring's transfers run, over its time
 *          alone; slowdown 4 the same under both ring directions;
 *   overlap   those transfers' own time that passed per second of the
 *          GEMM under them (1: they move on their own; near 0: only
 *          inside MPI);
 *   overlap_coll  the same of each library collective on GPUs; on CPUs
 *          the rate at which the model, which slows no compute under a
 *          collective, replays its probe (probe_overlap_coll).
 * Each point is visited in passes over all of them and keeps the median
 * of its visits (see measure()); on GPUs the compute points are timed on
 * a GPU kept at its power limit, as a model's GEMMs keep it (heat()).
 * --quick measures a few small points (seconds;
 * for tests). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cfrt.h"
#include "median.h"
#include "outfile.h"
#include "profcheck.h"

typedef struct Cal {
	cfrt_ctx *ctx;
	int rank, size, quick, gpu;
	unsigned types; /* bit t: measure the compute of element type t */
	cfrt_dtype probe_t; /* the type of the slowdown probe's GEMM */
	FILE *out; /* rank 0 */
	void *a, *b, *c; /* device buffers of cap bytes each */
	size_t cap;
	double budget; /* seconds per point at most, over every pass */
	int span;      /* one node: times are spans on the node's clock */
	int passes;    /* times each point is visited, the others between */
	int gemm_calls; /* GPUs: GEMM calls back to back a run (0: about
	                 * RUN_S worth, at most MAXCALLS; 1: each alone) */
	double heat_call[CFRT_F16 + 1]; /* seconds of one of heat()'s GEMMs of each type */
	struct Point *pt; /* what is measured, in the order it is written */
	int npt, cappt;
	int quiet;  /* no progress lines */
	int refuse; /* refuse to write untrusted points (else write them, warn) */
	int refuse_given; /* --check=: else refuse, but --quick warns */
	double t0;  /* MPI_Wtime() at the start */
} Cal;

static void
die_rc(Cal *C, int rc, const char *what)
{
	if (rc != CFRT_OK) {
		fprintf(stderr, "cfrt-calibrate: rank %d: %s: %s\n", C->rank, what,
		        cfrt_last_error(C->ctx));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* The time of one run of fn on every rank at once, the median of reps
 * runs after one to warm up (fewer, but least, when they take longer than
 * the budget): the span from the
 * first rank's start to the last rank's end (C->span), else the slowest
 * rank's own time. A rank's own time misses where ranks outnumber cores:
 * a call shorter than the scheduler's time slice runs at a whole core's
 * speed while the other ranks wait for one (4 ranks on 2 cores: GEMMs of
 * 0.1-1 ms read 68-100 GFLOP/s, of 5-45 ms 43-59; as spans 26-47 and
 * 30-49).
 * fn returns nonzero when the backend cannot run it (then -1, on every
 * rank). */
typedef int (*RunFn)(Cal *C, void *arg);

/* The time from t0 to t1 of every rank, as C times: the span from the
 * first rank's t0 to the last one's t1 (C->span), else the slowest
 * rank's own. Collective. */
static double
elapsed(Cal *C, double t0, double t1)
{
	double mine[3] = {t1 - t0, -t0, t1}, all[3];

	MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return C->span ? all[1] + all[2] : all[0];
}

static double
timed(Cal *C, RunFn fn, void *arg, int reps, double budget, int least)
{
	double t[64], spent = 0;
	int n = 0;

	if (reps > 64)
		reps = 64;
	/* one run to warm up (and to see whether the backend can) */
	int bad = fn(C, arg) != 0, anybad;
	cfrt_sync(C->ctx);
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (anybad)
		return -1;
	while (n < reps && (n < least || spent < budget)) {
		cfrt_barrier(C->ctx);
		double t0 = cfrt_wtime(C->ctx);
		die_rc(C, fn(C, arg), "a measured call");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		double dt = elapsed(C, t0, cfrt_wtime(C->ctx));
		t[n++] = dt;
		spent += dt;
	}
	return median(t, n);
}

static const char *const tname[] = {"f32", "f64", "bf16", "f16"};

/* ---- transfers ---- */

typedef struct P2p {
	int64_t count; /* f32 elements of one message */
	int conc;      /* 1: rank 0 to rank 1 alone; 2: the ring; 4: both ways */
} P2p;

/* Posts p's transfers from send into recv (a second pair, both ways,
 * half a buffer on): *n requests in q. */
static int
p2p_start(Cal *C, const P2p *p, char *send, char *recv, size_t half, cfrt_req q[4], int *n)
{
	int r = C->rank, N = C->size, next = (r + 1) % N, prev = (r + N - 1) % N;
	int rc = CFRT_OK;

	*n = 0;
	cfrt_group_begin(C->ctx);
	if (p->conc == 1) {
		if (r == 0)
			rc = cfrt_isend(C->ctx, send, p->count, CFRT_F32, 1, 1, &q[(*n)++]);
		else if (r == 1)
			rc = cfrt_irecv(C->ctx, recv, p->count, CFRT_F32, 0, 1, &q[(*n)++]);
	} else {
		rc = cfrt_isend(C->ctx, send, p->count, CFRT_F32, next, 1, &q[(*n)++]);
		if (rc == CFRT_OK)
			rc = cfrt_irecv(C->ctx, recv, p->count, CFRT_F32, prev, 1, &q[(*n)++]);
		if (rc == CFRT_OK && p->conc == 4) {
			rc = cfrt_isend(C->ctx, send + half, p->count, CFRT_F32, prev, 2, &q[(*n)++]);
			if (rc == CFRT_OK)
				rc = cfrt_irecv(C->ctx, recv + half, p->count, CFRT_F32, next, 2,
				                &q[(*n)++]);
		}
	}
	cfrt_group_end(C->ctx);
	return rc;
}

static int
run_p2p(Cal *C, void *arg)
{
	cfrt_req q[4];
	int n, rc = p2p_start(C, arg, C->a, C->b, C->cap / 2, q, &n);

	return rc == CFRT_OK ? cfrt_waitall(C->ctx, n, q) : rc;
}

typedef struct Coll {
	int op; /* 0 all_gather, 1 reduce_scatter, 2 all_reduce, 3 all_to_all */
	int64_t count; /* f32 elements of one rank's block */
} Coll;

static const char *const coll_name[] = {"all_gather", "reduce_scatter", "all_reduce",
                                        "all_to_all"};

/* c's collective from a into recv: started (req), or run (req NULL). */
static int
coll_call(Cal *C, const Coll *c, void *recv, cfrt_req *req)
{
	cfrt_ctx *x = C->ctx;

	switch (c->op) {
	case 0:
		return req ? cfrt_iall_gather(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_all_gather(x, C->a, recv, c->count, CFRT_F32);
	case 1:
		return req ? cfrt_ireduce_scatter(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_reduce_scatter(x, C->a, recv, c->count, CFRT_F32);
	case 2:
		return req ? cfrt_iall_reduce(x, C->a, recv, c->count * C->size, CFRT_F32, req)
		           : cfrt_all_reduce(x, C->a, recv, c->count * C->size, CFRT_F32);
	default:
		return req ? cfrt_iall_to_all(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_all_to_all(x, C->a, recv, c->count, CFRT_F32);
	}
}

static int
run_coll(Cal *C, void *arg)
{
	return coll_call(C, arg, C->b, NULL);
}

/* ---- compute ---- */

typedef struct Gemm {
	cfrt_dtype t;
	int64_t m, n, k;
	int acc;   /* adds to its output (beta = 1), as FuseRS accumulates */
	int calls; /* back to back a run (at least 1); the point's time is a call's */
} Gemm;

/* g of the a and b buffers into out. */
static int
gemm_call(Cal *C, const Gemm *g, void *out)
{
	return cfrt_gemm(C->ctx, g->t, CFRT_NOTRANS, CFRT_NOTRANS, g->m, g->n, g->k, 1, C->a,
	                 g->k, 0, C->b, g->n, 0, g->acc, out, g->n, 0, 1);
}

static int
run_gemm(Cal *C, void *arg)
{
	const Gemm *g = arg;
	int rc = CFRT_OK;

	for (int i = 0; i < g->calls && rc == CFRT_OK; i++)
		rc = gemm_call(C, g, C->c);
	return rc;
}

typedef struct Ew {
	cfrt_dtype t;
	int64_t n;
	int reps; /* adds per run: a short one is timed in a loop */
} Ew;

static int
run_ew(Cal *C, void *arg)
{
	const Ew *e = arg;
	cfrt_view a = cfrt_view_contig(C->a, e->t, 1, &e->n);
	cfrt_view b = cfrt_view_contig(C->b, e->t, 1, &e->n);
	cfrt_view c = cfrt_view_contig(C->c, e->t, 1, &e->n);
	int rc = CFRT_OK;

	for (int i = 0; i < e->reps && rc == CFRT_OK; i++)
		rc = cfrt_add(C->ctx, &c, &a, &b);
	return rc;
}

/* The ops other than GEMM and attention, each by its bytes per second
 * (inputs and output, as cfc's model counts them) on [rows, 64]; not
 * add, which the ew table times by size. */
typedef struct Op {
	const char *name; /* cfc's name of it */
	int nin;          /* tensor inputs of the size of the output */
} Op;

static const Op ops[] = {
	{"mul", 2}, {"gelu", 1}, {"silu", 1}, {"relu", 1}, {"sigmoid", 1},
	{"exp", 1}, {"gelu_grad", 2}, {"silu_grad", 2}, {"relu_grad", 2}, {"sigmoid_grad", 2},
	{"layernorm", 1}, {"rmsnorm", 1}, {"softmax", 1}, {"softmax_grad", 2}, {"rope", 1},
	{"split_heads", 1}, {"merge_heads", 1},
};
enum { NOPS = sizeof ops / sizeof ops[0] };

typedef struct OpRun {
	cfrt_dtype t;
	int64_t n; /* elements */
	int k;     /* ops[k] */
} OpRun;

static int
run_op(Cal *C, void *arg)
{
	const OpRun *o = arg;
	int64_t d[2] = {o->n / 64, 64};
	cfrt_view a = cfrt_view_contig(C->a, o->t, 2, d), b = cfrt_view_contig(C->b, o->t, 2, d);
	cfrt_view c = cfrt_view_contig(C->c, o->t, 2, d);
	const char *n = ops[o->k].name;

	if (!strcmp(n, "mul")) return cfrt_mul(C->ctx, &c, &a, &b);
	if (!strcmp(n, "gelu")) return cfrt_gelu(C->ctx, &c, &a);
	if (!strcmp(n, "silu")) return cfrt_silu(C->ctx, &c, &a);
	if (!strcmp(n, "relu")) return cfrt_relu(C->ctx, &c, &a);
	if (!strcmp(n, "sigmoid")) return cfrt_sigmoid(C->ctx, &c, &a);
	if (!strcmp(n, "exp")) return cfrt_exp(C->ctx, &c, &a);
	if (!strcmp(n, "gelu_grad")) return cfrt_gelu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "silu_grad")) return cfrt_silu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "relu_grad")) return cfrt_relu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "sigmoid_grad")) return cfrt_sigmoid_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "layernorm")) return cfrt_layernorm(C->ctx, &c, &a, NULL, NULL, 1e-5);
	if (!strcmp(n, "rmsnorm")) return cfrt_rmsnorm(C->ctx, &c, &a, NULL, 1e-5);
	if (!strcmp(n, "softmax")) return cfrt_softmax(C->ctx, &c, &a);
	if (!strcmp(n, "softmax_grad")) return cfrt_softmax_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "rope")) return cfrt_rope(C->ctx, &c, &a, c.nd - 2, 10000, 0, 0);
	/* the heads: a copy between [S, H*Dh] and [H, S, Dh], runs of Dh
	 * elements, as the generated code moves them (GPU: bench-gpu's 128;
	 * CPU: make bench's 64); from a into c, as the others */
	int64_t Dh = C->gpu ? 128 : 64, H = C->gpu ? 8 : 4, S = o->n / (H * Dh);
	int split = !strcmp(n, "split_heads");
	cfrt_view rows = cfrt_view_heads(cfrt_view_contig(split ? C->a : C->c, o->t, 2,
	                                                  (int64_t[]){S, H * Dh}), H);
	cfrt_view heads = cfrt_view_contig(split ? C->c : C->a, o->t, 3, (int64_t[]){H, S, Dh});
	return split ? cfrt_copy(C->ctx, &heads, &rows) : cfrt_copy(C->ctx, &rows, &heads);
}

typedef struct Attn {
	cfrt_dtype t;
	int64_t dims[4]; /* B, H, S, Dh */
	int causal;
	int lse_ready; /* run_attn_grad: the forward wrote the lse */
} Attn;

static int
run_attn(Cal *C, void *arg)
{
	const Attn *x = arg;
	/* [B, H, S, Dh] in a run, as the generated code passes them: its
	 * split_heads copies each head's rows together. It timed views of
	 * [B, S, H*Dh] before: 4 H100s read causal bf16 at 4096 keys at 480
	 * TFLOP/s (lease 11), which prices bench-gpu's case c attention at
	 * 1.139 ms; traced in lease 10, it ran in 0.852 (645 TFLOP/s) */
	cfrt_view q = cfrt_view_contig(C->a, x->t, 4, x->dims);
	cfrt_view k = q, v = q, o = q;

	k.p = C->b;
	v.p = (char *)C->b + C->cap / 2;
	o.p = C->c;
	return cfrt_attention(C->ctx, &o, &q, &k, &v, x->causal, 0);
}

/* The backward from a saved log-sum-exp, as the generated backward calls
 * it (dq, dk and dv by a call each): q, out, dout and the lse in a, k and
 * v in b, dq, dk and dv in c. */
static int
run_attn_grad(Cal *C, void *arg)
{
	Attn *x = arg;
	int64_t B = x->dims[0], H = x->dims[1], S = x->dims[2], Dh = x->dims[3];
	size_t sz = (size_t)(B * H * S * Dh) * cfrt_dtype_size(x->t);
	cfrt_view q = cfrt_view_contig(C->a, x->t, 4, x->dims); /* as run_attn's */
	cfrt_view k = q, v = q, o = q, dout = q, dq = q, dk = q, dv = q;
	cfrt_view lse = {(char *)C->a + 3 * sz, CFRT_LSE_TYPE(x->t), 3, {B, H, S},
	                 {H * S, S, 1}};

	o.p = (char *)C->a + sz;
	dout.p = (char *)C->a + 2 * sz;
	k.p = C->b;
	v.p = (char *)C->b + sz;
	dq.p = C->c;
	dk.p = (char *)C->c + sz;
	dv.p = (char *)C->c + 2 * sz;
	if (!x->lse_ready) {
		int rc = cfrt_attention_lse(C->ctx, &o, &lse, &q, &k, &v, x->causal, 0);
		if (rc != CFRT_OK)
			return rc;
		x->lse_ready = 1;
	}
	/* one call per gradient, as the generated backward calls it (each is
	 * a node of its own, which the proof and the schedules place apart) */
	int rc = cfrt_attention_grad_lse(C->ctx, &dq, NULL, NULL, &q, &k, &v, &o, &dout, &lse,
	                                 x->causal, 0);
	if (rc == CFRT_OK)
		rc = cfrt_attention_grad_lse(C->ctx, NULL, &dk, NULL, &q, &k, &v, &o, &dout, &lse,
		                             x->causal, 0);
	if (rc == CFRT_OK)
		rc = cfrt_attention_grad_lse(C->ctx, NULL, NULL, &dv, &q, &k, &v, &o, &dout, &lse,
		                             x->causal, 0);
	return rc;
}

/* ---- the points, measured in passes ---- */

enum { MAXPASS = 15 };

/* Passes of a point that disagree by more than this share (the slowest
 * over the fastest, less 1) are written beside it as a comment. */
#define NOISY 0.10

/* GPUs (heat()): seconds of GEMMs before the first compute point after
 * others, and before each next one (an attention's: HEAT_ATTN). One
 * H100, every type but f32 heated, two runs each: 5 ms before each point
 * instead of 20 took the calibration from 58.0-64.6 s to 37.3-38.3 (every
 * type heated, as here: 44.2 s, docs/PROFILE.md); the bf16 GEMMs of
 * 0.5 ms and more read 0.969 times their times in
 * bench/results/2026-11-27-H100-lease8-9-1a07431/1gpu-alltypes.prof, as after 20
 * ms (0.957-0.969), but the attention of 2048 and more 0.919 (after 20
 * ms, 0.973-0.979) */
#define HEAT 1.0
#define HEAT_POINT 0.005
#define HEAT_ATTN 0.02

/* One point of the profile: fn on arg, written as "key VALUE", VALUE its
 * seconds or, when work > 0, work over them (a rate). */
typedef struct Point {
	RunFn fn;
	int t; /* the type the buffers must hold for it; -1: any (a transfer) */
	union {
		Gemm g;
		Ew e;
		OpRun o;
		Attn x;
		P2p p;
		Coll c;
	} arg;
	int reps;
	double work;
	double pass[MAXPASS]; /* each visit's median */
	int nv;    /* visits so far */
	int again; /* measure(): to be visited again */
	double s; /* their median; -1: the backend cannot */
	char key[64];
} Point;

static Point *
add(Cal *C, RunFn fn, int t, int reps, double work, const char *fmt, ...)
{
	if (C->npt == C->cappt) {
		C->cappt = C->cappt ? 2 * C->cappt : 256;
		C->pt = realloc(C->pt, (size_t)C->cappt * sizeof *C->pt);
		if (!C->pt) {
			fprintf(stderr, "cfrt-calibrate: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	Point *p = &C->pt[C->npt++];
	memset(p, 0, sizeof *p);
	p->fn = fn, p->t = t, p->reps = reps, p->work = work;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->key, sizeof p->key, fmt, ap);
	va_end(ap);
	return p;
}

/* Fills the a and b buffers with values of type t in [0, 1) (no NaN or
 * denormal slows a kernel): 0 where the backend has no such type, on
 * every rank. */
static int
fill(Cal *C, cfrt_dtype t)
{
	int64_t n = (int64_t)(C->cap / cfrt_dtype_size(t));
	cfrt_view fa = cfrt_view_contig(C->a, t, 1, &n), fb = cfrt_view_contig(C->b, t, 1, &n);
	int bad = cfrt_fill_uniform(C->ctx, &fa, 1) != CFRT_OK ||
	          cfrt_fill_uniform(C->ctx, &fb, 2) != CFRT_OK, anybad;

	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return !anybad;
}

/* Keeps a GPU busy with 4096^3 GEMMs of type t for secs seconds, as a
 * model's GEMMs keep it: an H100 at its power limit (700 W) lowers its
 * clock, and a call timed on an idle GPU reads the boost clock. One H100,
 * bf16 (bench/gpu/gemm_probe): a 16384x4096x4096 GEMM took 0.735-0.740 ms
 * a call timed alone, 0.869 after 1 s of the same call (the SM clock at
 * 1320-1335 MHz of 1980, the power at 698-699 W), and 131072 rows, as
 * bench-gpu's case a runs them back to back, 6.44-6.57 ms. The points
 * time runs of calls back to back (gemm_calls). */
static void
heat(Cal *C, cfrt_dtype t, double secs)
{
	Gemm g = {t, 4096, 4096, 4096, 0, 1};
	double *call = &C->heat_call[t], t0 = cfrt_wtime(C->ctx), t1 = t0;

	/* as many calls as the last ones' time says are left, queued at
	 * once; in batches of eight a heat could not be shorter than eight
	 * calls (f32's 4096^3: 2.67-2.73 ms a call on one H100, 21.4-21.8 ms) */
	while (t1 - t0 < secs) {
		int64_t n = *call > 0 ? (int64_t)ceil((secs - (t1 - t0)) / *call) : 1;
		double ts = t1;
		for (int64_t i = 0; i < n; i++)
			die_rc(C, run_gemm(C, &g), "gemm");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		t1 = cfrt_wtime(C->ctx);
		*call = (t1 - ts) / (double)n;
	}
	cfrt_barrier(C->ctx);
}

/* ---- progress (stderr of rank 0; --quiet: none) ---- */

static void
say(Cal *C, const char *fmt, ...)
{
	va_list ap;

	if (C->rank != 0 || C->quiet)
		return;
	fprintf(stderr, "cfrt-calibrate: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (+%.0f s)\n", MPI_Wtime() - C->t0);
}

/* ---- the test hook ---- */

/* CFRT_CALIBRATE_SCALE="KEY=F" multiplies every measured time of the point
 * KEY by F; "KEY=F@N" its first N visits only (the tests plant a bad
 * point with it: a point bad on every visit must be refused, one bad on
 * its first visit repeated and kept). */
static double
test_scale(const Point *p)
{
	const char *e = getenv("CFRT_CALIBRATE_SCALE"), *eq;
	size_t n;

	if (!e || !(eq = strchr(e, '=')))
		return 1;
	n = (size_t)(eq - e);
	if (strlen(p->key) != n || strncmp(p->key, e, n))
		return 1;
	char *at;
	double f = strtod(eq + 1, &at);
	if (*at == '@' && p->nv >= atoi(at + 1))
		return 1;
	return f > 0 ? f : 1;
}

/* One visit of p: its time into p->pass[p->nv++] (a run of GEMM calls: a
 * call's time), or p->s = -1 when the backend cannot. *filled: the type
 * the buffers hold; *warm: the last point was a heated one. */
static void
visit(Cal *C, Point *p, int *filled, int *warm)
{
	if (p->t >= 0 && p->t != *filled) {
		fill(C, (cfrt_dtype)p->t);
		*filled = p->t;
	}
	if (p->fn == run_attn_grad)
		p->arg.x.lse_ready = 0; /* another point wrote over it */
	/* on GPUs compute is timed hot: heated long after the
	 * transfers' points, briefly before each other */
	int hot = C->gpu && !C->quick && p->t >= 0;
	if (hot)
		heat(C, (cfrt_dtype)p->t, !*warm ? HEAT :
		     p->fn == run_attn || p->fn == run_attn_grad ? HEAT_ATTN : HEAT_POINT);
	*warm = hot;
	int reps = (p->reps + C->passes - 1) / C->passes;
	double s = timed(C, p->fn, &p->arg, reps, C->budget / C->passes,
	                 (3 + C->passes - 1) / C->passes);
	if (s < 0) {
		p->s = -1;
		return;
	}
	if (p->fn == run_gemm) /* a run of calls: a call's time */
		s /= p->arg.g.calls;
	s *= test_scale(p);
	p->pass[p->nv++] = s;
}

/* p->s: the median of its visits; its spread (slowest / fastest - 1). */
static double
settle(Point *p)
{
	double v[MAXPASS];

	memcpy(v, p->pass, sizeof v);
	p->s = median(v, p->nv); /* sorts v */
	return v[p->nv - 1] / v[0] - 1;
}

/* The value a point writes: its seconds, or work over them (a rate). */
static double
value(const Point *p)
{
	return p->work > 0 ? p->work / p->s : p->s;
}

/* ---- what cannot be trusted (runtime/profcheck.h) ---- */

/* A transfer point's bytes (a collective's: over every rank's block),
 * else 0. */
static double
xfer_bytes(const Cal *C, const Point *p)
{
	if (p->fn == run_p2p)
		return 4.0 * (double)p->arg.p.count;
	if (p->fn == run_coll)
		return 4.0 * (double)p->arg.c.count * C->size;
	return 0;
}

/* Whether a and b are of one series that orders them by size: *sa and
 * *sb their sizes (a GEMM: a is at most b in every dimension, *sa < *sb
 * when they differ). */
static int
series(const Cal *C, const Point *a, const Point *b, double *sa, double *sb)
{
	if (a->fn != b->fn)
		return 0;
	if (a->fn == run_p2p && a->arg.p.conc == b->arg.p.conc) {
		*sa = xfer_bytes(C, a), *sb = xfer_bytes(C, b);
		return 1;
	}
	if (a->fn == run_coll && a->arg.c.op == b->arg.c.op) {
		*sa = xfer_bytes(C, a), *sb = xfer_bytes(C, b);
		return 1;
	}
	if (a->fn == run_gemm && a->arg.g.t == b->arg.g.t && a->arg.g.acc == b->arg.g.acc) {
		const Gemm *x = &a->arg.g, *y = &b->arg.g;
		int le = x->m <= y->m && x->n <= y->n && x->k <= y->k;
		int ge = x->m >= y->m && x->n >= y->n && x->k >= y->k;
		if (!le && !ge)
			return 0;
		*sa = (double)x->m * (double)x->n * (double)x->k;
		*sb = (double)y->m * (double)y->n * (double)y->k;
		return 1;
	}
	return 0;
}

/* Why point i cannot be trusted (into why, n bytes), or 0: an implausible
 * rate, or out of order against another point of its series. */
static int
untrusted(const Cal *C, int i, char *why, size_t n)
{
	const Point *p = &C->pt[i];
	const char *r = NULL;
	double lat = C->quick ? PC_LATENCY_QUICK : PC_LATENCY;

	if (p->s <= 0)
		return 0;
	if (p->fn == run_p2p || p->fn == run_coll)
		r = pc_transfer_implausible(xfer_bytes(C, p), p->s, lat);
	else if (p->fn == run_gemm)
		r = pc_compute_implausible(2.0 * (double)p->arg.g.m * (double)p->arg.g.n *
		                           (double)p->arg.g.k, p->s, 1, lat);
	else if (p->work > 0)
		r = pc_compute_implausible(p->work, p->s, p->fn == run_attn || p->fn == run_attn_grad,
		                           lat);
	if (r) {
		snprintf(why, n, "%s %.4g: %s", p->key, value(p), r);
		return 1;
	}
	for (int j = 0; j < C->npt; j++) {
		const Point *q = &C->pt[j];
		double sp, sq;
		if (j == i || q->s <= 0 || !series(C, p, q, &sp, &sq) || sp == sq)
			continue;
		/* the smaller of the two first */
		const Point *lo = sp < sq ? p : q, *hi = sp < sq ? q : p;
		if (pc_out_of_order(lo->s, hi->s, lat)) {
			snprintf(why, n, "%s %.4g s: out of order with %s %.4g s (the larger %s "
			         "under half the smaller's time)", p->key, p->s, q->key, q->s,
			         p->fn == run_gemm ? "GEMM" : "message");
			return 1;
		}
	}
	return 0;
}

/* Every point, C->passes times, the order reversed on every other pass:
 * a point's time is the median over the passes of each pass's median of
 * its runs. A machine shared with others (a VM, a loaded node) has slow
 * spells that last longer than a point; measured in one visit each, the
 * points that fall in a spell read slow and the rest not (a VM's 512^3
 * and 512x1024x512 GEMMs at 38-47 GFLOP/s among 61-73). Visits apart keep
 * a spell to one of a point's passes, which the median leaves out. The
 * fastest pass instead predicted make bench's rows low: 100 of 112 rows'
 * compute alone in 7 runs (the Xeons and this machine), by a median of
 * 7-23% a run.
 * Then the points that cannot be trusted yet are visited again, REVISIT
 * times each round, for up to REROUNDS rounds: those whose visits
 * disagree by more than NOISY, and those untrusted() names (a rate no
 * machine has; a larger message or GEMM far faster than a smaller one).
 * A point still untrusted after that makes the calibration refuse to
 * write the profile: *bad gets how many, and rank 0 says which on
 * stderr. Every rank decides alike (a time is the same on every rank:
 * elapsed()). Writes every point (rank 0), a point whose visits disagree
 * by more than NOISY after a comment with each visit's value, then how
 * many did. */
enum { REVISIT = 2, REROUNDS = 2 };

static void
measure(Cal *C, int *bad)
{
	int filled = -1, warm = 0;
	double last = MPI_Wtime();

	for (int pass = 0; pass < C->passes; pass++) {
		say(C, "pass %d of %d: %d points", pass + 1, C->passes, C->npt);
		for (int j = 0; j < C->npt; j++) {
			Point *p = &C->pt[pass % 2 ? C->npt - 1 - j : j];
			if (p->s < 0)
				continue;
			visit(C, p, &filled, &warm);
			if (MPI_Wtime() - last > 10 && C->rank == 0) {
				last = MPI_Wtime();
				say(C, "pass %d of %d: %d of %d points", pass + 1, C->passes, j + 1,
				    C->npt);
			}
		}
	}
	char why[256];
	for (int round = 0; round < REROUNDS; round++) {
		int again = 0;
		for (int i = 0; i < C->npt; i++) {
			Point *p = &C->pt[i];
			if (p->s < 0 || p->nv == 0)
				continue;
			double spread = settle(p);
			p->again = (spread > NOISY || untrusted(C, i, why, sizeof why)) &&
			           p->nv + REVISIT <= MAXPASS;
		}
		for (int i = 0; i < C->npt; i++)
			again += C->pt[i].again;
		if (!again)
			break;
		say(C, "visiting again %d point%s that disagree or look wrong (round %d of %d)",
		    again, again == 1 ? "" : "s", round + 1, REROUNDS);
		for (int v = 0; v < REVISIT; v++)
			for (int i = 0; i < C->npt; i++)
				if (C->pt[i].again)
					visit(C, &C->pt[i], &filled, &warm);
	}
	int measured = 0, noisy = 0;
	*bad = 0;
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0)
			continue;
		double spread = settle(p);
		measured++;
		noisy += spread > NOISY;
	}
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0 || !untrusted(C, i, why, sizeof why))
			continue;
		if (C->rank == 0) {
			fprintf(stderr, "cfrt-calibrate: %s %s (visits:", C->refuse ? "cannot trust" :
			        "warning: kept, though it cannot be trusted:", why);
			for (int k = 0; k < p->nv; k++)
				fprintf(stderr, " %.4g", p->pass[k]);
			fprintf(stderr, " s)\n");
		}
		++*bad;
	}
	if (!C->refuse)
		*bad = 0; /* --check=warn: written, with a comment */
	if (*bad || !C->out)
		return;
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0)
			continue;
		double spread = settle(p);
		if (untrusted(C, i, why, sizeof why))
			fprintf(C->out, "# cannot be trusted: %s\n", why);
		if (spread > NOISY) {
			fprintf(C->out, "# %s: its visits disagree by %.0f%%:", p->key, 100 * spread);
			for (int k = 0; k < p->nv; k++)
				fprintf(C->out, " %.4g", p->work > 0 ? p->work / p->pass[k] : p->pass[k]);
			fprintf(C->out, "\n");
		}
		fprintf(C->out, "%s %.6g\n", p->key, value(p));
	}
	fprintf(C->out, "# %d of %d points' visits disagree by more than %.0f%%; each keeps "
	        "their median\n", noisy, measured, 100 * NOISY);
}

/* How many GEMM calls of m x n x k a GPU point runs back to back: a
 * generated model queues its calls ahead of the GPU (its host waits for
 * nothing of the GPU's inside a pass), so a call costs its own time, or
 * its launch where that is longer, not a launch, a sync and the host's
 * wake-up on top. Each call timed alone after a sync (the calibration
 * until 2026-11-28) priced short ones high: 4 H100s, bench-gpu case c,
 * compute alone, lease 14: the 8192x1024x4096 GEMMs of fuse(bidir)'s
 * slices 0.127 ms a call (540 TFLOP/s, where 16384 rows read 611), and
 * its compute alone and fuse(ring, m = 2)'s 18.4 and 20.2% high, slice(4)'s
 * 20.1% (the runs of ring(m = 1), with half as many calls, 8.5%). The
 * next lease's runs predicted on two calibrations of its own, one timing
 * runs and one (--gemm-calls 1) each call alone: case c's compute alone
 * -2.5 to +1.8% against +15.7 to +26.5%; all 52 rows of cases a-d, median
 * |error| 5.5% against 8.7%, worst 25.4 against 31.5%. An earlier lease
 * timed runs and priced case c's slice(4) 29.9% low, but then its head
 * splits took 4 to 5 times their price (docs/PROFILE.md).
 * About RUN_S worth a run (at the 8192^3 call's rate), at least 1 and at
 * most MAXCALLS; --gemm-calls N sets N. */
enum { MAXCALLS = 256 };
#define RUN_S 0.002

static int
gemm_calls(const Cal *C, double rate, int64_t m, int64_t n, int64_t k)
{
	if (!C->gpu || C->quick)
		return 1;
	if (C->gemm_calls > 0)
		return C->gemm_calls;
	double n_ = ceil(RUN_S * rate / (2.0 * (double)m * (double)n * (double)k));
	return n_ < 1 ? 1 : n_ > MAXCALLS ? MAXCALLS : (int)n_;
}

/* The point of an m x n x k GEMM of the buffers' type t (acc: adding to
 * its output, `gemm_acc`), unless its operands outgrow the buffers;
 * rate as gemm_calls takes it. */
static void
add_gemm(Cal *C, cfrt_dtype t, double rate, int64_t m, int64_t n, int64_t k, int acc)
{
	size_t es = cfrt_dtype_size(t);
	Gemm g = {t, m, n, k, acc, gemm_calls(C, rate, m, n, k)};

	if ((size_t)(m * k) * es > C->cap || (size_t)(k * n) * es > C->cap ||
	    (size_t)(m * n) * es > C->cap)
		return;
	add(C, run_gemm, t, C->quick ? 3 : 7, 0, "gemm%s %s %lld %lld %lld", acc ? "_acc" : "",
	    tname[t], (long long)m, (long long)n, (long long)k)->arg.g = g;
}

static void
cal_compute(Cal *C, cfrt_dtype t)
{
	/* on GPUs up to 16384: models' per-rank GEMMs have 65536 rows and
	 * more, and cfc prices a dimension past the grid at its largest */
	static const int64_t cpu[] = {32, 128, 512, 1024}, gpu[] = {256, 1024, 4096, 8192, 16384};
	static const int64_t quick[] = {16, 64};
	const int64_t *sz = C->quick ? quick : C->gpu ? gpu : cpu;
	int nsz = C->quick ? 2 : C->gpu ? 5 : 4;
	size_t es = cfrt_dtype_size(t);
	const char *tn = tname[t];

	if (!fill(C, t))
		return; /* the backend has no such type */
	Gemm g0 = {t, sz[0], sz[0], sz[0], 0, 1};
	if (timed(C, run_gemm, &g0, 1, 0, 1) < 0)
		return; /* nor GEMMs of it */
	double rate = 0; /* GPUs: flop per second of an 8192^3 call */
	if (C->gpu && !C->quick) {
		/* 16384 only where an 8192^3 call takes under 10 ms: past
		 * that the rate is flat (one H100, f32: 50.9 TFLOP/s at 4096^3,
		 * 51.3 at 8192^3, 52.2 at 16384^3, whose call alone took 0.17
		 * s) */
		Gemm g8 = {t, 8192, 8192, 8192, 0, 1};
		double t8 = timed(C, run_gemm, &g8, 1, 0, 1);
		if (t8 > 0.01)
			nsz = 4;
		rate = 2.0 * 8192 * 8192 * 8192 / t8;
	}
	for (int i = 0; i < nsz; i++)
		for (int j = 0; j < nsz; j++)
			for (int l = 0; l < nsz; l++)
				add_gemm(C, t, rate, sz[i], sz[j], sz[l], 0);
	/* a few of them adding to their output (beta = 1): cfc prices what
	 * that costs by the bytes of the output (Profile.acc). The largest
	 * rows, as a schedule's accumulating chunks have. 4 H100s, bf16:
	 * fuse(bidir) of bench-gpu's case a, whose 8 GEMMs of 16384 rows add
	 * to their output in 6, ran with transfers off 8.0% longer than
	 * vanilla's one GEMM, which the table alone priced the same */
	int64_t big = sz[nsz - 1], mid = sz[nsz - 2], small = sz[1];
	add_gemm(C, t, rate, big, mid, small, 1);
	if (!C->quick) {
		add_gemm(C, t, rate, big, mid, mid, 1);
		add_gemm(C, t, rate, mid, big, small, 1);
	}
	/* adds by size, from operands a cache holds to whole buffers: the
	 * copies and adds of a schedule move slices of an activation (the
	 * Xeons, 4 ranks: 14.3 GB/s at 192 KiB, 7.9 at 192 MiB) */
	for (size_t sb = (size_t)64 << 10;; sb = sb * 4 < C->cap ? sb * 4 : C->cap) {
		Ew e = {t, (int64_t)(sb / es), 1};
		if (sb < ((size_t)4 << 20))
			e.reps = (int)(((size_t)4 << 20) / sb);
		add(C, run_ew, t, C->quick ? 3 : 9, 3.0 * (double)e.n * (double)es * e.reps,
		    "ew %s %lld", tn, 3LL * e.n * (long long)es)->arg.e = e;
		if (sb >= C->cap || C->quick)
			break;
	}
	int64_t nop = (int64_t)(C->cap / es) / 4;
	if (C->quick && nop > (1 << 14))
		nop = 1 << 14;
	/* each op on a quarter of the buffer: a size an activation has */
	for (int k = 0; k < NOPS; k++) {
		OpRun o = {t, nop / 1024 * 1024, k};
		add(C, run_op, t, C->quick ? 3 : 7, (ops[k].nin + 1.0) * (double)o.n * (double)es,
		    "op %s %s", tn, ops[k].name)->arg.o = o;
	}
	/* attention by sequence length, forward and backward: the rates
	 * change with it */
	int64_t s0 = C->quick ? 64 : C->gpu ? 512 : 128, s1 = C->quick ? 128 : C->gpu ? 8192 : 2048;
	for (int grad = 0; grad < 2; grad++)
		for (int causal = 0; causal < 2; causal++)
			/* the backward up to half the longest on CPUs: its rate is
			 * as flat, its time twice */
			for (int64_t sq = s0; sq <= (grad && !C->gpu && !C->quick ? s1 / 2 : s1); sq *= 2) {
				/* on GPUs 64 heads of 128 in all, as a model's
				 * B x H fill the SMs (one H100, causal, S = 4096:
				 * 155 TFLOP/s with 4 heads of 64, 449-491 with 32
				 * of 128; bench-gpu case c's 16 x 8 heads, traced
				 * with transfers off, ran at 651) */
				Attn x = {t, {C->gpu ? 2 : 1, C->gpu ? 32 : 4, sq, C->gpu ? 128 : 64}, causal,
				          0};
				size_t bytes = (size_t)(x.dims[0] * x.dims[1] * x.dims[2] * x.dims[3]) * es;
				/* the backward's flop: 2.5 times the forward's; a
				 * causal mask: half the flop, as cfc counts */
				double fl = 4.0 * x.dims[0] * x.dims[1] * x.dims[2] * x.dims[2] * x.dims[3] *
				            (grad ? 2.5 : 1) / (causal ? 2 : 1);
				if ((grad ? 4 * bytes : bytes) > C->cap / 2)
					break;
				add(C, grad ? run_attn_grad : run_attn, t, C->quick ? 3 : 5, fl,
				    "attn%s%s %s %lld", grad ? "_grad" : "", causal ? "_causal" : "", tn,
				    (long long)sq)->arg.x = x;
			}
}

static void
cal_transfers(Cal *C)
{
	int64_t lo = 1024, hi = C->quick ? (1 << 16) : C->gpu ? (256 << 20) : (16 << 20);
	static const int conc[] = {1, 2, 4};

	if (C->size < 2)
		return;
	for (int k = 0; k < 3; k++)
		for (int64_t bytes = lo; bytes <= hi; bytes *= 4) {
			P2p p = {bytes / 4, conc[k]};
			if ((size_t)bytes * (conc[k] == 4 ? 2 : 1) > C->cap)
				break;
			add(C, run_p2p, -1, C->quick ? 3 : 9, 0, "p2p %d %lld", conc[k],
			    (long long)bytes)->arg.p = p;
		}
	/* collectives by block: on GPUs up to what the buffers hold (bench-gpu
	 * case a reduce-scatters 256 MiB blocks on 4 GPUs; the rate still
	 * rose at 64 MiB, past which the table extrapolates) */
	for (int op = 0; op < 4; op++)
		for (int64_t bytes = lo; bytes <= (C->gpu ? hi : hi / C->size); bytes *= 4) {
			Coll c = {op, bytes / 4};
			if ((size_t)bytes * (size_t)C->size > C->cap)
				break;
			add(C, run_coll, -1, C->quick ? 3 : 7, 0, "coll %s %lld", coll_name[op],
			    (long long)bytes)->arg.c = c;
		}
}

/* Transfers alone and posted just before a GEMM: medians of their time
 * alone, the GEMM's under them and the wait after it, and of how much
 * longer the GEMM and the wait took than the same rep's GEMM alone
 * (extra). */
typedef struct Under {
	double alone, gemm, wait, extra;
} Under;

/* k = 0: the ring (each rank sends count f32 elements to the next and
 * receives from the previous); 1..4: the library's collectives, blocks of
 * count / N elements; BIDIR: the ring both ways (count elements to the
 * next and to the previous, as fuse(bidir) runs). */
enum { NPROBE = 7, BIDIR = 5, DEFER = 6 };

/* The probes run: DEFER on GPUs only (CPUs' transfers do not wait for
 * the compute queued behind them). */
static int
nprobes(const Cal *C)
{
	return C->gpu ? NPROBE : DEFER;
}

static const char *
probe_name(int k)
{
	return k == 0 ? "a ring of transfers" : k == BIDIR ? "the ring both ways" :
	       k == DEFER ? "the ring behind a GEMM" : coll_name[k - 1];
}

/* The GEMM alone (*alone) and under each of the nprobes() transfers (u[k]),
 * rep by rep so that a slow spell of the machine falls on all of them
 * alike; medians of reps, timed as timed() times (spans on one node, else
 * the slowest rank's). The transfers under the GEMM move from the c
 * buffer's first half to its second (both ways: each direction a
 * quarter), and the GEMM writes the b buffer's second half.
 * On GPUs they are posted as a schedule posts them: behind a GEMM (the
 * step's before) with the next GEMM queued right after them, both ready
 * when the first ends. The order decides who has the SMs: an NCCL
 * transfer started on idle SMs slowed the GEMM after it 1.41 times and
 * moved under it (4 H100s, 4096^3 under 64 MiB); started as a GEMM
 * starts, it waited for the SMs: in a trace of bench-gpu's case a,
 * fuse(ring), the GEMMs ran unslowed and each 256 MiB transfer ended
 * 1.24 ms after the GEMM it was posted with (0.93 ms alone). The
 * GEMM's time under them is then the two GEMMs' less this rep's GEMM
 * alone. DEFER (GPUs): the ring again with one more GEMM queued before
 * the one timed under it, so that a transfer that waits for the GEMM
 * it was posted behind moves under the next (2 H200s, bench-gpu's case
 * a under fuse(bidir, m = 2) with NCCL, traced: each 128 MiB transfer
 * started as the GEMM queued behind it ended and moved under the next
 * one, 0.62 ms, which ran 1.718 ms against 1.630 before); the GEMM's
 * time under it is the three GEMMs' less two of this rep's alone. Its
 * GEMMs are queued with no barrier between them, as generated code
 * queues them (2 H200s: lease 69's probe had one and read 1.21 times,
 * lease 70's none and 1.13; the plain probe, with its barrier, read
 * 1.168 and 1.152 on the two, so the barrier is not shown to be the
 * difference; in traces of the fused rows the GEMMs under such
 * transfers ran 1.04-1.05 times longer, less than either). NCCL needs
 * no host handshake before the GEMM queued after the post; copy engines
 * do, but their ring moves under the GEMM it was posted behind, so
 * they write no defer. */
static void
probe(Cal *C, const Gemm *g, int64_t count, int reps, double *alone, Under u[NPROBE])
{
	double tg[64], tt[NPROBE][4][64];
	char *c = C->c;
	P2p ring[2] = {{count, 2}, {count, 4}};
	Coll coll[4];

	for (int k = 0; k < 4; k++)
		coll[k] = (Coll){k, count / C->size};
	if (reps > 64)
		reps = 64;
	die_rc(C, run_gemm(C, (void *)g), "gemm"); /* to warm up */
	for (int i = 0; i < reps; i++) {
		cfrt_barrier(C->ctx);
		double t0 = cfrt_wtime(C->ctx);
		die_rc(C, run_gemm(C, (void *)g), "gemm");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		tg[i] = elapsed(C, t0, cfrt_wtime(C->ctx));
		for (int k = 0; k < nprobes(C); k++) {
			const char *what = probe_name(k);
			const P2p *p = k == 0 || k >= BIDIR ? &ring[k == BIDIR] : NULL;
			cfrt_req q[4];
			int nq = 1;
			cfrt_barrier(C->ctx);
			t0 = cfrt_wtime(C->ctx);
			die_rc(C, p ? run_p2p(C, (void *)p) : run_coll(C, &coll[k - 1]), what);
			die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
			tt[k][0][i] = elapsed(C, t0, cfrt_wtime(C->ctx));
			cfrt_barrier(C->ctx);
			if (C->gpu) {
				t0 = cfrt_wtime(C->ctx);
				die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			}
			die_rc(C, p ? p2p_start(C, p, c, c + C->cap / 2, C->cap / 4, q, &nq)
			            : coll_call(C, &coll[k - 1], c, &q[0]), what);
			/* GPUs: every host has posted before the next GEMM's call
			 * (which issues the copy engines' copies whose handshake
			 * came), as the hosts of generated code run ahead of their
			 * GPUs; blocked in cfrt_wtime, a host issued them only at
			 * the wait (4 H100s: overlap 0.10; posted so, 0.81). CPUs:
			 * the GEMM from its start. */
			if (C->gpu && k != DEFER)
				die_rc(C, cfrt_barrier(C->ctx), "barrier");
			else if (!C->gpu)
				t0 = cfrt_wtime(C->ctx);
			if (k == DEFER)
				die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			double t1 = cfrt_wtime(C->ctx);
			die_rc(C, cfrt_waitall(C->ctx, nq, q), "waitall");
			die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
			double t2 = cfrt_wtime(C->ctx), w[3] = {t1, t2, t2 - t1}, mx[3];
			tt[k][1][i] = elapsed(C, t0, t1) - (C->gpu ? tg[i] : 0) - (k == DEFER ? tg[i] : 0);
			/* on one clock from the last GEMM's end to the last
			 * transfer's, which leaves out the ranks' skew (a rank that
			 * ends its GEMM early waits for its peers' as well as for
			 * the transfers) */
			MPI_Allreduce(w, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			tt[k][2][i] = C->span ? mx[1] - mx[0] : mx[2];
			tt[k][3][i] = tt[k][1][i] + tt[k][2][i] - tg[i];
		}
	}
	for (int k = 0; k < nprobes(C); k++)
		u[k] = (Under){median(tt[k][0], reps), median(tt[k][1], reps), median(tt[k][2], reps),
		               median(tt[k][3], reps)};
	*alone = median(tg, reps);
}

static double
clamp01(double x)
{
	return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* The overlap cfc's model reads (docs/PROFILE.md): the transfer time that
 * passes per second of compute after a transfer's start, the rest from
 * the wait on. Of the ring's probes (p2p transfers, which the model also
 * slows the compute under by `slowdown`): its time alone less the wait
 * after the GEMM, over the GEMM's time under it; a transfer that had
 * (nearly) landed when the GEMM ended, its wait under LANDED of its time
 * alone, moved on its own: 1. Until 2026-11-29 the share of the
 * transfer's own time that passed during the GEMM (1 - wait / alone),
 * which the model, spreading it over the whole GEMM, read as more: the
 * CPUs' probe GEMM (2048 rows) is several times longer than its 4 MiB
 * ring (4 Xeon ranks, lease 49: 15.8 ms, the ring 1.45 ms alone, 0.78 ms
 * waited after it: 0.466 then, with which the model moved the whole ring
 * under that GEMM and waited nothing; 0.043 now, the 0.68 ms that moved
 * over 15.8). */
#define LANDED 0.05
static double
probe_overlap(const Under *u)
{
	if (u->alone <= 0 || u->wait < LANDED * u->alone)
		return 1;
	return u->gemm > 0 ? clamp01((u->alone - u->wait) / u->gemm) : 0;
}

/* A library collective's overlap: the rate at which the model, which
 * does not slow compute under a collective, replays the probe: the GEMM
 * alone (gemm) and the collective moving at that rate under it, the rest
 * after it, took extra longer than the GEMM alone (extra: the GEMM under
 * the collective and the wait after it, less the GEMM alone): its time
 * alone less extra, over the GEMM's, (alone - extra) / gemm. Where it
 * added nothing or less (4 Xeon ranks, leases 54 and 56: -0.35 and
 * -0.49 ms, the GEMM under it faster than alone) the slowest rate that
 * replays it, landing it as the GEMM ends: alone / gemm; 1 there made
 * the rate jump from about 0.09 to 1 as extra crossed 0. The
 * rule above read the GEMM's slowing as free and a landed collective as
 * moving on its own: 8 Xeon ranks (leases 51 and 54), the all_gather of
 * 1.30 and 1.17 ms alone lengthened its GEMM of 13.6 and 11.2 ms by 1.56
 * and 1.36 ms and ended 0.080 and 0.047 ms after it, which read 0.080
 * and (landed) 1: slice(2)'s all-gathers, priced 0.6 points under
 * vanilla's on the first, ran 2.4 over. From those medians both read 0
 * so; and in 39 of 40 slice(k) rows of five CPU runs (leases 45, 46, 51,
 * 52 and the 2-core EPYC, make bench's mix) slice(k) ran slower than
 * vanilla. CPUs only: replayed on eight GPU leases (bench/replay.py;
 * H100 20 and 22, H200 25, 29, 34, 35, 37 and 40) this rule priced
 * slice(4) against vanilla further off (the leases' medians -12.9..+2.6%,
 * where the rule above gave -3.9..+2.9%); why was not found. */
static double
probe_overlap_coll(const Under *u, double gemm)
{
	if (u->alone <= 0)
		return 1;
	return gemm > 0 ? clamp01((u->alone - fmax(u->extra, 0)) / gemm) : 0;
}

/* defer (GPUs): where the ring posted behind a GEMM moved at less than
 * DEFER_BELOW of its pace under the GEMM queued after it (its
 * probe_overlap), it waited for that GEMM's SMs (probe()); then the
 * ring behind one more GEMM (DEFER) gives how it moves under the GEMM
 * after that one: its probe_overlap and that GEMM's slowdown. Written
 * on 2 ranks only: there the model with it was timed against bench-gpu
 * (2 H200s, two leases: the rows' worst error 13.2 -> 8.9% and 11.4 ->
 * 10.7%). No 4-GPU machine has run the probe yet, and the TP 4 leases
 * replayed with rates of 1 and 1.05 had their fused NCCL rows priced up
 * to 38% under what they ran (docs/PROFILE.md). The probe's line is
 * written on any number of ranks. */
#define DEFER_BELOW 0.5

/* slowdown: a GEMM's time under the ring's transfers over its time
 * alone (slowdown 4: under both directions'); overlap: the ring's
 * probe_overlap; overlap_coll, per library collective: on CPUs
 * probe_overlap_coll, on GPUs probe_overlap; defer: above. */
static void
cal_slowdown(Cal *C)
{
	int64_t s = C->quick ? 64 : C->gpu ? 4096 : 512;
	int64_t count = (C->quick ? 16384 : C->gpu ? (64 << 20) : (4 << 20)) / 4;
	/* on CPUs 2048 rows: gemm.c cuts a GEMM under transfers into panels
	 * of 512 rows (of 512 x 512) with a progress test after each, as it
	 * cuts the models' GEMMs; one of 512 rows is a single panel, which
	 * tests nothing before its end */
	Gemm g = {C->probe_t, C->gpu || C->quick ? s : 4 * s, s, s, 0, 1};
	int reps = C->quick ? 3 : 9;

	if (C->size < 2 || (size_t)(g.m * s) * 4 > C->cap / 2 || (size_t)count * 4 > C->cap / 4)
		return;
	fill(C, C->probe_t);
	double alone;
	Under u[NPROBE];
	probe(C, &g, count, reps, &alone, u);
	if (!C->out)
		return;
	fprintf(C->out, "# a %lldx%lldx%lld GEMM %.6g s alone\n", (long long)g.m, (long long)s,
	        (long long)s, alone);
	for (int k = 0; k < nprobes(C); k++) {
		int ring = k == 0 || k >= BIDIR;
		double ov = ring || C->gpu ? probe_overlap(&u[k]) : probe_overlap_coll(&u[k], alone);
		double f = alone > 0 && u[k].gemm > alone ? u[k].gemm / alone : 1;
		/* to 6 digits: the overlaps are differences of them */
		fprintf(C->out, "# %s of %lld bytes a rank: %.6g s alone; the GEMM %.6g s under it, "
		        "waited %.6g s after it, %.6g s more than the GEMM alone\n", probe_name(k),
		        (long long)(ring ? count : count / C->size) * 4, u[k].alone, u[k].gemm,
		        u[k].wait, u[k].extra);
		if (k == 0)
			fprintf(C->out, "slowdown %.4g\noverlap %.4g\n", f, ov);
		else if (k == BIDIR)
			fprintf(C->out, "slowdown 4 %.4g\n", f);
		else if (k == DEFER && probe_overlap(&u[0]) >= DEFER_BELOW)
			fprintf(C->out, "# no defer: the ring moved under the GEMM it was posted "
			        "behind\n");
		else if (k == DEFER && C->size != 2)
			fprintf(C->out, "# no defer: measured against the models on 2 ranks only "
			        "(docs/PROFILE.md)\n");
		else if (k == DEFER)
			fprintf(C->out, "defer %.4g %.4g\n", ov, f);
		else
			fprintf(C->out, "overlap_coll %s %.4g\n", coll_name[k - 1], ov);
	}
}

/* clock D R (GPUs, two ranks and more): a GEMM's time when GEMMs keep
 * the GPU busy a share D of the time, with the library's collectives
 * (which draw little power) between their bursts, over its time in the
 * GEMM points; D = 1: busy all the time. A GPU at its power limit lowers
 * its clock under back-to-back GEMMs, more the longer they last, and
 * raises it again when the average power falls. 4 H100s, lease 23,
 * bench-gpu's case a, vanilla (one 131072x4096x4096 GEMM a pass),
 * traced: with transfers off the GEMM took 5.76-6.04 ms on the four GPUs
 * in the first 20 passes and 6.51-7.00 in the last 20, 2.1 s later;
 * between NCCL's reduce-scatters of 2.5 ms, after 2 s, 5.67-5.85. The
 * GEMM points of leases 20 and 22 priced it at 6.08-6.33 (16384x4096x4096
 * at 0.760-0.791 ms). The probe: heat() for CLOCK_HEAT seconds, as
 * bench-gpu warms up, then the point's 16384x4096x4096 GEMMs in levels
 * of CLOCK_LEVEL seconds each, in bursts of about 4 ms with all_gathers
 * between, busy 100% before and after every other level: the GPU keeps
 * heating over seconds, and a level read against the mean of its two
 * neighbours at 100% leaves that drift out (measured one after the other
 * from 100% down, after 1 s of heat(), the levels read 0.93-1.05 at 70%
 * and 85% busy in eight profiles of leases 17-22). Each level keeps the
 * median of its later two thirds. clock 1 is the levels at 100% over the
 * point's own time; without that point, the factors are over busy all
 * the time (the file's meaning before 2026-11-28). */
#define CLOCK_HEAT 2.0
#define CLOCK_LEVEL 0.25
static void
cal_clock(Cal *C)
{
	static const double duty[] = {1, 0.85, 1, 0.7, 1, 0.55, 1};
	enum { NDUTY = sizeof duty / sizeof duty[0], MAXB = 512 };
	cfrt_dtype t = C->probe_t;
	Gemm g = {t, 16384, 4096, 4096, 0, 1};
	int64_t blk = C->cap / (size_t)C->size < (64 << 20) ? (int64_t)(C->cap / (size_t)C->size)
	                                                   : (64 << 20);
	Coll ag = {0, blk / 4};
	double v[MAXB], med[NDUTY], point = 0; /* the point's time a call */
	char shape[64]; /* "bf16 16384x4096x4096", as the comments name g */

	if (!C->gpu || C->quick || C->size < 2 || !fill(C, t))
		return;
	snprintf(shape, sizeof shape, "%s %lldx%lldx%lld", tname[t], (long long)g.m,
	         (long long)g.n, (long long)g.k);
	for (int i = 0; i < C->npt; i++) {
		const Point *p = &C->pt[i];
		if (p->fn == run_gemm && p->s > 0 && !p->arg.g.acc && p->arg.g.t == t &&
		    p->arg.g.m == g.m && p->arg.g.n == g.n && p->arg.g.k == g.k)
			point = p->s;
	}
	double tag = timed(C, run_coll, &ag, 5, 0, 5);
	heat(C, t, CLOCK_HEAT);
	/* both the slowest rank's, so every rank runs as many calls */
	double tg = timed(C, run_gemm, &g, 3, 0, 3);
	int n = tg > 0 ? (int)ceil(0.004 / tg) : 1, iters;
	double bmax = n * tg;
	for (int l = 0; l < NDUTY; l++) {
		int k = tag > 0 ? (int)lround(bmax * (1 - duty[l]) / duty[l] / tag) : 0;
		iters = (int)ceil(CLOCK_LEVEL / (bmax + k * tag));
		if (iters > MAXB)
			iters = MAXB;
		for (int i = 0; i < iters; i++) {
			double b0 = cfrt_wtime(C->ctx);
			for (int j = 0; j < n; j++)
				die_rc(C, run_gemm(C, &g), "gemm");
			v[i] = (cfrt_wtime(C->ctx) - b0) / n;
			for (int j = 0; j < k; j++)
				die_rc(C, run_coll(C, &ag), "all_gather");
		}
		double mine = median(v + iters / 3, iters - iters / 3);
		MPI_Allreduce(&mine, &med[l], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (C->out)
			fprintf(C->out, "# %s GEMMs busy %.0f%% of the time: %.4g s a call "
			        "(bursts of %d calls, %d all_gather%s of %lld bytes a rank between)\n",
			        shape, 100 * duty[l], med[l], n, k, k == 1 ? "" : "s",
			        (long long)blk);
	}
	double busy = 0; /* the levels at 100%: every other one */
	for (int l = 0; l < NDUTY; l += 2)
		busy += med[l] / ((NDUTY + 1) / 2);
	double f1 = point > 0 ? busy / point : 1;
	if (!C->out)
		return;
	if (point > 0)
		fprintf(C->out, "# the point's %s GEMM: %.4g s a call\nclock 1 %.4g\n", shape,
		        point, f1);
	for (int l = 1; l < NDUTY; l += 2)
		fprintf(C->out, "clock %.4g %.4g\n", duty[l], f1 * 2 * med[l] / (med[l - 1] + med[l + 1]));
}

/* The profile's transfer entry: on GPUs the transfer mode calibrated
 * (CFRT_TRANSFER, which cfrt_init has checked: nccl unless set), whose
 * profiles differ; on CPUs the progress mode. */
static const char *
transfer_name(const Cal *C)
{
	const char *e = getenv("CFRT_TRANSFER");

	if (!C->gpu)
		return cfrt_progress_name(C->ctx);
	return e && *e ? e : "nccl";
}

/* "bf16,f32" -> the bits of those types, the first one's in *first;
 * 0 on a name that is none */
static int
parse_types(const char *s, unsigned *bits, cfrt_dtype *first)
{
	*bits = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		int t = 0, nt = (int)(sizeof tname / sizeof *tname);
		while (t < nt && (strlen(tname[t]) != n || strncmp(s, tname[t], n)))
			t++;
		if (t == nt)
			return 0;
		if (!*bits)
			*first = (cfrt_dtype)t;
		*bits |= 1u << t;
		s += n + (s[n] == ',');
	}
	return *bits != 0;
}

/* The profile cannot be written: say why, end every rank. */
static void
write_failed(OutFile *of)
{
	fprintf(stderr, "cfrt-calibrate: %s\n", of->err ? of->err : "cannot write: out of memory");
	outfile_discard(of);
	outfile_free(of);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void
usage(FILE *f)
{
	fputs("usage: mpirun -n N cfrt-calibrate [-o FILE] [--quick] [--passes N]\n"
	      "                        [--gemm-calls N] [--type T[,T...]]\n"
	      "Measures this machine for cfc's cost model and writes its profile\n"
	      "(default cfrt.prof); cfc --profile=FILE reads it.\n"
	      "  -o FILE   where rank 0 writes the profile: a regular file is replaced\n"
	      "            whole at the end (never a partial file), a character device\n"
	      "            or FIFO written straight through ('-': standard output), a\n"
	      "            symbolic link followed (what it points at is written)\n"
	      "  --quick   a few small points (seconds): for tests, not for choosing\n"
	      "  --quiet   no progress lines on stderr (by default a line as each\n"
	      "            pass and phase starts, and every 10 s, with the time so far)\n"
	      "  --check=refuse|warn  a point still untrusted after visiting it again\n"
	      "            (docs/PROFILE.md): write no profile (default), or write it\n"
	      "            with a comment and a warning (the default of --quick)\n"
	      "  --passes N  visit every point N times (at most 15), the others\n"
	      "            between, and keep the median visit (default 3, --quick 1)\n"
	      "  --type T[,T...]  measure the compute of these element types only\n"
	      "            (f32, f64, bf16, f16; default all the backend has); the\n"
	      "            slowdown probe's GEMM is of the first (default f32)\n"
	      "  --gemm-calls N  GPUs: time GEMMs in runs of N calls back to back\n"
	      "            (at most 256; 1: each call alone after a sync; default:\n"
	      "            about 2 ms of calls a run)\n", f);
}

int
main(int argc, char **argv)
{
	Cal C = {0};
	const char *path = "cfrt.prof", *typearg = NULL;

	MPI_Init(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			path = argv[++i];
		} else if (!strcmp(argv[i], "--quick")) {
			C.quick = 1;
		} else if (!strcmp(argv[i], "--quiet")) {
			C.quiet = 1;
		} else if (!strcmp(argv[i], "--check=refuse") || !strcmp(argv[i], "--check=warn")) {
			C.refuse = !strcmp(argv[i], "--check=refuse");
			C.refuse_given = 1;
		} else if (!strcmp(argv[i], "--passes") && i + 1 < argc && atoi(argv[i + 1]) > 0 &&
		           atoi(argv[i + 1]) <= MAXPASS) {
			C.passes = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--gemm-calls") && i + 1 < argc &&
		           atoi(argv[i + 1]) > 0 && atoi(argv[i + 1]) <= MAXCALLS) {
			C.gemm_calls = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--type") && i + 1 < argc &&
		           parse_types(argv[i + 1], &C.types, &C.probe_t)) {
			typearg = argv[++i];
		} else {
			int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
			MPI_Comm_rank(MPI_COMM_WORLD, &C.rank);
			if (C.rank == 0)
				usage(help ? stdout : stderr);
			MPI_Finalize();
			return help ? 0 : 2;
		}
	}
	MPI_Comm_size(MPI_COMM_WORLD, &C.size);
	die_rc(&C, cfrt_init(&C.ctx, MPI_COMM_WORLD, C.size, "calibrate"), "cfrt_init");
	C.rank = cfrt_rank(C.ctx);
	C.gpu = !strncmp(cfrt_backend_name(), "cuda", 4);
	/* spans when every rank is on this node (one clock): then, and only
	 * then, every rank's node holds them all */
	MPI_Comm node;
	int nnode = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &nnode);
	MPI_Comm_free(&node);
	/* not on GPUs: there each rank has a device of its own, and
	 * make bench-gpu times the slowest rank's own time (a span would add
	 * the ranks' skew at the barrier to every point) */
	C.span = nnode == C.size && !C.gpu;
	C.cap = C.quick ? (1u << 20) : C.gpu ? ((size_t)1 << 30) : ((size_t)64 << 20);
	C.budget = C.quick ? 0.05 : C.gpu ? 0.2 : 0.5;
	if (!C.passes)
		C.passes = C.quick ? 1 : 3;
	if (!C.refuse_given)
		C.refuse = !C.quick;
	die_rc(&C, cfrt_alloc(C.ctx, &C.a, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_alloc(C.ctx, &C.b, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_alloc(C.ctx, &C.c, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.a, C.cap), "zero");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.b, C.cap), "zero");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.c, C.cap), "zero");
	/* the profile is opened first (a bad -o fails now, not after the
	 * measuring), gathered in memory, written whole at the end */
	OutFile of;
	char *text = NULL;
	size_t textlen = 0;
	if (C.rank == 0) {
		if (outfile_open(&of, path, NULL, 0))
			write_failed(&of);
		C.out = open_memstream(&text, &textlen);
		if (!C.out) {
			perror("cfrt-calibrate: open_memstream");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		fprintf(C.out, "cfprofile 1\n# written by cfrt-calibrate%s%s%s on %d rank%s; times: %s, "
		        "the median of %d pass%s\n"
		        "backend %s\ntransfer %s\nranks %d\nbatch %s\n", C.quick ? " --quick" : "",
		        typearg ? " --type " : "", typearg ? typearg : "",
		        C.size, C.size == 1 ? "" : "s",
		        C.span ? "spans over the ranks of one node" : "the slowest rank's", C.passes,
		        C.passes == 1 ? "" : "es",
		        cfrt_backend_name(), transfer_name(&C), C.size,
		        C.gpu ? "one" : "loop"); /* cfrt_matmul: strided batch, or a loop */
	}
	double t0 = C.t0 = MPI_Wtime();
	for (int t = CFRT_F32; t <= CFRT_F16; t++)
		if (!C.types || C.types >> t & 1)
			cal_compute(&C, (cfrt_dtype)t);
	cal_transfers(&C);
	say(&C, "measuring %d points, %d pass%s, on %d rank%s%s", C.npt, C.passes,
	    C.passes == 1 ? "" : "es", C.size, C.size == 1 ? "" : "s",
	    C.quick ? "" : " (minutes; docs/PROFILE.md gives times)");
	int bad;
	measure(&C, &bad);
	if (bad) {
		if (C.rank == 0) {
			fclose(C.out);
			free(text);
			outfile_discard(&of); /* the file named by -o stays as it was */
			outfile_free(&of);
			fprintf(stderr, "cfrt-calibrate: not writing %s: %d point%s could not be "
			        "trusted after visiting them again (a machine busy with other "
			        "work? run it again when it is quieter)\n", path, bad,
			        bad == 1 ? "" : "s");
		}
		free(C.pt);
		cfrt_free(C.ctx, C.a);
		cfrt_free(C.ctx, C.b);
		cfrt_free(C.ctx, C.c);
		cfrt_finalize(C.ctx);
		MPI_Finalize();
		return 1;
	}
	say(&C, "the slowdown probe");
	cal_slowdown(&C);
	if (C.gpu)
		say(&C, "the clock probe");
	cal_clock(&C);
	if (C.rank == 0) {
		fprintf(C.out, "# measured in %.1f s\nend\n", MPI_Wtime() - t0);
		fclose(C.out);
		if (outfile_write(&of, text, textlen) || outfile_commit(&of))
			write_failed(&of);
		free(text);
		/* not into a profile written to standard output */
		fprintf(strcmp(path, "-") ? stdout : stderr,
		        "cfrt-calibrate: wrote %s (%d rank%s, %.1f s)\n", path, C.size,
		       C.size == 1 ? "" : "s", MPI_Wtime() - t0);
	}
	free(C.pt);
	cfrt_free(C.ctx, C.a);
	cfrt_free(C.ctx, C.b);
	cfrt_free(C.ctx, C.c);
	cfrt_finalize(C.ctx);
	MPI_Finalize();
	return 0;
}
