#!/bin/sh
# The CUDA backend on a machine without a GPU: libcfrt_cuda.a links into
# the generated code of every example (f32 and bf16), of backward passes
# (tests/grad) and into pc_app, with cuDNN where it is found and without
# (the library built without it links pc_app with no -lcudnn), and
# the output comparison of the GPU tests (driver --dump + cmpdump) accepts
# equal outputs and rejects different ones. The GPU runs themselves are
# make test-gpu, on a GPU machine. Skipped (a SKIP line) without nvcc.
. tests/lib.sh
[ -f "$B/libcfrt_cuda.a" ] || { echo "SKIP no nvcc here: the CUDA backend was not built"; exit 0; }
t=$B/tests/cuda-build
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60"

for f in examples/*.cf; do
	ex=$(basename "$f" .cf)
	for ty in f32 bf16; do
		check "cuda-build: $ex $ty links against libcfrt_cuda" \
			env CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$t/$ex-$ty" "$f" --type=$ty \
			--schedule="fuse(bidir)"
	done
done
# the backward pass too: its *_grad ops, in the same file as the forward
# (rep_attn1's [1, 2] all-reduce, kept small for the rounding it checks,
# at D = 4: fuse(bidir) cuts it into 4 slices)
for f in examples/mlp.cf tests/grad/*.cf; do
	ex=$(basename "$f" .cf)
	sz=
	[ "$ex" != rep_attn1 ] || sz="-D D=4"
	check "cuda-build: $ex with its backward links against libcfrt_cuda" \
		env CF_BACKEND=cuda sh scripts/build-model.sh "$B" "$t/$ex-bwd" "$f" --backward \
		--type=f32 --schedule="fuse(bidir)" $sz
done
"$CFC" examples/train/block.cf --backward --emit=h,c -o "$t/train"
check "cuda-build: the training application links against libcfrt_cuda" \
	mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -I"$t/train" -o "$t/train/train" \
	examples/train/train.c "$t/train/block.c" "$B/libcfrt_cuda.a" ${CUDA_LIBS:-$(sed -n 's/^Libs: -L[^ ]* -lcfrt_cuda //p' "$B/cfrt_cuda.pc")}
check "cuda-build: pc_app links against libcfrt_cuda" \
	mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -o "$t/pc_app" \
	tests/runtime/pc_app.c "$B/libcfrt_cuda.a" ${CUDA_LIBS:-$(sed -n 's/^Libs: -L[^ ]* -lcfrt_cuda //p' "$B/cfrt_cuda.pc")}
# on profiles of 4 H100s with every entry the current cfrt-calibrate-cuda
# writes (lease 13 with NCCL, lease 12 with copy engines: slowdown 4, the
# heads' rates, the clock): every row predicted, auto built per transfer
# mode: six schedules and auto per mode, and with AUTO_MARGINS=0 auto at
# --auto-margin=0 per mode too: 10 builds, 20 predictions
pd=$B/tests/gpu-profiles
mkdir -p "$pd"
cp tests/fixtures/prof/2026-11-27-NVIDIA-H100-lease13-tp4-nccl.prof "$pd/machine-4-nccl.prof"
cp tests/fixtures/prof/2026-11-27-NVIDIA-H100-lease12-tp4-ce.prof "$pd/machine-4-ce.prof"
check "cuda-build: the GPU benchmark's models build (case a, TP 4, auto and auto@0 per mode)" sh -c \
	"rm -rf $B/bench/gpu/a-4-* && PROFILE_DIR=$pd BUILD_ONLY=1 TPS=4 CASES=a AUTO_MARGINS=0 \
	   sh bench/gpu/bench.sh &&
	 test \$(ls $B/bench/gpu/a-4-*/run | wc -l) -eq 10 &&
	 test \$(grep -c '^predict case=a tp=4 .* ms=[0-9]' $B/bench/gpu/predicted.txt) -eq 20 &&
	 test \$(grep -c '^predict case=a tp=4 schedule=auto@0 transfer=[a-z]* ms=[0-9]' $B/bench/gpu/predicted.txt) -eq 2 &&
	 test -x $B/bench/gpu/a-4-auto@0-nccl/run && test -x $B/bench/gpu/a-4-auto@0-ce/run &&
	 test \$(grep -c '^auto@0 case=a tp=4 transfer=[a-z]* takes [a-z]' $B/bench/gpu/runs.txt) -eq 2"
