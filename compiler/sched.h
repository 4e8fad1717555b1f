/* sched.h: the schedule IR. lower.c builds it from the dependency graph,
 * verify.c proves it, the text/DOT emitters draw it and the C generator
 * turns it into calls of the runtime.
 *
 * A schedule is an ordered list of stages. A stage is either the plain
 * local compute of one graph node, or one collective lowered together with
 * its fused region. Everything is symbolic in the rank r: one program
 * serves every rank; only the group size N (fixed at compile time) is
 * concrete.
 *
 * How to walk a lowered collective (Coll), for rank r:
 *
 *   for each phase ph in c->phases, in order:
 *     for (i = 0; i < ph->nrounds; i++)
 *       for (t = 0; t < ph->nlanes; t++)
 *         for each item it in ph->lanes[t], in order:
 *           if (sched_guard(&it->g, r, i, N)) run it
 *
 * which sched_next does one item at a time.
 *
 * Items run in order on one rank. Compute items (IT_COMPUTE, IT_ADD,
 * IT_COPY, IT_ZERO) go to the rank's compute queue; transfers (IT_SEND,
 * IT_RECV, IT_COLL) are nonblocking and go to its communication queue. A
 * transfer is ordered after every compute item before it on the rank (it
 * sees their results and does not overwrite what they still read); a
 * compute item waits for a transfer only through an explicit IT_WAIT. Every
 * transfer a rank posts is waited by the end of the stage.
 *
 * Slices: the collective's dimension is cut into nslices = P * N (or k * N
 * for slice(k)) equal slices; slice s = q * P + t belongs to rank q
 * (q = s / P) and lane t. Every value of the region is sliced the same way
 * along its own dimension (RNode.odim, RNode.idim). */
#ifndef SCHED_H
#define SCHED_H

#include "cf.h"

enum { MAXLANE = 64 }; /* most lanes of a phase: 2 * m for bidir */
/* Most items the proof of a schedule that is not symmetric may run, over
 * all its ranks and rounds (a few seconds): a round-robin schedule on
 * thousands of ranks is refused with a diagnostic rather than proved for
 * minutes. */
#define MAXPROOF ((int64_t)1 << 24)

/* An index expression, symbolic in the rank r and the round i. */
typedef enum IxKind {
	IX_AFFINE,  /* (a*r + b*i + c) mod n; no mod when n == 0 */
	IX_PARTNER  /* the round-robin partner of r in round b*i + c over n
	             * ranks (circle method), -1 when r sits the round out */
} IxKind;

typedef struct Ix {
	IxKind kind;
	int a, b, c;
	int n;
} Ix;

/* A set of slices: s_u = hi * per + lo + u * stride, u = 0 .. cnt-1. A
 * fused step names one slice (cnt 1); a chunk of slice(k) names the N
 * slices q*k + j of all ranks; a whole tensor is all nslices of them. */
typedef struct Sel {
	Ix hi, lo;
	int per;
	int cnt, stride;
} Sel;

/* A reference to slices of a stage buffer. With nrot > 1 the buffer is
 * one of a rotating set: bufs[buf + rot(r, i)]. part names the block along
 * Buf.pdim (all_to_all results only). */
typedef struct BufRef {
	int buf;
	Ix rot;
	Sel sel;
	Ix part;
} BufRef;

typedef enum BufKind {
	BK_VALUE, /* the storage of graph value v on this rank */
	BK_TEMP   /* a scratch buffer of one slice of v's shape */
} BufKind;

typedef struct Buf {
	const char *name;
	BufKind kind;
	Value *v;
	int dim;          /* the sliced dimension of v */
	int nslots;       /* BK_VALUE: slices held; BK_TEMP: 1 */
	int own;          /* holds only this rank's slices r*nslots .. */
	int nparts, pdim; /* > 1: also cut in nparts blocks along pdim */
	int xfer;         /* moved or reduced: the verifier tracks its data */
	int set, nset;    /* BK_TEMP: one of the rotating set bufs[set ..
	                   * set + nset) that a BufRef.rot picks from */
	const char *stem; /* BK_TEMP: its role ("part", "acc", "send") */
	int lane;         /* BK_TEMP: the lane it serves */
	int64_t elems;      /* per rank */
	int64_t slot_elems; /* one slice (of one part) */
} Buf;

/* A guard: the item runs in rounds lo <= i <= hi and, when active is
 * set, only if r has a partner in round i + aoff (pairwise exchange). */
typedef struct Guard {
	int lo, hi;
	int active, aoff;
} Guard;

