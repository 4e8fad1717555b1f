/* order.c: the whole-pass order (issue 51). Region discovery fuses each
 * collective with the compute that depends on it; this pass orders the
 * pass as a whole, forward or backward, around those regions.
 *
 * requires: a lowered schedule (lower_sched: every collective's program
 * built, Sched.stages and .colls in region_order's order).
 * ensures, under ORDER_PASS (the default):
 *  1. the stages in an order that respects every dependency, each
 *     collective as early as its inputs allow: the pending collective
 *     with the fewest stages left before it next, those stages (in the
 *     order they had) right before it; so the compute a collective waits
 *     on (dX) runs before compute nothing waits on (dW);
 *  1b. in the backward, where a stage that makes a weight's gradient and
 *     reads a tensor for the last time comes right after one that makes
 *     a tensor of the workspace, does not depend on it, and no collective
 *     waits on that one, the two change places: the tensor read last
 *     is free before the other is made, which the plan can put in its
 *     bytes (dW2 = t^T dy before dt = dy W2^T: t's bytes hold dt);
 *  2. every round of a collective's program that posts a transfer and
 *     computes nothing (an all_reduce's all_gather half, a region with no
 *     compute) gets one plain stage of compute that does not depend on
 *     the collective and whose inputs are ready when it starts (an IT_HOST
 *     item at the end of the round's last lane, in round order): the
 *     first such stages after the collective in the order of 1, under
 *     its last such rounds when there are fewer stages than rounds (the
 *     transfers it ends with hidden first: its tail); in the round
 *     before those, when rounds are left, the whole program of the
 *     first later collective that computes, has no exposed round and
 *     whose inputs are ready (else of the one run right before it:
 *     2b, two collectives in flight); a hosted
 *     stage moves right after its host in Sched.stages (Stage.host1), in
 *     the order its host runs it, a hosted collective in Sched.colls
 *     too;
 *  3. Coll.order_note says what each collective with such rounds hosts,
 *     or why nothing: --explain and --emit=sched show it; the verifier
 *     (verify.c: IT_HOST; order_check below; the workspace by
 *     sched_span_lo) proves the result.
 * Under ORDER_PASS_SINGLE all but 2b (one collective in flight at a
 * time); under ORDER_REGION nothing changes. The programs of the
 * collectives are otherwise untouched: the arithmetic of every value is the same in
 * either order, so results are bitwise identical. */
#include <stdio.h>
#include <string.h>

#include "sched.h"

typedef struct Ord {
	Sched *s;
	Arena *t;
	int n;         /* stages */
	int *of;       /* by node id: the stage index that runs it, -1 leaf */
	int *npred;    /* by stage: predecessors */
	int **pred;    /* by stage: its predecessors' stage indexes */
} Ord;

/* The stage index of the stage node nd belongs to, -1 for leaves. */
static int
od_stage_of(const Ord *O, const Node *nd)
{
	return O->of[nd->id];
}

static void
od_edges(Ord *O)
{
	const Graph *g = O->s->g;
	int n = O->n;

	O->npred = arena_alloc(O->t, ((size_t)n + 1) * sizeof *O->npred);
	O->pred = arena_alloc(O->t, ((size_t)n + 1) * sizeof *O->pred);
	int *cap = arena_alloc(O->t, ((size_t)n + 1) * sizeof *cap);
	for (int k = 0; k < g->nodes.n; k++) {
		const Node *nd = g->nodes.v[k];
		int me = od_stage_of(O, nd);
		for (int i = 0; me >= 0 && i < nd->nin; i++) {
			int from = nd->in[i]->def ? od_stage_of(O, nd->in[i]->def) : -1;
			if (from < 0 || from == me)
				continue;
			int seen = 0;
			for (int j = 0; j < O->npred[me] && !seen; j++)
				seen = O->pred[me][j] == from;
			if (seen)
				continue;
			O->pred[me] = arena_grow(O->t, O->pred[me], O->npred[me], &cap[me], 4,
			                         sizeof *O->pred[me]);
			O->pred[me][O->npred[me]++] = from;
		}
	}
}

/* Marks in mark[] (by stage) the stages not yet done that stage k needs,
 * k included; returns how many. */
static int
od_need(const Ord *O, int k, const char *done, char *mark, int *stack)
{
	int sp = 0, cnt = 0;

	memset(mark, 0, (size_t)O->n);
	stack[sp++] = k;
	mark[k] = 1;
	while (sp) {
		int x = stack[--sp];
		cnt++;
		for (int j = 0; j < O->npred[x]; j++) {
			int p = O->pred[x][j];
			if (!done[p] && !mark[p])
				mark[p] = 1, stack[sp++] = p;
		}
	}
	return cnt;
}

