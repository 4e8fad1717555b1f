/* Unit tests of sema.c: sizes, shapes and distributions per op, layers,
 * schedules, and the exact text of the diagnostics. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"
#include "pipeline.h"
/* ---- helpers ---- */

typedef struct ShRun {
	Arena *a;
	Diag d;
	Src src;
	char *err;     /* the diagnostics */
	size_t errlen;
	Graph *g;
} ShRun;

/* Parses and checks text (named t.cf); diagnostics go to r->err. */
static Graph *
sh_build(ShRun *r, const char *text, Options *o)
{
	FILE *ef;

	r->a = arena_new();
	r->src = (Src){"t.cf", text, strlen(text)};
	r->err = NULL;
	r->errlen = 0;
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	Pipeline pl = {.a = r->a, .d = &r->d, .o = o, .stop = PIPE_GRAPH};
	r->g = pipeline_graphs(&pl, &r->src) ? NULL : pl.graph;
	fclose(ef);
	return r->g;
}

static void
sh_done(ShRun *r)
{
	free(r->err);
	arena_free(r->a);
}

static Value *
sh_val(const Graph *g, const char *name)
{
	for (int i = 0; g && i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (strcmp(v->name, name) == 0)
			return v;
	}
	return NULL;
}

/* The first line of the diagnostics, without "t.cf:L:C: error: ". */
static const char *
first_msg(ShRun *r)
{
	static char buf[1024];
	const char *s = r->err ? r->err : "";
	const char *e = strstr(s, "error: ");
	size_t n;

	s = e ? e + 7 : s;
	n = strcspn(s, "\n");
	if (n >= sizeof buf)
		n = sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
	return buf;
}

static int
nerrors(ShRun *r)
{
	return r->d.nerr;
}

/* A model with the usual sizes around body. */
#define HEAD "model m {\n  size B = 2, S = 256, D = 128, F = 512, H = 8;\n  group tp = 4;\n  type f32;\n"
#define XS "  in x : [B, S, D] split S over tp;\n"
#define XR "  in xr : [B, S, D];\n"
/* an output, so that a model with nothing else to show is complete */
#define OKOUT "  in ok_in : [2];\n  ok_out = relu(ok_in);\n  out ok_out;\n"

/* Builds HEAD body "}" and expects exactly one error with message msg. */
static void
expect_error(const char *body, const char *msg)
{
	ShRun r;
	char *text = malloc(strlen(HEAD) + strlen(body) + strlen(OKOUT) + 4);

	strcpy(text, HEAD);
	strcat(text, body);
	if (!strstr(body, "out "))
		strcat(text, OKOUT);
	strcat(text, "}\n");
	CU_ASSERT_PTR_NULL(sh_build(&r, text, NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), msg);
	if (strcmp(first_msg(&r), msg) != 0)
		fprintf(stderr, "\n--- got:\n%s--- for:\n%s", r.err, text);
	CU_ASSERT_EQUAL(nerrors(&r), 1);
	sh_done(&r);
	free(text);
}

/* Builds HEAD body "}" and expects no error. */
static Graph *
expect_ok(ShRun *r, const char *body)
{
	static char text[8192];

	snprintf(text, sizeof text, "%s%s}\n", HEAD, body);
	Graph *g = sh_build(r, text, NULL);
	if (!g)
		fprintf(stderr, "\n--- unexpected errors:\n%s--- for:\n%s", r->err, text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	return g;
}

static int64_t
size_of(const Graph *g, const char *name)
{
	for (int i = 0; i < g->sizes.n; i++) {
		const Size *z = g->sizes.v[i];
		if (strcmp(z->name, name) == 0)
			return z->val;
	}
	return -1;
}

static int
is_split(const Value *v, int dim, const char *group)
{
	const Group *g = v ? dist_split_group(&v->dist, dim) : NULL;

	return g && strcmp(g->name, group) == 0;
}

static int
shape_is(const Value *v, int n, const int64_t *s)
{
	if (!v || v->ndim != n)
		return 0;
	for (int d = 0; d < n; d++)
		if (v->shape[d] != s[d])
			return 0;
	return 1;
}
#define SHAPE(v, ...) shape_is(v, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), \
                               (int64_t[]){__VA_ARGS__})

/* ---- sizes ---- */

static void
test_size_precedence(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, "  size A = 2 + 3 * 4 ^ 2 - 10 / 5 % 3, P = 2 ^ 3 ^ 2,\n"
	                     "       N = -2 ^ 2 + 10, Q = (1 + 2) * 3, R = S / tp - tp % 3;\n"
	                     XS "  y = all_gather(x, S);\n  out y;\n");
	CU_ASSERT_EQUAL(size_of(g, "A"), 48);
	CU_ASSERT_EQUAL(size_of(g, "P"), 512);
	CU_ASSERT_EQUAL(size_of(g, "N"), 6);
	CU_ASSERT_EQUAL(size_of(g, "Q"), 9);
	CU_ASSERT_EQUAL(size_of(g, "R"), 63);
	sh_done(&r);
}

static void
test_size_errors(void)
{
	expect_error("  size A = 2 ^ 63;\n", "size expression overflows: 2 ^ 63");
	expect_error("  size A = 2 ^ 62 * 2;\n",
	             "size expression overflows: 4611686018427387904 * 2");
	expect_error("  size A = 9223372036854775807 + 1;\n",
	             "size expression overflows: 9223372036854775807 + 1");
	expect_error("  size A = 250, Z = A/tp;\n", "A/tp is not exact: 250 / 4");
	expect_error("  size A = S / (tp - 4);\n", "division by zero: S / (tp - 4) is 256 / 0");
	expect_error("  size A = S % 0;\n", "division by zero: S % 0 is 256 % 0");
	expect_error("  size A = 2 ^ -1;\n", "negative exponent: 2 ^ -1 is 2 ^ -1");
	expect_error("  size A = D - D;\n", "size A must be positive, but is 0");
	expect_error("  size A = 1.5;\n", "sizes are integers, not 1.5");
	expect_error("  group g = 5000;\n", "group g must have 1 to 4096 ranks, but has 5000");
	expect_error("  group g = 0;\n", "group g must have 1 to 4096 ranks, but has 0");
	expect_error("  size A = Q;\n", "unknown name 'Q'");
	expect_error("  size A = SS;\n", "unknown name 'SS'; did you mean 'S'?");
	expect_error(XS "  size A = x;\n", "'x' is a tensor, not a size");
	expect_error("  in x : [B, S - S, D];\n",
	             "dimension 1 of x must be positive, but S - S is 0");
}

