/* Unit tests of distributions over several groups, a grid of tp x dp
 * ranks: the plans of examples/tpdp.cf (forward and backward) and of
 * tests/e2e/tpdp_window.cf (stages that read the rank of a group other
 * than their own) are proved for tp and dp from 1 to 4 under every
 * schedule kind, the one-rank proof agrees with every rank's, and the
 * proof rejects planted mistakes of such plans (a rank of the wrong
 * group, an offset right only where the other group's rank is 0, a
 * position without the other group's rows, a plain stage's windows
 * swapped, a ZeRO gradient's GEMM reading the next slice), naming the
 * ranks. */
#include "sched_test.h"

static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(pairwise)",
                                    "fuse(ring, m = 2)", "slice(2)", "vanilla", "auto"};

/* Sizes that divide for tp x dp under every kind above. */
static const char *
grid_defs(char *buf, size_t n, int tp, int dp)
{
	snprintf(buf, n, "tp=%d dp=%d B=%d S=%d D=%d F=%d", tp, dp, 2 * dp, 8 * tp, 4 * dp,
	         4 * tp);
	return buf;
}

/* text (with its backward when bwd) planned under force at tp x dp. */
static Plan *
grid_plan(SRun *r, const char *text, const char *force, int tp, int dp, int bwd)
{
	char defs[128];
	Sched *s = st_run(r, text, force, grid_defs(defs, sizeof defs, tp, dp),
	                  bwd ? ST_BWD : ST_FWD, PIPE_PLANNED);

	if (!s)
		fprintf(stderr, "\ntp=%d dp=%d %s: %s\n", tp, dp, force ? force : "", r->err);
	return s ? r->p : NULL;
}

static void
test_grid_proves(void)
{
	char *text[2] = {st_example("tpdp"), st_file("tests/e2e/tpdp_window.cf")};
	int n = 0;

	for (int t = 0; t < 2; t++)
		for (int tp = 1; tp <= 4; tp++)
			for (int dp = 1; dp <= 4; dp++)
				for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
					for (int bwd = 0; bwd < 2 - t; bwd++) {
						SRun r;
						Plan *p = grid_plan(&r, text[t], kinds[k], tp, dp, bwd);
						CU_ASSERT_PTR_NOT_NULL_FATAL(p);
						CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
						n += r.s->colls.n;
						st_done(&r);
					}
	CU_ASSERT(n > 1000);
	free(text[0]);
	free(text[1]);
}

/* The proof that runs rank 0 of a symmetric program agrees with the one
 * that runs every rank, in every context of the other group. */
static void
test_grid_symmetric(void)
{
	char *text = st_example("tpdp");

	for (int tp = 1; tp <= 4; tp++)
		for (int dp = 1; dp <= 4; dp++)
			for (int bwd = 0; bwd < 2; bwd++) {
				SRun r;
				Plan *p = grid_plan(&r, text, "fuse(bidir)", tp, dp, bwd);
				CU_ASSERT_PTR_NOT_NULL_FATAL(p);
				for (int j = 0; j < r.s->colls.n; j++) {
					const Coll *c = r.s->colls.v[j];
					VerifyStats a, b;
					CU_ASSERT_EQUAL(verify_coll(c, st_pcoll(p, c), &a, NULL, 0), 0);
					CU_ASSERT_EQUAL(verify_coll_full(c, st_pcoll(p, c), &b, NULL, 0), 0);
					CU_ASSERT_EQUAL(a.exposed, b.exposed);
					CU_ASSERT_EQUAL(a.tailfree, b.tailfree);
				}
				st_done(&r);
			}
	free(text);
}

/* A plain stage whose result is a partial sum (attention_dk of queries
 * split over tp: each rank's queries' part) reads the query offset in the
 * rank of the group that sums it, PV_R: not the rank of "another" group,
 * which a model of one group has none of (the C generator died there). */
static void
test_partial_stage_rank(void)
{
	SRun r;
	char *text = st_file("tests/grad/attn.cf");
	Sched *s = st_run(&r, text, "fuse(ring)", NULL, ST_BWD, PIPE_PLANNED);
	int found = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Plan *p = r.p;
	for (int k = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		if (!p->plain[k] || st->u.node->op != OP_ATTN_DK)
			continue;
		found = 1;
		CU_ASSERT_EQUAL(p->group[k], 0);
		CU_ASSERT(p->plain[k]->qoff && p->plain[k]->qstart.c[PV_R] != 0);
		CU_ASSERT_EQUAL(plan_item_vars(p->plain[k]) >> PV_G, 0);
	}
	CU_ASSERT(found);
	CU_ASSERT_EQUAL(verify_sched(s, p, &r.d), 0);
	st_done(&r);
	free(text);
}

/* ---- planted mistakes ---- */

/* The first cut of a view of an item of pc whose start reads the rank in
 * group g (PV_G + g), and that item's view. */
static PCut *
cut_of_group(const PColl *pc, int g)
{
	for (int id = 0; id < pc->c->nitems; id++)
		for (int k = 0; k < pc->item[id]->nview; k++) {
			PView *v = &pc->item[id]->view[k];
			for (int j = 0; j < v->ncut; j++)
				if (v->cut[j].start.c[PV_G + g])
					return &v->cut[j];
		}
	CU_FAIL_FATAL("no cut reads that group's rank");
	return NULL;
}

/* The proved plan of collective name of tests/e2e/tpdp_window.cf on tp x
 * dp ranks under fuse(ring), and the collective, *c. */
