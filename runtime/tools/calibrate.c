/* cfrt-calibrate: measures the machine it runs on for cfc's cost model
 * and writes the profile that `cfc --profile=FILE` reads
 * (docs/PROFILE.md). Run it under mpirun like an application, on as many
 * ranks as the models will use (at least 2 for the transfers):
 *
 *   mpirun -n 4 cfrt-calibrate -o machine.prof
 *
 * Every rank measures at once, as every rank computes at once in a real
 * run; a time is the median over repetitions of the span from the first
 * rank's start to the last rank's end when the ranks share a node (as the
 * generated driver and make bench time a run: with more ranks than cores
 * it counts the time a rank waits for a core), else of the slowest rank's
 * own time.
 * It measures, through the runtime's public API only (so the same source
 * calibrates the MPI backend and, linked with libcfrt_cuda, the GPUs):
 *   gemm   GEMM seconds on a grid of shapes (m, n, k), per element type;
 *   ew     bytes per second of elementwise adds;
 *   op     the same of every other op cfc's model prices by bytes (gelu,
 *          the norms, softmax, rope, their gradients, the heads' split
 *          and merge, ...);
 *   attn   attention flop per second by sequence length, without and
 *          with a causal mask (attn_causal: half the flop); attn_grad
 *          and attn_grad_causal the same of its backward from the saved
 *          log-sum-exp, dq, dk and dv by a call each as generated code
 *          calls them (2.5 times the forward's flop in all);
 *   p2p    seconds of one message by size, with 1, 2 and 4 transfers at
 *          once at each rank (one pair; the ring; both ring directions);
 *   coll   the library's all_gather, reduce_scatter, all_reduce and
 *          all_to_all by block size, on all the ranks;
 *   slowdown  a GEMM's time while the ring's transfers run, over its time
 *          alone; slowdown 4 the same under both ring directions;
 *   overlap   those transfers' own time that passed per second of the
 *          GEMM under them (1: they move on their own; near 0: only
 *          inside MPI);
 *   overlap_coll  the same of each library collective on GPUs; on CPUs
 *          the rate at which the model, which slows no compute under a
 *          collective, replays its probe (probe_overlap_coll).
 * Each point is visited in passes over all of them and keeps the median
 * of its visits (see measure()); on GPUs the compute points are timed on
 * a GPU kept at its power limit, as a model's GEMMs keep it (heat()).
 * --quick measures a few small points (seconds;
 * for tests). */
#include "calibrate.h"


/* ---- the points, measured in passes ---- */

/* Passes of a point that disagree by more than this share (the slowest
 * over the fastest, less 1) are written beside it as a comment. */
#define NOISY 0.10

/* GPUs (heat()): seconds of GEMMs before the first compute point after
 * others, and before each next one (an attention's: HEAT_ATTN). One
 * H100, every type but f32 heated, two runs each: 5 ms before each point
 * instead of 20 took the calibration from 58.0-64.6 s to 37.3-38.3 (every
 * type heated, as here: 44.2 s, docs/PROFILE.md); the bf16 GEMMs of
 * 0.5 ms and more read 0.969 times their times in
 * bench/results/2026-11-27-H100-lease8-9-1a07431/1gpu-alltypes.prof, as after 20
 * ms (0.957-0.969), but the attention of 2048 and more 0.919 (after 20
 * ms, 0.973-0.979) */
#define HEAT 1.0
#define HEAT_POINT 0.005
#define HEAT_ATTN 0.02

