/* sched_dot.c: the schedule as graphviz DOT (--emit=sched-dot): one
 * swimlane (cluster) per rank, one row per step, compute boxes labelled
 * with their slices and dashed message edges from the step that sends to
 * the step that waits for the data (the paper's Figures 6 and 7); with a
 * backward pass, its stages follow the forward's, its collectives headed
 * "backward".
 * requires: a lowered schedule that verifies (the messages come from
 * verify_messages). ensures: deterministic DOT text whose size does not
 * grow with the group or the depth of a repeat stack: a lane per distinct
 * rank program (sched_lanes.c: ranks alike up to rotation share one,
 * named "ranks 0-3 (rotations)"), up to MAXLANES of them, else FEWLANES
 * ranks drawn (the graph's label says which); a collective of more than
 * MAXSTEPS steps drawn as its first HEADSTEPS and last TAILSTEPS, a row
 * between saying how many are not drawn; of two or more like instances
 * of a layer in a row (repeat), the first drawn and one row "x L" naming
 * the others. */
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* lanes: every distinct rank program up to MAXLANES, else the first
 * FEWLANES ranks (a round-robin's pattern shows on four; the layout's
 * time grows with the boxes) */
enum { MAXLANES = 8, FEWLANES = 4, MAXSTEPS = 16, HEADSTEPS = 6, TAILSTEPS = 1 };

typedef struct Dot {
	FILE *f;
	Arena *a;
	const DotLanes *L; /* the lanes: which rank each draws */
	int lanes;   /* L->n */
	int row;     /* rows emitted so far */
	const char *pass; /* "backward " in the backward's stages, else "" */
	int grid;    /* several groups: a collective's head names its group */
} Dot;

static void
dot_quote(FILE *f, const char *s)
{
	fputc('"', f);
	dot_escape(f, s);
	fputc('"', f);
}

/* A node of rank r in the current row. */
static void
dot_box(Dot *D, int r, const char *label, const char *style)
{
	fprintf(D->f, "  n%d_%d [label=", r, D->row);
	dot_quote(D->f, label);
	fprintf(D->f, "%s%s];\n", *style ? ", " : "", style);
}

/* Closes a row: its nodes on one level. */
static void
dot_row_end(Dot *D)
{
	fprintf(D->f, "  { rank=same;");
	for (int r = 0; r < D->lanes; r++)
		fprintf(D->f, " n%d_%d;", r, D->row);
	fprintf(D->f, " }\n");
	D->row++;
}

static int
dot_posts_coll(const Phase *ph, int t)
{
	for (int k = 0; k < ph->lanes[t].n; k++)
		if (((Item *)ph->lanes[t].v[k])->kind == IT_COLL)
			return 1;
	return 0;
}

/* A step with no compute and no transfer: what it does ("wait", "zero,
 * wait", or for the chunks of slice(k) "wait reduce_scatter chunk 2"), or
 * "idle". */
static const char *
dot_idle(const Dot *D, const Coll *c, const Phase *ph, int r, int i, int t)
{
	static const char *const word[] = {[IT_ADD] = "add", [IT_COPY] = "copy", [IT_ZERO] = "zero",
	                                   [IT_WAIT] = "wait"};
	const char *out = NULL;

	for (int k = 0; k < ph->lanes[t].n; k++) {
		const Item *it = ph->lanes[t].v[k];
		if (!sched_guard(&it->g, r, i, c->N) || !word[it->kind] ||
		    (out && strstr(out, word[it->kind])))
			continue;
		if (it->kind == IT_WAIT && c->how.kind == SK_SLICE)
			return arena_printf(D->a, "wait %s chunk %d", op_info[c->node->op].name,
			                    sched_ix(&it->u.wait.round, r, i));
		out = out ? arena_printf(D->a, "%s, %s", out, word[it->kind]) : word[it->kind];
	}
	return out ? out : "idle";
}

