/* Unit tests of plan.c and of its proof (verify_mem.c, verify_prog.c):
 * the plan of every example under every schedule kind is proved, the
 * plan makes the choices the bugs it fixed need, and the verifier
 * rejects planted mistakes in the plan (an offset off by one element, a
 * contiguous receive into a strided view, overlapping workspace, a
 * request slot reused while in flight, a wrong query offset or rope
 * position, the wrong rows of an attention's saved log-sum-exp), naming
 * the rank, the step and the element. */
#include "sched_test.h"

/* all_to_all with m = 2 on [B, S]: rank r's slot of B is cut along S into
 * the parts of each sender, so a part is strided (issue: a contiguous
 * receive there overwrote its neighbours). */
static const char a2a_text[] =
	"model a2a {\n  size B = 8, S = 2;\n  group sp = 2;\n  type f32;\n"
	"  in x : [B, S] split S over sp;\n  y = all_to_all(x, S, B);\n  out y;\n"
	"  schedule { default fuse(ring, m = 2); }\n}\n";

static void
test_examples(void)
{
	static const char *const ex[] = {"mlp", "attention", "mamba", "ulysses", "zero_dp", "transformer"};
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(pairwise)",
	                                    "fuse(ring, m = 2)", "fuse(pairwise, m = 2)", "slice(2)",
	                                    "slice(4)", "vanilla", "auto"};

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e]);
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
			SRun r;
			Plan *p = st_plan(&r, text, kinds[k]);
			CU_ASSERT_PTR_NOT_NULL_FATAL(p);
			CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
			st_done(&r);
		}
		free(text);
	}
}

/* text planned (under force, or NULL), and the plan of its collective
 * named name, *c. */
static PColl *
plan_of(SRun *r, const char *text, const char *force, const char *name, const Coll **c)
{
	Plan *p = st_plan(r, text, force);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	*c = st_coll(r->s, name);
	return st_pcoll(p, *c);
}

/* The receive of the all_to_all goes through staging, and the proof
 * holds; planted as one contiguous receive, it is rejected at the first
 * element the run gets wrong. */
static void
test_strided_receive(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = plan_of(&r, a2a_text, NULL, "y", &c);
	PItem *recv = pc->item[st_find(c, 0, 0, IT_RECV, 0)->id];

	CU_ASSERT(recv->staged);
	CU_ASSERT_EQUAL(verify_coll(c, pc, NULL, NULL, 0), 0);
	recv->staged = 0;
	st_rejects(c, pc, "of y is strided: element 1 of the run is y[");
	st_done(&r);
}

/* A cut one element off: the first element of the view is not the
 * schedule's. */
static void
test_off_by_one(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = plan_of(&r, st_mlp(4, "fuse(ring)"), NULL, "xa", &c);
	PItem *mm = pc->item[st_find(c, 0, 0, IT_COMPUTE, 0)->id];
	PExpr *st = &mm->view[0].cut[0].start;

	CU_ASSERT_EQUAL_FATAL(mm->view[0].ncut, 1);
	CU_ASSERT_EQUAL(st->c[PV_S], 1);
	st->c[PV_S] = st->mul;
	st->mul = 1;
	st->add = 1;
	st_rejects(c, pc, "the result of t1: element 0 is t1[");
	st_done(&r);
}

/* Two scratch buffers of one stage in the same place. */
static void
test_overlapping_workspace(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = plan_of(&r, st_mlp(4, "fuse(ring)"), NULL, "y", &c);
	int first = -1, second = -1;

	for (int b = 0; b < pc->c->bufs.n; b++) {
		if (pc->off[b] < 0)
			continue;
		if (first < 0)
			first = b;
		else if (second < 0)
			second = b;
	}
	CU_ASSERT_FATAL(first >= 0 && second >= 0);
	char *msg = NULL;
	size_t len = 0;
	r.d.out = open_memstream(&msg, &len);
	CU_ASSERT_EQUAL(verify_sched(r.s, r.p, &r.d), 0);
	pc->off[second] = pc->off[first];
	CU_ASSERT_NOT_EQUAL(verify_sched(r.s, r.p, &r.d), 0);
	fclose(r.d.out);
	r.d.out = stderr;
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "overlap, and stage"));
	free(msg);
	st_done(&r);
}

/* A label given fewer request slots than the rounds it has in flight:
 * a post would overwrite a request not yet waited. */