/* Deep expressions are refused before they exhaust the stack. */
static void
test_depth(void)
{
	enum { N = 5000 };
	ShRun r;
	char *text = malloc(N * 4 + 200), *p = text;

	p += sprintf(p, "model m {\n  in x : [4];\n  y = x");
	for (int i = 1; i < N; i++)
		p += sprintf(p, " + x");
	sprintf(p, ";\n  out y;\n}\n");
	CU_ASSERT_PTR_NULL(sh_build(&r, text, NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "expression nested more than 1000 deep");
	CU_ASSERT_EQUAL(r.d.nerr, 1);
	sh_done(&r);
	free(text);
}

/* The whole text of one diagnostic: location, source line and caret. */
static void
test_size_caret(void)
{
	ShRun r;

	sh_build(&r, "model m {\n  group tp = 4;\n  size S = 250, Z = S/tp;\n" OKOUT "}\n", NULL);
	CU_ASSERT_STRING_EQUAL(r.err,
	    "t.cf:3:22: error: S/tp is not exact: 250 / 4\n"
	    "   size S = 250, Z = S/tp;\n"
	    "                      ^\n");
	sh_done(&r);
}

static void
test_defines(void)
{
	ShRun r;
	Define defs[] = {{"S", 1024, 0}, {"tp", 8, 0}};
	Options o = {.defs = defs, .ndefs = 2};
	const char *text = HEAD "  size T = S / tp;\n" XS "  y = all_gather(x, S);\n  out y;\n}\n";
	Graph *g = sh_build(&r, text, &o);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(size_of(g, "S"), 1024);
	CU_ASSERT_EQUAL(size_of(g, "T"), 128);
	CU_ASSERT(defs[0].used && defs[1].used);
	CU_ASSERT_EQUAL(((Group *)g->groups.v[0])->size, 8);
	CU_ASSERT(((Group *)g->groups.v[0])->overridden);
	CU_ASSERT(((Size *)g->sizes.v[1])->overridden);
	CU_ASSERT(!((Size *)g->sizes.v[0])->overridden);
	CU_ASSERT_EQUAL(value_rank_extent(sh_val(g, "x"), 1), 128);
	sh_done(&r);

	Define bad[] = {{"FOO", 3, 0}};
	Options ob = {.defs = bad, .ndefs = 1};
	CU_ASSERT_PTR_NULL(sh_build(&r, text, &ob));
	CU_ASSERT_STRING_EQUAL(r.err, "cfc: error: -D FOO: no size or group named 'FOO'\n");
	sh_done(&r);

	Define zero[] = {{"S", 0, 0}};
	Options oz = {.defs = zero, .ndefs = 1};
	CU_ASSERT_PTR_NULL(sh_build(&r, text, &oz));
	CU_ASSERT_STRING_EQUAL(r.err, "cfc: error: -D S=0: a size must be positive\n");
	sh_done(&r);
}

/* ---- declarations ---- */

static void
test_tensor_decls(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS "  weight w : [D, D] split 1 over tp;\n"
	                     "  weight v : f64 [D];\n  in z : [B, tp*2, D] split 1 over tp;\n"
	                     "  y = all_gather(x, S);\n  out y;\n");
	Value *x = sh_val(g, "x"), *w = sh_val(g, "w"), *v = sh_val(g, "v"), *z = sh_val(g, "z");

	CU_ASSERT(SHAPE(x, 2, 256, 128));
	CU_ASSERT(is_split(x, 1, "tp"));
	CU_ASSERT_STRING_EQUAL(x->label[0], "B");
	CU_ASSERT(is_split(w, 1, "tp"));
	CU_ASSERT_EQUAL(v->dtype, DT_F64);
	CU_ASSERT_EQUAL(x->dtype, DT_F32);
	CU_ASSERT_EQUAL(v->dist.p[0].kind, DI_REPL);
	CU_ASSERT_PTR_NULL(z->label[1]);
	CU_ASSERT(is_split(z, 1, "tp"));
	CU_ASSERT_EQUAL(g->inputs.n, 2);
	CU_ASSERT_EQUAL(g->weights.n, 2);
	CU_ASSERT_EQUAL(value_rank_elems(x), 2 * 64 * 128);
	sh_done(&r);
}

static void
test_tensor_errors(void)
{
	expect_error("  in x : [B, S, D] split S over tq;\n", "unknown name 'tq'; did you mean 'tp'?");
	expect_error("  in x : [B, S, D] split S over D;\n", "'D' is a size, not a group");
	expect_error("  in x : [B, S, D] split T over tp;\n", "x has no dimension named 'T'");
	expect_error("  in x : [B, S, D] split 3 over tp;\n",
	             "x has 3 dimensions: 3 is not a position from 0 to 2");
	expect_error("  weight w : [D, D] split D over tp;\n",
	             "label 'D' names 2 dimensions of w: give the position");
	expect_error("  size T = 250;\n  in x : [B, T, D] split T over tp;\n",
	             "dimension T of x (250) does not divide evenly over group tp (4)");
	expect_error("  weight w : [65536, 65536];\n", "w has 4294967296 elements per rank, "
	             "more than an MPI int count can hold (2147483647)");
	expect_error("  weight w : [65536, 65536, 4] split 2 over tp;\n", "w has 4294967296 "
	             "elements per rank, more than an MPI int count can hold (2147483647)");
	expect_error("  in x : [B, S];\n  in x : [B];\n", "duplicate name 'x'");
	expect_error("  in S : [B];\n", "duplicate name 'S'");
}

static void
test_duplicate_note(void)
{
	ShRun r;

	sh_build(&r, "model m {\n  in x : [2];\n  in x : [3];\n}\n", NULL);
	CU_ASSERT_STRING_EQUAL(r.err,
	    "t.cf:3:6: error: duplicate name 'x'\n"
	    "   in x : [3];\n"
	    "      ^\n"
	    "t.cf:2:6: note: 'x' was first defined here\n"
	    "   in x : [2];\n"
	    "      ^\n");
	sh_done(&r);
}

