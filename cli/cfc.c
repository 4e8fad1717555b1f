/* cfc.c: the cfc command line, and the whole pipeline in one function
 * (compile). It stands above the compiler (compiler/), whose passes it
 * runs, and the code generator (codegen/), whose emitters print their
 * results. Exit codes: 0 ok, 1 errors in the input, 2 usage, 70 internal
 * error. Outputs are written only when the whole compilation succeeded,
 * all of them or none, by cli/outfile.c's rules: a regular file through a
 * temporary renamed into place (never a partial output file), a device or
 * FIFO straight through, a symbolic link followed, the input never. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen.h"
#include "memory.h"
#include "outfile.h"
#include "pipeline.h"
#include "progress.h"

enum {
	EX_INPUT = 1, EX_USAGE = 2, EX_INTERNAL = 70,
	MAXINPUT = 16 << 20 /* the largest spec read, in bytes */
};

typedef struct Comp {
	Arena *arena;
	Diag diag;
	Src src;
	Program *prog;
	Graph *graph;
	Sched *sched;
	Plan *plan;
	Sched *bsched; /* --backward: the backward graph's, else NULL */
	Plan *bplan;
	int lines;  /* #line directives in generated C */
	int sched_ranks; /* --sched-ranks: ranks --emit=sched lists step by
	                  * step (0: its default; INT_MAX: all) */
	int ioerr;  /* errors reading the input or writing outputs (not
	             * counted in the "N errors" line) */
	CgFiles files; /* of the output being written */
	OutInput inputs[2]; /* the files read (the spec, the profile):
	                     * no output may be one of them */
	int ninputs;
	Profile *profile; /* --profile, or NULL */
	Src psrc;         /* its text */
	double auto_margin; /* auto's budget, percent of the pass (Sched.auto_margin) */
	OrderMode order;    /* --order (order.c) */
	int order_asked;    /* --order given (else a --profile chooses) */
	int64_t coalesce;   /* --coalesce: bytes, -1: the spec's or the default */
	const char *bound_note; /* --explain's line on the memory bound */
	int64_t bound;      /* the default bound, when a --profile's choices
	                     * need it first (Pipeline.bound); else 0 */
	Progress progress;  /* what a long compile says it is doing */
	const CgVariant *variants; /* --emit=py of a build of several variants */
	int nvariants;             /* (-D S=16,32), else 0 */
	const char *model;         /* then the model's name (its graphs have
	                            * their variant's) */
} Comp;

typedef struct Emit {
	const char *name; /* --emit=NAME */
	const char *ext;  /* file name after the model's inside -o DIR */
	void (*fn)(FILE *f, Comp *c);
	const char *help;
	const char *render; /* "svg" or "png": fn writes DOT, libgvc renders */
	const char *beside; /* a kind written next to this one, or NULL */
} Emit;

static void emit_ast(FILE *f, Comp *c) { ast_dump(f, c->prog); }
static void emit_graph(FILE *f, Comp *c) { graph_dump(f, c->graph); }
static void emit_dot(FILE *f, Comp *c) { dot_graph(f, c->graph); }
static void emit_h(FILE *f, Comp *c) { cg_header(f, c->arena, c->graph); }
static void emit_driver(FILE *f, Comp *c) { cg_driver(f, c->arena, c->graph, &c->files); }

static void
emit_ref(FILE *f, Comp *c)
{
	cg_reference(f, c->arena, c->plan, c->bplan, &c->files);
}

static void
emit_sched(FILE *f, Comp *c)
{
	sched_print(f, c->sched, c->sched_ranks);
	if (c->bsched)
		sched_print(f, c->bsched, c->sched_ranks);
}

static void emit_sched_dot(FILE *f, Comp *c) { sched_dot(f, c->sched, c->bsched); }

static void emit_profile(FILE *f, Comp *c) { profile_write(f, c->profile); }

static void
emit_gantt(FILE *f, Comp *c)
{
	gantt_svg(f, c->arena, c->sched, c->bsched, c->profile);
}

static void
emit_c(FILE *f, Comp *c)
{
	cg_parallel(f, c->arena, c->plan, c->bplan, &c->files);
}

static void
emit_py(FILE *f, Comp *c)
{
	cg_python(f, c->arena, c->plan, c->bplan, c->variants, c->nvariants, c->model);
}

static const Emit emits[] = {
	{"ast", ".ast", emit_ast, "the syntax tree", NULL, NULL},
	{"graph", ".graph", emit_graph, "the dependency graph: shapes, splits, locality", NULL, NULL},
	{"dot", ".dot", emit_dot, "the dependency graph as graphviz DOT", NULL, NULL},
	{"graph-svg", ".graph.svg", emit_dot, "the dependency graph drawn as SVG", "svg", NULL},
	{"sched", ".sched", emit_sched, "the verified schedule, rank by rank and step by step", NULL, NULL},
	{"sched-dot", ".sched.dot", emit_sched_dot, "the schedule as swimlanes in DOT", NULL, NULL},
	{"svg", ".svg", emit_sched_dot, "the schedule drawn as SVG", "svg", NULL},
	{"png", ".png", emit_sched_dot, "the schedule drawn as PNG", "png", NULL},
	{"gantt", ".gantt.svg", emit_gantt, "the schedule on a time axis as SVG (--profile)", NULL, NULL},
	{"profile", ".prof", emit_profile, "the --profile as read (every number exact)", NULL, NULL},
	{"c", ".c", emit_c, "C of the parallel forward pass (and its header)", NULL, "h"},
	{"ref", "_ref.c", emit_ref, "C of the serial reference", NULL, NULL},
	{"h", ".h", emit_h, "the C header of the model", NULL, NULL},
	{"driver", "_main.c", emit_driver, "C main: fill, run, time, check", NULL, NULL},
	{"py", ".py", emit_py, "a Python module running the C on NumPy arrays", NULL, NULL},
};
enum { NEMIT = sizeof emits / sizeof emits[0] };

typedef struct Cli {
	const char *input;
	const char *out;      /* -o */
	int want[NEMIT];
	int nwant;
	Options opt;
	const char *force;    /* --schedule */
	int noline;           /* --no-line */
	int explain;          /* --explain */
	OrderMode order;      /* --order=pass (default) or region */
	int has_order;
	int backward;         /* --backward */
	int accumulate;       /* --accumulate */
	int keep_group1;      /* --keep-group1 */
	int keep_saved;       /* --keep-saved */
	DiagFormat diagfmt;   /* -fdiagnostics-format= */
	int sched_ranks;      /* --sched-ranks= */
	const char *profile;  /* --profile= */
	double margin;        /* --auto-margin=, when has_margin */
	int64_t memory;       /* --memory=: the budget per rank, bytes; 0: none */
	int has_margin;
	int64_t coalesce;     /* --coalesce=, when has_coalesce */
	int has_coalesce;
	int quiet;            /* -q, --quiet: no progress lines */
	/* -D NAME=V1,V2,...: by define (opt.defs' order), its values; a
	 * define of several values is varied: a build of several variants */
	int64_t **vals;
	int *nvals;
	const char **dtext;   /* the -D argument as given, for messages */
} Cli;

