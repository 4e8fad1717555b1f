/* calibrate.h: what the files of cfrt-calibrate share: the run's state
 * (Cal), the arguments of the measured calls, and the functions one file
 * offers the others.
 *   calibrate.c        the points, measured in passes; what cannot be
 *                      trusted; the GEMM, compute and transfer grids;
 *                      main
 *   calibrate_probe.c  a GEMM under transfers (slowdown, overlap, defer)
 *                      and the clock of a busy GPU
 *   calibrate_run.c    timing (a call on every rank at once, a GPU kept
 *                      hot) and the calls each point times (transfers,
 *                      GEMMs, elementwise ops, attention)
 * Each file calls only files below it in this list. */
#ifndef CALIBRATE_H
#define CALIBRATE_H


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
#include "profile_format.h"

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

extern const char *const tname[4]; /* by cfrt_dtype */
extern const char *const coll_name[];

typedef struct P2p {
	int64_t count; /* f32 elements of one message */
	int conc;      /* 1: rank 0 to rank 1 alone; 2: the ring; 4: both ways */
} P2p;

typedef struct Coll {
	int op; /* 0 all_gather, 1 reduce_scatter, 2 all_reduce, 3 all_to_all */
	int64_t count; /* f32 elements of one rank's block */
} Coll;

typedef struct Gemm {
	cfrt_dtype t;
	int64_t m, n, k;
	int acc;   /* adds to its output (beta = 1), as FuseRS accumulates */
	int calls; /* back to back a run (at least 1); the point's time is a call's */
} Gemm;

typedef struct Ew {
	cfrt_dtype t;
	int64_t n;
	int reps; /* adds per run: a short one is timed in a loop */
} Ew;

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
	{"split_heads", 1}, {"merge_heads", 1}, {"swiglu", 2}, {"swiglu_da", 3}, {"swiglu_db", 2},
};
enum { NOPS = sizeof ops / sizeof ops[0] };

typedef struct OpRun {
	cfrt_dtype t;
	int64_t n; /* elements */
	int k;     /* ops[k] */
} OpRun;

typedef struct Attn {
	cfrt_dtype t;
	int64_t dims[4]; /* B, H, S, Dh */
	int causal;
	int lse_ready; /* run_attn_grad: the forward wrote the lse */
} Attn;

enum { MAXPASS = 15 };

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

/* calibrate_run.c: timing */
void die_rc(Cal *C, int rc, const char *what);
double elapsed(Cal *C, double t0, double t1);
double timed(Cal *C, RunFn fn, void *arg, int reps, double budget, int least);
int fill(Cal *C, cfrt_dtype t);
void heat(Cal *C, cfrt_dtype t, double secs);

/* calibrate_run.c: the calls */
int p2p_start(Cal *C, const P2p *p, char *send, char *recv, size_t half, cfrt_req q[4], int *n);
int run_p2p(Cal *C, void *arg);
int coll_call(Cal *C, const Coll *c, void *recv, cfrt_req *req);
int run_coll(Cal *C, void *arg);
int gemm_call(Cal *C, const Gemm *g, void *out);
int run_gemm(Cal *C, void *arg);
int run_ew(Cal *C, void *arg);
int run_op(Cal *C, void *arg);
int run_attn(Cal *C, void *arg);
int run_attn_grad(Cal *C, void *arg);

/* calibrate_probe.c */
void cal_slowdown(Cal *C);
void cal_clock(Cal *C);

#endif