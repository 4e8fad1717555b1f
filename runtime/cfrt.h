/* cfrt.h: the CommFuse runtime, the only header that generated code includes.
 *
 * One header, several backends: runtime/mpi (MPI + CBLAS on CPUs) and
 * runtime/cuda (CUDA + NCCL + cuBLAS). Code written against this header is
 * right on every backend as long as it follows the queue rules below.
 *
 * EXECUTION MODEL
 *  - Compute calls (copy, gemm, elementwise, norms, attention, scan, fill,
 *    memset) are ordered on one compute queue, in program order.
 *  - Transfers (isend, irecv, collectives) are ordered on a communication
 *    queue and run concurrently with compute. A transfer reads or writes its
 *    buffer at any time between its start and its wait.
 *  - cfrt_wait(req) orders the transfer before every later compute call:
 *    compute that reads a received buffer, or writes a buffer being sent,
 *    must come after the wait on that transfer. A buffer being sent must not
 *    be written, and a buffer being received into must not be read or
 *    written, until its wait.
 *  - Every transfer must be waited on (cfrt_wait, cfrt_waitall, cfrt_sync or
 *    cfrt_finalize); waiting on it again is a no-op.
 *  - Transfers a rank starts in one step (a send to next and a receive from
 *    prev) go between cfrt_group_begin and cfrt_group_end, so that backends
 *    without tags or eager buffering (NCCL) issue them together.
 *  - Messages between one pair of ranks match in the order they were
 *    started; tags are checked by the MPI backend and ignored by NCCL.
 *  - CPU backend: a compute call returns when its result is in memory;
 *    transfers are MPI nonblocking calls; wait is MPI_Wait.
 *    GPU backend: compute is enqueued on a stream, transfers on a second
 *    stream, wait makes the compute stream wait on an event.
 *
 * CPU PROGRESS (MPI backend). Open MPI moves large nonblocking messages only
 * inside MPI calls, so the backend drives progress while it computes. The
 * environment variable CFRT_PROGRESS, read by cfrt_init, chooses how:
 *    panel   long compute is cut into pieces (GEMM into row panels of 512
 *            rows or more) and outstanding transfers are tested between
 *            pieces (default: the fused schedules need their transfers to
 *            move during the next step's compute);
 *    none    transfers move inside cfrt_wait and the other transfer calls
 *            (a program with nothing to overlap loses nothing to panels);
 *    thread  a progress thread tests outstanding transfers (best when cores
 *            are spare); needs MPI_THREAD_MULTIPLE from MPI_Init_thread,
 *            falls back to panel with a one-line warning.
 * Panels are cut only while a transfer that was started has not been waited
 * on, so for a given program the cut (and so every rounding) is the same on
 * every run; a cut GEMM may round differently from an uncut one.
 *
 * TRACING. With CFRT_TRACE=<prefix> in the environment at cfrt_init, the
 * context's rank 0 writes ONE file for the whole job at cfrt_finalize (the
 * ranks' events gathered over the context's communicator):
 * <prefix>.json for a process's first context over all of MPI_COMM_WORLD;
 * the k-th further context of a process adds .ctx<k>, and a context over
 * fewer ranks adds .rank<W>, W the world rank of its rank 0 (a serial
 * reference on MPI_COMM_SELF writes <prefix>.ctx1.rank0.json). Chrome
 * trace JSON (Perfetto, chrome://tracing): one process row per rank (pid =
 * rank in the context, named), a track per queue (tid 0 compute; 1000
 * communication; 1000 * (2 + P) the copy engine pulling from rank P,
 * CUDA CFRT_TRANSFER=ce), spans that overlap on one queue (transfers in
 * flight together) on further lanes of it (tid + 1, ..., named), so that
 * no two "X" events of a track overlap. ts/dur in microseconds from a
 * time origin taken after a barrier at cfrt_init on every rank. An "X"
 * event is a compute call or a transfer. MPI: host times, a transfer from
 * its start to the end of its wait. CUDA: CUDA events around the work on
 * its stream (pooled, read at cfrt_finalize; a compute call's span ends
 * at the next runtime call, cfrt_what or cfrt_where; a copy-engine send
 * runs on the compute stream from its start to its wait). Named "OP step S
 * slice L: CALL [to|from PEER]" from cfrt_where and cfrt_what, with args
 * op, step, slice, tensors (cfrt_what's), and for transfers bytes, and
 * for point-to-point ones peer and msg (its number among the messages of
 * the pair, in start order). A flow ("s" at the send, "f" with bp "e" in
 * the matching receive, one id) joins each message's two ends;
 * collectives have none. CFRT_TRACE_EVENTS caps the events kept per rank
 * (default 65536); the process row's dropped_events counts the others.
 *
 * USE. tests/runtime/pc_app.c is a FuseRS step loop written the way
 * generated code calls the runtime. The header is C11 and C++ (nvcc); C++
 * code using Open MPI defines OMPI_SKIP_MPICXX to skip MPI's C++ bindings.
 *
 * ERRORS. Every function returns CFRT_OK (0) or a negative cfrt_status,
 * except the getters, cfrt_where, cfrt_what and cfrt_fail. A failed call leaves a message in the
 * context (cfrt_last_error). Generated code wraps calls in CFRT_PROPAGATE,
 * which hands a failure to cfrt_raise; what that does is the context's
 * ERROR MODE (see "Error modes" below): abort the job (the default: it
 * prints "cfrt: rank R: op OP step S: message" to stderr and ends the whole
 * job with MPI_Abort) or return the status to the application, the
 * context marked failed and the other ranks told. Either way a failure
 * never hangs the job; a rank that never comes (it skipped a call) is
 * caught by the watchdog (CFRT_TIMEOUT) when one is set.
 */
#ifndef CFRT_H

#include <stddef.h>
#include <stdint.h>

#ifndef CFRT_DIMS_FOLD
#define CFRT_DIMS_FOLD
/* The dims and strides of a view (nd of them; the arrays hold at least
 * want) as want dims: leading dims of extent 1 added, or two leading
 * dims that continue each other merged, until it has want (it may keep
 * more: an op that needs want dims then refuses it). Returns the new nd.
 * cfrt_view_fold applies it to a view: attention's operands as
 * [B, H, S, Dh] (want 4), its log-sum-exp rows as [B, H, S] (want 3).
 * cfc's verifier (compiler/verify_call.c) folds its views with this same
 * function, including this part of the header alone (CFRT_DIMS_ONLY:
 * nothing that needs MPI). */
