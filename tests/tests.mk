# Tests: CUnit units, golden files, error diagnostics, end-to-end runs.
# Each tests/t-*.sh prints "PASS name" or "FAIL name" lines; tests/run.sh
# counts them. Other .mk files add binaries the tests need to CHECK_DEPS.

UNIT_SRC = $(wildcard tests/unit/*.c)
UNIT_OBJ = $(UNIT_SRC:%.c=$(B)/%.o)
UNIT_NAMES = $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_*.c))

# The list of suites, one test_X_register() per tests/unit/test_X.c.
$(B)/tests/unit/registry.h: FORCE
	@mkdir -p $(@D)
	@{ for n in $(UNIT_NAMES); do echo "void test_$${n}_register(void);"; done; \
	   echo "static void (*const registry[])(void) = {"; \
	   for n in $(UNIT_NAMES); do echo "	test_$${n}_register,"; done; \
	   echo "};"; } > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@

$(B)/tests/unit/main.o: $(B)/tests/unit/registry.h

$(B)/tests/unit/%.o: tests/unit/%.c $(GEN)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(CUNIT_CFLAGS) $(CF_INC) -I$(B)/tests/unit -c -o $@ $<

$(B)/tests/unit_compiler: $(UNIT_OBJ) $(CF_LIBOBJ)
	$(CC) $(LDFLAGS_ALL) -o $@ $(UNIT_OBJ) $(CF_LIBOBJ) $(GVC_LIBS) $(CUNIT_LIBS) -lm

CHECK_DEPS += $(B)/cfc $(B)/tests/unit_compiler

check: $(CHECK_DEPS)
	@B=$(B) SAN=$(SAN) sh tests/run.sh

# make check-deps: build everything the suites need without running them;
# then `B=build sh tests/run.sh tests/t-cli.sh` runs one suite.
check-deps: $(CHECK_DEPS)

FORCE:
.PHONY: FORCE

# make gen SEEDS=1-400: a bigger batch of random specs (tests/t-gen.sh runs
# the fixed batch 1-40 in make test).
SEEDS ?= 1-200
gen: $(CHECK_DEPS)
	@B=$(B) SAN=$(SAN) GEN_SEEDS=$(SEEDS) sh tests/run.sh tests/t-gen.sh

# make fuzz FUZZ_TIME=600: afl-fuzz on cfc under ASan and UBSan, and the
# spec generator alongside; finds go to tests/fuzz/regress/ (tests/fuzz/).
FUZZ_TIME ?= 600
fuzz:
	@B=$(B) FUZZ_TIME=$(FUZZ_TIME) sh tests/fuzz/fuzz.sh

.PHONY: gen fuzz check-deps
