#!/bin/sh
# layer1.sh: the one-GPU layer benchmark (make bench-gpu1; GEN=DIR for C made elsewhere). The Llama layer
# of examples/llama.cf at tp = 1, bf16, forward and backward, the generated
# code against the same layer in plain PyTorch (bench/gpu/torch_layer.py:
# eager and torch.compile) on the same sizes in the same run; per op (from
# the runtime's trace, CFRT_TRACE) against PyTorch's op alone and against
# the limits (cuBLAS through torch.matmul for a GEMM, cuDNN SDPA for
# attention, the HBM bandwidth a copy reaches for memory-bound ops).
#
# The sizes: the Llama-3-8B layer (D 4096, 32 heads of 128, 8 KV heads,
# F 14336) at S 4096 and 8192, B 1 and 2; and one rank's share of it at
# tp = 4 and 8 (H, KV and F divided; Dh stays 128), built as tp = 1 models.
# CONFIGS picks some of them by name (default: all).
#
# The GPU machines cannot build cfc: GEN=DIR takes the C that
# `GEN_ONLY=1 sh bench/gpu/layer1.sh` wrote into DIR on a development
# machine (one folder per configuration). OUT (default
# bench/results/DATE-gpu1-HOST) gets runs.txt (every line of both sides),
# each configuration's trace (gzip) and summary.md (bench/gpu/layer_report.py).
# BASE=DIR: also the code of an earlier commit, in the same run (the
# "before" of a change): DIR/libcfrt_cuda.a, DIR/gen/CONFIG (its C) and
# DIR/include (its runtime headers; else this tree's runtime/),
# timed and traced the same way ("base" lines, trace-base-CONFIG).
# CFC_FLAGS: more cfc options for the generated C (--order=region: the
# base of a comparison of orders, with BASE's library this tree's).
set -eu
: "${B:=build}" "${ITERS:=20}" "${CFC_FLAGS:=}"
export NCCL_NVLS_ENABLE=0
all="s4096-b1 s8192-b1 s4096-b2 s8192-b2 tp4-s4096-b1 tp8-s4096-b1"
: "${CONFIGS:=$all}"

dims() { # NAME: the -D list of a configuration
	case $1 in
	s4096-b1) echo "B=1 S=4096 H=32 KV=8 F=14336" ;;
	s8192-b1) echo "B=1 S=8192 H=32 KV=8 F=14336" ;;
	s4096-b2) echo "B=2 S=4096 H=32 KV=8 F=14336" ;;
	s8192-b2) echo "B=2 S=8192 H=32 KV=8 F=14336" ;;
	tp4-s4096-b1) echo "B=1 S=4096 H=8 KV=2 F=3584" ;;
	tp8-s4096-b1) echo "B=1 S=4096 H=4 KV=1 F=1792" ;;
	*) echo "layer1: no configuration $1 (have: $all)" >&2; exit 2 ;;
	esac
}
dflags() { for kv in $(dims "$1") D=4096 Dh=128; do printf -- '-D %s ' "$kv"; done; }
targs() { for kv in $(dims "$1"); do printf -- '--%s %s ' "${kv%%=*}" "${kv#*=}"; done; }

t0=$(date +%s)
say() { echo "layer1: [$(($(date +%s) - t0)) s] $*"; }

if [ -n "${GEN_ONLY:-}" ]; then
	for c in $CONFIGS; do
		mkdir -p "$GEN_ONLY/$c"
		# shellcheck disable=SC2046
		"$B/cfc" examples/llama.cf -D tp=1 $(dflags "$c") --type=bf16 --backward \
			--emit=h,c,ref,driver $CFC_FLAGS -o "$GEN_ONLY/$c"
		say "generated $c into $GEN_ONLY/$c"
	done
	exit 0
fi

