/* coalesce.c: small collectives packed into one transfer. Every all_reduce
 * of at most the threshold's bytes per rank is a candidate; candidates of
 * one group, element type, spread and schedule none of which depends on
 * another's result, directly or through another pack (ready close
 * together: the pack waits for the last of them, and what reads a
 * member's result waits for the pack; no two packs wait for each other)
 * are packed, up to MAXIN of them and the threshold's bytes in all: one
 * OP_PACK copies their inputs into the slots of a 1-d buffer (padded
 * with zeros to a multiple of its slices), one all_reduce reduces it,
 * and one OP_UNPACK per member copies its slot out into the member's own
 * result. The pass rewrites the graph; regions, lowering, the plan and
 * the verifier handle the packed collective as any other, and
 * verify_pack.c proves the slots.
 * requires: a graph with locality, no schedule made of it yet.
 * ensures: coalesce_graph's contract (cf.h); the graph topological (the
 * old order kept but where a reader of a member must now wait for the
 * pack) and every member's result Value the same object, now defined by
 * its unpack. */
#include <string.h>

#include "cf.h"
#include "sched.h"

/* A pack being filled. */
typedef struct Bucket {
	Node *m[MAXIN];
	int n;
	int64_t bytes;
	int open;
	const char *key; /* group, type, spread and schedule */
} Bucket;

int64_t
coalesce_bytes(const Graph *g, int64_t bytes)
{
	const Graph *s = g->fwd ? g->fwd : g;

	if (bytes >= 0)
		return bytes;
	return s->coalesce_loc.line ? s->coalesce : COALESCE_DEFAULT;
}

const Pack *
coalesce_pack_of(const Graph *g, const Node *n)
{
	for (int k = 0; k < g->packs.n; k++)
		if (((Pack *)g->packs.v[k])->coll == n)
			return g->packs.v[k];
	return NULL;
}

static void
note(Graph *g, const Node *n, const char *why)
{
	CoalesceNote *c = arena_alloc(g->arena, sizeof *c);

	c->node = n;
	c->why = why;
	vec_push(g->arena, &g->unpacked, c);
}

static int64_t
bytes_of(const Node *n)
{
	return value_rank_elems(n->in[0]) * dtype_size[n->in[0]->dtype];
}

/* A node the walk reached, and the first bucket it passed through. */
typedef struct Reach {
	const Node *x;
	int via;
} Reach;

/* The walk of depends(): scratch marks by node id (a stamp not used
 * before marks a node seen), each node's bucket (-1: none), and a stack
 * of as many entries as nodes (each is pushed once a walk). */
typedef struct Walk {
	int *seen;
	int stamp;
	int *in;
	const Bucket *b;
	Reach *stack;
} Walk;

/* Does node to (not yet in a bucket) need the result of node from (ids
 * below to's) once the buckets so far are packs? A walk down the uses,
 * past no node after to (ids are a topological order: nothing after to
 * reaches it, and every bucket's members are before it); a node reached
 * that is a member of a bucket reaches all of its members, whose results
 * the unpacks give only once the pack has read that one (from's own
 * bucket is not reached so: the pack reads from's input, not its
 * result). So no two buckets can wait for each other, a cycle. *via: the
 * first bucket passed through on the way (-1: to reads from directly). */
static int
depends(const Node *from, const Node *to, Walk *w, int *via)
{
	Reach *stack = w->stack;
	int n = 0, found = 0, stamp = ++w->stamp;

	stack[n++] = (Reach){from, -1};
	w->seen[from->id] = stamp;
	while (n && !found) {
		Reach it = stack[--n];
		int k = w->in[it.x->id];
		/* the members of it.x's bucket, then the readers of it.x */
		int nm = k >= 0 && it.x != from ? w->b[k].n : 0, nu = it.x->out->uses.n;
		for (int e = 0; e < nm + nu && !found; e++) {
			const Node *u = e < nm ? w->b[k].m[e] : it.x->out->uses.v[e - nm];
			int v = e < nm && it.via < 0 ? k : it.via;
			if (u == to)
				found = 1, *via = v;
			if (u->id >= to->id || w->seen[u->id] == stamp)
				continue;
			w->seen[u->id] = stamp;
			stack[n++] = (Reach){u, v};
		}
	}
	return found;
}

/* Why all_reduce n cannot be packed at all, or NULL. */
static const char *
unfit(Arena *a, const Node *n, int64_t limit)
{
	const Value *x = n->in[0];

	if (!limit)
		return "coalescing is off (coalesce = 0)";
	if (n->a.coll.group->size == 1) /* a copy at most: packing adds two */
		return arena_printf(a, "a group of one rank (%s = 1): nothing to move",
		                    n->a.coll.group->name);
	if (bytes_of(n) > limit)
		return arena_printf(a, "%lld bytes per rank, above the threshold of %lld",
		                    (long long)bytes_of(n), (long long)limit);
	if (dist_count(&x->dist, DI_SPLIT))
		return arena_printf(a, "its partial sum is split over %s",
		                    dist_group(&x->dist, DI_SPLIT)->name);
	return NULL;
}

