# report.awk: the rounds and derived metrics of `make bench`.
#   awk -F'|' -v ranks=N -f bench/stats.awk -f bench/report.awk runs.txt > results.csv
# runs.txt has one line per run, "model,variant,progress,kind|span_ms|
# time_ms|max_rel_err|other", kind being comm, nocomm (the same build with its
# transfers removed), mix (the same build in one job with the model's other
# schedules, bench/mix.c), xfer (transfers alone: time only) or gemm (one rank,
# time of a GEMM in pieces). Each run's times are already medians over
# iterations; of a key's runs (rounds) the smallest is kept, as other jobs
# on the machine only ever add time, and spread = largest / smallest - 1
# of the time says how much they did; other_cpu is the share of the
# machine's CPU that other processes used during the kept run. Per model, the best unsplit
# compute alone is the smaller of vanilla's and the hand-written MLP's
# nocomm time; ECT, overlap and decomposition loss follow DESIGN.md 4,
# overlap only where vanilla's ECT is at least 5% of that compute (below,
# the ratio is one of noise).
# Writes, per model in order of appearance, the baseline row, then one row
# per model,variant,progress in order of appearance (a variant with a
# comma quoted):
#   model,variant,progress,ranks,time_ms,rank_ms,compute_ms,ect_ms,
#   overlap_eff,decomp_loss,spread,other_cpu,max_rel_err,predicted_ms,
#   pred_err,pred_compute_ms,pred_compute_err (cfc --profile's prediction,
#   from -v pred=FILE, and predicted / time - 1; the same of the compute
#   alone, against the row linked without transfers),median_ms,
#   pred_err_median (the median of the rounds, and the prediction against
#   it: cfrt-calibrate keeps the median of its passes, so on a machine
#   whose speed wanders from run to run its prediction is one of a
#   typical run, not of the fastest; bench-gpu's table gives medians),
#   mix_ms,pred_err_mix (kind mix: the schedule's median over its passes
#   in one job with every other schedule of its model, passes interleaved
#   (bench/mix.c); the median over the rounds, and the prediction against
#   it), mix_vs_best,mix_vs_vanilla (the row's mix time over, in the same
#   launch, the fastest schedule's but auto's and auto@P's, and
#   vanilla's: the median over the launches, less 1; a launch's state of
#   the machine moves every schedule in it, the launch-to-launch change
#   is left out)
BEGIN {
	# cfc's predictions: "model,variant,progress|ms|compute ms" lines
	while (pred != "" && (getline l < pred) > 0) {
		split(l, pk, "|")
		predicted[pk[1]] = pk[2]
		predicted_c[pk[1]] = pk[3]
	}
}

{
	# the variant is what lies between the model and the last two: a
	# schedule's name may hold commas (fuse(ring,m=2))
	nk = split($1, k, ",")
	v = k[2]
	for (i = 3; i <= nk - 2; i++)
		v = v "," k[i]
	kind = k[nk]
	row = k[1] "," v "," k[nk - 1]
	if (!(k[1] in seen)) { seen[k[1]] = 1; models[++nm] = k[1] }
	if (!((row, "order") in got)) {
		got[row, "order"] = 1
		rows[k[1], ++nr[k[1]]] = row
		csvrow[row] = k[1] "," csvq(v) "," k[nk - 1]
		variant[row] = v
	}
	n = ++cnt[row, kind]
	span[row, kind, n] = $2
	rank[row, kind, n] = $3
	other[row, kind, n] = $5
	# the largest error of the row's checked runs
	if ($4 != "-" && (!(row in err) || $4 + 0 > err[row] + 0))
		err[row] = $4
}

# The smallest (largest when big) of a[key, 1..n]; its index in picked.
function pick(a, key, n, big,   i, v) {
	v = a[key, 1] + 0
	picked = 1
	for (i = 2; i <= n; i++)
		if (big ? a[key, i] + 0 > v : a[key, i] + 0 < v) {
			v = a[key, i] + 0
			picked = i
		}
	return v
}
function val(a, row, kind) {
	return (row, kind) in cnt ? pick(a, row SUBSEP kind, cnt[row, kind], 0) : ""
}
function spread(row, kind,   k) {
	k = row SUBSEP kind
	return f(pick(span, k, cnt[row, kind], 1) / pick(span, k, cnt[row, kind], 0) - 1, 3)
}
# The median of a[key, 1..n] (stats.awk's median).
function med(a, key, n,   b, i) {
	for (i = 1; i <= n; i++)
		b[i] = a[key, i]
	return median(b, n)
}
function f(x, d) { return x == "" ? "" : sprintf("%." d "f", x) }

