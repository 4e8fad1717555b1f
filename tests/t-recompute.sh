#!/bin/sh
# Recomputation (`recompute NAME;`, `recompute LAYER;`) and the memory
# budget (--memory=BYTES), on the Llama block and the transformer stack
# made from examples/llama.cf and examples/transformer.cf by adding one
# line: selective (`recompute o;` in the attention layer: o and its
# attention, the unnamed result of its expression) and full layer
# (`recompute attn, mlp;`, `recompute block;` on the repeat instances).
# - the saved bytes and the plan's peak of each, and what --memory chose,
#   against tests/recompute/memory.golden (tp = 4, the examples' sizes);
# - the f64 gradients against central finite differences of the serial
#   reference (and the reference backward, and the forward), as t-grad
#   checks them, N = 1..4, fuse(ring) and vanilla;
# - the same for recomputed all_to_alls and attention (Ulysses), a scan
#   (mamba) and a grid (tpdp);
# - f32 against the serial reference (output 1e-5, gradients 1e-4, as
#   t-e2e bounds them), and the selective variants' gradients bitwise
#   equal to those of the model without recomputation (the same ops on
#   the same operands); a full layer recomputes an attention outside the
#   query split its forward ran in, so its last bits may differ.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/recompute
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

. tests/gradlib.sh

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

# the variants
sel='s/^  y  = reduce_scatter(o @ wo, S);/  y  = reduce_scatter(o @ wo, S);\n  recompute o;/'
sed "$sel" examples/llama.cf >"$out/llama_sel.cf"
sed 's/^  out y;/  recompute attn, mlp;\n  out y;/' examples/llama.cf >"$out/llama_full.cf"
sed "$sel" examples/transformer.cf >"$out/transformer_sel.cf"
sed 's/^  out y;/  recompute block;\n  out y;/' examples/transformer.cf >"$out/transformer_full.cf"
cp examples/llama.cf examples/transformer.cf "$out/"
for v in llama_sel llama_full transformer_sel transformer_full; do
	check "recompute: $v has its recompute line" grep -q '^ *recompute ' "$out/$v.cf"
done

# saved bytes and peaks, before and after; what a budget chooses
: >"$out/memory.txt"
for v in llama llama_sel llama_full transformer transformer_sel transformer_full; do
	{
		printf '%s: ' "$v"
		(cd "$out" && "$CFC" --backward "$v.cf" --explain --emit=c -o "$v.c") | grep '^memory:'
	} >>"$out/memory.txt" 2>&1
done
for b in 220K 205K; do
	(cd "$out" && "$CFC" --backward llama.cf --memory=$b --explain -o fit.c 2>&1 | grep -e '^memory:' -e 'note:') >>"$out/memory.txt"
done
(cd "$out" && "$CFC" --backward transformer.cf --memory=340K --explain -o fit.c 2>&1 | grep -e '^memory:' -e 'note:') >>"$out/memory.txt"
golden "recompute: saved bytes and peaks, before and after" "$out/memory.txt" tests/recompute/memory.golden

# the generated query reports the smaller buffer: NAME_saved_bytes()
# returns the saved bytes the memory line gives
for v in llama llama_full transformer_full; do
	want=$(sed -n "s/^$v: memory: .* saved \([0-9]*\) .*/\1/p" "$out/memory.txt")
	got=$(sed -n '/_saved_bytes(void)$/,/^}/s/^\treturn \([0-9]*\);/\1/p' "$out/$v.c" | head -n 1)
	check "recompute: $v: ${v%%_*}_saved_bytes() returns $want" sh -c "[ -n '$want' ] && [ '$got' = '$want' ]"
done

# --memory's argument
for a in 0 -5 64X 1.5K '' 2000000G; do
	"$CFC" --backward examples/mlp.cf --memory="$a" >"$out/bad.out" 2>"$out/bad.err"
	rc=$?
	check "recompute: --memory='$a' is a usage error" sh -c \
		"[ $rc -eq 2 ] && grep -q -- \"--memory wants a count of bytes per rank, such as 65536 or 64K (K, M, G: KiB, MiB, GiB), not '$a'\" '$out/bad.err' && ! [ -s '$out/bad.out' ]"
done
"$CFC" examples/mlp.cf --memory=1G --explain -o "$out/fwd.c" >"$out/fwd.explain" 2>&1
check "recompute: --memory without --backward bounds the forward's workspace" \
	grep -q '^memory: peak [0-9]* bytes per rank = saved 0 (0 tensors)' "$out/fwd.explain"

# a recomputed reduce_scatter (the full block needs h = x + attn(...)
# again) is proven in the backward like every collective
"$CFC" --backward "$out/transformer_full.cf" --emit=sched -o "$out/tf.sched"
check "recompute: full block: the attention's reduce_scatter again in the backward, proven" \
	grep -q '^verify: ok backward collective=block1.attn1.y ' "$out/tf.sched"

