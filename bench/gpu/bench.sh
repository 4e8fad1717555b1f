#!/bin/sh
# The GPU benchmark of issue 5 (make bench-gpu, on a machine with 4 GPUs;
# a measurement, not a test). For TP in $TPS and each case in $CASES, bf16:
#   a  bench/rs_gemm.cf: row-parallel GEMM, per rank M = 32*4096,
#      K = 16384/TP, N = 4096, then reduce-scatter over the sequence;
#   b  bench/mlp_sbd.cf (examples/mlp.cf in the [S, B, D] layout) at
#      (b, s, d) = (32, 4096, 4096), F = 4d;
#   c  examples/attention.cf at (16, 4096, 4096), 32 heads, causal;
#   d  bench/ag_gemm.cf: the all-gather + first GEMM + gelu of b alone;
# the generated code under vanilla, slice(4), fuse(ring), fuse(ring, m = 2),
# fuse(bidir) and fuse(bidir, m = 2) (the fused kinds auto takes), each
# with CFRT_TRANSFER=nccl, ce and none (none: the schedule's compute alone;
# vanilla and slice(4) move data by NCCL collectives in every mode, so they
# skip ce),
# then bench/gpu/torch_ref.py (PyTorch references on the same inputs), then
# bench/gpu/report.py writes $RESULTS/<date>-<device>.csv and .md.
# cfc's cost model: first cfrt-calibrate-cuda measures the machine (bf16
# compute) at each TP under each transfer mode but none, every row gets
# cfc --profile's prediction on that profile (the none rows: the
# predicted compute alone), and "auto", the schedule cfc takes on it,
# is built per mode and timed like the others (PREDICT=0: none of this;
# PROFILE_DIR=D: the profiles D/machine-TP-MODE.prof measured before).
# AUTO_MARGINS="0 1": also auto with cfc --auto-margin=0 and =1 (rows
# auto@0 and auto@1, built and timed as auto is), to time auto's margin
# against the default in the same runs (0 on a GPU profile, so
# AUTO_MARGINS=2 times the CPUs' 2% beside it).
# Our output of fuse(ring) with NCCL is dumped and compared with PyTorch's
# (not d's: its output, as doubles, is 17 GB; b checks the same ops).
# BUILD_ONLY=1 stops after building the models (tests/t-cuda-build.sh).
# Each run times ITERS passes after WARMUP untimed ones and then more
# until WARMUP_S seconds of them have gone (default 3 and 2 s): a GPU
# settles at its power limit only after a second or two of back-to-back
# work, as a training job keeps it. Lease 17 (4 H100s, 700 W), case a's
# vanilla with transfers off: 6.53 and 6.34 ms after 3 passes (the boost
# clock), 7.58-7.67 in three rounds after 100 (0.7 s), 6.41 after 300
# (1.9 s). In that last run nvidia-smi had the clocks dip to 1080-1110
# MHz about 0.4 s into the load, then hold 1350-1440 MHz at 700 W: 100
# passes, as here until lease 17, timed the dip. Where the clocks
# settle differs by machine: lease 18 (other H100s) took 7.19 after 2 s.
# ROUNDS=N times every run N times, round by round (below); the table
# gives each row's median and the spread of its rounds.
: "${B:=build}"
: "${TPS:=4 2}" "${CASES:=a b c d}" "${ITERS:=20}" "${WARMUP:=3}" "${WARMUP_S:=2}"
: "${RESULTS:=bench/results}"
: "${SCHEDULES:=vanilla slice(4) fuse(ring) fuse(ring,m=2) fuse(bidir) fuse(bidir,m=2)}"
: "${MODES:=nccl ce none}"
: "${PREDICT:=1}" "${PROFILE_DIR:=}" "${ROUNDS:=1}" "${ROUND0:=0}" "${AUTO_MARGINS:=}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 B
export OMPI_MCA_btl_vader_single_copy_mechanism=none
raw=$B/bench/gpu
mkdir -p "$raw" "$RESULTS"
log=$raw/runs.txt
: >"$log"
: >"$raw/torch.jsonl"

