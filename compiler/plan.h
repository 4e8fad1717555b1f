/* plan.h: the memory plan of the parallel program.
 *
 * plan.c decides every question about memory that the lowered schedule
 * leaves open: which memory each operand of every item is (a value's
 * storage, a scratch buffer or a staging slot, cut along which dims at
 * which offsets), which transfers go through staging and how, how many
 * rounds of each transfer label are in flight at once (request and
 * staging slots), and where every value, scratch buffer and staging area
 * lives in the workspace (values and scratch share it by liveness).
 * verify_mem.c proves the plan element by element against the schedule
 * that verify.c proves; cg_par.c prints it and decides nothing.
 *
 * Everything stays symbolic in the rank r and the round i, like the
 * schedule: an offset is a linear form over the few run-time integers an
 * item has (PExpr), evaluated by the verifier for every rank and round
 * and printed as C by the code generator. */
#ifndef PLAN_H
#define PLAN_H

#include "sched.h"

enum { PLAN_ALIGN = 256 }; /* workspace alignment of every object, bytes */
int64_t plan_align(int64_t bytes);

/* The run-time integers an offset may use. */
typedef enum PVar {
	PV_S,    /* the item's slice: sel.hi * per + sel.lo (+ u * stride) */
	PV_R,    /* the rank */
	PV_PART, /* the value of the view's part index (PView.part) */
	PV_U,    /* block u of a collective's chunk, or slice u of a loop */
	PV_BASE, /* a collective chunk's first slice; at a wait, as saved at
	          * its post */
	PV_G,    /* PV_G + k: the rank in group k (Group.id) of a model of
	          * several groups, where k is not the stage's group (whose
	          * rank is PV_R): the other groups' splits of a value */
	NPV = PV_G + MAXGROUPS
} PVar;

/* mul * (c[PV_S] * s + c[PV_R] * r + ... + add): an element offset along
 * one dimension, kept in the form a person writes: (s - r * 4) * 16. */
typedef struct PExpr {
	int64_t mul;
	int64_t c[NPV];
	int64_t add;
} PExpr;

int64_t plan_eval(const PExpr *e, const int64_t val[NPV]);

/* Elements [start, start + len) of dimension dim (cfrt_view_slice). */
typedef struct PCut {
	int dim;
	PExpr start;
	int64_t len;
} PCut;

typedef enum PBase {
	PB_VALUE, /* the per-rank storage of a graph value (id: Value.id) */
	PB_TEMP,  /* a scratch buffer of the collective (id: the first buffer
	           * of its rotating set; rot picks the member) */
	PB_STAGE  /* slot k of a label's staging (id: the label) */
} PBase;

enum { MAXCUT = 4 };

/* A view: a base, then cuts applied in order (PB_VALUE only). A staging
 * view is contiguous with dims[0..nd), at block u (PV_U) of blk elements
 * into slot k when blk > 0. */
typedef struct PView {
	PBase base;
	int id;
	Ix rot;      /* PB_TEMP: bufs[id + rot] */
	Ix part;     /* what PV_PART stands for in the cuts */
	int side;    /* PB_STAGE: 0 what is sent, 1 what a collective receives */
	int64_t blk; /* PB_STAGE: elements of one block, or 0 */
	int nd;      /* PB_STAGE: its dims */
	int64_t dims[MAXDIM];
	int ncut;
	PCut cut[MAXCUT];
} PView;

/* One side of a library collective: the memory handed to the library
 * (direct), or nblock blocks (1 or N, u = 0 .. nblock-1) copied between
 * view and stage, block u of the library's buffer at u * count. */
typedef struct PSide {
	int staged;
	int nblock;
	PView view;  /* direct: the library's buffer; staged: block u */
	PView stage; /* staged: where block u goes in the slot */
} PSide;

/* The plan of one item (or of a plain stage: view[0] its result, then its
 * inputs). */
typedef struct PItem {
	int nview;
	PView view[MAXIN + 1]; /* compute: out, in[0..], then an attention's
	                         * lse (Node.lse); add/copy: dst, src;
	                         * zero: dst; send/recv: its data */
	int loop;      /* compute: one call per slice u of the chunk */
	int qoff;      /* attention with a causal mask: qstart is used */
	PExpr qstart;  /* the global row of the first query */
	int staged;    /* send/recv: packed into or unpacked from stage */
	PView stage;
	int64_t count; /* send/recv: elements; collective: of one block */
	PSide side[2]; /* collective: what it sends (0) and receives (1) */
} PItem;

/* A transfer label: the (label, round) pairs of one lane and direction. */
typedef struct PLabel {
	ItemKind kind;     /* IT_SEND, IT_RECV or IT_COLL */
	int lane;          /* IT_SEND, IT_RECV: the lane (the tag) */
	int used;
	int slots;         /* rounds in flight at once: slot k = round mod slots */
	int blocking;      /* IT_COLL: only blocking posts, no requests kept */
	int unpack;        /* some receive is unpacked at its wait */
	int usebase;       /* the unpack at the wait needs the chunk's base */
	const Item *coll;  /* IT_COLL: the posting item */
	int staged[2];     /* staging of side 0 (sent, or p2p) and 1 */
	int64_t stage_elems[2], slot_bytes[2], stage_off[2];
} PLabel;

