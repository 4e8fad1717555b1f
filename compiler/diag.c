/* diag.c: the one place diagnostics are printed.
 * `file:line:col: error: message`, then the source line and a caret under
 * the offending text. Errors are counted; past MAXERR only counted. */
#include <string.h>

#include "cf.h"

enum { SHOWMAX = 160 }; /* widest slice of a source line shown */

void
diag_init(Diag *d, const Src *src, FILE *out)
{
	d->src = src;
	d->out = out ? out : stderr;
	d->nerr = 0;
	d->fatal = 0;
}

const char *
diag_line(const Src *s, int line, size_t *len)
{
	const char *p = s->text, *end = s->text + s->len;

	for (int l = 1; l < line && p < end; l++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return NULL;
		p = nl + 1;
	}
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	*len = (size_t)((nl ? nl : end) - p);
	return p;
}

/* Prints the source line with a caret from col to ecol (same line only).
 * Long lines are cut to a window around the caret. */
static void
show_line(Diag *d, Loc loc)
{
	size_t len, from = 0;
	const char *p;

	if (!d->src || loc.line <= 0 || !(p = diag_line(d->src, loc.line, &len)))
		return;
	size_t col = loc.col > 0 ? (size_t)loc.col - 1 : 0;
	if (col > len)
		col = len;
	if (col > SHOWMAX / 2)
		from = col - SHOWMAX / 2;
	size_t to = len - from > SHOWMAX ? from + SHOWMAX : len;
	fputs(from ? " ..." : " ", d->out);
	for (size_t i = from; i < to; i++) {
		unsigned char c = (unsigned char)p[i];
		fputc(c == '\t' || (c >= 32 && c < 127) ? c : '?', d->out);
	}
	fputs(to < len ? "...\n" : "\n", d->out);
	fputs(from ? "    " : " ", d->out);
	for (size_t i = from; i < col; i++)
		fputc(p[i] == '\t' ? '\t' : ' ', d->out);
	fputc('^', d->out);
	if (loc.eline == loc.line && loc.ecol > loc.col) {
		size_t e = (size_t)loc.ecol;
		for (size_t i = col + 1; i < e && i < to; i++)
			fputc('~', d->out);
	}
	fputc('\n', d->out);
}

static void
report(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap)
{
	const char *name = d->src ? d->src->name : "cfc";

	if (loc.line > 0)
		fprintf(d->out, "%s:%d:%d: %s: ", name, loc.line, loc.col, kind);
	else
		fprintf(d->out, "%s: %s: ", name, kind);
	vfprintf(d->out, fmt, ap);
	fputc('\n', d->out);
	show_line(d, loc);
}

void
diag_error(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;

	if (++d->nerr > MAXERR) {
		if (d->nerr == MAXERR + 1)
			fprintf(d->out, "%s: too many errors, stopping\n",
			        d->src ? d->src->name : "cfc");
		d->fatal = 1;
		return;
	}
	va_start(ap, fmt);
	report(d, loc, "error", fmt, ap);
	va_end(ap);
}

void
diag_note(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;

	if (d->nerr > MAXERR)
		return;
	va_start(ap, fmt);
	report(d, loc, "note", fmt, ap);
	va_end(ap);
}

void
diag_plain(Diag *d, const char *fmt, ...)
{
	va_list ap;

	d->nerr++;
	fputs("cfc: error: ", d->out);
	va_start(ap, fmt);
	vfprintf(d->out, fmt, ap);
	va_end(ap);
	fputc('\n', d->out);
}