spec() {
	case $1 in
	a) echo "bench/rs_gemm.cf -D B=32 -D S=4096 -D D=4096" ;;
	b) echo "bench/mlp_sbd.cf -D B=32 -D S=4096 -D D=4096" ;;
	c) echo "examples/attention.cf -D B=16 -D S=4096 -D D=4096 -D H=32" ;;
	d) echo "bench/ag_gemm.cf -D B=32 -D S=4096 -D D=4096" ;;
	esac
}

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }
MPIRUN="mpirun --allow-run-as-root --timeout 150 -x CFRT_TRANSFER -x NCCL_NVLS_ENABLE"
# the transfer modes that move data (none: compute alone)
xmodes=$(echo "$MODES" | sed 's/none//')
# modes_of SCHEDULE: the modes it runs in. vanilla and slice(k) move data
# by NCCL collectives in every mode, so ce would repeat nccl; auto is
# built per mode that moves data, on that mode's profile
modes_of() {
	case $1 in
	vanilla | slice*) echo "$MODES" | sed 's/ce//' ;;
	auto*) echo "$xmodes" ;;
	*) echo "$MODES" ;;
	esac
}

# the GPUs' clocks, power, temperature and what holds their clocks down,
# every 200 ms from the calibration to the last run (where nvidia-smi
# can), in smi.csv beside runs.txt: a run's from= and at= times (its
# mpirun's start and end) place it in it; report.py flags a GPU that
# slowed for heat or a fault in any sample and gives each row the SM
# clock its GPUs ran at
rm -f "$raw/smi.csv"
if [ -z "${BUILD_ONLY:-}" ] && command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
		--format=csv,noheader,nounits -lms 200 >"$raw/smi.csv" 2>/dev/null &
	trap "kill $! 2>/dev/null" EXIT
fi

# -- the machine's profile per TP and transfer mode, on the idle machine
# (before the builds)
prof() { echo "${PROFILE_DIR:-$raw}/machine-$1-$2.prof"; }
if [ "$PREDICT" != 0 ] && [ -z "$PROFILE_DIR" ]; then
	for tp in $TPS; do
		for m in $xmodes; do
			t0=$(date +%s.%N)
			if CFRT_TRANSFER=$m $MPIRUN -n "$tp" "$B/cfrt-calibrate-cuda" --type bf16 \
				-o "$(prof "$tp" "$m")" >"$raw/calibrate-$tp-$m.log" 2>&1; then
				echo "calibrated tp=$tp transfer=$m in $(echo "$t0 $(date +%s.%N)" |
					awk '{ printf "%.1f", $2 - $1 }') s (mpirun included)" | tee -a "$log"
			else
				echo "calibrating tp=$tp transfer=$m failed:"
				tail -n 20 "$raw/calibrate-$tp-$m.log"
			fi
		done
	done
fi

# -- cfc's prediction of every row, and what auto takes: "predict case=C
# tp=N schedule=S transfer=M ms=X" lines in predicted.txt (a none row:
# the compute alone predicted on the first mode's profile)
pred=$raw/predicted.txt
: >"$pred"
# margin_of SCHEDULE: auto@P's --auto-margin=P, else nothing
margin_of() { case $1 in auto@*) echo "--auto-margin=${1#auto@}" ;; esac; }
predict_one() { # CASE TP SCHEDULE MODE (none: on the first mode's profile)
	p=$4
	[ "$p" != none ] || p=$first
	x=$("$B/cfc" $(spec "$1") -D tp="$2" --type=bf16 --schedule="${3%@*}" $(margin_of "$3") \
		--profile="$(prof "$2" "$p")" --explain) || { echo "predicting $*: failed"; return; }
	if [ "$4" = none ]; then
		ms=$(echo "$x" | sed -n 's/^pass: predicted .* (compute alone \([0-9.]*\) ms).*/\1/p')
	else
		ms=$(echo "$x" | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
	fi
	echo "predict case=$1 tp=$2 schedule=$3 transfer=$4 ms=${ms:-fail}" >>"$pred"
	[ "${3%@*}" != auto ] || echo "$3 case=$1 tp=$2 transfer=$4 takes $(echo "$x" |
		sed -n 's/.*auto: \([^ ]*\), predicted .*/\1/p' | tr '\n' ' ')" | tee -a "$log"
}
if [ "$PREDICT" != 0 ]; then
	SCHEDULES="$SCHEDULES auto"
	for p in $AUTO_MARGINS; do SCHEDULES="$SCHEDULES auto@$p"; done
	first=${xmodes%% *}
	for tp in $TPS; do
		for c in $CASES; do
			for s in $SCHEDULES; do
				for m in $(modes_of "$s"); do
					predict_one "$c" "$tp" "$s" "$m"
				done
			done
		done
	done
