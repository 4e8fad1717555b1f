/* calibrate_run.c: the calls each point of cfrt-calibrate times, through
 * the runtime's public API: transfers (a pair, the ring, both ways; the
 * library's collectives), GEMMs, elementwise ops and attention.
 * requires: C's buffers hold cap bytes of the point's type.
 * ensures: CFRT_OK, or the backend's status (it cannot run that call). */
#include <string.h>

#include "calibrate.h"

const char *const tname[4] = {"f32", "f64", "bf16", "f16"};

/* ---- timing ---- */

void
die_rc(Cal *C, int rc, const char *what)
{
	if (rc != CFRT_OK) {
		fprintf(stderr, "cfrt-calibrate: rank %d: %s: %s\n", C->rank, what,
		        cfrt_last_error(C->ctx));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* The time from t0 to t1 of every rank, as C times: the span from the
 * first rank's t0 to the last one's t1 (C->span), else the slowest
 * rank's own. Collective. */
double
elapsed(Cal *C, double t0, double t1)
{
	double mine[3] = {t1 - t0, -t0, t1}, all[3];

	MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return C->span ? all[1] + all[2] : all[0];
}

double
timed(Cal *C, RunFn fn, void *arg, int reps, double budget, int least)
{
	double t[64], spent = 0;
	int n = 0;

	if (reps > 64)
		reps = 64;
	/* one run to warm up (and to see whether the backend can) */
	int bad = fn(C, arg) != 0, anybad;
	cfrt_sync(C->ctx);
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (anybad)
		return -1;
	while (n < reps && (n < least || spent < budget)) {
		cfrt_barrier(C->ctx);
		double t0 = cfrt_wtime(C->ctx);
		die_rc(C, fn(C, arg), "a measured call");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		double dt = elapsed(C, t0, cfrt_wtime(C->ctx));
		t[n++] = dt;
		spent += dt;
	}
	return median(t, n);
}

/* Fills the a and b buffers with values of type t in [0, 1) (no NaN or
 * denormal slows a kernel): 0 where the backend has no such type, on
 * every rank. */
int
fill(Cal *C, cfrt_dtype t)
{
	int64_t n = (int64_t)(C->cap / cfrt_dtype_size(t));
	cfrt_view fa = cfrt_view_contig(C->a, t, 1, &n), fb = cfrt_view_contig(C->b, t, 1, &n);
	int bad = cfrt_fill_uniform(C->ctx, &fa, 1) != CFRT_OK ||
	          cfrt_fill_uniform(C->ctx, &fb, 2) != CFRT_OK, anybad;

	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return !anybad;
}

/* Keeps a GPU busy with 4096^3 GEMMs of type t for secs seconds, as a
 * model's GEMMs keep it: an H100 at its power limit (700 W) lowers its
 * clock, and a call timed on an idle GPU reads the boost clock. One H100,
 * bf16 (bench/gpu/gemm_probe): a 16384x4096x4096 GEMM took 0.735-0.740 ms
 * a call timed alone, 0.869 after 1 s of the same call (the SM clock at
 * 1320-1335 MHz of 1980, the power at 698-699 W), and 131072 rows, as
 * bench-gpu's case a runs them back to back, 6.44-6.57 ms. The points
 * time runs of calls back to back (gemm_calls). */
void
heat(Cal *C, cfrt_dtype t, double secs)
{
	Gemm g = {t, 4096, 4096, 4096, 0, 1};
	double *call = &C->heat_call[t], t0 = cfrt_wtime(C->ctx), t1 = t0;

	/* as many calls as the last ones' time says are left, queued at
	 * once; in batches of eight a heat could not be shorter than eight
	 * calls (f32's 4096^3: 2.67-2.73 ms a call on one H100, 21.4-21.8 ms) */
	while (t1 - t0 < secs) {
		int64_t n = *call > 0 ? (int64_t)ceil((secs - (t1 - t0)) / *call) : 1;
		double ts = t1;
		for (int64_t i = 0; i < n; i++)
			die_rc(C, run_gemm(C, &g), "gemm");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		t1 = cfrt_wtime(C->ctx);
		*call = (t1 - ts) / (double)n;
	}
	cfrt_barrier(C->ctx);
}


/* ---- transfers ---- */

/* Posts p's transfers from send into recv (a second pair, both ways,
 * half a buffer on): *n requests in q. */
int
p2p_start(Cal *C, const P2p *p, char *send, char *recv, size_t half, cfrt_req q[4], int *n)
{
	int r = C->rank, N = C->size, next = (r + 1) % N, prev = (r + N - 1) % N;
	int rc = CFRT_OK;

	*n = 0;
	cfrt_group_begin(C->ctx);
	if (p->conc == 1) {
		if (r == 0)
			rc = cfrt_isend(C->ctx, send, p->count, CFRT_F32, 1, 1, &q[(*n)++]);
		else if (r == 1)
			rc = cfrt_irecv(C->ctx, recv, p->count, CFRT_F32, 0, 1, &q[(*n)++]);
	} else {
		rc = cfrt_isend(C->ctx, send, p->count, CFRT_F32, next, 1, &q[(*n)++]);
		if (rc == CFRT_OK)
			rc = cfrt_irecv(C->ctx, recv, p->count, CFRT_F32, prev, 1, &q[(*n)++]);
		if (rc == CFRT_OK && p->conc == 4) {
			rc = cfrt_isend(C->ctx, send + half, p->count, CFRT_F32, prev, 2, &q[(*n)++]);
			if (rc == CFRT_OK)
				rc = cfrt_irecv(C->ctx, recv + half, p->count, CFRT_F32, next, 2,
				                &q[(*n)++]);
		}
	}
	cfrt_group_end(C->ctx);
	return rc;
}

int
run_p2p(Cal *C, void *arg)
{
	cfrt_req q[4];
	int n, rc = p2p_start(C, arg, C->a, C->b, C->cap / 2, q, &n);

	return rc == CFRT_OK ? cfrt_waitall(C->ctx, n, q) : rc;
}

const char *const coll_name[] = {"all_gather", "reduce_scatter", "all_reduce",
                                        "all_to_all"};

/* c's collective from a into recv: started (req), or run (req NULL). */
int
coll_call(Cal *C, const Coll *c, void *recv, cfrt_req *req)
{
	cfrt_ctx *x = C->ctx;

	switch (c->op) {
	case 0:
		return req ? cfrt_iall_gather(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_all_gather(x, C->a, recv, c->count, CFRT_F32);
	case 1:
		return req ? cfrt_ireduce_scatter(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_reduce_scatter(x, C->a, recv, c->count, CFRT_F32);
	case 2:
		return req ? cfrt_iall_reduce(x, C->a, recv, c->count * C->size, CFRT_F32, req)
		           : cfrt_all_reduce(x, C->a, recv, c->count * C->size, CFRT_F32);
	default:
		return req ? cfrt_iall_to_all(x, C->a, recv, c->count, CFRT_F32, req)
		           : cfrt_all_to_all(x, C->a, recv, c->count, CFRT_F32);
	}
}

int
run_coll(Cal *C, void *arg)
{
	return coll_call(C, arg, C->b, NULL);
}

/* ---- compute ---- */

/* g of the a and b buffers into out. */
int
gemm_call(Cal *C, const Gemm *g, void *out)
{
	return cfrt_gemm(C->ctx, g->t, CFRT_NOTRANS, CFRT_NOTRANS, g->m, g->n, g->k, 1, C->a,
	                 g->k, 0, C->b, g->n, 0, g->acc, out, g->n, 0, 1);
}

int
run_gemm(Cal *C, void *arg)
{
	const Gemm *g = arg;
	int rc = CFRT_OK;

	for (int i = 0; i < g->calls && rc == CFRT_OK; i++)
		rc = gemm_call(C, g, C->c);
	return rc;
}

int
run_ew(Cal *C, void *arg)
{
	const Ew *e = arg;
	cfrt_view a = cfrt_view_contig(C->a, e->t, 1, &e->n);
	cfrt_view b = cfrt_view_contig(C->b, e->t, 1, &e->n);
	cfrt_view c = cfrt_view_contig(C->c, e->t, 1, &e->n);
	int rc = CFRT_OK;

	for (int i = 0; i < e->reps && rc == CFRT_OK; i++)
		rc = cfrt_add(C->ctx, &c, &a, &b);
	return rc;
}

int
run_op(Cal *C, void *arg)
{
	const OpRun *o = arg;
	int64_t d[2] = {o->n / 64, 64};
	cfrt_view a = cfrt_view_contig(C->a, o->t, 2, d), b = cfrt_view_contig(C->b, o->t, 2, d);
	cfrt_view c = cfrt_view_contig(C->c, o->t, 2, d);
	const char *n = ops[o->k].name;

	if (!strcmp(n, "mul")) return cfrt_mul(C->ctx, &c, &a, &b);
	if (!strcmp(n, "gelu")) return cfrt_gelu(C->ctx, &c, &a);
	if (!strcmp(n, "silu")) return cfrt_silu(C->ctx, &c, &a);
	if (!strcmp(n, "relu")) return cfrt_relu(C->ctx, &c, &a);
	if (!strcmp(n, "sigmoid")) return cfrt_sigmoid(C->ctx, &c, &a);
	if (!strcmp(n, "exp")) return cfrt_exp(C->ctx, &c, &a);
	if (!strcmp(n, "gelu_grad")) return cfrt_gelu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "silu_grad")) return cfrt_silu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "relu_grad")) return cfrt_relu_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "sigmoid_grad")) return cfrt_sigmoid_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "layernorm")) return cfrt_layernorm(C->ctx, &c, &a, NULL, NULL, 1e-5);
	if (!strcmp(n, "rmsnorm")) return cfrt_rmsnorm(C->ctx, &c, &a, NULL, 1e-5);
	if (!strcmp(n, "softmax")) return cfrt_softmax(C->ctx, &c, &a);
	if (!strcmp(n, "softmax_grad")) return cfrt_softmax_grad(C->ctx, &c, &a, &b);
	if (!strcmp(n, "rope")) return cfrt_rope(C->ctx, &c, &a, c.nd - 2, 10000, 0, 0);
	if (!strcmp(n, "swiglu")) return cfrt_swiglu(C->ctx, &c, &a, &b);
	if (!strcmp(n, "swiglu_db")) return cfrt_swiglu_db(C->ctx, &c, &a, &b);
	if (!strcmp(n, "swiglu_da")) { /* its third operand: a's second quarter */
		cfrt_view a2 = cfrt_view_contig((char *)C->a + o->n * cfrt_dtype_size(o->t), o->t, 2, d);
		return cfrt_swiglu_da(C->ctx, &c, &a, &b, &a2);
	}
	/* the heads: a copy between [S, H*Dh] and [H, S, Dh], runs of Dh
	 * elements, as the generated code moves them (GPU: bench-gpu's 128;
	 * CPU: make bench's 64); from a into c, as the others */
	int64_t Dh = C->gpu ? 128 : 64, H = C->gpu ? 8 : 4, S = o->n / (H * Dh);
	int split = !strcmp(n, "split_heads");
	cfrt_view rows = cfrt_view_heads(cfrt_view_contig(split ? C->a : C->c, o->t, 2,
	                                                  (int64_t[]){S, H * Dh}), H);
	cfrt_view heads = cfrt_view_contig(split ? C->c : C->a, o->t, 3, (int64_t[]){H, S, Dh});
	return split ? cfrt_copy(C->ctx, &heads, &rows) : cfrt_copy(C->ctx, &rows, &heads);
}

