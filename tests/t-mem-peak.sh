#!/bin/sh
# Memory figures (issue 51): for every example's training step (forward
# and backward) at 4 ranks (a grid: tp x dp = 2x2), the peak cfc's plan
# reports (--explain's "memory: peak N bytes per rank" = saved + the
# larger workspace) equals the peak the run measures: the runtime's
# allocation high-water mark (cfrt_mem_peak) over what the tensors hold,
# on every rank (the driver's mem_peak_bytes, the most of the ranks; a
# rank that held less would add mem_peak_min_bytes). Also with
# --order=region and with coalescing off on the examples whose plans
# they change. The driver's forward and backward share one workspace
# (the larger): both still match the reference (--check, t-e2e's bounds).
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/mem-peak
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

# mem NAME DIR SPEC ARGS...: the plan's peak against the measured one
mem() {
	name=$1 dir=$2 spec=$3
	shift 3
	want=$("$B/cfc" "$spec" --backward "$@" --explain 2>"$dir.cfc" |
		sed -n 's/^memory: peak \([0-9]*\) bytes per rank.*/\1/p')
	if [ -z "$want" ]; then
		fail "$name (no memory: line from cfc --explain)"
		cat "$dir.cfc"
		return
	fi
	if ! sh scripts/build-model.sh "$B" "$dir" "$spec" --backward "$@" >"$dir.log" 2>&1; then
		fail "$name (build)"
		tail -n 20 "$dir.log"
		return
	fi
	if ! $MPIRUN -n 4 "$dir/run" --check --iters 2 --warmup 1 >"$dir.run" 2>&1; then
		fail "$name (run)"
		tail -n 20 "$dir.run"
		return
	fi
	got=$(field mem_peak_bytes "$dir.run") lo=$(field mem_peak_min_bytes "$dir.run")
	err=$(field max_rel_err "$dir.run") gerr=$(field grad_max_rel_err "$dir.run")
	if ! le "$err" 1e-5 || ! le "$gerr" 1e-4; then
		fail "$name (one workspace for both passes: max_rel_err $err, grad_max_rel_err $gerr)"
	elif [ -n "$got" ] && [ "$got" = "$want" ] && [ -z "$lo" ]; then
		pass "$name: peak $want bytes per rank, planned and measured"
	else
		fail "$name: planned $want bytes per rank, measured $got${lo:+ (least of the ranks $lo)}"
	fi
}

for f in examples/*.cf; do
	ex=$(basename "$f" .cf)
	mem "mem-peak: $ex 4 ranks" "$out/$ex" "$f" $(groupdefs "$ex" 4)
done
mem "mem-peak: transformer 4 ranks --order=region" "$out/transformer-region" \
	examples/transformer.cf -D tp=4 --order=region
mem "mem-peak: transformer 4 ranks --coalesce=0" "$out/transformer-c0" \
	examples/transformer.cf -D tp=4 --coalesce=0
