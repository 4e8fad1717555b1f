/* calibrate_probe.c: a GEMM under transfers (the ring, both ways, the
 * library's collectives, the ring behind a GEMM on GPUs): the slowdown,
 * overlap, overlap_coll and defer entries; and the clock of a GPU kept
 * busy a share of the time (clock entries).
 * requires: the points measured (calibrate.c), rank 0 writing C->out.
 * ensures: the entries written, each as the profile format spells it. */
#include <math.h>
#include <string.h>

#include "calibrate.h"

/* Transfers alone and posted just before a GEMM: medians of their time
 * alone, the GEMM's under them and the wait after it, and of how much
 * longer the GEMM and the wait took than the same rep's GEMM alone
 * (extra). */
typedef struct Under {
	double alone, gemm, wait, extra;
} Under;

/* k = 0: the ring (each rank sends count f32 elements to the next and
 * receives from the previous); 1..4: the library's collectives, blocks of
 * count / N elements; BIDIR: the ring both ways (count elements to the
 * next and to the previous, as fuse(bidir) runs). */
enum { NPROBE = 7, BIDIR = 5, DEFER = 6 };

/* The probes run: DEFER on GPUs only (CPUs' transfers do not wait for
 * the compute queued behind them). */
static int
nprobes(const Cal *C)
{
	return C->gpu ? NPROBE : DEFER;
}

static const char *
probe_name(int k)
{
	return k == 0 ? "a ring of transfers" : k == BIDIR ? "the ring both ways" :
	       k == DEFER ? "the ring behind a GEMM" : coll_name[k - 1];
}

/* The GEMM alone (*alone) and under each of the nprobes() transfers (u[k]),
 * rep by rep so that a slow spell of the machine falls on all of them
 * alike; medians of reps, timed as timed() times (spans on one node, else
 * the slowest rank's). The transfers under the GEMM move from the c
 * buffer's first half to its second (both ways: each direction a
 * quarter), and the GEMM writes the b buffer's second half.
 * On GPUs they are posted as a schedule posts them: behind a GEMM (the
 * step's before) with the next GEMM queued right after them, both ready
 * when the first ends. The order decides who has the SMs: an NCCL
 * transfer started on idle SMs slowed the GEMM after it 1.41 times and
 * moved under it (4 H100s, 4096^3 under 64 MiB); started as a GEMM
 * starts, it waited for the SMs: in a trace of bench-gpu's case a,
 * fuse(ring), the GEMMs ran unslowed and each 256 MiB transfer ended
 * 1.24 ms after the GEMM it was posted with (0.93 ms alone). The
 * GEMM's time under them is then the two GEMMs' less this rep's GEMM
 * alone. DEFER (GPUs): the ring again with one more GEMM queued before
 * the one timed under it, so that a transfer that waits for the GEMM
 * it was posted behind moves under the next (2 H200s, bench-gpu's case
 * a under fuse(bidir, m = 2) with NCCL, traced: each 128 MiB transfer
 * started as the GEMM queued behind it ended and moved under the next
 * one, 0.62 ms, which ran 1.718 ms against 1.630 before); the GEMM's
 * time under it is the three GEMMs' less two of this rep's alone. Its
 * GEMMs are queued with no barrier between them, as generated code
 * queues them (2 H200s: lease 69's probe had one and read 1.21 times,
 * lease 70's none and 1.13; the plain probe, with its barrier, read
 * 1.168 and 1.152 on the two, so the barrier is not shown to be the
 * difference; in traces of the fused rows the GEMMs under such
 * transfers ran 1.04-1.05 times longer, less than either). NCCL needs
 * no host handshake before the GEMM queued after the post; copy engines
 * do, but their ring moves under the GEMM it was posted behind, so
 * they write no defer. */
