# CommFuse: one non-recursive Makefile. Everything generated goes under $(B).
#   make            build cfc, libcfrt and the tests
#   make test       install missing Debian packages, build, run every test
#   make demo       install missing packages, build, run the examples
#   make SAN=address,undefined test   the same under ASan + UBSan
.SUFFIXES:

ifneq ($(SAN),)
B ?= build/san
SANFLAGS = -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
# what a program linking this build's runtime needs: the sanitizers'
# runtime, first (cfrt.pc's Libs, CommFuseConfig.cmake's link options)
SANLINK = -fsanitize=$(SAN)
else
B ?= build
SANFLAGS =
SANLINK =
endif

CC ?= cc
MPICC ?= mpicc
OPT ?= -O2 -g
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wwrite-strings
CFLAGS_ALL = -std=c11 -D_POSIX_C_SOURCE=200809L $(OPT) $(WARN) $(SANFLAGS) \
             -MMD -MP $(CFLAGS)
LDFLAGS_ALL = $(SANFLAGS) $(LDFLAGS)
PREFIX ?= /usr/local
DESTDIR ?=

GVC_CFLAGS := $(shell pkg-config --cflags libgvc 2>/dev/null)
GVC_LIBS := $(shell pkg-config --libs libgvc 2>/dev/null)
# The dot layout and the renderers linked in (codegen/render.c), so that
# pictures need no `dot -c` plugin configuration on the user's machine.
GVPLUGIN_DIR := $(shell pkg-config --variable=libdir libgvc 2>/dev/null)/graphviz
GVC_LIBS += -L$(GVPLUGIN_DIR) -Wl,-rpath,$(GVPLUGIN_DIR) -Wl,--no-as-needed -lgvplugin_dot_layout \
            -lgvplugin_core -lgvplugin_pango -Wl,--as-needed
CUNIT_CFLAGS := $(shell pkg-config --cflags cunit 2>/dev/null)
CUNIT_LIBS := $(shell pkg-config --libs cunit 2>/dev/null)
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)

all: $(B)/cfc

# ---- the compiler ----
GEN = $(B)/grammar/parser.c $(B)/grammar/parser.h $(B)/grammar/lexer.c $(B)/grammar/lexer.h
CF_SRC = $(wildcard compiler/*.c codegen/*.c)
CF_LIBOBJ = $(CF_SRC:%.c=$(B)/%.o) $(B)/grammar/parser.o $(B)/grammar/lexer.o
CF_OBJ = $(CF_LIBOBJ) $(B)/cli/cfc.o $(B)/cli/outfile.o $(B)/cli/progress.o
CF_INC = -Icompiler -Icodegen -I$(B)/grammar -Iruntime

$(B)/grammar/parser.c $(B)/grammar/parser.h &: grammar/parser.y
	@mkdir -p $(@D)
	bison -Wall -Werror -o $(B)/grammar/parser.c --header=$(B)/grammar/parser.h $<

$(B)/grammar/lexer.c $(B)/grammar/lexer.h &: grammar/lexer.l $(B)/grammar/parser.h
	@mkdir -p $(@D)
	flex -o $(B)/grammar/lexer.c --header-file=$(B)/grammar/lexer.h $<

# flex and bison output is not ours to keep warning-clean.
GENFLAGS = -Wno-unused-function -Wno-missing-prototypes -Wno-sign-compare \
           -Wno-unused-parameter
$(B)/grammar/%.o: $(B)/grammar/%.c $(GEN)
	$(CC) $(CFLAGS_ALL) $(GENFLAGS) $(CF_INC) -c -o $@ $<

$(B)/compiler/%.o: compiler/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(CF_INC) -c -o $@ $<

$(B)/codegen/%.o: codegen/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(GVC_CFLAGS) $(CF_INC) -I$(B)/codegen -c -o $@ $<

# The command-line driver stands above the compiler and the code generator.
$(B)/cli/%.o: cli/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(CF_INC) -c -o $@ $<

# The driver's fixed part, kept as C source, embedded as a string literal.
$(B)/codegen/driver.inc: codegen/driver_main.c.in
	@mkdir -p $(@D)
	sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$$/\\n"/' $< > $@
$(B)/codegen/cg_driver.o: $(B)/codegen/driver.inc
# The Python module's fixed part (--emit=py), the same way.
$(B)/codegen/py.inc: codegen/py_module.py.in
	@mkdir -p $(@D)
	sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$$/\\n"/' $< > $@
$(B)/codegen/torch.inc: codegen/torch_module.py.in
	@mkdir -p $(@D)
	sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$$/\\n"/' $< > $@
$(B)/codegen/cg_py.o: $(B)/codegen/py.inc $(B)/codegen/torch.inc

$(B)/cfc: $(CF_OBJ)
	$(CC) $(LDFLAGS_ALL) -o $@ $(CF_OBJ) $(GVC_LIBS) -lm

# The generated C of a spec, under the build folder, never beside the
# spec: `make build/gen/dir/model.c` runs cfc on dir/model.cf into
# build/gen/dir/ (model.c and model.h; CFCFLAGS: e.g. -D S=4096
# --schedule='fuse(bidir)'). The rule wrote dir/model.c into the source
# tree until 2026-12-07.
$(B)/gen/%.c $(B)/gen/%.h: %.cf $(B)/cfc
	@mkdir -p $(@D)
	$(B)/cfc $(CFCFLAGS) $< --emit=c -o $(B)/gen/$*.c

include runtime/runtime.mk
include cmake/cmake.mk
include runtime/cuda/cuda.mk
include bench/bench.mk
include tests/tests.mk

# ---- entry points that first make sure the Debian packages are there ----
deps:
	@sh scripts/install-deps.sh

test: deps
	@$(MAKE) --no-print-directory check

demo: deps
	@$(MAKE) --no-print-directory demo-run

demo-run: $(B)/cfc $(B)/libcfrt.a
	@B=$(B) sh scripts/demo.sh

clean:
	rm -rf build

.PHONY: all deps test demo clean check demo-run install
-include $(shell find $(B) -name '*.d' 2>/dev/null)

install: $(B)/cfc
	mkdir -p $(DESTDIR)$(PREFIX)/bin
	cp $(B)/cfc $(DESTDIR)$(PREFIX)/bin/cfc
