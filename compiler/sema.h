/* sema.h: what the files of semantic analysis share, and nothing else
 * includes: the Sema context, scopes and their symbols, the op call being
 * checked, and the functions one sema_*.c file offers the others.
 *
 *   sema.c        the pass: the model, its outputs, temporaries
 *   sema_call.c   statements, tensor expressions, op calls, layer
 *                 instances, repeat (one recursion: a layer call runs the
 *                 layer's statements)
 *   sema_infer.c  shape and distribution inference, one function per op
 *   sema_sched.c  the schedule section: choices, keys, the default
 *   sema_recompute.c  `recompute`: tensors and layer instances
 *   sema_fuse.c   silu(A) * B made one swiglu(A, B) node
 *   sema_node.c   nodes and values made and committed, dims found, splits
 *                 checked, number literals, model tensors: below the four
 *                 above, which all use it
 *   sema_names.c  scopes, name lookup, the text of messages
 *   sema_size.c   size expressions (overflow-checked), sizes, groups, -D
 * Each file calls only files below it in this list. */
#ifndef SEMA_H
#define SEMA_H

#include "cf.h"

typedef enum SymKind { SY_SIZE, SY_GROUP, SY_VALUE } SymKind;

typedef struct Sym {
	const char *name; /* as written */
	SymKind kind;
	Loc loc;
	int bad; /* its definition failed: uses stay quiet */
	union {
		Size *size;   /* SY_SIZE */
		Group *group; /* SY_GROUP */
		Value *val;   /* SY_VALUE */
	} u;
} Sym;

typedef struct LayerInfo {
	const Decl *decl;
	int count;  /* instances so far: the next one's number */
	int failed; /* an instance had errors: later calls stay quiet */
	int busy;   /* being instantiated: a call now is recursion */
} LayerInfo;

/* A layer instance a body made: its nodes [first, end) of the graph,
 * nested instances' included, and its result. */
typedef struct Inst {
	const LayerInfo *layer;
	int first, end;
	Value *ret;
} Inst;

/* The names one body sees. A layer sees its own names, then only the
 * sizes and groups of the model. */
typedef struct Scope {
	Vec syms;             /* of Sym* */
	struct Scope *model;  /* layers: the model's scope */
	const Decl *decl;     /* whose body this is */
	LayerInfo *layer;     /* NULL in the model */
	const char *path;     /* instance path "block0.mlp1"; NULL in the model */
	Value *ret;           /* layers: the returned value */
	Vec insts;            /* of Inst*: the layer instances it made */
} Scope;

/* A tensor named inside a layer instance: "layer.t" schedule keys. */
typedef struct Bind {
	const LayerInfo *layer;
	const char *name;
	Value *v;
} Bind;

typedef struct Sema {
	Arena *a;
	Diag *d;
	Options *o;
	Graph *g;
	const Decl *model;
	Scope *ms;     /* the model's scope */
	Vec layers;    /* of LayerInfo* */
	Vec stack;     /* of LayerInfo*: instantiations under way */
	Vec binds;     /* of Bind* */
	int forcing;   /* checking --schedule: its locations are not ours */
	int nerr0;     /* errors before sema */
	int depth;     /* nesting of expr and eval */
	int deep;      /* told that this statement nests too deep */
	long nops;     /* nodes made so far: at most MAXOPS */
	int toomany;   /* 1: MAXOPS crossed (sema stops), 2: and reported */
} Sema;

/* An op application being checked. */
typedef struct Call {
	const Expr *e;           /* the whole expression: the node's loc */
	const char *fn;          /* the name for messages */
	Scope *sc;
	int nargs;
	const Expr *arg[MAXIN];  /* argument expressions */
	Value *v[MAXIN];         /* the tensor arguments */
} Call;

/* ---- sema_node.c: values, nodes, lookups ---- */
/* Makes a node; past sema_max_ops nodes sema stops (S->toomany). */
Node *sema_node_new(Sema *S, const Scope *sc, OpKind op, Loc loc);
long sema_max_ops(const Sema *S);
/* A result value shaped like `like` (or blank), not yet in the graph. */
Value *sema_proto(Sema *S, const Value *like);
/* Adds node n defining v (named name, or computed by e) to the graph;
 * NULL when v is too large. */
