/* Unit tests of grad.c: the backward graph of the MLP (transposed
 * collectives, the re-gather of x, the saved activations), data
 * parallelism (an all_reduce per replicated weight), all_to_all swapped,
 * gradients summed where a value has two uses, layer norm and a
 * broadcast bias, attention (query split and head split), `grad split`
 * (ZeRO), a gathered output and a transposed batched left operand
 * (issue 48), and the errors. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "cf.h"
#include "pipeline.h"

typedef struct GRun {
	Arena *a;
	Diag d;
	Src src;
	char *err;
	size_t errlen;
	Graph *g, *b;
} GRun;

/* Builds text's graph and its backward (NULL after errors, in r->err). */
static Graph *
backward(GRun *r, const char *text)
{
	FILE *ef;

	r->a = arena_new();
	r->src = (Src){"g.cf", text, strlen(text)};
	r->err = NULL;
	ef = open_memstream(&r->err, &r->errlen);
	diag_init(&r->d, &r->src, ef);
	Pipeline pl = {.a = r->a, .d = &r->d, .backward = 1, .stop = PIPE_GRAPH};
	int rc = pipeline_graphs(&pl, &r->src);
	r->g = pl.graph;
	r->b = !rc && r->g ? r->g->bwd : NULL;
	fclose(ef);
	return r->b;
}

static void
done(GRun *r)
{
	free(r->err);
	arena_free(r->a);
}

static Value *
val(const Graph *g, const char *name)
{
	for (int i = 0; i < g->values.n; i++) {
		Value *v = g->values.v[i];
		if (strcmp(v->name, name) == 0)
			return v;
	}
	return NULL;
}

static int
count_op(const Graph *g, OpKind op)
{
	int n = 0;

	for (int i = 0; i < g->nodes.n; i++)
		n += ((Node *)g->nodes.v[i])->op == op;
	return n;
}

static const char mlp[] =
	"model mlp { size B = 2, S = 8, D = 4, F = 8; group tp = 2; type f64;\n"
	"  in x : [B, S, D] split S over tp;\n"
	"  weight w1 : [D, F] split F over tp;\n"
	"  weight w2 : [F, D] split F over tp;\n"
	"  xa = all_gather(x, S); h = gelu(xa @ w1); p = h @ w2;\n"
	"  y = reduce_scatter(p, S); out y; }\n";

