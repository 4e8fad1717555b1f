/* schedrule.c: the schedule rules, each in one place. For a collective
 * and the choice asked for it, the choice it gets: auto resolved;
 * split = query and bidir dropped where they do not apply; a schedule
 * that cannot cut the collective's dimension into its slices refused when
 * the user wrote it, replaced by vanilla when the compiler chose it (the
 * built-in default, auto). Sema checks every collective with it; lowering
 * asks it before and after region discovery (docs/LANGUAGE.md,
 * "Schedules").
 * requires: a collective node from sema (group, dims set).
 * ensures: a result that depends only on the node, the choice and rg; a
 * choice without err cuts its dim into nslices equal slices, with at
 * most MAXLANE lanes. */
#include <string.h>

#include "sched.h"

/* The slices a choice cuts the collective's dimension into: N per lane,
 * except an all_reduce outside fuse, whose chunks are whole slices. */
static int64_t
su_slices(const Node *n, const SchedChoice *c)
{
	int64_t P = sched_lanes(c);

	return n->op == OP_ALL_REDUCE && c->kind != SK_FUSE ? P : n->a.coll.group->size * P;
}

/* The dimension cut into k slices: all_gather and reduce_scatter their
 * own, all_to_all the one split afterwards, all_reduce the first that
 * divides and that no group splits (-1: none). */
static int
su_dim(const Node *n, int64_t k)
{
	const Value *x = n->in[0];

	if (n->op == OP_ALL_TO_ALL)
		return n->a.coll.dim2;
	if (n->op != OP_ALL_REDUCE)
		return n->a.coll.dim;
	for (int d = 0; d < x->ndim; d++)
		if (x->shape[d] % k == 0 && !dist_split_group(&x->dist, d))
			return d;
	return -1;
}

/* NULL when c can cut n's dimension; else what it needs, as " needs ...". */
static const char *
su_cut(Arena *a, const Node *n, const SchedChoice *c)
{
	const Value *x = n->in[0];
	int64_t k = su_slices(n, c);
	int d = su_dim(n, k);

	if (d < 0 && k == 1)
		return NULL; /* a whole all_reduce (vanilla, slice(1)) cuts nothing */
	if (d < 0) {
		const char *s = "";
		for (int i = 0; i < x->ndim; i++)
			s = arena_printf(a, "%s%s%lld", s, i ? "," : "", (long long)x->shape[i]);
		return arena_printf(a, " needs a dimension of %s ([%s]) that%s divides into %lld "
		                    "slices", value_what(x), s, dist_count(&x->dist, DI_SPLIT) ?
		                    " no group splits and that" : "", (long long)k);
	}
	if (x->shape[d] % k)
		return arena_printf(a, " needs %s (%lld) to divide into %lld slices",
		                    value_dim_name(a, x, d), (long long)x->shape[d], (long long)k);
	if (c->kind == SK_FUSE && sched_lanes(c) > MAXLANE)
		return arena_printf(a, " needs %d slices per rank, but at most %d are supported",
		                    sched_lanes(c), MAXLANE);
	return NULL;
}

static void
su_note(Arena *a, SchedUse *u, const char *s)
{
	u->note = u->note ? arena_printf(a, "%s; %s", u->note, s) : s;
}

static SchedChoice
su_vanilla(const SchedChoice *like)
{
	return (SchedChoice){.kind = SK_VANILLA, .from = like->from, .loc = like->loc};
}

/* auto: fuse(ring) when it cuts the dimension and has compute to hide
 * its transfers under, else vanilla. Before region discovery (rg NULL)
 * the region is taken to be there. */
static void
su_auto(Arena *a, const Node *n, const SchedRegion *rg, SchedUse *u)
{
	SchedChoice f = {.kind = SK_FUSE, .topo = TP_RING, .m = 1, .from = u->how.from,
	                 .loc = u->how.loc};
	const char *why = su_cut(a, n, &f);
	int ops = rg ? rg->ops : 1;

	u->how = why || !ops ? su_vanilla(&u->how) : f;
	if (!rg)
		return;
	if (why)
		su_note(a, u, arena_printf(a, "auto: vanilla, fuse(ring)%s", why));
	else if (ops)
		su_note(a, u, arena_printf(a, "auto: fuse(ring), %d op%s to hide the transfers "
		                           "under", ops, ops == 1 ? "" : "s"));
	else
		su_note(a, u, "auto: vanilla, no compute to hide the transfers under");
}

/* split = query splits the attention that feeds a reduction: written for
 * a collective that is none, an error; from a default, dropped. A region
 * that reaches no attention drops it too (region.c says so). */
static void
su_query(Arena *a, const Node *n, const SchedRegion *rg, SchedUse *u)
{
	if (!u->how.query)
		return;
	if (n->op != OP_REDUCE_SCATTER && n->op != OP_ALL_REDUCE) {
		u->how.query = 0;
		if (u->how.from == SF_NAMED)
			u->err = arena_printf(a, "split = query splits the attention feeding a "
			                      "reduce_scatter or an all_reduce, but %s is the result "
			                      "of %s", value_what(n->out), op_info[n->op].name);
		else
			su_note(a, u, "split=query applies to reductions only");
	} else if (rg && !rg->attention) {
		u->how.query = 0;
	}
}

/* The dimension and its slices: a choice the compiler made that cannot
 * cut them becomes vanilla, which always can; one the user wrote is an
 * error (how becomes vanilla all the same). */
static void
su_fit(Arena *a, const Node *n, const SchedChoice *want, SchedUse *u)
{
	const char *why = su_cut(a, n, &u->how);
	int written = want->kind != SK_AUTO && want->from != SF_BUILTIN && want->from != SF_TWIN;

	if (why && written && !u->err) {
		const char *as = graph_sched_str(a, &u->how), *asked = graph_sched_str(a, want);
		u->err = arena_printf(a, "%s on %s%s%s", asked, value_what(n->out),
		                      strcmp(as, asked) ? arena_printf(a, ", run as %s,", as) : "", why);
	} else if (why && !written) {
		su_note(a, u, arena_printf(a, want->from == SF_TWIN ? "%s, as in the forward,%s: "
		                           "vanilla used" : "the built-in default %s%s: vanilla used",
		                           graph_sched_str(a, &u->how), why));
	}
	if (why)
		u->how = su_vanilla(&u->how);
	u->nslices = su_slices(n, &u->how);
	u->dim = su_dim(n, u->nslices);
}

SchedUse
sched_use(Arena *a, const Node *n, const SchedChoice *want, const SchedRegion *rg)
{
	SchedUse u = {.how = *want};
	int op = n->op;

	if (want->kind == SK_AUTO)
		su_auto(a, n, rg, &u);
	su_query(a, n, rg, &u);
	if (u.how.kind == SK_FUSE && u.how.topo == TP_BIDIR && op == OP_ALL_TO_ALL) {
		u.how.topo = TP_RING;
		su_note(a, &u, "bidir: all_to_all already sends straight to each rank "
		        "(Algorithm 5); ring order used");
	}
	su_fit(a, n, want, &u);
	if (rg && u.how.kind == SK_FUSE && op == OP_ALL_REDUCE && !rg->post)
		su_note(a, &u, "its all_gather half has no compute to hide under");
	return u;
}
