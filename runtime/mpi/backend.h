/* backend.h: private to the MPI + CBLAS backend of cfrt.
 *
 * Files: ctx.c (context hooks, memory, compute spans of the trace),
 * progress.c (transfer table, progress modes), comm.c (starts, groups,
 * sync), ew.c (copy, fill, elementwise, scan, sum over leading dims),
 * norm.c (norms, softmax; with their backward ops),
 * gemm.c (gemm, matmul), attn.c; with the shared code of runtime/common
 * (common.h: errors, checks, the public transfer calls).
 *
 * Every public compute call calls cfrti_begin first and returns through
 * cfrti_end, so error messages name the call and the trace times it. */
#ifndef CFRT_BACKEND_H
#define CFRT_BACKEND_H

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cfrt.h"
#include "common/common.h"

enum progress_mode { PROG_NONE, PROG_PANEL, PROG_THREAD };

/* A transfer slot. Invariant: state FREE <=> no live handle refers to it
 * with the current gen (gen grows whenever the slot is released). */
enum xfer_state { X_FREE, X_ACTIVE, X_DONE };
typedef struct xfer {
	MPI_Request r;
	uint32_t gen;
	int state;   /* enum xfer_state; X_DONE: complete, not yet waited */
	int mpi_err; /* MPI_SUCCESS, or the error a progress test saw */
	int span;    /* its span in the trace, or -1 */
	int kind, peer, grp; /* xkind, peer in group grp: for the watchdog */
} xfer;

struct cfrt_ctx {
	cfrti_base base; /* first: what the shared code sees (common.h) */

	/* Transfer table, guarded by mu (the progress thread reads it). */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	xfer *x;
	int nx; /* slots in x */
	int unwaited; /* slots not FREE: while > 0, compute cuts panels */
	int active;   /* slots ACTIVE: what a progress test looks at */
	int mode; /* enum progress_mode */
	int thread_on, stop;
	pthread_t thread;

	void *ws; /* attention scores, or a line of cfrt_sum_leading's
	           * sums; ws_bytes long */
	size_t ws_bytes;
};
_Static_assert(offsetof(struct cfrt_ctx, base) == 0,
               "the shared code finds base at the start of a context");

/* ctx.c: cfrti_begin returns the start time for cfrti_end, which
 * records the call's span when tracing. */
double cfrti_begin(cfrt_ctx *ctx, const char *api);
int cfrti_end(cfrt_ctx *ctx, double t0, int status);
/* cfrti_end of a call that succeeded and wrote the views o1, o2, o3 (each
 * may be NULL): with CFRT_CHECK=finite they are checked first. */
int cfrti_end_out(cfrt_ctx *ctx, double t0, const cfrt_view *o1,
                  const cfrt_view *o2, const cfrt_view *o3);
int cfrti_ws_reserve(cfrt_ctx *ctx, size_t bytes);

/* progress.c */
int cfrti_progress_start(cfrt_ctx *ctx);
void cfrti_progress_stop(cfrt_ctx *ctx);
void cfrti_progress_poll(cfrt_ctx *ctx);
int cfrti_xfer_reserve(cfrt_ctx *ctx);
void cfrti_xfer_add(cfrt_ctx *ctx, int span, MPI_Request r, const xdesc *d,
                    cfrt_req *req);
int cfrti_xfer_wait_all_slots(cfrt_ctx *ctx);
int cfrti_settle(cfrt_ctx *ctx);

/* One strided run of a view: element i at p + i*s elements, of type t. */
typedef struct lane {
	char *p;
	int64_t s;
	cfrt_dtype t;
} lane;

static inline double lane_get(lane l, int64_t i)
{
	if (l.t == CFRT_F32)
		return ((const float *)(void *)l.p)[i * l.s];
	return ((const double *)(void *)l.p)[i * l.s];
}

static inline void lane_set(lane l, int64_t i, double v)
{
	if (l.t == CFRT_F32)
		((float *)(void *)l.p)[i * l.s] = (float)v;
	else
		((double *)(void *)l.p)[i * l.s] = v;
}

/* The exponent below which an f32 probability is 0 (exp_prob). */
#define F32_EXP_LIM (-87.3f)

/* exp(x) of a probability's exponent (x <= 0, a score minus its row's
 * max or log-sum-exp), and lane_set of a probability: one below the
 * type's smallest normal number is 0. Such a weight is below 2^-126 of
 * its row's sum (at least 1), and subnormal results cost twice: exp takes
 * its slow underflow path, and subnormal operands slow the GEMM that
 * reads them, on x86 CPUs by far. exp is called on every exponent, held
 * to the normal range, so that an attention costs the same whatever its
 * scores (cfc's cost model prices it from calibration data). On the GPU
 * machines' Xeons, 4 ranks, the f32 attention model's attention call
 * took 149.0 and 103.8 ms before this and the float rows of norm.c,
 * 32.8 and 37.0 ms after. */
static inline double exp_prob(cfrt_dtype t, double x)
{
	double lim = t == CFRT_F32 ? F32_EXP_LIM : -708.3, e = exp(x < lim ? lim : x);
	return x < lim ? 0.0 : e;
}

static inline void lane_set_prob(lane l, int64_t i, double v)
{
	if (v < (l.t == CFRT_F32 ? (double)FLT_MIN : DBL_MIN))
		v = 0.0;
	lane_set(l, i, v);
}

/* The lane of view v (walked with `shape`'s index space) for line `line`
 * along axis. */
static inline lane lane_of(const cfrt_view *v, const cfrt_view *shape,
                           int axis, int64_t line)
{
	lane l = {cfrti_line_at(v, shape, axis, line), v->stride[axis], v->t};
	return l;
}

/* Compute between progress tests, in elements touched by line ops. */
enum { POLL_ELEMS = 1 << 16 };

/* Counts n more elements done; tests transfers every POLL_ELEMS. */
static inline void tick(cfrt_ctx *ctx, int64_t *done, int64_t n)
{
	*done += n;
	if (*done >= POLL_ELEMS) {
		*done = 0;
		cfrti_progress_poll(ctx);
	}
}

/* norm.c: softmax of the first n elements of a lane, zero after them;
 * returns their log-sum-exp (computed in double, as the softmax). */
double cfrti_softmax_lane(lane dst, lane src, int64_t n, int64_t len);
/* d[i] = exp(s[i] - sub) for i < n as exp_prob gives it, 0 from n to len
 * (f32 runs of stride 1; d may be s). */
void cfrti_exp_rows_f32(float *d, const float *s, int64_t n, int64_t len, float sub);

#endif /* CFRT_BACKEND_H */
