/* predict.h: the cost model. A profile (profile.h) holds what
 * cfrt-calibrate measured on one machine: GEMM times over a grid of
 * shapes, the rates of the other compute, point-to-point transfer times
 * by message size and by how many transfers run at once, the library
 * collectives' times, and how much slower compute runs under transfers.
 * predict.c predicts a lowered collective's time by running its proven
 * per-rank step program on those rates, every rank at once: each rank's
 * compute queue in order, each transfer when both its ends have posted
 * it and the link between them is free, each wait holding the compute
 * queue until its transfer ends (the critical path, not a formula per
 * schedule kind); lower.c asks it for every candidate schedule of a
 * collective and `auto` takes the fastest (docs/PROFILE.md). */
#ifndef PREDICT_H
#define PREDICT_H

#include "plan.h"
#include "profile.h"

/* One span of a predicted timeline: rank r busy from t0 to t1 seconds
 * with (queue) 0 compute, 1 a send, 2 a receive, 3 a library
 * collective, 4 waiting (its compute queue held by a transfer). */
typedef struct PSpan {
	int rank, queue;
	double t0, t1;
	const char *what;
} PSpan;

typedef struct Prediction {
	double total;    /* seconds from the stage's start to its last end */
	double compute;  /* the busiest rank's compute alone, no slowdown */
	double xfer;     /* the same rank's transfer time */
	const char *err; /* why nothing was predicted (a missing rate), or NULL */
	PSpan *span;     /* when asked: the timeline */
	int nspan, capspan;
} Prediction;

/* One candidate of --profile: the schedule and its prediction. */
typedef struct Candidate {
	SchedChoice how;
	Prediction pr;
} Candidate;

/* predict.c: the time of lowered collective c of graph g on profile pf,
 * every one of its N ranks run as its memory plan (plan_coll) runs it:
 * one call per slice where the plan loops, and the packs and unpacks of
 * staged transfers; spans recorded when want_spans. */
Prediction predict_coll(Arena *a, const Graph *g, const Coll *c, const Profile *pf,
                        int want_spans);
/* The time of a plain stage's node on every rank. */
Prediction predict_node(Arena *a, const Node *n, const Profile *pf);
/* The candidate schedules of collective n in the order --explain lists
 * them: vanilla, slice(2), slice(4), fuse(ring|bidir|pairwise, m = 1, 2)
 * (those that do not apply are left out by the rules: lower.c). */
int predict_candidates(const Node *n, SchedChoice *out, int max);
/* auto's pick among cand[0..n), in that order (simpler first): the first
 * predicted within slack seconds of the fastest, whose index goes to
 * *fastest unless it is NULL (-1 and -1: none predicted); the fastest is
 * the first at the least to rounding (1e-9 of it), so with no slack the
 * pick is the fastest. lower.c gives
 * Sched.auto_margin percent of the whole pass's prediction (predict_pass)
 * as the slack, predict_margin's unless cfc --auto-margin says. */
int predict_pick(const Candidate *cand, int n, double slack, int *fastest);
/* auto's margin on profile pf when none is asked, percent of the pass:
 * AUTO_MARGIN_GPU_PCT on a GPU backend's profile ("cuda..."), else
 * AUTO_MARGIN_PCT (sched.h). The predictions' errors are shares of a
 * pass (the benches' medians: 1.6-8.0%), so a collective whose
 * candidates differ by less than that share of the pass is a near-tie
 * whatever their share of the collective's own time. On CPUs the
 * simpler schedule ran faster more often in near-ties, and the margin
 * keeps auto from running slower than vanilla; 3% gave away more than
 * it saved on the runs of 2026-11-28. On GPUs the model prices the
 * fused schedules with NCCL high at TP 2 (2 H200s, 2026-11-29: 1.6-10.7%
 * over what they ran, where vanilla and slice(4) were -6.6..+2.0%), and
 * auto at 0% timed beside auto at 2% took other schedules there in 6 of
 * 8 choices and ran faster in all 6 (the same picks on 4 H200s):
 * docs/PROFILE.md. */
double predict_margin(const Profile *pf);
/* The whole pass, stage by stage (s->stages: lower.c orders them
 * first), every plain stage as predict_node gives it: total and compute
 * summed, the first err. Each collective as lowered (predict_coll:
 * --explain's pass), or with fastest at the fastest of the candidates
 * lower.c has predicted (what auto's margin is a share of). */
Prediction predict_pass(Arena *a, const Sched *s, int fastest);

#endif
