#!/bin/sh
# build-mix.sh B OUT [--alone] DIR...: links OUT, one program that runs
# the models whose C scripts/build-model.sh generated in each DIR side by
# side, their passes interleaved (bench/mix.c; bench.sh's mix rows). Each
# DIR's C is compiled with -DCF_MIX=cf_mix_I (its driver an entry, not a
# main) into one object whose only global symbol is that entry (ld -r,
# then objcopy makes the rest local): builds of one model under different
# schedules define the same functions. A DIR after --alone is an entry
# with its transfers removed, its compute alone: its calls of the
# transfers bench/nocomm.c replaces (NOCOMM, nocomm_syms: model-cc.sh)
# go to those, in that entry only, so that one job can time a schedule
# with and without its transfers side by side. CF_BACKEND, CUDA_LIBS,
# CF_OPT and SANFLAGS as in build-model.sh (scripts/model-cc.sh).
set -eu
B=$1 OUT=$2
shift 2
. scripts/model-cc.sh
tmp=$OUT.objs
rm -rf "$tmp" "$OUT"
mkdir -p "$tmp"
n=0
for d; do [ "$d" = --alone ] || n=$((n + 1)); done
{
	echo '#include "mix.h"'
	for j in $(seq 0 $((n - 1))); do echo "extern const cf_mix cf_mix_$j;"; done
	echo 'const cf_mix *const mix_entries[] = {'
	for j in $(seq 0 $((n - 1))); do echo "	&cf_mix_$j,"; done
	echo '};'
	echo "const int mix_count = $n;"
} >"$tmp/list.c"
# entry I of directory D (ALONE 1: without its transfers), in the
# background: one job per directory
entry() {
	i=$1 d=$2 alone=$3
	name=$(model_name "$d")
	[ -n "$name" ] || { echo "build-mix.sh: no driver in $d" >&2; return 1; }
	objs=
	for f in "$name" "${name}_ref" "${name}_main"; do
		# the driver's helpers of its main go unused in an entry
		$MODEL_CC -Wno-unused-function -Ibench -I"$d" -DCF_MIX="cf_mix_$i" \
			-c -o "$tmp/$i-$f.o" "$d/$f.c" || return 1
		objs="$objs $tmp/$i-$f.o"
	done
	if [ "$alone" = 1 ]; then
		redef=$(nocomm_syms | sed 's/.*/--redefine-sym &=__wrap_&/')
		[ -n "$redef" ] || { echo "build-mix.sh: no transfers in $NOCOMM" >&2; return 1; }
		${LD:-ld} -r -o "$tmp/$i-comm.o" $objs &&
			${OBJCOPY:-objcopy} $redef "$tmp/$i-comm.o" || return 1
		objs="$tmp/$i-comm.o $NOCOMM"
	fi
	${LD:-ld} -r -o "$tmp/$i.o" $objs &&
		${OBJCOPY:-objcopy} --keep-global-symbol="cf_mix_$i" "$tmp/$i.o"
}
i=0 pids= alone=0
for d; do
	[ "$d" != --alone ] || { alone=1; continue; }
	entry "$i" "$d" "$alone" &
	pids="$pids $!"
	i=$((i + 1)) alone=0
done
st=0
for p in $pids; do wait "$p" || st=1; done
[ "$st" = 0 ] || exit 1
objs=
for j in $(seq 0 $((n - 1))); do objs="$objs $tmp/$j.o"; done
$MODEL_CC -Ibench -o "$OUT" bench/mix.c "$tmp/list.c" $objs $LIBS
