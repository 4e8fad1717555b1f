/* mix.c: builds of one model (its schedules) timed in one job, their
 * passes interleaved: `make bench`'s mix rows.
 * usage: mpirun -n N mix [--iters N] [--warmup N] [--first K] [--check] [--passes] LABEL...
 * with one LABEL per entry linked in (scripts/build-mix.sh). Each of
 * warmup + iters rounds runs one pass of every entry, the round's first
 * entry moving on by one each round; rank 0 prints a line per entry:
 *   variant=LABEL model=M time_ms=T span_ms=S [backward_ms=B backward_span_ms=BS]
 *   [max_rel_err=E checksum=C [grad_max_rel_err=G grad_checksum=D]]
 * the medians over its timed passes (as a driver prints them), and with
 * --check its errors against the serial reference after the last pass;
 * with --passes, before it, each timed pass's time in round order:
 *   passes variant=LABEL ms=T1,T2,...
 * (the backward's span for a backward entry, else the span), so that two
 * entries can be compared pass by pass, round by round.
 * Why: on a VM whose cores change speed from second to second and from
 * launch to launch (the GPU machines' 16-core Xeons: one program's
 * launches 56.5-94.6 ms), separate launches compare the machine's states
 * as much as the schedules; passes side by side in one launch meet the
 * same cores in nearly the same state.
 * --first K opens entry K first (then K+1, ..., wrapping; default 0):
 * the entry opened first ran slower than the others. On the 2-core
 * EPYC (4 ranks, mlp, 2026-11-29), vanilla's build entered at places
 * 0, 4 and 5 of one program with five other schedules: place 0 took
 * +4.4% against place 4 (53 of 60 passes slower, 4 launches), place 5
 * +0.2%; opened in reverse order, place 0 -0.7%; with place 0 opened
 * and closed once before the rest, +1.6%. make bench had vanilla at
 * place 0 in every launch, and auto's build, the same program as
 * vanilla's there, ran a median 2.6% faster than it pass by pass.
 * bench.sh passes the round's number, so that no entry is opened
 * first in every launch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "median.h"
#include "mix.h"

extern const cf_mix *const mix_entries[];
extern const int mix_count;

static void
usage_exit(const char *prog, int rank)
{
	if (rank == 0)
		fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--first K] [--check] [--passes] "
		        "LABEL... "
		        "(%d labels: one per entry linked in)\n", prog, mix_count);
	MPI_Finalize();
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *mode = getenv("CFRT_PROGRESS");
	int provided, rank, iters = 5, warmup = 1, first = 0, check = 0, passes = 0, nlab = 0,
	    st = 0;
	const char **label = calloc((size_t)argc, sizeof *label);

	/* CFRT_PROGRESS=thread needs MPI_THREAD_MULTIPLE (the drivers' rule) */
	if (mode && !strcmp(mode, "thread"))
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	else
		MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			warmup = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--first") && i + 1 < argc)
			first = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--check"))
			check = 1;
		else if (!strcmp(argv[i], "--passes"))
			passes = 1;
		else if (argv[i][0] == '-')
			usage_exit(argv[0], rank);
		else
			label[nlab++] = argv[i];
	}
	if (iters < 1 || warmup < 0 || first < 0 || nlab != mix_count)
		usage_exit(argv[0], rank);

	int n = mix_count;
	void **state = calloc((size_t)n, sizeof *state);
	/* time k of entry e's timed pass i: t[(k * n + e) * iters + i] */
	double *t = calloc(CF_MIX_NTIMES * (size_t)n * (size_t)iters, sizeof *t);
	for (int j = 0; j < n; j++) {
		int e = (first + j) % n;
		state[e] = mix_entries[e]->open();
	}
	for (int i = 0; i < warmup + iters; i++)
		for (int j = 0; j < n; j++) {
			int e = (i + j) % n;
			double one[CF_MIX_NTIMES];
			mix_entries[e]->pass(state[e], one);
			for (int k = 0; i >= warmup && k < CF_MIX_NTIMES; k++)
				t[((size_t)k * n + e) * iters + i - warmup] = one[k];
		}
	for (int e = 0; e < n; e++) {
		const cf_mix *m = mix_entries[e];
		unsigned long long sum[2];
		double err[2], *tk[CF_MIX_NTIMES];
		for (int k = 0; k < CF_MIX_NTIMES; k++)
			tk[k] = t + ((size_t)k * n + e) * iters;
		st |= m->close(state[e], check, err, sum);
		if (rank != 0)
			continue;
		if (passes) { /* before median sorts them */
			double *tp = tk[m->backward ? CF_MIX_BWD_SPAN : CF_MIX_FWD_SPAN];
			printf("passes variant=%s ms=", label[e]);
			for (int i = 0; i < iters; i++)
				printf("%s%.4f", i ? "," : "", tp[i] * 1e3);
			printf("\n");
		}
		printf("variant=%s model=%s time_ms=%.4f span_ms=%.4f", label[e], m->model,
		       median(tk[CF_MIX_FWD], iters) * 1e3, median(tk[CF_MIX_FWD_SPAN], iters) * 1e3);
		if (m->backward)
			printf(" backward_ms=%.4f backward_span_ms=%.4f", median(tk[CF_MIX_BWD], iters) * 1e3,
			       median(tk[CF_MIX_BWD_SPAN], iters) * 1e3);
		if (check)
			printf(" max_rel_err=%.3e checksum=%016llx", err[0], sum[0]);
		if (check && m->backward)
			printf(" grad_max_rel_err=%.3e grad_checksum=%016llx", err[1], sum[1]);
		printf("\n");
	}
	free(t);
	free(state);
	free(label);
	MPI_Finalize();
	return st;
}
