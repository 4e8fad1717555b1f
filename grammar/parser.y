/* parser.y: the pure, reentrant grammar of the .cf language.
 * Actions only build AST nodes (ast_*); all checking is in sema.c.
 * ensures: p->prog holds every declaration parsed; syntax errors are
 * reported with their location and parsing recovers at the next ';'. */
%code requires {
#include "cf.h"
#define CF_YYLTYPE Loc
#define CF_YYLTYPE_IS_DECLARED 1
#define CF_YYLTYPE_IS_TRIVIAL 1
#define YYLLOC_DEFAULT(Cur, Rhs, N) do { \
	if (N) { \
		(Cur).line = YYRHSLOC(Rhs, 1).line; \
		(Cur).col = YYRHSLOC(Rhs, 1).col; \
		(Cur).eline = YYRHSLOC(Rhs, N).eline; \
		(Cur).ecol = YYRHSLOC(Rhs, N).ecol; \
	} else { \
		(Cur).line = (Cur).eline = YYRHSLOC(Rhs, 0).eline; \
		(Cur).col = (Cur).ecol = YYRHSLOC(Rhs, 0).ecol; \
	} \
} while (0)
}

%code provides {
/* the names flex's bison-bridge expects */
#define YYSTYPE CF_YYSTYPE
#define YYLTYPE CF_YYLTYPE
int cf_yylex(CF_YYSTYPE *lval, Loc *lloc, void *scanner);
}

%code {
#include <string.h>
#define A (p->arena)
static void cf_yyerror(Loc *loc, Parse *p, void *scanner, const char *msg);
}

%define api.pure full
%define api.prefix {cf_yy}
%define parse.error custom
%locations
%expect 0
%lex-param {void *scanner}
%parse-param {Parse *p} {void *scanner}
%initial-action { @$.line = @$.eline = 1; @$.col = @$.ecol = 0; }

%union {
	int64_t i;
	double f;
	const char *s;
	DType t;
	Role r;
	Expr *e;
	Stmt *st;
	Decl *d;
	Vec v;
}

%token MODEL "'model'" LAYER "'layer'" SIZE "'size'" GROUP "'group'"
%token TYPE "'type'" IN "'in'" WEIGHT "'weight'" OUT "'out'"
%token RETURN "'return'" SPLIT "'split'" OVER "'over'" GRAD "'grad'"
%token SAVE "'save'"
%token RECOMPUTE "'recompute'"
%token SCHEDULE "'schedule'" DEFAULT "'default'"
%token START_CHOICE "schedule choice"
%token <t> DTYPE "type name"
%token <s> IDENT "identifier"
%token <i> INT "integer"
%token <f> FLOAT "number"

%type <e> name expr arg split choice skey
%type <d> decl
%type <v> body stmt defs gdefs exprs args params names sentries splits_opt splits grad_split
%type <t> dtype_opt
%type <r> role

%left '+' '-'
%left '*' '/' '%' '@'
%precedence NEG
%right '^'
%precedence '.'

%%

start
	: program
	| START_CHOICE choice        { p->choice = $2; }
	;

program
	: %empty
	| program decl               { vec_push(A, &p->prog->decls, $2); }
	;

decl
	: MODEL name '{' body '}'    { $$ = ast_decl(A, @$, D_MODEL, $2, (Vec){0}, $4); }
	| LAYER name '(' params ')' '{' body '}' { $$ = ast_decl(A, @$, D_LAYER, $2, $4, $7); }
	;

params
	: %empty                     { $$ = (Vec){0}; }
	| names
	;

names
	: name                       { $$ = ast_list(A, (Vec){0}, $1); }
	| names ',' name             { $$ = ast_list(A, $1, $3); }
	;

body
	: %empty                     { $$ = (Vec){0}; }
	| body stmt                  { $$ = ast_concat(A, $1, $2); }
	;

stmt
	: SIZE defs ';'              { $$ = $2; }
	| GROUP gdefs ';'            { $$ = $2; }
	| TYPE DTYPE ';'             { $$ = ast_list(A, (Vec){0}, ast_type(A, @$, $2)); }
	| role name ':' dtype_opt '[' exprs ']' splits_opt grad_split ';' { $$ = ast_list(A, (Vec){0}, ast_tensor(A, @$, $1, $2, $4, $6, $8, $9)); }
	| name '=' expr ';'          { $$ = ast_list(A, (Vec){0}, ast_def(A, @$, S_ASSIGN, $1, $3)); }
	| OUT names ';'              { $$ = ast_list(A, (Vec){0}, ast_names(A, @$, S_OUT, $2)); }
	| SAVE names ';'             { $$ = ast_list(A, (Vec){0}, ast_names(A, @$, S_SAVE, $2)); }
	| RECOMPUTE names ';'        { $$ = ast_list(A, (Vec){0}, ast_names(A, @$, S_RECOMPUTE, $2)); }
	| RETURN expr ';'            { $$ = ast_list(A, (Vec){0}, ast_return(A, @$, $2)); }
	| SCHEDULE '{' sentries '}'  { $$ = $3; }
	| error ';'                  { $$ = (Vec){0}; }
	;

defs
	: name '=' expr              { $$ = ast_list(A, (Vec){0}, ast_def(A, @$, S_SIZE, $1, $3)); }
	| defs ',' name '=' expr     { $$ = ast_list(A, $1, ast_def(A, @3, S_SIZE, $3, $5)); }
	;

