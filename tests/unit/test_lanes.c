/* Unit tests of the schedule picture's lanes (codegen/sched_lanes.c):
 * ranks alike up to rotation share a lane, ranks that differ get their
 * own, and the messages drawn into a shared lane's rank are those of
 * running every rank. */
#include "codegen.h"
#include "sched_test.h"

static int
msg_cmp(const void *a, const void *b)
{
	const VerifyMsg *x = a, *y = b;
	int kx[5] = {x->dst, x->src, x->sstep, x->dstep, x->slice};
	int ky[5] = {y->dst, y->src, y->sstep, y->dstep, y->slice};

	for (int k = 0; k < 5; k++)
		if (kx[k] != ky[k])
			return kx[k] < ky[k] ? -1 : 1;
	return 0;
}

/* Is step k of c drawn (sched_dot.c: past 16 steps the first 6 and the
 * last)? */
static int
drawn(const Coll *c, int k)
{
	int n = 0;

	for (int p = 0; p < c->phases.n; p++)
		n += ((Phase *)c->phases.v[p])->nrounds * ((Phase *)c->phases.v[p])->nlanes;
	return n <= 16 || k < 6 || k >= n - 1;
}

/* The messages of c into rank 0 drawn in its shared lane are those into
 * rank 0 of running every rank (past 32 ranks, of the steps drawn); the
 * count compared, or -1. */
static int
same_messages(const DotLanes *L, const Coll *c, Arena *a)
{
	VerifyMsg *all, *few;
	int nall, nfew, n = 0, k = 0;

	CU_ASSERT_EQUAL_FATAL(verify_messages(c, c->N, &all, &nall), 0);
	CU_ASSERT_EQUAL_FATAL(dot_lane_messages(a, L, c, &few, &nfew), 0);
	for (int m = 0; m < nall; m++)
		if (all[m].dst == 0 && (c->N <= 32 || (drawn(c, all[m].sstep) && drawn(c, all[m].dstep))))
			all[n++] = all[m];
	for (int m = 0; m < nfew; m++)
		if (c->N <= 32 || (drawn(c, few[m].sstep) && drawn(c, few[m].dstep)))
			few[k++] = few[m];
	nfew = k;
	qsort(all, (size_t)n, sizeof *all, msg_cmp);
	qsort(few, (size_t)nfew, sizeof *few, msg_cmp);
	CU_ASSERT_EQUAL(n, nfew);
	if (n != nfew || memcmp(all, few, (size_t)n * sizeof *all))
		return -1;
	return n;
}

/* The symmetric kinds, forward and backward, N = 2..9 and 70: one lane
 * "ranks 0-(N-1) (rotations)", its messages those of every rank run. */
static void
test_lanes_rotations(void)
{
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(ring, m = 2)",
	                                    "slice(2)", "vanilla"};
	int compared = 0;

	for (int N = 2; N <= 10; N++)
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
			for (int what = ST_FWD; what <= ST_BWD; what += ST_BWD - ST_FWD) {
				SRun r;
				int n = N == 10 ? 70 : N;
				Sched *s = st_compile(&r, st_mlp(n, kinds[k]), NULL, NULL, what);
				CU_ASSERT_PTR_NOT_NULL_FATAL(s);
				const DotLanes *L = dot_lanes_new(r.a, s, NULL, 8, 4);
				char want[64];
				snprintf(want, sizeof want, "ranks 0-%d (rotations)", n - 1);
				CU_ASSERT_EQUAL(L->n, 1);
				CU_ASSERT(L->folded);
				CU_ASSERT_STRING_EQUAL(L->name[0], want);
				for (int j = 0; j < s->colls.n; j++) {
					int m = same_messages(L, s->colls.v[j], r.a);
					CU_ASSERT(m >= 0);
					compared += m > 0;
				}
				st_done(&r);
			}
	CU_ASSERT(compared > 100);
}

/* Ulysses' all-to-alls (a peer r + i + 1 in round i), forward and
 * backward, N = 2..9 and 40: one lane, its messages every rank's (at 40,
 * those of the steps drawn). */
static void
test_lanes_all_to_all(void)
{
	char *text = st_example("ulysses");
	int compared = 0;

	for (int n = 2; n <= 10; n++)
		for (int what = ST_FWD; what <= ST_BWD; what += ST_BWD - ST_FWD) {
			SRun r;
			char defs[128];
			int N = n == 10 ? 40 : n;
			snprintf(defs, sizeof defs, "sp=%d S=%d H=%d D=%d", N, 8 * N, 4 * N, 8 * N);
			Sched *s = st_compile(&r, text, NULL, defs, what);
			CU_ASSERT_PTR_NOT_NULL_FATAL(s);
			const DotLanes *L = dot_lanes_new(r.a, s, NULL, 8, 4);
			CU_ASSERT_EQUAL(L->n, 1);
			for (int j = 0; j < s->colls.n; j++) {
				int m = same_messages(L, s->colls.v[j], r.a);
				CU_ASSERT(m >= 0);
				compared += m > 0;
			}
			st_done(&r);
		}
	free(text);
	CU_ASSERT(compared > 20);
}