# tests/gpu/app_stream (cfrt_init_opts on the application's CUDA stream
# and NCCL communicator, around a generated forward): a cuda.mk target
check "cuda-build: app_stream (the application's stream and NCCL communicator) builds" \
	sh -c "${MAKE:-make} -s --no-print-directory B='$B' SAN='${SAN:-}' '$B/tests/gpu/app_stream' >/dev/null &&
	       test -x '$B/tests/gpu/app_stream' && strings '$B/tests/gpu/app_stream' | grep -q cfrt_init_opts"
# tests/gpu/finite_check (CFRT_CHECK=finite on one GPU; t-finite runs
# the same program on the MPI backend): built, and the library checks
# values (no refusal of the setting left in it)
check "cuda-build: finite_check (CFRT_CHECK=finite) builds against libcfrt_cuda" \
	sh -c "test -x '$B/tests/gpu/finite_check' && nm '$B/libcfrt_cuda.a' | grep -q ' T cfrtk_nonfinite' &&
	       ! strings '$B/libcfrt_cuda.a' | grep -q 'does not check values yet'"
check "cuda-build: backend name" sh -c "strings '$t/pc_app' | grep -q 'cuda+nccl+cublas'"
# both builds: with cuDNN where scripts/cuda-libs.sh finds it (dnn.c then
# calls it), and without (CFRT_CUDNN=no: no cuDNN symbol, no -lcudnn)
nodnn_libs=${CUDA_LIBS_NODNN:-$(CFRT_CUDNN=no sh scripts/cuda-libs.sh)}
check "cuda-build: pc_app links against libcfrt_cuda built without cuDNN" \
	mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -o "$t/pc_app_nodnn" \
	tests/runtime/pc_app.c "$B/nocudnn/libcfrt_cuda.a" $nodnn_libs
check "cuda-build: without cuDNN nothing calls it" sh -c \
	"! nm '$B/nocudnn/libcfrt_cuda.a' | grep -q ' U cudnn' && ! echo '$nodnn_libs' | grep -q cudnn"
if [ -n "${CUDNN_CFLAGS-$(sh scripts/cuda-libs.sh --cflags)}" ]; then
	check "cuda-build: with cuDNN found, the library calls it and links it" sh -c \
		"nm '$B/libcfrt_cuda.a' | grep -q ' U cudnnBackendExecute' &&
		 echo '${CUDA_LIBS:-$(sh scripts/cuda-libs.sh)}' | grep -q -- -lcudnn &&
		 nm '$t/pc_app' | grep -q 'cudnnBackendExecute'"
else
	echo "SKIP cuda-build: cuDNN not found here: the build with it is not checked"
fi

# -- the comparison of the GPU tests, on CPU dumps of mlp (N = 1 and 4)
sh scripts/build-model.sh "$B" "$t/mlp1" examples/mlp.cf -D tp=1 >/dev/null 2>&1
sh scripts/build-model.sh "$B" "$t/mlp4" examples/mlp.cf >/dev/null 2>&1
$MPIRUN -n 1 "$t/mlp1/run" --iters 1 --dump "$t/one.bin" >/dev/null 2>&1
$MPIRUN -n 4 "$t/mlp4/run" --iters 1 --dump "$t/four.bin" >/dev/null 2>&1
check "cuda-build: dumps of N=1 and N=4 agree" "$B/tests/gpu/cmpdump" "$t/four.bin" "$t/one.bin" 1e-5
# the same bytes with one element changed must fail
cp "$t/four.bin" "$t/bad.bin"
printf '\000\000\000\000\200\204\056\101' | dd of="$t/bad.bin" bs=1 seek=800 conv=notrunc 2>/dev/null
# exit 1 is a rejection; 2 (unreadable input, bad arguments) is not
check "cuda-build: cmpdump rejects a changed element" sh -c "'$B/tests/gpu/cmpdump' '$t/bad.bin' '$t/one.bin' 2e-2; [ \$? -eq 1 ]"
check "cuda-build: cmpdump rejects a short file" sh -c "head -c 800 '$t/four.bin' >'$t/short.bin'; '$B/tests/gpu/cmpdump' '$t/short.bin' '$t/one.bin' 1; [ \$? -eq 1 ]"
