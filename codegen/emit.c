/* emit.c: indentation and #line bookkeeping for the C generators.
 * ensures: output depends only on what is emitted (no time, no addresses). */
#include <stdlib.h>
#include <string.h>

#include "emit.h"

void
emit_init(Emitter *e, FILE *f, const char *src, const char *out)
{
	memset(e, 0, sizeof *e);
	e->f = f;
	e->bol = 1;
	e->src = src;
	e->out = out;
	e->line = 1;
}

static void
put(Emitter *e, const char *s)
{
	for (; *s; s++) {
		if (*s == '\n') {
			e->line++;
			e->bol = 1;
		} else if (e->bol) {
			for (int i = 0; i < e->indent; i++)
				fputc('\t', e->f);
			e->bol = 0;
		}
		fputc(*s, e->f);
	}
}

void
emit_v(Emitter *e, const char *fmt, va_list ap)
{
	char small[512];
	va_list ap2;

	va_copy(ap2, ap);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	if (n < (int)sizeof small) {
		put(e, small);
	} else {
		char *big = malloc((size_t)n + 1);
		if (!big)
			die("out of memory");
		vsnprintf(big, (size_t)n + 1, fmt, ap2);
		put(e, big);
		free(big);
	}
	va_end(ap2);
}

void
emit(Emitter *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit_v(e, fmt, ap);
	va_end(ap);
}

void
emit_open(Emitter *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit_v(e, fmt, ap);
	va_end(ap);
	put(e, " {\n");
	e->indent++;
}

void
emit_close(Emitter *e, const char *after)
{
	e->indent--;
	put(e, "}");
	put(e, after);
	put(e, "\n");
}

/* #line must start in column 0 whatever the indentation. */
static void
directive(Emitter *e, int line, const char *file)
{
	if (!e->bol)
		put(e, "\n");
	fprintf(e->f, "#line %d \"", line);
	for (const char *s = file; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', e->f);
		fputc(*s, e->f);
	}
	fputs("\"\n", e->f);
	e->line++;
}

void
emit_line(Emitter *e, Loc l)
{
	if (e->src && l.line > 0)
		directive(e, l.line, e->src);
}

void
emit_line_out(Emitter *e)
{
	if (e->src && e->out)
		directive(e, e->line + 1, e->out);
}

void
emit_begin(Emitter *e)
{
	put(e, "{\n");
	e->indent++;
}

void
emit_func(Emitter *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit_v(e, fmt, ap);
	va_end(ap);
	put(e, "\n{\n");
	e->indent++;
}