static void
test_slot_window(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = plan_of(&r, st_mlp(4, "fuse(ring)"), NULL, "xa", &c);
	PLabel *l = &pc->lab[st_find(c, 0, 0, IT_SEND, 0)->u.xfer.label];

	CU_ASSERT_EQUAL_FATAL(l->slots, 2);
	l->slots = 1;
	st_rejects(c, pc, "which still holds round 0: its request would be lost");
	st_done(&r);
}

/* llama's rope inside the fused all_gather, each slice told the position
 * of the next row (and, under vanilla, every rank told its own shard's):
 * the proof names the offset it got and the row it should have. */
static void
test_rope_position(void)
{
	static const char *const kinds[] = {"fuse(ring)", "vanilla"};

	for (int k = 0; k < 2; k++) {
		SRun r;
		char *text = st_example("llama");
		const Coll *c;
		PColl *pc = plan_of(&r, text, kinds[k], "attn0.xa", &c);
		int found = 0;

		for (int id = 0; id < c->nitems; id++) {
			PItem *p = pc->item[id];
			if (!p || (!p->qoff && k == 0))
				continue;
			if (k == 0) {
				p->qstart.add += 1;
			} else {
				p->qoff = 1;
				p->qstart.c[PV_R] += 16; /* S / tp rows a rank */
			}
			found = 1;
		}
		CU_ASSERT_FATAL(found);
		st_rejects(c, pc, k == 0 ? "gets position offset 1, but its first row is global row 0" :
		                           "gets position offset 16, but its first row is global row 0");
		st_done(&r);
		free(text);
	}
}

/* A causal attention split by queries told the wrong first query. */
static void
test_query_offset(void)
{
	SRun r;
	char *text = st_example("attention");
	const Coll *c;
	PColl *pc = plan_of(&r, text, "fuse(ring, split = query)", "y", &c);
	int found = 0;

	for (int id = 0; id < c->nitems; id++)
		if (pc->item[id]->qoff) {
			pc->item[id]->qstart.add += 1;
			found = 1;
		}
	CU_ASSERT_FATAL(found);
	st_rejects(c, pc, "gets query offset 49, but its first row is global row 48");
	st_done(&r);
	free(text);
}

/* The log-sum-exp an attention saves for its backward, told the wrong
 * rows: one row before its query slice under split = query; under
 * vanilla, where attention is a plain stage on whole rows, cut to a
 * rank's own quarter of them (which runs off the end past rank 0); in
 * Ulysses' FuseA2A (the attention's slices computed into its kept input),
 * right on rank 0 and a slice off on every other rank. */
static void
test_lse_rows(void)
{
	SRun r;
	const Coll *c;
	char *text = st_example("attention");
	PColl *pc = NULL;
	int found = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(st_plan_trained(&r, text, "fuse(ring, split = query)"));
	pc = st_pcoll(r.p, c = st_coll(r.s, "y"));
	for (int id = 0; id < c->nitems; id++) {
		PItem *p = pc->item[id];
		if (p->nview != 5) /* attention: out, q, k, v, lse */
			continue;
		PExpr *st = &p->view[4].cut[0].start;
		CU_ASSERT_EQUAL_FATAL(p->view[4].ncut, 1);
		CU_ASSERT_EQUAL(st->c[PV_S], 1);
		st->c[PV_S] = st->mul;
		st->mul = 1;
		st->add = -1;
		found = 1;
	}
	CU_ASSERT_FATAL(found);
	st_rejects(c, pc, "the log-sum-exp t4_lse of t4: element 0 is t4_lse[47], but the "
	                  "schedule's block t4_lse[0:2, 0:2, 48:64] has t4_lse[48] there");
	st_done(&r);

	CU_ASSERT_PTR_NOT_NULL_FATAL(st_plan_trained(&r, text, "vanilla"));
	found = 0;
	for (int k = 0; k < r.s->stages.n; k++) {
		PItem *p = r.p->plain[k];
		const Stage *st = r.s->stages.v[k];
		if (!p || st->u.node->op != OP_ATTENTION)
			continue;
		PExpr at = {.mul = 16};
		at.c[PV_R] = 1;
		p->view[4].cut[p->view[4].ncut++] = (PCut){2, at, 64};
		found = 1;
	}
	CU_ASSERT_FATAL(found);
	char *msg = NULL;
	size_t len = 0;
	r.d.out = open_memstream(&msg, &len);
	CU_ASSERT_NOT_EQUAL(verify_sched(r.s, r.p, &r.d), 0);
	fclose(r.d.out);
	r.d.out = stderr;
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "stage t4 = attention(q, k, v, causal): rank 1 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "a cut [16, 80) of dim 2 leaves t4_lse (extent 64)"));
	free(msg);
	st_done(&r);
	free(text);

	text = st_example("ulysses");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st_plan_trained(&r, text, "fuse(ring)"));
	pc = st_pcoll(r.p, c = st_coll(r.s, "o"));
	found = 0;
	for (int id = 0; id < c->nitems; id++) {
		PItem *p = pc->item[id];
		if (p->nview != 5)
			continue;
		p->view[4].cut[0].start.c[PV_R] = 1;
		found = 1;
	}
	CU_ASSERT_FATAL(found && sched_symmetric(c));
	st_rejects(c, pc, "the log-sum-exp oh_lse of oh");
	CU_ASSERT_NOT_EQUAL(verify_coll_full(c, pc, NULL, NULL, 0), 0);
	st_done(&r);
	free(text);
}