/* 1: the new order of the stages into ord[] (indexes into the old). */
static void
od_sequence(Ord *O, int *ord)
{
	Sched *s = O->s;
	int n = O->n, no = 0;
	char *done = arena_alloc(O->t, (size_t)n + 1);
	char *mark = arena_alloc(O->t, (size_t)n + 1);
	char *best = arena_alloc(O->t, (size_t)n + 1);
	int *stack = arena_alloc(O->t, ((size_t)n + 1) * sizeof *stack);

	for (;;) {
		int pick = -1, least = 0;
		for (int k = 0; k < n; k++) {
			const Stage *st = s->stages.v[k];
			if (done[k] || st->kind != ST_COLL)
				continue;
			int cnt = od_need(O, k, done, mark, stack);
			if (pick < 0 || cnt < least) {
				pick = k, least = cnt;
				memcpy(best, mark, (size_t)n);
			}
		}
		if (pick < 0)
			break;
		/* the stages it needs in their old order: the old order
		 * respects every dependency, so this one does too */
		for (int k = 0; k < n; k++)
			if (best[k])
				ord[no++] = k, done[k] = 1;
	}
	for (int k = 0; k < n; k++)
		if (!done[k])
			ord[no++] = k;
}

/* Whether plain stage k reads a tensor of the workspace, or a saved
 * tensor whose bytes the plan may reuse (Graph.saved_ws), that no stage
 * after it in ord reads. */
static int
od_frees(const Ord *O, const int *pos, int k)
{
	const Graph *g = O->s->g;
	const Node *nd = ((Stage *)O->s->stages.v[k])->u.node;

	for (int i = 0; i < nd->nin; i++) {
		const Value *v = nd->in[i];
		if (v->role != R_ACT && !(v->home == HO_SAVED && g->saved_ws))
			continue;
		int last = -1;
		for (int u = 0; u < v->uses.n; u++) {
			int q = od_stage_of(O, v->uses.v[u]);
			if (q >= 0 && pos[q] > last)
				last = pos[q];
		}
		if (last == pos[k])
			return 1;
	}
	return 0;
}

/* 1b: in the backward, a weight-gradient stage that frees a tensor moved
 * before the stage right before it, when that one makes a tensor of the
 * workspace, the first does not depend on it, and no collective does. */
static void
od_free_early(Ord *O, int *ord, int *pos)
{
	const Sched *s = O->s;
	int n = O->n;

	if (!s->g->fwd || n < 2)
		return;
	/* feeds[k]: some collective depends on stage k (ord is topological:
	 * from the last stage back, each marks what it needs) */
	char *feeds = arena_alloc(O->t, (size_t)n + 1);
	for (int p = n - 1; p >= 0; p--) {
		int k = ord[p];
		if (((Stage *)s->stages.v[k])->kind != ST_COLL && !feeds[k])
			continue;
		for (int j = 0; j < O->npred[k]; j++)
			feeds[O->pred[k][j]] = 1;
	}
	for (int p = 0; p + 1 < n; p++) {
		int a = ord[p], b = ord[p + 1];
		const Stage *sa = s->stages.v[a], *sb = s->stages.v[b];
		if (sa->kind != ST_COMPUTE || sb->kind != ST_COMPUTE || feeds[a])
			continue;
		const Value *made = sa->u.node->out, *grad = sb->u.node->out;
		if (made->role != R_ACT || (grad->home != HO_GRADS && grad->home != HO_ACC))
			continue;
		int dep = 0;
		for (int j = 0; j < O->npred[b] && !dep; j++)
			dep = O->pred[b][j] == a;
		if (dep || !od_frees(O, pos, b))
			continue;
		ord[p] = b, ord[p + 1] = a;
		pos[b] = p, pos[a] = p + 1;
		p++;
	}
}

/* The stage running node nd alone, or -1 (a leaf, a node of a collective's
 * region or of another graph). */
static int
od_plain(const Ord *O, const Node *nd)
{
	const Graph *g = O->s->g;
	int k = nd && nd->id < g->nodes.n && g->nodes.v[nd->id] == nd ? od_stage_of(O, nd) : -1;

	return k >= 0 && ((Stage *)O->s->stages.v[k])->kind == ST_COMPUTE &&
	       ((Stage *)O->s->stages.v[k])->u.node == nd ? k : -1;
}

/* Stages t[0..m) into one run: taken out of ord and put back together at
 * the first of their places, or later where what they read is made
 * later, when that is before everything that reads them and t[0] passes
 * no collective of more than one rank on its way up (2 hosts compute
 * under a collective's transfers: taking it from there is not glue's to
 * decide), nor, with all, does any of them on its way up or down. pos[]
 * (by old index) follows ord; tmp: room for ord. */
