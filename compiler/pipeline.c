/* pipeline.c: every pass, in order, on a few lines (the one place the
 * sequence is written; cfc and the unit tests call it).
 * requires: a Pipeline whose in-fields are set, the rest zero.
 * ensures: the out-fields hold what each pass made; a failed pass's
 * errors are reported on pl->d and nothing after it runs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "pipeline.h"
#include "predict.h"

static void
phase(Pipeline *pl, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!pl->phase)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	pl->phase(pl->ctx, line);
}

/* The steps of every collective of s, over all its phases. */
static long long
sched_steps(const Sched *s)
{
	long long n = 0;

	for (int k = 0; k < s->colls.n; k++)
		n += ((Coll *)s->colls.v[k])->nsteps;
	return n;
}

/* The pass's predicted time, HUGE_VAL when it cannot be predicted. */
static double
predict_or_huge(const Sched *s)
{
	Prediction p = predict_pass(s->arena, s, 0);

	return p.err ? HUGE_VAL : p.total;
}

int
pipeline_graphs(Pipeline *pl, const Src *src)
{
	/* parse */
	if (!(pl->prog = parse_program(pl->a, pl->d, src)))
		return PIPE_INPUT;
	phase(pl, "parse: %zu bytes", src->len);
	/* semantic checks: names, sizes, shapes, distributions, schedules */
	if (!(pl->graph = sema_build(pl->a, pl->d, pl->prog, pl->o)))
		return PIPE_INPUT;
	phase(pl, "check: %d ops", pl->graph->nodes.n);
	/* graph facts: slice-locality, invariants */
	graph_fill_locality(pl->graph);
	graph_check(pl->graph);
	/* backward: reverse-mode differentiation into a graph of its own */
	if (pl->backward) {
		Graph *b = grad_build(pl->graph, pl->d, pl->accumulate);
		if (!b)
			return PIPE_INPUT;
		graph_fill_locality(b);
		graph_check(b);
		phase(pl, "backward: %d ops", b->nodes.n);
	}
	return PIPE_OK;
}

int
pipeline_schedule(Pipeline *pl, Graph *g, Sched **s, Plan **p, const char *pass)
{
	/* coalescing: small all_reduces packed into one transfer */
	coalesce_graph(g, pl->coalesce);
	/* regions: each collective and the compute it can be fused with */
	*s = region_sched(g);
	(*s)->profile = pl->profile;
	(*s)->auto_margin = pl->auto_margin;
	int ncoll = 0;
	for (int k = 0; k < g->nodes.n; k++)
		ncoll += (*s)->byid[k] != NULL;
	phase(pl, "%sregions: %d collectives", pass, ncoll);
	/* choose: with a profile, every candidate priced, auto's choices */
	choose_sched(*s, pl->d);
	/* lowering: the step programs, the stages in order */
	if (lower_sched(*s, pl->d))
		return PIPE_INPUT;
	phase(pl, "%slower: %d stages, %lld steps", pass, (*s)->stages.n, sched_steps(*s));
	if (pl->stop == PIPE_LOWERED)
		return PIPE_OK;
	/* order: the whole pass, collectives under other regions' compute */
	double *pr = pl->predict ? pl->predict[g->fwd != NULL] : NULL;
	if (pr)
		pr[ORDER_REGION] = predict_or_huge(*s);
	if (order_sched(*s, pl->order, pl->d))
		return PIPE_INTERNAL;
	if (pr)
		pr[pl->order] = predict_or_huge(*s);
	/* plan: every decision about memory */
	*p = plan_sched(*s);
	phase(pl, "%splan: %d collectives", pass, (*s)->colls.n);
	if (pl->stop == PIPE_PLANNED)
		return PIPE_OK;
	/* verify: the schedule and its plan, else nothing is emitted */
	if (verify_sched(*s, *p, pl->d))
		return PIPE_INTERNAL;
	phase(pl, "%sverify: %d collectives", pass, (*s)->colls.n);
	return PIPE_OK;
}

/* A pass's schedule under choice ch (when set: its order and threshold
 * for this pass alone, and its line for --explain). */
static int
schedule_as(Pipeline *pl, Graph *g, Sched **s, Plan **p, const char *pass, const Choice *ch)
{
	OrderMode order = pl->order;
	int64_t coalesce = pl->coalesce;

	if (ch->set)
		pl->order = ch->cf.order, pl->coalesce = ch->cf.coalesce;
	int rc = pipeline_schedule(pl, g, s, p, pass);
	if (*s && ch->set)
		(*s)->choice = ch->line;
	pl->order = order, pl->coalesce = coalesce;
	return rc;
}

int
pipeline_run(Pipeline *pl, const Src *src)
{
	Choice fwd = {0}, bwd = {0};

	/* order and choose: with a profile, the order and coalescing
	 * threshold of each pass that were not asked for */
	if (pl->profile && pl->stop == PIPE_VERIFIED)
		choose_pass(pl, src, &fwd, &bwd);
	int rc = pipeline_graphs(pl, src);
	if (rc || pl->stop == PIPE_GRAPH)
		return rc;
	rc = schedule_as(pl, pl->graph, &pl->sched, &pl->plan, "", &fwd);
	if (!rc && pl->graph->bwd)
		rc = schedule_as(pl, pl->graph->bwd, &pl->bsched, &pl->bplan, "backward ", &bwd);
	return rc;
}
