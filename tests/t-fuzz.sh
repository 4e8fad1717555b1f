#!/bin/sh
# Regressions found by `make fuzz` and the spec generator, one file each
# in tests/fuzz/regress/:
#   - a spec with a "// ranks:" header (a generator find, minimized): the
#     whole check of tests/gen/run.sh (cfc exit 0, C built with -Werror, the
#     run on N ranks matches the serial reference, twice alike);
#   - any other file (an AFL find: any bytes): cfc exits 0, 1 or 2 within
#     20 s, never 70 (an internal error), never on a signal, and prints no
#     sanitizer report (under SAN builds, where ASan and UBSan would tell).
. tests/lib.sh
t=$B/tests/fuzz
rm -rf "$t"
mkdir -p "$t"
specs=""
for f in tests/fuzz/regress/*; do
	[ -f "$f" ] || continue
	case $f in *.md) continue ;; esac
	if grep -q '^// ranks: ' "$f" 2>/dev/null; then
		specs="$specs $f"
		continue
	fi
	n=$(basename "$f")
	timeout 20 "$CFC" "$f" --emit=c -o "$t/$n.c" >"$t/$n.out" 2>"$t/$n.err"
	rc=$?
	if [ $rc -gt 2 ]; then
		fail "fuzz: $n (cfc exit $rc)"
		head -n 8 "$t/$n.err"
	elif grep -Eq 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$t/$n.err"; then
		fail "fuzz: $n (sanitizer report)"
		head -n 8 "$t/$n.err"
	else
		pass "fuzz: $n (exit $rc)"
	fi
done
[ -n "$specs" ] && GEN_LABEL=fuzz GEN_WORK=$t/work sh tests/gen/run.sh $specs
exit 0
