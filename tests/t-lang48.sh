#!/bin/sh
# Issue 48, items 14 and 15: rope along the dimension labelled S (before
# or after the heads, split along S or the heads, inside a fused gather;
# tests/e2e/rope_layout.cf), a - b on tensors (tests/e2e/sub.cf) and
# causal attention with fewer queries than keys, aligned bottom-right
# (tests/e2e/causal_br.cf). Each f64 spec with its backward, on N = 2
# and 3 ranks under four schedule kinds (N = 1 under its default
# schedule only): the forward against the serial
# reference (max_rel_err <= 1e-12) and against NumPy (tests/lang48.py:
# formulas written from the definitions, 1e-10), the gradients against
# the serial reference's backward (<= 1e-12) and against central finite
# differences of the reference forward (fd_max_rel_err <= 1e-6, as
# t-grad). The NumPy checks need Debian's python3-numpy.
. tests/lib.sh
export CF_OPT="-O1 -fno-var-tracking"
out=$B/tests/lang48
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
np=0
/usr/bin/python3 -c "import numpy" 2>/dev/null && np=1
[ $np = 1 ] || echo "SKIP lang48: the NumPy checks: no python3-numpy"

tag() { echo "$1" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//'; }

# one NAME DIR N SPEC ARGS...
one() {
	name=$1 dir=$2 n=$3 spec=$4
	shift 4
	if ! sh scripts/build-model.sh "$B" "$dir" "$spec" --backward "$@" >"$dir.log" 2>&1; then
		fail "$name (build)"
		tail -n 20 "$dir.log"
		return
	fi
	if ! $MPIRUN -n "$n" "$dir/run" --gradcheck --iters 1 --warmup 0 --dump "$dir/out.bin" \
	    --dump-inputs "$dir/in.bin" >"$dir.out" 2>&1; then
		fail "$name (run)"
		tail -n 20 "$dir.out"
		return
	fi
	e=$(field max_rel_err "$dir.out") g=$(field grad_max_rel_err "$dir.out")
	f=$(field fd_max_rel_err "$dir.out")
	if ! le "$e" 1e-12 || ! le "$g" 1e-12 || ! le "$f" 1e-6; then
		fail "$name (max_rel_err $e grad_max_rel_err $g fd_max_rel_err $f)"
	elif [ $np = 1 ] && ! /usr/bin/python3 tests/lang48.py "$dir"/"$(basename "$spec" .cf)".h \
	    "$dir/in.bin" "$dir/out.bin" >"$dir.np" 2>&1; then
		fail "$name (NumPy)"
		cat "$dir.np"
	else
		pass "$name (reference $e, gradients $g, fd $f)"
	fi
}

for m in rope_layout sub causal_br; do
	for n in 1 2 3; do
		for s in spec vanilla "fuse(ring)" "fuse(bidir)"; do
			[ $n = 1 ] && [ "$s" != spec ] && continue
			if [ "$s" = spec ]; then set --; else set -- "--schedule=$s"; fi
			one "lang48: $m $s N=$n" "$out/$m-$(tag "$s")-$n" $n \
				"tests/e2e/$m.cf" -D tp=$n "$@"
		done
	done
done

# the CUDA backend has them too (cfrt_sub, cfrt_rsub, cfrt_rope's dim):
# the generated code of each, with its backward, links against it
if [ -f "$B/libcfrt_cuda.a" ]; then
	for m in rope_layout sub causal_br; do
		check "lang48: $m with its backward links against libcfrt_cuda" \
			env CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$out/$m-cuda" \
			"tests/e2e/$m.cf" --backward --schedule="fuse(bidir)"
	done
else
	echo "SKIP lang48: no nvcc here: the CUDA backend was not built"
fi
