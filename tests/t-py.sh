#!/bin/sh
# The Python module (cfc --emit=py): NAME.py loading NAME.c + NAME_ref.c
# built as a shared library against this tree's libcfrt, under mpirun with
# and without mpi4py: the forward gives the C driver's output bit for bit
# on the driver's data (the header's seeds), the gradients match the
# serial reference's within 1e-5, wrong arguments raise TypeError or
# ValueError naming the tensor, and an exception no one catches ends the
# job instead of hanging it. tests/py/check.py is the program each rank
# runs.
# The interpreter must have NumPy: Debian's /usr/bin/python3 with
# python3-numpy (scripts/install-deps.sh installs it) comes first, as a
# python3 of pyenv or a venv on PATH may not see Debian's packages.
. tests/lib.sh
t=$B/tests/py
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60"
BLAS=$(pkg-config --libs openblas)

PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import numpy' >/dev/null 2>&1; then
		PY=$p
		break
	fi
done
if [ -z "$PY" ]; then
	echo "SKIP py: no python3 with NumPy here (apt-get install python3-numpy)"
	exit 0
fi
echo "py: using $PY"
MPI4PY=1
"$PY" -c 'import mpi4py' >/dev/null 2>&1 || MPI4PY=0

# Under the sanitizers the library carries ASan and UBSan, whose runtimes
# must come first in a Python process: preloaded, leaks not counted (the
# interpreter's own are many).
PYENV=
if [ -n "$SANFLAGS" ]; then
	PYENV="LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
	PYENV="$PYENV ASAN_OPTIONS=detect_leaks=0"
fi

# pylib DIR NAME: DIR/libNAME.so from DIR/NAME.c and DIR/NAME_ref.c.
pylib() {
	mpicc -std=c11 -O2 -g -Wall -Wextra -Werror $SANFLAGS -shared -fPIC -Iruntime -I"$1" \
		-o "$1/lib$2.so" "$1/$2.c" "$1/$2_ref.c" "$B/libcfrt.a" $BLAS -lm -pthread
}

# model DIR NAME SPEC [cfc args...]: the driver (build-model.sh), its
# --dump of one forward pass, the module and its library, in DIR.
model() {
	md=$1 mn=$2 ms=$3
	shift 3
	sh scripts/build-model.sh "$B" "$md" "$ms" "$@" >"$md.log" 2>&1 &&
		"$CFC" "$ms" "$@" --emit=py -o "$md/$mn.py" >>"$md.log" 2>&1 &&
		pylib "$md" "$mn" >>"$md.log" 2>&1 || { cat "$md.log"; return 1; }
}

# dump DIR N: the driver's outputs of one forward pass on N ranks.
dump() {
	$MPIRUN -n "$2" "$1/run" --iters 1 --warmup 0 --dump "$1/y.bin" >"$1/driver.out" 2>&1 ||
		cat "$1/driver.out"
}

# pyrun LOG N ARGS...: tests/py/check.py ARGS on N ranks, each rank's
# lines in LOG.R.
pyrun() {
	pl=$1 pn=$2
	shift 2
	env $PYENV $MPIRUN -n "$pn" "$PY" tests/py/check.py "$@" \
		--log "$pl" >"$pl.out" 2>&1
	echo "rc=$?" >>"$pl.out"
	cat "$pl.out"
}

# all_ok LOG N COUNT: each of N ranks wrote COUNT lines, all ok.
all_ok() {
	for r in $(seq 0 $(($2 - 1))); do
		[ -f "$1.$r" ] && [ "$(grep -c ' ok$' "$1.$r")" -eq "$3" ] &&
			! grep -q FAIL "$1.$r" || return 1
	done
}

# -- the module itself: deterministic, valid Python
"$CFC" examples/mlp.cf -D tp=2 --backward --emit=py -o "$t/a.py"
"$CFC" examples/mlp.cf -D tp=2 --backward --emit=py -o "$t/b.py"
check "py: --emit=py writes the same module twice" cmp -s "$t/a.py" "$t/b.py"
check "py: the module is valid Python" "$PY" -m py_compile "$t/a.py"
check "py: the module carries the shapes as data" grep -q \
	'("x", "x", "input", (2, 64, 64), (2, 32, 64), (-1, 0, -1), 1000),' "$t/a.py"

# -- mlp on 2 ranks, with its backward
m2=$t/mlp2
model "$m2" mlp examples/mlp.cf -D tp=2 --backward
check "py: libmlp.so builds with -Wall -Wextra -Werror" test -f "$m2/libmlp.so"
dump "$m2" 2
pyrun "$t/none2" 2 "$m2" mlp --dump "$m2/y.bin" --errors
check "py: mlp on 2 ranks, comm=None: forward = the driver's output, gradients = the reference's" \
	all_ok "$t/none2" 2 7
check "py: wrong shapes, dtypes, order, names raise TypeError/ValueError naming the tensor" \
	grep -q "errors ok" "$t/none2.0"
check "py: a second backward of one forward is refused (the saved bytes are the backward's)" \
	grep -q "a second backward of one forward is refused; .* ok$" "$t/none2.0"
# --keep-saved: the backward leaves the saved buffer, and runs again
mk=$t/mlp2keep
model "$mk" mlp examples/mlp.cf -D tp=2 --backward --keep-saved
pyrun "$t/keep2" 2 "$mk" mlp
check "py: --keep-saved: a second backward of one forward gives the same gradients" \
	all_ok "$t/keep2" 2 5
check "py: --keep-saved: the second backward's line" \
	grep -q "a second backward of one forward gives the same gradients ok$" "$t/keep2.0"

