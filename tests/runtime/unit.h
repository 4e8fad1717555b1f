/* unit.h: shared by the CUnit suites of the runtime (tests/runtime/unit_*.c).
 * The runner (unit_main.c) runs every suite on every rank of mpirun, so a
 * suite that communicates must run the same collectives on all ranks and
 * never skip them on a failed assertion (no CU_ASSERT_FATAL there). */
#ifndef UNIT_H
#define UNIT_H

#include <CUnit/CUnit.h>
#include <stdint.h>

#include "cfrt.h"

/* The context every suite uses: on a sub-communicator of MPI_COMM_WORLD
 * with the ranks in reverse order, so that context ranks differ from world
 * ranks whenever there are two ranks or more. */
extern cfrt_ctx *ut_ctx;
/* Prefix for trace files (argv[1] of the runner). */
extern const char *ut_trace_prefix;

void ut_register_compute(void);
void ut_register_grad(void);
void ut_register_attention(void);
void ut_register_lse(void);
void ut_register_comm(void);
void ut_register_context(void);

/* A context on MPI_COMM_WORLD in progress mode `mode` (collective). */
cfrt_ctx *ut_new_ctx(const char *mode, const char *model);

/* Runtime buffers from and to host doubles, converting to the dtype. */
void *ut_alloc(int64_t n, cfrt_dtype t);
void ut_put(void *buf, const double *x, int64_t n, cfrt_dtype t);
void ut_get(double *x, const void *buf, int64_t n, cfrt_dtype t);
/* max |got - want| / max(1, |want|) */
double ut_maxrel(const double *got, const double *want, int64_t n);
/* Tolerance for results computed in type t. */
double ut_tol(cfrt_dtype t);
/* x[i] = cfrt_uniform(seed, i, t) for i < n. */
void ut_uniform(double *x, int64_t n, uint64_t seed, cfrt_dtype t);

#endif