/* What members of one pack must share. */
static const char *
key_of(Arena *a, const Node *n)
{
	const Value *x = n->in[0];
	const char *k = arena_printf(a, "%s %s %s", n->a.coll.group->name,
	                             dtype_name[x->dtype], graph_sched_str(a, n->sched));

	for (int i = 0; i < MAXGROUPS; i++)
		k = arena_printf(a, "%s %d", k, (int)x->dist.p[i].kind);
	return k;
}

/* Adds n to an open bucket of its key, or says in *why why it could not
 * join the one there was (closing it). 1: added. */
static int
join(Arena *a, Bucket *b, int nb, Node *n, const char *key, int64_t limit, const char **why,
     Walk *w)
{
	for (int k = 0; k < nb; k++) {
		Bucket *q = &b[k];
		if (!q->open || strcmp(q->key, key))
			continue;
		const char *first = value_uname(q->m[0]->out);
		const Node *dep = NULL;
		int via = -1;
		for (int j = 0; j < q->n && !dep; j++)
			dep = depends(q->m[j], n, w, &via) ? q->m[j] : NULL;
		if (dep && via >= 0)
			*why = arena_printf(a, "it depends on %s, in the pack of %s, through the pack "
			                    "of %s", value_uname(dep->out), first,
			                    value_uname(b[via].m[0]->out));
		else if (dep)
			*why = arena_printf(a, "it depends on %s, in the pack of %s", value_uname(dep->out),
			                    first);
		else if (q->n == MAXIN)
			*why = arena_printf(a, "the pack of %s is full (%d collectives)", first, MAXIN);
		else if (q->bytes + bytes_of(n) > limit)
			*why = arena_printf(a, "the pack of %s would pass the threshold of %lld bytes",
			                    first, (long long)limit);
		else {
			w->in[n->id] = k;
			q->m[q->n++] = n;
			q->bytes += bytes_of(n);
			return 1;
		}
		q->open = 0;
	}
	return 0;
}

static Value *
new_value(Graph *g, const char *name, const Value *like, int64_t elems, Dist dist)
{
	Value *v = arena_alloc(g->arena, sizeof *v);

	v->name = name;
	v->dtype = like->dtype;
	v->ndim = 1;
	v->shape[0] = elems;
	v->dist = dist;
	v->role = R_ACT;
	v->loc = v->nloc = like->loc;
	v->id = g->values.n;
	vec_push(g->arena, &g->values, v);
	return v;
}

static Node *
new_node(Graph *g, OpKind op, const Node *like, Value *out)
{
	Node *n = arena_alloc(g->arena, sizeof *n);

	n->op = op;
	n->out = out;
	n->loc = like->loc;
	n->layer = like->layer;
	n->lname = like->lname;
	out->def = n;
	return n;
}

/* In the uses of x, node was becomes node now. */
static void
reuse(Value *x, const Node *was, Node *now)
{
	for (int k = 0; k < x->uses.n; k++)
		if (x->uses.v[k] == was)
			x->uses.v[k] = now;
}

/* The schedule of a pack of members scheduled as was. A pack has no
 * region (its members' compute is not slice-local to it), so a fused
 * schedule would run its ring's steps with nothing to overlap: it runs
 * as slice(PACK_SLICES) instead, that many nonblocking library
 * all_reduces of its parts, each posted before compute the whole-pass
 * order runs under it (order.c), the last waited for by the unpacks.
 * vanilla, slice(k) and auto are kept. */
enum { PACK_SLICES = 2 };

static SchedChoice *
pack_sched(Arena *a, SchedChoice *was)
{
	if (!was || was->kind != SK_FUSE)
		return was;
	SchedChoice *how = arena_alloc(a, sizeof *how);
	*how = (SchedChoice){.kind = SK_SLICE, .k = PACK_SLICES, .from = SF_BUILTIN, .loc = was->loc};
	return how;
}

/* Replaces bucket b's members by a pack: the new nodes go where the
 * last member was, into *at (its slot in the new node order). */