static void
test_program_errors(void)
{
	ShRun r;

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x) { return x; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(r.err, "t.cf: error: no model: a file needs exactly one "
	                       "'model NAME { ... }'\n");
	sh_done(&r);
	CU_ASSERT_PTR_NULL(sh_build(&r, "model a { in x : [2]; y = relu(x); out y; }\n"
	                            "model b { }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "more than one model: a file holds exactly "
	                       "one, and b comes after a");
	sh_done(&r);
	CU_ASSERT_PTR_NULL(sh_build(&r, "layer a(x) { return x; }\nlayer a(y) { return y; }\n"
	                            "model m { in x : [2]; y = relu(a(x)); out y; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "duplicate name 'a'");
	sh_done(&r);
	expect_error(XS "  out y;\n", "unknown name 'y'");
	expect_error(XS "  out x;\n", "x is an input; an output must be computed");
	expect_error(XS "  y = relu(x);\n  out y, y;\n", "y is already an output");
	expect_error(XS "  y = relu(x);\n  return y;\n  out y;\n",
	             "a model returns nothing; name its results with 'out'");
	expect_error(XS "  y = relu(x);\n  type f64;\n  out y;\n", "the type is set twice");
	CU_ASSERT_PTR_NULL(sh_build(&r, "model m { in x : [2]; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "model m has no outputs: add 'out NAME;'");
	sh_done(&r);
}

/* ---- ops ---- */

static void
test_matmul(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS XR
	    "  weight wc : [D, F] split F over tp;\n  weight wr : [F, D] split F over tp;\n"
	    "  weight wt : [F, D] split F over tp;\n  weight w : [D, F];\n"
	    "  in b1 : [4, S, D] split 0 over tp;\n  in b2 : [4, D, F] split 0 over tp;\n"
	    "  a = x @ w;\n  c = xr @ wc;\n  h = gelu(c);\n  p = h @ wr;\n"
	    "  q = p @ w;\n  bb = b1 @ b2;\n  t = xr @ wt.T;\n  l = linear(xr, w);\n"
	    "  rr = xr @ w;\n  k = reduce_scatter(q, S);\n"
	    "  out a, k, bb, t, l, rr;\n");
	Value *a = sh_val(g, "a"), *c = sh_val(g, "c"), *p = sh_val(g, "p");

	CU_ASSERT(SHAPE(a, 2, 256, 512));
	CU_ASSERT_STRING_EQUAL(a->label[2], "F");
	CU_ASSERT(is_split(a, 1, "tp"));
	CU_ASSERT(is_split(c, 2, "tp"));
	CU_ASSERT_EQUAL(p->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT(SHAPE(p, 2, 256, 128));
	CU_ASSERT_EQUAL(sh_val(g, "q")->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT(is_split(sh_val(g, "bb"), 0, "tp"));
	CU_ASSERT(SHAPE(sh_val(g, "bb"), 4, 256, 512));
	CU_ASSERT(SHAPE(sh_val(g, "t"), 2, 256, 512));
	CU_ASSERT(is_split(sh_val(g, "t"), 2, "tp"));
	CU_ASSERT(sh_val(g, "t")->def->a.mm.tb && !sh_val(g, "t")->def->a.mm.ta);
	CU_ASSERT_EQUAL(sh_val(g, "l")->def->op, OP_MATMUL);
	CU_ASSERT_EQUAL(sh_val(g, "rr")->dist.p[0].kind, DI_REPL);
	sh_done(&r);
}

static void
test_matmul_transpose(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, "  in x : [S, D] split S over tp;\n  in dy : [S, F] split S over tp;\n"
	                     "  g = x.T @ dy;\n  gs = reduce_scatter(g, D);\n  out gs;\n");
	Value *gv = sh_val(g, "g");

	CU_ASSERT(SHAPE(gv, 128, 512));
	CU_ASSERT_EQUAL(gv->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT_STRING_EQUAL(gv->label[0], "D");
	CU_ASSERT(gv->def->a.mm.ta);
	CU_ASSERT(is_split(sh_val(g, "gs"), 0, "tp"));
	sh_done(&r);
}

static void
test_matmul_errors(void)
{
	expect_error("  in a : [2, 64, 128];\n  in b : [256, 512];\n  y = a @ b;\n  out y;\n",
	             "matmul shapes [2,64,128] and [256,512] do not match: 128 != 256");
	expect_error("  in a : [2, 64, 128];\n  in b : [512, 256];\n  y = a @ b.T;\n  out y;\n",
	             "matmul shapes [2,64,128] and [512,256].T do not match: 128 != 256");
	expect_error("  in a : [2, 64, 128];\n  in b : [3, 128, 5];\n  y = a @ b;\n  out y;\n",
	             "matmul shapes [2,64,128] and [3,128,5] do not match: the batch dimensions differ");
	expect_error("  in a : [128];\n  in b : [128, 5];\n  y = a @ b;\n  out y;\n",
	             "matmul needs operands of 2 or more dimensions, but a has 1");
	expect_error(XS "  weight w : [D, F] split F over tp;\n  y = x @ w;\n  out y;\n",
	             "cannot multiply x (split S over tp) by w (split F over tp): split the rows of "
	             "the left or the columns of the right with the other replicated, or both "
	             "along K over one group");
	expect_error(XS "  y = x.T;\n  out y;\n", ".T transposes an operand of a matmul, and nothing else");
	expect_error(XS "  y = relu(x.T);\n  out y;\n", ".T transposes an operand of a matmul, and nothing else");
	expect_error(XS "  in w : f64 [D, F];\n  y = x @ w;\n  out y;\n", "type mismatch: f32 and f64");
}

static void
test_elementwise(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS XR "  weight b : [D];\n  in xs : [B, S, D] split S over tp;\n"
	                     "  weight wr : [D, D] split 0 over tp;\n  in xd : [B, S, D] split D over tp;\n"
	                     "  a = x + b;\n  c = b + x;\n  d = x * xr;\n  e = x * xs;\n"
	                     "  p = xd @ wr;\n  pp = p + p;\n  pm = p * b;\n"
	                     "  s1 = 0.5 * x;\n  s2 = x * 2;\n  s3 = -x;\n  s4 = scale(x, -0.25);\n"
	                     "  y = reduce_scatter(pp, S);\n  z = reduce_scatter(pm, S);\n"
	                     "  out a, c, d, e, y, z, s1, s2, s3, s4;\n");
	Value *a = sh_val(g, "a"), *c = sh_val(g, "c");

	CU_ASSERT(SHAPE(a, 2, 256, 128));
	CU_ASSERT(is_split(a, 1, "tp"));
	CU_ASSERT(is_split(c, 1, "tp"));
	CU_ASSERT_PTR_EQUAL(c->def->in[0], sh_val(g, "x")); /* the larger first */
	CU_ASSERT(is_split(sh_val(g, "d"), 1, "tp"));
	CU_ASSERT_EQUAL(sh_val(g, "pp")->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT_EQUAL(sh_val(g, "pm")->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT_EQUAL(sh_val(g, "s1")->def->op, OP_SCALE);
	CU_ASSERT_EQUAL(sh_val(g, "s1")->def->nin, 1);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "s1")->def->a.scale, 0.5, 0);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "s2")->def->a.scale, 2, 0);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "s3")->def->a.scale, -1, 0);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "s4")->def->a.scale, -0.25, 0);
	CU_ASSERT(is_split(sh_val(g, "s4"), 1, "tp"));
	sh_done(&r);
	/* a - b as a + b; the broadcast operand first: turned round, marked */
	g = expect_ok(&r, XS "  weight b : [D];\n  weight wr : [D, D] split 0 over tp;\n"
	              "  in xd : [B, S, D] split D over tp;\n  p = xd @ wr;\n"
	              "  m1 = x - b;\n  m2 = b - x;\n  pd = p - p;\n  y = reduce_scatter(pd, S);\n"
	              "  out m1, m2, y;\n");
	Value *m1 = sh_val(g, "m1"), *m2 = sh_val(g, "m2");
	CU_ASSERT_EQUAL(m1->def->op, OP_SUB);
	CU_ASSERT(!m1->def->a.rsub);
	CU_ASSERT_EQUAL(m2->def->op, OP_SUB);
	CU_ASSERT(m2->def->a.rsub);
	CU_ASSERT_PTR_EQUAL(m2->def->in[0], sh_val(g, "x"));
	CU_ASSERT(is_split(m2, 1, "tp"));
	CU_ASSERT_EQUAL(sh_val(g, "pd")->dist.p[0].kind, DI_PARTIAL);
	sh_done(&r);
	/* rope's positions: the dim labelled S, before or after the heads,
	 * or the one named */
	g = expect_ok(&r, "  in a : [B, S, H, D];\n  in c : [B, H, S, D];\n  in e : [B, F, H, D];\n"
	              "  ra = rope(a);\n  rc = rope(c, 500);\n  re = rope(e, 500, F);\n"
	              "  out ra, rc, re;\n");
	CU_ASSERT_EQUAL(sh_val(g, "ra")->def->a.rope.dim, 1);
	CU_ASSERT_EQUAL(sh_val(g, "rc")->def->a.rope.dim, 2);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "rc")->def->a.rope.base, 500, 0);
	CU_ASSERT_EQUAL(sh_val(g, "re")->def->a.rope.dim, 1);
	sh_done(&r);
}

