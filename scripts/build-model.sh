#!/bin/sh
# build-model.sh B DIR SPEC [cfc args...]: compiles SPEC with cfc into DIR
# (header, parallel C, serial reference, driver) and links DIR/run against
# $B/libcfrt.a with mpicc. Used by the demo, the end-to-end tests and the
# benchmarks. CF_OPT (default -O2) sets the optimization level.
set -eu
B=$1 DIR=$2 SPEC=$3
shift 3
mkdir -p "$DIR"
"$B/cfc" "$SPEC" "$@" --emit=h,c,ref,driver -o "$DIR"
name=$(sed -n 's/^#define MODEL_NAME "\(.*\)"$/\1/p' "$DIR"/*_main.c)
mpicc -std=c11 ${CF_OPT:--O2} -g -Wall -Wextra -Werror ${SANFLAGS:-} -Iruntime -I"$DIR" \
	-o "$DIR/run" "$DIR/$name.c" "$DIR/${name}_ref.c" "$DIR/${name}_main.c" \
	"$B/libcfrt.a" $(pkg-config --libs openblas) -lm -pthread
