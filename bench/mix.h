/* mix.h: a model's passes as bench/mix.c runs them, interleaved with those
 * of other builds in one job. A generated driver compiled with -DCF_MIX=NAME
 * (and -Ibench) defines NAME, a cf_mix, in place of its main; bench.sh
 * links several (scripts/build-mix.sh), each with its other symbols made
 * local, so that builds of one model under different schedules share a
 * program.
 * requires: MPI initialized; every rank opens, passes and closes the
 * entries in the same order (each is collective over MPI_COMM_WORLD). */
#ifndef CF_MIX_H
#define CF_MIX_H

/* The times of one pass, in seconds, as the driver's one_pass gives
 * them: the slowest rank's forward, the group's span of it, the slowest
 * rank's backward, how far apart the forwards ended, the span of the
 * whole pass, the backward's span after the forwards'. */
enum {
	CF_MIX_FWD, CF_MIX_FWD_SPAN, CF_MIX_BWD, CF_MIX_SKEW, CF_MIX_PASS_SPAN, CF_MIX_BWD_SPAN,
	CF_MIX_NTIMES
};

typedef struct cf_mix {
	const char *model;
	int backward; /* a pass times a backward after the forward */
	/* its own cfrt context, tensors filled as the driver fills them */
	void *(*open)(void);
	/* one pass after a barrier: its times, indexed CF_MIX_FWD... */
	void (*pass)(void *state, double t[CF_MIX_NTIMES]);
	/* with check, on rank 0: err[0] the outputs' largest relative error
	 * against the serial reference, err[1] the gradients', sum[0] and
	 * sum[1] their checksums (as the driver's --check prints them); frees
	 * the state; 0, or 1 when the context ended in an error */
	int (*close)(void *state, int check, double err[2], unsigned long long sum[2]);
} cf_mix;

#endif
