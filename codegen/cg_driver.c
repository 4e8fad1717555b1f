/* cg_driver.c: --emit=driver, a main program for one model: fills every
 * input and weight shard with the runtime's deterministic data, runs the
 * forward pass under MPI, times it (median over iterations, max over
 * ranks), and checks the result against the serial reference on rank 0.
 * It is what `make demo`, the end-to-end tests and the benchmarks run, and
 * a template for calling generated code from an application.
 * requires: a checked graph. ensures: C that compiles warning-free. */
#include "cgen.h"

static const char driver_text[] =
#include "driver.inc"
	;

/* The driver's tensors in table order, by kind: inputs (0), weights (1),
 * outputs (2); with a backward pass, the gradients of the outputs (3) and
 * of the inputs and weights (4), from the backward graph b. */
Vec
cg_table_part(Arena *a, const Graph *g, int kind)
{
	const Graph *b = g->bwd;
	Vec v = {0};

	if (kind < 3)
		return *(kind == 0 ? &g->inputs : kind == 1 ? &g->weights : &g->outputs);
	if (kind == 4)
		return b->outputs;
	for (int i = 0; i < b->inputs.n; i++)
		if (((Value *)b->inputs.v[i])->home == HO_GRADS)
			vec_push(a, &v, b->inputs.v[i]);
	return v;
}

/* The C names of the backward graph's tensors, for kinds 3 and 4. */
static const char *
table_cname(Cg *c, Cg *bc, int kind, const Value *v)
{
	return (kind < 3 ? c : bc)->cname[v->id];
}

static int
nkinds(const Cg *c)
{
	return c->g->bwd ? 5 : 3;
}

/* Does the driver fill the tensors of kind (inputs, weights, output
 * gradients), or do the model's passes write them? */
static int
filled(int kind)
{
	return kind != 2 && kind != 4;
}

unsigned
cg_table_seed(int kind, int k)
{
	return filled(kind) ? 1000u + (unsigned)k : 0;
}

void
cg_fill_seeds(Cg *c)
{
	Emitter *e = &c->e;
	Cg bc = {0};
	int k = 0;

	if (c->g->bwd)
		cg_init(&bc, c->a, c->g->bwd, NULL, NULL, NULL, 0, 0);
	emit(e, "/* The driver (--emit=driver) fills the tensors it reads as\n"
	        " * cfrt_fill_global(ctx, &view, seed, global dims, shard offsets) does:\n"
	        " * element e of the whole tensor is cfrt_uniform(seed, its row-major\n"
	        " * index, type). An outside program recomputes a run from these seeds\n"
	        " * (the driver's --dump-inputs writes the values). */\n");
	for (int l = 0; l < nkinds(c); l++) {
		Vec vs = cg_table_part(c->a, c->g, l);
		for (int i = 0; i < vs.n; i++, k++) {
			const Value *v = vs.v[i];
			if (!filled(l))
				continue;
			emit(e, "#define %s_%s_SEED %uu\n", c->upper, table_cname(c, &bc, l, v),
			     cg_table_seed(l, k));
		}
	}
	emit(e, "\n");
}

static void
tensor_table(Cg *c, Cg *bc)
{
	Emitter *e = &c->e;

	emit_open(e, "static const cf_tensor tensors[] =");
	for (int l = 0; l < nkinds(c); l++) {
		Vec vs = cg_table_part(c->a, c->g, l);
		for (int i = 0; i < vs.n; i++) {
			const Value *v = vs.v[i];
			const char *up = arena_printf(c->a, "%s_%s", c->upper, table_cname(c, bc, l, v));
			int acc = l == 4 && c->g->bwd->accumulate && i >= c->g->inputs.n;
			const char *seed = filled(l) ? arena_printf(c->a, "%s_SEED", up) : "0";
			emit(e, "{\"%s\", %d, %s_NDIM, %s_DIMS, %s_RANK_DIMS, %s, %d, %s},\n",
			     v->name, l, up, up, up, cg_split_groups(c->a, v), acc, seed);
		}
	}
	emit_close(e, ";");
	emit(e, "enum { NTENSOR = sizeof tensors / sizeof tensors[0] };\n\n");
}

/* Points the weight, io (and grads) structs at the buffers, in table
 * order. */
