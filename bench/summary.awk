# summary.awk: how well cfc's cost model did on a `make bench` results
# CSV (report.awk's), in the words the issue's targets use:
#   awk -F, -f bench/stats.awk -f bench/summary.awk results.csv
# - the prediction's |error| (pred_err) over the schedule rows (every
#   variant but auto at progress "none", the rows cfc predicts): median,
#   worst and its row, how many within 15%; the same of the compute alone;
# - per model, auto's time against the fastest schedule row measured in
#   the same run (its regret: auto / fastest - 1, negative where auto was
#   faster), against vanilla, and against the hand-written MPI + OpenBLAS
#   MLP; the same of each auto@P row (bench.sh's AUTO_MARGINS: auto at
#   cfc --auto-margin=P), after auto's;
# - where the rounds differed, the same against the median of each row's
#   rounds (report.awk's median_ms and pred_err_median): the calibration
#   keeps medians, and on a machine whose speed wanders from run to run
#   the fastest of a few rounds is itself a matter of luck;
# - where mix rows were run, the same against mix_ms (every schedule of a
#   model in one job, passes interleaved: the schedules meet the machine
#   in nearly the same state); auto's regret and its time against
#   vanilla's each taken within a launch (mix_vs_best, mix_vs_vanilla),
#   the median over the launches.
# Prints nothing for a CSV without predictions.
NR == 1 {
	for (i = 1; i <= NF; i++)
		col[$i] = i
	next
}
{
	$0 = unquote($0)
	m = $col["model"]; v = unsep($col["variant"]); t = $col["time_ms"]
	md = ("median_ms" in col) ? $col["median_ms"] : ""
	mx = ("mix_ms" in col) ? $col["mix_ms"] : ""
	if ($col["spread"] + 0 > 0) wandered = 1
	if (!(m in seen)) { seen[m] = 1; models[++nm] = m }
	if (is_auto(v)) {
		if (!(v in isauto)) { isauto[v] = 1; seenauto[++nsa] = v }
		auto[v, m] = t; mauto[v, m] = md; xauto[v, m] = mx
		if ("mix_vs_best" in col && $col["mix_vs_best"] != "") {
			xrel[v, m] = $col["mix_vs_best"]; xrelv[v, m] = $col["mix_vs_vanilla"]
		}
		next
	}
	if (v == "vanilla" && $col["progress"] == "none") { van[m] = t; mvan[m] = md; xvan[m] = mx }
	if (v == "mpi+openblas (hand)") { hand[m] = t; mhand[m] = md; next }
	if (v == "mpi+openblas overlapped (hand)") { ohand[m] = t; mohand[m] = md; next }
	if ($col["progress"] != "none" || $col["pred_err"] == "")
		next
	e = $col["pred_err"] + 0
	err[++n] = e < 0 ? -e : e
	what[n] = m " " v
	if (md != "" && $col["pred_err_median"] != "") {
		e = $col["pred_err_median"] + 0
		merr[++nm2] = e < 0 ? -e : e
		mwhat[nm2] = what[n]
		if (!(m in mbest) || md + 0 < mbest[m] + 0) { mbest[m] = md; mbestv[m] = v }
	}
	if (mx != "" && $col["pred_err_mix"] != "") {
		e = $col["pred_err_mix"] + 0
		xerr[++nx] = e < 0 ? -e : e
		xwhat[nx] = what[n]
		if (!(m in xbest) || mx + 0 < xbest[m] + 0) { xbest[m] = mx; xbestv[m] = v }
	}
	if ($col["pred_compute_err"] != "") {
		c = $col["pred_compute_err"] + 0
		cerr[++nc] = c < 0 ? -c : c
		cwhat[nc] = what[n]
	}
	if (!(m in best) || t + 0 < best[m] + 0) { best[m] = t; bestv[m] = v }
}

END {
	if (!n)
		exit
	worst = worst_of(err, n)
	printf "prediction: |error| over %d schedule rows: median %.1f%%, worst %.1f%% (%s), " \
	       "within 15%%: %d", n, 100 * median(err, n), 100 * err[worst], what[worst],
	       within15(err, n)
	if (nc) {
		cw = worst_of(cerr, nc)
		printf "; compute alone: median %.1f%%, worst %.1f%% (%s)",
		       100 * median(cerr, nc), 100 * cerr[cw], cwhat[cw]
	}
	printf "\n"
	# auto's lines first, then each auto@P's in the order they came
	if ("auto" in isauto)
		autos[++na] = "auto"
	for (j = 1; j <= nsa; j++)
		if (seenauto[j] != "auto")
			autos[++na] = seenauto[j]
	for (j = 1; j <= na; j++)
		regrets(autos[j], "", auto, best, bestv, van, hand, ohand)
	if (nx) {
		worst = worst_of(xerr, nx)
		printf "against the schedules interleaved in one job (mix): |error| median %.1f%%, " \
		       "worst %.1f%% (%s), within 15%%: %d\n", 100 * median(xerr, nx),
		       100 * xerr[worst], xwhat[worst], within15(xerr, nx)
		for (j = 1; j <= na; j++)
			regrets(autos[j], " (mix)", xauto, xbest, xbestv, xvan, mhand, mohand)
		for (j = 1; j <= na; j++)
			for (k = 1; k <= nm; k++)
				if ((autos[j], models[k]) in xrel)
					printf "%s (mix, launch by launch): %s: regret %+.1f%%; against vanilla %+.1f%%\n",
					       autos[j], models[k], 100 * xrel[autos[j], models[k]],
					       100 * xrelv[autos[j], models[k]]
	}
	if (!wandered || !nm2)
		exit
	worst = worst_of(merr, nm2)
	printf "against the median of each row's rounds: |error| median %.1f%%, worst %.1f%% " \
	       "(%s), within 15%%: %d\n", 100 * median(merr, nm2), 100 * merr[worst],
	       mwhat[worst], within15(merr, nm2)
	for (j = 1; j <= na; j++)
		regrets(autos[j], " (medians)", mauto, mbest, mbestv, mvan, mhand, mohand)
}

# The index of the largest of e[1..k].
function worst_of(e, k,    i, w) {
	w = 1
	for (i = 2; i <= k; i++)
		if (e[i] > e[w]) w = i
	return w
}

# How many of e[1..k] are within 15%.
function within15(e, k,    i, c) {
	for (i = 1; i <= k; i++)
		c += e[i] <= 0.15
	return c + 0
}

# regrets(V, WHAT, AUTO, BEST, BESTV, VAN, HAND, OHAND): the line of each
# model of auto row V ("auto", "auto@0"), AUTO[V, model] its times; HAND
# and OHAND the hand-written MLP's, plain and overlapped
function regrets(v, what, a, b, bv, vn, hd, ohd,    k, m) {
	for (k = 1; k <= nm; k++) {
		m = models[k]
		if (!((v, m) in a) || a[v, m] == "" || !(m in b))
			continue
		printf "%s%s: %s %.1f ms, the fastest schedule %s %.1f ms: regret %+.1f%%", v, what,
		       m, a[v, m], bv[m], b[m], 100 * (a[v, m] / b[m] - 1)
		if (m in vn && vn[m] != "")
			printf "; vanilla %.1f ms (%+.1f%%)", vn[m], 100 * (a[v, m] / vn[m] - 1)
		if (m in hd && hd[m] != "")
			printf "; hand-written MPI + OpenBLAS %.1f ms", hd[m]
		if (m in ohd && ohd[m] != "")
			printf "; overlapped by hand %.1f ms", ohd[m]
		printf "\n"
	}
}