static void
od_join(Ord *O, int *ord, int *pos, const int *t, int m, int all, int *tmp)
{
	const Sched *s = O->s;
	int n = O->n, first = n, last = -1, lo = 0, hi = n, run = 1;

	for (int i = 0; i < m; i++) {
		if (pos[t[i]] < first)
			first = pos[t[i]];
		if (pos[t[i]] > last)
			last = pos[t[i]];
		if (i && pos[t[i]] != pos[t[0]] + i)
			run = 0;
	}
	if (run)
		return;
	for (int k = 0; k < n; k++) {
		int in = 0;
		for (int i = 0; i < m; i++)
			in |= k == t[i];
		for (int j = 0; j < O->npred[k]; j++) {
			int p = O->pred[k][j], pin = 0;
			for (int i = 0; i < m; i++)
				pin |= p == t[i];
			if (in && !pin && pos[p] + 1 > lo)
				lo = pos[p] + 1;
			if (!in && pin && pos[k] < hi)
				hi = pos[k];
		}
	}
	int at = first > lo ? first : lo;
	if (at > hi)
		return;
	int from = all && first < at ? first : at;
	int to = all ? (at + m > last ? at + m : last) : pos[t[0]];
	for (int q = from; q < to && q < n; q++) {
		const Stage *st = s->stages.v[ord[q]];
		if (st->kind == ST_COLL && st->u.coll->N > 1)
			return;
	}
	/* ord without them, then them before the first stage placed at or
	 * after at */
	int k2 = 0, put = 0;
	for (int q = 0; q < n; q++) {
		int k = ord[q], in = 0;
		if (!put && q >= at) {
			for (int i = 0; i < m; i++)
				tmp[k2++] = t[i];
			put = 1;
		}
		for (int i = 0; i < m; i++)
			in |= k == t[i];
		if (!in)
			tmp[k2++] = k;
	}
	if (!put)
		for (int i = 0; i < m; i++)
			tmp[k2++] = t[i];
	memcpy(ord, tmp, (size_t)n * sizeof *ord);
	for (int q = 0; q < n; q++)
		pos[ord[q]] = q;
}

/* Runs of stages the code generator makes with one call where they are
 * adjacent (cg_par.c), which 1 may have ordered apart, each glued into
 * one (od_join):
 * - an RMS norm's backward and its gain's rows, as grad.c derives them:
 *   dx = rmsnorm_grad(dy, x, gamma), xhat = rmsnorm(x), rows = mul(dy,
 *   xhat), xhat read by that mul alone (plan_joint; 1 orders them
 *   apart: the gain's rows wait for the collective of the gain's
 *   gradient, dx for the next layer's);
 * - a GEMM and the add that is the one reader of its result (plan_joint:
 *   the add made as cuBLASLt's C), such as two gradients of one tensor
 *   summed, which 1 orders apart by the weight gradient made between. */
static void
od_glue(Ord *O, int *ord, int *pos)
{
	const Sched *s = O->s;
	int n = O->n;
	int *tmp = arena_alloc(O->t, ((size_t)n + 1) * sizeof *tmp);

	for (int ka = 0; ka < n; ka++) {
		const Stage *sa = s->stages.v[ka];
		if (sa->kind != ST_COMPUTE)
			continue;
		const Node *a = sa->u.node;
		if (a->op == OP_MATMUL && !a->a.mm.sum && a->out->uses.n == 1 &&
		    ((const Node *)a->out->uses.v[0])->op == OP_ADD) {
			int t[2] = {ka, od_plain(O, a->out->uses.v[0])};
			if (t[1] >= 0)
				od_join(O, ord, pos, t, 2, 1, tmp);
			continue;
		}
		if (a->op != OP_RMSNORM_GRAD || a->nin < 2)
			continue;
		const Node *b = NULL, *c = NULL;
		const Value *x = a->in[1], *dy = a->in[0];
		for (int u = 0; u < x->uses.n && !b; u++) {
			const Node *m = x->uses.v[u];
			if (m->op == OP_RMSNORM && m->nin == 1 && m->a.eps == a->a.eps &&
			    m->out->uses.n == 1)
				b = m;
		}
		if (b)
			c = b->out->uses.v[0];
		if (!c || c->op != OP_MUL || !(c->in[0] == dy || c->in[1] == dy))
			continue;
		int t[3] = {ka, od_plain(O, b), od_plain(O, c)};
		if (t[1] >= 0 && t[2] >= 0)
			od_join(O, ord, pos, t, 3, 0, tmp);
	}
}

/* A round that posts and computes nothing: where a hosted stage goes. */
typedef struct Slot {
	Phase *ph;
	int round;
} Slot;

static int
od_in(const Guard *g, int i)
{
	return g->lo <= i && i <= g->hi;
}

/* The exposed rounds of c, in the order its program runs them. */
static int
od_slots(Arena *t, const Coll *c, Slot **out)
{
	int n = 0, cap = 0;
	Slot *sl = NULL;

	for (int p = 0; p < c->phases.n; p++) {
		Phase *ph = c->phases.v[p];
		for (int i = 0; i < ph->nrounds; i++) {
			int posts = 0, computes = 0;
			for (int l = 0; l < ph->nlanes; l++)
				for (int j = 0; j < ph->lanes[l].n; j++) {
					const Item *it = ph->lanes[l].v[j];
					if (!od_in(&it->g, i))
						continue;
					posts |= it->kind == IT_SEND || it->kind == IT_RECV ||
					         (it->kind == IT_COLL && !it->u.coll.blocking);
					computes |= it->kind == IT_COMPUTE || it->kind == IT_HOST;
				}
			if (!posts || computes)
				continue;
			sl = arena_grow(t, sl, n, &cap, 8, sizeof *sl);
			sl[n++] = (Slot){ph, i};
		}
	}
	*out = sl;
	return n;
}