/* A build of several variants carries at most this many. */
enum { MAXVARIANT = 16 };

static void
usage(FILE *f)
{
	fputs("usage: cfc [options] FILE|-\n"
	      "Compiles a CommFuse layer spec (.cf, at most 16 MiB).\n\n"
	      "options:\n"
	      "  -o PATH          output file ('-' for stdout); a directory (files\n"
	      "                   named MODEL.EXT in it) when several --emit kinds\n"
	      "                   are asked for, when PATH is an existing directory,\n"
	      "                   or when it ends in '/' (then made if missing). A\n"
	      "                   regular file is replaced whole once written (never a\n"
	      "                   partial file), a character device or FIFO written\n"
	      "                   straight through, a symbolic link followed (what it\n"
	      "                   points at is written, the link stays); an input\n"
	      "                   (the spec, the --profile file) is refused\n"
	      "  -D NAME=VALUE    override the default of a size or a group\n"
	      "  -D NAME=V1,V2,.. several values of a size (sequence length, micro-batch):\n"
	      "                   a variant per value (several such -D: per combination,\n"
	      "                   at most 16), each checked and proven on its own. The C\n"
	      "                   of -D S=1024,2048 is MODEL_S1024.c and MODEL_S2048.c\n"
	      "                   (entry points MODEL_S1024_forward, ...; -o DIR); --emit=py\n"
	      "                   writes one module that picks the variant of the shapes\n"
	      "                   it is called with. A size a weight's shape depends on,\n"
	      "                   or a group, cannot be varied\n"
	      "  --emit=LIST      comma-separated outputs:\n", f);
	for (int i = 0; i < NEMIT; i++)
		fprintf(f, "                     %-10s %s\n", emits[i].name, emits[i].help);
	fputs("                   the schedule's pictures (sched-dot, svg, png) draw\n"
	      "                   a lane per distinct rank program (ranks alike up to\n"
	      "                   rotation share one: 'ranks 0-3 (rotations)') up to 8,\n"
	      "                   else ranks 0..3; of a collective of more than 16\n"
	      "                   steps its first 6 and its last, and of 2 or more\n"
	      "                   like layer instances in a row the first ('block0\n"
	      "                   x 48'): a row says what is not drawn\n", f);
	fputs("  --schedule=CHOICE  use CHOICE for every collective, e.g.\n"
	      "                   vanilla, slice(4), fuse(bidir, m = 2)\n"
	      "  --type=T         element type of the model: f32, f64, bf16, f16\n"
	      "  --backward       also the backward pass: the C gets NAME_backward (and the\n"
	      "                   forward saves what it reads), the schedule and --explain\n"
	      "                   its collectives, the driver checks its gradients\n"
	      "  --accumulate     with --backward: weight gradients are added to what the\n"
	      "                   grads struct holds (micro-batches), not overwritten\n"
	      "  --keep-group1    keep the collectives over groups of one rank (-D tp=1),\n"
	      "                   each a copy; by default they are taken out\n"
	      "  --keep-saved     with --backward: the backward leaves the saved buffer as\n"
	      "                   the forward wrote it (a second backward of one forward);\n"
	      "                   by default it keeps tensors in the bytes it has read\n"
	      "  --explain        say, for every collective, which schedule was applied,\n"
	      "                   what compute it was fused with, and why not more\n"
	      "                   (on standard output)\n"
	      "  --order=ORDER    pass (default): order the whole pass, each collective\n"
	      "                   as early as its inputs allow, with compute that does\n"
	      "                   not depend on it run under its exposed transfers\n"
	      "                   (plain stages, or another collective's program:\n"
	      "                   two in flight); pass-single: plain stages only;\n"
	      "                   region: region after region, as before\n"
	      "  --profile=FILE   a machine profile from cfrt-calibrate: predict every\n"
	      "                   candidate schedule of every collective (--explain\n"
	      "                   lists them); auto takes the fastest (GPU profiles),\n"
	      "                   or simpler ones that give away at most 2% of the\n"
	      "                   pass in all (CPU profiles); and, for each pass, the\n"
	      "                   order and the coalescing threshold (off, the default,\n"
	      "                   16 MiB) predicted fastest, of those --order,\n"
	      "                   --coalesce and the spec do not fix (--explain:\n"
	      "                   'pass chosen:')\n"
	      "  --auto-margin=PCT  with --profile: what auto may give away for\n"
	      "                   simpler schedules, PCT percent of the pass (0: the\n"
	      "                   predicted fastest; default 0 on GPUs, 2 on CPUs)\n"
	      "  --coalesce=BYTES  pack all_reduces of at most BYTES per rank (with KiB or\n"
	      "                   MiB: that many) that share group, type, spread and\n"
	      "                   schedule and are ready together into one transfer of\n"
	      "                   at most BYTES (0: off; default: the schedule section's\n"
	      "                   `coalesce = BYTES;`, else 1 MiB); --explain says\n"
	      "                   which were packed and why others were not\n"
	      "  --memory=BYTES   the most a rank may hold at once (saved activations\n"
	      "                   and the larger pass's workspace; K, M, G: KiB,\n"
	      "                   MiB, GiB; default: the spec's `memory = BYTES;`,\n"
	      "                   else what the region order with nothing packed\n"
	      "                   holds): over it, less in flight (coalescing off,\n"
	      "                   then the region order) and, under a budget given,\n"
	      "                   the largest saved tensors recomputed until it\n"
	      "                   fits, else an error names the peak and its parts;\n"
	      "                   --explain's 'memory bound:' line says what was kept\n"
	      "  --sched-ranks=N  --emit=sched lists the steps of the first N ranks\n"
	      "                   (default 2; all: every rank)\n"
	      "  --max-ops=N      the most ops the model may make with every layer call\n"
	      "                   and repeat inlined (default 20000; at most 10000000)\n"
	      "  --no-line        no #line directives in generated C\n"
	      "  -q, --quiet      no progress lines: a compile that runs longer than a\n"
	      "                   second otherwise says on standard error what each\n"
	      "                   phase did and when it ended ('cfc: verify: 96\n"
	      "                   collectives, 3.2 s'), on a terminal also a line that\n"
	      "                   counts a long phase's collectives\n"
	      "  -fdiagnostics-format=FORMAT\n"
	      "                   text (the default), json (GCC's JSON) or sarif\n"
	      "                   (SARIF 2.1.0), on standard error\n"
	      "  --version        print the version and exit\n"
	      "  -h, --help       print this help and exit\n\n"
	      "Without --emit, cfc checks the spec and proves its schedules.\n"
	      "The schedule's pictures sched-dot, svg and png have no time axis; gantt is\n"
	      "the picture with one: per rank its compute, sends and receives as bars as\n"
	      "long as --profile predicts them, the backward's (--backward) after the\n"
	      "forward's.\n"
	      "exit status: 0 ok, 1 errors in the input, 2 usage error, "
	      "70 internal error\n", f);
}

static int
bad_usage(const char *fmt, const char *arg)
{
	fputs("cfc: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\ntry 'cfc --help'\n", stderr);
	return EX_USAGE;
}

