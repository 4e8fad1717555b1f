/* The context: ranks of a sub-communicator, the size check and its
 * message, progress modes from CFRT_PROGRESS, the trace file, the view
 * helpers of the header, memory. Contexts made here are collective on
 * MPI_COMM_WORLD. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

static void test_ranks(void)
{
	int wr, ws;
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	MPI_Comm_size(MPI_COMM_WORLD, &ws);
	CU_ASSERT_EQUAL(cfrt_size(ut_ctx), ws);
	CU_ASSERT_EQUAL(cfrt_rank(ut_ctx), ws - 1 - wr);
	CU_ASSERT_STRING_EQUAL(cfrt_backend_name(), "mpi+openblas");
}

static void test_wrong_size(void)
{
	int ws;
	char want[160];
	cfrt_ctx *c = (cfrt_ctx *)&ws;
	MPI_Comm_size(MPI_COMM_WORLD, &ws);
	CU_ASSERT_EQUAL(cfrt_init(&c, MPI_COMM_WORLD, ws + 1, "mlp"), CFRT_ESIZE);
	CU_ASSERT_PTR_NULL(c);
	snprintf(want, sizeof want, "cfrt_init: model mlp was compiled for a "
	         "group of %d ranks, but the communicator has %d", ws + 1, ws);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), want);
}

/* Several groups: the grid's layout, a transfer in the current group,
 * and the errors of cfrt_init_groups, cfrt_use_group and
 * cfrt_check_groups. Grids {1, N} and {N, 1} of the world's N ranks. */
static void test_groups(void)
{
	int wr, ws;
	char want[200];
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	MPI_Comm_size(MPI_COMM_WORLD, &ws);
	for (int k = 0; k < 2; k++) {
		int sizes[2] = {k ? ws : 1, k ? 1 : ws}, big = !k; /* group of N */
		cfrt_ctx *c = NULL;
		CU_ASSERT_EQUAL_FATAL(cfrt_init_groups(&c, MPI_COMM_WORLD, 2, sizes, "g"),
		                      CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_group_rank(c, big), wr);
		CU_ASSERT_EQUAL(cfrt_group_rank(c, !big), 0);
		CU_ASSERT_EQUAL(cfrt_group_rank(c, 2), -1);
		CU_ASSERT_EQUAL(cfrt_size(c), sizes[0]); /* group 0 is current */
		CU_ASSERT_EQUAL(cfrt_use_group(c, big), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_rank(c), wr);
		CU_ASSERT_EQUAL(cfrt_size(c), ws);
		/* a ring in the big group: each rank gets its left neighbour's
		 * rank */
		float mine = (float)wr, got = -1;
		void *buf;
		cfrt_req q[2];
		cfrt_alloc(c, &buf, 2 * sizeof(float));
		float *sb = buf, *rb = sb + 1;
		CU_ASSERT_EQUAL(cfrt_upload(c, sb, &mine, sizeof mine), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_isend(c, sb, 1, CFRT_F32, (wr + 1) % ws, 3, &q[0]), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_irecv(c, rb, 1, CFRT_F32, (wr + ws - 1) % ws, 3, &q[1]),
		                CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_waitall(c, 2, q), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_download(c, &got, rb, sizeof got), CFRT_OK);
		CU_ASSERT_EQUAL(got, (float)((wr + ws - 1) % ws));
		cfrt_free(c, buf);
		/* the other group has one rank: peer 1 is none of it */
		CU_ASSERT_EQUAL(cfrt_use_group(c, !big), CFRT_OK);
		CU_ASSERT_EQUAL(cfrt_isend(c, &mine, 1, CFRT_F32, 1, 3, &q[0]), CFRT_EINVAL);
		CU_ASSERT_EQUAL(cfrt_use_group(c, 2), CFRT_EINVAL);
		CU_ASSERT_STRING_EQUAL(cfrt_last_error(c),
		                       "cfrt_use_group: group 2: the context has 2");
		CU_ASSERT_EQUAL(cfrt_check_groups(c, 2, sizes), CFRT_OK);
		int other[2] = {sizes[0], sizes[1] + 1};
		CU_ASSERT_EQUAL(cfrt_check_groups(c, 2, other), CFRT_ESIZE);
		snprintf(want, sizeof want, "cfrt_check_groups: compiled for groups of %d x %d "
		         "ranks, but the context has groups of %d x %d (cfrt_init_groups)",
		         other[0], other[1], sizes[0], sizes[1]);
		CU_ASSERT_STRING_EQUAL(cfrt_last_error(c), want);
		CU_ASSERT_EQUAL(cfrt_finalize(c), CFRT_OK);
	}
	cfrt_ctx *c = NULL;
	int sizes[2] = {ws, 2};
	CU_ASSERT_EQUAL(cfrt_init_groups(&c, MPI_COMM_WORLD, 2, sizes, "g"), CFRT_ESIZE);
	CU_ASSERT_PTR_NULL(c);
	snprintf(want, sizeof want, "cfrt_init: model g was compiled for groups of %d x 2 = %d "
	         "ranks, but the communicator has %d", ws, 2 * ws, ws);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), want);
	CU_ASSERT_EQUAL(cfrt_init_groups(&c, MPI_COMM_WORLD, 9, sizes, "g"), CFRT_EINVAL);
}

