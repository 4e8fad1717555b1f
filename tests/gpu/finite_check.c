/* finite_check: CFRT_CHECK=finite through the runtime's API alone, on one
 * rank. A NaN or an Inf planted in an input (or made by an overflow) must
 * fail the first compute call that writes one with CFRT_ENONFINITE and the
 * message "rank 0: op OP step S: CALL: CFRT_CHECK=finite: the Nth result
 * of WHAT (slice L) holds a NaN|+Inf|-Inf at element I of N: the first op
 * that made one on this rank", the element counted row-major over the
 * written view's dims (a column slice of a wider buffer: its other
 * columns, which hold a NaN, are not looked at); a run of finite values
 * must pass every call, and without the setting nothing is checked. Each
 * case runs on a context of its own in error mode return (a failed
 * context stays failed). Prints "finite_check: CASE: ok" (or MISMATCH
 * with what came instead) per case, then "finite_check: PASS" or
 * "finite_check: FAIL (N of M cases)"; exits 1 on any failure.
 *   finite_check         the MPI backend: f32 and f64 (tests/t-finite.sh)
 *   finite_check --gpu   the CUDA backend: bf16 too (tests/gpu/run.sh)
 * Run it under mpirun -n 1. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfrt.h"

static int ncase, nbad;

/* A device tensor of n elements of type t, from the doubles in h. */
static void *
dev_of(cfrt_ctx *ctx, cfrt_dtype t, const double *h, int64_t n)
{
	size_t es = cfrt_dtype_size(t);
	unsigned char *b = malloc((size_t)n * es);
	void *p = NULL;
	if (!b)
		abort();
	for (int64_t i = 0; i < n; i++) {
		if (t == CFRT_F64) {
			memcpy(b + i * 8, &h[i], 8);
		} else {
			float f = (float)h[i];
			uint32_t u;
			memcpy(&u, &f, 4);
			if (t == CFRT_F32) {
				memcpy(b + i * 4, &f, 4);
			} else { /* bf16: the high half, rounded to nearest even
			          * (a NaN or an Inf stays one) */
				uint16_t s = (uint16_t)(isfinite(f) ?
				             (u + 0x7fffu + ((u >> 16) & 1u)) >> 16 : u >> 16);
				if (isnan(f))
					s |= 0x40;
				memcpy(b + i * 2, &s, 2);
			}
		}
	}
	CFRT_TRY(ctx, cfrt_alloc(ctx, &p, (size_t)n * es));
	CFRT_TRY(ctx, cfrt_upload(ctx, p, b, (size_t)n * es));
	free(b);
	return p;
}

/* n doubles of a small pattern in [-1, 1), with x at index at (-1: none). */
static double *
values(int64_t n, int64_t at, double x)
{
	double *h = malloc((size_t)n * sizeof *h);
	if (!h)
		abort();
	for (int64_t i = 0; i < n; i++)
		h[i] = (double)((i * 37 + 11) % 64) / 32.0 - 1.0;
	if (at >= 0)
		h[at] = x;
	return h;
}

/* A contiguous device tensor of dims (nd of them) holding values(), x at
 * at; its view in *v. */
static void *
tensor(cfrt_ctx *ctx, cfrt_dtype t, int nd, const int64_t *dims, int64_t at,
       double x, cfrt_view *v)
{
	int64_t n = 1;
	for (int d = 0; d < nd; d++)
		n *= dims[d];
	double *h = values(n, at, x);
	void *p = dev_of(ctx, t, h, n);
	free(h);
	*v = cfrt_view_contig(p, t, nd, dims);
	return p;
}

static cfrt_ctx *
open_ctx(int check)
{
	cfrt_ctx *ctx;
	cfrt_opts o = {CFRT_OPT_ERRORS, NULL, NULL, CFRT_ERRORS_RETURN, 0};
	int one = 1;
	if (check)
		setenv("CFRT_CHECK", "finite", 1);
	else
		unsetenv("CFRT_CHECK");
	CFRT_TRY(NULL, cfrt_init_opts(&ctx, MPI_COMM_WORLD, 1, &one, "finite_check", &o));
	return ctx;
}

/* The case's verdict: status rc and message msg against want (CFRT_OK: no
 * message) and the message wanted, whole. */
