#!/bin/sh
# Generated code inside applications: two tensor-parallel groups in one
# job, the wrong number of ranks, a rank that fails or crashes mid-run, an
# out-of-tree program built through pkg-config after `make install`,
# golden files of the generated C of mlp.cf (vanilla and fuse),
# library collectives handed their tensors in place where they can be,
# calls on the longest names, programs built through CMake's package (the
# build tree and an installed prefix) and through pkg-config before
# installing, and when make install runs ldconfig.
. tests/lib.sh
t=$B/tests/apps
rm -rf "$t"
mkdir -p "$t"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 60"
BLAS=$(pkg-config --libs openblas)

# err_ok FILE: the driver's line in FILE reports max_rel_err <= 1e-5.
err_ok() { le "$(field max_rel_err "$1")" 1e-5; }

# runs_right NAME DIR SPEC [cfc args...]: builds SPEC into DIR and runs it
# on 4 ranks; check NAME passes when it matches the serial reference.
runs_right() {
	rname=$1 rdir=$2
	shift 2
	if sh scripts/build-model.sh "$B" "$rdir" "$@" >"$rdir.log" 2>&1; then
		$MPIRUN -n 4 "$rdir/run" --check --iters 1 --warmup 0 >"$rdir.out" 2>&1
		cat "$rdir.out"
	else
		cat "$rdir.log"
	fi
	check "$rname" err_ok "$rdir.out"
}

# -- two groups of 2 from MPI_Comm_split, each with its own data
"$CFC" examples/mlp.cf -D tp=2 --emit=h,c,ref -o "$t/split"
mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -I"$t/split" -o "$t/split/app" \
	tests/e2e/split_app.c "$t/split/mlp.c" "$t/split/mlp_ref.c" "$B/libcfrt.a" $BLAS -lm -pthread
$MPIRUN -n 4 "$t/split/app" >"$t/split.out" 2>&1
cat "$t/split.out"
check "apps: split job, two groups of 2" sh -c "test \$(grep -c 'max_rel_err' '$t/split.out') -eq 4 &&
	awk -F'max_rel_err=' '/max_rel_err/ { if (\$2 + 0 > 1e-5) bad = 1 } END { exit bad }' '$t/split.out'"

# -- a C++17 application (tests/e2e/app.cc): the generated C of mlp with
# its backward, compiled as C and linked into a C++ program that checks
# the output and every gradient against the serial reference
"$CFC" examples/mlp.cf -D tp=2 --backward --emit=h,c,ref -o "$t/cxx"
for c in mlp mlp_ref; do
	mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -I"$t/cxx" -c "$t/cxx/$c.c" \
		-o "$t/cxx/$c.o"
done
OMPI_CXX=g++ mpicxx -std=c++17 -O2 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX $SANFLAGS -Iruntime \
	-I"$t/cxx" -o "$t/cxx/app" tests/e2e/app.cc "$t/cxx/mlp.o" "$t/cxx/mlp_ref.o" "$B/libcfrt.a" \
	$BLAS -lm -pthread
$MPIRUN -n 2 "$t/cxx/app" >"$t/cxx.out" 2>&1
cat "$t/cxx.out"
check "apps: a C++ program runs the forward and backward and matches the reference" sh -c \
	"test \$(grep -c '^c++ app: .* max_rel_err=' '$t/cxx.out') -eq 4 &&
	awk -F'max_rel_err=' '/max_rel_err/ { if (\$2 + 0 > 1e-5) bad = 1 } END { exit bad }' '$t/cxx.out'"

# -- a run's inputs recomputed by an outside program: the header's
# NAME_x_SEED and cfrt_uniform against the driver's --dump-inputs
sh scripts/build-model.sh "$B" "$t/seeds" examples/mlp.cf -D tp=2 --backward >"$t/seeds.log" 2>&1
$MPIRUN -n 2 "$t/seeds/run" --iters 1 --warmup 0 --dump-inputs "$t/seeds/in.bin" >"$t/seeds.out" 2>&1
check "apps: the header's seeds recompute the driver's inputs (--dump-inputs)" \
	python3 tests/seeds.py "$t/seeds/mlp.h" "$t/seeds/in.bin"