fi

# -- build every model first, in parallel: one "DIR TP SCHEDULE SPEC" a line
build_one='
	CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$1" $4 -D tp=$2 --type=bf16 \
		--schedule="$3" >"$1.build" 2>&1 || echo "build failed: $1"'
for tp in $TPS; do
	for c in $CASES; do
		for s in $SCHEDULES; do
			if [ "${s%@*}" = auto ]; then # one per mode, on its profile
				for m in $xmodes; do
					echo "$raw/$c-$tp-$s-$m $tp auto \"$(spec "$c") $(margin_of "$s") --profile=$(prof "$tp" "$m")\""
				done
			else
				echo "$raw/$c-$tp-$(tag "$s") $tp $s \"$(spec "$c")\""
			fi
		done
	done
done | xargs -L 1 -P 16 sh -c "$build_one" _
[ -z "${BUILD_ONLY:-}" ] || exit 0

# -- run them, one at a time (timings), ROUNDS times: round r (from
# ROUND0, default 0) in the listed order when r is even, the reverse when
# it is odd, so that a drift of the GPUs' state over a round (their
# clocks, their temperature) does not fall on the same rows every round;
# report.py keeps each row's median over its rounds and their spread.
# The runs of one call can be joined with another's (cat runs.txt): give
# the second ROUND0=1 and PROFILE_DIR, so that it is reversed and the
# profiles are the first one's.
# "DIR|CASE|SCHEDULE|MODE" of every run of TP, in the listed order
runs_of() {
	for c in $CASES; do
		for s in $SCHEDULES; do
			for m in $(modes_of "$s"); do
				dir=$raw/$c-$1-$(tag "$s")
				[ "${s%@*}" != auto ] || dir=$raw/$c-$1-$s-$m
				echo "$dir|$c|$s|$m"
			done
		done
	done
}
for tp in $TPS; do
	dumps=""
	for r in $(seq "$ROUND0" $((ROUND0 + ROUNDS - 1))); do
		if [ $((r % 2)) = 1 ]; then order=tac; else order=cat; fi
		for run in $(runs_of "$tp" | $order); do
			dir=${run%%|*} rest=${run#*|}
			c=${rest%%|*} rest=${rest#*|}
			s=${rest%%|*} m=${rest#*|}
			extra=""
			# d's output is 17 GB as doubles: not compared; dumped in
			# the first round only
			if [ "$s" = "fuse(ring)" ] && [ "$m" = "${DUMP_MODE:-nccl}" ] &&
			   [ "$c" != d ] && [ "$r" = "$ROUND0" ]; then
				extra="--dump $raw/ours-$c-$tp.bin"
				dumps="$dumps --dump $c=$raw/ours-$c-$tp.bin"
			fi
			from=$(date +%s)
			line=$(CFRT_TRANSFER=$m $MPIRUN -n "$tp" "$dir/run" \
				--iters "$ITERS" --warmup "$WARMUP" --warmup-s "$WARMUP_S" $extra 2>"$dir.$m.err" | tail -n 1)
			ms=$(echo "$line" | sed -n 's/.*time_ms=\([^ ]*\).*/\1/p')
			echo "run case=$c tp=$tp schedule=$s transfer=$m ms=${ms:-fail} round=$r from=$from at=$(date +%s)" | tee -a "$log"
			[ -n "$ms" ] || tail -n 5 "$dir.$m.err"
		done
	done
	cases=$(for c in $CASES; do printf ' --case %s' "$c"; done)
	[ -n "${NO_TORCH:-}" ] && continue
	torchrun --nproc_per_node="$tp" bench/gpu/torch_ref.py --out "$raw/torch.jsonl" \
		--iters "$ITERS" $cases $dumps >"$raw/torch-$tp.log" 2>&1 ||
		tail -n 20 "$raw/torch-$tp.log"
	rm -f "$raw"/ours-*-"$tp".bin
done

dev=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | tr ' ' '-')
python3 bench/gpu/report.py --runs "$log" --predicted "$pred" --torch "$raw/torch.jsonl" \
	--device "${dev:-gpu}" --results "$RESULTS" --dump-mode "${DUMP_MODE:-nccl}" \
	--smi "$raw/smi.csv"
