# Shared helpers of the test scripts (sourced). Each check prints one
# "PASS name" or "FAIL name" line; details of a failure follow it.
: "${B:=build}"
ROOT=$(pwd)
CFC=$ROOT/$B/cfc
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# cfc's progress lines (a compile past a second of CPU, slower under the
# sanitizers) stay out of the diagnostics the suites compare; t-scale
# asks for them
export CFC_PROGRESS_AFTER="${CFC_PROGRESS_AFTER:-3600}"
# Programs the tests build themselves (generated models, apps) get the
# sanitizers too; Open MPI's leaks at init and finalize are suppressed
# (tests/runtime/lsan.supp), every other leak stays reported.
SANFLAGS=
if [ -n "${SAN:-}" ]; then
	SANFLAGS="-fsanitize=$SAN -fno-omit-frame-pointer"
	export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
	export LSAN_OPTIONS="suppressions=$ROOT/tests/runtime/lsan.supp:print_suppressions=0"
fi
export SANFLAGS

# group EXAMPLE: the name of the first group examples/EXAMPLE.cf declares;
# ngroups EXAMPLE: how many it declares (a grid when more than one).
group() { sed -n 's/^ *group \([a-z_]*\) *=.*/\1/p' "examples/$1.cf" | head -n 1; }
ngroups() { grep -c '^ *group ' "examples/$1.cf"; }
# groupdefs EXAMPLE N: the -D options that run EXAMPLE on N ranks (N a
# power of 2 on a grid: its last group 2 when N > 1, its first the rest).
groupdefs() {
	sed -n 's/^ *group \([a-z_]*\) *=.*/\1/p' "examples/$1.cf" | awk -v n="$2" '
		{ g[NR] = $1 }
		END {
			if (NR == 1) { printf "-D %s=%d", g[1], n; exit }
			last = n > 1 ? 2 : 1
			for (i = 1; i <= NR; i++)
				printf "%s-D %s=%d", (i > 1 ? " " : ""), g[i], (i == NR ? last : i == 1 ? n / last : 1)
		}'
}

# field NAME FILE: the value of " NAME=" on the driver's line in FILE
# (a whole word: grad_max_rel_err is not max_rel_err).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }
# le X LIMIT: X is a number no larger than LIMIT.
le() { awk -v e="$1" -v l="$2" 'BEGIN { exit !(e != "" && e + 0 == e && e <= l + 0) }'; }

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; }

# check NAME CMD...: PASS when CMD succeeds. (sh has no local variables:
# the helpers' own are _-prefixed, so as not to change the callers'.)
check() {
	_check_name=$1
	shift
	if "$@"; then pass "$_check_name"; else fail "$_check_name"; fi
}

# golden NAME GOT WANT: compares a file with its expectation; UPDATE=1
# rewrites the expectation.
golden() {
	if [ "${UPDATE:-0}" = 1 ]; then
		cp "$2" "$3"
	fi
	if diff -u "$3" "$2" >"$2.diff" 2>&1; then
		pass "$1"
	else
		fail "$1"
		head -n 40 "$2.diff"
	fi
}

# built_run NAME DIR N RUNARGS SPEC ARGS...: SPEC with its backward built
# into DIR (scripts/build-model.sh SPEC --backward ARGS, its log DIR.log)
# and its driver run on N ranks ($MPIRUN, the caller's) with RUNARGS, the
# run's output in DIR.out; returns 1 after failing NAME with the tail of
# what failed.
built_run() {
	_bn=$1 _bd=$2 _br=$3 _ba=$4 _bs=$5
	shift 5
	if ! sh scripts/build-model.sh "$B" "$_bd" "$_bs" --backward "$@" >"$_bd.log" 2>&1; then
		fail "$_bn (build)"
		tail -n 20 "$_bd.log"
		return 1
	fi
	# shellcheck disable=SC2086
	if ! $MPIRUN -n "$_br" "$_bd/run" $_ba >"$_bd.out" 2>&1; then
		fail "$_bn (run)"
		tail -n 20 "$_bd.out"
		return 1
	fi
}

# e2e32 NAME DIR N SPEC ARGS...: SPEC with its backward built into DIR
# (f32 unless ARGS say otherwise) and run once on N ranks with --check
# (built_run); PASS where the output is within 1e-5 and the gradients
# within 1e-4 of the serial reference (as t-e2e). The run's line is left
# in DIR.out (grad_checksum, ...).
e2e32() {
	_n=$1 _d=$2 _r=$3 _s=$4
	shift 4
	built_run "$_n" "$_d" "$_r" "--check --iters 1 --warmup 0" "$_s" "$@" || return
	_e=$(field max_rel_err "$_d.out") _g=$(field grad_max_rel_err "$_d.out")
	if le "$_e" 1e-5 && le "$_g" 1e-4; then
		pass "$_n (output $_e, gradients $_g)"
	else
		fail "$_n (output $_e, gradients $_g)"
	fi
}
