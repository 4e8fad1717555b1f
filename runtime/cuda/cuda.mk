# runtime/cuda/cuda.mk: libcfrt_cuda (runtime/cfrt.h + the CUDA + NCCL +
# cuBLAS backend in runtime/cuda + runtime/common, the shared code that
# runtime/runtime.mk compiles), its pkg-config file, the GPU test and
# benchmark entry points. Included by the Makefile; everything here is
# skipped when there is no nvcc. Uses the Makefile's B, MPICC, CFLAGS_ALL,
# LDFLAGS_ALL, PREFIX, DESTDIR.
#   make test-gpu    every example x schedule x 2 and 4 GPUs, attention
#                    kernels and the backward calls on 1 (GPU machine)
#   make bench-gpu   issue 5's benchmark, writes bench/results (GPU machine)

NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
ifneq ($(wildcard $(NVCC)),)

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
# sm_90 machine code (Hopper) plus PTX for later GPUs.
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90 \
             -gencode=arch=compute_90,code=compute_90
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
CU_CFLAGS = -fPIC -Iruntime -isystem $(CUDA_HOME)/include
CU_NVFLAGS = -std=c++17 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall,-Wextra \
             -Iruntime $(MPI_CFLAGS) -MMD -MP
# What a program linked against libcfrt_cuda.a needs besides MPI.
CUDA_LIBS := $(shell sh scripts/cuda-libs.sh $(CUDA_HOME))
export CUDA_LIBS

