# The check of a backward that t-grad.sh and t-grad-spread.sh share
# (sourced after tests/lib.sh, with MPIRUN set).
# grad NAME DIR N SPEC ARGS...: builds SPEC with its backward into DIR,
# runs it on N ranks with --gradcheck and checks the three errors and
# that its line's times fit in one another.
grad() {
	name=$1 dir=$2 n=$3 spec=$4
	shift 4
	built_run "$name" "$dir" "$n" "--gradcheck --iters 1 --warmup 0" "$spec" --type=f64 "$@" ||
		return
	e=$(field max_rel_err "$dir.out") g=$(field grad_max_rel_err "$dir.out")
	f=$(field fd_max_rel_err "$dir.out")
	# the pass's times (one pass): the forwards' ends apart by no more
	# than their span; the backward's span after it at most the slowest
	# rank's backward, and the two spans the whole pass's (to the 1e-4
	# ms printed)
	k=$(field fwd_skew_ms "$dir.out") sp=$(field span_ms "$dir.out")
	ps=$(field pass_span_ms "$dir.out") b=$(field backward_ms "$dir.out")
	bs=$(field backward_span_ms "$dir.out")
	if ! awk -v k="$k" -v sp="$sp" -v ps="$ps" -v b="$b" -v bs="$bs" 'BEGIN {
		d = sp + bs - ps
		exit !(k != "" && ps != "" && bs != "" && k >= 0 && k <= sp && bs >= 0 &&
		       bs <= b && b <= ps && d <= 2e-4 && d >= -2e-4) }'; then
		fail "$name (times: fwd_skew_ms $k span_ms $sp backward_ms $b backward_span_ms $bs pass_span_ms $ps)"
	elif le "$e" 1e-12 && le "$g" 1e-12 && le "$f" 1e-6; then
		pass "$name (fd $f)"
	else
		fail "$name (forward $e, backward vs reference $g, vs finite differences $f)"
	fi
}
