/* test_coalesce.c: coalescing (coalesce.c) and its proof (verify_pack.c).
 * The backward of a data-parallel model with biases packs its four small
 * weight-gradient all_reduces into one, which verify_sched proves with
 * its plan; planted mistakes in the pack are rejected with the slot and
 * the elements: an unpack reading at the wrong offset, two slots that
 * overlap, a slot past the end of the packed buffer. The threshold keeps
 * a large gradient out, and 0 turns coalescing off. Members join a pack
 * when none depends on another's result, even where a reader of one comes
 * before the last (it then waits for the pack), and never where two packs
 * would wait for each other. */
#include "sched_test.h"
#include "verify.h"

static const char *const dp_bias =
	"model dpb { size T = 8, D = 4, F = 6; group dp = 2; type f32;\n"
	"  in x : [T, D] split T over dp;\n"
	"  weight w1 : [D, F]; weight b1 : [F]; weight w2 : [F, D]; weight b2 : [D];\n"
	"  h = gelu(x @ w1 + b1); y = h @ w2 + b2; out y; }\n";

/* The forward (bwd 0) or the backward of text, coalesced with threshold
 * bytes, lowered and planned (NULL after errors). */
static Sched *
compile_pass(SRun *r, const char *text, int64_t bytes, int bwd)
{
	Options o = {0};
	FILE *ef;

	memset(r, 0, sizeof *r);
	r->a = arena_new();
	r->src = (Src){"t.cf", text, strlen(text)};
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	/* pipeline.c's passes, region by region, up to the plan */
	Pipeline pl = {.a = r->a, .d = &r->d, .o = &o, .backward = bwd, .order = ORDER_REGION,
	               .coalesce = bytes, .stop = PIPE_PLANNED};
	pipeline_graphs(&pl, &r->src);
	r->g = pl.graph;
	Graph *b = r->g && bwd ? r->g->bwd : r->g;
	fclose(ef);
	r->d.out = stderr;
	if (!b || pipeline_schedule(&pl, b, &r->s, &r->p, ""))
		return r->s = NULL;
	return r->s;
}

static Sched *
compile_bwd(SRun *r, const char *text, int64_t bytes)
{
	return compile_pass(r, text, bytes, 1);
}

static void
done(SRun *r)
{
	free(r->err);
	arena_free(r->a);
}

/* The node of op in g (the k-th), or NULL. */
static Node *
find(const Graph *g, OpKind op, int k)
{
	for (int i = 0; i < g->nodes.n; i++)
		if (((Node *)g->nodes.v[i])->op == op && k-- == 0)
			return g->nodes.v[i];
	return NULL;
}

/* verify_sched's message on s, or "" when it proves it. */
static char *
verify_msg(SRun *r)
{
	char *msg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&msg, &len);
	Diag d;

	diag_init(&d, &r->src, f);
	verify_sched(r->s, r->p, &d);
	fclose(f);
	return msg;
}

static void
test_packed(void)
{
	SRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_bwd(&r, dp_bias, -1));
	const Graph *g = r.s->g;
	CU_ASSERT_EQUAL(g->packs.n, 1);
	const Pack *p = g->packs.v[0];
	CU_ASSERT_EQUAL(p->n, 4);
	CU_ASSERT_EQUAL(p->bytes, (4 * 6 + 6 + 6 * 4 + 4) * 4);
	CU_ASSERT_EQUAL(p->padded % (2 * 4), 0);
	CU_ASSERT_PTR_NULL(find(g, OP_ALL_REDUCE, 1)); /* the pack's alone */
	char *msg = verify_msg(&r);
	CU_ASSERT_STRING_EQUAL(msg, "");
	free(msg);
	done(&r);
}

/* Plants a mistake in the pack of dp_bias's backward: verify_sched must
 * reject it with want in its message. */
static void
planted(void (*plant)(Pack *p), const char *want)
{
	SRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_bwd(&r, dp_bias, -1));
	CU_ASSERT_EQUAL_FATAL(r.s->g->packs.n, 1);
	plant(r.s->g->packs.v[0]);
	char *msg = verify_msg(&r);
	if (!strstr(msg, want))
		fprintf(stderr, "\nwanted: %s\ngot: %s\n", want, msg);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
	free(msg);
	done(&r);
}

static void
wrong_offset(Pack *p)
{
	p->unpack[1]->a.pack.at += 1;
}

static void
overlap(Pack *p)
{
	int64_t *off = (int64_t *)p->pack->a.pack.off;

	off[2] = off[1] + 1;
	p->unpack[2]->a.pack.at = off[2];
}

static void
past_end(Pack *p)
{
	int64_t *off = (int64_t *)p->pack->a.pack.off;

	off[3] = p->padded / 4 - 1;
	p->unpack[3]->a.pack.at = off[3];
}

static void
test_planted_offset(void)
{
	planted(wrong_offset, "d_b1 reads elements 25..30 of cf_dpacked0, but slot 1 (d_b1_2) of "
	        "cf_dpack0 holds elements 24..29");
}

static void
test_planted_overlap(void)
{
	planted(overlap, "slots 1 (d_b1_2, elements 24..29) and 2 (d_w2_2, elements 25..48) of "
	        "cf_dpack0 overlap");
}

static void
test_planted_past_end(void)
{
	planted(past_end, "slot 3 (d_b2_2): elements 59..62 outside the 60 of cf_dpack0");
}

/* A threshold below w1's gradient (96 bytes) keeps it and w2's out: the
 * biases alone are packed; 0 packs nothing. */
