/* verify_setup.c: the verifier's entry points: a run of the machine
 * (verify.c) set up for every rank of a collective and its plan, its end
 * state checked (every rank holds exactly the result, every transfer
 * waited, every region op computed), its findings (VerifyStats) and its
 * messages for the tests.
 * requires: a lowered collective, and its memory plan when the plan is
 * proved too.
 * ensures: 0, or 1 and the first error in err (rank, step, slice). */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

/* ---- the end state ---- */

static int
vf_end_xfers(V *v, int r)
{
	const Rank *R = &v->rk[r];

	if (R->nlive) {
		const Xfer *x = &v->x[R->live[0]];
		return vf_fail(v, r, x->slice, "its %s rank %d posted at step %d is %s",
		               x->kind == IT_SEND ? "send to" : "receive from", x->peer, x->step,
		               x->match < 0 ? "never matched" : "never waited");
	}
	for (int k = 0; k < v->nci; k++)
		if (v->ci[k].state[r] != 2)
			return vf_fail(v, r, -1, "its %s #%d is %s", op_info[v->c->node->op].name, k,
			               v->ci[k].state[r] ? "never waited" : "never posted");
	return RUN_OK;
}

static int
vf_end_result(V *v, int r)
{
	const Buf *b = vf_buf(v, v->c->bout);
	int lo = b->own ? r * b->nslots : 0;
	char tmp[128];

	for (int part = 0; part < b->nparts; part++)
		for (int s = lo; s < lo + b->nslots; s++) {
			const Cell *c = &vf_cells(v, r, v->c->bout)[part * b->nslots + s - lo];
			int want = vf_expect(v, part, s);
			if (c->slice != s || !vf_same(v, c, want))
				return vf_fail(v, r, s, "ends with %s in slice %d%s of %s; %s expected",
				               vf_cell_str(v, c, tmp, sizeof tmp), s, b->nparts > 1 ?
				               " (part)" : "", b->name, want == ORG_ALL ?
				               "the sum over every rank" : "the data of its owner");
		}
	return RUN_OK;
}

static int
vf_end_region(V *v, int r)
{
	const Coll *c = v->c;

	for (int k = 0; k < c->region.n; k++)
		for (int s = 0; s < c->nslices; s++)
			if (!vf_bit(v->rk[r].made[k], s))
				return vf_fail(v, r, s, "never computes slice %d of %s", s,
				               ((RNode *)c->region.v[k])->node->out->name);
	return RUN_OK;
}

static void
vf_stats(const V *v, VerifyStats *st)
{
	st->exposed = 0;
	st->tailfree = 1;
	for (int r = 0; r < v->nr; r++) {
		const Rank *R = &v->rk[r];
		if (R->exposed > st->exposed)
			st->exposed = R->exposed;
		if (R->lastpost >= 0 && R->lastpost == R->ncomp)
			st->tailfree = 0;
		if (R->exposed && R->exp_run >= R->nrun - 1)
			st->tailfree = 0;
	}
}

/* ---- setup ---- */

static void
vf_rank_init(V *v, int r)
{
	const Coll *c = v->c;
	Rank *R = &v->rk[r];

	R->lastpost = R->exp_run = R->pend = -1;
	R->cells = arena_alloc(v->t, (size_t)c->bufs.n * sizeof *R->cells);
	R->made = arena_alloc(v->t, (size_t)(c->region.n + 1) * sizeof *R->made);
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		int n = bf->nslots * bf->nparts, lo = bf->own ? r * bf->nslots : 0;
		if (!bf->xfer)
			continue;
		R->cells[b] = arena_alloc(v->t, (size_t)n * sizeof **R->cells);
		for (int j = 0; j < n; j++)
			R->cells[b][j] = (Cell){-1, ORG_NONE, 0, 0};
		for (int j = 0; vf_outside(c, bf) && j < n; j++)
			R->cells[b][j] = (Cell){lo + j % bf->nslots, r, 0, 0};
	}
	R->zeroed = arena_alloc(v->t, (size_t)c->region.n + 1);
	for (int k = 0; k < c->region.n; k++)
		R->made[k] = arena_alloc(v->t, (size_t)c->nslices / 8 + 1);
	R->done = c->phases.n == 0;
	R->k = -1;
	if (!R->done)
		vf_advance(v, R);
}

