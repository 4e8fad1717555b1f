#!/bin/sh
# Coalescing (compiler/coalesce.c, docs/LANGUAGE.md "Coalescing"):
#  golden:  --emit=sched and --explain of a data-parallel model with
#           biases (tests/coalesce/dp_bias.cf, its backward) showing the
#           packed all_reduce and its slots; the exposed collectives
#           (tail-free=no) of the transformer's and llama's backward with
#           coalescing off and on (tests/coalesce/exposed.txt); --explain
#           of a tp x dp grid whose norm gains' gradients make two packs,
#           a reader of a member waiting for the pack (grid.cf), and of
#           two pairs that would make two packs wait for each other
#           (cross.cf: one pair packed);
#  e2e:     forward and backward in f32 against the serial reference
#           (forward 1e-5, gradients 1e-4 as tests/t-e2e.sh), coalescing
#           on and off, of the transformer, llama and dp_bias, and a
#           forward that packs two all_reduces (tests/coalesce/fwd.cf);
#  grad:    f64 gradients against central finite differences
#           (tests/gradlib.sh) of the same and of grid (N = 1..4) and
#           cross, coalescing on and off, and the packed gradients
#           bitwise those of the unpacked where every reduction is over
#           2 ranks;
#  option:  --coalesce and the schedule section's `coalesce = BYTES;`,
#           and a bad --coalesce refused; the memory bound: the default
#           packs only what keeps the peak within the region order's
#           (dp_bias's pack is over it), a --memory budget packs more.
# The goldens and --explain run under --memory=1M (a budget everything
# here fits: the packs as coalescing makes them, in the whole-pass order).
# The verifier's rejection of planted bad packs is the CUnit suite
# "coalesce" (tests/unit/test_coalesce.c); bad settings in a spec are
# tests/errors/coalesce_*.cf.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/coalesce
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
G=tests/coalesce

# ---- golden ----
M=--memory=1M
"$CFC" $G/dp_bias.cf --backward $M --emit=sched -o "$out/dp_bias.sched" 2>&1
golden "coalesce: dp_bias --emit=sched" "$out/dp_bias.sched" $G/dp_bias.sched
"$CFC" $G/dp_bias.cf --backward $M --explain -o "$out/dp_bias-x" >"$out/dp_bias.explain" 2>&1
golden "coalesce: dp_bias --explain" "$out/dp_bias.explain" $G/dp_bias.explain
for ex in transformer llama; do
	for c in 0 1MiB; do
		k=$("$CFC" examples/$ex.cf --backward --emit=sched --coalesce=$c -o - | grep -c 'tail-free=no')
		echo "$ex --coalesce=$c: $k exposed"
	done
done >"$out/exposed.txt"
golden "coalesce: exposed collectives of the backward, off and on" "$out/exposed.txt" $G/exposed.txt
# a reader of a member before the last member waits for the pack (grid:
# the tp and the dp reductions of the norm gains, two packs); members
# that would make two packs wait for each other are kept apart (cross)
"$CFC" $G/grid.cf --backward $M --explain -o "$out/grid-x" >"$out/grid.explain" 2>&1
golden "coalesce: grid --explain (a reader between members)" "$out/grid.explain" $G/grid.explain
"$CFC" $G/cross.cf --backward $M --explain -o "$out/cross-x" >"$out/cross.explain" 2>&1
golden "coalesce: cross --explain (no two packs wait for each other)" "$out/cross.explain" \
	$G/cross.explain

# ---- the option and the setting ----
n_packs() { "$CFC" "$@" --explain -o "$out/opt" 2>&1 | grep -c 'coalesced cf_'; }
check "coalesce: the default packs none of dp_bias's gradients (the pack is over the memory bound)" \
	sh -c "test $(n_packs $G/dp_bias.cf --backward) = 0 &&
	       '$CFC' $G/dp_bias.cf --backward --explain -o '$out/bnd' |
	       grep -q 'memory bound: peak 9216 bytes per rank within 9216 (the region order.s peak) with order=pass, coalesce off; over it: order=pass, coalesce as the spec or the default holds 12544'"
check "coalesce: --memory=12544 packs dp_bias's gradients" \
	test "$(n_packs $G/dp_bias.cf --backward --memory=12544)" = 1
check "coalesce: the spec's memory = 12544 packs them too" sh -c \
	"sed 's|^  out y;|  out y;\\n  schedule { memory = 12544; }|' $G/dp_bias.cf >'$out/mem.cf' &&
	 test \$('$CFC' '$out/mem.cf' --backward --explain -o '$out/memx' | grep -c 'coalesced cf_') = 1"
check "coalesce: --memory=9216 packs none (recomputing cannot make room for the pack)" \
	test "$(n_packs $G/dp_bias.cf --backward --memory=9216)" = 0
check "coalesce: --coalesce=0 packs none" test "$(n_packs $G/dp_bias.cf --backward --coalesce=0)" = 0
# d_w1 and d_w2 are 1920 bytes each (f64): a threshold of 512 bytes packs
# the biases alone, and the spec's setting does the same, --coalesce over it
check "coalesce: --coalesce=512 packs the biases alone" sh -c \
	"'$CFC' $G/dp_bias.cf --backward --coalesce=512 $M --explain -o '$out/o512' | grep -q 'coalesced cf_dpacked0: 2 all_reduces'"
