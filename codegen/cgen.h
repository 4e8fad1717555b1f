/* cgen.h: what the C generators share: naming, views, one op's call. */
#ifndef CGEN_H
#define CGEN_H

#include "cf.h"
#include "emit.h"

typedef struct Cg {
	Arena *a;
	const Graph *g;
	Emitter e;
	const char *prefix;  /* C prefix of every public name: the model name */
	const char *upper;   /* the same in upper case, for macros */
	const char **cname;  /* C name of each value, by Value.id */
	int64_t *off;        /* workspace offset of each value (-1: none) */
	int64_t wsbytes;     /* workspace size */
	int whole;           /* serial reference: every tensor whole */
	char *used;          /* by value id: declare a view (NULL: all) */
} Cg;

enum { CG_ALIGN = 256 }; /* workspace alignment of every tensor, bytes */
/* bytes rounded up to a multiple of CG_ALIGN */
int64_t cg_align(int64_t bytes);

void cg_init(Cg *c, Arena *a, const Graph *g, FILE *f, const char *srcname,
             int lines, int whole);
/* Extent of dim d of v as this program holds it (whole or per rank). */
int64_t cg_extent(const Cg *c, const Value *v, int d);
int64_t cg_bytes(const Cg *c, const Value *v);
/* "{2, 64, 64}" */
const char *cg_dims(const Cg *c, const Value *v);
const char *cg_dtype(DType t);
/* Emits the call of node n; out and in[] are C expressions of cfrt_view
 * lvalues; q_offset: the global index of the first query row (attention);
 * beta: 1 to accumulate into out (matmul only). */
void cg_op(Cg *c, const Node *n, const char *out, const char *const *in,
           const char *q_offset, int beta);
/* The comment naming node n and where it comes from. */
void cg_comment(Cg *c, const Node *n);
/* The static helpers every generated file starts with. */
void cg_helpers(Cg *c);
/* Workspace layout: every value that is neither in, weight nor output and
 * no alias gets an aligned offset. The serial reference (whole) aliases
 * the result of a collective, outputs aside, to its input. */
void cg_layout(Cg *c);
/* Declares the view local of every value. */
void cg_views(Cg *c);

/* Whether C text mentions identifier name as a token. */
int cg_mentions(const char *text, const char *name);

/* The entry points, one per --emit kind. */
void cg_header(FILE *f, Arena *a, const Graph *g);
void cg_reference(FILE *f, Arena *a, const Graph *g, const char *src, int lines);
void cg_driver(FILE *f, Arena *a, const Graph *g);
struct Sched;
void cg_parallel(FILE *f, Arena *a, const struct Sched *s, const char *src, int lines);

#endif
