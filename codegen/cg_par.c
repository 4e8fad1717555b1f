/* cg_par.c: --emit=c, the parallel forward pass of one rank, printed from
 * the verified schedule and its memory plan. Plain stages become one
 * runtime call on the views the plan gives; a lowered collective becomes
 * its step loop: for each phase a loop over rounds i (none when there is
 * one round), the lanes unrolled inside, each item guarded by its rounds
 * and spelt in r and i as sched.h describes, its operands the plan's
 * views. Nothing here decides anything about memory: every buffer,
 * offset, cut, staging slot and request slot comes from the plan
 * (compiler/plan.c), which verify_mem.c proved.
 * requires: a schedule and plan that verify_sched accepted.
 * ensures: C that compiles warning-free with -std=c11 -Wall -Wextra -Werror
 * against cfrt.h; the same plan always gives the same text. */
#include <string.h>

#include "cgen.h"
#include "plan.h"

typedef struct Par {
	Cg *cg;
	const Plan *plan;
	const Coll *c;
	const PColl *pc;
	int ci;             /* the collective's index in the schedule */
	const char **lab;   /* by label: the stem of its request arrays */
	const char **temp;  /* by buffer: the C name of a scratch set */
	int one;            /* the phase has one round: i is 0 */
	int inblock;        /* the item's guard already opened a block */
	int step0;          /* step number of the current phase's round 0 */
	int atwait;         /* printing an unpack: the base is the saved one */
	const char *k;      /* the slot expression of the item ("k" or "0") */
	const char *r;      /* the rank the stage means (several groups: in
	                     * its group), or NULL: the local r */
	int group;          /* with r: the collective's group's index */
	const char **grank; /* several groups: by group, the local of its
	                     * rank (PV_G + k) */
	const char **wsname; /* offset macros: by buffer, then by label and
	                      * side (ws_temp, ws_stage) */
	struct Par *all;     /* every collective's, by index in Sched.colls */
	const char *iname;   /* a hosted collective's (order.c): its round's
	                      * local, apart from its host's; else NULL */
} Par;

static const char *
L(const Par *P, CgLocal k)
{
	if (k == LC_I && P->iname)
		return P->iname;
	return k == LC_R && P->r ? P->r : P->cg->loc[k];
}

/* ---- integer expressions ---- */

/* Appends "+ k*name" to buf, spelt as a person would. */
static size_t
term(char *buf, size_t n, size_t cap, int64_t k, const char *name)
{
	if (!k || n >= cap)
		return n;
	const char *sign = k < 0 ? (n ? " - " : "-") : (n ? " + " : "");
	long long m = k < 0 ? -k : k;
	if (!*name)
		return n + (size_t)snprintf(buf + n, cap - n, "%s%lld", sign, m);
	if (m == 1)
		return n + (size_t)snprintf(buf + n, cap - n, "%s%s", sign, name);
	return n + (size_t)snprintf(buf + n, cap - n, "%s%s * %lld", sign, name, m);
}

/* An index expression; in a phase of one round, i is 0. */
static const char *
ix_c(Par *P, const Ix *x)
{
	Arena *a = P->cg->a;
	char buf[256] = "";
	size_t n = 0;
	int b = P->one ? 0 : x->b, c = x->c;

	if (x->kind == IX_PARTNER) {
		n = term(buf, n, sizeof buf, b, L(P, LC_I));
		n = term(buf, n, sizeof buf, c, "");
		return arena_printf(a, "cf_partner(%s, %s, %d)", L(P, LC_R), n ? buf : "0", x->n);
	}
	if (P->one && x->b && !x->a && x->n) {
		/* a constant after all */
		long long v = ((long long)c % x->n + x->n) % x->n;
		return arena_printf(a, "%lld", x->n ? v : (long long)c);
	}
	n = term(buf, n, sizeof buf, x->a, L(P, LC_R));
	n = term(buf, n, sizeof buf, b, L(P, LC_I));
	n = term(buf, n, sizeof buf, c, "");
	if (!n)
		return "0";
	Ix y = *x;
	y.b = b;
	if (!plan_ix_mod(&y))
		return arena_strdup(a, buf);
	return arena_printf(a, "cf_mod(%s, %d)", buf, x->n);
}

/* The first slice of sel (plus u * stride in a loop over u). */
static const char *
sel_c(Par *P, const Sel *s, int loop)
{
	Arena *a = P->cg->a;
	const char *lo = ix_c(P, &s->lo), *hi = ix_c(P, &s->hi), *base = lo;

	if (s->per && strcmp(hi, "0")) {
		hi = s->per == 1 ? hi : arena_printf(a, "(%s) * %d", hi, s->per);
		base = strcmp(lo, "0") ? arena_printf(a, "%s + %s", hi, lo) : hi;
	}
	if (!loop)
		return base;
	if (!strcmp(base, "0"))
		return arena_printf(a, "%s * %d", L(P, LC_U), s->stride);
	return arena_printf(a, "%s + %s * %d", base, L(P, LC_U), s->stride);
}

/* The name of run-time integer v in an item's printed form. */
static const char *
var_c(Par *P, int v)
{
	static const CgLocal loc[PV_G] = {LC_S, LC_R, LC_PART, LC_U, LC_BASE};

	if (v >= PV_G && !P->grank)
		die("cg: the rank of group %d in a model of one group", v - PV_G);
	return v >= PV_G ? P->grank[v - PV_G] : L(P, loc[v]);
}

/* mul * (c . vars + add), as (s - r * 4) * 16. */
static const char *
pe_c(Par *P, const PExpr *e)
{
	Arena *a = P->cg->a;
	char buf[256] = "";
	size_t n = 0;
	int nterm = 0, plain = 0;

	for (int v = 0; v < NPV; v++)
		if (e->c[v]) {
			n = term(buf, n, sizeof buf, e->c[v], var_c(P, v));
			nterm++;
			plain = e->c[v] == 1;
		}
	if (!nterm)
		return arena_printf(a, "%lld", (long long)(e->mul * e->add));
	n = term(buf, n, sizeof buf, e->add, "");
	if (e->mul == 1)
		return arena_strdup(a, buf);
	if (nterm == 1 && plain && !e->add)
		return arena_printf(a, "%s * %lld", buf, (long long)e->mul);
	return arena_printf(a, "(%s) * %lld", buf, (long long)e->mul);
}

/* ---- views ---- */

/* The macro of scratch buffer b's offset (ws_names). */
static const char *
ws_temp(Par *P, int b)
{
	return P->wsname[b];
}

/* The macro of a label's staging offset (side 1: what it receives). */
static const char *
ws_stage(Par *P, int lb, int side)
{
	return P->wsname[P->c->bufs.n + 2 * lb + side];
}

/* The address of slot k of a label's staging (side 1: what a collective
 * receives). */
static const char *
stage_at(Par *P, int lb, int side)
{
	const PLabel *l = &P->pc->lab[lb];
	const char *at = arena_printf(P->cg->a, "(char *)%s + %s", L(P, LC_WS), ws_stage(P, lb, side));

	if (l->slots > 1)
		at = arena_printf(P->cg->a, "%s + %s * %lld", at, P->k, (long long)l->slot_bytes[side]);
	return at;
}