static int
parse_define(Cli *cl, const char *s)
{
	const char *eq = strchr(s, '=');
	char *end;
	int k = cl->opt.ndefs, n = 0;

	if (!eq || eq == s)
		return bad_usage("-D wants NAME=VALUE, not '%s'", s);
	cl->vals[k] = calloc(strlen(eq), sizeof **cl->vals);
	for (const char *v = eq + 1;; v = end + 1) {
		errno = 0;
		long long x = strtoll(v, &end, 10);
		const char *why = errno || (*end && *end != ',') || end == v ?
		                  strchr(eq, ',') ? "-D %s: the values must be integers, separated "
		                  "by commas" : "-D %s: the value must be an integer" : NULL;
		for (int i = 0; !why && i < n; i++)
			if (cl->vals[k][i] == x)
				why = "-D %s: a value given twice";
		if (why) {
			free(cl->vals[k]);
			cl->vals[k] = NULL;
			return bad_usage(why, s);
		}
		cl->vals[k][n++] = x;
		if (!*end)
			break;
	}
	Define *d = &cl->opt.defs[cl->opt.ndefs++];
	d->name = strndup(s, (size_t)(eq - s));
	d->val = cl->vals[k][0];
	cl->nvals[k] = n;
	cl->dtext[k] = s;
	return 0;
}

/* The index of --emit kind name in emits[], or -1. */
static int
emit_find(const char *name)
{
	for (int i = 0; i < NEMIT; i++)
		if (!strcmp(emits[i].name, name))
			return i;
	return -1;
}

/* --emit=KIND[,KIND...]: no empty list, no empty item ("c,,h", "c,"). */
static int
parse_emit(Cli *cl, const char *list)
{
	if (!*list)
		return bad_usage("%s", "--emit= needs a kind, such as --emit=c (--help lists them)");
	for (const char *t = list;; t++) {
		size_t n = strcspn(t, ",");
		char *name = strndup(t, n);
		int i = n ? emit_find(name) : -1;
		int rc = 0;
		if (!n)
			rc = bad_usage("an empty kind in --emit=%s", list);
		else if (i < 0)
			rc = bad_usage("unknown --emit kind '%s'", name);
		else if (!cl->want[i]++)
			cl->nwant++;
		free(name);
		if (rc)
			return rc;
		t += n;
		if (!*t)
			return 0;
	}
}

static int
parse_type(Cli *cl, const char *s)
{
	for (int t = DT_NONE + 1; t < NDTYPE; t++)
		if (!strcmp(dtype_name[t], s)) {
			cl->opt.type = (DType)t;
			return 0;
		}
	return bad_usage("--type wants f32, f64, bf16 or f16, not '%s'", s);
}

/* --sched-ranks=N (N >= 1) or all. */
static int
parse_ranks(Cli *cl, const char *s)
{
	char *end;
	long v;

	if (!strcmp(s, "all")) {
		cl->sched_ranks = INT_MAX;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 1 || v > INT_MAX)
		return bad_usage("--sched-ranks wants a count of ranks or all, not '%s'", s);
	cl->sched_ranks = (int)v;
	return 0;
}

/* --max-ops=N: 1 to MAXOPS_OPTION. */
_Static_assert(MAXOPS == 20000 && MAXOPS_OPTION == 10000000 && MAXINPUT == 16 << 20,
               "cfc --help and the --max-ops message give these numbers");
static int
parse_max_ops(Cli *cl, const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 1 || v > MAXOPS_OPTION)
		return bad_usage("--max-ops wants a count of ops from 1 to 10000000, not '%s'", s);
	cl->opt.max_ops = v;
	return 0;
}

/* BYTES, or with K, M or G (KiB, MiB, GiB), from 1 to 2^50. */
static int
parse_memory(Cli *cl, const char *s)
{
	char *end;
	long long v;
	int shift = 0;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end && !end[1])
		shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : -1, end += shift >= 0;
	if (errno || *end || end == s || v < 1 || v > (1LL << 50) >> shift)
		return bad_usage("--memory wants a count of bytes per rank, such as 65536 or 64K "
		                 "(K, M, G: KiB, MiB, GiB), not '%s'", s);
	cl->memory = (int64_t)v << shift;
	return 0;
}

/* --coalesce=BYTES: a count of bytes, or of KiB or MiB, 0 to 2^40. */
_Static_assert(COALESCE_MAX == (int64_t)1 << 40, "the --coalesce message gives this number");
static int
parse_coalesce(Cli *cl, const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	int shift = !strcmp(end, "KiB") ? 10 : !strcmp(end, "MiB") ? 20 : *end ? -1 : 0;
	if (errno || end == s || *s == '-' || *s == '+' || shift < 0 || v > COALESCE_MAX >> shift)
		return bad_usage("--coalesce wants a count of bytes from 0 to 2^40 (or of KiB "
		                 "or MiB), not '%s'", s);
	cl->coalesce = (int64_t)v << shift;
	cl->has_coalesce = 1;
	return 0;
}

/* PCT or PCT%, from 0 to 100. */
static int
parse_margin(Cli *cl, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*end == '%')
		end++;
	if (errno || *end || end == s || !(v >= 0 && v <= 100))
		return bad_usage("--auto-margin wants a percent of the pass from 0 to 100, not '%s'", s);
	cl->margin = v;
	cl->has_margin = 1;
	return 0;
}

/* GCC's spellings: json and json-stderr, sarif-stderr; sarif too. */
static int
parse_diagfmt(Cli *cl, const char *s)
{
	static const struct { const char *name; DiagFormat f; } fmt[] = {
		{"text", DF_TEXT}, {"json", DF_JSON}, {"json-stderr", DF_JSON},
		{"sarif", DF_SARIF}, {"sarif-stderr", DF_SARIF}};

	for (size_t i = 0; i < sizeof fmt / sizeof *fmt; i++)
		if (!strcmp(fmt[i].name, s)) {
			cl->diagfmt = fmt[i].f;
			return 0;
		}
	return bad_usage("-fdiagnostics-format wants text, json or sarif, not '%s'", s);
}

