/* Unit tests of the scanner and the parser: tree shapes, precedence,
 * locations, and the exact text of syntax diagnostics. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"

typedef struct Run {
	Arena *a;
	Program *p;
	char *err; /* diagnostics printed */
	size_t errlen;
} Run;

static Run
parse_src(Src src)
{
	Run r = {arena_new(), NULL, NULL, 0};
	Diag d;
	FILE *f = open_memstream(&r.err, &r.errlen);

	diag_init(&d, &src, f);
	r.p = parse_program(r.a, &d, &src);
	fclose(f);
	return r;
}

static Run
parse(const char *text)
{
	return parse_src((Src){"t.cf", text, strlen(text)});
}

static void
done(Run *r)
{
	arena_free(r->a);
	free(r->err);
}

static Stmt *
stmt(Run *r, int decl, int i)
{
	Decl *d = r->p->decls.v[decl];
	return d->body.v[i];
}

/* The expression of statement 0 of the model "model m { y = E; }". */
static char *
expr_text(const char *e)
{
	char text[256], *out = NULL;
	size_t n;
	snprintf(text, sizeof text, "model m { y = %s; }", e);
	Run r = parse(text);
	FILE *f = open_memstream(&out, &n);
	if (r.p)
		ast_print_expr(f, stmt(&r, 0, 0)->u.def.val);
	fclose(f);
	done(&r);
	return out;
}

static void
check_expr(const char *in, const char *want)
{
	char *got = expr_text(in);
	CU_ASSERT_STRING_EQUAL(got, want);
	free(got);
}

static void
test_model(void)
{
	Run r = parse("// c\nmodel mlp {\n  size B = 2, S = 4*B;\n  group tp = 2;\n"
	              "  type f64;\n  in x : [B, S] split S over tp;\n"
	              "  weight w : bf16 [S, S];\n  y = x @ w;\n  out y;\n}\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r.p);
	CU_ASSERT_EQUAL(r.p->decls.n, 1);
	Decl *d = r.p->decls.v[0];
	CU_ASSERT_STRING_EQUAL(d->name, "mlp");
	CU_ASSERT_EQUAL(d->kind, D_MODEL);
	CU_ASSERT_EQUAL(d->body.n, 8);
	CU_ASSERT_EQUAL(stmt(&r, 0, 0)->kind, S_SIZE);
	CU_ASSERT_EQUAL(stmt(&r, 0, 1)->kind, S_SIZE);
	CU_ASSERT_STRING_EQUAL(stmt(&r, 0, 1)->u.def.name, "S");
	CU_ASSERT_EQUAL(stmt(&r, 0, 1)->u.def.nloc.line, 3);
	CU_ASSERT_EQUAL(stmt(&r, 0, 1)->u.def.nloc.col, 15);
	CU_ASSERT_EQUAL(stmt(&r, 0, 2)->kind, S_GROUP);
	CU_ASSERT_EQUAL(stmt(&r, 0, 3)->u.type.t, DT_F64);
	Stmt *x = stmt(&r, 0, 4);
	CU_ASSERT_EQUAL(x->kind, S_TENSOR);
	CU_ASSERT_EQUAL(x->u.tensor.role, R_IN);
	CU_ASSERT_EQUAL(x->u.tensor.shape.n, 2);
	CU_ASSERT_EQUAL_FATAL(x->u.tensor.splits.n, 1);
	const Expr *sp = x->u.tensor.splits.v[0];
	CU_ASSERT_STRING_EQUAL(sp->u.bin.r->u.name, "tp");
	CU_ASSERT_STRING_EQUAL(sp->u.bin.l->u.name, "S");
	Stmt *w = stmt(&r, 0, 5);
	CU_ASSERT_EQUAL(w->u.tensor.dtype, DT_BF16);
	CU_ASSERT_EQUAL(w->u.tensor.splits.n, 0);
	CU_ASSERT_EQUAL(stmt(&r, 0, 7)->kind, S_OUT);
	done(&r);
}

static void
test_layer_and_schedule(void)
{
	Run r = parse("layer f(a, b) { return a + b; }\nmodel m {\n"
	              "  schedule { default fuse(ring); f.y: fuse(bidir, m = 2);"
	              " z: slice(4); w: fuse(ring, split = query); }\n}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r.p);
	Decl *l = r.p->decls.v[0];
	CU_ASSERT_EQUAL(l->kind, D_LAYER);
	CU_ASSERT_EQUAL(l->params.n, 2);
	CU_ASSERT_EQUAL(((Stmt *)l->body.v[0])->kind, S_RETURN);
	CU_ASSERT_EQUAL(stmt(&r, 1, 0)->kind, S_SCHED);
	CU_ASSERT_PTR_NULL(stmt(&r, 1, 0)->u.sched.key);
	CU_ASSERT_STRING_EQUAL(stmt(&r, 1, 1)->u.sched.key, "f.y");
	Expr *c = stmt(&r, 1, 1)->u.sched.choice;
	CU_ASSERT_EQUAL(c->kind, E_CALL);
	CU_ASSERT_EQUAL(c->u.call.args.n, 2);
	CU_ASSERT_EQUAL(((Expr *)c->u.call.args.v[1])->kind, E_KWARG);
	Expr *q = ((Expr *)stmt(&r, 1, 3)->u.sched.choice->u.call.args.v[1]);
	CU_ASSERT_STRING_EQUAL(q->u.kw.name, "split");
	done(&r);
}

static void
test_precedence(void)
{
	check_expr("a + b * c", "a + b * c");
	check_expr("(a + b) * c", "(a + b) * c");
	check_expr("a - b - c", "a - b - c");
	check_expr("a - (b - c)", "a - (b - c)");
	check_expr("2 ^ 3 ^ 2", "2 ^ (3 ^ 2)");
	check_expr("-x", "-x");
	check_expr("x.T @ w + b", "x.T @ w + b");
	check_expr("gelu(x @ w1) @ w2", "gelu(x @ w1) @ w2");
	check_expr("0.5 * x", "0.5 * x");
	check_expr("f()", "f()");
	check_expr("1e3", "1000");
}

static void
check_error(const char *text, const char *want)
{
	Run r = parse(text);
	CU_ASSERT_PTR_NULL(r.p);
	CU_ASSERT_STRING_EQUAL(r.err, want);
	if (strcmp(r.err, want))
		fprintf(stderr, "\ngot:\n%swant:\n%s", r.err, want);
	done(&r);
}

static void
test_errors(void)
{
	check_error("model m {\n  size B = 2\n  group tp = 2;\n}\n",
	            "t.cf:2:13: error: syntax error: expected ';' at the end of the line\n"
	            "   size B = 2\n             ^\n");
	check_error("model in { }",
	            "t.cf:1:7: error: syntax error: unexpected 'in', expecting identifier\n"
	            " model in { }\n       ^~\n");
	check_error("model m { size B = 2; $ }",
	            "t.cf:1:23: error: unexpected character '$'\n"
	            " model m { size B = 2; $ }\n                       ^\n");
	check_error("model m {\n/* open",
	            "t.cf:2:1: error: unterminated comment\n /* open\n ^~\n");
	check_error("", "t.cf:1:1: error: empty input: expected a model declaration "
	            "such as 'model m { ... }'\n \n ^\n");
	check_error("model m { y = x.U; }",
	            "t.cf:1:17: error: unknown member '.U': only '.T' (transpose) is "
	            "defined\n model m { y = x.U; }\n                 ^\n");
}

/* Two errors in one file are both reported: recovery at ';'. */
static void
test_recovery(void)
{
	Run r = parse("model m {\n  size = 2;\n  group tp = ;\n  type f32;\n}");
	CU_ASSERT_PTR_NULL(r.p);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "t.cf:2:8:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "t.cf:3:14:"));
	done(&r);
}

static void
test_limits(void)
{
	size_t n = 2 * MAXNEST + 64;
	char *s = malloc(n + 64), *q = s;
	q += sprintf(q, "model m { y = ");
	for (int i = 0; i < MAXNEST + 1; i++)
		*q++ = '(';
	strcpy(q, "x; }");
	Run r = parse(s);
	CU_ASSERT_PTR_NULL(r.p);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "brackets nested too deeply"));
	done(&r);
	/* exactly MAXNEST is fine */
	q = s + sprintf(s, "model m { y = ");
	for (int i = 0; i < MAXNEST - 1; i++)
		*q++ = '(';
	*q++ = 'x';
	for (int i = 0; i < MAXNEST - 1; i++)
		*q++ = ')';
	strcpy(q, "; }");
	r = parse(s);
	CU_ASSERT_PTR_NOT_NULL(r.p);
	done(&r);
	free(s);
	r = parse("model m { size A = 9223372036854775808; }");
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "integer literal too large"));
	done(&r);
	r = parse("model m {\x01}");
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unexpected byte 0x01"));
	done(&r);
}

