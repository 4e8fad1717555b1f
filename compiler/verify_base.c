/* verify_base.c: what the schedule's proof (verify.c) and the memory
 * plan's (verify_mem.c) share: the error of a run, naming rank, context,
 * step and slice; a selection's slices for a rank and round; the slice a
 * library collective's element reads or writes. Below both (it calls
 * neither).
 * requires: a V set up by vf_init.
 * ensures: vf_fail keeps the first error only and returns RUN_ERR. */
#include <stdarg.h>
#include <stdio.h>

#include "verify.h"

int
vf_fail(V *v, int r, int slice, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (v->failed++)
		return RUN_ERR;
	/* a symmetric run has rank 0 alone, every rank at its step */
	char ctx[128];
	n = (size_t)snprintf(v->err, v->errlen, "rank %d%s step %d slice %d: ", r,
	                     vm_context_str(v, ctx, sizeof ctx),
	                     r >= 0 && v->rk ? v->rk[r < v->nr ? r : 0].step : 0, slice);
	if (n < v->errlen) {
		va_start(ap, fmt);
		vsnprintf(v->err + n, v->errlen - n, fmt, ap);
		va_end(ap);
	}
	return RUN_ERR;
}

/* The slices of sel for rank r in round i (cnt of them) into out. */
int
vf_sel(const Sel *sel, int r, int i, int *out, int max)
{
	int first = sched_ix(&sel->hi, r, i) * sel->per + sched_ix(&sel->lo, r, i);
	int n = sel->cnt < max ? sel->cnt : max;

	for (int u = 0; u < n; u++)
		out[u] = first + u * sel->stride;
	return n;
}

/* Element e of collective ci on rank r: the slice (and part) it reads
 * (dir 0) or writes (dir 1); 0 when the element does not touch r. */
int
vf_elem(const CollInst *ci, int r, int dir, int e, int *s, int *part)
{
	*part = 0;
	*s = ci->s[e];
	switch (ci->it->u.coll.op) {
	case OP_ALL_GATHER:
		return dir || e == r;
	case OP_REDUCE_SCATTER:
		return !dir || e == r;
	case OP_ALL_REDUCE:
		return 1;
	default: /* all_to_all: send slice s_e to rank e; get part e of s_r */
		if (dir)
			*s = ci->s[r], *part = e;
		return 1;
	}
}

const char *
vm_context_str(const V *v, char *buf, size_t n)
{
	const Vec *gs = v->plan ? &v->plan->s->g->groups : NULL;
	size_t k = 0;

	buf[0] = 0;
	for (int g = 0; gs && g < gs->n && k < n; g++)
		if (v->ctx >> g & 1)
			k += (size_t)snprintf(buf + k, n - k, "%s%s rank %d", k ? ", " : " (",
			                      ((Group *)gs->v[g])->name, v->grank[g]);
	if (k && k < n)
		snprintf(buf + k, n - k, ")");
	return buf;
}