typedef enum ItemKind {
	IT_COMPUTE, /* comp: region node rn on the slices comp.sel */
	IT_ADD,     /* move: dst += src, elementwise */
	IT_COPY,    /* move: dst = src */
	IT_ZERO,    /* move: dst = 0 */
	IT_SEND,    /* xfer: send buf to peer */
	IT_RECV,    /* xfer: receive buf from peer */
	IT_COLL,    /* coll: post a library collective on the chunk coll.sel */
	IT_WAIT,    /* wait: complete the transfer (label, round) if posted */
	IT_HOST     /* host: a plain stage, or another collective's whole
	             * program, run under this collective's transfers
	             * (order.c) */
} ItemKind;

typedef struct Item {
	ItemKind kind;
	int id;            /* index among the items of its collective */
	Guard g;
	union {
		/* Computes node region[rn] on the slices of sel. Its inputs
		 * inside the region are read from their region buffers,
		 * others whole (or sliced along RNode.idim) from their graph
		 * values. The result goes to dst; beta: dst += result (a
		 * GEMM with beta = 1). */
		struct { int rn; Sel sel; BufRef dst; int beta; } comp;
		struct { BufRef dst, src; } move;
		/* A transfer is named by (label, round): round is an Ix with
		 * no mod; tag separates concurrent streams of one pair. */
		struct { BufRef buf; Ix peer; int label; Ix round; int tag; } xfer;
		/* op: OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_REDUCE or
		 * OP_ALL_TO_ALL over the chunk sel (element u of a cnt-N
		 * chunk is rank u's slice); blocking: waited at once. */
		struct { OpKind op; int src, dst; Sel sel; int label; Ix round; int blocking; } coll;
		struct { int label; Ix round; } wait;
		/* Runs stage `stage` whole, as it would run at its own
		 * place: a plain stage (its node, node; coll NULL), or the
		 * program of collective coll (node its collective node),
		 * whose transfers are then in flight beside this one's:
		 * order.c hosts independent work of the pass under exposed
		 * transfers. */
		struct { Node *node; int stage; struct Coll *coll; } host;
	} u;
} Item;

typedef struct Phase {
	const char *name;  /* "FuseAG (Algorithm 1)", ... */
	int nrounds, nlanes;
	Vec lanes[MAXLANE]; /* of Item* */
} Phase;

/* A node of a fused region and how it is sliced. */
typedef struct RNode {
	Node *node;
	int odim;          /* output dimension cut into slices, or -1: the
	                    * node sums its slices into its whole result
	                    * (rnode_sums) */
	int idim[MAXIN];   /* input i's dimension cut, or -1: read whole */
	int from[MAXIN];   /* input i's producer in the region, or -1 */
	int inbuf[MAXIN];  /* the stage buffer input i is read from, or -1:
	                    * the graph value (outside the region, whole) */
	int buf;           /* stage buffer of the output, or -1 (the result
	                    * goes only where the compute item's dst says) */
} RNode;

/* Does rn sum over the slices (a matmul whose contraction the region
 * cuts): each slice's product added (GEMM beta = 1) to a whole result
 * set to zero before the first? */
static inline int
rnode_sums(const RNode *rn)
{
	return rn->odim < 0;
}

/* Does the fused lowering of collective n compute its input into the
 * input's own storage (and send from there) rather than into scratch?
 * For an all_to_all whose input is a result: an output of the model, or
 * saved for the backward. */
static inline int
coll_keeps_input(const Node *n)
{
	return n->op == OP_ALL_TO_ALL && n->in[0]->role == R_OUT;
}

/* Why a region ends where it does. */
typedef struct Stop {
	Node *node;        /* the op left out */
	int up;            /* upstream of the collective (the region starts after it) */
	const char *why;
} Stop;

typedef struct VerifyStats {
	int exposed;   /* most transfers waited with no compute since their post, over ranks */
	int tailfree;  /* every rank: nothing posted after its last compute, and
	                * the last compute is not held by an exposed transfer */
} VerifyStats;

/* One collective with its region, lowered. */
typedef struct Coll {
	Arena *arena;      /* the compilation's */
	Node *node;
	SchedChoice want;  /* as the spec (or --schedule) asks */
	SchedChoice how;   /* as lowered */
	const char *note;  /* why how differs from want, or NULL */
	int N;             /* group size */
	int P;             /* lanes: m, or 2*m for bidir; k for slice(k) */
	int nslices;
	int dim;           /* the sliced dimension of the collective's data */
	Vec pre;           /* RNode*: the region feeding the collective */
	Vec post;          /* RNode*: the region the collective feeds */
	Vec region;        /* RNode*: pre then post; comp.rn indexes it */
	Vec stops;         /* Stop* */
	Vec bufs;          /* Buf* */
	int bin, bout;     /* buffers of the input and of the result */
	Vec phases;        /* Phase* */
	int nsteps;        /* compute steps: rounds * lanes of phases that compute */
	int nitems;        /* items, numbered by Item.id */
	int nlabels;       /* transfer labels: every item's label is below */
	int verified;      /* verify_sched proved it; stats are its findings */
	VerifyStats stats;
	/* --profile (predict.h): every candidate schedule's predicted
	 * time, in predict_candidates' order, and the one used (-1: none of
	 * them, the choice as asked) */
	struct Candidate *cand;
	int ncand, used;
	/* choose.c: the choice auto made (picked: lower.c lowers pick, and
	 * want stays auto), and the note that says why (NULL: none) */
	SchedChoice pick;
	int picked;
	const char *pick_note;
	/* order.c: what the whole-pass order put under c's exposed
	 * transfers, or why nothing (NULL: it had no exposed round) */
	const char *order_note;
} Coll;

