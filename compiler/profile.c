/* profile.c: the machine profile that cfrt-calibrate writes
 * (docs/PROFILE.md), read and looked up.
 * requires: nothing.
 * ensures: a profile that profile_parse returns is whole: its version
 * line, its backend and ranks, its `end` line; every number finite,
 * positive and within the range runtime/profcheck.h gives it (ranks at
 * most 4096, a GEMM dimension an int, a time between 0.1 ns and an
 * hour, ...); at most PC_MAX_POINTS points a table, so that reading and
 * every lookup stay linear in the file; the points of every table
 * distinct and sorted by size. Any other file is refused with
 * "file:line:col: error: ...". Points that break profcheck.h's
 * consistency rules (a rate no machine has, a larger message or GEMM
 * far faster than a smaller one) are warned about. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "median.h"
#include "profcheck.h"
#include "profile_format.h"

const int profile_conc[MAXCONC] = {1, 2, 4};

static const OpKind coll_ops[4] = {OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_REDUCE,
                                   OP_ALL_TO_ALL};

int
profile_coll_index(OpKind op)
{
	for (int i = 0; i < 4; i++)
		if (coll_ops[i] == op)
			return i;
	return -1;
}

/* ---- reading ---- */

typedef struct Rd {
	Arena *a;
	Diag *d;
	const char *p, *end; /* the rest of the current line */
	const char *line;    /* its start */
	const char *num;     /* the last number read, for an error about its value */
	size_t numlen;
	int lno;
} Rd;

static Loc
rd_loc(const Rd *r, const char *at, size_t len)
{
	int col = (int)(at - r->line) + 1;

	return (Loc){r->lno, col, r->lno, col + (len ? (int)len - 1 : 0)};
}

/* The next word of the line (NULL at its end or at a comment), *len its
 * length. */
static const char *
rd_word(Rd *r, size_t *len)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r'))
		r->p++;
	if (r->p == r->end || *r->p == '#')
		return NULL;
	const char *w = r->p;
	while (r->p < r->end && !isspace((unsigned char)*r->p) && *r->p != '#')
		r->p++;
	*len = (size_t)(r->p - w);
	return w;
}

static int
rd_is(const char *w, size_t len, const char *s)
{
	return w && strlen(s) == len && !strncmp(w, s, len);
}

enum { NUM_WHOLE = 1, NUM_ZERO = 2 };

/* A number > 0 (an integer with NUM_WHOLE; >= 0 with NUM_ZERO), else an
 * error naming what. */
static int
rd_num(Rd *r, const char *what, int how, double *out)
{
	int whole = how & NUM_WHOLE;
	size_t len;
	const char *w = rd_word(r, &len);
	char buf[64], *e;

	if (!w) {
		diag_error(r->d, rd_loc(r, r->p, 0), "expected %s", what);
		return 0;
	}
	if (len >= sizeof buf)
		len = sizeof buf - 1;
	memcpy(buf, w, len);
	buf[len] = 0;
	errno = 0;
	double x = strtod(buf, &e);
	if (*e || e == buf || errno || !isfinite(x) || x < 0 || (x == 0 && !(how & NUM_ZERO)) ||
	    (whole && x != floor(x))) {
		diag_error(r->d, rd_loc(r, w, len), "%s must be a %s number, not '%s'", what,
		           whole ? "whole positive" : how & NUM_ZERO ? "nonnegative" : "positive", buf);
		return 0;
	}
	r->num = w, r->numlen = len;
	*out = x;
	return 1;
}

/* A number as rd_num reads it, at most hi (and at least lo), else an
 * error at it naming the range. */
static int
rd_range(Rd *r, const char *what, int how, double lo, double hi, double *out)
{
	if (!rd_num(r, what, how, out))
		return 0;
	if (*out < lo || *out > hi) {
		diag_error(r->d, rd_loc(r, r->num, r->numlen), "%s must be %s %.13g, not %.*s", what,
		           *out < lo ? "at least" : "at most", *out < lo ? lo : hi, (int)r->numlen,
		           r->num);
		return 0;
	}
	return 1;
}

/* The location of the last number rd_num read. */
static Loc
rd_numloc(const Rd *r)
{
	return rd_loc(r, r->num, r->numlen);
}

/* An overlap fraction, 0 to 1, into *out. */
static int
rd_fraction(Rd *r, double *out)
{
	if (!rd_num(r, "the overlap fraction", NUM_ZERO, out))
		return 0;
	if (*out > 1) {
		diag_error(r->d, rd_numloc(r), "the overlap fraction must be at most 1, not %g", *out);
		return 0;
	}
	return 1;
}

