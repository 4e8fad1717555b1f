#!/bin/sh
# build.sh DIR [cuda] [cfc options...]: the Llama block of examples/llama.cf
# as a torch layer in DIR: llama.py (cfc --emit=py, with its Layer) and
# libllama.so, with its backward and --accumulate (weight gradients added
# into each parameter's .grad). Against this tree's build ($B, default
# build: make check-deps); with "cuda" against libcfrt_cuda.a. Several
# sizes (-D S=16,32) build every variant's C into the one library.
#   sh examples/torch/build.sh /tmp/llama -D tp=2
#   sh examples/torch/build.sh /tmp/llama -D tp=2 -D S=1024,2048,4096
#   sh examples/torch/build.sh /tmp/llama-gpu cuda -D tp=1 --type=bf16
set -eu
: "${B:=build}"
DIR=$1
shift
cuda=0
if [ "${1:-}" = cuda ]; then
	cuda=1
	shift
fi
mkdir -p "$DIR"
"$B/cfc" examples/llama.cf --backward --accumulate "$@" --emit=h,c,ref,py -o "$DIR"
# the C files of this build, as llama.py's BUILD_COMMAND names them
SRCS=$(sed -n 's/^BUILD_COMMAND = ("mpicc -shared -fPIC -O2 -o {lib} \(.*\) "$/\1/p' "$DIR/llama.py" |
	tr ' ' '\n' | sed "s|^|$DIR/|" | tr '\n' ' ')
if [ "$cuda" = 1 ]; then
	: "${CUDA_LIBS:=$(sh scripts/cuda-libs.sh)}"
	mpicc -std=c11 -O2 -shared -fPIC -Iruntime -I"$DIR" -o "$DIR/libllama.so" \
		$SRCS \
		-Wl,--whole-archive "$B/libcfrt_cuda.a" -Wl,--no-whole-archive $CUDA_LIBS
else
	mpicc -std=c11 -O2 -shared -fPIC -Iruntime -I"$DIR" -o "$DIR/libllama.so" \
		$SRCS \
		-Wl,--whole-archive "$B/libcfrt.a" -Wl,--no-whole-archive \
		$(pkg-config --libs openblas) -lm -pthread
fi
echo "build.sh: $DIR/llama.py, $DIR/libllama.so"
