/* choose.c: the choices a --profile makes, before anything is lowered
 * for good (issue 51). Two levels:
 *
 *  - choose_sched, per collective: every candidate schedule
 *    (predict_candidates) lowered on trial (lower_try), proved
 *    (verify_coll) and predicted (predict_coll) into Coll.cand; an auto
 *    choice becomes predict_pick's, the simplest candidate within the
 *    slack of the fastest, where the slack is what the collectives
 *    before it (in the pass's order) left of Sched.auto_margin percent
 *    of the pass predicted with every collective at its fastest.
 *    requires: a Sched from region_sched (regions found, nothing
 *    lowered). ensures: with a profile, the stages in region order
 *    (lower_stages), every collective as regions left it but with its
 *    candidates (Coll.cand, .ncand), and every auto choice made
 *    (Coll.pick, .picked, .used, .pick_note: lower.c lowers the pick and
 *    says the note); without one, nothing.
 *
 *  - choose_pass, per pass: the order of the whole pass (order.c's
 *    ORDER_PASS or ORDER_REGION) and the coalescing threshold (off, the
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
 *    threshold). requires: a Pipeline whose in-fields are set, with a
 *    profile. ensures: the configuration of the forward and of the
 *    backward, and the line --explain prints for each (Sched.choice);
 *    trials report nothing (their diagnostics go nowhere: the real run
 *    after them reports). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "predict.h"

/* ---- per collective ---- */

/* Lowers, proves and predicts every candidate schedule of c that the
 * rules let apply (each once). c is left as region discovery left it. */
static void
ch_candidates(Sched *s, Coll *c, const Profile *pf)
{
	Arena *a = s->arena;
	SchedChoice cand[16], want = c->want;
	int n = predict_candidates(c->node, cand, 16);
	const char *note = c->note;
	char err[256];

	c->cand = arena_alloc(a, (size_t)n * sizeof *c->cand);
	c->ncand = 0;
	c->used = -1;
	for (int k = 0; k < n; k++) {
		cand[k].from = SF_BUILTIN;
		cand[k].loc = want.loc;
		cand[k].query = cand[k].kind == SK_FUSE && want.kind == SK_FUSE && want.query;
		c->want = cand[k];
		lower_reset(c, note);
		if (!lower_try(s, c))
			continue; /* its slices do not divide the region's dimension */
		const char *how = sched_kind_str(a, &c->how);
		int seen = 0;
		for (int j = 0; j < c->ncand; j++)
			seen |= !strcmp(sched_kind_str(a, &c->cand[j].how), how);
		if (seen)
			continue;
		VerifyStats st;
		if (!lower_provable(c))
			continue; /* too long to prove here (and to run) */
		if (verify_coll(c, NULL, &st, err, sizeof err))
			continue;
		Candidate *cd = &c->cand[c->ncand++];
		cd->how = c->how;
		cd->pr = predict_coll(a, s->g, c, pf, 0);
	}
	c->want = want;
	lower_reset(c, note);
}

/* c's auto choice, predict_pick's with slack seconds over the fastest;
 * returns what it gives away over the fastest. */
static double
ch_pick(Sched *s, Coll *c, double slack, double pass)
{
	Arena *a = s->arena;
	int fastest, best = predict_pick(c->cand, c->ncand, slack, &fastest);

	if (c->want.kind != SK_AUTO || best < 0)
		return 0;
	const Candidate *cd = &c->cand[best], *fd = &c->cand[fastest];
	c->used = best;
	c->picked = 1;
	c->pick = cd->how;
	c->pick.from = SF_BUILTIN;
	c->pick.loc = c->want.loc;
	const char *why = fastest == best
	        ? arena_printf(a, "the fastest of %d candidates", c->ncand)
	        : arena_printf(a, "the simplest of %d candidates within %.3g ms of the "
	                       "fastest (%s, %.3g ms): what the collectives before it "
	                       "left of the %g%% of the pass (%.4g ms) that auto gives "
	                       "away", c->ncand, slack * 1e3, sched_kind_str(a, &fd->how),
	                       fd->pr.total * 1e3, s->auto_margin, pass * 1e3);
	c->pick_note = arena_printf(a, "auto: %s, predicted %.3g ms, %s on profile %s",
	                            sched_kind_str(a, &cd->how), cd->pr.total * 1e3, why,
	                            s->profile->name);
	return cd->pr.total - fd->pr.total;
}

void
choose_sched(Sched *s, Diag *d)
{
	if (!s->profile)
		return;
	lower_stages(s);
	for (int k = 0; k < s->colls.n; k++) {
		diag_tick(d, "predict", k, s->colls.n);
		ch_candidates(s, s->colls.v[k], s->profile);
	}
	if (s->auto_margin == AUTO_MARGIN_OF_PROFILE)
		s->auto_margin = predict_margin(s->profile);
	/* auto gives away over the fastest, collective by collective in the
	 * pass's order, at most s->auto_margin percent of the pass in all */
	double pass = predict_pass(s->arena, s, 1).total;
	double left = pass * s->auto_margin / 100;
	for (int k = 0; k < s->colls.n; k++)
		left -= ch_pick(s, s->colls.v[k], fmax(left, 0), pass);
}

