#!/bin/sh
# cuda-libs.sh [CUDA_HOME]: prints what a program linked against
# libcfrt_cuda.a needs besides MPI (NCCL, cuBLASLt, cuBLAS, the CUDA
# runtime), with CUDA_HOME from the nvcc on PATH when not given. The one
# place that list is written: runtime/cuda/cuda.mk, scripts/build-model.sh
# and tests/gpu/run.sh use it.
home=${1:-}
if [ -z "$home" ]; then
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
fi
echo "-L$home/lib64 -Wl,-rpath,$home/lib64 -lnccl -lcublasLt -lcublas -lcudart -lstdc++ -lm -ldl -lpthread -lrt"