static Point *
add(Cal *C, RunFn fn, int t, int reps, double work, const char *fmt, ...)
{
	if (C->npt == C->cappt) {
		C->cappt = C->cappt ? 2 * C->cappt : 256;
		C->pt = realloc(C->pt, (size_t)C->cappt * sizeof *C->pt);
		if (!C->pt) {
			fprintf(stderr, "cfrt-calibrate: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	Point *p = &C->pt[C->npt++];
	memset(p, 0, sizeof *p);
	p->fn = fn, p->t = t, p->reps = reps, p->work = work;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->key, sizeof p->key, fmt, ap);
	va_end(ap);
	return p;
}

/* ---- progress (stderr of rank 0; --quiet: none) ---- */

static void
say(Cal *C, const char *fmt, ...)
{
	va_list ap;

	if (C->rank != 0 || C->quiet)
		return;
	fprintf(stderr, "cfrt-calibrate: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (+%.0f s)\n", MPI_Wtime() - C->t0);
}

/* ---- the test hook ---- */

/* CFRT_CALIBRATE_SCALE="KEY=F" multiplies every measured time of the point
 * KEY by F; "KEY=F@N" its first N visits only (the tests plant a bad
 * point with it: a point bad on every visit must be refused, one bad on
 * its first visit repeated and kept). */
static double
test_scale(const Point *p)
{
	const char *e = getenv("CFRT_CALIBRATE_SCALE"), *eq;
	size_t n;

	if (!e || !(eq = strchr(e, '=')))
		return 1;
	n = (size_t)(eq - e);
	if (strlen(p->key) != n || strncmp(p->key, e, n))
		return 1;
	char *at;
	double f = strtod(eq + 1, &at);
	if (*at == '@' && p->nv >= atoi(at + 1))
		return 1;
	return f > 0 ? f : 1;
}

/* One visit of p: its time into p->pass[p->nv++] (a run of GEMM calls: a
 * call's time), or p->s = -1 when the backend cannot. *filled: the type
 * the buffers hold; *warm: the last point was a heated one. */
static void
visit(Cal *C, Point *p, int *filled, int *warm)
{
	if (p->t >= 0 && p->t != *filled) {
		fill(C, (cfrt_dtype)p->t);
		*filled = p->t;
	}
	if (p->fn == run_attn_grad)
		p->arg.x.lse_ready = 0; /* another point wrote over it */
	/* on GPUs compute is timed hot: heated long after the
	 * transfers' points, briefly before each other */
	int hot = C->gpu && !C->quick && p->t >= 0;
	if (hot)
		heat(C, (cfrt_dtype)p->t, !*warm ? HEAT :
		     p->fn == run_attn || p->fn == run_attn_grad ? HEAT_ATTN : HEAT_POINT);
	*warm = hot;
	int reps = (p->reps + C->passes - 1) / C->passes;
	double s = timed(C, p->fn, &p->arg, reps, C->budget / C->passes,
	                 (3 + C->passes - 1) / C->passes);
	if (s < 0) {
		p->s = -1;
		return;
	}
	if (p->fn == run_gemm) /* a run of calls: a call's time */
		s /= p->arg.g.calls;
	s *= test_scale(p);
	p->pass[p->nv++] = s;
}

/* p->s: the median of its visits; its spread (slowest / fastest - 1). */
static double
settle(Point *p)
{
	double v[MAXPASS];

	memcpy(v, p->pass, sizeof v);
	p->s = median(v, p->nv); /* sorts v */
	return v[p->nv - 1] / v[0] - 1;
}

/* The value a point writes: its seconds, or work over them (a rate). */
static double
value(const Point *p)
{
	return p->work > 0 ? p->work / p->s : p->s;
}

/* ---- what cannot be trusted (runtime/profcheck.h) ---- */

/* A transfer point's bytes (a collective's: over every rank's block),
 * else 0. */
static double
xfer_bytes(const Cal *C, const Point *p)
{
	if (p->fn == run_p2p)
		return 4.0 * (double)p->arg.p.count;
	if (p->fn == run_coll)
		return 4.0 * (double)p->arg.c.count * C->size;
	return 0;
}

/* Whether a and b are of one series that orders them by size: *sa and
 * *sb their sizes (a GEMM: a is at most b in every dimension, *sa < *sb
 * when they differ). */
static int
series(const Cal *C, const Point *a, const Point *b, double *sa, double *sb)
{
	if (a->fn != b->fn)
		return 0;
	if (a->fn == run_p2p && a->arg.p.conc == b->arg.p.conc) {
		*sa = xfer_bytes(C, a), *sb = xfer_bytes(C, b);
		return 1;
	}
	if (a->fn == run_coll && a->arg.c.op == b->arg.c.op) {
		*sa = xfer_bytes(C, a), *sb = xfer_bytes(C, b);
		return 1;
	}
	if (a->fn == run_gemm && a->arg.g.t == b->arg.g.t && a->arg.g.acc == b->arg.g.acc) {
		const Gemm *x = &a->arg.g, *y = &b->arg.g;
		int le = x->m <= y->m && x->n <= y->n && x->k <= y->k;
		int ge = x->m >= y->m && x->n >= y->n && x->k >= y->k;
		if (!le && !ge)
			return 0;
		*sa = (double)x->m * (double)x->n * (double)x->k;
		*sb = (double)y->m * (double)y->n * (double)y->k;
		return 1;
	}
	return 0;
}

/* Why point i cannot be trusted (into why, n bytes), or 0: an implausible
 * rate, or out of order against another point of its series. */
static int
untrusted(const Cal *C, int i, char *why, size_t n)
{
	const Point *p = &C->pt[i];
	const char *r = NULL;
	double lat = C->quick ? PC_LATENCY_QUICK : PC_LATENCY;

	if (p->s <= 0)
		return 0;
	if (p->fn == run_p2p || p->fn == run_coll)
		r = pc_transfer_implausible(xfer_bytes(C, p), p->s, lat);
	else if (p->fn == run_gemm)
		r = pc_compute_implausible(2.0 * (double)p->arg.g.m * (double)p->arg.g.n *
		                           (double)p->arg.g.k, p->s, 1, lat);
	else if (p->work > 0)
		r = pc_compute_implausible(p->work, p->s, p->fn == run_attn || p->fn == run_attn_grad,
		                           lat);
	if (r) {
		snprintf(why, n, "%s %.4g: %s", p->key, value(p), r);
		return 1;
	}
	for (int j = 0; j < C->npt; j++) {
		const Point *q = &C->pt[j];
		double sp, sq;
		if (j == i || q->s <= 0 || !series(C, p, q, &sp, &sq) || sp == sq)
			continue;
		/* the smaller of the two first */
		const Point *lo = sp < sq ? p : q, *hi = sp < sq ? q : p;
		if (pc_out_of_order(lo->s, hi->s, lat)) {
			snprintf(why, n, "%s %.4g s: out of order with %s %.4g s (the larger %s "
			         "under half the smaller's time)", p->key, p->s, q->key, q->s,
			         p->fn == run_gemm ? "GEMM" : "message");
			return 1;
		}
	}
	return 0;
}

/* Every point, C->passes times, the order reversed on every other pass:
 * a point's time is the median over the passes of each pass's median of
 * its runs. A machine shared with others (a VM, a loaded node) has slow
 * spells that last longer than a point; measured in one visit each, the
 * points that fall in a spell read slow and the rest not (a VM's 512^3
 * and 512x1024x512 GEMMs at 38-47 GFLOP/s among 61-73). Visits apart keep
 * a spell to one of a point's passes, which the median leaves out. The
 * fastest pass instead predicted make bench's rows low: 100 of 112 rows'
 * compute alone in 7 runs (the Xeons and this machine), by a median of
 * 7-23% a run.
 * Then the points that cannot be trusted yet are visited again, REVISIT
 * times each round, for up to REROUNDS rounds: those whose visits
 * disagree by more than NOISY, and those untrusted() names (a rate no
 * machine has; a larger message or GEMM far faster than a smaller one).
 * A point still untrusted after that makes the calibration refuse to
 * write the profile: *bad gets how many, and rank 0 says which on
 * stderr. Every rank decides alike (a time is the same on every rank:
 * elapsed()). Writes every point (rank 0), a point whose visits disagree
 * by more than NOISY after a comment with each visit's value, then how
 * many did. */
enum { REVISIT = 2, REROUNDS = 2 };

static void
measure(Cal *C, int *bad)
{
	int filled = -1, warm = 0;
	double last = MPI_Wtime();

	for (int pass = 0; pass < C->passes; pass++) {
		say(C, "pass %d of %d: %d points", pass + 1, C->passes, C->npt);
		for (int j = 0; j < C->npt; j++) {
			Point *p = &C->pt[pass % 2 ? C->npt - 1 - j : j];
			if (p->s < 0)
				continue;
			visit(C, p, &filled, &warm);
			if (MPI_Wtime() - last > 10 && C->rank == 0) {
				last = MPI_Wtime();
				say(C, "pass %d of %d: %d of %d points", pass + 1, C->passes, j + 1,
				    C->npt);
			}
		}
	}
	char why[256];
	for (int round = 0; round < REROUNDS; round++) {
		int again = 0;
		for (int i = 0; i < C->npt; i++) {
			Point *p = &C->pt[i];
			if (p->s < 0 || p->nv == 0)
				continue;
			double spread = settle(p);
			p->again = (spread > NOISY || untrusted(C, i, why, sizeof why)) &&
			           p->nv + REVISIT <= MAXPASS;
		}
		for (int i = 0; i < C->npt; i++)
			again += C->pt[i].again;
		if (!again)
			break;
		say(C, "visiting again %d point%s that disagree or look wrong (round %d of %d)",
		    again, again == 1 ? "" : "s", round + 1, REROUNDS);
		for (int v = 0; v < REVISIT; v++)
			for (int i = 0; i < C->npt; i++)
				if (C->pt[i].again)
					visit(C, &C->pt[i], &filled, &warm);
	}
	int measured = 0, noisy = 0;
	*bad = 0;
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0)
			continue;
		double spread = settle(p);
		measured++;
		noisy += spread > NOISY;
	}
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0 || !untrusted(C, i, why, sizeof why))
			continue;
		if (C->rank == 0) {
			fprintf(stderr, "cfrt-calibrate: %s %s (visits:", C->refuse ? "cannot trust" :
			        "warning: kept, though it cannot be trusted:", why);
			for (int k = 0; k < p->nv; k++)
				fprintf(stderr, " %.4g", p->pass[k]);
			fprintf(stderr, " s)\n");
		}
		++*bad;
	}
	if (!C->refuse)
		*bad = 0; /* --check=warn: written, with a comment */
	if (*bad || !C->out)
		return;
	for (int i = 0; i < C->npt; i++) {
		Point *p = &C->pt[i];
		if (p->s < 0 || p->nv == 0)
			continue;
		double spread = settle(p);
		if (untrusted(C, i, why, sizeof why))
			fprintf(C->out, "# cannot be trusted: %s\n", why);
		if (spread > NOISY) {
			fprintf(C->out, "# %s: its visits disagree by %.0f%%:", p->key, 100 * spread);
			for (int k = 0; k < p->nv; k++)
				fprintf(C->out, " %.4g", p->work > 0 ? p->work / p->pass[k] : p->pass[k]);
			fprintf(C->out, "\n");
		}
		fprintf(C->out, "%s %.6g\n", p->key, value(p));
	}
	fprintf(C->out, "# %d of %d points' visits disagree by more than %.0f%%; each keeps "
	        "their median\n", noisy, measured, 100 * NOISY);
}

