/* cg_par.c: --emit=c, the parallel forward pass of one rank, from the
 * verified schedule. Plain stages become one runtime call on whole per-rank
 * tensors; a lowered collective becomes its step loop: for each phase a
 * loop over rounds i, the lanes unrolled inside, each item guarded by its
 * rounds and index expressions spelt in r and i, as sched.h describes.
 * A library collective is handed its tensors in place where their blocks
 * already lie in the library's order; only the other sides go through
 * staging in the workspace.
 * requires: a schedule that verify_sched accepted.
 * ensures: C that compiles warning-free with -std=c11 -Wall -Wextra -Werror
 * against cfrt.h; every transfer posted is waited before its stage ends;
 * the same schedule always gives the same text. */
#include <stdlib.h>
#include <string.h>

#include "cgen.h"
#include "sched.h"

/* What the code needs to know about one transfer label of a collective. */
typedef struct Label {
	int used;
	int slots;   /* rounds in flight at once: requests rotate over them */
	/* Staging has two parts: part 0 is what is sent (a point-to-point
	 * transfer's only part, whichever way it goes), part 1 what a
	 * collective receives. A part is reserved only when some item of the
	 * label goes through it; a collective's side that is one contiguous
	 * region in the library's block order uses its tensor in place. */
	int staged[2];
	int unpack;  /* some receive of this label is unpacked at its wait */
	int coll;    /* posted by an IT_COLL item */
	int blocking; /* only blocking collectives: no requests to keep */
	int usebase; /* the unpack at the wait needs the chunk's base slice */
	const Item *collitem;
	int64_t stage_elems[2]; /* staging elements of one slot, by part */
	int64_t stage_off[2];   /* workspace offset of slot 0, by part */
} Label;

typedef struct Par {
	Cg *cg;
	const Coll *c;
	Label *lab;
	int nlab;
	int64_t tmp_off;   /* workspace where the collectives' scratch starts */
	int64_t tmp_end;   /* the end of this collective's scratch */
	int inblock;       /* the item's guard already opened a block */
	int64_t *buf_off;  /* BK_TEMP offsets of this collective, by buffer */
	int step0;         /* step number of the current phase's round 0 */
} Par;

/* ---- index expressions ---- */

/* Appends "+ k*name" to buf, spelt as a person would. */
static size_t
term(char *buf, size_t n, size_t cap, int k, const char *name)
{
	if (!k)
		return n;
	const char *sign = k < 0 ? (n ? " - " : "-") : (n ? " + " : "");
	int m = k < 0 ? -k : k;
	if (!*name)
		return n + (size_t)snprintf(buf + n, cap - n, "%s%d", sign, m);
	if (m == 1)
		return n + (size_t)snprintf(buf + n, cap - n, "%s%s", sign, name);
	return n + (size_t)snprintf(buf + n, cap - n, "%s%d * %s", sign, m, name);
}

static const char *
ix_c(Arena *a, const Ix *x)
{
	char buf[128] = "";
	size_t n = 0;

	if (x->kind == IX_PARTNER) {
		n = term(buf, n, sizeof buf, x->b, "i");
		n = term(buf, n, sizeof buf, x->c, "");
		return arena_printf(a, "cf_partner(r, %s, %d)", n ? buf : "0", x->n);
	}
	n = term(buf, n, sizeof buf, x->a, "r");
	n = term(buf, n, sizeof buf, x->b, "i");
	n = term(buf, n, sizeof buf, x->c, "");
	if (!n)
		return "0";
	/* r itself, and constants in range, need no mod */
	if (x->n == 0 || (x->a == 1 && !x->b && !x->c) ||
	    (!x->a && !x->b && x->c >= 0 && x->c < x->n))
		return arena_strdup(a, buf);
	return arena_printf(a, "cf_mod(%s, %d)", buf, x->n);
}

/* The slice index of element u (a C expression) of sel. */
static const char *
sel_c(Arena *a, const Sel *s, const char *u)
{
	const char *lo = ix_c(a, &s->lo), *hi = ix_c(a, &s->hi);
	const char *base = lo;
	if (s->per && strcmp(hi, "0")) {
		hi = s->per == 1 ? hi : arena_printf(a, "(%s) * %d", hi, s->per);
		base = strcmp(lo, "0") ? arena_printf(a, "%s + %s", hi, lo) : hi;
	}
	if (s->cnt == 1 || !u)
		return base;
	return arena_printf(a, "%s + %s * %d", base, u, s->stride);
}

/* ---- buffers ---- */

static const Buf *
buf_of(const Coll *c, int b)
{
	return c->bufs.v[b];
}

/* Extent of one slice of buffer b along its dim. */
static int64_t
slice_ext(const Par *P, const Buf *b)
{
	int64_t ext = value_rank_extent(b->v, b->dim);
	return b->kind == BK_TEMP ? ext / P->c->nslices : ext / b->nslots;
}

/* The buffer a ref names: "cb[base + rot]". */
static const char *
ref_buf(Par *P, const BufRef *r)
{
	Arena *a = P->cg->a;
	const char *rot = ix_c(a, &r->rot);

	if (!strcmp(rot, "0"))
		return arena_printf(a, "cb[%d]", r->buf);
	return arena_printf(a, "cb[%d + %s]", r->buf, rot);
}

