/* sched_lanes.c: the lanes of the schedule picture (sched_dot.c). Ranks
 * whose step programs are alike share one lane, drawn as its lowest rank:
 * alike in a collective that is the same on every rank up to the turn
 * r -> r + d (sched_symmetric, the property the one-rank proof rests on),
 * or in one that is not, item by item the same (every index, peer, slice
 * and guard equal); and in every collective of the forward and the
 * backward alike, with the same ranks inside each collective's group.
 * A ring on any number of ranks is one lane; a round-robin exchange,
 * whose ranks differ, a lane per rank.
 * requires: a lowered schedule. ensures: lanes in rank order, each named
 * by its ranks; at most maxlanes lanes, else (too many distinct programs)
 * the first few ranks, one lane each, the rest not drawn; the cost grows
 * with the ranks times maxlanes, not with the ranks squared. */
#include <stdlib.h>

#include "codegen.h"

/* Every collective of the forward and the backward, with whether it is
 * symmetric (asked once: it walks every item). */
typedef struct LColls {
	const Coll **c;
	char *sym;
	int n;
} LColls;

static void
lane_colls(Arena *a, LColls *L, const Sched *s, const Sched *bwd)
{
	int n = s->colls.n + (bwd ? bwd->colls.n : 0);

	L->c = arena_alloc(a, (size_t)(n + 1) * sizeof *L->c);
	L->sym = arena_alloc(a, (size_t)n + 1);
	for (int k = 0; k < s->colls.n; k++)
		L->c[L->n++] = s->colls.v[k];
	for (int k = 0; bwd && k < bwd->colls.n; k++)
		L->c[L->n++] = bwd->colls.v[k];
	for (int k = 0; k < L->n; k++)
		L->sym[k] = L->c[k]->N > 1 && sched_symmetric(L->c[k]);
}

static int
lane_ix_same(const Ix *x, int r, int q, int i)
{
	return sched_ix(x, r, i) == sched_ix(x, q, i);
}

static int
lane_sel_same(const Sel *s, int r, int q, int i)
{
	return lane_ix_same(&s->hi, r, q, i) && lane_ix_same(&s->lo, r, q, i);
}

static int
lane_ref_same(const BufRef *b, int r, int q, int i)
{
	return lane_ix_same(&b->rot, r, q, i) && lane_sel_same(&b->sel, r, q, i) &&
	       lane_ix_same(&b->part, r, q, i);
}

/* Does item it do the same on ranks r and q in round i? */
static int
lane_item_same(const Item *it, int r, int q, int i)
{
	switch (it->kind) {
	case IT_COMPUTE:
		return lane_sel_same(&it->u.comp.sel, r, q, i) &&
		       lane_ref_same(&it->u.comp.dst, r, q, i);
	case IT_ADD:
	case IT_COPY:
		return lane_ref_same(&it->u.move.dst, r, q, i) &&
		       lane_ref_same(&it->u.move.src, r, q, i);
	case IT_ZERO:
		return lane_ref_same(&it->u.move.dst, r, q, i);
	case IT_SEND:
	case IT_RECV:
		return lane_ref_same(&it->u.xfer.buf, r, q, i) &&
		       lane_ix_same(&it->u.xfer.peer, r, q, i) &&
		       lane_ix_same(&it->u.xfer.round, r, q, i);
	case IT_COLL:
		return lane_sel_same(&it->u.coll.sel, r, q, i) &&
		       lane_ix_same(&it->u.coll.round, r, q, i);
	case IT_WAIT:
		return lane_ix_same(&it->u.wait.round, r, q, i);
	case IT_HOST: /* order.c's: one stage in one round on every rank */
		return 1;
	}
	return 0;
}

/* Do ranks r and q of c run the same items, step by step, alike? */
static int
lane_same_program(const Coll *c, int r, int q)
{
	SchedPos a = {0}, b = {0};

	for (;;) {
		const Item *x = sched_next(c, r, &a), *y = sched_next(c, q, &b);
		if (x != y || (x && (a.ph != b.ph || a.i != b.i || a.t != b.t)))
			return 0;
		if (!x)
			return 1;
		if (!lane_item_same(x, r, q, a.i))
			return 0;
	}
}

/* Are ranks r and q alike in every collective? */
static int
lane_alike(const LColls *L, int r, int q)
{
	for (int k = 0; k < L->n; k++) {
		const Coll *c = L->c[k];
		if ((r < c->N) != (q < c->N))
			return 0;
		if (r < c->N && !L->sym[k] && !lane_same_program(c, r, q))
			return 0;
	}
	return 1;
}

/* "rank 2", "ranks 0-3 (rotations)", "ranks 0, 2, ..., 14 (8 ranks, alike)". */
static const char *
lane_name(Arena *a, const DotLanes *D, const LColls *L, int lane)
{
	int n = 0, lo = -1, hi = -1, second = -1, turned = 0;

	for (int r = 0; r < D->nranks; r++)
		if (D->lane[r] == lane) {
			if (n == 1)
				second = r;
			lo = lo < 0 ? r : lo, hi = r, n++;
		}
	if (n == 1)
		return arena_printf(a, "rank %d", lo);
	/* rotations: in some collective two of them run turned programs */
	for (int k = 0; k < L->n && !turned; k++)
		turned = L->sym[k] && second < L->c[k]->N;
	const char *how = turned ? "rotations" : "alike";
	if (hi - lo + 1 == n)
		return arena_printf(a, "ranks %d-%d (%s)", lo, hi, how);
	const char *list = arena_printf(a, "%d", lo);
	int shown = 1;
	for (int r = lo + 1; r < D->nranks && shown < (n <= 4 ? n : 2); r++)
		if (D->lane[r] == lane)
			list = arena_printf(a, "%s, %d", list, r), shown++;
	if (shown < n)
		return arena_printf(a, "ranks %s, ..., %d (%d ranks, %s)", list, hi, n, how);
	return arena_printf(a, "ranks %s (%s)", list, how);
}

