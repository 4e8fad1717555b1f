#!/bin/sh
# Runs every tests/t-*.sh (or those named as arguments) and counts the
# PASS/FAIL lines they print; a suite that cannot run here prints a
# "SKIP why" line, shown in the summary. Exits non-zero when anything
# failed. JOBS suites run at once (default: the number of cores, at most
# 4; JOBS=1 runs them one after the other): each is a program of its own
# with its own directory under $B/tests, and on 2 cores the slowest
# suite (t-e2e) no longer waits behind the others. A suite's lines are
# printed when it ends, in the order they end, with the seconds it took;
# the total is the sum. So that a long run is never silent, a line
# "-> NAME started (+S s, K of N)" is printed as each suite starts
# (QUIET=1 leaves those out).
: "${B:=build}"
: "${JOBS:=$(n=$(nproc 2>/dev/null || echo 1); [ "$n" -gt 4 ] && n=4; echo "$n")}"
export B CFC="$B/cfc"
skipped() { [ "$1" -eq 0 ] || echo ", $1 skipped"; }
log=$B/tests/log
mkdir -p "$log"
rm -rf "$log/claim" "$log"/*.count
mkdir "$log/claim"
scripts=${*:-tests/t-*.sh}
t_start=$(date +%s)
nsuites=$(echo $scripts | wc -w)
elapsed() { echo $(($(date +%s) - t_start)); }

# suite T NAME: runs suite T and prints its block in one write (a block
# of lines under PIPE_BUF does not interleave with another lane's);
# leaves its counts in $log/NAME.count
suite() {
	# each suite's mpiruns keep their Open MPI session directories apart
	# from the other lanes': Open MPI 4.1.4 fails a job whose mpirun
	# finds the shared /tmp/ompi.HOST.UID made by another between its
	# test and its mkdir ("orte_session_dir failed", t-e2e, 2026-11-28)
	ompi=$(mktemp -d "${TMPDIR:-/tmp}/cf-$2.XXXXXX")
	_s0=$(date +%s)
	[ "${QUIET:-0}" = 1 ] ||
		echo "-> $2 started (+$(elapsed) s, $(ls "$log/claim" | wc -l) of $nsuites)"
	OMPI_MCA_orte_tmpdir_base=$ompi sh "$1" >"$log/$2.out" 2>&1
	rc=$?
	rm -rf "$ompi"
	p=$(grep -c '^PASS ' "$log/$2.out")
	f=$(grep -c '^FAIL ' "$log/$2.out")
	k=$(grep -c '^SKIP ' "$log/$2.out")
	{
		echo "== $2"
		grep '^FAIL ' "$log/$2.out" | sed 's/^/   /'
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "   FAIL $2 exited $rc; the end of its log:"
			tail -n 20 "$log/$2.out" | sed 's/^/   | /'
			f=1
		fi
		grep '^SKIP ' "$log/$2.out" | sed 's/^SKIP /   skipped: /'
		echo "   $p passed, $f failed$(skipped "$k") ($(($(date +%s) - _s0)) s)"
	} >"$log/$2.block"
	cat "$log/$2.block"
	echo "$p $f $k" >"$log/$2.count"
}

# lane: takes the suites in turn; mkdir claims one atomically, so each
# runs once whatever the number of lanes
lane() {
	for t in $scripts; do
		name=$(basename "$t" .sh)
		mkdir "$log/claim/$name" 2>/dev/null || continue
		suite "$t" "$name"
	done
}

# ticker: every TICK seconds (60), a line for each suite still running,
# with its PASS lines so far
ticker() {
	while sleep "${TICK:-60}"; do
		for c in "$log"/claim/*; do
			[ -d "$c" ] || continue
			n=$(basename "$c")
			[ ! -f "$log/$n.count" ] && [ -f "$log/$n.out" ] || continue
			echo "   ... $n running, $(grep -c '^PASS ' "$log/$n.out") passed so far (+$(elapsed) s)"
		done
	done
}
tick=
[ "${QUIET:-0}" = 1 ] || { ticker & tick=$!; }
i=0 lanes=
while [ "$i" -lt "$JOBS" ]; do
	lane &
	lanes="$lanes $!"
	i=$((i + 1))
done
# shellcheck disable=SC2086 # the lanes' ids are words
wait $lanes
[ -z "$tick" ] || kill "$tick" 2>/dev/null
pass=0 fail=0 skip=0
for t in $scripts; do
	name=$(basename "$t" .sh)
	if [ -f "$log/$name.count" ]; then
		read -r p f k <"$log/$name.count"
	else
		echo "   FAIL $name did not run" && p=0 f=1 k=0
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + k))
done
echo "total: $pass passed, $fail failed$(skipped "$skip") in $(elapsed) s"
[ "$fail" -eq 0 ]