/* A C expression of the view of cnt slices from slice expression s. */
static const char *
ref_view(Par *P, const BufRef *r, const char *s, int cnt)
{
	Arena *a = P->cg->a;
	const Buf *b = buf_of(P->c, r->buf);
	const char *v = ref_buf(P, r);
	int64_t se = slice_ext(P, b);

	if (b->kind == BK_VALUE) {
		const char *slot = b->own ? arena_printf(a, "(%s) - r * %d", s, b->nslots) : s;
		if (cnt < b->nslots)
			v = arena_printf(a, "cfrt_view_slice(%s, %d, (%s) * %lld, %lld)", v, b->dim,
			                 slot, (long long)se, (long long)se * cnt);
	}
	if (b->nparts > 1) {
		int64_t pe = value_rank_extent(b->v, b->pdim) / b->nparts;
		v = arena_printf(a, "cfrt_view_slice(%s, %d, (%s) * %lld, %lld)", v, b->pdim,
		                 ix_c(a, &r->part), (long long)pe, (long long)pe);
	}
	return v;
}

/* Whether cnt slices of buffer b (one part when parted) are one
 * contiguous block: every dim before the outermost one the view cuts has
 * extent 1. All the slots of a value cut nothing along its dim. */
static int
ref_contig(const Par *P, const BufRef *r, int cnt)
{
	const Buf *b = buf_of(P->c, r->buf);
	int first = b->dim;

	if (b->kind == BK_TEMP && b->nparts <= 1)
		return 1; /* a scratch buffer holds exactly one slice */
	if (b->kind == BK_VALUE && cnt >= b->nslots)
		first = b->v->ndim; /* the whole value along dim */
	if (b->nparts > 1 && b->pdim < first)
		first = b->pdim;
	if (first == b->v->ndim)
		return 1; /* nothing cut: the whole value, itself contiguous */
	for (int d = 0; d < first; d++)
		if (value_rank_extent(b->v, d) != 1)
			return 0;
	if (b->nparts > 1 && b->dim > b->pdim && cnt < b->nslots)
		return 0;
	return 1;
}

/* Elements of cnt slices of the buffer a ref names (one part of it). */
static int64_t
ref_elems(const Par *P, const BufRef *r, int cnt)
{
	const Buf *b = buf_of(P->c, r->buf);
	return b->kind == BK_TEMP ? b->elems : b->slot_elems * cnt;
}

/* ---- library collectives: their tensors in place, or staging ---- */

/* A collective's chunk as a reference to the buffer of one side. */
static BufRef
coll_ref(const Item *it, int recv)
{
	BufRef br = {recv ? it->u.coll.dst : it->u.coll.src, {IX_AFFINE, 0, 0, 0, 0},
	             it->u.coll.sel, {IX_AFFINE, 0, 0, 0, 0}};
	return br;
}

/* Whether one side of a collective (recv: what it receives, else what
 * it sends) is a single block: this rank's slice of an all_gather's input
 * or of a reduce_scatter's result, or an all_reduce's chunk. */
static int
coll_one_block(const Item *it, int recv)
{
	int op = it->u.coll.op;
	return op == OP_ALL_REDUCE || it->u.coll.sel.cnt == 1 ||
	       (op == OP_ALL_GATHER && !recv) || (op == OP_REDUCE_SCATTER && recv);
}

/* Elements one side of a collective moves: one block, or N of them. */
static int64_t
coll_side_elems(const Par *P, const Item *it, int recv)
{
	const Buf *b = buf_of(P->c, recv ? it->u.coll.dst : it->u.coll.src);
	return b->slot_elems * (coll_one_block(it, recv) ? 1 : it->u.coll.sel.cnt);
}

/* Whether a side of a collective can be the tensor itself: the library
 * wants block u (rank u's) at u * count, so the side's blocks must make
 * one contiguous region in that order. Only a value's storage qualifies:
 * it stays put until the wait, and the verifier proved nothing touches a
 * slot of it while a collective reads or writes that slot (scratch may
 * rotate, so it is staged). send and recv are then different tensors:
 * they never overlap, as cfrt.h requires. */
static int
coll_direct(const Par *P, const Item *it, int recv)
{
	BufRef br = coll_ref(it, recv);
	const Buf *b = buf_of(P->c, br.buf);
	const Sel *sel = &it->u.coll.sel;

	if (b->kind != BK_VALUE)
		return 0;
	if (coll_one_block(it, recv))
		return ref_contig(P, &br, 1);
	if (it->u.coll.op == OP_ALL_TO_ALL && recv)
		/* block u is part u of this rank's slot: in place when the
		 * slot is the whole buffer and each part is contiguous, so
		 * the parts follow each other */
		return b->nparts == sel->cnt && b->nslots == 1 && ref_contig(P, &br, 1);
	/* blocks are slices base + u * stride: consecutive slices, each
	 * contiguous, follow each other in memory */
	return !b->own && b->nparts <= 1 && sel->stride == 1 && ref_contig(P, &br, 1);
}

/* The view a direct side of a collective hands the library, its chunk
 * having base slice expression `base`. */
static const char *
coll_view(Par *P, const Item *it, const char *base, int recv)
{
	BufRef br = coll_ref(it, recv);
	int op = it->u.coll.op, cnt = it->u.coll.sel.cnt;
	int mine = recv ? op == OP_REDUCE_SCATTER || op == OP_ALL_TO_ALL : op == OP_ALL_GATHER;

	if (op == OP_ALL_TO_ALL && recv && cnt > 1)
		return ref_buf(P, &br); /* every part of the only slot */
	if (mine)
		return ref_view(P, &br, arena_printf(P->cg->a, "(%s) + r * %d", base,
		                                     it->u.coll.sel.stride), 1);
	return ref_view(P, &br, base, cnt);
}

