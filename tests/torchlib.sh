# What t-torch.sh and t-torch-shapes.sh share (sourced after tests/lib.sh).
# torch_python SUITE: PY, a python3 with torch, NumPy and mpi4py (Debian's
# /usr/bin/python3 first), and PYENV, what a sanitized build of the
# library needs preloaded into it; without one, a SKIP line naming SUITE
# and the suite ends.
torch_python() {
	PY=
	for p in /usr/bin/python3 python3; do
		if "$p" -c 'import torch, numpy, mpi4py' >/dev/null 2>&1; then
			PY=$p
			break
		fi
	done
	if [ -z "$PY" ]; then
		echo "SKIP $1: no python3 with torch, NumPy and mpi4py here (apt-get install python3-torch python3-mpi4py)"
		exit 0
	fi
	PYENV=
	if [ -n "$SANFLAGS" ]; then
		PYENV="LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		PYENV="$PYENV ASAN_OPTIONS=detect_leaks=0"
	fi
}

# torch_lib DIR C...: DIR/libllama.so from the generated C files (DIR's
# headers), with all of libcfrt.a in it: the module declares every runtime
# call it may use, and at tp = 1 the generated C calls no transfer.
torch_lib() {
	tld=$1
	shift
	mpicc -std=c11 -O2 -g -Wall -Wextra -Werror $SANFLAGS -shared -fPIC -Iruntime -I"$tld" \
		-o "$tld/libllama.so" "$@" \
		-Wl,--whole-archive "$B/libcfrt.a" -Wl,--no-whole-archive \
		$(pkg-config --libs openblas) -lm -pthread
}
