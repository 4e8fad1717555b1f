/* Unit tests of the one-rank proof of the backward's collectives
 * (sched_symmetric, verify.c): the backward's fused rings, whose regions
 * sum weight gradients over the slices (an accumulating node set to zero
 * first), are symmetric and proved on one rank; that proof agrees with
 * running every rank, and still rejects planted mistakes in a backward
 * schedule and in its memory plan, also those right on rank 0 alone. */
#include "sched_test.h"

/* The backward of text (sizes defs, every collective under force), its
 * memory plan in r->p; NULL after errors. */
static Plan *
bwd_plan(SRun *r, const char *text, const char *force, const char *defs)
{
	return st_run(r, text, force, defs, ST_BWD, PIPE_PLANNED) ? r->p : NULL;
}

/* Does c hold an accumulating node (a weight gradient summed over its
 * slices)? */
static int
sums(const Coll *c)
{
	for (int k = 0; k < c->region.n; k++)
		if (rnode_sums(c->region.v[k]))
			return 1;
	return 0;
}

/* Every backward collective of every example under every ring kind and
 * slice(k) is symmetric, those that sum weight gradients among them, and
 * the one-rank proof gives the verdict and the exposure of running every
 * rank, for N from 2 to 8. */
static void
test_backward_symmetric(void)
{
	static const char *const ex[] = {"mlp", "attention", "transformer", "llama", "mamba"};
	/* sizes that divide for every kind at group size N (%d: N) */
	static const char *const defs_of[] = {
		"B=1 S=%d D=8 F=%d", "B=1 S=%d D=%d H=%d", "B=1 S=%d D=%d H=%d",
		"B=1 S=%d D=%d H=%d KV=%d F=%d", "B=1 S=%d D=%d"};
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(ring, m = 2)",
	                                    "slice(2)", "vanilla"};
	int summing = 0, none = 0;

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e]);
		for (int N = 2; N <= 8; N++)
			for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
				SRun r;
				char defs[256];
				int n = snprintf(defs, sizeof defs, "tp=%d ", N);
				switch (e) {
				case 0: snprintf(defs + n, sizeof defs - (size_t)n, defs_of[e], 24 * N, 4 * N); break;
				case 1: case 2: snprintf(defs + n, sizeof defs - (size_t)n, defs_of[e], 24 * N,
				                         48 * N, 6 * N); break;
				case 3: snprintf(defs + n, sizeof defs - (size_t)n, defs_of[e], 24 * N, 48 * N,
				                 6 * N, 3 * N, 24 * N); break;
				default: snprintf(defs + n, sizeof defs - (size_t)n, defs_of[e], 24 * N, 24 * N);
				}
				Plan *p = bwd_plan(&r, text, kinds[k], defs);
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
					if (c->node->op == OP_ALL_REDUCE && c->how.kind != SK_FUSE)
						continue; /* the library's all_reduce: every rank */
					CU_ASSERT(sched_symmetric(c));
					summing += sums(c) && sched_symmetric(c);
					CU_ASSERT_EQUAL(verify_coll(c, pc, &a, NULL, 0), 0);
					CU_ASSERT_EQUAL(verify_coll_full(c, pc, &b, NULL, 0), 0);
					CU_ASSERT_EQUAL(a.exposed, b.exposed);
					CU_ASSERT_EQUAL(a.tailfree, b.tailfree);
				}
				st_done(&r);
			}
		free(text);
	}
	CU_ASSERT_EQUAL(none, 0);
	CU_ASSERT(summing > 200);
}

/* The mlp's backward re-gather of x at N = 6 (its region sums dW1), as
 * the one-rank proof sees it. */
static Coll *
regather(SRun *r, const char *kind)
{
	Sched *s = st_compile(r, st_mlp(6, kind), NULL, NULL, ST_BWD);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Coll *c = st_coll(s, "xa");
	CU_ASSERT_FATAL(sched_symmetric(c) && sums(c));
	return c;
}

static void
drop(const Coll *c, const Item *it)
{
	Vec *v = &((Phase *)c->phases.v[0])->lanes[0];

	for (int j = 0; j < v->n; j++)
		if (v->v[j] == it) {
			memmove(v->v + j, v->v + j + 1, (size_t)(v->n - j - 1) * sizeof *v->v);
			v->n--;
			return;
		}
}

/* Planted in a symmetric backward: dW1 set to zero again after the
 * first slice's product (the sum starts over), in both proofs; a
 * receive dropped; a compute item that sums its own slice every round. */