static void
test_binary(void)
{
	static const char bin[] = "model m {\n\0\x7f";
	Run r = parse_src((Src){"b.cf", bin, sizeof bin - 1});

	CU_ASSERT_PTR_NULL(r.p);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "b.cf:2:1: error: this is a binary file"));
	done(&r);
}

static void
test_choice(void)
{
	Arena *a = arena_new();
	Src src = {"--schedule", "fuse(bidir, m = 2)", 18};
	Diag d;
	char *err = NULL;
	size_t n;
	FILE *f = open_memstream(&err, &n);
	diag_init(&d, &src, f);
	Expr *e = parse_choice(a, &d, &src);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(e->kind, E_CALL);
	CU_ASSERT_STRING_EQUAL(e->u.call.name, "fuse");
	Src bad = {"--schedule", "fuse(", 5};
	d.src = &bad;
	CU_ASSERT_PTR_NULL(parse_choice(a, &d, &bad));
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "--schedule:1:6: error: syntax error"));
	free(err);
	arena_free(a);
}

void test_parse_register(void);

void
test_parse_register(void)
{
	CU_pSuite s = CU_add_suite("parse", NULL, NULL);
	CU_add_test(s, "model", test_model);
	CU_add_test(s, "layer and schedule", test_layer_and_schedule);
	CU_add_test(s, "precedence", test_precedence);
	CU_add_test(s, "syntax errors", test_errors);
	CU_add_test(s, "recovery", test_recovery);
	CU_add_test(s, "limits", test_limits);
	CU_add_test(s, "binary", test_binary);
	CU_add_test(s, "choice", test_choice);
}
