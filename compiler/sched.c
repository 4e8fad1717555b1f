/* sched.c: the schedule IR's small shared pieces: evaluating index
 * expressions and guards for a concrete rank and round, the round-robin
 * pairing, the lanes of a schedule choice, and the spelling of a schedule
 * kind.
 * requires: nothing. ensures: pure functions of their arguments. */
#include <string.h>

#include "sched.h"

int
sched_mod(long long x, int n)
{
	long long m = x % n;

	return (int)(m < 0 ? m + n : m);
}

/* Rounds of a round-robin tournament over n players (circle method):
 * n - 1 when n is even, n when it is odd (each player sits out once). */
int
sched_rounds(int n)
{
	return n <= 1 ? 1 : n % 2 == 0 ? n - 1 : n;
}

/* The partner of r in round k, or -1 when r sits the round out.
 * Odd n: r and (k - r) mod n meet, and r sits out when 2r = k (mod n).
 * Even n: the odd case over the first n - 1 players, with player n - 1
 * taking the place of the one who would sit out. */
int
sched_partner(int r, int k, int n)
{
	if (n <= 1)
		return -1;
	if (n % 2) {
		k = sched_mod(k, n);
		return sched_mod(2LL * r - k, n) == 0 ? -1 : sched_mod((long long)k - r, n);
	}
	int m = n - 1;
	k = sched_mod(k, m);
	if (r == m)
		return sched_mod((long long)k * ((m + 1) / 2), m);
	return sched_mod(2LL * r - k, m) == 0 ? m : sched_mod((long long)k - r, m);
}

int
sched_ix(const Ix *x, int r, int i)
{
	if (x->kind == IX_PARTNER)
		return sched_partner(r, x->b * i + x->c, x->n);
	long long v = (long long)x->a * r + (long long)x->b * i + x->c;
	return x->n ? sched_mod(v, x->n) : (int)v;
}

int
sched_guard(const Guard *g, int r, int i, int n)
{
	if (i < g->lo || i > g->hi)
		return 0;
	return !g->active || sched_partner(r, i + g->aoff, n) >= 0;
}

const Item *
sched_next(const Coll *c, int r, SchedPos *p)
{
	for (; p->ph < c->phases.n; p->ph++, p->i = 0) {
		const Phase *ph = c->phases.v[p->ph];
		for (; p->i < ph->nrounds; p->i++, p->t = 0)
			for (; p->t < ph->nlanes; p->t++, p->k = 0)
				while (p->k < ph->lanes[p->t].n) {
					const Item *it = ph->lanes[p->t].v[p->k++];
					if (sched_guard(&it->g, r, p->i, c->N))
						return it;
				}
	}
	return NULL;
}

/* Is x (r + b*i + c) mod N: a rank, or the rank part of a slice, that
 * turns with r? */
static int
turns(const Ix *x, int N)
{
	return x->kind == IX_AFFINE && x->a == 1 && x->n == N;
}

/* Is x the same on every rank (a round, a member of a rotating set)? */
static int
fixed(const Ix *x)
{
	return x->kind == IX_AFFINE && x->a == 0;
}

/* One slice whose owner turns with r and whose lane does not. */
static int
sym_sel(const Sel *s, int N)
{
	return s->cnt == 1 && s->per > 0 && turns(&s->hi, N) && fixed(&s->lo);
}

/* A chunk the same on every rank, that the turn maps onto itself: the
 * slices of every owner at one lane, or every slice. */
static int
sym_set(const Coll *c, const Sel *s)
{
	int P = c->nslices / c->N;

	return s->per == 0 && fixed(&s->lo) && c->nslices % c->N == 0 &&
	       ((s->stride == P && s->cnt == c->N) || (s->stride == 1 && s->cnt == c->nslices));
}