static void
test_planted_backward(void)
{
	for (int k = 0; k < 3; k++) {
		SRun r;
		Coll *c = regather(&r, k == 2 ? "fuse(bidir)" : "fuse(ring)");
		Vec *lane = &((Phase *)c->phases.v[0])->lanes[0];
		Item *zero = st_find(c, 0, 0, IT_ZERO, 0);
		if (k == 0) { /* zero again after the first compute */
			Item *again = arena_alloc(r.a, sizeof *again);
			*again = *zero;
			zero = again;
			int at = -1;
			for (int j = 0; j < lane->n && at < 0; j++)
				if (((Item *)lane->v[j])->kind == IT_COMPUTE)
					at = j + 1;
			CU_ASSERT_FATAL(at > 0);
			vec_push(r.a, lane, zero);
			memmove(lane->v + at + 1, lane->v + at, (size_t)(lane->n - at - 1) * sizeof *lane->v);
			lane->v[at] = zero;
			zero->g = (Guard){0, 0, 0, 0};
			CU_ASSERT(sched_symmetric(c));
			st_rejects(c, NULL, "sets d_w1 to zero after 1 slice summed into it");
		} else if (k == 1) {
			drop(c, st_find(c, 0, 0, IT_RECV, 0));
			CU_ASSERT(sched_symmetric(c));
			st_rejects(c, NULL, "");
		} else {
			Item *mm = st_find(c, 0, 0, IT_COMPUTE, 0);
			mm->u.comp.sel.hi.b = 0;
			CU_ASSERT(sched_symmetric(c));
			st_rejects(c, NULL, "computes slice 0 of d_w1 twice");
		}
		CU_ASSERT_NOT_EQUAL(verify_coll_full(c, NULL, NULL, NULL, 0), 0);
		st_done(&r);
	}
}

/* A memory plan of the backward right on rank 0 but a slice off on every
 * other rank: the sum of dW1 reads the wrong rows of the gathered x.
 * Only the turned checks of the one-rank proof see it. */
static void
test_planted_backward_plan(void)
{
	SRun r;
	PColl *pc;
	const Coll *c;
	int found = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(bwd_plan(&r, st_mlp(4, "fuse(ring)"), NULL, NULL));
	c = st_coll(r.s, "xa");
	pc = st_pcoll(r.p, c);
	CU_ASSERT_FATAL(sched_symmetric(c) && sums(c));
	CU_ASSERT_EQUAL(verify_coll(c, pc, NULL, NULL, 0), 0);
	for (int id = 0; id < c->nitems && !found; id++) {
		PItem *p = pc->item[id];
		for (int j = 1; j < p->nview && !found; j++)
			if (p->view[j].ncut == 1 && p->view[j].cut[0].start.c[PV_S]) {
				p->view[j].cut[0].start.c[PV_R] = 1;
				found = 1;
			}
	}
	CU_ASSERT_FATAL(found);
	st_rejects(c, pc, "of d_w1");
	CU_ASSERT_NOT_EQUAL(verify_coll_full(c, pc, NULL, NULL, 0), 0);
	st_done(&r);
}

static int
msg_cmp(const void *a, const void *b)
{
	const VerifyMsg *x = a, *y = b;
	int kx[5] = {x->src, x->dst, x->sstep, x->dstep, x->slice};
	int ky[5] = {y->src, y->dst, y->sstep, y->dstep, y->slice};

	for (int k = 0; k < 5; k++)
		if (kx[k] != ky[k])
			return kx[k] < ky[k] ? -1 : 1;
	return 0;
}

/* The messages of the first k ranks drawn in the schedule picture, from
 * one rank's run turned, are those of running every rank among them:
 * forward and backward, ring, bidir and slice(2), N from 5 to 9. */
static void
test_messages_turned(void)
{
	static const char *const kinds[] = {"fuse(ring)", "fuse(bidir)", "fuse(ring, m = 2)",
	                                    "slice(2)"};
	int compared = 0;

	for (int N = 5; N <= 9; N++)
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
			for (int what = ST_FWD; what <= ST_BWD; what += ST_BWD - ST_FWD) {
				SRun r;
				Sched *s = st_compile(&r, st_mlp(N, kinds[k]), NULL, NULL, what);
				CU_ASSERT_PTR_NOT_NULL_FATAL(s);
				for (int j = 0; j < s->colls.n; j++) {
					const Coll *c = s->colls.v[j];
					VerifyMsg *all, *few;
					int nall, nfew, n = 0, lanes = 3 + N % 2;
					CU_ASSERT_FATAL(sched_symmetric(c));
					CU_ASSERT_EQUAL(verify_messages(c, N, &all, &nall), 0);
					CU_ASSERT_EQUAL(verify_messages(c, lanes, &few, &nfew), 0);
					for (int m = 0; m < nall; m++)
						if (all[m].src < lanes && all[m].dst < lanes)
							all[n++] = all[m];
					qsort(all, (size_t)n, sizeof *all, msg_cmp);
					qsort(few, (size_t)nfew, sizeof *few, msg_cmp);
					CU_ASSERT_EQUAL(n, nfew);
					CU_ASSERT(n == nfew && !memcmp(all, few, (size_t)n * sizeof *all));
					compared += n > 0;
				}
				st_done(&r);
			}
	CU_ASSERT(compared > 40);
}

void test_symbwd_register(void);

void
test_symbwd_register(void)
{
	CU_pSuite s = CU_add_suite("symbwd", NULL, NULL);

	CU_add_test(s, "the backward's rings are proved on one rank, as on every rank",
	            test_backward_symmetric);
	CU_add_test(s, "planted mistakes in a symmetric backward", test_planted_backward);
	CU_add_test(s, "a backward plan right on rank 0 only", test_planted_backward_plan);
	CU_add_test(s, "the picture's messages from one rank's run", test_messages_turned);
}
