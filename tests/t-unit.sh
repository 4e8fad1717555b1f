#!/bin/sh
# The CUnit suites of the compiler: one PASS/FAIL line per CUnit test.
. tests/lib.sh
out=$B/tests/unit.out
"$B/tests/unit_compiler" >"$out" 2>&1
rc=$?
cat "$out"
sed -n 's/^  Test: \(.*\) \.\.\.passed$/PASS unit: \1/p; s/^  Test: \(.*\) \.\.\.FAILED$/FAIL unit: \1/p' "$out"
[ $rc -eq 0 ] || { grep -q '^  Test: ' "$out" || fail "unit runner exited $rc"; }