static void
test_elementwise_errors(void)
{
	const char *p = "  in xd : [B, S, D] split D over tp;\n  weight wr : [D, D] split 0 over tp;\n"
	                "  p = xd @ wr;\n";
	char buf[512];

	expect_error(XS "  weight b : [S];\n  y = x + b;\n  out y;\n",
	             "add shapes [2,256,128] and [256] do not match: they must be equal, "
	             "or one a suffix of the other");
	snprintf(buf, sizeof buf, "%s" XR "  y = p + xr;\n  out y;\n", p);
	expect_error(buf, "cannot add p (partial over tp) and xr (repl): the replicated value "
	             "would be counted once per rank; reduce the partial sum first "
	             "(reduce_scatter or all_reduce)");
	snprintf(buf, sizeof buf, "%s  y = p * p;\n  out y;\n", p);
	expect_error(buf, "cannot multiply p (partial over tp) by p (partial over tp): a product "
	             "of partial sums is no partial sum; reduce one first");
	snprintf(buf, sizeof buf, "%s" XS "  y = x + xd;\n  out y;\n", p);
	expect_error(buf, "cannot add x (split S over tp) and xd (split D over tp): they are "
	             "spread differently; gather or reduce one first");
	snprintf(buf, sizeof buf, "%s" XS "  y = x - xd;\n  out y;\n", p);
	expect_error(buf, "cannot subtract x (split S over tp) and xd (split D over tp): they are "
	             "spread differently; gather or reduce one first");
	expect_error(XS "  y = x - 1;\n  out y;\n", "expected a tensor, not the number 1");
	expect_error(XS "  y = x + 1;\n  out y;\n", "expected a tensor, not the number 1");
	expect_error(XS "  y = scale(x, x);\n  out y;\n", "the factor of scale must be a number, such as 0.5");
}

static void
test_nonlinear(void)
{
	const char *p = "  in xd : [B, S, D] split D over tp;\n  weight wr : [D, D] split 0 over tp;\n"
	                "  p = xd @ wr;\n";
	char buf[512];
	ShRun r;

	snprintf(buf, sizeof buf, "%s  y = gelu(p);\n  out y;\n", p);
	expect_error(buf, "gelu of a partial sum: reduce it first (reduce_scatter or all_reduce)");
	snprintf(buf, sizeof buf, "%s  y = softmax(p);\n  out y;\n", p);
	expect_error(buf, "softmax of a partial sum: reduce it first (reduce_scatter or all_reduce)");
	expect_error("  in xd : [B, S, D] split D over tp;\n  y = layernorm(xd);\n  out y;\n",
	             "layernorm needs the whole last dimension, but xd is split along D over "
	             "tp: all_gather it first");
	expect_error(XS "  weight g : [S];\n  y = rmsnorm(x, g);\n  out y;\n",
	             "the gamma of rmsnorm must have shape [128], but g has [256]");
	expect_error(XS "  weight g : [D];\n  weight b : [D] split 0 over tp;\n"
	             "  y = layernorm(x, g, b);\n  out y;\n",
	             "the beta of layernorm must be replicated, but b is split along D over tp");
	expect_error(XS "  y = layernorm(x, x, x, x);\n  out y;\n",
	             "layernorm takes 1 to 3 arguments, but 4 were given");
	expect_error(XS "  y = gelu(x, x);\n  out y;\n", "gelu takes 1 argument, but 2 were given");
	expect_error(XS "  y = gleu(x);\n  out y;\n", "unknown function 'gleu'; did you mean 'gelu'?");
	expect_error(XS "  y = gelu(m = 2);\n  out y;\n",
	             "'m = ...' is a schedule option; an op takes plain arguments");
	Graph *g = expect_ok(&r, XS "  weight g : [D];\n  a = layernorm(x, g, g);\n  b = softmax(x);\n"
	                     "  c = silu(relu(x));\n  out a, b, c;\n");
	CU_ASSERT(is_split(sh_val(g, "a"), 1, "tp"));
	CU_ASSERT_EQUAL(sh_val(g, "a")->def->nin, 3);
	CU_ASSERT(is_split(sh_val(g, "c"), 1, "tp"));
	sh_done(&r);
}

