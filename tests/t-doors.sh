#!/bin/sh
# The doors of issue 48 beside -o (t-outfile.sh): unbounded expansion
# stops at --max-ops quickly and in little memory, every number cfc
# prints into C is a C double literal, several --emit kinds that cannot
# all be written leave none, --emit= lists no empty kind, the input is
# capped at 16 MiB, and the generated driver checks its options' ranges.
. tests/lib.sh
t=$B/tests/doors
rm -rf "$t"
mkdir -p "$t"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

# ---- item 4: layers that call layers twice, 60 deep (2^60 instances):
# refused at the limit in bounded time and memory (ASan's shadow needs
# more address space than a limit allows: time alone there)
/usr/bin/python3 - "$t/nest60.cf" <<'PY'
import sys
s = "layer l0(a) {\n  return gelu(a);\n}\n"
for i in range(1, 61):
    s += "layer l%d(a) {\n  return l%d(l%d(a));\n}\n" % (i, i - 1, i - 1)
s += "model m {\n  size S = 4, D = 4;\n  type f32;\n  in x : [S, D];\n  y = l60(x);\n  out y;\n}\n"
open(sys.argv[1], "w").write(s)
PY
if [ -z "$SANFLAGS" ]; then lim="ulimit -v 400000;"; else lim=; fi
sh -c "$lim exec timeout 20 '$CFC' '$t/nest60.cf'" 2>"$t/nest60.err"; rc=$?
check "doors: 2^60 layer instances stop at the op limit (exit 1, under 400 MB, 20 s)" sh -c \
	"[ $rc -eq 1 ] && grep -q 'nest60.cf:5:10: error: this call of layer l0 takes the model past 20000 ops' '$t/nest60.err'"
check "doors: the op limit's error names the chain of calls (60 notes)" sh -c \
	"[ \$(grep -c 'note: in layer l[0-9]*, called here' '$t/nest60.err') -eq 60 ]"
"$CFC" --max-ops=0 examples/mlp.cf 2>"$t/maxops.err"; rc=$?
check "doors: --max-ops=0 is a usage error" sh -c "[ $rc -eq 2 ] && grep -q 'from 1 to 10000000' '$t/maxops.err'"
"$CFC" --max-ops=100000 tests/errors/ops_limit_repeat.cf 2>"$t/raised.err"; rc=$?
check "doors: --max-ops raises the limit" sh -c "[ $rc -eq 1 ] && grep -q 'past 100000 ops' '$t/raised.err'"
check "doors: the 48-block transformer is under the default limit" "$CFC" examples/transformer.cf -D L=48

# ---- item 5: every number cfc prints into C reads back as a C double:
# -0 stays -0.0, subnormals, the largest double, whole numbers
cat >"$t/lit.cf" <<'EOF'
model m {
  size S = 8, D = 4;
  type f64;
  in x : [S, D];
  weight w : [D, D];
  a = -0.0 * (x @ w);
  b = scale(a, 2.0);
  c = 1.7976931348623157e308 * b;
  d = rope(c, 1e300);
  e = rmsnorm(d, eps = 4.9406564584124654e-324);
  f = layernorm(e, eps = 2.2250738585072014e-308);
  g = scan(f, S, 1e-310);
  h = 3 * g;
  out h;
}
EOF
"$CFC" "$t/lit.cf" --backward --emit=h,c,ref -o "$t/lit"
grep -ho 'cfrt_[a-z_]*(ctx, [^;]*' "$t/lit/m.c" "$t/lit/m_ref.c" |
	grep -E '^cfrt_(scale|rope|rmsnorm|layernorm|scan)' | sort -u >"$t/lit.calls"
