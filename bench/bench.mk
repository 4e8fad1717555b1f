# bench/bench.mk: `make bench`, the CPU benchmark of DESIGN.md section 4
# (a measurement, not a test; bench/bench.sh says what it runs). Included
# by the Makefile; uses its B, MPICC, CFLAGS_ALL, LDFLAGS_ALL, BLAS_*.
# Sizes and repetitions are bench.sh's variables, e.g.
#   make bench ROUNDS=3 MLP_SIZES='-D B=2 -D S=512 -D D=512'

BENCH_TOOLS = $(B)/bench/tools/mlp_mpi $(B)/bench/tools/gemm_split \
              $(B)/bench/tools/nocomm.o

$(B)/bench/tools/%.o: bench/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(BLAS_CFLAGS) -c -o $@ $<

$(B)/bench/tools/mlp_mpi $(B)/bench/tools/gemm_split: %: %.o
	$(MPICC) $(LDFLAGS_ALL) -o $@ $< $(BLAS_LIBS) -lm

bench: $(B)/cfc $(B)/libcfrt.a $(BENCH_TOOLS)
	@B=$(B) sh bench/bench.sh

.PHONY: bench
