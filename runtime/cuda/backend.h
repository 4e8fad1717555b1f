/* backend.h: private to the CUDA + NCCL + cuBLAS backend of cfrt.
 *
 * Layers, top down. A file calls only files of lower layers, never one of
 * its own layer or above; a module's state is its struct in cfrt_ctx,
 * which only its file writes (files above may read it) and only its own
 * fini frees:
 *   4  ctx.c   the context's setup, drain and free (common.h's hooks):
 *              the settings, then each module's init from the bottom
 *              up; each module's fini from the top down
 *   3  ops.c   elementwise ops, norms, scan, fill, copy; the backward
 *              ops of norms, softmax, scan and broadcasting
 *      gemm.c  cuBLAS GEMM, matmul, attention and its backward
 *      xfer.c  the transfer table (ctx->xt), waits, groups, NCCL p2p and
 *              collectives (the communicator is xfer.c's)
 *   2  lt.c    cuBLASLt GEMMs, their algorithm tuned per shape (ctx->lt)
 *      dnn.c   attention through cuDNN's graph API, a plan per shape
 *              (ctx->dnn; without cuDNN at build time, never taken)
 *      ce.c    copy-engine transfers through CUDA IPC (ctx->ce), on the
 *              slots that xfer.c hands it (struct xfer's copy-engine
 *              fields are ce.c's); cfrti_enter, the entry of every
 *              compute and transfer call, which moves their handshakes
 *   1  dev.c   CUDA and cuBLAS errors, the device, its compute stream and
 *              libraries, streams for the layers above, memory (ctx->dev)
 *   0  trace.c the trace's spans timed by CUDA events on the streams
 *              its callers name (ctx->tr; CFRT_TRACE);
 *      kernels.cu, grad.cu, flash.cu and flash_bwd.cu (the device
 *              kernels, behind kern.h; kdev.cuh: what kernels.cu and
 *              grad.cu share; mma.cuh: what the two flash files share);
 *      runtime/common (common.h: errors, view and argument checks, the
 *      public transfer calls), which calls the backend only through the
 *      hooks of common.h, each defined by the file that owns its work.
 *
 * Queues: compute calls go on ctx->dev.cs (the application's stream under
 * CFRT_OPT_STREAM: cfrt.h), NCCL on ctx->xt.s (high
 * priority), copy-engine transfers from peer P on ctx->ce.s[P] (high
 * priority). A transfer starts after every compute call issued before it
 * (an event of cs that its stream waits on); cfrt_wait makes cs wait on
 * the transfer's completion event. The host never waits for the device
 * except in cfrt_wtime, cfrt_download, cfrt_upload, cfrt_sync and
 * cfrt_finalize (and, with CFRT_TRACE, once at cfrt_init), with CFRT_GEMM=tune, in the first GEMM of each
 * shape (it times the candidates on cs: every wait issued before it is
 * then a blocking one, which verified schedules allow), and, with
 * CFRT_CHECK=finite, at the end of every compute call (cfrti_dev_check). */
#ifndef CFRT_CUDA_BACKEND_H
#define CFRT_CUDA_BACKEND_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "cfrt.h"
#include "common/common.h"

/* How transfers move (CFRT_TRANSFER): NCCL, copy engines (point-to-point;
 * collectives still by NCCL), or not at all (benchmarks time a schedule's
 * compute alone; outputs are then wrong). */
enum xmode { XM_NCCL, XM_CE, XM_NONE };

/* How 16-bit GEMMs choose their algorithm (CFRT_GEMM; lt.c). */
enum gmode { GM_TUNE, GM_HEURISTIC, GM_CUBLAS };
typedef struct lt_plan lt_plan;

/* Messages of a copy-engine transfer, on the context's communicator. */
enum { CE_TAG_READY = 1, CE_TAG_DONE, CE_TAG_ACK };

/* Sender -> receiver at cfrt_isend: where the data is and the event after
 * which it is ready. */
