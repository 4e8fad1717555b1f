/* Unit tests of the cost model: the profile reader (profile.c) accepts
 * a whole profile and refuses malformed, truncated and wrong-version
 * ones with "file:line:col: error:"; the lookups interpolate as
 * documented; the predictor (predict.c) gives the exact expected times on
 * synthetic profiles (pure compute, pure transfer, perfect overlap, a
 * transfer-bound ring, compute slowed by transfers, a library
 * collective); auto takes the candidate the predictor ranks first. */
#include <math.h>

#include "predict.h"
#include "sched_test.h"

/* Parses text as profile "t.prof"; the diagnostics in *err (malloc'd). */
static Profile *
pf_parse(Arena *a, const char *text, char **err)
{
	static Src src;
	size_t len;
	Diag d;
	FILE *ef = open_memstream(err, &len);

	src = (Src){"t.prof", text, strlen(text)};
	diag_init(&d, &src, ef);
	Profile *pf = profile_parse(a, &d, &src);
	fclose(ef);
	return pf;
}

static void
rejects(const char *text, const char *want)
{
	Arena *a = arena_new();
	char *err = NULL;

	CU_ASSERT_PTR_NULL(pf_parse(a, text, &err));
	if (!err || !strstr(err, want))
		fprintf(stderr, "\nwanted '%s' in: %s\n", want, err ? err : "(nothing)");
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, want));
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "t.prof:"));
	free(err);
	arena_free(a);
}

#define HEAD "cfprofile 1\nbackend synthetic\nranks 4\n"