# -- the training application (examples/train/train.c): 100 SGD steps of
# a transformer block under vanilla, fuse(ring) and fuse(bidir): the loss
# falls tenfold and the schedules' per-step losses agree within 1e-5
sh scripts/train.sh "$B" "$t/train" 100 >"$t/train.line" 2>&1; rc=$?
cat "$t/train.line"
check "apps: training: the loss falls and the schedules agree" sh -c \
	"[ $rc -eq 0 ] && grep -q '^train: .*: 100 SGD steps, .*agree' '$t/train.line'"

# -- a null weight handed to the forward pass: the job ends, and the message
# names the weight as the spec does, and the function
mkdir -p "$t/null"
"$CFC" examples/mlp.cf -D tp=2 --emit=c -o "$t/null/mlp.c"
mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS -Iruntime -I"$t/null" -o "$t/null/app" \
	tests/e2e/null_arg.c "$t/null/mlp.c" "$B/libcfrt.a" $BLAS -lm -pthread
check "apps: the null-weight application builds" test -x "$t/null/app"
$MPIRUN -n 2 "$t/null/app" >"$t/null.out" 2>&1; rc=$?
cat "$t/null.out"
check "apps: a null weight ends the job" [ $rc -ne 0 ]
check "apps: a null weight is named as the spec names it" grep -q \
	"cfrt: rank [01]: op mlp_forward step 0: cfrt_check_arg: weight w2 (32768 bytes) is a null pointer" "$t/null.out"
check "apps: the forward pass did not go on" sh -c "! grep -q 'returned' '$t/null.out'"

# -- the driver of mlp (group of 4) for the fault tests
sh scripts/build-model.sh "$B" "$t/mlp" examples/mlp.cf >"$t/mlp.log" 2>&1 || cat "$t/mlp.log"
$MPIRUN -n 3 "$t/mlp/run" >"$t/wrong.out" 2>&1; rc=$?
cat "$t/wrong.out"
check "apps: wrong number of ranks exits non-zero" [ $rc -ne 0 ]
check "apps: wrong number of ranks says so" grep -q "compiled for a group of 4 ranks, but the communicator has 3" "$t/wrong.out"

# breaks NAME ARGS...: the mlp driver on 4 ranks with ARGS, output in
# $t/NAME.out; sets rc and took (seconds).
breaks() {
	out=$t/$1.out
	shift
	start=$(date +%s)
	$MPIRUN -n 4 "$t/mlp/run" --iters 3 "$@" >"$out" 2>&1; rc=$?
	took=$(( $(date +%s) - start ))
	cat "$out"
}

breaks fault --fault 1
check "apps: a failed call ends the job" [ $rc -ne 0 ]
check "apps: the failure names rank, op and step" grep -q "cfrt: rank 1: op injected fault step 1:" "$t/fault.out"
check "apps: the job ends well within the timeout ($took s)" [ $took -lt 30 ]

breaks kill --kill 2
check "apps: a crashed rank ends the job" [ $rc -ne 0 ]
check "apps: mpirun names the crashed rank" grep -Eq "rank 2 .*exited on signal|process rank 2" "$t/kill.out"
check "apps: the job ends well within the timeout ($took s)" [ $took -lt 30 ]

# -- make install, then an out-of-tree build through pkg-config
if [ -z "$SANFLAGS" ]; then
	pre=$ROOT/$t/prefix
	make --no-print-directory B="$B" install PREFIX="$pre" >"$t/install.log" 2>&1 ||
		cat "$t/install.log"
	make --no-print-directory B="$B" install PREFIX=/usr/local DESTDIR="$ROOT/$t/stage" \
		>"$t/stage.log" 2>&1 || cat "$t/stage.log"
	check "apps: make install DESTDIR=... stages cfc, cfrt.h, libcfrt, cfrt.pc" sh -c \
		"cd '$t/stage/usr/local' && test -x bin/cfc && test -f include/cfrt.h &&
		 test -f lib/libcfrt.a && test -L lib/libcfrt.so.0 && test -f lib/pkgconfig/cfrt.pc"
	d=$t/oot
	mkdir -p "$d"
	"$pre/bin/cfc" examples/mlp.cf --emit=h,c,ref,driver -o "$d"
	(cd "$d" && mpicc -std=c11 -O2 mlp_main.c mlp.c mlp_ref.c -o app \
		$(PKG_CONFIG_PATH=$pre/lib/pkgconfig pkg-config --cflags --libs cfrt) \
		-Wl,-rpath,"$pre/lib") >"$t/oot.log" 2>&1 || cat "$t/oot.log"
	$MPIRUN -n 4 "$d/app" --check --iters 1 >"$t/oot.out" 2>&1
	cat "$t/oot.out"
	check "apps: installed cfc, header, libcfrt and cfrt.pc build an out-of-tree program" \
		err_ok "$t/oot.out"
