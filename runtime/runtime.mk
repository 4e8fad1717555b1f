# runtime/runtime.mk: libcfrt (runtime/cfrt.h + the MPI/CBLAS backend in
# runtime/mpi + the code every backend shares, runtime/common), its tests
# and its install rule. Included by the Makefile; uses its B, MPICC,
# CFLAGS_ALL, LDFLAGS_ALL, BLAS_*, CUNIT_*, PREFIX, DESTDIR.

RT_VERSION = 0.1.0
RT_SONAME = libcfrt.so.0
# runtime/common is backend-neutral: compiled once, linked into every
# backend's library (runtime/cuda/cuda.mk takes RT_COMMON_SRC too).
RT_COMMON_SRC = $(wildcard runtime/common/*.c)
RT_SRC = $(wildcard runtime/mpi/*.c) $(RT_COMMON_SRC)
RT_OBJ = $(RT_SRC:%.c=$(B)/%.o)
RT_CFLAGS = -fPIC -pthread -Iruntime $(BLAS_CFLAGS)
RT_LIBS = $(BLAS_LIBS) -lm -pthread
RT_LIBFILES = $(B)/libcfrt.a $(B)/libcfrt.so.$(RT_VERSION) $(B)/libcfrt.so.0 \
              $(B)/libcfrt.so $(B)/cfrt.pc $(B)/cfrt-uninstalled.pc

$(B)/runtime/mpi/%.o: runtime/mpi/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) $(RT_CFLAGS) -c -o $@ $<

$(B)/runtime/common/%.o: runtime/common/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -fPIC -Iruntime -c -o $@ $<

$(B)/libcfrt.a: $(RT_OBJ)
	rm -f $@
	$(AR) rcs $@ $(RT_OBJ)

$(B)/libcfrt.so.$(RT_VERSION): $(RT_OBJ)
	$(MPICC) $(LDFLAGS_ALL) -shared -Wl,-soname,$(RT_SONAME) -o $@ \
		$(RT_OBJ) $(RT_LIBS)

$(B)/libcfrt.so.0 $(B)/libcfrt.so: $(B)/libcfrt.so.$(RT_VERSION)
	ln -sf libcfrt.so.$(RT_VERSION) $@

# cfrt.pc for PREFIX; Libs carry this machine's BLAS flags (static links
# need them), and under SAN the sanitizers (a program linking a sanitized
# libcfrt needs their runtime first). install-runtime writes it again for
# the PREFIX given there.
RT_PC = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(RT_VERSION)|' \
            -e 's|@BLAS_LIBS@|$(BLAS_LIBS)|' -e 's|@SANLINK@|$(SANLINK)|' -e 's| *$$||' \
            runtime/cfrt.pc.in
$(B)/cfrt.pc: runtime/cfrt.pc.in runtime/runtime.mk
	@mkdir -p $(@D)
	$(RT_PC) >$@

# cfrt-uninstalled.pc: the build tree's cfrt. pkg-config prefers NAME-
# uninstalled.pc where it finds one, so PKG_CONFIG_PATH=$(B) pkg-config
# cfrt gives runtime/ for the header and $(B) for the library, with an
# rpath to it: a program built against the build tree runs from it.
$(B)/cfrt-uninstalled.pc: runtime/cfrt.pc.in runtime/runtime.mk
	@mkdir -p $(@D)
	$(RT_PC) | sed -e 's|^prefix=.*|prefix=$(CURDIR)|' -e 's|^libdir=.*|libdir=$(abspath $(B))|' \
		-e 's|^includedir=.*|includedir=$(CURDIR)/runtime|' \
		-e 's|^Description: .*|&; uninstalled: the build tree $(abspath $(B))|' \
		-e 's|^Libs: -L$${libdir}|& -Wl,-rpath,$${libdir}|' >$@

# ---- tests: tests/runtime/unit_*.c make one CUnit runner (run under
# mpirun with 1, 2, 3 ranks); fault.c, pc_app.c and progress_bench.c are
# programs of their own.
RT_UNIT_OBJ = $(patsubst %.c,$(B)/%.o,$(wildcard tests/runtime/unit_*.c))
RT_TEST_LINK = $(B)/libcfrt.a $(RT_LIBS)

$(B)/tests/runtime/%.o: tests/runtime/%.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(CUNIT_CFLAGS) -c -o $@ $<

$(B)/tests/runtime_unit: $(RT_UNIT_OBJ) $(B)/libcfrt.a
	$(MPICC) $(LDFLAGS_ALL) -o $@ $(RT_UNIT_OBJ) $(CUNIT_LIBS) $(RT_TEST_LINK)

$(B)/tests/runtime_fault: $(B)/tests/runtime/fault.o $(B)/libcfrt.a
	$(MPICC) $(LDFLAGS_ALL) -o $@ $(B)/tests/runtime/fault.o $(RT_TEST_LINK)

$(B)/tests/progress_bench: $(B)/tests/runtime/progress_bench.o $(B)/libcfrt.a
	$(MPICC) $(LDFLAGS_ALL) -o $@ $(B)/tests/runtime/progress_bench.o \
		$(RT_TEST_LINK)

# Grouped-query attention against repeated heads through the API alone
# (tests/gpu/gqa_check.c; the CUDA build of it is runtime/cuda/cuda.mk's).
$(B)/tests/gqa_check: tests/gpu/gqa_check.c $(B)/libcfrt.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< $(RT_TEST_LINK)

# CFRT_CHECK=finite through the API alone (tests/gpu/finite_check.c; run
# by tests/t-finite.sh; the CUDA build of it is runtime/cuda/cuda.mk's).
$(B)/tests/finite_check: tests/gpu/finite_check.c $(B)/libcfrt.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime $(LDFLAGS_ALL) -o $@ $< $(RT_TEST_LINK)

RT_TESTS = $(B)/tests/runtime_unit $(B)/tests/runtime_fault \
           $(B)/tests/progress_bench $(B)/tests/gqa_check $(B)/tests/finite_check

# cfrt-calibrate: measures a machine for cfc --profile (installed with the
# runtime; runtime/cuda/cuda.mk builds cfrt-calibrate-cuda from the same
# sources, runtime/tools/*.c). Its profile is written as cfc writes its outputs (cli/outfile.c).
CAL_SRC = $(wildcard runtime/tools/*.c) cli/outfile.c
$(B)/cfrt-calibrate: $(CAL_SRC) runtime/tools/calibrate.h $(B)/libcfrt.a
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) -Iruntime -Icli $(LDFLAGS_ALL) -o $@ $(CAL_SRC) $(RT_TEST_LINK)

all: $(RT_LIBFILES) $(RT_TESTS) $(B)/cfrt-calibrate
CHECK_DEPS += $(B)/libcfrt.a $(B)/tests/runtime_unit $(RT_LIBFILES) $(RT_TESTS) \
              $(B)/cfrt-calibrate

install-runtime: $(RT_LIBFILES) $(B)/cfrt-calibrate
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/bin
	cp $(B)/cfrt-calibrate $(DESTDIR)$(PREFIX)/bin/cfrt-calibrate
	cp runtime/cfrt.h $(DESTDIR)$(PREFIX)/include/cfrt.h
	cp $(B)/libcfrt.a $(B)/libcfrt.so.$(RT_VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libcfrt.so.$(RT_VERSION) $(DESTDIR)$(PREFIX)/lib/libcfrt.so.0
	ln -sf libcfrt.so.0 $(DESTDIR)$(PREFIX)/lib/libcfrt.so
	$(RT_PC) >$(DESTDIR)$(PREFIX)/lib/pkgconfig/cfrt.pc
	@[ -n "$(DESTDIR)" ] || sh scripts/ldconfig.sh "$(PREFIX)/lib"

install: install-runtime
.PHONY: install-runtime