static inline int cfrt_dims_fold(int nd, int64_t *dim, int64_t *stride, int want)
{
	while (nd < want) {
		for (int d = nd; d > 0; d--) {
			dim[d] = dim[d - 1];
			stride[d] = stride[d - 1];
		}
		dim[0] = 1;
		stride[0] = stride[1] * dim[1];
		nd++;
	}
	for (int d = 0; nd > want && d < nd - (want - 1);) {
		if (stride[d] != dim[d + 1] * stride[d + 1]) {
			d++;
			continue;
		}
		dim[d] *= dim[d + 1];
		stride[d] = stride[d + 1];
		for (int k = d + 1; k < nd - 1; k++) {
			dim[k] = dim[k + 1];
			stride[k] = stride[k + 1];
		}
		nd--;
	}
	return nd;
}
#endif /* CFRT_DIMS_FOLD */

#ifndef CFRT_DIMS_ONLY
#define CFRT_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#define CFRT_NORETURN [[noreturn]]
#else
#define CFRT_NORETURN _Noreturn
#endif

/* Generated code checks: #if CFRT_API_VERSION != 1 / #error ... / #endif.
 * The number changes whenever a declaration here changes incompatibly. */
#define CFRT_API_VERSION 1
#define CFRT_VERSION_STRING "0.1.0"

/* Most dimensions of a view. */
#define CFRT_MAX_DIMS 6

/* Element types. The MPI backend implements F32 and F64; every call given
 * another type returns CFRT_ENOTSUP there. */
typedef enum cfrt_dtype {
	CFRT_F32,
	CFRT_F64,
	CFRT_BF16,
	CFRT_F16
} cfrt_dtype;

typedef enum cfrt_status {
	CFRT_OK = 0,
	CFRT_EINVAL = -1,  /* bad argument: shape, stride, rank, count, ... */
	CFRT_ENOTSUP = -2, /* type or feature this backend does not have */
	CFRT_ENOMEM = -3,  /* out of host or device memory */
	CFRT_ESIZE = -4,   /* communicator size differs from the compiled group */
	CFRT_ECOMM = -5,   /* the communication library (MPI, NCCL) failed */
	CFRT_EDEVICE = -6, /* the compute library (BLAS, CUDA) failed */
	CFRT_EIO = -7,     /* the trace file could not be written */
	CFRT_EFAILED = -8, /* the context failed before (error mode return):
	                    * the call did nothing; cfrt_last_error has the
	                    * first failure */
	CFRT_ETIMEOUT = -9, /* the watchdog (CFRT_TIMEOUT) ended a wait */
	CFRT_EPEER = -10,   /* another rank of the job failed and said so */
	CFRT_ENONFINITE = -11 /* CFRT_CHECK=finite found a NaN or an Inf */
} cfrt_status;

/* GEMM operand transposition. */
typedef enum cfrt_trans {
	CFRT_NOTRANS,
	CFRT_TRANS
} cfrt_trans;

/* The runtime state of one model instance on one rank: the communicator,
 * outstanding transfers, workspaces, trace. Opaque. */
typedef struct cfrt_ctx cfrt_ctx;

/* A transfer handle, small enough to live in locals and arrays of generated
 * code. The fields are private. A zero-initialised cfrt_req is the null
 * request: waiting on it does nothing. */
typedef struct cfrt_req {
	int32_t slot;
	uint32_t gen;
} cfrt_req;

/* ------------------------------------------------------------------------
 * Views: a strided window on a buffer. Row-major tensors, strides and dims in
 * elements. A slice of a row-major tensor along any dimension is a view:
 * rows s0..s1 of S in [B,S,D] are B blocks of (s1-s0)*D elements, S*D apart.
 * Invariant of a valid view: 1 <= nd <= CFRT_MAX_DIMS, every dim >= 0, every
 * stride >= 0, p points into memory from cfrt_alloc (or is any pointer when
 * the view has no element).
 * ------------------------------------------------------------------------ */
typedef struct cfrt_view {
	void *p;        /* element [0,...,0] */
	cfrt_dtype t;
	int nd;
	int64_t dim[CFRT_MAX_DIMS];
	int64_t stride[CFRT_MAX_DIMS];
} cfrt_view;

/* Bytes of one element of type t. */
static inline size_t cfrt_dtype_size(cfrt_dtype t)
{
	return t == CFRT_F64 ? 8 : t == CFRT_F32 ? 4 : 2;
}

/* A contiguous row-major view of nd dims (nd <= CFRT_MAX_DIMS) at p. */
static inline cfrt_view cfrt_view_contig(void *p, cfrt_dtype t, int nd,
                                         const int64_t *dims)
{
	cfrt_view v = {p, t, nd, {0}, {0}};
	int64_t s = 1;
	for (int d = nd - 1; d >= 0; d--) {
		v.dim[d] = dims[d];
		v.stride[d] = s;
		s *= dims[d];
	}
	return v;
}

/* Elements [start, start+len) of dimension d of v; the other dims keep their
 * extent. Requires 0 <= start, start + len <= v.dim[d]. */
static inline cfrt_view cfrt_view_slice(cfrt_view v, int d, int64_t start,
                                        int64_t len)
{
	v.p = (char *)v.p + start * v.stride[d] * (int64_t)cfrt_dtype_size(v.t);
	v.dim[d] = len;
	return v;
}

/* Dimension d of extent outer*inner split into two dims (outer, inner):
 * [B,S,H*Dh] -> [B,S,H,Dh] with d = 2, outer = H. Requires nd < MAX. */
static inline cfrt_view cfrt_view_split(cfrt_view v, int d, int64_t outer,
                                        int64_t inner)
{
	for (int i = v.nd; i > d + 1; i--) {
		v.dim[i] = v.dim[i - 1];
		v.stride[i] = v.stride[i - 1];
	}
	v.dim[d] = outer;
	v.dim[d + 1] = inner;
	v.stride[d + 1] = v.stride[d];
	v.stride[d] = v.stride[d] * inner;
	v.nd++;
	return v;
}

/* Dims reordered: dim i of the result is dim perm[i] of v (perm holds each
 * of 0..nd-1 once). */
static inline cfrt_view cfrt_view_permute(cfrt_view v, const int *perm)
{
	cfrt_view r = v;
	for (int i = 0; i < v.nd; i++) {
		r.dim[i] = v.dim[perm[i]];
		r.stride[i] = v.stride[perm[i]];
	}
	return r;
}

