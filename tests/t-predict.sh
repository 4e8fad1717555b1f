#!/bin/sh
# The cost model end to end (the predictor's exact answers are CUnit's,
# tests/unit/test_predict.c):
#  - cfrt-calibrate --quick on 2 ranks writes a whole profile (every entry
#    kind, the end line) that cfc reads, and --emit=profile round-trips
#    it (written, read and written again: the same text, every point);
#    --passes 2 writes the same entries, --passes 0 and 16 are refused;
#  - cfc --profile --explain predicts every candidate of every collective
#    of every example (forward and backward) and auto marks one of each;
#    it leaves out those whose slices do not fit the region it found;
#  - --emit=gantt is SVG with bars, and needs --profile;
#  - a malformed profile is refused with file:line:col, also as JSON;
#  - bench-gpu's report takes each row's median over its rounds; make
#    bench's keeps a schedule named with a comma whole, and its mix rows
#    (schedules interleaved in one job) run each build's own code and
#    report their median; bench/replay.py predicts a saved run's rows
#    again as cfc does.
. tests/lib.sh
out=$B/tests/predict
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
export OMPI_MCA_btl_vader_single_copy_mechanism OPENBLAS_NUM_THREADS=1
prof=$out/q.prof
# gpu_spec CASE: bench-gpu's spec of case CASE (its spec() in bench/gpu/bench.sh)
gpu_spec() { sed -n "s/^\t$1) echo \"\(.*\)\" ;;\$/\1/p" bench/gpu/bench.sh; }
# bench_report NAME: bench/report.awk over $out/NAME-runs.txt, with the
# predictions in $out/NAME-pred.txt, into $out/NAME.csv, and
# bench/summary.awk over that into $out/NAME-summary.txt
bench_report() {
	awk -F'|' -v ranks=2 -v pred="$out/$1-pred.txt" -f bench/stats.awk -f bench/report.awk \
		"$out/$1-runs.txt" >"$out/$1.csv"
	awk -F, -f bench/stats.awk -f bench/summary.awk "$out/$1.csv" >"$out/$1-summary.txt"
}

if mpirun --oversubscribe --timeout 120 -n 2 "$B/cfrt-calibrate" --quick -o "$prof" \
	>"$out/cal.log" 2>&1; then
	pass "cfrt-calibrate --quick on 2 ranks"
else
	fail "cfrt-calibrate --quick on 2 ranks"
	cat "$out/cal.log"
fi
for e in "cfprofile 1" "backend mpi+openblas" "ranks 2" "gemm f32 " "gemm f64 " "ew f32 " \
	"attn f64 " "p2p 1 " "p2p 2 " "p2p 4 " "coll all_gather " "coll reduce_scatter " \
	"coll all_reduce " "coll all_to_all " "slowdown " "slowdown 4 " "op f32 split_heads " \
	"op f32 merge_heads " "overlap " "overlap_coll all_gather " \
	"overlap_coll reduce_scatter " "overlap_coll all_reduce " "overlap_coll all_to_all " "end"; do
	check "calibrated profile has '$e'" grep -q "^$e" "$prof"
done
# each overlap is what the model reads from its probe (the comment before
# it), as bench/replay.py's probe_overlap reads it (whose rule the lease
# 45 checks below hold to figures worked by hand). The ring's: the
# transfer time moved per second of the GEMM under it, (alone - wait) /
# GEMM, or 1 where the wait was under 5% of the time alone. A library
# collective's on CPUs: its time alone less what it added to the GEMM
# alone (the comment's "more than the GEMM alone", at least 0), over the
# GEMM alone's time; on GPUs as the ring's.
check "calibrated overlaps: the ring's moved time over its GEMM's, the collectives' what they added" python3 -c '
import sys
sys.path.insert(0, "bench")
import replay
q = replay.probe_overlap(sys.argv[1])
assert q != sys.argv[1], "no probe lines"
ov = lambda f: [l.split() for l in open(f) if l.startswith("overlap")]
got, want = ov(sys.argv[1]), ov(q)
assert len(got) == 5 and [g[:-1] for g in got] == [w[:-1] for w in want], (got, want)
for g, w in zip(got, want):
    assert abs(float(g[-1]) - float(w[-1])) <= 1e-3 * max(float(w[-1]), 1e-3), (g, w)
lines = open(sys.argv[1]).read().split("\n")
assert any(" s more than the GEMM alone" in l for l in lines if l.startswith("# all_gather of")), lines
' "$prof"

# --passes visits every point again: the same entries, the header says so
keys() { grep -v '^#' "$1" | awk '{NF--; print}'; }
if mpirun --oversubscribe --timeout 120 -n 2 "$B/cfrt-calibrate" --quick --passes 2 \
	-o "$out/p2.prof" >"$out/cal2.log" 2>&1 && [ "$(keys "$prof")" = "$(keys "$out/p2.prof")" ] &&
	grep -q '^# written by .*, the median of 2 passes$' "$out/p2.prof"; then
	pass "cfrt-calibrate --passes 2: the same entries"
else
	fail "cfrt-calibrate --passes 2: the same entries"
	cat "$out/cal2.log"
fi
for n in 0 16; do
	mpirun --oversubscribe --timeout 120 -n 2 "$B/cfrt-calibrate" --passes $n \
		-o "$out/p$n.prof" >"$out/cal$n.log" 2>&1
	check "cfrt-calibrate --passes $n: usage, no profile" \
		sh -c "grep -q '^usage: ' '$out/cal$n.log' && test ! -e '$out/p$n.prof'"
done

# --type: the compute of those types only, the rest as before; a type
# that is none is refused
if mpirun --oversubscribe --timeout 120 -n 2 "$B/cfrt-calibrate" --quick --type f64 \
	-o "$out/t64.prof" >"$out/calt.log" 2>&1 && grep -q '^gemm f64 ' "$out/t64.prof" &&
	! grep -q '^gemm f32 \|^ew f32 \|^attn f32 ' "$out/t64.prof" &&
	grep -q '^p2p 2 ' "$out/t64.prof" && grep -q '^slowdown ' "$out/t64.prof" &&
	grep -q '^# a 64x64x64 GEMM' "$out/t64.prof"; then
	pass "cfrt-calibrate --type f64: f64 compute only, transfers and slowdown kept"
else
	fail "cfrt-calibrate --type f64: f64 compute only, transfers and slowdown kept"
	cat "$out/calt.log"
fi
mpirun --oversubscribe --timeout 120 -n 2 "$B/cfrt-calibrate" --quick --type f64,f99 \
	-o "$out/t99.prof" >"$out/cal99.log" 2>&1
check "cfrt-calibrate --type f64,f99: usage, no profile" \
	sh -c "grep -q '^usage: ' '$out/cal99.log' && test ! -e '$out/t99.prof'"

# round trip: cfc's reading of it, written, read and written again
data() { grep -v '^#' "$1" | grep -vc '^$'; }
"$CFC" examples/mlp.cf --profile="$prof" --emit=profile -o "$out/r1.prof" &&
	"$CFC" examples/mlp.cf --profile="$out/r1.prof" --emit=profile -o "$out/r2.prof"
