#!/bin/sh
# fuzz.sh (make fuzz): FUZZ_TIME seconds (default 600) of
#   - afl-fuzz on cfc built with afl-cc under ASan and UBSan ($B/fuzz/cfc),
#     from examples/, tests/errors/, tests/e2e/, a few generated specs and
#     the AFL finds of tests/fuzz/regress/, with the dictionary
#     tests/fuzz/cf.dict. cfc runs as `cfc FILE --explain --emit=c -o -`;
#     a signal, a sanitizer report, exit 70 (AFL_CRASH_EXITCODE) or a run
#     past FUZZ_TMOUT ms is a find;
#   - alongside, the spec generator on fresh seeds (from FUZZ_SEED, default
#     the clock) through tests/gen/run.sh: a rejection, a crash, a failed
#     build or run, or a result off the reference is a find.
# Then every find goes to tests/fuzz/regress/, one file each: AFL finds
# minimized with afl-tmin (afl-<kind>-<hash>.cf), one per kind of problem;
# generator finds shrunk by tests/gen/reduce.py (gen-<seed>.cf, with the
# failure in a comment), one per kind of failure not already kept there
# (tests/fuzz/triage.py).
# tests/t-fuzz.sh replays them all in `make test`. Work files, the AFL
# output included: $B/fuzz/work (kept for a look; the next run clears it).
set -u
: "${B:=build}"
T=${FUZZ_TIME:-600}
TMOUT=${FUZZ_TMOUT:-5000}
F=$B/fuzz
W=$F/work
R=tests/fuzz/regress
CFC="$F/cfc"
ARGS="--explain --emit=c -o -"

sh scripts/install-deps.sh afl++ || exit 1
# afl-cc adds the instrumentation and, with these set, -fsanitize=address
# and -fsanitize=undefined (traps: a report is a crash afl-fuzz sees)
AFL_USE_ASAN=1 AFL_USE_UBSAN=1 AFL_QUIET=1 make --no-print-directory -j2 B="$F" \
	CC=afl-cc OPT="-O1 -g" "$F/cfc" >"$F.log" 2>&1 || { tail -n 20 "$F.log"; exit 1; }
make --no-print-directory "$B/cfc" "$B/libcfrt.a" >/dev/null || exit 1
SANCFC=$B/san/cfc
make --no-print-directory -j2 B="$B/san" SAN=address,undefined "$SANCFC" >"$F-san.log" 2>&1 ||
	{ tail -n 20 "$F-san.log"; exit 1; }