/* The plan of one lowered collective. */
typedef struct PColl {
	const struct Plan *plan;
	const Coll *c;
	PItem **item;      /* by Item.id */
	PLabel *lab;
	int nlab;
	int64_t *off;      /* by buffer: workspace offset of a BK_TEMP that some
	                    * item uses, else -1 */
} PColl;

/* Facts about the program that its printer needs up front. */
enum {
	PN_R = 1,        /* some expression uses the rank */
	PN_MOD = 2,      /* some index needs x mod n */
	PN_PARTNER = 4   /* some index is a round-robin partner */
};

typedef struct Plan {
	const Sched *s;
	int64_t *off;      /* by Value.id: workspace offset, -1: none (io) */
	int64_t wsbytes;
	char *in_saved;    /* by Value.id: off is bytes into the saved buffer,
	                    * not the workspace (Graph.saved_ws) */
	char *used;        /* by Value.id: some stage reads or writes it */
	int *first, *last; /* by Value.id: the stages that access it */
	PColl **coll;      /* by Sched.colls index */
	PItem **plain;     /* by Sched.stages index; NULL for a collective */
	unsigned need;     /* PN_* */
	int *group;        /* by Sched.stages index: the group (index in
	                    * Graph.groups) whose rank PV_R means in the
	                    * stage's expressions, and whose ranks a collective
	                    * runs on; a plain stage's is the first group that
	                    * spreads its result, else one of its inputs; -1:
	                    * none (all replicated) */
	char *rank_used;   /* by group index: some stage's expression uses the
	                    * rank in that group (PV_R or PV_G + k) */
	int *call;         /* by Sched.stages index: the first stage of the
	                    * one call that runs it (plan_calls), else itself */
	char *unmade;      /* by Value.id: a joint call's intermediate, never
	                    * written: no place, touched by no stage */
	/* the serial reference: whole tensors, collectives the identity */
	int64_t *ref_off;  /* by Value.id, -1: none (io, or an alias) */
	int *ref_alias;    /* by Value.id: the value whose storage it shares, or -1 */
	int64_t ref_wsbytes;
} Plan;

/* plan.c: requires a lowered schedule; ensures every stage and item
 * planned as above (verify_mem.c proves it). */
Plan *plan_sched(const Sched *s);
/* The stages from k on that the code generator makes in one call
 * (cg_par.c), and whose intermediate value that call never writes: a
 * GEMM and the add of its product (cfrt_matmul_add), a head split and
 * the rope of its heads or a rope's gradient and its head merge
 * (cfrt_rope through a head view), an RMS norm's gradient, the norm
 * again and the mul of its gain's rows (cfrt_rmsnorm_grad_rows). The
 * nodes into n[0..m), the unmade one's index into *unmade; returns m
 * (2 or 3), or 0 where stage k begins no such call. Decided from the
 * schedule alone (the stages plain, adjacent, not hosted, of one group
 * and on whole tensors; the intermediate an activation read by the next
 * stage alone): the plan makes the call's operands live through all its
 * stages, so it needs no check of the layout. */
int plan_joint(const Plan *P, int k, const Node *n[3], int *unmade);
/* Every joint call of P's pass: call[k] the first stage of the call that
 * runs stage k (k itself where none), and each call's intermediate set
 * in unmade[] (by Value.id). The plan fills Plan.call and .unmade so;
 * the verifier derives its own from the schedule. */
void plan_calls(const Plan *P, int *call, char *unmade);
/* The last stage of the call that runs stage k (call: plan_calls's). */
int plan_call_end(const Plan *P, const int *call, int k);
/* Plain stage k's node where it runs alone (not hosted in a collective's
 * stage) on whole per-rank tensors (no view cut out of them), else NULL. */
const Node *plan_whole(const Plan *P, int k);
/* Does a collective of p's pass (p may be NULL: no) run inside another's
 * round (order.c's 2b: two collectives in flight)? */
int plan_nests(const Plan *p);

/* plan.c: the items of collective c of graph g alone, as plan_sched
 * plans them (PColl.plan NULL, no workspace placed): what its program
 * runs as calls and copies, for the cost model (predict.c). */
PColl *plan_coll(Arena *a, const Graph *g, const Coll *c);

/* The locals an item's printed form defines: bit PV_* for s, part, ...
 * used by some view of it. */
unsigned plan_item_vars(const PItem *p);
/* Does a printed index expression need x mod n? */
int plan_ix_mod(const Ix *x);
/* The storage extent of dim d of a scratch buffer: one slice. */
int64_t plan_temp_extent(const Coll *c, const Buf *b, int d);
/* Bytes of one element of the collective's data. */
int plan_esize(const Coll *c);
/* The variable of the rank in group k in a stage of group sg: PV_R or
 * PV_G + k. */
int plan_rank_var(int k, int sg);
/* The group of stage st (Plan.group), -1: none. */
int plan_stage_group(const Stage *st);

#endif