static void
bind(Cg *c, Cg *bc)
{
	static const char *const st[] = {"io", "w", "io", "gr", "gr"};
	Emitter *e = &c->e;
	int k = 0;

	emit_func(e, "static void\nbind(void **buf, %s_weights *w, %s_io *io, cf_grads *gr)",
	          c->prefix, c->prefix);
	for (int l = 0; l < nkinds(c); l++) {
		Vec vs = cg_table_part(c->a, c->g, l);
		for (int i = 0; i < vs.n; i++, k++)
			emit(e, "%s->%s = buf[%d];\n", st[l], table_cname(c, bc, l, vs.v[i]), k);
	}
	if (!c->g->weights.n)
		emit(e, "(void)w;\n");
	if (!c->g->bwd)
		emit(e, "(void)gr;\n");
	emit_close(e, "\n");
}

/* The model's entry points under the driver's own names (cf_ and CF_: no
 * tensor's name can be one of them, cnames.c). */
static void
entry_points(Cg *c)
{
	Emitter *e = &c->e;
	const char *p = c->prefix;

	const Graph *g = c->g;
	emit(e, "#define CF_MODEL_NAME \"%s\"\n#define CF_DTYPE %s_DTYPE\n", p, c->upper);
	emit(e, "#define CF_NGROUPS %d /* the job's grid: cfrt_init_groups */\n"
	        "static const int cf_group_sizes[CF_NGROUPS] = %s;\n", g->groups.n ? g->groups.n : 1,
	     cg_group_sizes(c));
	emit(e, "typedef %s_weights cf_weights;\ntypedef %s_io cf_io;\n", p, p);
	emit(e, "#define cf_forward %s_forward\n#define cf_ref_forward %s_ref_forward\n", p, p);
	emit(e, "#define cf_workspace_bytes %s_workspace_bytes\n"
	        "#define cf_ref_workspace_bytes %s_ref_workspace_bytes\n", p, p);
	if (!g->bwd) {
		emit(e, "#define CF_BACKWARD 0 /* no backward pass: cfc --backward */\n"
		        "#define CF_ACCUMULATE 0\n"
		        "typedef struct cf_grads { char unused; } cf_grads;\n\n");
		return;
	}
	emit(e, "#define CF_BACKWARD 1\ntypedef %s_grads cf_grads;\n", p);
	emit(e, "#define CF_ACCUMULATE %s_ACCUMULATES\n", c->upper);
	emit(e, "#define cf_backward %s_backward\n#define cf_ref_backward %s_ref_backward\n", p, p);
	emit(e, "#define cf_saved_bytes %s_saved_bytes\n#define cf_ref_saved_bytes %s_ref_saved_bytes\n"
	        "#define cf_backward_workspace_bytes %s_backward_workspace_bytes\n"
	        "#define cf_ref_backward_workspace_bytes %s_ref_backward_workspace_bytes\n\n",
	     p, p, p, p);
}

void
cg_driver(FILE *f, Arena *a, const Graph *g, const CgFiles *files)
{
	Cg c, bc = {0};

	cg_init(&c, a, g, NULL, f, NULL, 0, 0);
	if (g->bwd)
		cg_init(&bc, a, g->bwd, NULL, NULL, NULL, 0, 0);
	Emitter *e = &c.e;
	emit(e, "/* Driver of model %s: fill, run, time, check.\n"
	        " * Generated by cfc %s from %s; do not edit.\n"
	        " * usage: mpirun -n %lld ./%s_main [--iters N] [--warmup N]\n"
	        " *        [--warmup-s SEC] [--check]\n"
	        " *        [--gradcheck] [--fault RANK] */\n", g->name, CF_VERSION, g->file,
	     cg_job_size(g), g->name);
	/* setenv and unsetenv (the reference's context is left out of the trace) */
	emit(e, "#ifndef _POSIX_C_SOURCE\n#define _POSIX_C_SOURCE 200809L\n#endif\n");
	emit(e, "#include <stdint.h>\n\n#include \"%s\"\n\n", files->header);
	emit(e, "typedef struct cf_tensor {\n\tconst char *name;\n\tint kind; "
	        "/* 0 input, 1 weight, 2 output, 3 output gradient, 4 gradient */\n\tint nd;\n\tint64_t dims[CFRT_MAX_DIMS];\n"
	        "\tint64_t rank_dims[CFRT_MAX_DIMS];\n"
	        "\tint group[CFRT_MAX_DIMS]; /* by dim: the group that splits it, or -1 */\n"
	        "\tint acc; /* a gradient the backward adds to (--accumulate) */\n"
	        "\tuint64_t seed; /* of its values (the header's NAME_x_SEED), 0: not filled */\n"
	        "} cf_tensor;\n\n");
	entry_points(&c);
	tensor_table(&c, &bc);
	bind(&c, &bc);
	fputs(driver_text, f);
}
