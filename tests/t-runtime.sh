#!/bin/sh
# The runtime cfrt under mpirun: the CUnit runner with 1, 2 and 3 ranks
# (and 2 ranks in the panel and thread progress modes), the trace files as
# JSON (also of generated fused programs on 4 ranks, tests/tracecheck.py), the fault paths (a bad argument mid-run, a truncated receive, a
# wrong group size: each must end the job at once with rank, op and step),
# the thread -> panel fallback, and an out-of-tree build through
# `make install-runtime` and pkg-config. Needs $B (and $SAN) from run.sh.
. tests/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Two ranks share two cores: one BLAS thread each.
export OPENBLAS_NUM_THREADS=1
# lib.sh sets the sanitizers' options (under SAN: Open MPI's own leaks at
# MPI_Init suppressed, the slow unwinder to see through its frames);
# LSAN_OPTIONS exists without SAN too, for mpirun -x.
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"
out=$B/tests/rt
rm -rf "$out"
mkdir -p "$out"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120 -x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS"

# unit NAME NP [MODE]: the CUnit runner, in progress mode MODE if given
# (its first line must name that mode); its log is $out/NAME.log, its
# traces $out/trace-NAME.*.
unit() {
	name=$1 np=$2 mode=${3:-}
	if [ -n "$mode" ]; then export CFRT_PROGRESS=$mode; fi
	$MPIRUN -np "$np" "$B/tests/runtime_unit" "$out/trace-$name" \
		>"$out/$name.log" 2>&1
	rc=$?
	unset CFRT_PROGRESS
	if [ $rc -eq 0 ] && grep -q "^runtime_unit: 0 failures over $np ranks" "$out/$name.log" &&
		grep -q "^runtime_unit: $np ranks, .*, progress ${mode:-[a-z]*}$" "$out/$name.log"; then
		pass "runtime unit $name"
	else
		fail "runtime unit $name (exit $rc)"
		grep -E "FAILED|^rank|ERROR|runtime error|Run Summary| tests | asserts" \
			"$out/$name.log" | head -n 30
	fi
}
unit np1 1
unit np2 2
unit np3 3
unit np2-panel 2 panel
unit np2-thread 2 thread

# fault NAME NP MODE PATTERN: the job fails, fast, printing PATTERN.
fault() {
	name=$1 np=$2 mode=$3 pattern=$4
	t0=$(date +%s)
	$MPIRUN -np "$np" "$B/tests/runtime_fault" "$mode" >"$out/$name.log" 2>&1
	rc=$? t=$(($(date +%s) - t0))
	if [ $rc -ne 0 ] && [ $t -lt 30 ] && grep -q "$pattern" "$out/$name.log"; then
		pass "runtime fault $name (exit $rc in ${t}s)"
	else
		fail "runtime fault $name (exit $rc in ${t}s)"
		head -n 20 "$out/$name.log"
	fi
}
fault bad-arg 3 arg \
	"^cfrt: rank 2: op fault_ring step 2: cfrt_gemm: lda 2 is smaller than the 4 columns of A"
fault truncated-recv 2 truncate \
	"^cfrt: rank 0: op short_recv step 1: cfrt_wait: MPI_Wait failed: MPI_ERR_TRUNCATE"
fault wrong-size 2 size \
	"^cfrt: rank [01]: op init step 0: cfrt_init: model fault was compiled for a group of 4 ranks, but the communicator has 2$"

# Plain MPI_Init gives no MPI_THREAD_MULTIPLE: thread falls back to panel
# with one warning line.
CFRT_PROGRESS=thread $MPIRUN -x CFRT_PROGRESS -np 2 "$B/tests/runtime_fault" fallback \
	>"$out/fallback.log" 2>&1
if grep -q "^progress panel$" "$out/fallback.log" &&
	[ "$(grep -c '^cfrt: CFRT_PROGRESS=thread needs MPI_THREAD_MULTIPLE' "$out/fallback.log")" -eq 1 ]; then
	pass "runtime progress thread falls back to panel"
else
	fail "runtime progress thread falls back to panel"
	cat "$out/fallback.log"
fi

# Install into a staging dir, build pc_app out of tree with pkg-config,
# run it on 3 ranks (with a trace) and check its result.
stage=$ROOT/$out/stage prefix=/opt/cfrt
pcdir=$stage$prefix/lib/pkgconfig
san=${SAN:+-fsanitize=$SAN}
if ${MAKE:-make} -s --no-print-directory B="$B" SAN="$SAN" DESTDIR="$stage" \
	PREFIX=$prefix install-runtime >"$out/install.log" 2>&1 &&
	[ -f "$stage$prefix/include/cfrt.h" ] && [ -f "$stage$prefix/lib/libcfrt.a" ] &&
	[ "$(readlink "$stage$prefix/lib/libcfrt.so")" = libcfrt.so.0 ] &&
	readelf -d "$stage$prefix/lib/libcfrt.so.0.1.0" | grep -q 'SONAME.*libcfrt.so.0' &&
	grep -q "^prefix=$prefix$" "$pcdir/cfrt.pc"; then
	pass "runtime install-runtime"
