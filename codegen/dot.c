/* dot.c: the dependency graph as graphviz DOT text.
 *
 * requires: a Graph from sema_build.
 * ensures: a valid digraph, the same text for the same graph: one node per
 * op (inputs and weights as ellipses, collectives as orange hexagons),
 * edges labelled with the tensors they carry, one cluster per layer
 * instance (nested as the instances are), a sink per output. */
#include <string.h>

#include "codegen.h"

void
dot_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static const char *
shape_of(Arena *a, const Value *v)
{
	const char *s = "[";

	for (int d = 0; d < v->ndim; d++)
		s = arena_printf(a, "%s%s%lld", s, d ? "," : "", (long long)v->shape[d]);
	return arena_printf(a, "%s]", s);
}

static void
dot_node(FILE *f, const Graph *g, const Node *n, const char *indent)
{
	Arena *a = g->arena;
	const Value *v = n->out;
	OpClass cl = op_info[n->op].cls;
	const char *label;

	if (cl == CL_LEAF)
		label = arena_printf(a, "%s\n%s %s\n%s", v->name, dtype_name[v->dtype],
		                     shape_of(a, v), dist_str(a, v));
	else
		label = arena_printf(a, "%s\n%s %s\n%s%s%s", op_info[n->op].name, v->name,
		                     shape_of(a, v), dist_str(a, v), cl == CL_COLL ? "\n" : "",
		                     cl == CL_COLL ? graph_sched_str(a, n->sched) : "");
	fprintf(f, "%sn%d [label=\"", indent, n->id);
	dot_escape(f, label);
	fputs("\"", f);
	if (n->op == OP_INPUT)
		fputs(", shape=ellipse", f);
	else if (n->op == OP_WEIGHT)
		fputs(", shape=ellipse, style=filled, fillcolor=\"#e8e8e8\"", f);
	else if (cl == CL_COLL)
		fputs(", shape=hexagon, style=filled, fillcolor=\"#fdb863\"", f);
	fputs("];\n", f);
}

/* Layer instances: paths "block0.attn1", a tree by their prefixes. Each
 * holds its nodes and its children as lists (first, next) in graph order. */
typedef struct Inst {
	const char *path;
	int parent;     /* index, or -1 */
	int node, last; /* first and last of its nodes (ids), or -1 */
	int child, sib; /* first child, next sibling, or -1 */
	int lastchild;
} Inst;

typedef struct Tree {
	Inst *in;
	int n;
	int *next; /* per node: the next node of its instance, or -1 */
} Tree;

static int
inst_find(const Tree *t, const char *path, size_t len)
{
	for (int i = t->n - 1; i >= 0; i--)
		if (strlen(t->in[i].path) == len && strncmp(t->in[i].path, path, len) == 0)
			return i;
	return -1;
}

/* The index of path[0:len], added (after its parents) when new. */
static int
inst_get(Arena *a, Tree *t, const char *path, size_t len)
{
	int i = inst_find(t, path, len), parent = -1;
	const char *dot = NULL;

	if (i >= 0)
		return i;
	for (size_t k = 0; k < len; k++)
		if (path[k] == '.')
			dot = path + k;
	if (dot)
		parent = inst_get(a, t, path, (size_t)(dot - path));
	i = t->n++;
	t->in[i] = (Inst){arena_strndup(a, path, len), parent, -1, -1, -1, -1, -1};
	if (parent >= 0) {
		Inst *p = &t->in[parent];
		if (p->lastchild >= 0)
			t->in[p->lastchild].sib = i;
		else
			p->child = i;
		p->lastchild = i;
	}
	return i;
}

static void
inst_add_node(Tree *t, int c, int id)
{
	Inst *in = &t->in[c];

	if (in->last >= 0)
		t->next[in->last] = id;
	else
		in->node = id;
	in->last = id;
}

static void
dot_cluster(FILE *f, const Graph *g, const Tree *t, int c, int depth)
{
	char indent[64];
	const Inst *in = &t->in[c];
	const char *last = strrchr(in->path, '.');
	int w = depth * 2 + 4 < 60 ? depth * 2 + 4 : 60;

	memset(indent, ' ', (size_t)w);
	indent[w] = 0;
	fprintf(f, "%.*ssubgraph cluster_%d {\n%slabel=\"", w - 2, indent, c, indent);
	dot_escape(f, last ? last + 1 : in->path);
	fprintf(f, "\";\n%sstyle=rounded;\n%scolor=\"#7f7f7f\";\n", indent, indent);
	for (int id = in->node; id >= 0; id = t->next[id])
		dot_node(f, g, g->nodes.v[id], indent);
	for (int k = in->child; k >= 0; k = t->in[k].sib)
		dot_cluster(f, g, t, k, depth + 1);
	fprintf(f, "%.*s}\n", w - 2, indent);
}

static void
dot_edges(FILE *f, const Graph *g)
{
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		for (int j = 0; j < n->nin; j++) {
			fprintf(f, "  n%d -> n%d [label=\"", n->in[j]->def->id, n->id);
			dot_escape(f, n->in[j]->name);
			fputs("\"];\n", f);
		}
	}
	for (int i = 0; i < g->outputs.n; i++) {
		const Value *v = g->outputs.v[i];
		fprintf(f, "  out%d [label=\"out ", i);
		dot_escape(f, v->name);
		fprintf(f, "\", shape=plaintext];\n  n%d -> out%d;\n", v->def->id, i);
	}
}

void
dot_graph(FILE *f, const Graph *g)
{
	Arena *a = g->arena;
	const char *prev = NULL;
	size_t depth = 1;
	int cur = -1;
	Tree t = {NULL, 0, arena_alloc(a, ((size_t)g->nodes.n + 1) * sizeof(int))};

	/* each node adds at most its path's depth of new instances */
	for (int i = 0; i < g->nodes.n; i++) {
		const char *p = ((const Node *)g->nodes.v[i])->layer;
		size_t k = 1;
		for (; p && *p; p++)
			k += *p == '.';
		if (k > depth)
			depth = k;
		t.next[i] = -1;
	}
	t.in = arena_alloc(a, ((size_t)g->nodes.n + 1) * depth * sizeof *t.in);
	fputs("digraph \"", f);
	dot_escape(f, g->name);
	fputs("\" {\n  graph [fontname=\"Helvetica\", labelloc=t, label=\"model ", f);
	dot_escape(f, arena_printf(a, "%s (%s)", g->name, g->file));
	fputs("\"];\n  node [fontname=\"Helvetica\", fontsize=10, shape=box];\n"
	      "  edge [fontname=\"Helvetica\", fontsize=9];\n", f);
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		if (!n->layer) {
			dot_node(f, g, n, "  ");
			continue;
		}
		if (n->layer != prev)
			cur = inst_get(a, &t, n->layer, strlen(n->layer));
		inst_add_node(&t, cur, n->id);
		prev = n->layer;
	}
	for (int c = 0; c < t.n; c++)
		if (t.in[c].parent < 0)
			dot_cluster(f, g, &t, c, 0);
	dot_edges(f, g);
	fputs("}\n", f);
}