static int
sym_ref(const Coll *c, const BufRef *b, int set)
{
	const Buf *bf = c->bufs.v[b->buf];

	return (sym_sel(&b->sel, c->N) || (set && sym_set(c, &b->sel))) && fixed(&b->rot) &&
	       (bf->nparts > 1 ? turns(&b->part, c->N) : fixed(&b->part));
}

/* The whole result of an accumulating node (rnode_sums), named the same
 * on every rank: it holds the rank's own sum, which no transfer moves, so
 * setting it to zero is the same on every rank and the turn maps it onto
 * itself. */
static int
sym_acc(const Coll *c, const BufRef *b)
{
	if (!fixed(&b->rot) || !fixed(&b->sel.hi) || !fixed(&b->sel.lo) || !fixed(&b->part))
		return 0;
	for (int k = 0; k < c->region.n; k++) {
		const RNode *rn = c->region.v[k];
		if (rnode_sums(rn) && rn->buf == b->buf)
			return 1;
	}
	return 0;
}

static int
sym_item(const Coll *c, const Item *it)
{
	if (it->g.active)
		return 0;
	switch (it->kind) {
	case IT_COMPUTE:
		return (sym_sel(&it->u.comp.sel, c->N) || sym_set(c, &it->u.comp.sel)) &&
		       sym_ref(c, &it->u.comp.dst, 1);
	case IT_ZERO:
		if (sym_acc(c, &it->u.move.dst))
			return 1;
		/* fall through */
	case IT_ADD: case IT_COPY:
		return sym_ref(c, &it->u.move.dst, 0) &&
		       (it->kind == IT_ZERO || sym_ref(c, &it->u.move.src, 0));
	case IT_SEND: case IT_RECV:
		return sym_ref(c, &it->u.xfer.buf, 0) && turns(&it->u.xfer.peer, c->N) &&
		       fixed(&it->u.xfer.round);
	case IT_COLL:
		return it->u.coll.op != OP_ALL_REDUCE && sym_set(c, &it->u.coll.sel) &&
		       fixed(&it->u.coll.round);
	case IT_WAIT:
		return fixed(&it->u.wait.round);
	case IT_HOST: /* the same whole stage on every rank */
		return 1;
	}
	return 0;
}

int
sched_symmetric(const Coll *c)
{
	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++)
				if (!sym_item(c, ph->lanes[t].v[j]))
					return 0;
	}
	return 1;
}

int
sched_turns(const Coll *c, const Item *it)
{
	switch (it->kind) {
	case IT_COMPUTE: return sym_sel(&it->u.comp.sel, c->N);
	case IT_ADD: case IT_COPY: case IT_ZERO: return sym_sel(&it->u.move.dst.sel, c->N);
	case IT_SEND: case IT_RECV: return sym_sel(&it->u.xfer.buf.sel, c->N);
	default: return 0;
	}
}

int
sched_turn(const Coll *c, int s, int d)
{
	int P = c->nslices / c->N, q = s / P;

	return sched_mod(q + d, c->N) * P + s % P;
}

void
sched_set_how(Coll *c, const SchedUse *u)
{
	c->how = u->how;
	c->P = sched_lanes(&u->how);
	c->nslices = (int)u->nslices;
}

int
sched_lanes(const SchedChoice *s)
{
	if (s->kind == SK_SLICE)
		return s->k;
	if (s->kind == SK_FUSE)
		return s->m * (s->topo == TP_BIDIR ? 2 : 1);
	return 1;
}

/* "fuse(ring)", "fuse(bidir,m=2)", "fuse(ring,split=query)", "slice(4)",
 * "vanilla", "auto": the spelling of the verify summary line, which is
 * graph_sched_str's without the spaces. */
const char *
sched_kind_str(Arena *a, const SchedChoice *s)
{
	char *t = arena_strdup(a, graph_sched_str(a, s)), *q = t;

	for (const char *p = t; *p; p++)
		if (*p != ' ')
			*q++ = *p;
	*q = 0;
	return t;
}
