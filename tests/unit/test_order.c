/* Unit tests of order.c, the whole-pass order: zero_dp's backward runs
 * d_w2's all_reduce first with d_h, d_t1 and d_x under its all_gather
 * half; every example's backward under the order verifies with its plan;
 * and the verifier rejects planted bugs of the order (suite
 * order_mutation): a consumer of the collective's result hosted above
 * the wait for it, a hosted stage writing a buffer of the collective or
 * splitting a step's transfer group (NCCL's grouping rule), a hosted
 * stage's memory shared with the collective's scratch, hosted stages out
 * of their order, each named by rank, step and slice (or stage); with
 * several collectives in flight (tpdp: a collective's whole program run
 * under another's transfers), a hosted collective reading the host's
 * result in flight, a transfer's two ends on two sides of the hosted
 * program, its scratch on the host's result. */
#include "sched_test.h"

/* text's backward at defs, ordered as mode asks; NULL after errors. */
static Sched *
ordered(SRun *r, const char *text, const char *defs, OrderMode mode)
{
	Sched *s = st_compile(r, text, NULL, defs, ST_BWD);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(order_sched(s, mode, &r->d), 0);
	return s;
}

static Sched *
zero_dp(SRun *r, OrderMode mode)
{
	char *text = st_example("zero_dp");
	Sched *s = ordered(r, text, NULL, mode);

	free(text);
	return s;
}

/* verify_sched with plan p; its message (if any) into err. */
static int
proves_plan(Sched *s, const Plan *p, char *err, size_t n)
{
	FILE *f = fmemopen(err, n, "w");
	Diag d = {0};

	d.out = f;
	int rc = verify_sched(s, p, &d);
	fclose(f);
	err[n - 1] = 0;
	return rc == 0;
}

/* verify_sched with a fresh plan. */
static int
proves(Sched *s, char *err, size_t n)
{
	return proves_plan(s, plan_sched(s), err, n);
}

/* The first scratch buffer of c that has a place in pc's workspace. */
static int
first_temp(const Coll *c, const PColl *pc)
{
	for (int k = 0; k < c->bufs.n; k++)
		if (((Buf *)c->bufs.v[k])->kind == BK_TEMP && pc->off[k] >= 0)
			return k;
	return -1;
}

static const char *
stage_name(const Sched *s, int k)
{
	const Stage *st = s->stages.v[k];

	return st->kind == ST_COLL ? st->u.coll->node->out->name : st->u.node->out->name;
}

/* d_w2 first, hosting the backward of the first layer; d_w1 after. */
static void
test_zero_dp(void)
{
	static const char *const want[] = {"d_w2", "d_h", "d_t1", "d_x", "d_w1"};
	static const int host[] = {0, 1, 1, 1, 0};
	SRun r;
	Sched *s = zero_dp(&r, ORDER_PASS);
	char err[2048] = "";

	CU_ASSERT_EQUAL_FATAL(s->stages.n, 5);
	for (int k = 0; k < 5; k++) {
		CU_ASSERT_STRING_EQUAL(stage_name(s, k), want[k]);
		CU_ASSERT_EQUAL(((Stage *)s->stages.v[k])->host1, host[k]);
	}
	CU_ASSERT_PTR_NOT_NULL(st_coll(s, "d_w2")->order_note);
	CU_ASSERT_TRUE(proves(s, err, sizeof err));
	if (*err)
		fprintf(stderr, "\n%s\n", err);
	CU_ASSERT_EQUAL(st_coll(s, "d_w2")->stats.exposed, 0);
	CU_ASSERT_TRUE(st_coll(s, "d_w2")->stats.tailfree);
	st_done(&r);

	/* the old order: d_w2 last, its all_gather half exposed */
	s = zero_dp(&r, ORDER_REGION);
	CU_ASSERT_STRING_EQUAL(stage_name(s, 4), "d_w2");
	CU_ASSERT_TRUE(proves(s, err, sizeof err));
	CU_ASSERT_EQUAL(st_coll(s, "d_w2")->stats.exposed, 6);
	CU_ASSERT_FALSE(st_coll(s, "d_w2")->stats.tailfree);
	st_done(&r);
}

