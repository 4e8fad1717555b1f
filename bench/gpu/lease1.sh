#!/bin/sh
# lease1.sh PREP DIR | RUN: one lease of a one-GPU machine for issue 52 and
# issue 50's GPU checks, from a development machine that builds what the
# GPU machine cannot (cfc: flex and bison) and what it need not (the CUDA
# runtime, nvcc being slow on a shared machine).
#   sh bench/gpu/lease1.sh prep DIR   here: a copy of this tree in DIR with
#        build/libcfrt_cuda.a (and the build without cuDNN), the generated
#        C of the layer benchmark (build/gen, bench/gpu/layer1.sh GEN_ONLY),
#        of the torch checks (build/tgen, tests/gpu/torch_layer.sh gen) and
#        of the one-GPU blocks (build/block1, bench/gpu/block1.sh GEN_ONLY);
#   sh bench/gpu/lease1.sh run        on the GPU machine, from DIR: the
#        one-GPU checks (tests/gpu/grad_check, gqa_check, finite_check --gpu, rope_check, norm_check, mmadd_check, swiglu_check, attn_check with
#        ATTN=1, and attn_check of the build without cuDNN), the layer benchmark (CONFIGS, default
#        s4096-b1) and tests/gpu/torch_layer.sh with BENCH=1, all logs in
#        one tarball $OUT/lease.tgz (the device tool's OUT) and a summary
#        on stdout.
# PHASES picks the parts of run: checks probe bench order torch by default;
# two more run only when named (each about a minute):
#   mlp    issue 52's MLP training step (bench/mlp_sbd.cf, bf16, B 16,
#          S 4096, D 4096, tp = 1) against PyTorch autograd, eager and
#          torch.compile: bench/gpu/block1.sh mlp;
#   casec  case (c)'s compute of one rank at tp = 4 (bench/attn_rank.cf:
#          Q/K/V projections onto 8 heads of 128, causal attention, the
#          output projection; B 16, S 4096, D 4096), forward alone and the
#          training step, against the same in PyTorch (matmuls and causal
#          SDPA), eager and torch.compile: bench/gpu/block1.sh casec.
#   Each writes $OUT/CASE-summary.md (ours ms, eager ms, compile ms, the
#   ratios PyTorch / ours, peak MiB; block_report.py) and keeps its logs
#   in lease.tgz (CASE/: runs.txt, each program's output):
#     PHASES="mlp casec" sh bench/gpu/lease1.sh run
set -u
if [ "${1:-}" = prep ]; then
	set -e
	d=$2
	: "${B:=build}"
	mkdir -p "$d"
	tar --exclude=./.git --exclude=./build --exclude=./bench/results -cf - . | tar -C "$d" -xf -
	mkdir -p "$d/build/nocudnn"
	cp -p "$B/libcfrt_cuda.a" "$d/build/"
	cp -p "$B/nocudnn/libcfrt_cuda.a" "$d/build/nocudnn/"
	rm -rf "$d/build/gen" "$d/build/tgen"
	GEN_ONLY=$d/build/gen CONFIGS="${CONFIGS:-s4096-b1}" sh bench/gpu/layer1.sh
	# BASEB=DIR: an earlier commit's build (DIR/cfc, DIR/libcfrt_cuda.a),
	# timed beside this one (layer1.sh's BASE)
	if [ -n "${BASEB:-}" ]; then
		rm -rf "$d/build/base"
		mkdir -p "$d/build/base"
		cp -p "$BASEB/libcfrt_cuda.a" "$d/build/base/"
		mkdir -p "$d/build/base/include"
		cp -p "$BASEB/../runtime/"*.h "$d/build/base/include/"
		B=$BASEB GEN_ONLY=$d/build/base/gen CONFIGS="${CONFIGS:-s4096-b1}" sh bench/gpu/layer1.sh
	fi
	# the order phase's base: this build's library, its C in the region
	# order (cfc --order=region), against the default (issue 51: what
	# the whole-pass order costs with nothing to hide)
	rm -rf "$d/build/order-base"
	mkdir -p "$d/build/order-base/include"
	cp -p "$B/libcfrt_cuda.a" "$d/build/order-base/"
	cp -p runtime/*.h "$d/build/order-base/include/"
	CFC_FLAGS=--order=region GEN_ONLY=$d/build/order-base/gen \
		CONFIGS="${CONFIGS:-s4096-b1}" sh bench/gpu/layer1.sh
	sh tests/gpu/torch_layer.sh gen "$d/build/tgen"
	# the one-GPU blocks' C (the mlp and casec phases)
	rm -rf "$d/build/block1"
	GEN_ONLY=$d/build/block1 sh bench/gpu/block1.sh mlp casec
	du -sh "$d"
	exit 0
fi
[ "${1:-}" = run ] || { echo "usage: lease1.sh prep DIR | run" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
o=${OUT:-/tmp/lease1}
w=/tmp/lease1-work
rm -rf "$w"
mkdir -p "$w/checks" "$w/bench" "$w/torch" "$w/mlp" "$w/casec"
t0=$(date +%s)
say() { echo "lease1: [$(($(date +%s) - t0)) s] $*"; }
mkdir -p "$o"
# the logs so far into $o/lease.tgz (again after each phase: a run cut off
# at its time limit still brings back what it did)
# (the torch phase writes its logs into $o/torch as it goes)
keep() { tar -C "$w" -czf "$o/lease.tgz" checks bench mlp casec; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
libs=$(sh scripts/cuda-libs.sh)
say "libraries: $libs"
MPIRUN="mpirun --allow-run-as-root --timeout 240"
# PHASES: which parts run (default: checks probe bench order torch; mlp and
# casec only when named), so that a lease's calls of at most 10 minutes
# each can split them
: "${PHASES:=checks probe bench order torch}"
has() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }
if has checks; then
for t in grad_check attn_check gqa_check finite_check rope_check norm_check mmadd_check swiglu_check; do
	mpicc -std=c11 -O2 -Iruntime -o "build/$t" "tests/gpu/$t.c" build/libcfrt_cuda.a $libs -lm ||
		echo "lease1: FAIL build $t"
done
mpicc -std=c11 -O2 -Iruntime -o build/nocudnn_attn_check tests/gpu/attn_check.c \
	build/nocudnn/libcfrt_cuda.a $(CFRT_CUDNN=no sh scripts/cuda-libs.sh) -lm
say "checks"
$MPIRUN -n 1 build/grad_check >"$w/checks/grad_check.txt" 2>&1; echo "grad_check rc=$?"
# attn_check takes about 2 minutes (its double references): ATTN=1 only
if [ "${ATTN:-0}" = 1 ]; then
	$MPIRUN -n 1 build/attn_check >"$w/checks/attn_check.txt" 2>&1
	echo "attn_check rc=$?"
fi
$MPIRUN -n 1 build/gqa_check --gpu >"$w/checks/gqa_check.txt" 2>&1; echo "gqa_check rc=$?"
$MPIRUN -n 1 build/finite_check --gpu >"$w/checks/finite_check.txt" 2>&1
echo "finite_check --gpu rc=$?"
$MPIRUN -n 1 build/rope_check >"$w/checks/rope_check.txt" 2>&1; echo "rope_check rc=$?"
$MPIRUN -n 1 build/norm_check >"$w/checks/norm_check.txt" 2>&1; echo "norm_check rc=$?"
$MPIRUN -n 1 build/mmadd_check >"$w/checks/mmadd_check.txt" 2>&1; echo "mmadd_check rc=$?"
$MPIRUN -n 1 build/swiglu_check >"$w/checks/swiglu_check.txt" 2>&1; echo "swiglu_check rc=$?"
$MPIRUN -n 1 build/nocudnn_attn_check --no-cudnn >"$w/checks/attn_check_nocudnn.txt" 2>&1
echo "attn_check --no-cudnn rc=$?"
for f in "$w"/checks/*.txt; do
	echo "$(basename "$f"): $(grep -c ': ok' "$f") ok, $(grep -c 'MISMATCH\|FAIL' "$f") mismatch"
	grep 'MISMATCH\|FAIL' "$f" | head -n 5
done
keep
fi
# our attention at the layer's shape, every way a layer can call it
# (bench/gpu/attn_gqa_probe.c)
if has probe; then
	say "attention probe (the layer's shape)"
	mkdir -p "$w/bench"
	mpicc -std=c11 -O2 -Iruntime -o build/attn_gqa_probe bench/gpu/attn_gqa_probe.c \
		build/libcfrt_cuda.a $libs -lm &&
		$MPIRUN -n 1 build/attn_gqa_probe --iters 20 2>&1 | tee "$w/bench/attn_gqa_probe.txt"
	keep
fi
if has bench; then
say "layer benchmark"
[ -d build/base ] && export BASE=build/base
COMMIT=${COMMIT:-unknown} GEN=build/gen OUT="$w/bench" ITERS=${ITERS:-20} \
	CONFIGS="${CONFIGS:-s4096-b1}" sh bench/gpu/layer1.sh 2>&1 | tail -n 20
keep
cp "$w/bench/summary.md" "$o/" 2>/dev/null
fi
if has order; then
say "layer benchmark, region order as the base"
mkdir -p "$w/order"
COMMIT=${COMMIT:-unknown} GEN=build/gen OUT="$w/order" ITERS=${ITERS:-20} BASE=build/order-base \
	CONFIGS="${CONFIGS:-s4096-b1}" sh bench/gpu/layer1.sh 2>&1 | tail -n 8
tar -C "$w" -czf "$o/order.tgz" order
cp "$w/order/summary.md" "$o/order-summary.md" 2>/dev/null
fi
# issue 52's one-GPU blocks (bench/gpu/block1.sh), C from prep's build/block1
for c in mlp casec; do
	has $c || continue
	say "one-GPU block $c (bench/gpu/block1.sh)"
	COMMIT=${COMMIT:-unknown} GEN=build/block1 OUT="$w/$c" ITERS=${ITERS:-20} \
		sh bench/gpu/block1.sh $c 2>&1 | tail -n 12
	keep
	cp "$w/$c/summary.md" "$o/$c-summary.md" 2>/dev/null &&
		grep '^## \|^| \|^- target' "$w/$c/summary.md"
done
has torch || { say "done"; exit 0; }
say "torch layer checks (issue 50)"
# the library is built here already: torch_layer.sh's make has nothing to do
mkdir -p "$w/shim"
printf '#!/bin/sh\nexit 0\n' >"$w/shim/make"
chmod +x "$w/shim/make"
PATH=$w/shim:$PATH GEN=build/tgen OUT="$o/torch" BENCH=1 sh tests/gpu/torch_layer.sh 2>&1 | tail -n 40
echo "torch_layer.sh rc=$?"
say "done"
keep
exit 0
