#!/bin/sh
# The README's commands, run as a user would run them, so that they cannot
# drift from what the tools do and print. Each block the README marks
# with "<!-- test: NAME -->" is taken from README.md as it is:
#  quickstart  the clone step (COMMFUSE_REPO = this tree) and the make
#              targets it names (make -n in the clone);
#  cfc         every "$ cfc ..." line run, its output compared with the
#              lines under it (a line ending in "..." by its beginning);
#  error       the diagnostic of tests/errors/matmul_mismatch.cf;
#  profile     the cfc lines after calibration, on a fixture profile;
#  c-app, c-build  app.c built with pkg-config and run on 2 ranks;
#  cmake       the CMakeLists.txt with app.c, and with app.c as app.cc (C++);
#  python      the Python block run under mpirun;
#  train       the training program built and run (5 steps, not 300).
# In the build tree: cfc and cfrt-calibrate from $B on PATH,
# PKG_CONFIG_PATH=$B (cfrt-uninstalled.pc); mpirun gets the flags a root
# container needs. Under SAN the build tree's cfrt.pc and CommFuse config
# link the sanitizers' runtime into the programs the blocks build.
. tests/lib.sh
d=$ROOT/$B/tests/readme
rm -rf "$d"
mkdir -p "$d"
export PATH="$ROOT/$B:$PATH" PKG_CONFIG_PATH="$ROOT/$B"
MPIFLAGS="--allow-run-as-root --oversubscribe --timeout 120"