/* ---- labels: how many rounds of one label are in flight at once ---- */

/* Notes that part `part` of label's staging holds elems per slot, or
 * (staged 0) that the item needs none there. */
static void
lab_note(Par *P, int label, const Item *it, int part, int staged, int64_t elems)
{
	Label *l = &P->lab[label];

	l->used = 1;
	l->unpack |= staged && it->kind == IT_RECV;
	if (it->kind == IT_COLL) {
		l->coll = 1;
		l->collitem = it;
		l->blocking = it->u.coll.blocking;
	}
	if (!staged)
		return;
	l->staged[part] = 1;
	if (elems > l->stage_elems[part])
		l->stage_elems[part] = elems;
}

/* Bytes of one slot of part `part` of label l's staging: the layout's
 * stride and the addressing's alike. */
static int64_t
slot_bytes(const Par *P, const Label *l, int part)
{
	return cg_align(l->stage_elems[part] * dtype_size[P->c->node->in[0]->dtype]);
}

/* The label of a transfer or wait item, its round in *round; -1 for any
 * other item. */
static int
item_label(const Item *it, const Ix **round)
{
	switch (it->kind) {
	case IT_SEND:
	case IT_RECV: *round = &it->u.xfer.round; return it->u.xfer.label;
	case IT_COLL: *round = &it->u.coll.round; return it->u.coll.label;
	case IT_WAIT: *round = &it->u.wait.round; return it->u.wait.label;
	default: return -1;
	}
}

/* Item it of rank r in round i: a post marks its round in its label's
 * row of posted and widens the label's window back to the oldest round
 * still posted; a wait clears its round. */
static void
lab_track(Par *P, char *posted, int maxround, const Item *it, int r, int i)
{
	const Ix *x;
	int lb = item_label(it, &x);

	if (lb < 0)
		return;
	char *row = posted + lb * maxround;
	int rd = sched_ix(x, r, i);
	if (it->kind == IT_WAIT) {
		if (rd >= 0 && rd < maxround)
			row[rd] = 0;
		return;
	}
	if (rd < 0 || rd >= maxround)
		die("codegen: round %d of label %d out of range", rd, lb);
	row[rd] = 1;
	int first = 0;
	while (!row[first])
		first++; /* rd at the latest */
	if (rd - first + 1 > P->lab[lb].slots)
		P->lab[lb].slots = rd - first + 1;
}

/* Simulates every rank: the rounds of one label posted and not yet
 * waited always fit in a window of `slots` consecutive rounds. */
static void
lab_windows(Par *P)
{
	const Coll *c = P->c;
	char *posted = NULL;
	int maxround = 1;

	for (int k = 0; k < c->phases.n; k++)
		maxround += ((Phase *)c->phases.v[k])->nrounds + 3;
	posted = calloc((size_t)P->nlab * (size_t)maxround, 1);
	for (int r = 0; r < c->N; r++) {
		memset(posted, 0, (size_t)P->nlab * (size_t)maxround);
		for (int k = 0; k < c->phases.n; k++) {
			const Phase *ph = c->phases.v[k];
			for (int i = 0; i < ph->nrounds; i++)
				for (int t = 0; t < ph->nlanes; t++)
					for (int j = 0; j < ph->lanes[t].n; j++) {
						const Item *it = ph->lanes[t].v[j];
						if (sched_guard(&it->g, r, i, c->N))
							lab_track(P, posted, maxround, it, r, i);
					}
		}
	}
	for (int lb = 0; lb < P->nlab; lb++)
		if (P->lab[lb].slots < 1)
			P->lab[lb].slots = 1;
	free(posted);
}

static void emit_coll_blocks(Par *P, const Item *it, const char *base, int unpack);

/* Whether unpacking a collective's chunk depends on which chunk it was:
 * a dry emission tells. */
static int
unpack_uses_base(Par *P, const Label *l)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	Emitter real = P->cg->e;

	emit_init(&P->cg->e, m, NULL, NULL);
	emit_coll_blocks(P, l->collitem, "CHUNK_BASE", 1);
	fclose(m);
	P->cg->e = real;
	int uses = strstr(text, "CHUNK_BASE") != NULL;
	free(text);
	return uses;
}

/* Finds the labels, their staging needs, the scratch layout, and which
 * waits unpack by their chunk's base. */
static void
par_plan(Par *P)
{
	const Coll *c = P->c;
	int dt = dtype_size[c->node->in[0]->dtype];

	P->nlab = 0;
	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++) {
				const Ix *x;
				int lb = item_label(ph->lanes[t].v[j], &x);
				if (lb >= P->nlab)
					P->nlab = lb + 1;
			}
	}
	P->lab = arena_alloc(P->cg->a, (size_t)(P->nlab + 1) * sizeof *P->lab);
	for (int k = 0; k < c->phases.n; k++) {
		const Phase *ph = c->phases.v[k];
		for (int t = 0; t < ph->nlanes; t++)
			for (int j = 0; j < ph->lanes[t].n; j++) {
				const Item *it = ph->lanes[t].v[j];
				if (it->kind == IT_SEND || it->kind == IT_RECV)
					lab_note(P, it->u.xfer.label, it, 0, !ref_contig(P, &it->u.xfer.buf, 1),
					         ref_elems(P, &it->u.xfer.buf, 1));
				else if (it->kind == IT_COLL)
					for (int part = 0; part < 2; part++)
						lab_note(P, it->u.coll.label, it, part, !coll_direct(P, it, part),
						         coll_side_elems(P, it, part));
			}
	}
	lab_windows(P);
	int64_t off = P->tmp_off;
	P->buf_off = arena_alloc(P->cg->a, (size_t)(c->bufs.n + 1) * sizeof *P->buf_off);
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		if (bf->kind == BK_TEMP) {
			P->buf_off[b] = off;
			off += cg_align(bf->elems * dt);
		}
	}
	for (int lb = 0; lb < P->nlab; lb++) {
		Label *l = &P->lab[lb];
		for (int part = 0; part < 2; part++) {
			if (!l->staged[part])
				continue;
			l->stage_off[part] = off;
			off += slot_bytes(P, l, part) * l->slots;
		}
	}
	P->tmp_end = off;
	for (int lb = 0; lb < P->nlab; lb++) {
		Label *l = &P->lab[lb];
		l->usebase = l->used && !l->blocking && l->coll && l->staged[1] &&
		             unpack_uses_base(P, l);
	}
}

