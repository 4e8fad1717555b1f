#!/bin/sh
# A C++ program built with CMake through find_package(CommFuse) and
# cfc_generate, with no hand-written flags (tests/e2e/cmake-cxx): it
# configures against the build tree, builds with -Wall -Wextra -Werror,
# links (CommFuse::cfrt carries OMPI_SKIP_MPICXX; without it: undefined
# reference to MPI::Comm::Comm()) and its forward matches the serial
# reference on 2 ranks. Also pkg-config's flags from C++ with mpicxx's
# compiler but MPI's C library only.
. tests/lib.sh
d=$B/tests/cmake-cxx
rm -rf "$d"
mkdir -p "$d"
command -v cmake >/dev/null 2>&1 || { echo "SKIP cmake not installed"; exit 0; }
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"
if cmake -S tests/e2e/cmake-cxx -B "$d/build" -DCommFuse_DIR="$ROOT/$B" \
	-DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror $SANFLAGS" -DCMAKE_C_FLAGS="$SANFLAGS" \
	>"$d/cmake.log" 2>&1 && cmake --build "$d/build" -j 2 >>"$d/cmake.log" 2>&1; then
	pass "cmake c++: configures, builds and links"
	$MPIRUN -n 2 "$d/build/app" >"$d/app.out" 2>&1
	check "cmake c++: the app's forward matches the reference on 2 ranks" sh -c \
		"[ \$(grep -c '^cmake c++ app: rank=[01] max_rel_err=' '$d/app.out') = 2 ] &&
		 awk -F'max_rel_err=' '/max_rel_err/ { if (\$2 + 0 > 1e-5) bad = 1 } END { exit bad }' '$d/app.out'" ||
		cat "$d/app.out"
else
	fail "cmake c++: configures, builds and links"
	tail -n 20 "$d/cmake.log"
fi
# the definitions come from the package, not from the project
check "cmake c++: the compile line has OMPI_SKIP_MPICXX from CommFuse::cfrt" \
	grep -rq 'OMPI_SKIP_MPICXX' "$d/build/CMakeFiles/app.dir/flags.make"
check "cmake c++: CMakeLists.txt names no MPI flag itself" \
	sh -c "! grep -v '^#' tests/e2e/cmake-cxx/CMakeLists.txt | grep -q 'SKIP_MPICXX\|mpi_cxx'"

# pkg-config from C++: g++ with MPI's C flags and libraries only (and,
# under SAN, the sanitizers, as the CMake build above has them: a build of
# the library under ASan needs its runtime linked first)
"$CFC" examples/mlp.cf -D tp=2 --emit=h,c,ref -o "$d/gen/"
pc="$(PKG_CONFIG_PATH=$B pkg-config --cflags --libs cfrt)"
# shellcheck disable=SC2046,SC2086 # flags are words
if mpicc -std=c11 $SANFLAGS -c -o "$d/mlp.o" "$d/gen/mlp.c" -I"$d/gen" $pc &&
	mpicc -std=c11 $SANFLAGS -c -o "$d/mlp_ref.o" "$d/gen/mlp_ref.c" -I"$d/gen" $pc &&
	g++ -std=c++17 -Wall -Werror $SANFLAGS -o "$d/pc-app" tests/e2e/cmake-cxx/main.cc "$d/mlp.o" "$d/mlp_ref.o" \
		-I"$d/gen" $(mpicc --showme:compile) $pc $(mpicc --showme:link) >"$d/pc.log" 2>&1; then
	$MPIRUN -n 2 "$d/pc-app" >"$d/pc.out" 2>&1
	check "pkg-config c++: g++ with MPI's C library only builds and matches" \
		sh -c "[ \$(grep -c '^cmake c++ app: rank=[01] max_rel_err=' '$d/pc.out') = 2 ]"
else
	fail "pkg-config c++: g++ with MPI's C library only builds and matches"
	cat "$d/pc.log"
fi
