#!/bin/sh
# The GPU benchmark of issue 5 (make bench-gpu, on a machine with 4 GPUs;
# a measurement, not a test). For TP in $TPS and each case in $CASES, bf16:
#   a  bench/rs_gemm.cf: row-parallel GEMM, per rank M = 32*4096,
#      K = 16384/TP, N = 4096, then reduce-scatter over the sequence;
#   b  bench/mlp_sbd.cf (examples/mlp.cf in the [S, B, D] layout) at
#      (b, s, d) = (32, 4096, 4096), F = 4d;
#   c  examples/attention.cf at (16, 4096, 4096), 32 heads, causal;
#   d  bench/ag_gemm.cf: the all-gather + first GEMM + gelu of b alone;
# the generated code under vanilla, slice(4), fuse(ring), fuse(bidir), each
# with CFRT_TRANSFER=nccl, ce and none (none: the schedule's compute alone;
# vanilla and slice(4) move data by NCCL collectives in every mode, so they
# skip ce),
# then bench/gpu/torch_ref.py (PyTorch references on the same inputs), then
# bench/gpu/report.py writes $RESULTS/<date>-<device>.csv and .md.
# Our output of fuse(ring) with NCCL is dumped and compared with PyTorch's
# (not d's: its output, as doubles, is 17 GB; b checks the same ops).
# BUILD_ONLY=1 stops after building the models (tests/t-cuda-build.sh).
: "${B:=build}"
: "${TPS:=4 2}" "${CASES:=a b c d}" "${ITERS:=20}" "${RESULTS:=bench/results}"
: "${SCHEDULES:=vanilla slice(4) fuse(ring) fuse(bidir)}" "${MODES:=nccl ce none}"
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

# -- build every model first, in parallel: one "DIR TP SCHEDULE SPEC" a line
build_one='
	CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$1" $4 -D tp=$2 --type=bf16 \
		--schedule="$3" >"$1.build" 2>&1 || echo "build failed: $1"'
for tp in $TPS; do
	for c in $CASES; do
		for s in $SCHEDULES; do
			echo "$raw/$c-$tp-$(tag "$s") $tp $s \"$(spec "$c")\""
		done
	done
done | xargs -L 1 -P 16 sh -c "$build_one" _
[ -z "${BUILD_ONLY:-}" ] || exit 0

# -- run them, one at a time (timings)
for tp in $TPS; do
	dumps=""
	for c in $CASES; do
		for s in $SCHEDULES; do
			dir=$raw/$c-$tp-$(tag "$s")
			# vanilla and slice(k) move data by NCCL collectives in
			# every mode: ce would repeat nccl
			modes=$MODES
			case $s in vanilla|slice*) modes=$(echo "$MODES" | sed 's/ce//') ;; esac
			for m in $modes; do
				extra=""
				# d's output is 17 GB as doubles: not compared
				if [ "$s" = "fuse(ring)" ] && [ "$m" = "${DUMP_MODE:-nccl}" ] &&
				   [ "$c" != d ]; then
					extra="--dump $raw/ours-$c-$tp.bin"
					dumps="$dumps --dump $c=$raw/ours-$c-$tp.bin"
				fi
				line=$(CFRT_TRANSFER=$m mpirun --allow-run-as-root --timeout 150 \
					-x CFRT_TRANSFER -x NCCL_NVLS_ENABLE -n "$tp" "$dir/run" \
					--iters "$ITERS" --warmup 3 $extra 2>"$dir.$m.err" | tail -n 1)
				ms=$(echo "$line" | sed -n 's/.*time_ms=\([^ ]*\).*/\1/p')
				echo "run case=$c tp=$tp schedule=$s transfer=$m ms=${ms:-fail} at=$(date +%s)" | tee -a "$log"
				[ -n "$ms" ] || tail -n 5 "$dir.$m.err"
			done
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
python3 bench/gpu/report.py --runs "$log" --torch "$raw/torch.jsonl" \
	--device "${dev:-gpu}" --results "$RESULTS" --dump-mode "${DUMP_MODE:-nccl}"
