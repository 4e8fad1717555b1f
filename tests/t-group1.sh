#!/bin/sh
# Groups of one rank (issue 48, item 11): what a user gets with -D tp=1
# for a one-GPU run. A collective over a group of 1 is taken out (its
# readers read its input), or with --keep-group1 a copy; under fuse(ring) and fuse(bidir) its trace line named the
# rank that no stage declared, and the C did not compile. Every kind of
# schedule, forward and backward, checked against the serial reference:
#  - tests/e2e/group1.cf (all_gather, reduce_scatter, all_reduce and an
#    all_to_all over tp, an all_to_all over dp, the weights' gradients
#    all-reduced over dp) at tp x dp = 1x1, 1x2 and 2x1;
#  - examples/tpdp.cf, the grid example, at 1x1, 1x2 and 2x1 (t-e2e runs
#    the one-group examples at N = 1 under every kind, and tpdp only
#    under its own schedule where one group is 1).
# Small sizes (-D) keep each build and run short.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/group1
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

# By default cfc takes the collectives over a group of one out
# (compiler/elide.c): their readers read their inputs. --keep-group1 keeps
# each as a copy, the way a collective over tp runs on one rank; both are
# checked.
for tpdp in 1x1 1x2 2x1; do
	tp=${tpdp%x*} dp=${tpdp#*x}
	for keep in "" --keep-group1; do
	for s in spec vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
		if [ "$s" = spec ]; then set -- $keep; else set -- $keep "--schedule=$s"; fi
		k=${keep:+-keep}
		e2e32 "group1: group1.cf $s ${tpdp}${k}" "$out/group1-$(tag "$s")-$tpdp$k" $((tp * dp)) \
			tests/e2e/group1.cf -D tp=$tp -D dp=$dp "$@"
		e2e32 "group1: tpdp $s ${tpdp}${k}" "$out/tpdp-$(tag "$s")-$tpdp$k" $((tp * dp)) \
			examples/tpdp.cf -D tp=$tp -D dp=$dp -D B=$((2 * dp)) -D S=$((8 * tp)) \
			-D D=8 -D F=$((8 * tp)) "$@"
	done
	done
done

# what is taken out: every collective over a group of one, forward and
# backward, but those whose result must be a tensor of its own (group1.cf's
# a and b: an output made of another output, of an input); none over a
# group of two; none with --keep-group1
colls() { # SPEC ARGS...: FORWARD_BACKWARD, the collectives of each pass
	"$B/cfc" "$@" --backward --emit=sched 2>&1 |
		sed -n 's/^\(backward \)\{0,1\}schedule .*, \([0-9]*\) collectives$/\2/p' |
		paste -s -d _ -
}
while read -r want args; do
	# shellcheck disable=SC2086
	got=$(colls $args)
	if [ "$got" = "$want" ]; then
		pass "group1: collectives of $args: $got"
	else
		fail "group1: collectives of $args: $got (want $want)"
	fi
done <<EOF
2_0 tests/e2e/group1.cf -D tp=1 -D dp=1
5_7 tests/e2e/group1.cf -D tp=1 -D dp=1 --keep-group1
2_3 tests/e2e/group1.cf -D tp=1 -D dp=2
0_0 examples/tpdp.cf -D tp=1 -D dp=1
0_2 examples/tpdp.cf -D tp=1 -D dp=2
2_3 examples/tpdp.cf -D tp=2 -D dp=1
0_0 examples/llama.cf -D tp=1
4_8 examples/llama.cf -D tp=1 --keep-group1
4_7 examples/llama.cf -D tp=2
EOF

# every example with its groups of one taken out, forward and backward,
# under each kind (and the grids at 1 x 2, 2 x 1, 1 x 3, 3 x 1): cfc
# compiles it and proves what is left
for ex in mlp attention mamba transformer llama ulysses zero_dp; do
	g=$(sed -n 's/^ *group \([a-z]*\) .*/\1/p' "examples/$ex.cf" | head -n 1)
	bad=""
	for s in spec vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" auto; do
		if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
		o=$("$B/cfc" "examples/$ex.cf" -D "$g=1" --backward "$@" --emit=sched 2>&1) &&
			! echo "$o" | grep -q FAILED || bad="$bad $s"
	done
	if [ -z "$bad" ]; then pass "group1: $ex at $g = 1 proves under every kind"; else fail "group1: $ex at $g = 1:$bad"; fi
done
for ex in tpdp llama_tpdp; do
	bad=""
	for p in 1x2 2x1 3x1 1x3; do
		tp=${p%x*} dp=${p#*x}
		case $ex in
		tpdp) sz="-D B=$((2 * dp)) -D S=$((8 * tp)) -D D=$((8 * dp)) -D F=$((8 * tp))" ;;
		*) sz="-D B=$((2 * dp)) -D S=$((8 * tp)) -D H=$((2 * tp)) -D KV=$tp -D D=$((8 * tp * dp)) -D F=$((4 * tp))" ;;
		esac
		for s in spec vanilla "slice(2)" "fuse(ring)"; do
			if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
			# shellcheck disable=SC2086
			o=$("$B/cfc" "examples/$ex.cf" -D tp=$tp -D dp=$dp $sz --backward "$@" --emit=sched 2>&1) &&
				! echo "$o" | grep -q FAILED || bad="$bad $p/$s"
		done
	done
	if [ -z "$bad" ]; then pass "group1: $ex with a group of one proves under every kind"; else fail "group1: $ex:$bad"; fi
done

# the grid Llama at tp 1 x dp 2: tp's collectives taken out, dp's weight
# gradients all-reduced in coalesced packs; built, run and checked
e2e32 "group1: llama_tpdp spec 1x2" "$out/llama_tpdp-1x2" 2 examples/llama_tpdp.cf \
	-D tp=1 -D dp=2 -D B=4 -D S=8 -D H=2 -D KV=1 -D D=16 -D F=4

# --explain says what was taken out
o=$("$B/cfc" examples/llama.cf -D tp=1 --backward --explain 2>&1)
if echo "$o" | grep -q "^groups of one: 4 collectives taken out of the forward, 8 of the backward"; then
	pass "group1: --explain counts the collectives taken out"
else
	fail "group1: --explain: $(echo "$o" | head -n 2)"
fi
