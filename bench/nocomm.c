/* nocomm.c: the transfers of cfrt as no-ops, to time a schedule's compute
 * alone. Linked into a generated model with
 *   -Wl,--wrap=cfrt_isend,--wrap=cfrt_irecv,--wrap=cfrt_all_gather,...
 * every call from the model to a wrapped function lands here: nothing
 * moves, a nonblocking start returns the null request (its wait is a
 * no-op), and the compute (GEMMs, elementwise ops, pack and unpack copies)
 * runs exactly as in the real schedule.
 * The compute must still see data like the real data: CPU time depends on
 * values (tanh in gelu is cheaper at 0 and at saturation, exp underflow to
 * subnormals is slow), and stale workspace bytes grew without bound in
 * accumulating schedules, slowing attention by 20%. So a receive takes a
 * copy of the last buffer this rank sent, when that has its size (a ring
 * step sends and receives one slice: the copy holds this rank's own
 * slice, or own partial sums), and zeroes otherwise; a collective fills
 * its result from its own send buffer. These are memory copies of the
 * messages' size, the receiver's share of a real transfer, about 1% of
 * the benchmark's compute. The timing loop's barrier and reductions are
 * plain MPI and still run. */
#include <string.h>

#include "cfrt.h"

#define NULL_REQ(req) ((req) ? (void)(*(req) = (cfrt_req){0, 0}) : (void)0)

/* The last buffer sent and its size. */
static const void *sent;
static size_t sent_bytes;

int __wrap_cfrt_isend(cfrt_ctx *, const void *, int64_t, cfrt_dtype, int,
                      int, cfrt_req *);
int __wrap_cfrt_irecv(cfrt_ctx *, void *, int64_t, cfrt_dtype, int, int,
                      cfrt_req *);

int __wrap_cfrt_isend(cfrt_ctx *ctx, const void *buf, int64_t n,
                      cfrt_dtype t, int peer, int tag, cfrt_req *req)
{
	(void)ctx, (void)peer, (void)tag;
	sent = buf;
	sent_bytes = n > 0 ? (size_t)n * cfrt_dtype_size(t) : 0;
	NULL_REQ(req);
	return CFRT_OK;
}

int __wrap_cfrt_irecv(cfrt_ctx *ctx, void *buf, int64_t n, cfrt_dtype t,
                      int peer, int tag, cfrt_req *req)
{
	size_t bytes = n > 0 ? (size_t)n * cfrt_dtype_size(t) : 0;
	(void)ctx, (void)peer, (void)tag;
	if (bytes > 0 && sent && bytes == sent_bytes)
		memmove(buf, sent, bytes);
	else if (bytes > 0)
		memset(buf, 0, bytes);
	NULL_REQ(req);
	return CFRT_OK;
}

/* Collectives: every block of the result is a copy of this rank's send
 * block (all_gather), of its own block (reduce_scatter), or of its send
 * buffer (all_reduce, all_to_all); in-place all_reduce keeps its data. */
static void fill(cfrt_ctx *ctx, const char *s, char *r, size_t blk, int kind)
{
	int p = cfrt_size(ctx);
	if (!r || r == s || blk == 0)
		return;
	switch (kind) {
	case 0: /* all_gather: send blk, recv p * blk */
		for (int q = 0; q < p; q++)
			memcpy(r + (size_t)q * blk, s, blk);
		break;
	case 1: /* reduce_scatter: send p * blk, recv blk */
		memcpy(r, s + (size_t)cfrt_rank(ctx) * blk, blk);
		break;
	case 2: /* all_reduce: blk each */
		memcpy(r, s, blk);
		break;
	default: /* all_to_all: p * blk each */
		memcpy(r, s, (size_t)p * blk);
	}
}

/* Each collective and its nonblocking form, declared (for
 * -Wmissing-prototypes) and defined. */
#define NOCOMM(name, kind)                                                  \
	int __wrap_cfrt_##name(cfrt_ctx *, const void *, void *, int64_t,   \
	                       cfrt_dtype);                                 \
	int __wrap_cfrt_i##name(cfrt_ctx *, const void *, void *, int64_t,  \
	                        cfrt_dtype, cfrt_req *);                    \
	int __wrap_cfrt_##name(cfrt_ctx *ctx, const void *s, void *r,       \
	                       int64_t n, cfrt_dtype t)                     \
	{                                                                   \
		fill(ctx, s, r, n > 0 ? (size_t)n * cfrt_dtype_size(t) : 0, \
		     kind);                                                 \
		return CFRT_OK;                                             \
	}                                                                   \
	int __wrap_cfrt_i##name(cfrt_ctx *ctx, const void *s, void *r,      \
	                        int64_t n, cfrt_dtype t, cfrt_req *req)     \
	{                                                                   \
		NULL_REQ(req);                                              \
		return __wrap_cfrt_##name(ctx, s, r, n, t);                 \
	}
NOCOMM(all_gather, 0)
NOCOMM(reduce_scatter, 1)
NOCOMM(all_reduce, 2)
NOCOMM(all_to_all, 3)