static const char *
view_c(Par *P, const PView *v)
{
	Arena *a = P->cg->a;
	const Coll *c = P->c;
	const char *s;

	if (v->base == PB_STAGE) {
		int es = plan_esize(c);
		const char *at = stage_at(P, v->id, v->side);
		if (v->blk)
			at = arena_printf(a, "%s + %s * %lld", at, L(P, LC_U), (long long)(v->blk * es));
		return arena_printf(a, "cfrt_view_contig(%s, %s, %d, (int64_t[])%s)", at,
		                    cg_dtype(c->node->in[0]->dtype), v->nd, cg_dims_of(P->cg->a, v->nd, v->dims));
	}
	if (v->base == PB_TEMP) {
		const Buf *b = c->bufs.v[v->id];
		s = P->temp[v->id];
		return b->nset > 1 ? arena_printf(a, "%s[%s]", s, ix_c(P, &v->rot)) : s;
	}
	s = P->cg->cname[v->id];
	for (int k = 0; k < v->ncut; k++) {
		const PCut *x = &v->cut[k];
		s = arena_printf(a, "cfrt_view_slice(%s, %d, %s, %lld)", s, x->dim, pe_c(P, &x->start),
		                 (long long)x->len);
	}
	return s;
}

/* Declares the locals an item's views use: its slice, its part, or the
 * collective chunk's base. */
static void
item_locals(Par *P, const Item *it, const PItem *p, const Sel *sel, int loop)
{
	Emitter *e = &P->cg->e;
	unsigned vars = plan_item_vars(p);

	if (vars & 1u << PV_S)
		emit(e, "int %s = %s; /* slice */\n", L(P, LC_S), sel_c(P, sel, loop));
	if (vars & 1u << PV_BASE && !P->atwait)
		emit(e, "int %s = %s; /* the chunk's first slice */\n", L(P, LC_BASE),
		     sel_c(P, &it->u.coll.sel, 0));
	if (vars & 1u << PV_PART) {
		for (int k = 0; k < p->nview; k++)
			if (p->view[k].ncut && p->view[k].cut[p->view[k].ncut - 1].start.c[PV_PART]) {
				emit(e, "int %s = %s; /* the sender's part */\n", L(P, LC_PART),
				     ix_c(P, &p->view[k].part));
				break;
			}
	}
}

/* ---- items ---- */

/* The C expression of the item's slice: the local item_locals declared,
 * or sel's first slice. */
static const char *
item_slice(Par *P, const PItem *p, const Sel *sel, int loop)
{
	return plan_item_vars(p) & 1u << PV_S ? L(P, LC_S) : sel_c(P, sel, loop);
}

/* The name of stage buffer b in the trace: its tensor's, or the scratch
 * set's (p_part). */
static const char *
buf_name(Par *P, int b)
{
	const Buf *bf = P->c->bufs.v[b];

	return bf->kind == BK_TEMP ? P->temp[bf->set] : bf->v->name;
}

static void
item_begin(Par *P)
{
	if (!P->inblock)
		emit_begin(&P->cg->e);
}

static void
item_end(Par *P)
{
	if (!P->inblock)
		emit_close(&P->cg->e, "");
}

/* The array element of label lb's request state `what` at slot k, or the
 * scalar when the label has one slot. */
static const char *
lab_at(Par *P, int lb, const char *what)
{
	const PLabel *l = &P->pc->lab[lb];

	if (l->slots == 1)
		return arena_printf(P->cg->a, "%s_%s", P->lab[lb], what);
	return arena_printf(P->cg->a, "%s_%s[%s]", P->lab[lb], what, L(P, LC_K));
}

/* Declares rd (the round) and k (its slot) of a transfer or wait. */
static void
round_locals(Par *P, int lb, const Ix *round)
{
	const PLabel *l = &P->pc->lab[lb];
	Emitter *e = &P->cg->e;

	emit(e, "int %s = %s;\n", L(P, LC_RD), ix_c(P, round));
	if (l->slots > 1)
		emit(e, "int %s = %s %% %d;\n", L(P, LC_K), L(P, LC_RD), l->slots);
	P->k = l->slots > 1 ? L(P, LC_K) : "0";
}

static void
emit_compute(Par *P, const Item *it, const PItem *p)
{
	Cg *cg = P->cg;
	const RNode *rn = P->c->region.v[it->u.comp.rn];
	const Node *n = rn->node;
	const char *in[MAXIN];

	cg_comment(cg, n);
	if (p->loop)
		emit_open(&cg->e, "for (int %s = 0; %s < %d; %s++)", L(P, LC_U), L(P, LC_U),
		          it->u.comp.sel.cnt, L(P, LC_U));
	else
		item_begin(P);
	item_locals(P, it, p, &it->u.comp.sel, p->loop);
	cg_what(cg, cg_node_str(cg, n), item_slice(P, p, &it->u.comp.sel, p->loop));
	emit(&cg->e, "cfrt_view %s = %s;\n", L(P, LC_OUT), view_c(P, &p->view[0]));
	for (int j = 0; j < n->nin; j++) {
		in[j] = arena_printf(cg->a, "%s%d", L(P, LC_IN), j);
		emit(&cg->e, "cfrt_view %s = %s;\n", in[j], view_c(P, &p->view[1 + j]));
	}
	if (n->lse) /* the log-sum-exp rows of this slice's queries */
		emit(&cg->e, "cfrt_view %s = %s;\n", L(P, LC_LSE), view_c(P, &p->view[1 + n->nin]));
	cg_op(cg, n, L(P, LC_OUT), in, n->lse ? L(P, LC_LSE) : NULL,
	      p->qoff ? pe_c(P, &p->qstart) : NULL, it->u.comp.beta);
	if (p->loop)
		emit_close(&cg->e, "");
	else
		item_end(P);
}

static void
emit_move(Par *P, const Item *it, const PItem *p)
{
	Cg *cg = P->cg;
	const char *ctx = L(P, LC_CTX), *dst = L(P, LC_DST), *src = L(P, LC_SRC);

	const char *to = buf_name(P, it->u.move.dst.buf);

	item_begin(P);
	item_locals(P, it, p, &it->u.move.dst.sel, 0);
	cg_what(cg, it->kind == IT_ZERO ? arena_printf(cg->a, "%s = 0", to) :
	        arena_printf(cg->a, "%s %s %s", to, it->kind == IT_ADD ? "+=" : "=",
	                     buf_name(P, it->u.move.src.buf)), item_slice(P, p, &it->u.move.dst.sel, 0));
	emit(&cg->e, "cfrt_view %s = %s;\n", dst, view_c(P, &p->view[0]));
	if (it->kind == IT_ZERO) {
		emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_scale(%s, &%s, &%s, 0.0));\n", ctx, ctx, dst, dst);
	} else {
		emit(&cg->e, "cfrt_view %s = %s;\n", src, view_c(P, &p->view[1]));
		if (it->kind == IT_ADD)
			emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_add(%s, &%s, &%s, &%s));\n", ctx, ctx, dst, dst, src);
		else
			emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_copy(%s, &%s, &%s));\n", ctx, ctx, dst, src);
	}
	item_end(P);
}