/* Does collective c's program compute (its region's slices)? */
static int
od_computes(const Coll *c)
{
	for (int p = 0; p < c->phases.n; p++) {
		const Phase *ph = c->phases.v[p];
		for (int l = 0; l < ph->nlanes; l++)
			for (int j = 0; j < ph->lanes[l].n; j++)
				if (((Item *)ph->lanes[l].v[j])->kind == IT_COMPUTE)
					return 1;
	}
	return 0;
}

/* Could the collective of stage k run whole under another's transfers
 * (2b: it computes and has no exposed round)? */
static int
od_guestable(const Ord *O, int k)
{
	Slot *sl;
	const Coll *c = ((Stage *)O->s->stages.v[k])->u.coll;

	return od_computes(c) && !od_slots(O->t, c, &sl);
}

/* What a hosted stage is, for the notes: a plain stage's value, or "the
 * collective X with its region (a, b)". */
static const char *
od_guest(Arena *a, const Stage *st)
{
	if (st->kind == ST_COMPUTE)
		return st->u.node->out->name;
	const Coll *c = st->u.coll;
	const char *r = "";
	for (int j = 0; j < c->region.n; j++)
		r = arena_printf(a, "%s%s%s", r, j ? ", " : "", ((RNode *)c->region.v[j])->node->out->name);
	return arena_printf(a, "the collective %s with its region (%s)", c->node->out->name, r);
}


/* 2b: a collective to run whole in an exposed round of the collective at
 * place p that plain stages leave exposed, or -1: the first after it in
 * ord, not hosted, whose program computes and has no exposed round of
 * its own (hosted, it hosts nothing: its own transfers stay hidden by
 * its region), every input made before the host starts or by one of the
 * ng collectives in guests[] (run before it). Its transfers are then in
 * flight beside the host's (verify.c proves the pair). */
static int
od_coll_guest(Ord *O, const int *ord, const int *pos, int p, const char *hosted,
              const int *guests, int ng)
{
	Sched *s = O->s;

	for (int q = p + 1; q < O->n; q++) {
		int k = ord[q], ok = 1;
		if (((Stage *)s->stages.v[k])->kind != ST_COLL || hosted[k] || !od_guestable(O, k))
			continue;
		for (int j = 0; j < O->npred[k] && ok; j++) {
			int x = O->pred[k][j], here = 0;
			for (int m = 0; m < ng && !here; m++)
				here = guests[m] == x;
			ok = here || (pos[x] < p && x != ord[p]);
		}
		if (ok)
			return k;
	}
	return -1;
}

/* 2: hosts stages under the exposed rounds of the collective at place p
 * of ord (n places); hosted[] (by old index) marks what is hosted, and
 * pos[] (by old index) is the place each stage runs at (a hosted one:
 * its host's). back: the collective run right before it, to host when
 * no later one can be (order_sched says when), or -1; several: 2b at
 * all (ORDER_PASS; not ORDER_PASS_SINGLE). Puts how many it
 * hosts into *nhp and them, in run order, into *list; returns whether
 * exposed rounds are left. */
