/* The CUnit runner of the runtime, run under mpirun: every rank runs every
 * suite; rank 0 prints the verbose report, other ranks their failures.
 * Exits non-zero on every rank when any assertion failed on any rank.
 * Usage: runtime_unit [trace-prefix] */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

cfrt_ctx *ut_ctx;
const char *ut_trace_prefix = "cfrt-unit-trace";

cfrt_ctx *ut_new_ctx(const char *mode, const char *model)
{
	cfrt_ctx *c = NULL;
	setenv("CFRT_PROGRESS", mode, 1);
	CU_ASSERT_EQUAL(cfrt_init(&c, MPI_COMM_WORLD, cfrt_size(ut_ctx), model),
	                CFRT_OK);
	unsetenv("CFRT_PROGRESS");
	return c;
}

void *ut_alloc(int64_t n, cfrt_dtype t)
{
	void *p = NULL;
	CU_ASSERT_EQUAL(cfrt_alloc(ut_ctx, &p, (size_t)n * cfrt_dtype_size(t)),
	                CFRT_OK);
	return p;
}

void ut_put(void *buf, const double *x, int64_t n, cfrt_dtype t)
{
	void *h = malloc((size_t)n * cfrt_dtype_size(t) + 1);
	for (int64_t i = 0; i < n; i++)
		if (t == CFRT_F32)
			((float *)h)[i] = (float)x[i];
		else
			((double *)h)[i] = x[i];
	CU_ASSERT_EQUAL(cfrt_upload(ut_ctx, buf, h, (size_t)n * cfrt_dtype_size(t)),
	                CFRT_OK);
	free(h);
}

void ut_get(double *x, const void *buf, int64_t n, cfrt_dtype t)
{
	void *h = malloc((size_t)n * cfrt_dtype_size(t) + 1);
	CU_ASSERT_EQUAL(cfrt_download(ut_ctx, h, buf, (size_t)n * cfrt_dtype_size(t)),
	                CFRT_OK);
	for (int64_t i = 0; i < n; i++)
		x[i] = t == CFRT_F32 ? ((float *)h)[i] : ((double *)h)[i];
	free(h);
}

double ut_maxrel(const double *got, const double *want, int64_t n)
{
	double m = 0.0;
	for (int64_t i = 0; i < n; i++) {
		double e = fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i]));
		if (!(e <= m)) /* NaN counts as the largest error */
			m = isnan(e) ? INFINITY : e;
	}
	return m;
}

double ut_tol(cfrt_dtype t)
{
	return t == CFRT_F32 ? 1e-5 : 1e-12;
}

void ut_uniform(double *x, int64_t n, uint64_t seed, cfrt_dtype t)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = cfrt_uniform(seed, (uint64_t)i, t);
}

/* Each rank other than 0 prints its own failures (rank 0's are in the
 * verbose report). */
static void print_failures(int rank)
{
	for (CU_pFailureRecord f = CU_get_failure_list(); f; f = f->pNext)
		fprintf(stderr, "rank %d: FAILED %s: %s:%u: %s\n", rank,
		        f->pTest ? f->pTest->pName : "?", f->strFileName,
		        f->uiLineNumber, f->strCondition);
}

static unsigned run_suites(int rank)
{
	ut_register_context();
	ut_register_compute();
	ut_register_grad();
	ut_register_attention();
	ut_register_lse();
	ut_register_comm();
	CU_basic_set_mode(rank == 0 ? CU_BRM_VERBOSE : CU_BRM_SILENT);
	CU_basic_run_tests();
	if (rank != 0)
		print_failures(rank);
	return CU_get_number_of_failures() + CU_get_number_of_tests_failed();
}

int main(int argc, char **argv)
{
	int provided, rank, size;
	MPI_Comm comm;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 1)
		ut_trace_prefix = argv[1];
	MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &comm);
	CFRT_TRY(NULL, cfrt_init(&ut_ctx, comm, size, "unit"));
	if (rank == 0)
		printf("runtime_unit: %d ranks, backend %s, progress %s\n", size,
		       cfrt_backend_name(), cfrt_progress_name(ut_ctx));
	if (CU_initialize_registry() != CUE_SUCCESS)
		MPI_Abort(MPI_COMM_WORLD, 2);
	unsigned failed = run_suites(rank), total = 0;
	CU_cleanup_registry();
	MPI_Allreduce(&failed, &total, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
	CFRT_TRY(NULL, cfrt_finalize(ut_ctx)); /* ut_ctx is gone */
	MPI_Comm_free(&comm);
	MPI_Finalize();
	if (rank == 0)
		printf("runtime_unit: %u failures over %d ranks\n", total, size);
	return total ? 1 : 0;
}
