/* sema.c: names, sizes, shapes and distributions: the AST becomes a graph.
 * This file is the pass: declarations, statements and the model; the
 * other sema_*.c files do its parts (sema.h lists them).
 *
 * requires: a Program from parse_program (no syntax errors).
 * ensures: a Graph in topological order whose every Value has a dtype, a
 * positive shape, labels and a distribution; layers inlined at each call;
 * every collective has a schedule choice (Node.sched); or NULL, with every
 * error reported. graph_check, run with the graph facts right after this
 * pass, backs the claim. */
#include <limits.h>
#include <string.h>

#include "sema.h"

/* ---- values and nodes ---- */

long
sema_max_ops(const Sema *S)
{
	return S->o->max_ops > 0 ? S->o->max_ops : MAXOPS;
}

Node *
sema_node_new(Sema *S, const Scope *sc, OpKind op, Loc loc)
{
	Node *n = arena_alloc(S->a, sizeof *n);

	/* inlined layer calls can multiply ops exponentially: stop at once
	 * (d->fatal); instantiate reports the crossing at its call */
	if (++S->nops > sema_max_ops(S) && !S->toomany) {
		S->toomany = 1;
		S->d->fatal = 1;
		if (!S->stack.n) {
			S->toomany = 2;
			diag_error(S->d, loc, "the model has more than %ld ops here: the most cfc "
			           "compiles (--max-ops=N allows more)", sema_max_ops(S));
		}
	}
	n->op = op;
	n->loc = loc;
	n->layer = sc->path;
	n->lname = sc->layer ? sc->layer->decl->name : NULL;
	if (op_info[op].cls == CL_COLL)
		n->a.coll.dim = n->a.coll.dim2 = -1;
	return n;
}

/* A result value shaped like `like` (or blank), not yet in the graph. */
Value *
sema_proto(Sema *S, const Value *like)
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
			           "than an MPI int count can hold", sema_desc(S, name, e), INT_MAX);
			return 0;
		}
	}
	if (n > INT_MAX) {
		diag_error(S->d, loc, "%s has %lld elements per rank, more than an MPI "
		           "int count can hold (%d)", sema_desc(S, name, e), (long long)n, INT_MAX);
		return 0;
	}
	return 1;
}

/* Adds node n defining v (named name, or computed by e) to the graph;
 * NULL when v is too large. */
Value *
sema_commit(Sema *S, Node *n, Value *v, const char *name, const Expr *e)
{
	Graph *g = S->g;

	if (!count_fits(S, v, n->loc, name, e))
		return NULL;
	return graph_add(S->a, g, n, v);
}

/* Dimension e of v (named name, or the value of expression x): a unique
 * label or a position. */
int
sema_find_dim(Sema *S, const Value *v, const Expr *e, const char *name, const Expr *x)
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
			           sema_desc(S, name, x), e->u.name);
		else if (n > 1)
			diag_error(S->d, e->loc, "label '%s' names %d dimensions of %s: give "
			           "the position", e->u.name, n, sema_desc(S, name, x));
		return n == 1 ? d : -1;
	}
	if (e->kind == E_INT && e->u.ival >= 0 && e->u.ival < v->ndim)
		return (int)e->u.ival;
	if (e->kind == E_INT)
		diag_error(S->d, e->loc, "%s has %d dimension%s: %lld is not a position "
		           "from 0 to %d", sema_desc(S, name, x), v->ndim, v->ndim == 1 ? "" : "s",
		           (long long)e->u.ival, v->ndim - 1);
	else
		diag_error(S->d, e->loc, "expected a dimension of %s: a label such as "
		           "'S' or a position from 0", sema_desc(S, name, x));
	return -1;
}

/* Does dim d of v (named name, or computed by x) divide over g? */
int
sema_divides(Sema *S, const Value *v, int d, const Group *g, Loc loc, const char *name,
             const Expr *x)
{
	if (v->shape[d] % g->size == 0)
		return 1;
	diag_error(S->d, loc, "dimension %s of %s (%lld) does not divide evenly over "
	           "group %s (%d)", value_dim_name(S->a, v, d), sema_desc(S, name, x),
	           (long long)v->shape[d], g->name, g->size);
	return 0;
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
			sema_check_layer(S, li);
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
Value *
sema_model_tensor(Sema *S, const char *name, Loc loc)
{
	Sym *s = sema_scope_find(S->ms, name);

	if (!s)
		sema_unknown(S, S->ms, loc, name);
	else if (s->kind != SY_VALUE)
		diag_error(S->d, loc, "'%s' is %s, not a tensor", name, sema_kind_noun(s->kind));
	else if (!s->bad)
		return s->u.val;
	return NULL;
}

static void
add_output(Sema *S, const Expr *ne)
{
	const char *name = ne->u.name;
	Value *v = sema_model_tensor(S, name, ne->loc);

	if (!v)
		return;
	if (v->role == R_IN || v->role == R_WEIGHT)
		diag_error(S->d, ne->loc, "%s is %s; an output must be computed", name,
		           v->role == R_IN ? "an input" : "a weight");
	else if (v->role == R_OUT)
		diag_error(S->d, ne->loc, "%s is already an output", name);
	else if (dist_count(&v->dist, DI_PARTIAL))
		diag_error(S->d, ne->loc, "output %s is a partial sum over %s: reduce it "
		           "first (reduce_scatter or all_reduce)", name,
		           dist_group(&v->dist, DI_PARTIAL)->name);
	else {
		v->role = R_OUT;
		v->outname = name;
		v->nloc = ne->loc;
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

/* Temporaries are named t1, t2, ... in creation order (prefixed by their
 * layer instance), skipping names the user took. */
static void
name_temps(Sema *S)
{
	Graph *g = S->g;
	StrMap taken = {0};
	int t = 1;

	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (v->name)
			strmap_put(S->a, &taken, v->name, v);
	}
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		const char *path = v->def->layer;
		while (!v->name) {
			const char *s = path ? arena_printf(S->a, "%s.t%d", path, t++)
			                     : arena_printf(S->a, "t%d", t++);
			if (!strmap_put(S->a, &taken, s, v))
				v->name = s;
		}
	}
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
		sema_stmt(S, S->ms, m->body.v[i]);
	if (S->toomany)
		return; /* MAXOPS: naming and checking all that is no use */
	outputs(S);
	sema_recompute_check(S);
	name_temps(S);
	sema_recompute_chosen(S);
	sema_schedules(S);
	if (S->d->nerr == S->nerr0) /* a name defined twice is told once */
		sema_cnames(S);
}

Graph *
sema_build(Arena *a, Diag *d, const Program *p, Options *o)
{
	Options none = {0};
	Sema S = {.a = a, .d = d, .o = o ? o : &none, .nerr0 = d->nerr};

	collect(&S, p);
	if (S.model)
		build_model(&S);
	sema_check_defines(&S);
	if (d->nerr > S.nerr0 || !S.model)
		return NULL;
	return S.g;
}
