/* Unit tests of lower.c: the compute order of every rank is the paper's
 * (Algorithms 1, 2 and 5), the round-robin pairing, the variants'
 * directions, buffers and step counts, the baselines and auto. */
#include "sched_test.h"

/* FuseAG: step i computes l = (r - i) mod N; FuseRS: l = (r - i - 1) mod N
 * (Algorithms 1 and 2), for every rank and N = 1..16. */
static void
test_ring_order(void)
{
	for (int N = 1; N <= 16; N++) {
		SRun r;
		int got[64];
		Sched *s = st_build(&r, st_mlp(N, "fuse(ring)"), NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		Coll *ag = st_coll(s, "xa"), *rs = st_coll(s, "y");
		for (int rk = 0; rk < N; rk++) {
			CU_ASSERT_EQUAL_FATAL(st_order(ag, rk, 0, got, 64), N);
			for (int i = 0; i < N; i++)
				CU_ASSERT_EQUAL(got[i], ((rk - i) % N + N) % N);
			CU_ASSERT_EQUAL_FATAL(st_order(rs, rk, 0, got, 64), N);
			for (int i = 0; i < N; i++)
				CU_ASSERT_EQUAL(got[i], ((rk - i - 1) % N + N) % N);
		}
		CU_ASSERT_EQUAL(ag->nsteps, N);
		CU_ASSERT_EQUAL(rs->nsteps, N);
		st_done(&r);
	}
}

/* Granularity m: lane t of step i works on slice ((r - i) mod N)*m + t. */
static void
test_granularity(void)
{
	SRun r;
	int got[64], N = 4, m = 2;
	Sched *s = st_build(&r, st_mlp(N, "fuse(ring, m = 2)"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa"), *rs = st_coll(s, "y");
	CU_ASSERT_EQUAL(ag->nslices, 8);
	for (int rk = 0; rk < N; rk++) {
		CU_ASSERT_EQUAL_FATAL(st_order(ag, rk, 0, got, 64), N * m);
		for (int i = 0; i < N * m; i++)
			CU_ASSERT_EQUAL(got[i], ((rk - i / m) % N + N) % N * m + i % m);
		CU_ASSERT_EQUAL_FATAL(st_order(rs, rk, 0, got, 64), N * m);
		for (int i = 0; i < N * m; i++)
			CU_ASSERT_EQUAL(got[i], ((rk - i / m - 1) % N + N) % N * m + i % m);
	}
	/* with a receive to hide under other lanes' compute, GEMM accumulates */
	int beta = 0;
	const Phase *ph = rs->phases.v[0];
	for (int k = 0; k < ph->lanes[0].n; k++)
		beta |= ((Item *)ph->lanes[0].v[k])->kind == IT_COMPUTE &&
		        ((Item *)ph->lanes[0].v[k])->u.comp.beta;
	CU_ASSERT(beta);
	st_done(&r);
}

/* The peer of lane t's first send. */
static int
first_peer(const Coll *c, int t, int rk)
{
	const Phase *ph = c->phases.v[0];

	for (int k = 0; k < ph->lanes[t].n; k++) {
		const Item *it = ph->lanes[t].v[k];
		if (it->kind == IT_SEND)
			return sched_ix(&it->u.xfer.peer, rk, 0);
	}
	return -1;
}

/* bidir: the two halves of every slice go round in opposite directions;
 * own slice still first (gather) and last (reduce). */
static void
test_bidir(void)
{
	SRun r;
	int got[64], N = 5;
	Sched *s = st_build(&r, st_mlp(N, "fuse(bidir)"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa"), *rs = st_coll(s, "y");
	CU_ASSERT_EQUAL(ag->P, 2);
	CU_ASSERT_EQUAL(rs->nsteps, 2 * N);
	for (int rk = 0; rk < N; rk++) {
		CU_ASSERT_EQUAL(first_peer(ag, 0, rk), (rk + 1) % N);
		CU_ASSERT_EQUAL(first_peer(ag, 1, rk), (rk + N - 1) % N);
		CU_ASSERT_EQUAL(first_peer(rs, 1, rk), (rk + N - 1) % N);
		st_order(ag, rk, 0, got, 64);
		CU_ASSERT_EQUAL(got[0], 2 * rk);
		CU_ASSERT_EQUAL(got[1], 2 * rk + 1);
		st_order(rs, rk, 0, got, 64);
		CU_ASSERT_EQUAL(got[2 * N - 2], 2 * rk);
		CU_ASSERT_EQUAL(got[2 * N - 1], 2 * rk + 1);
		CU_ASSERT_EQUAL(got[1], 2 * ((rk + 1) % N) + 1); /* the ccw half's first */
	}
	st_done(&r);
}

/* Circle method: every round a matching, every pair meets exactly once,
 * N-1 rounds for even N, N rounds with one rank out for odd N. */
static void
test_round_robin(void)
{
	for (int N = 1; N <= 33; N++) {
		int R = sched_rounds(N), *met = calloc((size_t)(N * N), sizeof *met);
		CU_ASSERT_EQUAL(R, N == 1 ? 1 : N % 2 ? N : N - 1);
		for (int k = 0; k < R; k++) {
			int idle = 0;
			for (int rk = 0; rk < N; rk++) {
				int p = sched_partner(rk, k, N);
				if (p < 0) {
					idle++;
					continue;
				}
				CU_ASSERT_NOT_EQUAL(p, rk);
				CU_ASSERT_EQUAL(sched_partner(p, k, N), rk);
				met[rk * N + p]++;
			}
			CU_ASSERT_EQUAL(idle, N % 2);
		}
		for (int a = 0; a < N; a++)
			for (int b = 0; b < N; b++)
				CU_ASSERT_EQUAL(met[a * N + b], a != b);
		free(met);
	}
}

/* Pairwise: own slice first for the gather, last for the reduction; the
 * partner's slice in between. */
static void
test_pairwise(void)
{
	for (int N = 2; N <= 7; N++) {
		SRun r;
		int got[64];
		Sched *s = st_build(&r, st_mlp(N, "fuse(pairwise)"), NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		Coll *ag = st_coll(s, "xa"), *rs = st_coll(s, "y");
		for (int rk = 0; rk < N; rk++) {
			CU_ASSERT_EQUAL_FATAL(st_order(ag, rk, 0, got, 64), N);
			CU_ASSERT_EQUAL(got[0], rk);
			for (int i = 1, k = 0; i < N; k++)
				if (sched_partner(rk, k, N) >= 0)
					CU_ASSERT_EQUAL(got[i++], sched_partner(rk, k, N));
			CU_ASSERT_EQUAL_FATAL(st_order(rs, rk, 0, got, 64), N);
			CU_ASSERT_EQUAL(got[N - 1], rk);
		}
		CU_ASSERT_EQUAL(ag->nsteps, 1 + sched_rounds(N));
		st_done(&r);
	}
}

/* FuseA2A (Algorithm 5): step i computes the slice of rank j = r+i+1 and
 * sends it there; the own slice last. */
static void
test_a2a_order(void)
{
	SRun r;
	char *text = st_example("ulysses");
	int got[64], N = 4;
	Sched *s = st_build(&r, text, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "o");
	for (int rk = 0; rk < N; rk++) {
		CU_ASSERT_EQUAL_FATAL(st_order(c, rk, 0, got, 64), N);
		for (int i = 0; i < N; i++)
			CU_ASSERT_EQUAL(got[i], (rk + i + 1) % N);
		CU_ASSERT_EQUAL(first_peer(c, 0, rk), (rk + 1) % N);
	}
	st_done(&r);
	free(text);
}

static int
count_kind(const Coll *c, ItemKind k)
{
	int n = 0;

	for (int p = 0; p < c->phases.n; p++) {
		const Phase *ph = c->phases.v[p];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++)
				n += ((Item *)ph->lanes[t].v[j])->kind == k;
	}
	return n;
}

/* vanilla: one blocking collective; slice(k): k chunks, each posted once. */
static void
test_baselines(void)
{
	SRun r;
	Sched *s = st_build(&r, st_mlp(4, "vanilla"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "y");
	CU_ASSERT_EQUAL(count_kind(c, IT_COLL), 1);
	CU_ASSERT_EQUAL(count_kind(c, IT_SEND), 0);
	CU_ASSERT_EQUAL(c->nsteps, 1);
	CU_ASSERT(((Item *)((Phase *)c->phases.v[0])->lanes[0].v[1])->u.coll.blocking);
	st_done(&r);
	s = st_build(&r, st_mlp(4, "slice(4)"), NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	c = st_coll(s, "y");
	CU_ASSERT_EQUAL(c->nslices, 16);
	CU_ASSERT_EQUAL(c->nsteps, 4);
	CU_ASSERT_EQUAL(((Phase *)c->phases.v[0])->nrounds, 4);
	st_done(&r);
}

/* auto: fuse(ring) with a region to hide under, else vanilla; it says so. */
static void
test_auto(void)
{
	SRun r;
	Sched *s = st_build(&r, st_mlp(4, "auto"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "xa");
	CU_ASSERT_EQUAL(c->how.kind, SK_FUSE);
	CU_ASSERT_STRING_EQUAL(c->note, "auto: fuse(ring), 2 ops to hide the transfers under");
	st_done(&r);
	s = st_build(&r, "model m {\n size S = 8;\n group tp = 2;\n in x : [S] split S over tp;\n"
	             " xa = all_gather(x, S);\n out xa;\n schedule { default auto; }\n}\n", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	c = st_coll(s, "xa");
	CU_ASSERT_EQUAL(c->how.kind, SK_VANILLA);
	CU_ASSERT_STRING_EQUAL(c->note, "auto: vanilla, no compute to hide the transfers under");
	st_done(&r);
}

/* Stages run in dependency order: the gather's stage before the
 * reduction that reads its region. */
static void
test_stage_order(void)
{
	SRun r;
	char *text = st_example("transformer");
	Sched *s = st_build(&r, text, NULL);
	int *at;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	at = calloc((size_t)s->g->nodes.n, sizeof *at);
	for (int k = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		if (st->kind == ST_COMPUTE) {
			at[st->u.node->id] = k + 1;
			continue;
		}
		at[st->u.coll->node->id] = k + 1;
		for (int j = 0; j < st->u.coll->region.n; j++)
			at[((RNode *)st->u.coll->region.v[j])->node->id] = k + 1;
	}
	for (int k = 0; k < s->g->nodes.n; k++) {
		const Node *n = s->g->nodes.v[k];
		if (op_info[n->op].cls == CL_LEAF)
			continue;
		CU_ASSERT(at[k] > 0);
		for (int i = 0; i < n->nin; i++)
			if (op_info[n->in[i]->def->op].cls != CL_LEAF)
				CU_ASSERT(at[n->in[i]->def->id] <= at[k]);
	}
	free(at);
	st_done(&r);
	free(text);
}

/* text (under --schedule=force when given) gives the all_reduce z
 * vanilla, its one slice, the matmul that feeds it and the note note. */
static void
expect_vanilla(const char *text, const char *force, const char *note)
{
	SRun r;
	Sched *s = st_build(&r, text, force);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "z");
	CU_ASSERT_EQUAL(c->how.kind, SK_VANILLA);
	CU_ASSERT_EQUAL(c->nslices, 1);
	CU_ASSERT_EQUAL(c->pre.n, 1);
	CU_ASSERT_STRING_EQUAL(c->note, note);
	st_done(&r);
}

/* An all_reduce of a [3, 3] partial sum on 4 ranks: no dimension divides
 * into fuse(ring)'s 4 slices. The built-in default and auto, the
 * compiler's own choices, fall back to vanilla and say why (both once
 * failed, naming the temporary t1); fuse(ring) written for it is an
 * error at the entry that names the expression, not t1. */
static void
test_no_dim(void)
{
	const char *m = "model m {\n size A = 3, K = 4;\n group tp = 4;\n"
	                " in x : [A, K] split K over tp;\n weight w : [K, A] split K over tp;\n"
	                " z = all_reduce(x @ w);\n out z;\n%s}\n";
	const char *why = "needs a dimension of x @ w ([3,3]) that divides into 4 slices";
	char text[512], note[256];
	SRun r;

	snprintf(text, sizeof text, m, "");
	snprintf(note, sizeof note, "the built-in default fuse(ring) %s: vanilla used", why);
	expect_vanilla(text, NULL, note);
	snprintf(note, sizeof note, "auto: vanilla, fuse(ring) %s", why);
	expect_vanilla(text, "auto", note);

	Sched *s = st_build(&r, text, "slice(3)");
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(st_coll(s, "z")->how.kind, SK_SLICE);
	st_done(&r);

	snprintf(text, sizeof text, m, " schedule { z: fuse(ring); }\n");
	CU_ASSERT_PTR_NULL(st_build(&r, text, NULL));
	snprintf(note, sizeof note, "t.cf:8:16: error: fuse(ring) on z %s\n", why);
	CU_ASSERT_PTR_NOT_NULL(r.err && strstr(r.err, note));
	CU_ASSERT_PTR_NULL(r.err && strstr(r.err, "t1"));
	st_done(&r);
}

/* fuse(bidir) on an all_to_all runs as fuse(ring), and only ring's slices
 * must divide: H = N = 4 heads take fuse(ring)'s 4 slices, not bidir's 8
 * (the check once demanded bidir's, though lowering used ring). */
static void
test_a2a_bidir_slices(void)
{
	const char *m = "model m {\n size B = 1, S = 8, H = 4, D = 2;\n group sp = 4;\n"
	                " in x : [B, H, S, D] split S over sp;\n"
	                " y = all_to_all(x, S, H);\n out y;\n%s}\n";
	char text[512];
	SRun r;

	snprintf(text, sizeof text, m, " schedule { y: fuse(bidir); }\n");
	Sched *s = st_build(&r, text, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "y");
	CU_ASSERT_EQUAL(c->how.topo, TP_RING);
	CU_ASSERT_EQUAL(c->nslices, 4);
	CU_ASSERT_PTR_NOT_NULL(c->note && strstr(c->note, "ring order used"));
	st_done(&r);

	snprintf(text, sizeof text, m, " schedule { y: fuse(bidir, m = 2); }\n");
	CU_ASSERT_PTR_NULL(st_build(&r, text, NULL));
	CU_ASSERT_PTR_NOT_NULL(r.err && strstr(r.err, "error: fuse(bidir, m = 2) on y, run as "
	                                       "fuse(ring, m = 2), needs H (4) to divide into 8 slices"));
	st_done(&r);
}

void test_lower_register(void);

void
test_lower_register(void)
{
	CU_pSuite s = CU_add_suite("lower", NULL, NULL);

	CU_add_test(s, "ring order is Algorithms 1 and 2 for N = 1..16", test_ring_order);
	CU_add_test(s, "granularity m: lanes of sub-slices", test_granularity);
	CU_add_test(s, "bidir: halves in opposite directions", test_bidir);
	CU_add_test(s, "round-robin pairing (circle method)", test_round_robin);
	CU_add_test(s, "pairwise: own first / last", test_pairwise);
	CU_add_test(s, "FuseA2A order is Algorithm 5", test_a2a_order);
	CU_add_test(s, "vanilla and slice(k)", test_baselines);
	CU_add_test(s, "auto picks and says why", test_auto);
	CU_add_test(s, "stages in dependency order", test_stage_order);
	CU_add_test(s, "all_reduce with no dim for fuse(ring): vanilla or an error", test_no_dim);
	CU_add_test(s, "fuse(bidir) on all_to_all: ring's slices", test_a2a_bidir_slices);
}