/* Every example's backward, ordered, at N = 1..4 where its sizes divide:
 * the order respects every dependency (order_check) and the schedule
 * and its plan verify; no collective is more exposed than in the old
 * order. */
static void
test_examples(void)
{
	static const char *const ex[][2] = {
		{"mlp", "tp"}, {"attention", "tp"}, {"mamba", "tp"}, {"ulysses", "sp"},
		{"zero_dp", "dp"}, {"transformer", "tp"}, {"llama", "tp"}};

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e][0]);
		for (int n = 1; n <= 4; n++) {
			if (n == 3)
				continue; /* the examples' sizes do not divide by 3 */
			char defs[64], err[2048] = "";
			snprintf(defs, sizeof defs, "%s=%d", ex[e][1], n);
			SRun r, q;
			Sched *s = ordered(&r, text, defs, ORDER_PASS);
			Sched *o = ordered(&q, text, defs, ORDER_REGION);
			CU_ASSERT_EQUAL(s->stages.n, o->stages.n);
			CU_ASSERT_EQUAL(order_check(s, err, sizeof err), 0);
			int ok = proves(s, err, sizeof err) && proves(o, err, sizeof err);
			if (!ok)
				fprintf(stderr, "\n%s %s: %s\n", ex[e][0], defs, err);
			CU_ASSERT_TRUE(ok);
			for (int k = 0; ok && k < s->colls.n; k++) {
				const Coll *c = s->colls.v[k], *d = st_coll(o, c->node->out->name);
				CU_ASSERT(c->stats.exposed <= d->stats.exposed);
			}
			st_done(&r);
			st_done(&q);
		}
		free(text);
	}
}

/* ---- mutations ---- */

/* The item of kind kd in phase p (any lane), the k-th. */
static Item *
find_any(const Coll *c, int p, ItemKind kd, int k)
{
	const Phase *ph = c->phases.v[p];

	for (int t = 0; t < ph->nlanes; t++)
		for (int j = 0; j < ph->lanes[t].n; j++) {
			Item *it = ph->lanes[t].v[j];
			if (it->kind == kd && k-- == 0)
				return it;
		}
	CU_FAIL_FATAL("no such item");
	return NULL;
}

/* A plain stage of gelu reading in (or, write: writing out = in). */
static Node *
consumer(Arena *a, Value *in, int write)
{
	Node *n = arena_alloc(a, sizeof *n);
	Value *v = arena_alloc(a, sizeof *v);

	*v = *in;
	v->name = "z";
	v->def = n;
	n->op = OP_GELU;
	n->nin = 1;
	n->in[0] = in;
	n->out = write ? in : v;
	return n;
}

/* d_w2's program with its hosted d_t1 turned into gelu(d_w2) (or into a
 * stage writing d_w2) in round `round` of its all_gather half. */
static Coll *
planted(SRun *r, int round, int write)
{
	Sched *s = zero_dp(r, ORDER_PASS);
	Coll *c = st_coll(s, "d_w2");
	Item *it = find_any(c, 1, IT_HOST, 1);

	it->u.host.node = consumer(r->a, c->node->out, write);
	it->g.lo = it->g.hi = round;
	return c;
}

/* The consumer of d_w2 hosted above the last wait for it: rejected
 * naming rank, step and slice; at the end of the program (after every
 * wait) it verifies. */
static void
test_consumer_above_wait(void)
{
	SRun r;
	Coll *c = planted(&r, 1, 0);
	char err[1024];

	st_rejects(c, NULL, "its hosted stage z reads d_w2 slice 1 before the collective is done "
	           "with it: it holds nothing");
	st_done(&r);

	c = planted(&r, 3, 0);
	CU_ASSERT_EQUAL(verify_coll(c, NULL, NULL, err, sizeof err), 0);
	st_done(&r);
}

