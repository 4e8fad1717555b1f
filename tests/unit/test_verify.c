/* Unit tests of verify.c: every schedule kind of the examples verifies,
 * with the expected exposure; and the verifier rejects planted bugs
 * (suite verify_mutation), naming rank, step and slice. */
#include "sched_test.h"

static int
verifies(const Coll *c, VerifyStats *st)
{
	char err[1024];
	int rc = verify_coll(c, NULL, st, err, sizeof err);

	if (rc)
		fprintf(stderr, "\n%s: %s\n", c->node->out->name, err);
	return rc == 0;
}

/* Every collective of every example under every kind, at N = 4 (the
 * defaults) and the exposure each kind must have. */
static void
test_examples(void)
{
	static const char *const ex[] = {"mlp", "attention", "mamba", "ulysses", "zero_dp", "transformer"};
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(pairwise)",
	                                    "fuse(ring, m = 2)", "slice(2)", "vanilla", "auto"};

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e]);
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
			SRun r;
			Sched *s = st_build(&r, text, kinds[k]);
			CU_ASSERT_PTR_NOT_NULL_FATAL(s);
			for (int j = 0; j < s->colls.n; j++) {
				Coll *c = s->colls.v[j];
				VerifyStats st;
				CU_ASSERT_FATAL(verifies(c, &st));
				if (c->how.kind == SK_FUSE && c->region.n) {
					CU_ASSERT_EQUAL(st.exposed, 0);
					CU_ASSERT(st.tailfree);
				} else if (c->how.kind == SK_VANILLA) {
					CU_ASSERT_EQUAL(st.exposed, 1);
					CU_ASSERT_FALSE(st.tailfree);
				}
			}
			CU_ASSERT_EQUAL(verify_sched(s, NULL, &r.d), 0);
			st_done(&r);
		}
		free(text);
	}
}

/* slice(k): the last chunk of a reduction is an exposed tail; the first
 * chunk of a gather is exposed at the head, the tail is free. */
static void
test_slice_exposure(void)
{
	SRun r;
	VerifyStats st;
	Sched *s = st_build(&r, st_mlp(4, "slice(4)"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_FATAL(verifies(st_coll(s, "y"), &st));
	CU_ASSERT_EQUAL(st.exposed, 1);
	CU_ASSERT_FALSE(st.tailfree);
	CU_ASSERT_FATAL(verifies(st_coll(s, "xa"), &st));
	CU_ASSERT_EQUAL(st.exposed, 1);
	CU_ASSERT(st.tailfree);
	st_done(&r);
}

/* Every fuse kind on N = 1..64 ranks. */
static void
test_many_ranks(void)
{
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(pairwise)",
	                                    "fuse(pairwise, m = 2)"};

	for (int N = 1; N <= 64; N++)
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
			for (int bwd = 0; bwd < 2; bwd++) {
				SRun r;
				VerifyStats st;
				Sched *s = (bwd ? st_build_bwd : st_build)(&r, st_mlp(N, kinds[k]), NULL);
				CU_ASSERT_PTR_NOT_NULL_FATAL(s);
				CU_ASSERT_EQUAL(s->colls.n, bwd ? 3 : 2);
				for (int j = 0; j < s->colls.n; j++) {
					CU_ASSERT_FATAL(verifies(s->colls.v[j], &st));
					CU_ASSERT_EQUAL(st.exposed, 0);
					CU_ASSERT(st.tailfree);
				}
				st_done(&r);
			}
}

/* all_reduce (FuseRS then FuseAG, regions on both sides or only
 * upstream) under every kind on 1..8 ranks. */
static void
test_all_reduce(void)
{
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(pairwise)",
	                                    "fuse(pairwise, m = 2)", "slice(4)", "vanilla", "auto"};
	char text[1024];

	for (int N = 1; N <= 8; N++)
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
			SRun r;
			VerifyStats st;
			snprintf(text, sizeof text, "model m {\n size B = 2, S = %d, D = %d, F = %d;\n"
			         " group tp = %d;\n in x : [B, S, D];\n weight w1 : [D, F] split F over tp;\n"
			         " weight w2 : [F, D] split F over tp;\n weight w3 : [D, D];\n"
			         " h = gelu(x @ w1);\n z = all_reduce(h @ w2);\n o = relu(z @ w3);\n"
			         " z2 = all_reduce(h @ w1.T);\n out o, z2;\n}\n", 16 * N, 8 * N, 4 * N, N);
			Sched *s = st_build(&r, text, kinds[k]);
			CU_ASSERT_PTR_NOT_NULL_FATAL(s);
			CU_ASSERT_FATAL(verifies(st_coll(s, "z"), &st));
			if (!strncmp(kinds[k], "fuse", 4))
				CU_ASSERT(st.exposed == 0 && st.tailfree);
			CU_ASSERT_FATAL(verifies(st_coll(s, "z2"), &st));
			st_done(&r);
		}
}

