/* cgen.h: what the C generators share: naming, views, one op's call. */
#ifndef CGEN_H
#define CGEN_H

#include "cf.h"
#include "codegen.h"
#include "emit.h"

/* The generated code's own locals, by role. Each is spelt as below
 * unless a tensor of the model has that C name; then it is cf_ and the
 * name (the language keeps names beginning with cf_ for generated code). */
#define CG_LOCALS(X) \
	X(CTX, "ctx") X(W, "w") X(IO, "io") X(WS, "ws") X(R, "r") X(I, "i") \
	X(S, "s") X(U, "u") X(K, "k") X(RD, "rd") X(PEER, "peer") X(PART, "part") \
	X(BASE, "base") X(DST, "dst") X(SRC, "src") X(OUT, "o") X(IN, "in") \
	X(DATA, "b") X(STAGE, "st") X(BLK, "blk") X(SEND, "sst") X(RECV, "rst") \
	X(AT, "at") X(BT, "bt") X(HV, "hv") X(O4, "o4") X(Q4, "q4") X(K4, "k4") X(V4, "v4") \
	X(Y4, "y4") X(DY4, "dy4") X(LSE, "lse") X(L3, "l3") \
	X(DQ4, "dq4") X(DK4, "dk4") X(DV4, "dv4") \
	X(SAVED, "saved") X(GR, "gr")
typedef enum CgLocal {
#define X(id, s) LC_##id,
	CG_LOCALS(X)
#undef X
	NLOCAL
} CgLocal;

typedef struct Cg {
	Arena *a;
	const Graph *g;
	const struct Plan *plan;
	Emitter e;
	const char *prefix;  /* C prefix of every public name: the model name */
	const char *upper;   /* the same in upper case, for macros */
	const char **cname;  /* C name of each value, by Value.id */
	const char **sorted; /* the C names, sorted: which names are taken */
	const char *loc[NLOCAL]; /* the spelling of each local */
	int whole;           /* serial reference: every tensor whole */
	const char *ws;      /* prefix of the workspace offset macros: CF_WS,
	                      * CF_BW in a backward pass (one file holds both) */
} Cg;

void cg_init(Cg *c, Arena *a, const Graph *g, const struct Plan *plan, FILE *f,
             const char *srcname, int lines, int whole);
/* want, or cf_ and want when a tensor has that C name. */
const char *cg_avoid(Cg *c, const char *want);
/* Extent of dim d of v as this program holds it (whole or per rank). */
int64_t cg_extent(const Cg *c, const Value *v, int d);
/* "{2, 64, 64}" */
const char *cg_dims(const Cg *c, const Value *v);
const char *cg_dims_of(Arena *a, int nd, const int64_t *dims);
/* Ranks in the job: the product of the group sizes. */
long long cg_job_size(const Graph *g);
/* "{2, 4}": the group sizes, in declaration order ({1}: no group). */
const char *cg_group_sizes(Cg *c);
/* "{-1, 1, 0}": by dim of v, the index of the group that splits it, or -1. */
const char *cg_split_groups(Arena *a, const Value *v);
/* "input", "weight", "output", "gradient", ...: what v is to the caller. */
const char *cg_role_word(const Value *v);
const char *cg_dtype(DType t);
/* Emits the call of node n; out, in[] and lse (an attention's Node.lse,
 * else NULL) are C expressions of cfrt_view lvalues; q_offset: the global
 * index of the first query row (attention); beta: 1 to accumulate into
 * out (matmul only). */
void cg_op(Cg *c, const Node *n, const char *out, const char *const *in,
           const char *lse, const char *q_offset, int beta);
/* One cfrt_attention_grad_lse for the backward's attention_dq, _dk and
 * _dv nodes n[0..2] of the same operands (n[i] NULL: that gradient is not
 * asked for; at least one is not NULL): out[i] the C expression of n[i]'s
 * output view, in[] and q_offset as cg_op's. */
void cg_attn_grads(Cg *c, const Node *const n[3], const char *const out[3],
                   const char *const *in, const char *q_offset);
/* One cfrt_rmsnorm_grad_rows for the backward's rmsnorm_grad node n
 * (dx: its output) and the rows of its gain's gradient (rows: dy * xhat,
 * what rmsnorm then mul would make); in[] as cg_op's for n. */
void cg_rmsnorm_grad_rows(Cg *c, const Node *n, const char *dx, const char *rows,
                          const char *const *in);
/* One cfrt_matmul_add for matmul node n (not a summed one) and the add
 * that is its result's one reader: out, the add's output, = n's product
 * of in[0] and in[1] (as cg_op's) + addend, the add's other input. */
void cg_matmul_add(Cg *c, const Node *n, const char *out, const char *const *in,
                   const char *addend);
/* One cfrt_rope through a head view (cfrt_view_heads), for a rope node and
 * the head split before it (the split's input in, the rope's output out)
 * or the backward's rope_grad and the head merge after it (the rope's
 * input in, the merge's output out): the heads tensor between is never
 * made. q_offset as cg_op's for the rope. */
void cg_rope_heads(Cg *c, const Node *rope, const Node *heads, const char *out, const char *in,
                   const char *q_offset);
/* The comment naming node n and where it comes from; its text
 * "out = op(in, ...)". */
void cg_comment(Cg *c, const Node *n);
const char *cg_node_str(Cg *c, const Node *n);
/* cfrt_what: the tensors the next runtime calls work on (what, no quotes
 * in it) and the C expression of their slice (NULL: -1), for the trace. */
void cg_what(Cg *c, const char *what, const char *slice);
/* The static helpers every generated file starts with, for the ops of
 * the graph and of its backward graph, if any. */
void cg_helpers(Cg *c);
/* cg_driver.c: the driver's tensors of one kind, in its table order
 * (inputs 0, weights 1, outputs 2, output gradients 3, gradients 4); and
 * the header's NAME_x_SEED of every tensor the driver fills. */
Vec cg_table_part(Arena *a, const Graph *g, int kind);
/* The seed of the k-th tensor of that table, of kind: NAME_x_SEED, or 0
 * for a tensor the passes write. */
unsigned cg_table_seed(int kind, int k);
void cg_fill_seeds(Cg *c);
/* The macros of the saved activations' offsets (CF_SAVED_x) and the
 * size query NAME_saved_bytes (NAME_ref_saved_bytes), when g has a
 * backward graph: per rank, or whole tensors in the reference. */
void cg_saved_defines(Cg *c);
/* Does forward graph g save an attention's log-sum-exp (Node.lse)? */
int cg_saves_lse(const Graph *g);
/* Bytes of the saved buffer this program (whole: the reference) uses. */
int64_t cg_saved_bytes(const Cg *c);
/* Declares the view local of every value used[id] marks, at its place:
 * its io or weight pointer, or the workspace at the named offset
 * (cg_ws_name). */
void cg_views(Cg *c, const char *used, const int64_t *off);
void cg_view(Cg *c, const Value *v);
/* cfrt_where naming the function fn, then a check of every io tensor
 * used[id] marks (with the bytes a rank holds of it, its role and name)
 * and of the workspace: a wrong argument fails naming the tensor. */
void cg_check_args(Cg *c, const char *fn, const char *used, int64_t wsbytes);
/* The macro naming a value's workspace offset. */
const char *cg_ws_name(Cg *c, const Value *v);

#endif