static int
lane_nranks(const LColls *L)
{
	int n = 1;

	for (int k = 0; k < L->n; k++)
		if (L->c[k]->N > n)
			n = L->c[k]->N;
	return n;
}

DotLanes *
dot_lanes_new(Arena *a, const Sched *s, const Sched *bwd, int maxlanes, int fewlanes)
{
	DotLanes *D = arena_alloc(a, sizeof *D);
	LColls L = {0};

	lane_colls(a, &L, s, bwd);
	D->nranks = lane_nranks(&L);
	D->lane = arena_alloc(a, (size_t)D->nranks * sizeof *D->lane);
	D->rank = arena_alloc(a, (size_t)(maxlanes + 1) * sizeof *D->rank);
	for (int r = 0; r < D->nranks && D->n <= maxlanes; r++) {
		int k = 0;
		while (k < D->n && !lane_alike(&L, r, D->rank[k]))
			k++;
		if (k == D->n)
			D->rank[D->n++] = r;
		D->lane[r] = k;
		D->folded |= k < r;
	}
	if (D->n > maxlanes) { /* too many programs: the first ranks, a lane each */
		D->n = D->nranks <= maxlanes ? D->nranks : fewlanes;
		D->folded = 0;
		for (int r = 0; r < D->nranks; r++)
			D->lane[r] = r < D->n ? r : -1;
		for (int k = 0; k < D->n; k++)
			D->rank[k] = k;
	}
	D->name = arena_alloc(a, (size_t)D->n * sizeof *D->name);
	for (int k = 0; k < D->n; k++)
		D->name[k] = lane_name(a, D, &L, k);
	D->colls = L.c, D->sym = L.sym, D->ncolls = L.n;
	return D;
}

/* ---- the messages into the lanes' ranks ---- */

static int
lane_msg_cmp(const void *x, const void *y)
{
	const VerifyMsg *m = x, *n = y;

	if (m->dstep != n->dstep)
		return m->dstep < n->dstep ? -1 : 1;
	if (m->sstep != n->sstep)
		return m->sstep < n->sstep ? -1 : 1;
	if (m->src != n->src)
		return m->src < n->src ? -1 : 1;
	return (m->slice > n->slice) - (m->slice < n->slice);
}

/* The messages rank 0 of symmetric c receives: verify_messages runs rank
 * 0 and turns its messages to the receivers below nr, keeping those whose
 * sender is below nr too; turned back to rank 0, each is there for some
 * receiver while 2 * nr > N. Past 2 * MSGRANKS ranks only the messages
 * from senders within MSGRANKS of the receiver are found: a ring's and a
 * bidir's all, an all-to-all's (its peer moves a rank a round) those of
 * the steps drawn, the first HEADSTEPS and the last (sched_dot.c); the
 * memory is a message list per receiver kept (tp = 4096: 16 of them, not
 * 2049). */
enum { MSGRANKS = 16 };

static int
lane_msgs_rank0(const Coll *c, VerifyMsg **out, int *nout)
{
	int N = c->N, nr = N / 2 + 1 < MSGRANKS ? N / 2 + 1 : MSGRANKS, n, k = 0;
	VerifyMsg *m;

	if (verify_messages(c, nr < N ? nr : N, &m, &n))
		return 1;
	for (int j = 0; j < n; j++) {
		int d = m[j].dst;
		m[j].src = sched_mod((long long)m[j].src - d, N);
		m[j].slice = sched_turn(c, m[j].slice, -d);
		m[j].dst = 0;
	}
	qsort(m, (size_t)n, sizeof *m, lane_msg_cmp);
	for (int j = 0; j < n; j++)
		if (!k || lane_msg_cmp(&m[k - 1], &m[j]))
			m[k++] = m[j];
	*out = m, *nout = k;
	return 0;
}

int
dot_lane_messages(Arena *a, const DotLanes *D, const Coll *c, VerifyMsg **out, int *nout)
{
	int sym = 0, n, k = 0;
	VerifyMsg *m;

	for (int j = 0; j < D->ncolls; j++)
		if (D->colls[j] == c)
			sym = D->sym[j];
	*out = NULL, *nout = 0;
	if (!D->folded) /* a lane a rank: between the ranks drawn */
		return verify_messages(c, D->n, out, nout);
	if (!sym) { /* every rank run: those into a lane's rank */
		if (verify_messages(c, c->N, &m, &n))
			return 1;
		for (int j = 0; j < n; j++)
			if (D->lane[m[j].dst] >= 0 && D->rank[D->lane[m[j].dst]] == m[j].dst)
				m[k++] = m[j];
		*out = m, *nout = k;
		return 0;
	}
	if (lane_msgs_rank0(c, &m, &n))
		return 1;
	*out = arena_alloc(a, ((size_t)n * (size_t)D->n + 1) * sizeof **out);
	for (int l = 0; l < D->n; l++) {
		int q = D->rank[l];
		for (int j = 0; q < c->N && j < n; j++)
			(*out)[k++] = (VerifyMsg){sched_mod((long long)m[j].src + q, c->N), m[j].sstep, q,
			                          m[j].dstep, sched_turn(c, m[j].slice, q)};
	}
	*nout = k;
	return 0;
}
