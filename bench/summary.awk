# summary.awk: how well cfc's cost model did on a `make bench` results
# CSV (report.awk's), in the words the issue's targets use:
#   awk -F, -f bench/summary.awk results.csv
# - the prediction's |error| (pred_err) over the schedule rows (every
#   variant but auto at progress "none", the rows cfc predicts): median,
#   worst and its row, how many within 15%; the same of the compute alone;
# - per model, auto's time against the fastest schedule row measured in
#   the same run (its regret: auto / fastest - 1, negative where auto was
#   faster), against vanilla, and against the hand-written MPI + OpenBLAS
#   MLP.
# Prints nothing for a CSV without predictions.
NR == 1 {
	for (i = 1; i <= NF; i++)
		col[$i] = i
	next
}
{
	m = $col["model"]; v = $col["variant"]; t = $col["time_ms"]
	if (!(m in seen)) { seen[m] = 1; models[++nm] = m }
	if (v == "auto") { auto[m] = t; next }
	if (v == "vanilla" && $col["progress"] == "none") van[m] = t
	if (v == "mpi+openblas (hand)") { hand[m] = t; next }
	if ($col["progress"] != "none" || $col["pred_err"] == "")
		next
	e = $col["pred_err"] + 0
	err[++n] = e < 0 ? -e : e
	what[n] = m " " v
	if ($col["pred_compute_err"] != "") {
		c = $col["pred_compute_err"] + 0
		cerr[++nc] = c < 0 ? -c : c
		cwhat[nc] = what[n]
	}
	if (!(m in best) || t + 0 < best[m] + 0) { best[m] = t; bestv[m] = v }
}

# a[1..k] sorted ascending (insertion sort: a few dozen rows)
function sort(a, k,    i, j, x) {
	for (i = 2; i <= k; i++) {
		x = a[i]
		for (j = i - 1; j >= 1 && a[j] > x; j--)
			a[j + 1] = a[j]
		a[j + 1] = x
	}
}

function median(a, k,    b, i) {
	for (i = 1; i <= k; i++)
		b[i] = a[i]
	sort(b, k)
	return k % 2 ? b[(k + 1) / 2] : (b[k / 2] + b[k / 2 + 1]) / 2
}

END {
	if (!n)
		exit
	worst = 1; within = 0
	for (i = 1; i <= n; i++) {
		if (err[i] > err[worst]) worst = i
		if (err[i] <= 0.15) within++
	}
	printf "prediction: |error| over %d schedule rows: median %.1f%%, worst %.1f%% (%s), " \
	       "within 15%%: %d", n, 100 * median(err, n), 100 * err[worst], what[worst], within
	if (nc) {
		cw = 1
		for (i = 1; i <= nc; i++)
			if (cerr[i] > cerr[cw]) cw = i
		printf "; compute alone: median %.1f%%, worst %.1f%% (%s)",
		       100 * median(cerr, nc), 100 * cerr[cw], cwhat[cw]
	}
	printf "\n"
	for (k = 1; k <= nm; k++) {
		m = models[k]
		if (!(m in auto) || !(m in best))
			continue
		printf "auto: %s %.1f ms, the fastest schedule %s %.1f ms: regret %+.1f%%", m,
		       auto[m], bestv[m], best[m], 100 * (auto[m] / best[m] - 1)
		if (m in van)
			printf "; vanilla %.1f ms (%+.1f%%)", van[m], 100 * (auto[m] / van[m] - 1)
		if (m in hand)
			printf "; hand-written MPI + OpenBLAS %.1f ms", hand[m]
		printf "\n"
	}
}
