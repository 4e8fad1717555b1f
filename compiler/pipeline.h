/* pipeline.h: the compiler's passes in order, from a spec's text to its
 * verified schedules and memory plans. cfc and the unit tests run them
 * through here, so the sequence is written once (pipeline.c). */
#ifndef PIPELINE_H
#define PIPELINE_H

#include "plan.h"
#include "profile.h"

/* The last pass a run makes (the unit tests look between passes). */
typedef enum PipeStop {
	PIPE_VERIFIED, /* every pass: schedules lowered, planned, verified */
	PIPE_PLANNED,  /* schedules lowered and planned, not verified */
	PIPE_LOWERED,  /* schedules lowered region after region (not ordered
	                * by order.c), no memory plan */
	PIPE_GRAPH     /* the graphs alone (and the backward's) */
} PipeStop;

/* What a run ends with. */
enum {
	PIPE_OK,
	PIPE_INPUT,   /* errors in the input, reported on d */
	PIPE_INTERNAL /* the verifier refused a schedule (reported on d) */
};

typedef struct Pipeline {
	/* in */
	Arena *a;
	Diag *d;
	Options *o;             /* sema's (-D, --schedule, ...); NULL: none */
	const Profile *profile; /* --profile: choose.c prices candidates */
	double auto_margin;     /* Sched.auto_margin; AUTO_MARGIN_OF_PROFILE */
	int backward;           /* also derive the backward graph */
	int accumulate;         /* grad_build's: add weight gradients */
	int keep_group1;        /* keep the collectives over groups of one
	                         * rank (copies); else elide.c takes them out */
	int keep_saved;         /* the backward leaves the saved buffer as
	                         * the forward wrote it; else it places
	                         * workspace tensors in the bytes it has read
	                         * (Graph.saved_ws) */
	OrderMode order;        /* order.c's: ORDER_PASS (0), the default */
	int order_asked;        /* --order given: with a profile, choose_pass
	                         * tries no other order */
	int64_t coalesce;       /* coalesce_graph's threshold: bytes; -1: the
	                         * spec's or the default; 0 (zeroed): off.
	                         * With a profile and -1, choose_pass tries
	                         * off and COALESCE_LARGE too (unless the
	                         * spec sets one) */
	int64_t bound;          /* choose_pass: the peak per rank a chosen
	                         * configuration must keep within (the
	                         * memory bound, cfc.c); 0: none */
	PipeStop stop;
	int trial;              /* a trial compile (pipeline_trial): makes no
	                         * choice of its own (choose_pass) */
	/* choose.c's trials: where the passes' predictions go, by pass
	 * (forward, backward) and OrderMode: the region order's before the
	 * order pass, the pass order's after it (under ORDER_PASS); NULL:
	 * none made */
	double (*predict)[2];
	/* a line after each pass ("parse: 120 bytes"); NULL: none */
	void (*phase)(void *ctx, const char *line);
	void *ctx;
	/* out: what the passes made (NULL where a run stopped before) */
	Program *prog;
	Graph *graph;  /* the forward; graph->bwd: the backward, if asked */
	Sched *sched, *bsched;
	Plan *plan, *bplan;
} Pipeline;

/* ---- choose.c: a pass's order and coalescing threshold (its contract
 * is at the top of choose.c) ---- */
typedef struct ChooseConfig {
	OrderMode order;
	int64_t coalesce; /* as Pipeline.coalesce */
} ChooseConfig;
typedef struct Choice {
	ChooseConfig cf;
	const char *line; /* --explain's: the choice and what it beat */
	int set;          /* 0: nothing chosen (run as asked) */
} Choice;
/* the larger threshold choose_pass tries */
#define COALESCE_LARGE ((int64_t)16 << 20)
/* a configuration must be predicted this much faster (a share of the
 * pass: 0.1%, well under what the predictions are trusted to) than an
 * earlier one of the list to be chosen over it; the default is first */
#define CHOOSE_TIE 1e-3
int choose_pass(const Pipeline *pl, const Src *src, Choice *fwd, Choice *bwd);

/* parse, check (sema), the graph facts, the backward if asked. */
int pipeline_graphs(Pipeline *pl, const Src *src);
/* The passes from graph g to its schedule *s and memory plan *p (pass:
 * "" or "backward ", for the phase lines), up to pl->stop. */
int pipeline_schedule(Pipeline *pl, Graph *g, Sched **s, Plan **p, const char *pass);
/* verify: schedule s and its plan p (pass: "" or "backward "), for a run
 * that stopped at PIPE_PLANNED. PIPE_OK or PIPE_INTERNAL. */
int pipeline_verify(Pipeline *pl, Sched *s, Plan *p, const char *pass);
/* Every pass: pipeline_graphs, then the forward's and the backward's
 * schedules. PIPE_OK or why not. With a profile, outside a trial, each
 * pass's order and coalescing are chosen first (choose_pass). */
int pipeline_run(Pipeline *pl, const Src *src);
/* A trial compile of pl's input under order and coalescing threshold
 * coalesce (both as asked: nothing chosen) up to the memory plans, its
 * diagnostics discarded, its predictions into predict (NULL: none, see
 * Pipeline.predict): *tr holds what the passes made (tr->d is pl's).
 * Returns pipeline_run's status. */
int pipeline_trial(const Pipeline *pl, const Src *src, OrderMode order, int64_t coalesce,
                   double (*predict)[2], Pipeline *tr);

#endif
