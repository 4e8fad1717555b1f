/* Unit tests of graph.c and dot.c: value helpers, slice-locality of every
 * op class, graph_check, and the exact text of graph_dump and dot_graph. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"
#include "pipeline.h"
#include "sched.h"
#include "codegen.h"

typedef struct GRun {
	Arena *a;
	Diag d;
	Src src;
	char *err;
	size_t errlen;
	Graph *g;
} GRun;

static Graph *
build(GRun *r, const char *text, Options *o)
{
	FILE *ef;

	r->a = arena_new();
	r->src = (Src){"g.cf", text, strlen(text)};
	r->err = NULL;
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	Pipeline pl = {.a = r->a, .d = &r->d, .o = o, .stop = PIPE_GRAPH};
	r->g = pipeline_graphs(&pl, &r->src) ? NULL : pl.graph;
	fclose(ef);
	if (!r->g)
		fprintf(stderr, "\n--- unexpected errors:\n%s", r->err);
	return r->g;
}

static void
done(GRun *r)
{
	free(r->err);
	arena_free(r->a);
}

static Node *
def(const Graph *g, const char *name)
{
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (strcmp(v->name, name) == 0)
			return v->def;
	}
	CU_FAIL_FATAL("no such value");
	return NULL;
}

/* elide.c: over a group of one rank, a gather of a temporary is taken
 * out (its reader reads its input), an output's place goes to its input,
 * and a gather whose result must stay a tensor of its own (an output of an
 * input) is kept; with keep_group1 all three stay. */
static void
test_elide_group1(void)
{
	static const char text[] =
		"model m {\n"
		"  size S = 8, D = 4, F = 6;\n"
		"  group tp = 1;\n"
		"  type f32;\n"
		"  in x : [S, D] split S over tp;\n"
		"  weight w : [D, F] split F over tp;\n"
		"  xa = all_gather(x, S);\n"
		"  z = all_gather(xa @ w, F);\n"
		"  b = all_gather(x, S);\n"
		"  out z, b;\n"
		"}\n";
	for (int keep = 0; keep < 2; keep++) {
		GRun r = {0};
		FILE *ef;
		r.a = arena_new();
		r.src = (Src){"g.cf", text, strlen(text)};
		ef = open_memstream(&r.err, &r.errlen);
		diag_init(&r.d, &r.src, ef);
		Pipeline pl = {.a = r.a, .d = &r.d, .keep_group1 = keep, .stop = PIPE_GRAPH};
		int rc = pipeline_graphs(&pl, &r.src);
		fclose(ef);
		CU_ASSERT_EQUAL_FATAL(rc, PIPE_OK);
		const Graph *g = pl.graph;
		int ncoll = 0;
		for (int i = 0; i < g->nodes.n; i++) {
			const Node *n = g->nodes.v[i];
			ncoll += op_info[n->op].cls == CL_COLL;
			CU_ASSERT_EQUAL(n->id, i);
		}
		for (int i = 0; i < g->values.n; i++)
			CU_ASSERT_EQUAL(((Value *)g->values.v[i])->id, i);
		graph_check(g);
		CU_ASSERT_EQUAL(ncoll, keep ? 3 : 1);
		Node *z = def(g, "z"), *b = def(g, "b");
		CU_ASSERT_EQUAL(z->out->role, R_OUT);
		CU_ASSERT_EQUAL(b->op, OP_ALL_GATHER);
		CU_ASSERT_EQUAL(g->outputs.n, 2);
		if (g->outputs.n == 2) {
			CU_ASSERT_PTR_EQUAL(g->outputs.v[0], z->out);
			CU_ASSERT_PTR_EQUAL(g->outputs.v[1], b->out);
		}
		if (!keep) {
			CU_ASSERT_EQUAL(z->op, OP_MATMUL);
			CU_ASSERT_STRING_EQUAL(z->in[0]->name, "x");
		} else {
			CU_ASSERT_EQUAL(z->op, OP_ALL_GATHER);
		}
		done(&r);
	}
}

/* Output of fn(f, g) as a malloc'd string. */
static char *
capture(void (*fn)(FILE *, const Graph *), const Graph *g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, g);
	fclose(f);
	return buf;
}

#define HEAD "model m {\n  size B = 2, S = 64, D = 32, H = 4;\n  group tp = 4;\n"

/* inmap row i of n equals the first n->out->ndim entries of want */
static int
map_is(const Node *n, int i, const int *want)
{
	for (int d = 0; d < n->out->ndim; d++)
		if (n->inmap[i][d] != want[d])
			return 0;
	return 1;
}
#define MAP(n, i, ...) map_is(n, i, (const int[]){__VA_ARGS__})

