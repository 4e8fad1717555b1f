#!/bin/sh
# The backward pass (cfc --backward), checked independently: for small
# f64 specs (the MLP of examples/mlp.cf, a sequence-parallel chain of
# gathers and reduce-scatters, an all_to_all chain, data parallelism, an
# all_reduce block, a layer's output, a weight over two groups, norms,
# softmax and broadcasts, attention split along the queries, two
# gradients' regions that would wait for each other, an input split over
# one rank that a region slices, tensors split
# over two groups of a grid: tests/grad/; the other examples at small
# sizes) under the schedule kinds at N = 1..4 (grids: 2x2, 2x3, 3x2),
# the gradients of the parallel backward must equal central finite
# differences of the serial reference forward (fd_max_rel_err <= 1e-6;
# the differences are exact to about 1e-9 in f64), the serial reference
# backward (grad_max_rel_err <= 1e-12) and the forward its reference
# (max_rel_err <= 1e-12). GRAD_N and GRAD_SCHEDULES narrow the sweep.
. tests/lib.sh
# -O1, and no variable tracking: with -g it is most of the time gcc takes
# on the long generated functions (10 s of 11 for the transformer's
# backward), and these builds are for running, not for a debugger
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/grad
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

. tests/gradlib.sh

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

for spec in examples/mlp.cf tests/grad/sp.cf tests/grad/a2a.cf tests/grad/dp.cf tests/grad/ar.cf \
	tests/grad/zero3.cf; do
	m=$(basename "$spec" .cf)
	sizes=
	[ "$m" = mlp ] && sizes="-D B=1 -D S=24 -D D=8 -D F=24"
	for s in ${GRAD_SCHEDULES:-vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"}; do
		for n in ${GRAD_N:-1 2 3 4}; do
			grad "grad: $m $s N=$n" "$out/$m-$(tag "$s")-$n" "$n" "$spec" $sizes \
				-D tp="$n" --schedule="$s"
		done
	done
done

# the row ops, broadcasts and attention split along the queries, and two
# gathered gradients whose regions would need each other (tests/grad)
for spec in tests/grad/norm.cf tests/grad/attn.cf tests/grad/cross.cf; do
	m=$(basename "$spec" .cf)
	for s in ${GRAD_SCHEDULES:-vanilla "fuse(ring)" "fuse(bidir)"}; do
		for n in ${GRAD_N:-1 2 3 4}; do
			grad "grad: $m $s N=$n" "$out/$m-$(tag "$s")-$n" "$n" "$spec" \
				-D tp="$n" --schedule="$s"
		done
	done
done

# the other examples at small sizes: heads split over tp (attention, the
# transformer's blocks with their layer norms), Ulysses' all_to_alls, the
# scan, data parallelism with one gradient reduce-scattered (zero_dp)
exsizes() {
	case $1 in
	attention) echo "-D B=1 -D S=8 -D D=8 -D H=4" ;;
	ulysses) echo "-D B=1 -D S=8 -D D=8 -D H=4" ;;
	mamba) echo "-D B=1 -D S=8 -D D=4" ;;
	transformer) echo "-D B=1 -D S=8 -D D=8 -D H=4 -D F=16 -D L=1" ;;
	zero_dp) echo "-D T=8 -D D=8 -D F=4" ;;
	llama) echo "-D B=1 -D S=8 -D D=16 -D H=8 -D KV=4 -D F=16" ;;
	esac
}
for m in attention ulysses mamba transformer zero_dp llama; do
	grp=tp
	[ $m = ulysses ] && grp=sp
	[ $m = zero_dp ] && grp=dp
	for s in ${GRAD_SCHEDULES:-vanilla "fuse(ring)"}; do
		for n in ${GRAD_N:-2 4}; do
			# shellcheck disable=SC2046
			grad "grad: $m $s N=$n" "$out/ex-$m-$(tag "$s")-$n" "$n" "examples/$m.cf" \
				$(exsizes $m) -D $grp="$n" --schedule="$s"
		done
	done
done

