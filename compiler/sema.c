/* sema.c: names, sizes, shapes and distributions: the AST becomes a graph.
 * This file is the pass: the layers and the model found, the model's
 * statements run (sema_call.c), its outputs and temporaries; the other
 * sema_*.c files do its parts (sema.h lists them).
 *
 * requires: a Program from parse_program (no syntax errors).
 * ensures: a Graph in topological order whose every Value has a dtype, a
 * positive shape, labels and a distribution; layers inlined at each call;
 * every collective has a schedule choice (Node.sched); or NULL, with every
 * error reported. graph_check, run with the graph facts right after this
 * pass, backs the claim. */
#include <string.h>

#include "sema.h"

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
	sema_fuse(S);
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
