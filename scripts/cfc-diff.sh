#!/bin/sh
# cfc-diff.sh OLD_CFC NEW_CFC [OUTDIR]: runs both compilers over every
# example, e2e and bench spec, under every schedule kind and several group
# sizes, for every text emit kind, the backward pass of the grad specs,
# and over every error input; prints each
# case whose output (stdout, stderr or exit status) differs, and a count.
# A refactoring that fixes no bug must print "0 differ".
set -u
old=$(realpath "$1") new=$(realpath "$2") out=${3:-/tmp/cfc-diff}
rm -rf "$out"
mkdir -p "$out/old" "$out/new"
n=0 bad=0 good=0
# run() shares the variables of the loops that call it: its own names
# (name, w, cfc, d, o) must be none of theirs.
run() { # name args...
	name=$1
	shift
	for w in old new; do
		eval cfc=\$$w
		d=$out/$w/$name
		mkdir -p "$d"
		(cd "$d" && "$cfc" "$@" >stdout 2>stderr; echo $? >status)
		for o in "$d"/*; do # outputs written with -o land in $d
			[ -f "$o" ] && sed -i "s|$d|DIR|g" "$o"
		done
	done
	n=$((n + 1))
	[ "$(cat "$out/new/$name/status")" = 0 ] && good=$((good + 1))
	if ! diff -r "$out/old/$name" "$out/new/$name" >/dev/null; then
		bad=$((bad + 1))
		echo "differs: $name: $*"
	fi
}
root=$(pwd)
kinds="vanilla slice(2) slice(4) fuse(ring) fuse(bidir) fuse(pairwise) fuse(ring,m=2) fuse(bidir,m=2) fuse(pairwise,m=3) fuse(ring,split=query) auto"
emits="graph,sched,sched-dot,c,ref,h,driver"
k=0
for f in examples/*.cf tests/e2e/*.cf bench/*.cf; do
	g=$(sed -n 's/^ *group \([a-z_]*\) *=.*/\1/p' "$f" | head -n 1)
	for N in 1 2 3 4 5 8; do
		for s in spec $kinds; do
			k=$((k + 1))
			set -- "$root/$f" -D "$g=$N" --emit=$emits -o .
			[ "$s" = spec ] || set -- "$@" "--schedule=$s"
			run "c$k" "$@"
		done
	done
	k=$((k + 1))
	run "c$k" "$root/$f" --explain
done
for f in examples/mlp.cf tests/grad/*.cf; do # the backward pass
	for s in spec vanilla "fuse(ring)" "fuse(bidir,m=2)"; do
		k=$((k + 1))
		set -- "$root/$f" --backward --emit=$emits -o .
		[ "$s" = spec ] || set -- "$@" "--schedule=$s"
		run "c$k" "$@"
	done
done
for f in tests/errors/*.cf; do
	k=$((k + 1))
	run "c$k" "$root/$f" --emit=c -o x.c
done
echo "$n cases ($good compile with the new cfc), $bad differ"
[ "$bad" -eq 0 ]