static int
od_host(Ord *O, const int *ord, int *pos, int p, char *hosted, int *list, Item **items, int *nhp,
        int back, int several)
{
	Sched *s = O->s;
	Arena *a = s->arena;
	const Stage *hs = s->stages.v[ord[p]];
	Coll *c = hs->u.coll;
	Slot *sl;
	int ns = od_slots(O->t, c, &sl), nh = 0;

	*nhp = 0;
	if (!ns)
		return 0;
	for (int q = p + 1; q < O->n && nh < ns; q++) {
		int k = ord[q];
		const Stage *st = s->stages.v[k];
		if (st->kind != ST_COMPUTE || hosted[k])
			continue;
		/* every input made before the host, by a stage run at its
		 * place or hosted earlier, or by one hosted here already */
		int ok = 1;
		for (int j = 0; j < O->npred[k] && ok; j++) {
			int x = O->pred[k][j];
			int here = 0;
			for (int m = 0; m < nh && !here; m++)
				here = list[m] == x;
			ok = here || (pos[x] < p && x != ord[p]);
		}
		if (!ok)
			continue;
		hosted[k] = 1;
		pos[k] = p;
		list[nh++] = k;
	}
	/* fewer than the rounds: the last rounds, so that the transfers
	 * the collective ends with are the ones hidden (its tail); the
	 * rounds before them, while some are left, collectives' programs
	 * (run first, in the order found: nothing hosted here reads them) */
	int np = nh, ng = 0;
	int *guests = arena_alloc(O->t, ((size_t)ns + 1) * sizeof *guests);
	while (several && np + ng < ns) {
		int k = od_coll_guest(O, ord, pos, p, hosted, guests, ng);
		if (k < 0 && !ng && back >= 0)
			k = back;
		if (k < 0)
			break;
		guests[ng++] = k;
		hosted[k] = 1;
		pos[k] = p;
	}
	memmove(list + ng, list, (size_t)np * sizeof *list);
	memcpy(list, guests, (size_t)ng * sizeof *list);
	nh = np + ng;
	const char *names = "";
	for (int m = 0; m < nh; m++) {
		const Stage *st = s->stages.v[list[m]];
		const Slot *at = &sl[ns - nh + m];
		Item *it = arena_alloc(a, sizeof *it);
		it->kind = IT_HOST;
		it->g = (Guard){at->round, at->round, 0, 0};
		it->u.host.node = st->kind == ST_COLL ? st->u.coll->node : st->u.node;
		it->u.host.coll = st->kind == ST_COLL ? st->u.coll : NULL;
		it->id = c->nitems++;
		vec_push(a, &at->ph->lanes[at->ph->nlanes - 1], it);
		items[m] = it;
		names = arena_printf(O->t, "%s%s%s", names, m ? ", " : "", od_guest(O->t, st));
	}
	*nhp = nh;
	if (nh)
		c->order_note = arena_printf(a, "order: runs %s (independent of it) under %d of its "
		                             "%d exposed round%s", names, nh, ns,
		                             ns == 1 ? "" : "s");
	else
		c->order_note = arena_printf(a, "order: %d exposed round%s, and no plain compute that "
		                             "does not depend on it is left to run under %s", ns,
		                             ns == 1 ? "" : "s", ns == 1 ? "it" : "them");
	if (nh && nh < ns)
		c->order_note = arena_printf(a, "%s; %d left exposed: no other plain compute independent "
		                             "of it is ready", c->order_note, ns - nh);
	return nh < ns;
}

/* 3, once every stage has its place: why the collective at place p of
 * ord keeps exposed rounds. Each piece of compute that does not depend
 * on it (the first OD_WHY_SHOWN, then how many more), stage by stage in
 * the order of 1, with where it runs instead:
 * in another collective's region (a region's compute runs in its own
 * collective's program; 2b says when that runs under another's),
 * under another collective (hosted), before it (another collective
 * needed it first), or after it, not ready when it starts (an input
 * is made after it). With none: everything left depends on it. */
enum { OD_WHY_SHOWN = 12 };

static void
od_why(Ord *O, const int *ord, const int *pos, int p, const Vec *stages)
{
	Sched *s = O->s;
	Arena *a = s->arena;
	int host = ord[p], n = O->n;
	Coll *c = ((Stage *)s->stages.v[host])->u.coll;
	Arena *t = O->t;
	char *dep = arena_alloc(t, (size_t)n + 1);
	const char *out = "";
	int any = 0, more = 0, region = 0;

	/* dep[k]: stage k reads the collective's result, or the collective
	 * reads stage k's, directly or not; neither can run under it. The
	 * readers come after it in ord and what it reads before it (ord
	 * respects every dependency): one sweep each way. */
	dep[host] = 1;
	for (int q = p + 1; q < n; q++) {
		int k = ord[q];
		for (int j = 0; j < O->npred[k] && !dep[k]; j++)
			dep[k] = dep[O->pred[k][j]];
	}
	for (int q = p; q >= 0; q--) {
		int k = ord[q];
		if (dep[k])
			for (int j = 0; j < O->npred[k]; j++)
				dep[O->pred[k][j]] = 1;
	}
	for (int q = 0; q < n; q++) {
		int k = ord[q];
		const Stage *st = s->stages.v[k];
		const char *what, *where;
		if (dep[k] || (st->host1 && ((Stage *)stages->v[st->host1 - 1])->u.coll == c))
			continue;
		if (st->kind == ST_COLL && !st->u.coll->region.n)
			continue;
		if (any == OD_WHY_SHOWN) { /* a deep stack: the first few */
			more++;
			continue;
		}
		if (st->kind == ST_COLL) {
			const Coll *x = st->u.coll;
			what = "";
			for (int j = 0; j < x->region.n; j++)
				what = arena_printf(t, "%s%s%s", what, j ? ", " : "",
				                    ((RNode *)x->region.v[j])->node->out->name);
			if (st->host1)
				where = arena_printf(t, "in %s's region, hosted whole under %s",
				                     x->node->out->name, ((Stage *)stages->v[st->host1 - 1])
				                     ->u.coll->node->out->name);
			else
				where = arena_printf(t, "in %s's region, %s it", x->node->out->name,
				                     q < p ? "before" : "after");
			region = 1;
		} else {
			what = st->u.node->out->name;
			if (st->host1) {
				const Stage *h = stages->v[st->host1 - 1];
				where = arena_printf(t, "under %s", h->u.coll->node->out->name);
			} else if (pos[k] < p) {
				where = "run before it";
			} else {
				where = "after it: an input is made after it starts";
			}
		}
		out = arena_printf(t, "%s%s%s (%s)", out, any ? ", " : "", what, where);
		any++;
	}
	if (more)
		out = arena_printf(t, "%s and %d more stage%s", out, more, more == 1 ? "" : "s");
	if (any)
		c->order_note = arena_printf(a, "%s; the compute that does not depend on it: %s%s",
		                             c->order_note, out,
		                             region ? " (a region's compute runs in its own "
		                                      "collective's program, which runs whole under "
		                                      "another's transfers only when its inputs are "
		                                      "ready before that one starts and it has no "
		                                      "exposed round of its own)" : "");
	else
		c->order_note = arena_printf(a, "%s; all the compute left depends on it",
		                             c->order_note);
}