static void
test_heads(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS XR "  weight wq : [D, D] split 1 over tp;\n"
	                     "  q = split_heads(xr @ wq, H);\n  s = split_heads(x, H);\n"
	                     "  m = merge_heads(q);\n  n = merge_heads(s);\n  out m, n;\n");
	Value *q = sh_val(g, "q"), *s = sh_val(g, "s"), *m = sh_val(g, "m"), *n = sh_val(g, "n");

	CU_ASSERT(SHAPE(q, 2, 8, 256, 16));
	CU_ASSERT(is_split(q, 1, "tp"));
	CU_ASSERT_STRING_EQUAL(q->label[1], "H");
	CU_ASSERT_STRING_EQUAL(q->label[2], "S");
	CU_ASSERT_STRING_EQUAL(q->label[3], "D/H");
	CU_ASSERT_EQUAL(q->def->a.heads, 8);
	CU_ASSERT(is_split(s, 2, "tp"));
	CU_ASSERT(SHAPE(m, 2, 256, 128));
	CU_ASSERT(is_split(m, 2, "tp"));
	CU_ASSERT_STRING_EQUAL(m->label[2], "D");
	CU_ASSERT(is_split(n, 1, "tp"));
	sh_done(&r);
	/* a split of S stays on S: the heads need not divide over the group
	 * (split_heads once demanded it whenever the split was on S or D) */
	g = expect_ok(&r, XS "  q = split_heads(x, 2);\n  y = merge_heads(q);\n  out q, y;\n");
	q = sh_val(g, "q");
	CU_ASSERT(SHAPE(q, 2, 2, 256, 64));
	CU_ASSERT(is_split(q, 2, "tp"));
	CU_ASSERT(is_split(sh_val(g, "y"), 1, "tp"));
	sh_done(&r);
	expect_error(XS "  y = split_heads(x, 3);\n  out y;\n",
	             "split_heads: D (128) does not divide into 3 heads");
	expect_error("  in x : [B, S, D] split D over tp;\n  y = split_heads(x, 2);\n  out y;\n",
	             "split_heads: 2 heads do not divide evenly over group tp (4)");
	expect_error(XS "  y = split_heads(x, 0);\n  out y;\n",
	             "split_heads needs 1 to 2147483647 heads, but 0 is 0");
	expect_error("  in x : [S, D];\n  y = merge_heads(x);\n  out y;\n",
	             "merge_heads needs [..., H, S, Dh], but x has 2 dimensions");
	expect_error("  in x : [B, H, S, D] split D over tp;\n  y = merge_heads(x);\n  out y;\n",
	             "merge_heads needs whole heads, but x is split along D over tp");
}

static void
test_attention(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, "  in q : [B, H, S, D] split S over tp;\n  in k : [B, H, S, D];\n"
	                     "  in qh : [B, H, S, D] split H over tp;\n  in kh : [B, H, S, D] split H over tp;\n"
	                     "  a = attention(q, k, k, causal);\n  b = attention(qh, kh, kh);\n"
	                     "  c = attention(k, k, k);\n  out a, b, c;\n");

	CU_ASSERT(is_split(sh_val(g, "a"), 2, "tp"));
	CU_ASSERT(sh_val(g, "a")->def->a.causal);
	CU_ASSERT(is_split(sh_val(g, "b"), 1, "tp"));
	CU_ASSERT(!sh_val(g, "b")->def->a.causal);
	CU_ASSERT_EQUAL(sh_val(g, "c")->dist.p[0].kind, DI_REPL);
	sh_done(&r);
	expect_error("  in q : [B, H, S, D] split S over tp;\n  y = attention(q, q, q);\n  out y;\n",
	             "attention needs the whole keys and values along the sequence: all_gather them first");
	expect_error("  in q : [B, H, S, D];\n  in k : [B, H, 64, D];\n"
	             "  y = attention(q, k, k, causal);\n  out y;\n",
	             "causal attention needs no more queries than keys (the last query sees "
	             "every key), but has 256 and 64");
	expect_error("  in q : [B, H, S, D];\n  in k : [B, H, S, 64];\n"
	             "  y = attention(q, k, k);\n  out y;\n",
	             "attention shapes [2,8,256,128], [2,8,256,64] and [2,8,256,64] do not match: "
	             "q must be [..., H, Sq, Dh] and k, v [..., Hk, Sk, Dh] with Hk dividing H");
	expect_error("  in q : [B, H, S, D] split S over tp;\n  in k : [B, H, S, D] split H over tp;\n"
	             "  y = attention(q, k, k);\n  out y;\n",
	             "attention operands are split differently: q (split S over tp), "
	             "k (split H over tp), k (split H over tp)");
	expect_error("  in q : [B, H, S, D];\n  y = attention(q, q, q, noncausal);\n  out y;\n",
	             "the fourth argument of attention can only be 'causal'");
}

static void
test_scan(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, "  in x : [B, S, D] split D over tp;\n  a = scan(x, S, 0.9);\n"
	                     "  b = scan(x, 1);\n  out a, b;\n");

	CU_ASSERT_EQUAL(sh_val(g, "a")->def->a.scan.dim, 1);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "a")->def->a.scan.decay, 0.9, 0);
	CU_ASSERT_DOUBLE_EQUAL(sh_val(g, "b")->def->a.scan.decay, 0.5, 0);
	CU_ASSERT(is_split(sh_val(g, "a"), 2, "tp"));
	sh_done(&r);
	expect_error(XS "  y = scan(x, S);\n  out y;\n", "scan along S needs the whole sequence, "
	             "but x is split along S over tp: all_gather it first");
	expect_error(XS "  y = scan(x, T);\n  out y;\n", "x has no dimension named 'T'");
	expect_error(XS "  y = scan(x, S, x);\n  out y;\n",
	             "the decay of scan must be a number, such as 0.9");
}