/* A hosted stage that writes the collective's result. */
static void
test_host_writes(void)
{
	SRun r;
	Coll *c = planted(&r, 1, 1);

	st_rejects(c, NULL, "its hosted stage d_w2 writes d_w2, a buffer of the collective");
	st_done(&r);
}

/* A hosted stage between a step's send and its receive splits the step's
 * group in two: every rank runs its send group first, which cannot end
 * before its peer runs the receive group it posted after (NCCL runs a
 * rank's groups in the order posted). */
static void
test_split_group(void)
{
	SRun r;
	Sched *s = zero_dp(&r, ORDER_PASS);
	Coll *c = st_coll(s, "d_w2");
	Phase *ph = c->phases.v[1];
	Vec *lane = &ph->lanes[ph->nlanes - 1];
	Item *h = find_any(c, 1, IT_HOST, 1);
	int js = -1, jh = -1;

	for (int j = 0; j < lane->n; j++) {
		if (lane->v[j] == h)
			jh = j;
		if (((Item *)lane->v[j])->kind == IT_SEND && js < 0)
			js = j;
	}
	CU_ASSERT_FATAL(js >= 0 && jh > js);
	memmove(lane->v + js + 2, lane->v + js + 1, (size_t)(jh - js - 1) * sizeof *lane->v);
	lane->v[js + 1] = h;
	st_rejects(c, NULL, "NCCL runs each rank's groups in the order posted");
	st_done(&r);
}

/* The hosted d_h's memory given the place of d_w2's scratch: both live in
 * the host's stage, so the workspace proof rejects it. */
