#!/bin/sh
# What the generated backward saves against one call per node (issue 52):
# - attention's dq, dk and dv, three nodes of the same operands, are one
#   cfrt_attention_grad_lse call (cg_par.c's attn_grad_group): cuDNN and
#   the fused kernel make the three together, at the cost of one;
# - a weight gradient summed by one GEMM run once (tp = 1: one slice, one
#   round) is written by that GEMM with beta = 0, with no zero fill ahead
#   of it (lower.c's lw_acc_zero); where several slices add into it
#   (tp = 2) the fill stays.
# - RMS norm's backward with its gain, rmsnorm_grad, rmsnorm (xhat) and
#   mul (dy * xhat, the gain gradient's rows), is one
#   cfrt_rmsnorm_grad_rows call (plan.c's plan_joint) where the
#   three are adjacent (order.c's od_glue keeps them so where that takes
#   no compute from under a transfer);
# - what such a call does not make (xhat, a GEMM's product, the heads
#   between a split and its rope) has no place in the workspace;
# Each form is checked in the generated C of examples/llama.cf, and the
# backward is run (f64, --gradcheck: against the serial reference and
# central finite differences) at tp = 1 and 2 under vanilla and fuse(ring)
# (t-grad runs the other specs and schedules, tp = 1 included).
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking" OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$B/tests/cgfuse
rm -rf "$out"
mkdir -p "$out"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
. tests/gradlib.sh
sizes="-D B=1 -D S=8 -D D=16 -D H=8 -D KV=4 -D F=16"

# count PATTERN FILE: the lines of FILE with the fixed string PATTERN
count() { grep -cF -- "$1" "$2"; }

# region by region the three stages of each norm are adjacent: both fused
d=$out/llama-2-region
# shellcheck disable=SC2086
"$CFC" examples/llama.cf -D tp=2 $sizes --type=bf16 --backward --order=region --emit=h,c \
	-o "$d" >"$d.log" 2>&1 || cat "$d.log"
nr=$(count "cfrt_rmsnorm_grad_rows(" "$d/llama.c" 2>/dev/null)
if [ "$nr" = 2 ]; then
	pass "cgfuse: llama tp=2 --order=region: both norms' backward with their gain's rows in one call"
else
	fail "cgfuse: llama tp=2 --order=region: $nr rmsnorm_grad_rows calls"
fi

# the whole-pass order (room enough: --memory) glues each gradient's GEMM
# to the add that sums it with another (order.c's od_glue): at tp = 1 the
# three sums of the input gradients (mlp's xa, attn's xa twice) and the two
# residuals are five cfrt_matmul_add; the backward checked in f64 against
# finite differences and the serial reference (one call per node)
d=$out/llama-1-glue
# shellcheck disable=SC2086
"$CFC" examples/llama.cf -D tp=1 $sizes --type=bf16 --backward --memory=1G --emit=h,c \
	-o "$d" >"$d.log" 2>&1 || cat "$d.log"
ma=$(count "cfrt_matmul_add(" "$d/llama.c" 2>/dev/null)
if [ "$ma" = 5 ]; then
	pass "cgfuse: llama tp=1 --memory=1G: 5 GEMMs with the add of their result in one call"
else
	fail "cgfuse: llama tp=1 --memory=1G: $ma cfrt_matmul_add calls (want 5)"
fi
# shellcheck disable=SC2086
grad "cgfuse: llama tp=1 --memory=1G backward (f64)" "$out/grad-1-glue" 1 \
	examples/llama.cf $sizes -D tp=1 --memory=1G

