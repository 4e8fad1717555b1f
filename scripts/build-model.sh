#!/bin/sh
# build-model.sh B DIR SPEC [cfc args...]: compiles SPEC with cfc into DIR
# (header, parallel C, serial reference, driver) and links DIR/run with
# mpicc against a backend of the runtime: $B/libcfrt.a (MPI + OpenBLAS), or
# with CF_BACKEND=cuda $B/libcfrt_cuda.a (CUDA + NCCL + cuBLAS; CUDA_LIBS,
# else scripts/cuda-libs.sh, names those libraries). Used by the
# demo, the tests and the benchmarks. CF_OPT (default -O2) sets the
# optimization level; CF_LINK adds objects and flags to the link,
# CF_NOCOMM=1 links the program without its transfers (bench/nocomm.c's
# no-ops in their place: its compute alone), and CF_RUN names the
# program (default run). CF_STAGE=gen only runs cfc (on
# a machine with the compiler), CF_STAGE=link only links the C that an
# earlier gen left in DIR (on a machine without it, e.g. a GPU machine);
# the default does both.
set -eu
B=$1 DIR=$2 SPEC=$3
shift 3
. scripts/model-cc.sh
mkdir -p "$DIR"
[ "${CF_STAGE:-all}" = link ] || "$B/cfc" "$SPEC" "$@" --emit=h,c,ref,driver -o "$DIR"
[ "${CF_STAGE:-all}" != gen ] || exit 0
name=$(model_name "$DIR")
[ -n "$name" ] || { echo "build-model.sh: no driver in $DIR" >&2; exit 1; }
alone=
if [ "${CF_NOCOMM:-0}" = 1 ]; then
	syms=$(nocomm_syms)
	[ -n "$syms" ] || { echo "build-model.sh: no transfers in $NOCOMM" >&2; exit 1; }
	alone="$(echo "$syms" | sed 's/^/-Wl,--wrap=/') $NOCOMM"
fi
$MODEL_CC -I"$DIR" \
	-o "$DIR/${CF_RUN:-run}" "$DIR/$name.c" "$DIR/${name}_ref.c" "$DIR/${name}_main.c" \
	$alone ${CF_LINK:-} $LIBS