# on a grid of tp x dp ranks: the tpdp example (weights split over tp, one
# gradient reduce-scattered over dp, one all-reduced), gradients gathered
# over each group that splits their products and all-reduced over both
# (tests/grad/grid.cf), a partial sum over two groups reduced over each by
# name (tests/grad/two_partial.cf)
gridsizes() { # spec tp dp
	case $1 in
	two_partial) echo "-D tp=$2 -D dp=$3 -D S=$((4 * $2 * $3)) -D D=$((4 * $2 * $3))" ;;
	*) echo "-D tp=$2 -D dp=$3 -D B=$((2 * $3)) -D S=$((4 * $2)) -D D=$((4 * $3)) -D F=$((4 * $2))" ;;
	esac
}
for spec in examples/tpdp.cf tests/grad/grid.cf tests/grad/two_partial.cf; do
	m=$(basename "$spec" .cf)
	for tpdp in ${GRAD_GRIDS:-2x2 2x3 3x2}; do
		tp=${tpdp%x*} dp=${tpdp#*x}
		kinds='vanilla "fuse(ring)" "fuse(bidir)"'
		[ "$m$tpdp" = tpdp2x2 ] && kinds="$kinds \"fuse(pairwise)\" \"slice(2)\" \"fuse(ring, m = 2)\""
		eval "set -- ${GRAD_SCHEDULES:-$kinds}"
		for s in "$@"; do
			# shellcheck disable=SC2046
			grad "grad: grid $m $s ${tp}x$dp" "$out/grid-$m-$(tag "$s")-$tpdp" $((tp * dp)) \
				"$spec" $(gridsizes "$m" "$tp" "$dp") --schedule="$s"
		done
	done
done

# an input split over a group of one rank, which an all_reduce's region
# slices along that dim (tests/grad/one_rank.cf), and the same over 2
for s in ${GRAD_SCHEDULES:-vanilla "slice(2)" "fuse(ring)"}; do
	for n in 1 2; do
		grad "grad: one_rank $s dp=$n" "$out/one_rank-$(tag "$s")-$n" "$n" \
			tests/grad/one_rank.cf -D dp="$n" -D P=$((4 * n)) --schedule="$s"
	done
done

# an output a layer made, named by `out` (read from the io struct under
# that name); one weight used over two groups of a grid (its gradient
# all-reduced over each before the sum); 3 ranks, where the weight
# gradient's all_reduce cannot take fuse(ring) and falls back to vanilla
for s in vanilla "fuse(ring)"; do
	grad "grad: layer_out $s N=3" "$out/layer_out-$(tag "$s")" 3 tests/grad/layer_out.cf \
		-D tp=3 --schedule="$s"
	grad "grad: two_groups 2x2 $s" "$out/two_groups-$(tag "$s")" 4 tests/grad/two_groups.cf \
		--schedule="$s"
	grad "grad: two_groups 2x3 $s" "$out/two_groups3-$(tag "$s")" 6 tests/grad/two_groups.cf \
		-D b=3 --schedule="$s"
done

# `save xa`: the forward saves the gathered tensor whole, and the backward
# reads it instead of gathering it again (one backward collective fewer)
sed 's/^  out y;/  save xa;\n  out y;/' examples/mlp.cf >"$out/mlp_save.cf"
for s in vanilla "fuse(ring)" "fuse(bidir)"; do
	for n in 1 3; do
		grad "grad: mlp save xa $s N=$n" "$out/mlp_save-$(tag "$s")-$n" "$n" "$out/mlp_save.cf" \
			-D B=1 -D S=24 -D D=8 -D F=24 -D tp="$n" --schedule="$s"
	done
done
"$CFC" --backward "$out/mlp_save.cf" -D tp=2 --emit=sched -o "$out/mlp_save.sched"
check "grad: save xa: no all_gather of xa in the backward" sh -c \
	"test \$(grep -c '^verify: ok backward collective=' '$out/mlp_save.sched') -eq 2 &&
	 ! grep -q 'backward collective xa = all_gather' '$out/mlp_save.sched'"
sed 's/^  out y;/  save h;\n  out y;/' examples/mlp.cf >"$out/save_bad.cf"
"$CFC" --backward "$out/save_bad.cf" >"$out/save_bad.err" 2>&1; rc=$?
check "grad: save of a tensor no all_gather made is an input error" sh -c \
	"[ $rc -eq 1 ] && grep -q 'save_bad.cf:22:8: error: save names a tensor that an all_gather made, but h is made by gelu' '$out/save_bad.err'"

# the weight gradients of batched activations are fused with their
# collectives (FuseRS: each step a slice of the gradient's rows)
"$CFC" --backward tests/grad/zero3.cf --explain >"$out/zero3.explain"
check "grad: zero3: the summed weight gradients are fused with their collectives" sh -c \
	"grep -q 'backward reduce_scatter d_w1: fuse(ring) region \[d_w1_2=matmul' '$out/zero3.explain' &&
	 grep -q 'backward all_reduce d_w2: fuse(ring) region \[d_w2_2=matmul' '$out/zero3.explain'"

# --accumulate: weight gradients added to the grads struct's; the driver
# runs the backward twice on one forward and compares half the sum, so an
# overwriting backward would be off by 0.5
for s in vanilla "fuse(ring)"; do
	for n in 1 2 4; do
		grad "grad: accumulate zero_dp $s N=$n" "$out/acc-zero_dp-$(tag "$s")-$n" "$n" \
			examples/zero_dp.cf -D T=8 -D D=8 -D F=4 -D dp="$n" --schedule="$s" --accumulate
		grad "grad: accumulate mlp $s N=$n" "$out/acc-mlp-$(tag "$s")-$n" "$n" \
			examples/mlp.cf -D B=1 -D S=24 -D D=8 -D F=24 -D tp="$n" --schedule="$s" --accumulate
	done
done
"$CFC" --backward --accumulate examples/zero_dp.cf --emit=h -o "$out/acc.h"
"$CFC" --backward examples/mlp.cf --emit=h -o "$out/noacc.h"
check "grad: the header says whether gradients accumulate" sh -c \
	"grep -q '^#define ZERO_DP_ACCUMULATES 1' '$out/acc.h' &&
	 grep -q '^#define MLP_ACCUMULATES 0' '$out/noacc.h'"
"$CFC" --accumulate examples/mlp.cf >"$out/acc-usage.err" 2>&1; rc=$?
check "grad: --accumulate without --backward is a usage error" sh -c \
	"[ $rc -eq 2 ] && grep -q 'accumulate needs --backward' '$out/acc-usage.err'"

# -- the backward is asked for only with --backward: a gradient it cannot
# make is no error without it, and a clear one with it (w's gradient
# asked split over dp, where nothing makes it a partial sum)
cat >"$out/norule.cf" <<'CF'
model norule {
  size T = 8, D = 4;
  group dp = 2;
  in x : [T, D];
  weight w : [D, D] grad split 0 over dp;
  t = x @ w;
  y = gelu(t);
  out y;
}
CF
check "grad: no backward asked, no backward rule needed" "$CFC" "$out/norule.cf"
"$CFC" --backward "$out/norule.cf" --emit=c -o "$out/norule.c" >"$out/norule.err" 2>&1; rc=$?
cat "$out/norule.err"
check "grad: a gradient that cannot be made is an input error" [ "$rc" -eq 1 ]
check "grad: no partial output" [ ! -e "$out/norule.c" ]
check "grad: the error names the tensor and its place" grep -q \
	"norule.cf:5:10: error: the gradient of w (repl) is no partial sum over dp" \
	"$out/norule.err"
# d_t1 split along the contraction times a replicated w: gathered first
# (once "no backward rule"), and right
cat >"$out/gathered.cf" <<'CF'
model gathered {
  size S = 8, D = 4;
  group tp = 2;
  type f64;
  in x : [S, D];
  weight w : [D, D];
  in s : [S, D] split D over tp;
  y = (x @ w) * s;
  out y;
}
CF
grad "grad: d_t1 split along the contraction times w replicated, gathered N=2" \
	"$out/gathered" 2 "$out/gathered.cf"

# -- a gradient name that another tensor has
cat >"$out/clash.cf" <<'CF'
model norm {
  size S = 8, D = 8;
  group tp = 2;
  in x : [S, D] split S over tp;
  weight d_x : [D, D];
  y = gelu(x @ d_x);
  out y;
}
CF
"$CFC" --backward "$out/clash.cf" >"$out/clash.err" 2>&1; rc=$?
cat "$out/clash.err"
check "grad: a taken gradient name is an input error" [ "$rc" -eq 1 ]
check "grad: the error says which names clash" grep -q \
	"clash.cf:4:6: error: the gradient of x would be named d_x in the backward pass, but tensor d_x (line 5) has that name" "$out/clash.err"

# -- the schedule names the backward's collectives as such, and proves them
"$CFC" --backward examples/mlp.cf -D tp=2 --emit=sched -o "$out/mlp.sched"
check "grad: --emit=sched proves the backward collectives, each hidden (tail-free)" sh -c \
	"test \$(grep -c '^verify: ok backward collective=.* exposed=0 tail-free=yes\$' '$out/mlp.sched') -eq 3"
"$CFC" --backward examples/mlp.cf -D tp=2 --explain >"$out/mlp.explain"
check "grad: --explain marks the backward collectives" sh -c \
	"test \$(grep -c ': backward ' '$out/mlp.explain') -eq 3"
