/* sched_text.c: the schedule as text (--emit=sched) and the one line per
 * collective of --explain.
 * requires: a lowered schedule. ensures: output that depends only on the
 * schedule (deterministic); after each collective its verify summary
 * line, from verify_sched's findings (or verify_coll when it did not
 * run). */
#include <ctype.h>
#include <limits.h>
#include <string.h>

#include "codegen.h"

enum { SHOWRANKS = 2, ORDERRANKS = 8 }; /* ranks listed step by step / by slice order,
                                         * unless sched_print is given more */

/* ---- symbolic expressions ---- */

/* a*r + b*i + c as "r-i-1". */
static const char *
tx_affine(Arena *a, int ca, int cb, int cc)
{
	char buf[96];
	int n = 0;

	buf[0] = 0;
	if (ca)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%sr", ca < 0 ? "-" : "",
		              ca == 1 || ca == -1 ? "" : arena_printf(a, "%d*", ca < 0 ? -ca : ca));
	if (cb)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%si", cb < 0 ? "-" : n ? "+" : "",
		              cb == 1 || cb == -1 ? "" : arena_printf(a, "%d*", cb < 0 ? -cb : cb));
	if (cc || !n)
		snprintf(buf + n, sizeof buf - (size_t)n, n && cc > 0 ? "+%d" : "%d", cc);
	return arena_strdup(a, buf);
}

static const char *
tx_ix(Arena *a, const Ix *x)
{
	if (x->kind == IX_PARTNER)
		return arena_printf(a, "partner(r,%s)", tx_affine(a, 0, x->b, x->c));
	const char *e = tx_affine(a, x->a, x->b, x->c);
	if (!x->n || (!x->a && !x->b) || (x->a == 1 && !x->b && !x->c))
		return e; /* constants, and r < n */
	if (!x->a && x->b == 1 && !x->c)
		return arena_printf(a, "i%%%d", x->n);
	return arena_printf(a, "(%s)%%%d", e, x->n);
}

static int
tx_is_k(const Ix *x, int k)
{
	return x->kind == IX_AFFINE && !x->a && !x->b && x->c == k;
}

/* One slice: hi*per + lo; a whole tensor: "*"; a chunk: "{lo+stride*q}". */
static const char *
tx_sel(Arena *a, const Coll *c, const Sel *s)
{
	const char *lo = tx_ix(a, &s->lo), *one;

	if (s->cnt == c->nslices && s->stride == 1 && tx_is_k(&s->lo, 0))
		return "*";
	if (s->per == 0)
		one = lo;
	else if (s->per == 1)
		one = tx_is_k(&s->lo, 0) ? tx_ix(a, &s->hi) : arena_printf(a, "%s+%s", tx_ix(a, &s->hi), lo);
	else
		one = arena_printf(a, "%d*%s%s", s->per, tx_ix(a, &s->hi),
		                   tx_is_k(&s->lo, 0) ? "" : arena_printf(a, "+%s", lo));
	if (s->cnt == 1)
		return one;
	return arena_printf(a, "{%s+%d*q, q<%d}", one, s->stride, s->cnt);
}

static const Buf *
tx_buf(const Coll *c, int b)
{
	return c->bufs.v[b];
}

/* "acc{i%2}" for a rotating set, else the buffer's name. */
static const char *
tx_bufname(Arena *a, const Coll *c, const BufRef *r)
{
	const char *name = tx_buf(c, r->buf)->name;

	if (tx_is_k(&r->rot, 0))
		return name;
	size_t n = strlen(name);
	while (n > 0 && isdigit((unsigned char)name[n - 1]))
		n--;
	return arena_printf(a, "%.*s{%s}", (int)n, name, tx_ix(a, &r->rot));
}

static const char *
tx_ref(Arena *a, const Coll *c, const BufRef *r)
{
	const char *name = tx_bufname(a, c, r);

	if (tx_buf(c, r->buf)->dim < 0) /* an accumulating node's whole result */
		return name;
	if (tx_buf(c, r->buf)->nparts > 1)
		return arena_printf(a, "%s[from %s][%s]", name, tx_ix(a, &r->part), tx_sel(a, c, &r->sel));
	return arena_printf(a, "%s[%s]", name, tx_sel(a, c, &r->sel));
}

