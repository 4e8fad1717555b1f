/* ast.c: AST builders called by the grammar actions, and the --emit=ast dump.
 * ensures: every node is allocated in the compilation's arena. */
#include <string.h>

#include "cf.h"

static Expr *
newexpr(Arena *a, ExprKind k, Loc l)
{
	Expr *e = arena_alloc(a, sizeof *e);

	e->kind = k;
	e->loc = l;
	return e;
}

Expr *
ast_int(Arena *a, Loc l, int64_t v)
{
	Expr *e = newexpr(a, E_INT, l);

	e->u.ival = v;
	return e;
}

Expr *
ast_float(Arena *a, Loc l, double v)
{
	Expr *e = newexpr(a, E_FLOAT, l);

	e->u.fval = v;
	return e;
}

Expr *
ast_name(Arena *a, Loc l, const char *s)
{
	Expr *e = newexpr(a, E_NAME, l);

	e->u.name = s;
	return e;
}

Expr *
ast_bin(Arena *a, Loc l, int op, Expr *x, Expr *y)
{
	Expr *e = newexpr(a, E_BIN, l);

	e->u.bin.op = op;
	e->u.bin.l = x;
	e->u.bin.r = y;
	return e;
}

Expr *
ast_un(Arena *a, Loc l, ExprKind k, Expr *x)
{
	Expr *e = newexpr(a, k, l);

	e->u.un = x;
	return e;
}

Expr *
ast_call(Arena *a, Loc l, Expr *name, Vec args)
{
	Expr *e = newexpr(a, E_CALL, l);

	e->u.call.name = name->u.name;
	e->u.call.nloc = name->loc;
	e->u.call.args = args;
	return e;
}

Expr *
ast_kwarg(Arena *a, Loc l, Expr *name, Expr *val)
{
	Expr *e = newexpr(a, E_KWARG, l);

	e->u.kw.name = name->u.name;
	e->u.kw.val = val;
	return e;
}

static Stmt *
newstmt(Arena *a, StmtKind k, Loc l)
{
	Stmt *s = arena_alloc(a, sizeof *s);

	s->kind = k;
	s->loc = l;
	return s;
}

Stmt *
ast_def(Arena *a, Loc l, StmtKind k, Expr *name, Expr *val)
{
	Stmt *s = newstmt(a, k, l);

	s->u.def.name = name->u.name;
	s->u.def.nloc = name->loc;
	s->u.def.val = val;
	return s;
}

Stmt *
ast_type(Arena *a, Loc l, DType t)
{
	Stmt *s = newstmt(a, S_TYPE, l);

	s->u.type.t = t;
	return s;
}

Stmt *
ast_tensor(Arena *a, Loc l, Role r, Expr *name, DType t, Vec shape,
           Vec splits, Vec gsplits)
{
	Stmt *s = newstmt(a, S_TENSOR, l);

	s->u.tensor.role = r;
	s->u.tensor.name = name->u.name;
	s->u.tensor.nloc = name->loc;
	s->u.tensor.dtype = t;
	s->u.tensor.shape = shape;
	s->u.tensor.splits = splits;
	s->u.tensor.gsplits = gsplits;
	return s;
}

Stmt *
ast_names(Arena *a, Loc l, StmtKind k, Vec names)
{
	Stmt *s = newstmt(a, k, l);

	s->u.names = names;
	return s;
}

Stmt *
ast_return(Arena *a, Loc l, Expr *e)
{
	Stmt *s = newstmt(a, S_RETURN, l);

	s->u.ret = e;
	return s;
}

/* key is NULL for `default`, an E_NAME "t", or an E_BIN '.' of two names. */
Stmt *
ast_sched(Arena *a, Loc l, Expr *key, Expr *choice)
{
	Stmt *s = newstmt(a, S_SCHED, l);

	if (key && key->kind == E_BIN)
		s->u.sched.key = arena_printf(a, "%s.%s", key->u.bin.l->u.name,
		                              key->u.bin.r->u.name);
	else if (key)
		s->u.sched.key = key->u.name;
	s->u.sched.kloc = key ? key->loc : l;
	s->u.sched.choice = choice;
	return s;
}

Stmt *
ast_sched_set(Arena *a, Loc l, Expr *name, Expr *val)
{
	Stmt *s = ast_sched(a, l, name, val);

	s->u.sched.set = 1;
	return s;
}

Decl *
ast_decl(Arena *a, Loc l, DeclKind k, Expr *name, Vec params, Vec body)
{
	Decl *d = arena_alloc(a, sizeof *d);

	d->kind = k;
	d->loc = l;
	d->name = name->u.name;
	d->nloc = name->loc;
	d->params = params;
	d->body = body;
	return d;
}

Vec
ast_list(Arena *a, Vec v, void *p)
{
	vec_push(a, &v, p);
	return v;
}

static int
prec(const Expr *e)
{
	if (e->kind != E_BIN)
		return 9;
	switch (e->u.bin.op) {
	case '+': case '-': return 1;
	case '^': return 3;
	default: return 2;
	}
}

