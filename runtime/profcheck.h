/* profcheck.h: what the numbers of a machine profile may be
 * (docs/PROFILE.md, "What a profile may hold"), shared by the writer
 * (cfrt-calibrate, which refuses to write a profile that breaks a rule)
 * and the reader (cfc --profile: a number out of its range is an error
 * at its file:line, an inconsistent point a warning). Header only: the
 * compiler and the runtime's tool both include it, and neither links the
 * other.
 *
 * Ranges: every number of a profile within what any machine measures.
 * A profile with `ranks 99999999999999999999`, GEMM dims of 2^63 - 1 or
 * times of 1e300 was read and priced a model at 5e300 ms.
 *
 * Consistency: a point is implausible when its rate lies outside what
 * any machine reaches: a transfer slower than PC_LATENCY plus its bytes
 * at PC_MIN_LINK, compute slower than PC_LATENCY plus its work at
 * PC_MIN_COMPUTE, either faster than PC_MAX_BPS / PC_MAX_FLOPS. Two
 * points of one series are out of order when the larger (a larger
 * message; a GEMM at least as large in every dimension) took less time
 * than the smaller by more than noise: under PC_ORDER of it, and by more
 * than PC_LATENCY. The PC_LATENCY allowance is what one preemption of a
 * loaded machine costs a short point (4 ranks on 2 busy cores: a
 * 16x16x16 GEMM read 4-16 ms on some visits, 0.4 us on others). A calibration on a loaded 2-core machine wrote
 * `p2p 1 1024 0.0919` (92 ms for 1 KiB) beside `p2p 1 4096 2.3e-05`, and
 * cfc priced a 0.58 ms backward at 376 ms. */
#ifndef CFRT_PROFCHECK_H
#define CFRT_PROFCHECK_H

/* ---- ranges of the numbers a profile may hold ---- */
#define PC_MAX_RANKS 4096.0           /* cfc's largest group */
#define PC_MAX_DIM 2147483647.0       /* a GEMM dimension (BLAS takes an int) */
#define PC_MAX_BYTES 1099511627776.0  /* a message or buffer: 1 TiB */
#define PC_MAX_KEYLEN 16777216.0      /* an attention's key length */
#define PC_MIN_SEC 1e-10              /* a measured time: 0.1 ns ... */
#define PC_MAX_SEC 3600.0             /* ... to an hour */
#define PC_MIN_RATE 1e3               /* bytes or flop per second ... */
#define PC_MAX_BPS 1e14               /* ... to 100 TB/s of bytes */
#define PC_MAX_FLOPS 1e17             /* ... or 100 PFLOP/s */
#define PC_MAX_FACTOR 100.0           /* a slowdown or clock time factor */
#define PC_MAX_POINTS 1024            /* points of one table (cfrt-calibrate writes <= 125) */

/* ---- consistency ---- */
#define PC_LATENCY 0.02     /* a transfer slower than 20 ms ... */
#define PC_LATENCY_QUICK 0.1 /* cfrt-calibrate --quick's allowance: its
                             * points are tiny and few, and tests run it
                             * on machines others load */
#define PC_MIN_LINK 1e7     /* ... plus its bytes at 10 MB/s is implausible */
#define PC_MIN_COMPUTE 1e6  /* compute: 20 ms plus 1 MB/s or 1 Mflop/s */
#define PC_ORDER 0.5        /* larger took under half the smaller's time */

/* Why a transfer of `bytes` taking `sec` seconds is implausible, or NULL;
 * lat: the latency allowed (PC_LATENCY; --quick: PC_LATENCY_QUICK). */
static inline const char *
pc_transfer_implausible(double bytes, double sec, double lat)
{
	if (sec > lat + bytes / PC_MIN_LINK)
		return lat > PC_LATENCY ? "slower than 100 ms plus 10 MB/s" :
		       "slower than 20 ms plus 10 MB/s";
	if (bytes / sec > PC_MAX_BPS)
		return "faster than 100 TB/s";
	return 0;
}

/* Why compute of `work` (flop, else bytes) taking `sec` seconds is
 * implausible, or NULL; lat as above. */
static inline const char *
pc_compute_implausible(double work, double sec, int flop, double lat)
{
	if (sec > lat + work / PC_MIN_COMPUTE)
		return lat > PC_LATENCY ? (flop ? "slower than 100 ms plus 1 Mflop/s" :
		                           "slower than 100 ms plus 1 MB/s") :
		       flop ? "slower than 20 ms plus 1 Mflop/s" : "slower than 20 ms plus 1 MB/s";
	if (work / sec > (flop ? PC_MAX_FLOPS : PC_MAX_BPS))
		return flop ? "faster than 100 PFLOP/s" : "faster than 100 TB/s";
	return 0;
}

/* Why compute at `rate` (bytes or flop per second; flop: max PC_MAX_FLOPS,
 * else PC_MAX_BPS) is implausible, or NULL: for a point that gives its
 * rate alone (its work unknown). */
static inline const char *
pc_rate_implausible(double rate, int flop)
{
	if (rate < PC_MIN_COMPUTE)
		return flop ? "slower than 1 Mflop/s" : "slower than 1 MB/s";
	if (rate > (flop ? PC_MAX_FLOPS : PC_MAX_BPS))
		return flop ? "faster than 100 PFLOP/s" : "faster than 100 TB/s";
	return 0;
}

/* Whether the larger point's time `large` is out of order against the
 * smaller one's `small` (seconds); lat as above. */
static inline int
pc_out_of_order(double small, double large, double lat)
{
	return large < PC_ORDER * small && small - large > lat;
}

#endif