/* A context per progress mode: the mode it reports, and a ring transfer
 * under a GEMM arrives. The runner has MPI_THREAD_MULTIPLE. */
static void mode_case(const char *mode)
{
	cfrt_ctx *c = ut_new_ctx(mode, "m");
	int r, p;
	if (!c)
		return;
	CU_ASSERT_STRING_EQUAL(cfrt_progress_name(c), mode);
	r = cfrt_rank(c);
	p = cfrt_size(c);
	const int64_t n = 1 << 18, dim = 256;
	double *host = malloc(sizeof(double) * (size_t)n);
	void *s, *rv, *a;
	cfrt_req req[2];
	cfrt_alloc(c, &s, n * sizeof(double));
	cfrt_alloc(c, &rv, n * sizeof(double));
	cfrt_alloc(c, &a, 3 * dim * dim * sizeof(double));
	for (int64_t i = 0; i < n; i++)
		host[i] = r * 1e6 + (double)i;
	CU_ASSERT_EQUAL(cfrt_upload(c, s, host, n * sizeof(double)), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_isend(c, s, n, CFRT_F64, (r + 1) % p, 1, &req[0]), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_irecv(c, rv, n, CFRT_F64, (r + p - 1) % p, 1, &req[1]),
	                CFRT_OK);
	double *m = a;
	CU_ASSERT_EQUAL(cfrt_gemm(c, CFRT_F64, CFRT_NOTRANS, CFRT_NOTRANS, dim, dim,
	                          dim, 1.0, m, dim, 0, m + dim * dim, dim, 0, 0.0,
	                          m + 2 * dim * dim, dim, 0, 1), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_waitall(c, 2, req), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_download(c, host, rv, n * sizeof(double)), CFRT_OK);
	CU_ASSERT_EQUAL(host[n - 1], ((r + p - 1) % p) * 1e6 + (double)(n - 1));
	cfrt_free(c, s);
	cfrt_free(c, rv);
	cfrt_free(c, a);
	free(host);
	CU_ASSERT_EQUAL(cfrt_finalize(c), CFRT_OK);
}

static void test_progress_modes(void)
{
	cfrt_ctx *c = NULL;
	mode_case("none");
	mode_case("panel");
	mode_case("thread");
	setenv("CFRT_PROGRESS", "bogus", 1);
	CU_ASSERT_EQUAL(cfrt_init(&c, MPI_COMM_WORLD, cfrt_size(ut_ctx), "m"),
	                CFRT_EINVAL);
	unsetenv("CFRT_PROGRESS");
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), "cfrt_init: CFRT_PROGRESS="
	                       "bogus: use none, panel or thread");
}

/* Rank 0 writes <prefix>.ctx<k>.json for the job (this is not the
 * process's first context); t-runtime.sh checks the JSON and the event
 * names. */
static void test_trace(void)
{
	cfrt_ctx *c = NULL;
	float buf[64] = {0}, in[16];
	cfrt_req req[2];
	setenv("CFRT_TRACE", ut_trace_prefix, 1);
	CU_ASSERT_EQUAL(cfrt_init(&c, MPI_COMM_WORLD, cfrt_size(ut_ctx), "traced"),
	                CFRT_OK);
	unsetenv("CFRT_TRACE");
	if (!c)
		return;
	int r = cfrt_rank(c), p = cfrt_size(c);
	cfrt_where(c, "fuse_rs \"y\"", 2);
	cfrt_what(c, "y += x @ w", 1);
	CU_ASSERT_EQUAL(cfrt_gemm(c, CFRT_F32, CFRT_NOTRANS, CFRT_NOTRANS, 4, 4, 4,
	                          1.0, buf, 4, 0, buf + 16, 4, 0, 1.0, buf + 32, 4,
	                          0, 1), CFRT_OK);
	cfrt_what(c, "send buf", 1);
	CU_ASSERT_EQUAL(cfrt_isend(c, buf, 16, CFRT_F32, (r + 1) % p, 0, &req[0]),
	                CFRT_OK);
	cfrt_what(c, "recv in", 0);
	CU_ASSERT_EQUAL(cfrt_irecv(c, in, 16, CFRT_F32, (r + p - 1) % p, 0, &req[1]),
	                CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_waitall(c, 2, req), CFRT_OK);
	cfrt_where(c, "tail", 3);
	cfrt_what(c, "in = all_reduce(in)", -1);
	CU_ASSERT_EQUAL(cfrt_all_reduce(c, in, in, 16, CFRT_F32), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_finalize(c), CFRT_OK);
}