static Item *st_find(const Coll *c, int p, int t, ItemKind kd, int k);
static void drop(const Coll *c, int p, int t, const Item *it);

/* A collective like one already proved shares its proof, but a change in
 * one layer is not hidden by the others. */
static void
test_shared_proof(void)
{
	SRun r;
	char *text = st_example("transformer");
	Sched *s = st_build(&r, text, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(verify_sched(s, NULL, &r.d), 0);
	for (int k = 0; k < s->colls.n; k++)
		CU_ASSERT(((Coll *)s->colls.v[k])->verified);
	Coll *c = st_coll(s, "block1.mlp1.y");
	char *msg = NULL;
	size_t len = 0;
	drop(c, 0, 0, st_find(c, 0, 0, IT_RECV, 0));
	r.d.out = open_memstream(&msg, &len);
	CU_ASSERT_NOT_EQUAL(verify_sched(s, NULL, &r.d), 0);
	fclose(r.d.out);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "cfc: internal error: verify: collective block1.mlp1.y "
	                              "schedule fuse(ring): rank "));
	free(msg);
	st_done(&r);
	free(text);
}

/* The messages drawn in the DOT picture: a ring of N moves N-1 slices
 * per rank, each from step i of the sender to step i+1 of the receiver. */
static void
test_messages(void)
{
	SRun r;
	VerifyMsg *m;
	int n;
	Sched *s = st_build(&r, st_mlp(4, "fuse(ring)"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(verify_messages(st_coll(s, "xa"), 4, &m, &n), 0);
	CU_ASSERT_EQUAL(n, 12);
	for (int k = 0; k < n; k++) {
		CU_ASSERT_EQUAL(m[k].dst, (m[k].src + 1) % 4);
		CU_ASSERT_EQUAL(m[k].dstep, m[k].sstep + 1);
	}
	st_done(&r);
}

/* ---- mutations ---- */

/* The mlp's backward at N = 4 under kind, and its re-gather of x (whose
 * region is the accumulation of dW1). */
static Coll *
regather(SRun *r, const char *kind)
{
	Sched *s = st_build_bwd(r, st_mlp(4, kind), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	return st_coll(s, "xa");
}

static void
drop(const Coll *c, int p, int t, const Item *it)
{
	Vec *v = &((Phase *)c->phases.v[p])->lanes[t];

	for (int j = 0; j < v->n; j++)
		if (v->v[j] == it) {
			memmove(v->v + j, v->v + j + 1, (size_t)(v->n - j - 1) * sizeof *v->v);
			v->n--;
			return;
		}
}

static Sched *
mlp(SRun *r, const char *kind)
{
	Sched *s = st_build(r, st_mlp(4, kind), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	return s;
}

/* FuseAG computes l = (r - i + 1) mod N: data not there yet. */
static void
test_wrong_slice(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "xa");

	st_find(c, 0, 0, IT_COMPUTE, 0)->u.comp.sel.hi.c = 1;
	st_rejects(c, NULL, "computes t1[1] from xa, which holds nothing");
	st_done(&r);
}

/* FuseRS without its receive: the running sum is added from an empty
 * buffer. */
static void
test_dropped_recv(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "y");

	drop(c, 0, 0, st_find(c, 0, 0, IT_RECV, 0));
	st_rejects(c, NULL, "reads recv0 expecting slice");
	st_done(&r);
}

/* FuseAG without its send: the receiver waits forever. */
static void
test_dropped_send(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "xa");

	drop(c, 0, 0, st_find(c, 0, 0, IT_SEND, 0));
	st_rejects(c, NULL, "waits forever: its receive from rank");
	st_done(&r);
}

/* FuseAG with m = 2, both lanes merged into one, lane 1's send posted
 * after lane 0's (order 0) or before it (order 1); tags: 0 for both
 * (tag0), or the lanes' own (0 and 1). Verifies each order in turn: 0
 * must verify, 1 must fail with want. */
static void
merge_lanes(int tag0, const char *want)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring, m = 2)"), "xa");
	Phase *ph = c->phases.v[0];
	Item *it[2][7];
	static const ItemKind kind[7] = {IT_COPY, IT_WAIT, IT_SEND, IT_RECV, IT_COMPUTE, IT_COMPUTE, IT_WAIT};
	static const int nth[7] = {0, 0, 0, 0, 0, 1, 1};
	static const int order[2][14] = {{0, 7, 1, 8, 2, 9, 3, 10, 4, 5, 11, 12, 6, 13},
	                                 {0, 7, 1, 8, 9, 2, 3, 10, 4, 5, 11, 12, 6, 13}};

	for (int t = 0; t < 2; t++)
		for (int k = 0; k < 7; k++)
			it[t][k] = st_find(c, 0, t, kind[k], nth[k]);
	for (int o = 0; o < 2; o++) {
		ph->lanes[0].n = ph->lanes[1].n = 0;
		for (int k = 0; k < 14; k++) {
			Item *x = it[order[o][k] / 7][order[o][k] % 7];
			if (tag0 && (x->kind == IT_SEND || x->kind == IT_RECV))
				x->u.xfer.tag = 0;
			vec_push(r.a, &ph->lanes[0], x);
		}
		if (o == 0)
			CU_ASSERT_EQUAL(verify_coll(c, NULL, NULL, NULL, 0), 0);
	}
	st_rejects(c, NULL, want);
	st_done(&r);
}