static const char *
rd_name(Rd *r, const char *what)
{
	size_t len;
	const char *w = rd_word(r, &len);

	if (!w) {
		diag_error(r->d, rd_loc(r, r->p, 0), "expected %s", what);
		return NULL;
	}
	return arena_strndup(r->a, w, len);
}

/* The collective named next: its profile_coll_index, or -1 after an
 * error. */
static int
rd_coll(Rd *r)
{
	size_t n;
	const char *o = rd_word(r, &n);

	for (int i = 0; o && i < 4; i++)
		if (rd_is(o, n, op_info[coll_ops[i]].name))
			return i;
	diag_error(r->d, rd_loc(r, o ? o : r->p, o ? n : 0), "expected a collective "
	           "(all_gather, reduce_scatter, all_reduce, all_to_all)");
	return -1;
}

static int
rd_dtype(Rd *r)
{
	size_t len;
	const char *w = rd_word(r, &len);

	for (int t = DT_F32; w && t < NDTYPE; t++)
		if (rd_is(w, len, dtype_name[t]))
			return t;
	diag_error(r->d, rd_loc(r, w ? w : r->p, w ? len : 0), "expected an element type "
	           "(f32, f64, bf16, f16)");
	return -1;
}

/* Adds p to t; an error past PC_MAX_POINTS points. */
static int
tab_add(Rd *r, PTable *t, PPoint p)
{
	if (t->n == PC_MAX_POINTS) {
		diag_error(r->d, rd_loc(r, r->line, 0), "more than %d points of one kind: not a "
		           "profile cfrt-calibrate writes (it writes at most 125)", PC_MAX_POINTS);
		return 0;
	}
	t->p = arena_grow(r->a, t->p, t->n, &t->cap, 16, sizeof *t->p);
	t->p[t->n++] = p;
	return 1;
}

static int
pt_cmp(const void *x, const void *y)
{
	const PPoint *a = x, *b = y;

	if (a->k != b->k)
		return a->k < b->k ? -1 : 1;
	if (a->m != b->m)
		return a->m < b->m ? -1 : 1;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return 0;
}

/* Sorts t; an error at the line of a repeated point. */
static int
tab_sort(Rd *r, PTable *t, const char *what)
{
	if (t->n > 1)
		qsort(t->p, (size_t)t->n, sizeof *t->p, pt_cmp);
	for (int i = 1; i < t->n; i++)
		if (!pt_cmp(&t->p[i - 1], &t->p[i])) {
			const PPoint *a = &t->p[i - 1], *b = &t->p[i];
			int l0 = a->line < b->line ? a->line : b->line, l1 = a->line + b->line - l0;
			diag_error(r->d, (Loc){l1, 1, l1, 1}, "this %s point repeats the one of line %d",
			           what, l0);
			return 0;
		}
	return 1;
}

/* The end of the rest of the line must be blank. */
static int
rd_done(Rd *r)
{
	size_t len;
	const char *w = rd_word(r, &len);

	if (!w)
		return 1;
	diag_error(r->d, rd_loc(r, w, len), "unexpected '%.*s' at the end of the entry",
	           (int)(len > 40 ? 40 : len), w);
	return 0;
}

/* A count of transfers at once, 1, 2 or 4, as its index in profile_conc
 * into *c. */
static int
rd_conc(Rd *r, int *c)
{
	const char *at = r->p;
	double x;

	if (!rd_num(r, "the transfers at once", NUM_WHOLE, &x))
		return 0;
	for (*c = 0; *c < MAXCONC; ++*c)
		if (profile_conc[*c] == x)
			return 1;
	diag_error(r->d, rd_loc(r, at + strspn(at, " \t"), 1), "transfers at once must "
	           "be 1, 2 or 4, not %g", x);
	return 0;
}