typedef struct ce_ready {
	cudaIpcMemHandle_t mem;  /* of the allocation holding the data */
	cudaIpcEventHandle_t ev; /* the sender's ready event */
	uint64_t serial;         /* the allocation's serial: cache key */
	uint64_t offset;         /* of the data in the allocation */
	uint64_t bytes;
	uint64_t ptr; /* the data's address: used when sender == receiver */
	int32_t ev_id;
	int32_t pad;
} ce_ready;

/* Receiver -> sender once the copy is issued: the event after it. */
typedef struct ce_done {
	cudaIpcEventHandle_t ev;
	int32_t ev_id;
	int32_t pad;
} ce_done;

/* An interprocess event of this process. Invariant: an event is recorded
 * again only after every process that waits on it has called
 * cudaStreamWaitEvent on the previous record (busy until then), and its
 * entry is reused only when its MPI requests have completed. */
typedef struct ipc_ev {
	int id; /* index in ctx->ce.ev */
	int wait_ack; /* req[1] receives an ACK */
	cudaEvent_t e;
	cudaIpcEventHandle_t h;
	int busy;
	int own_wait; /* a receive's D: its own wait has not called
	               * cudaStreamWaitEvent on it yet */
	MPI_Request req[2]; /* the DONE sent and an ACK received; or the ACK
	                     * sent (req[0]) */
	ce_done done;       /* message buffers, alive while req runs */
	int32_t ack;
} ipc_ev;

/* A transfer slot, made and released by xfer.c, which writes every field
 * above the copy-engine state; ce.c writes that state. Invariant: state
 * X_FREE <=> no live handle refers to it with the current gen (gen grows
 * whenever the slot is released). */
enum xstate { X_FREE, X_QUEUED, X_ACTIVE };
typedef struct xfer {
	int id; /* index in ctx->xt.x */
	uint32_t gen;
	int state;    /* X_QUEUED: in an open group, not issued yet */
	xdesc d;
	cudaEvent_t done; /* slot-owned; NCCL: recorded after the transfer */
	cudaEvent_t ready; /* slot-owned; CE receive: cs before the irecv */
	int ce;           /* this transfer moves by copy engine */
	int span;         /* its span in the trace, or -1 */
	/* copy-engine state */
	int issued;     /* CE receive: copy enqueued */
	int ev_id;      /* CE send: ready event; CE receive: done event */
	struct xfer *next_fifo; /* CE receive: next receive from the same
	                         * peer (slots never move) */
	MPI_Request mreq[2];
	ce_ready ready_msg;
	ce_done done_msg;
} xfer;

/* An allocation from cfrt_alloc. */
typedef struct alloc_rec {
	char *base;
	size_t bytes;
	uint64_t serial;
	int has_handle;
	cudaIpcMemHandle_t h;
} alloc_rec;

/* A peer's memory or event opened in this process. */
typedef struct remote_mem {
	int peer;
	uint64_t serial;
	char *base;
} remote_mem;

/* The context's state: one struct per module, written only by it. */

/* trace.c: CUDA events of the trace's spans. */
typedef struct trace_state {
	cudaEvent_t base;  /* recorded at init; its time is base_ns */
	int64_t base_ns;
	cudaStream_t cs;   /* the compute stream, where compute spans end */
	cudaEvent_t *ev;   /* the pool: each recorded once, read at drain */
	int nev, cap, max;
	int open;          /* the compute call's span not yet ended, or -1 */
} trace_state;

/* dev.c: the device, its compute stream and libraries, memory. */
typedef struct dev_state {
	cudaStream_t cs;      /* compute: the application's (CFRT_OPT_STREAM)
	                       * or the context's own */
	int own_cs;           /* cs is the context's: destroyed at fini */
	cublasHandle_t blas;  /* on cs */
	void *blas_ws;        /* cuBLAS workspace, BLAS_WS bytes */
	cublasLtHandle_t lt;
	alloc_rec *al;        /* the buffers of cfrt_alloc */
	int nal;
	uint64_t serials;
	void *ws; /* attention scores and probabilities, ws_bytes long */
	size_t ws_bytes;
	unsigned long long *chk;      /* CFRT_CHECK=finite: a key per view
	                               * checked (cfrtk_nonfinite), device */
	unsigned long long *chk_host; /* and their copy, pinned host memory */
} dev_state;