static void
test_value_helpers(void)
{
	GRun r;
	Graph *g = build(&r, HEAD "  in x : [B, S, D] split S over tp;\n  in w : [D, D] split 1 over tp;\n"
	                 "  weight u : [7];\n  y = all_gather(x, S);\n  out y;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Value *x = def(g, "x")->out, *w = def(g, "w")->out, *u = def(g, "u")->out;
	CU_ASSERT_EQUAL(value_rank_extent(x, 1), 16);
	CU_ASSERT_EQUAL(value_rank_extent(x, 2), 32);
	CU_ASSERT_EQUAL(value_elems(x), 2 * 64 * 32);
	CU_ASSERT_EQUAL(value_rank_elems(x), 2 * 16 * 32);
	CU_ASSERT_STRING_EQUAL(dist_str(r.a, x), "split S over tp");
	CU_ASSERT_STRING_EQUAL(dist_str(r.a, w), "split 1 over tp");
	CU_ASSERT_STRING_EQUAL(dist_str(r.a, u), "repl");
	CU_ASSERT_STRING_EQUAL(value_dim_name(r.a, w, 0), "0");
	CU_ASSERT_STRING_EQUAL(value_dim_name(r.a, x, 2), "D");
	CU_ASSERT_STRING_EQUAL(value_dim_name(r.a, u, 0), "0");
	CU_ASSERT_STRING_EQUAL(graph_node_str(r.a, def(g, "y")), "all_gather(x, S)");
	CU_ASSERT_STRING_EQUAL(graph_node_str(r.a, def(g, "x")), "in");
	done(&r);
}

static void
test_sched_str(void)
{
	Arena *a = arena_new();

	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_VANILLA}), "vanilla");
	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_AUTO}), "auto");
	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_SLICE, .k = 4}), "slice(4)");
	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_FUSE, .m = 1}), "fuse(ring)");
	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_FUSE,
	                       .topo = TP_BIDIR, .m = 2}), "fuse(bidir, m = 2)");
	CU_ASSERT_STRING_EQUAL(graph_sched_str(a, &(SchedChoice){.kind = SK_FUSE,
	                       .topo = TP_PAIRWISE, .m = 3, .query = 1}),
	                       "fuse(pairwise, m = 3, split = query)");
	/* the verify summary line's spelling: the same without spaces */
	CU_ASSERT_STRING_EQUAL(sched_kind_str(a, &(SchedChoice){.kind = SK_SLICE, .k = 4}), "slice(4)");
	CU_ASSERT_STRING_EQUAL(sched_kind_str(a, &(SchedChoice){.kind = SK_FUSE,
	                       .topo = TP_BIDIR, .m = 2}), "fuse(bidir,m=2)");
	CU_ASSERT_STRING_EQUAL(sched_kind_str(a, &(SchedChoice){.kind = SK_FUSE,
	                       .topo = TP_PAIRWISE, .m = 3, .query = 1}),
	                       "fuse(pairwise,m=3,split=query)");
	arena_free(a);
}

