#!/bin/sh
# A machine profile that cannot be trusted (runtime/profcheck.h):
#  - cfc --profile refuses a number outside its range at file:line:col
#    (ranks 1e20, a GEMM dimension of 2^63 - 1, a time of 1e300, ...),
#    writes no output, and reads a file of 200k points in bounded time
#    (more than PC_MAX_POINTS points of one kind are refused at the line
#    that crosses it);
#  - cfc --profile warns about points that are implausible or out of
#    order (a larger message far faster than a smaller one), names their
#    lines, and still compiles;
#  - cfrt-calibrate, with its test hook CFRT_CALIBRATE_SCALE scaling one
#    point's measured time, refuses to write a profile whose point stays
#    bad on every visit (saying which point and why, leaving no file) and
#    keeps one that was bad on its first visit only (visited again).
. tests/lib.sh
d=$B/tests/profile-check
rm -rf "$d"
mkdir -p "$d"
base=tests/fixtures/prof/2026-11-29-Xeon16-lease45-cpu-4ranks.prof

# refused NAME SED-SCRIPT WANT: the base profile edited by SED-SCRIPT is
# refused with exactly the first line WANT (after the file name), and no
# output file is written
refused() {
	sed "$2" "$base" >"$d/$1.prof"
	rm -f "$d/$1.c"
	"$CFC" examples/mlp.cf --profile="$d/$1.prof" --emit=c -o "$d/$1.c" >"$d/$1.err" 2>&1
	rc=$?
	first=$(head -n 1 "$d/$1.err")
	if [ "$rc" != 0 ] && [ "$first" = "$d/$1.prof:$3" ] && [ ! -e "$d/$1.c" ]; then
		pass "profile refused: $1"
	else
		fail "profile refused: $1 (exit $rc)"
		echo "want: $d/$1.prof:$3"
		cat "$d/$1.err"
	fi
}
refused ranks 's/^ranks .*/ranks 99999999999999999999/' \
	'5:7: error: ranks must be at most 4096, not 99999999999999999999'
refused ranks0 's/^ranks .*/ranks 0/' \
	'5:7: error: ranks must be a whole positive number, not '"'"'0'"'"''
refused gemm_m '8s/.*/gemm f32 9223372036854775807 32 32 7.62e-07/' \
	'8:10: error: m must be at most 2147483647, not 9223372036854775807'
refused gemm_k '8s/.*/gemm f32 32 32 9223372036854775807 7.62e-07/' \
	'8:16: error: k must be at most 2147483647, not 9223372036854775807'
refused gemm_time '8s/.*/gemm f32 32 32 32 1e300/' \
	'8:19: error: seconds must be at most 3600, not 1e300'
refused gemm_tiny '8s/.*/gemm f32 32 32 32 1e-300/' \
	'8:19: error: seconds must be at least 1e-10, not 1e-300'
refused p2p_bytes 's/^p2p 1 1024 .*/p2p 1 99999999999999999 1e-06/' \
	"$(grep -n '^p2p 1 1024 ' "$base" | cut -d: -f1):7: error: bytes must be at most 1099511627776, not 99999999999999999"
refused coll_time 's/^coll all_gather 1024 .*/coll all_gather 1024 1e300/' \
	"$(grep -n '^coll all_gather 1024 ' "$base" | cut -d: -f1):22: error: seconds must be at most 3600, not 1e300"
refused attn_rate 's/^attn f32 128 .*/attn f32 128 1e300/' \
	"$(grep -n '^attn f32 128 ' "$base" | cut -d: -f1):14: error: flop per second must be at most 1e+17, not 1e300"
refused op_rate 's/^op f32 gelu .*/op f32 gelu 1e300/' \
	"$(grep -n '^op f32 gelu ' "$base" | cut -d: -f1):13: error: bytes per second must be at most 1e+14, not 1e300"
refused slowdown 's/^slowdown 1.*/slowdown 1e300/' \
	"$(grep -n '^slowdown 1' "$base" | head -n 1 | cut -d: -f1):10: error: the slowdown factor must be at most 100, not 1e300"

# 200k GEMM points: refused at the 1025th of its kind, in bounded time
awk '$1 == "end" { exit } { print }' "$base" >"$d/big.prof"
awk 'BEGIN { for (i = 0; i < 200000; i++) printf "gemm f32 %d %d %d 1e-3\n", 100000 + i, 64, 64 }' >>"$d/big.prof"
echo end >>"$d/big.prof"
n0=$(grep -c '^gemm f32 ' "$base")
t0=$(date +%s)
"$CFC" examples/mlp.cf --profile="$d/big.prof" --explain >"$d/big.out" 2>"$d/big.err"
rc=$? t1=$(date +%s)
line=$(awk -v n=$((1024 - n0 + 1)) '$1 == "gemm" && $2 == "f32" && $3 >= 100000 && ++k == n { print NR; exit }' "$d/big.prof")
check "profile of 200k points refused at the line past 1024 in $((t1 - t0)) s" \
	sh -c "[ $rc != 0 ] && [ $((t1 - t0)) -le 10 ] && head -n 1 '$d/big.err' | grep -qx '$d/big.prof:$line:1: error: more than 1024 points of one kind: not a profile cfrt-calibrate writes (it writes at most 125)'"

