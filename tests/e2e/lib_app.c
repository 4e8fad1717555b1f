/* lib_app.c: the generated mlp (tp = 2) called as a library, each misuse
 * of cfrt.h's "Error modes" checked by its status and message. One
 * scenario per run (argv[1]), on 2 ranks:
 *   status    error mode return: a null context, a second cfrt_init on
 *             one pointer, null structs and buffers, buffers too small
 *             (cfrt_alloc'ed, registered, ending in unmapped memory),
 *             the forward after cfrt_finalize, a rank whose arguments
 *             are wrong while its peer's are right (the peer is told),
 *             a NaN input without CFRT_CHECK (no check: status 0), and
 *             a fresh context after failures that runs right;
 *   abort     the default mode: an input half the size it must be ends
 *             the job, naming the tensor;
 *   skip      rank 1 skips the forward: rank 0's forward must end
 *             (CFRT_TIMEOUT in the environment; argv[2] "return" or
 *             "abort" picks the mode, argv[3] is the message wanted);
 *   finite    CFRT_CHECK=finite in the environment, mode return: a NaN
 *             planted in input x (rank 0) and one in weight w2.
 * Each check prints "lib: rank R: ok NAME" or "lib: rank R: FAIL NAME:
 * ..."; the exit status counts the failures. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mlp.h"
#include "shard.h"

static int rank, fails;

/* Checks that got is want and, when text is not NULL, that msg holds it. */
static void
expect(const char *name, int got, int want, const char *msg, const char *text)
{
	if (got == want && (!text || strstr(msg, text))) {
		printf("lib: rank %d: ok %s\n", rank, name);
	} else {
		printf("lib: rank %d: FAIL %s: status %d (%s), want %d; message \"%s\", want "
		       "\"%s\"\n", rank, name, got, cfrt_strerror(got), want, msg, text ? text : "");
		fails++;
	}
	fflush(stdout);
}

/* A context over the job (error mode return) with its tensors from
 * cfrt_alloc, filled as the driver fills them, and a workspace. */
typedef struct run {
	cfrt_ctx *ctx;
	tensor t[4]; /* x, w1, w2, y */
	mlp_weights w;
	mlp_io io;
	void *ws;
} run;

static void
tensors(tensor *t)
{
	tensor x = {MLP_x_NDIM, MLP_x_SPLIT, MLP_x_DIMS, MLP_x_RANK_DIMS, 0, NULL};
	tensor w1 = {MLP_w1_NDIM, MLP_w1_SPLIT, MLP_w1_DIMS, MLP_w1_RANK_DIMS, 0, NULL};
	tensor w2 = {MLP_w2_NDIM, MLP_w2_SPLIT, MLP_w2_DIMS, MLP_w2_RANK_DIMS, 0, NULL};
	tensor y = {MLP_y_NDIM, MLP_y_SPLIT, MLP_y_DIMS, MLP_y_RANK_DIMS, 0, NULL};
	t[0] = x, t[1] = w1, t[2] = w2, t[3] = y;
}