rm -rf "$W"
mkdir -p "$W/in" "$R"
cp examples/*.cf tests/errors/*.cf tests/e2e/*.cf "$W/in/"
python3 tests/gen/cfgen.py --seed 7000 --count 6 -o "$W/in"
for f in "$R"/afl-*; do [ -f "$f" ] && cp "$f" "$W/in/"; done

export ASAN_OPTIONS="abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:symbolize=0"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_CRASH_EXITCODE=70 AFL_NO_AFFINITY=1

# the generator, alongside
seed=${FUZZ_SEED:-$(($(date +%s) % 100000000 * 10))}
first=$seed
(
	end=$(($(date +%s) + T))
	s=$seed
	while [ "$(date +%s)" -lt "$end" ]; do
		python3 tests/gen/cfgen.py --seed "$s" -o "$W/gen" &&
			GEN_WORK="$W/genwork" B="$B" ASAN_OPTIONS= UBSAN_OPTIONS= \
				sh tests/gen/run.sh "$W/gen/gen_$s.cf" >>"$W/gen.log" 2>&1
		s=$((s + 1))
	done
) &
genpid=$!

echo "fuzz: afl-fuzz on $CFC for $T s; the generator from seed $first alongside"
afl-fuzz -i "$W/in" -o "$W/out" -x tests/fuzz/cf.dict -m none -t "$TMOUT" -V "$T" \
	-- "$CFC" @@ $ARGS >"$W/afl.log" 2>&1
rc=$?
wait $genpid
grep -E "^\[\+\] |^\[-\] " "$W/afl.log" | tail -n 3
[ $rc -eq 0 ] || { echo "fuzz: afl-fuzz exited $rc:"; tail -n 20 "$W/afl.log"; }
stats=$W/out/default/fuzzer_stats
[ -f "$stats" ] && grep -E "^(execs_done|corpus_count|saved_crashes|saved_hangs|bitmap_cvg) " "$stats"

# kind FILE: how cfc fails on FILE, empty when it does not: a replay with
# the plain sanitizer build ($B/san/cfc: messages, stacks, leaks), named
# by the sanitizer's error and the first frame in our code
kind() {
	timeout $((TMOUT / 1000 + 5)) env ASAN_OPTIONS=detect_leaks=1:symbolize=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$SANCFC" "$1" $ARGS >/dev/null 2>"$W/replay.err"
	r=$?
	at=$(sed -n 's/.* in \([A-Za-z_0-9]*\) .*\/\(compiler\|codegen\|grammar\)\/.*/\1/p' \
		"$W/replay.err" | head -n 1)
	if [ $r -eq 124 ]; then
		echo hang
	elif grep -q "ERROR: AddressSanitizer" "$W/replay.err"; then
		echo "asan-$(sed -n 's/.*ERROR: AddressSanitizer: \([a-z-]*\).*/\1/p' \
			"$W/replay.err" | head -n 1)-$at"
	elif grep -q "ERROR: LeakSanitizer" "$W/replay.err"; then
		echo "leak-$at"
	elif grep -q "runtime error:" "$W/replay.err"; then
		sed -n 's/^\([^ ]*\/\)*\([a-z_]*\)\.[cly]:\([0-9]*\):[0-9]*: runtime error.*/ubsan-\2-\3/p' \
			"$W/replay.err" | head -n 1
	elif [ $r -eq 70 ]; then
		echo "exit70-$(sed -n 's/.*internal error at \([a-z_]*\/\)*\([a-z_]*\).*/\2/p' \
			"$W/replay.err" | head -n 1)"
	elif [ $r -gt 2 ]; then
		echo "exit$r"
	fi
}

# AFL's crashes and hangs, then its whole queue (leaks and reports that
# did not stop the instrumented build, whose leak checks are off)
new=0
for f in "$W"/out/default/crashes/id:* "$W"/out/default/hangs/id:* "$W"/out/default/queue/id:*; do
	[ -f "$f" ] || continue
	k=$(kind "$f")
	case $f in
	*/queue/*) [ -n "$k" ] || continue ;;
	*) [ -n "$k" ] || { echo "fuzz: $(basename "$f") does not fail again: skipped"; continue; } ;;
	esac
	ls "$R"/afl-"$k"-* >/dev/null 2>&1 && continue
	h=""
	[ "$k" = hang ] && h=-H
	if afl-tmin $h -i "$f" -o "$W/min" -m none -t "$TMOUT" -- "$CFC" @@ $ARGS \
		>"$W/tmin.log" 2>&1 && [ "$(kind "$W/min")" = "$k" ]; then
		f=$W/min
	fi
	sum=$(cksum "$f" | cut -c1-8)
	cp "$f" "$R/afl-$k-$sum.cf"
	echo "fuzz: new AFL find $R/afl-$k-$sum.cf ($k)"
	new=$((new + 1))
done

ran=$(grep -c '^\(PASS\|FAIL\) ' "$W/gen.log" 2>/dev/null)
bad=$(grep -c '^FAIL ' "$W/gen.log" 2>/dev/null)
echo "fuzz: the generator ran ${ran:-0} specs (seeds $first..), ${bad:-0} failed"
grep '^FAIL ' "$W/gen.log" 2>/dev/null | sed 's/^/  /'
python3 tests/fuzz/triage.py "$W/gen.log" "$W/gen" "$R" --build "$B" \
	--time "${FUZZ_REDUCE_TIME:-300}" --max "${FUZZ_REDUCE_MAX:-3}"
echo "fuzz: $new new AFL finds; see $R and tests/fuzz/README.md"