CU_SRC = $(wildcard runtime/cuda/*.c) $(RT_COMMON_SRC)
CU_KERN = $(B)/runtime/cuda/kernels.o $(B)/runtime/cuda/grad.o \
          $(B)/runtime/cuda/flash.o $(B)/runtime/cuda/flash_bwd.o
CU_OBJ = $(CU_SRC:%.c=$(B)/%.o) $(CU_KERN)

$(B)/runtime/cuda/%.o: runtime/cuda/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) $(CU_CFLAGS) -c -o $@ $<

$(CU_KERN): $(B)/runtime/cuda/%.o: runtime/cuda/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(CU_NVFLAGS) -c -o $@ $<

$(B)/libcfrt_cuda.a: $(CU_OBJ)
	rm -f $@
	$(AR) rcs $@ $(CU_OBJ)

# cuDNN, when scripts/cuda-libs.sh finds it: only dnn.c includes it. The
# library as a machine without cuDNN builds it (dnn.c without
# CFRT_HAVE_CUDNN; link it with CFRT_CUDNN=no sh scripts/cuda-libs.sh),
# for tests/t-cuda-build.sh.
CUDNN_CFLAGS := $(shell sh scripts/cuda-libs.sh --cflags $(CUDA_HOME))
$(B)/runtime/cuda/dnn.o: CU_CFLAGS += $(CUDNN_CFLAGS)
CU_OBJ_NODNN = $(filter-out $(B)/runtime/cuda/dnn.o,$(CU_OBJ)) $(B)/nocudnn/dnn.o
$(B)/nocudnn/dnn.o: runtime/cuda/dnn.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) $(CU_CFLAGS) -c -o $@ $<
$(B)/nocudnn/libcfrt_cuda.a: $(CU_OBJ_NODNN)
	rm -f $@
	$(AR) rcs $@ $(CU_OBJ_NODNN)
CUDA_LIBS_NODNN := $(shell CFRT_CUDNN=no sh scripts/cuda-libs.sh $(CUDA_HOME))
# the tests link with what the build found, from the same CUDA_HOME
export CUDA_HOME CUDA_LIBS_NODNN CUDNN_CFLAGS
# attn_check of that library: CFRT_ATTN=cudnn must fail there (--no-cudnn).
$(B)/nocudnn/attn_check: tests/gpu/attn_check.c $(B)/nocudnn/libcfrt_cuda.a
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/nocudnn/libcfrt_cuda.a $(CUDA_LIBS_NODNN)

CU_PC = printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' \
	'includedir=$${prefix}/include' '' 'Name: cfrt_cuda' \
	'Description: CommFuse runtime, CUDA + NCCL + cuBLAS backend (compile with mpicc)' \
	'Version: $(RT_VERSION)' 'Cflags: -I$${includedir}' \
	'Libs: -L$${libdir} -lcfrt_cuda $(strip $(CUDA_LIBS) $(SANLINK))'
$(B)/cfrt_cuda.pc: runtime/cuda/cuda.mk
	@mkdir -p $(@D)
	$(CU_PC) >$@

# The dump comparer of the GPU tests (plain C, built here too).
$(B)/tests/gpu/cmpdump: tests/gpu/cmpdump.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< -lm

# One GEMM through each cuBLAS entry point (bench/gpu/gemm_probe.c).
$(B)/bench/gpu/gemm_probe: bench/gpu/gemm_probe.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(CU_CFLAGS) $(LDFLAGS_ALL) -o $@ $< \
		-L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart

# cfrt_attention's fused kernel against its GEMM path, on one GPU
# (tests/gpu/attn_check.c; run by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/attn_check: tests/gpu/attn_check.c $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS)

# Grouped-query attention against repeated key/value heads, forward and
# backward, on one GPU (tests/gpu/gqa_check.c --gpu; run by
# tests/gpu/run.sh under mpirun -n 1; t-runtime runs it on the MPI backend).
$(B)/tests/gpu/gqa_check: tests/gpu/gqa_check.c $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS)

# The backward calls against a double reference on the host, on one GPU
# (tests/gpu/grad_check.c; run by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/grad_check: tests/gpu/grad_check.c tests/gpu/hostval.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS)

# CFRT_CHECK=finite on one GPU: planted NaNs and Infs named by the call
# that wrote them (tests/gpu/finite_check.c --gpu; run by tests/gpu/run.sh
# under mpirun -n 1; tests/t-finite.sh runs it on the MPI backend).
$(B)/tests/gpu/finite_check: tests/gpu/finite_check.c $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS)

# cfrt_rope at sizes that take the thread-per-position kernel, against a
# double reference and the thread-per-pair kernel's bits
# (tests/gpu/rope_check.c; run by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/rope_check: tests/gpu/rope_check.c tests/gpu/hostval.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS) -lm

# cfrt_rmsnorm and cfrt_layernorm through each row kernel, against a
# double reference and the same rows misaligned (tests/gpu/norm_check.c;
# run by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/norm_check: tests/gpu/norm_check.c tests/gpu/hostval.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS) -lm

# cfrt_matmul_add (one cuBLASLt call, the addend its C) against a double
# reference and cfrt_matmul then cfrt_add (tests/gpu/mmadd_check.c; run
# by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/mmadd_check: tests/gpu/mmadd_check.c tests/gpu/hostval.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS) -lm

# cfrt_swiglu, cfrt_swiglu_da and cfrt_swiglu_db through each elementwise
# kernel, against a double reference and the unfused calls
# (tests/gpu/swiglu_check.c; run by tests/gpu/run.sh under mpirun -n 1).
$(B)/tests/gpu/swiglu_check: tests/gpu/swiglu_check.c tests/gpu/hostval.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< \
		$(B)/libcfrt_cuda.a $(CUDA_LIBS) -lm

# An application that gives the context its own CUDA stream and NCCL
# communicator (tests/gpu/app_stream.c, cfrt_init_opts), on mlp at tp = 1
# under slice(2) (library collectives on the side stream, waited on
# later); run by tests/gpu/run.sh on one GPU.
APP_GEN = $(B)/tests/gpu/app_stream.gen
$(APP_GEN)/mlp.h $(APP_GEN)/mlp.c $(APP_GEN)/mlp_ref.c &: examples/mlp.cf $(B)/cfc
	@mkdir -p $(APP_GEN)
	$(B)/cfc $< -D tp=1 --schedule='slice(2)' --emit=h,c,ref -o $(APP_GEN)
$(B)/tests/gpu/app_stream: tests/gpu/app_stream.c $(APP_GEN)/mlp.h $(APP_GEN)/mlp.c \
                           $(APP_GEN)/mlp_ref.c $(B)/libcfrt_cuda.a
	$(MPICC) $(CFLAGS_ALL) $(CU_CFLAGS) -I$(APP_GEN) $(LDFLAGS_ALL) -o $@ $< \
		$(APP_GEN)/mlp.c $(APP_GEN)/mlp_ref.c $(B)/libcfrt_cuda.a $(CUDA_LIBS) -lm

# Probes linked with this backend (bench/gpu/NAME.c): xfer_probe, one ring
# step's transfer, a GEMM and both at once; attn_probe, our attention
# through cuDNN and our kernels at issue 11's shapes (attn_probe.sh runs it
# beside SDPA); heads_probe, case c's projection, head split and pack,
# whole and in slices, on one GPU, the head split checked exactly;
# coll_probe, the library collectives timed as calibrate and as a pass
# meet them.
CU_PROBES = $(patsubst %,$(B)/bench/gpu/%,xfer_probe attn_probe heads_probe coll_probe)
$(CU_PROBES): $(B)/bench/gpu/%: bench/gpu/%.c $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< $(B)/libcfrt_cuda.a $(CUDA_LIBS)

# cfrt-calibrate on the GPUs: the same program as the MPI backend's
# (runtime/tools/*.c), linked with this backend.
$(B)/cfrt-calibrate-cuda: $(CAL_SRC) runtime/tools/calibrate.h $(B)/libcfrt_cuda.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime -Icli $(LDFLAGS_ALL) -o $@ $(CAL_SRC) $(B)/libcfrt_cuda.a \
		$(CUDA_LIBS) -lm

CU_ALL = $(B)/libcfrt_cuda.a $(B)/cfrt_cuda.pc $(B)/tests/gpu/cmpdump \
         $(B)/bench/gpu/gemm_probe $(CU_PROBES) \
         $(B)/tests/gpu/attn_check \
         $(B)/tests/gpu/grad_check $(B)/tests/gpu/gqa_check $(B)/cfrt-calibrate-cuda \
         $(B)/tests/gpu/app_stream $(B)/tests/gpu/finite_check $(B)/tests/gpu/rope_check \
         $(B)/tests/gpu/norm_check $(B)/tests/gpu/mmadd_check $(B)/tests/gpu/swiglu_check
all: $(CU_ALL)
CHECK_DEPS += $(CU_ALL) $(B)/nocudnn/libcfrt_cuda.a $(B)/nocudnn/attn_check

test-gpu: $(B)/cfc $(B)/libcfrt.a $(B)/libcfrt_cuda.a $(B)/tests/gpu/cmpdump \
          $(B)/tests/gpu/attn_check $(B)/tests/gpu/grad_check $(B)/tests/gpu/gqa_check \
          $(B)/nocudnn/attn_check $(B)/tests/gpu/app_stream $(B)/tests/gpu/finite_check \
          $(B)/tests/gpu/rope_check $(B)/tests/gpu/norm_check $(B)/tests/gpu/mmadd_check $(B)/tests/gpu/swiglu_check
	@B=$(B) sh tests/gpu/run.sh

bench-gpu: $(B)/cfc $(B)/libcfrt_cuda.a $(B)/cfrt-calibrate-cuda
	@B=$(B) sh bench/gpu/bench.sh

# make bench-gpu1: the Llama layer on one GPU against PyTorch, op by op
# (bench/gpu/layer1.sh; CONFIGS picks sizes, GEN takes C made elsewhere)
bench-gpu1: $(B)/libcfrt_cuda.a
	@B=$(B) sh bench/gpu/layer1.sh

install-cuda: $(B)/libcfrt_cuda.a $(B)/cfrt-calibrate-cuda
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	cp $(B)/cfrt-calibrate-cuda $(DESTDIR)$(PREFIX)/bin/
	cp runtime/cfrt.h $(DESTDIR)$(PREFIX)/include/cfrt.h
	cp $(B)/libcfrt_cuda.a $(DESTDIR)$(PREFIX)/lib/
	$(CU_PC) >$(DESTDIR)$(PREFIX)/lib/pkgconfig/cfrt_cuda.pc

install: install-cuda
.PHONY: test-gpu bench-gpu bench-gpu1 install-cuda

endif