/* How many GEMM calls of m x n x k a GPU point runs back to back: a
 * generated model queues its calls ahead of the GPU (its host waits for
 * nothing of the GPU's inside a pass), so a call costs its own time, or
 * its launch where that is longer, not a launch, a sync and the host's
 * wake-up on top. Each call timed alone after a sync (the calibration
 * until 2026-11-28) priced short ones high: 4 H100s, bench-gpu case c,
 * compute alone, lease 14: the 8192x1024x4096 GEMMs of fuse(bidir)'s
 * slices 0.127 ms a call (540 TFLOP/s, where 16384 rows read 611), and
 * its compute alone and fuse(ring, m = 2)'s 18.4 and 20.2% high, slice(4)'s
 * 20.1% (the runs of ring(m = 1), with half as many calls, 8.5%). The
 * next lease's runs predicted on two calibrations of its own, one timing
 * runs and one (--gemm-calls 1) each call alone: case c's compute alone
 * -2.5 to +1.8% against +15.7 to +26.5%; all 52 rows of cases a-d, median
 * |error| 5.5% against 8.7%, worst 25.4 against 31.5%. An earlier lease
 * timed runs and priced case c's slice(4) 29.9% low, but then its head
 * splits took 4 to 5 times their price (docs/PROFILE.md).
 * About RUN_S worth a run (at the 8192^3 call's rate), at least 1 and at
 * most MAXCALLS; --gemm-calls N sets N. */