/* Values whose stages do not overlap share the workspace: the mlp's
 * gathered input is dead after its stage, and the reduce-scatter's
 * scratch reuses its place. */
static void
test_workspace_reuse(void)
{
	SRun r;
	Plan *p = st_plan(&r, st_mlp(4, "fuse(ring)"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	const Value *xa = st_coll(r.s, "xa")->node->out;
	PColl *pc = st_pcoll(p, st_coll(r.s, "y"));
	int shared = 0;

	CU_ASSERT_FATAL(p->off[xa->id] >= 0);
	for (int b = 0; b < pc->c->bufs.n; b++)
		shared |= pc->off[b] >= 0 && pc->off[b] == p->off[xa->id];
	CU_ASSERT(shared);
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	st_done(&r);
}

/* The one-rank proof of a symmetric program agrees with running every
 * rank: same verdict, same exposure, for every example, every symmetric
 * kind (fused rings, library collectives) and N from 1 to 12 (sizes that
 * divide for each). */
static void
test_symmetric_agrees(void)
{
	static const char *const ex[] = {"mlp", "attention", "ulysses", "zero_dp", "transformer"};
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(ring, m = 2)",
	                                    "fuse(bidir, m = 2)", "fuse(ring, split = query)",
	                                    "vanilla", "slice(2)", "slice(3)"};
	int sym = 0, none = 0;

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e]);
		for (int N = 1; N <= 12; N++)
			for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
				SRun r;
				char defs[256];
				if (!strcmp(ex[e], "zero_dp"))
					snprintf(defs, sizeof defs, "dp=%d T=%d D=%d", N, 24 * N, 48 * N);
				else if (!strcmp(ex[e], "mlp"))
					snprintf(defs, sizeof defs, "tp=%d B=1 S=%d D=%d", N, 24 * N, 48 * N);
				else
					snprintf(defs, sizeof defs, "%s=%d B=1 S=%d D=%d H=%d",
					         strcmp(ex[e], "ulysses") ? "tp" : "sp", N, 24 * N, 48 * N, 6 * N);
				Plan *p = st_plan_defs(&r, text, kinds[k], defs);
				if (!p) {
					fprintf(stderr, "\n%s %s N=%d: %s\n", ex[e], kinds[k], N, r.err);
					none++;
					st_done(&r);
					continue;
				}
				for (int j = 0; j < r.s->colls.n; j++) {
					const Coll *c = r.s->colls.v[j];
					const PColl *pc = st_pcoll(p, c);
					VerifyStats a, b;
					int x = verify_coll(c, pc, &a, NULL, 0);
					int y = verify_coll_full(c, pc, &b, NULL, 0);
					sym += sched_symmetric(c);
					CU_ASSERT_EQUAL(x, 0);
					CU_ASSERT_EQUAL(y, 0);
					CU_ASSERT_EQUAL(a.exposed, b.exposed);
					CU_ASSERT_EQUAL(a.tailfree, b.tailfree);
				}
				st_done(&r);
			}
		free(text);
	}
	CU_ASSERT_EQUAL(none, 0);
	CU_ASSERT(sym > 500);
}