/* The MPI backend has no stream or NCCL communicator to take; unknown
 * option flags are refused by every backend; no flags: a plain init. */
static void test_opts(void)
{
	cfrt_ctx *c = NULL;
	int n = cfrt_size(ut_ctx);
	cfrt_opts o = {.flags = CFRT_OPT_STREAM};
	CU_ASSERT_EQUAL(cfrt_init_opts(&c, MPI_COMM_WORLD, 1, &n, "m", &o), CFRT_ENOTSUP);
	CU_ASSERT_PTR_NULL(c);
	CU_ASSERT_PTR_NOT_NULL(strstr(cfrt_last_error(NULL), "no CUDA stream or NCCL"));
	o.flags = CFRT_OPT_NCCL_COMM;
	CU_ASSERT_EQUAL(cfrt_init_opts(&c, MPI_COMM_WORLD, 1, &n, "m", &o), CFRT_ENOTSUP);
	o.flags = 16;
	CU_ASSERT_EQUAL(cfrt_init_opts(&c, MPI_COMM_WORLD, 1, &n, "m", &o), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), "cfrt_init: unknown option flags 0x10");
	o.flags = 0;
	CU_ASSERT_EQUAL(cfrt_init_opts(&c, MPI_COMM_WORLD, 1, &n, "m", &o), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_finalize(c), CFRT_OK);
}

static void test_views(void)
{
	float x[2 * 3 * 8];
	cfrt_view v = cfrt_view_contig(x, CFRT_F32, 3, (int64_t[]){2, 3, 8});
	CU_ASSERT_EQUAL(v.stride[0], 24);
	CU_ASSERT_EQUAL(cfrt_view_numel(&v), 48);
	cfrt_view s = cfrt_view_slice(v, 1, 1, 2);
	CU_ASSERT_PTR_EQUAL(s.p, x + 8);
	CU_ASSERT_EQUAL(s.dim[1], 2);
	cfrt_view h = cfrt_view_split(v, 2, 4, 2);
	CU_ASSERT_EQUAL(h.nd, 4);
	CU_ASSERT(h.dim[2] == 4 && h.dim[3] == 2 && h.stride[2] == 2 &&
	          h.stride[3] == 1 && h.stride[1] == 8);
	cfrt_view t = cfrt_view_permute(h, (int[]){0, 2, 1, 3});
	CU_ASSERT(t.dim[1] == 4 && t.stride[1] == 2 && t.dim[2] == 3 &&
	          t.stride[2] == 8);
	CU_ASSERT_EQUAL(cfrt_dtype_size(CFRT_BF16), 2);
	CU_ASSERT_EQUAL(cfrt_dtype_size(CFRT_F64), 8);
}

static void test_memory(void)
{
	void *p = (void *)1;
	unsigned char host[100];
	CU_ASSERT_EQUAL(cfrt_alloc(ut_ctx, &p, 0), CFRT_OK);
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_EQUAL(cfrt_alloc(ut_ctx, &p, 100), CFRT_OK);
	CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
	memset(host, 7, sizeof host);
	CU_ASSERT_EQUAL(cfrt_download(ut_ctx, host, p, 100), CFRT_OK);
	CU_ASSERT(host[0] == 0 && host[99] == 0);
	memset(host, 7, sizeof host);
	CU_ASSERT_EQUAL(cfrt_upload(ut_ctx, p, host, 100), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_memset_zero(ut_ctx, p, 50), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_download(ut_ctx, host, p, 100), CFRT_OK);
	CU_ASSERT(host[49] == 0 && host[50] == 7);
	CU_ASSERT_EQUAL(cfrt_upload(ut_ctx, NULL, host, 10), CFRT_EINVAL);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, p), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, NULL), CFRT_OK);
}

/* Library use: sizes registered and checked exactly, contexts told from
 * NULL, and the watchdog on a receive no rank sends (from this rank
 * itself): CFRT_ETIMEOUT naming it, then CFRT_EFAILED; cfrt_finalize
 * settles it. */
/* The allocation high-water mark: live bytes up and down with
 * cfrt_alloc and cfrt_free, the peak their most, cfrt_mem_reset_peak
 * brings it down to what is live; registered buffers and frees of
 * NULL count nothing. */
