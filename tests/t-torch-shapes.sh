#!/bin/sh
# Shapes a training loop meets (docs/TORCH.md): one build of the Llama
# block of examples/llama.cf at two sequence lengths (cfc -D S=16,32), at
# tp = 2 under mpirun on CPU tensors: every variant's C under its own
# name, one module; tests/torch/shapes.py uses both lengths in one
# process, the torch Layer and the NumPy Model against plain PyTorch
# (examples/torch/llama_ref.py), forward and every gradient within 1e-5,
# and an unbuilt length raises ValueError while the job goes on. A build
# of one size stays what it was (its C and header byte for byte).
. tests/lib.sh
t=$B/tests/torch-shapes
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

# -- cfc: the files of a build of two variants, and of one
"$CFC" examples/llama.cf -D tp=2 -D S=16,32 --backward --accumulate --emit=h,c,ref,py \
	-o "$t/two" >"$t/two.log" 2>&1
check "torch shapes: cfc -D S=16,32 writes llama_S16.{c,h}, llama_S32.{c,h}, their _ref.c and one llama.py" \
	sh -c "cd '$t/two' && [ \"\$(ls | tr '\n' ' ')\" = 'llama.py llama_S16.c llama_S16.h llama_S16_ref.c llama_S32.c llama_S32.h llama_S32_ref.c ' ]"
"$CFC" examples/llama.cf -D tp=2 -D S=32 --backward --accumulate --emit=h,c,ref -o "$t/one"
# variant S=32 of the two is the one-size build of S=32, its names aside
check "torch shapes: the variant S=32's C and header = a build of S=32 alone, renamed" \
	sh -c "for f in .c .h _ref.c; do sed 's/llama_S32/llama/g; s/LLAMA_S32/LLAMA/g' '$t/two/llama_S32'\$f | cmp -s - '$t/one/llama'\$f || exit 1; done"
check "torch shapes: --emit=c of a build of several sizes needs -o DIR" \
	sh -c "! '$CFC' examples/llama.cf -D S=16,32 --emit=c >/dev/null 2>'$t/noo.err' && grep -q 'give -o DIR' '$t/noo.err'"
for d in S=16,16 S=16, S=16,x; do
	check "torch shapes: -D $d is a usage error" \
		sh -c "'$CFC' examples/llama.cf -D $d 2>'$t/bad.err'; [ \$? = 2 ] && grep -q '^cfc: -D $d: ' '$t/bad.err'"
done
check "torch shapes: more than 16 variants is a usage error" \
	sh -c "'$CFC' examples/llama.cf -D S=8,16,24,32,40 -D B=1,2,4,8 2>'$t/many.err'; [ \$? = 2 ] && grep -q 'more than 16 variants' '$t/many.err'"

. tests/torchlib.sh
torch_python "torch shapes"
torch_lib "$t/two" "$t/two"/llama_S*.c >"$t/cc.log" 2>&1 || cat "$t/cc.log"
env $PYENV $MPIRUN -n 2 "$PY" tests/torch/shapes.py "$t/two" --log "$t/run" >"$t/run.out" 2>&1
echo "rc=$?" >>"$t/run.out"
cat "$t/run.out"
# ranks LINE: both ranks wrote LINE ok
ranks() {
	for r in 0 1; do
		grep -q "^rank $r: $1.* ok$" "$t/run.$r" || return 1
	done
}
check "torch shapes: the module carries the variants S = 16 and 32" ranks "the module carries"
for S in 16 32; do
	check "torch shapes: Model at S = $S: forward and every gradient = plain PyTorch's within 1e-5" \
		ranks "Model at S = $S:"
	check "torch shapes: Layer at S = $S: forward, d_x and every weight's .grad = plain PyTorch's within 1e-5" \
		ranks "Layer at S = $S:"
done
check "torch shapes: Model.reference_forward picks its variant (whole tensors)" ranks "Model.reference_forward"
check "torch shapes: Model: an unbuilt length raises ValueError naming x, dimension 1 and the sizes built; it runs on" \
	ranks "Model: an unbuilt length"
check "torch shapes: Layer: weight gradients of an S = 16 and an S = 32 micro-batch accumulate in .grad" \
	ranks "Layer: an S = 16 and an S = 32 micro-batch"
check "torch shapes: Layer: forwards of both lengths, backwards in reverse order" ranks "Layer: forwards at"
check "torch shapes: Layer: an unbuilt length raises ValueError naming x, dimension 1 and the sizes built; it runs on" \
	ranks "Layer: an unbuilt length"
check "torch shapes: every check of both ranks passed, the job exited 0" \
	sh -c "[ \$(cat '$t/run.0' '$t/run.1' | grep -c ' ok\$') = 26 ] && ! grep -q FAIL '$t/run.0' '$t/run.1' && grep -q '^rc=0\$' '$t/run.out'"
