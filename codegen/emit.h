/* emit.h: the one text emitter of the C generators: automatic indentation,
 * #line directives back to the .cf source, deterministic output. */
#ifndef EMIT_H
#define EMIT_H

#include "cf.h"

typedef struct Emitter {
	FILE *f;
	int indent;      /* current depth, one tab each */
	int bol;         /* at the beginning of a line */
	const char *src; /* .cf file for #line, NULL: no #line directives */
	int line;        /* output line number, for #line back to the output */
	const char *out; /* name of the output file, for #line back */
} Emitter;

void emit_init(Emitter *e, FILE *f, const char *src, const char *out);
/* Writes text; each line is indented; "\n" ends lines. */
void emit(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emit_v(Emitter *e, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* emit(fmt) + " {" and one more level of indentation. */
void emit_open(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A function definition's head, then "{" on a line of its own. */
void emit_func(Emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A bare block: "{" and one more level. */
void emit_begin(Emitter *e);
/* One level less, and "}" plus the text after it (";" or ""). */
void emit_close(Emitter *e, const char *after);
/* #line N "file.cf" for what follows, when enabled; emit_line_out points
 * back at the generated file itself. */
void emit_line(Emitter *e, Loc l);
void emit_line_out(Emitter *e);

#endif
