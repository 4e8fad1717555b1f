/* dot.c: the dependency graph as graphviz DOT text.
 *
 * requires: a Graph from sema_build.
 * ensures: a valid digraph, the same text for the same graph: one node per
 * op (inputs and weights as ellipses, collectives as orange hexagons),
 * edges labelled with the tensors they carry, one cluster per layer
 * instance (nested as the instances are), a sink per output. */
#include <string.h>

#include "cf.h"

/* Writes s escaped for a DOT string. */
static void
put_esc(FILE *f, const char *s)
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
	put_esc(f, label);
	fputs("\"", f);
	if (n->op == OP_INPUT)
		fputs(", shape=ellipse", f);
	else if (n->op == OP_WEIGHT)
		fputs(", shape=ellipse, style=filled, fillcolor=\"#e8e8e8\"", f);
	else if (cl == CL_COLL)
		fputs(", shape=hexagon, style=filled, fillcolor=\"#fdb863\"", f);
	fputs("];\n", f);
}

/* Layer instances: paths "block0.attn1", a tree by their prefixes. */
typedef struct Inst {
	const char *path;
	int parent; /* index, or -1 */
} Inst;

static int
inst_find(const Inst *in, int n, const char *path, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(in[i].path) == len && strncmp(in[i].path, path, len) == 0)
			return i;
	return -1;
}

/* The index of path[0:len], added (after its parents) when new. */
static int
inst_get(Arena *a, Inst *in, int *n, const char *path, size_t len)
{
	int i = inst_find(in, *n, path, len), parent = -1;
	const char *dot = NULL;

	if (i >= 0)
		return i;
	for (size_t k = 0; k < len; k++)
		if (path[k] == '.')
			dot = path + k;
	if (dot)
		parent = inst_get(a, in, n, path, (size_t)(dot - path));
	in[*n].path = arena_strndup(a, path, len);
	in[*n].parent = parent;
	return (*n)++;
}

static void
dot_cluster(FILE *f, const Graph *g, const Inst *in, int nin, int c, int depth)
{
	char indent[64];
	const char *last = strrchr(in[c].path, '.');
	int w = depth * 2 + 4 < 60 ? depth * 2 + 4 : 60;

	memset(indent, ' ', (size_t)w);
	indent[w] = 0;
	fprintf(f, "%.*ssubgraph cluster_%d {\n%slabel=\"", w - 2, indent, c, indent);
	put_esc(f, last ? last + 1 : in[c].path);
	fprintf(f, "\";\n%sstyle=rounded;\n%scolor=\"#7f7f7f\";\n", indent, indent);
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		if (n->layer && strcmp(n->layer, in[c].path) == 0)
			dot_node(f, g, n, indent);
	}
	for (int k = 0; k < nin; k++)
		if (in[k].parent == c)
			dot_cluster(f, g, in, nin, k, depth + 1);
	fprintf(f, "%.*s}\n", w - 2, indent);
}

static void
dot_edges(FILE *f, const Graph *g)
{
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		for (int j = 0; j < n->nin; j++) {
			fprintf(f, "  n%d -> n%d [label=\"", n->in[j]->def->id, n->id);
			put_esc(f, n->in[j]->name);
			fputs("\"];\n", f);
		}
	}
	for (int i = 0; i < g->outputs.n; i++) {
		const Value *v = g->outputs.v[i];
		fprintf(f, "  out%d [label=\"out ", i);
		put_esc(f, v->name);
		fprintf(f, "\", shape=plaintext];\n  n%d -> out%d;\n", v->def->id, i);
	}
}

void
dot_graph(FILE *f, const Graph *g)
{
	Arena *a = g->arena;
	const char *prev = NULL;
	size_t depth = 1;
	int nin = 0;

	/* each node adds at most its path's depth of new instances */
	for (int i = 0; i < g->nodes.n; i++) {
		const char *p = ((const Node *)g->nodes.v[i])->layer;
		size_t k = 1;
		for (; p && *p; p++)
			k += *p == '.';
		if (k > depth)
			depth = k;
	}
	Inst *in = arena_alloc(a, ((size_t)g->nodes.n + 1) * depth * sizeof *in);

	fputs("digraph \"", f);
	put_esc(f, g->name);
	fputs("\" {\n  graph [fontname=\"Helvetica\", labelloc=t, label=\"model ", f);
	put_esc(f, arena_printf(a, "%s (%s)", g->name, g->file));
	fputs("\"];\n  node [fontname=\"Helvetica\", fontsize=10, shape=box];\n"
	      "  edge [fontname=\"Helvetica\", fontsize=9];\n", f);
	for (int i = 0; i < g->nodes.n; i++) {
		const Node *n = g->nodes.v[i];
		if (n->layer && n->layer != prev)
			inst_get(a, in, &nin, n->layer, strlen(n->layer));
		else if (!n->layer)
			dot_node(f, g, n, "  ");
		prev = n->layer;
	}
	for (int c = 0; c < nin; c++)
		if (in[c].parent < 0)
			dot_cluster(f, g, in, nin, c, 0);
	dot_edges(f, g);
	fputs("}\n", f);
}
