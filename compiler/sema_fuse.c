/* sema_fuse.c: the gated unit of a SwiGLU MLP as one op. silu(A) * B
 * and B * silu(A) become swiglu(A, B): one runtime call forward instead
 * of two (5 tensor passes to 3), and a backward of swiglu_da and
 * swiglu_db (9 passes to 7) that reads A and B, so that silu(A) is
 * neither written nor saved.
 *
 * requires: the model's statements run, temporaries not yet named (a
 * value with no name is one no statement named, so nothing else reads
 * it); layer instances' node ranges (sema_instance) no longer needed.
 * ensures: every mul of an unnamed silu result with no other use, made in
 * the same layer instance, by an operand of A's shape and dtype, is a
 * swiglu node and the silu node is gone; the nodes and values are
 * numbered again in their order, which stays topological. A named
 * `s = silu(a)` stays as written: the user may save or recompute it. */
#include <string.h>

#include "sema.h"

static int
same_layer(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Is operand i of mul m an unnamed silu result that fuses with the
 * other? */
static int
fusable(const Node *m, int i)
{
	const Value *s = m->in[i], *b = m->in[!i];
	const Node *f = s->def;

	if (f->op != OP_SILU || s->name || s->role != R_ACT || s->uses.n != 1 ||
	    !same_layer(f->layer, m->layer))
		return 0;
	const Value *a = f->in[0];
	if (a->ndim != b->ndim || a->dtype != b->dtype)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

/* m = swiglu(A, B); silu node f, A's use, goes to m. */
static void
fuse(Node *m, int i)
{
	Node *f = m->in[i]->def;
	Value *a = f->in[0], *b = m->in[!i];

	m->op = OP_SWIGLU;
	m->in[0] = a;
	m->in[1] = b;
	for (int u = 0; u < a->uses.n; u++)
		if (a->uses.v[u] == f)
			a->uses.v[u] = m;
	f->out = NULL; /* marks it gone */
}

/* The graph without the nodes fuse took (and their values), numbered
 * again in order. */
static void
compact(Graph *g)
{
	int nn = 0, nv = 0;

	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (!n->out)
			continue;
		n->id = nn;
		g->nodes.v[nn++] = n;
	}
	g->nodes.n = nn;
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (!v->def->out)
			continue;
		v->id = nv;
		g->values.v[nv++] = v;
	}
	g->values.n = nv;
}

void
sema_fuse(Sema *S)
{
	Graph *g = S->g;
	int any = 0;

	for (int k = 0; k < g->nodes.n; k++) {
		Node *m = g->nodes.v[k];
		if (m->op != OP_MUL)
			continue;
		for (int i = 0; i < 2; i++)
			if (fusable(m, i)) {
				fuse(m, i);
				any = 1;
				break;
			}
	}
	if (any)
		compact(g);
}
