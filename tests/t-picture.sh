#!/bin/sh
# The schedule picture's lanes and repeats (codegen/sched_lanes.c,
# sched_dot.c), as DOT text diffed against tests/golden/picture/ (UPDATE=1
# rewrites them): the 48-block transformer, forward and backward, drawn
# as one block ("block0 x 48") in one lane ("ranks 0-3 (rotations)");
# a round-robin exchange, whose ranks differ, a lane a rank; the
# library's all_reduce, not symmetric but alike on every rank, one lane
# "(alike)"; past 8 distinct programs the first four ranks. The backward
# picture of L=48 is laid out one lane wide (before: four lanes, 4565
# px wide).
. tests/lib.sh
t=$B/tests/picture
rm -rf "$t"
mkdir -p "$t"

# pic NAME ARGS...: cfc ARGS --emit=sched-dot against the golden NAME
pic() {
	_pic_name=$1
	shift
	if "$CFC" "$@" --emit=sched-dot -o "$t/$_pic_name.sched-dot" 2>"$t/$_pic_name.err"; then
		golden "picture golden: $_pic_name" "$t/$_pic_name.sched-dot" \
			"tests/golden/picture/$_pic_name.sched-dot"
	else
		fail "picture golden: $_pic_name (cfc failed)"
		head -n 5 "$t/$_pic_name.err"
	fi
}

pic transformer.L48 examples/transformer.cf -D L=48
pic transformer.L48.backward examples/transformer.cf -D L=48 --backward
pic transformer.L2 examples/transformer.cf
pic mlp.pairwise examples/mlp.cf --schedule='fuse(pairwise)'
pic mlp.pairwise16 examples/mlp.cf --schedule='fuse(pairwise)' -D tp=16 -D S=128 -D F=64
pic allreduce.slice2 tests/e2e/allreduce.cf --schedule='slice(2)'

lanes() { grep -c '^  subgraph cluster_rank' "$t/$1.sched-dot"; }
check "picture: the 48-block transformer's backward in one lane, one block drawn a stack, the norm gains' tail (whole-pass order) one unit" sh -c \
	"[ $(lanes transformer.L48.backward) -eq 1 ] &&
	 grep -q 'label=\"ranks 0-3 (rotations)\"' '$t/transformer.L48.backward.sched-dot' &&
	 grep -q 'block0 x 48: block1 to block47 like it, not drawn' '$t/transformer.L48.backward.sched-dot' &&
	 grep -q 'block46 x 46: block45 to block1 like it, not drawn' '$t/transformer.L48.backward.sched-dot' &&
	 grep -q '23 more like the 18 stages above (stages 785 to 1198: block3.h_hat to cf_dpacked23), not drawn' '$t/transformer.L48.backward.sched-dot'"
check "picture: two blocks drawn as one, x 2" \
	grep -q 'block0 x 2: block1 like it, not drawn' "$t/transformer.L2.sched-dot"
check "picture: round-robin, a lane a rank; past 8 ranks the first four" sh -c \
	"[ $(lanes mlp.pairwise) -eq 4 ] && [ $(lanes mlp.pairwise16) -eq 4 ] &&
	 grep -q 'schedule on 16 ranks (ranks 0..3 of 16 shown)' '$t/mlp.pairwise16.sched-dot'"
check "picture: the library's all_reduce, one lane alike" \
	grep -q 'label="ranks 0-3 (alike)"' "$t/allreduce.slice2.sched-dot"
check "picture: the legend says what a shared lane and a turned message are" sh -c \
	"grep -q 'n from r' '$t/transformer.L48.sched-dot' &&
	 grep -q 'a lane for ranks whose programs are alike' '$t/transformer.L48.sched-dot'"

# the backward of L=48 laid out: one lane wide
"$CFC" examples/transformer.cf -D L=48 --backward --emit=svg -o "$t/L48b.svg"; rc=$?
check "picture: the L=48 backward's SVG is one lane wide (under 1400 pt)" sh -c \
	"[ $rc -eq 0 ] && python3 -c '
import sys, xml.etree.ElementTree as E
w = float(E.parse(sys.argv[1]).getroot().get(\"width\").rstrip(\"pt\"))
sys.exit(0 if w < 1400 else \"width %g pt\" % w)' '$t/L48b.svg'"