/* One entry (the line's first word is w). */
static int
rd_entry(Rd *r, Profile *pf, const char *w, size_t len)
{
	double x[4];
	int id = -1; /* the first row of profile.def with this word */

	for (int i = 0; i < PF_NENTRY && id < 0; i++)
		if (i != PF_END && rd_is(w, len, pf_word[i]))
			id = i;

	if (id == PF_BACKEND)
		return (pf->backend = rd_name(r, "the backend's name")) != NULL;
	if (id == PF_TRANSFER)
		return (pf->transfer = rd_name(r, "the transfer mode")) != NULL;
	if (id == PF_RANKS) {
		if (!rd_range(r, "ranks", NUM_WHOLE, 1, PC_MAX_RANKS, x))
			return 0;
		pf->ranks = (int)x[0];
		return 1;
	}
	if (id == PF_BATCH) {
		size_t n;
		const char *o = rd_word(r, &n);
		if (!o || (!rd_is(o, n, "loop") && !rd_is(o, n, "one"))) {
			diag_error(r->d, rd_loc(r, o ? o : r->p, o ? n : 0), "expected how a batched "
			           "matmul runs: 'loop' (a GEMM per batch index) or 'one' (one call)");
			return 0;
		}
		pf->batch_loop = rd_is(o, n, "loop");
		return 1;
	}
	if (id == PF_SLOWDOWN) {
		/* slowdown X, or slowdown C X: while C transfers run (two
		 * words: the first is C) */
		const char *at = r->p;
		size_t n;
		int c = -1, two = rd_word(r, &n) && rd_word(r, &n);
		r->p = at;
		if (two && !rd_conc(r, &c))
			return 0;
		if (c >= 0 && pf->slowdown_at[c] > 0) {
			diag_error(r->d, rd_loc(r, r->line, 8), "a second slowdown while %d "
			           "transfers run", profile_conc[c]);
			return 0;
		}
		if (!rd_range(r, "the slowdown factor", 0, 0, PC_MAX_FACTOR, x))
			return 0;
		if (x[0] < 1) {
			diag_error(r->d, rd_numloc(r), "the slowdown factor must be at least 1, not %g",
			           x[0]);
			return 0;
		}
		*(c >= 0 ? &pf->slowdown_at[c] : &pf->slowdown) = x[0];
		return 1;
	}
	if (id == PF_OVERLAP)
		return rd_fraction(r, &pf->overlap);
	if (id == PF_DEFER) {
		/* defer OV SD: the overlap and slowdown once a deferred
		 * transfer moves */
		if (pf->defer_sd > 0) {
			diag_error(r->d, rd_loc(r, r->line, 5), "a second defer entry");
			return 0;
		}
		if (!rd_fraction(r, &pf->defer_ov) ||
		    !rd_range(r, "the slowdown factor", 0, 0, PC_MAX_FACTOR, x))
			return 0;
		if (x[0] < 1) {
			diag_error(r->d, rd_numloc(r), "the slowdown factor must be at least 1, not %g",
			           x[0]);
			return 0;
		}
		pf->defer_sd = x[0];
		return 1;
	}
	if (id == PF_OVERLAP_COLL) {
		int c = rd_coll(r);
		return c >= 0 && rd_fraction(r, &pf->overlap_coll[c]);
	}
	if (id == PF_CLOCK) {
		/* clock D R: busy share D (0 < D <= 1), time factor R */
		if (!rd_num(r, "the busy share", 0, &x[0]))
			return 0;
		if (x[0] > 1) {
			diag_error(r->d, rd_numloc(r), "the busy share must be at most 1, not %g", x[0]);
			return 0;
		}
		if (!rd_range(r, "the time factor", 0, 0, PC_MAX_FACTOR, &x[1]))
			return 0;
		return tab_add(r, &pf->clock, (PPoint){0, 0, x[0], x[1], r->lno});
	}
	if (id == PF_GEMM || id == PF_GEMM_ACC) {
		/* gemm_acc: the same GEMM adding to its output (beta = 1) */
		int t = rd_dtype(r);
		if (t < 0 || !rd_range(r, "m", NUM_WHOLE, 1, PC_MAX_DIM, &x[0]) ||
		    !rd_range(r, "n", NUM_WHOLE, 1, PC_MAX_DIM, &x[1]) ||
		    !rd_range(r, "k", NUM_WHOLE, 1, PC_MAX_DIM, &x[2]) ||
		    !rd_range(r, "seconds", 0, PC_MIN_SEC, PC_MAX_SEC, &x[3]))
			return 0;
		return tab_add(r, id == PF_GEMM ? &pf->gemm[t] : &pf->gemm_acc[t],
		               (PPoint){x[0], x[1], x[2], x[3], r->lno});
	}
	if (id == PF_EW) {
		int t = rd_dtype(r);
		if (t < 0 || !rd_num(r, "bytes per second", 0, x))
			return 0;
		size_t n;
		const char *save = r->p, *more = rd_word(r, &n);
		r->p = save;
		if (!more) { /* ew T RATE */
			if (x[0] < PC_MIN_RATE || x[0] > PC_MAX_BPS) {
				diag_error(r->d, rd_numloc(r), "bytes per second must be %s %g, not %g",
				           x[0] < PC_MIN_RATE ? "at least" : "at most",
				           x[0] < PC_MIN_RATE ? PC_MIN_RATE : PC_MAX_BPS, x[0]);
				return 0;
			}
			pf->ew[t] = x[0];
			return 1;
		}
		/* ew T BYTES RATE */
		if (x[0] != floor(x[0])) {
			diag_error(r->d, rd_numloc(r), "the bytes of an ew point must be a whole "
			           "number, not %g", x[0]);
			return 0;
		}
		if (x[0] > PC_MAX_BYTES) {
			diag_error(r->d, rd_numloc(r), "the bytes of an ew point must be at most %g, "
			           "not %g", PC_MAX_BYTES, x[0]);
			return 0;
		}
		if (!rd_range(r, "bytes per second", 0, PC_MIN_RATE, PC_MAX_BPS, &x[1]))
			return 0;
		return tab_add(r, &pf->ew_by[t], (PPoint){0, 0, x[0], x[1], r->lno});
	}
	int grad = id == PF_ATTN_GRAD || id == PF_ATTN_GRAD_CAUSAL;
	if (grad || id == PF_ATTN || id == PF_ATTN_CAUSAL) {
		int t = rd_dtype(r);
		int causal = id == PF_ATTN_CAUSAL || id == PF_ATTN_GRAD_CAUSAL;
		if (t < 0 || !rd_range(r, "the key length", NUM_WHOLE, 1, PC_MAX_KEYLEN, &x[0]) ||
		    !rd_range(r, "flop per second", 0, PC_MIN_RATE, PC_MAX_FLOPS, &x[1]))
			return 0;
		PTable *tab = grad ? &pf->attn_grad[causal][t] : &pf->attn[causal][t];
		return tab_add(r, tab, (PPoint){0, 0, x[0], x[1], r->lno});
	}
	if (id == PF_OP) {
		int t = rd_dtype(r);
		size_t n;
		const char *o = t < 0 ? NULL : rd_word(r, &n);
		int k = -1;
		for (int i = 0; o && i < NOP; i++)
			if (rd_is(o, n, op_info[i].name) && op_info[i].cls != CL_LEAF &&
			    op_info[i].cls != CL_COLL && op_info[i].cls != CL_MM)
				k = i;
		if (t >= 0 && k < 0) {
			diag_error(r->d, rd_loc(r, o ? o : r->p, o ? n : 0), "expected an op of the "
			           "language (gelu, layernorm, softmax, ...; not matmul: gemm times it)");
			return 0;
		}
		if (t < 0 || !rd_range(r, "bytes per second", 0, PC_MIN_RATE, PC_MAX_BPS, x))
			return 0;
		pf->op[t][k] = x[0];
		return 1;
	}
	if (id == PF_P2P) {
		int c;
		if (!rd_conc(r, &c))
			return 0;
		if (!rd_range(r, "bytes", NUM_WHOLE, 1, PC_MAX_BYTES, &x[1]) ||
		    !rd_range(r, "seconds", 0, PC_MIN_SEC, PC_MAX_SEC, &x[2]))
			return 0;
		return tab_add(r, &pf->p2p[c], (PPoint){0, 0, x[1], x[2], r->lno});
	}
	if (id == PF_COLL) {
		int c = rd_coll(r);
		if (c < 0 || !rd_range(r, "bytes", NUM_WHOLE, 1, PC_MAX_BYTES, &x[0]) ||
		    !rd_range(r, "seconds", 0, PC_MIN_SEC, PC_MAX_SEC, &x[1]))
			return 0;
		return tab_add(r, &pf->coll[c], (PPoint){0, 0, x[0], x[1], r->lno});
	}
	char known[512];
	size_t k = 0;
	known[0] = 0;
	for (int i = 0; i < PF_NENTRY; i++) /* each word once (profile.def) */
		if ((!i || strcmp(pf_word[i], pf_word[i - 1])) && k < sizeof known)
			k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "",
			                      pf_word[i]);
	diag_error(r->d, rd_loc(r, w, len), "unknown entry '%.*s' (%s)", (int)(len > 40 ? 40 : len),
	           w, known);
	return 0;
}