/* lt.c: the GEMM plans. */
typedef struct lt_state {
	int mode;       /* enum gmode */
	lt_plan *plans; /* one per GEMM shape seen */
	int nplans;
} lt_state;

/* ce.c: copy-engine transfers. */
typedef struct ce_state {
	cudaStream_t *s; /* size entries: copies from peer P, or NULL */
	int open; /* CE transfers started and not yet waited on */
	xfer **fifo_head, **fifo_tail; /* per peer: CE receives not issued */
	ipc_ev **ev; /* entries allocated once: MPI writes into them */
	int nev;
	cudaEvent_t **peer_ev; /* [peer][id]: opened events of peers */
	int *npeer_ev;
	remote_mem *rmem;
	int nrmem;
} ce_state;

/* xfer.c: the transfer table and NCCL. */
typedef struct xfer_table {
	int mode;          /* enum xmode */
	ncclComm_t nccl[CFRT_MAX_GROUPS]; /* by group of the context's grid:
	                    * its ranks (one group: the job) */
	int app_nccl;      /* nccl[0] is the application's: not destroyed */
	cudaStream_t s;    /* NCCL transfers, high priority */
	cudaEvent_t fence; /* on dev.cs, recorded before transfers start */
	xfer **x; /* slots, each allocated once: MPI writes into them */
	int nx;
	int *group; /* slots queued in the open group */
	int ngroup;
	const void *sent; /* CFRT_TRANSFER=none: the last buffer sent */
	size_t sent_bytes; /* and its size */
} xfer_table;

struct cfrt_ctx {
	cfrti_base base; /* first: what the shared code sees (common.h);
	                  * base.device: the CUDA device */
	trace_state tr;
	dev_state dev;
	lt_state lt;
	ce_state ce;
	xfer_table xt;
	struct dnn_state *dnn; /* dnn.c's, opaque: only it sees cuDNN */
};
_Static_assert(offsetof(struct cfrt_ctx, base) == 0,
               "the shared code finds base at the start of a context");

/* cuBLAS's workspace: what cuBLAS recommends on Hopper (32 MiB), so that
 * it can pick the same kernels as cuBLASLt-based frameworks. */
#define BLAS_WS ((size_t)32 << 20)

/* Each module: init makes its state (after the modules below it), fini
 * frees it (before them; also after a failed or partial init); a *_mode
 * reads a setting, touching no device, before any init. */

/* trace.c; also cfrti_trace_flush (common.h). init (after dev's: on
 * its compute stream cs) records the base event when tracing; mark
 * records a pooled event on s and returns its id for a span's ev[], or -1;
 * call ends the open compute span and, when api is a compute call, opens
 * one; close ends it (before a host copy or wait); resolve fills the
 * spans' times once the device is idle. Each does nothing when tracing is
 * off. */
int cfrti_tr_init(cfrt_ctx *ctx, cudaStream_t cs);
void cfrti_tr_fini(cfrt_ctx *ctx);
int cfrti_tr_mark(cfrt_ctx *ctx, cudaStream_t s);
void cfrti_tr_call(cfrt_ctx *ctx, const char *api, cudaStream_t cs);
void cfrti_tr_close(cfrt_ctx *ctx, cudaStream_t cs);
void cfrti_tr_resolve(cfrt_ctx *ctx);

/* dev.c; also cfrti_check_dtype (common.h). cfrti_dev_stream makes a
 * non-blocking stream of the lowest priority, or of the highest when
 * high. */
