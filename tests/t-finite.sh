#!/bin/sh
# CFRT_CHECK=finite through the runtime's API alone (tests/gpu/finite_check.c
# on the MPI backend; tests/gpu/run.sh runs the same program on a GPU with
# bf16 too): a NaN or an Inf planted in an input of copy, scale (into a
# column slice whose other columns hold a NaN), attention and its backward
# (the 2nd result named), and a matmul that overflows, each fails with
# CFRT_ENONFINITE and the whole message naming rank, op, step, call,
# tensors, slice and element; finite values pass every call; without the
# setting nothing is checked.
. tests/lib.sh
t=$B/tests/finite
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60 -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS"
$MPIRUN -n 1 "$B/tests/finite_check" >"$t/out" 2>&1
rc=$?
cat "$t/out"
sed -nE 's/^finite_check: ([^:]*): (ok|MISMATCH)$/\2 \1/p' "$t/out" | while read -r res name; do
	if [ "$res" = ok ]; then pass "finite: $name"; else fail "finite: $name"; fi
done
check "finite: finite_check passes all 9 cases (exit $rc)" sh -c \
	"[ $rc -eq 0 ] && grep -q '^finite_check: PASS (9 cases)\$' '$t/out'"
