/* sema.c: names, sizes, shapes and distributions: the AST becomes a graph.
 *
 * requires: a Program from parse_program (no syntax errors).
 * ensures: a Graph in topological order whose every Value has a dtype, a
 * positive shape, labels and a distribution; layers inlined at each call;
 * every collective has a schedule choice (Node.sched); or NULL, with every
 * error reported. graph_check backs the claim at the end of every build. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"

enum {
	MAXREPEAT = 10000, /* most layers one repeat() may stack */
	MAXSLICES = 1 << 20, /* largest slice(k) or m = K */
	MAXDEPTH = 1000      /* deepest expression (and layer) nesting: the stack */
};

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

/* The names one body sees. A layer sees its own names, then only the
 * sizes and groups of the model. */
typedef struct Scope {
	Vec syms;             /* of Sym* */
	struct Scope *model;  /* layers: the model's scope */
	const Decl *decl;     /* whose body this is */
	LayerInfo *layer;     /* NULL in the model */
	const char *path;     /* instance path "block0.mlp1"; NULL in the model */
	Value *ret;           /* layers: the returned value */
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

static Value *expr(Sema *S, Scope *sc, const Expr *e);
static void bind(Sema *S, const Scope *sc, const char *name, Value *v);

/* ---- text for messages ---- */

static const char *
expr_print(Sema *S, const Expr *e)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		die("open_memstream failed");
	ast_print_expr(f, e);
	fclose(f);
	const char *s = arena_strndup(S->a, buf, len);
	free(buf);
	return s;
}

/* The source span of e: binary operators carry their operator's loc. */
static Loc
span(const Expr *e)
{
	Loc l = e->loc, x;

	switch (e->kind) {
	case E_BIN:
		x = span(e->u.bin.l);
		l.line = x.line, l.col = x.col;
		x = span(e->u.bin.r);
		l.eline = x.eline, l.ecol = x.ecol;
		break;
	case E_TRANS:
		x = span(e->u.un);
		if (x.line < l.line || (x.line == l.line && x.col < l.col))
			l.line = x.line, l.col = x.col;
		break;
	default:
		break;
	}
	return l;
}

static int
balanced(const char *s, size_t n)
{
	int depth = 0;

	for (size_t i = 0; i < n && depth >= 0; i++)
		depth += (s[i] == '(') - (s[i] == ')');
	return depth == 0;
}

/* e as the user wrote it when it sits on one line, else printed. */
static const char *
text(Sema *S, const Expr *e)
{
	const Src *src = S->d->src;
	Loc l = span(e);
	const char *p;
	size_t len;

	if (S->forcing || !src || !src->text || l.line <= 0 || l.line != l.eline ||
	    l.col <= 0 || l.ecol < l.col || !(p = diag_line(src, l.line, &len)))
		return expr_print(S, e);
	size_t n = (size_t)(l.ecol - l.col + 1);
	if ((size_t)l.ecol > len || !balanced(p + l.col - 1, n))
		return expr_print(S, e);
	return arena_strndup(S->a, p + l.col - 1, n);
}

/* A tensor for messages: its name, or the text of its expression. */
static const char *
desc(Sema *S, const char *name, const Expr *e)
{
	return name ? name : text(S, e);
}

static const char *
shape_str(Sema *S, const Value *v)
{
	char buf[MAXDIM * 24 + 4];
	size_t n = 0;

	buf[n++] = '[';
	for (int d = 0; d < v->ndim; d++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", d ? "," : "",
		                      (long long)v->shape[d]);
	snprintf(buf + n, sizeof buf - n, "]");
	return arena_strdup(S->a, buf);
}

/* "replicated", "split along S over tp", "a partial sum over tp" */
static const char *
dist_desc(Sema *S, const Value *v)
{
	switch (v->dist.kind) {
	case DI_SPLIT:
		return arena_printf(S->a, "split along %s over %s",
		                    value_dim_name(S->a, v, v->dist.dim), v->dist.group->name);
	case DI_PARTIAL:
		return arena_printf(S->a, "a partial sum over %s", v->dist.group->name);
	default:
		return "replicated";
	}
}

static int
dist_eq(Dist a, Dist b)
{
	if (a.kind != b.kind)
		return 0;
	if (a.kind == DI_REPL)
		return 1;
	return a.group == b.group && (a.kind == DI_PARTIAL || a.dim == b.dim);
}

/* ---- names ---- */