else
	fail "runtime install-runtime"
	cat "$out/install.log"
fi
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --define-variable=prefix="$stage$prefix" \
	--cflags --libs cfrt)
(cd "$out" && mpicc -std=c11 $san "$ROOT/tests/runtime/pc_app.c" $flags -o pc_app) \
	>"$out/pc_app.log" 2>&1 &&
	LD_LIBRARY_PATH=$stage$prefix/lib CFRT_TRACE=$out/trace-pc_app \
	$MPIRUN -x LD_LIBRARY_PATH -x CFRT_TRACE -np 3 "$out/pc_app" >>"$out/pc_app.log" 2>&1
if grep -q "^pc_app: 3 ranks, .*: ok$" "$out/pc_app.log" &&
	LD_LIBRARY_PATH=$stage$prefix/lib ldd "$out/pc_app" | grep -q "libcfrt.so.0 => $stage"; then
	pass "runtime pkg-config build and FuseRS app (3 ranks)"
else
	fail "runtime pkg-config build and FuseRS app (3 ranks)"
	cat "$out/pc_app.log"
fi

# Every trace is one file for the job (tests/tracecheck.py: a process row
# per rank, no overlapping events on a track, a flow per message), with
# compute and transfer events named with the op, step and call.
if python3 - "$out" <<'EOF' >"$out/trace.log" 2>&1
import glob, json, re, subprocess, sys
out = sys.argv[1]
ring = ['fuse_rs "y" step 2 slice 1: gemm', 'fuse_rs "y" step 2 slice 1: send to',
        'fuse_rs "y" step 2 slice 0: recv from', "tail step 3: all_reduce"]
want = {  # file pattern: (ranks, names expected)
    "trace-np1.ctx*.json": (1, ring), "trace-np2.ctx*.json": (2, ring),
    "trace-np3.ctx*.json": (3, ring), "trace-np2-panel.ctx*.json": (2, ring),
    "trace-np2-thread.ctx*.json": (2, ring),
    "trace-pc_app.json": (3, [r"fuse_rs:y step 0 slice \d: gemm",
                              r"fuse_rs:y step 1 slice \d: send to",
                              "vanilla:y step 0: reduce_scatter"]),
}
for pat, (n, names) in want.items():
    files = glob.glob(f"{out}/{pat}")
    assert len(files) == 1, (pat, files)
    subprocess.run(["python3", "tests/tracecheck.py", files[0], str(n)], check=True)
    xs = [e for e in json.load(open(files[0]))["traceEvents"] if e["ph"] == "X"]
    assert {e["tid"] for e in xs} >= {0, 1000}, files[0]
    for nm in names:
        assert any(re.match(nm, e["name"]) for e in xs), (files[0], nm)
assert not glob.glob(f"{out}/*.rank*.json"), "a file per rank"
print("ok")
EOF
then
	pass "runtime trace JSON"
else
	fail "runtime trace JSON"
	cat "$out/trace.log"
fi