/* Returns -1 to go on, else the exit status. */
static int
parse_args(Cli *cl, int argc, char **argv)
{
	cl->opt.defs = calloc((size_t)argc, sizeof *cl->opt.defs);
	cl->vals = calloc((size_t)argc, sizeof *cl->vals);
	cl->nvals = calloc((size_t)argc, sizeof *cl->nvals);
	cl->dtext = calloc((size_t)argc, sizeof *cl->dtext);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int rc = 0;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("cfc %s\n", CF_VERSION);
			return 0;
		} else if (!strcmp(a, "-o") || !strcmp(a, "-D")) {
			if (i + 1 == argc || !*argv[i + 1])
				return bad_usage("%s needs an argument", a);
			if (a[1] == 'o')
				cl->out = argv[++i];
			else
				rc = parse_define(cl, argv[++i]);
		} else if (!strncmp(a, "-D", 2)) {
			rc = parse_define(cl, a + 2);
		} else if (!strncmp(a, "--emit=", 7)) {
			rc = parse_emit(cl, a + 7);
		} else if (!strncmp(a, "--type=", 7)) {
			rc = parse_type(cl, a + 7);
		} else if (!strcmp(a, "--explain")) {
			cl->explain = 1;
		} else if (!strcmp(a, "--order=pass") || !strcmp(a, "--order=region") ||
		           !strcmp(a, "--order=pass-single")) {
			cl->order = a[8] == 'r' ? ORDER_REGION : a[12] ? ORDER_PASS_SINGLE : ORDER_PASS;
			cl->has_order = 1;
		} else if (!strcmp(a, "--backward")) {
			cl->backward = 1;
		} else if (!strcmp(a, "--accumulate")) {
			cl->accumulate = 1;
		} else if (!strcmp(a, "--keep-group1")) {
			cl->keep_group1 = 1;
		} else if (!strcmp(a, "--keep-saved")) {
			cl->keep_saved = 1;
		} else if (!strcmp(a, "--no-line")) {
			cl->noline = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			cl->quiet = 1;
		} else if (!strncmp(a, "--sched-ranks=", 14)) {
			rc = parse_ranks(cl, a + 14);
		} else if (!strncmp(a, "-fdiagnostics-format=", 21)) {
			rc = parse_diagfmt(cl, a + 21);
		} else if (!strncmp(a, "--schedule=", 11)) {
			cl->force = a + 11;
		} else if (!strncmp(a, "--profile=", 10) && a[10]) {
			cl->profile = a + 10;
		} else if (!strncmp(a, "--max-ops=", 10)) {
			rc = parse_max_ops(cl, a + 10);
		} else if (!strncmp(a, "--coalesce=", 11)) {
			rc = parse_coalesce(cl, a + 11);
		} else if (!strncmp(a, "--auto-margin=", 14)) {
			rc = parse_margin(cl, a + 14);
		} else if (!strncmp(a, "--memory=", 9)) {
			rc = parse_memory(cl, a + 9);
		} else if (a[0] == '-' && a[1]) {
			return bad_usage("unknown option '%s'", a);
		} else if (cl->input) {
			return bad_usage("more than one input file ('%s')", a);
		} else {
			cl->input = a;
		}
		if (rc)
			return rc;
	}
	if (!cl->input)
		return bad_usage("%s", "no input file (use '-' for standard input)");
	if (cl->nwant > 1 && (!cl->out || !strcmp(cl->out, "-")))
		return bad_usage("%s", "several --emit kinds need -o DIR");
	if (cl->accumulate && !cl->backward)
		return bad_usage("%s", "--accumulate needs --backward");
	if (cl->keep_saved && !cl->backward)
		return bad_usage("%s", "--keep-saved needs --backward");
	if (cl->want[emit_find("gantt")] && !cl->profile)
		return bad_usage("%s", "--emit=gantt draws the predicted timeline: give --profile=FILE "
		                 "(cfrt-calibrate writes one)");
	if (cl->has_margin && !cl->profile)
		return bad_usage("%s", "--auto-margin is what auto gives away on predictions: give "
		                 "--profile=FILE (cfrt-calibrate writes one)");
	if (cl->want[emit_find("profile")] && !cl->profile)
		return bad_usage("%s", "--emit=profile writes the profile read: give --profile=FILE");
	if (cl->want[emit_find("png")] && (!cl->out || !strcmp(cl->out, "-")) && isatty(1))
		return bad_usage("%s", "--emit=png is binary: give -o FILE or redirect standard output");
	return -1;
}

/* Reads the whole input, at most MAXINPUT bytes (a larger one is refused
 * before it is read: a regular file by its size, a stream at the first
 * byte past); stdin is named <stdin>. */
static int
read_input(Comp *c, const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	struct stat *st = &c->inputs[c->ninputs].st;
	size_t cap = 1 << 16, n = 0, r;
	char *buf = NULL;
	int big = 0, oom = 0;

	c->src.name = strcmp(path, "-") ? path : "<stdin>";
	if (!f) {
		c->ioerr++;
		diag_plain(&c->diag, "cannot open %s: %s", path, strerror(errno));
		return 0;
	}
	if (!fstat(fileno(f), st)) {
		c->inputs[c->ninputs++].name = c->src.name;
		big = S_ISREG(st->st_mode) && st->st_size > MAXINPUT;
	}
	errno = 0;
	while (!big && (!buf || n == cap)) {
		if (buf && (cap *= 2) > MAXINPUT + 1)
			cap = MAXINPUT + 1; /* one byte past tells a larger input */
		char *nb = realloc(buf, cap + 1);
		if ((oom = !nb))
			break; /* buf is still ours to free */
		buf = nb;
		while (n < cap && (r = fread(buf + n, 1, cap - n, f)) > 0)
			n += r;
		big = n > MAXINPUT;
		if (n < cap || big)
			break;
	}
	int bad = oom || ferror(f), e = oom ? ENOMEM : errno;
	if (f != stdin)
		fclose(f);
	if (big || bad) {
		c->ioerr++;
		if (big)
			diag_plain(&c->diag, "%s is larger than %d MiB, the most cfc reads",
			           c->src.name, MAXINPUT >> 20);
		else
			diag_plain(&c->diag, "cannot read %s%s%s", c->src.name, e ? ": " : "",
			           e ? strerror(e) : "");
		free(buf);
		return 0;
	}
	buf[n] = 0;
	c->src.text = arena_strndup(c->arena, buf, n);
	c->src.len = n;
	free(buf);
	return 1;
}

/* The text of kind e (a picture: rendered from its DOT text first), in
 * *buf; 0 after an error (diagnosed). */
static int
output_text(Comp *c, const Emit *e, char **buf, size_t *len)
{
	FILE *m = open_memstream(buf, len);

	if (!m)
		die("open_memstream failed");
	e->fn(m, c);
	fclose(m);
	if (e->render) {
		char *dot = *buf;
		prog_phase(&c->progress, "emit %s: %zu bytes of DOT to lay out (graphviz)", e->name,
		           *len);
		int rc = render_dot(dot, e->render, buf, len, &c->diag);
		free(dot);
		if (rc) {
			*buf = NULL;
			return 0;
		}
	}
	return 1;
}

/* One output file of the run: its text and where it goes. */
typedef struct Out {
	const char *path;
	char *buf;
	size_t len;
	OutFile f;
} Out;

static void
out_error(Comp *c, OutFile *f)
{
	c->ioerr++;
	diag_plain(&c->diag, "%s", f->err ? f->err : "cannot write: out of memory");
	outfile_free(f);
}

/* Writes every output or none (outfile.h): all are opened (each checked
 * against the inputs) and written in full before the first is renamed
 * into place; a failure removes every temporary. */
static int
write_files(Comp *c, Out *out, int n)
{
	int opened = 0, written = 0, ok = 1;

	while (opened < n && !outfile_open(&out[opened].f, out[opened].path, c->inputs, c->ninputs))
		opened++;
	if (opened == n)
		while (written < n && !outfile_write(&out[written].f, out[written].buf, out[written].len))
			written++;
	if (opened < n || written < n) {
		out_error(c, &out[opened < n ? opened : written].f);
		for (int k = 0; k < opened; k++)
			outfile_discard(&out[k].f);
		return 0;
	}
	for (int k = 0; k < n; k++)
		if (!ok) {
			outfile_discard(&out[k].f);
		} else if (outfile_commit(&out[k].f)) {
			out_error(c, &out[k].f);
			ok = 0;
		}
	return ok;
}