typedef enum StageKind {
	ST_COMPUTE, /* node: a local op on whole per-rank tensors */
	ST_COLL     /* coll */
} StageKind;

typedef struct Stage {
	StageKind kind;
	union {
		Node *node;
		Coll *coll;
	} u;
	/* 1 + the index (in Sched.stages) of the collective stage whose
	 * program runs this one (an IT_HOST item), or 0: it runs at its
	 * own place. A hosted stage follows its host in Sched.stages, in
	 * the order the host's program runs it; its values (and a hosted
	 * collective's scratch and staging) are live from the host's stage
	 * on (sched_span_lo). A hosted collective hosts nothing itself. */
	int host1;
} Stage;

typedef struct Sched {
	Graph *g;
	Arena *arena;
	Coll **byid;       /* by Node.id: a collective node's Coll, else NULL */
	Coll **owner;      /* by Node.id: the Coll whose region holds the node */
	Vec stages;        /* of Stage*, in execution order */
	Vec colls;         /* of Coll*, in execution order */
	const struct Profile *profile; /* --profile: lowering predicts every
	                                * candidate and auto takes the fastest */
	double auto_margin;            /* auto's budget, percent of the pass
	                                * (--auto-margin; AUTO_MARGIN_OF_PROFILE
	                                * until lower_sched puts the profile's
	                                * default, predict_margin, here):
	                                * predict.h's predict_pick */
	const char *choice;            /* choose.c: the order and coalescing
	                                * threshold the pass runs with, and
	                                * the predictions they were chosen
	                                * over (--explain); NULL: none chosen */
} Sched;

/* auto's budget by default, percent of the pass, on CPUs and on GPUs
 * (predict.h's predict_margin says why) */
#define AUTO_MARGIN_PCT 2
#define AUTO_MARGIN_GPU_PCT 0
/* Sched.auto_margin before lowering when none was asked */
#define AUTO_MARGIN_OF_PROFILE (-1)

/* ---- region.c: requires a graph with locality (graph_fill_locality).
 * ensures: a Sched with a Coll per collective (its choice as asked, the
 * slices of its first guess), every collective's region found (c->dim,
 * pre, post, region, stops; Sched.owner), no stage ordered yet. ---- */
Sched *region_sched(Graph *g);
/* Does side (pre, post or region: of RNode*) hold an op of kind op? */
int region_has(const Vec *side, OpKind op);
/* The stages of g once every region is contracted into its collective's
 * (owner, by node id: the Coll whose region holds the node), in the
 * order they run: Kahn's algorithm over the stages (a stage by its
 * collective's node id, or its own node's), the lowest id first among
 * those ready, into order[] (ended by -1). Returns how many it could not
 * order (0: none): those in or after a cycle, marked in left (by stage
 * id) when left is given. */
int region_order(const Graph *g, Coll *const *owner, int *order, char *left);

/* ---- lower.c: requires region_sched's Sched; ensures every collective's
 * choice resolved (schedrule.c) and lowered into phases of items, the
 * stages ordered so that every dependency is respected; nonzero after
 * errors, every one reported. ---- */
int lower_sched(Sched *s, Diag *d);
/* The stages in region order (Sched.stages, .colls), unless made. */
void lower_stages(Sched *s);
/* c lowered on trial as c->want asks (choose.c); 0: the choice does not
 * apply (the rules refuse it, or its slices do not divide c's dimension),
 * c as it was. lower_reset undoes a lowering: c as regions left it, with
 * note as its note. */
int lower_try(Sched *s, Coll *c);
void lower_reset(Coll *c, const char *note);
/* Can verify_coll prove c's program here (MAXPROOF)? */
int lower_provable(const Coll *c);

/* ---- choose.c: requires a Sched from region_sched; ensures, with a
 * --profile, every candidate of every collective lowered, proved and
 * predicted (Coll.cand) and every auto choice made (Coll.pick), the
 * stages in region order; without one, nothing. ---- */