static PColl *
window_coll(SRun *r, int tp, int dp, const char *name, const Coll **c)
{
	char *text = st_file("tests/e2e/tpdp_window.cf");
	Plan *p = grid_plan(r, text, "fuse(ring)", tp, dp, 0);

	free(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	*c = st_coll(r->s, name);
	CU_ASSERT_EQUAL(verify_coll(*c, st_pcoll(p, *c), NULL, NULL, 0), 0);
	return st_pcoll(p, *c);
}

/* m (replicated over dp) cut inside the tp gather's region to the rows of
 * this rank's batch by the tp rank instead of the dp rank. */
static void
test_wrong_group(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = window_coll(&r, 2, 2, "xa", &c);
	PCut *x = cut_of_group(pc, 1);

	x->start.c[PV_R] = x->start.c[PV_G + 1];
	x->start.c[PV_G + 1] = 0;
	st_rejects(c, pc, "input 1 (m) of h");
	st_done(&r);
}

/* The same cut right where the dp rank is 0 and off elsewhere: the proof
 * runs the collective over tp for dp ranks 0, 1 and the last. */
static void
test_right_at_rank0_only(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = window_coll(&r, 2, 3, "xa", &c);

	cut_of_group(pc, 1)->start.c[PV_G + 1] = 0;
	st_rejects(c, pc, "(dp rank 1) step");
	st_done(&r);
}

/* rope inside the dp gather's region, its first position without the
 * rows of the tp ranks before this one. */
static void
test_position_other_group(void)
{
	SRun r;
	const Coll *c;
	PColl *pc = window_coll(&r, 2, 2, "za", &c);
	int found = 0;

	for (int id = 0; id < c->nitems; id++)
		if (pc->item[id]->qoff && pc->item[id]->qstart.c[PV_G + 0]) {
			pc->item[id]->qstart.c[PV_G + 0] = 0;
			found = 1;
		}
	CU_ASSERT_FATAL(found);
	st_rejects(c, pc, "(tp rank 1) step");
	st_rejects(c, pc, "q gets position offset 0, but its first row is global row 8");
	st_done(&r);
}

/* A plain stage split over both groups, its replicated operand cut along
 * B by the tp rank and along S by the dp rank. */
static void
test_plain_swapped(void)
{
	SRun r;
	char *text = st_file("tests/e2e/tpdp_window.cf");
	Plan *p = grid_plan(&r, text, "fuse(ring)", 2, 2, 0);
	PItem *add = NULL;
	char *msg = NULL;
	size_t len = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int k = 0; k < r.s->stages.n; k++)
		if (p->plain[k] && !strcmp(((Stage *)r.s->stages.v[k])->u.node->out->name, "v"))
			add = p->plain[k];
	CU_ASSERT_FATAL(add && add->view[2].ncut == 2);
	CU_ASSERT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	for (int j = 0; j < 2; j++) {
		PExpr *e = &add->view[2].cut[j].start;
		int64_t t = e->c[PV_R];
		e->c[PV_R] = e->c[PV_G + 1];
		e->c[PV_G + 1] = t;
	}
	r.d.out = open_memstream(&msg, &len);
	CU_ASSERT_NOT_EQUAL(verify_sched(r.s, p, &r.d), 0);
	fclose(r.d.out);
	r.d.out = stderr;
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "stage v = add(z, pos): rank 1 (dp rank 0)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "input 1 (pos) of v"));
	free(msg);
	st_done(&r);
	free(text);
}

/* tpdp's backward: w1's gradient (split F over tp) reduce-scattered over
 * dp, the weight-gradient GEMM reading the slice after its own. */
static void
test_zero_slice(void)
{
	SRun r;
	char *text = st_example("tpdp");
	Plan *p = grid_plan(&r, text, "fuse(ring)", 2, 2, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	const Coll *c = st_coll(r.s, "d_w1");
	PColl *pc = st_pcoll(p, c);
	PItem *mm = pc->item[st_find(c, 0, 0, IT_COMPUTE, 0)->id];

	CU_ASSERT_EQUAL(verify_coll(c, pc, NULL, NULL, 0), 0);
	CU_ASSERT_FATAL(mm->view[1].ncut >= 1);
	mm->view[1].cut[0].start.add += 1;
	st_rejects(c, pc, "a cut [8, 12) of dim 2 leaves xa (extent 8)");
	st_done(&r);
	free(text);
}

void test_grid_register(void);

void
test_grid_register(void)
{
	CU_pSuite s = CU_add_suite("grid", NULL, NULL);

	CU_add_test(s, "tpdp and its windows prove for tp, dp = 1..4 under every kind",
	            test_grid_proves);
	CU_add_test(s, "the one-rank proof agrees with every rank's on a grid", test_grid_symmetric);
	CU_add_test(s, "a plain stage of a partial result reads the rank of its sum's group",
	            test_partial_stage_rank);
	s = CU_add_suite("grid_mutation", NULL, NULL);
	CU_add_test(s, "a window cut by the rank of the wrong group", test_wrong_group);
	CU_add_test(s, "a window right where the other group's rank is 0 only",
	            test_right_at_rank0_only);
	CU_add_test(s, "a position without the other group's rows", test_position_other_group);
	CU_add_test(s, "a plain stage's windows by swapped ranks", test_plain_swapped);
	CU_add_test(s, "a ZeRO gradient's GEMM reading the next slice", test_zero_slice);
}
