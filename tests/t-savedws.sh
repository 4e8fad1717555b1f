#!/bin/sh
# The saved buffer's free bytes (issue 52, the step's peak memory). By
# default the plan puts tensors of the backward in the bytes of saved
# tensors the backward has read, and tensors of the forward in saved
# bytes the forward has not written yet; the backward then runs once per
# forward (its saved argument is void *, not const void *). --keep-saved
# leaves the saved buffer as the forward wrote it. Checked:
#  - the peak (cfc --explain's memory line) is lower than --keep-saved's,
#    the C says which tensors are "in saved", the header's signature;
#  - forward and backward against the serial reference, both ways, every
#    schedule kind on one example and several examples and grids, with
#    the same outputs and gradients bit for bit both ways (the same
#    calls on other bytes);
#  - --accumulate (the driver's check runs the step again);
#  - --keep-saved without --backward is a usage error.
# (tests/py/check.py: the Python module refuses a second backward of one
# forward, and with --keep-saved gives the same gradients; t-unit: the
# plan and its proof, planted overlaps rejected.)
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/savedws
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
CFC=$B/cfc
sizes="-D B=1 -D S=8 -D D=16 -D H=8 -D KV=4 -D F=16"

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }
peak() { sed -n 's/^memory: peak \([0-9]*\) bytes.*/\1/p' "$1"; }

# -- what the compiler says and writes
for tp in 1 2; do
	for k in "" --keep-saved; do
		# shellcheck disable=SC2086
		"$CFC" examples/llama.cf -D tp=$tp $sizes --backward --explain $k --emit=h,c \
			-o "$out/llama$tp$k" >"$out/llama$tp$k.explain" 2>&1 ||
			cat "$out/llama$tp$k.explain"
	done
	p=$(peak "$out/llama$tp.explain") pk=$(peak "$out/llama$tp--keep-saved.explain")
	if [ -n "$p" ] && [ -n "$pk" ] && [ "$p" -lt "$pk" ]; then
		pass "savedws: llama tp=$tp: peak $p bytes a rank, $pk with --keep-saved"
	else
		fail "savedws: llama tp=$tp: peak '$p', with --keep-saved '$pk'"
	fi
	# the backward's (CF_BW_) and the forward's (CF_WS_) tensors there
	n=$(grep -c '^#define CF_BW_.*, in saved \*/' "$out/llama$tp/llama.c")
	nk=$(grep -c '^#define CF_BW_.*, in saved \*/' "$out/llama$tp--keep-saved/llama.c")
	f=$(grep -c '^#define CF_WS_.*, in saved \*/' "$out/llama$tp/llama.c")
	fk=$(grep -c '^#define CF_WS_.*, in saved \*/' "$out/llama$tp--keep-saved/llama.c")
	if [ "$n" -gt 0 ] && [ "$nk" = 0 ] && [ "$f" -gt 0 ] && [ "$f" = "$fk" ]; then
		pass "savedws: llama tp=$tp: $n tensors of the backward in the saved buffer (none with --keep-saved), $f of the forward"
	else
		fail "savedws: llama tp=$tp: backward $n tensors in saved, $nk with --keep-saved; forward $f, $fk"
	fi
done
# order.c's 1b: at tp = 1 the down projection's weight gradient, which
# reads the saved swiglu output last, runs before the input gradient of
# that output, which takes its bytes; swiglu's two input gradients take
# the bytes of the saved inputs they read last
l=$out/llama1/llama.c
wd=$(grep -n '/\* d_mlp0.wd = matmul' "$l" | cut -d: -f1)
dt=$(grep -n '/\* d_mlp0.t12 = matmul' "$l" | cut -d: -f1)
check "savedws: llama tp=1: dW of the down projection before the gradient of its input" \
	test -n "$wd" -a -n "$dt" -a "${wd:-0}" -lt "${dt:-0}"
