#!/bin/sh
# --emit=gantt is the schedule's picture with a time axis (issue 49): cfc
# --help says so beside the pictures without one (svg, png), and the SVG
# it writes carries that axis: ticks at round numbers of ms from 0, in
# order, spanning the predicted pass its title states.
. tests/lib.sh
t=$B/tests/gantt-help
rm -rf "$t"
mkdir -p "$t"

"$CFC" --help >"$t/help"
check "gantt-help: --help lists gantt as the schedule on a time axis" \
	grep -q '^ *gantt  *the schedule on a time axis as SVG (--profile)$' "$t/help"
check "gantt-help: --help says the other pictures have no time axis and gantt has one" \
	sh -c "tr '\n' ' ' <'$t/help' | tr -s ' ' |
	       grep -qF 'pictures sched-dot, svg and png have no time axis; gantt is the picture with one: per rank its compute, sends and receives as bars as long as --profile predicts them'"

prof=tests/fixtures/prof/2026-11-29-Xeon16-lease45-cpu-4ranks.prof
"$CFC" examples/mlp.cf --backward --profile="$prof" --emit=gantt \
	-o "$t/mlp.gantt.svg" 2>"$t/gantt.err"
check "gantt-help: the gantt SVG has a time axis in ms over the predicted pass" \
	/usr/bin/python3 -c '
import re, sys
import xml.etree.ElementTree as ET
svg = open(sys.argv[1]).read()
ET.fromstring(svg)  # well-formed
title = re.search(r"forward ([0-9.]+) ms, backward ([0-9.]+) ms", svg)
ticks = [float(v) for v in re.findall(
    r"<text x=\"[0-9.]+\" y=\"[0-9]+\" text-anchor=\"middle\">([0-9.e+-]+)</text>", svg)]
total = float(title.group(1)) + float(title.group(2))
ok = (len(ticks) >= 5 and ticks[0] == 0 and ticks == sorted(ticks)
      and ticks[-1] <= total * 1.0001 and ticks[-1] > total / 2
      and re.search(r"text-anchor=\"end\">ms</text>", svg))
sys.exit(not ok)' "$t/mlp.gantt.svg"