static void
test_reader(void)
{
	Arena *a = arena_new();
	char *err = NULL;
	Profile *pf = pf_parse(a, "# a comment\ncfprofile 1   # the version\nbackend mpi+openblas\n"
	                       "transfer mpi\nranks 2\ngemm f32 64 64 64 1e-4\ngemm f32 16 16 16 2e-6\n"
	                       "ew f32 1e10\nattn f64 256 5e9\nattn f64 64 2e9\np2p 2 4096 3e-6\np2p 2 1024 1e-6\n"
	                       "coll all_gather 1024 4e-6\nslowdown 1.25\nend\n", &err);

	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_STRING_EQUAL(pf->backend, "mpi+openblas");
	CU_ASSERT_STRING_EQUAL(pf->transfer, "mpi");
	CU_ASSERT_EQUAL(pf->ranks, 2);
	CU_ASSERT_EQUAL(pf->gemm[DT_F32].n, 2);
	CU_ASSERT_EQUAL(pf->gemm[DT_F32].p[0].m, 16); /* sorted */
	CU_ASSERT_EQUAL(pf->p2p[1].n, 2);
	CU_ASSERT_EQUAL(pf->p2p[1].p[0].k, 1024);
	CU_ASSERT_EQUAL(pf->p2p[0].n, 0);
	CU_ASSERT_DOUBLE_EQUAL(pf->ew[DT_F32], 1e10, 1);
	CU_ASSERT_EQUAL(pf->attn[0][DT_F64].n, 2);
	/* attention's rate by key length: linear between, constant past */
	CU_ASSERT_DOUBLE_EQUAL(profile_rate(&pf->attn[0][DT_F64], 160), 3.5e9, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_rate(&pf->attn[0][DT_F64], 32), 2e9, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_rate(&pf->attn[0][DT_F64], 4096), 5e9, 1);
	CU_ASSERT_DOUBLE_EQUAL(pf->slowdown, 1.25, 1e-12);
	CU_ASSERT_EQUAL(pf->coll[profile_coll_index(OP_ALL_GATHER)].n, 1);
	CU_ASSERT_EQUAL(pf->defer_sd, 0); /* no entry */
	free(err);
	err = NULL;
	pf = pf_parse(a, HEAD "defer 0.75 1.125\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(pf->defer_ov, 0.75, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(pf->defer_sd, 1.125, 1e-12);
	free(err);
	arena_free(a);

	rejects("", "empty");
	rejects("# only a comment\n", "empty");
	rejects("backend x\n", "t.prof:1:1: error: not a cfrt-calibrate profile");
	rejects("cfprofile 2\nbackend x\nranks 1\nend\n", "t.prof:1:1: error: profile version 2, "
	        "but this cfc reads version 1");
	rejects(HEAD "gemm f32 64 64 64 1e-4\n", "truncated: the profile has no 'end' line");
	rejects(HEAD "gemm f32 64 64", "t.prof:4:15: error: expected k");
	rejects(HEAD "gemm f32 64 64 64 -1\nend\n", "t.prof:4:19: error: seconds must be a "
	        "positive number, not '-1'");
	rejects(HEAD "gemm f32 64 6.5 64 1\nend\n", "n must be a whole positive number");
	rejects(HEAD "gemm f8 64 64 64 1\nend\n", "t.prof:4:6: error: expected an element type");
	rejects(HEAD "p2p 3 64 1\nend\n", "t.prof:4:5: error: transfers at once must be 1, 2 or 4");
	rejects(HEAD "coll broadcast 64 1\nend\n", "expected a collective");
	rejects(HEAD "gpus 4\nend\n", "t.prof:4:1: error: unknown entry 'gpus'");
	rejects(HEAD "ew f32 1024 1e10 7\nend\n", "t.prof:4:18: error: unexpected '7'");
	rejects(HEAD "ew f32 nan\nend\n", "bytes per second must be a positive number");
	rejects(HEAD "end\nranks 2\n", "t.prof:5:1: error: 'ranks' after the end line");
	rejects("cfprofile 1\nranks 4\nend\n", "the profile names no backend");
	rejects(HEAD "p2p 1 64 1\np2p 1 64 2\nend\n", "t.prof:5:1: error: this p2p point repeats "
	        "the one of line 4");
	rejects(HEAD "slowdown 0.5\nend\n", "t.prof:4:10: error: the slowdown factor must be at "
	        "least 1");
	rejects(HEAD "slowdown 3 1.5\nend\n", "t.prof:4:10: error: transfers at once must be 1, "
	        "2 or 4, not 3");
	rejects(HEAD "slowdown 4 0.9\nend\n", "t.prof:4:12: error: the slowdown factor must be "
	        "at least 1");
	rejects(HEAD "slowdown 4 1.5\nslowdown 4 1.6\nend\n", "t.prof:5:1: error: a second "
	        "slowdown while 4 transfers run");
	rejects(HEAD "slowdown 4 1.5 2\nend\n", "t.prof:4:16: error: unexpected '2'");
	rejects(HEAD "op f32 matmul 1e9\nend\n", "t.prof:4:8: error: expected an op of the language");
	rejects(HEAD "overlap 1.5\nend\n", "t.prof:4:9: error: the overlap fraction must be at most 1");
	rejects(HEAD "overlap_coll all_gather 2\nend\n", "t.prof:4:25: error: the overlap "
	        "fraction must be at most 1");
	rejects(HEAD "overlap_coll gather 0.5\nend\n", "t.prof:4:14: error: expected a "
	        "collective");
	rejects(HEAD "defer 1.5 1.2\nend\n", "t.prof:4:7: error: the overlap fraction must be at "
	        "most 1");
	rejects(HEAD "defer 0.5 0.9\nend\n", "t.prof:4:11: error: the slowdown factor must be at "
	        "least 1");
	rejects(HEAD "defer 0.5\nend\n", "t.prof:4:10: error: expected the slowdown factor");
	rejects(HEAD "defer 0.5 1.1\ndefer 0.6 1.2\nend\n", "t.prof:5:1: error: a second defer "
	        "entry");
	rejects(HEAD "ew f32 100.5 1e9\nend\n", "t.prof:4:8: error: the bytes of an ew point must be "
	        "a whole number");
	rejects(HEAD "ew f32 100 1e9\new f32 100 2e9\nend\n", "t.prof:5:1: error: this ew point "
	        "repeats the one of line 4");
	rejects(HEAD "ew f32 100 -1\nend\n", "bytes per second must be a positive number");
	rejects(HEAD "clock 1.5 0.9\nend\n", "t.prof:4:7: error: the busy share must be at most 1");
	rejects(HEAD "clock 0.5 0\nend\n", "the time factor must be a positive number");
	rejects(HEAD "clock 0.5 0.9\nclock 0.5 0.8\nend\n", "t.prof:5:1: error: this clock "
	        "point repeats the one of line 4");
	rejects(HEAD "gemm_acc f32 64 64 64 1\ngemm_acc f32 64 64 64 2\nend\n", "t.prof:5:1: error: "
	        "this gemm_acc point repeats the one of line 4");
	rejects(HEAD "gemm_acc f32 64 64\nend\n", "t.prof:4:19: error: expected k");
	rejects(HEAD "batch strided\nend\n", "t.prof:4:7: error: expected how a batched matmul "
	        "runs: 'loop'");
}

static void
test_lookup(void)
{
	Arena *a = arena_new();
	char *err = NULL;
	Profile *pf = pf_parse(a, HEAD "gemm f32 64 64 64 1e-3\ngemm f32 128 128 128 4e-3\n"
	                       "p2p 1 1000 1e-6\np2p 1 3000 2e-6\ngemm f64 10 10 10 2e-6\n"
	                       "p2p 2 1000 1e-3\nend\n", &err);

	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	/* a measured shape exactly; between two, a rate between theirs */
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F32], 64, 64, 64), 1e-3, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F32], 128, 128, 128), 4e-3, 1e-15);
	double t = profile_gemm(&pf->gemm[DT_F32], 90, 90, 90), fl = 2.0 * 90 * 90 * 90;
	double r64 = 2.0 * 64 * 64 * 64 / 1e-3, r128 = 2.0 * 128 * 128 * 128 / 4e-3;
	CU_ASSERT(fl / t > r64 && fl / t < r128);
	/* past the largest size of a dimension: the rate at that size (the
	 * weights of every point would blend in the smaller one's) */
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F32], 1024, 128, 128), 8 * 4e-3, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F32], 1024, 1024, 1024), 512 * 4e-3,
	                       1e-12);
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F32], 90, 90, 4096),
	                       32 * profile_gemm(&pf->gemm[DT_F32], 90, 90, 128), 1e-15);
	/* one point: its rate for every shape */
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_F64], 20, 30, 40), 2e-6 * 24, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_gemm(&pf->gemm[DT_BF16], 1, 1, 1), -1, 0);
	/* transfers: the latency below the first point, linear between, the
	 * last slope past the last; one point: proportional */
	CU_ASSERT_DOUBLE_EQUAL(profile_bytes(&pf->p2p[0], 10), 1e-6, 1e-18);
	CU_ASSERT_DOUBLE_EQUAL(profile_bytes(&pf->p2p[0], 2000), 1.5e-6, 1e-18);
	CU_ASSERT_DOUBLE_EQUAL(profile_bytes(&pf->p2p[0], 5000), 3e-6, 1e-18);
	CU_ASSERT_DOUBLE_EQUAL(profile_bytes(&pf->p2p[1], 500), 0.5e-3, 1e-15);
	free(err);
	arena_free(a);

	/* the slowdown by transfers at once: the largest count given at or
	 * below it, else the plain one (1 without it) */
	a = arena_new();
	pf = pf_parse(a, HEAD "slowdown 4 2\nslowdown 1.5\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 1), 1.5, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 3), 1.5, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 4), 2, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 7), 2, 0);
	free(err);
	pf = pf_parse(a, HEAD "slowdown 2 1.2\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 1), 1, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 2), 1.2, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_slowdown(pf, 5), 1.2, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.5), 1, 0); /* no table */
	free(err);
	/* the clock: linear between the points and on to 1 at 1, the
	 * first point's below it */
	pf = pf_parse(a, HEAD "clock 0.8 0.9\nclock 0.4 0.7\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.2), 0.7, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.6), 0.8, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.9), 0.95, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 1), 1, 0);
	free(err);
	/* with a point at 1 (busy all the time, against the GEMM points):
	 * linear on to it */
	pf = pf_parse(a, HEAD "clock 1 1.2\nclock 0.5 0.9\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 1), 1.2, 0);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.75), 1.05, 1e-15);
	CU_ASSERT_DOUBLE_EQUAL(profile_clock(pf, 0.25), 0.9, 1e-15);
	free(err);
	arena_free(a);

	/* ew: one rate for every size, or by bytes (linear between the
	 * points, constant past them), which replaces the one rate */
	a = arena_new();
	pf = pf_parse(a, HEAD "ew f32 5e9\new f64 4000 8e9\new f64 1000 2e10\new f64 3e9\n"
	              "ew f64 1000000 6e9\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(profile_ew(pf, DT_F32, 100), 5e9, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_ew(pf, DT_F32, 1e9), 5e9, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_ew(pf, DT_F64, 10), 2e10, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_ew(pf, DT_F64, 2500), 1.4e10, 1);
	CU_ASSERT_DOUBLE_EQUAL(profile_ew(pf, DT_F64, 1e8), 6e9, 1);
	CU_ASSERT(profile_ew(pf, DT_BF16, 100) <= 0);
	free(err);
	arena_free(a);

	/* adding to the output: per byte of it, the median of the points'
	 * time over the gemm table's at their shape (a point under it counts
	 * 0): 16 x 16 f32 is 1024 bytes; 1, 3 and -1 us more */
	a = arena_new();
	pf = pf_parse(a, HEAD "gemm f32 16 16 16 4e-6\ngemm_acc f32 16 16 16 5e-6\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(pf->acc[DT_F32], 1e-6 / 1024, 1e-20);
	CU_ASSERT_DOUBLE_EQUAL(pf->acc[DT_F64], 0, 0); /* no points */
	free(err);
	arena_free(a);
	a = arena_new();
	pf = pf_parse(a, HEAD "gemm f32 16 16 16 4e-6\ngemm f32 32 16 16 8e-6\n"
	              "gemm_acc f32 16 16 16 5e-6\ngemm_acc f32 32 16 16 11e-6\n"
	              "gemm_acc f32 16 16 64 3e-6\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	/* 16x16x64 is 64 us at the table's rate: under it, 0; the median
	 * of 0, 1e-6 / 1024 and 3e-6 / 2048 */
	CU_ASSERT_DOUBLE_EQUAL(pf->acc[DT_F32], 1e-6 / 1024, 1e-20);
	free(err);
	arena_free(a);
}

/* The all_gather of 4 slices of [16, 32] f32 (2048 bytes each) with the
 * [16, 32] @ [32, 16] matmul of each slice when mm. */
static const char *
ag_spec(const char *kind, int mm)
{
	static char buf[512];

	snprintf(buf, sizeof buf, "model ag {\n size S = 64, D = 32, F = 16;\n group tp = 4;\n"
	         " type f32;\n in x : [S, D] split S over tp;\n weight w : [D, F];\n"
	         " xa = all_gather(x, S);\n%s schedule { default %s; }\n}\n",
	         mm ? " y = xa @ w;\n out y;\n" : " out xa;\n", kind);
	return buf;
}

/* The prediction of collective xa of s on profile text (spans too). */
static Prediction
xa_predict(SRun *r, const Sched *s, const char *text)
{
	char *err = NULL;
	Profile *pf = pf_parse(r->a, text, &err);

	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	free(err);
	Prediction pr = predict_coll(r->a, s->g, st_coll(s, "xa"), pf, 1);
	CU_ASSERT_PTR_NULL(pr.err);
	return pr;
}

/* The prediction of the all_gather of ag_spec under kind on a profile
 * where a slice's copy takes 1 us, its matmul tc us and its transfer x us
 * (one at a time or several), compute under transfers slow times as long,
 * and the library all_gather of 2048-byte blocks lib us (0: none); more:
 * entries added to the profile (ag_time_more: its total in us). */
static Prediction
ag_pred(const char *kind, int mm, double tc, double x, double slow, double lib, double ov,
        double ovc, const char *more)
{
	SRun r;
	Sched *s = st_build(&r, ag_spec(kind, mm), NULL);
	char text[640], ovct[64] = "";

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	if (ovc >= 0)
		snprintf(ovct, sizeof ovct, "overlap_coll all_gather %.17g\n", ovc);
	snprintf(text, sizeof text, HEAD "gemm f32 16 16 32 %.17g\new f32 4.096e9\n"
	         "p2p 1 2048 %.17g\nslowdown %.17g\noverlap %.17g\n%s%s%send\n", tc * 1e-6,
	         x * 1e-6, slow, ov, ovct, more, lib > 0 ? "coll all_gather 2048 LIB\n" : "");
	if (lib > 0) {
		char *at = strstr(text, "LIB");
		char tail[64];
		snprintf(tail, sizeof tail, "%.17g\nend\n", lib * 1e-6);
		strcpy(at, tail);
	}
	Prediction pr = xa_predict(&r, s, text);
	st_done(&r);
	return pr;
}

static double
ag_time_more(const char *kind, int mm, double tc, double x, double slow, double lib, double ov,
             double ovc, const char *more)
{
	return ag_pred(kind, mm, tc, x, slow, lib, ov, ovc, more).total * 1e6;
}

static double
ag_time_ovc(const char *kind, int mm, double tc, double x, double slow, double lib, double ov,
            double ovc)
{
	return ag_time_more(kind, mm, tc, x, slow, lib, ov, ovc, "");
}

static double
ag_time_ov(const char *kind, int mm, double tc, double x, double slow, double lib, double ov)
{
	return ag_time_ovc(kind, mm, tc, x, slow, lib, ov, -1);
}

static double
ag_time(const char *kind, int mm, double tc, double x, double slow, double lib)
{
	return ag_time_ov(kind, mm, tc, x, slow, lib, 1);
}

/* Attention on 64 queries and keys, P = B H Sq Sk Dh = 65536: per unit
 * of P the unmasked call takes 1 ns (attn: 4 flop per unit over 4e9) and
 * the causal one 0.6 ns (attn_causal: 2 over 3.33e9), so every pair
 * costs 0.2 ns and each pair the mask leaves 0.8 ns more; the mask
 * leaves 64 * 65 / 2 of the 64 * 64 pairs. The backward the same from
 * attn_grad (2.5 times the flop). */
static void
test_attn_cost(void)
{
	static const char *spec[] = {
		"model m {\n size B = 1, H = 2, S = 64, Dh = 8;\n type f32;\n"
		" in q : [B, H, S, Dh];\n in k : [B, H, S, Dh];\n in v : [B, H, S, Dh];\n"
		" o = attention(q, k, v, causal);\n out o;\n}\n",
		"model m {\n size B = 1, H = 2, S = 64, Dh = 8;\n type f32;\n"
		" in q : [B, H, S, Dh];\n in k : [B, H, S, Dh];\n in v : [B, H, S, Dh];\n"
		" o = attention(q, k, v);\n out o;\n}\n"};
	const char *prof = HEAD "attn f32 64 4e9\nattn_causal f32 64 3.3333333333333333e9\n"
	                   "attn_grad f32 64 1e10\nattn_grad_causal f32 64 8.3333333333333333e9\nend\n";
	double share = 64.0 * 65 / 2 / (64 * 64), want[] = {65536 * (0.2 + 0.8 * share), 65536};

	for (int c = 0; c < 2; c++) {
		SRun r;
		char *err = NULL;
		Sched *s = st_build(&r, spec[c], NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		Profile *pf = pf_parse(r.a, prof, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
		free(err);
		const Stage *st = s->stages.v[0];
		CU_ASSERT_EQUAL_FATAL(st->kind, ST_COMPUTE);
		CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, st->u.node, pf).total * 1e9, want[c], 1e-6);
		/* the backward from its own rates, a third of the three calls
		 * for each of dq, dk and dv: per unit of P (2.5 / 3) * 4 / 1e10
		 * = 1/3 ns unmasked, (2.5 / 3) * 2 / 8.33e9 = 0.2 ns causal, so
		 * every pair 1/15 ns and each the mask leaves 4/15 ns more (a
		 * grad node prices q and k, its first two inputs, as this one) */
		double gwant = c == 0 ? 65536 * (1.0 / 15 + 4.0 / 15 * share) : 65536 / 3.0;
		for (int g = 0; g < 3; g++) {
			Node dn = *st->u.node;
			dn.op = (OpKind[]){OP_ATTN_DQ, OP_ATTN_DK, OP_ATTN_DV}[g];
			CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, &dn, pf).total * 1e9, gwant, 1e-6);
		}
		st_done(&r);
	}
	/* without a causal rate the mask saves its share of the unmasked time */
	SRun r;
	char *err = NULL;
	Sched *s = st_build(&r, spec[0], NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Profile *pf = pf_parse(r.a, HEAD "attn f32 64 4e9\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	free(err);
	CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, ((Stage *)s->stages.v[0])->u.node, pf).total * 1e9,
	                       65536 * share, 1e-6);
	st_done(&r);
}

/* A batched matmul [2, 64, 32] @ [2, 32, 16] (a matrix each batch
 * entry): on a backend that loops (`batch loop`) two GEMMs of 64 rows,
 * else one call of 128 rows; the profile measured both shapes, so each
 * price is exact. [2, 64, 32] @ [32, 16] (one weight) is one GEMM of 128
 * rows under either (the CPU backend folds it: cfrti_matmul_fold). */
static void
test_batch_cost(void)
{
	const char *spec[] = {
		"model m {\n size B = 2, S = 64, D = 32, F = 16;\n type f32;\n"
		" in x : [B, S, D];\n weight w : [D, F];\n y = x @ w;\n out y;\n}\n",
		"model m {\n size B = 2, S = 64, D = 32, F = 16;\n type f32;\n"
		" in x : [B, S, D];\n weight w : [B, D, F];\n y = x @ w;\n out y;\n}\n"};

	for (int batched = 0; batched < 2; batched++)
		for (int loop = 0; loop < 3; loop++) {
			SRun r;
			char text[256], *err = NULL;
			Sched *s = st_build(&r, spec[batched], NULL);
			CU_ASSERT_PTR_NOT_NULL_FATAL(s);
			snprintf(text, sizeof text,
			         HEAD "%sgemm f32 64 16 32 3e-6\ngemm f32 128 16 32 5e-6\nend\n",
			         (const char *[]){"", "batch one\n", "batch loop\n"}[loop]);
			Profile *pf = pf_parse(r.a, text, &err);
			CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
			free(err);
			CU_ASSERT_EQUAL(pf->batch_loop, loop == 2);
			const Stage *st = s->stages.v[0];
			CU_ASSERT_EQUAL_FATAL(st->kind, ST_COMPUTE);
			CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, st->u.node, pf).total * 1e6,
			                       batched && loop == 2 ? 6 : 5, 1e-9);
			st_done(&r);
		}
}

/* The compute alone (the busiest rank's, no slowdown) in us of the
 * all_gather of spec under kind on profile text. */
static double
plan_compute_us(const char *spec, const char *kind, const char *text)
{
	SRun r;
	Sched *s = st_build(&r, spec, kind);

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	double us = xa_predict(&r, s, text).compute * 1e6;
	st_done(&r);
	return us;
}

/* A row-parallel matmul whose 4 partial sums are reduce-scattered: a
 * rank's [64, 32] @ [32, 16] f32. fuse(ring, m = 2) cuts it into 8
 * slices of 8 rows; each lane's first GEMM writes its buffer and the
 * other three add to what they received (beta = 1), 6 of 8 calls. With
 * 2 us a call, and 1 us more adding to an output of 8 x 16 f32: */
static void
test_acc_cost(void)
{
	const char *spec = "model rs { size S = 64, K = 128, F = 16; group tp = 4; type f32;\n"
	                   " in h : [S, K] split K over tp;\n weight w : [K, F] split K over tp;\n"
	                   " y = reduce_scatter(h @ w, S);\n out y;\n}\n";
	const char *more[] = {"", "gemm_acc f32 8 16 32 3e-6\n"};

	for (int k = 0; k < 2; k++) {
		SRun r;
		char text[256], *err = NULL;
		Sched *s = st_build(&r, spec, "fuse(ring, m = 2)");
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		snprintf(text, sizeof text, HEAD "gemm f32 8 16 32 2e-6\n%sp2p 1 512 1e-6\nend\n",
		         more[k]);
		Profile *pf = pf_parse(r.a, text, &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
		free(err);
		Prediction pr = predict_coll(r.a, s->g, st_coll(s, "y"), pf, 0);
		CU_ASSERT_PTR_NULL(pr.err);
		CU_ASSERT_DOUBLE_EQUAL(pr.compute * 1e6, k ? 8 * 2 + 6 * 1 : 8 * 2, 1e-9);
		st_done(&r);
	}
}

/* The program as its memory plan runs it: a chunk of slices that are not
 * adjacent is one call per slice, and a transfer whose memory is not one
 * run is packed before it is sent and unpacked after its wait, each
 * copy at the ew rate of its size. */
static void
test_plan_cost(void)
{
	/* slice(2) of ag_spec: 8 slices of 8 rows, chunk i is slices i, i+2,
	 * i+4, i+6: four [8, 32] @ [32, 16] calls (2 us each, where one call
	 * of 32 rows would take 4), and the four received blocks of 8 x 32
	 * f32 (1 KiB, 2 KiB copied at 4.096e9 bytes/s: 0.5 us) unpacked
	 * from staging; this rank's block is one run, sent as it is */
	const char *gemms = HEAD "gemm f32 8 16 32 2e-6\ngemm f32 32 16 32 4e-6\n"
	                    "gemm f32 64 16 32 6e-6\new f32 4.096e9\np2p 1 2048 1e-6\n"
	                    "coll all_gather 1024 1e-6\nend\n";
	CU_ASSERT_DOUBLE_EQUAL(plan_compute_us(ag_spec("slice(2)", 1), NULL, gemms),
	                       2 * (4 * 2 + 4 * 0.5), 1e-9);
	/* vanilla: one call of all 64 rows; the received blocks are in rank
	 * order, one run, so nothing is unpacked */
	CU_ASSERT_DOUBLE_EQUAL(plan_compute_us(ag_spec("vanilla", 1), NULL, gemms), 6, 1e-9);

	/* [B, S, D] = [2, 64, 32] split S: a rank's slice [2, 16, 32] is two
	 * runs of 16 rows, so fuse(ring) copies its own slice in (4 KiB,
	 * 8 KiB moved: 2 us), packs each of its three sends and unpacks each
	 * of its three receives (2 us each); vanilla unpacks the four blocks
	 * it receives in staging */
	const char *bsd = "model ag {\n size B = 2, S = 64, D = 32;\n group tp = 4;\n type f32;\n"
	                  " in x : [B, S, D] split S over tp;\n xa = all_gather(x, S);\n out xa;\n}\n";
	const char *copies = HEAD "ew f32 4.096e9\np2p 1 4096 1e-6\ncoll all_gather 4096 1e-6\nend\n";
	CU_ASSERT_DOUBLE_EQUAL(plan_compute_us(bsd, "fuse(ring)", copies), 2 + 3 * 2 + 3 * 2, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(plan_compute_us(bsd, "vanilla", copies), 4 * 2, 1e-9);
}

/* A transfer is priced at the transfers at once at its busier end over
 * its whole time, those that start after it too (the runs repeat until
 * that settles). fuse(bidir) of test_acc_cost's reduce-scatter: each
 * step computes a slice (2 us), posts lane A (a send and a receive of
 * 512 bytes), computes the other (2 us), posts lane B, waits for A.
 * With 1, 2 and 4 at once taking 3, 5 and 9 us: A moves over [2, 10)
 * and B over [4, 12), so over A's time a rank has A's two, and B's two
 * for 6 of its 8 us: 3.5 at once, 5 + (9 - 5) * 1.5 / 2 = 8 us; over
 * B's time the same. The first slice (2 us), three rounds of A (8 us)
 * with the computes between them (2 x 2 us), the last two slices
 * (2 x 2 us): 34 us. Priced at their start (A's first transfer alone,
 * B's at 3 and 4 at once) they took 37. */
static void
test_conc(void)
{
	const char *spec = "model rs { size S = 64, K = 128, F = 16; group tp = 4; type f32;\n"
	                   " in h : [S, K] split K over tp;\n weight w : [K, F] split K over tp;\n"
	                   " y = reduce_scatter(h @ w, S);\n out y;\n}\n";
	SRun r;
	char *err = NULL;
	Sched *s = st_build(&r, spec, "fuse(bidir)");

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Profile *pf = pf_parse(r.a, HEAD "gemm f32 8 16 32 2e-6\new f32 1e12\np2p 1 512 3e-6\n"
	                       "p2p 2 512 5e-6\np2p 4 512 9e-6\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	free(err);
	Prediction pr = predict_coll(r.a, s->g, st_coll(s, "y"), pf, 1);
	CU_ASSERT_PTR_NULL(pr.err);
	CU_ASSERT_DOUBLE_EQUAL(pr.total * 1e6, 34, 1e-6);
	/* the timeline drawn is the one priced: lane A's first send */
	int seen = 0;
	for (int i = 0; i < pr.nspan; i++)
		if (pr.span[i].rank == 0 && !strcmp(pr.span[i].what, "send 0 to rank 1")) {
			CU_ASSERT_DOUBLE_EQUAL(pr.span[i].t0 * 1e6, 2, 1e-6);
			CU_ASSERT_DOUBLE_EQUAL(pr.span[i].t1 * 1e6, 10, 1e-6);
			seen = 1;
		}
	CU_ASSERT(seen);
	/* without the 4-at-once class, more than 2 at once go on along the
	 * line through the 1 and 2 classes (3 and 5 us: 9 at 4, the time
	 * measured above), so the same 34 us; the 2 class's 5 us for them
	 * all gives less */
	pf = pf_parse(r.a, HEAD "gemm f32 8 16 32 2e-6\new f32 1e12\np2p 1 512 3e-6\n"
	              "p2p 2 512 5e-6\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	free(err);
	pr = predict_coll(r.a, s->g, st_coll(s, "y"), pf, 0);
	CU_ASSERT_PTR_NULL(pr.err);
	CU_ASSERT_DOUBLE_EQUAL(pr.total * 1e6, 34, 1e-6);
	st_done(&r);
}

static void
test_predict(void)
{
	/* pure compute: a plain node, bytes over the rate */
	SRun r;
	Sched *s = st_build(&r, "model m {\n size S = 64, D = 32;\n type f32;\n in x : [S, D];\n"
	                    " y = gelu(x);\n out y;\n}\n", NULL);
	char *err = NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	Profile *pf = pf_parse(r.a, HEAD "ew f32 1e9\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	const Stage *st = s->stages.v[0];
	CU_ASSERT_EQUAL_FATAL(st->kind, ST_COMPUTE);
	CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, st->u.node, pf).total, 2 * 64 * 32 * 4 / 1e9, 1e-18);
	free(err);
	/* an op's own rate before ew's */
	pf = pf_parse(r.a, HEAD "ew f32 1e9\nop f32 gelu 2.5e8\nop f32 add 4e9\nend\n", &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
	CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, st->u.node, pf).total, 2 * 64 * 32 * 4 / 2.5e8,
	                       1e-18);
	free(err);
	st_done(&r);
	/* the heads' copies at their own rates, else as any copy by ew */
	s = st_build(&r, "model m {\n size S = 64, D = 32;\n type f32;\n in x : [S, D];\n"
	             " y = merge_heads(split_heads(x, 4));\n out y;\n}\n", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL_FATAL(s->stages.n, 2);
	for (int k = 0; k < 2; k++) {
		const Node *n = ((const Stage *)s->stages.v[k])->u.node;
		double by = 2 * 64 * 32 * 4;
		pf = pf_parse(r.a, HEAD "ew f32 1e9\nop f32 split_heads 2e9\nop f32 merge_heads 4e9\n"
		              "end\n", &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
		CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, n, pf).total,
		                       by / (n->op == OP_SPLIT_HEADS ? 2e9 : 4e9), 1e-18);
		free(err);
		pf = pf_parse(r.a, HEAD "ew f32 1e9\nend\n", &err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
		CU_ASSERT_DOUBLE_EQUAL(predict_node(r.a, n, pf).total, by / 1e9, 1e-18);
		free(err);
	}
	st_done(&r);
	test_attn_cost();

	/* fuse(ring), 4 ranks, each rank: copy its slice (1 us), then per
	 * step post the next transfer and compute a slice */
	const double eps = 1e-9;
	/* pure transfer: three rounds one after another */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("fuse(ring)", 0, 10, 4, 1, 0), 1 + 3 * 4, eps);
	/* perfect overlap: every transfer under a compute */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("fuse(ring)", 1, 10, 4, 1, 0), 1 + 4 * 10, eps);
	/* transfer-bound: each step waits for its slice */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("fuse(ring)", 1, 2, 5, 1, 0), 1 + 3 * 5 + 2, eps);
	/* contention: the three computes under a transfer take 1.5 times as
	 * long, the last (no transfer left) does not */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("fuse(ring)", 1, 10, 4, 1.5, 0), 1 + 3 * 15 + 10, eps);
	/* a slowdown by transfers at once: the ring's steps move two (a send,
	 * a receive), so 'slowdown 2' is the ring's and 'slowdown 4' is not;
	 * fuse(bidir) moves four once both lanes' transfers run (slices of
	 * half the bytes: 10 us each, longer than a lane's compute) */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(ring)", 1, 10, 4, 1, 0, 1, -1, "slowdown 2 1.5\n"),
	                       1 + 3 * 15 + 10, eps);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(ring)", 1, 10, 4, 1.5, 0, 1, -1, "slowdown 4 3\n"),
	                       1 + 3 * 15 + 10, eps);
	double b1 = ag_time("fuse(bidir)", 1, 10, 20, 1.5, 0);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(bidir)", 1, 10, 20, 1.5, 0, 1, -1,
	                                    "slowdown 4 1.5\n"), b1, eps);
	CU_ASSERT(ag_time_more("fuse(bidir)", 1, 10, 20, 1.5, 0, 1, -1, "slowdown 4 3\n") > b1 + 5);
	/* transfers that move only inside MPI calls (overlap 0): each passes
	 * at the wait of the next step, after the compute; the sender's wait
	 * finds it landed */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_ov("fuse(ring)", 1, 10, 4, 1, 0, 0), 1 + 4 * 10 + 3 * 4, eps);
	/* half of it moves under the compute */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_ov("fuse(ring)", 1, 10, 4, 1, 0, 0.25),
	                       1 + 4 * 10 + 3 * (4 - 0.25 * 10 > 0 ? 4 - 2.5 : 0), eps);
	/* deferred transfers (defer: GPUs with NCCL): each starts when the
	 * compute posted right after it ends, so the ring's steps run one
	 * after another, as with overlap 0; its rank waits while it moves,
	 * so neither the defer overlap nor its slowdown counts */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(ring)", 1, 10, 4, 1, 0, 1, -1, "defer 1 1\n"),
	                       1 + 4 * 10 + 3 * 4, eps);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(ring)", 1, 10, 4, 1.5, 0, 1, -1,
	                                    "defer 0.5 2\n"), 1 + 4 * 10 + 3 * 4, eps);
	/* no compute behind a post: nothing to wait for */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("fuse(ring)", 0, 10, 4, 1, 0, 1, -1, "defer 0.5 2\n"),
	                       1 + 3 * 4, eps);
	/* library collectives are not deferred */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("vanilla", 1, 10, 4, 1, 7, 1, -1, "defer 0.5 2\n"),
	                       7 + 4 * 10, eps);
	/* vanilla: the library all_gather, then the whole matmul (four
	 * slices' worth at the measured rate) */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("vanilla", 1, 10, 4, 1, 7), 7 + 4 * 10, eps);
	/* a library collective moves at its overlap_coll (slice's chunks),
	 * the point-to-point transfers at overlap (fuse's) */
	double s0 = ag_time_ov("slice(2)", 1, 10, 4, 1, 30, 0);
	double s1 = ag_time_ov("slice(2)", 1, 10, 4, 1, 30, 1);
	CU_ASSERT(s0 > s1 + 1);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_ovc("slice(2)", 1, 10, 4, 1, 30, 1, 0), s0, eps);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_ovc("slice(2)", 1, 10, 4, 1, 30, 0, 1), s1, eps);
	CU_ASSERT_DOUBLE_EQUAL(ag_time_ovc("fuse(ring)", 1, 10, 4, 1, 0, 0, 1), 1 + 4 * 10 + 3 * 4,
	                       eps);
	/* vanilla with no collective measured: a ring of transfers */
	CU_ASSERT_DOUBLE_EQUAL(ag_time("vanilla", 1, 10, 4, 1, 0), 3 * 4 + 4 * 10, eps);
	/* the clock: busy half the time (a 40 us all_gather, then 40 us of
	 * GEMMs) the GEMMs take 0.8 of their time; then busy 32 of 72 us,
	 * below the table, 0.8 again */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("vanilla", 1, 10, 4, 1, 40, 1, -1, "clock 0.5 0.8\n"),
	                       40 + 0.8 * 40, eps);
	/* a 10 us all_gather: linear from (0.5, 0.8) to (1, 1), the factor
	 * of each run's share, three runs: busy 40/50 gives 0.92, busy
	 * 36.8/46.8 0.914530, busy 36.581/46.581 0.914128 (worked by hand) */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("vanilla", 1, 10, 4, 1, 10, 1, -1, "clock 0.5 0.8\n"),
	                       46.5651376146789, eps);
	/* points in any order, between (0.25, 0.8) and (0.75, 0.9): busy
	 * 40/80 gives 0.85, then 0.841892, then 0.841416 */
	CU_ASSERT_DOUBLE_EQUAL(ag_time_more("vanilla", 1, 10, 4, 1, 40, 1, -1,
	                                    "clock 0.75 0.9\nclock 0.25 0.8\n"),
	                       73.65663976522377, eps);
	/* a point at 1: the first run at its factor (40 us of GEMMs take 50,
	 * busy 50/90), then linear from (0.5, 1) to (1, 1.25): 1.027778,
	 * busy 41.1111/81.1111, 1.003425, busy 40.1370/80.1370, 1.000427,
	 * 40 + 40 x 1.000427 (worked by hand); the compute alone is the
	 * first run's, 50 */
	Prediction hot = ag_pred("vanilla", 1, 10, 4, 1, 40, 1, -1, "clock 1 1.25\nclock 0.5 1\n");
	CU_ASSERT_DOUBLE_EQUAL(hot.total * 1e6, 80.0170940170940, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(hot.compute * 1e6, 50, eps);
}