/* ---- emission ---- */

/* An item's locals live in a block: the guard's, or one of its own. */
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

static void
emit_bufs(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;

	emit(&cg->e, "cfrt_view cb[%d]; /* the stage's buffers */\n", c->bufs.n);
	for (int b = 0; b < c->bufs.n; b++) {
		const Buf *bf = c->bufs.v[b];
		if (bf->kind == BK_VALUE) {
			emit(&cg->e, "cb[%d] = %s; /* %s%s */\n", b, cg->cname[bf->v->id], bf->name,
			     bf->own ? ", this rank's slices" : "");
			continue;
		}
		emit(&cg->e, "cb[%d] = cfrt_view_contig((char *)ws + %lld, %s, %d, (int64_t[]){",
		     b, (long long)P->buf_off[b], cg_dtype(bf->v->dtype), bf->v->ndim);
		for (int d = 0; d < bf->v->ndim; d++)
			emit(&cg->e, "%s%lld", d ? ", " : "", (long long)(d == bf->dim ?
			     slice_ext(P, bf) : value_rank_extent(bf->v, d)));
		emit(&cg->e, "}); /* %s: one slice of %s */\n", bf->name, bf->v->name);
	}
}

static void
emit_labels(Par *P)
{
	Emitter *e = &P->cg->e;

	for (int lb = 0; lb < P->nlab; lb++) {
		const Label *l = &P->lab[lb];
		if (!l->used || l->blocking)
			continue;
		emit(e, "cfrt_req rq%d[%d];\nint rd%d[%d];\n", lb, l->slots, lb, l->slots);
		if (l->unpack)
			emit(e, "cfrt_view up%d[%d];\nint upon%d[%d];\n", lb, l->slots, lb, l->slots);
		if (l->usebase)
			emit(e, "int cbase%d[%d];\n", lb, l->slots);
		emit_open(e, "for (int k = 0; k < %d; k++)", l->slots);
		emit(e, "rq%d[k] = (cfrt_req){0, 0};\nrd%d[k] = -1;\n", lb, lb);
		if (l->unpack)
			emit(e, "upon%d[k] = 0;\nup%d[k] = cb[0];\n", lb, lb);
		if (l->usebase)
			emit(e, "cbase%d[k] = 0;\n", lb);
		emit_close(e, "");
	}
}

/* The staging view of slot k (a C expression) of label lb, shaped like
 * the view named shape (contiguous); part 0 is what is sent (or the only
 * part), part 1 what a collective receives; block: the u-th block of
 * `elems` elements inside the slot, or NULL. */
static const char *
stage_view(Par *P, int lb, const char *k, int part, const char *shape, const char *block,
           int64_t elems)
{
	const Label *l = &P->lab[lb];
	int dt = dtype_size[P->c->node->in[0]->dtype];
	int64_t slot = slot_bytes(P, l, part);
	const char *at = arena_printf(P->cg->a, "(char *)ws + %lld + (%s) * %lld%s",
	                              (long long)l->stage_off[part], k,
	                              (long long)slot, block ? arena_printf(P->cg->a,
	                              " + (%s) * %lld", block, (long long)(elems * dt)) : "");
	return arena_printf(P->cg->a, "cfrt_view_contig(%s, %s, %s.nd, %s.dim)", at,
	                    cg_dtype(P->c->node->in[0]->dtype), shape, shape);
}

static void
emit_guard_open(Par *P, const Phase *ph, const Guard *g)
{
	Emitter *e = &P->cg->e;
	char cond[256] = "";
	size_t n = 0;

	if (g->lo == g->hi && ph->nrounds > 1)
		n += (size_t)snprintf(cond, sizeof cond, "i == %d", g->lo);
	else {
		if (g->lo > 0)
			n += (size_t)snprintf(cond + n, sizeof cond - n, "i >= %d", g->lo);
		if (g->hi < ph->nrounds - 1)
			n += (size_t)snprintf(cond + n, sizeof cond - n, "%si <= %d", n ? " && " : "", g->hi);
	}
	if (g->active)
		n += (size_t)snprintf(cond + n, sizeof cond - n, "%scf_partner(r, i + %d, N) >= 0",
		                      n ? " && " : "", g->aoff);
	emit_open(e, "if (%s)", n ? cond : "1");
}

static int
guard_trivial(const Phase *ph, const Guard *g)
{
	return !g->active && g->lo <= 0 && g->hi >= ph->nrounds - 1;
}