END {
	print "model,variant,progress,ranks,time_ms,rank_ms,compute_ms,ect_ms," \
	      "overlap_eff,decomp_loss,spread,other_cpu,max_rel_err,predicted_ms,pred_err," \
	      "pred_compute_ms,pred_compute_err,median_ms,pred_err_median,mix_ms,pred_err_mix," \
	      "mix_vs_best,mix_vs_vanilla"
	for (i = 1; i <= nm; i++) {
		m = models[i]
		best = ""
		for (j = 1; j <= nr[m]; j++) {
			c = val(span, rows[m, j], "nocomm")
			if (c != "" && rows[m, j] ~ /,(vanilla,none|.*hand.*)$/ &&
			    (best == "" || c < best))
				best = c
		}
		ev = best == "" ? "" : val(span, m ",vanilla,none", "comm") - best
		# no compute alone measured (bench.sh SHORT=1): no baseline row
		if (best != "")
			printf "%s,compute alone (best unsplit),-,%s,%.1f,,%.1f,0.0,,0.000,,,,,,,,,,,,,\n",
			       m, ranks, best, best
		for (j = 1; j <= nr[m]; j++)
			print line(m, rows[m, j], best, ev)
	}
}

function line(m, row, best, ev,   t, rk, c, ect, ov, dl, g1, nrk, sp, oc, pm, pc, md, mx) {
	ect = ov = dl = c = sp = oc = md = mx = ""
	nrk = ranks
	if ((row, "xfer") in cnt) {
		t = val(span, row, "xfer")
		oc = other[row, "xfer", picked]
		rk = val(rank, row, "xfer")
		sp = spread(row, "xfer")
	} else if ((row, "gemm") in cnt) {
		t = val(span, row, "gemm")
		rk = ""
		nrk = 1
		g1 = row
		sub(/ in [0-9]+,-$/, " in 1,-", g1)
		dl = f(t / val(span, g1, "gemm") - 1, 3)
	} else {
		t = val(span, row, "comm")
		oc = other[row, "comm", picked]
		rk = val(rank, row, "comm")
		sp = spread(row, "comm")
		md = med(span, row SUBSEP "comm", cnt[row, "comm"])
		if ((row, "mix") in cnt)
			mx = med(span, row SUBSEP "mix", cnt[row, "mix"])
		c = val(span, row, "nocomm")
		if (best != "") {
			ect = t - best
			ov = ev >= 0.05 * best ? f(1 - ect / ev, 3) : ""
			dl = c == "" ? "" : f(c / best - 1, 3)
			ect = f(ect, 1)
		}
	}
	pm = (row in predicted) && predicted[row] != "-" ? predicted[row] : ""
	pc = (row in predicted_c) && predicted_c[row] != "-" ? predicted_c[row] : ""
	return csvrow[row] "," nrk "," f(t, 1) "," f(rk, 1) "," f(c, 1) "," ect "," \
	       ov "," dl "," sp "," oc "," err[row] "," f(pm, 1) "," \
	       (pm != "" && t > 0 ? f(pm / t - 1, 3) : "") "," f(pc, 1) "," \
	       (pc != "" && c > 0 ? f(pc / c - 1, 3) : "") "," f(md, 1) "," \
	       (pm != "" && md > 0 ? f(pm / md - 1, 3) : "") "," f(mx, 1) "," \
	       (pm != "" && mx > 0 ? f(pm / mx - 1, 3) : "") "," mix_rel(m, row, "") "," \
	       mix_rel(m, row, m ",vanilla,none")
}

# The median over the mix launches of row's time over, in the same
# launch, that of row "to" or (to "") of model m's fastest row but auto's
# and auto@P's, less 1; "" unless every row of m has as many mix launches.
function mix_rel(m, row, to,   n, i, j, r, b, x, q) {
	if (!((row, "mix") in cnt) || (to != "" && !((to, "mix") in cnt)))
		return ""
	n = cnt[row, "mix"]
	for (j = 1; j <= nr[m]; j++) {
		r = rows[m, j]
		if ((r, "mix") in cnt && cnt[r, "mix"] != n)
			return ""
	}
	for (i = 1; i <= n; i++) {
		b = to == "" ? "" : span[to, "mix", i]
		for (j = 1; to == "" && j <= nr[m]; j++) {
			r = rows[m, j]
			if ((r, "mix") in cnt && !is_auto(variant[r]) && (b == "" || span[r, "mix", i] + 0 < b + 0))
				b = span[r, "mix", i]
		}
		x[i] = b > 0 ? span[row, "mix", i] / b : 0
	}
	q = median(x, n)
	return q > 0 ? f(q - 1, 3) : ""
}