/* ---- items ---- */

/* name[s], or name alone for the whole tensor (s "*"). */
static const char *
tx_at(Arena *a, const char *name, const char *s)
{
	return strcmp(s, "*") ? arena_printf(a, "%s[%s]", name, s) : name;
}

/* The call of region node rn on slice s (a string for the slice):
 * "matmul(h[s], w2)". */
static const char *
tx_call(Arena *a, const RNode *rn, const char *s)
{
	const Node *n = rn->node;
	const char *args = "";

	for (int j = 0; j < n->nin; j++) {
		int tr = n->op == OP_MATMUL && (j ? n->a.mm.tb : n->a.mm.ta);
		const char *arg = rn->idim[j] >= 0 ? tx_at(a, n->in[j]->name, s) : n->in[j]->name;
		args = arena_printf(a, "%s%s%s%s", args, j ? ", " : "", arg, tr ? ".T" : "");
	}
	return arena_printf(a, "%s(%s)", op_info[n->op].name, args);
}

const char *
sched_results(Arena *a, const Node *n, const char *s)
{
	const char *lhs = tx_at(a, n->out->name, s);

	return n->lse ? arena_printf(a, "%s, %s", lhs, tx_at(a, n->lse->name, s)) : lhs;
}

static const char *
tx_compute(Arena *a, const Coll *c, const Item *it, const char *s, const char *dst)
{
	const RNode *rn = c->region.v[it->u.comp.rn];
	const char *lhs = sched_results(a, rn->node, s);
	const char *call = tx_call(a, rn, s);

	if (rnode_sums(rn))
		return arena_printf(a, "%s += %s", rn->node->out->name, call);
	if (it->u.comp.dst.buf == rn->buf)
		return arena_printf(a, "%s = %s", lhs, call);
	return arena_printf(a, "%s %s %s (%s)", dst, it->u.comp.beta ? "+=" : "=", call, lhs);
}

/* What label names: "recv #1", "send #0", "reduce_scatter #0". */
static const char *
tx_label(Arena *a, const Coll *c, int label)
{
	for (int p = 0; p < c->phases.n; p++) {
		const Phase *ph = c->phases.v[p];
		for (int t = 0; t < ph->nlanes; t++)
			for (int k = 0; k < ph->lanes[t].n; k++) {
				const Item *it = ph->lanes[t].v[k];
				if ((it->kind == IT_SEND || it->kind == IT_RECV) && it->u.xfer.label == label)
					return arena_printf(a, "%s #%d", it->kind == IT_SEND ? "send" : "recv", label);
				if (it->kind == IT_COLL && it->u.coll.label == label)
					return arena_printf(a, "%s #%d", op_info[it->u.coll.op].name, label);
			}
	}
	return arena_printf(a, "#%d", label);
}