/* One region node on the slices of sel (looping when they are apart). */
static void
emit_compute(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	Arena *a = cg->a;
	const Coll *c = P->c;
	const RNode *rn = c->region.v[it->u.comp.rn];
	const Node *n = rn->node;
	const Sel *sel = &it->u.comp.sel;
	int loop = sel->cnt > 1 && sel->stride != 1, cnt = loop ? 1 : sel->cnt;
	const char *in[MAXIN], *s;

	cg_comment(cg, n);
	if (loop)
		emit_open(&cg->e, "for (int u = 0; u < %d; u++)", sel->cnt);
	s = sel_c(a, sel, loop ? "u" : NULL);
	const char *ov = ref_view(P, &it->u.comp.dst, "s", cnt), *iv[MAXIN];
	int need_s = cg_mentions(ov, "s");
	for (int j = 0; j < n->nin; j++) {
		const char *v;
		if (rn->inbuf[j] >= 0) {
			BufRef br = {rn->inbuf[j], {IX_AFFINE, 0, 0, 0, 0}, *sel, {IX_AFFINE, 0, 0, 0, 0}};
			v = rn->idim[j] < 0 ? ref_buf(P, &br) : ref_view(P, &br, "s", cnt);
		} else {
			const Value *x = n->in[j];
			int64_t se = value_rank_extent(x, rn->idim[j] < 0 ? 0 : rn->idim[j]) / c->nslices;
			v = rn->idim[j] < 0 ? cg->cname[x->id] :
			    arena_printf(a, "cfrt_view_slice(%s, %d, s * %lld, %lld)", cg->cname[x->id],
			                 rn->idim[j], (long long)se, (long long)se * cnt);
		}
		iv[j] = v;
		need_s |= cg_mentions(v, "s");
		in[j] = arena_printf(a, "in%d", j);
	}
	const char *qoff = NULL;
	if (n->op == OP_ATTENTION && rn->idim[0] >= 0 && n->a.causal)
		qoff = arena_printf(a, "s * %lld", (long long)(value_rank_extent(n->in[0], rn->idim[0]) /
		                                              c->nslices));
	need_s |= qoff != NULL;
	if (!loop)
		item_begin(P);
	if (need_s)
		emit(&cg->e, "int s = %s; /* slice */\n", s);
	emit(&cg->e, "cfrt_view o = %s;\n", ov);
	for (int j = 0; j < n->nin; j++)
		emit(&cg->e, "cfrt_view in%d = %s;\n", j, iv[j]);
	cg_op(cg, n, "o", in, qoff, it->u.comp.beta);
	if (loop)
		emit_close(&cg->e, "");
	else
		item_end(P);
}

static void
emit_move(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	const char *s = sel_c(cg->a, &it->u.move.dst.sel, NULL);
	const char *d = ref_view(P, &it->u.move.dst, "s", it->u.move.dst.sel.cnt);

	const char *sv = it->kind == IT_ZERO ? "" :
	                 ref_view(P, &it->u.move.src, "s", it->u.move.src.sel.cnt);

	item_begin(P);
	if (cg_mentions(d, "s") || cg_mentions(sv, "s"))
		emit(&cg->e, "int s = %s; /* slice */\n", s);
	emit(&cg->e, "cfrt_view dst = %s;\n", d);
	if (it->kind == IT_ZERO) {
		emit(&cg->e, "CFRT_TRY(ctx, cfrt_scale(ctx, &dst, &dst, 0.0));\n");
	} else {
		emit(&cg->e, "cfrt_view src = %s;\n", sv);
		if (it->kind == IT_ADD)
			emit(&cg->e, "CFRT_TRY(ctx, cfrt_add(ctx, &dst, &dst, &src));\n");
		else
			emit(&cg->e, "CFRT_TRY(ctx, cfrt_copy(ctx, &dst, &src));\n");
	}
	item_end(P);
}

static void
emit_xfer(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	Arena *a = cg->a;
	const Label *l = &P->lab[it->u.xfer.label];
	int lb = it->u.xfer.label, send = it->kind == IT_SEND;
	int contig = ref_contig(P, &it->u.xfer.buf, 1);
	int64_t n = ref_elems(P, &it->u.xfer.buf, 1);
	const char *dt = cg_dtype(buf_of(P->c, it->u.xfer.buf.buf)->v->dtype);

	const char *bv = ref_view(P, &it->u.xfer.buf, "s", 1);

	item_begin(P);
	if (cg_mentions(bv, "s"))
		emit(&cg->e, "int s = %s; /* slice */\n", sel_c(a, &it->u.xfer.buf.sel, NULL));
	emit(&cg->e, "int peer = %s, rd = %s, k = cf_mod(rd, %d);\n", ix_c(a, &it->u.xfer.peer),
	     ix_c(a, &it->u.xfer.round), l->slots);
	emit(&cg->e, "cfrt_view b = %s;\n", bv);
	if (!contig) {
		emit(&cg->e, "cfrt_view st = %s;\n", stage_view(P, lb, "k", 0, "b", NULL, n));
		if (send)
			emit(&cg->e, "CFRT_TRY(ctx, cfrt_copy(ctx, &st, &b)); /* pack */\n");
		else
			emit(&cg->e, "up%d[k] = b;\nupon%d[k] = 1;\n", lb, lb);
	} else if (l->unpack && !send) {
		emit(&cg->e, "upon%d[k] = 0;\n", lb);
	}
	emit(&cg->e, "rd%d[k] = rd;\n", lb);
	emit(&cg->e, "CFRT_TRY(ctx, cfrt_%s(ctx, %s.p, %lld, %s, peer, %d, &rq%d[k]));\n",
	     send ? "isend" : "irecv", contig ? "b" : "st", (long long)n, dt, it->u.xfer.tag, lb);
	item_end(P);
}

