#!/bin/sh
# Regressions found by `make fuzz` and the spec generator, one file each
# in tests/fuzz/regress/:
#   - a spec with a "// ranks:" header (a generator find, minimized): the
#     whole check of tests/gen/run.sh (cfc exit 0, C built with -Werror, the
#     run on N ranks matches the serial reference, twice alike);
#   - any other file (an AFL find: any bytes): under each command line of
#     tests/fuzz/modes (what make fuzz runs), cfc exits 0, 1 or 2 within
#     20 s, never 70 (an internal error), never on a signal, and prints no
#     sanitizer report (under SAN builds, where ASan and UBSan would tell).
. tests/lib.sh
t=$B/tests/fuzz
rm -rf "$t"
mkdir -p "$t"
MODES=tests/fuzz/modes
nmodes=$(grep -cv '^#' "$MODES")
mode() { grep -v '^#' "$MODES" | sed -n "$1p" | sed "s|DIR|$2|"; }

# every command line make fuzz runs is one cfc takes: an example
# compiles under each, writing what it says
m=1
while [ $m -le $nmodes ]; do
	rm -rf "$t/mode"
	"$CFC" examples/attention.cf $(mode $m "$t/mode") >"$t/mode.out" 2>"$t/mode.err"
	rc=$?
	check "fuzz: command line $m of tests/fuzz/modes compiles an example" sh -c \
		"[ $rc -eq 0 ] && [ ! -s '$t/mode.err' ] && { [ -s '$t/mode.out' ] || [ -s '$t/mode/attention.c' ]; }"
	m=$((m + 1))
done
check "fuzz: tests/fuzz/modes has the forward, --backward and several kinds" sh -c \
	"[ $nmodes -ge 3 ] && grep -v '^#' '$MODES' | grep -q -- '--backward' &&
	 grep -v '^#' '$MODES' | grep -q -- '--emit=[a-z-]*,[a-z-]*,'"
specs=""
for f in tests/fuzz/regress/*; do
	[ -f "$f" ] || continue
	case $f in *.md) continue ;; esac
	if grep -q '^// ranks: ' "$f" 2>/dev/null; then
		specs="$specs $f"
		continue
	fi
	n=$(basename "$f")
	m=1
	while [ $m -le $nmodes ]; do
		rm -rf "$t/$n.dir"
		timeout 20 "$CFC" "$f" $(mode $m "$t/$n.dir") >"$t/$n.out" 2>"$t/$n.err"
		rc=$?
		if [ $rc -gt 2 ]; then
			fail "fuzz: $n, command line $m (cfc exit $rc)"
			head -n 8 "$t/$n.err"
		elif grep -Eq 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$t/$n.err"; then
			fail "fuzz: $n, command line $m (sanitizer report)"
			head -n 8 "$t/$n.err"
		else
			pass "fuzz: $n, command line $m (exit $rc)"
		fi
		m=$((m + 1))
	done
done
[ -n "$specs" ] && GEN_LABEL=fuzz GEN_WORK=$t/work sh tests/gen/run.sh $specs
exit 0