fi

# -- golden generated C: the forward pass of each case; the header and the
# serial reference do not depend on the schedule, so every schedule of an
# example must give the same ones
for c in "mlp vanilla" "mlp fuse(ring)" "mlp fuse(pairwise)" "mlp fuse(ring, m = 2)" \
         "attention fuse(ring, split = query)" "ulysses fuse(ring)" "ulysses fuse(ring, m = 2)"; do
	ex=${c%% *} s=${c#* }
	n=$(echo "$s" | tr -d ' )' | tr '(,=' '---' | sed 's/--*/-/g')
	"$CFC" "examples/$ex.cf" --schedule="$s" --emit=c,ref -o "$t/gold-$ex-$n"
	golden "apps: golden $n/$ex.c" "$t/gold-$ex-$n/$ex.c" "tests/golden/c/$n/$ex.c"
	for f in "$ex.h" "${ex}_ref.c"; do
		golden "apps: golden $f under $s" "$t/gold-$ex-$n/$f" "tests/golden/c/$f"
	done
done

# -- library collectives on the tensors themselves: a side whose blocks lie
# contiguous in rank order is handed to the library in place, with no copy
# through the workspace; a side whose blocks do not (B before the split S,
# a slice(2) chunk's blocks 2 slices apart) still stages. Each case runs
# too, and matches the serial reference.
# sides FILE IN STAGED: FILE hands IN sides of collectives to the library
# in place and stages STAGED.
sides() {
	[ "$(grep -Ec '(sent|received) in place \*/' "$1")" -eq "$2" ] &&
		[ "$(grep -Ec 'packed into staging|received in staging' "$1")" -eq "$3" ]
}
# has FILE TEXT...: FILE holds every TEXT.
has() {
	f=$1
	shift
	for x in "$@"; do grep -qF -- "$x" "$f" || return 1; done
}
c=$t/inplace
mkdir -p "$c"
"$CFC" bench/rs_gemm.cf --schedule=vanilla --emit=c -o "$c/rs_gemm.c"
check "apps: vanilla rs_gemm reduce-scatters t1 into y in place, with no copy" sh -c \
	"! grep -q cfrt_copy '$c/rs_gemm.c' && grep -A2 '^rs_gemm_workspace_bytes' '$c/rs_gemm.c' |
	 grep -q 'return 16384;'" # the workspace holds t1 alone: 64 x 2 x 64 bf16
check "apps: vanilla rs_gemm: both sides in place" sides "$c/rs_gemm.c" 2 0
"$CFC" examples/mlp.cf -D B=1 --schedule=vanilla --emit=c -o "$c/mlp-b1.c"
check "apps: vanilla mlp with B = 1 gathers and scatters with no copy" sh -c \
	"grep -q '^mlp_forward' '$c/mlp-b1.c' && ! grep -q cfrt_copy '$c/mlp-b1.c'"
check "apps: vanilla mlp with B = 1: all four sides in place" sides "$c/mlp-b1.c" 4 0
"$CFC" examples/mlp.cf --schedule=vanilla --emit=c -o "$c/mlp.c"
ok=0
sides "$c/mlp.c" 2 2 && has "$c/mlp.c" "x's block is contiguous: sent in place" \
	"y's block is contiguous: received in place" \
	"xa's blocks are not one contiguous run in rank order: received in staging" \
	"p's blocks are not one contiguous run in rank order: packed into staging" && ok=1
check "apps: vanilla mlp: x and y in place, xa and p (B before S) staged" [ $ok = 1 ]
"$CFC" examples/mlp.cf -D B=1 --schedule="slice(2)" --emit=c -o "$c/mlp-s2.c"
ok=0
sides "$c/mlp-s2.c" 3 3 && has "$c/mlp-s2.c" "x's block is contiguous: sent in place" \
	"y's block is contiguous: received in place" \
	"xa's blocks are 2 slices apart: received in staging, unpacked at the wait" \
	"p's blocks are 2 slices apart: packed into staging" && ok=1
check "apps: slice(2) mlp with B = 1: x and y in place, xa and p (2 slices apart) staged" [ $ok = 1 ]
"$CFC" tests/e2e/allreduce.cf -D B=3 --schedule="slice(2)" --emit=c -o "$c/ar-s2.c"
check "apps: slice(2) all_reduce cutting S behind B = 3 stages both sides" sides "$c/ar-s2.c" 0 2
for run in "rs_gemm vanilla|bench/rs_gemm.cf --type=f32 --schedule=vanilla" \
	"mlp B=1 vanilla|examples/mlp.cf -D B=1 --schedule=vanilla" \
	"mlp B=1 slice(2)|examples/mlp.cf -D B=1 --schedule=slice(2)" \
	"ulysses B=1 vanilla|examples/ulysses.cf -D B=1 --schedule=vanilla" \
	"allreduce vanilla|tests/e2e/allreduce.cf --schedule=vanilla" \
	"allreduce slice(2)|tests/e2e/allreduce.cf --schedule=slice(2)" \
	"allreduce B=3 slice(2)|tests/e2e/allreduce.cf -D B=3 --schedule=slice(2)"; do
	name=${run%%|*}
	# shellcheck disable=SC2086
	runs_right "apps: in-place collectives run right: $name" \
		"$c/$(echo "$name" | tr ' ()=' '__-_')" ${run#*|}
done

# -- the Makefile's pattern rule: $B/gen/dir/NAME.c and .h from dir/NAME.cf,
# under the build folder; no rule writes C beside the spec
mkdir -p "$t/rule"
cp examples/zero_dp.cf "$t/rule/zero_dp.cf"
make --no-print-directory B="$B" "$B/gen/$t/rule/zero_dp.c" CFCFLAGS="-D dp=2" >"$t/rule.log" 2>&1
check "apps: make builds $B/gen/DIR/NAME.c and NAME.h from DIR/NAME.cf" sh -c \
	"grep -q 'ZERO_DP_GROUP_SIZE 2' '$B/gen/$t/rule/zero_dp.h' && grep -q 'zero_dp_forward' '$B/gen/$t/rule/zero_dp.c' && [ ! -e '$t/rule/zero_dp.c' ]"
make --no-print-directory B="$B" "$t/rule/zero_dp.c" >"$t/rule-src.log" 2>&1
check "apps: make writes no generated C beside the spec" sh -c "[ ! -e '$t/rule/zero_dp.c' ]"

# -- generated C of every example is warning-free under clang too (gcc
# builds every one in t-e2e with -Werror)
if command -v clang >/dev/null 2>&1; then
	for f in examples/*.cf; do
		n=$(basename "$f" .cf)
		"$CFC" "$f" --emit=h,c,ref,driver -o "$t/clang-$n"
		check "apps: clang -Wall -Wextra -Werror compiles $n" sh -c \
			"for c in $n.c ${n}_ref.c ${n}_main.c; do OMPI_CC=clang mpicc -std=c11 -Wall -Wextra -Werror \
			 -Iruntime -I'$t/clang-$n' -c '$t/clang-$n/'\$c -o /dev/null || exit 1; done"
		# the library-collective schedules: blocking ones use no cf_mod
		for s in vanilla "slice(2)"; do
			d=$t/clang-$n-$(echo "$s" | tr -d ')' | tr '(' '-')
			"$CFC" "$f" --schedule="$s" --emit=h,c -o "$d"
			check "apps: clang -Wall -Wextra -Werror compiles $n under $s" sh -c \
				"OMPI_CC=clang mpicc -std=c11 -Wall -Wextra -Werror -Iruntime -I'$d' -c '$d/$n.c' -o /dev/null"
		done
	done
fi

# -- tensors named like the generated code's locals and parameters
for s in "fuse(ring)" "fuse(bidir)" vanilla; do
	n=$(echo "$s" | tr -d ')' | tr '(' '-')
	if sh scripts/build-model.sh "$B" "$t/names-$n" tests/e2e/names.cf --schedule="$s" \
	    >"$t/names-$n.log" 2>&1; then
		$MPIRUN -n 2 "$t/names-$n/run" --check --iters 1 >"$t/names-$n.out" 2>&1
		cat "$t/names-$n.out"
	else
		cat "$t/names-$n.log"
	fi
	check "apps: names that shadow nothing under $s" err_ok "$t/names-$n.out"
done

# -- every name a spec may use that the generated code or the headers
# also know (its locals and parameters, the driver's own identifiers,
# library function names): a chain of tensors so named compiles without a
# warning as C11, GNU C and (the header) C++, and runs right
names="r i s u k rd peer part base dst src o in0 in1 b st blk sst rst at bt hv o4 q4 k4 v4
ctx w io ws tensors bind numel reference opts main exp log index time y0 j0 abs div signal
DTYPE MODEL_NAME GROUP_SIZE SEED NTENSOR model_forward model_io model_weights send_rq recv_rd"
{
	printf 'model nm {\n  size B = 2, S = 16, D = 8;\n  group tp = 2;\n  type f32;\n'
	printf '  in x : [B, S, D] split S over tp;\n  weight wt : [D, D] split 1 over tp;\n'
	printf '  first = all_gather(x, S) @ wt;\n'
	prev=first
	for n in $names; do
		printf '  %s = gelu(%s);\n' "$n" "$prev"
		prev=$n
	done
	printf '  last = reduce_scatter(%s @ wt.T, S);\n  out last;\n}\n' "$prev"
} >"$t/nm.cf"
# build-model.sh builds under -std=c11 -Werror; the same files compile
# under gnu11 too (where linux and unix are macros)
ok=1
for s in "fuse(ring)" vanilla; do
	d=$t/nm-$(echo "$s" | tr -d ')' | tr '(' '-')
	sh scripts/build-model.sh "$B" "$d" "$t/nm.cf" --schedule="$s" >"$d.log" 2>&1 ||
		{ ok=0; cat "$d.log"; continue; }
	for c in nm.c nm_ref.c nm_main.c; do
		mpicc -std=gnu11 -Wall -Wextra -Werror -Iruntime -I"$d" -c "$d/$c" -o /dev/null || ok=0
	done
	$MPIRUN -n 2 "$d/run" --check --iters 1 >"$d.out" 2>&1
	err_ok "$d.out" || { ok=0; cat "$d.out"; }
done
check "apps: tensors named like the code's locals and the headers' functions compile and run" [ $ok = 1 ]
printf '#include "nm.h"\nint main(void) { return 0; }\n' >"$t/nm.cc"
check "apps: the header of those names compiles as C++" sh -c \
	"OMPI_CXX=g++ mpicxx -std=c++17 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX -Iruntime -I'$t/nm-vanilla' -c '$t/nm.cc' -o /dev/null"

# -- a call on four names of 250 characters (the lexer takes 255) is
# emitted whole: a fixed 1 KiB buffer once cut it short, C that did not
# compile
q=$(printf '%250s' '' | tr ' ' q)
printf 'model ln {\n  size S = 8, D = 16;\n  type f32;\n  in %sa : [S, D];\n  weight %sb : [D];\n  weight %sc : [D];\n  %sd = layernorm(%sa, %sb, %sc);\n  out %sd;\n}\n' \
	"$q" "$q" "$q" "$q" "$q" "$q" "$q" "$q" >"$t/long.cf"
"$CFC" "$t/long.cf" --emit=h,c,ref -o "$t/long"
check "apps: a layernorm on 250-character names compiles" sh -c \
	"for c in ln.c ln_ref.c; do mpicc -std=c11 -Wall -Wextra -Werror -Iruntime -I'$t/long' -c '$t/long/'\$c -o /dev/null || exit 1; done"

# -- specs each of which a fixed bug once kept from compiling: they compile
# and run right on 4 ranks (tests/e2e/NAME.cf says what each one shows;
# fuse(bidir) on ulysses' all_to_alls with H = N runs as fuse(ring), whose
# slices divide)
for run in "heads_seq|tests/e2e/heads_seq.cf" \
	"allreduce_odd default|tests/e2e/allreduce_odd.cf" \
	"allreduce_odd auto|tests/e2e/allreduce_odd.cf --schedule=auto" \
	"allreduce_odd slice(2)|tests/e2e/allreduce_odd.cf --schedule=slice(2)" \
	"ulysses H=4 fuse(bidir)|examples/ulysses.cf -D H=4 --schedule=fuse(bidir)"; do
	name=${run%%|*}
	# shellcheck disable=SC2086
	runs_right "apps: fixed bug runs right: $name" \
		"$t/fixed-$(echo "$name" | tr ' ()=' '__-_')" ${run#*|}
done
"$CFC" tests/e2e/allreduce_odd.cf --explain >"$t/odd.explain"
check "apps: --explain says the default fell back to vanilla, and why" grep -q \
	"all_reduce y: vanilla (asked fuse(ring)) .*; the built-in default fuse(ring) needs a dimension of h @ w2 (\[6,10\]) that divides into 4 slices: vanilla used" \
	"$t/odd.explain"

# -- CMake without hand-written flags: tests/e2e/cmake (cfc_generate of mlp
# with tp = 2 run by main.c against the serial reference, on libcfrt.so;
# cfc's driver of mlp under fuse(bidir) with its backward, on libcfrt.a)
# configured against the build tree (CommFuse_DIR=$B) and against the
# prefix installed above, built with -Werror, run on 2 ranks.
# drv_ok FILE: the driver's line in FILE reports max_rel_err and
# grad_max_rel_err <= 1e-5.
drv_ok() { err_ok "$1" && le "$(field grad_max_rel_err "$1")" 1e-5; }
# static_ok FILE: program FILE loads no libcfrt.so.
static_ok() { test -x "$1" && ! ldd "$1" | grep -q libcfrt; }
# cmake_app NAME DIR LIBDIR CMAKE-ARGS...: configures tests/e2e/cmake into
# DIR with CMAKE-ARGS, builds and runs it; its app must load libcfrt.so.0
# from LIBDIR, its driver no libcfrt.so at all.
cmake_app() {
	cname=$1 cdir=$2 clib=$3
	shift 3
	if cmake -S tests/e2e/cmake -B "$cdir" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $SANFLAGS" \
	    "$@" >"$cdir.log" 2>&1 && cmake --build "$cdir" -j 2 >>"$cdir.log" 2>&1; then
		$MPIRUN -n 2 "$cdir/app" >"$cdir.out" 2>&1
		$MPIRUN -n 2 "$cdir/mlp_bidir_driver" --check --iters 1 --warmup 0 >"$cdir.drv" 2>&1
		cat "$cdir.out" "$cdir.drv"
	else
		cat "$cdir.log"
	fi
	check "apps: cmake ($cname): an app linking cfc_generate's mlp matches the reference on 2 ranks" \
		sh -c "test \$(grep -c '^cmake app: rank=[01] max_rel_err=' '$cdir.out') -eq 2 &&
		awk -F'max_rel_err=' '/max_rel_err/ { if (\$2 + 0 > 1e-5) bad = 1 } END { exit bad }' '$cdir.out'"
	check "apps: cmake ($cname): the app loads libcfrt.so.0 from $clib" sh -c \
		"ldd '$cdir/app' | grep -q 'libcfrt.so.0 => $clib/libcfrt.so.0 '"
	check "apps: cmake ($cname): cfc_generate's driver (fuse(bidir), backward) matches" \
		drv_ok "$cdir.drv"
	check "apps: cmake ($cname): the driver is linked with libcfrt.a" static_ok "$cdir/mlp_bidir_driver"
}
if command -v cmake >/dev/null 2>&1; then
	# from the build tree, on a copy of the spec: touching it runs cfc again
	mkdir -p "$t/cmake-spec"
	cp examples/mlp.cf "$t/cmake-spec/mlp.cf"
	cmake_app "build tree" "$t/cmake" "$ROOT/$B" -DCommFuse_DIR="$ROOT/$B" \
		-DCF_SPEC="$ROOT/$t/cmake-spec/mlp.cf"
	cmake --build "$t/cmake" >"$t/cmake.again" 2>&1
	sleep 1
	touch "$t/cmake-spec/mlp.cf"
	cmake --build "$t/cmake" >"$t/cmake.touched" 2>&1
	check "apps: cmake: a build with nothing changed runs no cfc" sh -c \
		"grep -q 'Built target app' '$t/cmake.again' && ! grep -q 'cfc:' '$t/cmake.again'"
	check "apps: cmake: a build after the spec changed runs cfc for both models" sh -c \
		"grep -q 'cfc: mlp from' '$t/cmake.touched' && grep -q 'cfc: mlp_bidir from' '$t/cmake.touched'"
	if [ -z "$SANFLAGS" ]; then
		# the installed package, its spec named relative to CMakeLists.txt
		cmake_app "installed" "$t/cmake-inst" "$pre/lib" -DCMAKE_PREFIX_PATH="$pre"
		check "apps: cmake (installed) found the package under the prefix" grep -qx \
			"CommFuse_DIR:PATH=$pre/lib/cmake/CommFuse" "$t/cmake-inst/CMakeCache.txt"
		# the staged copy finds its prefix from its own place, where it
		# checks that cfrt.h, cfc and both libraries are
		check "apps: cmake finds the package in a DESTDIR stage" cmake -S tests/e2e/cmake \
			-B "$t/cmake-stage" -DCMAKE_PREFIX_PATH="$ROOT/$t/stage/usr/local"
		cmake -S tests/e2e/cmake -B "$t/cmake-v1" -DCMAKE_PREFIX_PATH="$pre" -DCF_VERSION=1.0 \
			>"$t/cmake-v1.log" 2>&1; rc=$?
		check "apps: cmake: find_package(CommFuse 1.0) is refused, naming 0.1.0" sh -c \
			"[ $rc -ne 0 ] && grep -q 'version: 0.1.0$' '$t/cmake-v1.log'"
	fi
else
	echo "SKIP cmake is not installed (scripts/install-deps.sh installs it)"
fi

# -- pkg-config before make install: cfrt-uninstalled.pc in $B, found for
# cfrt through PKG_CONFIG_PATH alone; the program runs from the build tree
# with no LD_LIBRARY_PATH (the file's rpath)
d=$t/uninst
"$CFC" examples/mlp.cf -D tp=2 --emit=h,c,ref,driver -o "$d"
check "apps: PKG_CONFIG_PATH=$B pkg-config cfrt takes cfrt-uninstalled.pc" \
	env PKG_CONFIG_PATH="$B" pkg-config --uninstalled cfrt
(cd "$d" && mpicc -std=c11 -O2 -Wall -Wextra -Werror $SANFLAGS mlp_main.c mlp.c mlp_ref.c -o app \
	$(PKG_CONFIG_PATH=$ROOT/$B pkg-config --cflags --libs cfrt)) >"$t/uninst.log" 2>&1 ||
	cat "$t/uninst.log"
check "apps: the program built through cfrt-uninstalled.pc loads the build tree's libcfrt.so.0" \
	sh -c "ldd '$d/app' | grep -q 'libcfrt.so.0 => $ROOT/$B/libcfrt.so.0 '"
$MPIRUN -n 2 "$d/app" --check --iters 1 >"$t/uninst.out" 2>&1
cat "$t/uninst.out"
check "apps: a program built with only pkg-config's flags for the build tree runs right" \
	err_ok "$t/uninst.out"

# -- make install runs ldconfig as root, with no DESTDIR, into a directory
# the loader searches, and only then: a stand-in for ldconfig lists the
# one directory FAKE_DIR and notes how many arguments each run had
if [ -z "$SANFLAGS" ] && [ "$(id -u)" -eq 0 ]; then
	fake=$ROOT/$t/ldconfig
	printf '#!/bin/sh\nif [ "$*" = -vNX ]; then echo "$FAKE_DIR: (from fake.conf:1)"\nelse echo $# >>"$0.ran"; fi\n' \
		>"$fake"
	chmod +x "$fake"
	# ldinstall DIR MAKE-ARGS...: make install PREFIX=$pre MAKE-ARGS, the
	# loader searching DIR; true when ldconfig ran once, to rebuild its
	# cache (no arguments)
	ldinstall() {
		ldir=$1
		shift
		rm -f "$fake.ran"
		FAKE_DIR=$ldir LDCONFIG=$fake make --no-print-directory B="$B" install PREFIX="$pre" "$@" \
			>"$t/ldinstall.log" 2>&1 || cat "$t/ldinstall.log"
		[ "$(cat "$fake.ran" 2>/dev/null)" = 0 ]
	}
	not() { ! "$@"; }
	check "apps: make install as root into a directory the loader searches runs ldconfig" \
		ldinstall "$pre/lib"
	check "apps: make install into a directory the loader does not search runs no ldconfig" \
		not ldinstall /usr/lib
	check "apps: make install DESTDIR=... runs no ldconfig" \
		not ldinstall "$pre/lib" DESTDIR="$ROOT/$t/stage-ld"
fi