static void
verdict(const char *name, int rc, const char *msg, int want, const char *wmsg)
{
	int ok = rc == want && (want == CFRT_OK || strcmp(msg, wmsg) == 0);
	ncase++;
	if (ok) {
		printf("finite_check: %s: ok\n", name);
		return;
	}
	nbad++;
	printf("finite_check: %s: MISMATCH\n  status %d (want %d)\n  got  \"%s\"\n"
	       "  want \"%s\"\n", name, rc, want, msg, want == CFRT_OK ? "" : wmsg);
}

/* A call's status as generated code passes it on (CFRT_PROPAGATE): a
 * failure marks the context failed and puts "rank R: op OP step S: "
 * before its message. */
static int
gen(cfrt_ctx *ctx, int rc)
{
	return rc == CFRT_OK ? rc : cfrt_raise(ctx, rc);
}

static const char *const TAIL = ": the first op that made one on this rank";

/* A NaN at element 13 of a [4, 8] input, copied: the copy names it. */
static void
copy_nan(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	cfrt_view x, y;
	int64_t dims[2] = {4, 8};
	void *px = tensor(ctx, t, 2, dims, 13, NAN, &x);
	void *py = tensor(ctx, t, 2, dims, -1, 0, &y);
	cfrt_where(ctx, "xa", 0);
	cfrt_what(ctx, "xa = x", 0);
	int rc = gen(ctx, cfrt_copy(ctx, &y, &x));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op xa step 0: cfrt_copy: CFRT_CHECK=finite: the "
	         "result of xa = x (slice 0) holds a NaN at element 13 of 32%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	cfrt_free(ctx, px);
	cfrt_free(ctx, py);
	cfrt_finalize(ctx);
}

/* dst a column slice (columns 1..4) of a [3, 6] buffer whose column 5 holds
 * a NaN (not dst's: not looked at); 2 * src with +Inf at src's (2, 2):
 * element 10 of dst's 12. */
static void
scale_strided_inf(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	cfrt_view src, whole;
	int64_t sd[2] = {3, 4}, wd[2] = {3, 6};
	void *ps = tensor(ctx, t, 2, sd, 10, INFINITY, &src);
	void *pw = tensor(ctx, t, 2, wd, 5, NAN, &whole);
	cfrt_view dst = cfrt_view_slice(whole, 1, 1, 4);
	cfrt_where(ctx, "h", 1);
	cfrt_what(ctx, "h = 2 * t", -1);
	int rc = gen(ctx, cfrt_scale(ctx, &dst, &src, 2.0));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op h step 1: cfrt_scale: CFRT_CHECK=finite: the "
	         "result of h = 2 * t holds +Inf at element 10 of 12%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	cfrt_free(ctx, ps);
	cfrt_free(ctx, pw);
	cfrt_finalize(ctx);
}

/* A matmul of finite operands that overflows f32: [2, 3] of 1e20 times
 * [3, 2] of -1e20, every element -3e40: -Inf at element 0 of 4. */
static void
matmul_overflow(const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	double ha[6], hb[6];
	for (int i = 0; i < 6; i++) {
		ha[i] = 1e20;
		hb[i] = -1e20;
	}
	int64_t ad[2] = {2, 3}, bd[2] = {3, 2}, cd[2] = {2, 2};
	void *pa = dev_of(ctx, CFRT_F32, ha, 6), *pb = dev_of(ctx, CFRT_F32, hb, 6);
	cfrt_view a = cfrt_view_contig(pa, CFRT_F32, 2, ad);
	cfrt_view b = cfrt_view_contig(pb, CFRT_F32, 2, bd);
	cfrt_view c;
	void *pc = tensor(ctx, CFRT_F32, 2, cd, -1, 0, &c);
	cfrt_where(ctx, "p", 2);
	cfrt_what(ctx, "p = matmul(h, w2)", 1);
	int rc = gen(ctx, cfrt_matmul(ctx, &c, &a, &b, 1.0, 0.0));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op p step 2: cfrt_matmul: CFRT_CHECK=finite: the "
	         "result of p = matmul(h, w2) (slice 1) holds -Inf at element 0 of 4%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	cfrt_free(ctx, pa);
	cfrt_free(ctx, pb);
	cfrt_free(ctx, pc);
	cfrt_finalize(ctx);
}