void choose_sched(Sched *s, Diag *d);
/* sched.c: how c is cut, from the choice it gets. */
void sched_set_how(Coll *c, const SchedUse *u);
/* Is c's program the same on every rank up to the turn r -> r + d: every
 * peer, slice owner and part of the form (r + b*i + c) mod N or a chunk
 * that the turn maps onto itself, every round and rotation independent
 * of r, no round-robin guard, no all_reduce by the library? Then rank
 * r + d's state is rank r's turned by d, and one rank's run proves them
 * all (verify.c). */
int sched_symmetric(const Coll *c);
/* Does item it name one slice that turns with the rank (else a chunk that
 * is the same on every rank)? */
int sched_turns(const Coll *c, const Item *it);
/* Slice s of c turned by d ranks: owner q becomes q + d (mod N). */
int sched_turn(const Coll *c, int s, int d);
/* x mod n in 0..n-1, for negative x too. */
int sched_mod(long long x, int n);

/* ---- order.c: the whole-pass order (its contract at its top) ---- */
typedef enum OrderMode {
	ORDER_PASS,        /* the default: collectives as early as their
	                    * inputs allow, independent compute hosted under
	                    * their exposed transfers, collectives' programs
	                    * too (several in flight) */
	ORDER_REGION,      /* --order=region: region after region, as lowered */
	ORDER_PASS_SINGLE  /* --order=pass-single: as ORDER_PASS, but plain
	                    * stages alone hosted: one collective in flight */
} OrderMode;
/* The index of an order's figures where they are kept by order: the
 * region order's, else the pass order's (either kind). */
static inline int
order_ix(OrderMode o)
{
	return o == ORDER_REGION;
}
/* --order's word for it */
static inline const char *
order_name(OrderMode o)
{
	return o == ORDER_REGION ? "region" : o == ORDER_PASS_SINGLE ? "pass-single" : "pass";
}
int order_sched(Sched *s, OrderMode mode, Diag *d);
/* The first stage whose span stage k's values are live in: its host for
 * a hosted stage, else k. */
int sched_span_lo(const Sched *s, int k);
/* The pass-level proof of the order: every stage reads only what stages
 * before it (or its host's program before it) made, every hosted stage
 * is run exactly once by its host, in its place; 0 ok, else err says
 * which stage, item and value. */
int order_check(const Sched *s, char *err, size_t errlen);

/* ---- verify.c: requires a lowered schedule; ensures the four
 * properties (exactness, matching and deadlock freedom, no buffer touched
 * in flight, exposure), else an internal error naming rank, step and
 * slice. ---- */

/* One matched point-to-point message, for drawing. */
typedef struct VerifyMsg {
	int src, sstep;    /* sender and the step that posted the send */
	int dst, dstep;    /* receiver and the step that waited for it */
	int slice;
} VerifyMsg;

struct Plan;
struct PColl;
/* verify_prog.c: proves every collective (those identical to one already
 * proved share its proof) and, unless plan is NULL, the memory plan:
 * every collective's with it, then the plain stages and the workspace.
 * Records the findings in Coll.verified and .stats. */
int verify_sched(const Sched *s, const struct Plan *plan, Diag *d);
/* Proves one collective and, unless pc is NULL, its plan; 0 ok. err (if
 * not NULL) gets the message. */
int verify_coll(const Coll *c, const struct PColl *pc, VerifyStats *st, char *err,
                size_t errlen);
/* verify_coll, running every rank even when the program is symmetric
 * (sched_symmetric): the reference the one-rank proof is tested against. */
int verify_coll_full(const Coll *c, const struct PColl *pc, VerifyStats *st, char *err,
                     size_t errlen);
/* The matched messages of c between ranks below nranks (in c's arena),
 * with nranks >= N in the order they complete; with fewer, a symmetric
 * program is run on one rank and its messages turned, so the cost grows
 * with nranks, not with N. */
int verify_messages(const Coll *c, int nranks, VerifyMsg **msgs, int *nmsg);

/* ---- sched.c-level helpers (lower.c) ---- */
int sched_ix(const Ix *x, int r, int i);
int sched_partner(int r, int round, int n);
int sched_rounds(int n);   /* rounds of the round-robin over n ranks */
int sched_guard(const Guard *g, int r, int i, int n);
/* A place in the walk of a collective for one rank (sched.h's header):
 * phase ph, round i, lane t, item k of the lane. Zeroed: the start. */
typedef struct SchedPos {
	int ph, i, t, k;
} SchedPos;
/* The item at *p or the first after it that rank r runs (its guard
 * admits it), *p moved past it (p->i is its round); NULL at the end. */
const Item *sched_next(const Coll *c, int r, SchedPos *p);
const char *sched_kind_str(Arena *a, const SchedChoice *s); /* "fuse(bidir,m=2)" */

#endif