sed 's|^  out y;|  out y;\n  schedule { coalesce = 512; }|' $G/dp_bias.cf >"$out/set512.cf"
check "coalesce: the schedule section's coalesce = 512" sh -c \
	"'$CFC' '$out/set512.cf' --backward $M --explain -o '$out/s512' | grep -q 'coalesced cf_dpacked0: 2 all_reduces'"
check "coalesce: --coalesce=8KiB over the section's 512" sh -c \
	"'$CFC' '$out/set512.cf' --backward --coalesce=8KiB $M --explain -o '$out/s8k' | grep -q 'coalesced cf_dpacked0: 4 all_reduces'"
"$CFC" $G/dp_bias.cf --coalesce=-1 -o "$out/bad" >"$out/bad.out" 2>&1
rc=$?
check "coalesce: --coalesce=-1 refused (exit 2, no output)" test $rc = 2 -a ! -e "$out/bad"
check "coalesce: --coalesce=-1 says why" grep -q "cfc: --coalesce wants a count of bytes from 0 to 2^40 (or of KiB or MiB), not '-1'" "$out/bad.out"
"$CFC" $G/dp_bias.cf --coalesce=3GB -o "$out/bad" >/dev/null 2>&1
check "coalesce: --coalesce=3GB refused" test $? = 2

# ---- end to end against the serial reference (f32) ----
sz() { # example n: small sizes that divide by n
	case $1 in
	transformer) echo "-D tp=$2 -D B=1 -D S=$((4 * $2)) -D H=$2 -D D=$((4 * $2)) -D F=$((4 * $2))" ;;
	llama) echo "-D tp=$2 -D B=1 -D S=$((4 * $2)) -D H=$((2 * $2)) -D KV=$2 -D D=$((4 * $2)) -D F=$((4 * $2))" ;;
	dp_bias) echo "-D dp=$2 --type=f32" ;;
	grid) case $2 in # tp x dp
		1) echo "-D tp=1 -D dp=1" ;; 2) echo "-D tp=2 -D dp=1" ;;
		3) echo "-D tp=3 -D dp=1 -D S=12 -D F=12" ;; 4) echo "-D tp=2 -D dp=2" ;; esac ;;
	cross) case $2 in
		2) echo "-D tp=2 -D dp=1" ;; 4) echo "-D tp=2 -D dp=2" ;; esac ;;
	fwd) echo "-D tp=$2 --type=f32" ;;
	esac
}
spec_of() { [ -f "examples/$1.cf" ] && echo "examples/$1.cf" || echo "$G/$1.cf"; }
# packed NAME DIR C: the C in DIR packs (C not 0) or does not (C = 0)
packed() {
	k=$(cat "$2"/*.c 2>/dev/null | grep -c '= pack(')
	if [ "$3" = 0 ]; then check "$1 packs none" test "$k" = 0; else check "$1 packs" test "$k" -gt 0; fi
}
# coalescing is on by default: tests/t-e2e.sh runs every example with it
# at N = 1..4; here the models whose small all_reduces are packed, on
# and off (one N)
for run in transformer:1:1MiB transformer:3:1MiB transformer:3:0 llama:1:1MiB llama:3:1MiB \
	llama:3:0 dp_bias:1:1MiB dp_bias:2:1MiB dp_bias:3:1MiB dp_bias:4:1MiB dp_bias:3:0 \
	fwd:1:1MiB fwd:2:1MiB fwd:3:1MiB fwd:4:1MiB fwd:3:0; do
	m=${run%%:*} n=${run#*:} c=${n#*:} n=${n%%:*}
	# shellcheck disable=SC2046
	e2e32 "coalesce: e2e $m N=$n coalesce=$c" "$out/e2e-$m-$n-$c" $n "$(spec_of $m)" \
		$(sz $m $n) --coalesce=$c
	# a group of one rank moves nothing: nothing is packed at N = 1
	packed "coalesce: e2e $m N=$n coalesce=$c" "$out/e2e-$m-$n-$c" $([ $n = 1 ] && echo 0 || echo $c)
done

# ---- f64 gradients against finite differences ----
. tests/gradlib.sh
for run in dp_bias:1:1MiB dp_bias:2:1MiB dp_bias:3:1MiB dp_bias:4:1MiB dp_bias:2:0 \
	fwd:2:1MiB fwd:3:1MiB fwd:2:0 transformer:2:1MiB transformer:2:0 grid:1:1MiB \
	grid:2:1MiB grid:3:1MiB grid:4:1MiB grid:4:0 cross:2:1MiB cross:4:1MiB cross:4:0; do
	m=${run%%:*} n=${run#*:} c=${n#*:} n=${n%%:*}
	# shellcheck disable=SC2046
	grad "coalesce: grad $m N=$n coalesce=$c" "$out/grad-$m-$n-$c" $n "$(spec_of $m)" \
		$(sz $m $n | sed 's/--type=f32//') --coalesce=$c
	packed "coalesce: grad $m N=$n coalesce=$c" "$out/grad-$m-$n-$c" $([ $n = 1 ] && echo 0 || echo $c)
done
# packed and unpacked gradients bitwise the same where packing leaves the
# arithmetic as it was: every reduction here is over 2 ranks, a + b either
# way (at 3 ranks the ring's slices, so the order of the sums, move)
for run in dp_bias:2 fwd:2 transformer:2 grid:4 cross:4; do
	m=${run%%:*} n=${run#*:} d=$out/grad-$m-$n
	on=$(field grad_checksum "$d-1MiB.out") off=$(field grad_checksum "$d-0.out")
	check "coalesce: grad $m N=$n packed = unpacked, bitwise ($on)" test -n "$on" -a "$on" = "$off"
done