/* [..., S, H*Dh] seen as its heads [..., H, S, Dh] (a split of the last
 * dim, then its first part swapped with S): head split is a cfrt_copy from
 * it into the heads, head merge one into it. Requires 2 <= nd < MAX and
 * heads dividing the last dim. */
static inline cfrt_view cfrt_view_heads(cfrt_view v, int64_t heads)
{
	int perm[CFRT_MAX_DIMS];

	v = cfrt_view_split(v, v.nd - 1, heads, v.dim[v.nd - 1] / heads);
	for (int d = 0; d < v.nd; d++)
		perm[d] = d;
	perm[v.nd - 3] = v.nd - 2;
	perm[v.nd - 2] = v.nd - 3;
	return cfrt_view_permute(v, perm);
}

/* v as nd dims (cfrt_dims_fold): attention's operands as 4, its
 * log-sum-exp as 3. */
static inline cfrt_view cfrt_view_fold(cfrt_view v, int nd)
{
	v.nd = cfrt_dims_fold(v.nd, v.dim, v.stride, nd);
	return v;
}

/* Number of elements of v. */
static inline int64_t cfrt_view_numel(const cfrt_view *v)
{
	int64_t n = 1;
	for (int d = 0; d < v->nd; d++)
		n *= v->dim[d];
	return n;
}

/* ------------------------------------------------------------------------
 * Deterministic test data: a counter-based hash (splitmix64) of the seed and
 * the element's row-major index in the global tensor. Every backend and the
 * serial reference produce the same bits, whatever the sharding.
 * ------------------------------------------------------------------------ */
static inline uint64_t cfrt_hash64(uint64_t seed, uint64_t index)
{
	uint64_t z = seed * 0xD1B54A32D192ED03u + (index + 1) * 0x9E3779B97F4A7C15u;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
	return z ^ (z >> 31);
}

/* The value in [-1, 1) of global element `index` for seed: a multiple of
 * 2^-23 (exact in every float type with a 24-bit significand) for F32, of
 * 2^-52 for F64. */
static inline double cfrt_uniform(uint64_t seed, uint64_t index, cfrt_dtype t)
{
	uint64_t h = cfrt_hash64(seed, index);
	if (t == CFRT_F64)
		return (double)(h >> 11) / 4503599627370496.0 - 1.0; /* 2^52 */
	return (double)(h >> 40) / 8388608.0 - 1.0;              /* 2^23 */
}

/* ------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------ */

/* Creates the context of model `model_name` on communicator comm, which may
 * be any communicator (often a sub-communicator from MPI_Comm_split). MPI
 * must be initialised. Collective over comm. The context works on its own
 * duplicate of comm, with MPI_ERRORS_RETURN. Fails with CFRT_ESIZE when comm
 * does not have expected_size ranks (the group size the model was compiled
 * for); then *ctx is NULL and cfrt_last_error(NULL) says which sizes.
 * *ctx holding a live context already (cfrt_init twice on one pointer)
 * fails with CFRT_EINVAL and leaves it as it was: finalize it first. */
int cfrt_init(cfrt_ctx **ctx, MPI_Comm comm, int expected_size,
              const char *model_name);

/* SEVERAL GROUPS. A model may name several groups (group tp = 2; group
 * dp = 4;). Its job is a grid with one axis per group, in the order the
 * model declares them, the first varying fastest: the rank of comm is
 *     w = c[0] + sizes[0] * (c[1] + sizes[1] * (c[2] + ...)),
 * and c[g] is the rank in group g. So with tp = 2 and dp = 4 on 8 ranks,
 * ranks {0, 1}, {2, 3}, ... are the tp groups and {0, 2, 4, 6} and
 * {1, 3, 5, 7} the dp groups. A collective over group g runs in every
 * copy of g at once. cfrt_init_groups makes such a context (comm must have
 * the product of sizes ranks; at most CFRT_MAX_GROUPS groups); cfrt_init
 * is the case of one group. Group 0 is current after init. cfrt_use_group
 * makes group g current: cfrt_rank, cfrt_size, peers of transfers and the
 * collectives are then those of group g (transfers already started keep
 * their group); not inside a transfer group. cfrt_group_rank is the rank
 * in group g (c[g] above).
 * cfrt_barrier is over the whole job. The CUDA backend makes one NCCL
 * communicator per group (split from one over the job); its copy-engine
 * transfers (CFRT_TRANSFER=ce) serve contexts of one group only
 * (CFRT_ENOTSUP). */
#define CFRT_MAX_GROUPS 8
int cfrt_init_groups(cfrt_ctx **ctx, MPI_Comm comm, int ngroups,
                     const int *sizes, const char *model_name);
int cfrt_use_group(cfrt_ctx *ctx, int g);
int cfrt_group_rank(const cfrt_ctx *ctx, int g);
/* CFRT_OK when ctx was made for ngroups groups of these sizes, else
 * CFRT_ESIZE naming both layouts (generated code checks its context). */
int cfrt_check_groups(cfrt_ctx *ctx, int ngroups, const int *sizes);

/* THE APPLICATION'S STREAM AND COMMUNICATOR. cfrt_init_opts is
 * cfrt_init_groups with options: a context made on the CUDA stream and the
 * NCCL communicator an application already holds (PyTorch: the current
 * stream, its process group's communicator), instead of its own. The
 * handles are void * so that this header needs no CUDA header: stream is
 * a cudaStream_t (CFRT_OPT_STREAM; NULL is the legacy default stream),
 * nccl_comm an ncclComm_t (CFRT_OPT_NCCL_COMM). opts NULL or flags 0:
 * cfrt_init_groups. The context never destroys them; they must outlive it.
 *  - Stream: compute calls are enqueued on it, in program order with the
 *    application's own work there, on its device. Transfers go on the
 *    context's side streams: each starts after the work enqueued on the
 *    stream before its start (an event the side stream waits on), and its
 *    cfrt_wait makes the stream wait for it. Generated code waits on every
 *    transfer it starts, so a generated call leaves the stream ordered
 *    after all of its work, with no host synchronisation: the
 *    application may enqueue work that writes an input just before the
 *    call and reads an output right after it. cfrt_wtime, cfrt_sync,
 *    cfrt_upload, cfrt_download (and CFRT_GEMM=tune's first GEMM of a
 *    shape) synchronise the stream; cfrt_finalize the device.
 *    Copy-engine transfers (CFRT_TRANSFER=ce) work the same way (their
 *    copies on the context's copy streams, ordered by events); as ever
 *    they need buffers from cfrt_alloc, and a sender's cfrt_wait blocks
 *    the host until the receiver has enqueued its copy.
 *  - NCCL communicator: over the ranks of comm, NCCL rank = rank in comm,
 *    on the device of the context (the stream's, when given); anything
 *    else fails with CFRT_EINVAL naming the mismatch. One group: the
 *    context's transfers use it; several groups: a communicator per group
 *    is split from it (ncclCommSplit, collective over comm). The
 *    application must issue its own NCCL calls on it in the same order on
 *    every rank, never while a generated call is between its first
 *    transfer and its return on another thread.
 *  - No MPI (CUDA backend): comm may be MPI_COMM_NULL, and MPI need not be
 *    initialised (PyTorch under torchrun). The job's ranks are then those
 *    of the NCCL communicator (CFRT_OPT_NCCL_COMM: rank and size from it),
 *    or this process alone without one. Such a context has no
 *    cfrt_barrier, CFRT_TRACE or CFRT_TRANSFER=ce (CFRT_ENOTSUP); its
 *    device is the stream's, else CFRT_DEVICE, else the launcher's local
 *    rank (LOCAL_RANK under torchrun), else 0; cfrt_fail ends the process
 *    (the launcher ends the rest).
 * The MPI backend has neither: it fails with CFRT_ENOTSUP when a flag is
 * set or comm is MPI_COMM_NULL. Unknown flags fail with CFRT_EINVAL. */