static int
emit_index(const char *name)
{
	int i = emit_find(name);

	if (i < 0)
		die("no emit kind %s", name);
	return i;
}

/* The path of a kind written next to another: mlp.c -> mlp.h. */
static const char *
beside_path(Comp *c, const char *path, const Emit *e, const Emit *b)
{
	size_t n = strlen(path), el = strlen(e->ext);

	if (!strcmp(path, "-"))
		return "-";
	if (n >= el && !strcmp(path + n - el, e->ext))
		n -= el;
	return arena_printf(c->arena, "%.*s%s", (int)n, path, b->ext);
}

/* The last part of a path. */
static const char *
base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Where kind e goes: -o PATH, or PATH/MODEL.EXT when PATH is a directory
 * (several kinds, an existing directory, or a name ending in '/'), or
 * standard output. Sets what the C files call each other: their own name
 * and their header's, after that path. */
static const char *
out_path(Comp *c, Cli *cl, const Emit *e, int dir)
{
	const char *model = c->graph ? c->graph->name : "out", *path = cl->out ? cl->out : "-";
	const Emit *h = &emits[emit_index("h")];

	if (dir)
		path = arena_printf(c->arena, "%s%s%s%s", cl->out,
		                    cl->out[strlen(cl->out) - 1] == '/' ? "" : "/", model, e->ext);
	c->files.src = c->lines ? c->src.name : NULL;
	c->files.self = strcmp(path, "-") ? base_name(path) : arena_printf(c->arena, "%s%s", model,
	                                                                    e->ext);
	c->files.header = strcmp(path, "-") ? base_name(beside_path(c, path, e, h)) :
	                  arena_printf(c->arena, "%s.h", model);
	return path;
}

static int
is_dir(const char *path)
{
	struct stat st;

	return path && (path[strlen(path) - 1] == '/' || (!stat(path, &st) && S_ISDIR(st.st_mode)));
}

/* The output directory when dir: made if missing (*made then). 0 after
 * an error (diagnosed). */
static int
out_dir(Comp *c, Cli *cl, int dir, int *made)
{
	*made = 0;
	if (!dir)
		return 1;
	*made = !mkdir(cl->out, 0777);
	if (!*made && errno != EEXIST) {
		c->ioerr++;
		diag_plain(&c->diag, "cannot create %s: %s", cl->out, strerror(errno));
		return 0;
	}
	return 1;
}

/* Renders every kind wanted (and the kinds written beside them) of the
 * model in c into out[*n...] (room for 2 * NEMIT more), their paths under
 * -o; 0 after an error (diagnosed; the texts made so far are in out). */
static int
collect_outputs(Comp *c, Cli *cl, int dir, Out *out, int *n)
{
	int ok = 1;

	for (int i = 0; i < NEMIT && ok; i++) {
		if (!cl->want[i])
			continue;
		const char *path = out_path(c, cl, &emits[i], dir);
		out[*n] = (Out){.path = path};
		ok = output_text(c, &emits[i], &out[*n].buf, &out[*n].len);
		(*n)++;
		if (ok)
			prog_phase(&c->progress, "emit %s: %s", emits[i].name, path);
		int b = emits[i].beside ? emit_index(emits[i].beside) : -1;
		if (ok && b >= 0 && !cl->want[b]) {
			const char *bp = beside_path(c, path, &emits[i], &emits[b]);
			c->files.self = base_name(bp);
			out[*n] = (Out){.path = bp};
			ok = output_text(c, &emits[b], &out[*n].buf, &out[*n].len);
			(*n)++;
		}
	}
	return ok;
}

/* Writes out[0..n) all or none, frees their texts, and removes the
 * directory made for them when nothing was written. */
static int
write_collected(Comp *c, Cli *cl, Out *out, int n, int ok, int made)
{
	ok = ok && write_files(c, out, n);
	for (int k = 0; k < n; k++)
		free(out[k].buf);
	if (!ok && made)
		rmdir(cl->out);
	return ok;
}

static int
write_outputs(Comp *c, Cli *cl)
{
	Out out[2 * NEMIT];
	int n = 0, made, dir = cl->nwant > 1 || is_dir(cl->out);

	if (!out_dir(c, cl, dir, &made))
		return 0;
	int ok = collect_outputs(c, cl, dir, out, &n);
	return write_collected(c, cl, out, n, ok, made);
}

/* pipeline.c's phase lines, as progress lines. */
static void
phase(void *ctx, const char *line)
{
	prog_phase(ctx, "%s", line);
}

/* --schedule and --profile read (once a compile: fit_memory compiles
 * again). */
static int
compile_inputs(Comp *c, Cli *cl)
{
	if (cl->force) {
		Src fs = {"--schedule", cl->force, strlen(cl->force)};
		Diag fd;
		diag_init(&fd, &fs, stderr);
		fd.format = c->diag.format;
		cl->opt.force = parse_choice(c->arena, &fd, &fs);
		diag_flush(&fd);
		if (!cl->opt.force)
			return EX_USAGE;
	}
	/* the machine profile of --profile */
	if (cl->profile) {
		Diag pd;
		/* once: a build of several variants reads it for each */
		int seen = c->ninputs && !strcmp(c->inputs[c->ninputs - 1].name, cl->profile);
		if (!seen && !stat(cl->profile, &c->inputs[c->ninputs].st))
			c->inputs[c->ninputs++].name = cl->profile;
		diag_init(&pd, &c->psrc, stderr);
		pd.format = c->diag.format;
		c->profile = profile_read(c->arena, &pd, &c->psrc, cl->profile);
		diag_flush(&pd);
		if (!c->profile) {
			c->diag.format = DF_TEXT; /* one JSON or SARIF log: pd's */
			return EX_INPUT;
		}
	}
	return 0;
}

/* A compile: every pass in order up to the memory plans
 * (compiler/pipeline.c); compile() verifies the one it keeps. */
static int
compile_once(Comp *c, Cli *cl)
{
	/* every pass, in order (compiler/pipeline.c) */
	Pipeline pl = {.a = c->arena, .d = &c->diag, .o = &cl->opt, .profile = c->profile,
	               .auto_margin = c->auto_margin, .backward = cl->backward,
	               .accumulate = cl->accumulate, .keep_group1 = cl->keep_group1,
	               .keep_saved = cl->keep_saved, .order = c->order,
	               .order_asked = c->order_asked,
	               .coalesce = c->coalesce, .bound = c->bound, .stop = PIPE_PLANNED,
	               .phase = phase, .ctx = &c->progress};
	int rc = pipeline_run(&pl, &c->src);
	c->prog = pl.prog;
	c->graph = pl.graph;
	c->sched = pl.sched;
	c->bsched = pl.bsched;
	c->plan = pl.plan;
	c->bplan = pl.bplan;
	if (rc)
		return rc == PIPE_INTERNAL ? EX_INTERNAL : EX_INPUT;
	return 0;
}

