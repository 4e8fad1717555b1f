/* elide.c: collectives over groups of one rank taken out of a graph.
 *
 * requires: a Graph from sema_build or grad_build (graph_fill_locality
 * may have run; it is not needed).
 * provides: graph_elide_group1.
 *
 * With -D tp=1 (one GPU, or a job with no tensor parallelism) every
 * collective over tp moves nothing: the one rank's slice is the whole
 * tensor, its partial sum the whole sum. Kept, each is a copy of its
 * input into a second buffer (and in the backward, where a weight's
 * gradient is summed slice by slice inside a fused collective, a zeroing
 * of that gradient too). Taken out, its readers read its input. The
 * spreads left on the values (split or partial over the group of one)
 * still describe the data exactly: a rank's slice of one is all of it.
 *
 * A collective stays (a copy) where its result cannot become its input:
 * its result is saved for the backward (the saved buffer is its home), or
 * it is an output or a gradient whose input is no plain temporary (an
 * input, a weight, a saved value, another output). Where it can, a
 * temporary input takes the output's place, name and home. */
#include "cf.h"

/* v's readers read u instead. */
static void
reroute(Arena *a, Value *v, Value *u, const Node *gone)
{
	Vec keep = {0};

	for (int i = 0; i < u->uses.n; i++)
		if (u->uses.v[i] != gone)
			vec_push(a, &keep, u->uses.v[i]);
	for (int i = 0; i < v->uses.n; i++) {
		Node *r = v->uses.v[i];
		for (int j = 0; j < r->nin; j++)
			if (r->in[j] == v)
				r->in[j] = u;
		vec_push(a, &keep, r);
	}
	u->uses = keep;
}

/* Whether collective n's result can be replaced by its input: then does
 * so (an output's place goes to the input) and returns 1. */
static int
elide(Graph *g, Node *n)
{
	Value *v = n->out, *u = n->in[0];

	if (n->a.coll.group->size != 1 || v->dtype != u->dtype)
		return 0;
	if (v->role == R_OUT && (v->home == HO_ROLE || v->home == HO_GRADS)) {
		if (u->role != R_ACT || u->home != HO_ROLE)
			return 0;
		for (int i = 0; i < g->outputs.n; i++)
			if (g->outputs.v[i] == v)
				g->outputs.v[i] = u;
		u->role = R_OUT;
		u->home = v->home;
		u->name = v->name;
		u->expr = NULL;
		u->outname = v->outname;
		u->nloc = v->nloc;
	} else if (v->role != R_ACT || v->home != HO_ROLE)
		return 0;
	reroute(g->arena, v, u, n);
	return 1;
}

/* Takes every collective over a group of one rank out of g (see above);
 * returns how many. The nodes and values left keep their order and are
 * numbered again. */
int
graph_elide_group1(Graph *g)
{
	int gone = 0, nn = 0, nv = 0;

	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (op_info[n->op].cls == CL_COLL && elide(g, n)) {
			n->out->def = NULL; /* marks both for the sweep */
			gone++;
		}
	}
	g->elided += gone;
	if (!gone)
		return 0;
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (n->out->def)
			n->id = nn, g->nodes.v[nn++] = n;
	}
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (v->def)
			v->id = nv, g->values.v[nv++] = v;
	}
	g->nodes.n = nn;
	g->values.n = nv;
	return gone;
}