static void
dot_step(Dot *D, const Coll *c, int p, int i, int t, int step)
{
	const Phase *ph = c->phases.v[p];

	for (int k = 0; k < D->lanes; k++) {
		int r = D->L->rank[k];
		const char *l = r < c->N ? sched_step_label(D->a, c, r, p, i, t, "\n") : NULL;
		if (r >= c->N)
			dot_box(D, k, "", "style=invis");
		else if (!l)
			dot_box(D, k, arena_printf(D->a, "step %d: %s", step, dot_idle(D, c, ph, r, i, t)),
			        "fillcolor=\"#f2f2f2\", fontcolor=\"#777777\"");
		else
			dot_box(D, k, arena_printf(D->a, "step %d\n%s", step, l), dot_posts_coll(ph, t) ?
			        "fillcolor=\"#fde2c4\"" : "");
	}
	dot_row_end(D);
}

/* A row of text across every lane: what is not drawn there. */
static void
dot_note_row(Dot *D, const char *text)
{
	for (int r = 0; r < D->lanes; r++)
		dot_box(D, r, text, "shape=plaintext, style=\"\", fontname=\"Helvetica-Oblique\", "
		        "fontcolor=\"#555555\"");
	dot_row_end(D);
}

/* The steps of c drawn: all of them, or (more than MAXSTEPS) the first
 * HEADSTEPS and the last TAILSTEPS. */
static int
dot_drawn(int step, int nsteps)
{
	return nsteps <= MAXSTEPS || step < HEADSTEPS || step >= nsteps - TAILSTEPS;
}

/* The row of a drawn step, the first at row first (one more past the
 * row that stands for the steps not drawn). */
static int
dot_step_row(int step, int nsteps, int first)
{
	return first + step + (nsteps > MAXSTEPS && step >= HEADSTEPS ?
	                       HEADSTEPS + 1 - (nsteps - TAILSTEPS) : 0);
}

static void
dot_messages(Dot *D, const Coll *c, int first, int nsteps)
{
	VerifyMsg *m;
	int n;

	if (dot_lane_messages(D->a, D->L, c, &m, &n))
		fprintf(D->f, "  // %s does not verify: no messages drawn\n", c->node->out->name);
	for (int k = 0; k < n; k++) {
		/* from the sender's lane at its step: its own, or its lane rank's (turned) */
		int s = D->L->lane[m[k].src], d = D->L->lane[m[k].dst];
		if (s < 0 || d < 0 || !dot_drawn(m[k].sstep, nsteps) || !dot_drawn(m[k].dstep, nsteps))
			continue;
		fprintf(D->f, "  n%d_%d -> n%d_%d [style=dashed, color=\"#c0392b\", "
		        "fontcolor=\"#c0392b\", constraint=false, label=\"%s\"];\n", s,
		        dot_step_row(m[k].sstep, nsteps, first), d,
		        dot_step_row(m[k].dstep, nsteps, first), D->L->rank[s] == m[k].src ?
		        arena_printf(D->a, "%d", m[k].slice) :
		        arena_printf(D->a, "%d from %d", m[k].slice, m[k].src));
	}
}

static int
dot_nsteps(const Coll *c)
{
	int n = 0;

	for (int p = 0; p < c->phases.n; p++)
		n += ((Phase *)c->phases.v[p])->nrounds * ((Phase *)c->phases.v[p])->nlanes;
	return n;
}

/* host: the collective whose round runs c whole (order.c), or NULL */
static void
dot_coll(Dot *D, const Coll *c, const Coll *host)
{
	const char *head = arena_printf(D->a, "%s%s %s%s: %s%s", D->pass, op_info[c->node->op].name,
	                                c->node->out->name, D->grid ? arena_printf(D->a, " over %s",
	                                c->node->a.coll.group->name) : "",
	                                sched_kind_str(D->a, &c->how), host ?
	                                arena_printf(D->a, " (run whole in a round of %s, its "
	                                             "transfers in flight)", host->node->out->name) :
	                                "");
	int step = 0, first, nsteps = dot_nsteps(c);

	for (int r = 0; r < D->lanes; r++)
		dot_box(D, r, head, "shape=plaintext, style=\"\", fontname=\"Helvetica-Bold\"");
	dot_row_end(D);
	first = D->row;
	for (int p = 0; p < c->phases.n; p++) {
		const Phase *ph = c->phases.v[p];
		for (int i = 0; i < ph->nrounds; i++)
			for (int t = 0; t < ph->nlanes; t++, step++) {
				if (dot_drawn(step, nsteps))
					dot_step(D, c, p, i, t, step);
				else if (step == HEADSTEPS)
					dot_note_row(D, arena_printf(D->a, "steps %d to %d: %d more like "
					             "these, not drawn", HEADSTEPS, nsteps - TAILSTEPS - 1,
					             nsteps - TAILSTEPS - HEADSTEPS));
			}
	}
	dot_messages(D, c, first, nsteps);
}

