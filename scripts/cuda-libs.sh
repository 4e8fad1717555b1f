#!/bin/sh
# cuda-libs.sh [--cflags] [CUDA_HOME]: prints what a program linked against
# libcfrt_cuda.a needs besides MPI (NCCL, cuDNN when found, cuBLASLt,
# cuBLAS, the CUDA runtime). CUDA_HOME: the argument, else the
# environment's CUDA_HOME (as runtime/cuda/cuda.mk takes it), else the
# nvcc on PATH's. The one place that list is written: runtime/cuda/cuda.mk,
# scripts/build-model.sh and tests/gpu/run.sh use it.
# --cflags: what the backend compiles with instead: -DCFRT_HAVE_CUDNN when
# cuDNN is found, else nothing.
# cuDNN 9 is found when both its graph API header (cudnn_graph.h) and its
# library (libcudnn.so) are there: under CUDA_HOME (include, lib64), or in
# the system's directories (the multiarch ones of Debian's libcudnn9-dev
# packages, /usr/include and /usr/lib*), which the compiler and the linker
# search by themselves. CFRT_CUDNN=no leaves it out.
cflags=0
if [ "${1:-}" = --cflags ]; then
	cflags=1
	shift
fi
home=${1:-${CUDA_HOME:-}}
if [ -z "$home" ]; then
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
fi
arch=$(gcc -print-multiarch 2>/dev/null)
[ -n "$arch" ] || arch=$(uname -m)-linux-gnu
cudnn=
if [ "${CFRT_CUDNN:-}" != no ]; then
	for inc in "$home/include" "/usr/include/$arch" /usr/include; do
		[ -f "$inc/cudnn_graph.h" ] || continue
		for lib in "$home/lib64" "/usr/lib/$arch" /usr/lib64 /usr/lib; do
			[ -f "$lib/libcudnn.so" ] && cudnn=-lcudnn && break 2
		done
	done
fi
if [ $cflags = 1 ]; then
	[ -n "$cudnn" ] && echo "-DCFRT_HAVE_CUDNN"
	exit 0
fi
echo "-L$home/lib64 -Wl,-rpath,$home/lib64 -lnccl $cudnn -lcublasLt -lcublas -lcudart -lstdc++ -lm -ldl -lpthread -lrt" | tr -s ' '