static Pack *
make_pack(Graph *g, const Bucket *b, int k)
{
	Arena *a = g->arena;
	const Node *m0 = b->m[0];
	int64_t *off = arena_alloc(a, (size_t)b->n * sizeof *off), t = 0;
	SchedChoice *how = pack_sched(a, m0->sched);
	int64_t cut = (int64_t)m0->a.coll.group->size * sched_lanes(how);
	Pack *p = arena_alloc(a, sizeof *p);
	const char *stem = g->fwd ? "cf_dpack" : "cf_pack";

	for (int j = 0; j < b->n; j++) {
		off[j] = t;
		t += value_rank_elems(b->m[j]->in[0]);
	}
	p->bytes = t * dtype_size[m0->in[0]->dtype];
	t = (t + cut - 1) / cut * cut;
	p->padded = t * dtype_size[m0->in[0]->dtype];
	Value *pv = new_value(g, arena_printf(a, "%s%d", stem, k), m0->in[0], t, m0->in[0]->dist);
	Value *rv = new_value(g, arena_printf(a, "%sed%d", stem, k), m0->in[0], t, m0->out->dist);
	p->pack = new_node(g, OP_PACK, m0, pv);
	p->pack->nin = b->n;
	p->pack->a.pack.off = off;
	p->coll = new_node(g, OP_ALL_REDUCE, m0, rv);
	p->coll->nin = 1;
	p->coll->in[0] = pv;
	p->coll->a.coll = m0->a.coll;
	p->coll->sched = how;
	p->was_sched = m0->sched;
	vec_push(a, &pv->uses, p->coll);
	p->n = b->n;
	p->unpack = arena_alloc(a, (size_t)b->n * sizeof *p->unpack);
	p->was = arena_alloc(a, (size_t)b->n * sizeof *p->was);
	for (int j = 0; j < b->n; j++) {
		Node *m = b->m[j];
		Value *x = m->in[0];
		p->pack->in[j] = x;
		reuse(x, m, p->pack);
		p->was[j] = graph_node_str(a, m);
		Node *u = new_node(g, OP_UNPACK, m, m->out);
		u->nin = 1;
		u->in[0] = rv;
		u->a.pack.at = off[j];
		u->a.pack.slot = j;
		vec_push(a, &rv->uses, u);
		p->unpack[j] = u;
	}
	return p;
}

/* A min-heap of nodes by key (their place in the old order). */
typedef struct Heap {
	Node **v;
	int n;
	const int *key; /* by new index (Node.id while sorting) */
} Heap;

static int
hless(const Heap *h, int i, int j)
{
	return h->key[h->v[i]->id] < h->key[h->v[j]->id];
}

static void
hswap(Heap *h, int i, int j)
{
	Node *x = h->v[i];

	h->v[i] = h->v[j];
	h->v[j] = x;
}

static void
hpush(Heap *h, Node *n)
{
	int i = h->n++;

	h->v[i] = n;
	for (; i && hless(h, i, (i - 1) / 2); i = (i - 1) / 2)
		hswap(h, i, (i - 1) / 2);
}

static Node *
hpop(Heap *h)
{
	Node *top = h->v[0];
	int i = 0;

	h->v[0] = h->v[--h->n];
	for (;;) {
		int c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && hless(h, c + 1, c))
			c++;
		if (!hless(h, c, i))
			break;
		hswap(h, i, c);
		i = c;
	}
	return top;
}

/* The new node order: the members out, each pack's nodes where its last
 * member was, then Kahn's algorithm taking the earliest (in that order)
 * of the nodes whose inputs are all placed: the old order, but for the
 * readers of a member, which now wait for its pack. Ids renumbered. */
static void
reorder(Graph *g, Pack **packs, Bucket *b, int np)
{
	Arena *t = arena_scratch(g->arena);
	ArenaMark mk = arena_mark(t);
	int n0 = g->nodes.n, nn = n0 - 1 + 3 * np + 1, m = 0;
	char *gone = arena_alloc(t, (size_t)n0 + 1);
	Pack **at = arena_alloc(t, ((size_t)n0 + 1) * sizeof *at);
	Node **all = arena_alloc(t, ((size_t)nn + MAXIN * np + 1) * sizeof *all);

	for (int k = 0; k < np; k++) {
		for (int j = 0; j < b[k].n; j++)
			gone[b[k].m[j]->id] = 1;
		at[b[k].m[b[k].n - 1]->id] = packs[k];
	}
	for (int i = 0; i < n0; i++) {
		if (!gone[i])
			all[m++] = g->nodes.v[i];
		if (!at[i])
			continue;
		all[m++] = at[i]->pack;
		all[m++] = at[i]->coll;
		for (int j = 0; j < at[i]->n; j++)
			all[m++] = at[i]->unpack[j];
	}
	/* the edges def -> reader, one per input, as arrays by def (CSR) */
	int *key = arena_alloc(t, (size_t)m * sizeof *key), *wait = arena_alloc(t, (size_t)m * sizeof *wait);
	int *first = arena_alloc(t, ((size_t)m + 1) * sizeof *first), ne = 0;
	Heap h = {arena_alloc(t, (size_t)m * sizeof *h.v), 0, key};
	for (int i = 0; i < m; i++)
		all[i]->id = key[i] = i;
	for (int i = 0; i < m; i++)
		for (int j = 0; j < all[i]->nin; j++)
			if (all[i]->in[j]->def) {
				first[all[i]->in[j]->def->id + 1]++;
				wait[i]++;
				ne++;
			}
	for (int i = 0; i < m; i++)
		first[i + 1] += first[i];
	int *to = arena_alloc(t, ((size_t)ne + 1) * sizeof *to), *fill = arena_alloc(t, (size_t)m * sizeof *fill);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < all[i]->nin; j++)
			if (all[i]->in[j]->def) {
				int d = all[i]->in[j]->def->id;
				to[first[d] + fill[d]++] = i;
			}
	for (int i = 0; i < m; i++)
		if (!wait[i])
			hpush(&h, all[i]);
	Vec nodes = {0};
	while (h.n) {
		Node *x = hpop(&h);
		vec_push(g->arena, &nodes, x);
		for (int e = first[x->id]; e < first[x->id + 1]; e++)
			if (!--wait[to[e]])
				hpush(&h, all[to[e]]);
	}
	if (nodes.n != m)
		die("coalesce: %d of %d nodes left unordered", m - nodes.n, m);
	for (int i = 0; i < nodes.n; i++)
		((Node *)nodes.v[i])->id = i;
	g->nodes = nodes;
	arena_release(t, mk);
}

