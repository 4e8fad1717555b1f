#!/bin/sh
# GPU correctness tests (make test-gpu, on a machine with 4 GPUs): every
# example x {vanilla, slice(2), fuse(ring), fuse(bidir)} x N in {2, 4} x
# {f32, bf16} x transfers {nccl, ce} (a grid of groups, tpdp: 1 x 2 and
# 2 x 2 ranks, NCCL only: a communicator per group), compared with the CPU
# f32 output of
# the MPI backend on the same inputs (cfrt_fill_global: the same values on
# every backend), as max |gpu - cpu| / max |cpu| over the whole output.
#
# Tolerances. f32 (no TF32): 1e-5, as the CPU tests; only the summation
# order and float (not double) elementwise math differ. bf16: 2e-2. bf16
# keeps 8 significant bits (unit roundoff u = 2^-9 ~ 2e-3); the inputs and
# weights are rounded to bf16 once, and every stored intermediate (GEMM
# outputs, activations, attention probabilities, each partial sum of a
# reduce-scatter ring: N-1 bf16 additions) once more, each adding ~u
# relative to values of the output's magnitude; about ten such roundings
# on the longest path (the transformer's two blocks) give ~2e-2, while a
# wrong slice, step or peer gives errors of order 1.
# Also pc_app (a hand-written FuseRS with cfrt_gemm beta = 1) on 2 and 4,
# attn_check (cuDNN's attention and the fused kernels, forward and
# backward, tests/gpu/attn_check.c; and a build without cuDNN), grad_check (the backward calls,
# tests/gpu/grad_check.c) and gqa_check (grouped-query attention,
# tests/gpu/gqa_check.c) and finite_check (CFRT_CHECK=finite,
# tests/gpu/finite_check.c) on 1; the trace (CFRT_TRACE) of mlp and ulysses
# on every GPU, and app_stream (the application's stream and NCCL
# communicator, tests/gpu/app_stream.c) on 1.
. tests/lib.sh
out=$B/tests/gpu-run
rm -rf "$out"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 B OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --timeout 120"
# all_ok NAME [ARGS...]: $B/tests/gpu/NAME on one rank, its output in
# $out/NAME; PASS when it exits 0 and says "NAME: all ok"
all_ok() {
	_n=$1
	shift
	$MPIRUN -x NCCL_NVLS_ENABLE -n 1 "$B/tests/gpu/$_n" "$@" >"$out/$_n" 2>&1
	if [ $? = 0 ] && grep -q "^$_n: all ok\$" "$out/$_n"; then
		pass "gpu: $_n"
	else
		fail "gpu: $_n"
		tail -n 20 "$out/$_n"
	fi
}
JOBS=${JOBS:-6}
# EXAMPLES: the specs to run (default every example)
EXAMPLES=${EXAMPLES:-$(ls examples/*.cf)}

# -- CPU f32 references: one rank, the MPI backend (or, where the GPU
# machine cannot build it, dumps made so elsewhere: GPU_REFS=DIR)
for f in $EXAMPLES; do
	ex=$(basename "$f" .cf)
	dir=$out/ref-$ex
	if [ -n "${GPU_REFS:-}" ] && cp "$GPU_REFS/ref-$ex.bin" "$out/"; then
		pass "gpu: CPU reference of $ex (from $GPU_REFS)"
	elif sh scripts/build-model.sh "$B" "$dir" "$f" $(groupdefs "$ex" 1) \
		>"$dir.log" 2>&1 &&
	   $MPIRUN -n 1 "$dir/run" --iters 1 --warmup 0 --dump "$out/ref-$ex.bin" \
		>>"$dir.log" 2>&1; then
		pass "gpu: CPU reference of $ex"
	else
		fail "gpu: CPU reference of $ex"
		tail -n 20 "$dir.log"
	fi
done

# -- every case, JOBS at a time (GPUs are shared by the concurrent jobs).
# TYPES_N2: the element types tested on 2 GPUs (all of them on 4).
for f in $EXAMPLES; do
	ex=$(basename "$f" .cf)
	for n in 4 2; do
		for s in "fuse(ring)" "fuse(bidir)" vanilla "slice(2)"; do
			for t in bf16 f32; do
				[ $n = 2 ] && ! echo "${TYPES_N2:-bf16 f32}" | grep -qw $t && continue
				printf '%s\n%s\n%s\n%s\n' "$ex" "$n" "$s" "$t"
			done
		done
	done
done | xargs -d '\n' -n 4 -P "$JOBS" sh tests/gpu/case.sh

# -- pc_app: FuseRS through cfrt_gemm with beta = 1, checked by itself
: "${CUDA_LIBS:=$(sh scripts/cuda-libs.sh)}"
mpicc -std=c11 -O2 -Wall -Wextra -Werror -Iruntime -o "$out/pc_app" \
	tests/runtime/pc_app.c "$B/libcfrt_cuda.a" $CUDA_LIBS
for n in 2 4; do
	for mode in nccl ce; do
		CFRT_TRANSFER=$mode $MPIRUN -x CFRT_TRANSFER -x NCCL_NVLS_ENABLE \
			-n $n "$out/pc_app" >"$out/pc_app.$n.$mode" 2>&1
		if grep -q "pc_app: .*: ok" "$out/pc_app.$n.$mode"; then
			pass "gpu: pc_app N=$n $mode"
		else
			fail "gpu: pc_app N=$n $mode"
			tail -n 5 "$out/pc_app.$n.$mode"
		fi
	done
done

# -- attention on one GPU: the fused kernels against the GEMM path and a
# host reference (tests/gpu/attn_check.c), forward and backward, one
# PASS/FAIL per case; then the timings of both paths at the benchmark
# shape, forward and backward.
# (its double references take most of its time: 108 s on one H100 by
# itself, past 120 s here once, so its limit is longer)
ATTN_RUN="mpirun --allow-run-as-root --timeout 400"
$ATTN_RUN -x NCCL_NVLS_ENABLE -n 1 "$B/tests/gpu/attn_check" \
	>"$out/attn_check" 2>&1
arc=$?
sed -nE 's/^attn_check: ([^:]*): (.*: )?(ok|MISMATCH)$/\3 \1/p' \
	"$out/attn_check" | while read -r res name; do
	if [ "$res" = ok ]; then pass "gpu: attn $name"; else fail "gpu: attn $name"; fi
done
if [ $arc = 0 ] && grep -q '^attn_check: all ok$' "$out/attn_check"; then
	pass "gpu: attn_check"
else
	fail "gpu: attn_check"
	tail -n 20 "$out/attn_check"
fi
grep '^attn_check: time' "$out/attn_check"
# the same without cuDNN at build time: CFRT_ATTN=cudnn is CFRT_ENOTSUP
$ATTN_RUN -x NCCL_NVLS_ENABLE -n 1 "$B/nocudnn/attn_check" --no-cudnn \
	>"$out/attn_check.nocudnn" 2>&1
if [ $? = 0 ] && grep -q '^attn_check: all ok$' "$out/attn_check.nocudnn"; then
	pass "gpu: attn_check without cuDNN: CFRT_ATTN=cudnn is refused"
else
	fail "gpu: attn_check without cuDNN: CFRT_ATTN=cudnn is refused"
	tail -n 5 "$out/attn_check.nocudnn"
fi

# -- the backward calls on one GPU against a double reference on the host
# (tests/gpu/grad_check.c), one PASS/FAIL per case.
$MPIRUN -x NCCL_NVLS_ENABLE -n 1 "$B/tests/gpu/grad_check" \
	>"$out/grad_check" 2>&1
grc=$?
sed -nE 's/^grad_check: ([^:]*): (.*: )?(ok|MISMATCH)$/\3 \1/p' \
	"$out/grad_check" | while read -r res name; do
	if [ "$res" = ok ]; then pass "gpu: grad $name"; else fail "gpu: grad $name"; fi
done
if [ $grc = 0 ] && grep -q '^grad_check: all ok$' "$out/grad_check"; then
	pass "gpu: grad_check"
else
	fail "gpu: grad_check"
	tail -n 20 "$out/grad_check"
fi

# -- rope at sizes that take the thread-per-position kernel
# (tests/gpu/rope_check.c): against a double reference and the
# thread-per-pair kernel's bits, forward and inverse, three layouts
all_ok rope_check
# cfrt_rmsnorm and cfrt_layernorm through each row kernel
# (tests/gpu/norm_check.c): against a double reference and the same rows
# one element off their alignment (another kernel)
all_ok norm_check
# cfrt_matmul_add, the addend as cuBLASLt's C (tests/gpu/mmadd_check.c):
# against a double reference and cfrt_matmul then cfrt_add
all_ok mmadd_check
# cfrt_swiglu and its backward through each elementwise kernel
# (tests/gpu/swiglu_check.c): against a double reference and the unfused
# silu, mul and silu_grad calls, bf16, f16 and f32, flat, odd and sliced
all_ok swiglu_check

# -- CFRT_CHECK=finite on one GPU (tests/gpu/finite_check.c --gpu): a
# planted NaN or Inf (f32, f64, bf16; a column slice; an overflowing
# matmul; attention and its backward) fails the call that wrote it with
# the whole message naming rank, op, step, call, tensors and element;
# finite values pass; one PASS/FAIL per case.
$MPIRUN -x NCCL_NVLS_ENABLE -n 1 "$B/tests/gpu/finite_check" --gpu >"$out/finite_check" 2>&1
frc=$?
sed -nE 's/^finite_check: ([^:]*): (ok|MISMATCH)$/\2 \1/p' "$out/finite_check" |
	while read -r res name; do
		if [ "$res" = ok ]; then pass "gpu: finite $name"; else fail "gpu: finite $name"; fi
	done
if [ $frc = 0 ] && grep -q '^finite_check: PASS (14 cases)$' "$out/finite_check"; then
	pass "gpu: finite_check (CFRT_CHECK=finite on the CUDA backend)"
else
	fail "gpu: finite_check (CFRT_CHECK=finite on the CUDA backend)"
	tail -n 20 "$out/finite_check"
fi

# -- grouped-query attention against repeated key/value heads on one GPU
# (tests/gpu/gqa_check.c): the fused kernels and the GEMM path
all_ok gqa_check --gpu

# -- the trace (CFRT_TRACE) on the GPUs: mlp under fuse(ring) and ulysses
# under its spec (FuseA2A) on every GPU there is (at most 4), NCCL and
# copy-engine transfers; each run writes one file for the job that
# tests/tracecheck.py accepts (a process row per rank, a named track per
# stream lane, no overlapping events on one, a flow per message, tensors
# in args).
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpu" -gt 4 ] && ngpu=4
[ "$ngpu" -lt 1 ] && ngpu=1
for ex in mlp ulysses; do
	d=$out/trace-$ex
	s="fuse(ring)"
	[ $ex = ulysses ] && s=spec
	set -- $(groupdefs "$ex" "$ngpu")
	[ "$s" = spec ] || set -- "$@" "--schedule=$s"
	if ! CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$d" "examples/$ex.cf" "$@" \
		>"$d.log" 2>&1; then
		fail "gpu: trace of $ex (build)"
		continue
	fi
	for mode in nccl ce; do
		CFRT_TRACE=$d/$mode CFRT_TRANSFER=$mode $MPIRUN -x CFRT_TRACE -x CFRT_TRANSFER \
			-x NCCL_NVLS_ENABLE -n "$ngpu" "$d/run" --iters 2 --warmup 1 \
			>"$d.$mode.out" 2>&1
		check "gpu: trace of $ex $s N=$ngpu $mode" \
			python3 tests/tracecheck.py "$d/$mode.json" "$ngpu"
	done
done

# -- an application's own stream and NCCL communicator (cfrt_init_opts;
# tests/gpu/app_stream.c): its work before and after the generated
# forward on that stream, no host synchronisation between; traced too.
CFRT_TRACE=$out/app_stream $MPIRUN -x CFRT_TRACE -x NCCL_NVLS_ENABLE -n 1 \
	"$B/tests/gpu/app_stream" >"$out/app_stream.out" 2>&1
cat "$out/app_stream.out"
check "gpu: the application's stream and NCCL communicator (app_stream)" \
	grep -q '^app_stream: all ok$' "$out/app_stream.out"
check "gpu: the trace of app_stream" python3 tests/tracecheck.py "$out/app_stream.json" 1

# -- the Python module (cfc --emit=py) on torch CUDA tensors, one GPU:
# mlp at tp = 1 against NumPy, the reference and PyTorch's own ops
# (tests/gpu/py_torch.py), when python3 has torch
if python3 -c "import torch, numpy" 2>/dev/null; then
	d=$out/py
	mkdir -p "$d"
	"$B/cfc" examples/mlp.cf -D tp=1 --backward --emit=h,c,ref,py -o "$d" &&
	mpicc -shared -fPIC -O2 -Iruntime -I"$d" -o "$d/libmlp.so" "$d/mlp.c" "$d/mlp_ref.c" \
		"$B/libcfrt_cuda.a" $CUDA_LIBS >"$d.log" 2>&1 &&
	$MPIRUN -x NCCL_NVLS_ENABLE -n 1 python3 tests/gpu/py_torch.py "$d" >"$d.out" 2>&1
	cat "$d.out"
	if grep -q '^torch: .* ok$' "$d.out" && ! grep -q '^torch: .* FAIL' "$d.out"; then
		pass "gpu: python module on torch tensors"
	else
		fail "gpu: python module on torch tensors"
		tail -n 20 "$d.log"
	fi
else
	echo "SKIP gpu: python module on torch tensors: python3 has no torch"
fi