/* Round-robin: every rank its own lane (messages between them as drawn
 * before), past 8 ranks the first four. */
static void
test_lanes_round_robin(void)
{
	for (int N = 3; N <= 16; N++) {
		SRun r;
		Sched *s = st_compile(&r, st_mlp(N, "fuse(pairwise)"), NULL, NULL, ST_FWD);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		const DotLanes *L = dot_lanes_new(r.a, s, NULL, 8, 4);
		CU_ASSERT_EQUAL(L->n, N <= 8 ? N : 4);
		CU_ASSERT(!L->folded);
		CU_ASSERT_STRING_EQUAL(L->name[1], "rank 1");
		CU_ASSERT_EQUAL(L->lane[N - 1], N <= 8 ? N - 1 : -1);
		st_done(&r);
	}
}

static const char *const allreduce =
	"model ar {\n  size B = 2, S = 32, D = 16, F = 64;\n  group tp = 4;\n"
	"  in x : [B, S, D];\n  weight w1 : [D, F] split F over tp;\n"
	"  weight w2 : [F, D] split F over tp;\n  y = all_reduce(gelu(x @ w1) @ w2);\n"
	"  out y;\n}\n";

/* The library's all_reduce is not symmetric, but every rank runs it
 * alike: one lane "(alike)"; a planted index that differs by rank (the
 * chunk posted) splits the ranks into lanes of their own. */
static void
test_lanes_alike(void)
{
	SRun r;
	Sched *s = st_compile(&r, allreduce, "slice(2)", NULL, ST_FWD);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	const Coll *c = s->colls.v[0];
	CU_ASSERT_FATAL(!sched_symmetric(c));
	const DotLanes *L = dot_lanes_new(r.a, s, NULL, 8, 4);
	CU_ASSERT_EQUAL(L->n, 1);
	CU_ASSERT_STRING_EQUAL(L->name[0], "ranks 0-3 (alike)");
	/* plant: rank r posts chunk r + 1 of its phase 0 lane 0 item */
	Item *it = NULL;
	for (int p = 0; p < c->phases.n && !it; p++) {
		Phase *ph = c->phases.v[p];
		for (int t = 0; t < ph->nlanes && !it; t++)
			for (int k = 0; k < ph->lanes[t].n && !it; k++)
				if (((Item *)ph->lanes[t].v[k])->kind == IT_COLL)
					it = ph->lanes[t].v[k];
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(it);
	it->u.coll.sel.lo = (Ix){IX_AFFINE, 1, 0, 1, 0};
	L = dot_lanes_new(r.a, s, NULL, 8, 4);
	CU_ASSERT_EQUAL(L->n, 4);
	CU_ASSERT(!L->folded);
	CU_ASSERT_STRING_EQUAL(L->name[3], "rank 3");
	st_done(&r);
}

/* Ranks beyond a smaller group's: tp x dp, each group's ranks alike. */
static void
test_lanes_groups(void)
{
	SRun r;
	char *text = st_example("tpdp");
	Sched *s = st_compile(&r, text, NULL, "tp=4 dp=2 B=4 S=32 D=8 F=16", ST_BWD);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	const DotLanes *L = dot_lanes_new(r.a, s, NULL, 8, 4);
	/* ranks 0-1 run both groups' collectives, 2-3 only tp's */
	CU_ASSERT_EQUAL(L->n, 2);
	CU_ASSERT_STRING_EQUAL(L->name[0], "ranks 0-1 (rotations)");
	CU_ASSERT_STRING_EQUAL(L->name[1], "ranks 2-3 (rotations)");
	st_done(&r);
	free(text);
}

void test_lanes_register(void);

void
test_lanes_register(void)
{
	CU_pSuite s = CU_add_suite("lanes", NULL, NULL);

	CU_add_test(s, "symmetric kinds: one lane, its messages every rank's", test_lanes_rotations);
	CU_add_test(s, "ulysses' all-to-alls: one lane, its messages every rank's",
	            test_lanes_all_to_all);
	CU_add_test(s, "round-robin: a lane a rank, past 8 the first four", test_lanes_round_robin);
	CU_add_test(s, "library all_reduce: alike; a planted difference splits", test_lanes_alike);
	CU_add_test(s, "two groups: the smaller group's ranks apart", test_lanes_groups);
}
