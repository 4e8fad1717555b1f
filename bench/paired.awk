# paired.awk: auto against each other schedule of a `make bench` mix,
# pass by pass:
#   awk -F'|' -f bench/stats.awk -f bench/paired.awk passes.txt
# passes.txt has a line per entry of a mix launch (bench.sh's mix()):
#   "model|launch|schedule|ms1,ms2,..."
# the entry's timed passes in round order (bench/mix.c --passes: the
# backward's span for a backward model). In round i every entry ran one
# pass, so auto's pass i and another schedule's pass i met the machine
# within one round of each other. Per model, for each schedule s, the
# median over every launch's rounds of auto's pass over s's, less 1, and
# in how many rounds auto was the slower. Printed: against vanilla, and
# against the schedule with the largest such median (the one auto trails
# most, or, where that median is negative, the one it leads least):
#   auto (mix, pass by pass): MODEL: against vanilla +X% (slower in K of
#   N); the least favourable, S, +Y% (slower in K of N)
# (", the least favourable" after vanilla's where S is vanilla).
# Each auto@P entry (bench.sh's AUTO_MARGINS) gets its lines the same
# way, after auto's; the auto entries are not paired with each other.
# Where the launches' medians (summary.awk's "launch by launch") rest on
# two or three launches, this rests on every round of them; a VM whose
# speed moves within a launch moves both passes of a pair alike. A model
# without an auto entry, or a schedule without as many launches, is left
# out; rounds past the shorter entry's passes are not paired.
{
	m = $1
	if (!(m in seen)) { seen[m] = 1; models[++nm] = m }
	if (!((m, $3) in known)) { known[m, $3] = 1; sched[m, ++ns[m]] = $3 }
	nl[m, $3]++
	np[m, $3, $2] = split($4, p, ",")
	for (i = 1; i <= np[m, $3, $2]; i++)
		ms[m, $3, $2, i] = p[i]
	if (!((m, $2) in haslaunch)) { haslaunch[m, $2] = 1; launch[m, ++nlaunch[m]] = $2 }
}

END {
	for (k = 1; k <= nm; k++) {
		m = models[k]
		if ((m, "auto") in known)
			against(m, "auto")
		for (j = 1; j <= ns[m]; j++)
			if (sched[m, j] != "auto" && is_auto(sched[m, j]))
				against(m, sched[m, j])
	}
}

# against(M, A): the line of auto entry A of model M
function against(m, a,    j, s, worst) {
	worst = ""
	for (j = 1; j <= ns[m]; j++) {
		s = sched[m, j]
		if (is_auto(s) || nl[m, s] != nl[m, a] || !pair(m, a, s))
			continue
		if (worst == "" || rel[s] > rel[worst])
			worst = s
	}
	if (worst == "")
		return
	printf "%s (mix, pass by pass): %s:", a, m
	if ("vanilla" in rel)
		printf " against vanilla %+.1f%% (slower in %d of %d)%s", 100 * rel["vanilla"],
		       slower["vanilla"], npairs["vanilla"],
		       worst == "vanilla" ? ", the least favourable\n" : ";"
	if (worst != "vanilla")
		printf " the least favourable, %s, %+.1f%% (slower in %d of %d)\n", worst,
		       100 * rel[worst], slower[worst], npairs[worst]
	split("", rel)
}

# pair(M, A, S): rel[S], slower[S] and npairs[S] of auto entry A against
# schedule S of model M; 0 where no round pairs them.
function pair(m, a, s,    l, L, i, n, r, x) {
	n = 0
	for (l = 1; l <= nlaunch[m]; l++) {
		L = launch[m, l]
		for (i = 1; i <= np[m, a, L] && i <= np[m, s, L]; i++) {
			if (ms[m, s, L, i] + 0 <= 0)
				continue
			r[++n] = ms[m, a, L, i] / ms[m, s, L, i]
			x += r[n] > 1
		}
	}
	if (!n)
		return 0
	rel[s] = median(r, n) - 1
	slower[s] = x + 0
	npairs[s] = n
	return 1
}
