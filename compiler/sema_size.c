/* sema_size.c: size evaluation. Integer expressions of sizes and groups
 * with every operation overflow-checked, exact division, the size and
 * group statements, and the -D overrides of the command line.
 * requires: the names each expression uses defined before it.
 * ensures: every size positive, every group 1 .. MAXGROUP ranks, or an
 * error; every -D used by a size or group of the model, or an error. */
#include <string.h>

#include "sema.h"

enum {
	MAXDEPTH = 1000 /* deepest expression (and layer) nesting: the stack */
};

static int eval_at(Sema *S, Scope *sc, const Expr *e, int64_t *out);

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
		           sema_text(S, e), (long long)b, (long long)x);
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
		           sema_text(S, e), (long long)x, e->u.bin.op);
		return 0;
	}
	if (x == INT64_MIN && y == -1)
		return overflow(S, e, x, y);
	if (e->u.bin.op == '%') {
		*out = x % y;
		return 1;
	}
	if (x % y) {
		diag_error(S->d, e->loc, "%s is not exact: %lld / %lld", sema_text(S, e),
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
	int ok = sema_eval(S, sc, e->u.bin.l, &x);

	ok = sema_eval(S, sc, e->u.bin.r, &y) && ok;
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
	Sym *s = sema_lookup(sc, e->u.name);

	if (!s) {
		sema_unknown(S, sc, e->loc, e->u.name);
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
int
sema_too_deep(Sema *S, const Expr *e)
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

/* Evaluates a size expression with int64 and overflow checks. */
int
sema_eval(Sema *S, Scope *sc, const Expr *e, int64_t *out)
{
	if (sema_too_deep(S, e))
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
		if (!sema_eval(S, sc, e->u.un, out))
			return 0;
		if (*out == INT64_MIN) {
			diag_error(S->d, e->loc, "size expression overflows: -(%lld)",
			           (long long)*out);
			return 0;
		}
		*out = -*out;
		return 1;
	case E_FLOAT:
		diag_error(S->d, e->loc, "sizes are integers, not %s", sema_text(S, e));
		return 0;
	default:
		diag_error(S->d, e->loc, "'%s' is not a size expression", sema_text(S, e));
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

void
sema_def_size(Sema *S, Scope *sc, const Stmt *st)
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
		ok = sema_eval(S, sc, st->u.def.val, &z->val);
	if (ok && z->val <= 0) {
		if (df)
			diag_plain(S->d, "-D %s=%lld: a size must be positive", name,
			           (long long)df->val);
		else
			diag_error(S->d, st->u.def.val->loc, "size %s must be positive, "
			           "but is %lld", name, (long long)z->val);
		ok = 0;
	}
	Sym *s = sema_define(S, sc, name, st->u.def.nloc, SY_SIZE);
	s->u.size = z;
	s->bad = !ok;
	if (ok && !sc->layer)
		vec_push(S->a, &S->g->sizes, z);
}

void
sema_def_group(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.def.name;
	Define *df = find_define(S, name);
	int64_t n = 0;
	int ok = 1;

	if (df)
		n = df->val;
	else
		ok = sema_eval(S, sc, st->u.def.val, &n);
	if (ok && (n < 1 || n > MAXGROUP)) {
		if (df)
			diag_plain(S->d, "-D %s=%lld: a group has 1 to %d ranks", name,
			           (long long)n, MAXGROUP);
		else
			diag_error(S->d, st->u.def.val->loc, "group %s must have 1 to %d "
			           "ranks, but has %lld", name, MAXGROUP, (long long)n);
		ok = 0;
	}
	long long job = n;
	for (int k = 0; ok && k < S->g->groups.n; k++)
		job *= ((Group *)S->g->groups.v[k])->size;
	if (ok && S->g->groups.n == MAXGROUPS) {
		diag_error(S->d, st->u.def.nloc, "group %s is one too many: a model has at most "
		           "%d groups", name, MAXGROUPS);
		ok = 0;
	} else if (ok && job > MAXJOB) {
		diag_error(S->d, st->u.def.nloc, "group %s makes the job a grid of %lld ranks; "
		           "it may have at most %d", name, job, MAXJOB);
		ok = 0;
	}
	Group *g = arena_alloc(S->a, sizeof *g);
	g->name = name;
	g->size = (int)n;
	g->loc = st->u.def.nloc;
	g->overridden = df != NULL;
	Sym *s = sema_define(S, sc, name, st->u.def.nloc, SY_GROUP);
	s->u.group = g;
	s->bad = !ok;
	if (ok) {
		g->id = S->g->groups.n;
		vec_push(S->a, &S->g->groups, g);
	}
}

void
sema_check_defines(Sema *S)
{
	for (int i = 0; i < S->o->ndefs; i++)
		if (!S->o->defs[i].used)
			diag_plain(S->d, "-D %s: no size or group named '%s'",
			           S->o->defs[i].name, S->o->defs[i].name);
}