enum { MAXCALLS = 256 };
#define RUN_S 0.002

static int
gemm_calls(const Cal *C, double rate, int64_t m, int64_t n, int64_t k)
{
	if (!C->gpu || C->quick)
		return 1;
	if (C->gemm_calls > 0)
		return C->gemm_calls;
	double n_ = ceil(RUN_S * rate / (2.0 * (double)m * (double)n * (double)k));
	return n_ < 1 ? 1 : n_ > MAXCALLS ? MAXCALLS : (int)n_;
}

/* The point of an m x n x k GEMM of the buffers' type t (acc: adding to
 * its output, `gemm_acc`), unless its operands outgrow the buffers;
 * rate as gemm_calls takes it. */
static void
add_gemm(Cal *C, cfrt_dtype t, double rate, int64_t m, int64_t n, int64_t k, int acc)
{
	size_t es = cfrt_dtype_size(t);
	Gemm g = {t, m, n, k, acc, gemm_calls(C, rate, m, n, k)};

	if ((size_t)(m * k) * es > C->cap || (size_t)(k * n) * es > C->cap ||
	    (size_t)(m * n) * es > C->cap)
		return;
	add(C, run_gemm, t, C->quick ? 3 : 7, 0, pf_key[acc ? PF_GEMM_ACC : PF_GEMM],
	    tname[t], (long long)m, (long long)n, (long long)k)->arg.g = g;
}

