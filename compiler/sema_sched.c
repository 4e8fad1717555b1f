/* sema_sched.c: the schedule section. Parses every choice (and the
 * command line's --schedule), finds the collectives the keys name ("t":
 * the model's tensor; "layer.t": that tensor in every instance), gives
 * the others the default, and checks each choice against its collective.
 * requires: the model's graph built, temporaries named.
 * ensures: every collective's Node.sched set, or an error. */
#include <limits.h>
#include <string.h>

#include "sema.h"

enum {
	MAXSLICES = 4096 /* largest slice(k) or m = K: every chunk of slice(k)
	                  * can be in flight at once, each with its request
	                  * in the generated code's frame */
};

static const char *
hint_layer(Sema *S, const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;

	for (int i = 0; i < S->layers.n; i++)
		sema_closer(name, ((LayerInfo *)S->layers.v[i])->decl->name, &best, &bestd);
	return best;
}

/* A schedule error: at loc in the file, or about --schedule. */
static void
serr(Sema *S, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
serr(Sema *S, Loc loc, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (S->forcing)
		diag_plain(S->d, "--schedule: %s", msg);
	else
		diag_error(S->d, loc, "%s", msg);
}

/* A count argument of a schedule: slice(k), m = K. */
static int
sched_count(Sema *S, const Expr *e, const char *what, int *out)
{
	int64_t v = 0;

	if (S->forcing && e->kind != E_INT) {
		serr(S, e->loc, "%s must be an integer", what);
		return 0;
	}
	if (!sema_eval(S, S->ms, e, &v))
		return 0;
	if (v < 1 || v > MAXSLICES) {
		serr(S, e->loc, "%s must be %s, but is %lld", what, v < 1 ? "at least 1" :
		     arena_printf(S->a, "at most %d", MAXSLICES), (long long)v);
		return 0;
	}
	*out = (int)v;
	return 1;
}

static int
fuse_option(Sema *S, const Expr *o, SchedChoice *c, int *seen)
{
	const char *k = o->kind == E_KWARG ? o->u.kw.name : NULL;
	int which = k && strcmp(k, "m") == 0 ? 1 : k && strcmp(k, "split") == 0 ? 2 : 0;

	if (!k) {
		serr(S, o->loc, "fuse takes one topology, then the options m = K and "
		     "split = query");
		return 0;
	}
	if (!which) {
		serr(S, o->loc, "unknown fuse option '%s': expected m = K or split = query", k);
		return 0;
	}
	if (*seen & which) {
		serr(S, o->loc, "fuse option '%s' is given twice", k);
		return 0;
	}
	*seen |= which;
	if (which == 1)
		return sched_count(S, o->u.kw.val, "m", &c->m);
	if (o->u.kw.val->kind != E_NAME || strcmp(o->u.kw.val->u.name, "query") != 0) {
		serr(S, o->u.kw.val->loc, "split = %s: the only split is split = query",
		     sema_text(S, o->u.kw.val));
		return 0;
	}
	c->query = 1;
	return 1;
}

static int
choice_fuse(Sema *S, const Expr *e, SchedChoice *c)
{
	int n = e->kind == E_CALL ? e->u.call.args.n : 0;
	const Expr *const *args = n ? (const Expr *const *)e->u.call.args.v : NULL;
	int ok = 1, seen = 0, t = -1;

	c->kind = SK_FUSE;
	for (int i = 0; n && args[0]->kind == E_NAME && i < NTOPO; i++)
		if (strcmp(args[0]->u.name, topo_name[i]) == 0)
			t = i;
	if (t < 0) {
		serr(S, n ? args[0]->loc : e->loc, "fuse needs a topology first: "
		     "fuse(ring), fuse(bidir) or fuse(pairwise)");
		ok = 0;
	}
	c->topo = t < 0 ? TP_RING : (Topo)t;
	for (int i = 1; i < n; i++)
		ok = fuse_option(S, args[i], c, &seen) && ok;
	return ok;
}

/* vanilla, slice(k), fuse(...), auto; NULL after errors. */
static SchedChoice *
choice(Sema *S, const Expr *e)
{
	SchedChoice *c = arena_alloc(S->a, sizeof *c);
	const char *name = e->kind == E_NAME ? e->u.name :
	                   e->kind == E_CALL ? e->u.call.name : "";
	int call = e->kind == E_CALL, n = call ? e->u.call.args.n : 0;

	c->loc = e->loc;
	c->m = 1;
	if (strcmp(name, "vanilla") == 0 || strcmp(name, "auto") == 0) {
		c->kind = name[0] == 'v' ? SK_VANILLA : SK_AUTO;
		if (!call)
			return c;
		serr(S, e->loc, "%s takes no arguments", name);
		return NULL;
	}
	if (strcmp(name, "slice") == 0) {
		c->kind = SK_SLICE;
		if (n == 1 && ((Expr *)e->u.call.args.v[0])->kind != E_KWARG)
			return sched_count(S, e->u.call.args.v[0], "the count of slice(k)",
			                   &c->k) ? c : NULL;
		serr(S, e->loc, "slice takes one argument, the number of chunks: slice(4)");
		return NULL;
	}
	if (strcmp(name, "fuse") == 0)
		return choice_fuse(S, e, c) ? c : NULL;
	serr(S, e->loc, "unknown schedule '%s': expected vanilla, slice(k), "
	     "fuse(ring|bidir|pairwise [, m = K] [, split = query]) or auto", sema_text(S, e));
	return NULL;
}

/* Who set each collective's choice: tensor keys beat layer keys. */
typedef struct Claim {
	const SchedEntry *by;
	int level; /* 0 none, 1 "layer.t", 2 "t" */
} Claim;

static void
claim(Sema *S, Claim *cl, const SchedEntry *se, Node *n, SchedChoice *c, int level)
{
	Claim *k = &cl[n->id];

	if (k->level == level) {
		diag_error(S->d, se->kloc, "%s names the same collective as %s", se->key,
		           k->by->key);
		diag_note(S->d, k->by->kloc, "%s is here", k->by->key);
	} else if (k->level < level) {
		k->level = level;
		k->by = se;
		n->sched = c;
	}
}

static int
is_coll(const Value *v)
{
	return op_info[v->def->op].cls == CL_COLL;
}

static void
key_tensor(Sema *S, Claim *cl, const SchedEntry *se, SchedChoice *c)
{
	Value *v = sema_model_tensor(S, se->key, se->kloc);

	if (v && !is_coll(v))
		diag_error(S->d, se->kloc, "%s is not the result of a collective", se->key);
	else if (v)
		claim(S, cl, se, v->def, c, 2);
}

/* Does layer L name a tensor name? Else *hint is the closest it names. */
static int
layer_names(const Decl *L, const char *name, const char **hint)
{
	int bestd = INT_MAX;

	*hint = NULL;
	for (int i = 0; i < L->body.n; i++) {
		const Stmt *st = L->body.v[i];
		const char *t = st->kind == S_ASSIGN ? st->u.def.name :
		                st->kind == S_TENSOR ? st->u.tensor.name : NULL;
		if (t && strcmp(t, name) == 0)
			return 1;
		if (t)
			sema_closer(name, t, hint, &bestd);
	}
	return 0;
}

/* "layer.t": t in every instance of layer */
static void
key_layer(Sema *S, Claim *cl, const SchedEntry *se, SchedChoice *c)
{
	const char *dot = strchr(se->key, '.');
	const char *lname = arena_strndup(S->a, se->key, (size_t)(dot - se->key));
	const LayerInfo *li = sema_find_layer(S, lname);

	if (!li) {
		const char *hint = hint_layer(S, lname);
		if (hint)
			diag_error(S->d, se->kloc, "unknown layer '%s'; did you mean '%s'?", lname, hint);
		else
			diag_error(S->d, se->kloc, "unknown layer '%s'", lname);
		return;
	}
	const char *hint;
	if (!layer_names(li->decl, dot + 1, &hint)) {
		if (hint)
			diag_error(S->d, se->kloc, "layer %s has no tensor named '%s'; did "
			           "you mean '%s'?", lname, dot + 1, hint);
		else
			diag_error(S->d, se->kloc, "layer %s has no tensor named '%s'",
			           lname, dot + 1);
		return;
	}
	for (int i = 0; i < S->binds.n; i++) {
		const Bind *b = S->binds.v[i];
		if (b->layer != li || strcmp(b->name, dot + 1) != 0)
			continue;
		if (!is_coll(b->v)) {
			diag_error(S->d, se->kloc, "%s is not the result of a collective", se->key);
			return;
		}
		claim(S, cl, se, b->v->def, c, 1);
	}
}

/* The entry with se's key before se, if any. */
static const Stmt *
earlier_entry(const Decl *m, const Stmt *st)
{
	const char *key = st->u.sched.key;

	for (int i = 0; m->body.v[i] != st; i++) {
		const Stmt *o = m->body.v[i];
		const char *k = o->u.sched.key;
		if (o->kind == S_SCHED && o->u.sched.set == st->u.sched.set &&
		    (k == key || (k && key && strcmp(k, key) == 0)))
			return o;
	}
	return NULL;
}

/* Was the problem of choice c on a node at n's position told already?
 * Instances of one layer share their positions: each is told once. */
static int
told_before(Sema *S, Vec *told, const SchedChoice *c, const Node *n)
{
	for (int i = 0; i + 1 < told->n; i += 2)
		if (told->v[i] == c && ((Node *)told->v[i + 1])->loc.line == n->loc.line &&
		    ((Node *)told->v[i + 1])->loc.col == n->loc.col)
			return 1;
	vec_push(S->a, told, (void *)c);
	vec_push(S->a, told, (void *)n);
	return 0;
}

/* The schedule rules (sched_use) on the choice of collective n, before
 * regions are known: what they refuse does not depend on them. */
static void
sched_check(Sema *S, Node *n, Vec *told)
{
	const SchedChoice *c = n->sched;
	SchedUse u = sched_use(S->a, n, c, NULL);

	if (!u.err || told_before(S, told, c, n))
		return;
	int given = c->loc.line > 0 && !S->o->force;
	diag_error(S->d, given ? c->loc : n->loc, "%s%s", S->o->force ? "--schedule " : "",
	           u.err);
}

/* A setting of the schedule section: `coalesce = BYTES;` (0 to
 * COALESCE_MAX; docs/LANGUAGE.md, "Coalescing") or `memory = BYTES;`
 * (1 to COALESCE_MAX; "Memory"). */
static void
sched_setting(Sema *S, const Stmt *st)
{
	const SchedEntry *se = &st->u.sched;
	const Stmt *old = earlier_entry(S->model, st);
	int mem = !strcmp(se->key, "memory");
	int64_t v = 0;

	if (strcmp(se->key, "coalesce") && !mem) {
		diag_error(S->d, se->kloc, "unknown schedule setting '%s'; the schedule section "
		           "sets coalesce = BYTES and memory = BYTES", se->key);
		return;
	}
	if (old) {
		diag_error(S->d, se->kloc, "a second %s setting", se->key);
		diag_note(S->d, old->u.sched.kloc, "the first is here");
		return;
	}
	if (!sema_eval(S, S->ms, se->choice, &v))
		return;
	if (v < !!mem || v > COALESCE_MAX) {
		diag_error(S->d, se->choice->loc, "%s wants a count of bytes from %s to 2^40, "
		           "but is %lld", se->key, mem ? "1" : "0 (off)", (long long)v);
		return;
	}
	if (mem) {
		S->g->memory = v;
		S->g->memory_loc = se->choice->loc;
		return;
	}
	S->g->coalesce = v;
	S->g->coalesce_loc = se->choice->loc;
}

void
sema_schedules(Sema *S)
{
	Graph *g = S->g;
	Claim *cl = arena_alloc(S->a, ((size_t)g->nodes.n + 1) * sizeof *cl);
	Vec told = {0};

	g->defsched = (SchedChoice){.kind = SK_FUSE, .topo = TP_RING, .m = 1, .from = SF_BUILTIN};
	for (int i = 0; i < S->model->body.n; i++) {
		const Stmt *st = S->model->body.v[i], *old;
		const SchedEntry *se = &st->u.sched;
		if (st->kind != S_SCHED)
			continue;
		if (se->set) {
			sched_setting(S, st);
			continue;
		}
		SchedChoice *c = choice(S, se->choice);
		if (c)
			c->from = se->key ? SF_NAMED : SF_DEFAULT;
		if ((old = earlier_entry(S->model, st))) {
			if (se->key)
				diag_error(S->d, se->kloc, "a second schedule for %s", se->key);
			else
				diag_error(S->d, se->kloc, "a second default schedule");
			diag_note(S->d, old->u.sched.kloc, "the first is here");
		} else if (!se->key) {
			if (c)
				g->defsched = *c;
		} else if (strchr(se->key, '.')) {
			key_layer(S, cl, se, c);
		} else {
			key_tensor(S, cl, se, c);
		}
	}
	if (S->o->force) {
		S->forcing = 1;
		SchedChoice *c = choice(S, S->o->force);
		S->forcing = 0;
		if (c) {
			g->defsched = *c;
			g->defsched.from = SF_DEFAULT;
			/* a position in the command line is none in the file */
			g->defsched.loc = (Loc){0, 0, 0, 0};
		}
	}
	for (int i = 0; i < g->nodes.n; i++) {
		Node *n = g->nodes.v[i];
		if (op_info[n->op].cls != CL_COLL)
			continue;
		if (!n->sched || S->o->force)
			n->sched = &g->defsched;
		sched_check(S, n, &told);
	}
}