static const char *
tx_item(Arena *a, const Coll *c, const Item *it)
{
	switch (it->kind) {
	case IT_COMPUTE:
		return arena_printf(a, "compute  %s", tx_compute(a, c, it, tx_sel(a, c, &it->u.comp.sel),
		                                                 tx_ref(a, c, &it->u.comp.dst)));
	case IT_ADD:
		return arena_printf(a, "add      %s += %s", tx_ref(a, c, &it->u.move.dst),
		                    tx_ref(a, c, &it->u.move.src));
	case IT_COPY:
		return arena_printf(a, "copy     %s = %s", tx_ref(a, c, &it->u.move.dst),
		                    tx_ref(a, c, &it->u.move.src));
	case IT_ZERO:
		return arena_printf(a, "zero     %s", tx_ref(a, c, &it->u.move.dst));
	case IT_SEND:
	case IT_RECV:
		return arena_printf(a, "%s     %s %s %s  #%d round %s%s", it->kind == IT_SEND ? "send" : "recv",
		                    tx_ref(a, c, &it->u.xfer.buf), it->kind == IT_SEND ? "->" : "<-",
		                    tx_ix(a, &it->u.xfer.peer), it->u.xfer.label,
		                    tx_ix(a, &it->u.xfer.round), it->u.xfer.tag ?
		                    arena_printf(a, " tag %d", it->u.xfer.tag) : "");
	case IT_COLL:
		return arena_printf(a, "%s %s %s[%s] <- %s  #%d round %s",
		                    it->u.coll.blocking ? "blocking" : "post    ", op_info[it->u.coll.op].name,
		                    tx_buf(c, it->u.coll.dst)->name, tx_sel(a, c, &it->u.coll.sel),
		                    tx_buf(c, it->u.coll.src)->name, it->u.coll.label,
		                    tx_ix(a, &it->u.coll.round));
	case IT_WAIT:
		return arena_printf(a, "wait     %s of round %s", tx_label(a, c, it->u.wait.label),
		                    tx_ix(a, &it->u.wait.round));
	case IT_HOST:
		return arena_printf(a, "host     %s%s = %s%s (stage %d)", it->u.host.coll ?
		                    "collective " : "", it->u.host.node->out->name,
		                    graph_node_str(a, it->u.host.node), it->u.host.coll ?
		                    ", its whole program" : "", it->u.host.stage + 1);
	}
	return "";
}

/* "i>=1", "1<=i<=2", "i=0" and the partner condition; "" for always. */
static const char *
tx_guard(Arena *a, const Guard *g, int R)
{
	const char *r = "";

	if (g->lo == g->hi && R > 1)
		r = arena_printf(a, "i=%d", g->lo);
	else if (g->lo > 0 && g->hi < R - 1)
		r = arena_printf(a, "%d<=i<=%d", g->lo, g->hi);
	else if (g->lo > 0)
		r = arena_printf(a, "i>=%d", g->lo);
	else if (g->hi < R - 1)
		r = arena_printf(a, "i<=%d", g->hi);
	if (g->active)
		r = arena_printf(a, "%s%sif partner(r,%s)", r, *r ? " " : "", tx_affine(a, 0, 1, g->aoff));
	return r;
}

/* ---- concrete steps ---- */

static int
tx_slice(const Sel *s, int r, int i)
{
	return sched_ix(&s->hi, r, i) * s->per + sched_ix(&s->lo, r, i);
}

/* The slice(s) of sel on rank r in round i, as text: "3", "chunk 1", "". */
static const char *
tx_conc(Arena *a, const Coll *c, const Sel *s, int r, int i)
{
	if (s->cnt == 1)
		return arena_printf(a, "%d", tx_slice(s, r, i));
	if (s->cnt == c->nslices && s->stride == 1)
		return "*";
	return arena_printf(a, "chunk %d", tx_slice(s, r, i));
}

/* "send 3 to 1", "recv 2 from 3", "post reduce_scatter chunk 0". */
static const char *
tx_move(Arena *a, const Coll *c, const Item *it, int r, int i)
{
	if (it->kind == IT_COLL)
		return arena_printf(a, "%s %s %s", it->u.coll.blocking ? "blocking" : "post",
		                    op_info[it->u.coll.op].name, tx_conc(a, c, &it->u.coll.sel, r, i));
	return arena_printf(a, "%s %s %s %d", it->kind == IT_SEND ? "send" : "recv",
	                    tx_conc(a, c, &it->u.xfer.buf.sel, r, i),
	                    it->kind == IT_SEND ? "to" : "from", sched_ix(&it->u.xfer.peer, r, i));
}

static const char *
tx_join(Arena *a, const char *out, const char *line, const char *sep)
{
	return out ? arena_printf(a, "%s%s%s", out, sep, line) : line;
}

/* What rank r computes and moves in step (phase p, round i, lane t), in
 * order: a line per compute item, adjacent transfers on one line; NULL
 * when nothing runs. */