static void
cal_compute(Cal *C, cfrt_dtype t)
{
	/* on GPUs up to 16384: models' per-rank GEMMs have 65536 rows and
	 * more, and cfc prices a dimension past the grid at its largest */
	static const int64_t cpu[] = {32, 128, 512, 1024}, gpu[] = {256, 1024, 4096, 8192, 16384};
	static const int64_t quick[] = {16, 64};
	const int64_t *sz = C->quick ? quick : C->gpu ? gpu : cpu;
	int nsz = C->quick ? 2 : C->gpu ? 5 : 4;
	size_t es = cfrt_dtype_size(t);
	const char *tn = tname[t];

	if (!fill(C, t))
		return; /* the backend has no such type */
	Gemm g0 = {t, sz[0], sz[0], sz[0], 0, 1};
	if (timed(C, run_gemm, &g0, 1, 0, 1) < 0)
		return; /* nor GEMMs of it */
	double rate = 0; /* GPUs: flop per second of an 8192^3 call */
	if (C->gpu && !C->quick) {
		/* 16384 only where an 8192^3 call takes under 10 ms: past
		 * that the rate is flat (one H100, f32: 50.9 TFLOP/s at 4096^3,
		 * 51.3 at 8192^3, 52.2 at 16384^3, whose call alone took 0.17
		 * s) */
		Gemm g8 = {t, 8192, 8192, 8192, 0, 1};
		double t8 = timed(C, run_gemm, &g8, 1, 0, 1);
		if (t8 > 0.01)
			nsz = 4;
		rate = 2.0 * 8192 * 8192 * 8192 / t8;
	}
	for (int i = 0; i < nsz; i++)
		for (int j = 0; j < nsz; j++)
			for (int l = 0; l < nsz; l++)
				add_gemm(C, t, rate, sz[i], sz[j], sz[l], 0);
	/* a few of them adding to their output (beta = 1): cfc prices what
	 * that costs by the bytes of the output (Profile.acc). The largest
	 * rows, as a schedule's accumulating chunks have. 4 H100s, bf16:
	 * fuse(bidir) of bench-gpu's case a, whose 8 GEMMs of 16384 rows add
	 * to their output in 6, ran with transfers off 8.0% longer than
	 * vanilla's one GEMM, which the table alone priced the same */
	int64_t big = sz[nsz - 1], mid = sz[nsz - 2], small = sz[1];
	add_gemm(C, t, rate, big, mid, small, 1);
	if (!C->quick) {
		add_gemm(C, t, rate, big, mid, mid, 1);
		add_gemm(C, t, rate, mid, big, small, 1);
	}
	/* adds by size, from operands a cache holds to whole buffers: the
	 * copies and adds of a schedule move slices of an activation (the
	 * Xeons, 4 ranks: 14.3 GB/s at 192 KiB, 7.9 at 192 MiB) */
	for (size_t sb = (size_t)64 << 10;; sb = sb * 4 < C->cap ? sb * 4 : C->cap) {
		Ew e = {t, (int64_t)(sb / es), 1};
		if (sb < ((size_t)4 << 20))
			e.reps = (int)(((size_t)4 << 20) / sb);
		add(C, run_ew, t, C->quick ? 3 : 9, 3.0 * (double)e.n * (double)es * e.reps,
		    pf_key[PF_EW_BY], tn, 3LL * e.n * (long long)es)->arg.e = e;
		if (sb >= C->cap || C->quick)
			break;
	}
	int64_t nop = (int64_t)(C->cap / es) / 4;
	if (C->quick && nop > (1 << 14))
		nop = 1 << 14;
	/* each op on a quarter of the buffer: a size an activation has */
	for (int k = 0; k < NOPS; k++) {
		OpRun o = {t, nop / 1024 * 1024, k};
		add(C, run_op, t, C->quick ? 3 : 7, (ops[k].nin + 1.0) * (double)o.n * (double)es,
		    pf_key[PF_OP], tn, ops[k].name)->arg.o = o;
	}
	/* attention by sequence length, forward and backward: the rates
	 * change with it */
	int64_t s0 = C->quick ? 64 : C->gpu ? 512 : 128, s1 = C->quick ? 128 : C->gpu ? 8192 : 2048;
	for (int grad = 0; grad < 2; grad++)
		for (int causal = 0; causal < 2; causal++)
			/* the backward up to half the longest on CPUs: its rate is
			 * as flat, its time twice */
			for (int64_t sq = s0; sq <= (grad && !C->gpu && !C->quick ? s1 / 2 : s1); sq *= 2) {
				/* on GPUs 64 heads of 128 in all, as a model's
				 * B x H fill the SMs (one H100, causal, S = 4096:
				 * 155 TFLOP/s with 4 heads of 64, 449-491 with 32
				 * of 128; bench-gpu case c's 16 x 8 heads, traced
				 * with transfers off, ran at 651) */
				Attn x = {t, {C->gpu ? 2 : 1, C->gpu ? 32 : 4, sq, C->gpu ? 128 : 64}, causal,
				          0};
				size_t bytes = (size_t)(x.dims[0] * x.dims[1] * x.dims[2] * x.dims[3]) * es;
				/* the backward's flop: 2.5 times the forward's; a
				 * causal mask: half the flop, as cfc counts */
				double fl = 4.0 * x.dims[0] * x.dims[1] * x.dims[2] * x.dims[2] * x.dims[3] *
				            (grad ? 2.5 : 1) / (causal ? 2 : 1);
				if ((grad ? 4 * bytes : bytes) > C->cap / 2)
					break;
				add(C, grad ? run_attn_grad : run_attn, t, C->quick ? 3 : 5, fl,
				    pf_key[grad ? (causal ? PF_ATTN_GRAD_CAUSAL : PF_ATTN_GRAD) :
				           causal ? PF_ATTN_CAUSAL : PF_ATTN], tn, (long long)sq)->arg.x = x;
			}
}

