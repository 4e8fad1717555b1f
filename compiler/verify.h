/* verify.h: private to the verifier: verify_setup.c, its entry points
 * (a run set up, its end state checked); verify.c, the machine that runs
 * every rank's program; verify_mem.c, the checks of the memory plan that
 * the machine calls at each item; verify_call.c, the views of one runtime
 * call; verify_cells.c, the cells and contributor sets the machine
 * tracks; verify_base.c, the helpers all of them share. Each calls only
 * those after it in this list. */
#ifndef VERIFY_H
#define VERIFY_H

#include <stdint.h>

#include "plan.h"

enum { ORG_NONE = -1, ORG_ALL = -2, ORG_MULTI = -3 };
enum { RUN_OK, RUN_BLOCKED, RUN_ERR };

/* What one slot holds: slice (-1: nothing) and its contributors: one rank
 * (org >= 0), none (zeroed), all, or (org <= ORG_MULTI) the bitset
 * ORG_MULTI - org of the pool. Sets are kept canonical: a single rank is
 * never a bitset, all ranks (N > 1) never anything but ORG_ALL. */
typedef struct Cell {
	int32_t slice, org;
	uint16_t nsend, nrecv; /* transfers in flight reading / writing it */
} Cell;

typedef struct Xfer {
	ItemKind kind;    /* IT_SEND, IT_RECV */
	int rank, peer, tag, label, round;
	int buf, slot, slice, part, step, comp;
	int64_t size;
	int match;        /* the other side's record, or -1 */
	int refs;         /* sides that have yet to wait */
	int waited;
	int grp;          /* its group: the rank's grp-th */
	int fin;          /* moved: both groups ran */
	int epoch;        /* hosted collectives its rank ran before its post */
} Xfer;

/* The k-th library collective of the stage, as every rank posts it. */
typedef struct CollInst {
	const Item *it;
	int label, round;
	int cnt, *s;      /* the chunk's slices; element u is rank u's */
	int nposted;
	int *comp;        /* by rank: compute count at its post */
	char *state;      /* by rank: 0 not posted, 1 in flight, 2 waited */
	int epoch;        /* hosted collectives run before the first post */
} CollInst;

/* A concrete view: the elements off + sum idx[d] * stride[d] of object
 * obj (verify_mem.c numbers the objects of a stage). */
typedef struct MView {
	int obj;
	int64_t off;
	int nd;
	int64_t dim[MAXDIM], stride[MAXDIM];
} MView;

typedef struct Rank {
	int ph, i, t, k, step, done;
	int ncomp, nrun, inrun;
	int lastpost;     /* ncomp at the last post, -1: none */
	int exposed, exp_run;
	Cell **cells;     /* by buffer; NULL for buffers nothing moves */
	unsigned char **made; /* by region node: slices computed */
	unsigned char *zeroed; /* by region node, accumulating ones: its
	                        * result was set to zero (the slices added
	                        * since are those in made) */
	int *live, nlive, cap; /* Xfer records this rank waits for */
	int ncoll;        /* collectives posted */
	int pend;         /* a blocking collective posted, not yet done, or -1 */
	int ngrp, gdone;  /* transfer groups posted; run to completion */
	int open;         /* the last group takes the next transfer */
	int epoch;        /* hosted collectives' programs run (IT_HOST) */
	/* the memory plan (verify_mem.c), by label * V.maxslots + slot: */
	int *req;         /* the round whose request is in slot k, or -1 */
	int64_t *cbase;   /* a collective's chunk base, saved at its post */
} Rank;

/* By round: the collective instance posted as (label, round), or -1. */
typedef struct CiMap {
	int *k;
	int n, cap;
} CiMap;

typedef struct V {
	const Coll *c;
	int N, W;         /* ranks, 64-bit words of a rank bitset */
	int sym;          /* sched_symmetric: rank 0 alone is run, every other
	                   * rank being rank 0 turned */
	int nr;           /* ranks run: N, or 1 when sym */
	int turns;        /* the item being checked names a slice that turns
	                   * with the rank (sched_turns), not a chunk */
	Rank *rk;
	int *base;        /* by phase: its first step */
	Xfer *x;
	int nx, capx, freex;
	CollInst *ci;
	int nci, capci;
	CiMap *cimap;     /* by collective label */
	int nlabel;
	uint64_t *pool;
	int npool, cappool, freepool;
	uint64_t *t1, *t2; /* scratch bitsets */
	char *err;
	size_t errlen;
	int failed;
	VerifyMsg *msgs;
	int nmsg, capmsg, want_msgs;
	Arena *t;         /* scratch, released at the end */
	ArenaMark mark;
	int *sel;         /* room for the slices of one chunk */
	const Plan *plan; /* the memory plan of the schedule, or NULL */
	const PColl *pc;  /* c's plan, when plan is set */
	int maxslots;     /* most slots of a label of c */
	int64_t (*odims)[MAXDIM]; /* by object (verify_mem.c): its dims */
	int *ond;
	/* several groups: r is the rank in group sg (the collective's, or a
	 * plain stage's; -1: none); the ranks in the other groups are the
	 * run's context, grank (vm_contexts) */
	int sg;
	unsigned ctx;     /* the groups whose rank grank sets (bits by id) */
	int grank[MAXGROUPS];
} V;

