#!/bin/sh
# Compiles at scale (issue 48, items 6 and 7): the backward's rings are
# proved on one rank as the forward's are, so thousands of ranks compile
# in about a second; the schedule picture of a deep stack on a large
# group is bounded (one instance of a repeated layer, the middle steps
# of a long collective elided); a long compile says what it is doing.
# The limits are generous (a loaded machine, sanitizer builds): a return
# of the blow-up takes minutes, not seconds.
. tests/lib.sh
t=$B/tests/scale
rm -rf "$t"
mkdir -p "$t"
: "${LIMIT:=60}"

# runs NAME CMD...: PASS when CMD exits 0 within LIMIT seconds
runs() {
	_runs_name=$1
	shift
	timeout "$LIMIT" "$@" >"$t/out" 2>"$t/err"
	_runs_rc=$?
	if [ $_runs_rc -eq 0 ]; then
		pass "$_runs_name"
	else
		fail "$_runs_name"
		echo "exit $_runs_rc (124: past $LIMIT s)"
		head -n 5 "$t/err"
	fi
}

# item 6: refused before ("fuse(ring) on d_p: proving it means running
# 2048 ranks"), or past 120 s under slice(4)
mlp="examples/mlp.cf -D tp=2048 -D S=8192 -D F=8192 --backward"
runs "scale: mlp tp=2048 --backward proves" "$CFC" $mlp --explain
check "scale: mlp tp=2048 --backward: its backward rings as asked" sh -c \
	"grep -q '^examples/mlp.cf:21: backward all_gather d_p: fuse(ring) region' '$t/out' &&
	 grep -q '^examples/mlp.cf:18: backward all_gather xa: fuse(ring) region' '$t/out'"
for k in "slice(4)" "fuse(bidir)" "fuse(ring, m = 2)" vanilla; do
	runs "scale: mlp tp=2048 --backward --schedule='$k'" "$CFC" $mlp --schedule="$k"
done
runs "scale: zero_dp dp=2048 --backward --schedule=slice(4) (library reductions)" \
	"$CFC" examples/zero_dp.cf -D dp=2048 -D T=8192 -D D=8192 -D F=8192 --backward \
	--schedule='slice(4)'
# a round-robin program is not symmetric: refused, saying which are
"$CFC" $mlp --schedule='fuse(pairwise)' 2>"$t/pw.err"; rc=$?
check "scale: fuse(pairwise) at tp=2048 is refused, naming the kinds proved on one rank" \
	sh -c "[ $rc -eq 1 ] && grep -q 'fuse(ring) and fuse(bidir), vanilla and slice(k) are proved on one rank' '$t/pw.err'"

# item 7: the 48-layer transformer with its backward at tp = 4096
tf="examples/transformer.cf -D L=48 --backward"
big="-D tp=4096 -D S=16384 -D D=16384 -D H=4096"
runs "scale: transformer L=48 tp=4096 --backward" "$CFC" $tf $big
runs "scale: transformer L=48 tp=4096 --backward --schedule=slice(4)" "$CFC" $tf $big \
	--schedule='slice(4)'

# the picture: its size depends on neither the depth nor the group
# picargs L N: the transformer's backward, L blocks on N ranks, as DOT
picargs() { echo "examples/transformer.cf --backward -D L=$1 -D tp=$2 -D S=$((4 * $2))" \
	"-D D=$((4 * $2)) -D H=$2 --emit=sched-dot -o $t/$1.$2.dot"; }
runs "scale: the picture of L=48 tp=4096" "$CFC" $(picargs 48 4096)
check "scale: the picture names what it does not draw" sh -c \
	"grep -q 'block0 x 48: block1 to block47 like it, not drawn' '$t/48.4096.dot' &&
	 grep -q 'steps 6 to 4094: 4089 more like these, not drawn' '$t/48.4096.dot' &&
	 grep -q 'schedule on 4096 ranks (1 lane: ranks whose programs are alike' '$t/48.4096.dot' &&
	 grep -q 'label=\"ranks 0-4095 (rotations)\"' '$t/48.4096.dot'"
for a in "16 1024" "48 1024" "48 64"; do
	"$CFC" -q $(picargs $a)
done
rows() { grep -c '^  n0_[0-9]* \[' "$1"; }
check "scale: the picture has as many rows at L=16 as at L=48, at 64 ranks as at 4096" sh -c \
	"[ $(rows "$t/16.1024.dot") -eq $(rows "$t/48.1024.dot") ] &&
	 [ $(rows "$t/48.64.dot") -eq $(rows "$t/48.4096.dot") ]"
runs "scale: --emit=svg of L=48 tp=1024" "$CFC" $tf -D tp=1024 -D S=4096 -D D=4096 -D H=1024 \
	--emit=svg -o "$t/48.svg"

# progress: CFC_PROGRESS_AFTER=0 makes every compile a long one
CFC_PROGRESS_AFTER=0 "$CFC" examples/mlp.cf --backward --emit=c -o "$t/m.c" 2>"$t/p.err"
check "scale: a long compile prints a line per phase" sh -c \
	"grep -Eq '^cfc: parse: [0-9]+ bytes, [0-9.]+ s\$' '$t/p.err' &&
	 grep -Eq '^cfc: verify: 2 collectives, [0-9.]+ s\$' '$t/p.err' &&
	 grep -Eq '^cfc: backward verify: 3 collectives, [0-9.]+ s\$' '$t/p.err' &&
	 grep -Eq '^cfc: emit c: .*m.c, [0-9.]+ s\$' '$t/p.err' && [ \$(wc -l <'$t/p.err') -eq 12 ]"
CFC_PROGRESS_AFTER=0 "$CFC" -q examples/mlp.cf --backward 2>"$t/q.err"
CFC_PROGRESS_AFTER=0 "$CFC" --quiet examples/mlp.cf 2>>"$t/q.err"
CFC_PROGRESS_AFTER=0 "$CFC" -fdiagnostics-format=json examples/mlp.cf 2>"$t/j.err"
env -u CFC_PROGRESS_AFTER "$CFC" examples/mlp.cf --backward 2>>"$t/q.err"
check "scale: no progress with -q, --quiet, JSON diagnostics, or a short compile" sh -c \
	"[ ! -s '$t/q.err' ] && [ \"\$(cat '$t/j.err')\" = '[]' ]"
check "scale: --help documents -q" sh -c "'$CFC' --help | grep -q '^  -q, --quiet '"
