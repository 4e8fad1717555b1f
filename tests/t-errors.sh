#!/bin/sh
# Invalid inputs: every tests/errors/NAME.cf must make cfc exit 1 (or the
# status in a first-line "// exit: N" comment) and print exactly NAME.err.
# A first-line "// args: ..." comment gives extra cfc arguments. The
# inputs too large or too odd to keep in git are generated first. Each
# case's diagnostics as -fdiagnostics-format=json and sarif must say the
# same as its text (tests/diagfmt.py).
. tests/lib.sh
gen=$B/tests/gen-errors
mkdir -p "$gen"
python3 - "$gen" <<'PY'
import sys, os
d = sys.argv[1]
def w(name, data):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)
w('deep_parens.cf', b'model m {\n  y = ' + b'(' * 10000 + b'x' + b')' * 10000 + b';\n}\n')
w('huge_ident.cf', b'model m {\n  size ' + b'a' * (1 << 20) + b' = 1;\n}\n')
w('binary.cf', bytes(range(256)) * 16)
w('empty.cf', b'')
w('only_comment.cf', b'// nothing here\n/* at all */\n')
w('many_errors.cf', b'model m {\n' + b''.join(b'  y%d = $;\n' % i for i in range(100)) + b'}\n')
PY

run_case() { # dir name
	dir=$1 name=$2
	args=$(sed -n '1s|^// args: ||p' "$dir/$name.cf" 2>/dev/null | tr -d '\r')
	want_rc=$(sed -n '1s|^// exit: ||p' "$dir/$name.cf" 2>/dev/null)
	[ -n "$want_rc" ] || want_rc=1
	( cd "$dir" && timeout 20 "$CFC" $args "$name.cf" >/dev/null 2>"$ROOT/$B/tests/err.$$" )
	rc=$?
	if [ $rc -ne "$want_rc" ]; then
		fail "error: $name (exit $rc, want $want_rc)"
		head -n 5 "$B/tests/err.$$"
		return
	fi
	golden "error: $name" "$B/tests/err.$$" "$3"
	# the same diagnostics as GCC's JSON and as SARIF 2.1.0
	for f in json sarif; do
		( cd "$dir" && timeout 20 "$CFC" -fdiagnostics-format=$f $args "$name.cf" \
			>/dev/null 2>"$ROOT/$B/tests/err.$$.$f" )
	done
	check "error: $name as JSON and SARIF" python3 tests/diagfmt.py "$B/tests/err.$$" \
		"$B/tests/err.$$.json" "$B/tests/err.$$.sarif"
}

for f in tests/errors/*.cf; do
	n=$(basename "$f" .cf)
	run_case tests/errors "$n" "tests/errors/$n.err"
done
for f in "$gen"/*.cf; do
	n=$(basename "$f" .cf)
	run_case "$gen" "$n" "tests/errors/gen/$n.err"
done
rm -f "$B/tests/err.$$" "$B/tests/err.$$.diff" "$B/tests/err.$$.json" "$B/tests/err.$$.sarif"
