#!/bin/sh
# End to end: every example x every schedule kind x N in {1, 2, 3, 4}
# (an example on a grid of groups, tpdp: tp x dp in 2x2, 2x3, 3x2, 1x4,
# 4x1; three examples also under auto on a calibrated profile): compile
# with cfc (with its backward pass), link against libcfrt, run under
# mpirun, and check that the parallel output and every gradient
# equal the serial reference's (max relative error <= 1e-5 for the f32
# output, <= 1e-4 for each f32 gradient) and that two runs give
# bitwise-identical output and gradients. The gradients' bound: the
# backward of attention's softmax cancels (dP - rowsum(dout * out)), so
# the last rounding differences of its inputs grow; in f64 the
# transformer's gradients differ from the reference's by 2e-14..3.5e-14
# where its output differs by 8e-16..1e-15 (N = 3, 4), and in f32 its wq
# gradient by up to 1.4e-5 where its output by at most 1.8e-6. The f64
# finite differences of t-grad are the check of the rules themselves.
# For N = 3 the sizes are changed with -D so that they divide. Under the
# sanitizers (SAN set), where every build and run is several times slower,
# N is 2 and 4 only.
. tests/lib.sh
# -O1, and no variable tracking: with -g it is most of the time gcc takes
# on the long generated functions (10 s of 11 for the transformer's
# backward), and these builds are for running, not for a debugger
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/e2e
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

sizes3() { # the -D options that make example $1 divide by 3
	case $1 in
	mlp) echo "-D S=96 -D D=48" ;;
	attention|transformer) echo "-D S=96 -D D=48 -D H=6" ;;
	ulysses) echo "-D S=96 -D D=48 -D H=6" ;;
	mamba) echo "-D S=96 -D D=24" ;;
	zero_dp) echo "-D T=96 -D D=48" ;;
	llama) echo "-D S=96 -D D=48 -D H=6 -D KV=3 -D F=96" ;;
	esac
}

# e2e NAME DIR N SPEC ARGS...: builds SPEC with ARGS into DIR, runs it twice
# on N ranks, and checks the error against the reference and the checksums
# against each other.
e2e() {
	name=$1 dir=$2 n=$3 spec=$4
	shift 4
	bwd=0
	for a in "$@"; do [ "$a" = --backward ] && bwd=1; done
	if ! sh scripts/build-model.sh "$B" "$dir" "$spec" "$@" >"$dir.log" 2>&1; then
		fail "$name (build)"
		tail -n 20 "$dir.log"
		return
	fi
	ok=1
	for k in 1 2; do
		if ! $MPIRUN -n "$n" "$dir/run" --check --iters 1 --warmup 0 >"$dir.run$k" 2>&1; then
			ok=0
			tail -n 20 "$dir.run$k"
		fi
	done
	[ $ok = 1 ] || { fail "$name (run)"; return; }
	err=$(field max_rel_err "$dir.run1")
	s1=$(field checksum "$dir.run1") s2=$(field checksum "$dir.run2")
	# a backward pass: its gradients too (else both empty)
	gerr=$(field grad_max_rel_err "$dir.run1")
	g1=$(field grad_checksum "$dir.run1") g2=$(field grad_checksum "$dir.run2")
	if ! le "$err" 1e-5; then
		fail "$name (max_rel_err $err)"
	elif [ -z "$s1" ] || [ "$s1" != "$s2" ]; then
		fail "$name (runs differ: $s1 $s2)"
	elif [ $bwd = 1 ] && ! le "$gerr" 1e-4; then
		fail "$name (grad_max_rel_err $gerr)"
	elif [ "$g1" != "$g2" ]; then
		fail "$name (gradients of the runs differ: $g1 $g2)"
	else
		pass "$name${gerr:+ (gradients $gerr)}"
	fi
}

# tag "fuse(ring, m = 2)" -> fuse_ring_m-2
tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