static void
test_collectives(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS "  in xd : [B, S, D] split D over tp;\n"
	                     "  weight wr : [D, D] split 0 over tp;\n"
	                     "  ag = all_gather(x, S);\n  p = xd @ wr;\n  rs = reduce_scatter(p, 1);\n"
	                     "  ar = all_reduce(p);\n  a2 = all_to_all(x, S, D);\n  out ag, rs, ar, a2;\n");
	Value *ag = sh_val(g, "ag"), *rs = sh_val(g, "rs"), *ar = sh_val(g, "ar"), *a2 = sh_val(g, "a2");

	CU_ASSERT_EQUAL(ag->dist.p[0].kind, DI_REPL);
	CU_ASSERT_EQUAL(ag->def->a.coll.dim, 1);
	CU_ASSERT_STRING_EQUAL(ag->def->a.coll.group->name, "tp");
	CU_ASSERT(is_split(rs, 1, "tp"));
	CU_ASSERT_EQUAL(rs->def->a.coll.dim, 1);
	CU_ASSERT_EQUAL(ar->dist.p[0].kind, DI_REPL);
	CU_ASSERT_EQUAL(ar->def->a.coll.dim, -1);
	CU_ASSERT(is_split(a2, 2, "tp"));
	CU_ASSERT_EQUAL(a2->def->a.coll.dim, 1);
	CU_ASSERT_EQUAL(a2->def->a.coll.dim2, 2);
	sh_done(&r);

	expect_error(XR "  y = all_gather(xr, S);\n  out y;\n",
	             "all_gather along S needs xr split along S, but xr is replicated");
	expect_error(XS "  y = all_gather(x, D);\n  out y;\n",
	             "all_gather along D needs x split along D, but x is split along S over tp");
	expect_error(XS "  y = reduce_scatter(x, S);\n  out y;\n",
	             "reduce_scatter needs a partial sum, but x is split along S over tp");
	expect_error("  in xd : [B, 250, D] split D over tp;\n  weight wr : [D, D] split 0 over tp;\n"
	             "  y = reduce_scatter(xd @ wr, 1);\n  out y;\n",
	             "dimension 1 of xd @ wr (250) does not divide evenly over group tp (4)");
	expect_error(XR "  y = all_reduce(xr);\n  out y;\n",
	             "all_reduce needs a partial sum, but xr is replicated");
	expect_error(XS "  y = all_to_all(x, S, S);\n  out y;\n",
	             "all_to_all needs two different dimensions");
	expect_error(XS "  y = all_to_all(x, D, S);\n  out y;\n",
	             "all_to_all from D needs x split along D, but x is split along S over tp");
	expect_error("  in x : [B, S, 6] split S over tp;\n  y = all_to_all(x, S, 2);\n  out y;\n",
	             "dimension 2 of x (6) does not divide evenly over group tp (4)");
	expect_error("  in xd : [B, S, D] split D over tp;\n  weight wr : [D, D] split 0 over tp;\n"
	             "  p = xd @ wr;\n  out p;\n",
	             "output p is a partial sum over tp: reduce it first (reduce_scatter or all_reduce)");
}

/* ---- layers ---- */

#define MLP "layer mlp(x) {\n  weight w1 : [D, F] split F over tp;\n" \
            "  weight w2 : [F, D] split F over tp;\n  xa = all_gather(x, S);\n" \
            "  h = gelu(xa @ w1);\n  y = reduce_scatter(h @ w2, S);\n  return y;\n}\n"

static void
test_layers(void)
{
	ShRun r;
	Graph *g = sh_build(&r, MLP "layer two(x) { return mlp(mlp(x)); }\n"
	                    HEAD XS "  y1 = mlp(x);\n  y2 = two(y1);\n  y = repeat(2, mlp, y2);\n"
	                    "  out y;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "mlp0.w1"));
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "mlp0.h"));
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "two0.mlp1.w2"));
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "two0.mlp2.xa"));
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "mlp3.w1"));
	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "mlp4.w1"));
	CU_ASSERT_PTR_NULL(sh_val(g, "mlp5.w1"));
	CU_ASSERT_EQUAL(g->weights.n, 10);
	Value *h = sh_val(g, "two0.mlp1.h");
	CU_ASSERT_STRING_EQUAL(h->def->layer, "two0.mlp1");
	CU_ASSERT_STRING_EQUAL(h->def->lname, "mlp");
	CU_ASSERT_PTR_NULL(sh_val(g, "x")->def->layer);
	/* y1 names the value the layer returned: mlp0.y */
	CU_ASSERT_PTR_EQUAL(((Value *)g->outputs.v[0])->def->in[0]->def->in[0]->def->layer,
	                    sh_val(g, "mlp4.h")->def->layer);
	CU_ASSERT(is_split(g->outputs.v[0], 1, "tp"));
	sh_done(&r);
}

