#!/bin/sh
# block1.sh CASE...: two blocks of issue 52 on one GPU, bf16, tp = 1, the
# generated code against the same block in PyTorch (eager and
# torch.compile) in the same run; no communication in either.
#   mlp    the MLP block's training step: bench/mlp_sbd.cf at B 16, S 4096,
#          D 4096 (F 4D), [S, B, D], against bench/gpu/torch_train.py
#          (target: ours >= 1.0x of PyTorch's step);
#   casec  one rank's compute of the GPU benchmark's case (c) at tp = 4:
#          bench/attn_rank.cf (x [B, S, D] onto HL heads of Dh, causal
#          attention, the output projection) at B 16, S 4096, D 4096, 8
#          heads of 128, against bench/gpu/torch_attn_rank.py (matmuls and
#          causal SDPA; target: ours >= 1.0x).
# Each case is built twice: without --backward (its forward alone, the
# compute case (c) times) and with it (the training step: the forward
# that saves, then the backward). The driver runs --iters ITERS --warmup
# WARMUP and prints medians; PyTorch the same counts (bench/gpu/torch_step.py).
#
# The GPU machines cannot build cfc: GEN_ONLY=DIR writes the C into
# DIR/CASE/{fwd,step} here and stops; GEN=DIR takes it there. Without
# either, $B/cfc writes it into $B/bench/gpu/block1.
# OUT (default bench/results/DATE-block1-GPU) gets runs.txt (every line of
# both sides), CASE-*.log and .err (each program's output) and summary.md
# (bench/gpu/block_report.py). Knobs: ITERS (20), WARMUP (3), NO_COMPILE=1,
# TORCH_TIMEOUT (150 s a PyTorch side: a compile that hangs costs no more).
# To try the script on a machine without a GPU: SMALL=1 (the specs' own
# small sizes), CFC_FLAGS=--type=f32 (the MPI backend has no bf16),
# CFRT_LIB=$B/libcfrt.a CFRT_LIBS="$(pkg-config --libs openblas) -lm
# -pthread", TORCH_DEVICE=cpu (PYTHON: the interpreter, python3).
set -u
: "${B:=build}" "${ITERS:=20}" "${WARMUP:=3}" "${CFC_FLAGS:=}" "${TORCH_TIMEOUT:=150}"
: "${TORCH_DEVICE:=cuda}" "${PYTHON:=python3}"
export NCCL_NVLS_ENABLE=0 OMPI_MCA_btl_vader_single_copy_mechanism=none PYTHONUNBUFFERED=1 \
	PYTHONDONTWRITEBYTECODE=1
[ $# -gt 0 ] || { echo "usage: block1.sh mlp|casec..." >&2; exit 2; }

# CASE's spec, model name and torch script
spec() {
	case $1 in
	mlp) echo "bench/mlp_sbd.cf mlp_sbd bench/gpu/torch_train.py" ;;
	casec) echo "bench/attn_rank.cf attn_rank bench/gpu/torch_attn_rank.py" ;;
	*) echo "block1: no case $1 (have: mlp casec)" >&2; return 2 ;;
	esac
}
# CASE's sizes, NAME=VALUE: cfc's -D NAME=VALUE and the torch script's --NAME VALUE
dims() {
	case $1-${SMALL:-0} in
	mlp-0) echo "B=16 S=4096 D=4096" ;;
	mlp-1) echo "B=2 S=64 D=64" ;;
	casec-0) echo "B=16 S=4096 D=4096 HL=8 Dh=128" ;;
	casec-1) echo "B=2 S=64 D=64 HL=2 Dh=16" ;;
	esac
}
dflags() { for kv in tp=1 $(dims "$1"); do printf -- '-D %s ' "$kv"; done; }
targs() { for kv in $(dims "$1"); do printf -- '--%s %s ' "${kv%%=*}" "${kv#*=}"; done; }

t0=$(date +%s)
say() { echo "block1: [$(($(date +%s) - t0)) s] $*"; }

# gen CASE DIR: the C of CASE, forward alone (DIR/fwd) and the step (DIR/step)
gen() {
	s=$(spec "$1") || return 2
	for b in fwd step; do
		mkdir -p "$2/$b"
		bw=
		[ $b = step ] && bw=--backward
		# shellcheck disable=SC2046,SC2086
		"$B/cfc" "${s%% *}" $(dflags "$1") $bw --emit=h,c,ref,driver $CFC_FLAGS \
			-o "$2/$b" || return 1
	done
	say "generated $1 into $2"
}

