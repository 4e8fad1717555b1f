/* test_call.c: the verifier proves the shapes of every runtime call
 * (verify_call.c): a call whose views the runtime would refuse is a plan
 * it rejects, with the call, its operands and their dims in the message.
 * Planted: the backward of attention split over the batch whose dk
 * reads k whole beside a rank's half of q (the spread the old rule gave
 * it, issue 48), and a head merge whose result is narrower than its
 * heads. */
#include "sched_test.h"
#include "verify.h"

static MView
mv(int nd, const int64_t *dims)
{
	MView m = {.nd = nd};
	int64_t st = 1;

	for (int d = nd - 1; d >= 0; d--) {
		m.dim[d] = dims[d];
		m.stride[d] = st;
		st *= dims[d];
	}
	return m;
}

/* vc_call on hand-made views: attention_dk of q [2,1,4,8] with k, v
 * [4,1,4,8] (B disagrees), and a head merge of [8,1,1,4,1] into
 * [8,1,4,4]. */
static void
test_call_views(void)
{
	Value out = {.name = "d_k", .ndim = 4}, val[6];
	Node n = {.op = OP_ATTN_DK, .nin = 6, .out = &out};
	MView ops[7];
	char why[512];

	for (int i = 0; i < 6; i++)
		n.in[i] = &val[i];
	ops[0] = mv(4, (int64_t[]){4, 1, 4, 8});                   /* dk */
	ops[1] = mv(4, (int64_t[]){2, 1, 4, 8});                   /* q */
	ops[2] = ops[3] = mv(4, (int64_t[]){4, 1, 4, 8});          /* k, v */
	ops[4] = ops[5] = mv(4, (int64_t[]){2, 1, 4, 8});          /* out, dout */
	ops[6] = mv(3, (int64_t[]){2, 1, 4});                      /* lse */
	CU_ASSERT_EQUAL(vc_call(&n, ops, 7, why, sizeof why), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "d_k (attention_dk)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "q [2,1,4,8] and k [4,1,4,8] disagree on B"));
	/* k and v of q's batch: agreed */
	ops[0] = ops[2] = ops[3] = mv(4, (int64_t[]){2, 1, 4, 8});
	CU_ASSERT_EQUAL(vc_call(&n, ops, 7, why, sizeof why), 0);

	Value flat = {.name = "d_w1", .ndim = 4}, hv = {.ndim = 5};
	Node m = {.op = OP_MERGE_HEADS, .nin = 1, .out = &flat, .in = {&hv}};
	ops[0] = mv(4, (int64_t[]){8, 1, 4, 4});
	ops[1] = mv(5, (int64_t[]){8, 1, 1, 4, 1});
	CU_ASSERT_EQUAL(vc_call(&m, ops, 2, why, sizeof why), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "[8,1,4,4] as 1 heads and [8,1,1,4,1] differ in shape"));
	ops[0] = mv(4, (int64_t[]){8, 1, 4, 1});
	CU_ASSERT_EQUAL(vc_call(&m, ops, 2, why, sizeof why), 0);
}

/* Plants a mistake in the node of op (a graph with the spread or shape a
 * wrong rule would give it) before the plan. */
typedef void (*Plant)(Node *n);

/* Schedules text (its backward when what is ST_BWD) under vanilla, plants
 * the mistake in its first node of op, plans it: verify_sched must prove
 * the unplanted plan and reject the planted one with want in its
 * message. */
static void
planted(const char *text, int what, OpKind op, Plant plant, const char *want)
{
	for (int k = 0; k < 2; k++) {
		SRun r;
		Sched *s = st_compile(&r, text, "vanilla", NULL, what);
		Node *n = NULL;
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		for (int i = 0; i < s->g->nodes.n && !n; i++)
			if (((Node *)s->g->nodes.v[i])->op == op)
				n = s->g->nodes.v[i];
		CU_ASSERT_PTR_NOT_NULL_FATAL(n);
		if (k)
			plant(n);
		CU_ASSERT_PTR_NOT_NULL_FATAL(r.p = plan_sched(s));
		char *msg = NULL;
		size_t len = 0;
		r.d.out = open_memstream(&msg, &len);
		int rc = verify_sched(s, r.p, &r.d);
		fclose(r.d.out);
		r.d.out = stderr;
		CU_ASSERT_EQUAL(rc != 0, k);
		if (k && !strstr(msg, want))
			fprintf(stderr, "\nwanted '%s' in: %s\n", want, msg);
		CU_ASSERT(!k || strstr(msg, want));
		free(msg);
		st_done(&r);
	}
}

/* dk as the old rule spread it, replicated like k: k and v read whole
 * (planned and wanted so) beside the rank's half of q */
static void
whole_kv(Node *n)
{
	n->inmap[1][0] = n->inmap[2][0] = -1;
}

static void
test_planted_attention(void)
{
	planted("model g { group cp = 2; size R = 4; type f32;\n"
	        "  in q : [R, 1, 4, 8] split R over cp; weight k : [R, 1, 4, 8];\n"
	        "  weight v : [R, 1, 4, 8];\n"
	        "  y = attention(q, k, v); out y; }\n", ST_BWD, OP_ATTN_DK, whole_kv,
	        "stage d_k_2 = attention_dk(q, k, v, y, d_y, y_lse): rank 0 step 0 slice -1: the "
	        "runtime call of d_k_2 (attention_dk) would be refused: q [2,1,4,8] and "
	        "k [4,1,4,8] disagree on B");
}

/* a head merge's result half as wide as its heads make it */
static void
narrow(Node *n)
{
	n->out->shape[n->out->ndim - 1] /= 2;
}

static void
test_planted_heads(void)
{
	planted("model m { group tp = 2; size S = 8, D = 8; type f32;\n"
	        "  in x : [S, D] split S over tp; weight w : [D, D];\n"
	        "  h = split_heads(x @ w, 4); y = merge_heads(h); out y; }\n", ST_FWD,
	        OP_MERGE_HEADS, narrow, "stage y = merge_heads(h): rank 0 step 0 slice -1: the "
	        "runtime call of y (merge_heads) would be refused: [4,4] as 4 heads and [4,4,2] "
	        "differ in shape");
}

void test_call_register(void);

void
test_call_register(void)
{
	CU_pSuite s = CU_add_suite("call", NULL, NULL);

	CU_add_test(s, "the runtime's shape rules on views", test_call_views);
	CU_add_test(s, "attention_dk with k whole beside half of q", test_planted_attention);
	CU_add_test(s, "a head merge wider than its heads", test_planted_heads);
}