/* verify_base.c: the run's error (the first only), naming rank, context,
 * step and slice; RUN_ERR. */
int vf_fail(V *v, int r, int slice, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* " (dp rank 1, ...)" for the context of v in messages, or "". */
const char *vm_context_str(const V *v, char *buf, size_t n);
/* The slices of sel for rank r in round i (cnt of them) into out. */
int vf_sel(const Sel *sel, int r, int i, int *out, int max);
/* Element e of collective ci on rank r: the slice (and part) it reads
 * (dir 0) or writes (dir 1); 0 when the element does not touch r. */
int vf_elem(const CollInst *ci, int r, int dir, int e, int *s, int *part);

/* verify_cells.c: the cells of buffer slots and the contributor sets
 * they hold */
const Buf *vf_buf(const V *v, int b);
void vf_drop(V *v, Cell *c);
void vf_copy(V *v, Cell *dst, const Cell *src);
void vf_turn(V *v, Cell *dst, const Cell *src, int d);
int vf_union(V *v, Cell *dst, const Cell *src);
int vf_same(const V *v, const Cell *c, int org);
/* Does buffer b hold a value made before c's stage (each rank's part of
 * every slice from the start)? */
int vf_outside(const Coll *c, const Buf *b);
/* The result every rank must hold in slot (part, s) of the output. */
int vf_expect(const V *v, int part, int s);
const char *vf_cell_str(V *v, const Cell *c, char *buf, size_t n);
/* verify.c: the machine that verify_setup.c runs */
Cell *vf_cells(V *v, int r, int b);
int vf_bit(unsigned char *b, int s);
const Phase *vf_phase(const V *v, int ph);
void vf_advance(V *v, Rank *R);
int vf_run(V *v);

/* verify_mem.c: the checks of the plan at each item of rank r in round
 * i, after the schedule's own checks passed; RUN_OK or RUN_ERR (through
 * vf_fail). */
void vm_init(V *v);
void vm_objects(V *v);
int vm_compute(V *v, int r, int i, const Item *it);
int vm_move(V *v, int r, int i, const Item *it);
int vm_post(V *v, int r, int i, const Item *it, const Xfer *x);
int vm_pair(V *v, const Xfer *s, const Xfer *q);
int vm_wait(V *v, int r, int label, int round, const Xfer *x);
int vm_coll_post(V *v, int r, int i, const CollInst *ci);
int vm_coll_apply(V *v, const CollInst *ci);
int vm_coll_wait(V *v, int r, const CollInst *ci);
/* A plain stage (no collective: v->c is NULL) on every rank of every
 * group. */
int vm_plain(V *v, const Node *n, const PItem *p);
/* verify_call.c: do the views ops[0..nops) of one runtime call of n
 * (its result, its inputs, an attention's lse) agree as the runtime
 * requires? 0, or 1 and why. vc_whole: the call on the whole dense
 * tensors of the graph (the serial reference). */
int vc_call(const Node *n, const MView *ops, int nops, char *why, size_t nwhy);
int vc_whole(const Node *n, char *why, size_t nwhy);
/* verify_pack.c: the slots of a pack or an unpack (coalesce.c) with the
 * views o (result) and in (inputs) of its call; 0, or 1 and why. */
int vc_pack(const Node *n, const MView *o, const MView *in, char *why, size_t nwhy);
/* The groups other than c's whose ranks the proof of c and its plan pc
 * reads: those that split a value c touches or whose rank pc uses (bits by
 * Group.id). */
unsigned vm_coll_groups(const Coll *c, const PColl *pc);
/* The ranks of the groups in mask (of groups, NULL: none) to run the
 * checks at, each over 0, 1 and its last (the checks are affine in each
 * rank, with no product of two: where they hold at these points, they
 * hold for every rank), in *ctx (from t); returns how many (1: none). */
int vm_contexts(Arena *t, const Vec *groups, unsigned mask, int (**ctx)[MAXGROUPS]);

#endif