static void
cal_transfers(Cal *C)
{
	int64_t lo = 1024, hi = C->quick ? (1 << 16) : C->gpu ? (256 << 20) : (16 << 20);
	static const int conc[] = {1, 2, 4};

	if (C->size < 2)
		return;
	for (int k = 0; k < 3; k++)
		for (int64_t bytes = lo; bytes <= hi; bytes *= 4) {
			P2p p = {bytes / 4, conc[k]};
			if ((size_t)bytes * (conc[k] == 4 ? 2 : 1) > C->cap)
				break;
			add(C, run_p2p, -1, C->quick ? 3 : 9, 0, pf_key[PF_P2P], conc[k],
			    (long long)bytes)->arg.p = p;
		}
	/* collectives by block: on GPUs up to what the buffers hold (bench-gpu
	 * case a reduce-scatters 256 MiB blocks on 4 GPUs; the rate still
	 * rose at 64 MiB, past which the table extrapolates) */
	for (int op = 0; op < 4; op++)
		for (int64_t bytes = lo; bytes <= (C->gpu ? hi : hi / C->size); bytes *= 4) {
			Coll c = {op, bytes / 4};
			if ((size_t)bytes * (size_t)C->size > C->cap)
				break;
			add(C, run_coll, -1, C->quick ? 3 : 7, 0, pf_key[PF_COLL], coll_name[op],
			    (long long)bytes)->arg.c = c;
		}
}

/* The profile's transfer entry: on GPUs the transfer mode calibrated
 * (CFRT_TRANSFER, which cfrt_init has checked: nccl unless set), whose
 * profiles differ; on CPUs the progress mode. */
static const char *
transfer_name(const Cal *C)
{
	const char *e = getenv("CFRT_TRANSFER");

	if (!C->gpu)
		return cfrt_progress_name(C->ctx);
	return e && *e ? e : "nccl";
}

/* "bf16,f32" -> the bits of those types, the first one's in *first;
 * 0 on a name that is none */
