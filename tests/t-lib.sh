#!/bin/sh
# The runtime as a library (cfrt.h, "Error modes"): tests/e2e/lib_app.c
# calls the generated mlp (tp = 2) with each misuse and checks statuses
# and messages in error mode return; the default mode's message; the
# watchdog (CFRT_TIMEOUT) against a rank that skips the forward, under
# fuse(ring) (a receive) and vanilla (a collective), in both modes, with
# mpirun --timeout as the backstop; CFRT_CHECK=finite naming the op that
# first made a NaN; bad settings; and the driver's runs that stay right
# under CFRT_CHECK=finite and CFRT_TIMEOUT.
. tests/lib.sh
t=$B/tests/lib
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60"
BLAS=$(pkg-config --libs openblas)

# app DIR SCHEDULE: the program against mlp under SCHEDULE in DIR
app() {
	"$CFC" examples/mlp.cf -D tp=2 --schedule="$2" --emit=h,c,ref -o "$1" &&
		mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -Itests/e2e -I"$1" \
			-o "$1/app" tests/e2e/lib_app.c "$1/mlp.c" "$1/mlp_ref.c" "$B/libcfrt.a" \
			$BLAS -lm -pthread
}
app "$t/ring" "fuse(ring)"
app "$t/vanilla" vanilla
check "lib: the library program builds" test -x "$t/ring/app" -a -x "$t/vanilla/app"

# oks FILE N: FILE has N "ok" lines, no FAIL and both ranks' "0 failed"
oks() {
	[ "$(grep -c ': ok ' "$1")" -eq "$2" ] && ! grep -q ': FAIL ' "$1" &&
		[ "$(grep -c '^lib: rank [01]: 0 failed$' "$1")" -eq 2 ]
}

# -- error mode return: every misuse has its status and message (27
# checks a rank)
$MPIRUN -n 2 "$t/ring/app" status >"$t/status.out" 2>&1; rc=$?
cat "$t/status.out"
check "lib: error mode return: each misuse returns its status and message" oks "$t/status.out" 54
check "lib: error mode return: the job ends well" [ $rc -eq 0 ]
for c in "the forward before cfrt_init (null context)" "cfrt_init twice on one pointer" \
	"null weights struct" "null io struct" "null input buffer" "null output buffer" \
	"input half the size (cfrt_alloc)" "workspace half the size (cfrt_alloc)" \
	"input half the size (malloc, cfrt_register)" "input half the size (mmap, the rest unmapped)" \
	"the forward after cfrt_finalize" "a null weight w2 on rank 1 alone" \
	"a fresh context after failures: the output matches the reference" \
	"a NaN input without CFRT_CHECK: no check, status 0"; do
	check "lib: error mode return: $c" sh -c \
		"[ \$(grep -c '^lib: rank [01]: ok $c\$' '$t/status.out') -eq 2 ]"
done

# -- the default mode: the job ends, naming the tensor
$MPIRUN -n 2 "$t/ring/app" abort >"$t/abort.out" 2>&1; rc=$?
cat "$t/abort.out"
check "lib: error mode abort: an input half the size ends the job" [ $rc -ne 0 ]
check "lib: error mode abort: the message names rank, op, step and the tensor" grep -q \
	"^cfrt: rank [01]: op mlp_forward step 0: cfrt_check_arg: input x needs 16384 bytes, but its cfrt_alloc buffer has 8192 from there \[model mlp" \
	"$t/abort.out"
check "lib: error mode abort: the forward did not return" sh -c "! grep -q 'the forward returned' '$t/abort.out'"

# -- the watchdog: rank 1 skips the forward
# skip NAME SCHED MODE WANT: CFRT_TIMEOUT=2; sets rc and took
skip() {
	start=$(date +%s)
	$MPIRUN -x CFRT_TIMEOUT=2 -n 2 "$t/$2/app" skip "$3" "$4" >"$t/$1.out" 2>&1; rc=$?
	took=$(( $(date +%s) - start ))
	cat "$t/$1.out"
}
ring="rank 0: op xa step 1: cfrt_wait: waited 2 s (CFRT_TIMEOUT) for a receive from rank 1 of group 0 (job rank 1)"
coll="rank 0: op xa step 0: cfrt_all_gather: waited 2 s (CFRT_TIMEOUT) for an all_gather over the 2 ranks of group 0: one of them has not joined it"
skip skip-ring ring return "$ring"
check "lib: watchdog, mode return, fuse(ring): the forward returns CFRT_ETIMEOUT naming the peer" \
	oks "$t/skip-ring.out" 3
check "lib: watchdog, mode return: the job ends well within mpirun's timeout (rc $rc, $took s)" \
	sh -c "[ $rc -eq 0 ] && [ $took -lt 40 ]"
skip skip-vanilla vanilla return "$coll"
check "lib: watchdog, mode return, vanilla: the forward returns CFRT_ETIMEOUT naming the collective" \
	oks "$t/skip-vanilla.out" 3
skip skip-abort ring abort "$ring"
check "lib: watchdog, mode abort: the job ends" [ $rc -ne 0 ]
check "lib: watchdog, mode abort: the message names rank, op, step and the peer" grep -qF \
	"cfrt: $ring [model mlp" "$t/skip-abort.out"
check "lib: watchdog, mode abort: well within mpirun's timeout ($took s)" [ $took -lt 40 ]

# -- CFRT_CHECK=finite
$MPIRUN -x CFRT_CHECK=finite -n 2 "$t/ring/app" finite >"$t/finite.out" 2>&1; rc=$?
cat "$t/finite.out"
check "lib: CFRT_CHECK=finite names the first op that made a NaN (input x, weight w2)" \
	oks "$t/finite.out" 4
check "lib: CFRT_CHECK=finite: the job ends well" [ $rc -eq 0 ]

# -- bad settings are refused at cfrt_init
$MPIRUN -x CFRT_TIMEOUT=soon -n 2 "$t/ring/app" status >"$t/badt.out" 2>&1
check "lib: CFRT_TIMEOUT=soon is refused" grep -q \
	"cfrt_init: CFRT_TIMEOUT=soon: use seconds, a number >= 0 (0: no watchdog)" "$t/badt.out"
$MPIRUN -x CFRT_CHECK=nan -n 2 "$t/ring/app" status >"$t/badc.out" 2>&1
check "lib: CFRT_CHECK=nan is refused" grep -q "cfrt_init: CFRT_CHECK=nan: use finite" "$t/badc.out"

# -- a right run stays right under the checks: the driver of mlp with its
# backward, 4 ranks, CFRT_CHECK=finite and a watchdog that never fires
sh scripts/build-model.sh "$B" "$t/drv" examples/mlp.cf --backward >"$t/drv.log" 2>&1 || cat "$t/drv.log"
$MPIRUN -x CFRT_CHECK=finite -x CFRT_TIMEOUT=30 -x CFRT_ERRORS=return -n 4 "$t/drv/run" --check \
	--iters 2 --warmup 0 >"$t/drv.out" 2>&1
cat "$t/drv.out"
e=$(field max_rel_err "$t/drv.out") ge=$(field grad_max_rel_err "$t/drv.out")
check "lib: the mlp driver with its backward runs right under CFRT_CHECK=finite and CFRT_TIMEOUT" \
	sh -c "le() { awk -v e=\"\$1\" -v l=\"\$2\" 'BEGIN { exit !(e != \"\" && e + 0 == e && e <= l + 0) }'; }
	       le '$e' 1e-5 && le '$ge' 1e-5"
