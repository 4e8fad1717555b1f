#!/bin/sh
# demo.sh: every example with its backward pass (cfc --backward: a
# training step) under its own schedule and under vanilla, slice(4),
# fuse(ring) and fuse(bidir), on 4 ranks under mpirun (oversubscribed on
# small machines), the output and every gradient checked against the
# serial reference. Then examples/train/train.c trains a transformer block
# (scripts/train.sh). Prints the table and the training line, writes
# $B/demo/results.csv, schedule pictures (forward, then backward) and
# Chrome traces (one a run: the serial reference's context is not traced).
# A line as each run starts, with how many are done and the time so far,
# and one with its result (QUIET=1: none of these, the table only).
# EXAMPLES="a b": those examples only (default: every examples/*.cf,
# examples/llama_tpdp.cf's 4 Llama blocks on 2 x 2 ranks of tp x dp among
# them); TRAIN=0: no training run.
set -u
: "${B:=build}"
out=$B/demo
rm -rf "$out"
mkdir -p "$out/trace"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 180 -n 4"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
csv=$out/results.csv
echo "model,schedule,ranks,time_ms,max_rel_err,backward_ms,grad_max_rel_err" >"$csv"
bad=0
t_start=$(date +%s)
files=examples/*.cf
[ -n "${EXAMPLES:-}" ] && files=$(for e in $EXAMPLES; do echo "examples/$e.cf"; done)
total=$(($(ls $files | wc -l) * 5))
k=0
say() { [ "${QUIET:-0}" = 1 ] || echo "$@"; }

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

run_one() { # example schedule
	ex=$1 s=$2 t=$(tag "$2")
	dir=$out/$ex-$t
	k=$((k + 1))
	say "demo: [$k/$total] $ex under $s: compiling, building, running on 4 ranks (+$(($(date +%s) - t_start)) s)"
	if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
	if ! sh scripts/build-model.sh "$B" "$dir" "examples/$ex.cf" --backward "$@" >"$dir.log" 2>&1; then
		echo "demo: building $ex with $s failed:" >&2
		cat "$dir.log" >&2
		bad=1
		return
	fi
	if ! CFRT_TRACE=$out/trace/$ex-$t $MPIRUN "$dir/run" --check --iters 5 \
	    >"$dir.out" 2>&1; then
		echo "demo: running $ex with $s failed:" >&2
		cat "$dir.out" >&2
		bad=1
		return
	fi
	ms=$(sed -n 's/.* time_ms=\([^ ]*\).*/\1/p' "$dir.out")
	err=$(sed -n 's/.* max_rel_err=\([^ ]*\).*/\1/p' "$dir.out")
	bms=$(sed -n 's/.* backward_ms=\([^ ]*\).*/\1/p' "$dir.out")
	gerr=$(sed -n 's/.* grad_max_rel_err=\([^ ]*\).*/\1/p' "$dir.out")
	echo "$ex,$s,4,$ms,$err,$bms,$gerr" >>"$csv"
	say "      forward $ms ms (max_rel_err $err), backward $bms ms (grad_max_rel_err $gerr)"
	awk -v e="$err" -v g="$gerr" 'BEGIN { exit !(e != "" && g != "" && e <= 1e-5 && g <= 1e-4) }' || {
		echo "demo: $ex with $s: max_rel_err $err (limit 1e-5) or grad_max_rel_err $gerr (limit 1e-4)" >&2
		bad=1
	}
}

for f in $files; do
	ex=$(basename "$f" .cf)
	for s in spec vanilla "slice(4)" "fuse(ring)" "fuse(bidir)"; do
		run_one "$ex" "$s"
	done
	"$B/cfc" "$f" --backward --emit=svg -o "$out/$ex.schedule.svg" || bad=1
	"$B/cfc" "$f" --emit=graph-svg -o "$out/$ex.graph.svg" || bad=1
done

echo
# the training application: a transformer block trained for 300 SGD steps
say "demo: training the transformer block, 300 steps under three schedules (+$(($(date +%s) - t_start)) s)"
if [ "${TRAIN:-1}" = 1 ]; then
	sh scripts/train.sh "$B" "$out/train" >"$out/train.line" || bad=1
else
	echo "training: not run (TRAIN=0)" >"$out/train.line"
fi
echo
awk -F, '{ printf "%-12s %-20s %5s %10s %12s %12s %16s\n", $1, $2, $3, $4, $5, $6, $7 }' "$csv"
echo
echo "max_rel_err: the parallel output against the serial reference (max |out - ref| / max |ref|);"
echo "grad_max_rel_err: the same over every gradient of the backward pass."
echo
cat "$out/train.line"
echo "time_ms at these small sizes is mostly per-call overhead; make bench compares speed."
echo "results: $csv"
echo "schedule pictures: $out/*.schedule.svg, dependency graphs: $out/*.graph.svg"
echo "traces (open in https://ui.perfetto.dev): $out/trace/, one a run"
echo "demo: $k runs in $(($(date +%s) - t_start)) s"
exit $bad
