#!/bin/sh
# torch_layer.sh: the torch layer's one-GPU checks (issue 50), on a GPU
# machine with python3 + torch, under torchrun --nproc_per_node=1 with no
# MPI in the process: tests/gpu/torch_layer.py (f32 and bf16 against plain
# PyTorch, torch's stream, torch's allocator, accumulation, autocast,
# torch.compile), examples/torch/train.py's losses in bf16 against the
# plain-PyTorch block, and (BENCH=1) bench/gpu/torch_layer_bench.py at a
# Llama-3-8B layer's size. The GPU machines have no flex or bison: GEN is a
# folder of generated C made elsewhere (its f32, bf16 and 8b folders:
#   sh tests/gpu/torch_layer.sh gen GEN   on a machine with cfc), else $B/cfc
# writes it. OUT: where the logs go (default $B/tests/gpu-torch). The
# libraries are linked -Bsymbolic: the f32 and the bf16 build are loaded
# into one process, and each must call its own copies of cfrt and its
# entry points.
set -u
: "${B:=build}"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
if [ "${1:-}" = gen ]; then
	g=$2
	mkdir -p "$g/f32" "$g/bf16" "$g/8b"
	"$B/cfc" examples/llama.cf -D tp=1 --backward --accumulate --emit=h,c,ref,py -o "$g/f32"
	"$B/cfc" examples/llama.cf -D tp=1 --type=bf16 --backward --accumulate \
		--emit=h,c,ref,py -o "$g/bf16"
	"$B/cfc" examples/llama.cf -D tp=1 -D B=1 -D S=4096 -D D=4096 -D H=32 -D KV=8 \
		-D F=14336 --type=bf16 --backward --accumulate --emit=h,c,ref,py -o "$g/8b"
	exit
fi
out=${OUT:-$B/tests/gpu-torch}
mkdir -p "$out"
GEN=${GEN:-$B/tests/gpu-torch-gen}
[ -d "$GEN/f32" ] || sh "$0" gen "$GEN"
make B="$B" -j"$(nproc)" "$B/libcfrt_cuda.a" >"$out/make.log" 2>&1 || { tail -n 30 "$out/make.log"; exit 1; }
CUDA_LIBS=$(sh scripts/cuda-libs.sh)
for v in f32 bf16 8b; do
	mpicc -std=c11 -O2 -shared -fPIC -Iruntime -I"$GEN/$v" -o "$GEN/$v/libllama.so" \
		"$GEN/$v/llama.c" "$GEN/$v/llama_ref.c" \
		-Wl,-Bsymbolic -Wl,--whole-archive "$B/libcfrt_cuda.a" -Wl,--no-whole-archive $CUDA_LIBS ||
		exit 1
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
timeout 300 torchrun --nproc_per_node=1 tests/gpu/torch_layer.py "$GEN/f32" "$GEN/bf16" 2>&1 |
	tee "$out/checks.txt"
grep -q "torch-gpu: 0 failed" "$out/checks.txt" || rc=1
timeout 120 torchrun --nproc_per_node=1 examples/torch/train.py --impl=cfc --dir "$GEN/bf16" \
	--device=cuda --dtype=bf16 --steps 20 >"$out/train_cfc.txt" 2>&1
timeout 120 python3 examples/torch/train.py --impl=torch --device=cuda --dtype=bf16 --steps 20 \
	>"$out/train_torch.txt" 2>&1
echo "train.py bf16, one GPU: the generated layer | the plain-PyTorch block"
paste "$out/train_cfc.txt" "$out/train_torch.txt" | tee "$out/train.txt"
if [ "${BENCH:-0}" = 1 ]; then
	timeout 240 python3 bench/gpu/torch_layer_bench.py "$GEN/8b" 20 2>&1 | tee "$out/bench.txt"
fi
exit $rc