# block NAME: the lines of the README's block marked NAME
block() {
	awk -v name="$1" '
		$0 == "<!-- test: " name " -->" { want = 1; next }
		want && /^```/ { if (inb) exit; inb = 1; next }
		inb { print }' README.md
}
# mpi [FLAGS]: the lines on stdin with mpirun given the container's flags
# (and FLAGS)
mpi() { sed "s|^mpirun |mpirun $MPIFLAGS ${1:+$1 }|; s| mpirun | mpirun $MPIFLAGS ${1:+$1 }|"; }
# work NAME: a fresh directory with the tree's examples and tests/errors
work() {
	w=$d/$1
	mkdir -p "$w"
	ln -s "$ROOT/examples" "$w/examples"
}

for b in quickstart cfc error profile c-app c-build cmake python train; do
	check "readme: block $b is there" test -n "$(block $b)"
done

# -- quick start
work quickstart
block quickstart >"$w/block"
check "readme: quick start updates the package lists first" grep -q '^apt-get update && apt-get install -y git make$' "$w/block"
clone=$(grep '^git clone ' "$w/block" | sed 's/ *#.*//')
# shellcheck disable=SC2030 # the clone's directory is local to the subshell
if (cd "$w" && COMMFUSE_REPO=$ROOT sh -c "$clone && make -n demo test" >"$w/clone-make.log" 2>&1); then
	pass "readme: the clone step clones, and make demo and make test are targets there"
else
	fail "readme: the clone step clones, and make demo and make test are targets there"
	tail -n 20 "$w/clone-make.log"
fi

# -- cfc: "$ " lines and their output
work cfc
block cfc >"$w/block"
awk '/^\$ / { n++; sub(/^\$ /, ""); print > (dir "/cmd" n); next }
	{ print > (dir "/want" n) }' dir="$w" "$w/block"
i=1
while [ -f "$w/cmd$i" ]; do
	cmd=$(cat "$w/cmd$i")
	(cd "$w" && sh -c "$cmd") >"$w/got$i" 2>&1
	rc=$?
	[ -f "$w/want$i" ] || : >"$w/want$i"
	if [ "$rc" = 0 ] && awk '
		NR == FNR { want[++n] = $0; next }
		{ got[++m] = $0 }
		END {
			if (n != m) exit 1
			for (i = 1; i <= n; i++) {
				w = want[i]
				if (w ~ /\.\.\.$/) { w = substr(w, 1, length(w) - 3); if (substr(got[i], 1, length(w)) != w) exit 1 }
				else if (got[i] != w) exit 1
			}
		}' "$w/want$i" "$w/got$i"; then
		pass "readme: \$ $cmd"
	else
		fail "readme: \$ $cmd (exit $rc)"
		diff "$w/want$i" "$w/got$i" | head -n 20
	fi
	i=$((i + 1))
done
check "readme: the svg and the C the cfc block writes are there" \
	test -s "$w/mlp.svg" -a -s "$w/out/mlp.c" -a -s "$w/out/mlp_ref.c" -a -s "$w/out/mlp_main.c"

# -- the diagnostic
block error >"$d/error.want"
(cd tests/errors && "$CFC" matmul_mismatch.cf) 2>&1 | head -n 3 >"$d/error.got"
check "readme: the error example is what cfc prints" diff "$d/error.want" "$d/error.got"

# -- the cfc lines after calibration, on a fixture profile
work profile
cp tests/fixtures/prof/2026-11-29-Xeon16-lease45-cpu-4ranks.prof "$w/machine.prof"
block profile >"$w/block"
sed -n 's/^\$ //p' "$w/block" | grep '^cfc ' >"$w/cmds"
check "readme: the profile block calibrates into machine.prof" sh -c "grep -q '^\$ .*cfrt-calibrate -o machine.prof\$' '$w/block'"
ok=1
while read -r cmd; do
	(cd "$w" && sh -c "$cmd") >"$w/out" 2>&1 || { ok=0; echo "$cmd:"; cat "$w/out"; }
done <"$w/cmds"
check "readme: cfc with --profile, as the README runs it (and its gantt)" \
	sh -c "[ $ok = 1 ] && [ \$(wc -l <'$w/cmds') = 2 ] && [ -s '$w/mlp.gantt.svg' ]"

# -- C: app.c, pkg-config, mpirun
work c
block c-app >"$w/app.c"
block c-build | mpi >"$w/build.sh"
if (cd "$w" && sh -e build.sh) >"$w/run.out" 2>&1 &&
	[ "$(grep -c '^rank [01] of 2: y\[0\] = ' "$w/run.out")" = 2 ]; then
	pass "readme: app.c builds with pkg-config and runs on 2 ranks"
else
	fail "readme: app.c builds with pkg-config and runs on 2 ranks"
	tail -n 20 "$w/run.out"
fi

# -- CMake, C and C++
if command -v cmake >/dev/null 2>&1; then
	for lang in c cc; do
		work "cmake-$lang"
		block cmake >"$w/CMakeLists.txt"
		cp examples/mlp.cf "$w/mlp.cf"
		block c-app >"$w/app.$lang"
		[ "$lang" = c ] || sed -i 's/add_executable(app app.c)/add_executable(app app.cc)/' "$w/CMakeLists.txt"
		if cmake -S "$w" -B "$w/build" -DCommFuse_DIR="$ROOT/$B" >"$w/log" 2>&1 &&
			cmake --build "$w/build" >>"$w/log" 2>&1 &&
			mpirun $MPIFLAGS -n 2 "$w/build/app" >"$w/run.out" 2>&1 &&
			[ "$(grep -c '^rank [01] of 2: y\[0\] = ' "$w/run.out")" = 2 ]; then
			pass "readme: the CMake project builds app.$lang and runs it"
		else
			fail "readme: the CMake project builds app.$lang and runs it"
			tail -n 20 "$w/log" "$w/run.out"
		fi
	done
else
	echo "SKIP cmake not installed"
fi

# -- Python (under SAN, mpirun gives python3 the sanitizers' runtime
# preloaded, as t-torch does: the library the block builds is sanitized)
work py
preload=
[ -z "$SANFLAGS" ] ||
	preload="-x LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so) -x ASAN_OPTIONS=detect_leaks=0"
block python | mpi "$preload" >"$w/py.sh"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	if (cd "$w" && sh -e py.sh) >"$w/run.out" 2>&1 &&
		[ "$(grep -o "rank [01]: y ([0-9, ]*), gradients \['d_w1', 'd_w2', 'd_x'\]" "$w/run.out" |
		     sort -u | wc -l)" = 2 ]; then  # mpirun may put the ranks' lines on one
		pass "readme: the Python block runs on 2 ranks"
	else
		fail "readme: the Python block runs on 2 ranks"
		tail -n 20 "$w/run.out"
	fi
else
	echo "SKIP /usr/bin/python3 has no numpy"
fi

# -- training (5 steps)
work train
block train | mpi | sed 's|^\(mpirun .* ./a.out\) 300|\1 5|' >"$w/train.sh"
if (cd "$w" && ln -s "$ROOT/examples" ex 2>/dev/null; sh -e train.sh) >"$w/run.out" 2>&1; then
	pass "readme: the training program builds and runs"
else
	fail "readme: the training program builds and runs"
	tail -n 20 "$w/run.out"
fi