cat >"$t/lit.want" <<'EOF'
cfrt_layernorm(ctx, &f, &e, NULL, NULL, 2.2250738585072014e-308))
cfrt_layernorm_grad(ctx, &d_e, &d_f, &e, NULL, 2.2250738585072014e-308))
cfrt_rmsnorm(ctx, &e, &d, NULL, 4.9406564584124654e-324))
cfrt_rmsnorm_grad(ctx, &d_d, &d_e, &d, NULL, 4.9406564584124654e-324))
cfrt_rope(ctx, &d, &c, 0, 1.0000000000000001e+300, 0, 0))
cfrt_rope(ctx, &d_c, &d_d, 0, 1.0000000000000001e+300, 0, 1))
cfrt_scale(ctx, &a, &t1, -0.0))
cfrt_scale(ctx, &b, &a, 2.0))
cfrt_scale(ctx, &c, &b, 1.7976931348623157e+308))
cfrt_scale(ctx, &d_a, &d_b, 2.0))
cfrt_scale(ctx, &d_b, &d_c, 1.7976931348623157e+308))
cfrt_scale(ctx, &d_g, &d_h, 3.0))
cfrt_scale(ctx, &d_t1, &d_a, -0.0))
cfrt_scale(ctx, &h, &g, 3.0))
cfrt_scan(ctx, &g, &f, 0, 9.9999999999999694e-311))
cfrt_scan_grad(ctx, &d_f, &d_g, 0, 9.9999999999999694e-311))
EOF
golden "doors: constants in the C are double literals (-0.0, subnormal, largest, whole)" \
	"$t/lit.calls" "$t/lit.want"
check "doors: that C compiles with -Wall -Wextra -pedantic -Werror" \
	mpicc -std=c11 -Wall -Wextra -pedantic -Werror -Iruntime -I"$t/lit" -c -o "$t/lit/m.o" "$t/lit/m.c"

# ---- item 10: several kinds, the disk full at the last: none appears
# (a per-file size limit, RLIMIT_FSIZE with SIGXFSZ ignored: EFBIG at
# the driver, the largest, after the reference and the header fit)
"$CFC" examples/mlp.cf --emit=h,ref,driver -o "$t/sizes"
big=$(wc -c <"$t/sizes/mlp_main.c")
lim=$(cat "$t/sizes/mlp.h" "$t/sizes/mlp_ref.c" | wc -c)
mkdir "$t/full"
/usr/bin/python3 -c '
import os, resource, signal, sys
n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execv(sys.argv[2], sys.argv[2:])' "$lim" "$CFC" examples/mlp.cf --emit=h,ref,driver \
	-o "$t/full" 2>"$t/full.err"; rc=$?
check "doors: --emit=h,ref,driver with the last file past the disk: exit 1, no file left" sh -c \
	"[ $big -gt $lim ] && [ $rc -eq 1 ] && [ -z \"\$(ls -A '$t/full')\" ] &&
	 grep -q 'cannot write $t/full/mlp_main.c: File too large' '$t/full.err'"
/usr/bin/python3 -c '
import os, resource, signal, sys
n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execv(sys.argv[2], sys.argv[2:])' "$lim" "$CFC" examples/mlp.cf --emit=h,ref,driver \
	-o "$t/new/" 2>/dev/null; rc=$?
check "doors: ... and a directory it made for them is gone" sh -c "[ $rc -eq 1 ] && [ ! -e '$t/new' ]"

# --emit with no kind or an empty one
for e in "" "c,,h" "c," ",c" ","; do
	"$CFC" examples/mlp.cf "--emit=$e" -o "$t/e" 2>"$t/emit.err"; rc=$?
	check "doors: --emit=$e is a usage error" sh -c \
		"[ $rc -eq 2 ] && grep -Eq 'needs a kind|an empty kind' '$t/emit.err' && [ ! -e '$t/e' ]"
done

# the input's size: refused past 16 MiB, fast, from a device, a pipe, a file
"$CFC" /dev/zero 2>"$t/zero.err"; rc=$?
check "doors: /dev/zero is refused as larger than 16 MiB" sh -c \
	"[ $rc -eq 1 ] && grep -q '^cfc: error: /dev/zero is larger than 16 MiB, the most cfc reads' '$t/zero.err'"
