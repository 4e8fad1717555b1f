/* common.h: private to the backends of cfrt; what they share.
 *
 * Files: base.c (cfrt_init and cfrt_finalize around the backend's hooks,
 * the getters, error messages, the last error, the clock, cfrt_where,
 * cfrt_fail), view.c (view checks, line walk), check.c (argument checks of
 * the compute ops), matmul.c (GEMM and matmul arguments, matmul's batch
 * loop, attention checks and its public calls), transfer.c (transfer checks and the public
 * transfer calls), tracefile.c (the trace: spans the backends record,
 * written as one file for the job at cfrt_finalize). Their names differ from the backends' files: one
 * archive holds both.
 *
 * Compiled once, with no backend header: the shared code sees a context
 * only through its first member, a cfrti_base, and calls the backend only
 * through the hooks declared at the end of this file, which every backend
 * defines. Messages of a failed check are the same on every backend. */
#ifndef CFRT_COMMON_H
#define CFRT_COMMON_H

#include <stdint.h>

#include "cfrt.h"

/* The head of every backend's struct cfrt_ctx (its first member, named
 * base). */
typedef struct cfrti_base {
	MPI_Comm comm; /* the current group's communicator (job: one group) */
	int rank, size; /* in the current group */
	int world_rank;
	MPI_Comm job;  /* our duplicate of the whole communicator,
	                * MPI_ERRORS_RETURN; MPI_COMM_NULL: no MPI (CUDA,
	                * cfrt_init_opts with comm MPI_COMM_NULL) */
	int job_rank, job_size;
	int ngroups;   /* the groups of the grid (cfrt_init_groups); the
	                * current one's comm, rank and size are above */
	int cur;       /* the current group (cfrt_use_group) */
	struct cfrti_group {
		MPI_Comm comm; /* job itself when there is one group */
		int rank, size;
		int stride; /* job ranks between neighbours of the group */
	} grp[CFRT_MAX_GROUPS];
	int device; /* shown by cfrt_fail; -1: the backend has none */
	int in_group; /* between cfrt_group_begin and cfrt_group_end */
	cfrt_opts opts; /* of cfrt_init_opts (flags 0: none) */
	char model[64];
	char op[64]; /* from cfrt_where */
	int step;
	char what[64]; /* from cfrt_what: the tensors of the next calls */
	int slice;     /* from cfrt_what, -1: none */
	struct cfrti_trace *trace; /* CFRT_TRACE; NULL: off */
	const char *api; /* public call running: names it in messages */
	char err[512];   /* frozen once failed: the first failure's */

	/* Library use (cfrt.h, "Error modes"). */
	int errors;       /* CFRT_ERRORS_* */
	int failed;       /* the status of the first failure; CFRT_OK: none */
	double timeout;   /* the watchdog's seconds; 0: off */
	int check_finite; /* CFRT_CHECK=finite */
	MPI_Comm alarm;   /* our duplicate of the job for failure notices */
	MPI_Request alarm_rq; /* the notice receive posted (mode return),
	                       * else MPI_REQUEST_NULL */
	struct cfrti_notice *alarm_in, *alarm_out;
	MPI_Request *alarm_sends; /* job_size of them, once failed */
	struct cfrti_buf {
		const char *base;
		size_t bytes;
		int alloc; /* from cfrt_alloc; else cfrt_register */
	} *bufs;          /* buffers whose sizes cfrt_check_arg checks */
	int nbufs;
	/* the bytes of cfrt_alloc's buffers live now, and the most live at
	 * once since cfrt_mem_reset_peak (cfrt_mem_peak); cfrti_mem_add */
	size_t mem_live, mem_peak;
} cfrti_base;

/* bytes more (cfrt_alloc) or fewer (cfrt_free, as a negative) live. */
void cfrti_mem_add(cfrt_ctx *ctx, long long bytes);

/* A failure notice, sent to every other rank of the job (mode return). */
struct cfrti_notice {
	int rank, status;
	char msg[504];
};

/* A pointer to a struct points to its first member (C11 6.7.2.1). */
static inline cfrti_base *cfrti_base_of(cfrt_ctx *ctx)
{
	return (cfrti_base *)(void *)ctx;
}

static inline const cfrti_base *cfrti_cbase_of(const cfrt_ctx *ctx)
{
	return (const cfrti_base *)(const void *)ctx;
}

/* base.c: messages. cfrti_err writes "API: message" into the context and
 * returns status; cfrti_mpi is CFRT_OK for MPI_SUCCESS, else CFRT_ECOMM
 * naming the failed call with MPI's text. */