/* How many plain stages (up to want) a collective placed right after
 * place q of ord could host: stages after q, not hosted, each reading
 * only what is made at or before q (the collective host's result not) or
 * by one counted before it. */
static int
od_count(const Ord *O, const int *ord, const int *pos, const char *hosted, char *mark, int host,
         int q, int want)
{
	const Sched *s = O->s;
	int cnt = 0;

	memset(mark, 0, (size_t)O->n);
	for (int r = q + 1; r < O->n && cnt < want; r++) {
		int k = ord[r];
		if (k == host || hosted[k] || ((Stage *)s->stages.v[k])->kind != ST_COMPUTE)
			continue;
		int ok = 1;
		for (int j = 0; j < O->npred[k] && ok; j++) {
			int x = O->pred[k][j];
			ok = x != host && (pos[x] <= q || mark[x]);
		}
		if (ok)
			mark[k] = 1, cnt++;
	}
	return cnt;
}

/* 2a: a collective that no stage reads (a weight gradient's reduction
 * in the backward) and that would find fewer plain stages to host than
 * it has exposed rounds moves later, right after the first place where
 * it finds as many (else where it finds the most, if more than here):
 * nothing waits for it, so the move keeps every dependency. Each moves
 * once. In a stack of layers, a layer's reductions so run under the
 * backward of the layers below (as DDP's buckets do) instead of all
 * queueing for the few stages of their own layer. Returns whether it
 * moved ord[p] (pos[] is then the new places). */
static int
od_defer(Ord *O, int *ord, int *pos, const char *hosted, char *moved, char *mark, int p)
{
	const Sched *s = O->s;
	int host = ord[p], n = O->n;
	Slot *sl;

	if (moved[host])
		return 0;
	moved[host] = 1;
	for (int k = 0; k < n; k++)
		for (int j = 0; j < O->npred[k]; j++)
			if (O->pred[k][j] == host)
				return 0;
	int ns = od_slots(O->t, ((Stage *)s->stages.v[host])->u.coll, &sl);
	int have = od_count(O, ord, pos, hosted, mark, host, p - 1, ns), best = have, at = -1;
	for (int q = p + 1; q < n && best < ns; q++) {
		int c = od_count(O, ord, pos, hosted, mark, host, q, ns);
		if (c > best)
			best = c, at = q;
	}
	if (at < 0)
		return 0;
	memmove(&ord[p], &ord[p + 1], (size_t)(at - p) * sizeof *ord);
	ord[at] = host;
	for (int q = p; q < n; q++)
		if (!hosted[ord[q]])
			pos[ord[q]] = q;
	return 1;
}

/* 2b's collective to host from before the one at place p of ord: the
 * stage run right before it (the last of stages, old index ord[p - 1]),
 * when that is a collective that could run under another's transfers
 * (od_guestable), the one at p does not read it, has exposed rounds,
 * and would find fewer plain stages (od_count) and no later collective
 * (od_coll_guest) for them. Else -1. */
static int
od_back(Ord *O, const int *ord, const int *pos, const char *hosted, char *mark, int p,
        const Vec *stages)
{
	const Sched *s = O->s;
	int host = ord[p], prev = p > 0 ? ord[p - 1] : -1;
	Slot *sl;

	if (prev < 0 || !stages->n || stages->v[stages->n - 1] != s->stages.v[prev] ||
	    ((Stage *)s->stages.v[prev])->kind != ST_COLL || !od_guestable(O, prev))
		return -1;
	for (int j = 0; j < O->npred[host]; j++)
		if (O->pred[host][j] == prev)
			return -1;
	int ns = od_slots(O->t, ((Stage *)s->stages.v[host])->u.coll, &sl);
	if (!ns || od_count(O, ord, pos, hosted, mark, host, p, ns) >= ns ||
	    od_coll_guest(O, ord, pos, p, hosted, NULL, 0) >= 0)
		return -1;
	return prev;
}

