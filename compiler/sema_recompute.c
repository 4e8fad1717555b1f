/* sema_recompute.c: `recompute NAME, ...;`, the tensors the backward
 * computes again instead of reading them from the saved buffer.
 *
 * A name is a tensor defined above in the same body (RC_NAMED, with the
 * unnamed results of the expression that computes it), or a
 * layer that this body called above: every value computed inside each
 * such instance, nested layers included, is recomputed (RC_LAYER) but the
 * instance's result, which stays the checkpoint the next layer starts
 * from (Megatron's full-layer recomputation). grad.c acts on the marks.
 *
 * requires: the statement's body processed up to it (sema.c calls it in
 * order; instantiate records each layer instance in its caller's scope).
 * ensures: the named values marked, errors reported at the name; after
 * the model, sema_recompute_check refuses outputs and tensors both saved
 * and recomputed. */
#include <string.h>

#include "sema.h"

/* Records layer instance li of caller, its nodes [first, end) of the
 * graph, ret its result. */
void
sema_instance(Sema *S, Scope *caller, const LayerInfo *li, int first, Value *ret)
{
	Inst *in = arena_alloc(S->a, sizeof *in);

	in->layer = li;
	in->first = first;
	in->end = S->g->nodes.n;
	in->ret = ret;
	vec_push(S->a, &caller->insts, in);
}

/* Every activation made by instance in, but its result. */
static void
mark_instance(Sema *S, const Inst *in, Loc at)
{
	for (int k = in->first; k < in->end; k++) {
		Value *v = ((Node *)S->g->nodes.v[k])->out;
		if (v && v->role == R_ACT && v != in->ret && v->recompute == RC_NONE) {
			v->recompute = RC_LAYER;
			v->rcloc = at;
		}
	}
	if (in->ret && in->ret->recompute == RC_LAYER) /* an inner instance's */
		in->ret->recompute = RC_NONE;
}

/* recompute L; naming a layer: its instances that sc called above. */
static void
recompute_layer(Sema *S, Scope *sc, const Expr *ne, const LayerInfo *li)
{
	int any = 0;

	for (int i = 0; i < sc->insts.n; i++) {
		const Inst *in = sc->insts.v[i];
		if (in->layer == li) {
			mark_instance(S, in, ne->loc);
			any = 1;
		}
	}
	if (!any && S->d->nerr == S->nerr0) /* else a failed call made none */
		diag_error(S->d, ne->loc, "recompute names layer %s, but this %s calls no %s "
		           "above: name a layer after its calls, or a tensor", ne->u.name,
		           sc->layer ? "layer" : "model", ne->u.name);
}

static int
same_instance(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* v and the unnamed results of the expression that computes it, within
 * the body that wrote it (path: its instance): `o = merge_heads(
 * attention(q, k, v))` names the attention's result too. */
static void
mark_expr(Value *v, const char *path, Loc at)
{
	if (v->recompute == RC_NAMED)
		return;
	v->recompute = RC_NAMED;
	v->rcloc = at;
	for (int i = 0; i < v->def->nin; i++) {
		Value *u = v->def->in[i];
		if (u->expr && u->role == R_ACT && same_instance(u->def->layer, path))
			mark_expr(u, path, at);
	}
}

static void
recompute_tensor(Sema *S, const Expr *ne, Value *v)
{
	const char *what = v->role == R_IN ? "an input" : v->role == R_WEIGHT ? "a weight" : NULL;

	if (what) {
		diag_error(S->d, ne->loc, "recompute names %s, but %s is %s: the backward reads "
		           "it where it is, there is nothing to compute", ne->u.name, ne->u.name, what);
		return;
	}
	mark_expr(v, v->def->layer, ne->loc);
}

void
sema_recompute(Sema *S, Scope *sc, const Stmt *st)
{
	for (int i = 0; i < st->u.names.n; i++) {
		const Expr *ne = st->u.names.v[i];
		Sym *s = sema_lookup(sc, ne->u.name);
		LayerInfo *li = s ? NULL : sema_find_layer(S, ne->u.name);
		if (li)
			recompute_layer(S, sc, ne, li);
		else if (!s)
			sema_unknown(S, sc, ne->loc, ne->u.name);
		else if (s->kind != SY_VALUE)
			diag_error(S->d, ne->loc, "recompute names a tensor or a layer, but '%s' is %s",
			           ne->u.name, sema_kind_noun(s->kind));
		else if (!s->bad)
			recompute_tensor(S, ne, s->u.val);
	}
}

/* Once the outputs are known: an output is read from the io struct, and
 * a tensor cannot be both saved whole and recomputed. */
void
sema_recompute_check(Sema *S)
{
	for (int i = 0; i < S->g->values.n; i++) {
		Value *v = S->g->values.v[i];
		if (v->recompute != RC_NAMED)
			continue;
		if (v->role == R_OUT)
			diag_error(S->d, v->rcloc, "recompute names %s, but %s is an output: the "
			           "backward reads it from the io struct", v->name, v->name);
		else if (v->keep)
			diag_error(S->d, v->rcloc, "recompute names %s, but `save` names it too: "
			           "the forward either saves it whole or the backward gathers it "
			           "again, not both", v->name);
	}
}

/* The tensors that --memory chose (Options.recompute), by their names in
 * the graph: as if `recompute` named each alone. */
void
sema_recompute_chosen(Sema *S)
{
	for (int k = 0; k < S->o->nrecompute; k++)
		for (int i = 0; i < S->g->values.n; i++) {
			Value *v = S->g->values.v[i];
			if (v->role == R_ACT && v->name && !strcmp(v->name, S->o->recompute[k]) &&
			    v->recompute == RC_NONE)
				v->recompute = RC_NAMED;
		}
}