/* auto's rule on hand-made predictions: the first candidate (the
 * simplest) within the slack of the fastest; unpredicted ones never. */
static void
test_pick(void)
{
	Candidate c[5] = {{.pr = {.total = 10}}, {.pr = {.total = 9.1}}, {.pr = {.total = 9.0}},
	                  {.pr = {.total = 1, .err = "no rate"}}, {.pr = {.total = 8.95}}};
	int fastest;

	/* 8.95 + 0.179 = 9.129: 9.1 is within it and comes first */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0.179, &fastest), 1);
	CU_ASSERT_EQUAL(fastest, 4);
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0.179, NULL), 1);
	c[1].pr.total = 9.15; /* now past the slack: 9.0 is the first within */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0.179, &fastest), 2);
	CU_ASSERT_EQUAL(predict_pick(c, 5, 1.05, &fastest), 0); /* 10 is within 8.95 + 1.05 */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0, &fastest), 4);    /* no slack: the fastest */
	c[2].pr.total = 8.95 * (1 + 1e-12); /* 8.95 to rounding: a tie, the simpler's */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0, &fastest), 2);
	CU_ASSERT_EQUAL(fastest, 2);
	c[2].pr.total = 8.95 * (1 + 1e-6); /* past rounding: the later one */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0, &fastest), 4);
	CU_ASSERT_EQUAL(fastest, 4);
	c[4].pr.total = 5; /* far the fastest: it */
	CU_ASSERT_EQUAL(predict_pick(c, 5, 0.179, &fastest), 4);
	CU_ASSERT_EQUAL(fastest, 4);
	CU_ASSERT_EQUAL(predict_pick(c + 3, 1, 0.179, &fastest), -1);
	CU_ASSERT_EQUAL(fastest, -1);
}

