#!/bin/sh
# Multi-layer data parallelism (issue 51): examples/llama_tpdp.cf, 4 Llama
# blocks on a tp x dp grid.
#  order:  in the backward (--emit=sched), every dp all_reduce of block
#          l's weight matrices (l >= 1) is tail-free, hosts compute, runs
#          before block l - 1's last collective, and one of them hosts
#          compute of block l - 1 (tests/multilayer.awk), under fuse(ring)
#          and fuse(bidir) at 2x2 and at 2x3; no collective of the
#          backward is left not tail-free at 2x2; under --order=region
#          the check fails (it can);
#  e2e:    output and gradients against the serial reference (f32: 1e-5
#          and 1e-4) at 2x2 and at 2x3 (odd sizes), and f64 gradients
#          against finite differences at 2x2 on a small size.
. tests/lib.sh
. tests/gradlib.sh
out=$B/tests/multilayer
rm -rf "$out"
mkdir -p "$out"
spec=examples/llama_tpdp.cf
odd="-D dp=3 -D B=6 -D D=48 -D H=6 -D KV=2 -D F=96"

# layers NAME ARGS...: the property of every block l >= 1
layers() {
	_n=$1
	shift
	"$CFC" "$spec" --backward --emit=sched -o "$out/sched.txt" "$@" 2>"$out/sched.err" ||
		{ fail "multilayer: $_n (cfc failed)"; cat "$out/sched.err"; return; }
	awk -f tests/multilayer.awk "$out/sched.txt" >"$out/layers.txt"
	if [ "$(grep -c '^ok block' "$out/layers.txt")" = 3 ] && ! grep -q '^bad' "$out/layers.txt"; then
		pass "multilayer: $_n: blocks 3..1 reduce their weight gradients under the backward below"
	else
		fail "multilayer: $_n"
		cat "$out/layers.txt"
	fi
}
layers "2x2 fuse(ring)"
layers "2x2 fuse(bidir)" --schedule="fuse(bidir)"
# shellcheck disable=SC2086
layers "2x3 fuse(ring)" $odd
"$CFC" "$spec" --backward --emit=sched -o "$out/spec.txt"
check "multilayer: 2x2 backward all tail-free (0 tail-free=no of $(grep -c '^verify: ok backward' "$out/spec.txt"))" \
	sh -c "! grep -q 'tail-free=no' '$out/spec.txt' && grep -q 'tail-free=yes' '$out/spec.txt'"
"$CFC" "$spec" --backward --emit=sched -o "$out/region.txt" --order=region
check "multilayer: --order=region fails the check (region after region: no hosting)" sh -c \
	"awk -f tests/multilayer.awk '$out/region.txt' | grep -q '^bad block 3: .*not tail-free'"

# ---- end to end ----
export CF_OPT="-O1 -fno-var-tracking"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 180"
e2e32 "multilayer: e2e 2x2 f32" "$out/e2e-2x2" 4 "$spec"
# shellcheck disable=SC2086
e2e32 "multilayer: e2e 2x3 f32 (odd sizes)" "$out/e2e-2x3" 6 "$spec" $odd
grad "multilayer: f64 gradients against finite differences 2x2" "$out/fd-2x2" 4 "$spec" \
	-D B=2 -D S=8 -D D=16 -D H=4 -D KV=2 -D F=16
