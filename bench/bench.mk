# bench/bench.mk: `make bench`, the CPU benchmark of DESIGN.md section 4
# (a measurement, not a test; bench/bench.sh says what it runs). Included
# by the Makefile; uses its B, MPICC, CFLAGS_ALL, LDFLAGS_ALL, BLAS_*.
# Sizes and repetitions are bench.sh's variables, e.g.
#   make bench ROUNDS=3 MLP_SIZES='-D B=2 -D S=512 -D D=512'
# (make bench-run: the same without installing packages first).

BENCH_TOOLS = $(B)/bench/tools/mlp_mpi $(B)/bench/tools/gemm_split \
              $(B)/bench/tools/nocomm.o
# t-predict links a mix entry without its transfers (scripts/build-mix.sh);
# t-baseline checks the hand-written baselines
CHECK_DEPS += $(B)/bench/tools/nocomm.o $(B)/bench/tools/mlp_mpi

$(B)/bench/tools/%.o: bench/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(BLAS_CFLAGS) -c -o $@ $<

$(B)/bench/tools/mlp_mpi $(B)/bench/tools/gemm_split: %: %.o
	$(MPICC) $(LDFLAGS_ALL) -o $@ $< $(BLAS_LIBS) -lm

# make bench first installs what make test needs, gnuplot among them,
# which draws the table as results-time.svg and results-overlap.svg
# (bench/plot.py).
bench: deps
	@$(MAKE) --no-print-directory bench-run

bench-run: $(B)/cfc $(B)/libcfrt.a $(B)/cfrt-calibrate $(BENCH_TOOLS)
	@B=$(B) sh bench/bench.sh
	@python3 bench/plot.py --header $(B)/bench/header.txt $(B)/bench/results.csv
	@if [ "$(STEP)" = 1 ]; then B=$(B) sh bench/step.sh; fi

# make plots CSV=FILE...: the plots of results CSVs, e.g. the one make
# bench-gpu wrote on a GPU machine (which has no gnuplot); without CSV,
# those of every CSV in bench/results.
CSV = $(wildcard bench/results/*.csv)
plots: deps
	@python3 bench/plot.py $(CSV)

# make bench-step: the training step (forward + backward) of transformer,
# llama and ulysses at 4 ranks under the whole-pass order against
# --order=region --coalesce=0, in one run (bench/step.sh); make bench
# STEP=1 runs it after the CPU benchmark.
bench-step: $(B)/cfc $(B)/libcfrt.a
	@B=$(B) sh bench/step.sh

.PHONY: bench bench-run bench-step plots