/* ---- the memory bound (issue 51; docs/ORDER.md, "Memory") ----
 * The whole-pass order and coalescing hold more at once than the region
 * order with nothing packed: collectives in flight together, packed
 * buffers. The bound per rank is --memory, else the spec's `memory =
 * BYTES;`, else the peak of that order (today's: nothing the order pass
 * or coalescing adds). Over it, configurations are tried in this order
 * until one fits: as asked (or as a --profile chose), coalescing off,
 * the region order with the threshold, the region order with nothing
 * packed; what --order, --coalesce or the spec fixed stays. Under an
 * explicit budget each is tried as it is, then with the backward
 * recomputing saved tensors (the largest first, each kept while the
 * peak falls), and a step that still does not fit is an error. The
 * default bound recomputes nothing (recomputation is the spec's or the
 * budget's choice: it adds compute) and its last configuration is the
 * bound's own, which fits; where --order or --coalesce fixed what
 * would fit, the step is compiled as asked and --explain says so. */

/* A configuration the bound tries. */
typedef struct Rung {
	OrderMode order;
	int64_t coalesce; /* as Comp.coalesce */
	int asked;        /* as Comp.order_asked */
} Rung;

/* The peak of a trial compile up to the memory plans under order and
 * coalesce (pipeline_trial; nothing recomputed but the spec's); -1: it
 * did not compile. *spec (if not NULL): the spec's `memory = BYTES;`
 * (0: none). */
static int64_t
trial_peak(Comp *c, Cli *cl, OrderMode order, int64_t coalesce, int64_t *spec)
{
	Pipeline pl = {.a = c->arena, .d = &c->diag, .o = &cl->opt, .profile = c->profile,
	               .auto_margin = c->auto_margin, .backward = cl->backward,
	               .accumulate = cl->accumulate, .keep_group1 = cl->keep_group1,
	               .keep_saved = cl->keep_saved}, tr;
	int nre = cl->opt.nrecompute;

	cl->opt.nrecompute = 0;
	int rc = pipeline_trial(&pl, &c->src, order, coalesce, NULL, &tr);
	cl->opt.nrecompute = nre;
	if (spec && tr.graph)
		*spec = tr.graph->memory;
	return rc || !tr.plan || (cl->backward && !tr.bplan) ? -1
	       : mem_use(tr.graph, tr.plan, tr.bplan).peak;
}

/* While the peak is over budget, the largest saved tensor that the
 * backward could compute again is recomputed (Options.recompute) and
 * kept when the peak falls (or stays, with less saved). *m: the use of
 * the compile left; *tried: the
 * tensors tried. Returns an exit status (a compile that failed). */
static int
fit_recompute(Comp *c, Cli *cl, int64_t budget, MemUse *m, Vec *tried)
{
	int stale = 0, rc = 0;

	while (m->peak > budget && c->graph->bwd) {
		const Value *v = mem_pick(c->arena, c->graph, (const char *const *)tried->v, tried->n);
		if (!v)
			break;
		vec_push(c->arena, tried, (void *)v->name);
		cl->opt.recompute[cl->opt.nrecompute++] = v->name;
		if ((rc = compile_once(c, cl)))
			return rc;
		MemUse n = mem_use(c->graph, c->plan, c->bplan);
		/* kept when the peak falls, or stays with less saved (a choice
		 * that moves a tensor into the workspace's peak may let the next
		 * one lower it) */
		stale = n.peak > m->peak || (n.peak == m->peak && n.saved >= m->saved);
		if (stale)
			cl->opt.nrecompute--;
		else
			*m = n;
	}
	if (stale && (rc = compile_once(c, cl)))
		return rc;
	return 0;
}

static const char *
config_str(Arena *a, OrderMode order, int64_t coalesce)
{
	return arena_printf(a, "order=%s, %s", order_name(order),
	                    coalesce < 0 ? "coalesce as the spec or the default" :
	                    coalesce == 0 ? "coalesce off" :
	                    arena_printf(a, "coalesce %lld bytes", (long long)coalesce));
}

static const char *
recomputed_str(Comp *c, Cli *cl)
{
	const char *names = "";

	for (int i = 0; i < cl->opt.nrecompute; i++)
		names = arena_printf(c->arena, "%s%s%s", names, i ? ", " : "", cl->opt.recompute[i]);
	return names;
}