#define CFRT_OPT_STREAM 1u
#define CFRT_OPT_NCCL_COMM 2u
/* Every backend: errors, the context's error mode (see "Error modes");
 * timeout, the watchdog's seconds (> 0; 0 turns it off), over
 * CFRT_TIMEOUT. */
#define CFRT_OPT_ERRORS 4u
#define CFRT_OPT_TIMEOUT 8u
typedef struct cfrt_opts {
	unsigned flags;  /* CFRT_OPT_* */
	void *stream;    /* cudaStream_t */
	void *nccl_comm; /* ncclComm_t */
	int errors;      /* CFRT_ERRORS_ABORT or CFRT_ERRORS_RETURN */
	double timeout;  /* seconds */
} cfrt_opts;
int cfrt_init_opts(cfrt_ctx **ctx, MPI_Comm comm, int ngroups,
                   const int *sizes, const char *model_name,
                   const cfrt_opts *opts);

/* Waits for every outstanding transfer, writes the trace (CFRT_TRACE), frees
 * the context and everything it holds. Collective. ctx may be NULL. The
 * context is gone even on failure: cfrt_last_error(NULL) has the message,
 * and CFRT_TRY(NULL, cfrt_finalize(ctx)) reports it.
 * A context that failed (error mode return) writes no trace and does not
 * wait for its transfers: its receives are cancelled, and every rank of
 * the job takes the messages sent to it that no receive took (the MPI
 * backend: a barrier and an all-to-all of counts on every cfrt_finalize),
 * so that no message of it is left in flight when the next context is
 * made. Until then such a send reads its buffer: after a failure, free
 * the buffers (cfrt_free) after cfrt_finalize, which the MPI backend
 * allows. With the watchdog set, cfrt_finalize waits that long for the
 * other ranks, twice: a rank may spend one in a wait before it fails and
 * comes. */
int cfrt_finalize(cfrt_ctx *ctx);

/* Rank of this process in the context's current group, and its size (with
 * one group: in the context's communicator). */
int cfrt_rank(const cfrt_ctx *ctx);
int cfrt_size(const cfrt_ctx *ctx);

/* Name of the backend ("mpi+openblas") and of the progress mode in use
 * ("panel", "thread", "none"; the GPU backend says "device"). */
const char *cfrt_backend_name(void);
const char *cfrt_progress_name(const cfrt_ctx *ctx);

/* Seconds since an arbitrary origin, after every compute call issued so far
 * has finished (GPU: synchronises the compute queue). For benchmarks. */
double cfrt_wtime(cfrt_ctx *ctx);

/* Blocks until every rank of the context (of the whole job, whatever the
 * current group) has called it. For benchmarks. */
int cfrt_barrier(cfrt_ctx *ctx);

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/* Records where generated code is: the op (a collective or fused region
 * name, copied) and the step index. Shown by cfrt_fail and in trace names.
 * Clears what cfrt_what recorded. */
void cfrt_where(cfrt_ctx *ctx, const char *op, int step);

/* Records what the next calls work on, for the trace (TRACING): what
 * names the tensors ("t1 = matmul(xa, w1)", "send xa"; copied, up to 63
 * characters), slice the index of the slice they touch (-1: none).
 * Generated code calls it before each compute call and transfer. */
void cfrt_what(cfrt_ctx *ctx, const char *what, int slice);

/* A short static description of a status ("invalid argument"). */
const char *cfrt_strerror(int status);

/* The message of the last failed call on ctx (names the call and what was
 * wrong), or "" when none failed. ctx = NULL: the last failed cfrt_init. */
const char *cfrt_last_error(const cfrt_ctx *ctx);

/* Prints "cfrt: rank R: op OP step S: MESSAGE" to stderr (R: the rank in
 * the context's whole communicator, whatever group is current; MESSAGE from
 * cfrt_last_error, or cfrt_strerror(status)) and ends the whole job with
 * MPI_Abort(MPI_COMM_WORLD, -status) (1 when status is not negative).
 * ctx may be NULL (a failed cfrt_init). Does not return. */
CFRT_NORETURN void cfrt_fail(cfrt_ctx *ctx, int status);

/* Runs call (an int-returning cfrt function); aborts the job on failure. */
#define CFRT_TRY(ctx, call)                                          \
	do {                                                         \
		int cfrt_try_status_ = (call);                       \
		if (cfrt_try_status_ != CFRT_OK)                     \
			cfrt_fail((ctx), cfrt_try_status_);          \
	} while (0)