static void
emit_xfer(Par *P, const Item *it, const PItem *p)
{
	Cg *cg = P->cg;
	int lb = it->u.xfer.label, send = it->kind == IT_SEND;
	const PLabel *l = &P->pc->lab[lb];
	const char *ctx = L(P, LC_CTX), *b = L(P, LC_DATA), *st = L(P, LC_STAGE);

	item_begin(P);
	item_locals(P, it, p, &it->u.xfer.buf.sel, 0);
	cg_what(cg, arena_printf(cg->a, "%s %s", send ? "send" : "recv",
	                         buf_name(P, it->u.xfer.buf.buf)), item_slice(P, p, &it->u.xfer.buf.sel, 0));
	emit(&cg->e, "int %s = %s;\n", L(P, LC_PEER), ix_c(P, &it->u.xfer.peer));
	round_locals(P, lb, &it->u.xfer.round);
	emit(&cg->e, "cfrt_view %s = %s;\n", b, view_c(P, &p->view[0]));
	if (p->staged) {
		emit(&cg->e, "cfrt_view %s = %s;\n", st, view_c(P, &p->stage));
		if (send)
			emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_copy(%s, &%s, &%s)); /* pack */\n", ctx, ctx, st, b);
		else
			emit(&cg->e, "%s = %s;\n%s = 1;\n", lab_at(P, lb, "up"), b, lab_at(P, lb, "upon"));
	} else if (l->unpack && !send) {
		emit(&cg->e, "%s = 0;\n", lab_at(P, lb, "upon"));
	}
	emit(&cg->e, "%s = %s;\n", lab_at(P, lb, "rd"), L(P, LC_RD));
	emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_%s(%s, %s.p, %lld, %s, %s, %d, &%s));\n", ctx,
	     send ? "isend" : "irecv", ctx, p->staged ? st : b, (long long)p->count,
	     cg_dtype(P->c->node->in[0]->dtype), L(P, LC_PEER), it->u.xfer.tag,
	     lab_at(P, lb, "rq"));
	item_end(P);
}

/* Copies the blocks of one side of a collective between the tensor and
 * staging slot k: into it (pack) or out of it (unpack). */
static void
emit_blocks(Par *P, const PItem *p, int recv)
{
	Cg *cg = P->cg;
	const PSide *sd = &p->side[recv];
	const char *ctx = L(P, LC_CTX), *blk = L(P, LC_BLK), *st = L(P, LC_STAGE);

	if (sd->nblock > 1)
		emit_open(&cg->e, "for (int %s = 0; %s < %d; %s++)", L(P, LC_U), L(P, LC_U), sd->nblock,
		          L(P, LC_U));
	else
		emit_begin(&cg->e);
	emit(&cg->e, "cfrt_view %s = %s;\n", blk, view_c(P, &sd->view));
	emit(&cg->e, "cfrt_view %s = %s;\n", st, view_c(P, &sd->stage));
	emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_copy(%s, &%s, &%s));\n", ctx, ctx, recv ? blk : st,
	     recv ? st : blk);
	emit_close(&cg->e, "");
}

/* Declares sst (what the collective sends) or rst (where it receives). */
static void
emit_side(Par *P, const Item *it, const PItem *p, int recv)
{
	Cg *cg = P->cg;
	const PSide *sd = &p->side[recv];
	const char *name = L(P, recv ? LC_RECV : LC_SEND);
	const Buf *b = P->c->bufs.v[recv ? it->u.coll.dst : it->u.coll.src];

	const char *why, *what = sd->nblock == 1 ? "block is" : "blocks are";

	if (!sd->staged) {
		emit(&cg->e, "void *%s = %s.p; /* %s's %s contiguous: %s in place */\n", name,
		     view_c(P, &sd->view), b->name, what, recv ? "received" : "sent");
		return;
	}
	if (sd->nblock == 1)
		why = "block is not contiguous";
	else if (it->u.coll.sel.stride > 1 && !(it->u.coll.op == OP_ALL_TO_ALL && recv))
		why = arena_printf(cg->a, "blocks are %d slices apart", it->u.coll.sel.stride);
	else
		why = "blocks are not one contiguous run in rank order";
	emit(&cg->e, "/* %s's %s: %s */\n", b->name, why, !recv ? "packed into staging" :
	     it->u.coll.blocking ? "received in staging, unpacked after the call" :
	     "received in staging, unpacked at the wait");
	if (!recv)
		emit_blocks(P, p, 0);
	emit(&cg->e, "void *%s = %s;\n", name, stage_at(P, it->u.coll.label, recv));
}

static void
emit_coll(Par *P, const Item *it, const PItem *p)
{
	Cg *cg = P->cg;
	int lb = it->u.coll.label, op = it->u.coll.op, blocking = it->u.coll.blocking;
	const PLabel *l = &P->pc->lab[lb];
	const char *ctx = L(P, LC_CTX), *dt = cg_dtype(P->c->node->in[0]->dtype);

	/* the runtime's collectives bear the ops' names: cfrt_[i]all_gather, ... */
	item_begin(P);
	item_locals(P, it, p, &it->u.coll.sel, 0);
	cg_what(cg, arena_printf(cg->a, "%s = %s(%s)", buf_name(P, it->u.coll.dst), op_info[op].name,
	                         buf_name(P, it->u.coll.src)), item_slice(P, p, &it->u.coll.sel, 0));
	if (!blocking)
		round_locals(P, lb, &it->u.coll.round);
	else
		P->k = "0";
	emit_side(P, it, p, 0);
	emit_side(P, it, p, 1);
	if (blocking) {
		emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_%s(%s, %s, %s, %lld, %s));\n", ctx, op_info[op].name, ctx,
		     L(P, LC_SEND), L(P, LC_RECV), (long long)p->count, dt);
		if (p->side[1].staged)
			emit_blocks(P, p, 1);
	} else {
		emit(&cg->e, "%s = %s;\n", lab_at(P, lb, "rd"), L(P, LC_RD));
		if (l->usebase)
			emit(&cg->e, "%s = %s;\n", lab_at(P, lb, "base"), L(P, LC_BASE));
		emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_i%s(%s, %s, %s, %lld, %s, &%s));\n", ctx,
		     op_info[op].name, ctx, L(P, LC_SEND), L(P, LC_RECV), (long long)p->count, dt,
		     lab_at(P, lb, "rq"));
	}
	item_end(P);
}

