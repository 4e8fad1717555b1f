/* gantt.c: the predicted timeline (--emit=gantt): every stage of the
 * forward, then of the backward, one after another on a time axis; per
 * rank a row of compute (waits in grey), a row of sends and a row of
 * receives (library collectives on the send row), each bar titled with
 * what it is and its times, as SVG.
 * requires: a lowered, verified schedule and a profile.
 * ensures: well-formed SVG; at most MAXROWS ranks drawn, the title says
 * when more exist; a stage the profile cannot price is named in the
 * title, drawn with no width. */
#include <math.h>
#include <string.h>

#include "codegen.h"

enum { MAXROWS = 16, ROWH = 14, LABELW = 120, PLOTW = 1100, TOP = 46 };

typedef struct Gt {
	FILE *f;
	Arena *a;
	const Profile *pf;
	Vec spans;     /* PSpan* of every stage, in seconds from the start */
	double t;      /* the start of the next stage */
	int ranks;     /* rows of ranks drawn */
	int nranks;    /* ranks of the widest group */
	const char *unpriced; /* a stage the profile could not price */
	int stage;     /* stages so far, for the alternating colours */
} Gt;

static void
xml(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

static void
gt_add(Gt *G, int rank, int queue, double t0, double t1, const char *what)
{
	PSpan *s = arena_alloc(G->a, sizeof *s);

	*s = (PSpan){rank, queue, G->t + t0, G->t + t1, what};
	vec_push(G->a, &G->spans, s);
}

static void
gt_sched(Gt *G, const Sched *s, const char *pass)
{
	for (int k = 0; k < s->stages.n; k++) {
		const Stage *st = s->stages.v[k];
		Prediction pr;
		const char *name;
		int n;
		if (st->host1)
			continue; /* in its host's spans (order.c) */
		if (st->kind == ST_COMPUTE) {
			pr = predict_node(G->a, st->u.node, G->pf);
			name = arena_printf(G->a, "%s%s = %s", pass, st->u.node->out->name,
			                    op_info[st->u.node->op].name);
			n = G->nranks;
			for (int r = 0; r < n && !pr.err; r++)
				gt_add(G, r, 0, 0, pr.total, name);
		} else {
			const Coll *c = st->u.coll;
			pr = predict_coll(G->a, s->g, c, G->pf, 1);
			name = arena_printf(G->a, "%s%s %s (%s)", pass, op_info[c->node->op].name,
			                    c->node->out->name, sched_kind_str(G->a, &c->how));
			for (int j = 0; j < pr.nspan; j++) {
				const PSpan *p = &pr.span[j];
				gt_add(G, p->rank, p->queue, p->t0, p->t1,
				       arena_printf(G->a, "%s: %s", name, p->what));
			}
		}
		if (pr.err && !G->unpriced)
			G->unpriced = arena_printf(G->a, "%s: %s", name, pr.err);
		G->t += pr.err ? 0 : pr.total;
		G->stage++;
	}
}

static int
gt_ranks(const Sched *s)
{
	int n = 1;

	for (int k = 0; s && k < s->colls.n; k++) {
		const Coll *c = s->colls.v[k];
		if (c->N > n)
			n = c->N;
	}
	return n;
}

static const char *
gt_colour(const PSpan *p)
{
	static const char *const colour[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#c8c8c8"};

	return colour[p->queue];
}

/* The row of a span within its rank's three. */
static int
gt_row(const PSpan *p)
{
	return p->queue == 3 ? 1 : p->queue == 4 ? 0 : p->queue;
}

void
gantt_svg(FILE *f, Arena *a, const Sched *s, const Sched *bwd, const Profile *pf)
{
	Gt G = {.f = f, .a = a, .pf = pf};
	int rb = gt_ranks(bwd);

	G.nranks = gt_ranks(s);
	if (rb > G.nranks)
		G.nranks = rb;
	G.ranks = G.nranks < MAXROWS ? G.nranks : MAXROWS;
	gt_sched(&G, s, "");
	double fwd = G.t;
	if (bwd)
		gt_sched(&G, bwd, "backward ");
	double total = G.t > 0 ? G.t : 1e-9;
	int rows = 3 * G.ranks, h = TOP + rows * ROWH + 40, w = LABELW + PLOTW + 20;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n", w, h, w, h);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
	fputs("<text x=\"8\" y=\"16\" font-size=\"13\">", f);
	xml(f, arena_printf(a, "%s: predicted on %s (%s, %s): forward %.3f ms%s", s->g->name,
	                    pf->name, pf->backend, pf->transfer ? pf->transfer : "-", fwd * 1e3,
	                    bwd ? arena_printf(a, ", backward %.3f ms", (G.t - fwd) * 1e3) : ""));
	fputs("</text>\n<text x=\"8\" y=\"32\" fill=\"#555\">", f);
	xml(f, arena_printf(a, "compute (blue; grey: waiting), sends (orange; purple: library "
	                    "collectives), receives (green)%s%s",
	                    G.nranks > G.ranks ? arena_printf(a, "; ranks 0..%d of %d", G.ranks - 1,
	                                                      G.nranks) : "",
	                    G.unpriced ? arena_printf(a, "; not priced: %s", G.unpriced) : ""));
	fputs("</text>\n", f);
	for (int r = 0; r < G.ranks; r++)
		for (int q = 0; q < 3; q++) {
			int y = TOP + (3 * r + q) * ROWH;
			fprintf(f, "<text x=\"8\" y=\"%d\">rank %d %s</text>\n", y + ROWH - 3, r,
			        q == 0 ? "compute" : q == 1 ? "send" : "recv");
			if (q == 0)
				fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n",
				        LABELW, y, LABELW + PLOTW, y);
		}
	for (int k = 0; k < G.spans.n; k++) {
		const PSpan *p = G.spans.v[k];
		if (p->rank >= G.ranks)
			continue;
		double x0 = LABELW + PLOTW * p->t0 / total, x1 = LABELW + PLOTW * p->t1 / total;
		int y = TOP + (3 * p->rank + gt_row(p)) * ROWH;
		fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
		        "stroke=\"white\" stroke-width=\"0.3\"><title>", x0, y + 1,
		        fmax(x1 - x0, 0.3), ROWH - 2, gt_colour(p));
		xml(f, arena_printf(a, "%s: %.4f .. %.4f ms", p->what, p->t0 * 1e3, p->t1 * 1e3));
		fputs("</title></rect>\n", f);
	}
	/* the time axis: about ten ticks at round numbers of ms */
	int y = TOP + rows * ROWH + 4;
	double ms = total * 1e3, step = pow(10, floor(log10(ms / 10)));
	if (ms / step > 25)
		step *= 5;
	else if (ms / step > 12)
		step *= 2;
	fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LABELW, y,
	        LABELW + PLOTW, y);
	for (double t = 0; t <= ms * 1.0001; t += step) {
		double x = LABELW + PLOTW * t / ms;
		fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>"
		        "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, y, x, y + 4,
		        x, y + 16, t);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">ms</text>\n", LABELW + PLOTW,
	        y + 30);
	fputs("</svg>\n", f);
}
