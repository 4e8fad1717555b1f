/* progress.h: what a long compile says it is doing (cfc's, on stderr).
 * A compile that has used PROG_AFTER seconds of CPU (not of the clock: on
 * a loaded machine a short compile stays short, and its diagnostics, which
 * tests compare, stay alone) prints a line per phase as it ends, with the
 * time since the start ("cfc: verify: 12 collectives, 3.2 s"), the phases
 * before it too; on a terminal a line that counts a long phase's collectives is
 * redrawn in place, elsewhere such a line every PROG_EVERY seconds. A
 * short compile prints nothing; quiet prints nothing. */
#ifndef PROGRESS_H
#define PROGRESS_H

#include <stdio.h>

#define PROG_AFTER 1.0 /* seconds before the first line (CFC_PROGRESS_AFTER
                        * sets it: the tests' 0 makes every compile long) */
#define PROG_EVERY 5.0 /* seconds between a long phase's lines off a terminal */

enum { PROG_KEEP = 16 }; /* phase lines kept until the first is printed */

typedef struct Progress {
	FILE *out;
	int quiet, tty;
	double start;      /* seconds, monotonic */
	double cpu0;       /* CPU seconds of the process at the start */
	double after;      /* PROG_AFTER or CFC_PROGRESS_AFTER */
	double last;       /* when the last count line was printed */
	int shown;         /* lines printed (the kept ones among them) */
	int inplace;       /* a count line stands on the terminal, unended */
	char kept[PROG_KEEP][96];
	int nkept;
} Progress;

void prog_init(Progress *p, FILE *out, int quiet);
/* A phase ended: what it did, as "lower: 12 collectives". */
void prog_phase(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A long phase's count: done of total collectives (Diag.tick). */
void prog_tick(void *p, const char *what, int done, int total);
/* Ends a count line standing on the terminal (before other messages). */
void prog_finish(Progress *p);

#endif
