#!/bin/sh
# Random valid specs (tests/gen/cfgen.py): the fixed batch of seeds
# GEN_SEEDS (default 1-40; under the sanitizers the first 8 of it), each
# accepted by cfc, its C compiled with -Werror, run on its N ranks twice and
# checked against the serial reference (tests/gen/run.sh: one PASS or FAIL
# per seed; with --backward, its gradients against the reference backward
# and in f64 finite differences); and the batch covers every op,
# collective, split position, layout, group size 1..6, type, schedule
# kind, grids of 2 and 3 groups, GQA, rope, save and --backward
# (cfgen.py --coverage).
# `make gen SEEDS=1-400` runs a bigger batch.
. tests/lib.sh
seeds=${GEN_SEEDS:-1-40}
lo=${seeds%-*} hi=${seeds#*-}
out=$B/tests/gen/specs
rm -rf "$out" "$B/tests/gen/work"
mkdir -p "$out"
python3 tests/gen/cfgen.py --seed "$lo" --count $((hi - lo + 1)) -o "$out"
check "gen: the batch $seeds covers every feature" python3 tests/gen/cfgen.py --coverage "$out"/*.cf
run=$hi
[ -n "${SAN:-}" ] && [ -z "${GEN_SEEDS:-}" ] && run=$((lo + 7))
specs=""
s=$lo
while [ "$s" -le "$run" ]; do
	specs="$specs $out/gen_$s.cf"
	s=$((s + 1))
done
sh tests/gen/run.sh $specs
