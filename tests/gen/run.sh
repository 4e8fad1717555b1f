#!/bin/sh
# run.sh SPEC...: checks specs written by cfgen.py (or any spec with its
# "// ranks:", "// args:" and "// mode:" header lines), one PASS or FAIL
# line each, named after the spec's seed:
#   - cfc accepts the spec: exit 0 (1 is a rejection of a valid spec, 70 an
#     internal error such as a schedule the verifier could not prove, 124 a
#     hang, above 128 a crash);
#   - mode run: the generated C compiles with -Werror and links
#     (scripts/build-model.sh), runs on N ranks under mpirun twice, matches
#     the serial reference (max_rel_err <= 1e-5 for f32, <= 1e-9 for f64)
#     and both runs give the same checksum;
#   - mode compile (bf16, f16: the CPU runtime has neither): the header,
#     parallel C, reference and driver compile with -Werror;
#   - with --backward among the args: the gradients match the reference
#     backward too (grad_max_rel_err, same tolerance), in f64 also central
#     finite differences of the reference forward on the first run
#     (--gradcheck: fd_max_rel_err <= 1e-6; not where the header says
#     "// gradcheck: no": too many elements to perturb), and both runs
#     give the same grad_checksum.
#     A backward cfc refuses with a diagnostic (exit 1, "error: no
#     backward rule ...") is a refusal, not a failure: the line says
#     "backward refused" with the message, and the forward is checked
#     without --backward. Exit 70 stays a failure.
# Work files go under $B/tests/gen/work (GEN_WORK); a failing spec's logs
# stay there. GEN_KEEP=1 keeps passing ones too.
. tests/lib.sh
# -O1 keeps the warnings that need the optimizer; no variable tracking:
# with -g it is most of the time gcc takes on a backward's long functions
export CF_OPT="${CF_OPT:--O1 -fno-var-tracking}"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
work=${GEN_WORK:-$B/tests/gen/work}
mkdir -p "$work"

# show FILE: the lines of a log that say what went wrong.
show() { grep -m 6 -E 'cfrt:|error|rror:|Abort|signal' "$1" || tail -n 12 "$1"; }

# hdr SPEC KEY: the value of the header line "// KEY: value".
hdr() { sed -n "s|^// $2: ||p" "$1" | head -n 1; }

# why RC: what an exit status of cfc means.
why() {
	case $1 in
	1) echo "exit 1: rejected a valid spec" ;;
	2) echo "exit 2: usage error" ;;
	70) echo "exit 70: internal error" ;;
	124) echo "hang: killed after 60 s" ;;
	*) if [ "$1" -gt 128 ]; then echo "crash: signal $(($1 - 128))"; else echo "exit $1"; fi ;;
	esac
}

# tol SPEC ARGS: the tolerance of the spec's element type.
tol() {
	t=$(echo "$2" | sed -n 's/.*--type=\([a-z0-9]*\).*/\1/p')
	[ -n "$t" ] || t=$(sed -n 's/^ *type \([a-z0-9]*\);.*/\1/p' "$1" | head -n 1)
	case $t in f64) echo 1e-9 ;; *) echo 1e-5 ;; esac
}

one() {
	spec=$1
	base=$(basename "$spec" .cf)
	seed=$(sed -n 's/^\/\/ cfgen seed=\([0-9]*\).*/\1/p' "$spec" | head -n 1)
	n=$(hdr "$spec" ranks)
	args=$(hdr "$spec" args)
	mode=$(hdr "$spec" mode)
	[ -n "$n" ] || n=1
	[ -n "$mode" ] || mode=run
	name="${GEN_LABEL:-gen}: ${seed:+seed=$seed }$base N=$n $mode"
	dir=$work/$base
	rm -rf "$dir"
	mkdir -p "$dir"
	eval "set -- $args"
	timeout 60 "$CFC" "$spec" "$@" >"$dir/cfc.out" 2>"$dir/cfc.err"
	rc=$?
	refused=
	case " $args " in *" --backward "*) bw=1 ;; *) bw=0 ;; esac
	if [ $rc -eq 1 ] && [ $bw = 1 ] && grep -q 'error: no backward rule' "$dir/cfc.err"; then
		refused=$(grep -m 1 'error: no backward rule' "$dir/cfc.err")
		args=$(echo " $args " | sed 's/ --backward / /')
		eval "set -- $args"
		bw=0
		timeout 60 "$CFC" "$spec" "$@" >"$dir/cfc.out" 2>"$dir/cfc.err"
		rc=$?
	fi
	if [ $rc -ne 0 ]; then
		fail "$name (cfc $(why $rc))"
		head -n 12 "$dir/cfc.err"
		return
	fi
	if [ "$mode" = compile ]; then
		if ! "$CFC" "$spec" "$@" --emit=h,c,ref,driver -o "$dir" >"$dir/build.log" 2>&1; then
			fail "$name (emit)"
			tail -n 12 "$dir/build.log"
			return
		fi
		for c in "$dir"/*.c; do
			if ! mpicc -std=c11 -O1 -Wall -Wextra -Werror -Iruntime -I"$dir" -c "$c" \
				-o "${c%.c}.o" >>"$dir/build.log" 2>&1; then
				fail "$name (C does not compile: $(basename "$c"))"
				tail -n 12 "$dir/build.log"
				return
			fi
		done
		pass "$name"
		[ "${GEN_KEEP:-0}" = 1 ] || rm -rf "$dir"
		return
	fi
	if ! timeout 300 sh scripts/build-model.sh "$B" "$dir" "$spec" "$@" >"$dir/build.log" 2>&1; then
		fail "$name (build)"
		show "$dir/build.log"
		return
	fi
	t=$(tol "$spec" "$args")
	chk=--check
	[ $bw = 1 ] && [ "$t" = 1e-9 ] && [ "$(hdr "$spec" gradcheck)" != no ] && chk=--gradcheck
	for k in 1 2; do
		c=--check
		[ $k = 1 ] && c=$chk
		if ! $MPIRUN -n "$n" "$dir/run" $c --iters 1 --warmup 0 >"$dir/run$k" 2>&1; then
			fail "$name (run $k failed)"
			show "$dir/run$k"
			return
		fi
	done
	err=$(field max_rel_err "$dir/run1")
	s1=$(field checksum "$dir/run1") s2=$(field checksum "$dir/run2")
	note="max_rel_err $err"
	if ! le "$err" "$t"; then
		fail "$name (max_rel_err $err > $t)"
		return
	elif [ -z "$s1" ] || [ "$s1" != "$s2" ]; then
		fail "$name (runs differ: $s1 $s2)"
		return
	fi
	if [ $bw = 1 ]; then
		gerr=$(field grad_max_rel_err "$dir/run1") fd=$(field fd_max_rel_err "$dir/run1")
		g1=$(field grad_checksum "$dir/run1") g2=$(field grad_checksum "$dir/run2")
		if ! le "$gerr" "$t"; then
			fail "$name (grad_max_rel_err $gerr > $t)"
			return
		elif [ -z "$g1" ] || [ "$g1" != "$g2" ]; then
			fail "$name (backward runs differ: $g1 $g2)"
			return
		elif [ $chk = --gradcheck ] && ! le "$fd" 1e-6; then
			fail "$name (fd_max_rel_err $fd > 1e-6)"
			return
		fi
		note="$note, backward: grad_max_rel_err $gerr${fd:+ fd_max_rel_err $fd}"
	fi
	pass "$name ($note${refused:+; backward refused: $refused})"
	[ "${GEN_KEEP:-0}" = 1 ] || rm -rf "$dir"
}

for spec in "$@"; do
	one "$spec"
done