static int
parse_types(const char *s, unsigned *bits, cfrt_dtype *first)
{
	*bits = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		int t = 0, nt = (int)(sizeof tname / sizeof *tname);
		while (t < nt && (strlen(tname[t]) != n || strncmp(s, tname[t], n)))
			t++;
		if (t == nt)
			return 0;
		if (!*bits)
			*first = (cfrt_dtype)t;
		*bits |= 1u << t;
		s += n + (s[n] == ',');
	}
	return *bits != 0;
}

/* The profile cannot be written: say why, end every rank. */
static void
write_failed(OutFile *of)
{
	fprintf(stderr, "cfrt-calibrate: %s\n", of->err ? of->err : "cannot write: out of memory");
	outfile_discard(of);
	outfile_free(of);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void
usage(FILE *f)
{
	fputs("usage: mpirun -n N cfrt-calibrate [-o FILE] [--quick] [--passes N]\n"
	      "                        [--gemm-calls N] [--type T[,T...]]\n"
	      "Measures this machine for cfc's cost model and writes its profile\n"
	      "(default cfrt.prof); cfc --profile=FILE reads it.\n"
	      "  -o FILE   where rank 0 writes the profile: a regular file is replaced\n"
	      "            whole at the end (never a partial file), a character device\n"
	      "            or FIFO written straight through ('-': standard output), a\n"
	      "            symbolic link followed (what it points at is written)\n"
	      "  --quick   a few small points (seconds): for tests, not for choosing\n"
	      "  --quiet   no progress lines on stderr (by default a line as each\n"
	      "            pass and phase starts, and every 10 s, with the time so far)\n"
	      "  --check=refuse|warn  a point still untrusted after visiting it again\n"
	      "            (docs/PROFILE.md): write no profile (default), or write it\n"
	      "            with a comment and a warning (the default of --quick)\n"
	      "  --passes N  visit every point N times (at most 15), the others\n"
	      "            between, and keep the median visit (default 3, --quick 1)\n"
	      "  --type T[,T...]  measure the compute of these element types only\n"
	      "            (f32, f64, bf16, f16; default all the backend has); the\n"
	      "            slowdown probe's GEMM is of the first (default f32)\n"
	      "  --gemm-calls N  GPUs: time GEMMs in runs of N calls back to back\n"
	      "            (at most 256; 1: each call alone after a sync; default:\n"
	      "            about 2 ms of calls a run)\n", f);
}

int
main(int argc, char **argv)
{
	Cal C = {0};
	const char *path = "cfrt.prof", *typearg = NULL;

	MPI_Init(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			path = argv[++i];
		} else if (!strcmp(argv[i], "--quick")) {
			C.quick = 1;
		} else if (!strcmp(argv[i], "--quiet")) {
			C.quiet = 1;
		} else if (!strcmp(argv[i], "--check=refuse") || !strcmp(argv[i], "--check=warn")) {
			C.refuse = !strcmp(argv[i], "--check=refuse");
			C.refuse_given = 1;
		} else if (!strcmp(argv[i], "--passes") && i + 1 < argc && atoi(argv[i + 1]) > 0 &&
		           atoi(argv[i + 1]) <= MAXPASS) {
			C.passes = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--gemm-calls") && i + 1 < argc &&
		           atoi(argv[i + 1]) > 0 && atoi(argv[i + 1]) <= MAXCALLS) {
			C.gemm_calls = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--type") && i + 1 < argc &&
		           parse_types(argv[i + 1], &C.types, &C.probe_t)) {
			typearg = argv[++i];
		} else {
			int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
			MPI_Comm_rank(MPI_COMM_WORLD, &C.rank);
			if (C.rank == 0)
				usage(help ? stdout : stderr);
			MPI_Finalize();
			return help ? 0 : 2;
		}
	}
	MPI_Comm_size(MPI_COMM_WORLD, &C.size);
	die_rc(&C, cfrt_init(&C.ctx, MPI_COMM_WORLD, C.size, "calibrate"), "cfrt_init");
	C.rank = cfrt_rank(C.ctx);
	C.gpu = !strncmp(cfrt_backend_name(), "cuda", 4);
	/* spans when every rank is on this node (one clock): then, and only
	 * then, every rank's node holds them all */
	MPI_Comm node;
	int nnode = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &nnode);
	MPI_Comm_free(&node);
	/* not on GPUs: there each rank has a device of its own, and
	 * make bench-gpu times the slowest rank's own time (a span would add
	 * the ranks' skew at the barrier to every point) */
	C.span = nnode == C.size && !C.gpu;
	C.cap = C.quick ? (1u << 20) : C.gpu ? ((size_t)1 << 30) : ((size_t)64 << 20);
	C.budget = C.quick ? 0.05 : C.gpu ? 0.2 : 0.5;
	if (!C.passes)
		C.passes = C.quick ? 1 : 3;
	if (!C.refuse_given)
		C.refuse = !C.quick;
	die_rc(&C, cfrt_alloc(C.ctx, &C.a, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_alloc(C.ctx, &C.b, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_alloc(C.ctx, &C.c, C.cap), "cfrt_alloc");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.a, C.cap), "zero");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.b, C.cap), "zero");
	die_rc(&C, cfrt_memset_zero(C.ctx, C.c, C.cap), "zero");
	/* the profile is opened first (a bad -o fails now, not after the
	 * measuring), gathered in memory, written whole at the end */
	OutFile of;
	char *text = NULL;
	size_t textlen = 0;
	if (C.rank == 0) {
		if (outfile_open(&of, path, NULL, 0))
			write_failed(&of);
		C.out = open_memstream(&text, &textlen);
		if (!C.out) {
			perror("cfrt-calibrate: open_memstream");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		fprintf(C.out, "cfprofile 1\n# written by cfrt-calibrate%s%s%s on %d rank%s; times: %s, "
		        "the median of %d pass%s\n", C.quick ? " --quick" : "",
		        typearg ? " --type " : "", typearg ? typearg : "",
		        C.size, C.size == 1 ? "" : "s",
		        C.span ? "spans over the ranks of one node" : "the slowest rank's", C.passes,
		        C.passes == 1 ? "" : "es");
		fprintf(C.out, pf_line[PF_BACKEND], cfrt_backend_name());
		fprintf(C.out, pf_line[PF_TRANSFER], transfer_name(&C));
		fprintf(C.out, pf_line[PF_RANKS], C.size);
		/* cfrt_matmul: strided batch, or a loop */
		fprintf(C.out, pf_line[PF_BATCH], C.gpu ? "one" : "loop");
	}
	double t0 = C.t0 = MPI_Wtime();
	for (int t = CFRT_F32; t <= CFRT_F16; t++)
		if (!C.types || C.types >> t & 1)
			cal_compute(&C, (cfrt_dtype)t);
	cal_transfers(&C);
	say(&C, "measuring %d points, %d pass%s, on %d rank%s%s", C.npt, C.passes,
	    C.passes == 1 ? "" : "es", C.size, C.size == 1 ? "" : "s",
	    C.quick ? "" : " (minutes; docs/PROFILE.md gives times)");
	int bad;
	measure(&C, &bad);
	if (bad) {
		if (C.rank == 0) {
			fclose(C.out);
			free(text);
			outfile_discard(&of); /* the file named by -o stays as it was */
			outfile_free(&of);
			fprintf(stderr, "cfrt-calibrate: not writing %s: %d point%s could not be "
			        "trusted after visiting them again (a machine busy with other "
			        "work? run it again when it is quieter)\n", path, bad,
			        bad == 1 ? "" : "s");
		}
		free(C.pt);
		cfrt_free(C.ctx, C.a);
		cfrt_free(C.ctx, C.b);
		cfrt_free(C.ctx, C.c);
		cfrt_finalize(C.ctx);
		MPI_Finalize();
		return 1;
	}
	say(&C, "the slowdown probe");
	cal_slowdown(&C);
	if (C.gpu)
		say(&C, "the clock probe");
	cal_clock(&C);
	if (C.rank == 0) {
		fprintf(C.out, "# measured in %.1f s\n", MPI_Wtime() - t0);
		fputs(pf_line[PF_END], C.out);
		fclose(C.out);
		if (outfile_write(&of, text, textlen) || outfile_commit(&of))
			write_failed(&of);
		free(text);
		/* not into a profile written to standard output */
		fprintf(strcmp(path, "-") ? stdout : stderr,
		        "cfrt-calibrate: wrote %s (%d rank%s, %.1f s)\n", path, C.size,
		       C.size == 1 ? "" : "s", MPI_Wtime() - t0);
	}
	free(C.pt);
	cfrt_free(C.ctx, C.a);
	cfrt_free(C.ctx, C.b);
	cfrt_free(C.ctx, C.c);
	cfrt_finalize(C.ctx);
	MPI_Finalize();
	return 0;
}