static void
test_mlp(void)
{
	GRun r;
	Graph *b = backward(&r, mlp);

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_PTR_EQUAL(r.g->bwd, b);
	CU_ASSERT_PTR_EQUAL(b->fwd, r.g);
	/* inputs d_y, then what it reads; outputs d_x, d_w1, d_w2 spread
	 * like x, w1, w2 */
	CU_ASSERT_EQUAL(b->outputs.n, 3);
	const char *names[] = {"d_x", "d_w1", "d_w2"}, *fwd[] = {"x", "w1", "w2"};
	for (int i = 0; i < 3 && i < b->outputs.n; i++) {
		Value *g = b->outputs.v[i], *v = val(r.g, fwd[i]);
		CU_ASSERT_STRING_EQUAL(g->name, names[i]);
		CU_ASSERT_EQUAL(g->home, HO_GRADS);
		CU_ASSERT(graph_dist_eq(g->dist, v->dist));
	}
	Value *dy = val(b, "d_y");
	CU_ASSERT_PTR_NOT_NULL_FATAL(dy);
	CU_ASSERT_EQUAL(dy->role, R_IN);
	CU_ASSERT_EQUAL(dy->home, HO_GRADS);
	/* the transposes: d_p = all_gather(d_y), d_x = reduce_scatter(...) on
	 * S; x gathered again: two all_gathers and one reduce_scatter */
	CU_ASSERT_EQUAL(count_op(b, OP_ALL_GATHER), 2);
	CU_ASSERT_EQUAL(count_op(b, OP_REDUCE_SCATTER), 1);
	CU_ASSERT_EQUAL(count_op(b, OP_ALL_REDUCE), 0);
	Value *dp = val(b, "d_p");
	CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
	CU_ASSERT_EQUAL(dp->def->op, OP_ALL_GATHER);
	CU_ASSERT_PTR_EQUAL(dp->def->in[0], dy);
	CU_ASSERT_EQUAL(dp->def->a.coll.dim, 1);
	Value *dx = b->outputs.v[0];
	CU_ASSERT_EQUAL(dx->def->op, OP_REDUCE_SCATTER);
	CU_ASSERT_EQUAL(dx->def->a.coll.dim, 1);
	Value *xa = val(b, "xa");
	CU_ASSERT_PTR_NOT_NULL_FATAL(xa);
	CU_ASSERT_EQUAL(xa->def->op, OP_ALL_GATHER);
	CU_ASSERT_EQUAL(xa->def->in[0]->role, R_IN);
	/* saved: gelu's input and h, not xa; in the forward they are results
	 * placed in the saved buffer, one after the other */
	CU_ASSERT_EQUAL(r.g->saved.n, 2);
	CU_ASSERT_EQUAL(val(r.g, "xa")->home, HO_ROLE);
	CU_ASSERT_EQUAL(val(r.g, "h")->home, HO_SAVED);
	CU_ASSERT_EQUAL(val(r.g, "h")->role, R_OUT);
	CU_ASSERT_EQUAL(r.g->savedbytes, 2 * 512);     /* [2, 8, 8] split F over 2, f64 */
	CU_ASSERT_EQUAL(r.g->ref_savedbytes, 2 * 1024); /* whole */
	/* dW1 = xa.T @ d_t1 summed over B: a 2-d result split like w1 */
	Value *dw1 = b->outputs.v[1];
	CU_ASSERT_EQUAL(dw1->def->op, OP_MATMUL);
	CU_ASSERT(dw1->def->a.mm.sum && dw1->def->a.mm.ta);
	CU_ASSERT_PTR_EQUAL(dw1->def->in[0], xa);
	/* local along its rows and columns (the operands' last dims), not
	 * along the summed S: a gather of xa along S does not take it */
	CU_ASSERT_EQUAL(dw1->def->local, 3u);
	CU_ASSERT_EQUAL(dw1->def->inmap[0][0], 2);
	CU_ASSERT_EQUAL(dw1->def->inmap[1][1], 2);
	CU_ASSERT_EQUAL(dw1->def->inmap[0][1], -1);
	CU_ASSERT_EQUAL(dw1->def->inmap[1][0], -1);
	done(&r);
}

