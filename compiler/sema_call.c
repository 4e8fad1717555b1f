/* sema_call.c: tensor expressions and calls: operators and op calls
 * become nodes (after sema_infer), layer calls are inlined as fresh
 * instances (repeat(n, layer, x) n times), recursion is reported.
 * requires: the scope of the body being checked.
 * ensures: every tensor expression gives a committed value or NULL with
 * its errors reported; a failed layer instance is reported once, with the
 * call that made it. */
#include <limits.h>
#include <string.h>

#include "sema.h"

enum {
	MAXREPEAT = 10000 /* most layers one repeat() may stack */
};

/* ---- calls and expressions ---- */

/* A number argument: a literal, maybe negated. */
int
sema_number(const Expr *e, double *f)
{
	if (e->kind == E_INT)
		*f = (double)e->u.ival;
	else if (e->kind == E_FLOAT)
		*f = e->u.fval;
	else if (e->kind == E_NEG && sema_number(e->u.un, f))
		*f = -*f;
	else
		return 0;
	return 1;
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

/* The keyword arguments of an op call, after its plain ones: only the
 * eps of layernorm and rmsnorm (LANGUAGE.md: 1e-5 when not given). *np:
 * how many plain ones there are. */
static int
op_kwargs(Sema *S, Node *n, const char *fn, const Expr *const *args, int nargs, int *np)
{
	int norm = n->op == OP_LAYERNORM || n->op == OP_RMSNORM, ok = 1, seen = 0;

	*np = nargs;
	if (!norm)
		return no_kwargs(S, args, nargs);
	n->a.eps = 1e-5;
	for (int i = 0; i < nargs; i++) {
		const Expr *a = args[i];
		if (a->kind != E_KWARG) {
			if (*np < nargs) {
				diag_error(S->d, a->loc, "a plain argument of %s after its "
				           "keyword argument", fn);
				ok = 0;
			}
			continue;
		}
		*np = *np < i ? *np : i;
		if (strcmp(a->u.kw.name, "eps") != 0)
			diag_error(S->d, a->loc, "%s has no argument '%s': its one keyword "
			           "argument is eps = NUMBER", fn, a->u.kw.name);
		else if (seen++)
			diag_error(S->d, a->loc, "the eps of %s is given twice", fn);
		else if (sema_number(a->u.kw.val, &n->a.eps) && n->a.eps > 0)
			continue;
		else
			diag_error(S->d, a->u.kw.val->loc, "the eps of %s must be a positive "
			           "number, such as 1e-6", fn);
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
	Node *n = sema_node_new(S, sc, op, e->loc);
	int np, nt, ok = 1;

	if (!op_kwargs(S, n, fn, args, nargs, &np) || !arity(S, e, fn, oi->minarg, oi->maxarg, np))
		return NULL;
	nargs = c.nargs = np;
	nt = oi->tensors < 0 ? nargs : oi->tensors;
	for (int i = 0; i < nargs; i++)
		c.arg[i] = args[i];
	for (int i = 0; i < nt; i++) {
		const Expr *x = args[i];
		if (op == OP_MATMUL && x->kind == E_TRANS) {
			*(i ? &n->a.mm.tb : &n->a.mm.ta) = 1;
			x = x->u.un;
		}
		n->in[i] = c.v[i] = sema_expr(S, sc, x);
		ok = c.v[i] && ok;
	}
	n->nin = nt;
	if (!ok || !same_types(S, &c, nt))
		return NULL;
	if (op == OP_SCALE && !sema_number(args[1], &n->a.scale)) {
		diag_error(S->d, args[1]->loc, "the factor of scale must be a number, "
		           "such as 0.5");
		return NULL;
	}
	Value *r = sema_infer(S, &c, n);
	if (!r)
		return NULL;
	r->loc = e->loc;
	r->expr = sema_text(S, e);
	return sema_commit(S, n, r, NULL, e);
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

/* Inlines one call of layer li: a fresh scope named after the instance.
 * After a failed instance the layer stays quiet: its errors were shown. */
static Value *
instantiate(Sema *S, Scope *caller, Loc at, LayerInfo *li, Value **args)
{
	const Decl *L = li->decl;
	int before = S->d->nerr, first = S->g->nodes.n;

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
	sc->path = sema_qualify(S, caller, arena_printf(S->a, "%s%d", L->name, li->count));
	li->count++;
	for (int i = 0; i < L->params.n; i++) {
		const Expr *p = L->params.v[i];
		sema_define(S, sc, p->u.name, p->loc, SY_VALUE)->u.val = args[i];
	}
	li->busy = 1;
	vec_push(S->a, &S->stack, li);
	for (int i = 0; i < L->body.n && !S->d->fatal; i++)
		sema_stmt(S, sc, L->body.v[i]);
	li->busy = 0;
	S->stack.n--;
	if (S->toomany == 1) {
		S->toomany = 2;
		li->failed = 1;
		diag_error(S->d, at, "this call of layer %s takes the model past %ld ops (every "
		           "layer call and repeat inlined), the most cfc compiles (--max-ops=N "
		           "allows more)", L->name, sema_max_ops(S));
		return NULL;
	}
	if (S->d->nerr > before) {
		li->failed = 1;
		diag_note(S->d, at, "in layer %s, called here", L->name);
		return NULL;
	}
	if (!sc->ret)
		li->failed = 1; /* reported by sema_check_layer */
	else
		sema_instance(S, caller, li, first, sc->ret);
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
		ok = (vals[i] = sema_expr(S, sc, av->v[i])) != NULL;
	return ok ? instantiate(S, sc, e->loc, li, vals) : NULL;
}

static LayerInfo *
repeat_layer(Sema *S, const Expr *le)
{
	LayerInfo *li = le->kind == E_NAME ? sema_find_layer(S, le->u.name) : NULL;

	if (!li) {
		diag_error(S->d, le->loc, "repeat needs a layer name, but %s is none",
		           sema_text(S, le));
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
	int ok = sema_eval(S, sc, args[0], &n);
	if (ok && (n < 1 || n > MAXREPEAT)) {
		diag_error(S->d, args[0]->loc, "repeat count must be 1 to %d, but %s is "
		           "%lld", MAXREPEAT, sema_text(S, args[0]), (long long)n);
		ok = 0;
	}
	LayerInfo *li = repeat_layer(S, args[1]);
	Value *x = sema_expr(S, sc, args[2]);
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
			sema_closer(name, op_info[i].name, &best, &bestd);
	sema_closer(name, "linear", &best, &bestd);
	sema_closer(name, "repeat", &best, &bestd);
	for (int i = 0; i < S->layers.n; i++)
		sema_closer(name, ((LayerInfo *)S->layers.v[i])->decl->name, &best, &bestd);
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
	if ((li = sema_find_layer(S, fn)))
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
		if (sema_number(args[0], &f) && !sema_number(args[1], &f)) {
			args[0] = e->u.bin.r;
			args[1] = e->u.bin.l;
		}
		if (sema_number(args[1], &f))
			return apply(S, sc, e, OP_SCALE, "scale", args, 2);
		return apply(S, sc, e, OP_MUL, "mul", args, 2);
	case '-':
		return apply(S, sc, e, OP_SUB, "sub", args, 2);
	default:
		diag_error(S->d, e->loc, "'%c' works on sizes, not on tensors", e->u.bin.op);
		return NULL;
	}
}

static Value *
expr_name(Sema *S, Scope *sc, const Expr *e)
{
	Sym *s = sema_lookup(sc, e->u.name);

	if (!s) {
		sema_unknown(S, sc, e->loc, e->u.name);
		return NULL;
	}
	if (s->kind != SY_VALUE) {
		diag_error(S->d, e->loc, "'%s' is %s, not a tensor", e->u.name,
		           sema_kind_noun(s->kind));
		return NULL;
	}
	return s->bad ? NULL : s->u.val;
}

/* A tensor expression; NULL after errors (reported). */
static Value *
expr_at(Sema *S, Scope *sc, const Expr *e)
{
	double f;

	if (sema_number(e, &f)) {
		diag_error(S->d, e->loc, "expected a tensor, not the number %s", sema_text(S, e));
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

Value *
sema_expr(Sema *S, Scope *sc, const Expr *e)
{
	if (sema_too_deep(S, e))
		return NULL;
	S->depth++;
	Value *v = expr_at(S, sc, e);
	S->depth--;
	return v;
}

/* Statement kinds that cannot appear in a layer, reported once per layer
 * whether it is called or not. */
void
sema_check_layer(Sema *S, LayerInfo *li)
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