static void
emit_wait(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	int lb = it->u.wait.label;
	const PLabel *l = &P->pc->lab[lb];
	const char *ctx = L(P, LC_CTX);

	item_begin(P);
	round_locals(P, lb, &it->u.wait.round);
	emit_open(&cg->e, "if (%s == %s)", lab_at(P, lb, "rd"), L(P, LC_RD));
	emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_wait(%s, &%s));\n%s = -1;\n", ctx, ctx, lab_at(P, lb, "rq"),
	     lab_at(P, lb, "rd"));
	if (l->unpack || (l->kind == IT_COLL && l->staged[1]))
		cg_what(cg, arena_printf(cg->a, "unpack %s", l->kind == IT_COLL ?
		                         buf_name(P, l->coll->u.coll.dst) : P->c->node->out->name), NULL);
	if (l->kind == IT_COLL && l->staged[1]) {
		const PItem *p = P->pc->item[l->coll->id];
		if (l->usebase)
			emit(&cg->e, "int %s = %s;\n", L(P, LC_BASE), lab_at(P, lb, "base"));
		P->atwait = 1;
		emit_blocks(P, p, 1);
		P->atwait = 0;
	} else if (l->unpack) {
		const char *st = L(P, LC_STAGE), *up = lab_at(P, lb, "up");
		emit_open(&cg->e, "if (%s)", lab_at(P, lb, "upon"));
		P->k = L(P, LC_K);
		emit(&cg->e, "cfrt_view %s = cfrt_view_contig(%s, %s, %s.nd, %s.dim);\n", st,
		     stage_at(P, lb, 0), cg_dtype(P->c->node->in[0]->dtype), up, up);
		emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_copy(%s, &%s, &%s)); /* unpack */\n", ctx, ctx, up, st);
		emit_close(&cg->e, "");
	}
	emit_close(&cg->e, "");
	item_end(P);
}

static int
guard_trivial(const Phase *ph, const Guard *g)
{
	return !g->active && g->lo <= 0 && g->hi >= ph->nrounds - 1;
}

static void
emit_guard_open(Par *P, const Phase *ph, const Guard *g)
{
	char cond[256] = "";
	size_t n = 0;
	const char *i = L(P, LC_I);

	if (g->lo == g->hi && ph->nrounds > 1)
		n += (size_t)snprintf(cond, sizeof cond, "%s == %d", i, g->lo);
	else {
		if (g->lo > 0)
			n += (size_t)snprintf(cond + n, sizeof cond - n, "%s >= %d", i, g->lo);
		if (g->hi < ph->nrounds - 1)
			n += (size_t)snprintf(cond + n, sizeof cond - n, "%s%s <= %d", n ? " && " : "", i,
			                      g->hi);
	}
	if (g->active) {
		Ix k = {IX_PARTNER, 0, 1, g->aoff, P->c->N};
		n += (size_t)snprintf(cond + n, sizeof cond - n, "%s%s >= 0", n ? " && " : "",
		                      ix_c(P, &k));
	}
	emit_open(&P->cg->e, "if (%s)", cond);
}

static void emit_stage_node(Par *P, const Node *n, const PItem *p);
static void emit_stage_coll(Par *P);

/* An IT_HOST item: the plain stage, or the collective's program, that
 * the whole-pass order (order.c) put under this collective's transfers,
 * emitted as at its own place. A hosted collective's transfers go over
 * its own group; this one's over its own again after. */
static void
emit_host(Par *P, const Item *it)
{
	const Plan *plan = P->plan;
	int k = it->u.host.stage, g = plan->group[k];
	Par plain = {.cg = P->cg, .plan = plan, .k = "0", .grank = P->grank,
	             .r = P->grank && g >= 0 ? P->grank[g] : NULL};

	emit_begin(&P->cg->e);
	if (it->u.host.coll) {
		Par *G = P->all;
		while (G->c != it->u.host.coll)
			G++;
		G->r = plain.r;
		G->grank = P->grank;
		G->group = g;
		emit_stage_coll(G);
		if (P->r)
			emit(&P->cg->e, "CFRT_PROPAGATE(%s, cfrt_use_group(%s, %d));\n", L(P, LC_CTX),
			     L(P, LC_CTX), P->group);
	} else {
		emit_stage_node(&plain, it->u.host.node, plan->plain[k]);
	}
	emit_close(&P->cg->e, "");
}

static void
emit_item(Par *P, const Phase *ph, const Item *it)
{
	const PItem *p = P->pc->item[it->id];
	int g = !guard_trivial(ph, &it->g);

	if (g)
		emit_guard_open(P, ph, &it->g);
	P->inblock = g;
	switch (it->kind) {
	case IT_COMPUTE: emit_compute(P, it, p); break;
	case IT_ADD: case IT_COPY: case IT_ZERO: emit_move(P, it, p); break;
	case IT_SEND: case IT_RECV: emit_xfer(P, it, p); break;
	case IT_COLL: emit_coll(P, it, p); break;
	case IT_WAIT: emit_wait(P, it); break;
	case IT_HOST: emit_host(P, it); break;
	}
	if (g)
		emit_close(&P->cg->e, "");
}

static int
is_p2p(const Item *it)
{
	return it->kind == IT_SEND || it->kind == IT_RECV;
}

static void
emit_phase(Par *P, const Phase *ph)
{
	Emitter *e = &P->cg->e;
	const char *i = L(P, LC_I), *ctx = L(P, LC_CTX), *name = P->c->node->out->name;

	emit(e, "/* %s: %d round%s x %d lane%s */\n", ph->name, ph->nrounds,
	     ph->nrounds == 1 ? "" : "s", ph->nlanes, ph->nlanes == 1 ? "" : "s");
	P->one = ph->nrounds == 1;
	if (P->one) {
		emit_begin(e);
		emit(e, "cfrt_where(%s, \"%s\", %d);\n", ctx, name, P->step0);
	} else {
		emit_open(e, "for (int %s = 0; %s < %d; %s++)", i, i, ph->nrounds, i);
		if (P->step0)
			emit(e, "cfrt_where(%s, \"%s\", %d + %s);\n", ctx, name, P->step0, i);
		else
			emit(e, "cfrt_where(%s, \"%s\", %s);\n", ctx, name, i);
	}
	for (int t = 0; t < ph->nlanes; t++) {
		const Vec *items = &ph->lanes[t];
		if (ph->nlanes > 1)
			emit(e, "/* lane %d */\n", t);
		for (int j = 0; j < items->n; j++) {
			/* the sends and receives of one step are issued as a group */
			int x = is_p2p(items->v[j]), first = x && (j == 0 || !is_p2p(items->v[j - 1]));
			int last = x && (j == items->n - 1 || !is_p2p(items->v[j + 1]));
			if (first)
				emit(e, "CFRT_PROPAGATE(%s, cfrt_group_begin(%s));\n", ctx, ctx);
			emit_item(P, ph, items->v[j]);
			if (last)
				emit(e, "CFRT_PROPAGATE(%s, cfrt_group_end(%s));\n", ctx, ctx);
		}
	}
	emit_close(e, "");
	P->one = 0;
	P->step0 += ph->nrounds;
}

/* ---- a collective's stage ---- */

/* The stems of the label arrays: send, recv, coll (and the lane, when a
 * phase has several), unique in the stage. */
