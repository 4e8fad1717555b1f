/* profile.h: a machine's profile, what cfrt-calibrate measured on it
 * (docs/PROFILE.md): the Profile the cost model (predict.h) prices
 * schedules on, and profile.c's reader, writer and table lookups. Below
 * predict.c and lower.c, which use it; it needs only cf.h. */
#ifndef PROFILE_H
#define PROFILE_H

#include <stdio.h>

#include "cf.h"

enum { PROFILE_VERSION = 1, MAXCONC = 3 };

/* A measured point: x (bytes, or a GEMM's m, n, k) and its seconds. */
typedef struct PPoint {
	double m, n, k; /* GEMM shape; transfers: k is the message bytes */
	double sec;
	int line;       /* where the profile gives it */
} PPoint;

typedef struct PTable {
	PPoint *p;
	int n, cap;
} PTable;

/* Concurrency classes of point-to-point transfers: 1, 2 or 4 transfers
 * at one rank at once (the ring's send and receive are 2; bidir's four
 * are 4). */
extern const int profile_conc[MAXCONC];

typedef struct Profile {
	const char *name;      /* the file's */
	const char *backend;   /* as cfrt_backend_name said, e.g. "mpi+openblas" */
	const char *transfer;  /* the transfer mode calibrated, e.g. "mpi", "ce" */
	int ranks;             /* ranks the calibration ran on */
	PTable gemm[NDTYPE];   /* (m, n, k) -> seconds */
	PTable gemm_acc[NDTYPE]; /* the same of GEMMs that add to their
	                        * output (beta = 1, as FuseRS accumulates),
	                        * at a few shapes */
	double acc[NDTYPE];    /* from gemm_acc when the profile is read:
	                        * seconds per byte of output that such a GEMM
	                        * takes over one that writes it, the median
	                        * over the points of each one's time less the
	                        * gemm table's at its shape, at least 0; 0
	                        * without points */
	double ew[NDTYPE];     /* bytes read + written per second by
	                        * elementwise ops, norms, copies (`ew T
	                        * RATE`); 0: none */
	PTable ew_by[NDTYPE];  /* the same by the bytes of the call (`ew T
	                        * BYTES RATE`: cached data moves faster);
	                        * when measured, it replaces ew */
	double op[NDTYPE][NOP]; /* the same of one op (`op T NAME RATE`:
	                         * gelu's tanh costs more than an add's
	                         * bytes); 0: ew's */
	PTable attn[2][NDTYPE]; /* attention without ([0]) and with ([1]) a
	                         * causal mask: (key length k) -> flop per
	                         * second (in PPoint.sec; a causal one counts
	                         * half the flop of an unmasked one), linear
	                         * between the lengths measured, constant
	                         * past them */
	PTable attn_grad[2][NDTYPE]; /* the same of the backward (dq, dk and
	                              * dv by a call each, as generated code
	                              * runs them), counting 2.5 times the
	                              * forward's flop */
	PTable p2p[MAXCONC];   /* (bytes) -> seconds of each of that many
	                        * transfers running at once at a rank */
	PTable coll[4];        /* library collectives over `ranks` ranks:
	                        * (bytes of one rank's block) -> seconds; by
	                        * profile_coll_index */
	double slowdown;       /* compute time while a transfer runs, over its
	                        * time alone (>= 1) */
	double slowdown_at[MAXCONC]; /* the same while at least profile_conc[c]
	                        * transfers of the rank run (cfrt-calibrate:
	                        * 4, both ring directions); 0: not given */
	double overlap;        /* the share of a transfer's time that passes
	                        * while its ranks compute (0 < x <= 1; 1: it
	                        * moves on its own, as on GPUs or with a
	                        * progress thread; near 0: only inside MPI
	                        * calls, so the rest of it passes at the wait) */
	double overlap_coll[4]; /* the same of each library collective under
	                        * compute, by profile_coll_index (a library
	                        * without a progress thread runs a collective
	                        * round by round inside its calls, a round
	                        * when every rank has called it); < 0: as
	                        * overlap */
	double defer_ov, defer_sd; /* `defer OV SD` (GPUs with NCCL): a
	                        * transfer posted behind compute with more
	                        * compute queued right after it waits for the
	                        * SMs until that compute ends; once moving,
	                        * the share defer_ov of its time passes per
	                        * second of compute, which it slows defer_sd
	                        * times (these replace overlap and slowdown
	                        * for point-to-point transfers); defer_sd 0:
	                        * no entry, nothing deferred */
	PTable clock;          /* `clock D R`: a GEMM's or attention's time
	                        * when compute keeps the GPU busy a share D
	                        * of the time (transfers the rest; D = 1: all
	                        * of it) over its time in the gemm and attn
	                        * points (a GPU at its power limit clocks up
	                        * when its average power falls); in PPoint k
	                        * and sec; without a point at 1, 1 there;
	                        * empty: 1 */
	int batch_loop;        /* `batch loop`: a batched matmul runs as one
	                        * GEMM per batch index (the CPU backend);
	                        * without it (`batch one`) as one call of all
	                        * the rows (cuBLAS's strided batch) */
} Profile;

/* profile.c: reads profile file path; NULL after an error reported on
 * d as "path:line:col: error: ..." (d's source becomes the file). */
Profile *profile_read(Arena *a, Diag *d, Src *src, const char *path);
/* Parses src (its name for messages); NULL after errors on d. */
Profile *profile_parse(Arena *a, Diag *d, const Src *src);
/* Writes pf in the file format, every number exact (%.17g), the points in
 * order: reading it back gives the same profile (--emit=profile). */
void profile_write(FILE *f, const Profile *pf);
/* The slowdown of compute while n transfers of its rank run: the entry
 * of the largest count <= n given, else the plain one. */
double profile_slowdown(const Profile *pf, int n);
/* The clock table's time factor at busy share d (0 < d <= 1): linear
 * between the points and on to the point at 1 (1 where the table has
 * none), the first point's below it; 1 without a table. */
double profile_clock(const Profile *pf, double d);
/* 0..3 for all_gather, reduce_scatter, all_reduce, all_to_all; -1. */
int profile_coll_index(OpKind op);
/* Seconds of one table lookup: GEMM (m, n, k) by inverse-distance
 * weighting of the measured rates in log space (a measured point exactly;
 * one point: its rate for every shape); transfers and collectives by
 * bytes, piecewise linear in the points (below the first: the first's
 * time, the latency; past the last: the last segment's slope; one point:
 * time proportional to bytes). -1: empty table. */
double profile_gemm(const PTable *t, double m, double n, double k);
double profile_bytes(const PTable *t, double bytes);
/* A rate by size (attention's flop per second by key length, ew's bytes
 * per second by bytes): linear between the points, constant past them;
 * -1: none measured. */
double profile_rate(const PTable *t, double sk);
/* Bytes per second of a plain elementwise pass over bytes of type t: the
 * ew table's, else the one ew rate; <= 0: none. */
double profile_ew(const Profile *pf, int t, double bytes);

#endif
