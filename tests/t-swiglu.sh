#!/bin/sh
# The fused SwiGLU (issue 52): swiglu(a, b) = silu(a) * b, and cfc's own
# fusion of silu(A) * B and B * silu(A) (compiler/sema_fuse.c).
# - examples/llama.cf's MLP runs one swiglu forward, swiglu_da and
#   swiglu_db backward, no silu, mul or silu_grad, and saves one tensor
#   (16 KiB a rank) less than the same block with a named silu, which
#   stays silu then mul (and silu_grad backward);
# - tests/grad/swiglu.cf (swiglu written, b * silu(a) fused, a named silu
#   and a broadcast bias times silu left alone) says so in its schedule;
# - the f64 gradients of both, and of the named-silu Llama block, against
#   central finite differences of the serial reference (and the reference
#   backward, and the forward), as t-grad checks them.
# The runtime calls themselves: tests/runtime/unit_compute.c (CPU),
# tests/gpu/swiglu_check.c (GPU); llama's f32 forward and backward
# against the reference: t-e2e.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/swiglu
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

. tests/gradlib.sh

# the Llama block with the gate's silu named: s = silu(xa @ wg)
sed 's/^  y  = reduce_scatter((silu(xa @ wg) \* (xa @ wu)) @ wd, S);/  s  = silu(xa @ wg);\n  y  = reduce_scatter((s * (xa @ wu)) @ wd, S);/' \
	examples/llama.cf >"$out/llama_named.cf"
check "swiglu: llama_named.cf names its silu" grep -q '^  s  = silu(xa @ wg);' "$out/llama_named.cf"

# calls SCHED: the compute calls of a schedule (--emit=sched), one a
# line: "OUT OP"
calls() { sed -n 's/^.* compute  *\([^ []*\)[^ ]* +\?= \([a-z_]*\)(.*/\1 \2/p' "$1" | sort -u; }
for m in llama llama_named; do
	f=examples/$m.cf
	[ $m = llama ] || f=$out/$m.cf
	"$CFC" "$f" --backward --emit=sched >"$out/$m.sched" 2>&1 || fail "swiglu: $m --emit=sched"
	"$CFC" "$f" --backward --explain >"$out/$m.explain" 2>&1 || fail "swiglu: $m --explain"
	calls "$out/$m.sched" >"$out/$m.calls"
done
has() { grep -q "^$2\$" "$out/$1.calls"; }
check "swiglu: llama's forward calls swiglu(mlp0.t10, mlp0.t11)" \
	grep -q 'compute  mlp0.t12\[.*\] = swiglu(mlp0.t10\[.*\], mlp0.t11\[.*\])$' "$out/llama.sched"
check "swiglu: llama's backward calls swiglu_da and swiglu_db" sh -c \
	"grep -q '^d_mlp0.t10 swiglu_da\$' '$out/llama.calls' && grep -q '^d_mlp0.t11 swiglu_db\$' '$out/llama.calls'"
check "swiglu: llama calls no silu nor silu_grad, its MLP no mul" sh -c \
	"! grep -q ' silu\\(_grad\\)\\?\$' '$out/llama.calls' &&
	 ! grep -q 'mlp0\\..* mul\$' '$out/llama.calls'"
check "swiglu: named silu stays silu, mul, silu_grad" sh -c \
	"grep -q '^mlp0.s silu\$' '$out/llama_named.calls' && grep -q ' mul\$' '$out/llama_named.calls' &&
	 grep -q ' silu_grad\$' '$out/llama_named.calls' && ! grep -q swiglu '$out/llama_named.calls'"
saved() { sed -n 's/^memory: .* saved \([0-9]*\) (\([0-9]*\) tensors).*/\1 \2/p' "$1"; }
s1=$(saved "$out/llama.explain") s0=$(saved "$out/llama_named.explain")
# silu(xa @ wg) of one rank: [B, S, F / tp] f32 = 2 * 64 * 32 * 4 bytes
check "swiglu: llama saves one tensor of 16384 bytes less than with a named silu ($s1 vs $s0)" \
	awk -v a="$s1" -v b="$s0" 'BEGIN { split(a, x, " "); split(b, y, " ");
		exit !(x[2] != "" && y[1] - x[1] == 16384 && y[2] - x[2] == 1) }'

"$CFC" tests/grad/swiglu.cf --backward --emit=sched >"$out/spec.sched" 2>&1 || fail "swiglu: swiglu.cf --emit=sched"
calls "$out/spec.sched" >"$out/spec.calls"
for want in "t1 swiglu" "t2 swiglu" "s silu" "t4 mul" "t7 silu" "t8 mul" "d_u_2 swiglu_da" \
	"d_v swiglu_db" "d_v_3 silu_grad"; do
	check "swiglu: swiglu.cf computes $want" grep -q "^$want\$" "$out/spec.calls"
done
check "swiglu: swiglu.cf's v * silu(u) is swiglu(u, v)" \
	grep -q 'compute  t2\[.*\] = swiglu(u\[.*\], v\[.*\])$' "$out/spec.sched"

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }
for s in vanilla "fuse(ring)"; do
	for n in 1 2; do
		grad "grad: swiglu.cf $s N=$n" "$out/spec-$(tag "$s")-$n" "$n" tests/grad/swiglu.cf \
			-D tp="$n" --schedule="$s"
	done
	for m in llama llama_named; do
		f=examples/$m.cf
		[ $m = llama ] || f=$out/$m.cf
		grad "grad: $m $s N=2" "$out/$m-$(tag "$s")" 2 "$f" \
			-D B=1 -D S=8 -D D=16 -D H=8 -D KV=4 -D F=16 -D tp=2 --schedule="$s"
	done
done