static void
dot_compute(Dot *D, const Node *n)
{
	const char *l = arena_printf(D->a, "%s = %s", sched_results(D->a, n, "*"),
	                             graph_node_str(D->a, n));

	for (int r = 0; r < D->lanes; r++)
		dot_box(D, r, l, "fillcolor=\"#e6f4ea\"");
	dot_row_end(D);
}

/* Every rank's lane: its nodes top to bottom, held in order; the lanes
 * left to right by rank: an invisible spine points at their first nodes
 * in rank order, which ordering=out keeps (else the crossing reduction
 * moves lanes to shorten the message edges of bidir and pairwise). */
static void
dot_lanes(Dot *D)
{
	fprintf(D->f, "  spine [style=invis, shape=point];\n");
	for (int r = 0; D->row && r < D->lanes; r++)
		fprintf(D->f, "  spine -> n%d_0 [style=invis];\n", r);
	for (int r = 0; r < D->lanes; r++) {
		fprintf(D->f, "  subgraph cluster_rank%d {\n    label=", r);
		dot_quote(D->f, D->L->name[r]);
		fprintf(D->f, "; style=rounded; color=\"#888888\";\n   ");
		for (int k = 0; k < D->row; k++)
			fprintf(D->f, " n%d_%d;", r, k);
		fprintf(D->f, "\n  }\n");
		for (int k = 0; k + 1 < D->row; k++)
			fprintf(D->f, "  n%d_%d -> n%d_%d [style=invis, weight=100];\n", r, k, r, k + 1);
	}
}

static const Node *
dot_node(const Stage *st)
{
	return st->kind == ST_COLL ? st->u.coll->node : st->u.node;
}

/* The length of the outermost layer instance of stage st's node
 * ("block2" of "block2.attn2"), 0 in the model itself. */
static size_t
dot_inst_len(const Stage *st)
{
	const char *l = dot_node(st)->layer;

	return l ? strcspn(l, ".") : 0;
}

/* The end of the run of stages from k in the same outermost instance. */
static int
dot_block_end(const Sched *s, int k)
{
	size_t n = dot_inst_len(s->stages.v[k]);
	const char *l = dot_node(s->stages.v[k])->layer;
	int e = k + 1;

	while (n && e < s->stages.n && dot_inst_len(s->stages.v[e]) == n &&
	       !strncmp(dot_node(s->stages.v[e])->layer, l, n))
		e++;
	return e;
}

/* Do stages a and b draw alike, up to the instance in their names? */
static int
dot_same_stage(Arena *a, const Stage *x, const Stage *y)
{
	const Node *n = dot_node(x), *m = dot_node(y);

	if (x->kind != y->kind || n->op != m->op || (n->lname != m->lname &&
	    (!n->lname || !m->lname || strcmp(n->lname, m->lname))))
		return 0;
	if (x->kind != ST_COLL)
		return 1;
	const Coll *c = x->u.coll, *d = y->u.coll;
	return c->N == d->N && dot_nsteps(c) == dot_nsteps(d) && c->region.n == d->region.n &&
	       !strcmp(sched_kind_str(a, &c->how), sched_kind_str(a, &d->how));
}

/* Are the instances [k, e) and [j, f) alike: the same layer (their
 * names differ in the count after it), stage by stage alike? */
static int
dot_same_block(Arena *a, const Sched *s, int k, int e, int j, int f)
{
	const char *x = dot_node(s->stages.v[k])->layer, *y = dot_node(s->stages.v[j])->layer;
	size_t n = dot_inst_len(s->stages.v[k]), m = dot_inst_len(s->stages.v[j]);

	while (n && x[n - 1] >= '0' && x[n - 1] <= '9')
		n--;
	while (m && y[m - 1] >= '0' && y[m - 1] <= '9')
		m--;
	if (!n || n != m || strncmp(x, y, n) || e - k != f - j)
		return 0;
	for (int i = 0; i < e - k; i++)
		if (!dot_same_stage(a, s->stages.v[k + i], s->stages.v[j + i]))
			return 0;
	return 1;
}