check "profile round-trips (written twice: the same)" cmp "$out/r1.prof" "$out/r2.prof"
check "profile round-trips (every entry kept)" test "$(data "$prof")" = "$(data "$out/r1.prof")"
# a GPU profile, with its clock table and the point at 1 (busy all the time)
gp=tests/fixtures/prof/2026-11-28-NVIDIA-H100-lease24-throttled-tp4-nccl.prof
"$CFC" bench/rs_gemm.cf --profile="$gp" --emit=profile -o "$out/g1.prof"
check "a GPU profile with 'clock 1' round-trips (every entry kept)" sh -c \
	"test $(data "$gp") = $(data "$out/g1.prof") && grep -q '^clock 1 2.04\$' '$out/g1.prof' &&
	 test \$(grep -c '^clock ' '$out/g1.prof') = 4"

# a 2-GPU NCCL profile with 'defer' (lease 69): kept through cfc, said
# by --explain, and it moves the prediction (without it: lease 69's old
# reading, overlap and slowdown)
dp=tests/fixtures/prof/2026-11-30-NVIDIA-H200-lease69-tp2-nccl.prof
"$CFC" bench/rs_gemm.cf --profile="$dp" --emit=profile -o "$out/d1.prof"
check "a GPU profile with 'defer' round-trips (every entry kept)" sh -c \
	"test $(data "$dp") = $(data "$out/d1.prof") &&
	 awk '/^defer /{ n++; ok = \$2 == 0.9188 && \$3 == 1.213 } END { exit !(n == 1 && ok) }' '$out/d1.prof'"
grep -v '^defer ' "$dp" >"$out/nodefer.prof"
a69="$(gpu_spec a) -D tp=2 --type=bf16 --schedule=fuse(ring) --explain"
"$CFC" $a69 --profile="$dp" >"$out/defer.explain" 2>&1
"$CFC" $a69 --profile="$out/nodefer.prof" >"$out/nodefer.explain" 2>&1
check "--explain says the profile's defer, and only with it" sh -c \
	"grep -q -F 'then moves at overlap 0.9188, slowing compute 1.213 times' '$out/defer.explain' &&
	 ! grep -q -F \"the profile's defer\" '$out/nodefer.explain'"
check "defer moves case a's fuse(ring) prediction (lease 69: 14.1666 ms with it, 14.4255 without)" sh -c \
	"grep -q '^pass: predicted 14.1666 ms' '$out/defer.explain' &&
	 grep -q '^pass: predicted 14.4255 ms' '$out/nodefer.explain'"