/* Prints fully parenthesized where precedence needs it. */
void
ast_print_expr(FILE *f, const Expr *e)
{
	switch (e->kind) {
	case E_INT: fprintf(f, "%lld", (long long)e->u.ival); break;
	case E_FLOAT: fprintf(f, "%.17g", e->u.fval); break;
	case E_NAME: fputs(e->u.name, f); break;
	case E_NEG: fputc('-', f); ast_print_expr(f, e->u.un); break;
	case E_TRANS: ast_print_expr(f, e->u.un); fputs(".T", f); break;
	case E_KWARG:
		fprintf(f, "%s = ", e->u.kw.name);
		ast_print_expr(f, e->u.kw.val);
		break;
	case E_CALL:
		fprintf(f, "%s(", e->u.call.name);
		for (int i = 0; i < e->u.call.args.n; i++) {
			if (i)
				fputs(", ", f);
			ast_print_expr(f, e->u.call.args.v[i]);
		}
		fputc(')', f);
		break;
	case E_BIN: {
		int p = prec(e);
		int lp = prec(e->u.bin.l) < p, rp = prec(e->u.bin.r) <= p;
		if (lp) fputc('(', f);
		ast_print_expr(f, e->u.bin.l);
		if (lp) fputc(')', f);
		fprintf(f, " %c ", e->u.bin.op);
		if (rp) fputc('(', f);
		ast_print_expr(f, e->u.bin.r);
		if (rp) fputc(')', f);
		break;
	}
	}
}

/* "split B over dp, S over tp" */
static void
dump_splits(FILE *f, const char *word, const Vec *sp)
{
	for (int i = 0; i < sp->n; i++) {
		const Expr *e = sp->v[i];
		fputs(i ? ", " : word, f);
		ast_print_expr(f, e->u.bin.l);
		fprintf(f, " over %s", e->u.bin.r->u.name);
	}
}

static void
dump_tensor(FILE *f, const Stmt *s)
{
	fprintf(f, "%s %s :", role_name[s->u.tensor.role], s->u.tensor.name);
	if (s->u.tensor.dtype != DT_NONE)
		fprintf(f, " %s", dtype_name[s->u.tensor.dtype]);
	fputs(" [", f);
	for (int i = 0; i < s->u.tensor.shape.n; i++) {
		if (i)
			fputs(", ", f);
		ast_print_expr(f, s->u.tensor.shape.v[i]);
	}
	fputc(']', f);
	dump_splits(f, " split ", &s->u.tensor.splits);
	dump_splits(f, " grad split ", &s->u.tensor.gsplits);
}

static void
dump_stmt(FILE *f, const Stmt *s)
{
	fprintf(f, "  %d:%d: ", s->loc.line, s->loc.col);
	switch (s->kind) {
	case S_SIZE: case S_GROUP: case S_ASSIGN:
		fprintf(f, "%s%s = ", s->kind == S_SIZE ? "size " :
		        s->kind == S_GROUP ? "group " : "", s->u.def.name);
		ast_print_expr(f, s->u.def.val);
		break;
	case S_TYPE: fprintf(f, "type %s", dtype_name[s->u.type.t]); break;
	case S_TENSOR: dump_tensor(f, s); break;
	case S_OUT: case S_SAVE: case S_RECOMPUTE:
		fputs(s->kind == S_OUT ? "out" : s->kind == S_SAVE ? "save" : "recompute", f);
		for (int i = 0; i < s->u.names.n; i++)
			fprintf(f, "%s %s", i ? "," : "", ((Expr *)s->u.names.v[i])->u.name);
		break;
	case S_RETURN: fputs("return ", f); ast_print_expr(f, s->u.ret); break;
	case S_SCHED:
		fprintf(f, "schedule %s%s ", s->u.sched.key ? s->u.sched.key : "default",
		        s->u.sched.set ? " =" : ":");
		ast_print_expr(f, s->u.sched.choice);
		break;
	}
	fputs(";\n", f);
}

void
ast_dump(FILE *f, const Program *p)
{
	for (int i = 0; i < p->decls.n; i++) {
		const Decl *d = p->decls.v[i];

		fprintf(f, "%s %s", d->kind == D_MODEL ? "model" : "layer", d->name);
		if (d->kind == D_LAYER) {
			fputc('(', f);
			for (int j = 0; j < d->params.n; j++)
				fprintf(f, "%s%s", j ? ", " : "", ((Expr *)d->params.v[j])->u.name);
			fputc(')', f);
		}
		fprintf(f, " @%d:%d\n", d->loc.line, d->loc.col);
		for (int j = 0; j < d->body.n; j++)
			dump_stmt(f, d->body.v[j]);
	}
}

Vec
ast_concat(Arena *a, Vec v, Vec w)
{
	for (int i = 0; i < w.n; i++)
		vec_push(a, &v, w.v[i]);
	return v;
}

/* `.T` is the only member: the transpose of a matmul operand. */
Expr *
ast_member(Parse *p, Loc l, Expr *e, Expr *name)
{
	if (strcmp(name->u.name, "T") != 0)
		diag_error(p->diag, name->loc, "unknown member '.%s': only '.T' "
		           "(transpose) is defined", name->u.name);
	return ast_un(p->arena, l, E_TRANS, e);
}
