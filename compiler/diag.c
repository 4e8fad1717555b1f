/* diag.c: the one place diagnostics are printed.
 * `file:line:col: error: message`, then the source line and a caret under
 * the offending text. Errors are counted; past MAXERR only counted.
 * With -fdiagnostics-format=json or sarif they are kept instead and
 * diag_flush writes them: GCC's JSON (a list of diagnostics, each with
 * kind, message, locations with caret and finish, notes as children) or
 * a SARIF 2.1.0 log (one run of the tool cfc, a result per error, its
 * notes as related locations). */
#include <stdarg.h>
#include <stdlib.h>
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
	d->format = DF_TEXT;
	d->rec = NULL;
	d->nrec = d->caprec = 0;
	d->tick = NULL;
	d->tickarg = NULL;
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

/* The length of the well-formed UTF-8 sequence at p (2 to 4 bytes: no
 * overlong form, no surrogate, nothing past U+10FFFF), or 0. */
int
diag_utf8_len(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	if (n == 0 || p[0] > 0xf4)
		return 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

/* Whether s[i] continues a well-formed UTF-8 sequence that starts in
 * s[0..i) (show_line writes such a sequence as one character). */
static int
diag_in_utf8(const char *s, size_t i)
{
	for (size_t b = i; b > 0 && i - b < 3; b--) {
		unsigned char c = (unsigned char)s[b - 1];
		if ((c & 0xc0) != 0x80)
			return c >= 0xc2 && (size_t)diag_utf8_len(s + b - 1) > i - (b - 1);
	}
	return 0;
}

/* The column, counted in characters (well-formed UTF-8 sequences count
 * one, any other byte one), of byte column col of line (the column of the
 * character that byte is part of). Locations count bytes; what cfc writes
 * counts characters, like GCC's display column (a tab is one). */
static int
diag_col(const Diag *d, int line, int col)
{
	size_t len;
	const char *p;

	if (!d->src || line <= 0 || col <= 1 || !(p = diag_line(d->src, line, &len)))
		return col;
	int c = 0;
	size_t i = 0;
	while (i < (size_t)col) {
		int n = i < len && (unsigned char)p[i] >= 128 ? diag_utf8_len(p + i) : 0;
		i += n && i + (size_t)n <= len ? (size_t)n : 1;
		c++;
	}
	return c;
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
		size_t n = c >= 128 ? (size_t)diag_utf8_len(p + i) : 0;
		if (n && i + n <= to) {
			fwrite(p + i, 1, n, d->out);
			i += n - 1;
		} else
			fputc(c == '\t' || (c >= 32 && c < 127) ? c : '?', d->out);
	}
	fputs(to < len ? "...\n" : "\n", d->out);
	fputs(from ? "    " : " ", d->out);
	for (size_t i = from; i < col; i++) {
		if (p[i] == '\t')
			fputc('\t', d->out);
		else if (((unsigned char)p[i] & 0xc0) != 0x80 ||
		         !diag_in_utf8(p + from, i - from))
			fputc(' ', d->out); /* a character written whole above
			                     * takes one column */
	}
	fputc('^', d->out);
	if (loc.eline == loc.line && loc.ecol > loc.col) {
		size_t e = (size_t)loc.ecol;
		for (size_t i = col + 1; i < e && i < to; i++)
			if (((unsigned char)p[i] & 0xc0) != 0x80 ||
			    !diag_in_utf8(p + from, i - from))
				fputc('~', d->out);
	}
	fputc('\n', d->out);
}

/* The name diagnostics carry: the source's, or cfc's. */
static const char *
diag_file(const Diag *d)
{
	return d->src ? d->src->name : "cfc";
}