# Generated fused programs on 4 ranks, traced: mlp under fuse(ring)
# (FuseAG and FuseRS rings), ulysses under its spec (FuseA2A) and in
# pairwise exchange; one file each that tests/tracecheck.py accepts, its
# events naming the tensors the generated code gave cfrt_what.
for c in "mlp fuse(ring)" "ulysses spec" "ulysses fuse(pairwise)"; do
	ex=${c%% *} s=${c#* }
	d=$out/traced-$ex-$(echo "$s" | tr -d ' ()')
	node="t1 = matmul(xa, w1)"
	[ $ex = ulysses ] && node="oh = attention(qh, kh, vh)"
	if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
	ok=0
	sh scripts/build-model.sh "$B" "$d" "examples/$ex.cf" "$@" >"$d.log" 2>&1 &&
	CFRT_TRACE=$d/trace $MPIRUN -x CFRT_TRACE -np 4 "$d/run" --check --iters 2 --warmup 1 \
		>>"$d.log" 2>&1 &&
	python3 tests/tracecheck.py "$d/trace.json" 4 >>"$d.log" 2>&1 &&
	grep -q "\"tensors\":\"$node\"" "$d/trace.json" && ok=1
	check "runtime: trace of $ex $s on 4 ranks: one file, rows, lanes, flows, tensors" test $ok = 1
	[ $ok = 1 ] || tail -n 20 "$d.log"
done

# tracecheck.py rejects what it is there to catch: a receive joined to
# another message (its number changed), and a rank's timeline 1 s early
d=$out/traced-mlp-fusering
check "runtime: tracecheck rejects a flow between different messages and a shifted rank" \
	python3 -c "
import json, subprocess, sys
src, tmp = sys.argv[1], sys.argv[1] + '.bad.json'
def rejects(edit):
    d = json.load(open(src))
    edit(d['traceEvents'])
    json.dump(d, open(tmp, 'w'))
    return subprocess.run(['python3', 'tests/tracecheck.py', tmp, '4'],
                          capture_output=True).returncode == 1
def renumber(ev):
    r = next(e for e in ev if e['ph'] == 'X' and ': recv ' in e['name'])
    r['args']['msg'] += 1
def shift(ev):
    for e in ev:
        if e['pid'] == 1 and 'ts' in e:
            e['ts'] = round(e['ts'] - 1e6, 3)
assert subprocess.run(['python3', 'tests/tracecheck.py', src, '4'],
                      capture_output=True).returncode == 0
assert rejects(renumber) and rejects(shift)
" "$d/trace.json"

# CFRT_TRACE_EVENTS caps the events a rank keeps; the others are counted
CFRT_TRACE=$d/capped CFRT_TRACE_EVENTS=20 $MPIRUN -x CFRT_TRACE -x CFRT_TRACE_EVENTS -np 4 \
	"$d/run" --iters 2 --warmup 1 >"$d.capped.log" 2>&1
check "runtime: CFRT_TRACE_EVENTS=20 keeps 20 events per rank and counts the dropped" \
	python3 -c "
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
for r in range(4):
    assert sum(e['ph'] == 'X' and e['pid'] == r for e in ev) == 20, r
    assert [e['args']['dropped_events'] > 0 for e in ev
            if e['name'] == 'process_name' and e['pid'] == r] == [True], r
" "$d/capped.json"

# --warmup-s SEC: warm-up passes until SEC seconds of them have gone, on
# every rank alike (the job ends, so their collectives matched), after
# --warmup's count; the driver says how many and how long (the slowest
# rank's), and the job lasts at least that long. A value that is not a
# number of seconds is refused with the usage line
t0=$(date +%s.%N)
$MPIRUN -np 4 "$d/run" --iters 1 --warmup 0 --warmup-s 1.5 >"$d.warm.log" 2>&1
rc=$?
t1=$(date +%s.%N)
$MPIRUN -np 4 "$d/run" --iters 1 --warmup 3 --warmup-s 0.001 >"$d.warm3.log" 2>&1
rc3=$?
check "runtime: --warmup-s 1.5 runs passes for 1.5 s and more, then the timed one" \
	sh -c '[ "$1" = 0 ] && grep -q "time_ms=" "$2" &&
	       ms=$(sed -n "s/.* warmup_ms=\([0-9.]*\).*/\1/p" "$2") &&
	       n=$(sed -n "s/.* warmup_passes=\([0-9]*\).*/\1/p" "$2") &&
	       awk -v a="$3" -v b="$4" -v ms="$ms" -v n="$n" \
	           "BEGIN { exit !(ms >= 1500 && n >= 1 && b - a >= ms / 1000) }"' \
	_ "$rc" "$d.warm.log" "$t0" "$t1"
check "runtime: --warmup 3 --warmup-s 0.001 runs the 3 passes at least" \
	sh -c '[ "$1" = 0 ] && n=$(sed -n "s/.* warmup_passes=\([0-9]*\).*/\1/p" "$2") &&
	       [ "$n" -ge 3 ]' _ "$rc3" "$d.warm3.log"
$MPIRUN -np 2 "$d/run" --iters 1 --warmup-s -1 >"$d.warmbad.log" 2>&1
rc=$?
check "runtime: --warmup-s -1 is refused with the usage line" \
	sh -c '[ "$1" = 2 ] && grep -q "usage: .*--warmup-s SEC" "$2"' _ "$rc" "$d.warmbad.log"

# grouped-query attention against repeated key/value heads through the API
# alone (tests/gpu/gqa_check.c, also run on the GPU by tests/gpu/run.sh)
$MPIRUN -np 1 "$B/tests/gqa_check" >"$out/gqa_check.log" 2>&1
cat "$out/gqa_check.log"
check "runtime: grouped-query attention equals repeated key/value heads (f32, f64)" \
	grep -q '^gqa_check: all ok$' "$out/gqa_check.log"
