/* codegen.h: the emitters, one per --emit kind, that the command-line
 * driver (cli/cfc.c) calls with the compiler's results. The compiler
 * (compiler/) knows nothing of this folder; each emitter only prints what
 * the passes decided. */
#ifndef CODEGEN_H
#define CODEGEN_H

#include "plan.h"
#include "predict.h"

/* dot.c: the dependency graph as graphviz DOT (--emit=dot). */
void dot_graph(FILE *f, const Graph *g);
/* Writes s escaped for the inside of a DOT string. */
void dot_escape(FILE *f, const char *s);

/* sched_text.c: --emit=sched (every rank's steps and the verify line of
 * each collective), and --explain. ranks: how many ranks are listed step
 * by step (0: the first 2; the slice order of at least 8). */
void sched_print(FILE *f, const Sched *s, int ranks);
void sched_explain(FILE *f, const Sched *s);
/* What rank r runs in step (phase p, round i, lane t): compute lines and
 * a line of transfers joined by sep; NULL when nothing runs. */
const char *sched_step_label(Arena *a, const Coll *c, int r, int p, int i, int t,
                             const char *sep);
/* The results of node n on slice s ("*": all of them): "t4[s]", and
 * with the log-sum-exp an attention saves (Node.lse) "t4[s], t4_lse[s]". */
const char *sched_results(Arena *a, const Node *n, const char *s);
/* sched_dot.c: the schedule as per-rank swimlanes in DOT (--emit=sched-dot). */
void sched_dot(FILE *f, const Sched *s, const Sched *bwd); /* bwd: NULL or the backward's */

/* sched_lanes.c: the picture's lanes: ranks alike in every collective
 * (up to the turn of a symmetric one, else item by item) share a lane,
 * drawn as its lowest rank; past maxlanes distinct programs, the first
 * fewlanes ranks a lane each. */
typedef struct DotLanes {
	int nranks;        /* ranks of the widest group */
	int n;             /* lanes */
	int *rank;         /* lane -> the rank drawn in it */
	int *lane;         /* rank -> its lane, or -1: not drawn */
	int folded;        /* some lane stands for several ranks */
	const char **name; /* lane -> "rank 2", "ranks 0-3 (rotations)" */
	const Coll **colls; /* every collective, forward then backward */
	char *sym;         /* colls[k] is symmetric */
	int ncolls;
} DotLanes;
DotLanes *dot_lanes_new(Arena *a, const Sched *s, const Sched *bwd, int maxlanes, int fewlanes);
/* The messages of c into the ranks drawn (every rank's own lane: those
 * between the ranks drawn); 0 ok, else c does not verify. */
int dot_lane_messages(Arena *a, const DotLanes *D, const Coll *c, VerifyMsg **m, int *n);

/* gantt.c: the predicted timeline of the forward (and backward) on
 * profile pf, per rank a row of compute, one of sends and one of
 * receives, as SVG (--emit=gantt). */
void gantt_svg(FILE *f, Arena *a, const Sched *s, const Sched *bwd, const Profile *pf);

/* render.c: DOT text to svg or png through libgvc: 0 with the picture in
 * *out (malloc'd, *outlen bytes), else an error reported. */
int render_dot(const char *dot_text, const char *format, char **out, size_t *outlen, Diag *d);

/* The files of a model's C, as the command line names them. */
typedef struct CgFiles {
	const char *src;    /* the .cf file, for #line (NULL: no #line) */
	const char *self;   /* the file being written, for #line back to it */
	const char *header; /* the header's file name, for #include */
} CgFiles;

/* The C of a model (cgen.c and the cg_*.c files): its header (--emit=h),
 * the parallel program (--emit=c) printed from the plan, the serial
 * reference (--emit=ref), a driver with main (--emit=driver). */
void cg_header(FILE *f, Arena *a, const Graph *g);
/* bp: the backward's plan (--backward), else NULL: NAME_backward follows
 * the forward in the same file (NAME_ref_backward in the reference). */
void cg_parallel(FILE *f, Arena *a, const Plan *p, const Plan *bp, const CgFiles *files);
void cg_reference(FILE *f, Arena *a, const Plan *p, const Plan *bp, const CgFiles *files);
void cg_driver(FILE *f, Arena *a, const Graph *g, const CgFiles *files);
/* cg_py.c: a Python module (--emit=py) that loads the C of p and bp (the
 * backward's plan, or NULL) built as a shared library and runs it on
 * NumPy arrays through ctypes. */
/* One variant of a build of several (cfc -D S=16,32): its tag ("S=16"),
 * the C prefix of its entry points (its graphs' name, "llama_S16") and its
 * plans. */
typedef struct CgVariant {
	const char *tag, *name;
	const Plan *plan, *bplan;
} CgVariant;
/* The module of one build (nv = 0: p and bp; else the nv variants vs of
 * model, in one module that picks one by the shapes it is called with). */
void cg_python(FILE *f, Arena *a, const Plan *p, const Plan *bp, const CgVariant *vs, int nv,
               const char *model);

#endif