for tp in 1 2; do
	for s in vanilla "fuse(ring)"; do
		t=$(echo "$s" | tr -d '()')
		d=$out/llama-$tp-$t
		# shellcheck disable=SC2086
		if ! "$CFC" examples/llama.cf -D tp=$tp $sizes --type=bf16 --backward \
			--schedule="$s" --emit=h,c -o "$d" >"$d.log" 2>&1; then
			fail "cgfuse: llama tp=$tp $s (cfc)"
			cat "$d.log"
			continue
		fi
		c=$d/llama.c
		n=$(count "cfrt_attention_grad_lse(" "$c")
		n3=$(count "cfrt_attention_grad_lse(ctx, &dq4, &dk4, &dv4," "$c")
		if [ "$n" = 1 ] && [ "$n3" = 1 ]; then
			pass "cgfuse: llama tp=$tp $s: dq, dk, dv in one attention backward call"
		else
			fail "cgfuse: llama tp=$tp $s: $n attention backward calls, $n3 with all three"
		fi
		nr=$(count "cfrt_rmsnorm_grad_rows(" "$c")
		ng=$(count "cfrt_rmsnorm_grad(" "$c")
		# tp = 2: the whole-pass order runs the first norm's dx under the
		# gains' all_reduce (order.c's od_glue keeps it apart there)
		want=2
		[ "$tp" = 2 ] && want=1
		if [ "$nr" = $want ] && [ "$ng" = $((2 - want)) ]; then
			pass "cgfuse: llama tp=$tp $s: $want norms' backward with their gain's rows in one call"
		else
			fail "cgfuse: llama tp=$tp $s: $nr rmsnorm_grad_rows calls, $ng rmsnorm_grad (want $want)"
		fi
		z=$(count "cfrt_scale(ctx, &dst, &dst, 0.0)" "$c")
		b0=$(grep -c 'cf_matmul_sum(ctx, &[a-z0-9_]*, .*, 0\.0)' "$c")
		if [ "$tp" = 1 ] && [ "$z" = 0 ] && [ "$b0" -ge 7 ]; then
			pass "cgfuse: llama tp=1 $s: no zero fill, $b0 weight-gradient GEMMs with beta = 0"
		elif [ "$tp" = 2 ] && [ "$z" -ge 1 ]; then
			pass "cgfuse: llama tp=2 $s: $z zero fills kept where slices add up"
		else
			fail "cgfuse: llama tp=$tp $s: $z zero fills, $b0 GEMMs with beta = 0"
		fi
		# a head split and the rope of its heads, one cfrt_rope through a
		# head view: at tp = 1 q and k (their split is a whole stage); at
		# tp = 2 none (the split runs slice by slice in the gather's region)
		rh=$(grep -c 'cfrt_rope(ctx, &[a-z0-9_]*, &hv' "$c")
		want=2
		[ "$tp" = 2 ] && want=0
		if [ "$rh" = $want ]; then
			pass "cgfuse: llama tp=$tp $s: $rh head splits read by their rope through a view"
		else
			fail "cgfuse: llama tp=$tp $s: $rh ropes through a head view (want $want)"
		fi
		# a GEMM and the add of its result, one cfrt_matmul_add: at tp = 1
		# the forward's two residual adds (their collectives taken out)
		# and the backward's three sums of input gradients, glued by the
		# whole-pass order, which fits the memory bound now that the
		# backward keeps its tensors in the saved bytes it has read;
		# at tp = 2 none (each add reads a reduce-scatter's result)
		ma=$(count "cfrt_matmul_add(" "$c")
		want=5
		[ "$tp" = 2 ] && want=0
		if [ "$ma" = $want ]; then
			pass "cgfuse: llama tp=$tp $s: $ma GEMMs with their residual add in one call"
		else
			fail "cgfuse: llama tp=$tp $s: $ma cfrt_matmul_add calls (want $want)"
		fi
		# what one call does not make has no place: no offset names it
		# in the workspace or the saved buffer (plan.c's plan_joint)
		nm=$(sed -n 's|.*one call for the [a-z]*: \([^ ]*\) is not made.*|\1|p' "$c")
		placed=""
		for v in $nm; do
			grep -qE "^#define CF_[A-Z]+_[A-Za-z0-9_]+ [0-9]+ /\* $v[, ]" "$c" &&
				placed="$placed $v"
		done
		nn=$(echo "$nm" | grep -c .)
		# (each GEMM + add, norm + rows and head-view rope counted above
		# leaves one value unmade)
		if [ "$nn" -ge "$((ma + nr + rh))" ] && [ -z "$placed" ]; then
			pass "cgfuse: llama tp=$tp $s: the $nn values no call makes have no place"
		else
			fail "cgfuse: llama tp=$tp $s: $nn values not made, placed:$placed"
		fi
		# shellcheck disable=SC2086
		grad "cgfuse: llama tp=$tp $s backward (f64)" "$out/grad-$tp-$t" "$tp" \
			examples/llama.cf $sizes -D tp="$tp" --schedule="$s"
	done
done