static void
test_locality_ew_row(void)
{
	GRun r;
	Graph *g = build(&r, HEAD "  in x : [B, S, D] split S over tp;\n  weight b : [D];\n"
	                 "  a = x + b;\n  s = 0.5 * a;\n  n = layernorm(s, b, b);\n  out n;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Node *a = def(g, "a"), *s = def(g, "s"), *n = def(g, "n");
	CU_ASSERT_EQUAL(a->local, 7u);
	CU_ASSERT(MAP(a, 0, 0, 1, 2));
	CU_ASSERT(MAP(a, 1, -1, -1, 0)); /* the bias broadcasts over B and S */
	CU_ASSERT_EQUAL(s->local, 7u);
	CU_ASSERT(MAP(s, 0, 0, 1, 2));
	CU_ASSERT_EQUAL(n->local, 3u);
	CU_ASSERT(MAP(n, 0, 0, 1, -1));
	CU_ASSERT(MAP(n, 1, -1, -1, -1));
	CU_ASSERT(MAP(n, 2, -1, -1, -1));
	CU_ASSERT_EQUAL(def(g, "x")->local, 0u);
	done(&r);
}

static void
test_locality_mm(void)
{
	GRun r;
	Graph *g = build(&r, HEAD "  in x : [B, S, D];\n  in w : [D, H];\n  in bb : [B, D, H];\n"
	                 "  in xt : [B, D, S];\n  in wt : [H, D];\n"
	                 "  a = x @ w;\n  b = x @ bb;\n  c = xt.T @ wt.T;\n  out a, b, c;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Node *a = def(g, "a"), *b = def(g, "b"), *c = def(g, "c");
	CU_ASSERT_EQUAL(a->local, 7u);
	CU_ASSERT(MAP(a, 0, 0, 1, -1));
	CU_ASSERT(MAP(a, 1, -1, -1, 1));
	CU_ASSERT(MAP(b, 0, 0, 1, -1));
	CU_ASSERT(MAP(b, 1, 0, -1, 2));
	CU_ASSERT(MAP(c, 0, 0, 2, -1)); /* M is the last dim of xt */
	CU_ASSERT(MAP(c, 1, -1, -1, 0)); /* N is the first dim of wt */
	done(&r);
}

static void
test_locality_attn_heads_scan(void)
{
	GRun r;
	Graph *g = build(&r, HEAD "  in x : [B, S, D];\n"
	          "  q = split_heads(x, H);\n  o = attention(q, q, q);\n  m = merge_heads(o);\n"
	          "  s = scan(m, S);\n  out s;\n}\n", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Node *q = def(g, "q"), *o = def(g, "o"), *m = def(g, "m"), *s = def(g, "s");
	CU_ASSERT_EQUAL(q->local, 7u); /* B H S, not Dh */
	CU_ASSERT(MAP(q, 0, 0, 2, 1, -1));
	CU_ASSERT_EQUAL(o->local, 7u); /* B H Sq */
	CU_ASSERT(MAP(o, 0, 0, 1, 2, -1));
	CU_ASSERT(MAP(o, 1, 0, 1, -1, -1));
	CU_ASSERT(MAP(o, 2, 0, 1, -1, -1));
	CU_ASSERT_EQUAL(m->local, 7u); /* B S D */
	CU_ASSERT(MAP(m, 0, 0, 2, 1));
	CU_ASSERT_EQUAL(s->local, 5u); /* not along S */
	CU_ASSERT(MAP(s, 0, 0, -1, 2));
	done(&r);
}

static void
test_locality_coll(void)
{
	GRun r;
	Graph *g = build(&r, HEAD "  in x : [B, S, D] split S over tp;\n  y = all_gather(x, S);\n"
	                 "  out y;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	Node *y = def(g, "y");
	CU_ASSERT_EQUAL(y->local, 0u);
	CU_ASSERT(MAP(y, 0, -1, -1, -1));
	done(&r);
}

static const char mlp[] =
	"model mlp {\n"
	"  size B = 2, S = 64, D = 32;\n"
	"  group tp = 4;\n"
	"  type f32;\n"
	"\n"
	"  in     x : [B, S, D] split S over tp;\n"
	"  weight w : [D, D] split 1 over tp;\n"
	"\n"
	"  xa = all_gather(x, S);\n"
	"  h  = gelu(xa @ w);\n"
	"  out h;\n"
	"  schedule { xa: fuse(bidir, m = 2); }\n"
	"}\n";

static void
test_dump(void)
{
	GRun r;
	Define defs[] = {{"S", 128, 0}};
	Options o = {.defs = defs, .ndefs = 1};
	Graph *g = build(&r, mlp, &o);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	char *s = capture(graph_dump, g);
	CU_ASSERT_STRING_EQUAL(s,
"model mlp  (g.cf)\n"
"type    f32\n"
"sizes   B=2, S=128 (-D), D=32\n"
"groups  tp=4\n"
"\n"
"tensor  role    type  shape               dist             per rank      op                local  at\n"
"x       in      f32   [B=2, S=128, D=32]  split S over tp  [2, 32, 32]   in                -      g.cf:6:10\n"
"w       weight  f32   [D=32, D=32]        split 1 over tp  [32, 8]       weight            -      g.cf:7:10\n"
"xa      act     f32   [B=2, S=128, D=32]  repl             [2, 128, 32]  all_gather(x, S)  -      g.cf:9:8\n"
"t1      act     f32   [B=2, S=128, D=32]  split D over tp  [2, 128, 8]   matmul(xa, w)     B S D  g.cf:10:16\n"
"h       out     f32   [B=2, S=128, D=32]  split D over tp  [2, 128, 8]   gelu(t1)          B S D  g.cf:10:8\n"
"\n"
"schedule (default fuse(ring)):\n"
"  xa  all_gather  along S over tp  fuse(bidir, m = 2)\n");
	free(s);
	done(&r);
}

static void
test_dot(void)
{
	GRun r;
	Graph *g = build(&r, mlp, NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	char *s = capture(dot_graph, g);
	CU_ASSERT_STRING_EQUAL(s,
"digraph \"mlp\" {\n"
"  graph [fontname=\"Helvetica\", labelloc=t, label=\"model mlp (g.cf)\"];\n"
"  node [fontname=\"Helvetica\", fontsize=10, shape=box];\n"
"  edge [fontname=\"Helvetica\", fontsize=9];\n"
"  n0 [label=\"x\\nf32 [2,64,32]\\nsplit S over tp\", shape=ellipse];\n"
"  n1 [label=\"w\\nf32 [32,32]\\nsplit 1 over tp\", shape=ellipse, style=filled, fillcolor=\"#e8e8e8\"];\n"
"  n2 [label=\"all_gather\\nxa [2,64,32]\\nrepl\\nfuse(bidir, m = 2)\", shape=hexagon, style=filled, fillcolor=\"#fdb863\"];\n"
"  n3 [label=\"matmul\\nt1 [2,64,32]\\nsplit D over tp\"];\n"
"  n4 [label=\"gelu\\nh [2,64,32]\\nsplit D over tp\"];\n"
"  n0 -> n2 [label=\"x\"];\n"
"  n2 -> n3 [label=\"xa\"];\n"
"  n1 -> n3 [label=\"w\"];\n"
"  n3 -> n4 [label=\"t1\"];\n"
"  out0 [label=\"out h\", shape=plaintext];\n"
"  n4 -> out0;\n"
"}\n");
	free(s);
	done(&r);
}

/* Nested layer instances become nested clusters; quotes are escaped. */
static void
test_dot_clusters(void)
{
	GRun r;
	Graph *g = build(&r, "layer inner(x) { return relu(x); }\n"
	                 "layer outer(x) { return inner(x); }\n"
	                 "model m { in x : [2]; y = outer(x); out y; }\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	g->file = "a\"b.cf";
	char *s = capture(dot_graph, g);
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "label=\"model m (a\\\"b.cf)\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(s,
"  subgraph cluster_0 {\n"
"    label=\"outer0\";\n"
"    style=rounded;\n"
"    color=\"#7f7f7f\";\n"
"    subgraph cluster_1 {\n"
"      label=\"inner0\";\n"
"      style=rounded;\n"
"      color=\"#7f7f7f\";\n"
"      n1 [label=\"relu\\ny [2]\\nrepl\"];\n"
"    }\n"
"  }\n"));
	free(s);
	done(&r);
}

/* In the dump, inputs from the row's own instance lose its prefix. */
static void
test_dump_relative(void)
{
	GRun r;
	Graph *g = build(&r, "layer l(x) { h = relu(x); return gelu(h); }\n"
	                 "model m { in x : [2]; y = l(l(x)); out y; }\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	char *s = capture(graph_dump, g);
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "l0.h    act   f32   [2]    repl  [2]       relu(x)      0      g.cf:1:18\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "l0.t1   act   f32   [2]    repl  [2]       gelu(h)      0      g.cf:1:34\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "l1.h    act   f32   [2]    repl  [2]       relu(l0.t1)  0      g.cf:1:18\n"));
	CU_ASSERT_STRING_EQUAL(graph_node_str(r.a, def(g, "l1.h")), "relu(l0.t1)");
	CU_ASSERT_STRING_EQUAL(graph_node_str(r.a, def(g, "l0.t1")), "gelu(l0.h)");
	free(s);
	done(&r);
}

static void
test_check_examples(void)
{
	static const char *const files[] = {"examples/mlp.cf", "examples/attention.cf",
	                                    "examples/transformer.cf", "examples/ulysses.cf",
	                                    "examples/mamba.cf", "examples/zero_dp.cf"};

	for (int i = 0; i < (int)(sizeof files / sizeof files[0]); i++) {
		FILE *f = fopen(files[i], "rb");
		char *text = NULL;
		size_t len = 0;
		if (!f)
			continue; /* run from elsewhere than the repository root */
		FILE *m = open_memstream(&text, &len);
		for (int c; (c = fgetc(f)) != EOF;)
			fputc(c, m);
		fclose(f);
		fclose(m);
		GRun r;
		Graph *g = build(&r, text, NULL);
		CU_ASSERT_PTR_NOT_NULL(g);
		if (g) {
			graph_check(g); /* dies on a broken invariant */
			CU_ASSERT(g->outputs.n >= 1);
		}
		done(&r);
		free(text);
	}
}

void test_graph_register(void);

void
test_graph_register(void)
{
	CU_pSuite s = CU_add_suite("graph", NULL, NULL);

	CU_add_test(s, "value helpers", test_value_helpers);
	CU_add_test(s, "schedule strings", test_sched_str);
	CU_add_test(s, "locality: elementwise, rows", test_locality_ew_row);
	CU_add_test(s, "locality: matmul", test_locality_mm);
	CU_add_test(s, "locality: attention, heads, scan", test_locality_attn_heads_scan);
	CU_add_test(s, "locality: collectives", test_locality_coll);
	CU_add_test(s, "dump", test_dump);
	CU_add_test(s, "groups of one: collectives taken out, or kept", test_elide_group1);
	CU_add_test(s, "dump: names relative to the instance", test_dump_relative);
	CU_add_test(s, "dot", test_dot);
	CU_add_test(s, "dot clusters", test_dot_clusters);
	CU_add_test(s, "examples pass graph_check", test_check_examples);
}