/* Profile.acc[t] from the gemm_acc and gemm tables (their first 64
 * points: cfrt-calibrate writes 3). */
static double
acc_per_byte(const Profile *pf, int t)
{
	const PTable *a = &pf->gemm_acc[t];
	double v[64];
	int n = 0;

	for (int i = 0; i < a->n && n < 64; i++) {
		const PPoint *p = &a->p[i];
		double t0 = profile_gemm(&pf->gemm[t], p->m, p->n, p->k);
		if (t0 > 0)
			v[n++] = fmax(0, p->sec - t0) / (p->m * p->n * dtype_size[t]);
	}
	if (!n)
		return 0;
	return median(v, n);
}

/* ---- consistency (runtime/profcheck.h): warnings ---- */

enum { MAXWARN = 8 };

static void
warn(Diag *d, int *nw, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
warn(Diag *d, int *nw, int line, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (++*nw > MAXWARN)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	diag_warning(d, (Loc){line, 1, line, 1}, "%s", buf);
}

/* Transfer points: implausible times, and a larger message far faster
 * than a smaller one. bytes_of: a point's bytes in all (a collective's
 * block over every rank). */
static void
check_xfer(Diag *d, int *nw, const PTable *t, const char *what, double mult)
{
	for (int i = 0; i < t->n; i++) {
		const PPoint *p = &t->p[i];
		const char *r = pc_transfer_implausible(p->k * mult, p->sec, PC_LATENCY);
		if (r)
			warn(d, nw, p->line, "%s of %.0f bytes in %g s: %s", what, p->k, p->sec, r);
		for (int j = i + 1; j < t->n; j++) /* sorted by bytes */
			if (t->p[j].k > p->k && pc_out_of_order(p->sec, t->p[j].sec, PC_LATENCY))
				warn(d, nw, p->line, "%s of %.0f bytes in %g s, but %.0f bytes in %g s "
				     "(line %d): a larger message under half the time", what, p->k,
				     p->sec, t->p[j].k, t->p[j].sec, t->p[j].line);
	}
}

/* GEMM points: implausible rates, and a GEMM at least as large in every
 * dimension far faster than a smaller one. */
static void
check_gemm(Diag *d, int *nw, const PTable *t, const char *what)
{
	for (int i = 0; i < t->n; i++) {
		const PPoint *p = &t->p[i];
		const char *r = pc_compute_implausible(2 * p->m * p->n * p->k, p->sec, 1, PC_LATENCY);
		if (r)
			warn(d, nw, p->line, "%s %.0fx%.0fx%.0f in %g s: %s", what, p->m, p->n, p->k,
			     p->sec, r);
		for (int j = 0; j < t->n; j++) {
			const PPoint *q = &t->p[j];
			if (j != i && q->m >= p->m && q->n >= p->n && q->k >= p->k &&
			    pc_out_of_order(p->sec, q->sec, PC_LATENCY))
				warn(d, nw, p->line, "%s %.0fx%.0fx%.0f in %g s, but %.0fx%.0fx%.0f in "
				     "%g s (line %d): a larger GEMM under half the time", what, p->m,
				     p->n, p->k, p->sec, q->m, q->n, q->k, q->sec, q->line);
		}
	}
}

/* Rate points: an ew point's bytes are known (k), an attention's work
 * not (its rate alone is checked). */
static void
check_rates(Diag *d, int *nw, const PTable *t, const char *what, int flop)
{
	for (int i = 0; i < t->n; i++) {
		const PPoint *p = &t->p[i];
		const char *r = flop ? pc_rate_implausible(p->sec, 1) :
		                pc_compute_implausible(p->k, p->k / p->sec, 0, PC_LATENCY);
		if (r)
			warn(d, nw, t->p[i].line, "%s at %g per second: %s", what, t->p[i].sec, r);
	}
}

/* Warns about the points of pf that cfrt-calibrate would not have
 * written (it refuses them since 2026-12-07): cfc prices with them as
 * they are. */
static void
profile_warn(const Profile *pf, Diag *d)
{
	int nw = 0;
	char what[64];

	for (int t = 0; t < NDTYPE; t++) {
		snprintf(what, sizeof what, "gemm %s", dtype_name[t]);
		check_gemm(d, &nw, &pf->gemm[t], what);
		snprintf(what, sizeof what, "gemm_acc %s", dtype_name[t]);
		check_gemm(d, &nw, &pf->gemm_acc[t], what);
		snprintf(what, sizeof what, "ew %s", dtype_name[t]);
		check_rates(d, &nw, &pf->ew_by[t], what, 0);
		for (int c = 0; c < 2; c++) {
			snprintf(what, sizeof what, "attn%s %s", c ? "_causal" : "", dtype_name[t]);
			check_rates(d, &nw, &pf->attn[c][t], what, 1);
			snprintf(what, sizeof what, "attn_grad%s %s", c ? "_causal" : "", dtype_name[t]);
			check_rates(d, &nw, &pf->attn_grad[c][t], what, 1);
		}
	}
	for (int c = 0; c < MAXCONC; c++) {
		snprintf(what, sizeof what, "p2p %d", profile_conc[c]);
		check_xfer(d, &nw, &pf->p2p[c], what, 1);
	}
	for (int c = 0; c < 4; c++) {
		snprintf(what, sizeof what, "coll %s", op_info[coll_ops[c]].name);
		check_xfer(d, &nw, &pf->coll[c], what, pf->ranks);
	}
	if (nw > MAXWARN)
		diag_warning(d, (Loc){0, 0, 0, 0}, "%d more points of the profile look wrong",
		             nw - MAXWARN);
	if (nw)
		diag_note(d, (Loc){0, 0, 0, 0}, "cfc prices with these points as they are; a "
		          "calibration on a busy machine measures such points: run cfrt-calibrate "
		          "again (it now visits such points again and refuses to write them)");
}

Profile *
profile_parse(Arena *a, Diag *d, const Src *src)
{
	Rd r = {.a = a, .d = d};
	Profile *pf = arena_alloc(a, sizeof *pf);
	const char *p = src->text, *end = src->text + src->len;
	int version = 0, ended = 0, before = d->nerr;

	pf->name = src->name;
	pf->slowdown = 1;
	pf->overlap = 1;
	for (int c = 0; c < 4; c++)
		pf->overlap_coll[c] = -1; /* as overlap */
	for (r.lno = 1; p < end && d->nerr == before; r.lno++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		r.line = r.p = p;
		r.end = nl ? nl : end;
		p = nl ? nl + 1 : end;
		size_t len;
		const char *w = rd_word(&r, &len);
		if (!w)
			continue;
		if (memchr(r.line, 0, (size_t)(r.end - r.line))) {
			diag_error(d, rd_loc(&r, r.line, 0), "a NUL byte: not a profile");
			break;
		}
		if (ended) {
			diag_error(d, rd_loc(&r, w, len), "'%.*s' after the end line",
			           (int)(len > 40 ? 40 : len), w);
			break;
		}
		if (!version) {
			double v;
			if (!rd_is(w, len, "cfprofile")) {
				diag_error(d, rd_loc(&r, w, len), "not a cfrt-calibrate profile: it must "
				           "begin with 'cfprofile %d'", PROFILE_VERSION);
				break;
			}
			if (!rd_num(&r, "the profile version", NUM_WHOLE, &v) || !rd_done(&r))
				break;
			if (v != PROFILE_VERSION) {
				diag_error(d, rd_loc(&r, r.line, 9), "profile version %g, but this cfc reads "
				           "version %d: run cfrt-calibrate of this release again", v,
				           PROFILE_VERSION);
				break;
			}
			version = 1;
			continue;
		}
		if (rd_is(w, len, pf_word[PF_END])) {
			ended = rd_done(&r);
			continue;
		}
		if (rd_entry(&r, pf, w, len))
			rd_done(&r);
	}
	if (d->nerr != before)
		return NULL;
	Loc eof = {r.lno > 1 ? r.lno - 1 : 1, 1, 0, 0};
	eof.eline = eof.line, eof.ecol = eof.col;
	if (!version) {
		diag_error(d, eof, "empty: not a cfrt-calibrate profile");
		return NULL;
	}
	if (!ended) {
		diag_error(d, eof, "truncated: the profile has no 'end' line");
		return NULL;
	}
	if (!pf->backend || !pf->ranks) {
		diag_error(d, eof, "the profile names no %s", !pf->backend ? "backend" : "ranks");
		return NULL;
	}
	int ok = 1;
	for (int t = 0; t < NDTYPE && ok; t++)
		ok = tab_sort(&r, &pf->gemm[t], "gemm") && tab_sort(&r, &pf->gemm_acc[t], "gemm_acc") &&
		     tab_sort(&r, &pf->ew_by[t], "ew") &&
		     tab_sort(&r, &pf->attn[0][t], "attn") &&
		     tab_sort(&r, &pf->attn[1][t], "attn_causal") &&
		     tab_sort(&r, &pf->attn_grad[0][t], "attn_grad") &&
		     tab_sort(&r, &pf->attn_grad[1][t], "attn_grad_causal");
	for (int c = 0; c < MAXCONC && ok; c++)
		ok = tab_sort(&r, &pf->p2p[c], "p2p");
	for (int c = 0; c < 4 && ok; c++)
		ok = tab_sort(&r, &pf->coll[c], "coll");
	ok = ok && tab_sort(&r, &pf->clock, "clock");
	for (int t = 0; t < NDTYPE && ok; t++)
		pf->acc[t] = acc_per_byte(pf, t);
	if (ok)
		profile_warn(pf, d);
	return ok ? pf : NULL;
}

Profile *
profile_read(Arena *a, Diag *d, Src *src, const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 14, n = 0;
	char *buf;

	src->name = path;
	src->text = "";
	src->len = 0;
	d->src = src;
	if (!f) {
		diag_plain(d, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(cap + 1);
	for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
		n += got;
		if (n == cap) {
			char *b = n > (64u << 20) ? NULL : realloc(buf, (cap *= 2) + 1);
			if (!b)
				break;
			buf = b;
		}
	}
	int bad = !buf || ferror(f) || n == cap;
	fclose(f);
	if (bad) {
		diag_plain(d, "cannot read %s%s", path, n == cap ? ": larger than a profile" : "");
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	src->text = arena_strndup(a, buf, n);
	src->len = n;
	free(buf);
	return profile_parse(a, d, src);
}

/* ---- writing (each line as profile.def spells it) ---- */

enum { EXACT = 17 }; /* digits: reading it back gives the same double */

/* t's points, each a line of entry id of type name tn (NULL: none). */
static void
tab_write(FILE *f, int id, const char *tn, const PTable *t)
{
	for (int i = 0; i < t->n; i++) {
		const PPoint *p = &t->p[i];
		if (id == PF_GEMM || id == PF_GEMM_ACC)
			fprintf(f, pf_line[id], tn, (long long)p->m, (long long)p->n, (long long)p->k,
			        EXACT, p->sec);
		else if (id == PF_CLOCK)
			fprintf(f, pf_line[id], EXACT, p->k, EXACT, p->sec);
		else
			fprintf(f, pf_line[id], tn, (long long)p->k, EXACT, p->sec);
	}
}

void
profile_write(FILE *f, const Profile *pf)
{
	static const int attn[4] = {PF_ATTN, PF_ATTN_CAUSAL, PF_ATTN_GRAD, PF_ATTN_GRAD_CAUSAL};

	fprintf(f, "cfprofile %d\n# as cfc read it\n", PROFILE_VERSION);
	fprintf(f, pf_line[PF_BACKEND], pf->backend);
	if (pf->transfer)
		fprintf(f, pf_line[PF_TRANSFER], pf->transfer);
	fprintf(f, pf_line[PF_RANKS], pf->ranks);
	fprintf(f, pf_line[PF_BATCH], pf->batch_loop ? "loop" : "one");
	for (int t = DT_F32; t < NDTYPE; t++) {
		const char *tn = dtype_name[t];
		tab_write(f, PF_GEMM, tn, &pf->gemm[t]);
		tab_write(f, PF_GEMM_ACC, tn, &pf->gemm_acc[t]);
		if (pf->ew[t] > 0)
			fprintf(f, pf_line[PF_EW], tn, EXACT, pf->ew[t]);
		tab_write(f, PF_EW_BY, tn, &pf->ew_by[t]);
		for (int c = 0; c < 4; c++)
			tab_write(f, attn[c], tn, c & 2 ? &pf->attn_grad[c & 1][t] : &pf->attn[c & 1][t]);
		for (int k = 0; k < NOP; k++)
			if (pf->op[t][k] > 0)
				fprintf(f, pf_line[PF_OP], tn, op_info[k].name, EXACT, pf->op[t][k]);
	}
	for (int c = 0; c < MAXCONC; c++)
		for (int i = 0; i < pf->p2p[c].n; i++)
			fprintf(f, pf_line[PF_P2P], profile_conc[c], (long long)pf->p2p[c].p[i].k, EXACT,
			        pf->p2p[c].p[i].sec);
	for (int c = 0; c < 4; c++)
		tab_write(f, PF_COLL, op_info[coll_ops[c]].name, &pf->coll[c]);
	fprintf(f, pf_line[PF_SLOWDOWN], EXACT, pf->slowdown);
	for (int c = 0; c < MAXCONC; c++)
		if (pf->slowdown_at[c] > 0)
			fprintf(f, pf_line[PF_SLOWDOWN_AT], profile_conc[c], EXACT, pf->slowdown_at[c]);
	fprintf(f, pf_line[PF_OVERLAP], EXACT, pf->overlap);
	if (pf->defer_sd > 0)
		fprintf(f, pf_line[PF_DEFER], EXACT, pf->defer_ov, EXACT, pf->defer_sd);
	for (int c = 0; c < 4; c++) {
		if (pf->overlap_coll[c] >= 0)
			fprintf(f, pf_line[PF_OVERLAP_COLL], op_info[coll_ops[c]].name, EXACT,
			        pf->overlap_coll[c]);
	}
	tab_write(f, PF_CLOCK, NULL, &pf->clock);
	fputs(pf_line[PF_END], f);
}

/* ---- lookups ---- */

double
profile_slowdown(const Profile *pf, int n)
{
	for (int c = MAXCONC - 1; c >= 0; c--)
		if (pf->slowdown_at[c] > 0 && profile_conc[c] <= n)
			return pf->slowdown_at[c];
	return pf->slowdown;
}

double
profile_clock(const Profile *pf, double d)
{
	const PTable *t = &pf->clock;

	if (!t->n)
		return 1;
	const PPoint *last = &t->p[t->n - 1];
	if (d >= 1)
		return last->k >= 1 ? last->sec : 1;
	if (d > last->k)
		return last->sec + (1 - last->sec) * (d - last->k) / (1 - last->k);
	return profile_rate(t, d);
}

/* A GEMM's rate past the grid's largest size of a dimension is its rate
 * at that size: the rate saturates with size (one H100, bf16: the grid's
 * 8192x4096x4096 read 688-740 TFLOP/s, a traced 131072x4096x4096 ran at
 * 690), and weighing every point by its distance from a shape far
 * outside the grid blends in the small shapes' rates (there: 452).
 * Below the smallest size the rate falls with the weights as inside. */
double
profile_gemm(const PTable *t, double m, double n, double k)
{
	double wsum = 0, lsum = 0, flop = 2 * m * n * k;
	double mx[3] = {0, 0, 0};

	if (!t->n)
		return -1;
	for (int i = 0; i < t->n; i++) {
		mx[0] = fmax(mx[0], t->p[i].m);
		mx[1] = fmax(mx[1], t->p[i].n);
		mx[2] = fmax(mx[2], t->p[i].k);
	}
	m = fmin(m, mx[0]);
	n = fmin(n, mx[1]);
	k = fmin(k, mx[2]);
	for (int i = 0; i < t->n; i++) {
		const PPoint *p = &t->p[i];
		double dm = log2(m / p->m), dn = log2(n / p->n), dk = log2(k / p->k);
		double d2 = dm * dm + dn * dn + dk * dk;
		double rate = 2 * p->m * p->n * p->k / p->sec;
		if (d2 < 1e-12)
			return flop / rate;
		double w = 1 / (d2 * d2);
		wsum += w;
		lsum += w * log(rate);
	}
	return flop / exp(lsum / wsum);
}

double
profile_rate(const PTable *t, double sk)
{
	const PPoint *p = t->p;
	int n = t->n, i = 1;

	if (!n)
		return -1;
	if (sk <= p[0].k)
		return p[0].sec;
	if (sk >= p[n - 1].k)
		return p[n - 1].sec;
	while (sk > p[i].k)
		i++;
	return p[i - 1].sec + (p[i].sec - p[i - 1].sec) * (sk - p[i - 1].k) / (p[i].k - p[i - 1].k);
}

double
profile_bytes(const PTable *t, double bytes)
{
	const PPoint *p = t->p;
	int n = t->n;

	if (!n)
		return -1;
	if (n == 1)
		return p[0].sec * bytes / p[0].k;
	if (bytes <= p[0].k)
		return p[0].sec;
	int i = 1;
	while (i < n - 1 && bytes > p[i].k)
		i++;
	double x0 = p[i - 1].k, x1 = p[i].k, y0 = p[i - 1].sec, y1 = p[i].sec;
	double y = y0 + (y1 - y0) * (bytes - x0) / (x1 - x0);
	return y > 0 ? y : y0;
}

double
profile_ew(const Profile *pf, int t, double bytes)
{
	return pf->ew_by[t].n ? profile_rate(&pf->ew_by[t], bytes) : pf->ew[t];
}