/* A cut right on rank 0 but off by a slice on every other rank: only
 * the turned checks of a symmetric run see it. */
static void
test_wrong_off_rank0(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = plan_of(&r, st_mlp(4, "fuse(ring)"), NULL, "xa", &c);
	PItem *mm = pc->item[st_find(c, 0, 0, IT_COMPUTE, 0)->id];

	CU_ASSERT_FATAL(sched_symmetric(c));
	mm->view[1].cut[0].start.c[PV_R] = 1;
	st_rejects(c, pc, "input 0 (xa) of t1");
	CU_ASSERT_NOT_EQUAL(verify_coll_full(c, pc, NULL, NULL, 0), 0);
	st_done(&r);
}

/* The backward of the mlp example on one rank (its gather kept), planned:
 * r->p is the backward's plan, r->g the forward's graph. */
static Plan *
mlp_bwd_plan(SRun *r)
{
	char *text = st_example("mlp");
	Plan *p = st_run(r, text, NULL, "tp=1", ST_BWD, PIPE_PLANNED) ? r->p : NULL;

	free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

/* A value of p placed in the saved buffer (the first), or -1. */
static int
first_in_saved(const Plan *p)
{
	for (int i = 0; i < p->s->g->values.n; i++)
		if (p->used[i] && p->off[i] >= 0 && p->in_saved[i])
			return i;
	return -1;
}

/* The backward keeps a tensor in saved bytes it has read (the mlp's
 * gathered xa in h's, whose last reader runs first; in the workspace when
 * the saved buffer is kept), which proves; the Llama layer's backward
 * needs less workspace than when it keeps the saved buffer; the forward's
 * tensors go in saved bytes not written yet. */
static void
test_saved_reuse(void)
{
	SRun r;
	Plan *p = mlp_bwd_plan(&r);
	Graph *b = r.g->bwd;
	int i = first_in_saved(p);

	CU_ASSERT_FATAL(i >= 0);
	CU_ASSERT_STRING_EQUAL(((Value *)b->values.v[i])->name, "xa");
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	b->saved_ws = 0; /* cfc --keep-saved */
	Plan *k = plan_sched(r.s);
	CU_ASSERT_EQUAL(first_in_saved(k), -1);
	CU_ASSERT(k->off[i] >= 0);
	CU_ASSERT_EQUAL(verify_sched(r.s, k, &r.d), 0);
	st_done(&r);

	/* the Llama layer on one rank (its gathers taken out): the backward
	 * needs less workspace than with the saved buffer kept */
	char *text = st_example("llama");
	p = st_run_group1(&r, text, NULL, "tp=1", ST_BWD, PIPE_PLANNED, 0) ? r.p : NULL;
	free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(first_in_saved(p) >= 0);
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	r.g->bwd->saved_ws = 0;
	k = plan_sched(r.s);
	CU_ASSERT(p->wsbytes < k->wsbytes);
	CU_ASSERT_EQUAL(verify_sched(r.s, k, &r.d), 0);
	st_done(&r);

	text = st_example("transformer");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st_run(&r, text, NULL, "tp=1", ST_TRAINED, PIPE_PLANNED));
	free(text);
	CU_ASSERT(first_in_saved(r.p) >= 0);
	CU_ASSERT_EQUAL(verify_sched(r.s, r.p, &r.d), 0);
	st_done(&r);
}

/* verify_sched of s with p, which must fail saying want. */
static void
rejects_with(Sched *s, const Plan *p, Diag *d, const char *want)
{
	char *msg = NULL;
	size_t len = 0;

	d->out = open_memstream(&msg, &len);
	CU_ASSERT_NOT_EQUAL(verify_sched(s, p, d), 0);
	fclose(d->out);
	d->out = stderr;
	if (!strstr(msg, want))
		fprintf(stderr, "\nwanted '%s' in: %s\n", want, msg);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
	free(msg);
}

/* verify_sched of s with value i of p moved to off in the saved buffer
 * (in_saved 1) or the workspace (0), which must fail saying want; p as it
 * was after. */
static void
moved_rejects(Sched *s, Plan *p, Diag *d, int i, char in_saved, int64_t off,
              const char *want)
{
	int64_t was = p->off[i];
	char sp = p->in_saved[i];

	p->off[i] = off;
	p->in_saved[i] = in_saved;
	rejects_with(s, p, d, want);
	p->off[i] = was;
	p->in_saved[i] = sp;
}