/* Sharing a tag, the two sends to next in lane order verify; swapped,
 * the receiver gets the other slice first. */
static void
test_swapped_sends(void)
{
	merge_lanes(1, "sends out of order or a wrong slice");
}

/* With the lanes' own tags, the swapped sends pair by tag as MPI pairs
 * them, but NCCL pairs a pair's messages in post order: rejected at the
 * first pairing whose tags differ. */
static void
test_tag_order(void)
{
	merge_lanes(0, "its receive from rank 3 (tag 0) pairs in post order, as NCCL pairs them, "
	            "with a send of tag 1, not of its tag as MPI pairs them");
}

/* FuseAG computing on a slice whose receive it never waited for. */
static void
test_missing_wait(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "xa");

	drop(c, 0, 0, st_find(c, 0, 0, IT_WAIT, 0));
	st_rejects(c, NULL, "while a transfer into it is in flight");
	st_done(&r);
}

/* FuseRS with one partial buffer instead of two: the next step's compute
 * overwrites the running sum while it is still being sent. */
static void
test_buffer_reused(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "y");
	const Phase *ph = c->phases.v[0];

	for (int j = 0; j < ph->lanes[0].n; j++) {
		Item *it = ph->lanes[0].v[j];
		if (it->kind == IT_COMPUTE)
			it->u.comp.dst.rot.n = 1;
		if (it->kind == IT_SEND)
			it->u.xfer.buf.rot.n = 1;
		if (it->kind == IT_ADD)
			it->u.move.dst.rot.n = 1;
	}
	drop(c, 0, 0, st_find(c, 0, 0, IT_WAIT, 0)); /* the wait for the send of step i-2 */
	st_rejects(c, NULL, "while a send from it is in flight");
	st_done(&r);
}

/* A GEMM accumulating into a buffer that holds nothing yet. */
static void
test_accumulate_garbage(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring, m = 2)"), "y");

	st_find(c, 0, 0, IT_COMPUTE, 0)->u.comp.beta = 1; /* step 0 has nothing to add to */
	st_rejects(c, NULL, "which holds nothing");
	st_done(&r);
}

/* The received running sum added twice. */
static void
test_counted_twice(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "y");
	Vec *v = &((Phase *)c->phases.v[0])->lanes[0];
	Item *add = st_find(c, 0, 0, IT_ADD, 0);

	for (int j = 0; j < v->n; j++)
		if (v->v[j] == add) {
			vec_push(r.a, v, NULL);
			memmove(v->v + j + 1, v->v + j, (size_t)(v->n - j - 1) * sizeof *v->v);
			break;
		}
	st_rejects(c, NULL, "counted twice");
	st_done(&r);
}

/* The reduction leaves out a rank's part: not the sum over every rank. */
static void
test_lost_contribution(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "y");

	drop(c, 0, 0, st_find(c, 0, 0, IT_ADD, 1)); /* the last add into y */
	st_rejects(c, NULL, "the sum over every rank expected");
	st_done(&r);
}

/* A send to the wrong rank. */
static void
test_wrong_peer(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(ring)"), "xa");

	st_find(c, 0, 0, IT_SEND, 0)->u.xfer.peer.c = 2;
	st_rejects(c, NULL, "waits forever");
	st_done(&r);
}