host=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr ' ' '-')
: "${OUT:=bench/results/$(date +%Y-%m-%d)-gpu1-$host}"
mkdir -p "$OUT"
runs=$OUT/runs.txt
: >"$runs"
echo "host gpu=$host commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} iters=$ITERS" >>"$runs"
[ -f "$B/libcfrt_cuda.a" ] || make B="$B" "$B/libcfrt_cuda.a" >/dev/null
libs=$(sh scripts/cuda-libs.sh)
for c in $CONFIGS; do
	g=${GEN:-$B/bench/gpu1}/$c
	if [ -z "${GEN:-}" ]; then
		mkdir -p "$g"
		# shellcheck disable=SC2046
		"$B/cfc" examples/llama.cf -D tp=1 $(dflags "$c") --type=bf16 --backward \
			--emit=h,c,ref,driver $CFC_FLAGS -o "$g"
	fi
	# shellcheck disable=SC2086
	mpicc -std=c11 -O2 -Iruntime -I"$g" -o "$g/run" "$g/llama.c" "$g/llama_ref.c" \
		"$g/llama_main.c" "$B/libcfrt_cuda.a" $libs
	# what the generated code allocates for a step: weights and their
	# gradients, x, y, dy, dx, the saved activations, the larger workspace
	cat >"$g/mem.c" <<'EOF'
#include <stdio.h>
#include "llama.h"
int main(void)
{
	printf("%zu %zu %zu\n", llama_workspace_bytes(), llama_saved_bytes(),
	       llama_backward_workspace_bytes());
	return 0;
}
EOF
	mem=$(mpicc -std=c11 -Iruntime -I"$g" -o "$g/mem" "$g/mem.c" "$g/llama.c" \
		"$B/libcfrt_cuda.a" $libs && "$g/mem")
	say "$c: ours (generated code, $ITERS iterations)"
	line=$(mpirun --allow-run-as-root --timeout 300 -n 1 "$g/run" --iters "$ITERS" --warmup 3 | tail -n 1)
	echo "ours config=$c $(dims "$c") D=4096 Dh=128 ws_saved_bws=$(echo "$mem" | tr ' ' ,) $line" >>"$runs"
	say "$c: ours traced (5 iterations)"
	CFRT_TRACE=$OUT/trace-$c mpirun --allow-run-as-root --timeout 300 -x CFRT_TRACE -n 1 \
		"$g/run" --iters 5 --warmup 1 >/dev/null
	gzip -f "$OUT/trace-$c.json"
	if [ -n "${BASE:-}" ]; then
		bg=$BASE/gen/$c
		# shellcheck disable=SC2086
		# its own cfrt.h where given (DIR/include): the API's structs may
		# have changed since
		binc=runtime
		[ -d "$BASE/include" ] && binc=$BASE/include
		mpicc -std=c11 -O2 -I"$binc" -I"$bg" -o "$bg/run" "$bg/llama.c" "$bg/llama_ref.c" \
			"$bg/llama_main.c" "$BASE/libcfrt_cuda.a" $libs
		say "$c: the base (BASE=$BASE, $ITERS iterations, then traced)"
		line=$(mpirun --allow-run-as-root --timeout 300 -n 1 "$bg/run" --iters "$ITERS" --warmup 3 | tail -n 1)
		echo "base config=$c $(dims "$c") D=4096 Dh=128 $line" >>"$runs"
		CFRT_TRACE=$OUT/trace-base-$c mpirun --allow-run-as-root --timeout 300 -x CFRT_TRACE -n 1 \
			"$bg/run" --iters 5 --warmup 1 >/dev/null
		gzip -f "$OUT/trace-base-$c.json"
	fi
	say "$c: PyTorch (eager, compile, each op)"
	# shellcheck disable=SC2046
	python3 bench/gpu/torch_layer.py $(targs "$c") --D 4096 --Dh 128 --iters "$ITERS" ${NO_COMPILE:+--no-compile} |
		sed "s/^torch /torch config=$c /" >>"$runs"
done
python3 bench/gpu/layer_report.py "$runs" "$OUT" >"$OUT/summary.md"
say "wrote $OUT/summary.md"