/* full: run every rank even when the program is symmetric. */
static void
vf_init(V *v, const Coll *c, const PColl *pc, int full, char *err, size_t errlen)
{
	memset(v, 0, sizeof *v);
	v->t = arena_scratch(c->arena);
	v->mark = arena_mark(v->t);
	v->c = c;
	v->pc = pc;
	v->plan = pc ? pc->plan : NULL;
	v->sg = c->node->a.coll.group->id;
	v->N = c->N;
	v->W = (c->N + 63) / 64;
	v->err = err;
	v->errlen = errlen;
	v->freex = v->freepool = -1;
	v->t1 = arena_alloc(v->t, (size_t)v->W * sizeof *v->t1);
	v->t2 = arena_alloc(v->t, (size_t)v->W * sizeof *v->t2);
	v->sel = arena_alloc(v->t, MAXGROUP * sizeof *v->sel);
	v->base = arena_alloc(v->t, (size_t)(c->phases.n + 1) * sizeof *v->base);
	for (int ph = 0; ph < c->phases.n; ph++)
		v->base[ph + 1] = v->base[ph] + vf_phase(v, ph)->nrounds * vf_phase(v, ph)->nlanes;
	v->sym = !full && c->N > 1 && sched_symmetric(c);
	v->nr = v->sym ? 1 : v->N;
	v->rk = arena_alloc(v->t, (size_t)v->nr * sizeof *v->rk);
	v->nlabel = c->nlabels;
	v->cimap = arena_alloc(v->t, ((size_t)v->nlabel + 1) * sizeof *v->cimap);
	for (int r = 0; r < v->nr; r++)
		vf_rank_init(v, r);
	if (pc)
		vm_init(v);
}

static void
vf_free(V *v)
{
	arena_release(v->t, v->mark);
}

static int
vf_check(V *v)
{
	if (vf_run(v))
		return RUN_ERR;
	for (int r = 0; r < v->nr; r++) {
		v->rk[r].step = v->base[v->c->phases.n];
		if (vf_end_xfers(v, r) || vf_end_result(v, r) || vf_end_region(v, r))
			return RUN_ERR;
	}
	return RUN_OK;
}

/* Several groups: the proof of the plan runs in every context of the
 * ranks of the other groups that it reads (vm_contexts); the schedule's
 * own checks are the same in each. */
static int
vf_prove(const Coll *c, const PColl *pc, int full, VerifyStats *st, char *err, size_t errlen)
{
	V v;
	char local[512];
	Arena *t = arena_scratch(c->arena);
	ArenaMark mark = arena_mark(t);
	unsigned mask = pc ? vm_coll_groups(c, pc) : 0;
	int (*ctx)[MAXGROUPS];
	int nc = vm_contexts(t, pc ? &pc->plan->s->g->groups : NULL, mask, &ctx), rc = RUN_OK;

	for (int k = 0; k < nc && rc == RUN_OK; k++) {
		vf_init(&v, c, pc, full, err ? err : local, err ? errlen : sizeof local);
		v.ctx = mask;
		memcpy(v.grank, ctx[k], sizeof v.grank);
		rc = vf_check(&v);
		if (!rc && st)
			vf_stats(&v, st);
		vf_free(&v);
	}
	arena_release(t, mark);
	return rc != RUN_OK;
}

int
verify_coll(const Coll *c, const PColl *pc, VerifyStats *st, char *err, size_t errlen)
{
	return vf_prove(c, pc, 0, st, err, errlen);
}

int
verify_coll_full(const Coll *c, const PColl *pc, VerifyStats *st, char *err, size_t errlen)
{
	return vf_prove(c, pc, 1, st, err, errlen);
}

int
verify_messages(const Coll *c, int nranks, VerifyMsg **msgs, int *nmsg)
{
	V v;
	char err[512];
	int n = 0;

	/* every rank drawn: every rank run, the messages in the order they
	 * complete; else a symmetric program runs rank 0 alone and its
	 * messages are turned to every receiver below nranks (rank r gets
	 * what rank 0 gets, from its peer + r) */
	vf_init(&v, c, NULL, nranks >= c->N, err, sizeof err);
	v.want_msgs = 1;
	int rc = vf_check(&v), per = v.sym ? (nranks < v.N ? nranks : v.N) : 1;
	*msgs = arena_alloc(c->arena, ((size_t)v.nmsg * (size_t)per + 1) * sizeof **msgs);
	for (int k = 0; k < v.nmsg; k++)
		for (int r = 0; r < per; r++) {
			VerifyMsg m = v.msgs[k];
			if (v.sym) {
				m.src = sched_mod((long long)m.src + r, v.N);
				m.dst = r;
				m.slice = sched_turn(c, m.slice, r);
			}
			if (m.src < nranks && m.dst < nranks)
				(*msgs)[n++] = m;
		}
	*nmsg = n;
	vf_free(&v);
	return rc != RUN_OK;
}