static void
test_data_parallel(void)
{
	GRun r;
	Graph *b = backward(&r, "model dp { size T = 8, D = 4; group dp = 2;\n"
	                        "  in x : [T, D] split T over dp; weight w : [D, D];\n"
	                        "  y = relu(x @ w); out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	Value *dw = b->outputs.v[1];
	CU_ASSERT_STRING_EQUAL(dw->name, "d_w");
	CU_ASSERT_EQUAL(dw->def->op, OP_ALL_REDUCE); /* partial over dp: DDP */
	CU_ASSERT_EQUAL(dw->dist.p[0].kind, DI_REPL);
	CU_ASSERT_EQUAL(dw->def->in[0]->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT_EQUAL(count_op(b, OP_RELU_GRAD), 1);
	done(&r);
}

static void
test_all_to_all(void)
{
	GRun r;
	Graph *b = backward(&r, "model u { size S = 8, D = 4; group sp = 2;\n"
	                        "  in x : [S, D] split S over sp;\n"
	                        "  y = all_to_all(x, S, D); out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	Value *dx = b->outputs.v[0];
	CU_ASSERT_EQUAL(dx->def->op, OP_ALL_TO_ALL);
	CU_ASSERT_EQUAL(dx->def->a.coll.dim, 1);  /* from D */
	CU_ASSERT_EQUAL(dx->def->a.coll.dim2, 0); /* to S */
	done(&r);
}

/* x reaches y twice: its gradient is the sum, one add; y's gradient
 * reaches x directly too. */
static void
test_sum(void)
{
	GRun r;
	Graph *b = backward(&r, "model s { size S = 8, D = 4; group tp = 2;\n"
	                        "  in x : [S, D] split S over tp;\n"
	                        "  y = x * x + x; out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(count_op(b, OP_MUL), 2);
	CU_ASSERT_EQUAL(count_op(b, OP_ADD), 2);
	Value *dx = b->outputs.v[0];
	CU_ASSERT_EQUAL(dx->def->op, OP_ADD);
	CU_ASSERT_EQUAL(dx->role, R_OUT);
	done(&r);
}

/* The gradient of y + w is d_y itself: the result is a copy of it. */
static void
test_copy(void)
{
	GRun r;
	Graph *b = backward(&r, "model c { size S = 8; group tp = 2;\n"
	                        "  in x : [S, S]; weight w : [S, S]; in z : [S, S];\n"
	                        "  y = x + w; out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(b->outputs.n, 3);
	for (int i = 0; i < b->outputs.n; i++) {
		Value *g = b->outputs.v[i];
		CU_ASSERT_EQUAL(g->def->op, OP_SCALE);
		CU_ASSERT_EQUAL(g->role, R_OUT);
	}
	/* d_x and d_w copy d_y; z reaches no output: its gradient is zero */
	CU_ASSERT_EQUAL(((Value *)b->outputs.v[0])->def->a.scale, 1.0);
	CU_ASSERT_EQUAL(((Value *)b->outputs.v[1])->def->a.scale, 0.0);
	CU_ASSERT_EQUAL(((Value *)b->outputs.v[2])->def->a.scale, 1.0);
	done(&r);
}

/* layernorm over rows split along S: dx by layernorm_grad, dgamma from
 * the recomputed norm, dbeta a sum over the rows; both sums are partial
 * over tp and all-reduced onto the whole gamma and beta. A bias added
 * to [S, D] gets its gradient summed over S likewise. */
static void
test_norm(void)
{
	GRun r;
	Graph *b = backward(&r, "model n { size S = 8, D = 4; group tp = 2; type f64;\n"
	                        "  in x : [S, D] split S over tp; weight g : [D]; weight c : [D];\n"
	                        "  weight bias : [D];\n"
	                        "  y = layernorm(x, g, c) + bias; out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(count_op(b, OP_LAYERNORM_GRAD), 1);
	CU_ASSERT_EQUAL(count_op(b, OP_LAYERNORM), 1);
	CU_ASSERT_EQUAL(count_op(b, OP_SUM_LEADING), 3);
	CU_ASSERT_EQUAL(count_op(b, OP_ALL_REDUCE), 3);
	for (int i = 1; i < b->outputs.n; i++) {
		const Value *d = b->outputs.v[i];
		CU_ASSERT_EQUAL(d->def->op, OP_ALL_REDUCE);
		CU_ASSERT_EQUAL(d->def->in[0]->def->op, OP_SUM_LEADING);
		CU_ASSERT_EQUAL(d->def->in[0]->dist.p[0].kind, DI_PARTIAL);
		CU_ASSERT_EQUAL(d->dist.p[0].kind, DI_REPL);
	}
	const Value *dx = b->outputs.v[0];
	CU_ASSERT_EQUAL(dx->def->op, OP_LAYERNORM_GRAD);
	CU_ASSERT_EQUAL(dx->def->nin, 3);
	CU_ASSERT_EQUAL(dx->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(dx->dist.p[0].dim, 0);
	done(&r);
}

/* Query-split attention (q split along S, k and v whole after a gather):
 * dq split like q; dk and dv partial over tp, reduce-scattered back onto
 * the shards by the gathers' transposes; the forward saves its
 * log-sum-exp rows, which the gradients read. Head split: everything
 * local, split along the heads, merge and split swapped. */
static void
test_attention(void)
{
	GRun r;
	Graph *b = backward(&r, "model a { size B = 1, S = 8, H = 2, E = 4; group tp = 2;\n"
	                        "  in q : [B, H, S, E] split S over tp; in k : [B, H, S, E] split S over tp;\n"
	                        "  in v : [B, H, S, E] split S over tp;\n"
	                        "  ka = all_gather(k, S); va = all_gather(v, S);\n"
	                        "  y = attention(q, ka, va, causal); out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	const Value *dq = b->outputs.v[0], *dk = b->outputs.v[1], *dv = b->outputs.v[2];
	CU_ASSERT_EQUAL(dq->def->op, OP_ATTN_DQ);
	CU_ASSERT_EQUAL(dq->def->a.causal, 1);
	CU_ASSERT_EQUAL(dq->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(dk->def->op, OP_REDUCE_SCATTER);
	CU_ASSERT_EQUAL(dk->def->in[0]->def->op, OP_ATTN_DK);
	CU_ASSERT_EQUAL(dk->def->in[0]->dist.p[0].kind, DI_PARTIAL);
	CU_ASSERT_EQUAL(dv->def->in[0]->def->op, OP_ATTN_DV);
	/* the forward's attention saves its log-sum-exp rows, [B, H, S] split
	 * along S like y, f32 (the model's type is f32), the last saved
	 * value; the three gradients read it as their input 5 */
	const Value *y = val(r.g, "y"), *lse = val(r.g, "y_lse");
	CU_ASSERT_PTR_NOT_NULL_FATAL(lse);
	CU_ASSERT_PTR_EQUAL(y->def->lse, lse);
	CU_ASSERT_PTR_EQUAL(lse->def, y->def);
	CU_ASSERT_EQUAL(lse->ndim, 3);
	CU_ASSERT_EQUAL(lse->shape[2], 8);
	CU_ASSERT_EQUAL(lse->dtype, DT_F32);
	CU_ASSERT_EQUAL(lse->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(lse->dist.p[0].dim, 2);
	CU_ASSERT_EQUAL(lse->home, HO_SAVED);
	CU_ASSERT_PTR_EQUAL(r.g->saved.v[r.g->saved.n - 1], lse);
	CU_ASSERT_EQUAL(r.g->savedbytes, lse->soff + 256); /* 8 f32, aligned */
	graph_check(r.g);
	for (int i = 0; i < b->nodes.n; i++) {
		const Node *n = b->nodes.v[i];
		if (!op_attn(n->op))
			continue;
		CU_ASSERT_EQUAL(n->nin, 6);
		CU_ASSERT_STRING_EQUAL(n->in[5]->name, "y_lse");
		CU_ASSERT_EQUAL(n->in[5]->home, HO_SAVED);
		CU_ASSERT_EQUAL(n->in[5]->def->op, OP_INPUT);
	}
	done(&r);

	b = backward(&r, "model h { size B = 1, S = 8, D = 8, H = 2; group tp = 2; type f64;\n"
	                 "  in x : [B, S, D] split D over tp;\n"
	                 "  q = split_heads(x, H);\n"
	                 "  y = merge_heads(attention(q, q, q)); out y; }\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(count_op(b, OP_SPLIT_HEADS), 1);
	CU_ASSERT_EQUAL(count_op(b, OP_MERGE_HEADS), 1);
	CU_ASSERT_EQUAL(count_op(b, OP_ATTN_DQ) + count_op(b, OP_ATTN_DK) + count_op(b, OP_ATTN_DV), 3);
	CU_ASSERT_EQUAL(count_op(b, OP_ALL_REDUCE) + count_op(b, OP_REDUCE_SCATTER), 0);
	CU_ASSERT_EQUAL(((Value *)b->outputs.v[0])->dist.p[0].dim, 2);
	/* f64: the lse too; named after a temporary, split along the heads */
	lse = val(r.g, "t1_lse");
	CU_ASSERT_PTR_NOT_NULL_FATAL(lse);
	CU_ASSERT_EQUAL(lse->dtype, DT_F64);
	CU_ASSERT_EQUAL(lse->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(lse->dist.p[0].dim, 1);
	done(&r);
}

/* grad split D over dp: the partial gradient reduce-scattered along D
 * (ZeRO) where the default all-reduces it. */
static void
test_zero(void)
{
	GRun r;
	Graph *b = backward(&r, "model z { size T = 8, D = 4, F = 4; group dp = 2;\n"
	                        "  in x : [T, D] split T over dp;\n"
	                        "  weight w1 : [D, F] grad split D over dp; weight w2 : [F, F];\n"
	                        "  y = (x @ w1) @ w2; out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	const Value *d1 = b->outputs.v[1], *d2 = b->outputs.v[2];
	CU_ASSERT_EQUAL(d1->def->op, OP_REDUCE_SCATTER);
	CU_ASSERT_EQUAL(d1->def->a.coll.dim, 0);
	CU_ASSERT_EQUAL(d1->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(d1->dist.p[0].dim, 0);
	CU_ASSERT_EQUAL(d2->def->op, OP_ALL_REDUCE);
	CU_ASSERT_EQUAL(d2->dist.p[0].kind, DI_REPL);
	done(&r);
}

static void
test_errors(void)
{
	GRun r;

	/* d_t1 split along the contraction times a replicated w: the rules
	 * gather it first (once refused with "no backward rule") */
	CU_ASSERT_PTR_NOT_NULL(backward(&r, "model n { size S = 8, D = 4; group tp = 2;\n"
	                                    "  in x : [S, D]; weight w : [D, D]; in s : [S, D] split D over tp;\n"
	                                    "  y = (x @ w) * s; out y; }\n"));
	CU_ASSERT_PTR_NOT_NULL(r.g->bwd);
	done(&r);
	/* gelu's rule reads t, to be saved, before w's gradient fails: the
	 * forward is left as it was */
	CU_ASSERT_PTR_NULL(backward(&r, "model z { size T = 8, D = 4; group dp = 2;\n"
	                                "  in x : [T, D];\n"
	                                "  weight w : [D, D] grad split 0 over dp;\n"
	                                "  t = x @ w; y = gelu(t); out y; }\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "the gradient of w (repl) is no partial sum over dp"));
	CU_ASSERT_PTR_NULL(r.g->bwd);
	CU_ASSERT_EQUAL(r.g->saved.n, 0);
	for (int i = 0; i < r.g->values.n; i++) {
		const Value *v = r.g->values.v[i];
		if (!strcmp(v->name, "t")) {
			CU_ASSERT_EQUAL(v->role, R_ACT);
			CU_ASSERT_EQUAL(v->home, HO_ROLE);
		}
	}
	done(&r);
	/* grad split over a group that splits no data the weight meets */
	CU_ASSERT_PTR_NULL(backward(&r, "model z { size T = 8, D = 4; group dp = 2;\n"
	                                "  in x : [T, D];\n"
	                                "  weight w : [D, D] grad split 0 over dp;\n"
	                                "  y = x @ w; out y; }\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "g.cf:3:10: error: the gradient of w (repl) is no "
	                                     "partial sum over dp"));
	done(&r);
	/* grad split of an input, and of a weight split already */
	CU_ASSERT_PTR_NULL(backward(&r, "model z { size T = 8, D = 4; group dp = 2;\n"
	                                "  in x : [T, D] grad split T over dp;\n"
	                                "  weight w : [D, D] split 0 over dp grad split 1 over dp;\n"
	                                "  y = x @ w; out y; }\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "g.cf:2:28: error: only a weight's gradient can be "
	                                     "given a spread of its own, but x is an input"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "g.cf:3:55: error: w is split over dp, so its gradient "
	                                     "is spread like it there"));
	done(&r);
}

/* issue 48: a gathered output's gradient is each rank's own slice (a
 * scale by 1 whose result is split, no collective), and a transposed
 * batched left operand gets a 2-d left operand broadcast over the batch
 * and a batched product summed over it. */
static void
test_gather_out(void)
{
	GRun r;
	Graph *b = backward(&r, "model z { size B = 2, S = 4, D = 4, V = 8; group tp = 2;\n"
	                        "  in x : [B, S, D]; weight w : [D, V] split V over tp;\n"
	                        "  y = all_gather(x @ w, V); out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	const Value *dh = val(b, "d_t1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(dh);
	CU_ASSERT_EQUAL(dh->def->op, OP_SCALE);
	CU_ASSERT_EQUAL(dh->def->a.scale, 1.0);
	CU_ASSERT_EQUAL(dh->def->in[0]->dist.p[0].kind, DI_REPL);
	CU_ASSERT_EQUAL(dh->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(dh->dist.p[0].dim, 2);
	/* the one collective: d_x (x replicated, d_t1 @ w.T partial) */
	int ncoll = 0;
	for (int i = 0; i < b->nodes.n; i++)
		ncoll += op_info[((Node *)b->nodes.v[i])->op].cls == CL_COLL;
	CU_ASSERT_EQUAL(ncoll, 1);
	CU_ASSERT_EQUAL(((Value *)b->outputs.v[0])->def->op, OP_ALL_REDUCE);
	done(&r);
}

static void
test_tmm(void)
{
	GRun r;
	Graph *b = backward(&r, "model z { size B = 2, S = 4, K = 6, N = 4; group tp = 2;\n"
	                        "  in x : [B, K, S] split S over tp; weight w : [K, N];\n"
	                        "  y = x.T @ w; out y; }\n");

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	const Value *dx = b->outputs.v[0], *dw = b->outputs.v[1];
	/* d_x = w @ d_y.T: [K, N] @ [B, N, S], split S over tp */
	CU_ASSERT_EQUAL(dx->def->op, OP_MATMUL);
	CU_ASSERT_EQUAL(dx->def->in[0]->ndim, 2);
	CU_ASSERT_EQUAL(dx->def->a.mm.tb, 1);
	CU_ASSERT_EQUAL(dx->dist.p[0].kind, DI_SPLIT);
	CU_ASSERT_EQUAL(dx->dist.p[0].dim, 2);
	CU_ASSERT_EQUAL(dx->def->inmap[0][0], -1);
	CU_ASSERT_EQUAL(dx->def->inmap[0][1], 0);
	CU_ASSERT_EQUAL(dx->def->inmap[1][2], 1);
	/* d_w: the batched x @ d_y [B, K, N] (split? no: S is summed, a
	 * partial sum), summed over B, all-reduced */
	CU_ASSERT_EQUAL(dw->def->op, OP_ALL_REDUCE);
	const Value *s = dw->def->in[0];
	CU_ASSERT_EQUAL(s->def->op, OP_SUM_LEADING);
	CU_ASSERT_EQUAL(s->def->in[0]->ndim, 3);
	CU_ASSERT_EQUAL(s->def->in[0]->dist.p[0].kind, DI_PARTIAL);
	done(&r);
}

void test_grad_register(void);

void
test_grad_register(void)
{
	CU_pSuite s = CU_add_suite("grad", NULL, NULL);

	CU_add_test(s, "mlp: transposes, re-gather, saved", test_mlp);
	CU_add_test(s, "data parallel: all_reduce", test_data_parallel);
	CU_add_test(s, "all_to_all swapped", test_all_to_all);
	CU_add_test(s, "gradients summed", test_sum);
	CU_add_test(s, "copies and zeros", test_copy);
	CU_add_test(s, "norm: sums all-reduced", test_norm);
	CU_add_test(s, "attention: query split, heads", test_attention);
	CU_add_test(s, "grad split: reduce_scatter", test_zero);
	CU_add_test(s, "a gathered output: own slices", test_gather_out);
	CU_add_test(s, "x.T @ w batched", test_tmm);
	CU_add_test(s, "errors", test_errors);
}
