/* progress.c: cfc's progress lines (progress.h).
 * requires: a Progress set up by prog_init. ensures: nothing printed
 * before PROG_AFTER seconds or when quiet; every line ends before the
 * next message (a count line drawn in place is ended first). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

static double
prog_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
prog_now(void)
{
	return prog_clock(CLOCK_MONOTONIC);
}

void
prog_init(Progress *p, FILE *out, int quiet)
{
	memset(p, 0, sizeof *p);
	p->out = out;
	p->quiet = quiet;
	p->tty = isatty(fileno(out));
	p->start = prog_now();
	p->cpu0 = prog_clock(CLOCK_PROCESS_CPUTIME_ID);
	p->after = PROG_AFTER;
	const char *e = getenv("CFC_PROGRESS_AFTER");
	char *end;
	double a = e ? strtod(e, &end) : 0;
	if (e && *e && !*end && a >= 0)
		p->after = a;
}

void
prog_finish(Progress *p)
{
	if (p->inplace)
		fputs("\r\033[K", p->out);
	p->inplace = 0;
}

/* Has the compile used enough CPU to speak? Then the kept lines first. */
static int
prog_speaks(Progress *p)
{
	if (p->quiet || prog_clock(CLOCK_PROCESS_CPUTIME_ID) - p->cpu0 < p->after)
		return 0;
	for (int k = 0; k < p->nkept; k++)
		fprintf(p->out, "cfc: %s\n", p->kept[k]);
	p->nkept = 0;
	return 1;
}

void
prog_phase(Progress *p, const char *fmt, ...)
{
	char what[80];
	va_list ap;
	double t = prog_now() - p->start;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (!prog_speaks(p)) {
		if (!p->quiet && p->nkept < PROG_KEEP)
			snprintf(p->kept[p->nkept++], sizeof p->kept[0], "%s, %.1f s", what, t);
		return;
	}
	prog_finish(p);
	fprintf(p->out, "cfc: %s, %.1f s\n", what, t);
	fflush(p->out);
	p->last = t;
}

void
prog_tick(void *arg, const char *what, int done, int total)
{
	Progress *p = arg;
	double t = prog_now() - p->start;

	if (t - p->last < (p->tty ? 0.2 : PROG_EVERY) || !prog_speaks(p))
		return;
	if (p->tty) {
		fprintf(p->out, "\r\033[Kcfc: %s: %d of %d collectives, %.1f s", what, done, total, t);
		p->inplace = 1;
	} else {
		fprintf(p->out, "cfc: %s: %d of %d collectives, %.1f s\n", what, done, total, t);
	}
	fflush(p->out);
	p->last = t;
}