/* ------------------------------------------------------------------------
 * Error modes, the watchdog and checks (for applications that call
 * generated code as a library; docs/RUNTIME.md shows the use).
 *
 * ERROR MODE. CFRT_ERRORS_ABORT (the default): a failure of a generated
 * entry point (NAME_forward, NAME_backward, NAME_ref_*) ends the job as
 * cfrt_fail does. CFRT_ERRORS_RETURN: the entry point returns the status;
 * the context is marked failed, so that every later entry point, transfer,
 * wait, barrier and collective on it returns CFRT_EFAILED at once (the MPI
 * backend's compute calls, local to the rank, still compute; the CUDA
 * backend's return CFRT_EFAILED too), and its other ranks are told:
 * each posts at cfrt_init a receive for such a notice, and every wait of
 * theirs also ends on it, failing with CFRT_EPEER and the first failure's
 * message. cfrt_last_error then reads "rank R: op OP step S: CALL: what
 * went wrong". The application then calls cfrt_finalize (which abandons the
 * transfers in flight instead of waiting for them) and may make a new
 * context. Every rank of a context should use the same mode.
 * A context takes its mode from cfrt_opts (CFRT_OPT_ERRORS), else from the
 * process default: cfrt_set_errors, else the environment variable
 * CFRT_ERRORS=abort|return read at the first use. A call on no live
 * context (NULL: before cfrt_init or after a failed one; or one that
 * cfrt_finalize freed) follows the mode that context had, else the
 * process default; its message is in cfrt_last_error(NULL).
 *
 * WATCHDOG. With CFRT_TIMEOUT=seconds in the environment at cfrt_init (or
 * cfrt_opts' timeout, which wins), a wait (cfrt_wait, cfrt_waitall,
 * cfrt_sync, a blocking collective, cfrt_barrier, the generated code's
 * waits) that has not completed after that many seconds fails with
 * CFRT_ETIMEOUT naming what it waits for: "a receive from rank 1 of group
 * 0 (job rank 1)" or "an all_reduce over the 4 ranks of group 0", the
 * message prefixed by rank, op and step as above. It then fails like any
 * other call under the error mode. Unset or 0: waits are unbounded, and
 * cost what they did (MPI_Wait; error mode return alone: MPI_Waitany on
 * the transfer and the notice). The MPI backend bounds every wait; the
 * CUDA backend bounds its host waits (cfrt_barrier, the copy-engine
 * handshakes' MPI messages) and not the NCCL kernels it enqueues.
 *
 * FINITE CHECK. With CFRT_CHECK=finite in the environment at cfrt_init,
 * every compute call then checks the values it wrote, and the first NaN or
 * Inf fails with CFRT_ENONFINITE naming the call, the tensors cfrt_what
 * named ("t1 = matmul(xa, w1)", slice), op and step: the first op that
 * made one on this rank. Off (the default), no element is looked at. Both
 * backends check every compute call but cfrt_gemm on raw pointers (the
 * element counted row-major over the view written). The CUDA backend runs
 * a check kernel on each written view after the call's work and waits for
 * it (a host synchronisation per compute call: for finding a NaN, not for
 * timing; not under CUDA graph capture); it checks bf16 and f16 too.
 * ------------------------------------------------------------------------ */
#define CFRT_ERRORS_ABORT 0
#define CFRT_ERRORS_RETURN 1

/* Sets the process default error mode (contexts made later without
 * CFRT_OPT_ERRORS, calls on no live context); returns the previous one,
 * or CFRT_EINVAL for another mode. */
int cfrt_set_errors(int mode);

/* CFRT_OK when ctx is a live context (made by cfrt_init, not finalized)
 * that has not failed; CFRT_EINVAL for NULL or a context cfrt_finalize
 * freed (message in cfrt_last_error(NULL), naming entry, the caller);
 * CFRT_EFAILED for a failed one. Reads no memory of a dead context. */
int cfrt_check_ctx(const cfrt_ctx *ctx, const char *entry);

/* The failure status of the context: CFRT_OK while it has not failed, else
 * the status of its first failure. */
int cfrt_failure(const cfrt_ctx *ctx);

/* A failed call of generated code (status < 0) under the error mode of
 * ctx (or of no live context): CFRT_ERRORS_ABORT: cfrt_fail(ctx, status),
 * no return; CFRT_ERRORS_RETURN: marks the context failed, tells the other
 * ranks, puts "rank R: op OP step S: " before its message and returns
 * status. */
int cfrt_raise(cfrt_ctx *ctx, int status);

/* Runs call in a function returning int: on failure returns
 * cfrt_raise(ctx, status) (generated code). */
#define CFRT_PROPAGATE(ctx, call)                                    \
	do {                                                         \
		int cfrt_prop_status_ = (call);                      \
		if (cfrt_prop_status_ != CFRT_OK)                    \
			return cfrt_raise((ctx), cfrt_prop_status_); \
	} while (0)

/* ------------------------------------------------------------------------
 * Memory: buffers live where compute runs (device memory on GPUs, 64-byte
 * aligned host memory here). Host pointers are only for upload/download.
 * ------------------------------------------------------------------------ */

/* *ptr = a new buffer of bytes bytes, contents zero (NULL when bytes = 0).
 * The context records its size: cfrt_check_arg checks sizes in it
 * exactly. */
int cfrt_alloc(cfrt_ctx *ctx, void **ptr, size_t bytes);

/* Frees a buffer from cfrt_alloc; NULL is allowed. */
int cfrt_free(cfrt_ctx *ctx, void *ptr);

/* The bytes of this context's cfrt_alloc buffers live now, and the most
 * live at once (the allocation high-water mark) since the context began
 * or cfrt_mem_reset_peak last set it to what is live; 0 for a context
 * that is not live. Buffers of cfrt_register and the backend's own
 * scratch (cfrt_attention's scores) are not counted. */
size_t cfrt_mem_live(cfrt_ctx *ctx);
size_t cfrt_mem_peak(cfrt_ctx *ctx);
void cfrt_mem_reset_peak(cfrt_ctx *ctx);

/* Copies bytes from host memory into a buffer, after earlier compute. */
int cfrt_upload(cfrt_ctx *ctx, void *dst, const void *host_src, size_t bytes);

/* Copies bytes from a buffer into host memory; returns when host_dst holds
 * them (after every earlier compute call). */
int cfrt_download(cfrt_ctx *ctx, void *host_dst, const void *src,
                  size_t bytes);

/* Sets bytes bytes of a buffer to zero (compute queue). */
int cfrt_memset_zero(cfrt_ctx *ctx, void *dst, size_t bytes);

/* Checks a buffer handed to generated code before it is used: what (a
 * tensor as the spec names it, "weight w2") is not a null pointer when
 * bytes > 0; when it lies in a buffer of cfrt_alloc or cfrt_register,
 * that buffer has bytes bytes from p (exact: "input x needs 16384 bytes,
 * but its cfrt_alloc buffer has 8192 from there"); on the GPU backend it
 * points at device memory. Other host memory (malloc, a NumPy array) is
 * checked as far as it can be: its first and last byte must be mapped
 * (mincore), which catches a wild pointer and a buffer whose missing part
 * would lie in unmapped memory, but not one followed by other memory of
 * the process: register such buffers for the exact check. Generated entry
 * points check every tensor, the saved buffer and the workspace this way
 * on entry, so that a wrong argument is reported by its name. */