static void
probe(Cal *C, const Gemm *g, int64_t count, int reps, double *alone, Under u[NPROBE])
{
	double tg[64], tt[NPROBE][4][64];
	char *c = C->c;
	P2p ring[2] = {{count, 2}, {count, 4}};
	Coll coll[4];

	for (int k = 0; k < 4; k++)
		coll[k] = (Coll){k, count / C->size};
	if (reps > 64)
		reps = 64;
	die_rc(C, run_gemm(C, (void *)g), "gemm"); /* to warm up */
	for (int i = 0; i < reps; i++) {
		cfrt_barrier(C->ctx);
		double t0 = cfrt_wtime(C->ctx);
		die_rc(C, run_gemm(C, (void *)g), "gemm");
		die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
		tg[i] = elapsed(C, t0, cfrt_wtime(C->ctx));
		for (int k = 0; k < nprobes(C); k++) {
			const char *what = probe_name(k);
			const P2p *p = k == 0 || k >= BIDIR ? &ring[k == BIDIR] : NULL;
			cfrt_req q[4];
			int nq = 1;
			cfrt_barrier(C->ctx);
			t0 = cfrt_wtime(C->ctx);
			die_rc(C, p ? run_p2p(C, (void *)p) : run_coll(C, &coll[k - 1]), what);
			die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
			tt[k][0][i] = elapsed(C, t0, cfrt_wtime(C->ctx));
			cfrt_barrier(C->ctx);
			if (C->gpu) {
				t0 = cfrt_wtime(C->ctx);
				die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			}
			die_rc(C, p ? p2p_start(C, p, c, c + C->cap / 2, C->cap / 4, q, &nq)
			            : coll_call(C, &coll[k - 1], c, &q[0]), what);
			/* GPUs: every host has posted before the next GEMM's call
			 * (which issues the copy engines' copies whose handshake
			 * came), as the hosts of generated code run ahead of their
			 * GPUs; blocked in cfrt_wtime, a host issued them only at
			 * the wait (4 H100s: overlap 0.10; posted so, 0.81). CPUs:
			 * the GEMM from its start. */
			if (C->gpu && k != DEFER)
				die_rc(C, cfrt_barrier(C->ctx), "barrier");
			else if (!C->gpu)
				t0 = cfrt_wtime(C->ctx);
			if (k == DEFER)
				die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			die_rc(C, gemm_call(C, g, (char *)C->b + C->cap / 2), "gemm");
			double t1 = cfrt_wtime(C->ctx);
			die_rc(C, cfrt_waitall(C->ctx, nq, q), "waitall");
			die_rc(C, cfrt_sync(C->ctx), "cfrt_sync");
			double t2 = cfrt_wtime(C->ctx), w[3] = {t1, t2, t2 - t1}, mx[3];
			tt[k][1][i] = elapsed(C, t0, t1) - (C->gpu ? tg[i] : 0) - (k == DEFER ? tg[i] : 0);
			/* on one clock from the last GEMM's end to the last
			 * transfer's, which leaves out the ranks' skew (a rank that
			 * ends its GEMM early waits for its peers' as well as for
			 * the transfers) */
			MPI_Allreduce(w, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			tt[k][2][i] = C->span ? mx[1] - mx[0] : mx[2];
			tt[k][3][i] = tt[k][1][i] + tt[k][2][i] - tg[i];
		}
	}
	for (int k = 0; k < nprobes(C); k++)
		u[k] = (Under){median(tt[k][0], reps), median(tt[k][1], reps), median(tt[k][2], reps),
		               median(tt[k][3], reps)};
	*alone = median(tg, reps);
}

static double
clamp01(double x)
{
	return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* The overlap cfc's model reads (docs/PROFILE.md): the transfer time that
 * passes per second of compute after a transfer's start, the rest from
 * the wait on. Of the ring's probes (p2p transfers, which the model also
 * slows the compute under by `slowdown`): its time alone less the wait
 * after the GEMM, over the GEMM's time under it; a transfer that had
 * (nearly) landed when the GEMM ended, its wait under LANDED of its time
 * alone, moved on its own: 1. Until 2026-11-29 the share of the
 * transfer's own time that passed during the GEMM (1 - wait / alone),
 * which the model, spreading it over the whole GEMM, read as more: the
 * CPUs' probe GEMM (2048 rows) is several times longer than its 4 MiB
 * ring (4 Xeon ranks, lease 49: 15.8 ms, the ring 1.45 ms alone, 0.78 ms
 * waited after it: 0.466 then, with which the model moved the whole ring
 * under that GEMM and waited nothing; 0.043 now, the 0.68 ms that moved
 * over 15.8). */
#define LANDED 0.05
static double
probe_overlap(const Under *u)
{
	if (u->alone <= 0 || u->wait < LANDED * u->alone)
		return 1;
	return u->gemm > 0 ? clamp01((u->alone - u->wait) / u->gemm) : 0;
}

/* A library collective's overlap: the rate at which the model, which
 * does not slow compute under a collective, replays the probe: the GEMM
 * alone (gemm) and the collective moving at that rate under it, the rest
 * after it, took extra longer than the GEMM alone (extra: the GEMM under
 * the collective and the wait after it, less the GEMM alone): its time
 * alone less extra, over the GEMM's, (alone - extra) / gemm. Where it
 * added nothing or less (4 Xeon ranks, leases 54 and 56: -0.35 and
 * -0.49 ms, the GEMM under it faster than alone) the slowest rate that
 * replays it, landing it as the GEMM ends: alone / gemm; 1 there made
 * the rate jump from about 0.09 to 1 as extra crossed 0. The
 * rule above read the GEMM's slowing as free and a landed collective as
 * moving on its own: 8 Xeon ranks (leases 51 and 54), the all_gather of
 * 1.30 and 1.17 ms alone lengthened its GEMM of 13.6 and 11.2 ms by 1.56
 * and 1.36 ms and ended 0.080 and 0.047 ms after it, which read 0.080
 * and (landed) 1: slice(2)'s all-gathers, priced 0.6 points under
 * vanilla's on the first, ran 2.4 over. From those medians both read 0
 * so; and in 39 of 40 slice(k) rows of five CPU runs (leases 45, 46, 51,
 * 52 and the 2-core EPYC, make bench's mix) slice(k) ran slower than
 * vanilla. CPUs only: replayed on eight GPU leases (bench/replay.py;
 * H100 20 and 22, H200 25, 29, 34, 35, 37 and 40) this rule priced
 * slice(4) against vanilla further off (the leases' medians -12.9..+2.6%,
 * where the rule above gave -3.9..+2.9%); why was not found. */
static double
probe_overlap_coll(const Under *u, double gemm)
{
	if (u->alone <= 0)
		return 1;
	return gemm > 0 ? clamp01((u->alone - fmax(u->extra, 0)) / gemm) : 0;
}

/* defer (GPUs): where the ring posted behind a GEMM moved at less than
 * DEFER_BELOW of its pace under the GEMM queued after it (its
 * probe_overlap), it waited for that GEMM's SMs (probe()); then the
 * ring behind one more GEMM (DEFER) gives how it moves under the GEMM
 * after that one: its probe_overlap and that GEMM's slowdown. Written
 * on 2 ranks only: there the model with it was timed against bench-gpu
 * (2 H200s, two leases: the rows' worst error 13.2 -> 8.9% and 11.4 ->
 * 10.7%). No 4-GPU machine has run the probe yet, and the TP 4 leases
 * replayed with rates of 1 and 1.05 had their fused NCCL rows priced up
 * to 38% under what they ran (docs/PROFILE.md). The probe's line is
 * written on any number of ranks. */
#define DEFER_BELOW 0.5

/* slowdown: a GEMM's time under the ring's transfers over its time
 * alone (slowdown 4: under both directions'); overlap: the ring's
 * probe_overlap; overlap_coll, per library collective: on CPUs
 * probe_overlap_coll, on GPUs probe_overlap; defer: above. */
void
cal_slowdown(Cal *C)
{
	int64_t s = C->quick ? 64 : C->gpu ? 4096 : 512;
	int64_t count = (C->quick ? 16384 : C->gpu ? (64 << 20) : (4 << 20)) / 4;
	/* on CPUs 2048 rows: gemm.c cuts a GEMM under transfers into panels
	 * of 512 rows (of 512 x 512) with a progress test after each, as it
	 * cuts the models' GEMMs; one of 512 rows is a single panel, which
	 * tests nothing before its end */
	Gemm g = {C->probe_t, C->gpu || C->quick ? s : 4 * s, s, s, 0, 1};
	int reps = C->quick ? 3 : 9;

	if (C->size < 2 || (size_t)(g.m * s) * 4 > C->cap / 2 || (size_t)count * 4 > C->cap / 4)
		return;
	fill(C, C->probe_t);
	double alone;
	Under u[NPROBE];
	probe(C, &g, count, reps, &alone, u);
	if (!C->out)
		return;
	fprintf(C->out, "# a %lldx%lldx%lld GEMM %.6g s alone\n", (long long)g.m, (long long)s,
	        (long long)s, alone);
	for (int k = 0; k < nprobes(C); k++) {
		int ring = k == 0 || k >= BIDIR;
		double ov = ring || C->gpu ? probe_overlap(&u[k]) : probe_overlap_coll(&u[k], alone);
		double f = alone > 0 && u[k].gemm > alone ? u[k].gemm / alone : 1;
		/* to 6 digits: the overlaps are differences of them */
		fprintf(C->out, "# %s of %lld bytes a rank: %.6g s alone; the GEMM %.6g s under it, "
		        "waited %.6g s after it, %.6g s more than the GEMM alone\n", probe_name(k),
		        (long long)(ring ? count : count / C->size) * 4, u[k].alone, u[k].gemm,
		        u[k].wait, u[k].extra);
		if (k == 0) {
			fprintf(C->out, pf_line[PF_SLOWDOWN], 4, f);
			fprintf(C->out, pf_line[PF_OVERLAP], 4, ov);
		} else if (k == BIDIR)
			fprintf(C->out, pf_line[PF_SLOWDOWN_AT], 4, 4, f);
		else if (k == DEFER && probe_overlap(&u[0]) >= DEFER_BELOW)
			fprintf(C->out, "# no defer: the ring moved under the GEMM it was posted "
			        "behind\n");
		else if (k == DEFER && C->size != 2)
			fprintf(C->out, "# no defer: measured against the models on 2 ranks only "
			        "(docs/PROFILE.md)\n");
		else if (k == DEFER)
			fprintf(C->out, pf_line[PF_DEFER], 4, ov, 4, f);
		else
			fprintf(C->out, pf_line[PF_OVERLAP_COLL], coll_name[k - 1], 4, ov);
	}
}

/* clock D R (GPUs, two ranks and more): a GEMM's time when GEMMs keep
 * the GPU busy a share D of the time, with the library's collectives
 * (which draw little power) between their bursts, over its time in the
 * GEMM points; D = 1: busy all the time. A GPU at its power limit lowers
 * its clock under back-to-back GEMMs, more the longer they last, and
 * raises it again when the average power falls. 4 H100s, lease 23,
 * bench-gpu's case a, vanilla (one 131072x4096x4096 GEMM a pass),
 * traced: with transfers off the GEMM took 5.76-6.04 ms on the four GPUs
 * in the first 20 passes and 6.51-7.00 in the last 20, 2.1 s later;
 * between NCCL's reduce-scatters of 2.5 ms, after 2 s, 5.67-5.85. The
 * GEMM points of leases 20 and 22 priced it at 6.08-6.33 (16384x4096x4096
 * at 0.760-0.791 ms). The probe: heat() for CLOCK_HEAT seconds, as
 * bench-gpu warms up, then the point's 16384x4096x4096 GEMMs in levels
 * of CLOCK_LEVEL seconds each, in bursts of about 4 ms with all_gathers
 * between, busy 100% before and after every other level: the GPU keeps
 * heating over seconds, and a level read against the mean of its two
 * neighbours at 100% leaves that drift out (measured one after the other
 * from 100% down, after 1 s of heat(), the levels read 0.93-1.05 at 70%
 * and 85% busy in eight profiles of leases 17-22). Each level keeps the
 * median of its later two thirds. clock 1 is the levels at 100% over the
 * point's own time; without that point, the factors are over busy all
 * the time (the file's meaning before 2026-11-28). */
#define CLOCK_HEAT 2.0
#define CLOCK_LEVEL 0.25
void
cal_clock(Cal *C)
{
	static const double duty[] = {1, 0.85, 1, 0.7, 1, 0.55, 1};
	enum { NDUTY = sizeof duty / sizeof duty[0], MAXB = 512 };
	cfrt_dtype t = C->probe_t;
	Gemm g = {t, 16384, 4096, 4096, 0, 1};
	int64_t blk = C->cap / (size_t)C->size < (64 << 20) ? (int64_t)(C->cap / (size_t)C->size)
	                                                   : (64 << 20);
	Coll ag = {0, blk / 4};
	double v[MAXB], med[NDUTY], point = 0; /* the point's time a call */
	char shape[64]; /* "bf16 16384x4096x4096", as the comments name g */

	if (!C->gpu || C->quick || C->size < 2 || !fill(C, t))
		return;
	snprintf(shape, sizeof shape, "%s %lldx%lldx%lld", tname[t], (long long)g.m,
	         (long long)g.n, (long long)g.k);
	for (int i = 0; i < C->npt; i++) {
		const Point *p = &C->pt[i];
		if (p->fn == run_gemm && p->s > 0 && !p->arg.g.acc && p->arg.g.t == t &&
		    p->arg.g.m == g.m && p->arg.g.n == g.n && p->arg.g.k == g.k)
			point = p->s;
	}
	double tag = timed(C, run_coll, &ag, 5, 0, 5);
	heat(C, t, CLOCK_HEAT);
	/* both the slowest rank's, so every rank runs as many calls */
	double tg = timed(C, run_gemm, &g, 3, 0, 3);
	int n = tg > 0 ? (int)ceil(0.004 / tg) : 1, iters;
	double bmax = n * tg;
	for (int l = 0; l < NDUTY; l++) {
		int k = tag > 0 ? (int)lround(bmax * (1 - duty[l]) / duty[l] / tag) : 0;
		iters = (int)ceil(CLOCK_LEVEL / (bmax + k * tag));
		if (iters > MAXB)
			iters = MAXB;
		for (int i = 0; i < iters; i++) {
			double b0 = cfrt_wtime(C->ctx);
			for (int j = 0; j < n; j++)
				die_rc(C, run_gemm(C, &g), "gemm");
			v[i] = (cfrt_wtime(C->ctx) - b0) / n;
			for (int j = 0; j < k; j++)
				die_rc(C, run_coll(C, &ag), "all_gather");
		}
		double mine = median(v + iters / 3, iters - iters / 3);
		MPI_Allreduce(&mine, &med[l], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (C->out)
			fprintf(C->out, "# %s GEMMs busy %.0f%% of the time: %.4g s a call "
			        "(bursts of %d calls, %d all_gather%s of %lld bytes a rank between)\n",
			        shape, 100 * duty[l], med[l], n, k, k == 1 ? "" : "s",
			        (long long)blk);
	}
	double busy = 0; /* the levels at 100%: every other one */
	for (int l = 0; l < NDUTY; l += 2)
		busy += med[l] / ((NDUTY + 1) / 2);
	double f1 = point > 0 ? busy / point : 1;
	if (!C->out)
		return;
	if (point > 0) {
		fprintf(C->out, "# the point's %s GEMM: %.4g s a call\n", shape, point);
		fprintf(C->out, pf_line[PF_CLOCK], 4, 1.0, 4, f1);
	}
	for (int l = 1; l < NDUTY; l += 2)
		fprintf(C->out, pf_line[PF_CLOCK], 4, duty[l], 4,
		        f1 * 2 * med[l] / (med[l - 1] + med[l + 1]));
}
