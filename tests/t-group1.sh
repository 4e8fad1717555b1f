#!/bin/sh
# Groups of one rank (issue 48, item 11): what a user gets with -D tp=1
# for a one-GPU run. A collective over a group of 1 is a copy (or
# nothing); under fuse(ring) and fuse(bidir) its trace line named the
# rank that no stage declared, and the C did not compile. Every kind of
# schedule, forward and backward, checked against the serial reference:
#  - tests/e2e/group1.cf (all_gather, reduce_scatter, all_reduce and an
#    all_to_all over tp, an all_to_all over dp, the weights' gradients
#    all-reduced over dp) at tp x dp = 1x1, 1x2 and 2x1;
#  - examples/tpdp.cf, the grid example, at 1x1, 1x2 and 2x1 (t-e2e runs
#    the one-group examples at N = 1 under every kind, and tpdp only
#    under its own schedule where one group is 1).
# Small sizes (-D) keep each build and run short.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/group1
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

# e2e NAME DIR N SPEC ARGS...: builds SPEC with ARGS (and its backward)
# into DIR, runs it on N ranks, and checks its output and gradients
# against the reference (as t-e2e: 1e-5 and 1e-4 for f32).
e2e() {
	name=$1 dir=$2 n=$3 spec=$4
	shift 4
	if ! sh scripts/build-model.sh "$B" "$dir" "$spec" --backward "$@" >"$dir.log" 2>&1; then
		fail "$name (build)"
		tail -n 20 "$dir.log"
		return
	fi
	if ! $MPIRUN -n "$n" "$dir/run" --check --iters 1 --warmup 0 >"$dir.run" 2>&1; then
		fail "$name (run)"
		tail -n 20 "$dir.run"
		return
	fi
	err=$(field max_rel_err "$dir.run") gerr=$(field grad_max_rel_err "$dir.run")
	if ! le "$err" 1e-5; then
		fail "$name (max_rel_err $err)"
	elif ! le "$gerr" 1e-4; then
		fail "$name (grad_max_rel_err $gerr)"
	else
		pass "$name (error $err, gradients $gerr)"
	fi
}

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

for tpdp in 1x1 1x2 2x1; do
	tp=${tpdp%x*} dp=${tpdp#*x}
	for s in spec vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
		if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
		e2e "group1: group1.cf $s ${tpdp}" "$out/group1-$(tag "$s")-$tpdp" $((tp * dp)) \
			tests/e2e/group1.cf -D tp=$tp -D dp=$dp "$@"
		e2e "group1: tpdp $s ${tpdp}" "$out/tpdp-$(tag "$s")-$tpdp" $((tp * dp)) \
			examples/tpdp.cf -D tp=$tp -D dp=$dp -D B=$((2 * dp)) -D S=$((8 * tp)) \
			-D D=8 -D F=$((8 * tp)) "$@"
	done
done