static void
test_shared_memory(void)
{
	SRun r;
	Sched *s = zero_dp(&r, ORDER_PASS);
	Plan *p = plan_sched(s);
	const Coll *c = st_coll(s, "d_w2");
	const PColl *pc = st_pcoll(p, c);
	int b = first_temp(c, pc);
	char err[2048] = "";

	CU_ASSERT_FATAL(b >= 0);
	const Node *dh = ((Stage *)s->stages.v[1])->u.node;
	CU_ASSERT_STRING_EQUAL_FATAL(dh->out->name, "d_h");
	p->off[dh->out->id] = pc->off[b];
	CU_ASSERT_FALSE(proves_plan(s, p, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "workspace: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "and d_h at ["));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "overlap, and stage 0 touches both"));
	if (!strstr(err, "stage 0 touches both"))
		fprintf(stderr, "\n%s\n", err);
	st_done(&r);
}

/* Hosted stages out of order: d_t1's item run before d_h's, which makes
 * what it reads (the pass-level proof, order_check); and the stage list
 * not in the order the program runs them. */
static void
test_hosted_order(void)
{
	SRun r;
	Sched *s = zero_dp(&r, ORDER_PASS);
	Coll *c = st_coll(s, "d_w2");
	char err[1024] = "";

	find_any(c, 1, IT_HOST, 1)->g.lo = find_any(c, 1, IT_HOST, 1)->g.hi = 0;
	find_any(c, 1, IT_HOST, 0)->g.lo = find_any(c, 1, IT_HOST, 0)->g.hi = 1;
	CU_ASSERT_NOT_EQUAL(order_check(s, err, sizeof err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "runs d_t1 in round 0, which is not its next hosted stage"));
	st_done(&r);

	s = zero_dp(&r, ORDER_PASS);
	void *t = s->stages.v[1];
	s->stages.v[1] = s->stages.v[2];
	s->stages.v[2] = t;
	/* the items follow the stages: d_t1 now first, reading d_h */
	Coll *c2 = st_coll(s, "d_w2");
	Item *a = find_any(c2, 1, IT_HOST, 0), *b = find_any(c2, 1, IT_HOST, 1);
	Node *n = a->u.host.node;
	a->u.host.node = b->u.host.node;
	b->u.host.node = n;
	a->u.host.stage = 1;
	b->u.host.stage = 2;
	CU_ASSERT_NOT_EQUAL(order_check(s, err, sizeof err), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "runs d_t1 in round 0, which reads d_h before any stage "
	                                   "makes it"));
	if (!strstr(err, "reads d_h"))
		fprintf(stderr, "\n%s\n", err);
	st_done(&r);
}

/* ---- several collectives in flight (order.c's 2b) ---- */

/* tpdp's backward at tp = n (S = 8n, F = 16n), dp = 2, ordered as mode
 * asks. */
static Sched *
tpdp(SRun *r, int n, OrderMode mode)
{
	char *text = st_example("tpdp");
	char defs[64];

	snprintf(defs, sizeof defs, "tp=%d S=%d F=%d", n, 8 * n, 16 * n);
	Sched *s = ordered(r, text, defs, mode);
	free(text);
	return s;
}

/* The IT_HOST item of c that runs a collective's program, or NULL. */
static Item *
guest_item(const Coll *c)
{
	for (int p = 0; p < c->phases.n; p++) {
		const Phase *ph = c->phases.v[p];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++) {
				Item *it = ph->lanes[t].v[j];
				if (it->kind == IT_HOST && it->u.host.coll)
					return it;
			}
	}
	return NULL;
}

/* tpdp at tp = 2: the backward's re-gather of xa runs d_x's fused
 * reduce_scatter whole in its exposed round, and d_w2's all_reduce (over
 * dp) runs d_w1's reduce_scatter (over dp too: one communicator, two
 * collectives in flight); both hosts are then tail-free, and the pass
 * proves with its memory plan. At tp = 1..64 every pass with a
 * collective in flight beside another proves, the order respects every
 * dependency, and no collective is more exposed than in the region
 * order. */
static void
test_in_flight(void)
{
	static const int ns[] = {1, 2, 3, 4, 5, 8, 16, 32, 64};
	SRun r, q;
	Sched *s = tpdp(&r, 2, ORDER_PASS);
	char err[2048] = "";

	CU_ASSERT_EQUAL(order_check(s, err, sizeof err), 0);
	CU_ASSERT_TRUE(proves(s, err, sizeof err));
	if (*err)
		fprintf(stderr, "\n%s\n", err);
	static const char *const pair[][2] = {{"xa", "d_x"}, {"d_w2", "d_w1"}};
	for (int k = 0; k < 2; k++) {
		const Coll *h = st_coll(s, pair[k][0]);
		const Item *g = guest_item(h);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_STRING_EQUAL(g->u.host.coll->node->out->name, pair[k][1]);
		CU_ASSERT_EQUAL(h->stats.exposed, 0);
		CU_ASSERT_TRUE(h->stats.tailfree);
		const Stage *gs = s->stages.v[g->u.host.stage];
		CU_ASSERT(gs->kind == ST_COLL && gs->u.coll == g->u.host.coll && gs->host1 > 0);
	}
	st_done(&r);

	int hosting = 0;
	for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
		s = tpdp(&r, ns[i], ORDER_PASS);
		Sched *o = tpdp(&q, ns[i], ORDER_REGION);
		CU_ASSERT_EQUAL(order_check(s, err, sizeof err), 0);
		int ok = proves(s, err, sizeof err) && proves(o, err, sizeof err);
		if (!ok)
			fprintf(stderr, "\ntpdp tp=%d: %s\n", ns[i], err);
		CU_ASSERT_TRUE(ok);
		for (int k = 0; ok && k < s->colls.n; k++) {
			const Coll *c = s->colls.v[k];
			CU_ASSERT(c->stats.exposed <= st_coll(o, c->node->out->name)->stats.exposed);
			hosting += guest_item(c) != NULL;
		}
		st_done(&r);
		st_done(&q);
	}
	CU_ASSERT(hosting >= 10);
}

/* A hosted collective that reads the host's result before the host's
 * wait for it: d_x's program made to read xa, in the round whose
 * transfers into xa are in flight. */
static void
test_guest_reads_in_flight(void)
{
	SRun r;
	Sched *s = tpdp(&r, 2, ORDER_PASS);
	Coll *c = st_coll(s, "xa");
	Item *g = guest_item(c);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	g->u.host.coll->node->in[0] = c->node->out;
	st_rejects(c, NULL, "its hosted collective d_x reads xa while a transfer into it is in "
	           "flight");
	st_done(&r);
}

