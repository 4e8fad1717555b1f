#!/bin/sh
# The CUnit suites of the compiler: one PASS/FAIL line per CUnit test. No
# test line at all is a failure, and so is a non-zero exit (a leak under
# SAN, a crash) after tests that all passed: run.sh reports that status.
. tests/lib.sh
out=$B/tests/unit.out
"$B/tests/unit_compiler" >"$out" 2>&1
rc=$?
cat "$out"
sed -n 's/^  Test: \(.*\) \.\.\.passed$/PASS unit: \1/p; s/^  Test: \(.*\) \.\.\.FAILED$/FAIL unit: \1/p' "$out"
grep -q '^  Test: ' "$out" || fail "unit: no test ran (runner exited $rc)"
exit $rc