/* Copies view expression blk into staging slot k (pack), or out of it
 * (unpack: part 1); block: "u" for the u-th block of elems elements in
 * the slot, or NULL. */
static void
stage_copy(Par *P, int lb, const char *blk, const char *block, int64_t elems, int unpack)
{
	Emitter *e = &P->cg->e;

	emit(e, "cfrt_view blk = %s;\n", blk);
	emit(e, "cfrt_view st = %s;\n", stage_view(P, lb, "k", unpack, "blk", block, elems));
	emit(e, "CFRT_TRY(ctx, cfrt_copy(ctx, %s));\n", unpack ? "&blk, &st" : "&st, &blk");
}

/* Packs (send) or unpacks (receive) the N blocks of a collective's chunk
 * with base slice expression `base` through staging slot k. */
static void
emit_coll_blocks(Par *P, const Item *it, const char *base, int unpack)
{
	Cg *cg = P->cg;
	Arena *a = cg->a;
	const Coll *c = P->c;
	int op = it->u.coll.op, lb = it->u.coll.label;
	const Buf *src = buf_of(c, it->u.coll.src), *dst = buf_of(c, it->u.coll.dst);
	const Sel *sel = &it->u.coll.sel;
	int64_t se = (unpack ? dst : src)->slot_elems;
	BufRef side = coll_ref(it, unpack);
	const char *stride = arena_printf(a, "%d", sel->stride);
	int gather_in = op == OP_ALL_GATHER && !unpack, scatter_out = op == OP_REDUCE_SCATTER && unpack;

	if (op == OP_ALL_REDUCE || gather_in || scatter_out) {
		/* one block: the chunk (all_reduce), or this rank's slice */
		const char *s = op == OP_ALL_REDUCE ? base : arena_printf(a, "(%s) + r * %s", base, stride);
		stage_copy(P, lb, ref_view(P, &side, s, 1), NULL, se, unpack);
		return;
	}
	emit_open(&cg->e, "for (int u = 0; u < N; u++)");
	const char *blk;
	if (op == OP_ALL_TO_ALL && unpack) {
		/* rank u's block: part u of this rank's slot of the chunk */
		int64_t pe = value_rank_extent(dst->v, dst->pdim) / dst->nparts;
		blk = arena_printf(a, "cfrt_view_slice(cb[%d], %d, u * %lld, %lld)", it->u.coll.dst,
		                   dst->pdim, (long long)pe, (long long)pe);
		if (dst->nslots > 1) {
			int64_t de = value_rank_extent(dst->v, dst->dim) / dst->nslots;
			blk = arena_printf(a, "cfrt_view_slice(%s, %d, ((%s) + r * %s - r * %d) * %lld, %lld)",
			                   blk, dst->dim, base, stride, dst->nslots, (long long)de,
			                   (long long)de);
		}
	} else {
		blk = ref_view(P, &side, arena_printf(a, "(%s) + u * %s", base, stride), 1);
	}
	stage_copy(P, lb, blk, "u", se, unpack);
	emit_close(&cg->e, "");
}

/* Declares sst (what the collective sends) or rst (recv: where it
 * receives): the tensor itself when its blocks already lie in the
 * library's order, else staging slot k, packed here when it is sent. */
static void
emit_coll_side(Par *P, const Item *it, const char *base, int recv)
{
	Cg *cg = P->cg;
	const Label *l = &P->lab[it->u.coll.label];
	const char *name = recv ? "rst" : "sst", *why;
	const char *bn = buf_of(P->c, coll_ref(it, recv).buf)->name;
	int one = coll_one_block(it, recv), stride = it->u.coll.sel.stride;

	if (!l->staged[recv]) {
		emit(&cg->e, "void *%s = %s.p; /* %s's %s contiguous: %s in place */\n", name,
		     coll_view(P, it, base, recv), bn, one ? "block is" : "blocks are",
		     recv ? "received" : "sent");
		return;
	}
	if (one)
		why = "block is not contiguous";
	else if (stride > 1 && !(it->u.coll.op == OP_ALL_TO_ALL && recv))
		why = arena_printf(cg->a, "blocks are %d slices apart", stride);
	else
		why = "blocks are not one contiguous run in rank order";
	emit(&cg->e, "/* %s's %s: %s */\n", bn, why,
	     !recv ? "packed into staging" : it->u.coll.blocking ?
	     "received in staging, unpacked after the call" :
	     "received in staging, unpacked at the wait");
	if (!recv)
		emit_coll_blocks(P, it, base, 0);
	emit(&cg->e, "void *%s = (char *)ws + %lld + k * %lld;\n", name,
	     (long long)l->stage_off[recv], (long long)slot_bytes(P, l, recv));
}

static void
emit_coll(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	Arena *a = cg->a;
	const Coll *c = P->c;
	int lb = it->u.coll.label, op = it->u.coll.op, blocking = it->u.coll.blocking;
	const Label *l = &P->lab[lb];
	const Buf *src = buf_of(c, it->u.coll.src);
	int64_t cnt = src->slot_elems; /* elements of one rank's block */
	const char *dt = cg_dtype(c->node->in[0]->dtype);
	const char *base = sel_c(a, &it->u.coll.sel, NULL);

	/* the runtime's collectives bear the ops' names: cfrt_[i]all_gather, ... */
	item_begin(P);
	if (!blocking)
		emit(&cg->e, "int rd = %s, k = cf_mod(rd, %d);\n", ix_c(a, &it->u.coll.round), l->slots);
	else if (l->staged[0] || l->staged[1])
		emit(&cg->e, "const int k = 0;\n");
	emit_coll_side(P, it, base, 0);
	emit_coll_side(P, it, base, 1);
	if (blocking) {
		emit(&cg->e, "CFRT_TRY(ctx, cfrt_%s(ctx, sst, rst, %lld, %s));\n", op_info[op].name,
		     (long long)cnt, dt);
		if (l->staged[1])
			emit_coll_blocks(P, it, base, 1);
	} else {
		emit(&cg->e, "rd%d[k] = rd;\n", lb);
		if (l->usebase)
			emit(&cg->e, "cbase%d[k] = %s;\n", lb, base);
		emit(&cg->e, "CFRT_TRY(ctx, cfrt_i%s(ctx, sst, rst, %lld, %s, &rq%d[k]));\n",
		     op_info[op].name, (long long)cnt, dt, lb);
	}
	item_end(P);
}