static void
keep(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (d->nrec == d->caprec) {
		d->caprec = d->caprec ? 2 * d->caprec : 16;
		d->rec = realloc(d->rec, (size_t)d->caprec * sizeof *d->rec);
		if (!d->rec)
			die("out of memory");
	}
	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	DiagRec *r = &d->rec[d->nrec++];
	r->kind = kind;
	r->loc = loc;
	r->msg = malloc((size_t)(n < 0 ? 0 : n) + 1);
	if (!r->msg)
		die("out of memory");
	vsnprintf(r->msg, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
}

static void
report(Diag *d, Loc loc, const char *kind, const char *fmt, va_list ap)
{
	const char *name = diag_file(d);

	if (d->format != DF_TEXT) {
		keep(d, loc, kind, fmt, ap);
		return;
	}
	if (loc.line > 0)
		fprintf(d->out, "%s:%d:%d: %s: ", name, loc.line,
		        diag_col(d, loc.line, loc.col), kind);
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
		if (d->nerr == MAXERR + 1 && d->format == DF_TEXT)
			fprintf(d->out, "%s: too many errors, stopping\n", diag_file(d));
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
diag_warning(Diag *d, Loc loc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(d, loc, "warning", fmt, ap);
	va_end(ap);
}

/* A diagnostic with no position: "cfc: KIND: message". */
static void
plain(Diag *d, const char *kind, const char *fmt, va_list ap)
{
	if (d->format != DF_TEXT) {
		keep(d, (Loc){0, 0, 0, 0}, kind, fmt, ap);
		return;
	}
	fprintf(d->out, "cfc: %s: ", kind);
	vfprintf(d->out, fmt, ap);
	fputc('\n', d->out);
}

void
diag_plain(Diag *d, const char *fmt, ...)
{
	va_list ap;

	d->nerr++;
	va_start(ap, fmt);
	plain(d, "error", fmt, ap);
	va_end(ap);
}

void
diag_plain_note(Diag *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	plain(d, "note", fmt, ap);
	va_end(ap);
}

/* ---- JSON and SARIF ---- */

/* s as a JSON string: well-formed UTF-8 passes as it is (a name or
 * comment in the source stays readable); any other byte past ASCII is
 * written as U+0080..U+00FF, since a message may quote bytes of a binary
 * input that are no UTF-8 and the JSON must still parse. */
static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int n = *p >= 128 ? diag_utf8_len((const char *)p) : 0;
		if (n) {
			fwrite(p, 1, n, f);
			p += n - 1;
		} else if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 32 || *p >= 127)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* GCC: {"file": ..., "line": L, "column": C} (column 1-based). */
static void
json_pos(FILE *f, const Diag *d, int line, int col)
{
	fputs("{\"file\": ", f);
	json_str(f, diag_file(d));
	int c = diag_col(d, line, col);
	fprintf(f, ", \"line\": %d, \"column\": %d, \"display-column\": %d, \"byte-column\": %d}",
	        line, c, c, col);
}

static void
json_one(FILE *f, const Diag *d, const DiagRec *r)
{
	fputs("{\"kind\": ", f);
	json_str(f, r->kind);
	fputs(", \"message\": ", f);
	json_str(f, r->msg);
	fputs(", \"locations\": [", f);
	if (r->loc.line > 0) {
		fputs("{\"caret\": ", f);
		json_pos(f, d, r->loc.line, r->loc.col > 0 ? r->loc.col : 1);
		if (r->loc.eline > 0 && (r->loc.eline != r->loc.line || r->loc.ecol > r->loc.col)) {
			fputs(", \"finish\": ", f);
			json_pos(f, d, r->loc.eline, r->loc.ecol);
		}
		fputc('}', f);
	}
	fputc(']', f);
}

static void
flush_json(Diag *d)
{
	FILE *f = d->out;
	int open = 0;

	fputc('[', f);
	for (int i = 0; i < d->nrec; i++) {
		const DiagRec *r = &d->rec[i];
		int note = !strcmp(r->kind, "note");
		if (note && open) {
			fputs(open == 1 ? ", \"children\": [" : ", ", f);
			json_one(f, d, r);
			fputc('}', f);
			open = 2;
			continue;
		}
		if (open)
			fputs(open == 2 ? "]}" : "}", f);
		fputs(i ? ", " : "", f);
		json_one(f, d, r);
		open = 1;
	}
	if (open)
		fputs(open == 2 ? "]}" : "}", f);
	fputs("]\n", f);
}

static void
sarif_message(FILE *f, const char *text)
{
	fputs("{\"text\": ", f);
	json_str(f, text);
	fputc('}', f);
}

/* A SARIF location: its physicalLocation (endColumn is exclusive
 * there), and msg when given. */
static void
sarif_loc(FILE *f, const Diag *d, Loc l, const char *msg)
{
	fputs("{\"physicalLocation\": {\"artifactLocation\": {\"uri\": ", f);
	json_str(f, diag_file(d));
	fputc('}', f);
	if (l.line > 0) {
		int col = l.col > 0 ? l.col : 1;
		int eline = l.eline >= l.line ? l.eline : l.line;
		int ecol = eline == l.line && l.ecol < col ? col : l.ecol;
		fprintf(f, ", \"region\": {\"startLine\": %d, \"startColumn\": %d, \"endLine\": %d, "
		        "\"endColumn\": %d}", l.line, diag_col(d, l.line, col), eline,
		        diag_col(d, eline, ecol) + 1);
	}
	fputc('}', f);
	if (msg) {
		fputs(", \"message\": ", f);
		sarif_message(f, msg);
	}
	fputc('}', f);
}

static void
flush_sarif(Diag *d)
{
	FILE *f = d->out;
	int nres = 0;

	fputs("{\"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\", "
	      "\"version\": \"2.1.0\", \"runs\": [{\"tool\": {\"driver\": {\"name\": \"cfc\", "
	      "\"version\": \"" CF_VERSION "\"}}, \"columnKind\": \"unicodeCodePoints\", \"results\": [", f);
	for (int i = 0, owned = 0; i < d->nrec; i++) {
		const DiagRec *r = &d->rec[i];
		int note = !strcmp(r->kind, "note");
		/* a note after an error is one of its related locations; one
		 * before any error, a result of its own */
		if (note && owned)
			continue;
		owned |= !note;
		fputs(nres++ ? ", " : "", f);
		fprintf(f, "{\"level\": \"%s\", \"message\": ", note ? "note" :
		        !strcmp(r->kind, "warning") ? "warning" : "error");
		sarif_message(f, r->msg);
		fputs(", \"locations\": [", f);
		sarif_loc(f, d, r->loc, NULL);
		fputc(']', f);
		int k = i + 1;
		if (k < d->nrec && !strcmp(d->rec[k].kind, "note")) {
			fputs(", \"relatedLocations\": [", f);
			for (; k < d->nrec && !strcmp(d->rec[k].kind, "note"); k++) {
				/* a note's own place, or the result's */
				Loc l = d->rec[k].loc.line > 0 ? d->rec[k].loc : r->loc;
				fputs(k > i + 1 ? ", " : "", f);
				sarif_loc(f, d, l, d->rec[k].msg);
			}
			fputc(']', f);
		}
		fputc('}', f);
	}
	fputs("]}]}\n", f);
}

void
diag_flush(Diag *d)
{
	if (d->format == DF_JSON)
		flush_json(d);
	else if (d->format == DF_SARIF)
		flush_sarif(d);
	for (int i = 0; i < d->nrec; i++)
		free(d->rec[i].msg);
	free(d->rec);
	d->rec = NULL;
	d->nrec = d->caprec = 0;
}

void
diag_tick(Diag *d, const char *what, int done, int total)
{
	if (d->tick)
		d->tick(d->tickarg, what, done, total);
}
