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

. tests/gradlib.sh

# gg NAME N SPEC ARGS...: tests/gradlib.sh's check of a backward (f64,
# --gradcheck: the forward, the gradients against the reference and
# finite differences, the pass's times) in this suite's directory. Under
# the sanitizers, only the runs of 2 ranks per group (8 for three groups):
# every spec and schedule kind, in a fraction of the time.
gg() {
	gname=$1 gn=$2
	shift 2
	case "$gn" in 2 | 4 | 8) ;; *) [ -n "${SAN:-}" ] && return ;; esac
	[ -n "${SAN:-}" ] && [ "$gn" = 4 ] && case "$gname" in *tp=4*) return ;; esac
	grad "$gname" "$out/$(echo "$gname" | tr -c 'a-zA-Z0-9\n' '_')" "$gn" "$@"
}

# Grids: d_g (d_w) reduce-scattered over dp, then all-reduced over sp
# whole, whatever the order the groups are declared in. The default
# schedule (fuse(ring), which the all_reduce cannot take: vanilla), auto,
# vanilla and fuse(pairwise), at every group size from 1 (a group of one
# rank under fuse(ring) is issue 48's item 11, closed).
for gs in "1 1" "2 1" "1 2" "2 2" "3 2" "2 3"; do
	set -- $gs
	for s in default vanilla auto "fuse(pairwise)"; do
		[ "$s" = default ] && a= || a=--schedule=$s
		gg "gradgrid: dp_sp dp=$1 sp=$2 $s" $(($1 * $2)) tests/gradgrid/dp_sp.cf \
			-D dp=$1 -D sp=$2 $a
	done
done
for gs in "2 2" "3 2"; do
	set -- $gs
	for s in default vanilla; do
		[ "$s" = default ] && a= || a=--schedule=$s
		gg "gradgrid: sp_dp dp=$1 sp=$2 $s" $(($1 * $2)) tests/gradgrid/sp_dp.cf \
			-D dp=$1 -D sp=$2 $a
	done
done
for m in grid3 grid3_rev; do
	for gs in "2 2 2" "3 2 1" "1 2 3" "2 1 2" "1 1 1"; do
		set -- $gs
		[ $m = grid3_rev ] && [ $(($1 * $2 * $3)) -lt 6 ] && continue
		for s in default vanilla; do
			[ "$s" = default ] && a= || a=--schedule=$s
			gg "gradgrid: $m dp=$1 sp=$2 tp=$3 $s" $(($1 * $2 * $3)) tests/gradgrid/$m.cf \
				-D dp=$1 -D sp=$2 -D tp=$3 $a
		done
	done
done

# An all_reduce with no free dimension: the default, vanilla, auto and
# slice(1) run it whole; a written choice that cuts is an error that says
# what it needs (never exit 70).
for gs in "2 2 2" "1 1 1" "3 2 1" "1 3 2"; do
	set -- $gs
	for s in default auto vanilla "slice(1)"; do
		[ "$s" = "slice(1)" ] && [ "$gs" != "2 2 2" ] && continue
		[ "$s" = default ] && a= || a=--schedule=$s
		gg "gradgrid: ar_whole dp=$1 sp=$2 tp=$3 $s" $(($1 * $2 * $3)) \
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
# kind at 1 and 2 ranks, some at the others.
for m in gather_out tmm; do
	for n in 1 2 3 4; do
		case $n in
		1) ss='vanilla slice(2) fuse(pairwise) fuse(ring) fuse(bidir) auto' ;;
		2) ss='vanilla slice(2) fuse(pairwise) fuse(ring) fuse(bidir) auto' ;;
		3) ss='vanilla fuse(ring) fuse(bidir)' ;;
		4) ss='vanilla fuse(pairwise) fuse(ring)' ;;
		esac
		for s in $ss; do
			gg "gradgrid: $m tp=$n $s" $n tests/gradgrid/$m.cf -D tp=$n --schedule="$s"
		done
	done
done
