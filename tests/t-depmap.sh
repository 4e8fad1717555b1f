#!/bin/sh
# The structure of the pipeline (issue 49): scripts/depmap.py maps the
# includes and calls among compiler/, codegen/, cli/ and runtime/; no
# circle and no upward arrow (a file of compiler/ reaching up to one that
# depends on it) beyond tests/depmap.allow. The map itself must see a
# planted circle, so that the check can fail.
. tests/lib.sh
t=$B/tests/depmap
rm -rf "$t"
mkdir -p "$t"
PY=/usr/bin/python3

$PY scripts/depmap.py --check tests/depmap.allow >"$t/check.out" 2>&1
check "depmap: no circle or upward arrow beyond tests/depmap.allow" \
	sh -c "[ $? -eq 0 ] || { cat '$t/check.out'; false; }"

# a copy of compiler/ where util.c (below everything) calls up into the
# verifier, which depends on it
mkdir -p "$t/tree/scripts"
cp -r compiler "$t/tree/"
cp scripts/depmap.py "$t/tree/scripts/"
printf '\nint depmap_planted(void);\nint\ndepmap_planted(void)\n{\n\treturn verify_coll(0, 0, 0, 0, 0) != 0;\n}\n' >>"$t/tree/compiler/util.c"
$PY "$t/tree/scripts/depmap.py" --check tests/depmap.allow >"$t/planted.out" 2>&1
rc=$?
check "depmap: a planted call from util.c up to verify fails the check" \
	sh -c "[ $rc -eq 1 ] && grep -q '^new circle: .*compiler/util.c' '$t/planted.out' &&
	       grep -q '^new upward arrow: compiler/util.c -> compiler/verify' '$t/planted.out'"
# and the map prints the measures the issue asks for
$PY scripts/depmap.py >"$t/map.out" 2>&1
check "depmap: the map prints circles, upward arrows and big files" \
	sh -c "grep -q '^circles: [0-9]' '$t/map.out' && grep -q '^upward arrows: [0-9]' '$t/map.out' &&
	       grep -q '^files over 1000 lines: [0-9]' '$t/map.out'"
# the runtime's elementwise ops are defined by macros from the rows of
# runtime/common/ew.def: the map still sees who defines cfrt_gelu and
# cfrt_sigmoid_grad (each backend) and cfrt_add, and who calls them
$PY scripts/depmap.py --edges >"$t/edges.out" 2>&1
check "depmap: the ops defined from ew.def's rows carry the calls to them" \
	sh -c "grep -q '^runtime/tools/calibrate_run.c -> runtime/mpi/ew.c: .*cfrt_add, .*cfrt_gelu, .*cfrt_sigmoid_grad' '$t/edges.out' &&
	       grep -q '^runtime/tools/calibrate_run.c -> runtime/cuda/ops.c: .*cfrt_add, .*cfrt_gelu, .*cfrt_sigmoid_grad' '$t/edges.out'"
