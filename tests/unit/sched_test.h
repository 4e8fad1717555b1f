/* sched_test.h: what the unit tests of region discovery, lowering and the
 * verifier share: compile a .cf text (or an example) down to a schedule,
 * find its collectives, walk what a rank computes. */
#ifndef SCHED_TEST_H
#define SCHED_TEST_H

#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"
#include "pipeline.h"

typedef struct SRun {
	Arena *a;
	Diag d;
	Src src;
	char *err;   /* diagnostics */
	size_t errlen;
	Graph *g;
	Sched *s;
	Plan *p;     /* st_plan */
} SRun;

/* What st_compile schedules: the forward alone; the forward of a model
 * with its backward (saving what the backward reads); the backward. */
enum { ST_FWD, ST_TRAINED, ST_BWD };

/* Compiles text through the passes of compiler/pipeline.c up to stop
 * (PIPE_LOWERED: a schedule; PIPE_PLANNED: and its memory plan, in
 * r->p); force: a --schedule choice or NULL; defs: "NAME=VALUE ..." size
 * and group overrides (-D) or NULL. NULL with the diagnostics in r->err
 * after errors. */
static inline Sched *
st_run_group1(SRun *r, const char *text, const char *force, const char *defs, int what,
              PipeStop stop, int keep_group1)
{
	Options o = {0};
	Define d[16];
	FILE *ef;

	for (const char *p = defs; p && *p && o.ndefs < 16;) {
		int n = (int)strcspn(p, "=");
		d[o.ndefs] = (Define){strndup(p, (size_t)n), strtoll(p + n + 1, NULL, 10), 0};
		o.ndefs++;
		p += n + 1 + strcspn(p + n + 1, " ");
		p += strspn(p, " ");
	}
	o.defs = d;

	r->a = arena_new();
	r->src = (Src){"t.cf", text, strlen(text)};
	r->err = NULL;
	r->g = NULL;
	r->s = NULL;
	r->p = NULL;
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	if (force) {
		Src fs = {"--schedule", force, strlen(force)};
		o.force = parse_choice(r->a, &r->d, &fs);
	}
	/* keep_group1: groups of one keep their collectives (cfc
	 * --keep-group1), else elide.c takes them out */
	Pipeline pl = {.a = r->a, .d = &r->d, .o = &o, .auto_margin = AUTO_MARGIN_OF_PROFILE,
	               .backward = what != ST_FWD, .keep_group1 = keep_group1, .stop = stop};
	int rc = pipeline_graphs(&pl, &r->src);
	r->g = pl.graph;
	if (r->g && (!rc || what == ST_FWD)) {
		Graph *g = what == ST_BWD ? r->g->bwd : r->g;
		if (g && pipeline_schedule(&pl, g, &r->s, &r->p, ""))
			r->s = NULL, r->p = NULL;
	}
	fclose(ef);
	r->d.out = stderr; /* later passes (plan, verify) report there */
	for (int k = 0; k < o.ndefs; k++)
		free((char *)d[k].name);
	return r->s;
}

/* st_run_group1 keeping the collectives over groups of one (cfc
 * --keep-group1): the schedules of every kind on one rank are what the
 * tests prove. */
static inline Sched *
st_run(SRun *r, const char *text, const char *force, const char *defs, int what,
       PipeStop stop)
{
	return st_run_group1(r, text, force, defs, what, stop, 1);
}

/* st_run down to the lowered schedule. */
static inline Sched *
st_compile(SRun *r, const char *text, const char *force, const char *defs, int what)
{
	return st_run(r, text, force, defs, what, PIPE_LOWERED);
}

/* The k-th item of kind kd in lane t of phase p of c (k counts from 0). */
static inline Item *
st_find(const Coll *c, int p, int t, ItemKind kd, int k)
{
	const Phase *ph = c->phases.v[p];

	for (int j = 0; j < ph->lanes[t].n; j++) {
		Item *it = ph->lanes[t].v[j];
		if (it->kind == kd && k-- == 0)
			return it;
	}
	CU_FAIL_FATAL("no such item");
	return NULL;
}

/* The verifier must reject c (with plan pc, or without one: NULL), with
 * want in a message that names the rank, the step, and the slice (or,
 * with a plan, says the memory plan is wrong). */
static inline void
st_rejects(const Coll *c, const PColl *pc, const char *want)
{
	char err[1024];

	CU_ASSERT_FATAL(verify_coll(c, pc, NULL, err, sizeof err) != 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "rank "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, " step "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, pc ? "memory plan: " : " slice "));
	if (!strstr(err, want))
		fprintf(stderr, "\nwanted '%s' in: %s\n", want, err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
}