check "savedws: llama tp=1: d_mlp0.t12 in mlp0.t12's bytes, swiglu's gradients in place" sh -c \
	"grep -q '^#define CF_BW_d_mlp0_t12 0 /\* d_mlp0.t12, in saved' '$l' &&
	 grep -q '^#define CF_SAVED_mlp0_t12 0 ' '$l' &&
	 [ \"\$(sed -n 's/^#define CF_BW_d_mlp0_t10 \([0-9]*\) .*in saved.*/\1/p' '$l')\" = \
	   \"\$(sed -n 's/^#define CF_SAVED_mlp0_t11 \([0-9]*\) .*/\1/p' '$l')\" ]"
check "savedws: the backward takes void *saved, and says it runs once per forward" sh -c \
	"grep -q '^                void \*saved, const llama_grads \*g' '$out/llama1/llama.h' &&
	 grep -q 'so it runs once per forward pass' '$out/llama1/llama.h'"
check "savedws: with --keep-saved, const void *saved" \
	grep -q '^                const void \*saved, const llama_grads \*g' \
	"$out/llama1--keep-saved/llama.h"
"$CFC" examples/mlp.cf --keep-saved >"$out/usage.err" 2>&1
rc=$?
check "savedws: --keep-saved without --backward is a usage error" sh -c \
	"[ $rc -eq 2 ] && grep -q 'keep-saved needs --backward' '$out/usage.err'"

# both NAME DIR N SPEC ARGS...: SPEC built with its backward (f64) by
# default and with --keep-saved, each run on N ranks with --check after
# passes that reuse the saved buffer (built_run): both within 1e-12 of the
# reference, and the same checksums
both() {
	name=$1 dir=$2 n=$3 spec=$4
	shift 4
	for k in "" --keep-saved; do
		# shellcheck disable=SC2086
		built_run "$name$k" "$dir$k" "$n" "--check --iters 2 --warmup 1" "$spec" --type=f64 \
			$k "$@" || return
	done
	e=$(field max_rel_err "$dir.out") g=$(field grad_max_rel_err "$dir.out")
	ek=$(field max_rel_err "$dir--keep-saved.out") gk=$(field grad_max_rel_err "$dir--keep-saved.out")
	c=$(field checksum "$dir.out")/$(field grad_checksum "$dir.out")
	ck=$(field checksum "$dir--keep-saved.out")/$(field grad_checksum "$dir--keep-saved.out")
	if le "$e" 1e-12 && le "$g" 1e-12 && le "$ek" 1e-12 && le "$gk" 1e-12 && [ "$c" = "$ck" ]; then
		pass "$name (gradients $g, the same bits as --keep-saved's)"
	else
		fail "$name (errors $e $g, --keep-saved $ek $gk; checksums $c, $ck)"
	fi
}

for tp in 1 2; do
	for s in vanilla "slice(2)" "fuse(ring)" "fuse(bidir)" "fuse(pairwise)" "fuse(ring, m = 2)"; do
		# shellcheck disable=SC2086
		both "savedws: llama tp=$tp $s" "$out/run-llama$tp-$(tag "$s")" $tp examples/llama.cf \
			-D tp=$tp $sizes "--schedule=$s"
	done
done
both "savedws: transformer tp=2" "$out/run-transformer" 2 examples/transformer.cf -D tp=2 \
	-D B=1 -D S=8 -D D=16 -D H=4 -D F=32
both "savedws: mlp tp=3" "$out/run-mlp" 3 examples/mlp.cf -D tp=3 -D B=1 -D S=12 -D D=8 -D F=24
both "savedws: tpdp 2x2" "$out/run-tpdp" 4 examples/tpdp.cf -D tp=2 -D dp=2 -D B=4 -D S=16 \
	-D D=8 -D F=16
both "savedws: zero_dp dp=2" "$out/run-zero" 2 examples/zero_dp.cf -D T=8 -D D=8 -D F=4 -D dp=2
both "savedws: mlp tp=2 --accumulate" "$out/run-acc" 2 examples/mlp.cf -D tp=2 -D B=1 -D S=8 \
	-D D=8 -D F=16 --accumulate