int cfrt_check_arg(cfrt_ctx *ctx, const void *p, size_t bytes, const char *what);

/* A host pointer handed to generated code (a struct of buffers, "the
 * weights (mlp_weights *)") is not NULL. */
int cfrt_check_ptr(cfrt_ctx *ctx, const void *p, const char *what);

/* Records [p, p + bytes) as a buffer of the application's own (malloc,
 * NumPy, PyTorch) so that cfrt_check_arg checks sizes in it exactly, as in
 * buffers of cfrt_alloc; cfrt_unregister forgets it (EINVAL: not
 * registered). Registrations end with the context. */
int cfrt_register(cfrt_ctx *ctx, const void *p, size_t bytes);
int cfrt_unregister(cfrt_ctx *ctx, const void *p);

/* ------------------------------------------------------------------------
 * Compute (all on the compute queue). Views of one call have one dtype.
 * dst may be the same view as a source (in place); other overlaps of dst
 * with a source are undefined. Elementwise ops, norms, softmax and scan
 * compute in double on the MPI backend and round once to the view's type.
 * ------------------------------------------------------------------------ */

/* dst = src elementwise; same dims. This is pack/unpack for transfers and
 * head split/merge (permuted views). */
int cfrt_copy(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);

/* Batched strided GEMM, row-major, the semantics of
 * cublasGemmStridedBatchedEx: for b in [0, batch)
 *   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],
 * op(A[b]) is m x k, op(B[b]) k x n, C[b] m x n; X[b] starts stride_x
 * elements after X[b-1] (stride 0 for A or B: one matrix for every batch;
 * stride_c must not be 0 when batch > 1). A is stored m x k with lda >= k
 * (NOTRANS) or k x m with lda >= m (TRANS); likewise B; ldc >= n.
 * beta = 0 ignores the old C (even NaN); beta = 1 accumulates, as FuseRS
 * does into a received partial sum. C must not overlap A or B. */
int cfrt_gemm(cfrt_ctx *ctx, cfrt_dtype t, cfrt_trans transa,
              cfrt_trans transb, int64_t m, int64_t n, int64_t k,
              double alpha, const void *a, int64_t lda, int64_t stride_a,
              const void *b, int64_t ldb, int64_t stride_b, double beta,
              void *c, int64_t ldc, int64_t stride_c, int64_t batch);

/* c = alpha * a @ b + beta * c on views: the last two dims are the matrices
 * ([..., M, K] @ [..., K, N] -> [..., M, N]); the leading dims are batch
 * dims, and those of a and b broadcast against c's (right-aligned, missing
 * or extent 1). Each matrix of a and b needs a unit stride in one of its two
 * dims (a permuted view is a transpose); c needs one in its last dim. */
int cfrt_matmul(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                const cfrt_view *b, double alpha, double beta);

/* c = alpha * a @ b + d, d of c's dims (a residual added to a projection,
 * two gradients summed): cfrt_matmul's views, and d's. d may be c itself
 * (the sum in place); else it must share no byte with c. The CUDA backend
 * reads d as cuBLASLt's C and writes c as its D, for 16-bit types where d
 * is laid out as c: one pass over the output, not a GEMM and an add. */
int cfrt_matmul_add(cfrt_ctx *ctx, const cfrt_view *c, const cfrt_view *a,
                    const cfrt_view *b, const cfrt_view *d, double alpha);

/* dst = a + b, dst = a - b, dst = b - a (rsub) and dst = a * b
 * elementwise. a has dst's dims; b broadcasts against them (right-aligned
 * dims, each equal or 1, missing leading dims repeat): a bias [D] added
 * to [B,S,D], a residual of the same shape. */
int cfrt_add(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
             const cfrt_view *b);
int cfrt_sub(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
             const cfrt_view *b);
int cfrt_rsub(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
              const cfrt_view *b);
int cfrt_mul(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
             const cfrt_view *b);

/* dst = s * a; s = 0 writes zeros whatever a holds (NaN and Inf too): the
 * generated code zeroes accumulators in uninitialised workspaces so. */
int cfrt_scale(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
               double s);

/* Activations, dst = f(src):
 * gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
 * silu: x / (1 + exp(-x));  relu: x > 0 ? x : 0. */
int cfrt_gelu(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);
int cfrt_silu(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);
int cfrt_relu(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);
/* sigmoid: 1 / (1 + exp(-x));  exp: e^x. */
int cfrt_sigmoid(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);
int cfrt_exp(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);

/* Their backward (the vector-Jacobian products of a backward pass):
 * dst = dy * f'(x) elementwise, f' the derivative of the activation
 * above, of the same approximation (gelu: of the tanh form,
 * 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) with
 * t = tanh(sqrt(2/pi) (x + 0.044715 x^3)); silu: s (1 + x (1 - s)) with
 * s = 1 / (1 + exp(-x)); relu: 1 where x > 0, else 0). dy has dst's
 * dims; x broadcasts against them like b of cfrt_mul. */
int cfrt_gelu_grad(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                   const cfrt_view *x);
int cfrt_silu_grad(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                   const cfrt_view *x);
int cfrt_relu_grad(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                   const cfrt_view *x);
/* dst = dy * y * (1 - y), y = sigmoid(x) the forward's result (not x). */
int cfrt_sigmoid_grad(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                      const cfrt_view *y);

/* SwiGLU, the gated unit of Llama's MLP, fused: dst = silu(a) * b in one
 * pass (silu as above), and its backward, da = dy * b * silu'(a) and
 * db = dy * silu(a), each one pass over its operands (the backward reads
 * a and b, not silu(a)). Every view has dst's dims and dtype: no
 * broadcast. */
int cfrt_swiglu(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *a,
                const cfrt_view *b);
int cfrt_swiglu_da(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                   const cfrt_view *a, const cfrt_view *b);
int cfrt_swiglu_db(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *dy,
                   const cfrt_view *a);

/* Layer norm over the last dim (length D): dst = (x - mean) /
 * sqrt(var + eps) * gamma + beta, var the biased variance. gamma and beta
 * are 1-d views of D elements, or NULL (1 and 0). */
int cfrt_layernorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                   const cfrt_view *gamma, const cfrt_view *beta, double eps);

/* RMS norm over the last dim: dst = x / sqrt(mean(x^2) + eps) * gamma;
 * gamma a 1-d view of D elements or NULL (1). */