static void
test_threshold(void)
{
	SRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_bwd(&r, dp_bias, 64));
	CU_ASSERT_EQUAL(r.s->g->packs.n, 1);
	CU_ASSERT_EQUAL(((Pack *)r.s->g->packs.v[0])->n, 2);
	CU_ASSERT_EQUAL(r.s->g->unpacked.n, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(((CoalesceNote *)r.s->g->unpacked.v[0])->why,
	                              "96 bytes per rank, above the threshold of 64"));
	done(&r);
	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_bwd(&r, dp_bias, 0));
	CU_ASSERT_EQUAL(r.s->g->packs.n, 0);
	CU_ASSERT_EQUAL(r.s->g->unpacked.n, 4);
	done(&r);
}

/* Norm gains on a tp x dp grid: each gradient is all-reduced over tp,
 * then over dp. The dp reduction of one reads its tp reduction before
 * the other's tp reduction is posted; no reduction depends on the other
 * gain's, so both pairs are packed, the dp pack after the tp pack's
 * unpacks, and proved. */
static const char *const grid =
	"model grid { size B = 2, S = 8, D = 8, F = 8; group tp = 2; group dp = 2; type f32;\n"
	"  in x : [B, S, D] split B over dp, S over tp;\n"
	"  weight g1 : [D]; weight g2 : [D];\n"
	"  weight w1 : [D, F] split F over tp; weight w2 : [F, D] split F over tp;\n"
	"  xa = all_gather(rmsnorm(x, g1, eps = 1e-6), S);\n"
	"  h = x + reduce_scatter(gelu(xa @ w1) @ w2, S);\n"
	"  y = rmsnorm(h, g2, eps = 1e-6); out y; }\n";

static void
test_reader_between(void)
{
	SRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_bwd(&r, grid, -1));
	const Graph *g = r.s->g;
	CU_ASSERT_EQUAL_FATAL(g->packs.n, 2);
	const Pack *tp = g->packs.v[0], *dp = g->packs.v[1];
	CU_ASSERT_STRING_EQUAL(tp->coll->a.coll.group->name, "tp");
	CU_ASSERT_STRING_EQUAL(dp->coll->a.coll.group->name, "dp");
	CU_ASSERT_EQUAL(tp->n, 2);
	CU_ASSERT_EQUAL(dp->n, 2);
	/* the dp pack reads what the tp pack's unpacks give */
	for (int j = 0; j < dp->n; j++) {
		CU_ASSERT_EQUAL(dp->pack->in[j], tp->unpack[j]->out);
		CU_ASSERT(tp->unpack[j]->id < dp->pack->id);
	}
	char *msg = verify_msg(&r);
	CU_ASSERT_STRING_EQUAL(msg, "");
	free(msg);
	done(&r);
}

/* a1 and a2 over tp, b1 and b2 over dp, each pair independent, but b2
 * reads a1 and a2 reads b1: packing both pairs would make each pack wait
 * for the other. The dp pair (its bucket first) is packed; a2 is kept
 * out, the graph stays topological and the pass is proved. */
static const char *const cross =
	"model cross { size T = 8, D = 8, E = 8, F = 4; group tp = 2; group dp = 2; type f64;\n"
	"  in x : [T, D] split D over tp; in z : [T, E] split E over dp;\n"
	"  weight w1 : [D, F] split D over tp; weight w2 : [D, F] split D over tp;\n"
	"  weight u1 : [E, F] split E over dp; weight u2 : [E, F] split E over dp;\n"
	"  a1 = all_reduce(x @ w1); b1 = all_reduce(z @ u1);\n"
	"  b2 = all_reduce((z @ u2) * a1); a2 = all_reduce((x @ w2) * b1);\n"
	"  y = a1 + a2 + b1 + b2; out y; }\n";

static void
test_no_cycle(void)
{
	SRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(compile_pass(&r, cross, -1, 0));
	const Graph *g = r.s->g;
	CU_ASSERT_EQUAL_FATAL(g->packs.n, 1);
	const Pack *p = g->packs.v[0];
	CU_ASSERT_STRING_EQUAL(p->coll->a.coll.group->name, "dp");
	CU_ASSERT_EQUAL(p->n, 2);
	int says = 0;
	for (int k = 0; k < g->unpacked.n; k++) {
		const CoalesceNote *c = g->unpacked.v[k];
		says += !strcmp(c->why, "it depends on a1, in the pack of a1, through the pack of b1");
	}
	CU_ASSERT_EQUAL(says, 1);
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		for (int j = 0; j < n->nin; j++)
			CU_ASSERT(!n->in[j]->def || n->in[j]->def->id < n->id);
	}
	char *msg = verify_msg(&r);
	CU_ASSERT_STRING_EQUAL(msg, "");
	free(msg);
	done(&r);
}

void test_coalesce_register(void);

void
test_coalesce_register(void)
{
	CU_pSuite s = CU_add_suite("coalesce", NULL, NULL);

	CU_add_test(s, "a DP model's gradients packed and proved", test_packed);
	CU_add_test(s, "an unpack at the wrong offset", test_planted_offset);
	CU_add_test(s, "two slots that overlap", test_planted_overlap);
	CU_add_test(s, "a slot past the packed buffer", test_planted_past_end);
	CU_add_test(s, "the threshold and coalescing off", test_threshold);
	CU_add_test(s, "a reader between members waits for the pack", test_reader_between);
	CU_add_test(s, "no two packs wait for each other", test_no_cycle);
}
