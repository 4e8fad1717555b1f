/* verify_pack.c: the proof of coalescing (coalesce.c), as the checks of
 * the runtime calls of pack and unpack (verify_call.c calls it with the
 * views the plan builds, or the reference's whole ones). A pack's slots
 * lie inside its 1-d result, one per input, each as long as its input,
 * no two overlapping; each operand the generated code flattens is one
 * contiguous run (cfrt_view_contig from its first element). An unpack
 * reads the slot of its member: its input is the result of an all_reduce
 * (elementwise: element e of the result is the sum over the ranks of
 * element e of the pack) of a pack whose slot it names starts where the
 * unpack reads and holds as many elements of the same type, and the
 * result is spread as that member's all_reduce would leave it. Together
 * with the proof of the all_reduce itself, each member's result is
 * exactly the sum of its own input over the group, as before packing.
 * requires: views resolved for the call (verify_mem.c) or dense.
 * ensures: 0, or 1 and why, naming the pack, the slot and the elements. */
#include <stdarg.h>
#include <stdio.h>

#include "verify.h"

static int
fail(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return 1;
}

static int64_t
numel(const MView *m)
{
	int64_t k = 1;

	for (int d = 0; d < m->nd; d++)
		k *= m->dim[d];
	return k;
}

/* Row-major dense from its first element (what cfrt_view_contig makes
 * of its pointer), or empty. */
static int
dense_run(const MView *m)
{
	int64_t st = 1;

	if (numel(m) == 0)
		return 1;
	for (int d = m->nd - 1; d >= 0; d--) {
		if (m->dim[d] != 1 && m->stride[d] != st)
			return 0;
		st *= m->dim[d];
	}
	return 1;
}

static int
pack_slots(const Node *n, const MView *o, const MView *in, char *why, size_t nw)
{
	const int64_t *off = n->a.pack.off;

	if (o->nd != 1)
		return fail(why, nw, "the packed buffer %s has %d dims, not 1", n->out->name, o->nd);
	for (int j = 0; j < n->nin; j++) {
		int64_t len = numel(&in[j]), e = off[j] + len;
		if (!dense_run(&in[j]))
			return fail(why, nw, "slot %d: %s is not one contiguous run", j,
			            n->in[j]->name);
		if (n->in[j]->dtype != n->out->dtype)
			return fail(why, nw, "slot %d: %s is %s, the pack %s", j, n->in[j]->name,
			            dtype_name[n->in[j]->dtype], dtype_name[n->out->dtype]);
		if (off[j] < 0 || e > o->dim[0])
			return fail(why, nw, "slot %d (%s): elements %lld..%lld outside the %lld of %s",
			            j, n->in[j]->name, (long long)off[j], (long long)e - 1,
			            (long long)o->dim[0], n->out->name);
		for (int k = 0; k < j; k++) {
			int64_t f = off[k] + numel(&in[k]);
			if (off[j] < f && off[k] < e)
				return fail(why, nw, "slots %d (%s, elements %lld..%lld) and %d (%s, "
				            "elements %lld..%lld) of %s overlap", k, n->in[k]->name,
				            (long long)off[k], (long long)f - 1, j, n->in[j]->name,
				            (long long)off[j], (long long)e - 1, n->out->name);
		}
	}
	return 0;
}

static int
unpack_slot(const Node *n, const MView *o, const MView *in, char *why, size_t nw)
{
	const Node *r = n->in[0]->def, *p = r && r->op == OP_ALL_REDUCE ? r->in[0]->def : NULL;
	int s = n->a.pack.slot;
	int64_t len = numel(o), at = n->a.pack.at;

	if (!p || p->op != OP_PACK)
		return fail(why, nw, "%s unpacks %s, which is no all_reduce of a pack", n->out->name,
		            n->in[0]->name);
	if (in->nd != 1 || !dense_run(o))
		return fail(why, nw, "%s: the packed %s is not 1-d or the result not one "
		            "contiguous run", n->out->name, n->in[0]->name);
	if (s < 0 || s >= p->nin)
		return fail(why, nw, "%s unpacks slot %d of %s, which has %d", n->out->name, s,
		            p->out->name, p->nin);
	const Value *x = p->in[s];
	Dist want = x->dist;
	want.p[r->a.coll.group->id] = (DistPart){DI_REPL, 0, NULL};
	if (at != p->a.pack.off[s] || len != value_rank_elems(x) || at < 0 || at + len > in->dim[0])
		return fail(why, nw, "%s reads elements %lld..%lld of %s, but slot %d (%s) of %s "
		            "holds elements %lld..%lld", n->out->name, (long long)at,
		            (long long)(at + len - 1), n->in[0]->name, s, x->name, p->out->name,
		            (long long)p->a.pack.off[s],
		            (long long)(p->a.pack.off[s] + value_rank_elems(x) - 1));
	if (x->dtype != n->out->dtype || !graph_dist_same(want, n->out->dist))
		return fail(why, nw, "%s is not spread or typed as the all_reduce of %s over %s "
		            "leaves it", n->out->name, x->name, r->a.coll.group->name);
	return 0;
}

int
vc_pack(const Node *n, const MView *o, const MView *in, char *why, size_t nwhy)
{
	return n->op == OP_PACK ? pack_slots(n, o, in, why, nwhy) : unpack_slot(n, o, in, why, nwhy);
}