int cfrt_rmsnorm(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
                 const cfrt_view *gamma, double eps);

/* Rotary position embedding (RoPE, the rotate-half form of GPT-NeoX and
 * Llama in Hugging Face's layout) over the last dim, of even length Dh:
 * for the row at position p = pos0 + i (i its index along dim `dim`, the
 * positions: nd - 2 for [..., S, Dh], 1 for [B, S, H, Dh]; 0 <= dim <
 * nd - 1) and j < Dh / 2, with a = p * base^(-2j / Dh),
 *   dst[j]          = x[j] cos a - x[j + Dh/2] sin a,
 *   dst[j + Dh/2]   = x[j + Dh/2] cos a + x[j] sin a.
 * inverse != 0 turns by -a instead: the backward of the same rope (the
 * turn is orthogonal). nd >= 2; dst may be src. pos0 is the global
 * position of the first row: a slice of the rows (a shard of the
 * sequence) equals the same rows of the whole tensor's rope. */
int cfrt_rope(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double base, int64_t pos0, int inverse);

/* Softmax over the last dim, stable: exp(x - max) / sum. */
int cfrt_softmax(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);

/* Scaled dot-product attention. q [B,H,Sq,Dh], k and v [B,Hk,Sk,Dh], out
 * [B,H,Sq,Dh], each with unit stride in its last dim (head split views of
 * [B,S,H*Dh] work as they are); Hk divides H, and query head h attends
 * with key/value head h / (H / Hk) (grouped-query attention; Hk = 1:
 * multi-query):
 *   out = softmax(q k^T / sqrt(Dh) + mask) v.
 * causal != 0 masks key j for query i when j > q_offset + i; q_offset is the
 * global position of q's first row, so attention of a slice of the queries
 * against the whole K/V equals the same rows of whole attention (query
 * split). A mask aligned bottom-right (Sq < Sk queries that are the last
 * of the Sk positions: chunked prefill, a KV cache; cfc's causal) is
 * q_offset = Sk - Sq plus the first row's index among the Sq. Where a backend materializes the scores (the MPI backend; the
 * CUDA backend's f32 path and CFRT_ATTN=gemm) they use a workspace of
 * Sq*Sk elements that the context owns and grows on demand (freed at
 * cfrt_finalize); the CUDA backend's fused kernel needs none, cuDNN's
 * (CFRT_ATTN=cudnn) what its plan asks for. */
int cfrt_attention(cfrt_ctx *ctx, const cfrt_view *out, const cfrt_view *q,
                   const cfrt_view *k, const cfrt_view *v, int causal,
                   int64_t q_offset);

/* cfrt_attention that also writes, per query row, the log-sum-exp of its
 * scaled, masked scores (the statistic a flash-attention forward keeps
 * for its backward):
 *   lse[b,h,i] = log(sum_j exp(s_ij)), s = q k^T / sqrt(Dh),
 * natural log, over the keys j that row i sees (causal: j <= q_offset +
 * i; every row sees key 0, so lse is finite). lse is a 3-d view
 * [B,H,Sq] (the first three dims of q), any strides, of type CFRT_F32
 * for F32, BF16 and F16 views and CFRT_F64 for F64 views (LSE type
 * below); it must not overlap the other views. Row i of a call with
 * q_offset o is row o + i of the whole call, as out's rows are. lse NULL:
 * cfrt_attention. */
#define CFRT_LSE_TYPE(t) ((t) == CFRT_F64 ? CFRT_F64 : CFRT_F32)
int cfrt_attention_lse(cfrt_ctx *ctx, const cfrt_view *out,
                       const cfrt_view *lse, const cfrt_view *q,
                       const cfrt_view *k, const cfrt_view *v, int causal,
                       int64_t q_offset);

/* Linear recurrence along dimension dim: h_t = decay * h_{t-1} + x_t with
 * h_{-1} = 0, for every line of the other dims (a Mamba-like sequence scan:
 * it needs the whole sequence, it is not slice-local). */
int cfrt_scan(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src,
              int dim, double decay);

/* ------------------------------------------------------------------------
 * Backward (the vector-Jacobian products of a backward pass). Each writes
 * its result (never accumulates into it); shapes and dtypes as in the
 * forward call it differentiates; views as above: dx may be the same view
 * as dy or as x (y for softmax), in place. Norms, softmax, the sums and
 * the scan compute in double on the MPI backend and in f32 on the CUDA
 * backend (in double for F64 views, and the scan always, as its forward
 * does), and round once.
 * ------------------------------------------------------------------------ */

/* dx of y = layernorm(x; gamma, beta, eps) over the last dim (length D),
 * from dy: with xhat = (x - mean) * r, r = 1 / sqrt(var + eps) and
 * g = dy * gamma (dy when gamma is NULL),
 *   dx = r * (g - mean(g) - xhat * mean(g * xhat)), means over the row.
 * The gradients of gamma and beta are sums over the rows (cfrt_sum_leading
 * of dy * xhat and of dy), not this call's. */
int cfrt_layernorm_grad(cfrt_ctx *ctx, const cfrt_view *dx,
                        const cfrt_view *dy, const cfrt_view *x,
                        const cfrt_view *gamma, double eps);

/* dx of y = rmsnorm(x; gamma, eps): with r = 1 / sqrt(mean(x^2) + eps) and
 * g = dy * gamma (dy when gamma is NULL),
 *   dx = r * g - x * r^3 * mean(g * x). */
int cfrt_rmsnorm_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *x, const cfrt_view *gamma, double eps);

/* cfrt_rmsnorm_grad's dx, and in the same pass over dy and x the rows of
 * gamma's gradient: rows = dy * xhat (xhat = x * r, what cfrt_rmsnorm
 * makes without gamma), whose cfrt_sum_leading is that gradient. rows has
 * dx's dims and type and shares no memory with dx, dy, x or gamma (dx may
 * be dy or x, as for cfrt_rmsnorm_grad). The same values as the three
 * calls cfrt_rmsnorm_grad, cfrt_rmsnorm (xhat) and cfrt_mul (dy * xhat),
 * with one rounding of each row element instead of two. */
int cfrt_rmsnorm_grad_rows(cfrt_ctx *ctx, const cfrt_view *dx,
                           const cfrt_view *rows, const cfrt_view *dy,
                           const cfrt_view *x, const cfrt_view *gamma,
                           double eps);

/* dx of y = softmax(x) over the last dim, from dy and y (the forward's
 * result): dx = y * (dy - sum(dy * y)), the sum over the row. */
int cfrt_softmax_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                      const cfrt_view *y);