static void
emit_wait(Par *P, const Item *it)
{
	Cg *cg = P->cg;
	int lb = it->u.wait.label;
	const Label *l = &P->lab[lb];

	item_begin(P);
	emit(&cg->e, "int rd = %s, k = cf_mod(rd, %d);\n", ix_c(cg->a, &it->u.wait.round), l->slots);
	emit_open(&cg->e, "if (rd%d[k] == rd)", lb);
	emit(&cg->e, "CFRT_TRY(ctx, cfrt_wait(ctx, &rq%d[k]));\nrd%d[k] = -1;\n", lb, lb);
	if (l->coll && l->staged[1]) {
		const char *base = l->usebase ? arena_printf(cg->a, "cbase%d[k]", lb) : "0";
		emit_coll_blocks(P, l->collitem, base, 1);
	} else if (l->unpack) {
		emit_open(&cg->e, "if (upon%d[k])", lb);
		emit(&cg->e, "cfrt_view st = %s;\n", stage_view(P, lb, "k", 0, arena_printf(cg->a,
		     "up%d[k]", lb), NULL, l->stage_elems[0]));
		emit(&cg->e, "CFRT_TRY(ctx, cfrt_copy(ctx, &up%d[k], &st)); /* unpack */\n", lb);
		emit_close(&cg->e, "");
	}
	emit_close(&cg->e, "");
	item_end(P);
}

