/* sema_call.c: statements, tensor expressions and calls (one recursion:
 * a layer call runs the layer's statements): operators and op calls
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

/* ---- declarations ---- */

/* The label of a dimension written as x: a size's name, or a product of
 * names (`H * Dh`, which split_heads by H labels Dh); otherwise none. */
static const char *
dim_label(Sema *S, const Expr *x)
{
	if (x->kind == E_NAME)
		return x->u.name;
	if (x->kind == E_BIN && x->u.bin.op == '*') {
		const char *l = dim_label(S, x->u.bin.l), *r = dim_label(S, x->u.bin.r);
		if (l && r)
			return arena_printf(S->a, "%s*%s", l, r);
	}
	return NULL;
}

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
		if (!sema_eval(S, sc, x, &v->shape[d])) {
			ok = 0;
		} else if (v->shape[d] <= 0) {
			diag_error(S->d, x->loc, "dimension %d of %s must be positive, but "
			           "%s is %lld", d, name, sema_text(S, x), (long long)v->shape[d]);
			ok = 0;
		}
		v->label[d] = dim_label(S, x);
	}
	return ok;
}

/* The group a split names (pair: the ':' of dim and group name), or NULL
 * after an error. */
static Group *
split_group(Sema *S, Scope *sc, const Expr *pair)
{
	const Expr *ge = pair->u.bin.r;
	Sym *gs = sema_lookup(sc, ge->u.name);

	if (!gs)
		sema_unknown(S, sc, ge->loc, ge->u.name);
	else if (gs->kind != SY_GROUP)
		diag_error(S->d, ge->loc, "'%s' is %s, not a group", ge->u.name,
		           sema_kind_noun(gs->kind));
	return gs && gs->kind == SY_GROUP && !gs->bad ? gs->u.group : NULL;
}

/* `split DIM over GROUP` (pair) of tensor v, added to *r: 0 after an
 * error. A tensor is split along one dim per group, a dim over one group. */
static int
split_of(Sema *S, Scope *sc, Value *v, const Expr *pair, const char *name, Dist *r)
{
	const Expr *sd = pair->u.bin.l, *ge = pair->u.bin.r;
	Group *g = split_group(S, sc, pair);
	int d = sema_find_dim(S, v, sd, name, NULL);

	if (d < 0 || !g)
		return 0;
	if (r->p[g->id].kind == DI_SPLIT) {
		diag_error(S->d, ge->loc, "%s is split over %s twice: a tensor is split along "
		           "one dimension per group", name, g->name);
		return 0;
	}
	const Group *o = dist_split_group(r, d);
	if (o) {
		diag_error(S->d, sd->loc, "dimension %s of %s is split over %s already: a "
		           "dimension is split over one group", value_dim_name(S->a, v, d), name,
		           o->name);
		return 0;
	}
	if (!sema_divides(S, v, d, g, sd->loc, name, NULL))
		return 0;
	r->p[g->id] = (DistPart){DI_SPLIT, d, g};
	return 1;
}

/* A weight's `grad split DIM over GROUP, ...`: its gradient is split like
 * the weight and, over each group it names (one the weight is replicated
 * over), reduce-scattered along DIM. */
static int
grad_splits(Sema *S, Scope *sc, const Stmt *st, Value *v)
{
	const Vec *gs = &st->u.tensor.gsplits;
	const char *name = st->u.tensor.name;
	int ok = 1;

	if (v->role != R_WEIGHT) {
		diag_error(S->d, ((Expr *)gs->v[0])->loc, "only a weight's gradient can be given "
		           "a spread of its own, but %s is an input", name);
		return 0;
	}
	v->gdist = v->dist;
	for (int i = 0; i < gs->n; i++) {
		const Expr *pair = gs->v[i];
		const Group *g = split_group(S, sc, pair);
		if (g && v->dist.p[g->id].kind != DI_REPL) {
			diag_error(S->d, pair->u.bin.r->loc, "%s is split over %s, so its gradient "
			           "is spread like it there: grad split names a group the weight is "
			           "replicated over", name, g->name);
			ok = 0;
		} else if (g) {
			ok &= split_of(S, sc, v, pair, name, &v->gdist);
		} else {
			ok = 0;
		}
	}
	return ok;
}

