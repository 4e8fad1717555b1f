#!/bin/sh
# step.sh (make bench-step, or make bench STEP=1): the training step
# (forward + backward: the driver's pass_span_ms, the median of ITERS
# passes after WARMUP) of transformer, llama and ulysses at RANKS ranks,
# under the whole-pass order (the default: cfc's --order=pass with
# coalescing) against the region-by-region order (--order=region
# --coalesce=0), both built once and run in the same session: ROUNDS
# rounds, each launching every build once, the first build of round r
# rotating, so that neither order is always first. Every run checks its
# output and gradients against the serial reference (--check; a wrong
# result stops the benchmark). Writes $B/bench/step/results.csv (one row
# a run) and prints, per model and order, the median over rounds of the
# step time and its spread (largest / smallest - 1 over the rounds), and
# per model the median over rounds of region / pass - 1 (the same
# round's two runs paired). The examples' own sizes (STEP_DEFS: -D
# options for every build); MODELS, ROUNDS (5), ITERS (9), WARMUP (2),
# RANKS (4), BUILD=0 (reuse the builds). A measurement, not a test.
set -u
: "${B:=build}" "${ROUNDS:=5}" "${ITERS:=9}" "${WARMUP:=2}" "${RANKS:=4}"
: "${MODELS:=transformer llama ulysses}" "${BUILD:=1}" "${STEP_DEFS:=}"
out=$B/bench/step
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 300 -n $RANKS"

grp() { sed -n 's/^ *group \([a-z_]*\) *=.*/\1/p' "examples/$1.cf" | head -n 1; }
flags() { case $1 in pass) echo "" ;; region) echo "--order=region --coalesce=0" ;; esac; }

runs=""
for m in $MODELS; do
	for o in pass region; do
		d=$out/$m-$o
		runs="$runs $m-$o"
		[ "$BUILD" = 0 ] && [ -x "$d/run" ] && continue
		# shellcheck disable=SC2046
		if ! sh scripts/build-model.sh "$B" "$d" "examples/$m.cf" --backward \
			-D "$(grp "$m")=$RANKS" $STEP_DEFS $(flags "$o") >"$d.log" 2>&1; then
			echo "step: building $m ($o) failed:" >&2
			tail -n 20 "$d.log" >&2
			exit 1
		fi
	done
done
set -- $runs
n=$#
echo "model,order,round,pass_span_ms,time_ms,backward_span_ms,max_rel_err,grad_max_rel_err" \
	>"$out/results.csv"
{
	echo "step: $(date -u '+%Y-%m-%d %H:%M UTC') $(git rev-parse --short HEAD 2>/dev/null)" \
		"$(uname -n) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "step: ranks=$RANKS rounds=$ROUNDS iters=$ITERS warmup=$WARMUP" \
		"btl_vader_single_copy_mechanism=$OMPI_MCA_btl_vader_single_copy_mechanism"
	lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | sed 's/^/step: cpu /'
} | tee "$out/header.txt"
r=1
while [ $r -le "$ROUNDS" ]; do
	k=0
	while [ $k -lt $n ]; do
		i=$(((k + r - 1) % n + 1))
		eval "run=\${$i}"
		m=${run%-*} o=${run##*-}
		if ! $MPIRUN "$out/$run/run" --check --iters "$ITERS" --warmup "$WARMUP" \
			>"$out/$run.r$r" 2>&1; then
			echo "step: $run round $r failed:" >&2
			cat "$out/$run.r$r" >&2
			exit 1
		fi
		f() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$out/$run.r$r"; }
		e=$(f max_rel_err) g=$(f grad_max_rel_err)
		if ! awk -v e="$e" -v g="$g" 'BEGIN { exit !(e != "" && g != "" && e <= 1e-5 && g <= 1e-4) }'; then
			echo "step: $run round $r: max_rel_err $e, grad_max_rel_err $g (limits 1e-5, 1e-4)" >&2
			exit 1
		fi
		echo "$m,$o,$r,$(f pass_span_ms),$(f time_ms),$(f backward_span_ms),$e,$g" >>"$out/results.csv"
		k=$((k + 1))
	done
	[ "${QUIET:-0}" = 1 ] || echo "step: round $r of $ROUNDS done"
	r=$((r + 1))
done
awk -F, -f bench/stats.awk -f bench/step.awk "$out/results.csv" | tee "$out/summary.txt"