/* dst = src summed over its leading dims: dst has the last dst->nd dims of
 * src (1 <= dst->nd <= src->nd), the gradient of an operand that an add or
 * mul broadcast (a bias [D] under [B,S,D]); dst->nd == src->nd is a copy. */
int cfrt_sum_leading(cfrt_ctx *ctx, const cfrt_view *dst, const cfrt_view *src);

/* dx of y = scan(x, dim, decay): the recurrence run backwards,
 * dx_t = dy_t + decay * dx_{t+1}, dx_{T} = 0, along dim. */
int cfrt_scan_grad(cfrt_ctx *ctx, const cfrt_view *dx, const cfrt_view *dy,
                   int dim, double decay);

/* The backward of cfrt_attention(out, q, k, v, causal, q_offset), with the
 * same q, k, v, causal and q_offset, from dout (out's gradient) and out
 * (the forward's result): with P = softmax(q k^T / sqrt(Dh) + mask)
 * recomputed from q and k (the row's log-sum-exp first, the flash way),
 * dP = dout v^T and delta = rowsum(dout * out),
 *   dS = P * (dP - delta),
 *   dq = dS k / sqrt(Dh), dk = dS^T q / sqrt(Dh), dv = P^T dout.
 * dq [B,H,Sq,Dh]; dk and dv [B,Hk,Sk,Dh], each key/value head's the sum
 * over the query heads it serves: the contribution of this call's
 * queries only (a query slice's dk and dv are partial sums over the
 * slices: query-split attention reduces them). Any of dq, dk, dv may be
 * NULL: not computed. Workspace as cfrt_attention's (the MPI backend uses
 * two score-sized blocks; the CUDA backend's fused kernels keep two f32
 * statistics per query row there, and with dq an f32 sum of dq; cuDNN's
 * an f32 sum of dq, one f32 per query row, and room for the gradients
 * passed as NULL). */
int cfrt_attention_grad(cfrt_ctx *ctx, const cfrt_view *dq,
                        const cfrt_view *dk, const cfrt_view *dv,
                        const cfrt_view *q, const cfrt_view *k,
                        const cfrt_view *v, const cfrt_view *out,
                        const cfrt_view *dout, int causal, int64_t q_offset);

/* cfrt_attention_grad from the log-sum-exp that cfrt_attention_lse wrote
 * for the same q, k, causal and q_offset (the flash-attention way): P is
 * rebuilt as exp(q k^T / sqrt(Dh) - lse) over the keys each row sees,
 * with no pass over the scores for their max and sum first. lse as
 * cfrt_attention_lse takes it; NULL: cfrt_attention_grad, which
 * recomputes it. The results agree with the recomputing call to within
 * the rounding of lse to its type. */
int cfrt_attention_grad_lse(cfrt_ctx *ctx, const cfrt_view *dq,
                            const cfrt_view *dk, const cfrt_view *dv,
                            const cfrt_view *q, const cfrt_view *k,
                            const cfrt_view *v, const cfrt_view *out,
                            const cfrt_view *dout, const cfrt_view *lse,
                            int causal, int64_t q_offset);

/* Fills dst, the window at offsets[0..nd) of a row-major global tensor of
 * dims global_dims[0..nd) (nd = dst->nd), with element e = cfrt_uniform(seed,
 * row-major index of e in the global tensor). A rank filling its shard gets
 * exactly the values of the same elements of the whole tensor. */
int cfrt_fill_global(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed,
                     const int64_t *global_dims, const int64_t *offsets);

/* cfrt_fill_global with dst as the whole tensor (offsets 0). */
int cfrt_fill_uniform(cfrt_ctx *ctx, const cfrt_view *dst, uint64_t seed);

/* ------------------------------------------------------------------------
 * Transfers (communication queue). Buffers are contiguous; count is in
 * elements of t; peers are ranks of the context's communicator; 0 <= tag
 * < 32768. See the execution model above for the buffer rules.
 * ------------------------------------------------------------------------ */

/* Starts sending count elements of buf to peer. */
int cfrt_isend(cfrt_ctx *ctx, const void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req);

/* Starts receiving count elements from peer into buf. */
int cfrt_irecv(cfrt_ctx *ctx, void *buf, int64_t count, cfrt_dtype t,
               int peer, int tag, cfrt_req *req);

/* Opens and closes a group of transfers issued together; groups do not
 * nest, and no wait may happen inside one. */
int cfrt_group_begin(cfrt_ctx *ctx);
int cfrt_group_end(cfrt_ctx *ctx);

/* Waits for the transfer and orders it before later compute; *req becomes
 * the null request. Waiting on a null or already completed request is a
 * no-op. */
int cfrt_wait(cfrt_ctx *ctx, cfrt_req *req);

/* cfrt_wait on reqs[0..n). */
int cfrt_waitall(cfrt_ctx *ctx, int n, cfrt_req *reqs);

/* Waits for every outstanding transfer and all compute. Handles of the
 * transfers it completed stay valid: waiting on them is a no-op. */
int cfrt_sync(cfrt_ctx *ctx);

/* Collectives over all ranks of the context, on contiguous buffers, sum as
 * the reduction. Blocking forms return when recv holds the result; the i-
 * forms start the collective like a transfer and fill *req.
 *  all_gather:     send count, recv size*count (rank r's block at r*count);
 *  reduce_scatter: send size*count, recv count (block r of the sum);
 *  all_reduce:     send and recv count; send == recv is in place;
 *  all_to_all:     send and recv size*count; block j of send goes to rank j,
 *                  block j of recv comes from rank j.
 * Except in-place all_reduce, send and recv must not overlap. */
int cfrt_all_gather(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t);
int cfrt_iall_gather(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req);
int cfrt_reduce_scatter(cfrt_ctx *ctx, const void *send, void *recv,
                        int64_t count, cfrt_dtype t);
int cfrt_ireduce_scatter(cfrt_ctx *ctx, const void *send, void *recv,
                         int64_t count, cfrt_dtype t, cfrt_req *req);
int cfrt_all_reduce(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t);
int cfrt_iall_reduce(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req);
int cfrt_all_to_all(cfrt_ctx *ctx, const void *send, void *recv,
                    int64_t count, cfrt_dtype t);
int cfrt_iall_to_all(cfrt_ctx *ctx, const void *send, void *recv,
                     int64_t count, cfrt_dtype t, cfrt_req *req);

#ifdef __cplusplus
}
#endif

#endif /* CFRT_DIMS_ONLY */
#endif /* CFRT_H */