const char *
sched_step_label(Arena *a, const Coll *c, int r, int p, int i, int t, const char *sep)
{
	const Phase *ph = c->phases.v[p];
	const char *out = NULL, *moves = NULL;

	for (int k = 0; k < ph->lanes[t].n; k++) {
		const Item *it = ph->lanes[t].v[k];
		if (!sched_guard(&it->g, r, i, c->N))
			continue;
		if (it->kind == IT_SEND || it->kind == IT_RECV || it->kind == IT_COLL) {
			moves = tx_join(a, moves, tx_move(a, c, it, r, i), ", ");
			continue;
		}
		if (it->kind == IT_HOST) {
			if (moves)
				out = tx_join(a, out, moves, sep), moves = NULL;
			out = tx_join(a, out, arena_printf(a, "%s%s = %s (hosted%s)",
			                                   it->u.host.coll ? "collective " : "",
			                                   it->u.host.node->out->name,
			                                   graph_node_str(a, it->u.host.node),
			                                   it->u.host.coll ? ": its whole program, "
			                                   "its transfers in flight beside these" : ""),
			              sep);
			continue;
		}
		if (it->kind != IT_COMPUTE)
			continue;
		if (moves)
			out = tx_join(a, out, moves, sep), moves = NULL;
		const RNode *rn = c->region.v[it->u.comp.rn];
		const char *s = tx_conc(a, c, &it->u.comp.sel, r, i);
		out = tx_join(a, out, arena_printf(a, "%s %s %s", rnode_sums(rn) ? rn->node->out->name :
		                                   sched_results(a, rn->node, s),
		                                   it->u.comp.beta ? "+=" : "=", tx_call(a, rn, s)), sep);
	}
	return moves ? tx_join(a, out, moves, sep) : out;
}

/* The slices rank r computes, in step order: "0 3 2 1". */
static const char *
tx_order(Arena *a, const Coll *c, int r)
{
	const char *out = "";
	SchedPos p = {0};

	/* the first compute of each lane of each round */
	for (const Item *it; (it = sched_next(c, r, &p));) {
		if (it->kind != IT_COMPUTE)
			continue;
		const char *sl = tx_conc(a, c, &it->u.comp.sel, r, p.i);
		out = arena_printf(a, "%s%s%s", out, *out ? " " : "", strcmp(sl, "*") ? sl : "all");
		p.k = INT_MAX; /* on to the next lane */
	}
	return *out ? out : "(no compute)";
}

/* ---- the listing ---- */

static const char *
tx_where(Arena *a, const Sched *s, const Node *n)
{
	return arena_printf(a, "%s:%d", s->g->file, n->loc.line);
}

static void
tx_region(FILE *f, Arena *a, const Sched *s, const Coll *c)
{
	if (!c->region.n) {
		fprintf(f, "    region: none\n");
		return;
	}
	fprintf(f, "    region:");
	for (int k = 0; k < c->region.n; k++) {
		const RNode *rn = c->region.v[k];
		const char *how = rnode_sums(rn) ? arena_printf(a, "summed over %s", value_dim_name(a,
		                  rn->node->in[0], rn->idim[0] >= 0 ? rn->idim[0] : 0)) :
		                  arena_printf(a, "along %s", value_dim_name(a, rn->node->out, rn->odim));
		fprintf(f, "%s %s = %s %s (%s)", k ? "," : "", sched_results(a, rn->node, "*"),
		        graph_node_str(a, rn->node), how, tx_where(a, s, rn->node));
	}
	fputc('\n', f);
	for (int k = 0; k < c->stops.n; k++) {
		const Stop *st = c->stops.v[k];
		fprintf(f, "    stops %s %s = %s (%s): %s\n", st->up ? "after" : "before",
		        st->node->out->name, op_info[st->node->op].name, tx_where(a, s, st->node), st->why);
	}
}

static const char *
tx_buf_role(const Coll *c, int b)
{
	const Buf *bf = c->bufs.v[b];

	if (b == c->bout)
		return "result";
	if (b == c->bin)
		return "input";
	if (bf->dim < 0)
		return "summed";
	return bf->kind == BK_TEMP ? "scratch" : bf->xfer ? "moved" : "region";
}