static inline Sched *
st_build_defs(SRun *r, const char *text, const char *force, const char *defs)
{
	return st_compile(r, text, force, defs, ST_FWD);
}

static inline Sched *
st_build(SRun *r, const char *text, const char *force)
{
	return st_compile(r, text, force, NULL, ST_FWD);
}

/* text's backward pass down to a schedule (r->g is the forward's graph). */
static inline Sched *
st_build_bwd(SRun *r, const char *text, const char *force)
{
	return st_compile(r, text, force, NULL, ST_BWD);
}

/* st_build_defs, then the memory plan (r->p). */
static inline Plan *
st_plan_defs(SRun *r, const char *text, const char *force, const char *defs)
{
	return st_run(r, text, force, defs, ST_FWD, PIPE_PLANNED) ? r->p : NULL;
}

static inline Plan *
st_plan(SRun *r, const char *text, const char *force)
{
	return st_plan_defs(r, text, force, NULL);
}

/* st_plan of the forward of text with its backward: it saves what the
 * backward reads (an attention's log-sum-exp among it). */
static inline Plan *
st_plan_trained(SRun *r, const char *text, const char *force)
{
	return st_run(r, text, force, NULL, ST_TRAINED, PIPE_PLANNED) ? r->p : NULL;
}

/* The plan of collective c. */
static inline PColl *
st_pcoll(const Plan *p, const Coll *c)
{
	for (int k = 0; k < p->s->colls.n; k++)
		if (p->coll[k]->c == c)
			return p->coll[k];
	CU_FAIL_FATAL("no plan of that collective");
	return NULL;
}

/* The text of file path (malloc'd), relative to the repository root. */
static inline char *
st_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = calloc(1, 1 << 16);
	if (f && buf)
		buf[fread(buf, 1, (1 << 16) - 1, f)] = 0;
	if (f)
		fclose(f);
	return buf;
}

/* The text of examples/NAME.cf (malloc'd). */
static inline char *
st_example(const char *name)
{
	char path[256];

	snprintf(path, sizeof path, "examples/%s.cf", name);
	return st_file(path);
}

static inline void
st_done(SRun *r)
{
	free(r->err);
	arena_free(r->a);
}

/* The collective whose result is named name. */
static inline Coll *
st_coll(const Sched *s, const char *name)
{
	for (int k = 0; s && k < s->colls.n; k++) {
		Coll *c = s->colls.v[k];
		if (!strcmp(c->node->out->name, name))
			return c;
	}
	CU_FAIL_FATAL("no such collective");
	return NULL;
}

/* The names of c's region, space separated: "t1 h". */
static inline const char *
st_region(Arena *a, const Coll *c)
{
	const char *s = "";
	for (int k = 0; k < c->region.n; k++)
		s = arena_printf(a, "%s%s%s", s, k ? " " : "", ((RNode *)c->region.v[k])->node->out->name);
	return s;
}

/* The first stop of c at the op producing name, or NULL. */
static inline const Stop *
st_stop(const Coll *c, const char *name)
{
	for (int k = 0; k < c->stops.n; k++) {
		const Stop *st = c->stops.v[k];
		if (!strcmp(st->node->out->name, name))
			return st;
	}
	return NULL;
}

/* The slices rank r computes with region node rn, in execution order;
 * returns how many (at most max). */
static inline int
st_order(const Coll *c, int r, int rn, int *out, int max)
{
	int n = 0;
	SchedPos p = {0};
	for (const Item *it; (it = sched_next(c, r, &p)) && n < max;)
		if (it->kind == IT_COMPUTE && it->u.comp.rn == rn)
			out[n++] = sched_ix(&it->u.comp.sel.hi, r, p.i) * it->u.comp.sel.per +
			           sched_ix(&it->u.comp.sel.lo, r, p.i);
	return n;
}

/* The mlp example with group size n and sizes that divide for every
 * schedule kind. */
static inline const char *
st_mlp(int n, const char *sched)
{
	static char buf[1024];

	snprintf(buf, sizeof buf, "model mlp {\n  size B = 2, S = %d, D = 8, F = %d;\n  group tp = %d;\n"
	                    "  in x : [B, S, D] split S over tp;\n  weight w1 : [D, F] split F over tp;\n"
	                    "  weight w2 : [F, D] split F over tp;\n  xa = all_gather(x, S);\n"
	                    "  h = gelu(xa @ w1);\n  p = h @ w2;\n  y = reduce_scatter(p, S);\n  out y;\n"
	                    "  schedule { default %s; }\n}\n", 12 * n, 4 * n, n, sched);
	return buf;
}

#endif