static int
edit_distance(const char *a, const char *b)
{
	size_t n = strlen(b);
	int row[MAXIDENT + 2];

	if (n > MAXIDENT || strlen(a) > MAXIDENT)
		return INT_MAX;
	for (size_t j = 0; j <= n; j++)
		row[j] = (int)j;
	for (size_t i = 1; a[i - 1]; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= n; j++) {
			int up = row[j];
			int best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[n];
}

/* Keeps the closer of *best and cand as a "did you mean" for name. */
static void
closer(const char *name, const char *cand, const char **best, int *bestd)
{
	int d = edit_distance(name, cand);

	if (d > 0 && d <= 2 && d < (int)strlen(name) && d < *bestd) {
		*best = cand;
		*bestd = d;
	}
}

static Sym *
scope_find(const Scope *sc, const char *name)
{
	for (int i = 0; i < sc->syms.n; i++) {
		Sym *s = sc->syms.v[i];
		if (strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

static Sym *
lookup(const Scope *sc, const char *name)
{
	Sym *s = scope_find(sc, name);

	if (!s && sc->model && (s = scope_find(sc->model, name)) && s->kind == SY_VALUE)
		s = NULL;
	return s;
}

static LayerInfo *
find_layer(Sema *S, const char *name)
{
	for (int i = 0; i < S->layers.n; i++) {
		LayerInfo *li = S->layers.v[i];
		if (strcmp(li->decl->name, name) == 0)
			return li;
	}
	return NULL;
}

static const char *
hint_name(const Scope *sc, const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;

	for (const Scope *s = sc; s; s = s->model)
		for (int i = 0; i < s->syms.n; i++) {
			const Sym *y = s->syms.v[i];
			if (s == sc || y->kind != SY_VALUE)
				closer(name, y->name, &best, &bestd);
		}
	return best;
}

/* The name's definition later in body, if any: a use before it. */
static const Loc *
defined_later(const Decl *dc, const char *name)
{
	for (int i = 0; dc && i < dc->body.n; i++) {
		const Stmt *st = dc->body.v[i];
		if ((st->kind == S_SIZE || st->kind == S_GROUP || st->kind == S_ASSIGN) &&
		    strcmp(st->u.def.name, name) == 0)
			return &st->u.def.nloc;
		if (st->kind == S_TENSOR && strcmp(st->u.tensor.name, name) == 0)
			return &st->u.tensor.nloc;
	}
	return NULL;
}

static void
unknown(Sema *S, const Scope *sc, Loc loc, const char *name)
{
	const Sym *ms = sc->model ? scope_find(sc->model, name) : NULL;
	const char *hint = ms ? NULL : hint_name(sc, name);
	const Loc *later;
	const LayerInfo *li;

	if (hint)
		diag_error(S->d, loc, "unknown name '%s'; did you mean '%s'?", name, hint);
	else
		diag_error(S->d, loc, "unknown name '%s'", name);
	if (ms)
		diag_note(S->d, ms->loc, "'%s' is a tensor of model %s; a layer sees "
		          "only its parameters and its own tensors", name, S->model->name);
	else if ((later = defined_later(sc->decl, name)) ||
	         (sc->model && (later = defined_later(S->model, name))))
		diag_note(S->d, *later, "'%s' is defined here, after its use", name);
	else if ((li = find_layer(S, name)))
		diag_note(S->d, li->decl->nloc,
		          "'%s' is a layer: call it, as in %s(x)", name, name);
}

/* Adds a name to sc. A duplicate is reported and gets a Sym that nothing
 * can find, so callers need not care. */
static Sym *
define(Sema *S, Scope *sc, const char *name, Loc loc, SymKind k)
{
	Sym *old = lookup(sc, name), *s = arena_alloc(S->a, sizeof *s);

	s->name = name;
	s->kind = k;
	s->loc = loc;
	if (old) {
		diag_error(S->d, loc, "duplicate name '%s'", name);
		diag_note(S->d, old->loc, "'%s' was first defined here", name);
		return s;
	}
	vec_push(S->a, &sc->syms, s);
	return s;
}

static const char *
qualify(Sema *S, const Scope *sc, const char *name)
{
	return sc->path ? arena_printf(S->a, "%s.%s", sc->path, name) : name;
}

static const char *
kind_noun(SymKind k)
{
	return k == SY_SIZE ? "a size" : k == SY_GROUP ? "a group" : "a tensor";
}

/* ---- sizes ---- */

static int eval(Sema *S, Scope *sc, const Expr *e, int64_t *out);

static int
overflow(Sema *S, const Expr *e, int64_t x, int64_t y)
{
	diag_error(S->d, e->loc, "size expression overflows: %lld %c %lld",
	           (long long)x, e->u.bin.op, (long long)y);
	return 0;
}

static int
eval_pow(Sema *S, const Expr *e, int64_t b, int64_t x, int64_t *out)
{
	int64_t r = 1, base = b;

	if (x < 0) {
		diag_error(S->d, e->loc, "negative exponent: %s is %lld ^ %lld",
		           text(S, e), (long long)b, (long long)x);
		return 0;
	}
	/* base is squared only while bits remain: a squaring that overflows
	 * means the result would too (|b| >= 2). */
	for (int64_t k = x; k; k >>= 1) {
		if ((k & 1) && __builtin_mul_overflow(r, base, &r))
			return overflow(S, e, b, x);
		if (k > 1 && __builtin_mul_overflow(base, base, &base))
			return overflow(S, e, b, x);
	}
	*out = r;
	return 1;
}

static int
eval_div(Sema *S, const Expr *e, int64_t x, int64_t y, int64_t *out)
{
	if (y == 0) {
		diag_error(S->d, e->loc, "division by zero: %s is %lld %c 0",
		           text(S, e), (long long)x, e->u.bin.op);
		return 0;
	}
	if (x == INT64_MIN && y == -1)
		return overflow(S, e, x, y);
	if (e->u.bin.op == '%') {
		*out = x % y;
		return 1;
	}
	if (x % y) {
		diag_error(S->d, e->loc, "%s is not exact: %lld / %lld", text(S, e),
		           (long long)x, (long long)y);
		return 0;
	}
	*out = x / y;
	return 1;
}

static int
eval_bin(Sema *S, Scope *sc, const Expr *e, int64_t *out)
{
	int64_t x = 0, y = 0;
	int ok = eval(S, sc, e->u.bin.l, &x);

	ok = eval(S, sc, e->u.bin.r, &y) && ok;
	if (!ok)
		return 0;
	switch (e->u.bin.op) {
	case '+':
		return !__builtin_add_overflow(x, y, out) || overflow(S, e, x, y);
	case '-':
		return !__builtin_sub_overflow(x, y, out) || overflow(S, e, x, y);
	case '*':
		return !__builtin_mul_overflow(x, y, out) || overflow(S, e, x, y);
	case '/': case '%':
		return eval_div(S, e, x, y, out);
	case '^':
		return eval_pow(S, e, x, y, out);
	default:
		diag_error(S->d, e->loc, "'%c' works on tensors, not on sizes", e->u.bin.op);
		return 0;
	}
}

static int
eval_name(Sema *S, Scope *sc, const Expr *e, int64_t *out)
{
	Sym *s = lookup(sc, e->u.name);

	if (!s) {
		unknown(S, sc, e->loc, e->u.name);
		return 0;
	}
	if (s->bad)
		return 0;
	if (s->kind == SY_VALUE) {
		diag_error(S->d, e->loc, "'%s' is a tensor, not a size", e->u.name);
		return 0;
	}
	*out = s->kind == SY_SIZE ? s->u.size->val : s->u.group->size;
	return 1;
}

/* Told once per statement: every operand at the limit is too deep. */
static int
too_deep(Sema *S, const Expr *e)
{
	if (S->depth == 0)
		S->deep = 0;
	if (S->depth < MAXDEPTH)
		return 0;
	if (!S->deep)
		diag_error(S->d, e->loc, "expression nested more than %d deep", MAXDEPTH);
	S->deep = 1;
	return 1;
}

static int eval_at(Sema *S, Scope *sc, const Expr *e, int64_t *out);

/* Evaluates a size expression with int64 and overflow checks. */
static int
eval(Sema *S, Scope *sc, const Expr *e, int64_t *out)
{
	if (too_deep(S, e))
		return 0;
	S->depth++;
	int ok = eval_at(S, sc, e, out);
	S->depth--;
	return ok;
}

static int
eval_at(Sema *S, Scope *sc, const Expr *e, int64_t *out)
{
	switch (e->kind) {
	case E_INT:
		*out = e->u.ival;
		return 1;
	case E_NAME:
		return eval_name(S, sc, e, out);
	case E_BIN:
		return eval_bin(S, sc, e, out);
	case E_NEG:
		if (!eval(S, sc, e->u.un, out))
			return 0;
		if (*out == INT64_MIN) {
			diag_error(S->d, e->loc, "size expression overflows: -(%lld)",
			           (long long)*out);
			return 0;
		}
		*out = -*out;
		return 1;
	case E_FLOAT:
		diag_error(S->d, e->loc, "sizes are integers, not %s", text(S, e));
		return 0;
	default:
		diag_error(S->d, e->loc, "'%s' is not a size expression", text(S, e));
		return 0;
	}
}

/* A -D override of a model size or group, marked used. */
static Define *
find_define(Sema *S, const char *name)
{
	Define *found = NULL;

	for (int i = 0; i < S->o->ndefs; i++)
		if (strcmp(S->o->defs[i].name, name) == 0) {
			S->o->defs[i].used = 1;
			found = &S->o->defs[i];
		}
	return found;
}

static void
def_size(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.def.name;
	Define *df = sc->layer ? NULL : find_define(S, name);
	Size *z = arena_alloc(S->a, sizeof *z);
	int ok = 1;

	z->name = name;
	z->loc = st->u.def.nloc;
	z->overridden = df != NULL;
	if (df)
		z->val = df->val;
	else
		ok = eval(S, sc, st->u.def.val, &z->val);
	if (ok && z->val <= 0) {
		if (df)
			diag_plain(S->d, "-D %s=%lld: a size must be positive", name,
			           (long long)df->val);
		else
			diag_error(S->d, st->u.def.val->loc, "size %s must be positive, "
			           "but is %lld", name, (long long)z->val);
		ok = 0;
	}
	Sym *s = define(S, sc, name, st->u.def.nloc, SY_SIZE);
	s->u.size = z;
	s->bad = !ok;
	if (ok && !sc->layer)
		vec_push(S->a, &S->g->sizes, z);
}

static void
def_group(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.def.name;
	Define *df = find_define(S, name);
	int64_t n = 0;
	int ok = 1;

	if (df)
		n = df->val;
	else
		ok = eval(S, sc, st->u.def.val, &n);
	if (ok && (n < 1 || n > MAXGROUP)) {
		if (df)
			diag_plain(S->d, "-D %s=%lld: a group has 1 to %d ranks", name,
			           (long long)n, MAXGROUP);
		else
			diag_error(S->d, st->u.def.val->loc, "group %s must have 1 to %d "
			           "ranks, but has %lld", name, MAXGROUP, (long long)n);
		ok = 0;
	}
	Group *g = arena_alloc(S->a, sizeof *g);
	g->name = name;
	g->size = (int)n;
	g->loc = st->u.def.nloc;
	g->overridden = df != NULL;
	Sym *s = define(S, sc, name, st->u.def.nloc, SY_GROUP);
	s->u.group = g;
	s->bad = !ok;
	if (ok)
		vec_push(S->a, &S->g->groups, g);
}

/* ---- values and nodes ---- */

static Node *
node_new(Sema *S, const Scope *sc, OpKind op, Loc loc)
{
	Node *n = arena_alloc(S->a, sizeof *n);

	n->op = op;
	n->loc = loc;
	n->layer = sc->path;
	n->lname = sc->layer ? sc->layer->decl->name : NULL;
	if (op_info[op].cls == CL_COLL)
		n->a.coll.dim = n->a.coll.dim2 = -1;
	return n;
}

/* A result value shaped like `like` (or blank), not yet in the graph. */
static Value *
proto(Sema *S, const Value *like)
{
	Value *v = arena_alloc(S->a, sizeof *v);

	if (like) {
		v->dtype = like->dtype;
		v->ndim = like->ndim;
		memcpy(v->shape, like->shape, sizeof v->shape);
		memcpy(v->label, like->label, sizeof v->label);
		v->dist = like->dist;
	}
	v->role = R_ACT;
	return v;
}

/* Every per-rank buffer is passed to MPI with an int count. */
static int
count_fits(Sema *S, const Value *v, Loc loc, const char *name, const Expr *e)
{
	int64_t n = 1;

	for (int d = 0; d < v->ndim; d++) {
		if (__builtin_mul_overflow(n, value_rank_extent(v, d), &n)) {
			diag_error(S->d, loc, "%s has more than %d elements per rank, more "
			           "than an MPI int count can hold", desc(S, name, e), INT_MAX);
			return 0;
		}
	}
	if (n > INT_MAX) {
		diag_error(S->d, loc, "%s has %lld elements per rank, more than an MPI "
		           "int count can hold (%d)", desc(S, name, e), (long long)n, INT_MAX);
		return 0;
	}
	return 1;
}

/* Adds node n defining v (named name, or computed by e) to the graph;
 * NULL when v is too large. */
static Value *
commit(Sema *S, Node *n, Value *v, const char *name, const Expr *e)
{
	Graph *g = S->g;

	if (!count_fits(S, v, n->loc, name, e))
		return NULL;
	v->id = g->values.n;
	vec_push(S->a, &g->values, v);
	n->id = g->nodes.n;
	vec_push(S->a, &g->nodes, n);
	n->out = v;
	v->def = n;
	for (int i = 0; i < n->nin; i++)
		vec_push(S->a, &n->in[i]->uses, n);
	return v;
}

/* Dimension e of v (named name, or the value of expression x): a unique
 * label or a position. */
static int
find_dim(Sema *S, const Value *v, const Expr *e, const char *name, const Expr *x)
{
	if (e->kind == E_NAME) {
		int d = -1, n = 0;
		for (int i = 0; i < v->ndim; i++)
			if (v->label[i] && strcmp(v->label[i], e->u.name) == 0) {
				if (d < 0)
					d = i;
				n++;
			}
		if (n == 0)
			diag_error(S->d, e->loc, "%s has no dimension named '%s'",
			           desc(S, name, x), e->u.name);
		else if (n > 1)
			diag_error(S->d, e->loc, "label '%s' names %d dimensions of %s: give "
			           "the position", e->u.name, n, desc(S, name, x));
		return n == 1 ? d : -1;
	}
	if (e->kind == E_INT && e->u.ival >= 0 && e->u.ival < v->ndim)
		return (int)e->u.ival;
	if (e->kind == E_INT)
		diag_error(S->d, e->loc, "%s has %d dimension%s: %lld is not a position "
		           "from 0 to %d", desc(S, name, x), v->ndim, v->ndim == 1 ? "" : "s",
		           (long long)e->u.ival, v->ndim - 1);
	else
		diag_error(S->d, e->loc, "expected a dimension of %s: a label such as "
		           "'S' or a position from 0", desc(S, name, x));
	return -1;
}

/* Does dim d of v (named name, or computed by x) divide over g? */
static int
divides(Sema *S, const Value *v, int d, const Group *g, Loc loc, const char *name,
        const Expr *x)
{
	if (v->shape[d] % g->size == 0)
		return 1;
	diag_error(S->d, loc, "dimension %s of %s (%lld) does not divide evenly over "
	           "group %s (%d)", value_dim_name(S->a, v, d), desc(S, name, x),
	           (long long)v->shape[d], g->name, g->size);
	return 0;
}

/* ---- declarations ---- */

static int
tensor_shape(Sema *S, Scope *sc, const Stmt *st, Value *v)
{
	const Vec *sh = &st->u.tensor.shape;
	const char *name = st->u.tensor.name;
	int ok = 1;

	if (sh->n < 1 || sh->n > MAXDIM) {
		diag_error(S->d, st->u.tensor.nloc, "%s has %d dimensions; 1 to %d are "
		           "supported", name, sh->n, MAXDIM);
		return 0;
	}
	v->ndim = sh->n;
	for (int d = 0; d < sh->n; d++) {
		const Expr *x = sh->v[d];
		if (!eval(S, sc, x, &v->shape[d])) {
			ok = 0;
		} else if (v->shape[d] <= 0) {
			diag_error(S->d, x->loc, "dimension %d of %s must be positive, but "
			           "%s is %lld", d, name, text(S, x), (long long)v->shape[d]);
			ok = 0;
		}
		v->label[d] = x->kind == E_NAME ? x->u.name : NULL;
	}
	return ok;
}

static int
tensor_split(Sema *S, Scope *sc, const Stmt *st, Value *v)
{
	const Expr *sd = st->u.tensor.splitdim;
	const char *gname = st->u.tensor.group, *name = st->u.tensor.name;

	v->dist.kind = DI_REPL;
	if (!sd)
		return 1;
	Sym *gs = lookup(sc, gname);
	int d = find_dim(S, v, sd, name, NULL);
	if (!gs)
		unknown(S, sc, st->u.tensor.gloc, gname);
	else if (gs->kind != SY_GROUP)
		diag_error(S->d, st->u.tensor.gloc, "'%s' is %s, not a group", gname,
		           kind_noun(gs->kind));
	if (d < 0 || !gs || gs->kind != SY_GROUP || gs->bad)
		return 0;
	if (!divides(S, v, d, gs->u.group, sd->loc, name, NULL))
		return 0;
	v->dist = (Dist){DI_SPLIT, d, gs->u.group};
	return 1;
}

static void
def_tensor(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.tensor.name;
	Role role = st->u.tensor.role;
	Value *v = proto(S, NULL);

	v->role = role;
	v->name = qualify(S, sc, name);
	v->loc = st->u.tensor.nloc;
	v->dtype = st->u.tensor.dtype != DT_NONE ? st->u.tensor.dtype : S->g->dtype;
	int ok = !(sc->layer && role == R_IN); /* reported by check_layer */
	ok = ok && tensor_shape(S, sc, st, v);
	ok = ok && tensor_split(S, sc, st, v);
	Node *n = node_new(S, sc, role == R_IN ? OP_INPUT : OP_WEIGHT, st->u.tensor.nloc);
	ok = ok && commit(S, n, v, name, NULL);
	Sym *s = define(S, sc, name, st->u.tensor.nloc, SY_VALUE);
	s->bad = !ok;
	s->u.val = v;
	if (ok)
		vec_push(S->a, role == R_IN ? &S->g->inputs : &S->g->weights, v);
	if (ok && sc->layer)
		bind(S, sc, name, v);
}

/* ---- shape and distribution inference, one function per op kind ----
 * Each gets the checked call (tensor arguments in c->v, same dtype) and the
 * pending node n (inputs set) and returns the result, not yet committed. */

static int
whole_sum(Sema *S, const Call *c, int i)
{
	if (c->v[i]->dist.kind != DI_PARTIAL)
		return 1;
	diag_error(S->d, c->arg[i]->loc, "%s of a partial sum: reduce it first "
	           "(reduce_scatter or all_reduce)", c->fn);
	return 0;
}

/* A matmul operand with its transpose applied. */
typedef struct View {
	int n;
	int64_t shape[MAXDIM];
	const char *label[MAXDIM];
	Dist dist;
} View;

static View
view(const Value *v, int t)
{
	View w = {.n = v->ndim, .dist = v->dist};

	memcpy(w.shape, v->shape, sizeof w.shape);
	memcpy(w.label, v->label, sizeof w.label);
	if (t && v->ndim >= 2) {
		int a = v->ndim - 2, b = v->ndim - 1;
		int64_t s = w.shape[a];
		const char *l = w.label[a];
		w.shape[a] = w.shape[b], w.shape[b] = s;
		w.label[a] = w.label[b], w.label[b] = l;
		if (w.dist.kind == DI_SPLIT && w.dist.dim >= a)
			w.dist.dim = a + b - w.dist.dim;
	}
	return w;
}

static int
mm_shapes(Sema *S, const Call *c, const Node *n, const View *a, const View *b)
{
	const char *sa = shape_str(S, c->v[0]), *sb = shape_str(S, c->v[1]);
	const char *ta = n->a.mm.ta ? ".T" : "", *tb = n->a.mm.tb ? ".T" : "";
	int64_t k = a->shape[a->n - 1], kb = b->shape[b->n - 2];

	if (b->n > 2 && b->n != a->n) {
		diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not match: a "
		           "batched right operand needs as many dimensions as the left",
		           sa, ta, sb, tb);
		return 0;
	}
	if (k != kb) {
		diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not match: "
		           "%lld != %lld", sa, ta, sb, tb, (long long)k, (long long)kb);
		return 0;
	}
	for (int d = 0; d < b->n - 2; d++)
		if (a->shape[d] != b->shape[d]) {
			diag_error(S->d, c->e->loc, "matmul shapes %s%s and %s%s do not "
			           "match: the batch dimensions differ", sa, ta, sb, tb);
			return 0;
		}
	return 1;
}

/* The matmul rules of LANGUAGE.md, on the transposed views. */
static int
mm_dist(Sema *S, const Call *c, const View *a, const View *b, Dist *r)
{
	Dist da = a->dist, db = b->dist;
	int ak = a->n - 1, bk = b->n - 2, bn = b->n - 1, batched = b->n > 2;

	*r = (Dist){DI_REPL, 0, NULL};
	if (da.kind == DI_REPL && db.kind == DI_REPL)
		return 1;
	if (da.kind == DI_PARTIAL && db.kind == DI_REPL) {
		*r = da;
		return 1;
	}
	if (da.kind == DI_REPL && db.kind == DI_PARTIAL) {
		*r = db;
		return 1;
	}
	if (da.kind == DI_SPLIT && db.kind == DI_REPL && da.dim != ak) {
		*r = da;
		return 1;
	}
	if (da.kind == DI_REPL && db.kind == DI_SPLIT &&
	    (db.dim == bn || (batched && db.dim < bk))) {
		*r = (Dist){DI_SPLIT, db.dim == bn ? a->n - 1 : db.dim, db.group};
		return 1;
	}
	if (da.kind == DI_SPLIT && db.kind == DI_SPLIT && da.group == db.group) {
		if (da.dim == ak && db.dim == bk) {
			*r = (Dist){DI_PARTIAL, 0, da.group};
			return 1;
		}
		if (batched && da.dim == db.dim && da.dim < bk) {
			*r = da;
			return 1;
		}
	}
	diag_error(S->d, c->e->loc, "cannot multiply %s (%s) by %s (%s): split the "
	           "rows of the left or the columns of the right with the other "
	           "replicated, or both along K over one group",
	           text(S, c->arg[0]), dist_str(S->a, c->v[0]),
	           text(S, c->arg[1]), dist_str(S->a, c->v[1]));
	return 0;
}

static Value *
infer_matmul(Sema *S, Call *c, Node *n)
{
	for (int i = 0; i < 2; i++)
		if (c->v[i]->ndim < 2) {
			diag_error(S->d, c->arg[i]->loc, "matmul needs operands of 2 or more "
			           "dimensions, but %s has 1", text(S, c->arg[i]));
			return NULL;
		}
	View a = view(c->v[0], n->a.mm.ta), b = view(c->v[1], n->a.mm.tb);
	if (!mm_shapes(S, c, n, &a, &b))
		return NULL;
	Value *r = proto(S, NULL);
	r->dtype = c->v[0]->dtype;
	r->ndim = a.n;
	for (int d = 0; d < a.n - 1; d++) {
		r->shape[d] = a.shape[d];
		r->label[d] = a.label[d];
	}
	r->shape[a.n - 1] = b.shape[b.n - 1];
	r->label[a.n - 1] = b.label[b.n - 1];
	return mm_dist(S, c, &a, &b, &r->dist) ? r : NULL;
}

/* Elementwise a (op) b, b's dist already moved into a's dims. */
static int
ew_dist(Sema *S, const Call *c, OpKind op, Dist a, Dist b, Dist *r)
{
	const char *verb = op == OP_ADD ? "add" : "multiply", *x, *y, *dx, *dy;

	if (dist_eq(a, b) && !(a.kind == DI_PARTIAL && op == OP_MUL)) {
		*r = a;
		return 1;
	}
	if ((a.kind == DI_REPL && b.kind == DI_SPLIT) ||
	    (a.kind == DI_SPLIT && b.kind == DI_REPL)) {
		*r = a.kind == DI_SPLIT ? a : b;
		return 1;
	}
	if (op == OP_MUL && ((a.kind == DI_PARTIAL && b.kind == DI_REPL) ||
	                     (a.kind == DI_REPL && b.kind == DI_PARTIAL))) {
		*r = a.kind == DI_PARTIAL ? a : b;
		return 1;
	}
	x = text(S, c->arg[0]), y = text(S, c->arg[1]);
	dx = dist_str(S->a, c->v[0]), dy = dist_str(S->a, c->v[1]);
	if (a.kind == DI_PARTIAL && b.kind == DI_PARTIAL && op == OP_MUL)
		diag_error(S->d, c->e->loc, "cannot multiply %s (%s) by %s (%s): a product "
		           "of partial sums is no partial sum; reduce one first", x, dx, y, dy);
	else if (op == OP_ADD && (a.kind == DI_PARTIAL || b.kind == DI_PARTIAL) &&
	         (a.kind == DI_REPL || b.kind == DI_REPL))
		diag_error(S->d, c->e->loc, "cannot add %s (%s) and %s (%s): the "
		           "replicated value would be counted once per rank; reduce the "
		           "partial sum first (reduce_scatter or all_reduce)", x, dx, y, dy);
	else
		diag_error(S->d, c->e->loc, "cannot %s %s (%s) and %s (%s): they are "
		           "spread differently; gather or reduce one first", verb, x, dx, y, dy);
	return 0;
}

/* add, mul: equal shapes, or one a suffix of the other (broadcast); the
 * larger goes first (both ops commute exactly). */
static Value *
infer_ew(Sema *S, Call *c, Node *n)
{
	int big = c->v[1]->ndim > c->v[0]->ndim;
	Value *a = c->v[big], *b = c->v[!big];
	int off = a->ndim - b->ndim;

	n->in[0] = a;
	n->in[1] = b;
	for (int d = 0; d < b->ndim; d++)
		if (b->shape[d] != a->shape[d + off]) {
			diag_error(S->d, c->e->loc, "%s shapes %s and %s do not match: they "
			           "must be equal, or one a suffix of the other", c->fn,
			           shape_str(S, c->v[0]), shape_str(S, c->v[1]));
			return NULL;
		}
	Value *r = proto(S, a);
	for (int d = 0; d < b->ndim; d++)
		if (!r->label[d + off])
			r->label[d + off] = b->label[d];
	Dist bd = b->dist;
	if (bd.kind == DI_SPLIT)
		bd.dim += off;
	return ew_dist(S, c, n->op, a->dist, bd, &r->dist) ? r : NULL;
}

/* gelu, silu, relu, scale */
static Value *
infer_unary(Sema *S, Call *c, Node *n)
{
	if (n->op != OP_SCALE && !whole_sum(S, c, 0))
		return NULL;
	return proto(S, c->v[0]);
}

/* layernorm, rmsnorm, softmax: over the last dimension */
static Value *
infer_row(Sema *S, Call *c, Node *n)
{
	static const char *const pname[] = {"", "gamma", "beta"};
	const Value *x = c->v[0];
	int last = x->ndim - 1;

	(void)n;
	if (!whole_sum(S, c, 0))
		return NULL;
	if (x->dist.kind == DI_SPLIT && x->dist.dim == last) {
		diag_error(S->d, c->arg[0]->loc, "%s needs the whole last dimension, but "
		           "%s is %s: all_gather it first", c->fn, text(S, c->arg[0]),
		           dist_desc(S, x));
		return NULL;
	}
	for (int i = 1; i < c->nargs; i++) {
		const Value *p = c->v[i];
		if (p->ndim != 1 || p->shape[0] != x->shape[last]) {
			diag_error(S->d, c->arg[i]->loc, "the %s of %s must have shape "
			           "[%lld], but %s has %s", pname[i], c->fn,
			           (long long)x->shape[last], text(S, c->arg[i]), shape_str(S, p));
			return NULL;
		}
		if (p->dist.kind != DI_REPL) {
			diag_error(S->d, c->arg[i]->loc, "the %s of %s must be replicated, "
			           "but %s is %s", pname[i], c->fn, text(S, c->arg[i]),
			           dist_desc(S, p));
			return NULL;
		}
	}
	return proto(S, x);
}

static int
heads_count(Sema *S, Call *c, int64_t *h)
{
	if (!eval(S, c->sc, c->arg[1], h))
		return 0;
	if (*h <= 0 || *h > INT_MAX) {
		diag_error(S->d, c->arg[1]->loc, "split_heads needs 1 to %d heads, but "
		           "%s is %lld", INT_MAX, text(S, c->arg[1]), (long long)*h);
		return 0;
	}
	return 1;
}

/* split_heads: [..., S, D] -> [..., H, S, D/H] */
static Value *
infer_split_heads(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int nd = x->ndim;
	int64_t h;

	if (!heads_count(S, c, &h) || !whole_sum(S, c, 0))
		return NULL;
	if (nd < 2 || nd >= MAXDIM) {
		diag_error(S->d, c->arg[0]->loc, "split_heads needs [..., S, D] with 2 to "
		           "%d dimensions, but %s has %d", MAXDIM - 1, text(S, c->arg[0]), nd);
		return NULL;
	}
	if (x->shape[nd - 1] % h) {
		diag_error(S->d, c->arg[1]->loc, "split_heads: %s (%lld) does not divide "
		           "into %lld heads", value_dim_name(S->a, x, nd - 1),
		           (long long)x->shape[nd - 1], (long long)h);
		return NULL;
	}
	Value *r = proto(S, x);
	r->ndim = nd + 1;
	r->shape[nd - 2] = h;
	r->label[nd - 2] = c->arg[1]->kind == E_NAME ? c->arg[1]->u.name : NULL;
	r->shape[nd - 1] = x->shape[nd - 2];
	r->label[nd - 1] = x->label[nd - 2];
	r->shape[nd] = x->shape[nd - 1] / h;
	r->label[nd] = x->label[nd - 1] && r->label[nd - 2] ? arena_printf(S->a,
	               "%s/%s", x->label[nd - 1], r->label[nd - 2]) : NULL;
	n->a.heads = (int)h;
	if (x->dist.kind == DI_SPLIT && x->dist.dim >= nd - 2) {
		r->dist.dim = x->dist.dim == nd - 1 ? nd - 2 : nd - 1;
		if (h % x->dist.group->size) {
			diag_error(S->d, c->arg[1]->loc, "split_heads: %lld heads do not divide "
			           "evenly over group %s (%d)", (long long)h,
			           x->dist.group->name, x->dist.group->size);
			return NULL;
		}
	}
	return r;
}

/* The label of H*Dh: D when Dh is split_heads' "D/H", else "H*Dh". */
static const char *
merged_label(Sema *S, const char *h, const char *dh)
{
	size_t n = dh ? strlen(dh) : 0, k = h ? strlen(h) : 0;

	if (!h || !dh)
		return NULL;
	if (n > k + 1 && dh[n - k - 1] == '/' && strcmp(dh + n - k, h) == 0)
		return arena_strndup(S->a, dh, n - k - 1);
	return arena_printf(S->a, "%s*%s", h, dh);
}

/* merge_heads: [..., H, S, Dh] -> [..., S, H*Dh] */
static Value *
infer_merge_heads(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int nd = x->ndim;

	(void)n;
	if (!whole_sum(S, c, 0))
		return NULL;
	if (nd < 3) {
		diag_error(S->d, c->arg[0]->loc, "merge_heads needs [..., H, S, Dh], but "
		           "%s has %d dimension%s", text(S, c->arg[0]), nd, nd == 1 ? "" : "s");
		return NULL;
	}
	if (x->dist.kind == DI_SPLIT && x->dist.dim == nd - 1) {
		diag_error(S->d, c->arg[0]->loc, "merge_heads needs whole heads, but %s is %s",
		           text(S, c->arg[0]), dist_desc(S, x));
		return NULL;
	}
	Value *r = proto(S, x);
	r->ndim = nd - 1;
	r->shape[nd - 3] = x->shape[nd - 2];
	r->label[nd - 3] = x->label[nd - 2];
	r->shape[nd - 2] = x->shape[nd - 3] * x->shape[nd - 1];
	r->label[nd - 2] = merged_label(S, x->label[nd - 3], x->label[nd - 1]);
	r->label[nd - 1] = NULL;
	r->shape[nd - 1] = 0;
	if (x->dist.kind == DI_SPLIT && x->dist.dim >= nd - 3)
		r->dist.dim = x->dist.dim == nd - 3 ? nd - 2 : nd - 3;
	return r;
}

static int
attn_shapes(Sema *S, const Call *c, int causal)
{
	const Value *q = c->v[0], *k = c->v[1], *v = c->v[2];
	int nd = q->ndim, ok = nd >= 2 && k->ndim == nd && v->ndim == nd;

	for (int d = 0; ok && d < nd; d++)
		ok = k->shape[d] == v->shape[d] && (d == nd - 2 || q->shape[d] == k->shape[d]);
	if (!ok) {
		diag_error(S->d, c->e->loc, "attention shapes %s, %s and %s do not match: "
		           "q must be [..., Sq, Dh] and k, v [..., Sk, Dh]",
		           shape_str(S, q), shape_str(S, k), shape_str(S, v));
		return 0;
	}
	if (causal && q->shape[nd - 2] != k->shape[nd - 2]) {
		diag_error(S->d, c->e->loc, "causal attention needs as many queries as "
		           "keys, but has %lld and %lld", (long long)q->shape[nd - 2],
		           (long long)k->shape[nd - 2]);
		return 0;
	}
	return 1;
}

/* q split along Sq (k, v whole), or all split along one leading dim. */
static int
attn_dist(Sema *S, const Call *c, Dist *r)
{
	int nd = c->v[0]->ndim;
	const Value *ref = NULL;

	for (int i = 0; i < 3; i++) {
		const Value *x = c->v[i];
		if (!whole_sum(S, c, i))
			return 0;
		if (x->dist.kind != DI_SPLIT)
			continue;
		if (i > 0 && x->dist.dim == nd - 2) {
			diag_error(S->d, c->arg[i]->loc, "attention needs the whole keys and "
			           "values along the sequence: all_gather them first");
			return 0;
		}
		if (x->dist.dim == nd - 1) {
			diag_error(S->d, c->arg[i]->loc, "attention needs whole heads, but %s "
			           "is %s", text(S, c->arg[i]), dist_desc(S, x));
			return 0;
		}
		if (ref && !dist_eq(ref->dist, x->dist)) {
			diag_error(S->d, c->e->loc, "attention operands are split differently: "
			           "%s (%s), %s (%s), %s (%s)",
			           text(S, c->arg[0]), dist_str(S->a, c->v[0]),
			           text(S, c->arg[1]), dist_str(S->a, c->v[1]),
			           text(S, c->arg[2]), dist_str(S->a, c->v[2]));
			return 0;
		}
		ref = x;
	}
	*r = ref ? ref->dist : (Dist){DI_REPL, 0, NULL};
	return 1;
}

static Value *
infer_attention(Sema *S, Call *c, Node *n)
{
	if (c->nargs == 4) {
		const Expr *ce = c->arg[3];
		if (ce->kind != E_NAME || strcmp(ce->u.name, "causal") != 0) {
			diag_error(S->d, ce->loc, "the fourth argument of attention can only "
			           "be 'causal'");
			return NULL;
		}
		n->a.causal = 1;
	}
	if (!attn_shapes(S, c, n->a.causal))
		return NULL;
	Value *r = proto(S, c->v[0]);
	return attn_dist(S, c, &r->dist) ? r : NULL;
}

/* A number argument: a literal, maybe negated. */
static int
number(const Expr *e, double *f)
{
	if (e->kind == E_INT)
		*f = (double)e->u.ival;
	else if (e->kind == E_FLOAT)
		*f = e->u.fval;
	else if (e->kind == E_NEG && number(e->u.un, f))
		*f = -*f;
	else
		return 0;
	return 1;
}

static Value *
infer_scan(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = find_dim(S, x, c->arg[1], NULL, c->arg[0]);

	n->a.scan.decay = 0.5;
	if (c->nargs == 3 && !number(c->arg[2], &n->a.scan.decay)) {
		diag_error(S->d, c->arg[2]->loc, "the decay of scan must be a number, "
		           "such as 0.9");
		return NULL;
	}
	if (d < 0 || !whole_sum(S, c, 0))
		return NULL;
	if (x->dist.kind == DI_SPLIT && x->dist.dim == d) {
		diag_error(S->d, c->arg[0]->loc, "scan along %s needs the whole sequence, "
		           "but %s is %s: all_gather it first", value_dim_name(S->a, x, d),
		           text(S, c->arg[0]), dist_desc(S, x));
		return NULL;
	}
	n->a.scan.dim = d;
	return proto(S, x);
}

/* ---- collectives ---- */

/* The collective's input must be split along d (its argument 1): "all_gather
 * along S needs x split along S, but x is ...", with partial appended when
 * x is a partial sum. */
static int
need_split(Sema *S, const Call *c, int d, const char *prep, const char *partial)
{
	const Value *x = c->v[0];

	if (x->dist.kind == DI_SPLIT && x->dist.dim == d)
		return 1;
	const char *dn = value_dim_name(S->a, x, d), *xs = text(S, c->arg[0]);
	diag_error(S->d, x->dist.kind == DI_SPLIT ? c->arg[1]->loc : c->arg[0]->loc,
	           "%s %s %s needs %s split along %s, but %s is %s%s", c->fn, prep, dn,
	           xs, dn, xs, dist_desc(S, x), x->dist.kind == DI_PARTIAL ? partial : "");
	return 0;
}

static Value *
infer_all_gather(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = find_dim(S, x, c->arg[1], NULL, c->arg[0]);

	if (d < 0 || !need_split(S, c, d, "along", ": reduce it with reduce_scatter or all_reduce"))
		return NULL;
	Value *r = proto(S, x);
	r->dist = (Dist){DI_REPL, 0, NULL};
	n->a.coll.dim = d;
	n->a.coll.group = x->dist.group;
	return r;
}

static int
need_partial(Sema *S, const Call *c)
{
	if (c->v[0]->dist.kind == DI_PARTIAL)
		return 1;
	diag_error(S->d, c->arg[0]->loc, "%s needs a partial sum, but %s is %s",
	           c->fn, text(S, c->arg[0]), dist_desc(S, c->v[0]));
	return 0;
}

static Value *
infer_reduce_scatter(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d = find_dim(S, x, c->arg[1], NULL, c->arg[0]);
	Group *g = x->dist.group;

	if (d < 0 || !need_partial(S, c) ||
	    !divides(S, x, d, g, c->arg[1]->loc, NULL, c->arg[0]))
		return NULL;
	Value *r = proto(S, x);
	r->dist = (Dist){DI_SPLIT, d, g};
	n->a.coll.dim = d;
	n->a.coll.group = g;
	return r;
}

static Value *
infer_all_reduce(Sema *S, Call *c, Node *n)
{
	if (!need_partial(S, c))
		return NULL;
	Value *r = proto(S, c->v[0]);
	r->dist = (Dist){DI_REPL, 0, NULL};
	n->a.coll.group = c->v[0]->dist.group;
	return r;
}

static Value *
infer_all_to_all(Sema *S, Call *c, Node *n)
{
	const Value *x = c->v[0];
	int d1 = find_dim(S, x, c->arg[1], NULL, c->arg[0]);
	int d2 = find_dim(S, x, c->arg[2], NULL, c->arg[0]);

	if (d1 < 0 || d2 < 0)
		return NULL;
	if (d1 == d2) {
		diag_error(S->d, c->arg[2]->loc, "all_to_all needs two different dimensions");
		return NULL;
	}
	if (!need_split(S, c, d1, "from", "") ||
	    !divides(S, x, d2, x->dist.group, c->arg[2]->loc, NULL, c->arg[0]))
		return NULL;
	Value *r = proto(S, x);
	r->dist.dim = d2;
	n->a.coll.dim = d1;
	n->a.coll.dim2 = d2;
	n->a.coll.group = x->dist.group;
	return r;
}

typedef Value *(*Infer)(Sema *, Call *, Node *);

static Infer
infer_fn(OpKind op)
{
	switch (op) {
	case OP_MATMUL: return infer_matmul;
	case OP_ADD: case OP_MUL: return infer_ew;
	case OP_SCALE: case OP_GELU: case OP_SILU: case OP_RELU: return infer_unary;
	case OP_LAYERNORM: case OP_RMSNORM: case OP_SOFTMAX: return infer_row;
	case OP_SPLIT_HEADS: return infer_split_heads;
	case OP_MERGE_HEADS: return infer_merge_heads;
	case OP_ATTENTION: return infer_attention;
	case OP_SCAN: return infer_scan;
	case OP_ALL_GATHER: return infer_all_gather;
	case OP_REDUCE_SCATTER: return infer_reduce_scatter;
	case OP_ALL_REDUCE: return infer_all_reduce;
	case OP_ALL_TO_ALL: return infer_all_to_all;
	default: die("no inference for op %s", op_info[op].name);
	}
}

/* ---- calls and expressions ---- */

/* How many leading arguments of op are tensors. */
static int
tensor_args(OpKind op, int nargs)
{
	switch (op) {
	case OP_SPLIT_HEADS: case OP_SCALE: case OP_SCAN: return 1;
	case OP_ATTENTION: return 3;
	default: return op_info[op].cls == CL_COLL ? 1 : nargs;
	}
}

static int
arity(Sema *S, const Expr *e, const char *what, int lo, int hi, int n)
{
	if (n >= lo && n <= hi)
		return 1;
	if (lo == hi)
		diag_error(S->d, e->loc, "%s takes %d argument%s, but %d %s given", what,
		           lo, lo == 1 ? "" : "s", n, n == 1 ? "was" : "were");
	else
		diag_error(S->d, e->loc, "%s takes %d to %d arguments, but %d %s given",
		           what, lo, hi, n, n == 1 ? "was" : "were");
	return 0;
}

static int
no_kwargs(Sema *S, const Expr *const *args, int n)
{
	int ok = 1;

	for (int i = 0; i < n; i++)
		if (args[i]->kind == E_KWARG) {
			diag_error(S->d, args[i]->loc, "'%s = ...' is a schedule option; an "
			           "op takes plain arguments", args[i]->u.kw.name);
			ok = 0;
		}
	return ok;
}

static int
same_types(Sema *S, const Call *c, int nt)
{
	for (int i = 1; i < nt; i++)
		if (c->v[i]->dtype != c->v[0]->dtype) {
			diag_error(S->d, c->arg[i]->loc, "type mismatch: %s and %s",
			           dtype_name[c->v[0]->dtype], dtype_name[c->v[i]->dtype]);
			return 0;
		}
	return 1;
}

/* Checks op applied to args and adds its node. */
static Value *
apply(Sema *S, Scope *sc, const Expr *e, OpKind op, const char *fn,
      const Expr *const *args, int nargs)
{
	const OpInfo *oi = &op_info[op];
	Call c = {.e = e, .fn = fn, .sc = sc, .nargs = nargs};
	Node *n = node_new(S, sc, op, e->loc);
	int nt = tensor_args(op, nargs), ok = 1;

	if (!arity(S, e, fn, oi->minarg, oi->maxarg, nargs) || !no_kwargs(S, args, nargs))
		return NULL;
	for (int i = 0; i < nargs; i++)
		c.arg[i] = args[i];
	for (int i = 0; i < nt; i++) {
		const Expr *x = args[i];
		if (op == OP_MATMUL && x->kind == E_TRANS) {
			*(i ? &n->a.mm.tb : &n->a.mm.ta) = 1;
			x = x->u.un;
		}
		n->in[i] = c.v[i] = expr(S, sc, x);
		ok = c.v[i] && ok;
	}
	n->nin = nt;
	if (!ok || !same_types(S, &c, nt))
		return NULL;
	if (op == OP_SCALE && !number(args[1], &n->a.scale)) {
		diag_error(S->d, args[1]->loc, "the factor of scale must be a number, "
		           "such as 0.5");
		return NULL;
	}
	Value *r = infer_fn(op)(S, &c, n);
	if (!r)
		return NULL;
	r->loc = e->loc;
	return commit(S, n, r, NULL, e);
}

static void
recursion(Sema *S, Loc at, const LayerInfo *li)
{
	const char *chain = "";
	int i = S->stack.n - 1;

	while (i > 0 && S->stack.v[i] != li)
		i--;
	for (; i < S->stack.n; i++)
		chain = arena_printf(S->a, "%s%s -> ", chain,
		                     ((LayerInfo *)S->stack.v[i])->decl->name);
	diag_error(S->d, at, "recursive layer call: %s%s", chain, li->decl->name);
}

static void stmt(Sema *S, Scope *sc, const Stmt *st);

/* Inlines one call of layer li: a fresh scope named after the instance.
 * After a failed instance the layer stays quiet: its errors were shown. */
static Value *
instantiate(Sema *S, const Scope *caller, Loc at, LayerInfo *li, Value **args)
{
	const Decl *L = li->decl;
	int before = S->d->nerr;

	if (li->failed || S->d->fatal)
		return NULL;
	if (li->busy) {
		recursion(S, at, li);
		return NULL;
	}
	Scope *sc = arena_alloc(S->a, sizeof *sc);
	sc->model = S->ms;
	sc->decl = L;
	sc->layer = li;
	sc->path = qualify(S, caller, arena_printf(S->a, "%s%d", L->name, li->count));
	li->count++;
	for (int i = 0; i < L->params.n; i++) {
		const Expr *p = L->params.v[i];
		define(S, sc, p->u.name, p->loc, SY_VALUE)->u.val = args[i];
	}
	li->busy = 1;
	vec_push(S->a, &S->stack, li);
	for (int i = 0; i < L->body.n && !S->d->fatal; i++)
		stmt(S, sc, L->body.v[i]);
	li->busy = 0;
	S->stack.n--;
	if (S->d->nerr > before) {
		li->failed = 1;
		diag_note(S->d, at, "in layer %s, called here", L->name);
		return NULL;
	}
	if (!sc->ret)
		li->failed = 1; /* reported by check_layer */
	return sc->ret;
}

static Value *
call_layer(Sema *S, Scope *sc, const Expr *e, LayerInfo *li)
{
	const Vec *av = &e->u.call.args;
	int np = li->decl->params.n;
	Value **vals = arena_alloc(S->a, ((size_t)av->n + 1) * sizeof *vals);
	int ok = arity(S, e, arena_printf(S->a, "layer %s", li->decl->name), np, np, av->n);

	ok = no_kwargs(S, (const Expr *const *)av->v, av->n) && ok;
	for (int i = 0; ok && i < av->n; i++)
		ok = (vals[i] = expr(S, sc, av->v[i])) != NULL;
	return ok ? instantiate(S, sc, e->loc, li, vals) : NULL;
}

static LayerInfo *
repeat_layer(Sema *S, const Expr *le)
{
	LayerInfo *li = le->kind == E_NAME ? find_layer(S, le->u.name) : NULL;

	if (!li) {
		diag_error(S->d, le->loc, "repeat needs a layer name, but %s is none",
		           text(S, le));
		return NULL;
	}
	if (li->decl->params.n != 1) {
		diag_error(S->d, le->loc, "repeat needs a layer of one argument, but %s "
		           "takes %d", li->decl->name, li->decl->params.n);
		return NULL;
	}
	return li;
}

/* repeat(n, layer, x): layer(layer(...layer(x))) */
static Value *
call_repeat(Sema *S, Scope *sc, const Expr *e)
{
	const Vec *av = &e->u.call.args;
	const Expr *const *args = (const Expr *const *)av->v;
	int64_t n = 0;

	if (!arity(S, e, "repeat", 3, 3, av->n) || !no_kwargs(S, args, av->n))
		return NULL;
	int ok = eval(S, sc, args[0], &n);
	if (ok && (n < 1 || n > MAXREPEAT)) {
		diag_error(S->d, args[0]->loc, "repeat count must be 1 to %d, but %s is "
		           "%lld", MAXREPEAT, text(S, args[0]), (long long)n);
		ok = 0;
	}
	LayerInfo *li = repeat_layer(S, args[1]);
	Value *x = expr(S, sc, args[2]);
	if (!ok || !li)
		return NULL;
	for (int64_t i = 0; x && i < n; i++)
		x = instantiate(S, sc, e->loc, li, &x);
	return x;
}

static const char *
hint_fn(Sema *S, const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;

	for (int i = 0; i < NOP; i++)
		if (op_info[i].cls != CL_LEAF)
			closer(name, op_info[i].name, &best, &bestd);
	closer(name, "linear", &best, &bestd);
	closer(name, "repeat", &best, &bestd);
	for (int i = 0; i < S->layers.n; i++)
		closer(name, ((LayerInfo *)S->layers.v[i])->decl->name, &best, &bestd);
	return best;
}

static const char *
hint_layer(Sema *S, const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;

	for (int i = 0; i < S->layers.n; i++)
		closer(name, ((LayerInfo *)S->layers.v[i])->decl->name, &best, &bestd);
	return best;
}

static Value *
call(Sema *S, Scope *sc, const Expr *e)
{
	const char *fn = e->u.call.name;
	const Vec *av = &e->u.call.args;
	int op = strcmp(fn, "linear") == 0 ? OP_MATMUL : op_lookup(fn);
	LayerInfo *li;
	const char *hint;

	if (strcmp(fn, "repeat") == 0)
		return call_repeat(S, sc, e);
	if (op >= 0)
		return apply(S, sc, e, (OpKind)op, fn, (const Expr *const *)av->v, av->n);
	if ((li = find_layer(S, fn)))
		return call_layer(S, sc, e, li);
	if ((hint = hint_fn(S, fn)))
		diag_error(S->d, e->u.call.nloc, "unknown function '%s'; did you mean "
		           "'%s'?", fn, hint);
	else
		diag_error(S->d, e->u.call.nloc, "unknown function '%s'", fn);
	return NULL;
}

static Value *
expr_bin(Sema *S, Scope *sc, const Expr *e)
{
	const Expr *args[2] = {e->u.bin.l, e->u.bin.r};
	double f;

	switch (e->u.bin.op) {
	case '@':
		return apply(S, sc, e, OP_MATMUL, "matmul", args, 2);
	case '+':
		return apply(S, sc, e, OP_ADD, "add", args, 2);
	case '*':
		if (number(args[0], &f) && !number(args[1], &f)) {
			args[0] = e->u.bin.r;
			args[1] = e->u.bin.l;
		}
		if (number(args[1], &f))
			return apply(S, sc, e, OP_SCALE, "scale", args, 2);
		return apply(S, sc, e, OP_MUL, "mul", args, 2);
	case '-':
		diag_error(S->d, e->loc, "'-' works on sizes, not on tensors: write "
		           "a + -1 * b");
		return NULL;
	default:
		diag_error(S->d, e->loc, "'%c' works on sizes, not on tensors", e->u.bin.op);
		return NULL;
	}
}

static Value *
expr_name(Sema *S, Scope *sc, const Expr *e)
{
	Sym *s = lookup(sc, e->u.name);

	if (!s) {
		unknown(S, sc, e->loc, e->u.name);
		return NULL;
	}
	if (s->kind != SY_VALUE) {
		diag_error(S->d, e->loc, "'%s' is %s, not a tensor", e->u.name,
		           kind_noun(s->kind));
		return NULL;
	}
	return s->bad ? NULL : s->u.val;
}

/* A tensor expression; NULL after errors (reported). */
static Value *
expr_at(Sema *S, Scope *sc, const Expr *e)
{
	double f;

	if (number(e, &f)) {
		diag_error(S->d, e->loc, "expected a tensor, not the number %s", text(S, e));
		return NULL;
	}
	switch (e->kind) {
	case E_NAME:
		return expr_name(S, sc, e);
	case E_BIN:
		return expr_bin(S, sc, e);
	case E_CALL:
		return call(S, sc, e);
	case E_NEG: {
		const Expr *args[2] = {e->u.un, ast_float(S->a, e->loc, -1.0)};
		return apply(S, sc, e, OP_SCALE, "scale", args, 2);
	}
	case E_TRANS:
		diag_error(S->d, e->loc, ".T transposes an operand of a matmul, and "
		           "nothing else");
		return NULL;
	default:
		diag_error(S->d, e->loc, "'%s = ...' is a schedule option, not a tensor",
		           e->u.kw.name);
		return NULL;
	}
}

static Value *
expr(Sema *S, Scope *sc, const Expr *e)
{
	if (too_deep(S, e))
		return NULL;
	S->depth++;
	Value *v = expr_at(S, sc, e);
	S->depth--;
	return v;
}

/* ---- statements ---- */

/* Remembers a tensor named inside a layer instance, for "layer.t" keys. */
static void
bind(Sema *S, const Scope *sc, const char *name, Value *v)
{
	Bind *b = arena_alloc(S->a, sizeof *b);

	b->layer = sc->layer;
	b->name = name;
	b->v = v;
	vec_push(S->a, &S->binds, b);
}

static void
def_assign(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.def.name;
	Value *v = expr(S, sc, st->u.def.val);
	Sym *s = define(S, sc, name, st->u.def.nloc, SY_VALUE);

	s->u.val = v;
	s->bad = !v;
	if (!v)
		return;
	if (!v->name) /* a fresh result takes the name; else y = x is an alias */
		v->name = qualify(S, sc, name);
	if (sc->layer)
		bind(S, sc, name, v);
}

static void
stmt(Sema *S, Scope *sc, const Stmt *st)
{
	switch (st->kind) {
	case S_SIZE:
		def_size(S, sc, st);
		break;
	case S_GROUP:
		if (sc->layer) /* reported by check_layer */
			define(S, sc, st->u.def.name, st->u.def.nloc, SY_GROUP)->bad = 1;
		else
			def_group(S, sc, st);
		break;
	case S_TENSOR:
		def_tensor(S, sc, st);
		break;
	case S_ASSIGN:
		def_assign(S, sc, st);
		break;
	case S_RETURN:
		if (sc->layer && !sc->ret)
			sc->ret = expr(S, sc, st->u.ret);
		break;
	case S_TYPE: case S_OUT: case S_SCHED:
		break; /* the model's are handled apart; in layers, errors */
	}
}

/* Statement kinds that cannot appear in a layer, reported once per layer
 * whether it is called or not. */
static void
check_layer(Sema *S, LayerInfo *li)
{
	const Decl *L = li->decl;
	const Stmt *ret = NULL;

	for (int i = 0; i < L->params.n; i++)
		for (int j = 0; j < i; j++) {
			const Expr *p = L->params.v[i], *q = L->params.v[j];
			if (strcmp(p->u.name, q->u.name) == 0) {
				diag_error(S->d, p->loc, "duplicate parameter '%s'", p->u.name);
				li->failed = 1;
			}
		}
	for (int i = 0; i < L->body.n; i++) {
		const Stmt *st = L->body.v[i];
		if (st->kind == S_TENSOR && st->u.tensor.role == R_IN)
			diag_error(S->d, st->loc, "layer %s cannot declare inputs: pass %s "
			           "as a parameter", L->name, st->u.tensor.name);
		else if (st->kind == S_GROUP)
			diag_error(S->d, st->loc, "groups belong to the model; layer %s uses "
			           "the model's", L->name);
		else if (st->kind == S_TYPE)
			diag_error(S->d, st->loc, "the type belongs to the model; a tensor "
			           "of a layer may name its own, as in 'weight w : f64 [D]'");
		else if (st->kind == S_OUT)
			diag_error(S->d, st->loc, "layer %s returns its result; 'out' belongs "
			           "to the model", L->name);
		else if (st->kind == S_SCHED)
			diag_error(S->d, st->loc, "schedules belong to the model; name this "
			           "layer's tensors there as %s.NAME", L->name);
		else if (st->kind == S_RETURN && ret) {
			diag_error(S->d, st->loc, "layer %s returns more than once", L->name);
			diag_note(S->d, ret->loc, "the first return is here");
		} else if (st->kind == S_RETURN)
			ret = st;
	}
	if (!ret)
		diag_error(S->d, L->nloc, "layer %s does not return a value", L->name);
}

static int
builtin_name(const char *name)
{
	return op_lookup(name) >= 0 || strcmp(name, "linear") == 0 ||
	       strcmp(name, "repeat") == 0;
}

/* Finds the model and the layers; reports duplicates and misplaced
 * statements. */
static void
collect(Sema *S, const Program *p)
{
	for (int i = 0; i < p->decls.n; i++) {
		const Decl *dc = p->decls.v[i], *old = NULL;
		for (int j = 0; j < i && !old; j++)
			if (strcmp(((Decl *)p->decls.v[j])->name, dc->name) == 0)
				old = p->decls.v[j];
		if (old) {
			diag_error(S->d, dc->nloc, "duplicate name '%s'", dc->name);
			diag_note(S->d, old->nloc, "'%s' was first defined here", dc->name);
		} else if (dc->kind == D_LAYER && builtin_name(dc->name)) {
			diag_error(S->d, dc->nloc, "layer %s has the name of a built-in "
			           "function", dc->name);
		}
		if (dc->kind == D_MODEL && S->model) {
			diag_error(S->d, dc->nloc, "more than one model: a file holds exactly "
			           "one, and %s comes after %s", dc->name, S->model->name);
			diag_note(S->d, S->model->nloc, "the first model is here");
		} else if (dc->kind == D_MODEL) {
			S->model = dc;
		} else if (!old) {
			LayerInfo *li = arena_alloc(S->a, sizeof *li);
			li->decl = dc;
			vec_push(S->a, &S->layers, li);
			check_layer(S, li);
		}
	}
	if (!S->model)
		diag_error(S->d, (Loc){0, 0, 0, 0}, "no model: a file needs exactly one "
		           "'model NAME { ... }'");
}

/* ---- the model ---- */

static void
model_type(Sema *S)
{
	const Stmt *first = NULL;

	S->g->dtype = DT_F32;
	for (int i = 0; i < S->model->body.n; i++) {
		const Stmt *st = S->model->body.v[i];
		if (st->kind != S_TYPE)
			continue;
		if (first) {
			diag_error(S->d, st->loc, "the type is set twice");
			diag_note(S->d, first->loc, "first set here");
			continue;
		}
		first = st;
		S->g->dtype = st->u.type.t;
	}
	if (S->o->type != DT_NONE)
		S->g->dtype = S->o->type; /* --type */
}

/* The model's tensor named name (at loc), or NULL: unknown or not a tensor
 * (reported here), or bad (reported where it is defined). */
static Value *
model_tensor(Sema *S, const char *name, Loc loc)
{
	Sym *s = scope_find(S->ms, name);

	if (!s)
		unknown(S, S->ms, loc, name);
	else if (s->kind != SY_VALUE)
		diag_error(S->d, loc, "'%s' is %s, not a tensor", name, kind_noun(s->kind));
	else if (!s->bad)
		return s->u.val;
	return NULL;
}

static void
add_output(Sema *S, const Expr *ne)
{
	const char *name = ne->u.name;
	Value *v = model_tensor(S, name, ne->loc);

	if (!v)
		return;
	if (v->role == R_IN || v->role == R_WEIGHT)
		diag_error(S->d, ne->loc, "%s is %s; an output must be computed", name,
		           v->role == R_IN ? "an input" : "a weight");
	else if (v->role == R_OUT)
		diag_error(S->d, ne->loc, "%s is already an output", name);
	else if (v->dist.kind == DI_PARTIAL)
		diag_error(S->d, ne->loc, "output %s is a partial sum over %s: reduce it "
		           "first (reduce_scatter or all_reduce)", name, v->dist.group->name);
	else {
		v->role = R_OUT;
		vec_push(S->a, &S->g->outputs, v);
	}
}

static void
outputs(Sema *S)
{
	int any = 0;

	for (int i = 0; i < S->model->body.n; i++) {
		const Stmt *st = S->model->body.v[i];
		if (st->kind == S_RETURN)
			diag_error(S->d, st->loc, "a model returns nothing; name its results "
			           "with 'out'");
		if (st->kind != S_OUT)
			continue;
		for (int j = 0; j < st->u.names.n; j++, any = 1)
			add_output(S, st->u.names.v[j]);
	}
	/* a half-written model with errors is not told it lacks outputs too */
	if (!any && S->d->nerr == S->nerr0)
		diag_error(S->d, S->model->nloc, "model %s has no outputs: add 'out NAME;'",
		           S->model->name);
}

/* ---- names of temporaries ---- */

typedef struct NameSet {
	const char **v;
	size_t cap; /* a power of two, at least twice the names */
} NameSet;

static size_t
name_hash(const char *s)
{
	size_t h = 14695981039346656037u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

/* Adds s; returns 0 when it was there already. */
static int
name_add(NameSet *ns, const char *s)
{
	size_t i = name_hash(s) & (ns->cap - 1);

	for (; ns->v[i]; i = (i + 1) & (ns->cap - 1))
		if (strcmp(ns->v[i], s) == 0)
			return 0;
	ns->v[i] = s;
	return 1;
}

/* Temporaries are named t1, t2, ... in creation order (prefixed by their
 * layer instance), skipping names the user took. */
static void
name_temps(Sema *S)
{
	Graph *g = S->g;
	NameSet ns = {NULL, 16};
	int t = 1;

	while (ns.cap < 2 * (size_t)g->values.n)
		ns.cap *= 2;
	ns.v = arena_alloc(S->a, ns.cap * sizeof *ns.v);
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (v->name)
			name_add(&ns, v->name);
	}
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		const char *path = v->def->layer;
		while (!v->name) {
			const char *s = path ? arena_printf(S->a, "%s.t%d", path, t++)
			                     : arena_printf(S->a, "t%d", t++);
			if (name_add(&ns, s))
				v->name = s;
		}
	}
}

/* ---- schedules ---- */

/* A schedule error: at loc in the file, or about --schedule. */
static void
serr(Sema *S, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
serr(Sema *S, Loc loc, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (S->forcing)
		diag_plain(S->d, "--schedule: %s", msg);
	else
		diag_error(S->d, loc, "%s", msg);
}

/* A count argument of a schedule: slice(k), m = K. */
static int
sched_count(Sema *S, const Expr *e, const char *what, int *out)
{
	int64_t v = 0;

	if (S->forcing && e->kind != E_INT) {
		serr(S, e->loc, "%s must be an integer", what);
		return 0;
	}
	if (!eval(S, S->ms, e, &v))
		return 0;
	if (v < 1 || v > MAXSLICES) {
		serr(S, e->loc, "%s must be %s, but is %lld", what, v < 1 ? "at least 1" :
		     arena_printf(S->a, "at most %d", MAXSLICES), (long long)v);
		return 0;
	}
	*out = (int)v;
	return 1;
}

static int
fuse_option(Sema *S, const Expr *o, SchedChoice *c, int *seen)
{
	const char *k = o->kind == E_KWARG ? o->u.kw.name : NULL;
	int which = k && strcmp(k, "m") == 0 ? 1 : k && strcmp(k, "split") == 0 ? 2 : 0;

	if (!k) {
		serr(S, o->loc, "fuse takes one topology, then the options m = K and "
		     "split = query");
		return 0;
	}
	if (!which) {
		serr(S, o->loc, "unknown fuse option '%s': expected m = K or split = query", k);
		return 0;
	}
	if (*seen & which) {
		serr(S, o->loc, "fuse option '%s' is given twice", k);
		return 0;
	}
	*seen |= which;
	if (which == 1)
		return sched_count(S, o->u.kw.val, "m", &c->m);
	if (o->u.kw.val->kind != E_NAME || strcmp(o->u.kw.val->u.name, "query") != 0) {
		serr(S, o->u.kw.val->loc, "split = %s: the only split is split = query",
		     text(S, o->u.kw.val));
		return 0;
	}
	c->query = 1;
	return 1;
}

static int
choice_fuse(Sema *S, const Expr *e, SchedChoice *c)
{
	int n = e->kind == E_CALL ? e->u.call.args.n : 0;
	const Expr *const *args = n ? (const Expr *const *)e->u.call.args.v : NULL;
	int ok = 1, seen = 0, t = -1;

	c->kind = SK_FUSE;
	for (int i = 0; n && args[0]->kind == E_NAME && i < NTOPO; i++)
		if (strcmp(args[0]->u.name, topo_name[i]) == 0)
			t = i;
	if (t < 0) {
		serr(S, n ? args[0]->loc : e->loc, "fuse needs a topology first: "
		     "fuse(ring), fuse(bidir) or fuse(pairwise)");
		ok = 0;
	}
	c->topo = t < 0 ? TP_RING : (Topo)t;
	for (int i = 1; i < n; i++)
		ok = fuse_option(S, args[i], c, &seen) && ok;
	return ok;
}

/* vanilla, slice(k), fuse(...), auto; NULL after errors. */
static SchedChoice *
choice(Sema *S, const Expr *e)
{
	SchedChoice *c = arena_alloc(S->a, sizeof *c);
	const char *name = e->kind == E_NAME ? e->u.name :
	                   e->kind == E_CALL ? e->u.call.name : "";
	int call = e->kind == E_CALL, n = call ? e->u.call.args.n : 0;

	c->loc = e->loc;
	c->m = 1;
	if (strcmp(name, "vanilla") == 0 || strcmp(name, "auto") == 0) {
		c->kind = name[0] == 'v' ? SK_VANILLA : SK_AUTO;
		if (!call)
			return c;
		serr(S, e->loc, "%s takes no arguments", name);
		return NULL;
	}
	if (strcmp(name, "slice") == 0) {
		c->kind = SK_SLICE;
		if (n == 1 && ((Expr *)e->u.call.args.v[0])->kind != E_KWARG)
			return sched_count(S, e->u.call.args.v[0], "the count of slice(k)",
			                   &c->k) ? c : NULL;
		serr(S, e->loc, "slice takes one argument, the number of chunks: slice(4)");
		return NULL;
	}
	if (strcmp(name, "fuse") == 0)
		return choice_fuse(S, e, c) ? c : NULL;
	serr(S, e->loc, "unknown schedule '%s': expected vanilla, slice(k), "
	     "fuse(ring|bidir|pairwise [, m = K] [, split = query]) or auto", text(S, e));
	return NULL;
}

/* Who set each collective's choice: tensor keys beat layer keys. */
typedef struct Claim {
	const SchedEntry *by;
	int level; /* 0 none, 1 "layer.t", 2 "t" */
} Claim;

static void
claim(Sema *S, Claim *cl, const SchedEntry *se, Node *n, SchedChoice *c, int level)
{
	Claim *k = &cl[n->id];

	if (k->level == level) {
		diag_error(S->d, se->kloc, "%s names the same collective as %s", se->key,
		           k->by->key);
		diag_note(S->d, k->by->kloc, "%s is here", k->by->key);
	} else if (k->level < level) {
		k->level = level;
		k->by = se;
		n->sched = c;
	}
}

static int
is_coll(const Value *v)
{
	return op_info[v->def->op].cls == CL_COLL;
}

static void
key_tensor(Sema *S, Claim *cl, const SchedEntry *se, SchedChoice *c)
{
	Value *v = model_tensor(S, se->key, se->kloc);

	if (v && !is_coll(v))
		diag_error(S->d, se->kloc, "%s is not the result of a collective", se->key);
	else if (v)
		claim(S, cl, se, v->def, c, 2);
}

/* Does layer L name a tensor name? Else *hint is the closest it names. */
static int
layer_names(const Decl *L, const char *name, const char **hint)
{
	int bestd = INT_MAX;

	*hint = NULL;
	for (int i = 0; i < L->body.n; i++) {
		const Stmt *st = L->body.v[i];
		const char *t = st->kind == S_ASSIGN ? st->u.def.name :
		                st->kind == S_TENSOR ? st->u.tensor.name : NULL;
		if (t && strcmp(t, name) == 0)
			return 1;
		if (t)
			closer(name, t, hint, &bestd);
	}
	return 0;
}

/* "layer.t": t in every instance of layer */
static void
key_layer(Sema *S, Claim *cl, const SchedEntry *se, SchedChoice *c)
{
	const char *dot = strchr(se->key, '.');
	const char *lname = arena_strndup(S->a, se->key, (size_t)(dot - se->key));
	const LayerInfo *li = find_layer(S, lname);

	if (!li) {
		const char *hint = hint_layer(S, lname);
		if (hint)
			diag_error(S->d, se->kloc, "unknown layer '%s'; did you mean '%s'?", lname, hint);
		else
			diag_error(S->d, se->kloc, "unknown layer '%s'", lname);
		return;
	}
	const char *hint;
	if (!layer_names(li->decl, dot + 1, &hint)) {
		if (hint)
			diag_error(S->d, se->kloc, "layer %s has no tensor named '%s'; did "
			           "you mean '%s'?", lname, dot + 1, hint);
		else
			diag_error(S->d, se->kloc, "layer %s has no tensor named '%s'",
			           lname, dot + 1);
		return;
	}
	for (int i = 0; i < S->binds.n; i++) {
		const Bind *b = S->binds.v[i];
		if (b->layer != li || strcmp(b->name, dot + 1) != 0)
			continue;
		if (!is_coll(b->v)) {
			diag_error(S->d, se->kloc, "%s is not the result of a collective", se->key);
			return;
		}
		claim(S, cl, se, b->v->def, c, 1);
	}
}

/* The entry with se's key before se, if any. */
static const Stmt *
earlier_entry(const Decl *m, const Stmt *st)
{
	const char *key = st->u.sched.key;

	for (int i = 0; m->body.v[i] != st; i++) {
		const Stmt *o = m->body.v[i];
		const char *k = o->u.sched.key;
		if (o->kind == S_SCHED && (k == key || (k && key && strcmp(k, key) == 0)))
			return o;
	}
	return NULL;
}

/* The dimension a fuse or slice schedule cuts into pieces, or -1. */
static int
sched_dim(const Node *n, const SchedChoice *c)
{
	if (c->kind == SK_FUSE && n->op == OP_ALL_TO_ALL)
		return n->a.coll.dim2;
	if (n->op == OP_ALL_GATHER || n->op == OP_REDUCE_SCATTER)
		return c->kind == SK_FUSE || c->kind == SK_SLICE ? n->a.coll.dim : -1;
	return -1;
}

/* fuse needs the dim in N*m slices (2*N*m for bidir), slice(k) in N*k.
 * Instances of one layer share their locs: each problem is told once. */
static void
sched_fits(Sema *S, Node *n, Vec *told)
{
	const SchedChoice *c = n->sched;
	int d = sched_dim(n, c);
	int64_t pieces = (int64_t)n->a.coll.group->size * sched_lanes(c);

	if (c->query && n->op != OP_REDUCE_SCATTER && c != &S->g->defsched) {
		diag_error(S->d, c->loc, "split = query splits the attention feeding a "
		           "reduce_scatter, but %s is the result of %s", n->out->name,
		           op_info[n->op].name);
		return;
	}
	if (d < 0 || n->out->shape[d] % pieces == 0)
		return;
	for (int i = 0; i + 1 < told->n; i += 2)
		if (told->v[i] == c && ((Node *)told->v[i + 1])->loc.line == n->loc.line &&
		    ((Node *)told->v[i + 1])->loc.col == n->loc.col)
			return;
	vec_push(S->a, told, (void *)c);
	vec_push(S->a, told, n);
	int given = c->loc.line > 0 && !S->o->force;
	diag_error(S->d, given ? c->loc : n->loc, "%s%s on %s needs %s (%lld) to "
	           "divide into %lld slices", S->o->force ? "--schedule " : "",
	           graph_sched_str(S->a, c), n->out->name,
	           value_dim_name(S->a, n->out, d), (long long)n->out->shape[d],
	           (long long)pieces);
}

static void
schedules(Sema *S)
{
	Graph *g = S->g;
	Claim *cl = arena_alloc(S->a, ((size_t)g->nodes.n + 1) * sizeof *cl);
	Vec told = {0};

	g->defsched = (SchedChoice){.kind = SK_FUSE, .topo = TP_RING, .m = 1};
	for (int i = 0; i < S->model->body.n; i++) {
		const Stmt *st = S->model->body.v[i], *old;
		const SchedEntry *se = &st->u.sched;
		if (st->kind != S_SCHED)
			continue;
		SchedChoice *c = choice(S, se->choice);
		if ((old = earlier_entry(S->model, st))) {
			if (se->key)
				diag_error(S->d, se->kloc, "a second schedule for %s", se->key);
			else
				diag_error(S->d, se->kloc, "a second default schedule");
			diag_note(S->d, old->u.sched.kloc, "the first is here");
		} else if (!se->key) {
			if (c)
				g->defsched = *c;
		} else if (strchr(se->key, '.')) {
			key_layer(S, cl, se, c);
		} else {
			key_tensor(S, cl, se, c);
		}
	}
	if (S->o->force) {
		S->forcing = 1;
		SchedChoice *c = choice(S, S->o->force);
		S->forcing = 0;
		if (c) {
			g->defsched = *c;
			/* a position in the command line is none in the file */
			g->defsched.loc = (Loc){0, 0, 0, 0};
		}
	}
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (op_info[n->op].cls != CL_COLL)
			continue;
		if (!n->sched || S->o->force)
			n->sched = &g->defsched;
		sched_fits(S, n, &told);
	}
}

static void
check_defines(Sema *S)
{
	for (int i = 0; i < S->o->ndefs; i++)
		if (!S->o->defs[i].used)
			diag_plain(S->d, "-D %s: no size or group named '%s'",
			           S->o->defs[i].name, S->o->defs[i].name);
}

static void
build_model(Sema *S)
{
	const Decl *m = S->model;
	Graph *g = arena_alloc(S->a, sizeof *g);

	g->arena = S->a;
	g->name = m->name;
	g->file = S->d->src && S->d->src->name ? S->d->src->name : "<input>";
	S->g = g;
	S->ms = arena_alloc(S->a, sizeof *S->ms);
	S->ms->decl = m;
	model_type(S);
	for (int i = 0; i < m->body.n && !S->d->fatal; i++)
		stmt(S, S->ms, m->body.v[i]);
	outputs(S);
	name_temps(S);
	schedules(S);
}

Graph *
sema_build(Arena *a, Diag *d, const Program *p, Options *o)
{
	Options none = {0};
	Sema S = {.a = a, .d = d, .o = o ? o : &none, .nerr0 = d->nerr};

	collect(&S, p);
	if (S.model)
		build_model(&S);
	check_defines(&S);
	if (d->nerr > S.nerr0 || !S.model)
		return NULL;
	graph_fill_locality(S.g);
	graph_check(S.g);
	return S.g;
}