void
coalesce_graph(Graph *g, int64_t bytes)
{
	Arena *a = g->arena, *t = arena_scratch(a);
	ArenaMark mk = arena_mark(t);
	int64_t limit = coalesce_bytes(g, bytes);
	int nb = 0;
	Bucket *b = arena_alloc(t, ((size_t)g->nodes.n + 1) * sizeof *b);
	const char **why = arena_alloc(t, ((size_t)g->nodes.n + 1) * sizeof *why);
	size_t nn = (size_t)g->nodes.n + 1;
	Walk w = {arena_alloc(t, nn * sizeof *w.seen), 0, arena_alloc(t, nn * sizeof *w.in), b,
	          arena_alloc(t, nn * sizeof *w.stack)};

	for (int i = 0; i < g->nodes.n; i++)
		w.in[i] = -1;
	g->packs = (Vec){0};
	g->unpacked = (Vec){0};
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (n->op != OP_ALL_REDUCE)
			continue;
		if ((why[i] = unfit(a, n, limit)))
			continue;
		const char *key = key_of(t, n);
		if (join(a, b, nb, n, key, limit, &why[i], &w))
			continue;
		w.in[i] = nb;
		b[nb++] = (Bucket){.m = {n}, .n = 1, .bytes = bytes_of(n), .open = 1, .key = key};
	}
	int np = 0;
	Pack **packs = arena_alloc(t, ((size_t)nb + 1) * sizeof *packs);
	for (int k = 0; k < nb; k++) {
		if (b[k].n < 2)
			continue;
		b[np] = b[k];
		packs[np] = make_pack(g, &b[np], np);
		vec_push(a, &g->packs, packs[np++]);
	}
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (n->op == OP_ALL_REDUCE && n->out->def == n)
			note(g, n, why[i] ? why[i] : arena_printf(a, "no other all_reduce over %s "
			     "of its type, spread and schedule is ready with it",
			     n->a.coll.group->name));
	}
	if (np)
		reorder(g, packs, b, np);
	arena_release(t, mk);
	graph_fill_locality(g);
	graph_check(g);
}

void
coalesce_explain(FILE *f, const Graph *g)
{
	const char *pass = g->fwd ? "backward " : "";
	Arena *a = g->arena;

	for (int k = 0; k < g->packs.n; k++) {
		const Pack *p = g->packs.v[k];
		const SchedChoice *was = p->was_sched, *how = p->coll->sched;
		fprintf(f, "%scoalesced %s: %d all_reduces over %s in one buffer of %lld bytes "
		        "(%lld of data)%s%s%s:\n", pass, p->coll->out->name, p->n,
		        p->coll->a.coll.group->name, (long long)p->padded, (long long)p->bytes,
		        how != was ? ", run as " : "", how != was ? graph_sched_str(a, how) : "",
		        how != was ? " (a pack has no region for its members' fused schedule: "
		                     "library all_reduces, each with compute under it)" : "");
		for (int j = 0; j < p->n; j++) {
			const Node *u = p->unpack[j];
			fprintf(f, "  slot %d: %s, elements %lld..%lld\n", j, p->was[j],
			        (long long)u->a.pack.at,
			        (long long)(u->a.pack.at + value_rank_elems(u->out) - 1));
		}
	}
	for (int k = 0; k < g->unpacked.n; k++) {
		const CoalesceNote *c = g->unpacked.v[k];
		fprintf(f, "%snot coalesced %s: %s\n", pass, graph_node_str((Arena *)a, c->node),
		        c->why);
	}
}