/* Are the runs [k, e) and [j, f) (dot_block_end's) alike: instances
 * alike, or single stages of the model itself alike? */
static int
dot_same_run(Arena *a, const Sched *s, int k, int e, int j, int f)
{
	if (!dot_inst_len(s->stages.v[k]) && !dot_inst_len(s->stages.v[j]))
		return e - k == 1 && f - j == 1 && dot_same_stage(a, s->stages.v[k], s->stages.v[j]);
	return dot_same_block(a, s, k, e, j, f);
}

/* The longest repetition from stage k of a unit of p runs (2 <= p <=
 * DOT_PERIOD): the runs of a whole pass ordered as one (order.c) that
 * interleave several instances, such as the norm gains' gradients of two
 * blocks each and their coalesced all_reduce. Returns how many more units
 * follow the first alike (0: none), the end of the first in *e1 and of
 * the last in *end. */
#define DOT_PERIOD 12
static int
dot_period(Arena *a, const Sched *s, int k, int *e1, int *end)
{
	int best = 0;

	for (int p = 2; p <= DOT_PERIOD; p++) {
		int r[DOT_PERIOD + 1], n = 0;
		r[0] = k;
		while (n < p && r[n] < s->stages.n) {
			r[n + 1] = dot_block_end(s, r[n]);
			n++;
		}
		if (n < p)
			break;
		int j = r[p], more = 0;
		for (;;) {
			int q = j, i = 0;
			for (; i < p && q < s->stages.n; i++) {
				int f = dot_block_end(s, q);
				if (!dot_same_run(a, s, r[i], r[i + 1], q, f))
					break;
				q = f;
			}
			if (i < p)
				break;
			more++;
			j = q;
		}
		if (more && (!best || j > *end))
			best = more, *e1 = r[p], *end = j;
	}
	return best;
}

static void
dot_stage(Dot *D, const Sched *s, const Stage *st)
{
	if (st->kind == ST_COLL)
		dot_coll(D, st->u.coll, st->host1 ? ((Stage *)s->stages.v[st->host1 - 1])->u.coll : NULL);
	else
		dot_compute(D, st->u.node);
}

/* Every stage, a run of two or more like instances of a layer drawn as
 * its first and a row that names the rest: "block0 x 48: block1 to
 * block47 like it, not drawn"; a repetition of several runs (dot_period)
 * likewise; past DOT_MAXROWS rows the rest of the pass as one row (the
 * whole-pass order interleaves the instances of a deep stack's tail
 * irregularly: their collectives host what comes after them). */
#define DOT_MAXROWS 200
static void
dot_stages(Dot *D, const Sched *s)
{
	int row0 = D->row;

	for (int k = 0; k < s->stages.n;) {
		if (D->row - row0 >= DOT_MAXROWS) {
			dot_note_row(D, arena_printf(D->a, "stages %d to %d: the %d left of this pass, not "
			                             "drawn (a pass is drawn to %d rows)", k + 1,
			                             s->stages.n, s->stages.n - k, DOT_MAXROWS));
			break;
		}
		int e = dot_block_end(s, k), j = e, f, more = 0;
		for (; j < s->stages.n && dot_same_block(D->a, s, k, e, j, f = dot_block_end(s, j));
		     j = f)
			more++;
		int e1 = 0, end = 0, units = more ? 0 : dot_period(D->a, s, k, &e1, &end);
		if (units) {
			for (int i = k; i < e1; i++)
				dot_stage(D, s, s->stages.v[i]);
			dot_note_row(D, arena_printf(D->a, "%d more like the %d stages above (stages %d to "
			                             "%d: %s to %s), not drawn", units, e1 - k, e1 + 1, end,
			                             dot_node(s->stages.v[e1])->out->name,
			                             dot_node(s->stages.v[end - 1])->out->name));
			k = end;
			continue;
		}
		for (int i = k; i < e; i++)
			dot_stage(D, s, s->stages.v[i]);
		if (!more) {
			k = e;
			continue;
		}
		const Stage *last = s->stages.v[j - 1];
		size_t n = dot_inst_len(s->stages.v[e]), m = dot_inst_len(last);
		int f0 = (int)dot_inst_len(s->stages.v[k]);
		const char *first = dot_node(s->stages.v[k])->layer;
		dot_note_row(D, more == 1 ?
		             arena_printf(D->a, "%.*s x 2: %.*s like it, not drawn", f0, first, (int)n,
		                          dot_node(s->stages.v[e])->layer) :
		             arena_printf(D->a, "%.*s x %d: %.*s to %.*s like it, not drawn", f0, first,
		                          more + 1, (int)n, dot_node(s->stages.v[e])->layer, (int)m,
		                          dot_node(last)->layer));
		k = j;
	}
}