/* attention over [1, 2, 4, 8] with a NaN at q[0, 1, 2, 3]: row 2 of head 1
 * of the result is NaN, element (1 * 4 + 2) * 8 = 48 of 64. */
static void
attention_nan(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	int64_t d[4] = {1, 2, 4, 8};
	cfrt_view q, k, v, o;
	void *pq = tensor(ctx, t, 4, d, (1 * 4 + 2) * 8 + 3, NAN, &q);
	void *pk = tensor(ctx, t, 4, d, -1, 0, &k);
	void *pv = tensor(ctx, t, 4, d, -1, 0, &v);
	void *po = tensor(ctx, t, 4, d, -1, 0, &o);
	cfrt_where(ctx, "o", 0);
	cfrt_what(ctx, "o = attention(q, k, v)", -1);
	int rc = gen(ctx, cfrt_attention(ctx, &o, &q, &k, &v, 0, 0));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op o step 0: cfrt_attention: CFRT_CHECK=finite: "
	         "the result of o = attention(q, k, v) holds a NaN at element 48 of 64%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	void *p[4] = {pq, pk, pv, po};
	for (int i = 0; i < 4; i++)
		cfrt_free(ctx, p[i]);
	cfrt_finalize(ctx);
}

/* The attention backward without dq, dout with a NaN at [0, 0, 1, 2]: dk
 * (the 2nd result) is NaN from its first element on (every key's row sums
 * over query row 1). */
static void
attention_grad_nan(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	int64_t d[4] = {1, 2, 4, 8};
	cfrt_view q, k, v, o, dout, dk, dv;
	void *p[7];
	p[0] = tensor(ctx, t, 4, d, -1, 0, &q);
	p[1] = tensor(ctx, t, 4, d, -1, 0, &k);
	p[2] = tensor(ctx, t, 4, d, -1, 0, &v);
	p[3] = tensor(ctx, t, 4, d, -1, 0, &o);
	p[4] = tensor(ctx, t, 4, d, 1 * 8 + 2, NAN, &dout);
	p[5] = tensor(ctx, t, 4, d, -1, 0, &dk);
	p[6] = tensor(ctx, t, 4, d, -1, 0, &dv);
	CFRT_TRY(ctx, cfrt_attention(ctx, &o, &q, &k, &v, 0, 0));
	cfrt_where(ctx, "d_k", 3);
	cfrt_what(ctx, "d_k = attention_dk(q, k, v, o, d_o)", -1);
	int rc = gen(ctx, cfrt_attention_grad(ctx, NULL, &dk, &dv, &q, &k, &v, &o, &dout, 0, 0));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op d_k step 3: cfrt_attention_grad: "
	         "CFRT_CHECK=finite: the 2nd result of d_k = attention_dk(q, k, v, o, d_o) "
	         "holds a NaN at element 0 of 64%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	for (int i = 0; i < 7; i++)
		cfrt_free(ctx, p[i]);
	cfrt_finalize(ctx);
}

/* bf16 a + b with -Inf at element 20 of a [5, 7] a (CUDA only). */
static void
add_bf16_inf(const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	int64_t d[2] = {5, 7};
	cfrt_view a, b, c;
	void *pa = tensor(ctx, CFRT_BF16, 2, d, 20, -INFINITY, &a);
	void *pb = tensor(ctx, CFRT_BF16, 2, d, -1, 0, &b);
	void *pc = tensor(ctx, CFRT_BF16, 2, d, -1, 0, &c);
	cfrt_where(ctx, "r", 0);
	cfrt_what(ctx, "r = add(a, b)", -1);
	int rc = gen(ctx, cfrt_add(ctx, &c, &a, &b));
	char want[256];
	snprintf(want, sizeof want, "rank 0: op r step 0: cfrt_add: CFRT_CHECK=finite: the "
	         "result of r = add(a, b) holds -Inf at element 20 of 35%s", TAIL);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_ENONFINITE, want);
	cfrt_free(ctx, pa);
	cfrt_free(ctx, pb);
	cfrt_free(ctx, pc);
	cfrt_finalize(ctx);
}

/* Finite values through copy, scale, matmul, attention and its backward,
 * add, and a view of no element: every call passes. */
