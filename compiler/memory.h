/* memory.h: what a planned step holds per rank, and the budget
 * (memory.c). */
#ifndef MEMORY_H
#define MEMORY_H

#include <stdio.h>

#include "plan.h"

enum { MEM_SHOWN = 4 }; /* saved tensors a message names */

typedef struct MemUse {
	int64_t saved;    /* the saved activations (0 without a backward) */
	int64_t fws, bws; /* the forward's and the backward's workspace */
	int64_t peak;     /* saved + the larger workspace */
} MemUse;

/* g's forward planned as fp, its backward (g->bwd) as bp or NULL. */
MemUse mem_use(const Graph *g, const Plan *fp, const Plan *bp);
/* "memory: peak ... = saved ... + workspace ..." for --explain. */
void mem_explain(FILE *f, const Graph *g, MemUse m);
/* 1 after an error when m's peak is over budget: the peak, its parts and
 * the largest saved tensors at their places (at: where the spec sets the
 * budget, or NULL for --memory; tried: what the message adds, or NULL);
 * else 0. */
int mem_check(Arena *a, Diag *d, const Graph *g, MemUse m, int64_t budget, const Loc *at,
              const char *tried);
/* The largest saved tensor of g that the backward could compute again
 * and whose name is none of tried[0..ntried); NULL when none is left. */
const Value *mem_pick(Arena *a, const Graph *g, const char *const *tried, int ntried);

#endif
