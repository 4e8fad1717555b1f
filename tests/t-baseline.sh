#!/bin/sh
# The hand-written MPI + OpenBLAS baselines of make bench
# (bench/mlp_mpi.c): plain and overlapped by hand (--overlap K: chunked
# MPI_Iallgather / MPI_Ireduce_scatter_block pipelined with the GEMMs)
# compute the MLP right against a serial computation whose GELU is the
# double-precision definition (so the float GELU is checked too), at
# every chunk count that divides a rank's rows, and refuse a count that
# does not.
. tests/lib.sh
mp=$B/bench/tools/mlp_mpi
d=$B/tests/baseline
mkdir -p "$d"
[ -x "$mp" ] || { echo "SKIP $mp not built (make check-deps)"; exit 0; }
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60"

# one N B S D ARGS...: runs the baseline on N ranks and checks its error
one() {
	_n=$1 _b=$2 _s=$3 _d=$4
	shift 4
	_name="baseline n=$_n B=$_b S=$_s D=$_d $*"
	_o=$d/$(echo "$_n-$_b-$_s-$_d-$*" | tr -c 'a-z0-9-' _).out
	if $MPIRUN -n "$_n" "$mp" "$_b" "$_s" "$_d" --iters 2 --warmup 1 --check "$@" \
		>"$_o" 2>&1 && le "$(field max_rel_err "$_o")" 1e-5; then
		pass "$_name"
	else
		fail "$_name"
		cat "$_o"
	fi
}
one 2 2 16 8
for k in 1 2 4 16; do one 2 2 16 8 --overlap "$k"; done
one 2 1 6 4 --overlap 3
one 4 2 8 16
one 4 2 8 16 --overlap 2
one 3 1 9 6 --overlap 3
# the values matter: large pre-activations reach GELU's held exp
one 2 2 32 64 --overlap 4

# a chunk count that does not divide the rows is refused (usage, exit 2)
if $MPIRUN -n 2 "$mp" 2 16 8 --overlap 5 >"$d/bad.out" 2>&1; then
	fail "baseline refuses --overlap 5 of 16 rows"
else
	check "baseline refuses --overlap 5 of 16 rows" grep -q 'usage: mlp_mpi' "$d/bad.out"
fi
# the overlapped run says so on its line
$MPIRUN -n 2 "$mp" 2 16 8 --iters 1 --warmup 0 --overlap 4 >"$d/line.out" 2>&1
check "baseline overlapped line names its chunks" \
	grep -q 'progress=overlap time_ms=[0-9.]* chunks=4 ' "$d/line.out"
