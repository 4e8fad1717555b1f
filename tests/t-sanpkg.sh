#!/bin/sh
# A build under the sanitizers (make SAN=address,undefined) hands them on.
# A program that links the sanitized libcfrt needs their runtime linked
# first; without it each rank exits 1 ("ASan runtime does not come first
# in initial library list"). That is how t-readme's blocks and t-cmake-cxx
# failed under SAN. So the build tree's cfrt.pc, cfrt-uninstalled.pc,
# cfrt_cuda.pc and CommFuseConfig.cmake name -fsanitize=$SAN. A plain
# build's name no sanitizer. Under SAN, tests/runtime/pc_app built with
# nothing but pkg-config's flags (the README's way) runs on 2 ranks.
. tests/lib.sh
d=$B/tests/sanpkg
rm -rf "$d"
mkdir -p "$d"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

for f in cfrt.pc cfrt-uninstalled.pc cfrt_cuda.pc; do
	[ -f "$B/$f" ] || continue
	if [ -n "${SAN:-}" ]; then
		check "sanpkg: $f's Libs end in -fsanitize=$SAN" \
			grep -q "^Libs: .* -fsanitize=$SAN\$" "$B/$f"
	else
		check "sanpkg: $f names no sanitizer and ends no line in a space" \
			sh -c "! grep -q 'sanitize\| \$' '$B/$f'"
	fi
done
if [ -n "${SAN:-}" ]; then
	check "sanpkg: CommFuseConfig.cmake links -fsanitize=$SAN into the runtime's users" \
		grep -q "^  set(_CommFuse_san \"-fsanitize=$SAN\")\$" "$B/CommFuseConfig.cmake"
	pc=$(PKG_CONFIG_PATH=$B pkg-config --cflags --libs cfrt)
	# shellcheck disable=SC2086 # flags are words
	if mpicc -std=c11 -o "$d/pc_app" tests/runtime/pc_app.c $pc >"$d/cc.log" 2>&1 &&
		$MPIRUN -n 2 "$d/pc_app" >"$d/run.out" 2>&1 && grep -q '^pc_app: .*: ok$' "$d/run.out"; then
		pass "sanpkg: tests/runtime/pc_app built with pkg-config's flags alone runs on 2 ranks"
	else
		fail "sanpkg: tests/runtime/pc_app built with pkg-config's flags alone runs on 2 ranks"
		tail -n 20 "$d/cc.log" "$d/run.out"
	fi
else
	check "sanpkg: CommFuseConfig.cmake links no sanitizer" \
		grep -q '^  set(_CommFuse_san "")$' "$B/CommFuseConfig.cmake"
fi