/* A tensor of the backward on a saved tensor that a stage in its life
 * still reads, one past the saved buffer's end, and one in the saved
 * buffer of a pass that keeps it (--keep-saved). */
static void
test_saved_overlap(void)
{
	SRun r;
	Plan *p = mlp_bwd_plan(&r);
	Graph *b = r.g->bwd;
	int i = first_in_saved(p);

	CU_ASSERT_FATAL(i >= 0);
	/* a tensor of the workspace made while a saved tensor is still to
	 * be read, moved onto that saved tensor */
	const Value *sv = NULL;
	int j = -1;
	for (int a = 0; a < b->values.n && !sv; a++)
		for (int t = 0; t < b->values.n && !sv; t++) {
			const Value *v = b->values.v[t];
			if (p->used[a] && p->off[a] >= 0 && !p->in_saved[a] && v->home == HO_SAVED &&
			    p->last[t] >= p->first[a])
				sv = v, j = a;
		}
	CU_ASSERT_FATAL(sv != NULL);
	moved_rejects(r.s, p, &r.d, j, 1, sv->soff, "overlap, and stage");
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	moved_rejects(r.s, p, &r.d, i, 1, r.g->savedbytes,
	              "is not an aligned part of the saved buffer");
	b->saved_ws = 0;
	rejects_with(r.s, p, &r.d, "is placed in the saved buffer, which this pass leaves as it is");
	st_done(&r);
}

/* The node of the plain stage of plan p where value i is first touched
 * (the one that makes it), or NULL. */
static const Node *
maker(const Plan *p, int i)
{
	int k = p->first[i];

	return k >= 0 && p->plain[k] ? ((Stage *)p->s->stages.v[k])->u.node : NULL;
}

/* The plan of the Llama example's backward at tp = 1, the gathers over
 * the group of one taken out (cfc's default): swiglu's backward and the
 * joint calls run as plain stages. */
