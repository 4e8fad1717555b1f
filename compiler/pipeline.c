/* pipeline.c: every pass, in order, on a few lines (the one place the
 * sequence is written; cfc and the unit tests call it).
 * requires: a Pipeline whose in-fields are set, the rest zero.
 * ensures: the out-fields hold what each pass made; a failed pass's
 * errors are reported on pl->d and nothing after it runs. choose_pass
 * (at the end) compiles on trial through here to choose each pass's
 * order and coalescing threshold. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory.h"
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
		pl->graph->saved_ws = 1;
		b->saved_ws = !pl->keep_saved;
		phase(pl, "backward: %d ops", b->nodes.n);
	}
	/* groups of one rank: their collectives move nothing (elide.c);
	 * after the backward is derived, which reads the forward's graph as
	 * sema made it */
	if (!pl->keep_group1) {
		int n = graph_elide_group1(pl->graph);
		if (pl->graph->bwd)
			n += graph_elide_group1(pl->graph->bwd);
		if (n)
			phase(pl, "groups of one: %d collectives elided", n);
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
		pr[order_ix(pl->order)] = predict_or_huge(*s);
	/* plan: every decision about memory */
	*p = plan_sched(*s);
	phase(pl, "%splan: %d collectives", pass, (*s)->colls.n);
	if (pl->stop == PIPE_PLANNED)
		return PIPE_OK;
	return pipeline_verify(pl, *s, *p, pass);
}

int
pipeline_verify(Pipeline *pl, Sched *s, Plan *p, const char *pass)
{
	/* verify: the schedule and its plan, else nothing is emitted */
	if (verify_sched(s, p, pl->d))
		return PIPE_INTERNAL;
	phase(pl, "%sverify: %d collectives", pass, s->colls.n);
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
	if (pl->profile && !pl->trial)
		choose_pass(pl, src, &fwd, &bwd);
	int rc = pipeline_graphs(pl, src);
	if (rc || pl->stop == PIPE_GRAPH)
		return rc;
	rc = schedule_as(pl, pl->graph, &pl->sched, &pl->plan, "", &fwd);
	if (!rc && pl->graph->bwd)
		rc = schedule_as(pl, pl->graph->bwd, &pl->bsched, &pl->bplan, "backward ", &bwd);
	return rc;
}

int
pipeline_trial(const Pipeline *pl, const Src *src, OrderMode order, int64_t coalesce,
               double (*predict)[2], Pipeline *tr)
{
	Diag quiet;
	FILE *null = fopen("/dev/null", "w");

	*tr = (Pipeline){0};
	if (!null)
		return PIPE_INTERNAL;
	diag_init(&quiet, pl->d->src, null);
	*tr = (Pipeline){.a = pl->a, .d = &quiet, .o = pl->o, .profile = pl->profile,
	                 .auto_margin = pl->auto_margin, .backward = pl->backward,
	                 .accumulate = pl->accumulate, .keep_group1 = pl->keep_group1,
	                 .keep_saved = pl->keep_saved, .order = order, .order_asked = 1,
	                 .coalesce = coalesce, .stop = PIPE_PLANNED, .trial = 1,
	                 .predict = predict};
	int rc = pipeline_run(tr, src);
	tr->d = pl->d; /* quiet is gone with this frame */
	fclose(null);
	free(quiet.rec);
	return rc;
}

/* ---- choose_pass ----
 * choose_pass, per pass: the order of the whole pass (order.c's
 *    ORDER_PASS or ORDER_REGION; ORDER_PASS_SINGLE where ORDER_PASS is
 *    over the memory bound and it is not) and the coalescing threshold (off, the
 *    spec's or the default, and COALESCE_LARGE), each configuration that
 *    was not asked for explicitly (--order, --coalesce, the spec's
 *    `coalesce = BYTES;`) compiled on trial through the order pass, with
 *    its own auto choices (one trial per threshold: the pass predicted
 *    before order.c runs is the region order's, after it the pass
 *    order's), and predicted over the whole pass as ordered
 *    (predict_pass: a stage order.c hosts under a collective's transfers
 *    costs that collective's program, not its own time). The fastest
 *    wins; a tie (within CHOOSE_TIE of the pass) keeps the earlier of
 *    the list, whose first is the default (pass order, the default
 *    threshold). With a memory bound (Pipeline.bound), a configuration
 *    whose pass holds more (the saved activations and the pass's
 *    workspace) is not chosen, each order then planned on trial; where
 *    none is within it, the fastest, and cfc's ladder takes over
 *    (cli/cfc.c, fit_memory). requires: a Pipeline whose in-fields are set, with a
 *    profile. ensures: the configuration of the forward and of the
 *    backward, and the line --explain prints for each (Sched.choice);
 *    trials report nothing (their diagnostics go nowhere: the real run
 *    after them reports). */

