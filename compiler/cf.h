/* cf.h: the types shared by every pass of the CommFuse compiler.
 *
 * Pipeline (see main.c): source -> parse (grammar/) -> AST -> sema -> graph
 * -> lower -> verify -> emit. One Arena owns every node and string of a
 * compilation; nothing here is freed on its own. */
#ifndef CF_H
#define CF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CF_VERSION "0.1.0"

enum {
	MAXDIM = 6,     /* most dimensions a tensor may have */
	MAXIN = 8,      /* most inputs of one op (the attention gradients'
	                 * take 6; a pack of coalesced collectives MAXIN) */
	MAXERR = 20,    /* diagnostics printed before giving up */
	MAXNEST = 256,  /* deepest bracket nesting the scanner accepts */
	MAXIDENT = 255, /* longest identifier */
	MAXGROUP = 4096, /* largest group of ranks */
	MAXGROUPS = 8,   /* most groups of a model (cfrt.h: CFRT_MAX_GROUPS) */
	MAXJOB = 1 << 24, /* most ranks of a model's job: the groups' grid */
	MAXOPS = 20000,  /* most ops a model makes with its layer calls and
	                  * repeats inlined, unless --max-ops says otherwise
	                  * (docs/LANGUAGE.md, Layers) */
	MAXOPS_OPTION = 10000000 /* the most --max-ops may allow */
};

/* ---- arena (util.c) ---- */
typedef struct Arena Arena;
Arena *arena_new(void);
void *arena_alloc(Arena *a, size_t n); /* zeroed */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void arena_free(Arena *a);
/* The scratch arena of a: passes take their temporary memory from it
 * between a mark and its release; it is freed with a. */
Arena *arena_scratch(Arena *a);
typedef struct ArenaMark {
	void *block;
	size_t used;
} ArenaMark;
ArenaMark arena_mark(Arena *a);
/* Frees everything allocated since m. */
void arena_release(Arena *a, ArenaMark m);
/* p, an array of *cap elements of size sz of which n are used, with room
 * for one more: a copy of twice the capacity (first at the start) when
 * full; the old array stays behind in the arena. */
void *arena_grow(Arena *a, void *p, int n, int *cap, int first, size_t sz);

/* A growable array of pointers living in an arena. */
typedef struct Vec {
	void **v;
	int n, cap;
} Vec;
void vec_push(Arena *a, Vec *v, void *p);

/* A map from strings to pointers living in an arena (open addressing;
 * it grows). Zero-initialised, it is empty. strmap_put adds key with val
 * (not NULL) unless the key is there: it returns the value the key had,
 * or NULL when it added it. Keys are not copied. */
typedef struct StrMap {
	const char **key;
	void **val;
	size_t n, cap;
} StrMap;
void *strmap_get(const StrMap *m, const char *key);
void *strmap_put(Arena *a, StrMap *m, const char *key, void *val);

_Noreturn void die_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)

/* ---- diagnostics (diag.c) ---- */
typedef struct Loc {
	int line, col;   /* 1-based start */
	int eline, ecol; /* end (inclusive) */
} Loc;

typedef struct Src {
	const char *name; /* "<stdin>" for standard input */
	const char *text; /* NUL-terminated copy of the input */
	size_t len;
} Src;

/* How diagnostics are written: text as they come (file:line:col, the
 * source line, a caret), or kept and written by diag_flush as GCC's JSON
 * (-fdiagnostics-format=json) or as a SARIF 2.1.0 log. */
typedef enum DiagFormat { DF_TEXT, DF_JSON, DF_SARIF } DiagFormat;

/* One kept diagnostic (DF_JSON, DF_SARIF). */
typedef struct DiagRec {
	const char *kind; /* "error", "note" */
	char *msg;        /* malloc'd */
	Loc loc;          /* line 0: no position */
} DiagRec;