static void
name_labels(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;

	P->lab = arena_alloc(cg->a, (size_t)(P->pc->nlab + 1) * sizeof *P->lab);
	for (int lb = 0; lb < P->pc->nlab; lb++) {
		const PLabel *l = &P->pc->lab[lb];
		const char *stem = l->kind == IT_SEND ? "send" : l->kind == IT_RECV ? "recv" : "coll";
		if (c->P > 1 && l->kind != IT_COLL)
			stem = arena_printf(cg->a, "%s%d", stem, l->lane);
		if (P->iname) /* inside its host's stage: apart from the host's */
			stem = arena_printf(cg->a, "%s_%s", cg->cname[c->node->out->id], stem);
		const char *s = stem;
		for (int k = 2, clash = 1; clash; k++) {
			clash = 0;
			for (int j = 0; j < lb; j++)
				clash |= !strcmp(P->lab[j], s);
			if (clash)
				s = arena_printf(cg->a, "%s_%c", stem, 'a' + k - 1);
		}
		/* the arrays are named stem_rq, stem_rd, ...: none may be a tensor's */
		static const char *const what[] = {"rq", "rd", "up", "upon", "base"};
		int clash = 0;
		for (size_t k = 0; k < sizeof what / sizeof *what; k++) {
			const char *a = arena_printf(cg->a, "%s_%s", s, what[k]);
			clash |= strcmp(cg_avoid(cg, a), a) != 0;
		}
		P->lab[lb] = clash ? arena_printf(cg->a, "cf_%s", s) : s;
	}
}

/* Scratch sets are named after the value they hold one slice of, and
 * their role: p_part[2], q_send. */
static void
name_temps(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;

	P->temp = arena_alloc(cg->a, (size_t)(c->bufs.n + 1) * sizeof *P->temp);
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		if (bf->kind != BK_TEMP || bf->set != b)
			continue;
		const char *s = arena_printf(cg->a, "%s_%s", cg->cname[bf->v->id], bf->stem);
		if (c->P > 1)
			s = arena_printf(cg->a, "%s%d", s, bf->lane);
		P->temp[b] = cg_avoid(cg, s);
	}
}

static void
emit_temps(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;

	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		if (bf->kind != BK_TEMP || bf->set != b || P->pc->off[b] < 0)
			continue;
		int64_t dims[MAXDIM];
		for (int d = 0; d < bf->v->ndim; d++)
			dims[d] = plan_temp_extent(c, bf, d);
		const char *one = arena_printf(cg->a, "%s, %d, (int64_t[])%s)", cg_dtype(bf->v->dtype),
		                               bf->v->ndim, cg_dims_of(P->cg->a, bf->v->ndim, dims));
		if (bf->nset == 1) {
			emit(&cg->e, "cfrt_view %s = cfrt_view_contig((char *)%s + %s, %s; /* one slice "
			     "of %s */\n", P->temp[b], L(P, LC_WS), ws_temp(P, b), one, bf->v->name);
			continue;
		}
		emit(&cg->e, "cfrt_view %s[%d] = { /* one slice of %s each */\n", P->temp[b], bf->nset,
		     bf->v->name);
		cg->e.indent++;
		for (int k = 0; k < bf->nset; k++)
			emit(&cg->e, "cfrt_view_contig((char *)%s + %s, %s,\n", L(P, LC_WS), ws_temp(P, b + k),
			     one);
		cg->e.indent--;
		emit(&cg->e, "};\n");
	}
}

/* A list "x, x, x" of n copies. */
static const char *
repeat(Arena *a, const char *x, int n)
{
	const char *s = x;

	for (int k = 1; k < n; k++)
		s = arena_printf(a, "%s, %s", s, x);
	return s;
}

static void
emit_labels(Par *P)
{
	Cg *cg = P->cg;

	for (int lb = 0; lb < P->pc->nlab; lb++) {
		const PLabel *l = &P->pc->lab[lb];
		const char *n = P->lab[lb];
		int k = l->slots;
		if (!l->used || l->blocking)
			continue;
		const char *dim = k > 1 ? arena_printf(cg->a, "[%d]", k) : "";
		const char *brace = k > 1 ? "{" : "", *end = k > 1 ? "}" : "";
		emit(&cg->e, "cfrt_req %s_rq%s = %s%s%s;\n", n, dim, brace, repeat(cg->a, "{0, 0}", k), end);
		emit(&cg->e, "int %s_rd%s = %s%s%s; /* the round in flight, -1: none */\n", n, dim,
		     brace, repeat(cg->a, "-1", k), end);
		if (l->unpack)
			emit(&cg->e, "cfrt_view %s_up%s;\nint %s_upon%s = %s%s%s; /* unpack at the wait */\n",
			     n, dim, n, dim, brace, repeat(cg->a, "0", k), end);
		if (l->usebase)
			emit(&cg->e, "int %s_base%s; /* the chunk's first slice */\n", n, dim);
	}
}

static void
emit_stage_coll(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;
	const Node *n = c->node;

	emit_line(&cg->e, n->loc);
	emit(&cg->e, "/* %s = %s over %s: %s */\n", n->out->name, graph_node_str(cg->a, n),
	     n->a.coll.group->name, graph_sched_str(cg->a, &c->how));
	if (P->r)
		emit(&cg->e, "CFRT_PROPAGATE(%s, cfrt_use_group(%s, %d));\n", L(P, LC_CTX), L(P, LC_CTX),
		     P->group);
	emit_begin(&cg->e);
	emit_temps(P);
	emit_labels(P);
	P->step0 = 0;
	for (int k = 0; k < c->phases.n; k++)
		emit_phase(P, c->phases.v[k]);
	emit_close(&cg->e, "");
}

/* ---- plain stages: one op on whole per-rank tensors ---- */

static void
emit_stage_node(Par *P, const Node *n, const PItem *p)
{
	Cg *cg = P->cg;
	const char *in[MAXIN], *lse = n->lse ? cg->cname[n->lse->id] : NULL;
	int cut = 0;

	emit_line(&cg->e, n->loc);
	cg_comment(cg, n);
	emit(&cg->e, "cfrt_where(%s, \"%s\", 0);\n", L(P, LC_CTX), n->out->name);
	cg_what(cg, cg_node_str(cg, n), NULL);
	for (int j = 1; j < p->nview; j++)
		cut |= p->view[j].ncut > 0;
	if (cut)
		emit_begin(&cg->e);
	for (int j = 0; j < n->nin; j++) {
		in[j] = cg->cname[n->in[j]->id];
		if (!cut)
			continue;
		in[j] = arena_printf(cg->a, "%s%d", L(P, LC_IN), j);
		emit(&cg->e, "cfrt_view %s = %s;\n", in[j], view_c(P, &p->view[1 + j]));
	}
	if (lse && cut) {
		lse = L(P, LC_LSE);
		emit(&cg->e, "cfrt_view %s = %s;\n", lse, view_c(P, &p->view[1 + n->nin]));
	}
	cg_op(cg, n, cg->cname[n->out->id], in, lse, p->qoff ? pe_c(P, &p->qstart) : NULL, 0);
	if (cut)
		emit_close(&cg->e, "");
}