static int
fit_memory(Comp *c, Cli *cl)
{
	int64_t budget = cl->memory ? cl->memory : c->graph->memory;
	int given = budget > 0, rc;
	const char *whose = cl->memory ? "--memory" : "the spec's memory";
	OrderMode order0 = c->order;
	int asked0 = c->order_asked;
	int64_t coal0 = c->coalesce;
	int fixed_order = c->order_asked, fixed_coal = c->coalesce >= 0 || c->graph->coalesce_loc.line;

	c->bound_note = NULL;
	free(cl->opt.recompute);
	cl->opt.recompute = calloc((size_t)c->graph->values.n + 1, sizeof *cl->opt.recompute);
	if (!cl->opt.recompute)
		die("out of memory");
	if (!given) {
		/* today's order: nothing to bound */
		if (c->order == ORDER_REGION && c->profile == NULL &&
		    coalesce_bytes(c->graph, c->coalesce) == 0)
			return 0;
		budget = c->bound ? c->bound : trial_peak(c, cl, ORDER_REGION, 0, NULL);
		if (budget < 0)
			return 0;
		whose = "the region order's peak";
	}
	MemUse m = mem_use(c->graph, c->plan, c->bplan), first = m;
	if (m.peak <= budget) {
		c->bound_note = arena_printf(c->arena, "memory bound: peak %lld bytes per rank, "
		                             "within %lld (%s)", (long long)m.peak,
		                             (long long)budget, whose);
		return 0;
	}
	/* the ladder: as asked, then less overlap: coalescing off, one
	 * collective in flight, the region order */
	Rung cf[6];
	int n = 0;
	cf[n++] = (Rung){order0, coal0, asked0};
	if (!fixed_coal)
		cf[n++] = (Rung){order0, 0, 1};
	if (!fixed_order && order0 == ORDER_PASS) {
		cf[n++] = (Rung){ORDER_PASS_SINGLE, coal0, 1};
		if (!fixed_coal)
			cf[n++] = (Rung){ORDER_PASS_SINGLE, 0, 1};
	}
	if (!fixed_order && order0 != ORDER_REGION) {
		cf[n++] = (Rung){ORDER_REGION, coal0, 1};
		if (!fixed_coal)
			cf[n++] = (Rung){ORDER_REGION, 0, 1};
	}
	Vec tried = {0};
	const char *over = "";
	int fit = -1, alike = 1;
	int64_t held = -1;
	int nested = 0; /* some pass-order rung ran a collective inside another's */
	for (int k = 0; k < n && fit < 0; k++) {
		/* one in flight is the same program where none was nested */
		if (cf[k].order == ORDER_PASS_SINGLE && !nested)
			continue;
		if (k) {
			c->order = cf[k].order, c->order_asked = cf[k].asked;
			c->coalesce = cf[k].coalesce;
			cl->opt.nrecompute = 0;
			tried.n = 0;
			if ((rc = compile_once(c, cl)))
				return rc;
			m = mem_use(c->graph, c->plan, c->bplan);
		}
		if (cf[k].order == ORDER_PASS)
			nested |= plan_nests(c->plan) || plan_nests(c->bplan);
		MemUse plain = m;
		if (m.peak > budget && given && (rc = fit_recompute(c, cl, budget, &m, &tried)))
			return rc;
		if (m.peak <= budget)
			fit = k;
		else
			over = arena_printf(c->arena, "%s%s%s holds %lld", over, *over ? "; " : "",
			                    config_str(c->arena, cf[k].order, cf[k].coalesce),
			                    (long long)plain.peak);
		alike &= held < 0 || held == plain.peak;
		held = plain.peak;
	}
	const char *names = recomputed_str(c, cl);
	if (fit < 0 && !given) {
		/* the user fixed what would fit: as asked, over the default bound */
		c->order = order0, c->order_asked = asked0, c->coalesce = coal0;
		cl->opt.nrecompute = 0;
		if ((rc = compile_once(c, cl)))
			return rc;
		c->bound_note = arena_printf(c->arena, "memory bound: peak %lld bytes per rank, over "
		                             "%lld (%s), kept as asked: %s", (long long)first.peak,
		                             (long long)budget, whose, over);
		return 0;
	}
	if (fit < 0) {
		const char *why = *names ? arena_printf(c->arena, " after recomputing %s", names) : "";
		if (tried.n > cl->opt.nrecompute)
			why = arena_printf(c->arena, "%s%s recomputing any %ssaved tensor does not lower it",
			                   why, *why ? ";" : ":", *why ? "other " : "");
		if (n > 1 && alike)
			why = arena_printf(c->arena, "%s (the same in every order and coalescing tried)", why);
		else if (n > 1)
			why = arena_printf(c->arena, "%s (%s)", why, over);
		if (mem_check(c->arena, &c->diag, c->graph, m, budget,
		              cl->memory ? NULL : &c->graph->memory_loc, why))
			return EX_INPUT;
		return 0;
	}
	c->bound_note = arena_printf(c->arena, "memory bound: peak %lld bytes per rank within "
	                             "%lld (%s) with %s%s%s%s%s", (long long)m.peak,
	                             (long long)budget, whose,
	                             config_str(c->arena, cf[fit].order, cf[fit].coalesce),
	                             *names ? ", recomputing " : "", names,
	                             *over ? "; over it: " : "", over);
	if (given && *names)
		diag_plain_note(&c->diag, "to fit %s=%lld the backward recomputes %s: peak %lld bytes "
		                "per rank, %lld without", cl->memory ? "--memory" : "memory",
		                (long long)budget, names, (long long)m.peak, (long long)first.peak);
	c->order = order0, c->order_asked = asked0, c->coalesce = coal0;
	return 0;
}

static int
compile(Comp *c, Cli *cl)
{
	cl->opt.nrecompute = 0; /* a build of several variants: each its own */
	int rc = compile_inputs(c, cl);
	if (rc)
		return rc;
	/* a profile chooses within the bound: the default one first */
	c->bound = 0;
	if (c->profile && !cl->memory && (!c->order_asked || c->coalesce < 0)) {
		int64_t spec = 0, peak = trial_peak(c, cl, ORDER_REGION, 0, &spec);
		c->bound = spec ? spec : peak > 0 ? peak : 0;
	}
	rc = compile_once(c, cl);

	if (!rc)
		rc = fit_memory(c, cl);
	if (rc)
		return rc;
	/* verify what was kept (the trials of the bound were only planned) */
	Pipeline pv = {.a = c->arena, .d = &c->diag, .phase = phase, .ctx = &c->progress};
	if (pipeline_verify(&pv, c->sched, c->plan, "") ||
	    (c->bsched && pipeline_verify(&pv, c->bsched, c->bplan, "backward ")))
		return EX_INTERNAL;
	if (cl->explain) {
		const Graph *bg = c->graph->bwd;
		if (c->graph->elided || (bg && bg->elided))
			printf("groups of one: %d collectives taken out of the forward%s, their readers "
			       "reading their inputs (--keep-group1 keeps them)\n", c->graph->elided,
			       bg ? arena_printf(c->arena, ", %d of the backward", bg->elided) : "");
		sched_explain(stdout, c->sched);
		if (c->bsched)
			sched_explain(stdout, c->bsched);
		mem_explain(stdout, c->graph, mem_use(c->graph, c->plan, c->bplan));
		if (c->bound_note)
			printf("%s\n", c->bound_note);
		fflush(stdout);
	}
	return 0;
}

/* ---- a build of several variants (-D NAME=V1,V2,...) ---- */

/* The number of variants: the product of the varied -D's counts (0:
 * more than MAXVARIANT). */
static int
variant_count(const Cli *cl)
{
	long long n = 1;

	for (int i = 0; i < cl->opt.ndefs; i++)
		if ((n *= cl->nvals[i]) > MAXVARIANT)
			return 0;
	return (int)n;
}

/* Sets the defines to variant v's values (the last varied -D varying
 * fastest); returns its tag, "S=16" or "B=2, S=16", and sets *suffix to
 * "_S16" or "_B2_S16" (what its C names get after the model's). */
static const char *
variant_set(Comp *c, Cli *cl, int v, const char **suffix)
{
	const char *tag = "", *suf = "";

	for (int i = cl->opt.ndefs - 1; i >= 0; i--) {
		Define *d = &cl->opt.defs[i];
		d->val = cl->vals[i][v % cl->nvals[i]];
		d->used = 0;
		if (cl->nvals[i] > 1) {
			tag = arena_printf(c->arena, "%s=%lld%s%s", d->name, (long long)d->val,
			                   *tag ? ", " : "", tag);
			suf = arena_printf(c->arena, "_%s%lld%s", d->name, (long long)d->val, suf);
		}
		v /= cl->nvals[i];
	}
	*suffix = suf;
	return tag;
}

/* The varied -D's as given: "-D S=16,32 -D B=1,2". */
static const char *
varied_text(Comp *c, const Cli *cl)
{
	const char *t = "";

	for (int i = 0; i < cl->opt.ndefs; i++)
		if (cl->nvals[i] > 1)
			t = arena_printf(c->arena, "%s%s-D %s", t, *t ? " " : "", cl->dtext[i]);
	return t;
}

static const char *
shape_text(Comp *c, const Value *v)
{
	const char *t = "[";

	for (int d = 0; d < v->ndim; d++)
		t = arena_printf(c->arena, "%s%s%lld", t, d ? ", " : "", (long long)v->shape[d]);
	return arena_printf(c->arena, "%s]", t);
}

/* A variant's graph against the first's: no varied define is a group,
 * and every weight has the same shape (the variants share their
 * parameters). */
