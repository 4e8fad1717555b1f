/* Unit tests of region.c: which ops each collective is fused with, and
 * where (and why) a region must stop. */
#include "sched_test.h"

#define HEAD "model m {\n  size B = 2, S = 64, D = 32, F = 64, H = 4;\n  group tp = 4;\n" \
	"  in x : [B, S, D] split S over tp;\n"

static void
test_mlp(void)
{
	SRun r;
	char *text = st_example("mlp");
	Sched *s = st_build(&r, text, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa"), *rs = st_coll(s, "y");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ag), "t1 h");
	CU_ASSERT_EQUAL(ag->pre.n, 0);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, rs), "p");
	const Stop *st = st_stop(ag, "p");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "fused into reduce_scatter y");
	CU_ASSERT_FALSE(st->up);
	/* every region node sliced along S, the weights read whole */
	const RNode *mm = ag->region.v[0];
	CU_ASSERT_EQUAL(mm->odim, 1);
	CU_ASSERT_EQUAL(mm->idim[0], 1);
	CU_ASSERT_EQUAL(mm->idim[1], -1);
	CU_ASSERT_EQUAL(((RNode *)ag->region.v[1])->from[0], 0);
	st_done(&r);
	free(text);
}

/* The scan needs the whole sequence: the region stops before it, and
 * what reads the scan cannot join either. */
static void
test_mamba_scan(void)
{
	SRun r;
	char *text = st_example("mamba");
	Sched *s = st_build(&r, text, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ag), "t1 u t2 z");
	const Stop *st = st_stop(ag, "hs");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "not slice-local along S: a scan needs the whole sequence");
	st = st_stop(ag, "t3");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "needs hs, which waits for the whole collective");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "y")), "p");
	st_done(&r);
	free(text);
}

/* Row-parallel: the reduce_scatter takes only the partial sums; query
 * split: the attention over a query slice and what follows (Alg. 4). */
static void
test_attention_split(void)
{
	SRun r;
	char *text = st_example("attention");
	Sched *s = st_build(&r, text, "fuse(ring)");

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "y")), "p");
	Coll *ag = st_coll(s, "xa");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ag), "t1 q t2 k t3 v");
	const Stop *st = st_stop(ag, "t4");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "needs all of k along S");
	st_done(&r);
	s = st_build(&r, text, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "y")), "t4 o p");
	CU_ASSERT_PTR_NOT_NULL(st_stop(st_coll(s, "xa"), "t4"));
	st_done(&r);
	free(text);
}

/* Ulysses: each input all_to_all takes its projection (cut by heads),
 * the output one the attention over query slices (Alg. 5). */
static void
test_ulysses(void)
{
	SRun r;
	char *text = st_example("ulysses");
	Sched *s = st_build(&r, text, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "qh")), "t1 q");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "o")), "oh");
	CU_ASSERT_EQUAL(((RNode *)st_coll(s, "o")->region.v[0])->odim, 2);
	st_done(&r);
	free(text);
}

/* An operand split along the region's dim cannot be sliced. */
static void
test_split_operand(void)
{
	SRun r;
	Sched *s = st_build(&r, HEAD "  in x2 : [B, S, D] split S over tp;\n"
	                    "  xa = all_gather(x, S);\n  h = xa + x2;\n  out h;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa");
	CU_ASSERT_EQUAL(ag->region.n, 0);
	const Stop *st = st_stop(ag, "h");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "needs all of x2 along S, but it is split over tp");
	st_done(&r);
}

/* A region stops at another collective; a value the region would take
 * that something else also reads stays outside. */
static void
test_other_collective_and_use(void)
{
	SRun r;
	Sched *s = st_build(&r, HEAD "  weight w1 : [D, F] split F over tp;\n"
	                    "  weight w2 : [F, D] split F over tp;\n  weight w3 : [F, D] split F over tp;\n"
	                    "  xa = all_gather(x, S);\n  h = gelu(xa @ w1);\n"
	                    "  z = all_reduce(h @ w2);\n  y = reduce_scatter(h @ w3, S);\n"
	                    "  out z, y;\n  schedule { default fuse(ring, split = query); "
	                    "xa: fuse(ring); }\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ag = st_coll(s, "xa"), *ar = st_coll(s, "z");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ag), "t1 h");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ar), "t2");
	const Stop *st = st_stop(ar, "h");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT(st->up);
	CU_ASSERT_PTR_NOT_NULL(strstr(st->why, "h is also used by matmul"));
	CU_ASSERT_PTR_NOT_NULL(ar->note); /* split = query found no attention */
	CU_ASSERT_EQUAL(ar->how.query, 0);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, st_coll(s, "y")), "t3");
	st = st_stop(ag, "t2");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_STRING_EQUAL(st->why, "fused into all_reduce z");
	st_done(&r);
}

