# step.awk: bench/step.sh's summary (after stats.awk): per model and
# order the median over rounds of the step time (pass_span_ms), the
# smallest and the spread (largest / smallest - 1), and per model the
# median, smallest and largest over rounds of region / pass - 1, the two
# runs of one round paired.
NR > 1 { k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $4; t[$1, $2, $3] = $4; m[$1] = 1
         if (!($1 in seen)) { seen[$1] = 1; order[++nm] = $1 } }
END {
	printf "%-12s %-7s %7s %12s %9s %9s\n", "model", "order", "rounds", "median_ms", "min_ms", "spread"
	for (i = 1; i <= nm; i++) {
		mo = order[i]
		for (j = 1; j <= 2; j++) {
			o = j == 1 ? "pass" : "region"; k = mo SUBSEP o
			lo = hi = v[k, 1]
			for (r = 1; r <= n[k]; r++) { a[r] = v[k, r]; if (a[r] < lo) lo = a[r]; if (a[r] > hi) hi = a[r] }
			printf "%-12s %-7s %7d %12.3f %9.3f %8.1f%%\n", mo, o, n[k], median(a, n[k]), lo, 100 * (hi / lo - 1)
		}
		c = 0
		for (r = 1; (mo, "pass", r) in t; r++)
			if ((mo, "region", r) in t) b[++c] = t[mo, "region", r] / t[mo, "pass", r] - 1
		lo = hi = b[1]
		for (r = 1; r <= c; r++) { if (b[r] < lo) lo = b[r]; if (b[r] > hi) hi = b[r] }
		printf "%-12s region / pass - 1, round by round: median %+.1f%% (from %+.1f%% to %+.1f%%)\n",
		       mo, 100 * median(b, c), 100 * lo, 100 * hi
	}
}