head -c 16777217 /dev/zero | "$CFC" - 2>"$t/pipe.err"; rc=$?
check "doors: 16 MiB + 1 byte on a pipe is refused" sh -c \
	"[ $rc -eq 1 ] && grep -q '<stdin> is larger than 16 MiB' '$t/pipe.err'"
{ printf 'model m {\n}\n'; head -c 16777204 /dev/zero | tr '\0' ' '; } >"$t/edge.cf"
"$CFC" "$t/edge.cf" 2>"$t/edge.err"; rc=$?
check "doors: a spec of 16 MiB exactly is read (its own errors)" sh -c \
	"[ \$(wc -c <'$t/edge.cf') -eq 16777216 ] && ! grep -q 'larger than' '$t/edge.err' && [ $rc -eq 1 ]"
truncate -s 17M "$t/sparse.cf"
"$CFC" "$t/sparse.cf" 2>"$t/sparse.err"; rc=$?
check "doors: a larger regular file is refused by its size" sh -c \
	"[ $rc -eq 1 ] && grep -q 'sparse.cf is larger than 16 MiB' '$t/sparse.err'"
"$CFC" "$t" 2>"$t/dir.err"; rc=$?
check "doors: a directory as input says why" sh -c "[ $rc -eq 1 ] && grep -q 'cannot read .*: Is a directory' '$t/dir.err'"
# no memory while reading: a clear error, never an internal one (the
# address-space limit that lets cfc start but not hold 16 MiB; not
# under ASan, whose shadow memory needs more)
if [ -z "$SANFLAGS" ]; then
	seen=0 bad=0
	for v in 20000 22000 24000 26000 28000 30000 32000 34000 36000 40000 60000; do
		sh -c "ulimit -v $v; exec '$CFC' - </dev/zero" 2>"$t/oom.err"; rc=$?
		[ $rc -eq 127 ] && continue # not even loaded
		if grep -q 'cannot read <stdin>: Cannot allocate memory' "$t/oom.err"; then
			seen=1
		elif ! grep -q 'larger than 16 MiB' "$t/oom.err" || [ $rc -ne 1 ]; then
			bad=1
			cat "$t/oom.err"
		fi
	done
	check "doors: out of memory while reading the input is 'cannot read', exit 1" \
		sh -c "[ $seen -eq 1 ] && [ $bad -eq 0 ]"
fi

# ---- the generated driver checks the range of every option
sh scripts/build-model.sh "$B" "$t/drv" examples/mlp.cf >"$t/drv.log" 2>&1 || cat "$t/drv.log"
drv() { # NAME WANT ARGS...: exit 2 and WANT on stderr
	_name=$1 _want=$2
	shift 2
	$MPIRUN -n 4 "$t/drv/run" "$@" >"$t/drv.out" 2>&1; _rc=$?
	check "doors: driver $_name" sh -c "[ $_rc -ne 0 ] && grep -q -- \"$_want\" '$t/drv.out' &&
		! grep -q 'signal' '$t/drv.out'"
}
drv "--iters 99999999999 is refused" "--iters wants a count of passes from 1 to 1000000, not '99999999999'" --iters 99999999999
drv "--iters 0 is refused" "--iters wants a count of passes from 1 to 1000000, not '0'" --iters 0
drv "--warmup 2x is refused" "--warmup wants a count of passes from 0 to 1000000, not '2x'" --warmup 2x
drv "--fault 7 on 4 ranks is refused" "--fault wants a rank of the job from 0 to 3, not '7'" --fault 7
drv "--kill -1 is refused" "--kill wants a rank of the job from 0 to 3, not '-1'" --kill -1
drv "--fault with one timed pass is refused" "act in the second timed pass" --fault 1 --iters 1
drv "--warmup-s 1e9 is refused" "--warmup-s wants seconds from 0 to 3600, not '1e9'" --warmup-s 1e9
drv "--iters without its count is refused" "one missing its argument: '--iters'" --iters
$MPIRUN -n 4 "$t/drv/run" --iters 2 --warmup 0 --check >"$t/drv.ok" 2>&1; rc=$?
check "doors: the driver still runs in range" sh -c "[ $rc -eq 0 ] && grep -q 'max_rel_err=' '$t/drv.ok'"