static void
emit_item(Par *P, const Phase *ph, const Item *it)
{
	int g = !guard_trivial(ph, &it->g);

	if (g)
		emit_guard_open(P, ph, &it->g);
	P->inblock = g;
	switch (it->kind) {
	case IT_COMPUTE: emit_compute(P, it); break;
	case IT_ADD: case IT_COPY: case IT_ZERO: emit_move(P, it); break;
	case IT_SEND: case IT_RECV: emit_xfer(P, it); break;
	case IT_COLL: emit_coll(P, it); break;
	case IT_WAIT: emit_wait(P, it); break;
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

	emit(e, "/* %s: %d round%s x %d lane%s */\n", ph->name, ph->nrounds,
	     ph->nrounds == 1 ? "" : "s", ph->nlanes, ph->nlanes == 1 ? "" : "s");
	emit_open(e, "for (int i = 0; i < %d; i++)", ph->nrounds);
	if (P->step0)
		emit(e, "cfrt_where(ctx, \"%s\", %d + i);\n", P->c->node->out->name, P->step0);
	else
		emit(e, "cfrt_where(ctx, \"%s\", i);\n", P->c->node->out->name);
	for (int t = 0; t < ph->nlanes; t++) {
		const Vec *items = &ph->lanes[t];
		if (ph->nlanes > 1)
			emit(e, "/* lane %d */\n", t);
		for (int j = 0; j < items->n; j++) {
			/* the sends and receives of one step are issued as a group */
			int x = is_p2p(items->v[j]), first = x && (j == 0 || !is_p2p(items->v[j - 1]));
			int last = x && (j == items->n - 1 || !is_p2p(items->v[j + 1]));
			if (first)
				emit(e, "CFRT_TRY(ctx, cfrt_group_begin(ctx));\n");
			emit_item(P, ph, items->v[j]);
			if (last)
				emit(e, "CFRT_TRY(ctx, cfrt_group_end(ctx));\n");
		}
	}
	emit_close(e, "");
	P->step0 += ph->nrounds;
}

static void
emit_stage_coll(Par *P)
{
	Cg *cg = P->cg;
	const Coll *c = P->c;
	const Node *n = c->node;

	emit_line(&cg->e, n->loc);
	emit(&cg->e, "/* %s = %s(%s) over %s: %s */\n", n->out->name, op_info[n->op].name,
	     n->in[0]->name, n->a.coll.group->name, sched_kind_str(cg->a, &c->how));
	emit_begin(&cg->e);
	emit_bufs(P);
	emit_labels(P);
	P->step0 = 0;
	for (int k = 0; k < c->phases.n; k++)
		emit_phase(P, c->phases.v[k]);
	emit_close(&cg->e, "");
}

/* ---- plain stages: one op on whole per-rank tensors ---- */

/* The view of input j of n as this rank uses it: a replicated operand of
 * an op whose result is split is cut to this rank's window. */
static const char *
plain_input(Cg *cg, const Node *n, int j)
{
	const Value *x = n->in[j], *o = n->out;
	const char *v = cg->cname[x->id];

	if (o->dist.kind != DI_SPLIT || x->dist.kind != DI_REPL)
		return v;
	int d = o->dist.dim, xd = n->inmap[j][d];
	if (op_info[n->op].cls == CL_EW && xd < 0) {
		xd = d - (o->ndim - x->ndim);
		if (xd < 0 || x->shape[xd] != o->shape[d])
			return v; /* broadcast along d */
	}
	if (xd < 0)
		return v;
	int64_t le = value_rank_extent(o, d);
	return arena_printf(cg->a, "cfrt_view_slice(%s, %d, r * %lld, %lld)", v, xd,
	                    (long long)le, (long long)le);
}

static void
emit_stage_node(Cg *cg, const Node *n)
{
	const char *in[MAXIN];
	int slice = 0;

	emit_line(&cg->e, n->loc);
	cg_comment(cg, n);
	for (int j = 0; j < n->nin; j++) {
		in[j] = plain_input(cg, n, j);
		slice |= in[j] != cg->cname[n->in[j]->id];
	}
	if (slice) {
		emit_begin(&cg->e);
		for (int j = 0; j < n->nin; j++) {
			emit(&cg->e, "cfrt_view in%d = %s;\n", j, in[j]);
			in[j] = arena_printf(cg->a, "in%d", j);
		}
	}
	const char *qoff = NULL;
	const Value *q = n->in[0];
	if (n->op == OP_ATTENTION && q->dist.kind == DI_SPLIT && q->dist.dim == q->ndim - 2)
		qoff = arena_printf(cg->a, "r * %lld", (long long)value_rank_extent(q, q->ndim - 2));
	cg_op(cg, n, cg->cname[n->out->id], in, qoff, 0);
	if (slice)
		emit_close(&cg->e, "");
}

/* ---- the file ---- */

/* cf_mod where the stages use it (blocking collectives alone do not) or
 * cf_partner does, cf_partner where they use it (pairwise exchanges). */
static void
helpers(Cg *cg, int mod, int pair)
{
	Emitter *e = &cg->e;

	if (!mod && !pair)
		return;
	emit(e, "/* x mod n in [0, n). */\n");
	emit_func(e, "static inline int\ncf_mod(int x, int n)");
	emit(e, "int m = x %% n;\n\nreturn m < 0 ? m + n : m;\n");
	emit_close(e, "\n");
	if (!pair)
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

/* Values first, then the largest scratch any collective needs: the
 * collectives run one after the other, so their scratch is shared. */
static Par *
plan_all(Cg *cg, const Sched *s)
{
	Par *pars = arena_alloc(cg->a, (size_t)(s->colls.n + 1) * sizeof *pars);
	int64_t end = cg->wsbytes;

	for (int k = 0; k < s->colls.n; k++) {
		pars[k] = (Par){.cg = cg, .c = s->colls.v[k], .tmp_off = cg->wsbytes};
		par_plan(&pars[k]);
		if (pars[k].tmp_end > end)
			end = pars[k].tmp_end;
	}
	cg->wsbytes = end;
	return pars;
}

static void
stages(Cg *cg, const Sched *s, Par *pars)
{
	for (int k = 0, ci = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		emit(&cg->e, "\n");
		if (st->kind == ST_COMPUTE)
			emit_stage_node(cg, st->u.node);
		else
			emit_stage_coll(&pars[ci++]);
	}
}

void
cg_parallel(FILE *f, Arena *a, const Sched *s, const char *src, int lines)
{
	Cg cg;
	const Graph *g = s->g;

	cg_init(&cg, a, g, f, src, lines, 0);
	Emitter *e = &cg.e;
	e->out = arena_printf(a, "%s.c", g->name);
	emit(e, "/* Parallel forward pass of model %s, one rank of a group of %d.\n"
	        " * Generated by cfc %s from %s; do not edit. */\n", g->name,
	     g->groups.n ? ((Group *)g->groups.v[0])->size : 1, CF_VERSION, g->file);
	emit(e, "#include \"%s.h\"\n\n#define N %s_GROUP_SIZE\n\n", g->name, cg.upper);
	cg_layout(&cg);
	Par *pars = plan_all(&cg, s);
	/* a first pass finds what the stages use: only those helpers are
	 * defined, only those tensors get a view, and r and ws are declared
	 * or marked unused accordingly */
	char *body = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&body, &len);
	Emitter real = cg.e;
	emit_init(&cg.e, m, NULL, NULL);
	stages(&cg, s, pars);
	fclose(m);
	cg.e = real;
	emit_func(e, "size_t\n%s_workspace_bytes(void)", cg.prefix);
	emit(e, "return %lld;\n", (long long)cg.wsbytes);
	emit_close(e, "\n");
	helpers(&cg, cg_mentions(body, "cf_mod"), cg_mentions(body, "cf_partner"));
	cg_helpers(&cg);
	emit_func(e, "int\n%s_forward(cfrt_ctx *ctx, const %s_weights *w, const %s_io *io,\n"
	          "    void *ws)", cg.prefix, cg.prefix, cg.prefix);
	cg.used = arena_alloc(a, (size_t)g->values.n);
	int need_ws = cg_mentions(body, "ws");
	for (int i = 0; i < g->values.n; i++) {
		cg.used[i] = cg_mentions(body, cg.cname[i]);
		need_ws |= cg.used[i] && cg.off[i] >= 0;
	}
	if (cg_mentions(body, "r"))
		emit(e, "const int r = cfrt_rank(ctx);\n\n");
	free(body);
	if (!g->weights.n)
		emit(e, "(void)w;\n");
	if (!need_ws)
		emit(e, "(void)ws;\n");
	cg_views(&cg);
	stages(&cg, s, pars);
	emit_line_out(e);
	emit(e, "return CFRT_OK;\n");
	emit_close(e, "");
}