int
run_attn(Cal *C, void *arg)
{
	const Attn *x = arg;
	/* [B, H, S, Dh] in a run, as the generated code passes them: its
	 * split_heads copies each head's rows together. It timed views of
	 * [B, S, H*Dh] before: 4 H100s read causal bf16 at 4096 keys at 480
	 * TFLOP/s (lease 11), which prices bench-gpu's case c attention at
	 * 1.139 ms; traced in lease 10, it ran in 0.852 (645 TFLOP/s) */
	cfrt_view q = cfrt_view_contig(C->a, x->t, 4, x->dims);
	cfrt_view k = q, v = q, o = q;

	k.p = C->b;
	v.p = (char *)C->b + C->cap / 2;
	o.p = C->c;
	return cfrt_attention(C->ctx, &o, &q, &k, &v, x->causal, 0);
}

/* The backward from a saved log-sum-exp, as the generated backward calls
 * it (dq, dk and dv by a call each): q, out, dout and the lse in a, k and
 * v in b, dq, dk and dv in c. */
int
run_attn_grad(Cal *C, void *arg)
{
	Attn *x = arg;
	int64_t B = x->dims[0], H = x->dims[1], S = x->dims[2], Dh = x->dims[3];
	size_t sz = (size_t)(B * H * S * Dh) * cfrt_dtype_size(x->t);
	cfrt_view q = cfrt_view_contig(C->a, x->t, 4, x->dims); /* as run_attn's */
	cfrt_view k = q, v = q, o = q, dout = q, dq = q, dk = q, dv = q;
	cfrt_view lse = {(char *)C->a + 3 * sz, CFRT_LSE_TYPE(x->t), 3, {B, H, S},
	                 {H * S, S, 1}};

	o.p = (char *)C->a + sz;
	dout.p = (char *)C->a + 2 * sz;
	k.p = C->b;
	v.p = (char *)C->b + sz;
	dq.p = C->c;
	dk.p = (char *)C->c + sz;
	dv.p = (char *)C->c + 2 * sz;
	if (!x->lse_ready) {
		int rc = cfrt_attention_lse(C->ctx, &o, &lse, &q, &k, &v, x->causal, 0);
		if (rc != CFRT_OK)
			return rc;
		x->lse_ready = 1;
	}
	/* one call per gradient, as the generated backward calls it (each is
	 * a node of its own, which the proof and the schedules place apart) */
	int rc = cfrt_attention_grad_lse(C->ctx, &dq, NULL, NULL, &q, &k, &v, &o, &dout, &lse,
	                                 x->causal, 0);
	if (rc == CFRT_OK)
		rc = cfrt_attention_grad_lse(C->ctx, NULL, &dk, NULL, &q, &k, &v, &o, &dout, &lse,
		                             x->causal, 0);
	if (rc == CFRT_OK)
		rc = cfrt_attention_grad_lse(C->ctx, NULL, NULL, &dv, &q, &k, &v, &o, &dout, &lse,
		                             x->causal, 0);
	return rc;
}
