#!/bin/sh
# The benchmark plots (bench/plot.py): the committed fixtures in tests/plot,
# a CPU table of make bench with its header and a GPU table of make
# bench-gpu, each become two well-formed SVG files that name every
# schedule. Nothing is measured. make test installs gnuplot (make deps);
# run alone without it, a SKIP line.
. tests/lib.sh
command -v gnuplot >/dev/null 2>&1 || { echo "SKIP gnuplot not installed"; exit 0; }
t=$B/tests/plot
rm -rf "$t"
mkdir -p "$t"
cp tests/plot/cpu.csv tests/plot/gpu.csv "$t/"

# svg_has FILE TEXT...: FILE parses as XML and its text holds every TEXT.
svg_has() {
	python3 - "$@" <<'PY'
import sys, xml.etree.ElementTree as E
text = "\n".join(E.parse(sys.argv[1]).getroot().itertext())
missing = [w for w in sys.argv[2:] if w not in text]
if missing:
    sys.exit("%s lacks %s" % (sys.argv[1], missing))
PY
}

python3 bench/plot.py --header tests/plot/cpu-header.txt "$t/cpu.csv" >"$t/cpu.out" 2>&1; rc=$?
check "plot: a CPU table becomes its two plots" sh -c "[ $rc -eq 0 ] &&
	grep -qx 'plots: $t/cpu-time.svg $t/cpu-overlap.svg' '$t/cpu.out'"
for what in time overlap; do
	check "plot: cpu-$what.svg names the schedules, modes, machine and sizes" svg_has \
		"$t/cpu-$what.svg" vanilla 'slice(4)' 'fuse(ring)' 'fuse(bidir)' \
		'mpi+openblas (hand)' 'progress: panel' 'hand-written MPI' 'AMD EPYC' \
		'mlp, 4 ranks, B=2 S=1024 D=512' 'attention, 4 ranks, B=2 S=1024 D=512 H=8'
done
check "plot: the time plot has the compute-alone lines" svg_has "$t/cpu-time.svg" \
	"the schedule's compute alone" 'best unsplit compute alone'
check "plot: an overlap left empty says why" svg_has "$t/cpu-overlap.svg" \
	'vanilla exposes under 5% of the compute'

python3 bench/plot.py "$t/gpu.csv" >"$t/gpu.out" 2>&1; rc=$?
check "plot: a GPU table becomes its two plots" sh -c "[ $rc -eq 0 ] &&
	[ -s '$t/gpu-time.svg' ] && [ -s '$t/gpu-overlap.svg' ]"
for what in time overlap; do
	check "plot: gpu-$what.svg names the schedules, transfers, device and cases" svg_has \
		"$t/gpu-$what.svg" vanilla 'slice(4)' 'fuse(ring)' 'fuse(bidir)' PyTorch \
		Async-TP 'transfers: ce (copy engines)' 'NVIDIA-H200' '(a) TP=4' '(c) TP=2'
done
check "plot: the overlap values are printed" svg_has "$t/gpu-overlap.svg" 0.899 0.777

cp "$t/gpu-time.svg" "$t/gpu-time.first"
python3 bench/plot.py "$t/gpu.csv" >/dev/null 2>&1
check "plot: the same table gives the same SVG" cmp -s "$t/gpu-time.svg" "$t/gpu-time.first"
printf 'a,b\n1,2\n' >"$t/other.csv"
python3 bench/plot.py "$t/other.csv" >/dev/null 2>"$t/other.err"; rc=$?
check "plot: a CSV of neither benchmark is refused" sh -c \
	"[ $rc -ne 0 ] && grep -q 'neither' '$t/other.err'"
