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
 * choose_pass, the choice of each pass's order and coalescing threshold
 * by trial compiles of the whole pipeline, is in pipeline.c (it runs
 * the pipeline). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"
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