static void
all_finite(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(1);
	int64_t d4[4] = {1, 2, 4, 8}, d2[2] = {8, 8};
	cfrt_view q, k, v, o, dq, dk, dv, a, b, c, z;
	void *p[11];
	p[0] = tensor(ctx, t, 4, d4, -1, 0, &q);
	p[1] = tensor(ctx, t, 4, d4, -1, 0, &k);
	p[2] = tensor(ctx, t, 4, d4, -1, 0, &v);
	p[3] = tensor(ctx, t, 4, d4, -1, 0, &o);
	p[4] = tensor(ctx, t, 4, d4, -1, 0, &dq);
	p[5] = tensor(ctx, t, 4, d4, -1, 0, &dk);
	p[6] = tensor(ctx, t, 4, d4, -1, 0, &dv);
	p[7] = tensor(ctx, t, 2, d2, -1, 0, &a);
	p[8] = tensor(ctx, t, 2, d2, -1, 0, &b);
	p[9] = tensor(ctx, t, 2, d2, -1, 0, &c);
	p[10] = tensor(ctx, t, 2, d2, -1, 0, &z);
	z.dim[0] = 0;
	int rc = cfrt_copy(ctx, &c, &a);
	if (rc == CFRT_OK)
		rc = cfrt_scale(ctx, &c, &c, 3.0);
	if (rc == CFRT_OK)
		rc = cfrt_matmul(ctx, &c, &a, &b, 1.0, 1.0);
	if (rc == CFRT_OK)
		rc = cfrt_add(ctx, &c, &c, &b);
	if (rc == CFRT_OK)
		rc = cfrt_attention(ctx, &o, &q, &k, &v, 1, 0);
	if (rc == CFRT_OK)
		rc = cfrt_attention_grad(ctx, &dq, &dk, &dv, &q, &k, &v, &o, &v, 1, 0);
	if (rc == CFRT_OK)
		rc = cfrt_copy(ctx, &z, &z);
	verdict(name, rc, cfrt_last_error(ctx), CFRT_OK, "");
	for (int i = 0; i < 11; i++)
		cfrt_free(ctx, p[i]);
	cfrt_finalize(ctx);
}

/* Without CFRT_CHECK the NaN is copied and nothing is said. */
static void
unchecked(cfrt_dtype t, const char *name)
{
	cfrt_ctx *ctx = open_ctx(0);
	cfrt_view x, y;
	int64_t dims[2] = {4, 8};
	void *px = tensor(ctx, t, 2, dims, 13, NAN, &x);
	void *py = tensor(ctx, t, 2, dims, -1, 0, &y);
	int rc = gen(ctx, cfrt_copy(ctx, &y, &x));
	verdict(name, rc, cfrt_last_error(ctx), CFRT_OK, "");
	cfrt_free(ctx, px);
	cfrt_free(ctx, py);
	cfrt_finalize(ctx);
}

int
main(int argc, char **argv)
{
	int gpu = argc > 1 && !strcmp(argv[1], "--gpu");
	MPI_Init(&argc, &argv);
	copy_nan(CFRT_F32, "copy f32 NaN");
	copy_nan(CFRT_F64, "copy f64 NaN");
	scale_strided_inf(CFRT_F32, "scale f32 into a column slice +Inf");
	scale_strided_inf(CFRT_F64, "scale f64 into a column slice +Inf");
	matmul_overflow("matmul f32 overflow -Inf");
	attention_nan(CFRT_F32, "attention f32 NaN");
	attention_grad_nan(CFRT_F32, "attention_grad f32 NaN in dk, the 2nd result");
	all_finite(CFRT_F32, "f32 all finite, no call fails");
	unchecked(CFRT_F32, "f32 without CFRT_CHECK, nothing checked");
	if (gpu) {
		copy_nan(CFRT_BF16, "copy bf16 NaN");
		scale_strided_inf(CFRT_BF16, "scale bf16 into a column slice +Inf");
		attention_nan(CFRT_BF16, "attention bf16 NaN");
		add_bf16_inf("add bf16 -Inf");
		all_finite(CFRT_BF16, "bf16 all finite, no call fails");
	}
	if (nbad)
		printf("finite_check: FAIL (%d of %d cases)\n", nbad, ncase);
	else
		printf("finite_check: PASS (%d cases)\n", ncase);
	MPI_Finalize();
	return nbad ? 1 : 0;
}