static const char *
ch_coalesce_str(Arena *a, int64_t t, int64_t dflt)
{
	if (t == 0)
		return "coalesce off";
	if (t < 0)
		return arena_printf(a, "coalesce %lld bytes (the default)", (long long)dflt);
	return arena_printf(a, "coalesce %lld bytes", (long long)t);
}

static const char *
ch_config_str(Arena *a, const ChooseConfig *cf, int64_t dflt)
{
	return arena_printf(a, "order=%s, %s", order_name(cf->order),
	                    ch_coalesce_str(a, cf->coalesce, dflt));
}

/* Threshold thr's trial under order (pipeline_trial), the predicted
 * forward and backward in either order (t[pass][order], HUGE_VAL: not
 * compiled or not predicted; under ORDER_REGION the region order's
 * alone), each pass's peak with the saved activations (peak[pass], -1:
 * not planned), the default threshold, whether the spec sets it and
 * (nested, unless NULL) whether a pass ran a collective inside another's. */
static void
ch_trial(const Pipeline *pl, const Src *src, int64_t thr, OrderMode order, double t[2][2],
         int64_t peak[2], int64_t *dflt, int *spec, int *nested)
{
	Pipeline tr;

	t[0][0] = t[0][1] = t[1][0] = t[1][1] = HUGE_VAL;
	peak[0] = peak[1] = -1;
	pipeline_trial(pl, src, order, thr, t, &tr);
	if (nested)
		*nested = plan_nests(tr.plan) || plan_nests(tr.bplan);
	if (tr.graph) {
		*dflt = coalesce_bytes(tr.graph, -1);
		*spec = tr.graph->coalesce_loc.line != 0;
		MemUse m = mem_use(tr.graph, tr.plan, tr.bplan);
		if (tr.plan)
			peak[0] = m.saved + m.fws;
		if (tr.bplan)
			peak[1] = m.saved + m.bws;
	}
}

/* The fastest of n predictions t[] (the first on a tie) of those whose
 * peak[] is within bound (0: any), -1: none. */
static int
ch_best(const double *t, const int64_t *peak, int n, int64_t bound)
{
	int best = -1;

	for (int k = 0; k < n; k++)
		if (t[k] < HUGE_VAL && (!bound || (peak[k] >= 0 && peak[k] <= bound)) &&
		    (best < 0 || t[k] < t[best] * (1 - CHOOSE_TIE)))
			best = k;
	return best;
}

static const char *
ch_line(Arena *a, const ChooseConfig *cf, const double *t, const int64_t *peak, int n, int best,
        int64_t dflt, int64_t bound)
{
	const char *s = arena_printf(a, "%s, predicted %.4f ms", ch_config_str(a, &cf[best], dflt),
	                             t[best] * 1e3);
	if (n == 1)
		return s;
	s = arena_printf(a, "%s, the %s of %d (", s, best ? "fastest" : "default and fastest", n);
	for (int k = 0, j = 0; k < n; k++) {
		if (k == best)
			continue;
		const char *what = t[k] < HUGE_VAL ? arena_printf(a, "%.4f ms", t[k] * 1e3)
		                                   : "not compiled";
		if (bound && t[k] < HUGE_VAL && peak[k] > bound)
			what = arena_printf(a, "%s, peak %lld: over the bound", what, (long long)peak[k]);
		s = arena_printf(a, "%s%s%s: %s", s, j++ ? "; " : "", ch_config_str(a, &cf[k], dflt),
		                 what);
	}
	if (bound)
		return arena_printf(a, "%s), within the memory bound of %lld bytes per rank", s,
		                    (long long)bound);
	return arena_printf(a, "%s)", s);
}

