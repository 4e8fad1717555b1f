#!/bin/sh
# Issue 48, items 8, 12 and 13 (tests/gradgrid/): gradients on grids whose
# all_reduce has no dimension to cut (any order of the groups, three
# groups), an all_reduce of a value split over every other group, the
# gradient of an all_gather whose result is an output, and a transposed
# batched left operand of matmul. Each spec is built with --backward in
# f64 and run on its ranks with --gradcheck: the forward must equal the
# serial reference (max_rel_err <= 1e-12), the parallel gradients the
# reference backward (grad_max_rel_err <= 1e-12) and central finite
# differences of the reference forward (fd_max_rel_err <= 1e-6), at
# every group size from 1 that divides the dims (grids: every group 1, 2
# or 3) under every schedule kind that applies.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/gradgrid
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

# grad NAME N SPEC ARGS...: builds SPEC with its backward, runs it on N
# ranks with --gradcheck and checks the three errors. Under the
# sanitizers, only the runs of 2 ranks per group (8 for three groups):
# every spec and schedule kind, in a fraction of the time.
grad() {
	name=$1 n=$2 spec=$3
	shift 3
	case "$n" in 2 | 4 | 8) ;; *) [ -n "${SAN:-}" ] && return ;; esac
	[ -n "${SAN:-}" ] && [ "$n" = 4 ] && case "$name" in *tp=4*) return ;; esac
	dir=$out/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
	if ! sh scripts/build-model.sh "$B" "$dir" "$spec" --backward "$@" >"$dir.log" 2>&1; then
		fail "$name (build)"
		tail -n 20 "$dir.log"
		return
	fi
	if ! $MPIRUN -n "$n" "$dir/run" --gradcheck --iters 1 --warmup 0 >"$dir.out" 2>&1; then
		fail "$name (run)"
		tail -n 20 "$dir.out"
		return
	fi
	e=$(field max_rel_err "$dir.out") g=$(field grad_max_rel_err "$dir.out")
	f=$(field fd_max_rel_err "$dir.out")
	if le "$e" 1e-12 && le "$g" 1e-12 && le "$f" 1e-6; then
		pass "$name (fd $f)"
	else
		fail "$name (forward $e, backward vs reference $g, vs finite differences $f)"
	fi
}

# Grids: d_g (d_w) reduce-scattered over dp, then all-reduced over sp
# whole, whatever the order the groups are declared in. The default
# schedule (fuse(ring), which the all_reduce cannot take: vanilla), auto,
# vanilla and fuse(pairwise); a group of one rank under fuse(ring) is
# issue 48's item 11, not these: there vanilla and fuse(pairwise) only.
# ok1 S G...: schedule S applies at these group sizes here.
ok1() {
	s=$1
	shift
	case "$s" in default | auto) for g in "$@"; do [ "$g" -gt 1 ] || return 1; done ;; esac
	return 0
}
for g in "1 1" "2 1" "1 2" "2 2" "3 2" "2 3"; do
	set -- $g
	for s in default vanilla auto "fuse(pairwise)"; do
		ok1 "$s" $g || continue
		[ "$s" = default ] && a= || a=--schedule=$s
		grad "gradgrid: dp_sp dp=$1 sp=$2 $s" $(($1 * $2)) tests/gradgrid/dp_sp.cf \
			-D dp=$1 -D sp=$2 $a
	done
done
for g in "2 2" "3 2"; do
	set -- $g
	for s in default vanilla; do
		[ "$s" = default ] && a= || a=--schedule=$s
		grad "gradgrid: sp_dp dp=$1 sp=$2 $s" $(($1 * $2)) tests/gradgrid/sp_dp.cf \
			-D dp=$1 -D sp=$2 $a
	done
done
for m in grid3 grid3_rev; do
	for g in "2 2 2" "3 2 1" "1 2 3" "2 1 2" "1 1 1"; do
		set -- $g
		[ $m = grid3_rev ] && [ $(($1 * $2 * $3)) -lt 6 ] && continue
		for s in default vanilla; do
			ok1 "$s" $g || continue
			[ "$s" = default ] && a= || a=--schedule=$s
			grad "gradgrid: $m dp=$1 sp=$2 tp=$3 $s" $(($1 * $2 * $3)) tests/gradgrid/$m.cf \
				-D dp=$1 -D sp=$2 -D tp=$3 $a
		done
	done
done

# An all_reduce with no free dimension: the default, vanilla, auto and
# slice(1) run it whole; a written choice that cuts is an error that says
# what it needs (never exit 70).
for g in "2 2 2" "1 1 1" "3 2 1" "1 3 2"; do
	set -- $g
	for s in default auto vanilla "slice(1)"; do
		ok1 "$s" $g || continue
		[ "$s" = "slice(1)" ] && [ "$g" != "2 2 2" ] && continue
		[ "$s" = default ] && a= || a=--schedule=$s
		grad "gradgrid: ar_whole dp=$1 sp=$2 tp=$3 $s" $(($1 * $2 * $3)) \
			tests/gradgrid/ar_whole.cf -D dp=$1 -D sp=$2 -D tp=$3 $a
	done
done
for s in "fuse(ring)" "slice(2)" "fuse(pairwise)"; do
	"$CFC" tests/gradgrid/ar_whole.cf --backward --schedule="$s" -o "$out/arw.c" \
		>"$out/arw.err" 2>&1
	rc=$?
	check "gradgrid: ar_whole $s is an input error (exit 1, no output)" \
		sh -c "[ $rc -eq 1 ] && [ ! -e '$out/arw.c' ]"
	check "gradgrid: ar_whole $s: the error names what it needs" grep -q \
		"ar_whole.cf:11:7: error: --schedule $s on y needs a dimension of x @ w (\[6,6\]) that no group splits and that divides into 2 slices" \
		"$out/arw.err"
done
printf 'model e { group dp = 2; group sp = 2; group tp = 2; size B = 4, K = 4, D = 4;\n  in x : [B, K] split B over dp, K over tp; weight w : [K, D] split K over tp, D over sp;\n  y = all_reduce(x @ w); out y;\n  schedule { y: slice(2); } }\n' >"$out/named.cf"
"$CFC" "$out/named.cf" >"$out/named.err" 2>&1
rc=$?
check "gradgrid: a named slice(2) on a whole all_reduce is an input error" [ $rc -eq 1 ]
check "gradgrid: ... at its entry" grep -q \
	"named.cf:4:17: error: slice(2) on y needs a dimension of x @ w (\[4,4\]) that no group splits and that divides into 2 slices" \
	"$out/named.err"

# One group at every size from 1 to 4 (the dims divide), every schedule
# kind at 2 ranks, some at the others (fuse(ring), fuse(bidir) and auto
# from 2 ranks: one rank under them is issue 48's item 11).
for m in gather_out tmm; do
	for n in 1 2 3 4; do
		case $n in
		1) ss='vanilla slice(2) fuse(pairwise)' ;;
		2) ss='vanilla slice(2) fuse(pairwise) fuse(ring) fuse(bidir) auto' ;;
		3) ss='vanilla fuse(ring) fuse(bidir)' ;;
		4) ss='vanilla fuse(pairwise) fuse(ring)' ;;
		esac
		for s in $ss; do
			grad "gradgrid: $m tp=$n $s" $n tests/gradgrid/$m.cf -D tp=$n --schedule="$s"
		done
	done
done