# a profile of a busy machine: warned about, line by line, and compiled
l1=$(grep -n '^p2p 1 1024 ' "$base" | cut -d: -f1)
l4=$(grep -n '^p2p 1 4096 ' "$base" | cut -d: -f1)
sed -e 's/^p2p 1 1024 .*/p2p 1 1024 0.0919/' -e 's/^p2p 1 4096 .*/p2p 1 4096 2.3e-05/' "$base" >"$d/busy.prof"
"$CFC" examples/mlp.cf --profile="$d/busy.prof" --emit=c -o "$d/busy.c" >"$d/busy.out" 2>"$d/busy.err"
rc=$?
grep ': warning: ' "$d/busy.err" >"$d/busy.warn"
cat >"$d/busy.want" <<EOW
$d/busy.prof:$l1:1: warning: p2p 1 of 1024 bytes in 0.0919 s: slower than 20 ms plus 10 MB/s
$d/busy.prof:$l1:1: warning: p2p 1 of 1024 bytes in 0.0919 s, but 4096 bytes in 2.3e-05 s (line $l4): a larger message under half the time
EOW
check "profile of a busy machine: warnings name the points, exit 0, C written" \
	sh -c "[ $rc = 0 ] && [ -s '$d/busy.c' ] && [ \$(grep -c '^$d/busy.prof:$l1:1: warning: p2p 1 of 1024 bytes in 0.0919 s, but [0-9]* bytes in' '$d/busy.warn') -ge 1 ] && head -n 2 '$d/busy.warn' | diff - '$d/busy.want' >/dev/null && grep -q 'note: cfc prices with these points as they are' '$d/busy.err'"
# every profile of the tests' fixtures and of the latest runs: no warning
quiet=1
for p in tests/fixtures/prof/*.prof; do
	"$CFC" examples/mlp.cf --profile="$p" --emit=c -o "$d/q.c" 2>"$d/q.err" >/dev/null
	grep -q warning "$d/q.err" && { quiet=0; echo "$p:"; cat "$d/q.err"; }
done
check "the fixtures' profiles give no warning" [ "$quiet" = 1 ]

# cfrt-calibrate with a planted bad point
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
cal() { # NAME SCALE: calibrates --quick on 2 ranks with the hook
	rm -f "$d/$1.prof" "$d/$1.prof.tmp"
	CFRT_CALIBRATE_SCALE=$2 $MPIRUN -x CFRT_CALIBRATE_SCALE -n 2 "$B/cfrt-calibrate" --quick \
		--check=refuse -o "$d/$1.prof" >"$d/$1.out" 2>"$d/$1.log"
}
cal always 'p2p 1 1024=1e6'
rc=$?
check "cfrt-calibrate refuses a point slow on every visit: exit 1, no file, says which" \
	sh -c "[ $rc != 0 ] && [ ! -e '$d/always.prof' ] && [ ! -e '$d/always.prof.tmp' ] &&
		grep -q '^cfrt-calibrate: cannot trust p2p 1 1024 [0-9.e+-]*: slower than 100 ms plus 10 MB/s (visits: [0-9.e+ -]* s)\$' '$d/always.log' &&
		grep -q '^cfrt-calibrate: not writing $d/always.prof: [0-9]* points\{0,1\} could not be trusted' '$d/always.log'"
cal once 'p2p 1 1024=1e6@1'
rc=$?
v=$(sed -n 's/^p2p 1 1024 //p' "$d/once.prof" 2>/dev/null)
check "cfrt-calibrate visits a point bad once again and keeps the good visits" \
	sh -c "[ $rc = 0 ] && awk -v v='$v' 'BEGIN { exit !(v != \"\" && v + 0 <= 0.001) }' &&
		grep -q 'visiting again [0-9]* points\{0,1\} that disagree or look wrong' '$d/once.log' &&
		grep -q '^# p2p 1 1024: its visits disagree by' '$d/once.prof'"
cal gemm 'gemm f32 64 64 64=1e6'
rc=$?
check "cfrt-calibrate refuses an implausible GEMM rate" \
	sh -c "[ $rc != 0 ] && grep -q '^cfrt-calibrate: cannot trust gemm f32 64 64 64 [0-9.e+-]*: slower than 100 ms plus 1 Mflop/s' '$d/gemm.log'"
# --quick alone (the suites' calibrations, on machines others load) keeps
# an untrusted point, with a comment in the profile and a warning
rm -f "$d/warn.prof"
CFRT_CALIBRATE_SCALE='p2p 1 1024=1e6' $MPIRUN -x CFRT_CALIBRATE_SCALE -n 2 "$B/cfrt-calibrate" --quick \
	-o "$d/warn.prof" >"$d/warn.out" 2>"$d/warn.log"
rc=$?
check "cfrt-calibrate --quick writes an untrusted point with a comment and a warning" \
	sh -c "[ $rc = 0 ] && grep -q '^# cannot be trusted: p2p 1 1024 ' '$d/warn.prof' &&
		grep -q '^cfrt-calibrate: warning: kept, though it cannot be trusted: p2p 1 1024 ' '$d/warn.log'"
# progress lines: on stderr by default, none with --quiet
check "cfrt-calibrate says what it measures (progress on stderr)" \
	grep -q '^cfrt-calibrate: pass 1 of 1: [0-9]* points (+[0-9]* s)$' "$d/once.log"
$MPIRUN -n 2 "$B/cfrt-calibrate" --quick --quiet -o "$d/quiet.prof" >"$d/quiet.out" 2>"$d/quiet.log"
check "cfrt-calibrate --quiet: no progress lines" \
	sh -c "[ -s '$d/quiet.prof' ] && ! grep -q '^cfrt-calibrate: pass' '$d/quiet.log'"