# every candidate of every collective predicted; auto marks one of each
for ex in $(ls examples/*.cf | xargs -n1 basename | sed "s/\.cf$//"); do
	if "$CFC" "examples/$ex.cf" --backward --profile="$prof" --schedule=auto --explain \
		>"$out/$ex.explain" 2>"$out/$ex.err"; then
		colls=$(grep -c '^examples/' "$out/$ex.explain")
		marks=$(grep -c '<- auto: the' "$out/$ex.explain")
		tables=$(grep -c '^  predicted on ' "$out/$ex.explain")
		none=$(grep -c 'not predicted' "$out/$ex.explain")
		passes=$(grep -c 'pass: predicted [0-9.]* ms' "$out/$ex.explain")
		if [ "$colls" -gt 0 ] && [ "$marks" = "$colls" ] && [ "$tables" = "$colls" ] &&
			[ "$none" = 0 ] && [ "$passes" = 2 ]; then
			pass "auto on a calibrated profile: $ex ($colls collectives)"
		else
			fail "auto on a calibrated profile: $ex (collectives $colls, tables $tables, auto marks $marks, unpredicted $none, pass lines $passes)"
			head -n 20 "$out/$ex.explain" "$out/$ex.err"
		fi
	else
		fail "auto on a calibrated profile: $ex (cfc failed)"
		cat "$out/$ex.err"
	fi
done

# auto leaves out the candidates whose slices do not fit the region it
# found: this all_reduce's region cuts A (3, by the 3 ranks of a ring),
# which slice(2)'s 2 chunks do not divide (cfc died there)
cat >"$out/ar.cf" <<'EOF'
model ar {
  size A = 3, Z = 2, D = 6;
  group tp = 3;
  type f32;
  in x : [A, Z, D] split D over tp;
  weight w : [D, D] split 0 over tp;
  y = all_reduce(x @ w);
  out y;
}
EOF
"$CFC" "$out/ar.cf" --profile="$prof" --schedule=auto --explain >"$out/ar.explain" 2>"$out/ar.err"
rc=$?
check "auto on a profile leaves out candidates whose slices do not fit its region" sh -c \
	"[ $rc = 0 ] && grep -q '^    fuse(ring) ' '$out/ar.explain' &&
	 ! grep -q '^    slice(2) ' '$out/ar.explain' &&
	 [ \$(grep -c '<- auto: the' '$out/ar.explain') = 1 ]"

# --auto-margin: what auto gives away. On lease 66's 2-H200 NCCL profile
# bench-gpu's case d prices slice(4) 1.6% over fuse(ring, m = 2) (the
# first of the fastest) and vanilla 4.9% over it: 2% takes slice(4), 0
# (a GPU profile's default) the fastest, 10 vanilla; each says the
# margin it spent
gp66=tests/fixtures/prof/2026-11-29-NVIDIA-H200-lease66-tp2-nccl.prof
d="$(gpu_spec d) -D tp=2 --type=bf16 --profile=$gp66"
while IFS='|' read -r arg want pct mark; do
	"$CFC" $d --schedule=auto $arg --explain >"$out/margin.explain" 2>&1
	rc=$?
	[ -n "$mark" ] || mark="<- auto: the simplest within what is left of $pct% of the pass"
	check "${arg:-no --auto-margin}: auto takes $want on case d's GPU profile" sh -c \
		"[ $rc = 0 ] && grep -q -F '; auto: $want, predicted ' '$out/margin.explain' &&
		 [ \$(grep -c -F '$mark' '$out/margin.explain') = 1 ]"
done <<'EOF'
|fuse(ring,m=2)|0|<- auto: the fastest
--auto-margin=2%|slice(4)|2|
--auto-margin=0|fuse(ring,m=2)|0|<- auto: the fastest
--auto-margin=10|vanilla|10|
--auto-margin=1.7|slice(4)|1.7|
--auto-margin=1.2|fuse(ring,m=2)|1.2|<- auto: the fastest
EOF
# a CPU profile's default is 2%: on the 8 Xeon ranks of lease 66 the MLP
# and its backward give some of it away (as --auto-margin=2 does), and
# nothing at 0
xp66=tests/fixtures/prof/2026-11-29-Xeon32-lease66-65fa3ef-cpu-8ranks.prof
for arg in "" --auto-margin=2 --auto-margin=0; do
	f=$out/cpu-margin${arg#--auto-margin=}.explain
	"$CFC" examples/mlp.cf --backward --profile="$xp66" --schedule=auto $arg --explain \
		>"$f" 2>&1 || echo "exit $?" >>"$f"
done
check "no --auto-margin on a CPU profile: auto spends 2% of the pass, as --auto-margin=2 does" sh -c \
	"grep -q -F '<- auto: the simplest within what is left of 2% of the pass' '$out/cpu-margin.explain' &&
	 cmp -s '$out/cpu-margin.explain' '$out/cpu-margin2.explain' &&
	 ! grep -q 'simplest within' '$out/cpu-margin0.explain'"
# at 0 every collective of every example takes its fastest candidate
zero=0
for ex in $(ls examples/*.cf | xargs -n1 basename | sed "s/\.cf$//"); do
	"$CFC" "examples/$ex.cf" --backward --profile="$prof" --schedule=auto --auto-margin=0 \
		--explain >"$out/$ex.m0.explain" 2>&1 || zero=1
	[ "$(grep -c '<- auto: the fastest' "$out/$ex.m0.explain")" = \
	  "$(grep -c '^examples/' "$out/$ex.m0.explain")" ] || zero=1
	! grep -q 'simplest within' "$out/$ex.m0.explain" || zero=1
done
check "--auto-margin=0: auto takes the fastest candidate everywhere (every example, backward too)" \
	test "$zero" = 0
for bad in -1 abc 101 nan 1e999 '' 2%% 3x; do
	"$CFC" examples/mlp.cf --profile="$prof" --schedule=auto --auto-margin="$bad" \
		-o "$out/never.c" 2>"$out/margin.err"
	rc=$?
	check "--auto-margin='$bad' refused (exit 2, the value named, nothing written)" sh -c \
		"[ $rc = 2 ] && grep -q -F \"cfc: --auto-margin wants a percent of the pass from 0 to 100, not '$bad'\" '$out/margin.err' &&
		 [ ! -e '$out/never.c' ]"
done
"$CFC" examples/mlp.cf --schedule=auto --auto-margin=1 -o "$out/never.c" 2>"$out/margin.err"
rc=$?
check "--auto-margin without --profile refused (exit 2)" sh -c \
	"[ $rc = 2 ] && grep -q 'cfc: --auto-margin is what auto gives away on predictions: give --profile=FILE' '$out/margin.err' &&
	 [ ! -e '$out/never.c' ]"

# an f32 model on a profile of bf16 compute only (bench-gpu's): every
# candidate unpredicted, saying which rate is missing and how to measure
# it, and auto keeps its rule
bp=tests/fixtures/prof/2026-11-28-NVIDIA-H200-lease37-tp2-nccl.prof
"$CFC" examples/mlp.cf --profile="$bp" --schedule=auto --explain >"$out/bf16.explain" 2>&1
rc=$?
check "an f32 model on a bf16 profile: not predicted, the rate named, auto keeps its rule" sh -c \
	"[ $rc = 0 ] && [ \$(grep -c '^    [a-z].* not predicted: the profile $bp has no [a-z]* rate for f32 (cfrt-calibrate --type f32 measures it)\$' '$out/bf16.explain') = 18 ] &&
	 grep -q '^pass: not predicted: ' '$out/bf16.explain' &&
	 [ \$(grep -c '(asked auto) .*; auto: fuse(ring), [0-9] ops* to hide the transfers under' '$out/bf16.explain') = 2 ]"

# the timeline
"$CFC" examples/mlp.cf --backward --profile="$prof" --emit=gantt -o "$out/mlp.gantt.svg"
check "--emit=gantt is SVG with bars per rank" python3 -c '
import sys, xml.etree.ElementTree as E
t = E.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
bars = [r for r in t.iter(ns + "rect") if r.find(ns + "title") is not None]
rows = {r.get("y") for r in bars}
sys.exit(not (len(bars) > 20 and len(rows) >= 4 * 3 - 1))' "$out/mlp.gantt.svg"
"$CFC" examples/mlp.cf --emit=gantt >"$out/nog.out" 2>"$out/nog.err"
rc=$?
check "--emit=gantt without --profile: usage error" sh -c \
	"[ $rc = 2 ] && grep -q 'give --profile=FILE' '$out/nog.err'"

# a malformed profile
printf 'cfprofile 1\nbackend x\nranks 2\ngemm f32 64 64 sixty 1e-3\nend\n' >"$out/bad.prof"
"$CFC" examples/mlp.cf --profile="$out/bad.prof" >/dev/null 2>"$out/bad.err"
rc=$?
check "malformed profile refused with file:line:col" sh -c \
	"[ $rc = 1 ] && grep -q '^$out/bad.prof:4:16: error: k must be a whole positive number' '$out/bad.err'"
"$CFC" examples/mlp.cf --profile="$out/bad.prof" -fdiagnostics-format=json >/dev/null \
	2>"$out/bad.json"
check "malformed profile as one JSON log" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = d[0]["locations"][0]["caret"]
sys.exit(not (len(d) == 1 and c["file"].endswith("bad.prof") and c["line"] == 4))' "$out/bad.json"
printf 'cfprofile 1\nbackend x\nranks 2\n' >"$out/cut.prof"
"$CFC" examples/mlp.cf --profile="$out/cut.prof" >/dev/null 2>"$out/cut.err"
check "truncated profile refused" grep -q "cut.prof:3:1: error: truncated" "$out/cut.err"

# bench-gpu's table (bench/gpu/report.py) over rounds: each row's median
# and the spread of its rounds, a row that failed in a round no time,
# pred_err against the median
cat >"$out/runs.txt" <<'RUNS'
calibrated tp=4 transfer=nccl in 30.9 s (mpirun included)
run case=a tp=4 schedule=vanilla transfer=nccl ms=9.0 round=0 at=1
run case=a tp=4 schedule=vanilla transfer=none ms=6.0 round=0 at=2
run case=a tp=4 schedule=fuse(ring) transfer=nccl ms=12.0 round=0 at=3
run case=a tp=4 schedule=fuse(ring) transfer=nccl ms=10.0 round=1 at=4
run case=a tp=4 schedule=vanilla transfer=none ms=8.0 round=1 at=5
run case=a tp=4 schedule=vanilla transfer=nccl ms=fail round=1 at=6
run case=a tp=4 schedule=vanilla transfer=nccl ms=9.5 round=2 at=7
run case=a tp=4 schedule=vanilla transfer=none ms=6.5 round=2 at=8
run case=a tp=4 schedule=fuse(ring) transfer=nccl ms=11.0 round=2 at=9
RUNS
echo "predict case=a tp=4 schedule=fuse(ring) transfer=nccl ms=12.1" >"$out/pred.txt"
: >"$out/torch.jsonl"
mkdir -p "$out/rep"
python3 bench/gpu/report.py --runs "$out/runs.txt" --predicted "$out/pred.txt" \
	--torch "$out/torch.jsonl" --device T --results "$out/rep" >"$out/rep.log" 2>&1
check "bench-gpu report: the median of each row's rounds, their spread; a failed round no time" \
	python3 -c '
import csv, glob, sys
rows = {(r["schedule"], r["transfer"]): r for r in csv.DictReader(open(glob.glob(sys.argv[1] + "/*-T.csv")[0]))}
ring, none = rows["fuse(ring)", "nccl"], rows["vanilla", "none"]
assert float(ring["ms"]) == 11 and abs(float(ring["spread"]) - 0.2) < 1e-9, ring
assert abs(float(ring["pred_err"]) - 0.1) < 1e-9, ring
assert float(none["ms"]) == 6.5 and abs(float(none["spread"]) - 1 / 3) < 1e-3, none
assert ("vanilla", "nccl") not in rows, rows
md = open(glob.glob(sys.argv[1] + "/*-T.md")[0]).read()
assert "the median of 3 rounds" in md and "| 11.000 | 20.0% |" in md, md
' "$out/rep"
# make bench's table (bench/report.awk) and the cost model's record
# (bench/summary.awk) over 3 rounds, each with a mix launch: time_ms the
# fastest round, median_ms the median, the prediction and auto's regret
# against both
cat >"$out/cpu-runs.txt" <<'RUNS'
m,vanilla,none,comm|10.0|10.0|1e-7|0.00
m,fuse(ring),none,comm|8.0|8.0|1e-7|0.00
m,auto,none,comm|9.0|9.0|1e-7|0.00
m,vanilla,none,comm|14.0|14.0|1e-7|0.00
m,fuse(ring),none,comm|12.0|12.0|1e-7|0.00
m,auto,none,comm|11.0|11.0|1e-7|0.00
m,vanilla,none,comm|12.0|12.0|1e-7|0.00
m,fuse(ring),none,comm|9.0|9.0|1e-7|0.00
m,auto,none,comm|10.0|10.0|1e-7|0.00
m,vanilla,none,mix|11.0|11.0|1e-7|0.00
m,fuse(ring),none,mix|12.0|12.0|3e-7|0.00
m,auto,none,mix|10.0|10.0|1e-7|0.00
m,vanilla,none,mix|13.0|13.0|1e-7|0.00
m,fuse(ring),none,mix|10.0|10.0|1e-7|0.00
m,auto,none,mix|10.5|10.5|1e-7|0.00
m,vanilla,none,mix|12.0|12.0|1e-7|0.00
m,fuse(ring),none,mix|11.0|11.0|1e-7|0.00
m,auto,none,mix|12.0|12.0|1e-7|0.00
RUNS
printf 'm,vanilla,none|11.0|-\nm,fuse(ring),none|10.0|-\n' >"$out/cpu-pred.txt"
bench_report cpu
check "bench report: the fastest and the median of the rounds, the prediction against each" \
	python3 -c '
import csv, sys
rows = {r["variant"]: r for r in csv.DictReader(open(sys.argv[1]))}
v, f = rows["vanilla"], rows["fuse(ring)"]
assert (v["time_ms"], v["median_ms"], v["spread"]) == ("10.0", "12.0", "0.400"), v
assert (v["pred_err"], v["pred_err_median"]) == ("0.100", "-0.083"), v
assert (f["time_ms"], f["median_ms"], f["pred_err"], f["pred_err_median"]) == \
       ("8.0", "9.0", "0.250", "0.111"), f
s = open(sys.argv[2]).read()
for want in ("|error| over 2 schedule rows: median 17.5%, worst 25.0% (m fuse(ring)), within 15%: 1",
             "auto: m 9.0 ms, the fastest schedule fuse(ring) 8.0 ms: regret +12.5%; vanilla 10.0 ms (-10.0%)",
             "against the median of each row\x27s rounds: |error| median 9.7%, worst 11.1% (m fuse(ring)), within 15%: 2",
             "auto (medians): m 10.0 ms, the fastest schedule fuse(ring) 9.0 ms: regret +11.1%; vanilla 12.0 ms (-16.7%)"):
    assert want in s, (want, s)
' "$out/cpu.csv" "$out/cpu-summary.txt"
# the same table's mix rows: mix_ms the median of the mix rounds, the
# prediction and auto's regret against it; and each launch's rows against
# its fastest and its vanilla (auto in launch 2 behind fuse(ring), though
# its median is ahead of fuse(ring)'s); the row's largest checked error
check "bench report: mix rows, their median, the prediction and auto against them; a row's largest error" python3 -c '
import csv, sys
rows = {r["variant"]: r for r in csv.DictReader(open(sys.argv[1]))}
v, f = rows["vanilla"], rows["fuse(ring)"]
assert (v["time_ms"], v["mix_ms"], v["pred_err_mix"]) == ("10.0", "12.0", "-0.083"), v
assert (f["time_ms"], f["mix_ms"], f["pred_err_mix"], f["max_rel_err"]) == \
       ("8.0", "11.0", "-0.091", "3e-7"), f
a = rows["auto"]
assert (a["mix_ms"], a["mix_vs_best"], a["mix_vs_vanilla"]) == ("10.5", "0.050", "-0.091"), a
assert (f["mix_vs_best"], v["mix_vs_vanilla"]) == ("0.000", "0.000"), (f, v)
s = open(sys.argv[2]).read()
for want in ("interleaved in one job (mix): |error| median 8.7%, worst 9.1% (m fuse(ring)), within 15%: 2",
             "auto (mix): m 10.5 ms, the fastest schedule fuse(ring) 11.0 ms: regret -4.5%; vanilla 12.0 ms (-12.5%)",
             "auto (mix, launch by launch): m: regret +5.0%; against vanilla -9.1%"):
    assert want in s, (want, s)
' "$out/cpu.csv" "$out/cpu-summary.txt"
# auto against each schedule round by round in the mix (bench/paired.awk):
# model m over two launches of three rounds, against vanilla 0.9, 0.9,
# 0.9, 0.95, 1.0, 1.05 (median 0.925) and fuse(ring) 1.125, 1.0, 0.9,
# 1.0556, 1.1, 0.9545 (median 1.0278, the least favourable); n's only
# other schedule is vanilla; o has no auto; p's fuse(bidir) ran in one
# launch of auto's two, so it is not paired
cat >"$out/passes.txt" <<'PASSES'
m|1|vanilla|10,10,10
m|1|fuse(ring)|8,9,10
m|1|auto|9,9,9
m|2|vanilla|20,22,20
m|2|fuse(ring)|18,20,22
m|2|auto|19,22,21
n|1|vanilla|10,10
n|1|auto|11,9
o|1|vanilla|10
o|1|fuse(ring)|9
p|1|vanilla|10
p|1|fuse(bidir)|1
p|1|auto|11
p|2|vanilla|10
p|2|auto|12
PASSES
awk -F'|' -f bench/stats.awk -f bench/paired.awk "$out/passes.txt" >"$out/paired.txt"
cat >"$out/paired.want" <<'WANT'
auto (mix, pass by pass): m: against vanilla -7.5% (slower in 1 of 6); the least favourable, fuse(ring), +2.8% (slower in 3 of 6)
auto (mix, pass by pass): n: against vanilla +0.0% (slower in 1 of 2), the least favourable
auto (mix, pass by pass): p: against vanilla +15.0% (slower in 2 of 2), the least favourable
WANT
check "bench report: auto against each schedule pass by pass in the mix, the least favourable named" \
	cmp "$out/paired.txt" "$out/paired.want"
# auto at other margins (bench.sh's AUTO_MARGINS: rows auto@P): judged
# as auto is, each on lines of its own after auto's, and never taken as
# the fastest schedule of a launch (auto@0 ran fastest in launch 1 here:
# fuse(ring)'s mix_vs_best stays 0, auto's 10.5 / 10 and 11 / 11); auto's
# lines come first though its rows come after auto@0's
cat >"$out/cpu3-runs.txt" <<'RUNS'
m,vanilla,none,comm|10.0|10.0|1e-7|0.00
m,fuse(ring),none,comm|8.0|8.0|1e-7|0.00
m,auto@0,none,comm|7.0|7.0|1e-7|0.00
m,auto,none,comm|9.0|9.0|1e-7|0.00
m,vanilla,none,mix|11.0|11.0|1e-7|0.00
m,fuse(ring),none,mix|10.0|10.0|1e-7|0.00
m,auto,none,mix|10.5|10.5|1e-7|0.00
m,auto@0,none,mix|9.0|9.0|1e-7|0.00
m,vanilla,none,comm|12.0|12.0|1e-7|0.00
m,fuse(ring),none,comm|9.0|9.0|1e-7|0.00
m,auto,none,comm|10.0|10.0|1e-7|0.00
m,auto@0,none,comm|8.0|8.0|1e-7|0.00
m,vanilla,none,mix|12.0|12.0|1e-7|0.00
m,fuse(ring),none,mix|11.0|11.0|1e-7|0.00
m,auto,none,mix|11.0|11.0|1e-7|0.00
m,auto@0,none,mix|11.6|11.6|1e-7|0.00
RUNS
printf 'm,vanilla,none|11.0|-\nm,fuse(ring),none|10.0|-\nm,auto@0,none|7.5|-\n' >"$out/cpu3-pred.txt"
bench_report cpu3
check "bench report: auto@P rows (AUTO_MARGINS) judged as auto, never the fastest schedule" python3 -c '
import csv, sys
rows = {r["variant"]: r for r in csv.DictReader(open(sys.argv[1]))}
f, a, z = rows["fuse(ring)"], rows["auto"], rows["auto@0"]
assert (f["mix_vs_best"], a["mix_vs_best"]) == ("0.000", "0.025"), (f, a)
assert (z["time_ms"], z["median_ms"], z["mix_ms"]) == ("7.0", "7.5", "10.3"), z
assert (z["mix_vs_best"], z["mix_vs_vanilla"]) == ("-0.023", "-0.108"), z
s = open(sys.argv[2]).read()
want = ["|error| over 2 schedule rows: median 17.5%, worst 25.0% (m fuse(ring))",
        "auto: m 9.0 ms, the fastest schedule fuse(ring) 8.0 ms: regret +12.5%; vanilla 10.0 ms (-10.0%)",
        "auto@0: m 7.0 ms, the fastest schedule fuse(ring) 8.0 ms: regret -12.5%; vanilla 10.0 ms (-30.0%)",
        "auto (mix): m 10.8 ms, the fastest schedule fuse(ring) 10.5 ms: regret +2.9%; vanilla 11.5 ms (-6.1%)",
        "auto@0 (mix): m 10.3 ms, the fastest schedule fuse(ring) 10.5 ms: regret -1.9%; vanilla 11.5 ms (-10.4%)",
        "auto (mix, launch by launch): m: regret +2.5%; against vanilla -6.4%",
        "auto@0 (mix, launch by launch): m: regret -2.3%; against vanilla -10.8%",
        "auto (medians): m 9.5 ms, the fastest schedule fuse(ring) 8.5 ms: regret +11.8%; vanilla 11.0 ms (-13.6%)",
        "auto@0 (medians): m 7.5 ms, the fastest schedule fuse(ring) 8.5 ms: regret -11.8%; vanilla 11.0 ms (-31.8%)"]
at = [s.find(w) for w in want]
assert -1 not in at, [w for w in want if w not in s] + [s]
assert all(at[i] < at[i + 1] for i in (1, 3, 5, 7)), (at, s)  # auto@0 after auto
' "$out/cpu3.csv" "$out/cpu3-summary.txt"
# ... and pass by pass: auto@0 against every schedule but auto, on a line
# after auto's (q: auto@0 against vanilla 0.8, 1.0 and fuse(ring) 1.0,
# 0.833); a model with auto@0 and no auto (r) still gets its line
cat >"$out/passes3.txt" <<'PASSES'
q|1|vanilla|10,10
q|1|fuse(ring)|8,12
q|1|auto|9,11
q|1|auto@0|8,10
r|1|vanilla|10
r|1|auto@0|9
PASSES
awk -F'|' -f bench/stats.awk -f bench/paired.awk "$out/passes3.txt" >"$out/paired3.txt"
cat >"$out/paired3.want" <<'WANT'
auto (mix, pass by pass): q: against vanilla +0.0% (slower in 1 of 2); the least favourable, fuse(ring), +2.1% (slower in 1 of 2)
auto@0 (mix, pass by pass): q: against vanilla -10.0% (slower in 0 of 2); the least favourable, fuse(ring), -8.3% (slower in 0 of 2)
auto@0 (mix, pass by pass): r: against vanilla -10.0% (slower in 0 of 1), the least favourable
WANT
check "bench report: auto@P against each schedule pass by pass in the mix, after auto" \
	cmp "$out/paired3.txt" "$out/paired3.want"
# bench.sh's AUTO_MARGINS: auto@P rows predicted and generated with
# cfc --auto-margin=P (BUILD=gen: cfc only, into a build dir of its own),
# each taking what cfc at that margin takes. On lease 66's 8 Xeon ranks
# (xp66, above) the mlp takes a different pair at 0, 2 (the CPU default)
# and 10%, so a row built at another margin than its own shows
tb=$out/benchgen
mkdir -p "$tb"
ln -s "$(cd "$B" && pwd)/cfc" "$tb/cfc"
bs="-D B=2 -D S=1024 -D D=512"
B=$tb BUILD=gen PROFILE=$xp66 SCHEDULES="vanilla auto" AUTO_MARGINS="0 10" RANKS=8 \
	MLP_SIZES="$bs" ATT_SIZES="$bs -D H=8" sh bench/bench.sh >"$tb/gen.out" 2>&1
check "bench AUTO_MARGINS: auto@0 and auto@10 predicted for every pass" python3 -c '
import sys
keys = [l.split("|")[0] for l in open(sys.argv[1]) if l.count("|") == 2]
for s in ("auto", "auto@0", "auto@10"):
    for m in ("mlp", "attention", "mlp backward", "attention backward"):
        assert "%s,%s,none" % (m, s) in keys, (m, s, keys)
' "$tb/bench/predicted.txt"
picks=
for p in 0 10 ""; do
	a=auto${p:+@$p}
	want=$("$B/cfc" examples/mlp.cf $bs -D tp=8 --schedule=auto --profile="$xp66" \
		${p:+--auto-margin=$p} --explain | sed -n 's/.*auto: \([^ ]*\), predicted .*/\1/p' |
		sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')
	picks="$picks$want
"
	check "bench AUTO_MARGINS: the mlp's $a takes what cfc ${p:+--auto-margin=$p }takes" \
		grep -qxF "  mlp: $a takes $want" "$tb/gen.out"
	check "bench AUTO_MARGINS: the mlp's $a generated" test -s "$tb/bench/models/mlp-$a/mlp.c"
done
check "bench AUTO_MARGINS: the three margins take three different pairs on that profile" \
	test "$(printf %s "$picks" | sort -u | grep -c .)" = 3
# a schedule whose name holds a comma (fuse(ring,m=2)) keeps its name
# whole: quoted in the CSV, and named so in the summary
cat >"$out/cpu2-runs.txt" <<'RUNS'
m,vanilla,none,comm|10.0|10.0|1e-7|0.00
m,fuse(ring,m=2),none,comm|8.0|8.0|1e-7|0.00
m,fuse(ring,m=2),none,nocomm|7.0|7.0|-|0.00
m,auto,none,comm|9.0|9.0|1e-7|0.00
RUNS
printf 'm,vanilla,none|11.0|-\nm,fuse(ring,m=2),none|10.0|7.7\n' >"$out/cpu2-pred.txt"
bench_report cpu2
check "bench report: a schedule named with a comma stays one CSV field" python3 -c '
import csv, sys
rows = {r["variant"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert sorted(rows) == ["auto", "fuse(ring,m=2)", "vanilla"], rows
r = rows["fuse(ring,m=2)"]
assert (r["progress"], r["time_ms"], r["compute_ms"], r["pred_err"], r["pred_compute_err"]) == \
       ("none", "8.0", "7.0", "0.250", "0.100"), r
s = open(sys.argv[2]).read()
for want in ("|error| over 2 schedule rows: median 17.5%, worst 25.0% (m fuse(ring,m=2))",
             "auto: m 9.0 ms, the fastest schedule fuse(ring,m=2) 8.0 ms: regret +12.5%"):
    assert want in s, (want, s)
' "$out/cpu2.csv" "$out/cpu2-summary.txt"
# bench's mix rows (bench/mix.c, scripts/build-mix.sh): two schedules of
# the mlp with its backward in one program, their passes interleaved;
# each entry computes what its own build computes alone (the same
# checksums of outputs and gradients: had one entry's calls reached the
# other's functions, the sums would be the other's; the two builds' pairs
# of sums differ, if not in the outputs then in the gradients), and the program
# wants one label per entry; --passes lists each entry's timed passes,
# whose median is the one its line reports
mx=$out/mix
# mixed WHAT PROG OUT ARGS...: PROG, which scripts/build-mix.sh has just
# linked (its log in $mx.log), run on 2 ranks with ARGS into OUT: WHAT
# passes when it was linked and ran
mixed() {
	what=$1 prog=$2 o=$3
	shift 3
	if [ -x "$prog" ] && mpirun --oversubscribe --timeout 60 -n 2 "$prog" "$@" >"$o" 2>&1; then
		pass "$what"
	else
		fail "$what"
		cat "$mx.log" "$o"
	fi
}
# the fields of a line of a driver or of mix.c, in Python
fields='def fields(line):
    return dict(w.split("=", 1) for w in line.split() if "=" in w)
'
for s in vanilla "fuse(bidir)"; do
	sh scripts/build-model.sh "$B" "$mx/$s" examples/mlp.cf -D tp=2 --backward \
		--schedule="$s" >"$mx.log" 2>&1 &&
		mpirun --oversubscribe --timeout 60 -n 2 "$mx/$s/run" --iters 2 --warmup 0 --check \
			>"$mx/$s.out" 2>&1
done
sh scripts/build-mix.sh "$B" "$mx/run" "$mx/vanilla" "$mx/fuse(bidir)" >>"$mx.log" 2>&1
mixed "bench mix: two schedules of a model linked and run in one job" "$mx/run" "$mx/mix.out" \
	--iters 3 --warmup 1 --check --passes vanilla "fuse(bidir)"
check "bench mix: each entry's outputs and gradients those of its build alone" python3 -c "$fields"'
import sys
mix = [fields(l) for l in open(sys.argv[1]) if l.startswith("variant=")]
assert [m["variant"] for m in mix] == ["vanilla", "fuse(bidir)"], mix
alone = [fields(open(f).read()) for f in sys.argv[2:]]
sums = [(a["checksum"], a["grad_checksum"]) for a in alone]
assert sums[0] != sums[1], alone
for m, a in zip(mix, alone):
    assert m["model"] == "mlp" and float(m["time_ms"]) > 0, m
    assert 0 < float(m["backward_span_ms"]) <= float(m["backward_ms"]), m
    for k in ("checksum", "grad_checksum"):
        assert m[k] == a[k], (k, m, a)
    assert float(m["max_rel_err"]) < 1e-5 and float(m["grad_max_rel_err"]) < 1e-5, m
passes = [fields(l) for l in open(sys.argv[1]) if l.startswith("passes variant=")]
assert [p["variant"] for p in passes] == ["vanilla", "fuse(bidir)"], passes
for p, m in zip(passes, mix):
    t = sorted(float(x) for x in p["ms"].split(","))
    assert len(t) == 3 and abs(t[1] - float(m["backward_span_ms"])) < 1e-3, (p, m)
' "$mx/mix.out" "$mx/vanilla.out" "$mx/fuse(bidir).out"
mpirun --oversubscribe --timeout 60 -n 2 "$mx/run" --iters 3 vanilla >"$mx/one.out" 2>&1
check "bench mix: a label per entry, else usage" grep -q '^usage: .*(2 labels' "$mx/one.out"
# --first 1 opens fuse(bidir)'s entry first: each entry still computes
# what its build does alone, and reports in its place
mixed "bench mix: --first opens another entry first" "$mx/run" "$mx/first.out" \
	--iters 2 --warmup 0 --first 1 --check vanilla "fuse(bidir)"
check "bench mix --first: the same entries, outputs and gradients" python3 -c "$fields"'
import sys
got, want = ([fields(l) for l in open(f) if l.startswith("variant=")] for f in sys.argv[1:])
assert [g["variant"] for g in got] == ["vanilla", "fuse(bidir)"], got
for g, w in zip(got, want):
    assert (g["checksum"], g["grad_checksum"]) == (w["checksum"], w["grad_checksum"]), (g, w)
' "$mx/first.out" "$mx/mix.out"
mpirun --oversubscribe --timeout 60 -n 2 "$mx/run" --first -1 vanilla "fuse(bidir)" \
	>"$mx/first-bad.out" 2>&1
check "bench mix: a negative --first refused" grep -q '^usage: .*--first K' "$mx/first-bad.out"
# an entry after --alone runs without its transfers in that entry only:
# it computes what the build linked whole with bench/nocomm.c computes
# (bench.sh's compute-alone rows), and the entry beside it, the same
# build with its transfers, still what the build computes alone
CF_RUN=run-nocomm CF_NOCOMM=1 CF_STAGE=link sh scripts/build-model.sh "$B" \
	"$mx/vanilla" examples/mlp.cf >>"$mx.log" 2>&1 &&
	mpirun --oversubscribe --timeout 60 -n 2 "$mx/vanilla/run-nocomm" --iters 2 --warmup 0 \
		--check >"$mx/nocomm.out" 2>&1
sh scripts/build-mix.sh "$B" "$mx/run-alone" --alone "$mx/vanilla" "$mx/vanilla" >>"$mx.log" 2>&1
mixed "bench mix: an entry without its transfers beside one with them" "$mx/run-alone" \
	"$mx/alone.out" --iters 2 --warmup 0 --check alone vanilla
check "bench mix: the entry without transfers computes what nocomm.c's build does" python3 -c "$fields"'
import sys
mix = {m["variant"]: m for m in (fields(l) for l in open(sys.argv[1]) if l.startswith("variant="))}
nocomm, whole = (fields(open(f).read()) for f in sys.argv[2:])
assert nocomm["grad_checksum"] != whole["grad_checksum"], (nocomm, whole)
for k in ("checksum", "grad_checksum"):
    assert mix["alone"][k] == nocomm[k], (k, mix, nocomm)
    assert mix["vanilla"][k] == whole[k], (k, mix, whole)
' "$mx/alone.out" "$mx/nocomm.out" "$mx/vanilla.out"
# bench/replay.py predicts a saved run's rows again with this cfc: case
# a's rows of a bench-gpu CSV on its NCCL profile, each the pass cfc
# predicts (a none row: its compute alone), its error against the time,
# each kind's error against vanilla's, and auto's pick with its regret
# where a row timed it
prof=tests/fixtures/prof/2026-11-28-NVIDIA-H200-lease40-tp4-nccl.prof
cat >"$out/replay.csv" <<'CSV'
device,date,case,tp,impl,schedule,transfer,ms,spread,compute_ms,ect_ms,overlap,decomp,err,predicted_ms,pred_err,clock_mhz
H,d,a,4,ours,vanilla,nccl,8.0,,,,,,,,,
H,d,a,4,ours,"fuse(ring,m=2)",nccl,10.0,,,,,,,,,
H,d,a,4,ours,vanilla,none,6.0,,,,,,,,,
H,d,a,4,ours,slice(4),nccl,7.9,,,,,,,,,
H,d,a,4,ours,auto,nccl,8.2,,,,,,,,,
CSV
CFC=$B/cfc python3 bench/replay.py gpu "$out/replay.csv" "$prof" >"$out/replay.txt" 2>&1
a="$(gpu_spec a) -D tp=4 --type=bf16 --profile=$prof --explain"
pv=$("$CFC" $a --schedule=vanilla | sed -n 's/^pass: predicted \([0-9.]*\) ms (compute alone \([0-9.]*\) ms).*/\1 \2/p')
pr=$("$CFC" $a --schedule="fuse(ring,m=2)" | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
pa=$("$CFC" $a --schedule=auto | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
check "replay: each row as cfc predicts it, its error against vanilla's, and auto's regret" python3 -c '
import sys
v, alone = map(float, sys.argv[2].split()); r, a = float(sys.argv[3]), float(sys.argv[4])
got = open(sys.argv[1]).read().splitlines()
row = lambda n, ms, p: "%-34s %9.3f %9.3f %+6.1f%%" % (n, ms, p, 100 * (p / ms - 1))
want = [row("a vanilla nccl", 8.0, v), row("a fuse(ring,m=2) nccl", 10.0, r),
        row("a vanilla none", 6.0, alone)]
assert got[:3] == want, (got, want)
# fuse(ring,m=2) against vanilla: its time over its price, over the same of vanilla
b = 10.0 / r / (8.0 / v) - 1
assert "against vanilla: fuse(ring,m=2) median %+.1f%% over 1, %d above 0" % (
    100 * b, b > 0) in got, got
# auto takes slice(4) here (the fastest: 0 is the default margin on a
# GPU profile; lease 40 ran auto at 2%, which took vanilla), which a
# row timed: 7.9, the fastest row
assert got[-1] == "auto a nccl: slice(4), predicted %.3f; measured 7.900, the fastest row " \
                  "slice(4) 7.900: regret +0.0%%" % a, got[-1]
' "$out/replay.txt" "$pv" "$pr" "$pa"
# replay.py cpu --mix: against the mix times, and each kind against
# vanilla by the launches' own ratio (mix_vs_vanilla: 5%, where the mix
# medians give 10%); an auto@0 row (AUTO_MARGINS) is left out, as on GPUs
cp=tests/fixtures/prof/2026-11-29-Xeon16-lease45-cpu-4ranks.prof
cat >"$out/replay-mix.csv" <<'CSV'
model,variant,progress,ranks,time_ms,median_ms,mix_ms,mix_vs_vanilla
mlp,vanilla,none,4,9.0,9.5,10.0,0.000
mlp,fuse(ring),none,4,8.0,8.5,11.0,0.050
mlp,auto@0,none,4,7.0,7.5,9.0,-0.100
CSV
CFC=$B/cfc python3 bench/replay.py cpu "$out/replay-mix.csv" "$cp" --mix >"$out/replay-mix.txt" 2>&1
m="examples/mlp.cf $(sed -n 's/.*"${MLP_SIZES:=\([^}]*\)}".*/\1/p' bench/bench.sh) -D tp=4 --profile=$cp --explain"
pv=$("$CFC" $m --schedule=vanilla | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
pr=$("$CFC" $m --schedule="fuse(ring)" | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
check "replay cpu --mix: the mix times, and each kind against vanilla launch by launch" python3 -c '
import sys
v, r = float(sys.argv[2]), float(sys.argv[3])
got = open(sys.argv[1]).read().splitlines()
row = lambda n, ms, p: "%-34s %9.1f %9.1f %+6.1f%%" % (n, ms, p, 100 * (p / ms - 1))
assert got[:2] == [row("mlp vanilla", 10.0, v), row("mlp fuse(ring)", 11.0, r)], got
assert not [l for l in got if "auto@0" in l], got
b = 1.05 / (r / v) - 1
assert "against vanilla: fuse(ring) median %+.1f%% over 1, %d above 0" % (100 * b, b > 0) in got, got
' "$out/replay-mix.txt" "$pv" "$pr"
# --probe-overlap: the same rows on the profile with the overlaps its
# probe lines give as cfrt-calibrate computes them now (lease 45's ring:
# 0.867 ms alone, 0.815 waited, GEMM 7.59 ms: 0.0069, where it says 0.060)
python3 -c '
import shutil, sys
sys.path.insert(0, "bench")
import replay
shutil.copy(replay.probe_overlap(sys.argv[1]), sys.argv[2])
' "$cp" "$out/reprobed.prof"
CFC=$B/cfc python3 bench/replay.py cpu "$out/replay-mix.csv" "$cp" --mix --probe-overlap \
	>"$out/replay-probe.txt" 2>&1
m2=$(echo "$m" | sed "s|--profile=$cp|--profile=$out/reprobed.prof|")
pv2=$("$CFC" $m2 --schedule=vanilla | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
pr2=$("$CFC" $m2 --schedule="fuse(ring)" | sed -n 's/^pass: predicted \([0-9.]*\) ms.*/\1/p')
check "replay --probe-overlap: the rows on the overlaps the probe lines give" python3 -c '
import sys
v, r, r0 = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
got = open(sys.argv[1]).read().splitlines()
row = lambda n, ms, p: "%-34s %9.1f %9.1f %+6.1f%%" % (n, ms, p, 100 * (p / ms - 1))
assert got[:2] == [row("mlp vanilla", 10.0, v), row("mlp fuse(ring)", 11.0, r)], got
assert r != r0, (r, r0)
' "$out/replay-probe.txt" "$pv2" "$pr2" "$pr"
check "replay --probe-overlap: lease 45's ring overlap as the probe gives it" \
	grep -qx 'overlap 0.006[0-9]*' "$out/reprobed.prof"
# its all_gather (0.768 ms alone, the GEMM 7.684 ms under it and 0.3125
# waited, 7.095 alone) added 0.9015 ms: 0; its reduce_scatter (2.272 ms;
# 7.36, 1.728) added 1.993: (2.272 - 1.993) / 7.095 = 0.0393
check "replay --probe-overlap: lease 45's collectives as the probe gives them" \
	sh -c "grep -qx 'overlap_coll all_gather 0' '$out/reprobed.prof' &&
	       grep -qx 'overlap_coll reduce_scatter 0.039[0-9]*' '$out/reprobed.prof'"
# lease 54's 4-rank all_gather (0.7524 ms alone; the GEMM 8.747 ms under
# it, 0.1746 waited, 9.27 alone) added less than nothing: it lands as the
# GEMM ends, 0.7524 / 9.27 = 0.0812; a GPU's collectives keep the ring's
# rule (lease 40, NCCL: the all_gather 0.2235 ms alone, 0.1889 waited,
# the GEMM 0.2342 under it: 0.0346 / 0.2342 = 0.1477; the file holds
# the share of its time before 2026-11-29, 0.1547)
check "replay --probe-overlap: a collective that added nothing lands as the GEMM ends; GPUs as the ring" python3 -c '
import sys
sys.path.insert(0, "bench")
import replay
def coll(f, op):
    return [float(l.split()[-1]) for l in open(replay.probe_overlap(f))
            if l.startswith("overlap_coll " + op + " ")]
a = coll("tests/fixtures/prof/2026-11-29-Xeon16-lease54-cpu-4ranks.prof", "all_gather")
g = coll("tests/fixtures/prof/2026-11-28-NVIDIA-H200-lease40-tp4-nccl.prof", "all_gather")
assert len(a) == 1 and abs(a[0] - 0.7524 / 9.27) < 1e-3, a
assert len(g) == 1 and abs(g[0] - 0.0346 / 0.2342) < 1e-3, g
'
CFC=$B/cfc python3 bench/replay.py cpu "$out/cpu2.csv" "$cp" --mix >"$out/replay-nomix.txt" 2>&1
check "replay cpu --mix: a CSV without mix rows refused" grep -q "has no mix rows" "$out/replay-nomix.txt"
# nvidia-smi's log: a GPU slowed for heat (0x20) flagged, the power limit
# (0x4) and idling (0x1) not
cat >"$out/smi.csv" <<'SMI'
2026/11/28 06:02:30.100, 0, 1410, 690.5, 60, 0x0000000000000004
2026/11/28 06:02:30.100, 1, 345, 70.1, 40, 0x0000000000000001
2026/11/28 06:02:30.300, 0, 780, 370.2, 94, 0x0000000000000020
2026/11/28 06:02:30.300, 1, 1980, 430.0, 55, 0x0000000000000000
2026/11/28 06:02:30.500, 0, 800, 380.0, 93, 0x0000000000000024
SMI
python3 bench/gpu/report.py --runs "$out/runs.txt" --predicted "$out/pred.txt" \
	--torch "$out/torch.jsonl" --device T --results "$out/rep" --smi "$out/smi.csv" >"$out/rep.log" 2>&1
check "bench-gpu report: a GPU that slowed for heat flagged, from nvidia-smi's log" \
	python3 -c '
import glob, sys
md = open(glob.glob(sys.argv[1] + "/*-T.md")[0]).read()
assert "GPU 0 slowed for heat or a fault in 2 of 3 nvidia-smi samples (SW thermal slowdown; " \
       "up to 94 C; SM clock 790 MHz" in md, md
assert "GPU 1 slowed" not in md, md
' "$out/rep"
# each row's SM clock: per round, each GPU's median over its loaded
# samples (at least 0.4 of its highest power) from the run's start to
# the second after its end, the lowest GPU's; the median of the rounds
cat >"$out/runs-clk.txt" <<'RUNS'
run case=a tp=4 schedule=vanilla transfer=nccl ms=9.0 round=0 from=1795856000 at=1795856002
run case=a tp=4 schedule=vanilla transfer=none ms=6.0 round=0 from=1795856004 at=1795856006
run case=a tp=4 schedule=vanilla transfer=nccl ms=9.2 round=1 from=1795856010 at=1795856012
RUNS
smi() { # EPOCH.FRACTION GPU MHZ WATTS
	echo "$(date -d "@${1%.*}" '+%Y/%m/%d %H:%M:%S').${1#*.}, $2, $3, $4, 60, 0x0000000000000004"
}
{
	smi 1795856000.500 0 1500 600; smi 1795856000.500 1 1700 650
	smi 1795856001.500 0 1520 600; smi 1795856001.500 1 1720 650
	smi 1795856002.500 0 1980 120; smi 1795856002.500 1 1980 120
	smi 1795856003.500 0 300 700; smi 1795856003.500 1 300 700
	smi 1795856004.500 0 1800 500; smi 1795856004.500 1 1900 500
	smi 1795856005.500 0 1820 500; smi 1795856005.500 1 1880 500
	smi 1795856010.500 0 1600 600; smi 1795856010.500 1 1400 600
	smi 1795856011.500 0 1620 600; smi 1795856011.500 1 1420 600
} >"$out/smi-clk.csv"
rm -rf "$out/rep"
mkdir -p "$out/rep"
python3 bench/gpu/report.py --runs "$out/runs-clk.txt" --predicted "$out/pred.txt" \
	--torch "$out/torch.jsonl" --device T --results "$out/rep" --smi "$out/smi-clk.csv" >"$out/rep.log" 2>&1
check "bench-gpu report: each row's SM clock from nvidia-smi's log" \
	python3 -c '
import csv, glob, sys
rows = {(r["schedule"], r["transfer"]): r for r in csv.DictReader(open(glob.glob(sys.argv[1] + "/*-T.csv")[0]))}
assert rows["vanilla", "nccl"]["clock_mhz"] == "1460", rows
assert rows["vanilla", "none"]["clock_mhz"] == "1810", rows
md = open(glob.glob(sys.argv[1] + "/*-T.md")[0]).read()
assert "SM clock the rows ran at, tp=4: 1460-1810 MHz, median 1635 (2 rows)" in md, md
assert "| 9.100 |" in md and "| 1460 |" in md, md
' "$out/rep"
