#!/bin/sh
# The command line: version, help, exit codes, stdin, -D, -o, determinism,
# and that a failed run leaves no partial output file.
. tests/lib.sh
t=$B/tests/cli
rm -rf "$t"
mkdir -p "$t"

check "cli: --version" sh -c "'$CFC' --version | grep -Eq '^cfc [0-9]+\.[0-9]+\.[0-9]+$'"
check "cli: --help exits 0 on stdout" sh -c "'$CFC' --help | grep -q '^usage: cfc'"
check "cli: -h is --help" sh -c "'$CFC' -h >'$t/h' && '$CFC' --help >'$t/help' && cmp -s '$t/h' '$t/help'"
check "cli: --explain writes to standard output" sh -c \
	"'$CFC' --explain examples/mlp.cf 2>/dev/null | grep -q '^examples/mlp.cf:18: all_gather xa: fuse(ring)'"
check "cli: -fdiagnostics-format=json of a clean compile is an empty list" sh -c \
	"[ \"\$('$CFC' -fdiagnostics-format=json examples/mlp.cf 2>&1 >/dev/null)\" = '[]' ]"
"$CFC" -fdiagnostics-format=xml examples/mlp.cf >/dev/null 2>"$t/fmt.err"; rc=$?
check "cli: an unknown diagnostics format exits 2" sh -c "[ $rc -eq 2 ] && grep -q 'wants text, json or sarif' '$t/fmt.err'"
"$CFC" -fdiagnostics-format=json no/such/file.cf 2>"$t/nofile.json"; rc=$?
check "cli: I/O errors are diagnostics in JSON too" sh -c "[ $rc -eq 1 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 1 and d[0][\"kind\"] == \"error\" and \"cannot open no/such/file.cf\" in d[0][\"message\"]
assert d[0][\"locations\"] == []' '$t/nofile.json'"
check "cli: --emit=sched lists the steps of 2 ranks, --sched-ranks=all of every rank" sh -c \
	"[ \$('$CFC' examples/mlp.cf --emit=sched | grep -c '^    rank [0-9]*:\$') -eq 4 ] &&
	 [ \$('$CFC' examples/mlp.cf --emit=sched --sched-ranks=all | grep -c '^    rank [0-9]*:\$') -eq 8 ] &&
	 '$CFC' examples/mlp.cf --emit=sched --sched-ranks=all | grep -q '^    rank 3:\$'"
"$CFC" examples/mlp.cf --sched-ranks=0 2>/dev/null; rc=$?
check "cli: --sched-ranks=0 is a usage error" [ $rc -eq 2 ]
# graphviz's cairo plugin scales a PNG past its bitmap limit and says so
# on stderr by itself: cfc turns that into a note that suggests SVG. The
# picture bounds a large group or a deep repeat stack and draws alike
# collectives in a row once (sched_dot.c), so a tall one takes many
# distinct collectives: 40 all_gathers, the i-th with i gelus fused in its
# steps (a box of i lines).
{
	echo "model big { size S = 64, D = 64; group sp = 2; type f32;"
	i=1
	while [ $i -le 40 ]; do
		echo "  in x$i : [S, D] split S over sp;"
		i=$((i + 1))
	done
	outs=
	i=1
	while [ $i -le 40 ]; do
		echo "  g$i = all_gather(x$i, S);"
		prev=g$i
		j=1
		while [ $j -le $i ]; do
			echo "  h${i}_$j = gelu($prev);"
			prev=h${i}_$j
			j=$((j + 1))
		done
		outs="$outs${outs:+, }$prev"
		i=$((i + 1))
	done
	echo "  out $outs; }"
} >"$t/big.cf"
"$CFC" "$t/big.cf" --schedule='fuse(ring, m = 4)' --emit=png -o "$t/big.png" 2>"$t/big.err"; rc=$?
check "cli: a PNG past cairo's limit is a note that suggests --emit=svg" sh -c \
	"[ $rc -eq 0 ] && grep -q '^cfc: note: .*scaled it down by .*--emit=svg' '$t/big.err' &&
	 ! grep -q 'cairo-renderer' '$t/big.err'"
# a terminal for standard output (script(1), util-linux): no PNG bytes there
script -qec "'$CFC' examples/mlp.cf --emit=png" /dev/null >"$t/png.tty" 2>&1; rc=$?
check "cli: --emit=png refuses a terminal" sh -c "[ $rc -eq 2 ] && grep -q 'give -o FILE' '$t/png.tty'"
check "cli: --emit=png to a pipe is a PNG" sh -c "'$CFC' examples/mlp.cf --emit=png | head -c 4 | grep -q PNG"
"$CFC" --bogus >/dev/null 2>"$t/usage.err"; rc=$?
check "cli: unknown option exits 2" [ $rc -eq 2 ]
check "cli: unknown option says so" grep -q "unknown option '--bogus'" "$t/usage.err"
"$CFC" >/dev/null 2>&1; rc=$?
check "cli: no input exits 2" [ $rc -eq 2 ]
"$CFC" examples/mlp.cf --emit=nonsense >/dev/null 2>&1; rc=$?
check "cli: unknown emit kind exits 2" [ $rc -eq 2 ]
"$CFC" examples/mlp.cf --emit=graph,dot >/dev/null 2>&1; rc=$?
check "cli: several kinds need -o DIR" [ $rc -eq 2 ]
"$CFC" examples/mlp.cf --emit=c -o '' 2>"$t/empty_o.err"; rc=$?
check "cli: an empty -o is a usage error" sh -c "[ $rc -eq 2 ] && grep -q -- '-o needs an argument' '$t/empty_o.err'"
"$CFC" no/such/file.cf 2>"$t/nofile.err"; rc=$?
check "cli: missing file exits 1" [ $rc -eq 1 ]
check "cli: missing file says why" grep -q "cannot open no/such/file.cf" "$t/nofile.err"

check "cli: checks every example" sh -c "for f in examples/*.cf; do '$CFC' \$f || exit 1; done"
printf 'model m {\n  size S = 8\n}\n' | "$CFC" - 2>"$t/stdin.err"; rc=$?
check "cli: stdin errors exit 1" [ $rc -eq 1 ]
check "cli: stdin is named <stdin>" grep -q '^<stdin>:2:' "$t/stdin.err"
check "cli: stdin compiles" sh -c "'$CFC' - --emit=graph <examples/mlp.cf | grep -q 'mlp'"

"$CFC" examples/mlp.cf --emit=graph -o "$t/a.graph"
"$CFC" examples/mlp.cf --emit=graph -o "$t/b.graph"
check "cli: output is deterministic" cmp -s "$t/a.graph" "$t/b.graph"
"$CFC" examples/mlp.cf --emit=graph -D S=256 -D tp=8 -o "$t/c.graph"
check "cli: -D overrides sizes and groups" sh -c "grep -q 'S=256' '$t/c.graph' && grep -q 'tp=8' '$t/c.graph'"
"$CFC" examples/mlp.cf -D NOPE=3 2>"$t/def.err"; rc=$?
check "cli: -D of an unknown name exits 1" [ $rc -eq 1 ]
check "cli: -D of an unknown name says so" grep -q "NOPE" "$t/def.err"
"$CFC" examples/mlp.cf -D S=abc 2>/dev/null; rc=$?
check "cli: -D with a bad value exits 2" [ $rc -eq 2 ]

"$CFC" examples/mlp.cf --emit=ast,graph,dot -o "$t/dir"
check "cli: -o DIR holds one file per kind" sh -c "test -s '$t/dir/mlp.ast' && test -s '$t/dir/mlp.graph' && test -s '$t/dir/mlp.dot'"

# -o DIR with one kind: DIR/MODEL.EXT; -o FILE: the C files name each
# other after FILE, whatever the model is called.
mkdir -p "$t/one"
"$CFC" examples/mlp.cf --emit=c -o "$t/one"
check "cli: -o DIR with one kind writes DIR/MODEL.c and its header" sh -c \
	"test -s '$t/one/mlp.c' && test -s '$t/one/mlp.h'"
"$CFC" examples/mlp.cf --emit=c,ref -o "$t/one/"
check "cli: -o DIR/ holds the reference too" test -s "$t/one/mlp_ref.c"
"$CFC" examples/mlp.cf --emit=c -o "$t/foo.c"
check "cli: -o foo.c: foo.c includes foo.h and its #line names foo.c" sh -c \
	"test -s '$t/foo.h' && grep -q '#include \"foo.h\"' '$t/foo.c' &&
	 grep -q '^#line [0-9]* \"foo.c\"' '$t/foo.c' && ! grep -q 'mlp\\.[ch]\"' '$t/foo.c'"
"$CFC" examples/mlp.cf --emit=ref -o "$t/bar_ref.c"
check "cli: -o bar_ref.c includes bar.h" grep -q '#include "bar.h"' "$t/bar_ref.c"

# A failed compile leaves an existing output untouched; a write that
# fails after its temporary file exists (renamed onto a directory), text
# or picture, leaves no temporary behind.
echo keep >"$t/keep.graph"
printf 'model m { size S = 0; }\n' >"$t/bad.cf"
"$CFC" "$t/bad.cf" --emit=graph -o "$t/keep.graph" 2>/dev/null; rc=$?
check "cli: failed compile exits 1" [ $rc -eq 1 ]
check "cli: failed compile keeps the old output" sh -c "[ \"\$(cat '$t/keep.graph')\" = keep ]"
mkdir -p "$t/isdir/mlp.graph" "$t/isdir/mlp.svg"
"$CFC" examples/mlp.cf --emit=graph -o "$t/isdir" 2>/dev/null; rc=$?
check "cli: failed write exits 1" [ $rc -eq 1 ]
"$CFC" examples/mlp.cf --emit=svg -o "$t/isdir" 2>/dev/null; rc=$?
check "cli: failed picture write exits 1" [ $rc -eq 1 ]
check "cli: no temporary files left" sh -c "! find '$t' -name '*.tmp??????' | grep -q ."
"$CFC" examples/mlp.cf --emit=graph -o "$t/no/such/dir/x.graph" 2>/dev/null; rc=$?
check "cli: unwritable output exits 1" [ $rc -eq 1 ]

# Pictures come from the layout and renderers linked into cfc: they work
# with an empty graphviz plugin directory, where `dot` itself cannot.
mkdir -p "$t/noplugins"
GVBINDIR="$ROOT/$t/noplugins" "$CFC" examples/mlp.cf --emit=png -o "$t/np.png" 2>"$t/np.err"
check "cli: pictures need no graphviz plugin configuration" sh -c \
	"head -c 8 '$t/np.png' | od -An -c | grep -q 'P   N   G'"