static void
tx_bufs(FILE *f, Arena *a, const Coll *c)
{
	fprintf(f, "    buffers (elements per rank):\n");
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		const char *parts = bf->nparts > 1 ? arena_printf(a, " x %d parts along %s", bf->nparts,
		                                                  value_dim_name(a, bf->v, bf->pdim)) : "";
		fprintf(f, "      %-14s %-7s %lld = %d%s slice%s%s of %lld\n", bf->name, tx_buf_role(c, b),
		        (long long)bf->elems, bf->nslots, bf->own ? " own" : "", bf->nslots == 1 ? "" : "s",
		        parts, (long long)bf->slot_elems);
	}
}

static void
tx_phase(FILE *f, Arena *a, const Coll *c, int p)
{
	const Phase *ph = c->phases.v[p];

	fprintf(f, "    phase %d: %s; for i = 0..%d%s\n", p + 1, ph->name, ph->nrounds - 1,
	        ph->nlanes > 1 ? arena_printf(a, ", lanes t = 0..%d", ph->nlanes - 1) : "");
	for (int t = 0; t < ph->nlanes; t++) {
		if (ph->nlanes > 1)
			fprintf(f, "      lane %d:\n", t);
		for (int k = 0; k < ph->lanes[t].n; k++) {
			const Item *it = ph->lanes[t].v[k];
			fprintf(f, "      %-22s %s\n", tx_guard(a, &it->g, ph->nrounds), tx_item(a, c, it));
		}
	}
}

/* Step by step for the first show ranks, then the slice order of more. */
static void
tx_ranks(FILE *f, Arena *a, const Coll *c, int show)
{
	int order = show > ORDERRANKS ? show : ORDERRANKS;

	for (int r = 0; r < c->N && r < show; r++) {
		int step = 0;
		fprintf(f, "    rank %d:\n", r);
		for (int p = 0; p < c->phases.n; p++) {
			const Phase *ph = c->phases.v[p];
			for (int i = 0; i < ph->nrounds; i++)
				for (int t = 0; t < ph->nlanes; t++, step++) {
					const char *l = sched_step_label(a, c, r, p, i, t, "; ");
					if (l)
						fprintf(f, "      step %d: %s\n", step, l);
				}
		}
	}
	fprintf(f, "    slices computed, in order:\n");
	for (int r = 0; r < c->N && r < order; r++)
		fprintf(f, "      rank %d: %s\n", r, tx_order(a, c, r));
	if (c->N > order)
		fprintf(f, "      (ranks %d..%d not shown: --sched-ranks=all)\n", order, c->N - 1);
}

/* "backward " for a stage of a backward pass (grad.c), else "". */
static const char *
bwd_mark(const Sched *s)
{
	return s->g->fwd ? "backward " : "";
}

static void
tx_summary(FILE *f, Arena *a, const Sched *s, const Coll *c)
{
	VerifyStats st = c->stats;
	char err[1024];

	if (!c->verified && verify_coll(c, NULL, &st, err, sizeof err)) {
		fprintf(f, "verify: FAILED %scollective=%s schedule=%s: %s\n", bwd_mark(s),
		        c->node->out->name, sched_kind_str(a, &c->how), err);
		return;
	}
	/* the stages of other regions it runs (order.c), in its order */
	const char *hosted = "";
	SchedPos p = {0};
	for (const Item *it; (it = sched_next(c, 0, &p));)
		if (it->kind == IT_HOST)
			hosted = arena_printf(a, "%s%s%s", hosted, *hosted ? "," : " hosted=",
			                      it->u.host.node->out->name);
	fprintf(f, "verify: ok %scollective=%s schedule=%s ranks=%d steps=%d exposed=%d tail-free=%s%s\n",
	        bwd_mark(s), c->node->out->name, sched_kind_str(a, &c->how), c->N, c->nsteps,
	        st.exposed, st.tailfree ? "yes" : "no", hosted);
}