static int
variant_check(Comp *c, Cli *cl, const Graph *g0, const Graph *g, int v)
{
	for (int i = 0; i < cl->opt.ndefs; i++)
		for (int k = 0; cl->nvals[i] > 1 && k < g->groups.n; k++)
			if (!strcmp(((const Group *)g->groups.v[k])->name, cl->opt.defs[i].name)) {
				diag_plain(&c->diag, "-D %s: group %s cannot be varied: the variants of "
				           "a build run on one grid (build one per %s)", cl->dtext[i],
				           cl->opt.defs[i].name, cl->opt.defs[i].name);
				return 1;
			}
	if (g == g0)
		return 0;
	for (int k = 0; k < g->weights.n && k < g0->weights.n; k++) {
		const Value *w = g->weights.v[k], *w0 = g0->weights.v[k];
		if (w->ndim == w0->ndim && !memcmp(w->shape, w0->shape, sizeof w->shape[0] *
		                                   (size_t)w->ndim))
			continue;
		/* the first variant that changes a weight differs from the
		 * first in one define (the last varies fastest) */
		int i = cl->opt.ndefs - 1, q = v;
		for (; i > 0 && q % cl->nvals[i] == 0; i--)
			q /= cl->nvals[i];
		const char *dn = cl->opt.defs[i].name;
		diag_error(&c->diag, w->nloc, "weight %s is %s with %s=%lld but %s with %s=%lld "
		           "(-D %s): the variants of a build share their weights, so %s, which "
		           "this weight's shape depends on, cannot be varied", w->name,
		           shape_text(c, w0), dn, (long long)cl->vals[i][0], shape_text(c, w), dn,
		           (long long)cl->vals[i][q % cl->nvals[i]], cl->dtext[i], dn);
		return 1;
	}
	return 0;
}

/* Every variant compiled, checked and proven, then written: the C (and
 * every kind but py) of each under its own name (MODEL_S16.c, ...), one
 * Python module (MODEL.py) for all. */
static int
compile_variants(Comp *c, Cli *cl, int n)
{
	CgVariant *vs = arena_alloc(c->arena, sizeof *vs * (size_t)n);
	Comp *cs = arena_alloc(c->arena, sizeof *cs * (size_t)n);
	int py = emit_index("py");

	for (int v = 0; v < n; v++) {
		const char *suffix;
		const char *tag = variant_set(c, cl, v, &suffix);
		c->prog = NULL;
		c->graph = NULL;
		c->sched = c->bsched = NULL;
		c->plan = c->bplan = NULL;
		if (cl->explain)
			printf("variant %s:\n", tag);
		int rc = compile(c, cl);
		if (!rc && variant_check(c, cl, v ? cs[0].graph : c->graph, c->graph, v))
			rc = EX_INPUT;
		if (rc) {
			diag_plain_note(&c->diag, "in the variant %s of this build (%s)", tag,
			                varied_text(c, cl));
			return rc;
		}
		vs[v].tag = tag;
		vs[v].name = arena_printf(c->arena, "%s%s", c->graph->name, suffix);
		vs[v].plan = c->plan;
		vs[v].bplan = c->bplan;
		cs[v] = *c;
	}
	if (!cl->nwant)
		return 0;
	if (!cl->out || !strcmp(cl->out, "-")) {
		diag_plain(&c->diag, "%s: a build of several variants writes a file per variant: "
		           "give -o DIR", varied_text(c, cl));
		return EX_INPUT;
	}
	/* each variant's kinds under its own name, then the one module: all
	 * rendered first, then written all or none (a full disk at the last
	 * file leaves no variant's file behind) */
	const char *model = c->graph->name;
	int want_py = cl->want[py], nwant = cl->nwant, made, nout = 0;
	Out *out = arena_alloc(c->arena, sizeof *out * (size_t)(2 * NEMIT * n + 1));
	if (!out_dir(c, cl, 1, &made))
		return EX_INPUT;
	cl->want[py] = 0;
	cl->nwant = 2; /* -o is a directory */
	int ok = 1;
	for (int v = 0; v < n && ok; v++) {
		Comp *k = &cs[v];
		k->graph->name = vs[v].name;
		if (k->graph->bwd)
			k->graph->bwd->name = vs[v].name;
		c->prog = k->prog;
		c->graph = k->graph;
		c->sched = k->sched;
		c->bsched = k->bsched;
		c->plan = k->plan;
		c->bplan = k->bplan;
		if (nwant > want_py)
			ok = collect_outputs(c, cl, 1, out, &nout);
	}
	cl->want[py] = want_py;
	cl->nwant = nwant;
	if (ok && want_py) {
		c->variants = vs;
		c->nvariants = n;
		c->model = model;
		const char *was = c->graph->name;
		c->graph->name = model;
		const char *path = out_path(c, cl, &emits[py], 1);
		c->graph->name = was;
		out[nout] = (Out){.path = path};
		ok = output_text(c, &emits[py], &out[nout].buf, &out[nout].len);
		nout++;
	}
	ok = write_collected(c, cl, out, nout, ok, made);
	return ok ? 0 : EX_INPUT;
}

int
main(int argc, char **argv)
{
	Cli cl = {0};
	Comp c = {0};
	int rc = parse_args(&cl, argc, argv);

	if (rc < 0) {
		c.arena = arena_new();
		c.lines = !cl.noline;
		c.sched_ranks = cl.sched_ranks;
		c.auto_margin = cl.has_margin ? cl.margin : AUTO_MARGIN_OF_PROFILE;
		c.order = cl.order;
		c.order_asked = cl.has_order;
		c.coalesce = cl.has_coalesce ? cl.coalesce : -1;
		diag_init(&c.diag, &c.src, stderr);
		c.diag.format = cl.diagfmt;
		/* progress lines are text: none among JSON or SARIF on stderr */
		prog_init(&c.progress, stderr, cl.quiet || cl.diagfmt != DF_TEXT);
		if (!c.progress.quiet) {
			c.diag.tick = prog_tick;
			c.diag.tickarg = &c.progress;
		}
		int nv = variant_count(&cl);
		if (!nv) {
			rc = bad_usage("%s", "-D: more than 16 variants (the product of the "
			               "numbers of values of the -D's); build fewer at a time");
		} else if (!read_input(&c, cl.input)) {
			rc = EX_INPUT;
		} else if (nv > 1) {
			rc = compile_variants(&c, &cl, nv);
		} else {
			rc = compile(&c, &cl);
			/* emit */
			if (!rc)
				rc = write_outputs(&c, &cl) ? 0 : EX_INPUT;
		}
		prog_finish(&c.progress);
		int n = c.diag.nerr - c.ioerr;
		if (rc == EX_INPUT && n > 0 && cl.diagfmt == DF_TEXT)
			fprintf(stderr, "%d error%s\n", n, n == 1 ? "" : "s");
		diag_flush(&c.diag);
		arena_free(c.arena);
	}
	for (int i = 0; i < cl.opt.ndefs; i++) {
		free((char *)cl.opt.defs[i].name);
		free(cl.vals[i]);
	}
	free(cl.opt.defs);
	free(cl.opt.recompute);
	free(cl.vals);
	free(cl.nvals);
	free(cl.dtext);
	return rc;
}
