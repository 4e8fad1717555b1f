/* parse.c: runs the scanner and parser over one source text.
 * requires: src->text NUL-terminated, src->len its length.
 * ensures: a Program (possibly empty) when no error was reported. */
#include <string.h>

#include "cf.h"
#include "parser.h"
#include "lexer.h"

/* A NUL byte means this is no text file: report where, and stop early
 * rather than drown the user in bad-character errors. */
static int
check_text(Diag *d, const Src *src)
{
	const char *nul = memchr(src->text, 0, src->len);

	if (!nul)
		return 1;
	Loc l = {1, 1, 1, 1};
	for (const char *q = src->text; q < nul; q++) {
		if (*q == '\n') {
			l.line++;
			l.col = 1;
		} else {
			l.col++;
		}
	}
	l.eline = l.line;
	l.ecol = l.col;
	diag_error(d, l, "this is a binary file, not a .cf source (NUL byte)");
	return 0;
}

static int
run(Parse *p, const Src *src)
{
	yyscan_t sc;

	if (!check_text(p->diag, src))
		return 1;
	if (cf_yylex_init_extra(p, &sc))
		die("cannot start the scanner");
	p->scanner = sc;
	p->line = p->col = 1;
	YY_BUFFER_STATE buf = cf_yy_scan_bytes(src->text, (int)src->len, sc);
	int rc = cf_yyparse(p, sc);
	cf_yy_delete_buffer(buf, sc);
	cf_yylex_destroy(sc);
	return rc;
}

Program *
parse_program(Arena *a, Diag *d, const Src *src)
{
	Parse p = {.arena = a, .diag = d};
	int before = d->nerr;

	p.prog = arena_alloc(a, sizeof *p.prog);
	if (src->len > (size_t)INT32_MAX) {
		diag_plain(d, "%s: file too large", src->name);
		return NULL;
	}
	int rc = run(&p, src);
	if (rc == 0 && d->nerr == before && p.prog->decls.n == 0)
		diag_error(d, (Loc){1, 1, 1, 1}, "empty input: expected a model "
		           "declaration such as 'model m { ... }'");
	return rc || d->nerr > before ? NULL : p.prog;
}

Expr *
parse_choice(Arena *a, Diag *d, const Src *src)
{
	Parse p = {.arena = a, .diag = d, .start = START_CHOICE};
	int before = d->nerr;

	p.prog = arena_alloc(a, sizeof *p.prog);
	int rc = run(&p, src);
	return rc || d->nerr > before ? NULL : p.choice;
}