int cfrti_dev_init(cfrt_ctx *ctx);
void cfrti_dev_fini(cfrt_ctx *ctx);
int cfrti_cuda(cfrt_ctx *ctx, cudaError_t e, const char *call);
int cfrti_blas(cfrt_ctx *ctx, cublasStatus_t e, const char *call);
int cfrti_dev_stream(cfrt_ctx *ctx, int high, cudaStream_t *s);
int cfrti_ws_reserve(cfrt_ctx *ctx, size_t bytes);
/* The end of a compute call that returns rc and wrote the views o1, o2,
 * o3 (each may be NULL): rc, or with CFRT_CHECK=finite and rc CFRT_OK,
 * CFRT_ENONFINITE naming the first element of the first view that holds a
 * NaN or an Inf. The check is a kernel a view on the compute stream after
 * the call's work, then a wait of the host for it (every wait issued
 * before it becomes a blocking one, which verified schedules allow, as
 * under CFRT_GEMM=tune). */
int cfrti_dev_check(cfrt_ctx *ctx, int rc, const cfrt_view *o1,
                    const cfrt_view *o2, const cfrt_view *o3);
const alloc_rec *cfrti_alloc_of(cfrt_ctx *ctx, const void *p, size_t bytes);
int cfrti_alloc_handle(cfrt_ctx *ctx, const alloc_rec *a,
                       cudaIpcMemHandle_t *h);

/* lt.c (no init: plans are made on first use): cfrti_lt_gemm runs g
 * through cuBLASLt, or returns CFRT_ENOTSUP having done nothing (cuBLAS
 * runs it then). */
int cfrti_lt_mode(cfrt_ctx *ctx);
int cfrti_lt_gemm(cfrt_ctx *ctx, const gemm_args *g);
void cfrti_lt_fini(cfrt_ctx *ctx);

/* dnn.c: init makes the state (the cuDNN handle comes with the first
 * call); cfrti_dnn_have: built with cuDNN. The calls run a's attention
 * or backward through cuDNN, or return CFRT_ENOTSUP having done nothing
 * and left no message where cuDNN cannot take the call (the fused kernel
 * runs it then); strict: cuDNN refusing a call it should take is an
 * error naming its reason, not CFRT_ENOTSUP. */
int cfrti_dnn_have(void);
int cfrti_dnn_init(cfrt_ctx *ctx);
void cfrti_dnn_fini(cfrt_ctx *ctx);
int cfrti_dnn_attention(cfrt_ctx *ctx, const cfrti_attn *a, int strict);
int cfrti_dnn_attention_grad(cfrt_ctx *ctx, const cfrti_attn *g, int strict);

/* ce.c: copy-engine transfers; also cfrti_enter (common.h), which on
 * this backend starts every compute and transfer call and moves the
 * copy-engine handshakes (the memory calls and cfrt_barrier only name
 * themselves). start: fills the slot and sends or posts the handshake;
 * progress: enqueues the copies whose handshakes have arrived; wait:
 * orders the slot's transfer before later compute; drain: until every
 * handshake is answered. */
int cfrti_ce_init(cfrt_ctx *ctx);
void cfrti_ce_fini(cfrt_ctx *ctx);
int cfrti_ce_start(cfrt_ctx *ctx, xfer *x);
int cfrti_ce_progress(cfrt_ctx *ctx);
int cfrti_ce_wait(cfrt_ctx *ctx, xfer *x);
int cfrti_ce_drain(cfrt_ctx *ctx);

/* xfer.c; also cfrti_xfer_start and cfrti_xfer_wait (common.h).
 * wait_all: waits on every transfer started and drops the open group's. */
int cfrti_xfer_mode(cfrt_ctx *ctx);
int cfrti_xfer_init(cfrt_ctx *ctx);
void cfrti_xfer_fini(cfrt_ctx *ctx);
int cfrti_xfer_wait_all(cfrt_ctx *ctx);

#endif /* CFRT_CUDA_BACKEND_H */