static Plan *
llama_bwd_plan(SRun *r)
{
	char *text = st_example("llama");
	Plan *p = st_run_group1(r, text, NULL, "tp=1", ST_BWD, PIPE_PLANNED, 0) ? r->p : NULL;

	free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

/* The Llama layer's backward at tp = 1 keeps swiglu's input gradients
 * in the bytes of the saved inputs they read last (an elementwise result
 * in place of its input), which proves; a GEMM's result moved onto an
 * input it reads last is refused, as is an elementwise result moved onto
 * an input a later stage still reads. */
static void
test_in_place(void)
{
	SRun r;
	Plan *p = llama_bwd_plan(&r);
	const Graph *b = r.g->bwd;
	int ew = -1, mm = -1;
	for (int i = 0; i < b->values.n; i++) {
		const Node *n = maker(p, i);
		if (!n || n->out != b->values.v[i] || p->off[i] < 0)
			continue;
		for (int j = 0; j < n->nin; j++) {
			const Value *x = n->in[j];
			int64_t xo = x->home == HO_SAVED ? x->soff : p->off[x->id];
			int xs = x->home == HO_SAVED ? 1 : p->in_saved[x->id];
			if (n->op == OP_SWIGLU_DA && xo == p->off[i] && xs == p->in_saved[i])
				ew = i;
		}
		if (n->op == OP_MATMUL && mm < 0)
			for (int j = 0; j < n->nin; j++)
				if (n->in[j]->role == R_ACT && p->last[n->in[j]->id] == p->first[i])
					mm = i;
	}
	CU_ASSERT_FATAL(ew >= 0 && mm >= 0);
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	/* the GEMM's result on its input's bytes */
	const Node *n = maker(p, mm);
	const Value *x = NULL;
	for (int j = 0; j < n->nin && !x; j++)
		if (n->in[j]->role == R_ACT && p->last[n->in[j]->id] == p->first[mm])
			x = n->in[j];
	moved_rejects(r.s, p, &r.d, mm, p->in_saved[x->id], p->off[x->id], "overlap, and stage");
	/* swiglu_da's result on d_t12, which swiglu_db reads after it */
	n = maker(p, ew);
	const Value *dy = n->in[0];
	CU_ASSERT_FATAL(p->last[dy->id] > p->first[ew]);
	moved_rejects(r.s, p, &r.d, ew, p->in_saved[dy->id], p->off[dy->id], "overlap, and stage");
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	st_done(&r);
}

/* Where value x lives: its space (1: the saved buffer) and offset. */
static int64_t
place(const Plan *p, const Value *x, char *sp)
{
	*sp = x->home == HO_SAVED ? 1 : p->in_saved[x->id];
	return x->home == HO_SAVED ? x->soff : p->off[x->id];
}

/* The Llama layer's backward at tp = 1: each joint call (plan_joint: the
 * norm's gradient with its gain's rows, a GEMM and its add, a rope's
 * gradient and the head merge) leaves its intermediate unmade, with no
 * place and touched by no stage, and proves. The call reads all its
 * operands and writes all its results at once: its result moved onto an
 * operand that only a later stage of the call reads (the norm's x, read
 * by the norm again) or that only its first stage reads (the GEMM's) is
 * refused. */
static void
test_joint(void)
{
	SRun r;
	Plan *p = llama_bwd_plan(&r);
	int kinds[3] = {-1, -1, -1}; /* the first call of each: norm, GEMM, rope */
	for (int k = 0; k < p->s->stages.n; k++) {
		const Node *n[3];
		int u, m = plan_joint(p, k, n, &u);
		if (!m)
			continue;
		const Value *v = n[u]->out;
		CU_ASSERT(p->unmade[v->id] && p->off[v->id] < 0 && !p->used[v->id]);
		for (int j = 1; j < m; j++)
			CU_ASSERT_EQUAL(p->call[k + j], k);
		int kind = m == 3 ? 0 : n[0]->op == OP_MATMUL ? 1 : 2;
		if (kinds[kind] < 0)
			kinds[kind] = k;
		k += m - 1;
	}
	CU_ASSERT_FATAL(kinds[0] >= 0 && kinds[1] >= 0 && kinds[2] >= 0);
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	const Node *n[3];
	int u;
	char sp;
	/* the gain's rows on x's bytes: x is last read by the norm again */
	plan_joint(p, kinds[0], n, &u);
	const Value *x = n[0]->in[1], *rows = n[2]->out;
	CU_ASSERT_FATAL(p->off[rows->id] >= 0);
	int64_t xo = place(p, x, &sp);
	moved_rejects(r.s, p, &r.d, rows->id, sp, xo, "overlap, and stage");
	/* the GEMM and add's sum on the GEMM's operand that the GEMM reads
	 * last */
	plan_joint(p, kinds[1], n, &u);
	const Value *w = n[1]->out, *a = NULL;
	for (int j = 0; j < n[0]->nin && !a; j++)
		if (n[0]->in[j]->role == R_ACT || n[0]->in[j]->home == HO_SAVED)
			a = n[0]->in[j];
	CU_ASSERT_FATAL(a != NULL && p->off[w->id] >= 0);
	int64_t ao = place(p, a, &sp);
	moved_rejects(r.s, p, &r.d, w->id, sp, ao, "overlap, and stage");
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	st_done(&r);
}

void test_plan_register(void);

void
test_plan_register(void)
{
	CU_pSuite s = CU_add_suite("plan", NULL, NULL);

	CU_add_test(s, "every example under every kind proves", test_examples);
	CU_add_test(s, "workspace is shared by liveness", test_workspace_reuse);
	CU_add_test(s, "the one-rank proof agrees with every rank's", test_symmetric_agrees);
	CU_add_test(s, "tensors in the saved buffer's free bytes", test_saved_reuse);
	s = CU_add_suite("plan_mutation", NULL, NULL);
	CU_add_test(s, "an offset one element off", test_off_by_one);
	CU_add_test(s, "a contiguous receive into a strided view", test_strided_receive);
	CU_add_test(s, "overlapping workspace", test_overlapping_workspace);
	CU_add_test(s, "a request slot reused in flight", test_slot_window);
	CU_add_test(s, "a wrong query offset", test_query_offset);
	CU_add_test(s, "a wrong rope position", test_rope_position);
	CU_add_test(s, "wrong log-sum-exp rows", test_lse_rows);
	CU_add_test(s, "an offset right on rank 0 only", test_wrong_off_rank0);
	CU_add_test(s, "a tensor on a saved tensor still read", test_saved_overlap);
	CU_add_test(s, "results in place of their inputs", test_in_place);
	CU_add_test(s, "a joint call's operands and results", test_joint);
}
