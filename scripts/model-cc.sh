# model-cc.sh: what build-model.sh and build-mix.sh share (sourced, after
# B is set): LIBS, the runtime backend and its libraries (CF_BACKEND=cuda:
# $B/libcfrt_cuda.a and CUDA_LIBS, else scripts/cuda-libs.sh's; else
# $B/libcfrt.a and OpenBLAS); MODEL_CC, the compiler and flags of
# generated C (CF_OPT, default -O2; SANFLAGS); model_name DIR, the model
# whose driver DIR holds (empty when none); NOCOMM, bench/nocomm.c's
# object (bench.mk builds it), and nocomm_syms, the runtime's transfers
# it replaces (a __wrap_X of it for each X), a name a line.
if [ "${CF_BACKEND:-mpi}" = cuda ]; then
	LIBS="$B/libcfrt_cuda.a ${CUDA_LIBS:-$(sh scripts/cuda-libs.sh)}"
else
	LIBS="$B/libcfrt.a $(pkg-config --libs openblas) -lm -pthread"
fi
MODEL_CC="mpicc -std=c11 ${CF_OPT:--O2} -g -Wall -Wextra -Werror ${SANFLAGS:-} -Iruntime"
NOCOMM=$B/bench/tools/nocomm.o
nocomm_syms() {
	nm "$NOCOMM" | sed -n 's/.* T __wrap_\(.*\)/\1/p'
}
model_name() {
	sed -n 's/^#define CF_MODEL_NAME "\(.*\)"$/\1/p' "$1"/*_main.c 2>/dev/null || true
}