if [ -n "${GEN_ONLY:-}" ]; then
	for c in "$@"; do
		gen "$c" "$GEN_ONLY/$c" || exit 1
	done
	exit 0
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | tr ' ' '-')
: "${gpu:=nogpu}"
: "${OUT:=bench/results/$(date +%Y-%m-%d)-block1-$gpu}"
: "${CFRT_LIB:=$B/libcfrt_cuda.a}"
[ -n "${CFRT_LIBS:-}" ] || CFRT_LIBS=$(sh scripts/cuda-libs.sh)
[ -f "$CFRT_LIB" ] || make B="$B" "$CFRT_LIB" >/dev/null || exit 1
mkdir -p "$OUT"
runs=$OUT/runs.txt
: >"$runs"
echo "host gpu=$gpu commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" \
	"iters=$ITERS warmup=$WARMUP" >>"$runs"
# the bytes of a build's tensors (the driver allocates every one of its
# header's *_RANK_DIMS: inputs, weights, outputs and their gradients), of
# the element size its *_DTYPE names
tensor_bytes() {
	awk -F'[{}]' '/_DTYPE CFRT_/ { e = /F64/ ? 8 : /F32/ ? 4 : 2 }
		/_RANK_DIMS/ { n = 1; k = split($2, a, ","); for (i = 1; i <= k; i++) n *= a[i]; s += n }
		END { printf "%.0f\n", s * e }' "$1"
}
st=0
for c in "$@"; do
	s=$(spec "$c") || { st=2; continue; }
	read -r cspec m tpy <<EOF
$s
EOF
	g=${GEN:-$B/bench/gpu/block1}/$c
	[ -n "${GEN:-}" ] || gen "$c" "$g" || { st=1; continue; }
	for b in fwd step; do
		d=$g/$b
		# shellcheck disable=SC2086
		if ! mpicc -std=c11 -O2 -Iruntime -I"$d" -o "$d/run" "$d/$m.c" "$d/${m}_ref.c" \
			"$d/${m}_main.c" "$CFRT_LIB" $CFRT_LIBS >"$OUT/$c-build-$b.log" 2>&1; then
			say "$c: FAIL build $b (see $OUT/$c-build-$b.log)"
			st=1
			continue
		fi
		say "$c: ours, $b ($cspec, $ITERS iterations)"
		log=$OUT/$c-ours-$b.log
		mpirun --allow-run-as-root --timeout 180 -n 1 "$d/run" --iters "$ITERS" \
			--warmup "$WARMUP" >"$log" 2>&1
		rc=$?
		line=$(grep '^model=' "$log" | tail -n 1)
		if [ $rc -ne 0 ] || [ -z "$line" ]; then
			say "$c: FAIL ours $b rc=$rc: $(tail -n 3 "$log" | tr '\n' ' ')"
			st=1
			continue
		fi
		echo "ours case=$c build=$b $(dims "$c") tensor_bytes=$(tensor_bytes "$d/$m.h") $line" >>"$runs"
	done
	say "$c: PyTorch ($tpy: eager, compile)"
	# shellcheck disable=SC2046
	timeout "$TORCH_TIMEOUT" "$PYTHON" "$tpy" $(targs "$c") --iters "$ITERS" --warmup "$WARMUP" \
		--device "$TORCH_DEVICE" ${NO_COMPILE:+--no-compile} 2>"$OUT/$c-torch.err" |
		tee "$OUT/$c-torch.log" | sed "s/^torch /torch case=$c /" >>"$runs"
	if ! grep -q "^torch case=$c what=step mode=eager" "$runs"; then
		say "$c: FAIL PyTorch: $(tail -n 3 "$OUT/$c-torch.err" | tr '\n' ' ')"
		st=1
	fi
	grep -q "^torch case=$c what=step mode=compile error" "$runs" &&
		say "$c: torch.compile failed ($c-torch.err):" \
			"$(grep 'compile failed' "$OUT/$c-torch.err" | head -n 1 | cut -c 1-200)"
done
"$PYTHON" bench/gpu/block_report.py "$runs" >"$OUT/summary.md" || st=1
say "wrote $OUT/summary.md"
exit $st
