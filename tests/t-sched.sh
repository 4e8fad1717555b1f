#!/bin/sh
# The schedules: lowering, the verifier and the schedule emitters.
# Every example with its backward pass (cfc --backward).
#  golden:   --emit=sched and --emit=sched-dot of every example under
#            fuse(ring), fuse(bidir), slice(4) and vanilla at N = 4, diffed
#            against tests/golden/sched/ (UPDATE=1 rewrites them);
#  property: every example under every schedule kind compiles (lowering
#            and the verifier run on every compile) for every N in 1..64,
#            with sizes chosen to divide, and every collective's summary
#            says "verify: ok"; the grid of tpdp for tp, dp in 1..4 and
#            larger pairs up to 64 ranks a group;
#  mutation: the verifier rejects planted bugs (the CUnit suites
#            verify_mutation and grid_mutation), naming rank, step and
#            slice (and the ranks in the other groups);
#  pictures: --emit=svg is XML, --emit=png a PNG; --explain says one line
#            per collective.
. tests/lib.sh
out=$B/tests/sched
mkdir -p "$out" tests/golden/sched
EXAMPLES="mlp attention mamba ulysses zero_dp transformer llama tpdp llama_tpdp"

# Sizes for group size $1 that every kind below divides.
sizes() {
	n=$1
	case $2 in
	mlp) echo "-D tp=$n -D S=$((8 * n)) -D D=8 -D F=$((4 * n))" ;;
	attention) echo "-D tp=$n -D S=$((8 * n)) -D H=$n -D D=$((4 * n))" ;;
	mamba) echo "-D tp=$n -D S=$((8 * n)) -D D=$((4 * n))" ;;
	ulysses) echo "-D sp=$n -D S=$((8 * n)) -D H=$((4 * n)) -D D=$((8 * n))" ;;
	zero_dp) echo "-D dp=$n -D T=$((4 * n)) -D D=$((4 * n)) -D F=8" ;;
	transformer) echo "-D tp=$n -D S=$((8 * n)) -D H=$n -D D=$((4 * n)) -D F=$((4 * n))" ;;
	llama) echo "-D tp=$n -D S=$((8 * n)) -D H=$((2 * n)) -D KV=$n -D D=$((4 * n)) -D F=$((4 * n))" ;;
	esac
}
# The collectives of example $1 left in the schedule or --explain in file
# $2: ncoll less those coalescing packed, plus one per pack.
ncoll_in() {
	sed -n 's/.*coalesced[^:]*: \([0-9]*\) all_reduces.*/\1/p' "$2" |
		awk -v n="$(ncoll "$1")" '{ n += 1 - $1 } END { print n }'
}
# Sizes of grid example $3 (tpdp, llama_tpdp) for tp = $1 and dp = $2 that
# every kind below divides.
gsizes() {
	case $3 in
	llama_tpdp) echo "-D tp=$1 -D dp=$2 -D B=$((2 * $2)) -D S=$((8 * $1)) -D H=$((2 * $1)) -D KV=$1 -D D=$((8 * $1)) -D F=$((4 * $1))" ;;
	*) echo "-D tp=$1 -D dp=$2 -D B=$((2 * $2)) -D S=$((8 * $1)) -D D=$((4 * $2)) -D F=$((4 * $1))" ;;
	esac
}

# The number of collectives of example $1 with its backward pass: the
# forward's and the backward's (zero_dp's are all in its backward).
ncoll() {
	case $1 in
	mlp | attention | mamba) echo 5 ;;
	ulysses) echo 12 ;;
	zero_dp) echo 2 ;;
	tpdp) echo 7 ;;
	transformer) echo 28 ;;
	llama) echo 12 ;;
	llama_tpdp) echo 84 ;; # 16 forward, 68 backward (4 blocks)
	esac
}

# Every example is compiled with its backward pass: the goldens, the
# proofs for N = 1..64, the pictures and --explain cover both passes.
passes() {
	echo --backward
}

# ---- golden ----
for ex in $EXAMPLES; do
	extra=""
	[ "$ex" = ulysses ] && extra="-D H=16" # slice(4) of the heads: 4*N of them
	for kind in "fuse(ring)" "fuse(bidir)" "slice(4)" vanilla; do
		k=$(echo "$kind" | tr -d '()' | sed 's/fuse//')
		for emit in sched sched-dot; do
			f=$ex.$k.$emit
			# shellcheck disable=SC2086
			if "$CFC" "examples/$ex.cf" $extra $(passes "$ex") --schedule="$kind" --emit=$emit -o "$out/$f"; then
				golden "sched golden: $f" "$out/$f" "tests/golden/sched/$f"
			else
				fail "sched golden: $f (cfc failed)"
			fi
		done
	done
done