int cfrti_err(cfrt_ctx *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int cfrti_mpi(cfrt_ctx *ctx, int rc, const char *call);

/* A setting from environment variable var, one of names[0..n): its index
 * in *out (def when var is unset or empty); any other value is
 * CFRT_EINVAL "VAR=value: use a, b or c". */
int cfrti_env_choice(cfrt_ctx *ctx, const char *var, const char *const *names,
                     int n, int def, int *out);

/* Seconds on a monotonic clock (cfrt_wtime, traces). */
double cfrti_now(void);

/* Failure of the context: marks it failed with status (the first only),
 * puts "rank R: op OP step S: " before its message and, in error mode
 * return, sends the notice to every other rank of the job. */
void cfrti_fail_ctx(cfrt_ctx *ctx, int status);
/* 1 when ctx is a live context (made, not finalized); reads no memory of
 * ctx. */
int cfrti_live(const cfrt_ctx *ctx);
/* CFRT_EFAILED when the context failed before (its message kept), else
 * CFRT_OK: the entry of transfers, waits and barriers. */
int cfrti_gone(cfrt_ctx *ctx);
/* Completes *r as MPI_Wait does (*mpirc: MPI's code), bounded: CFRT_EPEER
 * when another rank's notice came first (the context failed, message
 * set), CFRT_ETIMEOUT when the watchdog's seconds passed (no message: the
 * caller names what it waited for, then calls cfrti_fail_ctx); *r is then
 * still active. */
int cfrti_block(cfrt_ctx *ctx, MPI_Request *r, int *mpirc);
/* cfrti_block with timeout seconds instead of the watchdog's. */
int cfrti_block_within(cfrt_ctx *ctx, MPI_Request *r, int *mpirc, double timeout);
/* The notice receive cancelled, the notices sent completed or let go
 * (cfrt_finalize). */
void cfrti_alarm_close(cfrt_ctx *ctx);
/* The size registry of cfrt_check_arg: cfrt_alloc's buffers (MPI
 * backend) and cfrt_register's. */
int cfrti_buf_add(cfrt_ctx *ctx, const void *p, size_t bytes, int alloc);
int cfrti_buf_del(cfrt_ctx *ctx, const void *p);
/* CFRT_ENONFINITE naming the call and cfrt_what's tensors when host view v
 * (f32 or f64) holds a NaN or an Inf; what names v in the message. */
int cfrti_check_finite(cfrt_ctx *ctx, const cfrt_view *v, const char *what);
/* The CFRT_ENONFINITE of both backends: what (a view the call wrote)
 * holds x, a NaN or an Inf, at element at (row-major over its dims) of
 * n. */
int cfrti_err_nonfinite(cfrt_ctx *ctx, const char *what, double x, int64_t at,
                        int64_t n);

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
 * beta may be NULL); of their backward: cfrt_scan_grad, the norms' and
 * softmax's grads (x, named xn in messages: the forward's input, or y for
 * softmax), cfrt_sum_leading. */
int cfrti_check_fill(cfrt_ctx *ctx, const cfrt_view *dst,
                     const int64_t *gdims, const int64_t *offs);
int cfrti_view_eq(const cfrt_view *a, const cfrt_view *b);
int cfrti_check_matmul_add(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *d);
int cfrti_check_binary(cfrt_ctx *ctx, const cfrt_view *dst,
                       const cfrt_view *a, const cfrt_view *b,
                       cfrt_view *bb);
/* the GATE rows of ew.def: dst, x, y and z (NULL: none), named xn, yn,
 * zn in messages, of one dtype and shape (no broadcast). */
int cfrti_check_gate(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *x,
                     const char *xn, const cfrt_view *y, const char *yn,
                     const cfrt_view *z, const char *zn);
int cfrti_check_scan(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim);
int cfrti_check_rows(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, const cfrt_view *gamma,
                     const cfrt_view *beta, double eps);
int cfrti_check_scan_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                          const cfrt_view *dy, int dim);
/* rope: dst like src, at least 2 dims, the last even; the positions'
 * dim another; base > 1 and pos0 >= 0. */
int cfrti_check_rope(cfrt_ctx *ctx, const cfrt_view *dst,
                     const cfrt_view *src, int dim, double base, int64_t pos0);
int cfrti_check_rows_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                          const cfrt_view *dy, const cfrt_view *x,
                          const char *xn, const cfrt_view *gamma, double eps);
