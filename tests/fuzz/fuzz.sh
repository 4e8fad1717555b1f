#!/bin/sh
# fuzz.sh (make fuzz): FUZZ_TIME seconds (default 600) of
#   - afl-fuzz on cfc built with afl-cc under ASan and UBSan ($B/fuzz/cfc),
#     from examples/, tests/errors/, tests/e2e/, a few generated specs and
#     the AFL finds of tests/fuzz/regress/, with the dictionary
#     tests/fuzz/cf.dict. cfc runs as `cfc FILE ARGS` for each command line
#     ARGS of tests/fuzz/modes in turn (the forward; --backward; several
#     --emit kinds into a directory), each for an equal share of the time;
#     a signal, a sanitizer report, exit 70 (AFL_CRASH_EXITCODE) or a run
#     past FUZZ_TMOUT ms is a find;
#   - alongside, the spec generator on fresh seeds (from FUZZ_SEED, default
#     the clock) through tests/gen/run.sh: a rejection, a crash, a failed
#     build or run, or a result off the reference is a find.
# Then every find goes to tests/fuzz/regress/, one file each: AFL finds
# minimized with afl-tmin (afl-m<mode>-<kind>-<hash>.cf: the line of
# tests/fuzz/modes it failed under), one per mode and kind of problem;
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
MODES=tests/fuzz/modes
nmodes=$(grep -cv '^#' "$MODES")
# mode I [DIR]: command line I of $MODES, its DIR made DIR (default $W/emit)
mode() { grep -v '^#' "$MODES" | sed -n "$1p" | sed "s|DIR|${2:-$W/emit}|"; }

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

per=$((T / nmodes))
[ "$per" -ge 1 ] || per=1
echo "fuzz: afl-fuzz on $CFC for $T s ($nmodes command lines, $per s each); the generator" \
	"from seed $first alongside"
m=1
while [ $m -le $nmodes ]; do
	echo "fuzz: mode $m: cfc FILE $(mode $m)"
	afl-fuzz -i "$W/in" -o "$W/out$m" -x tests/fuzz/cf.dict -m none -t "$TMOUT" -V "$per" \
		-- "$CFC" @@ $(mode $m) >"$W/afl$m.log" 2>&1
	rc=$?
	grep -E "^\[\+\] |^\[-\] " "$W/afl$m.log" | tail -n 3
	[ $rc -eq 0 ] || { echo "fuzz: afl-fuzz exited $rc:"; tail -n 20 "$W/afl$m.log"; }
	stats=$W/out$m/default/fuzzer_stats
	[ -f "$stats" ] && grep -E "^(execs_done|corpus_count|saved_crashes|saved_hangs|bitmap_cvg) " \
		"$stats"
	m=$((m + 1))
done
wait $genpid

# kind FILE M: how cfc fails on FILE under mode M, empty when it does
# not: a replay with the plain sanitizer build ($B/san/cfc: messages,
# stacks, leaks), named by the sanitizer's error and the first frame in
# our code
kind() {
	rm -rf "$W/replay"
	timeout $((TMOUT / 1000 + 5)) env ASAN_OPTIONS=detect_leaks=1:symbolize=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$SANCFC" "$1" $(mode "$2" "$W/replay") >/dev/null 2>"$W/replay.err"
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
m=1
while [ $m -le $nmodes ]; do
	o=$W/out$m/default
	for f in "$o"/crashes/id:* "$o"/hangs/id:* "$o"/queue/id:*; do
		[ -f "$f" ] || continue
		k=$(kind "$f" $m)
		case $f in
		*/queue/*) [ -n "$k" ] || continue ;;
		*) [ -n "$k" ] || { echo "fuzz: $(basename "$f") does not fail again: skipped"; continue; } ;;
		esac
		ls "$R"/afl-m$m-"$k"-* >/dev/null 2>&1 && continue
		h=""
		[ "$k" = hang ] && h=-H
		if afl-tmin $h -i "$f" -o "$W/min" -m none -t "$TMOUT" -- "$CFC" @@ $(mode $m) \
			>"$W/tmin.log" 2>&1 && [ "$(kind "$W/min" $m)" = "$k" ]; then
			f=$W/min
		fi
		sum=$(cksum "$f" | cut -c1-8)
		cp "$f" "$R/afl-m$m-$k-$sum.cf"
		echo "fuzz: new AFL find $R/afl-m$m-$k-$sum.cf ($k, mode $m)"
		new=$((new + 1))
	done
	m=$((m + 1))
done

ran=$(grep -c '^\(PASS\|FAIL\) ' "$W/gen.log" 2>/dev/null)
bad=$(grep -c '^FAIL ' "$W/gen.log" 2>/dev/null)
echo "fuzz: the generator ran ${ran:-0} specs (seeds $first..), ${bad:-0} failed"
grep '^FAIL ' "$W/gen.log" 2>/dev/null | sed 's/^/  /'
python3 tests/fuzz/triage.py "$W/gen.log" "$W/gen" "$R" --build "$B" \
	--time "${FUZZ_REDUCE_TIME:-300}" --max "${FUZZ_REDUCE_MAX:-3}"
echo "fuzz: $new new AFL finds; see $R and tests/fuzz/README.md"