/* ---- per pass: order and coalescing ---- */

/* The name of threshold t (-1: the spec's or the default). */
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
	return arena_printf(a, "order=%s, %s", cf->order == ORDER_REGION ? "region" : "pass",
	                    ch_coalesce_str(a, cf->coalesce, dflt));
}

/* Threshold thr's trial: the pipeline through the order pass, the
 * predicted forward and backward in either order (t[pass][order],
 * HUGE_VAL: not compiled or not predicted), the default threshold and
 * whether the spec sets it. */
static void
ch_trial(const Pipeline *pl, const Src *src, int64_t thr, double t[2][2], int64_t *dflt,
         int *spec)
{
	Diag quiet;
	FILE *null = fopen("/dev/null", "w");

	t[0][0] = t[0][1] = t[1][0] = t[1][1] = HUGE_VAL;
	if (!null)
		return;
	diag_init(&quiet, pl->d->src, null);
	Pipeline tr = {.a = pl->a, .d = &quiet, .o = pl->o, .profile = pl->profile,
	               .auto_margin = pl->auto_margin, .backward = pl->backward,
	               .accumulate = pl->accumulate, .order = ORDER_PASS, .coalesce = thr,
	               .stop = PIPE_PLANNED, .predict = t};
	pipeline_run(&tr, src);
	if (tr.graph) {
		*dflt = coalesce_bytes(tr.graph, -1);
		*spec = tr.graph->coalesce_loc.line != 0;
	}
	fclose(null);
	free(quiet.rec);
}

/* The fastest of n predictions t[] (the first on a tie), -1: none. */
static int
ch_best(const double *t, int n)
{
	int best = -1;

	for (int k = 0; k < n; k++)
		if (t[k] < HUGE_VAL && (best < 0 || t[k] < t[best] * (1 - CHOOSE_TIE)))
			best = k;
	return best;
}

static const char *
ch_line(Arena *a, const ChooseConfig *cf, const double *t, int n, int best, int64_t dflt)
{
	const char *s = arena_printf(a, "%s, predicted %.4f ms", ch_config_str(a, &cf[best], dflt),
	                             t[best] * 1e3);
	if (n == 1)
		return s;
	s = arena_printf(a, "%s, the %s of %d (", s, best ? "fastest" : "default and fastest", n);
	for (int k = 0, j = 0; k < n; k++) {
		if (k == best)
			continue;
		s = arena_printf(a, "%s%s%s: %s", s, j++ ? "; " : "", ch_config_str(a, &cf[k], dflt),
		                 t[k] < HUGE_VAL ? arena_printf(a, "%.4f ms", t[k] * 1e3)
		                                 : "not compiled");
	}
	return arena_printf(a, "%s)", s);
}

int
choose_pass(const Pipeline *pl, const Src *src, Choice *fwd, Choice *bwd)
{
	ChooseConfig cf[6];
	OrderMode orders[2] = {ORDER_PASS, ORDER_REGION};
	int64_t thr[3] = {-1, 0, COALESCE_LARGE};
	int no = pl->order_asked ? 1 : 2, nt = pl->coalesce >= 0 ? 1 : 3, spec = 0;
	double t[3][2][2], tf[6], tb[6]; /* t: by threshold, pass, order */
	int64_t dflt = COALESCE_DEFAULT;

	if (pl->order_asked)
		orders[0] = pl->order;
	if (pl->coalesce >= 0)
		thr[0] = pl->coalesce;
	if (no * nt == 1)
		return 0; /* nothing to choose */
	ch_trial(pl, src, thr[0], t[0], &dflt, &spec);
	if (spec) /* the spec's `coalesce = BYTES;` is asked too: it alone */
		nt = 1;
	for (int j = 1; j < nt; j++)
		ch_trial(pl, src, thr[j], t[j], &dflt, &spec);
	int n = 0;
	for (int i = 0; i < no; i++)
		for (int j = 0; j < nt; j++) {
			cf[n] = (ChooseConfig){orders[i], thr[j]};
			tf[n] = t[j][0][orders[i]];
			tb[n++] = t[j][1][orders[i]];
		}
	if (n == 1)
		return 0;
	int bf = ch_best(tf, n), bb = ch_best(tb, n);
	if (bf < 0)
		return 0; /* no trial compiled: the real run reports why */
	fwd->cf = cf[bf];
	fwd->line = ch_line(pl->a, cf, tf, n, bf, dflt);
	fwd->set = 1;
	if (pl->backward && bb >= 0) {
		bwd->cf = cf[bb];
		bwd->line = ch_line(pl->a, cf, tb, n, bb, dflt);
		bwd->set = 1;
	}
	return 0;
}