# ---- property ----
# points EX: the group sizes EX is proved for: N = 1..64, or a grid's tp x dp
# for tp, dp in 1..4 and larger pairs up to 64 ranks a group; what: in words.
points() {
	if [ "$(ngroups "$1")" -gt 1 ]; then
		for tp in 1 2 3 4; do for dp in 1 2 3 4; do printf '%s ' "${tp}x$dp"; done; done
		echo 8x2 2x8 5x3 7x9 16x4 4x16 64x1 1x64
	else
		seq 1 64
	fi
}
what() { if [ "$(ngroups "$1")" -gt 1 ]; then echo "tp x dp in 1..4 x 1..4 and 8x2 .. 1x64"; else echo "N = 1..64"; fi; }
psizes() { case $2 in *x*) gsizes "${2%x*}" "${2#*x}" "$1" ;; *) sizes "$2" "$1" ;; esac; }
# keep1 POINT: --keep-group1 where a group of the point has one rank (cfc
# takes the collectives over it out by default, t-group1; kept, each is a
# schedule of its kind on one rank, which the property proves too)
keep1() { case "x$1x" in *x1x*) echo --keep-group1 ;; esac; }

# prop EX KIND FILE: compiles EX under KIND for every point; the last line
# of FILE is the PASS or FAIL line, the lines before it the details.
prop() {
	unset IFS
	ex=$1 kind=$2 res=$3
	want=$(ncoll "$ex") bad=""
	: >"$res"
	for n in $(points "$ex"); do
		# shellcheck disable=SC2046
		"$CFC" "examples/$ex.cf" $(psizes "$ex" $n) $(passes "$ex") $(keep1 $n) --schedule="$kind" --emit=sched \
			-o "$res.txt" 2>"$res.err"
		rc=$?
		ok=$(grep -c '^verify: ok ' "$res.txt" 2>/dev/null)
		want=$(ncoll_in "$ex" "$res.txt")
		if [ $rc -ne 0 ] || [ "$ok" != "$want" ]; then
			bad="$bad $n"
			echo "$ex $kind N=$n: exit $rc, $ok of $want verified" >>"$res"
			head -n 5 "$res.err" >>"$res"
		fi
	done
	if [ -z "$bad" ]; then
		echo "PASS sched property: $ex $kind verifies for $(what "$ex")" >>"$res"
	else
		echo "FAIL sched property: $ex $kind (N =$bad)" >>"$res"
	fi
}

KINDS="fuse(ring)|fuse(bidir)|fuse(pairwise)|fuse(ring, m = 2)|fuse(pairwise, m = 2)|slice(4)|vanilla|auto"
for ex in $EXAMPLES; do
	k=0
	IFS='|'
	for kind in $KINDS; do
		prop "$ex" "$kind" "$out/prop.$ex.$k" &
		k=$((k + 1))
	done
	unset IFS
	wait
	j=0
	while [ $j -lt $k ]; do
		cat "$out/prop.$ex.$j"
		j=$((j + 1))
	done
done

# ---- mutation ----
"$B/tests/unit_compiler" verify_mutation >"$out/mutation.out" 2>&1
"$B/tests/unit_compiler" grid_mutation >>"$out/mutation.out" 2>&1
sed -n 's/^  Test: \(.*\) \.\.\.passed$/PASS sched mutation: \1/p
s/^  Test: \(.*\) \.\.\.FAILED$/FAIL sched mutation: \1/p' "$out/mutation.out"
grep -q '^  Test: ' "$out/mutation.out" || fail "sched mutation: the suite did not run"

# ---- pictures and --explain ----
for ex in $EXAMPLES; do
	check "sched svg: $ex" sh -c "'$CFC' examples/$ex.cf $(passes "$ex") --emit=svg -o '$out/$ex.svg' &&
		python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '$out/$ex.svg'"
	check "sched png: $ex" sh -c "'$CFC' examples/$ex.cf $(passes "$ex") --emit=png -o '$out/$ex.png' &&
		head -c 8 '$out/$ex.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
	if "$CFC" "examples/$ex.cf" $(passes "$ex") --explain >"$out/$ex.explain"; then
		# a line per collective: fuse(ring), the default, or slice(2) for
		# a pack (coalesce.c: a pack has no region to fuse)
		check "explain: $ex" test "$(grep -cE ': (fuse\(|slice\(2\) no region)' "$out/$ex.explain")" -eq \
			"$(ncoll_in "$ex" "$out/$ex.explain")"
	else
		fail "explain: $ex (cfc failed)"
	fi
done
check "explain: mamba stops before the scan" grep -q \
	"all_gather xa: fuse(ring) region \[.*\] stops before hs=scan (examples/mamba.cf:[0-9]*): not slice-local along S" \
	"$out/mamba.explain"
check "graph svg: mlp" sh -c "'$CFC' examples/mlp.cf --emit=graph-svg -o '$out/graph.svg' &&
	python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '$out/graph.svg'"