for f in examples/*.cf; do
	ex=$(basename "$f" .cf)
	[ "$(ngroups "$ex")" -gt 1 ] && continue # a grid: below
	g=$(group "$ex")
	ns="1 2 3 4"
	[ -n "${SAN:-}" ] && ns="2 4"
	for n in $ns; do
		extra="-D $g=$n"
		[ $n -eq 3 ] && extra="$extra $(sizes3 "$ex")"
		for s in spec vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
			if [ "$s" = spec ]; then set -- $extra; else set -- $extra "--schedule=$s"; fi
			e2e "e2e: $ex $s N=$n" "$out/$ex-$(tag "$s")-$n" $n "$f" --backward "$@"
		done
	done
done

# auto on a calibrated profile takes a schedule per collective (a mix the
# loop above does not build): on the 8-rank Xeon profile of lease 36 each
# of these takes two or three of fuse(ring, m = 2), fuse(ring) and vanilla
# for its forward and backward collectives; run on 3 ranks, odd where the
# profile's 8 is not
xp=tests/fixtures/prof/2026-11-28-Xeon16-lease36-cpu-8ranks.prof
for ex in mlp attention transformer; do
	set -- -D tp=3 $(sizes3 "$ex") --schedule=auto --profile="$xp"
	kinds=$("$B/cfc" "examples/$ex.cf" --backward "$@" --explain 2>&1 |
		sed -n 's/.*; auto: \([^ ]*\), predicted.*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
	check "e2e: $ex auto on a profile takes a mix ($kinds)" test "$(echo $kinds | wc -w)" -ge 2
	e2e "e2e: $ex auto on a profile N=3" "$out/$ex-auto-prof-3" 3 "examples/$ex.cf" --backward "$@"
done

# tensor and data parallelism on a grid of tp x dp ranks (examples/tpdp.cf):
# 2x2 (its defaults), 2x3 and 3x2 under every kind, 1x4 and 4x1 under its
# own; tests/e2e/tpdp_window.cf, whose stages read the rank in the other
# group (forward only: it outputs a gathered tensor), on 2x2 and 2x3
grid() { # tp dp: sizes that divide
	echo "-D tp=$1 -D dp=$2 -D B=$((2 * $2)) -D S=$((16 * $1)) -D D=$((8 * $2)) -D F=$((8 * $1))"
}
grids="2x2 2x3 3x2 1x4 4x1"
[ -n "${SAN:-}" ] && grids="2x2 1x4"
for tpdp in $grids; do
	tp=${tpdp%x*} dp=${tpdp#*x}
	kinds="spec vanilla slice(2) fuse(ring) fuse(bidir) fuse(pairwise) fuse(ring,_m_=_2)"
	[ "$tpdp" = 1x4 ] || [ "$tpdp" = 4x1 ] && kinds=spec
	for s in $kinds; do
		s=$(echo "$s" | tr _ ' ')
		set -- $(grid "$tp" "$dp")
		[ "$tpdp" = 2x2 ] && set --
		[ "$s" = spec ] || set -- "$@" "--schedule=$s"
		e2e "e2e: tpdp $s ${tp}x$dp" "$out/tpdp-$(tag "$s")-$tpdp" $((tp * dp)) examples/tpdp.cf \
			--backward "$@"
	done
done
for s in spec vanilla "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
	for tpdp in 2x2 2x3; do
		tp=${tpdp%x*} dp=${tpdp#*x}
		if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
		e2e "e2e: tpdp_window $s ${tp}x$dp" "$out/tpdp_window-$(tag "$s")-$tpdp" $((tp * dp)) \
			tests/e2e/tpdp_window.cf -D tp="$tp" -D dp="$dp" -D B=$((2 * dp)) "$@"
	done
done

# a tensor named like a scratch buffer's offset macro
e2e "e2e: ws_names fuse(pairwise) N=4" "$out/ws_names" 4 tests/e2e/ws_names.cf \
	"--schedule=fuse(pairwise)"

# several groups of different sizes: the job is their grid (tp x dp ranks)
for s in spec vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
	if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
	e2e "e2e: groups 2x3 $s" "$out/groups-$(tag "$s")" 6 tests/e2e/groups.cf "$@"
done
for s in spec "fuse(bidir)"; do
	if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
	e2e "e2e: groups 3x2 $s" "$out/groups32-$(tag "$s")" 6 tests/e2e/groups.cf \
		-D tp=3 -D dp=2 "$@"
done
e2e "e2e: groups 2x4, an all_gather over each" "$out/groups_ag" 8 tests/e2e/groups_ag.cf
$MPIRUN -n 4 "$out/groups-spec/run" --check >"$out/groups-wrong.out" 2>&1
check "e2e: a grid of 6 ranks run on 4 is refused" grep -q \
	"model groups was compiled for groups of 2 x 3 = 6 ranks, but the communicator has 4" \
	"$out/groups-wrong.out"

# all_to_all with slots cut into the parts of each sender (m >= 2), whose
# parts are strided: 2-D, and 4-D behind a leading dim of extent 1 and 2
for c in "a2a2d" "a2a3d" "a2a3d -D A=2"; do
	spec=tests/e2e/${c%% *}.cf
	set -- $c
	shift
	for n in 2 3 4; do
		for s in "fuse(ring, m = 2)" "fuse(ring, m = 3)" "fuse(pairwise, m = 2)"; do
			e2e "e2e: $c $s N=$n" "$out/$(echo "$c" | tr -d ' =')-$(tag "$s")-$n" $n "$spec" \
				"$@" -D sp=$n "--schedule=$s"
		done
	done
done

# RoPE and grouped-query attention against NumPy (tests/rope_gqa.py): the
# meaning of the ops checked independently of the serial reference, which
# shares the runtime's calls. Needs Debian's python3-numpy.
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
	for s in vanilla "fuse(ring)" "fuse(bidir)"; do
		d="$out/rope_gqa-$(tag "$s")"
		sh scripts/build-model.sh "$B" "$d" tests/e2e/rope_gqa.cf "--schedule=$s" >"$d.log" 2>&1
		$MPIRUN -n 2 "$d/run" --iters 1 --warmup 0 --dump "$d/out.bin" \
			--dump-inputs "$d/in.bin" >"$d.out" 2>&1
		check "e2e: rope and grouped-query attention equal NumPy's, $s N=2" \
			/usr/bin/python3 tests/rope_gqa.py "$d/rope_gqa.h" "$d/in.bin" "$d/out.bin"
	done
else
	echo "SKIP e2e: rope and grouped-query attention against NumPy: no python3-numpy"
fi
