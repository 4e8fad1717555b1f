/* sema_node.c: what every part of sema builds with: nodes and values
 * made and committed to the graph, a dimension found by label, a split
 * checked, a number literal read, a model tensor looked up. Below
 * sema.c, sema_call.c, sema_infer.c and sema_sched.c, which all use it
 * (it calls none of them).
 * requires: a Sema whose graph is being built.
 * ensures: errors reported at the place given; the graph only grows. */
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

/* ---- lookups ---- */

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