/* FuseRS bidir with lane 0's wait for its last send put between this
 * step's send and receive, as the lowering once did: two NCCL groups per
 * lane, every rank's send group waits for a receive queued behind the
 * peer's own send group, and large transfers hang (small ones complete
 * early into NCCL's buffers, which is why only the benchmark hung). */
static void
test_split_group(void)
{
	SRun r;
	Coll *c = st_coll(mlp(&r, "fuse(bidir)"), "y");
	Vec *v = &((Phase *)c->phases.v[0])->lanes[0];
	Item *send = st_find(c, 0, 0, IT_SEND, 0), *wait = NULL;

	for (int k = 0; !wait; k++) {
		Item *w = st_find(c, 0, 0, IT_WAIT, k);
		if (w->u.wait.label == send->u.xfer.label)
			wait = w;
	}
	drop(c, 0, 0, wait);
	for (int j = 0; j < v->n; j++)
		if (v->v[j] == send) {
			memmove(v->v + j + 2, v->v + j + 1, (size_t)(v->n - j - 1) * sizeof *v->v);
			v->v[j + 1] = wait;
			v->n++;
			break;
		}
	st_rejects(c, NULL, "cannot move: rank");
	st_rejects(c, NULL, "a step's sends and receives belong in one group");
	st_done(&r);
}

/* A vanilla collective that one rank never posts: with N = 3, rank 0
 * has no round-robin partner in round 0. */
static void
test_collective_skipped(void)
{
	SRun r;
	Sched *s = st_build(&r, st_mlp(3, "vanilla"), NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "y");
	st_find(c, 0, 0, IT_COLL, 0)->g = (Guard){0, 0, 1, 0};
	st_rejects(c, NULL, "waits forever for a reduce_scatter that not every rank posts");
	st_done(&r);
}

/* The accumulation of dW1 under the re-gather of x: without its zero it
 * adds into garbage; with beta = 0 a step overwrites the slices before;
 * a slice summed twice, or one never summed, is not the gradient. */
static void
test_accumulation(void)
{
	static const char *const want[4] = {
		"adds slice 0's part into d_w1 before it is set to zero",
		"writes slice 3's part of d_w1 over the 1 slice summed before",
		"computes slice 0 of d_w1 twice", "never computes slice"};

	for (int k = 0; k < 4; k++) {
		SRun r;
		Coll *c = regather(&r, "fuse(ring)");
		Item *zero = st_find(c, 0, 0, IT_ZERO, 0), *mm = st_find(c, 0, 0, IT_COMPUTE, 0);
		if (k == 0)
			drop(c, 0, 0, zero);
		else if (k == 1)
			mm->u.comp.beta = 0;
		else if (k == 2)
			mm->u.comp.sel.hi.b = 0; /* slice r in every round */
		else
			mm->g.hi = 2; /* the last round's slice left out */
		st_rejects(c, NULL, want[k]);
		st_done(&r);
	}
}

void test_verify_register(void);

void
test_verify_register(void)
{
	CU_pSuite s = CU_add_suite("verify", NULL, NULL);

	CU_add_test(s, "every example under every kind verifies", test_examples);
	CU_add_test(s, "slice(k): exposed head or tail", test_slice_exposure);
	CU_add_test(s, "fuse kinds on 1..64 ranks", test_many_ranks);
	CU_add_test(s, "the matched messages", test_messages);
	CU_add_test(s, "all_reduce under every kind", test_all_reduce);
	CU_add_test(s, "identical collectives share a proof", test_shared_proof);
	s = CU_add_suite("verify_mutation", NULL, NULL);
	CU_add_test(s, "wrong slice index", test_wrong_slice);
	CU_add_test(s, "dropped receive", test_dropped_recv);
	CU_add_test(s, "dropped send", test_dropped_send);
	CU_add_test(s, "swapped send order", test_swapped_sends);
	CU_add_test(s, "sends paired by tag, not in post order", test_tag_order);
	CU_add_test(s, "missing wait", test_missing_wait);
	CU_add_test(s, "buffer reused too early", test_buffer_reused);
	CU_add_test(s, "accumulating into nothing", test_accumulate_garbage);
	CU_add_test(s, "contribution counted twice", test_counted_twice);
	CU_add_test(s, "contribution lost", test_lost_contribution);
	CU_add_test(s, "send to the wrong rank", test_wrong_peer);
	CU_add_test(s, "collective not posted by every rank", test_collective_skipped);
	CU_add_test(s, "send and receive of a step in two groups", test_split_group);
	CU_add_test(s, "backward: dW summed into garbage, overwritten, twice or short", test_accumulation);
}