/* ---- attention's gradients together ---- */

static int
is_attn_grad(const Node *n)
{
	return n->op == OP_ATTN_DQ || n->op == OP_ATTN_DK || n->op == OP_ATTN_DV;
}

/* Stage k as a plain attention gradient run alone on whole per-rank
 * tensors (plan_whole): its node, else NULL. */
static const Node *
whole_attn_grad(const Plan *plan, int k)
{
	const Node *n = plan_whole(plan, k);

	return n && is_attn_grad(n) ? n : NULL;
}

/* Where the bytes of v are: *off bytes into the workspace (0) or the
 * saved buffer (1: a saved tensor, or one the plan put there); -1: a
 * buffer of its own (an input, weight, output or gradient). */
static int
place_of(const Plan *plan, const Value *v, int64_t *off)
{
	if (v->home == HO_SAVED) {
		*off = v->soff;
		return 1;
	}
	*off = plan->off[v->id];
	return *off < 0 ? -1 : plan->in_saved[v->id];
}

/* Whether the bytes of values a and b overlap. */
static int
ws_overlap(const Plan *plan, const Value *a, const Value *b)
{
	int64_t oa, ob;
	int sa = place_of(plan, a, &oa), sb = place_of(plan, b, &ob);

	if (sa < 0 || sb < 0 || sa != sb)
		return a == b;
	return oa < ob + dtype_size[b->dtype] * value_rank_elems(b) &&
	       ob < oa + dtype_size[a->dtype] * value_rank_elems(a);
}

/* The attention gradients of the stages from k on that one call can make
 * (n[0..2]: dq, dk, dv, NULL where none): stage k's, and those of the
 * stages right after it (k + 1, k + 2) that are gradients of the same
 * attention (the same six operands, mask and query offset, the same
 * group), with none of the outputs in the workspace bytes of another
 * output or an operand. The call writes the later stages' outputs early:
 * no stage runs between, and the operands are read by every one of them,
 * so nothing else is live there that those bytes could hold. Returns how
 * many stages the call covers (1: stage k alone). */
static int
attn_grad_group(const Plan *plan, int k, const Node *n[3])
{
	const Node *a = whole_attn_grad(plan, k);
	int m = 1;

	n[0] = n[1] = n[2] = NULL;
	if (!a)
		return 0;
	n[a->op - OP_ATTN_DQ] = a;
	for (int j = k + 1; j < k + 3 && j < plan->s->stages.n; j++) {
		const Node *b = whole_attn_grad(plan, j);
		int ok = b && !n[b->op - OP_ATTN_DQ] && b->nin == a->nin &&
		         b->a.causal == a->a.causal && op_causal_shift(b) == op_causal_shift(a) &&
		         plan->group[j] == plan->group[k] &&
		         plan->plain[j]->qoff == plan->plain[k]->qoff &&
		         (!plan->plain[k]->qoff ||
		          !memcmp(&plan->plain[j]->qstart, &plan->plain[k]->qstart,
		                  sizeof plan->plain[k]->qstart));
		for (int i = 0; ok && i < a->nin; i++)
			ok = b->in[i] == a->in[i];
		for (int i = 0; ok && i < 3; i++)
			if (n[i])
				ok = !ws_overlap(plan, n[i]->out, b->out);
		for (int i = 0; ok && i < b->nin; i++)
			ok = !ws_overlap(plan, b->out, b->in[i]);
		if (!ok)
			break;
		n[b->op - OP_ATTN_DQ] = b;
		m++;
	}
	return m;
}

static void
emit_attn_grads(Par *P, const Node *const n[3], const PItem *p)
{
	Cg *cg = P->cg;
	const Node *a = n[0] ? n[0] : n[1] ? n[1] : n[2];
	const char *in[MAXIN], *out[3] = {NULL, NULL, NULL}, *what = "";

	for (int i = 0; i < 3; i++)
		if (n[i]) {
			emit_line(&cg->e, n[i]->loc);
			cg_comment(cg, n[i]);
			out[i] = cg->cname[n[i]->out->id];
			what = arena_printf(cg->a, "%s%s%s", what, *what ? ", " : "", cg_node_str(cg, n[i]));
		}
	emit(&cg->e, "/* one call for the %s */\n", n[0] && n[1] && n[2] ? "three" : "two");
	emit(&cg->e, "cfrt_where(%s, \"%s\", 0);\n", L(P, LC_CTX), a->out->name);
	cg_what(cg, what, NULL);
	for (int j = 0; j < a->nin; j++)
		in[j] = cg->cname[a->in[j]->id];
	cg_attn_grads(cg, n, out, in, p->qoff ? pe_c(P, &p->qstart) : NULL);
}

/* ---- the joint calls (plan_joint): the RMS norm's backward with its
 * gain's rows (cfrt_rmsnorm_grad_rows: xhat never written), a GEMM and
 * the add of its product (cfrt_matmul_add: the product never written;
 * cuBLASLt adds the addend as its C, the sum may be in the addend's
 * place), a head split and the rope of its heads or a rope's gradient
 * and the head merge (cfrt_rope through a head view). The plan keeps
 * each call's operands live through its stages, and the verifier proves
 * that layout: the call's results share no bytes with what it reads. ---- */

/* The head of one call for m nodes n[0..m) that the code generator makes
 * together: each node's line and comment, that unmade (the value between
 * them) is not made, and the call's place (at's result) for the trace. */
static void
emit_joint(Par *P, const Node *const *n, int m, const Node *unmade, const Node *at)
{
	Cg *cg = P->cg;
	const char *what = "";

	for (int i = 0; i < m; i++) {
		emit_line(&cg->e, n[i]->loc);
		cg_comment(cg, n[i]);
		what = arena_printf(cg->a, "%s%s%s", what, *what ? ", " : "", cg_node_str(cg, n[i]));
	}
	emit(&cg->e, "/* one call for the %s: %s is not made */\n", m == 2 ? "two" : "three",
	     unmade->out->name);
	emit(&cg->e, "cfrt_where(%s, \"%s\", 0);\n", L(P, LC_CTX), at->out->name);
	cg_what(cg, what, NULL);
}

static void
emit_rms_grad(Par *P, const Node *const n[3])
{
	Cg *cg = P->cg;
	const char *in[MAXIN];

	emit_joint(P, n, 3, n[1], n[0]);
	for (int j = 0; j < n[0]->nin; j++)
		in[j] = cg->cname[n[0]->in[j]->id];
	cg_rmsnorm_grad_rows(cg, n[0], cg->cname[n[0]->out->id], cg->cname[n[2]->out->id], in);
}

static void
emit_mm_add(Par *P, const Node *const n[2])
{
	Cg *cg = P->cg;
	const char *in[MAXIN];
	const Value *d = n[1]->in[0] == n[0]->out ? n[1]->in[1] : n[1]->in[0];

	emit_joint(P, n, 2, n[0], n[1]);
	for (int j = 0; j < n[0]->nin; j++)
		in[j] = cg->cname[n[0]->in[j]->id];
	cg_matmul_add(cg, n[0], cg->cname[n[1]->out->id], in, cg->cname[d->id]);
}