static void test_mem_peak(void)
{
	void *a, *b, *c;
	float host[4];
	size_t live = cfrt_mem_live(ut_ctx);
	cfrt_mem_reset_peak(ut_ctx);
	CU_ASSERT_EQUAL(cfrt_mem_peak(ut_ctx), live);
	CU_ASSERT_EQUAL_FATAL(cfrt_alloc(ut_ctx, &a, 1000), CFRT_OK);
	CU_ASSERT_EQUAL_FATAL(cfrt_alloc(ut_ctx, &b, 24), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mem_live(ut_ctx), live + 1024);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, a), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_alloc(ut_ctx, &c, 0), CFRT_OK); /* NULL, nothing */
	CU_ASSERT_EQUAL_FATAL(cfrt_alloc(ut_ctx, &c, 500), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_register(ut_ctx, host, sizeof host), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mem_live(ut_ctx), live + 524);
	CU_ASSERT_EQUAL(cfrt_mem_peak(ut_ctx), live + 1024);
	cfrt_mem_reset_peak(ut_ctx);
	CU_ASSERT_EQUAL(cfrt_mem_peak(ut_ctx), live + 524);
	CU_ASSERT_EQUAL(cfrt_unregister(ut_ctx, host), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, NULL), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, b), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_free(ut_ctx, c), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_mem_live(ut_ctx), live);
	CU_ASSERT_EQUAL(cfrt_mem_peak(ut_ctx), live + 524);
}

static void test_lib(void)
{
	cfrt_ctx *c = NULL;
	int one = 1;
	char buf[64];
	CU_ASSERT_EQUAL(cfrt_set_errors(7), CFRT_EINVAL);
	CU_ASSERT_EQUAL(cfrt_check_ctx(NULL, "f"), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), "f: null context (cfrt_init was not "
	                       "called, or failed)");
	CU_ASSERT_EQUAL(cfrt_check_ctx(ut_ctx, "f"), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_register(ut_ctx, buf, 32), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_check_arg(ut_ctx, buf + 16, 16, "t"), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_check_arg(ut_ctx, buf + 16, 17, "t"), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(ut_ctx), "cfrt_check_arg: t needs 17 bytes, "
	                       "but its registered buffer has 16 from there");
	CU_ASSERT_EQUAL(cfrt_unregister(ut_ctx, buf), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_check_arg(ut_ctx, buf + 16, 17, "t"), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_unregister(ut_ctx, buf), CFRT_EINVAL);

	cfrt_opts o = {.flags = CFRT_OPT_ERRORS | CFRT_OPT_TIMEOUT,
	               .errors = CFRT_ERRORS_RETURN, .timeout = 1.0};
	/* one rank: on more, a rank that timed out first tells the others,
	 * whose waits then end with CFRT_EPEER */
	CU_ASSERT_EQUAL_FATAL(cfrt_init_opts(&c, MPI_COMM_SELF, 1, &one, "m", &o), CFRT_OK);
	cfrt_req q = {0, 0};
	CU_ASSERT_EQUAL(cfrt_irecv(c, buf, 1, CFRT_F32, 0, 5, &q), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_wait(c, &q), CFRT_ETIMEOUT);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(c), "rank 0: op - step -1: cfrt_wait: waited 1 s "
	                       "(CFRT_TIMEOUT) for a receive from rank 0 of group 0 (job rank 0)");
	CU_ASSERT_EQUAL(cfrt_failure(c), CFRT_ETIMEOUT);
	CU_ASSERT_EQUAL(cfrt_wait(c, &q), CFRT_EFAILED);
	CU_ASSERT_EQUAL(cfrt_barrier(c), CFRT_EFAILED);
	CU_ASSERT_EQUAL(cfrt_check_ctx(c, "f"), CFRT_EFAILED);
	CU_ASSERT_EQUAL(cfrt_finalize(c), CFRT_OK);
	CU_ASSERT_EQUAL(cfrt_check_ctx(c, "f"), CFRT_EINVAL);
	CU_ASSERT_STRING_EQUAL(cfrt_last_error(NULL), "f: the context was finalized "
	                       "(cfrt_finalize freed it)");
}

void ut_register_context(void)
{
	CU_pSuite s = CU_add_suite("context", NULL, NULL);
	CU_add_test(s, "ranks of a sub-communicator", test_ranks);
	CU_add_test(s, "wrong group size: error and message", test_wrong_size);
	CU_add_test(s, "several groups: layout, transfers, errors", test_groups);
	CU_add_test(s, "progress modes none, panel, thread", test_progress_modes);
	CU_add_test(s, "trace file", test_trace);
	CU_add_test(s, "init options", test_opts);
	CU_add_test(s, "view helpers", test_views);
	CU_add_test(s, "alloc, upload, download, memset", test_memory);
	CU_add_test(s, "allocation high-water mark", test_mem_peak);
	CU_add_test(s, "library use: registry, contexts, watchdog", test_lib);
}