int
order_sched(Sched *s, OrderMode mode, Diag *d)
{
	(void)d;
	if (mode == ORDER_REGION || !s->stages.n)
		return 0;
	Arena *t = arena_scratch(s->arena);
	ArenaMark mark = arena_mark(t);
	const Graph *g = s->g;
	Ord O = {.s = s, .t = t, .n = s->stages.n};
	int several = mode == ORDER_PASS; /* 2b */

	O.of = arena_alloc(t, ((size_t)g->nodes.n + 1) * sizeof *O.of);
	int *stage_of_key = arena_alloc(t, ((size_t)g->nodes.n + 1) * sizeof *stage_of_key);
	for (int k = 0; k < g->nodes.n; k++)
		stage_of_key[k] = -1;
	for (int k = 0; k < O.n; k++) {
		const Stage *st = s->stages.v[k];
		stage_of_key[st->kind == ST_COLL ? st->u.coll->node->id : st->u.node->id] = k;
	}
	for (int k = 0; k < g->nodes.n; k++) {
		const Node *nd = g->nodes.v[k];
		int key = s->owner[nd->id] ? s->owner[nd->id]->node->id : nd->id;
		O.of[k] = op_info[nd->op].cls == CL_LEAF ? -1 : stage_of_key[key];
	}
	od_edges(&O);

	int *ord = arena_alloc(t, ((size_t)O.n + 1) * sizeof *ord);
	int *pos = arena_alloc(t, ((size_t)O.n + 1) * sizeof *pos);
	od_sequence(&O, ord);
	for (int p = 0; p < O.n; p++)
		pos[ord[p]] = p;
	od_free_early(&O, ord, pos);
	od_glue(&O, ord, pos);

	/* 2, then the stages anew: each host followed by what it hosts */
	char *hosted = arena_alloc(t, (size_t)O.n + 1);
	int *list = arena_alloc(t, ((size_t)O.n + 1) * sizeof *list);
	Item **items = arena_alloc(t, ((size_t)O.n + 1) * sizeof *items);
	char *left = arena_alloc(t, (size_t)O.n + 1);
	char *moved = arena_alloc(t, (size_t)O.n + 1);
	char *mark2 = arena_alloc(t, (size_t)O.n + 1);
	Vec stages = {0}, colls = {0};
	for (int p = 0; p < O.n; p++) {
		int k = ord[p];
		Stage *st = s->stages.v[k];
		if (hosted[k])
			continue;
		if (st->kind == ST_COLL && od_defer(&O, ord, pos, hosted, moved, mark2, p)) {
			p--;
			continue;
		}
		st->host1 = 0;
		/* 2b looking back: the collective right before it, when it
		 * could run under its transfers and neither plain stages nor
		 * a later collective will fill them (weight gradients'
		 * reductions at the end of a pass, which nothing reads) */
		int back = st->kind == ST_COLL && several ?
		           od_back(&O, ord, pos, hosted, mark2, p, &stages) : -1;
		if (back >= 0) {
			stages.n--;
			colls.n--;
		}
		vec_push(s->arena, &stages, st);
		if (st->kind != ST_COLL)
			continue;
		vec_push(s->arena, &colls, st->u.coll);
		int at = stages.n, nh = 0;
		left[p] = (char)od_host(&O, ord, pos, p, hosted, list, items, &nh, back, several);
		for (int m = 0; m < nh; m++) {
			Stage *h = s->stages.v[list[m]];
			h->host1 = at;
			items[m]->u.host.stage = stages.n;
			vec_push(s->arena, &stages, h);
			if (h->kind == ST_COLL)
				vec_push(s->arena, &colls, h->u.coll);
		}
	}
	for (int p = 0; p < O.n; p++)
		if (left[p])
			od_why(&O, ord, pos, p, &stages);
	s->stages = stages;
	s->colls = colls;
	arena_release(t, mark);
	return 0;
}

int
sched_span_lo(const Sched *s, int k)
{
	const Stage *st = s->stages.v[k];

	return st->host1 ? st->host1 - 1 : k;
}

/* ---- the pass-level proof ---- */

/* Collective c's reads (its inputs from outside its region) all made,
 * then its region's and its own results made (as one: the program
 * proves their order); made[] by value id, *at the run's count. */
static int
oc_coll(const Sched *s, const Coll *c, int k, int *made, int *at, char *err, size_t errlen)
{
	for (int j = -1; j < c->region.n; j++) {
		const Node *nd = j < 0 ? c->node : ((RNode *)c->region.v[j])->node;
		for (int i = 0; i < nd->nin; i++) {
			const Value *v = nd->in[i];
			if (!v->def || op_info[v->def->op].cls == CL_LEAF || made[v->id] ||
			    s->owner[v->def->id] == c || v->def == c->node)
				continue;
			int inside = 0;
			for (int q = 0; q < c->region.n && !inside; q++)
				inside = ((RNode *)c->region.v[q])->node == v->def;
			if (!inside) {
				snprintf(err, errlen, "collective %s (stage %d) reads %s before any stage "
				         "makes it", c->node->out->name, k + 1, v->name);
				return 1;
			}
		}
	}
	++*at;
	made[c->node->out->id] = *at;
	for (int j = 0; j < c->region.n; j++) {
		const Node *nd = ((RNode *)c->region.v[j])->node;
		made[nd->out->id] = *at;
		if (nd->lse)
			made[nd->lse->id] = *at;
	}
	return 0;
}