int cfrti_check_sum_leading(cfrt_ctx *ctx, const cfrt_view *dst,
                            const cfrt_view *src);

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
	const void *cin; /* the C read with beta, laid out as c, when it is
	                  * not c (the CUDA backend's cfrt_matmul_add through
	                  * cuBLASLt): at c's first element as cfrti_matmul_run
	                  * gets it, which moves it with c line by line; NULL:
	                  * c itself */
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
/* Between matmul_args and matmul_batch (the CPU backend): where b is
 * one matrix for every batch entry (a weight; its batch strides 0) and a
 * is not transposed, and the batch dims of c and of a each step over
 * whole runs of their rows (a tensor cut along its first dim or its
 * last, not between), makes c, a and b 2-D and g one GEMM of all the
 * rows: a loop of GEMMs of B rows each for [S, B, F] @ [F, D] otherwise.
 * Not on cuBLAS, whose strided batch of those ran as fast or faster (4
 * H100s, bf16, [4096, 32, 4096] @ [4096, 4096], each GPU's calls back to
 * back, two leases: 6.03-6.35 ms a call, one GEMM of the 131072 rows
 * 6.45-6.59). */
void cfrti_matmul_fold(gemm_args *g, cfrt_view *c, cfrt_view *a, cfrt_view *b);
int cfrti_matmul_run(cfrt_ctx *ctx, gemm_args *g, const cfrt_view *c,
                     const cfrt_view *a, const cfrt_view *b);

/* Attention: the views of one call of cfrt_attention(_lse) (q, k, v,
 * out, lse) or of cfrt_attention_grad(_lse) (all; out is the forward's
 * result); lse, dq, dk and dv may be NULL. matmul.c defines the four
 * public calls on the backend's hooks cfrti_attention and
 * cfrti_attention_grad (end of this file). */
typedef struct cfrti_attn {
	const char *api; /* the public call, which messages name */
	const cfrt_view *q, *k, *v, *out, *lse;
	const cfrt_view *dq, *dk, *dv, *dout;
	int causal;
	int64_t q_offset;
} cfrti_attn;

/* The checks of cfrt_attention(_lse) and of cfrt_attention_grad(_lse)
 * (dq, dk, dv and lse may be NULL); the row stride of the [S,Dh]
 * matrices of a [B,H,S,Dh] view and its element [b,h,0,0]. */
int cfrti_attn_check(cfrt_ctx *ctx, const cfrt_view *out,
                     const cfrt_view *lse, const cfrt_view *q,
                     const cfrt_view *k, const cfrt_view *v,
                     int64_t q_offset);
int cfrti_attn_grad_check(cfrt_ctx *ctx, const cfrt_view *dq,
                          const cfrt_view *dk, const cfrt_view *dv,
                          const cfrt_view *q, const cfrt_view *k,
                          const cfrt_view *v, const cfrt_view *out,
                          const cfrt_view *dout, const cfrt_view *lse,
                          int64_t q_offset);
int64_t cfrti_head_ld(const cfrt_view *v);
char *cfrti_head_at(const cfrt_view *v, int64_t b, int64_t h);

/* transfer.c: one transfer as asked for. count: elements sent or received
 * (p2p), per rank (all_gather, reduce_scatter, all_to_all), in all
 * (all_reduce). */
typedef enum xkind { T_SEND, T_RECV, T_AG, T_RS, T_AR, T_A2A } xkind;
typedef struct xdesc {
	xkind kind;
	const void *send;
	void *recv;
	int64_t count;
	cfrt_dtype t;
	int peer, tag;
} xdesc;

/* The checks of a transfer start: req, dtype, count (at most INT_MAX when
 * int_counts: MPI's counts are ints), buffers, peer and tag. */
int cfrti_check_xfer(cfrt_ctx *ctx, const xdesc *d, const cfrt_req *req,
                     int int_counts);
/* EINVAL inside a transfer group: a wait there would wait on transfers
 * that a backend issues only at cfrt_group_end. */
int cfrti_not_in_group(cfrt_ctx *ctx);
/* Opens (open = 1) or closes (0) the transfer group, as cfrt_group_begin
 * and cfrt_group_end; EINVAL when one is open already, or none is. */
int cfrti_set_group(cfrt_ctx *ctx, int open);

/* tracefile.c: the trace of a context (CFRT_TRACE). A backend records
 * spans: a compute call, or a transfer from its start to its end, on a
 * track (a queue: the compute queue, the communication queue, a copy
 * engine's stream). Times are nanoseconds from the trace's origin, the
 * host clock right after a barrier of the job at cfrt_init, so ranks line
 * up to within the barrier's skew; a backend that times spans on the
 * device (CUDA events) leaves t0/t1 at -1, keeps its marks in ev[] and
 * fills t0/t1 from them in its drain. Spans beyond the cap
 * (CFRT_TRACE_EVENTS) are dropped and counted. */
