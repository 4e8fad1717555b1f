/* coalesce.c: small collectives packed into one transfer. Every all_reduce
 * of at most the threshold's bytes per rank is a candidate; candidates of
 * one group, element type, spread and schedule whose results nobody reads
 * before the last of them is posted (ready close together) are packed, up
 * to MAXIN of them and the threshold's bytes in all: one OP_PACK copies
 * their inputs into the slots of a 1-d buffer (padded with zeros to a
 * multiple of its slices), one all_reduce reduces it, and one OP_UNPACK
 * per member copies its slot out into the member's own result. The pass
 * rewrites the graph; regions, lowering, the plan and the verifier handle
 * the packed collective as any other, and verify_pack.c proves the slots.
 * requires: a graph with locality, no schedule made of it yet.
 * ensures: coalesce_graph's contract (cf.h); the graph topological and
 * every member's result Value the same object, now defined by its unpack. */
#include <limits.h>
#include <string.h>

#include "cf.h"
#include "sched.h"

/* A pack being filled. */
typedef struct Bucket {
	Node *m[MAXIN];
	int n;
	int64_t bytes;
	int minuse;      /* the first reader of any member's result (node id) */
	const Node *reader; /* that reader, or NULL */
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

/* The first node that reads n's result (INT_MAX: none), into *who. */
static int
first_use(const Node *n, const Node **who)
{
	int u = INT_MAX;

	*who = NULL;
	for (int k = 0; k < n->out->uses.n; k++) {
		const Node *r = n->out->uses.v[k];
		if (r->id < u)
			u = r->id, *who = r;
	}
	return u;
}

/* Why all_reduce n cannot be packed at all, or NULL. */
static const char *
unfit(Arena *a, const Node *n, int64_t limit)
{
	const Value *x = n->in[0];

	if (!limit)
		return "coalescing is off (coalesce = 0)";
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
join(Arena *a, Bucket *b, int nb, Node *n, const char *key, int64_t limit, const char **why)
{
	for (int k = 0; k < nb; k++) {
		Bucket *q = &b[k];
		if (!q->open || strcmp(q->key, key))
			continue;
		const char *first = value_uname(q->m[0]->out);
		if (q->minuse < n->id)
			*why = arena_printf(a, "the pack of %s is read (by %s) before it is ready",
			                    first, value_what(q->reader->out));
		else if (q->n == MAXIN)
			*why = arena_printf(a, "the pack of %s is full (%d collectives)", first, MAXIN);
		else if (q->bytes + bytes_of(n) > limit)
			*why = arena_printf(a, "the pack of %s would pass the threshold of %lld bytes",
			                    first, (long long)limit);
		else {
			q->m[q->n++] = n;
			q->bytes += bytes_of(n);
			const Node *who;
			int u = first_use(n, &who);
			if (u < q->minuse)
				q->minuse = u, q->reader = who;
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

/* Replaces bucket b's members by a pack: the new nodes go where the
 * last member was, into *at (its slot in the new node order). */
static Pack *
make_pack(Graph *g, const Bucket *b, int k)
{
	Arena *a = g->arena;
	const Node *m0 = b->m[0];
	int64_t *off = arena_alloc(a, (size_t)b->n * sizeof *off), t = 0;
	int64_t cut = (int64_t)m0->a.coll.group->size * sched_lanes(m0->sched);
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
	p->coll->sched = m0->sched;
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

/* The new node order: members out, each pack's nodes where its last
 * member was; ids renumbered. */
static void
reorder(Graph *g, Pack **packs, Bucket *b, int np)
{
	Vec nodes = {0};
	char *gone = arena_alloc(g->arena, (size_t)g->nodes.n + 1);
	Pack **at = arena_alloc(g->arena, ((size_t)g->nodes.n + 1) * sizeof *at);

	for (int k = 0; k < np; k++) {
		for (int j = 0; j < b[k].n; j++)
			gone[b[k].m[j]->id] = 1;
		at[b[k].m[b[k].n - 1]->id] = packs[k];
	}
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (!gone[i])
			vec_push(g->arena, &nodes, n);
		if (!at[i])
			continue;
		vec_push(g->arena, &nodes, at[i]->pack);
		vec_push(g->arena, &nodes, at[i]->coll);
		for (int j = 0; j < at[i]->n; j++)
			vec_push(g->arena, &nodes, at[i]->unpack[j]);
	}
	for (int i = 0; i < nodes.n; i++)
		((Node *)nodes.v[i])->id = i;
	g->nodes = nodes;
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

	g->packs = (Vec){0};
	g->unpacked = (Vec){0};
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (n->op != OP_ALL_REDUCE)
			continue;
		if ((why[i] = unfit(a, n, limit)))
			continue;
		const char *key = key_of(t, n);
		if (join(a, b, nb, n, key, limit, &why[i]))
			continue;
		b[nb] = (Bucket){.m = {n}, .n = 1, .bytes = bytes_of(n), .open = 1, .key = key};
		b[nb].minuse = first_use(n, &b[nb].reader);
		nb++;
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
		fprintf(f, "%scoalesced %s: %d all_reduces over %s in one transfer of %lld bytes "
		        "(%lld of data):\n", pass, p->coll->out->name, p->n,
		        p->coll->a.coll.group->name, (long long)p->padded, (long long)p->bytes);
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
