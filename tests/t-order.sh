#!/bin/sh
# The whole-pass order (compiler/order.c, issue 51).
#  exposure: per example, the transfers waited with no compute since their
#            post (the verifier's exposed=, summed over the collectives)
#            and the collectives that are not tail-free, forward and
#            backward, at the examples' own sizes, under the whole-pass
#            order asked for (--order=pass) with and without coalescing,
#            under --order=region --coalesce=0 (the region-by-region
#            order, nothing packed) and under the defaults (what fits the
#            memory bound, the region order's peak), diffed against
#            tests/golden/order/exposed.txt (UPDATE=1 rewrites it).
. tests/lib.sh
out=$B/tests/order
mkdir -p "$out"
EXAMPLES="attention llama llama_tpdp mamba mlp tpdp transformer ulysses zero_dp"

# counts EXAMPLE [FLAGS]: "forward E T backward E T" of --emit=sched
counts() {
	_ex=$1
	shift
	"$CFC" "examples/$_ex.cf" --backward --emit=sched -o - "$@" 2>&1 | awk '
		/^backward schedule / { bwd = 1 }
		/^verify: ok/ {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^exposed=/) { split($i, a, "="); e[bwd] += a[2] }
				if ($i == "tail-free=no") t[bwd]++
			}
		}
		END { printf "forward exposed=%d tail-free=no:%d  backward exposed=%d tail-free=no:%d\n",
		      e[0], t[0], e[1], t[1] }'
}

: >"$out/exposed.txt"
# before: region after region, nothing packed (--order=region
# --coalesce=0); the whole-pass order alone (--order=pass
# --coalesce=0); the whole-pass order, small all_reduces coalesced
# (--order=pass: asked for, so over the default memory bound too);
# after: the defaults (the first of those that fits the bound)
for mode in region pass-nocoal pass default; do
	case $mode in
	region) flags="${ORDER_FLAG-"--order=region"} --coalesce=0" ;;
	pass-nocoal) flags="--order=pass --coalesce=0" ;;
	pass) flags=--order=pass ;;
	default) flags= ;;
	esac
	for ex in $EXAMPLES; do
		printf '%-12s %-11s %s\n' "$ex" $mode "$(counts $ex $flags)"
	done
done >>"$out/exposed.txt"
golden order-exposed "$out/exposed.txt" tests/golden/order/exposed.txt

# the memory bound: by default no example's step holds more than in the
# region order with nothing packed (its peak per rank, --explain's
# memory: line), and --explain says which configuration was kept
# peak FILE: the peak of an --explain output
peak() { sed -n 's/^memory: peak \([0-9]*\) .*/\1/p' "$1"; }
for ex in $EXAMPLES; do
	"$CFC" "examples/$ex.cf" --backward --explain -o "$out/pk" --order=region --coalesce=0 \
		>"$out/$ex.region.explain"
	"$CFC" "examples/$ex.cf" --backward --explain -o "$out/pk" >"$out/$ex.default.explain"
	r=$(peak "$out/$ex.region.explain") d=$(peak "$out/$ex.default.explain")
	check "order: $ex's default peak $d within the region order's $r" \
		sh -c "[ -n '$r' ] && [ -n '$d' ] && [ '$d' -le '$r' ] &&
		       grep -q '^memory bound: peak $d bytes per rank,* within $r (the region order.s peak)' \
		       '$out/$ex.default.explain'"
done