static void
emit_rope_heads(Par *P, const Node *const n[2], const PItem *rp)
{
	Cg *cg = P->cg;
	int split = n[0]->op == OP_SPLIT_HEADS;
	const Node *rope = split ? n[1] : n[0], *heads = split ? n[0] : n[1];

	emit_joint(P, n, 2, n[0], n[1]);
	cg_rope_heads(cg, rope, heads, cg->cname[n[1]->out->id], cg->cname[n[0]->in[0]->id],
	              rp->qoff ? pe_c(P, &rp->qstart) : NULL);
}

/* ---- the file ---- */

/* cf_mod and cf_partner where the plan's indexes use them. */
static void
helpers(Cg *cg, unsigned need)
{
	Emitter *e = &cg->e;

	if (need & PN_MOD || need & PN_PARTNER) {
		emit(e, "/* x mod n in [0, n). */\n");
		emit_func(e, "static inline int\ncf_mod(int x, int n)");
		emit(e, "int m = x %% n;\n\nreturn m < 0 ? m + n : m;\n");
		emit_close(e, "\n");
	}
	if (!(need & PN_PARTNER))
		return;
	emit(e, "/* The partner of r in round k of a round-robin tournament over n\n"
	        " * ranks (circle method), -1 when r sits the round out. */\n");
	emit_func(e, "static int\ncf_partner(int r, int k, int n)");
	emit(e, "if (n <= 1)\n\treturn -1;\n");
	emit_open(e, "if (n %% 2)");
	emit(e, "k = cf_mod(k, n);\n");
	emit(e, "return cf_mod(2 * r - k, n) == 0 ? -1 : cf_mod(k - r, n);\n");
	emit_close(e, "");
	emit(e, "int m = n - 1;\n\nk = cf_mod(k, m);\n");
	emit(e, "if (r == m)\n\treturn cf_mod(k * ((m + 1) / 2), m);\n");
	emit(e, "return cf_mod(2 * r - k, m) == 0 ? m : cf_mod(k - r, m);\n");
	emit_close(e, "\n");
}

/* The workspace layout as named offsets: every value that lives there,
 * every scratch buffer and staging area. */
static void
ws_defines(Cg *cg, Par *pars)
{
	const Plan *plan = cg->plan;
	const Graph *g = cg->g;
	Emitter *e = &cg->e;

	int insaved = 0;
	for (int i = 0; i < g->values.n; i++)
		insaved += plan->used[i] && plan->off[i] >= 0 && plan->in_saved[i];
	if (!plan->wsbytes && !insaved)
		return;
	emit(e, "/* The workspace (%lld bytes): where each tensor and scratch buffer\n"
	        " * lives, bytes from its start; tensors whose stages do not overlap\n"
	        " * share memory.%s */\n", (long long)plan->wsbytes, !insaved ? "" : g->fwd ?
	        " A tensor \"in saved\" lives that many bytes into the\n"
	        " * saved buffer instead, in saved tensors the pass has read." :
	        " A tensor \"in saved\" lives that many bytes into the\n"
	        " * saved buffer instead, in saved tensors the pass has not written yet.");
	for (int i = 0; i < g->values.n; i++)
		if (plan->used[i] && plan->off[i] >= 0)
			emit(e, "#define %s %lld /* %s%s */\n", cg_ws_name(cg, g->values.v[i]),
			     (long long)plan->off[i], ((Value *)g->values.v[i])->name,
			     plan->in_saved[i] ? ", in saved" : "");
	for (int k = 0; k < plan->s->colls.n; k++) {
		Par *P = &pars[k];
		for (int b = 0; b < P->c->bufs.n; b++)
			if (P->pc->off[b] >= 0)
				emit(e, "#define %s %lld\n", ws_temp(P, b), (long long)P->pc->off[b]);
		for (int lb = 0; lb < P->pc->nlab; lb++)
			for (int side = 0; side < 2; side++)
				if (P->pc->lab[lb].staged[side])
					emit(e, "#define %s %lld\n", ws_stage(P, lb, side),
					     (long long)P->pc->lab[lb].stage_off[side]);
	}
	emit(e, "\n");
}

/* Several groups: the context is checked against the model's grid, and
 * each group whose rank some stage uses has a local r_NAME; NULL with one
 * group (the stages use r). */
static const char **
group_ranks(Cg *cg)
{
	const Graph *g = cg->g;
	Emitter *e = &cg->e;
	const char *ctx = cg->loc[LC_CTX];

	if (g->groups.n <= 1)
		return NULL;
	const char **name = arena_alloc(cg->a, (size_t)g->groups.n * sizeof *name);
	emit(e, "CFRT_PROPAGATE(%s, cfrt_check_groups(%s, %d, (int[])%s));\n", ctx, ctx, g->groups.n,
	     cg_group_sizes(cg));
	for (int k = 0; k < g->groups.n; k++) {
		const Group *gr = g->groups.v[k];
		name[k] = cg_avoid(cg, arena_printf(cg->a, "r_%s", gr->name));
		if (cg->plan->rank_used[k])
			emit(e, "const int %s = cfrt_group_rank(%s, %d);\n", name[k], ctx, k);
	}
	emit(e, "\n");
	return name;
}

/* want, or want_2, want_3, ...: a macro name no other has. */
static const char *
ws_unique(Par *P, StrMap *taken, const char *want)
{
	const char *s = want;

	for (int k = 2; strmap_put(P->cg->a, taken, s, (void *)s); k++)
		s = arena_printf(P->cg->a, "%s_%d", want, k);
	return s;
}

/* The offset macros of a collective's scratch buffers and staging, named
 * after the collective too (scratch names repeat from stage to stage),
 * and after no tensor or other buffer. */
static void
ws_names(Par *P, StrMap *taken)
{
	Arena *a = P->cg->a;
	const char *stem = arena_printf(a, "%s_%s", P->cg->ws, P->cg->cname[P->c->node->out->id]);
	int nb = P->c->bufs.n;

	P->wsname = arena_alloc(a, (size_t)(nb + 2 * P->pc->nlab + 1) * sizeof *P->wsname);
	for (int b = 0; b < nb; b++) {
		const Buf *bf = P->c->bufs.v[b];
		if (P->pc->off[b] >= 0)
			P->wsname[b] = ws_unique(P, taken, arena_printf(a, "%s_%s_%d", stem,
			                                                P->temp[bf->set], b - bf->set));
	}
	for (int lb = 0; lb < P->pc->nlab; lb++)
		for (int side = 0; side < 2; side++)
			if (P->pc->lab[lb].staged[side])
				P->wsname[nb + 2 * lb + side] =
					ws_unique(P, taken, arena_printf(a, "%s_%s_%s", stem, P->lab[lb],
					                                 side ? "rstage" : "stage"));
}