/* A packed collective (coalesce.c): its members and their slots. */
static void
tx_pack(FILE *f, Arena *a, const Sched *s, const Node *n)
{
	const Pack *p = coalesce_pack_of(s->g, n);

	if (!p)
		return;
	fprintf(f, "    coalesced: %d all_reduces, %lld bytes per rank (%lld padded to its "
	        "slices):\n", p->n, (long long)p->bytes, (long long)p->padded);
	for (int j = 0; j < p->n; j++) {
		const Node *u = p->unpack[j];
		fprintf(f, "      slot %d: %s = %s, elements %lld..%lld  %s\n", j, u->out->name,
		        p->was[j], (long long)u->a.pack.at,
		        (long long)(u->a.pack.at + value_rank_elems(u->out) - 1), tx_where(a, s, u));
	}
}

static void
tx_coll(FILE *f, Arena *a, const Sched *s, const Stage *st, int show)
{
	const Coll *c = st->u.coll;
	const Node *n = c->node;

	fprintf(f, "%scollective %s = %s  %s%s\n", bwd_mark(s), n->out->name, graph_node_str(a, n),
	        tx_where(a, s, n), st->host1 ? arena_printf(a, "  (hosted: run whole by stage %d, "
	        "under %s's transfers)", st->host1, ((Stage *)s->stages.v[st->host1 - 1])->u.coll
	        ->node->out->name) : "");
	/* several groups: which group's ranks */
	const char *of = s->g->groups.n > 1 ? arena_printf(a, " of %s", n->a.coll.group->name) : "";
	fprintf(f, "    schedule %s%s: %d ranks%s, %d slices along %s, %d step%s\n",
	        sched_kind_str(a, &c->how), c->note ? arena_printf(a, " (%s)", c->note) : "", c->N,
	        of, c->nslices, c->dim >= 0 ? value_dim_name(a, n->in[0], c->dim) : "-", c->nsteps,
	        c->nsteps == 1 ? "" : "s");
	if (c->order_note)
		fprintf(f, "    %s\n", c->order_note);
	tx_pack(f, a, s, n);
	tx_region(f, a, s, c);
	tx_bufs(f, a, c);
	for (int p = 0; p < c->phases.n; p++)
		tx_phase(f, a, c, p);
	tx_ranks(f, a, c, show);
	tx_summary(f, a, s, c);
}

void
sched_print(FILE *f, const Sched *s, int ranks)
{
	Arena *a = s->arena;
	int show = ranks > 0 ? ranks : SHOWRANKS;

	fprintf(f, "%sschedule %s (%s): %d stages, %d collectives\n", bwd_mark(s), s->g->name,
	        s->g->file, s->stages.n, s->colls.n);
	for (int k = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		fprintf(f, "[%d] ", k + 1);
		if (st->kind == ST_COLL) {
			tx_coll(f, a, s, st, show);
			continue;
		}
		fprintf(f, "%scompute %s = %s  %s%s\n", bwd_mark(s), sched_results(a, st->u.node, "*"),
		        graph_node_str(a, st->u.node), tx_where(a, s, st->u.node), st->host1 ?
		        arena_printf(a, "  (hosted: run by stage %d, under %s's transfers)", st->host1,
		                     ((Stage *)s->stages.v[st->host1 - 1])->u.coll->node->out->name) : "");
	}
}

/* ---- --explain ---- */

static const char *
tx_region_list(Arena *a, const Sched *s, const Coll *c)
{
	const char *out = "";

	for (int k = 0; k < c->region.n; k++) {
		const RNode *rn = c->region.v[k];
		out = arena_printf(a, "%s%s%s=%s (%s%s)", out, k ? ", " : "", rn->node->out->name,
		                   op_info[rn->node->op].name, tx_where(a, s, rn->node),
		                   rn->node->lse ? arena_printf(a, "; saves %s", rn->node->lse->name) : "");
	}
	return out;
}

static const char *
tx_why_none(Arena *a, const Coll *c)
{
	const Node *n = c->node;
	const Value *in = n->in[0];

	if (n->op != OP_ALL_GATHER && op_info[in->def->op].cls == CL_LEAF)
		return arena_printf(a, ": %s is an input, nothing computes it here", in->name);
	if (n->op == OP_ALL_GATHER && !n->out->uses.n)
		return arena_printf(a, ": nothing reads %s", n->out->name);
	return "";
}