# bitwise: every example with its backward, built under the whole-pass
# order and under --order=region, run on 4 ranks (tpdp: 2x2) and zero_dp
# and transformer also on 3 (sizes that divide): the same output and
# gradients bit for bit (the order moves whole stages, never the
# arithmetic of one), and both equal to the serial reference
# (max_rel_err <= 1e-5, grad_max_rel_err <= 1e-4 as in t-e2e).
export CF_OPT="-O1 -fno-var-tracking"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
# run NAME DIR N SPEC ARGS...: builds and runs once; the driver's line in DIR.run
run() {
	_dir=$2 _n=$3 _spec=$4
	shift 4
	sh scripts/build-model.sh "$B" "$_dir" "$_spec" --backward "$@" >"$_dir.log" 2>&1 &&
		$MPIRUN -n "$_n" "$_dir/run" --check --iters 1 --warmup 0 >"$_dir.run" 2>&1
}
same() { # NAME N SPEC ARGS...
	_name=$1 _n2=$2 _sp=$3
	shift 3
	_d=$out/$(echo "$_name" | tr ' =' '__')
	# a budget both fit: each as asked, coalescing as the default makes it
	if ! run "$_name" "$_d-pass" "$_n2" "$_sp" --order=pass --memory=1G "$@" ||
		! run "$_name" "$_d-region" "$_n2" "$_sp" --order=region --memory=1G "$@"; then
		fail "order: $_name (build or run)"
		tail -n 20 "$_d-pass.log" "$_d-pass.run" "$_d-region.log" "$_d-region.run" 2>/dev/null
		return
	fi
	_e=$(field max_rel_err "$_d-pass.run") _g=$(field grad_max_rel_err "$_d-pass.run")
	_c1="$(field checksum "$_d-pass.run") $(field grad_checksum "$_d-pass.run")"
	_c2="$(field checksum "$_d-region.run") $(field grad_checksum "$_d-region.run")"
	if ! le "$_e" 1e-5 || ! le "$_g" 1e-4; then
		fail "order: $_name (max_rel_err $_e, grad_max_rel_err $_g)"
	elif [ "$_c1" != "$_c2" ]; then
		fail "order: $_name (checksums differ: pass $_c1, region $_c2)"
	else
		pass "order: $_name bitwise as --order=region ($_c1)"
	fi
}
for ex in $EXAMPLES; do
	[ $ex = tpdp ] && { same "$ex 2x2" 4 examples/$ex.cf; continue; }
	same "$ex N=4" 4 examples/$ex.cf
done
same "zero_dp N=3" 3 examples/zero_dp.cf -D dp=3 -D T=96 -D D=48
same "transformer N=3" 3 examples/transformer.cf -D tp=3 -D S=96 -D D=48 -D H=6
same "ulysses N=2 fuse(bidir)" 2 examples/ulysses.cf -D sp=2 --schedule="fuse(bidir)"
# several collectives in flight (order.c's 2b): a tp all_gather hosting a
# dp all_reduce of library collectives (slice(4)), tpdp at 4 x 1, under
# bidir, and at 3 x 2 under slice(2), each hosting at least one
# collective's program
# nest_c SPEC ARGS...: its C under the pass order, compiled with -Wshadow
nest_c() {
	"$CFC" "$@" --backward --order=pass --memory=1G --emit=c -o "$out/nest.c" &&
		mpicc -std=c11 -Wall -Wextra -Wshadow -Werror -Iruntime -c "$out/nest.c" \
			-o "$out/nest.o"
}
for c in "llama_tpdp slice(4)|4|examples/llama_tpdp.cf|--schedule=slice(4)" \
	"tpdp 4x1|4|examples/tpdp.cf|-D tp=4 -D dp=1 -D S=32" \
	"tpdp 2x2 fuse(bidir)|4|examples/tpdp.cf|--schedule=fuse(bidir)" \
	"tpdp 3x2 slice(2)|6|examples/tpdp.cf|-D tp=3 -D S=24 -D F=48 --schedule=slice(2)"; do
	name=${c%%|*} rest=${c#*|}
	nr=${rest%%|*} rest=${rest#*|}
	spec=${rest%%|*} args=${rest#*|}
	# shellcheck disable=SC2086
	k=$("$CFC" "$spec" $args --backward --order=pass --memory=1G --emit=sched -o - |
		grep -c 'hosted: run whole')
	check "order: $name hosts a collective's program ($k)" test "$k" -ge 1
	# its C: the hosted program's locals apart from its host's
	# shellcheck disable=SC2086
	check "order: $name's C compiles with -Wshadow -Werror" nest_c "$spec" $args
	# shellcheck disable=SC2086
	same "$name" "$nr" "$spec" $args
done
