/* Unit tests of `recompute` (sema_recompute.c, grad.c's recompute()) and
 * of the memory budget's choice (memory.c): a named tensor and the
 * temporaries of its expression marked, a layer's instances marked but
 * their results, nested ones, the backward graph computing the marked
 * values again before their first use instead of reading them saved,
 * and mem_pick's order. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"
#include "pipeline.h"

typedef struct RRun {
	Arena *a;
	Diag d;
	Src src;
	char *err;
	size_t errlen;
	Graph *g, *b;
} RRun;

/* text's graph and its backward (pipeline_graphs; NULL after errors, in
 * r->err); o: the options (NULL: none). */
static Graph *
build(RRun *r, const char *text, Options *o)
{
	FILE *ef;

	r->a = arena_new();
	r->src = (Src){"r.cf", text, strlen(text)};
	r->err = NULL;
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	Pipeline pl = {.a = r->a, .d = &r->d, .o = o, .backward = 1};
	pipeline_graphs(&pl, &r->src);
	r->g = pl.graph;
	r->b = r->g ? r->g->bwd : NULL;
	fclose(ef);
	return r->b;
}

static void
done(RRun *r)
{
	free(r->err);
	arena_free(r->a);
}

static Value *
val(const Graph *g, const char *name)
{
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (!strcmp(v->name, name))
			return v;
	}
	return NULL;
}

static int
is_saved(const Graph *g, const char *name)
{
	for (int i = 0; i < g->saved.n; i++)
		if (!strcmp(((Value *)g->saved.v[i])->name, name))
			return 1;
	return 0;
}

/* the nodes of b of op kind op */
static int
count_op(const Graph *b, OpKind op)
{
	int n = 0;

	for (int i = 0; i < b->nodes.n; i++)
		n += ((Node *)b->nodes.v[i])->op == op;
	return n;
}

static const char *attn =
	"layer attn(x) {\n"
	"  weight wq : [D, D] split 1 over tp;\n"
	"  weight wk : [D, D] split 1 over tp;\n"
	"  weight wv : [D, D] split 1 over tp;\n"
	"  weight wo : [D, D] split 0 over tp;\n"
	"  xa = all_gather(x, S);\n"
	"  q = split_heads(xa @ wq, H);\n"
	"  k = split_heads(xa @ wk, H);\n"
	"  v = split_heads(xa @ wv, H);\n"
	"  o = merge_heads(attention(q, k, v, causal));\n"
	"  %s\n"
	"  return reduce_scatter(o @ wo, S);\n"
	"}\n"
	"layer blk(x) {\n"
	"  weight g : [D];\n"
	"  h = x + attn(rmsnorm(x, g));\n"
	"  %s\n"
	"  return h + rmsnorm(h, g);\n"
	"}\n"
	"model m {\n"
	"  size B = 1, S = 8, D = 8, H = 2, L = 2;\n"
	"  group tp = 2;\n"
	"  in x : [B, S, D] split S over tp;\n"
	"  y = repeat(L, blk, x);\n"
	"  %s\n"
	"  out y;\n"
	"}\n";

static Graph *
build_attn(RRun *r, const char *in_attn, const char *in_blk, const char *in_model)
{
	char text[4096];

	snprintf(text, sizeof text, attn, in_attn, in_blk, in_model);
	return build(r, text, NULL);
}

/* recompute o: o and the attention (a temporary of o's expression), not
 * q; the backward computes both again and saves neither */
static void
test_named(void)
{
	RRun r, r0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(build_attn(&r0, "", "", ""));
	CU_ASSERT_PTR_NOT_NULL_FATAL(build_attn(&r, "recompute o;", "", ""));
	Value *o = val(r.g, "blk0.attn0.o"), *q = val(r.g, "blk0.attn0.q");
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL(o->recompute, RC_NAMED);
	CU_ASSERT_EQUAL(o->def->in[0]->recompute, RC_NAMED);
	CU_ASSERT_EQUAL(o->def->in[0]->def->op, OP_ATTENTION);
	CU_ASSERT_EQUAL(q->recompute, RC_NONE);
	CU_ASSERT(is_saved(r0.g, "blk0.attn0.o"));
	CU_ASSERT(!is_saved(r.g, "blk0.attn0.o"));
	CU_ASSERT(!is_saved(r.g, o->def->in[0]->name));
	CU_ASSERT(is_saved(r.g, "blk0.attn0.q"));
	/* the lse of the attention stays saved; the backward runs the
	 * attention again, once per block */
	CU_ASSERT_EQUAL(count_op(r0.b, OP_ATTENTION), 0);
	CU_ASSERT_EQUAL(count_op(r.b, OP_ATTENTION), 2);
	CU_ASSERT(r.g->savedbytes < r0.g->savedbytes);
	/* each recomputed value of b is made before every node that reads it */
	for (int i = 0; i < r.b->nodes.n; i++) {
		const Node *n = r.b->nodes.v[i];
		for (int k = 0; k < n->nin; k++)
			CU_ASSERT(n->in[k]->def->id < n->id);
	}
	done(&r);
	done(&r0);
}