Value *sema_commit(Sema *S, Node *n, Value *v, const char *name, const Expr *e);
/* Dimension e of v (named name, or the value of expression x): a unique
 * label or a position; -1 after an error. */
int sema_find_dim(Sema *S, const Value *v, const Expr *e, const char *name, const Expr *x);
/* Does dim d of v (named name, or computed by x) divide over g? */
int sema_divides(Sema *S, const Value *v, int d, const Group *g, Loc loc, const char *name,
                 const Expr *x);
/* The model's tensor named name (at loc), or NULL (reported). */
Value *sema_model_tensor(Sema *S, const char *name, Loc loc);
/* A number argument: a literal, maybe negated. */
int sema_number(const Expr *e, double *f);

/* ---- sema_names.c ---- */
/* e as the user wrote it when it sits on one line, else printed. */
const char *sema_text(Sema *S, const Expr *e);
/* A tensor for messages: its name, or the text of its expression. */
const char *sema_desc(Sema *S, const char *name, const Expr *e);
const char *sema_shape_str(Sema *S, const Value *v);
/* "replicated", "split along S over tp", "a partial sum over tp" */
const char *sema_dist_desc(Sema *S, const Value *v);
/* Keeps the closer of *best and cand as a "did you mean" for name. */
void sema_closer(const char *name, const char *cand, const char **best, int *bestd);
Sym *sema_scope_find(const Scope *sc, const char *name);
Sym *sema_lookup(const Scope *sc, const char *name);
LayerInfo *sema_find_layer(Sema *S, const char *name);
void sema_unknown(Sema *S, const Scope *sc, Loc loc, const char *name);
/* Adds a name to sc; a duplicate is reported and gets a Sym that nothing
 * can find. */
Sym *sema_define(Sema *S, Scope *sc, const char *name, Loc loc, SymKind k);
const char *sema_qualify(Sema *S, const Scope *sc, const char *name);
const char *sema_kind_noun(SymKind k);

/* ---- sema_size.c ---- */
/* Evaluates a size expression with int64 and overflow checks. */
int sema_eval(Sema *S, Scope *sc, const Expr *e, int64_t *out);
/* Told once per statement: every operand at the limit is too deep. */
int sema_too_deep(Sema *S, const Expr *e);
void sema_def_size(Sema *S, Scope *sc, const Stmt *st);
void sema_def_group(Sema *S, Scope *sc, const Stmt *st);
void sema_check_defines(Sema *S);

/* ---- sema_call.c ---- */
void sema_stmt(Sema *S, Scope *sc, const Stmt *st);
/* A tensor expression; NULL after errors (reported). */
Value *sema_expr(Sema *S, Scope *sc, const Expr *e);
/* Statement kinds that cannot appear in a layer, reported once per layer. */
void sema_check_layer(Sema *S, LayerInfo *li);

/* ---- sema_infer.c ---- */
/* The result of the checked call c (tensor arguments in c->v, same dtype)
 * for the pending node n (inputs set), not yet committed; NULL after
 * errors. */
Value *sema_infer(Sema *S, Call *c, Node *n);

/* ---- sema_recompute.c ---- */
/* Records layer instance li that caller made: its nodes from first to
 * the graph's end now, and its result. */
void sema_instance(Sema *S, Scope *caller, const LayerInfo *li, int first, Value *ret);
/* recompute a, b; (marks Value.recompute) */
void sema_recompute(Sema *S, Scope *sc, const Stmt *st);
/* After the outputs: recompute of an output or of a saved tensor. */
void sema_recompute_check(Sema *S);
/* After the temporaries are named: the tensors --memory chose. */
void sema_recompute_chosen(Sema *S);

/* ---- sema_fuse.c ---- */
/* After the statements, before the temporaries are named: silu(A) * B
 * and B * silu(A) of an unnamed silu result become swiglu(A, B). */
void sema_fuse(Sema *S);

/* ---- sema_sched.c ---- */
/* Every collective's schedule choice (Node.sched), checked. */
void sema_schedules(Sema *S);
/* sema_names.c: every name that reaches the generated C may (cnames.c). */
void sema_cnames(Sema *S);

#endif