enum { TRK_COMPUTE, TRK_XFER, TRK_COPY /* + the peer's rank in the job */ };
typedef struct cfrti_span {
	int64_t t0, t1; /* ns from the origin; -1: not known (yet) */
	int ev[2];      /* the backend's marks of start and end, or -1 */
	int track;
	int kind;       /* -1: compute; else an xkind */
	int peer;       /* p2p: the peer's rank in the job; else -1 */
	int64_t msg;    /* p2p: number of the message among those between
	                 * this rank and peer in this direction, in start order
	                 * (messages of a pair match in that order: cfrt.h) */
	int64_t bytes;  /* transfers: bytes sent or received by this rank */
	int step, slice;
	char call[24];  /* "matmul", "send", "all_gather" */
	char op[64];    /* cfrt_where's op and step, cfrt_what's tensors and */
	char what[64];  /* slice, when the span began */
} cfrti_span;

/* Reads CFRT_TRACE and CFRT_TRACE_EVENTS (cfrt_init, collective: the
 * barrier that fixes the origin). */
int cfrti_trace_open(cfrt_ctx *ctx);
/* A new span named call on track, or -1 (tracing off, or dropped). */
int cfrti_trace_begin(cfrt_ctx *ctx, const char *call, int track);
/* A new span for transfer d (its peer in the job, its message number,
 * bytes), or -1. */
int cfrti_trace_xfer(cfrt_ctx *ctx, const xdesc *d, int track);
/* Span i, or NULL for i < 0. */
cfrti_span *cfrti_trace_at(cfrt_ctx *ctx, int i);
/* Host time t (cfrti_now) in ns from the origin. */
int64_t cfrti_trace_ns(const cfrt_ctx *ctx, double t);
/* Gathers every rank's spans to rank 0 of the context, which writes the
 * file (cfrt_finalize, collective); it sorts the spans in place, so no
 * span is added or looked up after it, only cfrti_trace_free. */
int cfrti_trace_write(cfrt_ctx *ctx);
void cfrti_trace_free(cfrt_ctx *ctx);

/* ---- hooks: defined by each backend ------------------------------------ */

/* The job's rank and size when cfrt_init_opts has no MPI communicator
 * (MPI_COMM_NULL), from the application's handles in opts (NULL: none):
 * CFRT_ENOTSUP where the backend needs MPI, CFRT_EINVAL (message in msg)
 * where the handles say nothing. */
int cfrti_app_job(const cfrt_opts *opts, int *rank, int *size, char *msg, size_t n);
/* A zeroed context (calloc: cfrt_init frees it with free() when the
 * communicator cannot be duplicated). */
cfrt_ctx *cfrti_ctx_new(void);
/* The backend's part of cfrt_init, after base is filled (device -1). */
int cfrti_ctx_setup(cfrt_ctx *ctx);
/* Frees the context's communicators (base.c; every backend's
 * cfrti_ctx_free calls it). */
void cfrti_free_comms(cfrt_ctx *ctx);
/* The backend's part of cfrt_finalize: completes every transfer and all
 * work, before cfrti_ctx_free. */
int cfrti_ctx_drain(cfrt_ctx *ctx);
/* Releases everything, the communicator and ctx included; also after a
 * failed setup. */
void cfrti_ctx_free(cfrt_ctx *ctx);

/* OK for a dtype the backend computes on, else the error. */
int cfrti_check_dtype(cfrt_ctx *ctx, cfrt_dtype t);
/* OK when [p, p + bytes) is memory the backend computes on (what names it
 * in the error); known: it lies in a buffer of the size registry. */
int cfrti_check_mem(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what,
                    int known);
/* Entry of a public transfer call: names it for messages (base.api). */
int cfrti_enter(cfrt_ctx *ctx, const char *api);
/* The compute call issued last has ended, as far as the host knows
 * (cfrt_where, cfrt_what, cfrt_barrier): a backend that closes a call's
 * span lazily, at the next call, closes it here, before the host waits
 * or the application queues its own work. */
void cfrti_trace_flush(cfrt_ctx *ctx);
/* Starts d as public call api (in the open group, if any), checked by
 * cfrti_check_xfer; *req: its handle. */
int cfrti_xfer_start(cfrt_ctx *ctx, const char *api, const xdesc *d,
                     cfrt_req *req);
/* Waits on *req unless it is null or completed; *req becomes null. */
int cfrti_xfer_wait(cfrt_ctx *ctx, cfrt_req *req);
/* Runs a GEMM that passed cfrti_gemm_check. */
int cfrti_gemm_run(cfrt_ctx *ctx, const gemm_args *g);
/* Attention forward (out, and lse unless NULL) and backward (the
 * gradients not NULL) of the views of a, as cfrt.h says; each checks a
 * (cfrti_attn_check, cfrti_attn_grad_check) naming a->api. */
int cfrti_attention(cfrt_ctx *ctx, const cfrti_attn *a);
int cfrti_attention_grad(cfrt_ctx *ctx, const cfrti_attn *a);

#endif /* CFRT_COMMON_H */