static const char *
oc_name(const Stage *st)
{
	return st->kind == ST_COLL ? st->u.coll->node->out->name : st->u.node->out->name;
}

int
order_check(const Sched *s, char *err, size_t errlen)
{
	const Graph *g = s->g;
	Arena *t = arena_scratch(s->arena);
	ArenaMark mark = arena_mark(t);
	/* by value id: 1 + the stage that made it (its place in the run) */
	int *made = arena_alloc(t, ((size_t)g->values.n + 1) * sizeof *made);
	int rc = 0, at = 0;

	/* the run: stage by stage; a collective's hosted stages run inside
	 * it, in the order of its program on rank 0 (guards are the same on
	 * every rank: order.c gives IT_HOST a round and no partner) */
	for (int k = 0; k < s->stages.n && !rc; k++) {
		const Stage *st = s->stages.v[k];
		if (st->host1) {
			const Stage *h = st->host1 - 1 < k ? s->stages.v[st->host1 - 1] : NULL;
			int ok = h && h->kind == ST_COLL && !h->host1;
			for (int j = st->host1; ok && j < k; j++)
				ok = ((Stage *)s->stages.v[j])->host1 == st->host1;
			if (!ok) {
				snprintf(err, errlen, "stage %d (%s) is hosted by stage %d, which is not the "
				         "collective right before its hosted stages", k + 1, oc_name(st),
				         st->host1);
				rc = 1;
			}
			continue; /* checked where its host runs it */
		}
		if (st->kind == ST_COMPUTE) {
			const Node *nd = st->u.node;
			for (int i = 0; i < nd->nin && !rc; i++) {
				const Value *v = nd->in[i];
				if (v->def && op_info[v->def->op].cls != CL_LEAF && !made[v->id]) {
					snprintf(err, errlen, "stage %d (%s) reads %s before any stage makes it",
					         k + 1, nd->out->name, v->name);
					rc = 1;
				}
			}
			made[nd->out->id] = ++at;
			if (nd->lse)
				made[nd->lse->id] = at;
			continue;
		}
		const Coll *c = st->u.coll;
		if (oc_coll(s, c, k, made, &at, err, errlen)) {
			rc = 1;
			break;
		}
		/* its hosted stages, in its program's order on rank 0: each
		 * exactly once, in the order they follow it, reading only what
		 * is made before (the collective's own results included: the
		 * machine of verify.c proves they are complete by then); a
		 * hosted collective hosts nothing */
		SchedPos ps = {0};
		int next = k + 1;
		for (const Item *it; !rc && (it = sched_next(c, 0, &ps));) {
			if (it->kind != IT_HOST)
				continue;
			const Stage *hst = next < s->stages.n ? s->stages.v[next] : NULL;
			const Coll *hc = it->u.host.coll;
			if (!hst || hst->host1 != k + 1 || it->u.host.stage != next ||
			    hst->kind != (hc ? ST_COLL : ST_COMPUTE) ||
			    (hc ? hst->u.coll != hc : hst->u.node != it->u.host.node)) {
				snprintf(err, errlen, "collective %s (stage %d) runs %s in round %d, which is "
				         "not its next hosted stage", c->node->out->name, k + 1,
				         it->u.host.node->out->name, ps.i);
				rc = 1;
				break;
			}
			if (hc) {
				SchedPos q = {0};
				for (const Item *x; !rc && (x = sched_next(hc, 0, &q));)
					if (x->kind == IT_HOST) {
						snprintf(err, errlen, "collective %s (stage %d), hosted by %s, hosts "
						         "%s itself", hc->node->out->name, next + 1,
						         c->node->out->name, x->u.host.node->out->name);
						rc = 1;
					}
				if (!rc && oc_coll(s, hc, next, made, &at, err, errlen))
					rc = 1;
				next++;
				continue;
			}
			const Node *nd = it->u.host.node;
			for (int i = 0; i < nd->nin && !rc; i++) {
				const Value *v = nd->in[i];
				if (v->def && op_info[v->def->op].cls != CL_LEAF && !made[v->id]) {
					snprintf(err, errlen, "collective %s (stage %d) runs %s in round %d, "
					         "which reads %s before any stage makes it", c->node->out->name,
					         k + 1, nd->out->name, ps.i, v->name);
					rc = 1;
				}
			}
			made[nd->out->id] = ++at;
			if (nd->lse)
				made[nd->lse->id] = at;
			next++;
		}
		if (!rc && next < s->stages.n && ((Stage *)s->stages.v[next])->host1 == k + 1) {
			snprintf(err, errlen, "collective %s (stage %d) never runs its hosted stage %s",
			         c->node->out->name, k + 1, oc_name(s->stages.v[next]));
			rc = 1;
		}
	}
	arena_release(t, mark);
	return rc;
}