/* The legend: what each kind of box and arrow is, in a box of its own
 * beside the lanes (the colours are dot_step's, dot_compute's and
 * dot_messages'). */
static void
dot_legend(FILE *f)
{
	fprintf(f, "  subgraph cluster_legend {\n    label=\"legend\"; style=rounded; "
	        "color=\"#888888\";\n"
	        "    legend [shape=plaintext, style=\"\", fontsize=9, label=<"
	        "<table border=\"0\" cellspacing=\"3\" cellpadding=\"3\">"
	        "<tr><td align=\"left\"><b>bold</b></td><td align=\"left\">a collective and "
	        "the schedule it runs under</td></tr>"
	        "<tr><td bgcolor=\"#e8f0fe\">step k</td><td align=\"left\">a step of it on "
	        "this rank: the compute on a slice, the sends and receives posted, the waits"
	        "</td></tr>"
	        "<tr><td bgcolor=\"#fde2c4\">step k</td><td align=\"left\">a step that calls "
	        "the library's collective (vanilla, slice(k))</td></tr>"
	        "<tr><td bgcolor=\"#f2f2f2\"><font color=\"#777777\">step k</font></td>"
	        "<td align=\"left\">a step with nothing for this rank to do</td></tr>"
	        "<tr><td bgcolor=\"#e6f4ea\">y = op(x)</td><td align=\"left\">compute outside "
	        "every collective (every rank)</td></tr>"
	        "<tr><td><font color=\"#c0392b\">- - - n &gt;</font></td><td align=\"left\">a "
	        "message from a send to its receive; n: the slice it carries</td></tr>"
	        "<tr><td><font color=\"#c0392b\">- - - n from r &gt;</font></td><td align=\"left\">"
	        "a message from rank r, drawn from the same step of r's lane (r runs it turned)"
	        "</td></tr>"
	        "<tr><td align=\"left\">ranks 0-3</td><td align=\"left\">a lane for ranks whose "
	        "programs are alike: the same up to the turn r -&gt; r + d (rotations), or item by "
	        "item (alike); drawn as its first rank</td></tr>"
	        "<tr><td align=\"left\">time</td><td align=\"left\">runs down each lane, one "
	        "lane a rank program (--emit=gantt: a timeline with a time axis)</td></tr>"
	        "</table>>];\n  }\n");
}

void
sched_dot(FILE *f, const Sched *s, const Sched *bwd)
{
	const DotLanes *L = dot_lanes_new(s->arena, s, bwd, MAXLANES, FEWLANES);
	int nranks = L->nranks; /* the largest group */
	Dot D = {.f = f, .a = s->arena, .L = L, .lanes = L->n, .grid = s->g->groups.n > 1};
	const char *more = L->folded ? arena_printf(D.a, " (%d lane%s: ranks whose programs are alike "
	                                            "up to rotation share one)", L->n,
	                                            L->n == 1 ? "" : "s") :
	                   nranks > D.lanes ? arena_printf(D.a, " (ranks 0..%d of %d shown)",
	                                                   D.lanes - 1, nranks) : "";
	fprintf(f, "digraph schedule {\n  graph [newrank=true, ordering=out, rankdir=TB, labelloc=t, "
	        "fontname=\"Helvetica\", nodesep=0.25, ranksep=0.3, label=");
	dot_quote(f, arena_printf(D.a, "%s: %sschedule on %d ranks%s", s->g->name,
	                          bwd ? "forward and backward " : "", nranks, more));
	fprintf(f, "];\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#e8f0fe\", "
	        "fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n");
	D.pass = "";
	dot_stages(&D, s);
	D.pass = "backward ";
	if (bwd)
		dot_stages(&D, bwd);
	dot_lanes(&D);
	dot_legend(f);
	fprintf(f, "}\n");
}