/* recompute blk in the model: everything inside both instances but
 * their results (blk0's is blk1's input: saved); the nested attn's
 * result too */
static void
test_layer(void)
{
	RRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(build_attn(&r, "", "", "recompute blk;"));
	Value *h0 = val(r.g, "blk0.h"), *q1 = val(r.g, "blk1.attn1.q");
	Value *ret0 = NULL;
	for (int i = 0; i < r.g->values.n && !ret0; i++) { /* blk0's result: blk1's first norm's */
		Value *v = r.g->values.v[i];
		if (v->def->op == OP_RMSNORM && v->def->layer && !strcmp(v->def->layer, "blk1"))
			ret0 = v->def->in[0];
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(ret0);
	CU_ASSERT_EQUAL(h0->recompute, RC_LAYER);
	CU_ASSERT_EQUAL(q1->recompute, RC_LAYER);
	CU_ASSERT_EQUAL(ret0->recompute, RC_NONE);
	CU_ASSERT_EQUAL(ret0->def->op, OP_ADD);
	CU_ASSERT(is_saved(r.g, ret0->name));
	/* nothing else is saved but the attentions' log-sum-exps */
	for (int i = 0; i < r.g->saved.n; i++) {
		const Value *v = r.g->saved.v[i];
		CU_ASSERT(v == ret0 || v->def->lse == v);
	}
	/* the attention's reduce_scatter is done again in the backward (the
	 * second norm of each block reads h = x + attn(...)) */
	int rs = 0;
	for (int i = 0; i < r.b->nodes.n; i++) {
		const Node *n = r.b->nodes.v[i];
		rs += n->op == OP_REDUCE_SCATTER && n->out->name[0] != 'd';
	}
	CU_ASSERT_EQUAL(rs, 2);
	done(&r);
}

/* recompute attn inside blk: attn's insides, not its result, not h */
static void
test_nested(void)
{
	RRun r;

	CU_ASSERT_PTR_NOT_NULL_FATAL(build_attn(&r, "", "recompute attn;", ""));
	CU_ASSERT_EQUAL(val(r.g, "blk0.attn0.q")->recompute, RC_LAYER);
	CU_ASSERT_EQUAL(val(r.g, "blk1.attn1.o")->recompute, RC_LAYER);
	CU_ASSERT_EQUAL(val(r.g, "blk0.h")->recompute, RC_NONE);
	CU_ASSERT_EQUAL(val(r.g, "blk0.h")->def->in[1]->recompute, RC_NONE);
	done(&r);
}

/* mem_pick: the largest saved tensor first; what was tried is skipped;
 * Options.recompute marks by name */
static void
test_pick(void)
{
	RRun r, r2;

	CU_ASSERT_PTR_NOT_NULL_FATAL(build_attn(&r, "", "", ""));
	const Value *p = mem_pick(r.a, r.g, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int i = 0; i < r.g->saved.n; i++) {
		const Value *v = r.g->saved.v[i];
		CU_ASSERT(dtype_size[v->dtype] * value_rank_elems(v) <=
		          dtype_size[p->dtype] * value_rank_elems(p));
	}
	const char *tried[1] = {p->name};
	const Value *p2 = mem_pick(r.a, r.g, tried, 1);
	CU_ASSERT_PTR_NOT_NULL(p2);
	CU_ASSERT(p2 != p);
	Options o = {.recompute = tried, .nrecompute = 1};
	char text[4096];
	snprintf(text, sizeof text, attn, "", "", "");
	CU_ASSERT_PTR_NOT_NULL_FATAL(build(&r2, text, &o));
	CU_ASSERT(!is_saved(r2.g, p->name));
	CU_ASSERT(r2.g->savedbytes <= r.g->savedbytes); /* its inputs may be saved instead */
	done(&r2);
	done(&r);
}

void test_recompute_register(void);

void
test_recompute_register(void)
{
	CU_pSuite s = CU_add_suite("recompute", NULL, NULL);

	CU_add_test(s, "a tensor and its expression", test_named);
	CU_add_test(s, "layer instances: all but their results", test_layer);
	CU_add_test(s, "a nested layer", test_nested);
	CU_add_test(s, "the budget's pick", test_pick);
}
