#!/bin/sh
# What a run shows and says:
#  - a driver run with --check under CFRT_TRACE=PREFIX writes one trace,
#    PREFIX.json (the serial reference's context is not traced: it added
#    PREFIX.ctx1.rank0.json), unless CFRT_TRACE_REF=1 asks for it;
#  - calls outside the model's ops are named "setup: CALL" or "between
#    passes: CALL" in it (they were "- step -1: fill_global");
#  - --gradcheck says what it does and how far it is on stderr (a line
#    to start, a line per tensor, one at the end with the time), and
#    --quiet silences it;
#  - the schedule picture has a legend.
. tests/lib.sh
d=$B/tests/trace-progress
rm -rf "$d"
mkdir -p "$d"
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 120"

sh scripts/build-model.sh "$B" "$d/mlp" examples/mlp.cf -D tp=2 --backward >"$d/mlp.log" 2>&1 ||
	cat "$d/mlp.log"
mkdir -p "$d/t1" "$d/t2"
CFRT_TRACE=$d/t1/run $MPIRUN -x CFRT_TRACE -n 2 "$d/mlp/run" --check --iters 1 --warmup 0 \
	>"$d/t1.out" 2>&1
check "trace: a checked run writes one file, PREFIX.json" \
	sh -c "[ \"\$(ls '$d/t1')\" = run.json ] && grep -q 'max_rel_err=' '$d/t1.out'"
check "trace: calls outside the ops are named 'setup: CALL' or 'between passes: CALL'" \
	/usr/bin/python3 -c "
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X']
names = [e['name'] for e in ev]
assert any(n.startswith('setup: fill_global') for n in names), names[:5]
assert not any(n.startswith('- ') or ' step -1' in n for n in names), [n for n in names if n.startswith('- ')][:3]
" "$d/t1/run.json"
CFRT_TRACE=$d/t2/run CFRT_TRACE_REF=1 $MPIRUN -x CFRT_TRACE -x CFRT_TRACE_REF -n 2 "$d/mlp/run" \
	--check --iters 1 --warmup 0 >"$d/t2.out" 2>&1
check "trace: CFRT_TRACE_REF=1 traces the reference's context too" \
	sh -c "[ -s '$d/t2/run.json' ] && ls '$d/t2' | grep -q 'ctx1'"

# --gradcheck on a small f64 model
sh scripts/build-model.sh "$B" "$d/g" examples/mlp.cf -D tp=2 -D B=1 -D S=4 -D D=4 --type=f64 \
	--backward >"$d/g.log" 2>&1 || cat "$d/g.log"
$MPIRUN -n 2 "$d/g/run" --gradcheck --iters 1 --warmup 0 >"$d/g.out" 2>"$d/g.err"
check "gradcheck: says how many elements, each tensor, and the time at the end" \
	sh -c "grep -q '^gradcheck: [0-9]* elements, two reference forwards each (rank 0)\$' '$d/g.err' &&
		[ \$(grep -c '^gradcheck: [a-z0-9_]*, [0-9]* elements ([0-9]* of [0-9]* done, [0-9]* s)\$' '$d/g.err') -ge 3 ] &&
		grep -q '^gradcheck: [0-9]* elements in [0-9.]* s\$' '$d/g.err' &&
		grep -q 'fd_max_rel_err=' '$d/g.out'"
$MPIRUN -n 2 "$d/g/run" --gradcheck --quiet --iters 1 --warmup 0 >"$d/gq.out" 2>"$d/gq.err"
check "gradcheck --quiet: no progress lines" \
	sh -c "! grep -q '^gradcheck' '$d/gq.err' && grep -q 'fd_max_rel_err=' '$d/gq.out'"

# the schedule picture's legend
"$CFC" examples/mlp.cf --backward --emit=svg -o "$d/mlp.svg"
check "picture: the schedule SVG has a legend naming each kind of box and the messages" \
	sh -c "grep -q '>legend<' '$d/mlp.svg' && grep -q 'a step with nothing for this rank to do' '$d/mlp.svg' &&
		grep -q 'a message from a send to its receive' '$d/mlp.svg' && grep -q 'emit=gantt' '$d/mlp.svg'"