static void
setup(run *r, MPI_Comm comm, int whole)
{
	cfrt_opts o = {.flags = CFRT_OPT_ERRORS, .errors = CFRT_ERRORS_RETURN};

	r->ctx = NULL;
	if (cfrt_init_opts(&r->ctx, comm, 1, (int[]){whole ? 1 : MLP_GROUP_SIZE}, "mlp",
	                   &o) != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	tensors(r->t);
	for (int k = 0; k < 4; k++) {
		r->t[k].seed = k < 3 ? 100 + (uint64_t)k : 0;
		tensor_alloc(r->ctx, &r->t[k], whole);
	}
	r->w.w1 = r->t[1].buf, r->w.w2 = r->t[2].buf;
	r->io.x = r->t[0].buf, r->io.y = r->t[3].buf;
	CFRT_TRY(r->ctx, cfrt_alloc(r->ctx, &r->ws, whole ? mlp_ref_workspace_bytes()
	                                                 : mlp_workspace_bytes()));
}

/* cfrt_finalize first: a failed context's sends that no peer took read
 * their buffers until it returns (cfrt.h). */
static void
teardown(run *r)
{
	int rc = cfrt_finalize(r->ctx);
	if (rc != CFRT_OK)
		expect("cfrt_finalize of a failed context returns CFRT_OK", rc, CFRT_OK,
		       cfrt_last_error(NULL), NULL);
	for (int k = 0; k < 4; k++)
		cfrt_free(r->ctx, r->t[k].buf);
	cfrt_free(r->ctx, r->ws);
}

static size_t
shard_bytes(const tensor *t)
{
	return (size_t)numel(t->rank_dims, t->nd) * sizeof(float);
}

static void half_alloc_x(run *r);
static void *half_buf; /* the buffer a misuse hands over */

/* One forward pass on a fresh context with what bad() changes; expects
 * status want and text in the context's message. */
static void
misuse(const char *name, void (*bad)(run *), int want, const char *text)
{
	run r;

	setup(&r, MPI_COMM_WORLD, 0);
	const void *x = r.io.x;
	void *ws = r.ws;
	half_buf = NULL;
	if (bad)
		bad(&r);
	int rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
	expect(name, rc, want, cfrt_last_error(r.ctx), text);
	if (rc != CFRT_OK) {
		char again[160];
		snprintf(again, sizeof again, "%s: a second forward returns CFRT_EFAILED", name);
		rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
		expect(again, rc, CFRT_EFAILED, cfrt_last_error(r.ctx), text);
	}
	teardown(&r); /* frees r.ws: bad()'s when it set one */
	if (r.io.x != x && half_buf == r.io.x && bad == half_alloc_x)
		cfrt_free(r.ctx, half_buf);
	if (r.ws != ws)
		cfrt_free(r.ctx, ws);
}

static void
half_alloc_x(run *r)
{
	CFRT_TRY(r->ctx, cfrt_alloc(r->ctx, &half_buf, shard_bytes(&r->t[0]) / 2));
	r->io.x = half_buf;
}

static void
half_ws(run *r)
{
	CFRT_TRY(r->ctx, cfrt_alloc(r->ctx, &half_buf, mlp_workspace_bytes() / 2));
	r->ws = half_buf;
}

static void
half_registered_x(run *r)
{
	half_buf = malloc(shard_bytes(&r->t[0]) / 2);
	CFRT_TRY(r->ctx, cfrt_register(r->ctx, half_buf, shard_bytes(&r->t[0]) / 2));
	r->io.x = half_buf;
}

/* Half the pages x needs, the rest of its mapping unmapped. */
static void
half_mapped_x(run *r)
{
	size_t n = shard_bytes(&r->t[0]);
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		cfrt_fail(r->ctx, CFRT_ENOMEM);
	munmap(p + n / 2, n - n / 2);
	half_buf = p;
	r->io.x = p;
}

static void
null_x(run *r)
{
	r->io.x = NULL;
}

static void
null_y(run *r)
{
	r->io.y = NULL;
}

/* Rank 1's weight w2 is missing; rank 0's arguments are right. */
static void
rank1_null_w2(run *r)
{
	if (rank == 1)
		r->w.w2 = NULL;
}

/* The error mode return, misuse by misuse. */
static void
status_mode(void)
{
	mlp_weights w = {NULL, NULL};
	mlp_io io = {NULL, NULL};
	run r;
	char want[128];

	cfrt_set_errors(CFRT_ERRORS_RETURN);
	expect("the forward before cfrt_init (null context)", mlp_forward(NULL, &w, &io, NULL),
	       CFRT_EINVAL, cfrt_last_error(NULL),
	       "mlp_forward: null context (cfrt_init was not called, or failed)");

	setup(&r, MPI_COMM_WORLD, 0);
	cfrt_ctx *first = r.ctx;
	int rc = cfrt_init(&r.ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp");
	expect("cfrt_init twice on one pointer", rc, CFRT_EINVAL, cfrt_last_error(NULL),
	       "cfrt_init: *ctx holds a live context already (model mlp)");
	expect("cfrt_init twice leaves the first context", r.ctx == first, 1, "", NULL);
	rc = mlp_forward(r.ctx, NULL, &r.io, r.ws);
	expect("null weights struct", rc, CFRT_EINVAL, cfrt_last_error(r.ctx),
	       ": op mlp_forward step 0: cfrt_check_ptr: the weights (mlp_weights *) is a null "
	       "pointer");
	expect("the context is marked failed", cfrt_failure(r.ctx), CFRT_EINVAL, "", NULL);
	rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
	expect("a failed context: the next forward returns CFRT_EFAILED, first message kept",
	       rc, CFRT_EFAILED, cfrt_last_error(r.ctx), "the weights (mlp_weights *)");
	cfrt_req q = {0, 0};
	expect("a failed context: a transfer returns CFRT_EFAILED",
	       cfrt_isend(r.ctx, r.ws, 1, CFRT_F32, 0, 0, &q), CFRT_EFAILED, "", NULL);
	teardown(&r);
	rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
	expect("the forward after cfrt_finalize", rc, CFRT_EINVAL, cfrt_last_error(NULL),
	       "mlp_forward: the context was finalized (cfrt_finalize freed it)");

	setup(&r, MPI_COMM_WORLD, 0);
	rc = mlp_forward(r.ctx, &r.w, NULL, r.ws);
	expect("null io struct", rc, CFRT_EINVAL, cfrt_last_error(r.ctx),
	       "cfrt_check_ptr: the inputs and outputs (mlp_io *) is a null pointer");
	teardown(&r);
	misuse("null input buffer", null_x, CFRT_EINVAL,
	       "cfrt_check_arg: input x (16384 bytes) is a null pointer");
	misuse("null output buffer", null_y, CFRT_EINVAL,
	       "cfrt_check_arg: output y (16384 bytes) is a null pointer");
	misuse("input half the size (cfrt_alloc)", half_alloc_x, CFRT_EINVAL,
	       "cfrt_check_arg: input x needs 16384 bytes, but its cfrt_alloc buffer has 8192 "
	       "from there");
	snprintf(want, sizeof want, "cfrt_check_arg: the workspace needs %zu bytes, but its "
	         "cfrt_alloc buffer has %zu from there", mlp_workspace_bytes(),
	         mlp_workspace_bytes() / 2);
	misuse("workspace half the size (cfrt_alloc)", half_ws, CFRT_EINVAL, want);
	misuse("input half the size (malloc, cfrt_register)", half_registered_x, CFRT_EINVAL,
	       "cfrt_check_arg: input x needs 16384 bytes, but its registered buffer has 8192 "
	       "from there");
	free(half_buf);
	misuse("input half the size (mmap, the rest unmapped)", half_mapped_x, CFRT_EINVAL,
	       "cfrt_check_arg: input x needs 16384 bytes from");
	munmap(half_buf, 8192);
	misuse("a null weight w2 on rank 1 alone", rank1_null_w2, rank == 1 ? CFRT_EINVAL
	       : CFRT_EPEER, rank == 1 ? "rank 1: op mlp_forward step 0: cfrt_check_arg: weight "
	       "w2 (32768 bytes) is a null pointer" : "another rank failed (rank 1: op "
	       "mlp_forward step 0: cfrt_check_arg: weight w2 (32768 bytes) is a null pointer)");

	/* after all of that, fresh contexts run right */
	run ref;
	setup(&r, MPI_COMM_WORLD, 0);
	setup(&ref, MPI_COMM_SELF, 1);
	expect("a fresh context after failures: the forward", mlp_forward(r.ctx, &r.w, &r.io,
	       r.ws), CFRT_OK, cfrt_last_error(r.ctx), NULL);
	expect("the serial reference", mlp_ref_forward(ref.ctx, &ref.w, &ref.io, ref.ws),
	       CFRT_OK, cfrt_last_error(ref.ctx), NULL);
	double err = shard_err(r.ctx, &r.t[3], ref.ctx, &ref.t[3]);
	expect("a fresh context after failures: the output matches the reference",
	       err <= 1e-5, 1, "", NULL);
	printf("lib: rank %d: max_rel_err=%.3e\n", rank, err);
	float nan = NAN;
	CFRT_TRY(r.ctx, cfrt_upload(r.ctx, r.t[0].buf, &nan, sizeof nan));
	expect("a NaN input without CFRT_CHECK: no check, status 0",
	       mlp_forward(r.ctx, &r.w, &r.io, r.ws), CFRT_OK, cfrt_last_error(r.ctx), NULL);
	teardown(&ref);
	teardown(&r);
}

/* The default mode: the job ends at an input half the size it must be. */
static void
abort_mode(void)
{
	run r;
	cfrt_ctx *ctx = NULL;
	void *x;

	if (cfrt_init(&ctx, MPI_COMM_WORLD, MLP_GROUP_SIZE, "mlp") != CFRT_OK)
		cfrt_fail(NULL, CFRT_ESIZE);
	setup(&r, MPI_COMM_WORLD, 0); /* its mode is return: ctx's is the default */
	CFRT_TRY(ctx, cfrt_alloc(ctx, &x, shard_bytes(&r.t[0]) / 2));
	r.io.x = x;
	void *ws;
	CFRT_TRY(ctx, cfrt_alloc(ctx, &ws, mlp_workspace_bytes()));
	int rc = mlp_forward(ctx, &r.w, &r.io, ws);
	printf("lib: rank %d: the forward returned %d\n", rank, rc);
}

/* Rank 1 skips the forward; rank 0's forward ends at the watchdog. */
static void
skip(const char *mode, const char *want)
{
	cfrt_opts o = {.flags = CFRT_OPT_ERRORS};
	cfrt_ctx *ctx = NULL;
	run r;

	o.errors = strcmp(mode, "abort") == 0 ? CFRT_ERRORS_ABORT : CFRT_ERRORS_RETURN;
	setup(&r, MPI_COMM_WORLD, 0);
	if (cfrt_init_opts(&ctx, MPI_COMM_WORLD, 1, (int[]){MLP_GROUP_SIZE}, "mlp", &o))
		cfrt_fail(NULL, CFRT_ESIZE);
	if (rank == 0) {
		double t0 = MPI_Wtime();
		int rc = mlp_forward(ctx, &r.w, &r.io, r.ws);
		printf("lib: rank 0: the forward returned after %.1f s\n", MPI_Wtime() - t0);
		expect("a rank that never comes: the watchdog ends the forward", rc,
		       CFRT_ETIMEOUT, cfrt_last_error(ctx), want);
	}
	/* abort: rank 0 ends the job, rank 1 waits in cfrt_finalize */
	int rc = cfrt_finalize(ctx);
	if (o.errors == CFRT_ERRORS_RETURN)
		expect("cfrt_finalize after the watchdog", rc, CFRT_OK, cfrt_last_error(NULL),
		       NULL);
	teardown(&r);
}

/* CFRT_CHECK=finite: a NaN in x (rank 0), then one in w2 (both ranks). */
static void
nan_check(void)
{
	run r;
	float nan = NAN;

	setup(&r, MPI_COMM_WORLD, 0);
	if (rank == 0)
		CFRT_TRY(r.ctx, cfrt_upload(r.ctx, (char *)r.t[0].buf + 5 * sizeof nan, &nan,
		                            sizeof nan));
	int rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
	if (rank == 0)
		expect("a NaN in input x is named by the op that first made one", rc,
		       CFRT_ENONFINITE, cfrt_last_error(r.ctx), "rank 0: op xa step 0: cfrt_copy: "
		       "CFRT_CHECK=finite: the result of xa = x (slice 0) holds a NaN at element 5 "
		       "of 4096: the first op that made one on this rank");
	else
		expect("a NaN on rank 0: rank 1 is told", rc, CFRT_EPEER, cfrt_last_error(r.ctx),
		       "another rank failed (rank 0: op xa step 0: cfrt_copy: CFRT_CHECK=finite");
	teardown(&r);

	setup(&r, MPI_COMM_WORLD, 0);
	CFRT_TRY(r.ctx, cfrt_upload(r.ctx, (char *)r.t[2].buf + 64 * sizeof nan, &nan,
	                            sizeof nan));
	rc = mlp_forward(r.ctx, &r.w, &r.io, r.ws);
	expect("a NaN in weight w2 is named by its matmul", rc, CFRT_ENONFINITE,
	       cfrt_last_error(r.ctx), ": cfrt_matmul: CFRT_CHECK=finite: the result of "
	       "p = matmul(h, w2) (slice ");
	teardown(&r);
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "status";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (strcmp(what, "status") == 0)
		status_mode();
	else if (strcmp(what, "abort") == 0)
		abort_mode();
	else if (strcmp(what, "skip") == 0)
		skip(argc > 2 ? argv[2] : "return", argc > 3 ? argv[3] : "CFRT_TIMEOUT");
	else if (strcmp(what, "finite") == 0)
		nan_check();
	printf("lib: rank %d: %d failed\n", rank, fails);
	MPI_Finalize();
	return fails;
}