/* The tensor's splits, and a weight's gradient's. */
static int
tensor_split(Sema *S, Scope *sc, const Stmt *st, Value *v)
{
	const Vec *sp = &st->u.tensor.splits;
	int ok = 1;

	v->dist = (Dist){0};
	for (int i = 0; i < sp->n; i++)
		ok &= split_of(S, sc, v, sp->v[i], st->u.tensor.name, &v->dist);
	if (ok && st->u.tensor.gsplits.n)
		ok = grad_splits(S, sc, st, v);
	return ok;
}

static void
def_tensor(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.tensor.name;
	Role role = st->u.tensor.role;
	Value *v = sema_proto(S, NULL);

	v->role = role;
	v->name = sema_qualify(S, sc, name);
	v->loc = v->nloc = st->u.tensor.nloc;
	v->dtype = st->u.tensor.dtype != DT_NONE ? st->u.tensor.dtype : S->g->dtype;
	int ok = !(sc->layer && role == R_IN); /* reported by sema_check_layer */
	ok = ok && tensor_shape(S, sc, st, v);
	ok = ok && tensor_split(S, sc, st, v);
	Node *n = sema_node_new(S, sc, role == R_IN ? OP_INPUT : OP_WEIGHT, st->u.tensor.nloc);
	ok = ok && sema_commit(S, n, v, name, NULL);
	Sym *s = sema_define(S, sc, name, st->u.tensor.nloc, SY_VALUE);
	s->bad = !ok;
	s->u.val = v;
	if (ok)
		vec_push(S->a, role == R_IN ? &S->g->inputs : &S->g->weights, v);
	if (ok && sc->layer)
		bind(S, sc, name, v);
}

/* ---- statements ---- */

static void
def_assign(Sema *S, Scope *sc, const Stmt *st)
{
	const char *name = st->u.def.name;
	Value *v = sema_expr(S, sc, st->u.def.val);
	Sym *s = sema_define(S, sc, name, st->u.def.nloc, SY_VALUE);

	s->u.val = v;
	s->bad = !v;
	if (!v)
		return;
	if (!v->name) { /* a fresh result takes the name; else y = x is an alias */
		v->name = sema_qualify(S, sc, name);
		v->expr = NULL;
		v->nloc = st->u.def.nloc;
	}
	if (sc->layer)
		bind(S, sc, name, v);
}

/* save a, b; names tensors defined above that an all_gather made: with
 * a backward pass the forward saves them whole. */
static void
save_names(Sema *S, Scope *sc, const Stmt *st)
{
	for (int i = 0; i < st->u.names.n; i++) {
		const Expr *ne = st->u.names.v[i];
		Sym *s = sema_lookup(sc, ne->u.name);
		if (!s) {
			sema_unknown(S, sc, ne->loc, ne->u.name);
			continue;
		}
		if (s->kind != SY_VALUE || s->bad)
			continue;
		Value *v = s->u.val;
		if (v->def->op != OP_ALL_GATHER) {
			diag_error(S->d, ne->loc, "save names a tensor that an all_gather made, "
			           "but %s is %s: every other tensor the backward reads is saved "
			           "already", ne->u.name, v->def->op == OP_INPUT ? "an input" :
			           v->def->op == OP_WEIGHT ? "a weight" : arena_printf(S->a, "made by %s",
			           op_info[v->def->op].name));
			continue;
		}
		v->keep = 1;
	}
}

void
sema_stmt(Sema *S, Scope *sc, const Stmt *st)
{
	switch (st->kind) {
	case S_SIZE:
		sema_def_size(S, sc, st);
		break;
	case S_GROUP:
		if (sc->layer) /* reported by sema_check_layer */
			sema_define(S, sc, st->u.def.name, st->u.def.nloc, SY_GROUP)->bad = 1;
		else
			sema_def_group(S, sc, st);
		break;
	case S_TENSOR:
		def_tensor(S, sc, st);
		break;
	case S_ASSIGN:
		def_assign(S, sc, st);
		break;
	case S_RETURN:
		if (sc->layer && !sc->ret)
			sc->ret = sema_expr(S, sc, st->u.ret);
		break;
	case S_SAVE:
		save_names(S, sc, st);
		break;
	case S_RECOMPUTE:
		sema_recompute(S, sc, st);
		break;
	case S_TYPE: case S_OUT: case S_SCHED:
		break; /* the model's are handled apart; in layers, errors */
	}
}
