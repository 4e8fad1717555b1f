/* memory.c: the memory a planned training step holds on each rank, and
 * the budget (cfc --memory=BYTES) checked against it.
 *
 * The peak of a pass is what is live at once on a rank: the saved
 * activations (written by the forward, read by the backward, held
 * between them) plus the workspace of the pass that runs, so
 * saved + max(forward workspace, backward workspace); a forward alone
 * holds its workspace. Inputs, weights, outputs and gradients are the
 * application's and not counted.
 *
 * requires: the forward planned (and the backward, when there is one).
 * ensures: mem_check reports a peak over the budget with its largest
 * contributors, each at its place in the source; mem_pick names the
 * saved tensor whose recomputation a budget asks for next. */
#include <stdlib.h>
#include <string.h>

#include "memory.h"

MemUse
mem_use(const Graph *g, const Plan *fp, const Plan *bp)
{
	MemUse m = {0};

	m.fws = fp ? fp->wsbytes : 0;
	m.bws = bp ? bp->wsbytes : 0;
	m.saved = g->bwd ? g->savedbytes : 0;
	m.peak = m.saved + (m.fws > m.bws ? m.fws : m.bws);
	return m;
}

void
mem_explain(FILE *f, const Graph *g, MemUse m)
{
	fprintf(f, "memory: peak %lld bytes per rank = saved %lld (%d tensors) + workspace %lld "
	        "(%s; forward %lld, backward %lld)\n", (long long)m.peak, (long long)m.saved,
	        g->bwd ? g->saved.n : 0, (long long)(m.peak - m.saved),
	        m.bws > m.fws ? "backward" : "forward", (long long)m.fws, (long long)m.bws);
}

static int64_t
saved_size(const Value *v)
{
	return plan_align(dtype_size[v->dtype] * value_rank_elems(v));
}

/* The saved values by size, largest first (ties in buffer order). */
static int
by_size(const void *a, const void *b)
{
	const Value *x = *(const Value *const *)a, *y = *(const Value *const *)b;
	int64_t sx = saved_size(x), sy = saved_size(y);

	return sx != sy ? (sx < sy ? 1 : -1) : (x->soff > y->soff) - (x->soff < y->soff);
}

static const Value **
sorted_saved(Arena *a, const Graph *g)
{
	const Value **vs = arena_alloc(a, sizeof *vs * ((size_t)g->saved.n + 1));

	for (int i = 0; i < g->saved.n; i++)
		vs[i] = g->saved.v[i];
	qsort(vs, (size_t)g->saved.n, sizeof *vs, by_size);
	return vs;
}

int
mem_check(Arena *a, Diag *d, const Graph *g, MemUse m, int64_t budget, const Loc *at,
          const char *tried)
{
	if (m.peak <= budget)
		return 0;
	const char *what = arena_printf(a, "the plan's peak is %lld bytes per rank, over %s%lld: "
	                                "saved activations %lld, %s workspace %lld%s",
	                                (long long)m.peak, at ? "memory = " : "--memory=",
	                                (long long)budget, (long long)m.saved,
	                                m.bws > m.fws ? "backward" : "forward",
	                                (long long)(m.peak - m.saved), tried ? tried : "");
	if (at)
		diag_error(d, *at, "%s", what);
	else
		diag_plain(d, "%s", what);
	if (m.peak - m.saved > budget)
		diag_plain_note(d, "the workspace alone, %lld bytes, is over the budget: recomputing "
		                "saved tensors cannot lower it", (long long)(m.peak - m.saved));
	if (!g->bwd)
		return 1;
	const Value **vs = sorted_saved(a, g);
	for (int i = 0; i < g->saved.n && i < MEM_SHOWN; i++)
		diag_note(d, vs[i]->loc, "saved for the backward: %s%s%s, %lld bytes per rank",
		          vs[i]->name, vs[i]->expr ? " = " : "", vs[i]->expr ? vs[i]->expr : "",
		          (long long)saved_size(vs[i]));
	if (g->saved.n > MEM_SHOWN)
		diag_plain_note(d, "and %d smaller saved tensors", g->saved.n - MEM_SHOWN);
	return 1;
}

/* Can the backward compute v again? An activation that a node computes
 * as its result (an attention's log-sum-exp is its second one) and that
 * is saved as it is (no `save`). */
static int
recomputable(const Value *v)
{
	return v->def && v->def->out == v && !v->keep && v->recompute == RC_NONE;
}

const Value *
mem_pick(Arena *a, const Graph *g, const char *const *tried, int ntried)
{
	const Value **vs = sorted_saved(a, g);

	for (int i = 0; i < g->saved.n; i++) {
		int seen = !recomputable(vs[i]);
		for (int k = 0; k < ntried && !seen; k++)
			seen = !strcmp(tried[k], vs[i]->name);
		if (!seen)
			return vs[i];
	}
	return NULL;
}