/* The C names of one program's collectives: their labels and scratch. */
static Par *
name_colls(Cg *cg, const Plan *plan)
{
	const Sched *s = plan->s;
	Par *pars = arena_alloc(cg->a, (size_t)(s->colls.n + 1) * sizeof *pars);

	StrMap taken = {0}; /* offset macros, which share one namespace */

	for (int i = 0; i < cg->g->values.n; i++)
		strmap_put(cg->a, &taken, cg_ws_name(cg, cg->g->values.v[i]), cg->g->values.v[i]);
	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		if (st->kind != ST_COLL)
			continue;
		pars[ci] = (Par){.cg = cg, .plan = plan, .c = s->colls.v[ci], .pc = plan->coll[ci],
		                 .ci = ci, .k = "0", .all = pars};
		if (st->host1) /* run inside its host's round (emit_host) */
			pars[ci].iname = cg_avoid(cg, arena_printf(cg->a, "%s_i",
			                                           cg->cname[st->u.coll->node->out->id]));
		ci++;
	}
	for (int k = 0; k < s->colls.n; k++) {
		name_labels(&pars[k]);
		name_temps(&pars[k]);
		ws_names(&pars[k], &taken);
	}
	return pars;
}

/* The stages of one program, in order, and its return. */
static void
emit_stages(Cg *cg, const Plan *plan, Par *pars, const char **grank)
{
	const Sched *s = plan->s;
	Emitter *e = &cg->e;
	Par plain = {.cg = cg, .plan = plan, .k = "0"};

	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		const char *r = grank && plan->group[k] >= 0 ? grank[plan->group[k]] : NULL;
		if (((Stage *)s->stages.v[k])->host1) {
			ci += !plan->plain[k];
			continue; /* its host's program runs it (order.c) */
		}
		emit(e, "\n");
		if (plan->plain[k]) {
			const Node *ag[3];
			int m = attn_grad_group(plan, k, ag);
			plain.r = r;
			plain.grank = grank;
			if (m > 1) {
				emit_attn_grads(&plain, ag, plan->plain[k]);
				k += m - 1;
				continue;
			}
			int unmade;
			if ((m = plan_joint(plan, k, ag, &unmade))) {
				if (m == 3)
					emit_rms_grad(&plain, ag);
				else if (ag[0]->op == OP_MATMUL)
					emit_mm_add(&plain, ag);
				else
					emit_rope_heads(&plain, ag,
					                plan->plain[ag[0]->op == OP_SPLIT_HEADS ? k + 1 : k]);
				k += m - 1;
				continue;
			}
			emit_stage_node(&plain, ((Stage *)s->stages.v[k])->u.node, plan->plain[k]);
			continue;
		}
		pars[ci].r = r;
		pars[ci].grank = grank;
		pars[ci].group = plan->group[k];
		emit_stage_coll(&pars[ci++]);
	}
	emit_line_out(e);
	emit(e, "cfrt_where(%s, NULL, 0); /* out of the model */\n", cg->loc[LC_CTX]);
	if (grank)
		emit(e, "return cfrt_use_group(%s, 0);\n", cg->loc[LC_CTX]);
	else
		emit(e, "return CFRT_OK;\n");
	emit_close(e, "");
}

/* The body of a program after its signature: the rank, the argument
 * checks, the views, the stages. */
static void
emit_body(Cg *cg, const Plan *plan, Par *pars, const char *fn)
{
	Emitter *e = &cg->e;

	cg_check_args(cg, fn, plan->used, plan->wsbytes);
	if (plan->need & PN_R && cg->g->groups.n <= 1)
		emit(e, "const int %s = cfrt_rank(%s);\n\n", cg->loc[LC_R], cg->loc[LC_CTX]);
	const char **grank = group_ranks(cg);
	cg_views(cg, plan->used, plan->off);
	emit_stages(cg, plan, pars, grank);
}

/* The backward pass: NAME_backward and its workspace, after the forward
 * in the same file, printed from the backward graph's own plan. */
static void
emit_backward(Cg *fc, const Plan *bplan)
{
	Cg cg;
	const Graph *b = bplan->s->g;

	cg_init(&cg, fc->a, b, bplan, NULL, NULL, 0, 0);
	cg.e = fc->e;
	Par *pars = name_colls(&cg, bplan);
	Emitter *e = &cg.e;
	emit(e, "\n");
	ws_defines(&cg, pars);
	emit_func(e, "size_t\n%s_backward_workspace_bytes(void)", cg.prefix);
	emit(e, "return %lld;\n", (long long)bplan->wsbytes);
	emit_close(e, "\n");
	emit_func(e, "int\n%s_backward(cfrt_ctx *%s, const %s_weights *%s, const %s_io *%s,\n"
	          "    %svoid *%s, const %s_grads *%s, void *%s)", cg.prefix, cg.loc[LC_CTX],
	          cg.prefix, cg.loc[LC_W], cg.prefix, cg.loc[LC_IO], b->saved_ws ? "" : "const ",
	          cg.loc[LC_SAVED], cg.prefix, cg.loc[LC_GR], cg.loc[LC_WS]);
	emit_body(&cg, bplan, pars, arena_printf(cg.a, "%s_backward", cg.prefix));
	fc->e = cg.e;
}

void
cg_parallel(FILE *f, Arena *a, const Plan *plan, const Plan *bplan, const CgFiles *files)
{
	Cg cg;
	const Sched *s = plan->s;
	const Graph *g = s->g;

	cg_init(&cg, a, g, plan, f, files->src, files->src != NULL, 0);
	Par *pars = name_colls(&cg, plan);
	Emitter *e = &cg.e;
	e->out = files->self;
	emit(e, "/* Parallel %s pass of model %s, one rank of %s %lld.\n"
	        " * Generated by cfc %s from %s; do not edit. */\n",
	     bplan ? "forward and backward" : "forward", g->name,
	     g->groups.n > 1 ? "a grid of" : "a group of", cg_job_size(g), CF_VERSION, g->file);
	emit(e, "#include \"%s\"\n\n", files->header);
	cg_saved_defines(&cg);
	ws_defines(&cg, pars);
	emit_func(e, "size_t\n%s_workspace_bytes(void)", cg.prefix);
	emit(e, "return %lld;\n", (long long)plan->wsbytes);
	emit_close(e, "\n");
	helpers(&cg, plan->need | (bplan ? bplan->need : 0));
	cg_helpers(&cg);
	emit_func(e, "int\n%s_forward(cfrt_ctx *%s, const %s_weights *%s, const %s_io *%s,\n"
	          "    %s%s%svoid *%s)", cg.prefix, cg.loc[LC_CTX], cg.prefix, cg.loc[LC_W], cg.prefix,
	          cg.loc[LC_IO], bplan ? "void *" : "", bplan ? cg.loc[LC_SAVED] : "",
	          bplan ? ", " : "", cg.loc[LC_WS]);
	emit_body(&cg, plan, pars, arena_printf(a, "%s_forward", cg.prefix));
	if (bplan)
		emit_backward(&cg, bplan);
}
