#!/bin/sh
# Golden outputs of every example: --emit=graph and --emit=dot, diffed
# against tests/golden/examples/. UPDATE=1 rewrites the expectations.
. tests/lib.sh
out=$B/tests/golden
mkdir -p "$out" tests/golden/examples
for f in examples/*.cf; do
	n=$(basename "$f" .cf)
	for k in graph dot; do
		if "$CFC" "$f" --emit=$k -o "$out/$n.$k"; then
			golden "golden: $n.$k" "$out/$n.$k" "tests/golden/examples/$n.$k"
		else
			fail "golden: $n.$k (cfc failed)"
		fi
	done
	# the dot text must be a graph that graphviz lays out
	check "dot renders: $n" sh -c "dot -Tsvg '$out/$n.dot' >'$out/$n.svg' 2>'$out/$n.dot.err' && python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '$out/$n.svg'"
done