# the recomputed MLP runs under the gather done again in the backward
# (its region), hiding the transfer
"$CFC" --backward "$out/llama_full.cf" --explain -o "$out/lf.c" >"$out/lf.explain"
check "recompute: full llama: the recomputed MLP fused with the backward's gather of xa" \
	grep -q 'backward all_gather mlp0.xa: fuse(ring) region \[mlp0.t10=matmul .*, mlp0.t11=matmul .*, mlp0.t12=swiglu ' "$out/lf.explain"

# f64: finite differences, N = 1..4
gsizes() { # variant N
	case $1-$2 in
	llama*-3) echo "-D B=1 -D S=12 -D D=12 -D H=6 -D KV=3 -D F=12" ;;
	llama*) echo "-D B=1 -D S=8 -D D=16 -D H=8 -D KV=4 -D F=16" ;;
	transformer*-3) echo "-D B=1 -D S=12 -D D=12 -D H=3 -D F=12 -D L=2" ;;
	transformer*) echo "-D B=1 -D S=8 -D D=8 -D H=4 -D F=16 -D L=2" ;;
	esac
}
for v in llama_full transformer_full llama_sel transformer_sel; do
	ns="1 2 3 4"
	case $v in *_sel) ns="2 3" ;; esac
	for n in $ns; do
		# shellcheck disable=SC2046
		grad "recompute: grad $v fuse(ring) N=$n" "$out/g-$v-$n" "$n" "$out/$v.cf" \
			$(gsizes $v $n) -D tp="$n" --schedule="fuse(ring)"
	done
done
for v in llama_full transformer_full; do
	# shellcheck disable=SC2046
	grad "recompute: grad $v vanilla N=2" "$out/g-$v-van-2" 2 "$out/$v.cf" $(gsizes $v 2) \
		-D tp=2 --schedule=vanilla
done
# other recomputed ops: all_to_alls and an attention (Ulysses), the scan
# and a tensor its product reads (mamba), a grid of tp x dp (tpdp)
sed 's/^  out y;/  recompute qh, kh, vh, oh, o;\n  out y;/' examples/ulysses.cf >"$out/ulysses_rc.cf"
sed 's/^  out y;/  recompute hs, u, z, p;\n  out y;/' examples/mamba.cf >"$out/mamba_rc.cf"
sed 's/^  out y;/  recompute h;\n  out y;/' examples/tpdp.cf >"$out/tpdp_rc.cf"
grad "recompute: grad ulysses all_to_alls, attention N=2" "$out/g-ulysses" 2 "$out/ulysses_rc.cf" \
	-D B=1 -D S=8 -D D=8 -D H=4 -D sp=2 --schedule="fuse(ring)"
grad "recompute: grad mamba scan N=2" "$out/g-mamba" 2 "$out/mamba_rc.cf" -D B=1 -D S=8 -D D=4 \
	-D tp=2 --schedule="fuse(ring)"
grad "recompute: grad tpdp 2x2" "$out/g-tpdp" 4 "$out/tpdp_rc.cf" -D tp=2 -D dp=2 -D B=4 -D S=8 \
	-D D=8 -D F=8 --schedule="fuse(ring)"

# what --memory chose, run: a budget between the peaks of the plain and
# the full-layer transformer at the small sizes
# shellcheck disable=SC2046
# (as the grad run below builds it: f64, fuse(ring))
"$CFC" --backward "$out/transformer.cf" $(gsizes transformer 2) -D tp=2 --type=f64 \
	--schedule="fuse(ring)" --explain -o "$out/small.c" | grep '^memory:' >"$out/small.mem"
peak=$(sed 's/^memory: peak \([0-9]*\) .*/\1/' "$out/small.mem")
budget=$((peak - peak / 8))
# shellcheck disable=SC2046
"$CFC" --backward "$out/transformer.cf" $(gsizes transformer 2) -D tp=2 --type=f64 \
	--schedule="fuse(ring)" --memory=$budget --explain -o "$out/small_fit.c" 2>"$out/small_fit.err" | grep '^memory:' >"$out/small_fit.mem"
fit=$(sed 's/^memory: peak \([0-9]*\) .*/\1/' "$out/small_fit.mem")
check "recompute: --memory=$budget fits the small transformer (peak $peak, then $fit)" sh -c \
	"[ -n '$fit' ] && [ '$fit' -le $budget ] && grep -q 'the backward recomputes' '$out/small_fit.err'"
# shellcheck disable=SC2046
grad "recompute: grad transformer --memory=$budget N=2" "$out/g-fit-2" 2 "$out/transformer.cf" \
	$(gsizes transformer 2) -D tp=2 --schedule="fuse(ring)" --memory=$budget

# f32 against the reference; selective bitwise equal to none
for m in llama transformer; do
	for v in $m ${m}_sel ${m}_full; do
		e2e32 "recompute: f32 $v N=4" "$out/f-$v" 4 "$out/$v.cf" -D tp=4
	done
	base=$(field grad_checksum "$out/f-$m.out")
	sel=$(field grad_checksum "$out/f-${m}_sel.out")
	check "recompute: f32 $m: selective gradients bitwise those without ($base)" \
		sh -c "[ -n '$base' ] && [ '$base' = '$sel' ]"
done