gdefs
	: name '=' expr              { $$ = ast_list(A, (Vec){0}, ast_def(A, @$, S_GROUP, $1, $3)); }
	| gdefs ',' name '=' expr    { $$ = ast_list(A, $1, ast_def(A, @3, S_GROUP, $3, $5)); }
	;

role
	: IN                         { $$ = R_IN; }
	| WEIGHT                     { $$ = R_WEIGHT; }
	;

dtype_opt
	: %empty                     { $$ = DT_NONE; }
	| DTYPE
	;

/* `split DIM over GROUP, DIM over GROUP`: one split per group, each kept
 * as a ':' pair of (dim, group name). */
splits_opt
	: %empty                     { $$ = (Vec){0}; }
	| SPLIT splits               { $$ = $2; }
	;

splits
	: split                      { $$ = ast_list(A, (Vec){0}, $1); }
	| splits ',' split           { $$ = ast_list(A, $1, $3); }
	;

split
	: expr OVER name             { $$ = ast_bin(A, @$, ':', $1, $3); }
	;

/* `grad split DIM over GROUP, ...`: the spread of a weight's gradient in
 * the backward pass (ZeRO), kept like the splits */
grad_split
	: %empty                     { $$ = (Vec){0}; }
	| GRAD SPLIT splits          { $$ = $3; }
	;

sentries
	: %empty                     { $$ = (Vec){0}; }
	| sentries DEFAULT choice ';' { $$ = ast_list(A, $1, ast_sched(A, @2, NULL, $3)); }
	| sentries skey ':' choice ';' { $$ = ast_list(A, $1, ast_sched(A, @2, $2, $4)); }
	| sentries name '=' expr ';' { $$ = ast_list(A, $1, ast_sched_set(A, @2, $2, $4)); }
	| sentries error ';'         { $$ = $1; }
	;

skey
	: name
	| name '.' name              { $$ = ast_bin(A, @$, '.', $1, $3); }
	;

choice
	: expr
	;

exprs
	: expr                       { $$ = ast_list(A, (Vec){0}, $1); }
	| exprs ',' expr             { $$ = ast_list(A, $1, $3); }
	;

expr
	: INT                        { $$ = ast_int(A, @$, $1); }
	| FLOAT                      { $$ = ast_float(A, @$, $1); }
	| name
	| '(' expr ')'               { $$ = $2; }
	| name '(' ')'               { $$ = ast_call(A, @$, $1, (Vec){0}); }
	| name '(' args ')'          { $$ = ast_call(A, @$, $1, $3); }
	| expr '.' name              { $$ = ast_member(p, @$, $1, $3); }
	| '-' expr %prec NEG         { $$ = ast_un(A, @$, E_NEG, $2); }
	| expr '+' expr              { $$ = ast_bin(A, @2, '+', $1, $3); }
	| expr '-' expr              { $$ = ast_bin(A, @2, '-', $1, $3); }
	| expr '*' expr              { $$ = ast_bin(A, @2, '*', $1, $3); }
	| expr '/' expr              { $$ = ast_bin(A, @2, '/', $1, $3); }
	| expr '%' expr              { $$ = ast_bin(A, @2, '%', $1, $3); }
	| expr '^' expr              { $$ = ast_bin(A, @2, '^', $1, $3); }
	| expr '@' expr              { $$ = ast_bin(A, @2, '@', $1, $3); }
	;

args
	: arg                        { $$ = ast_list(A, (Vec){0}, $1); }
	| args ',' arg               { $$ = ast_list(A, $1, $3); }
	;

arg
	: expr
	| name '=' expr              { $$ = ast_kwarg(A, @$, $1, $3); }
	| SPLIT '=' expr             { $$ = ast_kwarg(A, @$, ast_name(A, @1, "split"), $3); }
	;

name
	: IDENT                      { $$ = ast_name(A, @$, $1); }
	;

%%

static void
cf_yyerror(Loc *loc, Parse *p, void *scanner, const char *msg)
{
	(void)scanner;
	if (!p->stop)
		diag_error(p->diag, *loc, "%s", msg);
}

static int
semi_expected(const yysymbol_kind_t *exp, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(yysymbol_name(exp[i]), "';'") == 0)
			return 1;
	return 0;
}

/* Reports "syntax error: unexpected X, expecting A or B". When only a ';'
 * or a closing bracket would do and the next token is on a later line,
 * the error points just past the previous token, where the fix goes. */
static int
yyreport_syntax_error(const yypcontext_t *ctx, Parse *p, void *scanner)
{
	enum { NEXP = 5 };
	yysymbol_kind_t exp[YYNTOKENS]; /* all of them: a ';' may be among many */
	int n = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
	yysymbol_kind_t got = yypcontext_token(ctx);
	Loc loc = *yypcontext_location(ctx);
	char msg[512];
	size_t len;

	(void)scanner;
	if (p->stop)
		return 0;
	len = (size_t)snprintf(msg, sizeof msg, "syntax error: unexpected %s",
	                       got == YYSYMBOL_YYEOF ? "end of file" : yysymbol_name(got));
	for (int i = 0; n > 0 && n < NEXP && i < n && len < sizeof msg; i++)
		len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
		                        i ? " or " : ", expecting ", yysymbol_name(exp[i]));
	if (n > 0 && semi_expected(exp, n) && p->last.line > 0 &&
	    loc.line > p->last.eline) {
		loc.line = loc.eline = p->last.eline;
		loc.col = loc.ecol = p->last.ecol + 1;
		snprintf(msg, sizeof msg, "syntax error: expected ';' at the end "
		         "of the line");
	}
	diag_error(p->diag, loc, "%s", msg);
	return 0;
}