int
choose_pass(const Pipeline *pl, const Src *src, Choice *fwd, Choice *bwd)
{
	ChooseConfig cf[6], cb[6]; /* the forward's, the backward's */
	OrderMode orders[2] = {ORDER_PASS, ORDER_REGION};
	int64_t thr[3] = {-1, 0, COALESCE_LARGE};
	int no = pl->order_asked ? 1 : 2, nt = pl->coalesce >= 0 ? 1 : 3, spec = 0;
	/* by threshold, pass, order; the peaks by threshold, order, pass */
	double t[3][2][2], tf[6], tb[6], tr[2][2];
	int64_t pk[3][2][2], pf[6], pb[6], bound = pl->bound;
	int64_t dflt = COALESCE_DEFAULT;

	if (pl->order_asked)
		orders[0] = pl->order;
	if (pl->coalesce >= 0)
		thr[0] = pl->coalesce;
	if (no * nt == 1)
		return 0; /* nothing to choose */
	/* one trial per threshold gives either order's prediction; with a
	 * bound, the region order's peaks take a trial of their own */
	/* by threshold and pass: the pass order's kind */
	OrderMode first[3][2] = {{orders[0], orders[0]}, {orders[0], orders[0]},
	                         {orders[0], orders[0]}};
	for (int j = 0; j < nt; j++) {
		int nested = 0;
		ch_trial(pl, src, thr[j], orders[0], t[j], pk[j][order_ix(orders[0])], &dflt, &spec,
		         &nested);
		if (bound && no == 2)
			ch_trial(pl, src, thr[j], ORDER_REGION, tr, pk[j][ORDER_REGION], &dflt, &spec,
			         NULL);
		/* a pass over the bound in the pass order: one collective in
		 * flight instead, where that is within it (cfc's ladder's
		 * next rung) */
		int64_t *pp = pk[j][order_ix(orders[0])];
		if (bound && no == 2 && orders[0] == ORDER_PASS && nested &&
		    (pp[0] > bound || pp[1] > bound)) {
			double t1[2][2];
			int64_t p1[2];
			ch_trial(pl, src, thr[j], ORDER_PASS_SINGLE, t1, p1, &dflt, &spec, NULL);
			for (int b = 0; b < 2; b++)
				if (pp[b] > bound && p1[b] >= 0 && p1[b] <= bound) {
					first[j][b] = ORDER_PASS_SINGLE;
					t[j][b][0] = t1[b][0];
					pp[b] = p1[b];
				}
		}
		if (spec) /* the spec's `coalesce = BYTES;` is asked too: it alone */
			nt = 1;
	}
	int n = 0;
	for (int i = 0; i < no; i++)
		for (int j = 0; j < nt; j++) {
			cf[n] = (ChooseConfig){i ? orders[i] : first[j][0], thr[j]};
			cb[n] = (ChooseConfig){i ? orders[i] : first[j][1], thr[j]};
			tf[n] = t[j][0][order_ix(orders[i])];
			tb[n] = t[j][1][order_ix(orders[i])];
			pf[n] = pk[j][order_ix(orders[i])][0];
			pb[n++] = pk[j][order_ix(orders[i])][1];
		}
	if (n == 1)
		return 0;
	int bf = ch_best(tf, pf, n, bound), bb = ch_best(tb, pb, n, bound);
	if (bf < 0) /* none within the bound: the bound's ladder (cfc) */
		bound = 0, bf = ch_best(tf, pf, n, 0), bb = ch_best(tb, pb, n, 0);
	if (bf < 0)
		return 0; /* no trial compiled: the real run reports why */
	fwd->cf = cf[bf];
	fwd->line = ch_line(pl->a, cf, tf, pf, n, bf, dflt, bound);
	fwd->set = 1;
	if (pl->backward && bb < 0)
		bb = ch_best(tb, pb, n, 0);
	if (pl->backward && bb >= 0) {
		bwd->cf = cb[bb];
		bwd->line = ch_line(pl->a, cb, tb, pb, n, bb, dflt, bound);
		bwd->set = 1;
	}
	return 0;
}