if [ "$MPI4PY" = 1 ]; then
	# the module alone in a directory, its library named by MLP_LIB
	mkdir -p "$t/alone"
	cp "$m2/mlp.py" "$t/alone/"
	MLP_LIB=$ROOT/$m2/libmlp.so pyrun "$t/mpi4py2" 2 "$t/alone" mlp --dump "$m2/y.bin" \
		--mpi4py
	check "py: mlp on 2 ranks, mpi4py COMM_WORLD, library from MLP_LIB" all_ok "$t/mpi4py2" 2 6
	pyrun "$t/split4" 4 "$m2" mlp --dump "$m2/y.bin" --mpi4py --split 2
	check "py: 4 ranks split by mpi4py into two groups of 2, a model on each" \
		all_ok "$t/split4" 4 6
else
	echo "SKIP py: no mpi4py for $PY (apt-get install python3-mpi4py): its checks not run"
fi

# -- mlp on 4 ranks, forward only
m4=$t/mlp4
model "$m4" mlp examples/mlp.cf
dump "$m4" 4
pyrun "$t/none4" 4 "$m4" mlp --dump "$m4/y.bin"
check "py: mlp on 4 ranks, forward only, comm=None: the driver's output; backward() refused" \
	all_ok "$t/none4" 4 5

# -- f64 attention, and a grid of two groups
a2=$t/attention
model "$a2" attention examples/attention.cf -D tp=2 --type=f64 --backward
dump "$a2" 2
pyrun "$t/att" 2 "$a2" attention --dump "$a2/y.bin"
check "py: f64 attention on 2 ranks: the driver's output, the reference's gradients" \
	all_ok "$t/att" 2 6
g4=$t/groups
model "$g4" groups tests/e2e/groups.cf -D dp=2 --backward
dump "$g4" 4
pyrun "$t/grid" 4 "$g4" groups --dump "$g4/y.bin"
check "py: a grid of two groups on 4 ranks: the driver's output, the reference's gradients" \
	all_ok "$t/grid" 4 7
# tensors split over both groups: each rank's block of the whole by its
# rank in each
g2=$t/tpdp
model "$g2" tpdp examples/tpdp.cf --backward
dump "$g2" 4
pyrun "$t/tpdp" 4 "$g2" tpdp --dump "$g2/y.bin"
check "py: tpdp, tensors split over both groups of a 2x2 grid: the driver's output, the reference's gradients" \
	all_ok "$t/tpdp" 4 6

# -- an exception one rank does not catch ends the job, naming the rank
start=$(date +%s)
pyrun "$t/uncaught" 2 "$m2" mlp --uncaught 1
took=$(($(date +%s) - start))
check "py: an uncaught exception on rank 1 ends the job ($took s)" sh -c \
	"! grep -q '^rc=0$' '$t/uncaught.out' && [ $took -lt 30 ]"
check "py: ... naming the rank and the exception" grep -q "mlp.py: rank 1: uncaught TypeError: \
mlp.forward: input x: dtype float64, expected float32 (the model is f32); aborting the job" \
	"$t/uncaught.out"

# -- the wrong number of ranks: cfrt_init's message, as a RuntimeError
cat >"$t/ranks.py" <<EOF
import os, sys
sys.path.insert(0, "$m2")
import mlp
try:
    mlp.Model()
except RuntimeError as e:
    with open("$t/ranks.%s" % os.environ["OMPI_COMM_WORLD_RANK"], "w") as f:
        f.write("caught: %s\\n" % e)
EOF
env $PYENV $MPIRUN -n 3 "$PY" "$t/ranks.py" >"$t/ranks.out" 2>&1
cat "$t/ranks.out" "$t"/ranks.[0-9]
check "py: 3 ranks for a model of 2: RuntimeError on every rank, with cfrt's message" sh -c \
	"[ \$(cat '$t'/ranks.[0-9] | grep -c '^caught: mlp: cfrt_init: model mlp was compiled for a group of 2 ranks, but the communicator has 3$') -eq 3 ]"

# -- the library: missing, or built from other C
cat >"$t/lib.py" <<EOF
import sys
sys.path.insert(0, sys.argv[1])
import mlp
try:
    mlp.Model(lib=sys.argv[2])
except (FileNotFoundError, RuntimeError) as e:
    print(type(e).__name__ + ":", e)
EOF
"$PY" "$t/lib.py" "$m2" /nonexistent/libmlp.so >"$t/nolib.out" 2>&1
cat "$t/nolib.out"
check "py: a missing library: FileNotFoundError with the command that builds it" sh -c \
	"grep -q '^FileNotFoundError: mlp: no library /nonexistent/libmlp.so: build it' '$t/nolib.out' &&
	 grep -q 'mpicc -shared -fPIC -O2 -o libmlp.so mlp.c mlp_ref.c \$(pkg-config --cflags --libs cfrt)' '$t/nolib.out'"
mkdir -p "$t/other"
"$CFC" examples/mlp.cf -D tp=2 -D S=128 --backward --emit=py -o "$t/other/mlp.py"
env $PYENV "$PY" "$t/lib.py" "$t/other" "$m2/libmlp.so" >"$t/other.out" 2>&1
cat "$t/other.out"
check "py: a library of other C (S=64 for a module of S=128) is refused" grep -q \
	"^RuntimeError: mlp: .*/libmlp.so has other C than this module: mlp_workspace_bytes() is 65536, this module was written with 131072: compile both in one cfc run" \
	"$t/other.out"