typedef struct Diag {
	const Src *src;
	FILE *out;  /* where messages go (stderr by default) */
	int nerr;   /* errors reported, counted past MAXERR too */
	int fatal;  /* set once an error stops the current phase */
	DiagFormat format;
	DiagRec *rec;     /* kept ones, in order */
	int nrec, caprec;
	/* a long pass's progress (diag_tick), or NULL: the driver's */
	void (*tick)(void *arg, const char *what, int done, int total);
	void *tickarg;
} Diag;

void diag_init(Diag *d, const Src *src, FILE *out);
void diag_error(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A warning: said as an error is, and counted as none. */
void diag_warning(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Line `line` (1-based) of s, not NUL-terminated: *len bytes; NULL past
 * the end. */
const char *diag_line(const Src *s, int line, size_t *len);
/* The length of the well-formed UTF-8 sequence at s (2 to 4 bytes), or 0
 * (ASCII, or bytes that are no UTF-8). */
int diag_utf8_len(const char *s);
/* A long pass has done done of total collectives (what: "verify"). */
void diag_tick(Diag *d, const char *what, int done, int total);
/* An error with no position in the source (command line, I/O). */
void diag_plain(Diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A note with no position (what a library said); not an error. */
void diag_plain_note(Diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* DF_JSON, DF_SARIF: writes every kept diagnostic to d->out (an empty
 * list when there is none) and frees them; DF_TEXT: nothing. */
void diag_flush(Diag *d);

/* ---- element types ---- */
#define DTYPES(X) X(F32, "f32", 4) X(F64, "f64", 8) X(BF16, "bf16", 2) X(F16, "f16", 2)
typedef enum DType {
	DT_NONE,
#define X(id, s, n) DT_##id,
	DTYPES(X)
#undef X
	NDTYPE
} DType;
extern const char *const dtype_name[NDTYPE];
extern const int dtype_size[NDTYPE];

/* ---- AST (ast.c builds it; the grammar actions call ast_*) ---- */
typedef struct Parse Parse;
typedef enum ExprKind {
	E_INT,   /* ival */
	E_FLOAT, /* fval */
	E_NAME,  /* name */
	E_BIN,   /* bin: op is one of + - * / % ^ @ */
	E_NEG,   /* un */
	E_TRANS, /* un: the postfix .T of a matmul operand */
	E_CALL,  /* call: name(args); args may hold E_KWARG */
	E_KWARG  /* kw: name = value, only inside schedule arguments */
} ExprKind;

typedef struct Expr Expr;
struct Expr {
	ExprKind kind;
	Loc loc;
	union {
		int64_t ival;
		double fval;
		const char *name;
		struct { int op; Expr *l, *r; } bin;
		Expr *un;
		struct { const char *name; Loc nloc; Vec args; } call; /* of Expr* */
		struct { const char *name; Expr *val; } kw;
	} u;
};

typedef enum Role { R_IN, R_WEIGHT, R_ACT, R_OUT, NROLE } Role;
extern const char *const role_name[NROLE]; /* "in", "weight", "act", "out" */

typedef enum StmtKind {
	S_SIZE,   /* def: size NAME = val */
	S_GROUP,  /* def: group NAME = val */
	S_TYPE,   /* type: the default element type */
	S_TENSOR, /* tensor: in/weight declaration */
	S_ASSIGN, /* def: NAME = val */
	S_OUT,    /* names: out a, b; */
	S_SAVE,   /* names: save xa; (gathered tensors the backward keeps) */
	S_RECOMPUTE, /* names: recompute o, blk; (tensors, or layers called
	              * above, that the backward computes again) */
	S_RETURN, /* ret */
	S_SCHED   /* sched: one schedule entry */
} StmtKind;

typedef struct SchedEntry {
	const char *key;   /* NULL for `default`; "t" or "layer.t" */
	Loc kloc;
	Expr *choice;      /* E_NAME or E_CALL: vanilla, slice(k), fuse(...), auto;
	                    * a setting: its value */
	int set;           /* a setting `NAME = value;` (coalesce), key its name */
} SchedEntry;

typedef struct Stmt {
	StmtKind kind;
	Loc loc;
	union {
		struct { const char *name; Loc nloc; Expr *val; } def;
		struct { DType t; } type;
		struct {
			Role role;
			const char *name;
			Loc nloc;
			DType dtype;       /* DT_NONE: the model's type */
			Vec shape;         /* of Expr* */
			Vec splits;        /* `split DIM over GROUP, ...`: of Expr*,
			                    * each a ':' pair of (dim: an E_NAME
			                    * label or E_INT, group: an E_NAME) */
			Vec gsplits;       /* `grad split DIM over GROUP, ...`, kept
			                    * alike */
		} tensor;
		Vec names;             /* S_OUT, S_SAVE, S_RECOMPUTE: of Expr* (E_NAME) */
		Expr *ret;             /* S_RETURN */
		SchedEntry sched;
	} u;
} Stmt;

typedef enum DeclKind { D_MODEL, D_LAYER } DeclKind;

typedef struct Decl {
	DeclKind kind;
	const char *name;
	Loc loc, nloc;
	Vec params; /* D_LAYER: of Expr* (E_NAME) */
	Vec body;   /* of Stmt* */
} Decl;

typedef struct Program {
	Vec decls; /* of Decl* */
} Program;

Expr *ast_int(Arena *a, Loc l, int64_t v);
Expr *ast_float(Arena *a, Loc l, double v);
Expr *ast_name(Arena *a, Loc l, const char *s);
Expr *ast_bin(Arena *a, Loc l, int op, Expr *x, Expr *y);
Expr *ast_un(Arena *a, Loc l, ExprKind k, Expr *x);
Expr *ast_call(Arena *a, Loc l, Expr *name, Vec args);
Expr *ast_kwarg(Arena *a, Loc l, Expr *name, Expr *val);
Stmt *ast_def(Arena *a, Loc l, StmtKind k, Expr *name, Expr *val);
Stmt *ast_type(Arena *a, Loc l, DType t);
/* splits and gsplits (the gradient's): lists of E_BIN ':' of
 * (dimension, group name) */
Stmt *ast_tensor(Arena *a, Loc l, Role r, Expr *name, DType t, Vec shape,
                 Vec splits, Vec gsplits);
Stmt *ast_names(Arena *a, Loc l, StmtKind k, Vec names); /* out, save, recompute */
Stmt *ast_return(Arena *a, Loc l, Expr *e);
Stmt *ast_sched(Arena *a, Loc l, Expr *key, Expr *choice);
Stmt *ast_sched_set(Arena *a, Loc l, Expr *name, Expr *val); /* coalesce = BYTES */
Decl *ast_decl(Arena *a, Loc l, DeclKind k, Expr *name, Vec params, Vec body);
Vec ast_list(Arena *a, Vec v, void *p); /* push and return */
Vec ast_concat(Arena *a, Vec v, Vec w);  /* v with w's items appended */
Expr *ast_member(Parse *p, Loc l, Expr *e, Expr *name); /* e.T */
void ast_dump(FILE *f, const Program *p);
void ast_print_expr(FILE *f, const Expr *e);

/* ---- parsing (grammar/, driven from parse.c) ---- */
struct Parse {
	Arena *arena;
	Diag *diag;
	Program *prog;
	void *scanner;  /* the reentrant flex scanner */
	int depth;      /* open brackets, checked against MAXNEST */
	int stop;       /* set by the scanner to end the parse quietly */
	int line, col;  /* scanner position of the next character */
	Loc last;       /* the token before the current one */
	Loc cur;        /* the current token */
	Loc cstart;     /* start of an open block comment */
	int start;      /* token the scanner returns first (0: none) */
	Expr *choice;   /* parse_choice's result */
};

/* Parses src into a Program; returns NULL when it had errors. */
Program *parse_program(Arena *a, Diag *d, const Src *src);
/* Parses a lone schedule choice such as "fuse(bidir, m = 2)" (the CLI's
 * --schedule); NULL after errors. */
Expr *parse_choice(Arena *a, Diag *d, const Src *src);

/* ---- ops ---- */
typedef enum OpClass {
	CL_LEAF, CL_EW, CL_ROW, CL_MM, CL_ATTN, CL_ATTN_GRAD, CL_HEADS, CL_SCAN, CL_SUM, CL_COLL,
	CL_PACK /* coalesce.c's copies into and out of a packed buffer: local nowhere */
} OpClass;
typedef enum OpKind {
#define OP(id, name, lo, hi, cls, tensors, infer, emit, vjp) OP_##id,
#include "ops.def"
#undef OP
	NOP
} OpKind;
typedef struct OpInfo {
	const char *name;
	int minarg, maxarg;
	OpClass cls;
	int tensors; /* leading arguments that are tensors; -1: all */
	int spec;    /* a spec may call it (leaves and the backward's own
	              * *_GRAD ops may not) */
} OpInfo;
extern const OpInfo op_info[NOP];
int op_lookup(const char *name); /* OpKind, or -1 */
/* attention or one of its gradients: q is input 0, and a causal one
 * takes the global row of its first query (a query offset) */
int op_attn(OpKind op);

/* ---- dependency graph (sema.c builds it, graph.c analyses it) ---- */
typedef struct Group {
	const char *name;
	int size;
	int id;         /* index in Graph.groups: the axis of the job's grid */
	Loc loc;
	int overridden; /* set from -D */
} Group;

typedef struct Size {
	const char *name;
	int64_t val;
	Loc loc;
	int overridden; /* set from -D */
} Size;

/* How a value is spread over one group. */
typedef enum DistKind {
	DI_REPL,    /* every rank holds the whole tensor */
	DI_SPLIT,   /* rank r holds slice r (of group->size) along dim */
	DI_PARTIAL  /* every rank holds a whole-shaped partial sum */
} DistKind;

typedef struct DistPart {
	DistKind kind;
	int dim;      /* DI_SPLIT: the split dimension */
	Group *group; /* DI_SPLIT, DI_PARTIAL */
} DistPart;

/* How a value is spread over the job, the grid of the groups: its part
 * over each group, by Group.id; replicated over every group it names no
 * part for (a zeroed Dist is replicated everywhere). Each group's part
 * follows the rules of LANGUAGE.md on its own; a dimension is split over
 * at most one group. */
typedef struct Dist {
	DistPart p[MAXGROUPS];
} Dist;

typedef struct Node Node;

/* Where a tensor lives beyond what its role says: grad.c sets it when a
 * backward pass is asked for; otherwise every value is HO_ROLE. */
/* Why the backward computes a forward value again (Value.recompute). */
typedef enum Recompute {
	RC_NONE,  /* saved (or gathered again, or read where its role puts it) */
	RC_NAMED, /* `recompute t;` names it */
	RC_LAYER  /* computed inside a layer instance that `recompute LAYER;`
	           * names, but not its result: the next layer's checkpoint */
} Recompute;

typedef enum Home {
	HO_ROLE,  /* by its role: the io struct (in, out), the weights
	           * struct, or the workspace (act) */
	HO_SAVED, /* the saved-activation buffer, Value.soff bytes in
	           * (Value.ref_soff in the serial reference): a forward
	           * activation the backward reads */
	HO_GRADS, /* the grads struct: a gradient of an output (an input
	           * of the backward) or of an in or weight (its result) */
	HO_ACC    /* --accumulate: the grads struct's weight gradient as the
	           * backward finds it (an input of the backward, at the
	           * same address as its result Value.acc) */
} Home;

/* A graph edge: one tensor value. */
typedef struct Value {
	int id;             /* index in Graph.values */
	const char *name;   /* source name, or "t<N>" for a temporary */
	const char *expr;   /* a temporary: its expression as written, which
	                     * messages name instead of "t<N>"; else NULL */
	DType dtype;
	int ndim;
	int64_t shape[MAXDIM];       /* global shape */
	const char *label[MAXDIM];   /* dim labels (size names) or NULL */
	Dist dist;
	int keep;           /* `save`: a gathered tensor that the forward
	                     * saves whole (else the backward gathers it
	                     * again from its saved shard) */
	int recompute;      /* RC_*: with a backward pass, the forward does
	                     * not save it and the backward computes it again
	                     * from what it reads (grad.c) */
	Loc rcloc;          /* RC_NAMED, RC_LAYER: the name in `recompute` */
	Dist gdist;         /* a weight's gradient's spread when the spec
	                     * gives one (`grad split D over G`, ZeRO): the
	                     * weight's splits and those; else replicated
	                     * everywhere, and the gradient is spread like
	                     * the weight */
	Role role;
	Node *def;          /* producing node (its out; or the lse of an
	                     * attention node, its second result) */
	Vec uses;           /* of Node* */
	Loc loc;
	Loc nloc;           /* where its name is written (or loc) */
	const char *outname; /* an output: the name `out` gives it, which the
	                      * generated C uses (else NULL) */
	Home home;
	int64_t soff, ref_soff; /* HO_SAVED: offsets in the saved buffer */
	const struct Value *acc; /* HO_ACC: the weight gradient it is the old
	                          * value of */
} Value;

/* Attributes, by op kind. */
typedef struct Node {
	int id;             /* index in Graph.nodes: a topological order */
	OpKind op;
	Value *in[MAXIN];
	int nin;
	Value *out;
	Loc loc;
	const char *layer;  /* instance name ("block2") or NULL in the model */
	const char *lname;  /* layer definition name, NULL in the model */
	union {
		struct { int ta, tb, sum; } mm;    /* OP_MATMUL: transposes; sum
			(backward only): a weight gradient a.T @ b of two
			batched operands, summed over the leading dims */
		double scale;                      /* OP_SCALE */
		int rsub;                          /* OP_SUB: in[1] - in[0] (the
			spec wrote the broadcast operand first), else in[0] - in[1] */
		double eps;                        /* norms and their grads */
		struct { double base; int dim; } rope; /* OP_ROPE, OP_ROPE_GRAD:
			dim holds the positions (sema: the dim labelled S) */
		int heads;                         /* OP_SPLIT_HEADS */
		int causal;                        /* OP_ATTENTION, OP_ATTN_D* */
		struct { int dim; double decay; } scan; /* OP_SCAN, OP_SCAN_GRAD */
		/* OP_PACK (coalesce.c): input j's elements go to elements
		 * off[j] .. of the 1-d result, the rest (padding) is zeroed;
		 * OP_UNPACK: the result is elements at .. of the input, which
		 * is the reduction of a pack whose input slot is */
		struct { const int64_t *off; int64_t at; int slot; } pack;
		struct { int dim, dim2; Group *group; } coll; /* collectives:
			dim: all_gather gathers / reduce_scatter scatters along;
			all_to_all: dim is the input's split dim, dim2 the output's */
	} a;
	/* Slice-locality (graph_fill_locality): bit d of local is set when
	 * slice s of the output along dim d depends only on slice s of each
	 * input along inmap[i][d] (or on the whole input i when inmap[i][d]
	 * is -1, such as the weight of a row-sliced matmul). */
	unsigned local;
	int inmap[MAXIN][MAXDIM];
	struct SchedChoice *sched; /* collectives: the schedule asked for;
	                            * &Graph.defsched when none names it */
	Value *lse;  /* OP_ATTENTION of a model with a backward (grad.c): a
	              * second result, the log-sum-exp of each query row of
	              * the scaled, masked scores ([..., H, Sq], out's dims
	              * but the last, spread alike; f32, f64 for f64), saved
	              * for the backward, which reads it; else NULL */
} Node;

/* n takes the global row of the first element of its input 0 along that
 * input's dim op_pos_dim (the plan's qstart): causal attention and its
 * gradients (the query offset, dim ndim - 2), rope and its gradient (the
 * position, the dim sema chose). op_causal_shift: what a causal
 * attention (or its gradient) adds to its query offset, Sk - Sq (the
 * mask is aligned bottom-right: query i sees keys j <= i + Sk - Sq);
 * 0 for every other node. */
int op_pos(const Node *n);
int op_pos_dim(const Node *n);
int64_t op_causal_shift(const Node *n);

typedef enum SchedKind { SK_VANILLA, SK_SLICE, SK_FUSE, SK_AUTO } SchedKind;
typedef enum Topo { TP_RING, TP_BIDIR, TP_PAIRWISE, NTOPO } Topo;
extern const char *const topo_name[NTOPO]; /* "ring", "bidir", "pairwise" */

/* Who made a choice: the rules (schedrule.c) hold the user to a choice
 * written, and adapt the compiler's own to each collective. */
typedef enum SchedFrom {
	SF_BUILTIN, /* the built-in default fuse(ring): the compiler's own */
	SF_DEFAULT, /* a default entry or --schedule: every collective */
	SF_NAMED,   /* an entry naming its collectives ("y", "layer.y") */
	SF_TWIN     /* a backward collective's: its forward twin's choice, which
	             * the rules adapt as they adapt the compiler's own */
} SchedFrom;

typedef struct SchedChoice {
	SchedKind kind;
	int k;          /* SK_SLICE: chunks */
	Topo topo;      /* SK_FUSE */
	int m;          /* SK_FUSE: granularity, slices = m * N */
	int query;      /* SK_FUSE: split = query */
	SchedFrom from;
	Loc loc;
} SchedChoice;
/* sched.c: the lanes of a step: m (2 * m for bidir) under fuse, k under
 * slice(k), else 1; a collective's dimension is cut into N times as many
 * slices. */
int sched_lanes(const SchedChoice *s);

/* What region discovery found for a collective (lower.c). */
typedef struct SchedRegion {
	int ops;       /* ops fused with it: compute to hide its transfers under */
	int post;      /* of those, the ops it feeds */
	int attention; /* the region feeding it reaches an attention */
} SchedRegion;

/* How a collective is scheduled (schedrule.c). */
typedef struct SchedUse {
	SchedChoice how;  /* the choice used */
	int64_t nslices;  /* its dimension is cut into */
	int dim;          /* that dimension; all_reduce: the first that divides
	                   * (region.c picks among those the largest region) */
	const char *note; /* for --explain: why how is not what was asked */
	const char *err;  /* a choice written for it cannot apply: why */
} SchedUse;

/* schedrule.c: every schedule rule in one place. The choice that
 * collective n uses for the one asked (want): auto resolved, a choice
 * that does not apply replaced by the nearest one that does (with a
 * note), or err set when the user wrote one that cannot apply. rg is
 * NULL before region discovery (sema's check; lowering before it looks
 * for regions), then what it found (auto, split = query and the gather
 * half of an all_reduce depend on the region). */
SchedUse sched_use(Arena *a, const Node *n, const SchedChoice *want, const SchedRegion *rg);

typedef struct Graph {
	Arena *arena;
	const char *name;   /* model name */
	const char *file;   /* source file name */
	DType dtype;        /* the model's default type */
	Vec sizes;          /* of Size* */
	Vec groups;         /* of Group* */
	Vec values;         /* of Value*: every node's out, then (grad.c) the
	                     * attention nodes' lse */
	Vec nodes;          /* of Node*, topological */
	Vec inputs;         /* of Value*: in declarations */
	Vec weights;        /* of Value* */
	Vec outputs;        /* of Value* */
	SchedChoice defsched;
	/* training (grad.c): on a forward graph, the backward graph (or
	 * NULL) and the values saved for it; on a backward graph, its
	 * forward */
	struct Graph *bwd, *fwd;
	int accumulate;     /* on a backward graph: weight gradients are
	                     * added to the grads struct's (--accumulate) */
	Vec saved;          /* of Value*: HO_SAVED values, in buffer order */
	/* coalescing (coalesce.c): the threshold the schedule section sets
	 * (`coalesce = BYTES;`, at coalesce_loc; line 0: none); after the pass,
	 * the packs it made (of Pack*) and why the others were not packed */
	int64_t coalesce;
	Loc coalesce_loc;
	/* the memory bound the schedule section sets (`memory = BYTES;`,
	 * per rank, at memory_loc; line 0: none): cfc's --memory */
	int64_t memory;
	Loc memory_loc;
	Vec packs;
	Vec unpacked;       /* of CoalesceNote* */
	int elided;         /* collectives over groups of one taken out
	                     * (elide.c) */
	int64_t savedbytes, ref_savedbytes; /* the saved buffer per rank,
	                                     * and whole (reference) */
	/* with a backward, the plan (plan.c) may place workspace tensors in
	 * the saved buffer's bytes while no saved tensor is live there: on
	 * the forward graph before the forward writes them, on the backward
	 * graph after the backward's last read of them (pipeline.c sets it:
	 * the forward's always, the backward's unless --keep-saved) */
	int saved_ws;
} Graph;

/* Command-line size overrides. */
typedef struct Define {
	const char *name;
	int64_t val;
	int used;
} Define;

typedef struct Options {
	Define *defs;
	int ndefs;
	Expr *force;   /* --schedule: replaces every schedule choice, or NULL */
	DType type;    /* --type: replaces the model's element type, or DT_NONE */
	long max_ops;  /* --max-ops: most ops of the model; 0: MAXOPS */
	const char **recompute; /* --memory's choice: tensors (by name, as the
	                         * graph lists them) the backward recomputes */
	int nrecompute;
} Options;

/* ---- coalesce.c: small collectives packed into one transfer ---- */
/* The threshold when neither the spec nor --coalesce gives one, bytes
 * (docs/LANGUAGE.md, "Coalescing"); the largest one accepted. */
#define COALESCE_DEFAULT ((int64_t)1 << 20)
#define COALESCE_MAX ((int64_t)1 << 40)

/* One pack: the collectives coll replaced, each by its slot of the pack. */
typedef struct Pack {
	Node *pack;     /* OP_PACK: the members' inputs into one buffer */
	Node *coll;     /* the collective of that buffer */
	Node **unpack;  /* by slot: OP_UNPACK of the member's result */
	const char **was; /* by slot: the member collective, as written */
	const struct SchedChoice *was_sched; /* the members' schedule (coll's
	                                      * own differs for a fused one) */
	int n;
	int64_t bytes;  /* payload (the members' bytes, per rank) */
	int64_t padded; /* the packed buffer's bytes: a multiple of its slices */
} Pack;

/* A collective left alone, and why. */
typedef struct CoalesceNote {
	const Node *node;
	const char *why;
} CoalesceNote;

/* requires: a graph with locality (graph_fill_locality), not yet
 * scheduled. ensures: every small all_reduce that shares group, type,
 * spread and schedule with others ready close together is replaced by a
 * slot of a pack (pack, one all_reduce, unpack), packs of at most MAXIN
 * members and `bytes` payload; g->packs and g->unpacked say what was done;
 * locality refilled, graph_check holds. bytes: the threshold (0: off),
 * -1: the spec's (the forward's, for a backward graph) or the default. */
void coalesce_graph(Graph *g, int64_t bytes);
/* The threshold coalesce_graph uses for g given the --coalesce value. */
int64_t coalesce_bytes(const Graph *g, int64_t bytes);
/* The pack whose collective is n, or NULL. */
const Pack *coalesce_pack_of(const Graph *g, const Node *n);
/* The explanation lines of g's coalescing (--explain). */
void coalesce_explain(FILE *f, const Graph *g);

/* cnames.c: the C spelling of a value's name (dots as underscores), and
 * why a name may not reach the C (NULL: it may), for a tensor of model
 * `model` and for a model. */
const char *cname_of(Arena *a, const char *name);
/* The C spelling of value v: that of the name `out` gives it, or of its
 * name. */
const char *value_cname(Arena *a, const Value *v);
const char *cname_refused(Arena *a, const char *name, const char *model);
const char *cname_model_refused(Arena *a, const char *name);

/* sema.c: checks the program and builds the graph of its model;
 * NULL after errors (all reported). */
Graph *sema_build(Arena *a, Diag *d, const Program *p, Options *o);

/* grad.c: the backward graph of g, set as g->bwd: inputs the gradients
 * of g's outputs, the weights, the inputs and saved activations it reads
 * (marked HO_SAVED in g); results the gradients of every in and weight,
 * each spread like its tensor. NULL after errors (an op with no backward
 * rule, a gradient name taken), all reported. requires: graph facts
 * (graph_fill_locality) of g. */
Graph *grad_build(Graph *g, Diag *d, int accumulate);

/* graph.c */
/* Adds node n, defining v, to g (after every node it reads); returns v. */
Value *graph_add(Arena *a, Graph *g, Node *n, Value *v);
void graph_fill_locality(Graph *g);
int graph_elide_group1(Graph *g); /* elide.c */
int graph_sum_dim(const Node *n, int i, int d);
void graph_check(const Graph *g); /* internal invariants; dies on failure */
void graph_dump(FILE *f, const Graph *g);
/* The distribution rules of LANGUAGE.md that sema (with messages) and
 * grad.c share: 0 when they refuse. graph_dist_mm takes the operands'
 * dists with their transposes applied (dims counted in the transposed
 * shapes, an of a's dims, bn of b's); graph_dist_ew the larger operand
 * first, b's split dim already moved into a's dims. */
int graph_dist_mm(Dist a, int an, Dist b, int bn, Dist *r, int *clash);
int graph_dist_ew(OpKind op, Dist a, Dist b, Dist *r, int *clash);
/* (clash, when not NULL, gets the dim that two groups would split where
 * every group's part alone is fine, which they refuse too; else -1.) */
int graph_dist_eq(Dist a, Dist b);
/* graph_dist_eq on every group of more than one rank: a part over a group
 * of one is the whole tensor, whatever its kind (elide.c leaves such parts
 * where a reader read its input gathered or reduced) */
int graph_dist_same(Dist a, Dist b);
/* Whether values a and b are of one type and shape, and a rank holds the
 * same elements of each (graph_dist_same): one's storage, element for
 * element, is laid out as the other's. */
int graph_value_same(const Value *a, const Value *b);
/* Dist helpers (graph.c). dist_one: kind k (dim, over g) over g alone. */
Dist dist_one(DistKind k, int dim, Group *g);
int dist_count(const Dist *d, DistKind k);      /* groups whose part is k */
int dist_is_repl(const Dist *d);                /* replicated over every group */
Group *dist_group(const Dist *d, DistKind k);   /* the first such group, or NULL */
Group *dist_split_group(const Dist *d, int dim); /* the group splitting dim, or NULL */
/* Moves every split: dim e to map[e] (-1: none; used by no split). */
void dist_remap(Dist *d, const int *map, int n);
/* A dimension that two groups split (else -1): no valid Dist has one. */
int dist_clash(const Dist *d);
int64_t value_rank_extent(const Value *v, int d); /* per-rank extent of dim d */
int64_t value_elems(const Value *v);              /* global element count */
int64_t value_rank_elems(const Value *v);         /* per-rank element count */
const char *dist_str(Arena *a, const Value *v);
/* v for messages: its name, or a temporary's expression ("a @ w") */
const char *value_what(const Value *v);
/* the name the user knows v by: the one `out` gives it, or its own */
const char *value_uname(const Value *v);
/* dim d's label when it names only d, else its position ("1") */
const char *value_dim_name(Arena *a, const Value *v, int d);
/* "fuse(bidir, m = 2)", "slice(4)", "vanilla", ... */
const char *graph_sched_str(Arena *a, const SchedChoice *s);
/* node n as a call: "matmul(xa.T, w1)", "all_gather(x, S)" */
const char *graph_node_str(Arena *a, const Node *n);

#endif
