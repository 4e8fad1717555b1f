#!/bin/sh
# build-model.sh B DIR SPEC [cfc args...]: compiles SPEC with cfc into DIR
# and links DIR/run against $B/libcfrt_cuda.a (the CUDA backend), as
# scripts/build-model.sh does against the MPI backend. CUDA_LIBS (exported
# by runtime/cuda/cuda.mk) names the CUDA, NCCL and cuBLAS libraries.
set -eu
B=$1 DIR=$2 SPEC=$3
shift 3
if [ -z "${CUDA_LIBS:-}" ]; then
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
	CUDA_LIBS="-L$home/lib64 -Wl,-rpath,$home/lib64 -lnccl -lcublas -lcudart -lstdc++ -lm -ldl -lpthread -lrt"
fi
mkdir -p "$DIR"
"$B/cfc" "$SPEC" "$@" --emit=h,c,ref,driver -o "$DIR"
name=$(sed -n 's/^#define MODEL_NAME "\(.*\)"$/\1/p' "$DIR"/*_main.c)
mpicc -std=c11 -O2 -g -Wall -Wextra -Werror ${SANFLAGS:-} -Iruntime -I"$DIR" \
	-o "$DIR/run" "$DIR/$name.c" "$DIR/${name}_ref.c" "$DIR/${name}_main.c" \
	"$B/libcfrt_cuda.a" $CUDA_LIBS
