#!/bin/sh
# Runs every tests/t-*.sh (or those named as arguments) and counts the
# PASS/FAIL lines they print; a suite that cannot run here prints a
# "SKIP why" line, shown in the summary. Exits non-zero when anything
# failed.
: "${B:=build}"
export B CFC="$B/cfc"
pass=0 fail=0 skip=0
skipped() { [ "$1" -eq 0 ] || echo ", $1 skipped"; }
log=$B/tests/log
mkdir -p "$log"
scripts=${*:-tests/t-*.sh}
for t in $scripts; do
	name=$(basename "$t" .sh)
	echo "== $name"
	sh "$t" >"$log/$name.out" 2>&1
	rc=$?
	grep '^FAIL ' "$log/$name.out" | sed 's/^/   /'
	p=$(grep -c '^PASS ' "$log/$name.out")
	f=$(grep -c '^FAIL ' "$log/$name.out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "   FAIL $name exited $rc; the end of its log:"
		tail -n 20 "$log/$name.out" | sed 's/^/   | /'
		f=1
	fi
	k=$(grep -c '^SKIP ' "$log/$name.out")
	grep '^SKIP ' "$log/$name.out" | sed 's/^SKIP /   skipped: /'
	echo "   $p passed, $f failed$(skipped "$k")"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
done
echo "total: $pass passed, $fail failed$(skipped "$skip")"
[ "$fail" -eq 0 ]