static void
test_layer_errors(void)
{
	ShRun r;

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer a(x) { return b(x); }\nlayer b(x) { return a(x); }\n"
	                            "model m { in x : [2]; y = a(x); out y; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(r.err,
	    "t.cf:2:21: error: recursive layer call: a -> b -> a\n"
	    " layer b(x) { return a(x); }\n"
	    "                     ^~~~\n"
	    "t.cf:1:21: note: in layer b, called here\n"
	    " layer a(x) { return b(x); }\n"
	    "                     ^~~~\n"
	    "t.cf:3:27: note: in layer a, called here\n"
	    " model m { in x : [2]; y = a(x); out y; }\n"
	    "                           ^~~~\n");
	sh_done(&r);

	/* an error inside a layer is told once, not once per call */
	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x) { return gelu(x @ w); }\n"
	                            "model m { in x : [2, 2]; a = l(x); b = l(x); c = l(a); out c; }\n", NULL));
	CU_ASSERT_EQUAL(r.d.nerr, 1);
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "unknown name 'w'");
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x) { y = x; }\n"
	                            "model m { in x : [2]; a = relu(x); out a; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "layer l does not return a value");
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, MLP HEAD XS "  y = mlp(x, x);\n  out y;\n}\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "layer mlp takes 1 argument, but 2 were given");
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x) { return relu(x + y); }\n"
	                            "model m { in x : [2]; in y : [2]; a = l(x); out a; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "unknown name 'y'");
	CU_ASSERT(strstr(r.err, "note: 'y' is a tensor of model m; a layer sees only its "
	                 "parameters and its own tensors") != NULL);
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x, z) { return x; }\n"
	                            "model m { in x : [2]; a = repeat(2, l, x); out a; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "repeat needs a layer of one argument, but l takes 2");
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer l(x) { in z : [2]; return x; }\n"
	                            "model m { in x : [2]; a = relu(l(x)); out a; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "layer l cannot declare inputs: pass z as a parameter");
	CU_ASSERT_EQUAL(r.d.nerr, 1);
	sh_done(&r);

	CU_ASSERT_PTR_NULL(sh_build(&r, "layer gelu(x) { return x; }\n"
	                            "model m { in x : [2]; a = relu(x); out a; }\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "layer gelu has the name of a built-in function");
	sh_done(&r);
}

/* ---- names of temporaries ---- */

static void
test_temp_names(void)
{
	ShRun r;
	Graph *g = expect_ok(&r, XS "  weight w : [D, D];\n  t1 = gelu(relu(x) @ w) + x;\n"
	                     "  y = silu(relu(t1));\n  out y;\n");

	CU_ASSERT_PTR_NOT_NULL(sh_val(g, "t2"));   /* relu(x): t1 is the user's */
	CU_ASSERT_EQUAL(sh_val(g, "t2")->def->op, OP_RELU);
	CU_ASSERT_EQUAL(sh_val(g, "t3")->def->op, OP_MATMUL);
	CU_ASSERT_EQUAL(sh_val(g, "t4")->def->op, OP_GELU);
	CU_ASSERT_EQUAL(sh_val(g, "t1")->def->op, OP_ADD);
	CU_ASSERT_EQUAL(sh_val(g, "t5")->def->op, OP_RELU);
	CU_ASSERT_EQUAL(sh_val(g, "y")->def->op, OP_SILU);
	CU_ASSERT_EQUAL(sh_val(g, "y")->role, R_OUT);
	for (int i = 0; i < g->nodes.n; i++)
		CU_ASSERT_EQUAL(((Node *)g->nodes.v[i])->id, i);
	sh_done(&r);
}

/* The op that made v, and its inputs by name (NULL: none). */
static int
made_by(const Value *v, OpKind op, const char *in0, const char *in1)
{
	const Node *n = v ? v->def : NULL;
	return n && n->op == op && (!in0 || !strcmp(n->in[0]->name, in0)) &&
	       (!in1 || (n->nin > 1 && !strcmp(n->in[1]->name, in1)));
}

/* silu(A) * B and B * silu(A) become swiglu(A, B) where the silu is an
 * unnamed temporary read there alone, of the same layer instance, and
 * B has A's shape and type; a named silu, a broadcast B, a silu read
 * twice, or one a layer returns stay silu then mul. The nodes are
 * numbered again and the temporaries named after the fusion, without
 * gaps. */
static void
test_swiglu_fusion(void)
{
	ShRun r;
	Graph *g = sh_build(&r, "layer act(x) {\n  return silu(x);\n}\n" HEAD XS XR
	                    "  in bias : [D];\n  weight w : [D, D];\n"
	                    "  y1 = silu(x @ w) * x;\n  y2 = xr * silu(xr);\n"
	                    "  s = silu(x);\n  y3 = s * x;\n  y4 = silu(x) * bias;\n"
	                    "  y5 = act(x) * x;\n  y6 = swiglu(xr, xr);\n"
	                    "  out y1, y2, y3, y4, y5, y6;\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT(made_by(sh_val(g, "y1"), OP_SWIGLU, "t1", "x"));
	CU_ASSERT(made_by(sh_val(g, "t1"), OP_MATMUL, "x", "w"));
	CU_ASSERT(made_by(sh_val(g, "y2"), OP_SWIGLU, "xr", "xr"));
	CU_ASSERT(made_by(sh_val(g, "s"), OP_SILU, "x", NULL));
	CU_ASSERT(made_by(sh_val(g, "y3"), OP_MUL, "s", "x"));
	CU_ASSERT(made_by(sh_val(g, "t2"), OP_SILU, "x", NULL));
	CU_ASSERT(made_by(sh_val(g, "y4"), OP_MUL, "t2", "bias"));
	CU_ASSERT(made_by(sh_val(g, "y5"), OP_MUL, NULL, "x"));
	CU_ASSERT(made_by(sh_val(g, "y5")->def->in[0], OP_SILU, "x", NULL));
	CU_ASSERT(made_by(sh_val(g, "y6"), OP_SWIGLU, "xr", "xr"));
	CU_ASSERT(is_split(sh_val(g, "y1"), 1, "tp"));
	CU_ASSERT(sh_val(g, "t3") == NULL);
	for (int i = 0; i < g->nodes.n; i++)
		CU_ASSERT_EQUAL(((Node *)g->nodes.v[i])->id, i);
	for (int i = 0; i < g->values.n; i++) {
		const Value *v = g->values.v[i];
		CU_ASSERT_EQUAL(v->id, i);
		for (int j = 0; j < v->uses.n; j++) { /* every use is a live reader */
			const Node *u = v->uses.v[j];
			CU_ASSERT(u->id < g->nodes.n && g->nodes.v[u->id] == u);
			CU_ASSERT(u->in[0] == v || u->in[1] == v);
		}
	}
	sh_done(&r);
}

/* ---- schedules ---- */

static void
test_schedules(void)
{
	ShRun r;
	Graph *g = sh_build(&r, MLP HEAD XS "  y1 = mlp(x);\n  y2 = mlp(y1);\n"
	                    "  xa = all_gather(y2, S);\n  out xa;\n"
	                    "  schedule {\n    default slice(2);\n    mlp.y: fuse(bidir, m = 2);\n"
	                    "    y2: fuse(pairwise, split = query);\n    xa: vanilla;\n  }\n}\n", NULL);

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(g->defsched.kind, SK_SLICE);
	CU_ASSERT_EQUAL(g->defsched.k, 2);
	Node *ag0 = sh_val(g, "mlp0.xa")->def, *rs0 = sh_val(g, "mlp0.y")->def;
	Node *rs1 = sh_val(g, "mlp1.y")->def, *xa = sh_val(g, "xa")->def;
	CU_ASSERT_PTR_EQUAL(ag0->sched, &g->defsched);
	CU_ASSERT_EQUAL(rs0->sched->kind, SK_FUSE);
	CU_ASSERT_EQUAL(rs0->sched->topo, TP_BIDIR);
	CU_ASSERT_EQUAL(rs0->sched->m, 2);
	CU_ASSERT_EQUAL(rs1->sched->topo, TP_PAIRWISE); /* the tensor key wins */
	CU_ASSERT(rs1->sched->query);
	CU_ASSERT_EQUAL(rs1->sched->m, 1);
	CU_ASSERT_EQUAL(xa->sched->kind, SK_VANILLA);
	sh_done(&r);

	/* split = query applies to an all_reduce too (lowering runs it; sema
	 * once refused it when written for one) */
	g = expect_ok(&r, XS "  weight wq : [D, D] split 1 over tp;\n  weight w : [D, D] split 0 over tp;\n"
	              "  q = split_heads(all_gather(x, S) @ wq, H);\n"
	              "  y = all_reduce(merge_heads(attention(q, q, q)) @ w);\n  out y;\n"
	              "  schedule { y: fuse(ring, split = query); }\n");
	CU_ASSERT(sh_val(g, "y")->def->sched->query);
	sh_done(&r);

	g = expect_ok(&r, XS "  y = all_gather(x, S);\n  out y;\n");
	CU_ASSERT_EQUAL(g->defsched.kind, SK_FUSE);
	CU_ASSERT_EQUAL(g->defsched.topo, TP_RING);
	CU_ASSERT_EQUAL(g->defsched.m, 1);
	CU_ASSERT_PTR_EQUAL(sh_val(g, "y")->def->sched, &g->defsched);
	sh_done(&r);
}

static void
test_schedule_errors(void)
{
	const char *y = XS "  y = all_gather(x, S);\n  z = relu(y);\n  out z;\n";
	char buf[1024];

#define SCHED(s, msg) do { snprintf(buf, sizeof buf, "%s  schedule { %s }\n", y, s); \
		expect_error(buf, msg); } while (0)
	SCHED("z: vanilla;", "z is not the result of a collective");
	SCHED("w: vanilla;", "unknown name 'w'");
	SCHED("S: vanilla;", "'S' is a size, not a tensor");
	SCHED("default vanilla; default auto;", "a second default schedule");
	SCHED("y: vanilla; y: auto;", "a second schedule for y");
	SCHED("y: fast;", "unknown schedule 'fast': expected vanilla, slice(k), "
	      "fuse(ring|bidir|pairwise [, m = K] [, split = query]) or auto");
	SCHED("y: slice(0);", "the count of slice(k) must be at least 1, but is 0");
	SCHED("y: slice;", "slice takes one argument, the number of chunks: slice(4)");
	SCHED("y: vanilla(2);", "vanilla takes no arguments");
	SCHED("y: fuse;", "fuse needs a topology first: fuse(ring), fuse(bidir) or fuse(pairwise)");
	SCHED("y: fuse(star);", "fuse needs a topology first: fuse(ring), fuse(bidir) or fuse(pairwise)");
	SCHED("y: fuse(ring, m = 0);", "m must be at least 1, but is 0");
	SCHED("y: fuse(ring, k = 2);", "unknown fuse option 'k': expected m = K or split = query");
	SCHED("y: fuse(ring, m = 2, m = 2);", "fuse option 'm' is given twice");
	SCHED("y: fuse(ring, split = keys);", "split = keys: the only split is split = query");
	SCHED("y: fuse(ring, bidir);", "fuse takes one topology, then the options m = K and split = query");
	SCHED("y: fuse(ring, m = 3);", "fuse(ring, m = 3) on y needs S (256) to divide into 12 slices");
	SCHED("y: fuse(bidir, m = 64);", "fuse(bidir, m = 64) on y needs S (256) to divide into 512 slices");
	SCHED("y: slice(3);", "slice(3) on y needs S (256) to divide into 12 slices");
	SCHED("default fuse(pairwise, m = 3);",
	      "fuse(pairwise, m = 3) on y needs S (256) to divide into 12 slices");
	SCHED("nope.y: vanilla;", "unknown layer 'nope'");
	SCHED("y: fuse(ring, split = query);", "split = query splits the attention feeding a "
	      "reduce_scatter or an all_reduce, but y is the result of all_gather");
#undef SCHED
	expect_error("  in xl : [B, 1040, D] split 1 over tp;\n  y = all_gather(xl, 1);\n  out y;\n"
	             "  schedule { y: fuse(ring, m = 65); }\n",
	             "fuse(ring, m = 65) on y needs 65 slices per rank, but at most 64 are supported");
	ShRun r;
	CU_ASSERT_PTR_NULL(sh_build(&r, MLP HEAD XS "  y = mlp(x);\n  out y;\n"
	                            "  schedule { mlp.h: vanilla; mlp.q: vanilla; }\n}\n", NULL));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "mlp.h is not the result of a collective");
	CU_ASSERT(strstr(r.err, "error: layer mlp has no tensor named 'q'") != NULL);
	CU_ASSERT_EQUAL(r.d.nerr, 2);
	sh_done(&r);
}