/* The mark of candidate k in --explain's table. */
static const char *
tx_mark(const Sched *s, const Coll *c, int k, int fastest)
{
	if (k != c->used)
		return k == fastest ? "   (the fastest)" : "";
	if (c->want.kind != SK_AUTO)
		return "   <- used, as asked";
	return k == fastest ? "   <- auto: the fastest"
	                    : arena_printf(s->arena, "   <- auto: the simplest within what is "
	                                   "left of %g%% of the pass", s->auto_margin);
}

/* --profile: every candidate's predicted time, the one used marked. */
static void
tx_candidates(FILE *f, const Sched *s, const Coll *c)
{
	Arena *a = s->arena;

	if (!s->profile)
		return;
	int fastest;
	predict_pick(c->cand, c->ncand, 0, &fastest);
	fprintf(f, "  predicted on %s (%s, %d ranks calibrated), ms:\n", s->profile->name,
	        s->profile->backend, s->profile->ranks);
	if (s->profile->defer_sd > 0)
		fprintf(f, "  (a transfer posted right before compute starts when that compute ends, "
		        "then moves at overlap %g, slowing compute %g times: the profile's defer)\n",
		        s->profile->defer_ov, s->profile->defer_sd);
	for (int k = 0; k < c->ncand; k++) {
		const Candidate *cd = &c->cand[k];
		const char *how = sched_kind_str(a, &cd->how);
		if (cd->pr.err)
			fprintf(f, "    %-30s not predicted: %s\n", how, cd->pr.err);
		else
			fprintf(f, "    %-30s %10.4f   compute %.4f, transfers %.4f%s\n", how,
			        cd->pr.total * 1e3, cd->pr.compute * 1e3, cd->pr.xfer * 1e3,
			        tx_mark(s, c, k, fastest));
	}
}

/* --profile: the whole pass, stage by stage as run; and its compute
 * alone (each stage's busiest rank, no transfers and no slowdown: what
 * the pass takes with its transfers removed). */
static void
tx_total(FILE *f, const Sched *s)
{
	if (!s->profile)
		return;
	Prediction p = predict_pass(s->arena, s, 0);
	if (p.err)
		fprintf(f, "%spass: not predicted: %s\n", bwd_mark(s), p.err);
	else
		fprintf(f, "%spass: predicted %.4f ms (compute alone %.4f ms) on %s\n",
		        bwd_mark(s), p.total * 1e3, p.compute * 1e3, s->profile->name);
	if (s->choice)
		fprintf(f, "%spass chosen: %s\n", bwd_mark(s), s->choice);
}

void
sched_explain(FILE *f, const Sched *s)
{
	Arena *a = s->arena;

	for (int k = 0; k < s->colls.n; k++) {
		const Coll *c = s->colls.v[k];
		const Node *n = c->node;
		const char *asked = sched_kind_str(a, &c->want), *how = sched_kind_str(a, &c->how);
		fprintf(f, "%s: %s%s %s: %s%s", tx_where(a, s, n), bwd_mark(s), op_info[n->op].name,
		        n->out->name, how,
		        strcmp(asked, how) ? arena_printf(a, " (asked %s)", asked) : "");
		if (c->region.n)
			fprintf(f, " region [%s]", tx_region_list(a, s, c));
		else
			fprintf(f, " no region to hide the transfers under%s", tx_why_none(a, c));
		for (int j = 0; j < c->stops.n; j++) {
			const Stop *st = c->stops.v[j];
			fprintf(f, "%s stops %s %s=%s (%s): %s", j ? ";" : "", st->up ? "after" : "before",
			        st->node->out->name, op_info[st->node->op].name, tx_where(a, s, st->node),
			        st->why);
		}
		if (c->note)
			fprintf(f, "; %s", c->note);
		if (c->order_note)
			fprintf(f, "; %s", c->order_note);
		fputc('\n', f);
		tx_candidates(f, s, c);
	}
	coalesce_explain(f, s->g);
	tx_total(f, s);
}