/* a profile's body: fast compute, p2p at two concurrencies */
#define FAST \
	"gemm f32 64 64 64 5e-7\new f32 1e12\nattn f32 128 1e12\np2p 1 1000 1e-6\n" \
	"p2p 1 100000 1e-3\np2p 2 100000 3e-3\nslowdown 1.4\nend\n"

/* auto with a profile lowers the candidate the predictor ranks first,
 * for every collective of every example, on a compute-heavy and on a
 * transfer-heavy machine (and the latter on a GPU backend): collective
 * by collective in the pass's order, the simplest within what is left
 * of the margin (the profile's default, 2% and on the GPU 0; 0 and 10%
 * as cfc --auto-margin sets them) of the pass predicted with every
 * collective at its fastest (each stage outside the regions predicted
 * alone, each collective's fastest candidate), less what the
 * collectives before it gave away over their fastest. */
static void
test_auto(void)
{
	static const char *const ex[] = {"mlp", "attention", "mamba", "ulysses", "zero_dp",
	                                 "transformer", "llama", "tpdp"};
	static const char *const mach[] = {
		HEAD "gemm f32 64 64 64 5e-5\new f32 1e10\nattn f32 128 1e10\np2p 1 100000 1e-3\nend\n",
		HEAD FAST,
		/* the second on a GPU backend: its default margin is the GPUs' */
		"cfprofile 1\nbackend cuda+nccl+cublas\nranks 4\n" FAST,
	};
	/* the default margin by backend: the first two's, then the GPU's */
	static const double dflt[] = {AUTO_MARGIN_PCT, AUTO_MARGIN_PCT, AUTO_MARGIN_GPU_PCT};
	static const double margin[] = {-1, 0, 10}; /* -1: the profile's */

	for (size_t e = 0; e < sizeof ex / sizeof *ex; e++) {
		char *text = st_example(ex[e]);
		for (size_t m = 0; m < sizeof mach / sizeof *mach * 3; m++) {
			double pct = margin[m % 3];
			SRun r;
			char *err = NULL;
			Arena *pa = arena_new();
			Profile *pf = pf_parse(pa, mach[m / 3], &err);
			CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
			free(err);
			/* every pass, lowering on the profile */
			Options o = {0};
			r.a = arena_new();
			r.src = (Src){"t.cf", text, strlen(text)};
			diag_init(&r.d, &r.src, stderr);
			Src fs = {"--schedule", "auto", 4};
			o.force = parse_choice(r.a, &r.d, &fs);
			CU_ASSERT_EQUAL(predict_margin(pf), dflt[m / 3]);
			Pipeline pl = {.a = r.a, .d = &r.d, .o = &o, .profile = pf,
			               .auto_margin = pct >= 0 ? pct : AUTO_MARGIN_OF_PROFILE};
			if (pct < 0)
				pct = dflt[m / 3];
			CU_ASSERT_FATAL(pipeline_run(&pl, &r.src) == PIPE_OK); /* verified too */
			Sched *s = pl.sched;
			CU_ASSERT_EQUAL(s->auto_margin, pct); /* the margin it spent */
			double pass = 0;
			for (int j = 0; j < s->stages.n; j++) {
				const Stage *st = s->stages.v[j];
				if (st->kind == ST_COMPUTE) {
					pass += predict_node(r.a, st->u.node, pf).total;
					continue;
				}
				const Coll *c = st->u.coll;
				double f = INFINITY;
				for (int k = 0; k < c->ncand; k++)
					if (!c->cand[k].pr.err)
						f = fmin(f, c->cand[k].pr.total);
				pass += f;
			}
			CU_ASSERT_DOUBLE_EQUAL(predict_pass(r.a, s, 1).total, pass, 1e-12 * pass);
			int ncoll = 0; /* every collective is a stage */
			for (int k = 0; k < s->g->nodes.n; k++)
				ncoll += s->byid[k] != NULL;
			CU_ASSERT_FATAL(ncoll == s->colls.n);
			double left = pass * pct / 100;
			for (int j = 0; j < s->colls.n; j++) { /* in the pass's order */
				const Coll *c = s->colls.v[j];
				CU_ASSERT_FATAL(c->ncand >= 1);
				CU_ASSERT_FATAL(c->used >= 0 && c->used < c->ncand);
				int fast = 0, first = 0;
				for (int k = 1; k < c->ncand; k++)
					if (c->cand[k].pr.total < c->cand[fast].pr.total)
						fast = k;
				while (c->cand[first].pr.total >
				       (c->cand[fast].pr.total + fmax(left, 0)) * (1 + 1e-9))
					first++;
				left -= c->cand[first].pr.total - c->cand[fast].pr.total;
				CU_ASSERT_EQUAL(c->used, first); /* at 0%: the first of the fastest */
				CU_ASSERT_STRING_EQUAL(sched_kind_str(r.a, &c->how),
				                       sched_kind_str(r.a, &c->cand[first].how));
				/* and its prediction is the lowered program's */
				Prediction pr = predict_coll(r.a, s->g, c, pf, 0);
				CU_ASSERT_DOUBLE_EQUAL(pr.total, c->cand[first].pr.total,
				                       1e-12 * pr.total);
			}
			/* what the picks gave away adds up to the margin at most */
			CU_ASSERT(left >= -1e-12 * pass);
			arena_free(r.a);
			arena_free(pa);
		}
		free(text);
	}
}

void test_predict_register(void);

void
test_predict_register(void)
{
	CU_pSuite s = CU_add_suite("predict", NULL, NULL);
	CU_add_test(s, "profile reader", test_reader);
	CU_add_test(s, "profile lookups", test_lookup);
	CU_add_test(s, "predictions with known answers", test_predict);
	CU_add_test(s, "a batched matmul as its backend runs it", test_batch_cost);
	CU_add_test(s, "calls, packs and unpacks as the memory plan runs them", test_plan_cost);
	CU_add_test(s, "GEMMs that add to their output", test_acc_cost);
	CU_add_test(s, "transfers priced at the transfers at once over their time", test_conc);
	CU_add_test(s, "auto's rule: the simplest within the slack of the fastest", test_pick);
	CU_add_test(s, "auto takes the candidate the predictor ranks first", test_auto);
}