/* all_reduce: a region on each side, along the dim that gives the most. */
static void
test_all_reduce(void)
{
	SRun r;
	Sched *s = st_build(&r, "model m {\n  size B = 2, S = 64, D = 32, F = 64;\n  group tp = 4;\n"
	                    "  in x : [B, S, D];\n  weight w1 : [D, F] split F over tp;\n"
	                    "  weight w2 : [F, D] split F over tp;\n  weight w3 : [D, D];\n"
	                    "  h = gelu(x @ w1);\n  z = all_reduce(h @ w2);\n  o = relu(z @ w3);\n"
	                    "  out o;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *ar = st_coll(s, "z");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, ar), "t2 t3 o");
	CU_ASSERT_EQUAL(ar->pre.n, 1);
	CU_ASSERT_EQUAL(ar->post.n, 2);
	CU_ASSERT_NOT_EQUAL(ar->dim, 2);
	st_done(&r);
}

/* A node belongs to at most one region. */
static void
test_one_region_per_node(void)
{
	SRun r;
	char *text = st_example("transformer");
	Sched *s = st_build(&r, text, NULL);
	int *seen;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	seen = calloc((size_t)s->g->nodes.n, sizeof *seen);
	for (int k = 0; k < s->colls.n; k++) {
		Coll *c = s->colls.v[k];
		CU_ASSERT(c->region.n > 0);
		for (int j = 0; j < c->region.n; j++)
			CU_ASSERT_EQUAL(seen[((RNode *)c->region.v[j])->node->id]++, 0);
	}
	free(seen);
	st_done(&r);
	free(text);
}

/* The mlp's backward: the gather of dy sums dW2 slice by slice under
 * dG = dy W2^T; the re-gather of x sums dW1 (d_t1 read from outside, cut
 * along S); neither gather takes the other's accumulation. */
static void
test_mlp_backward(void)
{
	SRun r;
	Sched *s = st_build_bwd(&r, st_mlp(4, "fuse(ring)"), NULL);

	if (!s)
		fprintf(stderr, "\n%s\n", r.err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *dp = st_coll(s, "d_p"), *xa = st_coll(s, "xa");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, dp), "d_h d_w2 d_t1");
	CU_ASSERT_STRING_EQUAL(st_region(r.a, xa), "d_w1");
	const RNode *w2 = dp->region.v[1], *w1 = xa->region.v[0];
	CU_ASSERT(rnode_sums(w2) && rnode_sums(w1));
	CU_ASSERT_EQUAL(w2->odim, -1);
	/* h [B, S, F] and d_p [B, S, D] both cut along S */
	CU_ASSERT_EQUAL(w2->idim[0], 1);
	CU_ASSERT_EQUAL(w2->idim[1], 1);
	CU_ASSERT_EQUAL(w1->idim[0], 1);
	CU_ASSERT_EQUAL(w1->idim[1], 1);
	CU_ASSERT_EQUAL(w1->from[1], -1);
	const Stop *st = st_stop(dp, "d_w1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_PTR_NOT_NULL(strstr(st->why, "sums xa, a gathered tensor"));
	st_done(&r);
}

/* A matmul whose contraction dim is gathered sums under the gather in
 * the forward too: with the other operand from outside (read whole, cut
 * along its own summed dim) or from the region. */
static void
test_accumulate_forward(void)
{
	static const char *const text[2] = {
		"model m {\n  size S = 64, D = 32, F = 16;\n  group tp = 4;\n"
		"  in x : [S, D] split S over tp;\n  in z : [S, F];\n"
		"  a = all_gather(x, S);\n  u = a.T @ z;\n  out u;\n}\n",
		"model m {\n  size S = 64, D = 32;\n  group tp = 4;\n"
		"  in x : [S, D] split S over tp;\n"
		"  a = all_gather(x, S);\n  b = gelu(a);\n  u = a.T @ b;\n  out u;\n}\n"};

	for (int k = 0; k < 2; k++) {
		SRun r;
		Sched *s = st_build(&r, text[k], NULL);
		if (!s)
			fprintf(stderr, "\n%s\n", r.err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		Coll *ag = st_coll(s, "a");
		CU_ASSERT_STRING_EQUAL(st_region(r.a, ag), k ? "b u" : "u");
		const RNode *u = ag->region.v[k];
		CU_ASSERT(rnode_sums(u));
		CU_ASSERT_EQUAL(u->idim[0], 0);
		CU_ASSERT_EQUAL(u->idim[1], 0);
		CU_ASSERT_EQUAL(u->from[1], k ? 0 : -1);
		st_done(&r);
	}
}

/* ulysses trained: the backward reads the attention's output oh, so
 * the forward saves it; FuseA2A still computes it slice by slice, into
 * its saved storage, and sends from there. */
static void
test_a2a_saved_input(void)
{
	SRun r;
	char *text = st_example("ulysses");
	Sched *s = st_compile(&r, text, NULL, NULL, ST_TRAINED);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *o = st_coll(s, "o");
	CU_ASSERT_EQUAL(o->node->in[0]->home, HO_SAVED);
	CU_ASSERT_STRING_EQUAL(st_region(r.a, o), "oh");
	CU_ASSERT(o->bin >= 0);
	CU_ASSERT_EQUAL(((RNode *)o->region.v[0])->buf, o->bin);
	CU_ASSERT_EQUAL(verify_sched(s, NULL, &r.d), 0);
	st_done(&r);
	free(text);
}

void test_region_register(void);

void
test_region_register(void)
{
	CU_pSuite s = CU_add_suite("region", NULL, NULL);

	CU_add_test(s, "mlp: FuseAG takes the column-parallel ops, FuseRS the row-parallel", test_mlp);
	CU_add_test(s, "mamba: the region stops before the scan", test_mamba_scan);
	CU_add_test(s, "attention: row-parallel vs query-split region", test_attention_split);
	CU_add_test(s, "ulysses: all_to_all regions", test_ulysses);
	CU_add_test(s, "an operand split along the region dim stops it", test_split_operand);
	CU_add_test(s, "stops at other collectives and shared values", test_other_collective_and_use);
	CU_add_test(s, "all_reduce: regions on both sides", test_all_reduce);
	CU_add_test(s, "transformer: every node in at most one region", test_one_region_per_node);
	CU_add_test(s, "mlp backward: the gathers sum dW1 and dW2 slice by slice", test_mlp_backward);
	CU_add_test(s, "a gathered contraction dim sums in the forward", test_accumulate_forward);
	CU_add_test(s, "all_to_all: a saved input is computed into its storage", test_a2a_saved_input);
}