/* The two ends of one transfer of the host on two sides of the hosted
 * program: each rank posts its send, runs d_x's program, then posts its
 * receive, so its peer's send (posted before) pairs with a receive
 * posted after, where d_x's own transfers on the same ranks could pair
 * with either. */
static void
test_guest_between_ends(void)
{
	SRun r;
	Sched *s = tpdp(&r, 2, ORDER_PASS);
	Coll *c = st_coll(s, "xa");
	Item *g = guest_item(c);
	Vec *lane = NULL;
	int jg = -1, jr = -1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (int p = 0; p < c->phases.n && jg < 0; p++) {
		Phase *ph = c->phases.v[p];
		for (int t = 0; t < ph->nlanes && jg < 0; t++)
			for (int j = 0; j < ph->lanes[t].n; j++)
				if (ph->lanes[t].v[j] == g)
					lane = &ph->lanes[t], jg = j;
	}
	CU_ASSERT_FATAL(jg >= 0);
	for (int j = 0; j < jg && jr < 0; j++) {
		const Item *it = lane->v[j];
		if (it->kind == IT_RECV && it->g.lo <= g->g.lo && g->g.lo <= it->g.hi)
			jr = j;
	}
	CU_ASSERT_FATAL(jr >= 0);
	void *recv = lane->v[jr];
	memmove(lane->v + jr, lane->v + jr + 1, (size_t)(jg - jr) * sizeof *lane->v);
	lane->v[jg] = recv;
	st_rejects(c, NULL, "on the other side of a hosted collective's program");
	st_done(&r);
}

/* The hosted collective's scratch placed on the host's result, which the
 * host's transfers fill while the hosted program runs: both live in the
 * host's stage, so the workspace proof rejects it. */
static void
test_guest_scratch_shared(void)
{
	SRun r;
	Sched *s = tpdp(&r, 2, ORDER_PASS);
	Plan *p = plan_sched(s);
	const Coll *c = st_coll(s, "xa");
	const Item *g = guest_item(c);
	char err[2048] = "";

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	const Coll *gc = g->u.host.coll;
	PColl *pc = (PColl *)st_pcoll(p, gc);
	int b = first_temp(gc, pc);
	CU_ASSERT_FATAL(b >= 0 && p->off[c->node->out->id] >= 0);
	CU_ASSERT_TRUE(proves_plan(s, p, err, sizeof err));
	pc->off[b] = p->off[c->node->out->id];
	CU_ASSERT_FALSE(proves_plan(s, p, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "workspace: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, " of d_x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "xa at ["));
	if (!strstr(err, "xa at ["))
		fprintf(stderr, "\n%s\n", err);
	st_done(&r);
}

void test_order_register(void);

void
test_order_register(void)
{
	CU_pSuite s = CU_add_suite("order", NULL, NULL);

	CU_add_test(s, "zero_dp: d_w2 first, the first layer under it", test_zero_dp);
	CU_add_test(s, "every example's backward, N = 1, 2, 4", test_examples);
	CU_add_test(s, "tpdp: collectives in flight beside others, tp = 1..64", test_in_flight);
	s = CU_add_suite("order_mutation", NULL, NULL);
	CU_add_test(s, "a consumer hosted above the wait", test_consumer_above_wait);
	CU_add_test(s, "a hosted stage writes the collective's buffer", test_host_writes);
	CU_add_test(s, "a hosted stage splits a step's group", test_split_group);
	CU_add_test(s, "a hosted stage's memory is the collective's scratch", test_shared_memory);
	CU_add_test(s, "hosted stages out of order", test_hosted_order);
	CU_add_test(s, "a hosted collective reads the host's result in flight",
	            test_guest_reads_in_flight);
	CU_add_test(s, "a transfer's two ends on two sides of a hosted collective",
	            test_guest_between_ends);
	CU_add_test(s, "a hosted collective's scratch on the host's result",
	            test_guest_scratch_shared);
}