static void
test_schedule_force(void)
{
	ShRun r;
	Arena *fa = arena_new();
	Diag fd;
	Src fs = {"--schedule", "fuse(bidir, m = 2)", 18};
	const char *text = HEAD XS "  y = all_gather(x, S);\n  out y;\n  schedule { y: vanilla; }\n}\n";

	diag_init(&fd, &fs, stderr);
	Options o = {.force = parse_choice(fa, &fd, &fs)};
	CU_ASSERT_PTR_NOT_NULL_FATAL(o.force);
	Graph *g = sh_build(&r, text, &o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(g->defsched.kind, SK_FUSE);
	CU_ASSERT_EQUAL(g->defsched.topo, TP_BIDIR);
	CU_ASSERT_EQUAL(g->defsched.m, 2);
	CU_ASSERT_PTR_EQUAL(sh_val(g, "y")->def->sched, &g->defsched);
	sh_done(&r);

	/* a collective's result the user never named is told by its
	 * expression, not by its temporary's name */
	Src ss = {"--schedule", "slice(3)", 8};
	o.force = parse_choice(fa, &fd, &ss);
	CU_ASSERT_PTR_NULL(sh_build(&r, HEAD XS "  y = relu(all_gather(x, S));\n  out y;\n}\n", &o));
	CU_ASSERT_STRING_EQUAL(first_msg(&r), "--schedule slice(3) on all_gather(x, S) needs S "
	                       "(256) to divide into 12 slices");
	sh_done(&r);

	Src bs = {"--schedule", "fuse(star)", 10};
	o.force = parse_choice(fa, &fd, &bs);
	CU_ASSERT_PTR_NULL(sh_build(&r, text, &o));
	CU_ASSERT_STRING_EQUAL(r.err, "cfc: error: --schedule: fuse needs a topology first: "
	                       "fuse(ring), fuse(bidir) or fuse(pairwise)\n");
	sh_done(&r);
	arena_free(fa);
}

void test_sema_register(void);

void
test_sema_register(void)
{
	CU_pSuite s = CU_add_suite("sema", NULL, NULL);

	CU_add_test(s, "size precedence", test_size_precedence);
	CU_add_test(s, "size errors", test_size_errors);
	CU_add_test(s, "size caret", test_size_caret);
	CU_add_test(s, "expression depth", test_depth);
	CU_add_test(s, "defines", test_defines);
	CU_add_test(s, "tensor declarations", test_tensor_decls);
	CU_add_test(s, "tensor errors", test_tensor_errors);
	CU_add_test(s, "duplicate note", test_duplicate_note);
	CU_add_test(s, "program errors", test_program_errors);
	CU_add_test(s, "matmul", test_matmul);
	CU_add_test(s, "matmul transpose", test_matmul_transpose);
	CU_add_test(s, "matmul errors", test_matmul_errors);
	CU_add_test(s, "elementwise", test_elementwise);
	CU_add_test(s, "elementwise errors", test_elementwise_errors);
	CU_add_test(s, "nonlinear", test_nonlinear);
	CU_add_test(s, "heads", test_heads);
	CU_add_test(s, "attention", test_attention);
	CU_add_test(s, "scan", test_scan);
	CU_add_test(s, "collectives", test_collectives);
	CU_add_test(s, "layers", test_layers);
	CU_add_test(s, "layer errors", test_layer_errors);
	CU_add_test(s, "temporary names", test_temp_names);
	CU_add_test(s, "silu(A) * B fused into swiglu(A, B)", test_swiglu_fusion);
	CU_add_test(s, "schedules", test_schedules);
	CU_add_test(s, "schedule errors", test_schedule_errors);
	CU_add_test(s, "schedule force", test_schedule_force);
}
