#!/bin/sh
# The single-GPU part of the training benchmark (issue 10): forward and
# backward of the MLP block (case b: bench/mlp_sbd.cf, [S, B, D], bf16) at
# tp = 1, generated code against PyTorch autograd (bench/gpu/torch_train.py)
# on the same sizes. With one GPU there is no collective: this compares the
# compute of the two training steps. B = 16 (not case b's 32): at tp = 1
# the hidden activation of B = 32 has 2^31 elements, more than a count of
# the runtime's transfers can hold, and cfc refuses it.
#
# The GPU machines cannot build cfc (no flex, bison): generate the C on a
# development machine and pass its folder as GEN:
#   build/cfc bench/mlp_sbd.cf -D tp=1 -D B=16 -D S=4096 -D D=4096 \
#       --backward --emit=h,c,ref,driver -o DIR
# Without GEN, $B/cfc writes it. ITERS (20) runs after 3 warm-ups, medians.
set -eu
: "${B:=build}" "${ITERS:=20}"
export NCCL_NVLS_ENABLE=0 OMPI_MCA_btl_vader_single_copy_mechanism=none
dims="-D tp=1 -D B=16 -D S=4096 -D D=4096"
if [ -z "${GEN:-}" ]; then
	GEN=$B/bench/gpu/train
	"$B/cfc" bench/mlp_sbd.cf $dims --backward --emit=h,c,ref,driver -o "$GEN"
fi
make B="$B" "$B/libcfrt_cuda.a" >/dev/null
mpicc -std=c11 -O2 -Iruntime -I"$GEN" -o "$GEN/run" "$GEN/mlp_sbd.c" "$GEN/mlp_sbd_ref.c" \
	"$GEN/mlp_sbd_main.c" "$B/libcfrt_cuda.a" $(sh scripts/cuda-libs.sh)
nvidia-smi --query-gpu=name --format=csv,noheader
echo "ours: time_ms is the forward, backward_ms the backward"
mpirun --allow-run-as-root --timeout 300 -n 1 "$GEN/run" --iters "$ITERS" --warmup 3 | tail -n 1
python3 bench/gpu/torch_train.py "$ITERS" 4096 16 4096
