#!/bin/sh
# Gradients spread as their values' results are (issue 48), checked as
# t-grad.sh checks a backward (tests/gradlib.sh: f64, the parallel
# gradients against finite differences and the serial reference):
# - attention split over the batch with replicated keys and values
#   (tests/grad/attn_batch.cf), and a head split of a replicated weight
#   times one split over its heads (tests/grad/heads_w.cf), each at every
#   group size from 1 that divides it under the schedule kinds;
# - a value that reaches one op twice: h * h, add(h, h), x * x
#   (rep_ops), h @ h.T and x @ x.T (rep_mm), attention(q, k, k)
#   (rep_kk), attention(q, q, v) from an all_reduce (rep_attn, the
#   issue's line; rep_attn1, at one query, where q's gradient is zero but
#   for rounding) and with q split over its heads (rep_heads), and a
#   replicated value whose uses split along S and along D (two_splits);
# - the two specs of the issue, whose backward cfc used to prove and the
#   runtime to refuse, proved now: their schedules name no call the
#   runtime would refuse.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/grad-spread
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
. tests/gradlib.sh

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

# attn_batch: R = 2 * cp; heads_w: F = tp heads; every kind at every
# group size from 1 (one rank under fuse(ring) and fuse(bidir) too: issue
# 48's item 11, closed).
kinds='vanilla "slice(2)" "fuse(pairwise)" "fuse(ring)" "fuse(bidir)"'
eval "set -- ${GRAD_SCHEDULES:-$kinds}"
for s in "$@"; do
	for n in ${GRAD_N:-1 2 3 4}; do
		grad "grad-spread: attn_batch $s cp=$n" "$out/attn_batch-$(tag "$s")-$n" "$n" \
			tests/grad/attn_batch.cf -D cp="$n" --schedule="$s"
		grad "grad-spread: heads_w $s tp=$n" "$out/heads_w-$(tag "$s")-$n" "$n" \
			tests/grad/heads_w.cf -D tp="$n" --schedule="$s"
	done
done

# the repeated operands and two_splits: vanilla at 1 to 4 ranks, fuse(ring) at 1 to 3
for m in rep_ops rep_mm rep_kk rep_attn rep_heads two_splits; do
	for sn in vanilla,1 vanilla,2 vanilla,3 vanilla,4 "fuse(ring),1" "fuse(ring),2" \
		"fuse(ring),3"; do
		s=${sn%,*} n=${sn#*,}
		grad "grad-spread: $m $s tp=$n" "$out/$m-$(tag "$s")-$n" "$n" "tests/grad/$m.cf" \
			-D tp="$n" --schedule="$s"
	done
done

# the issue's line at one query (rep_attn1): q's gradient is zero but for
# rounding, which the reference and the parallel backward round apart
for sn in vanilla,1 vanilla,2 vanilla,4 "fuse(ring),1" "fuse(ring),2" "fuse(pairwise),2"; do
	s=${sn%,*} n=${sn#*,}
	grad "grad-spread: rep_attn1 $s tp=$n" "$out/rep_attn1-$(tag "$s")-$n" "$n" \
		tests/grad/rep_attn1.cf -D tp="$n" --schedule="$s"
done

# the issue's two specs as it gives them (f32, cp = 2 and tp = 4): proved
for m in attn_batch heads_w; do
	"$CFC" --backward "tests/grad/$m.cf" --emit=sched -o "$out/$m.sched" >"$out/$m.err" 2>&1
	rc=$?
	check "grad-spread: $m: the backward's schedule is proved" sh -c \
		"[ $rc -eq 0 ] && grep -q '^verify: ok backward collective=' '$out/$m.sched'"
done
