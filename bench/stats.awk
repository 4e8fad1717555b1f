# stats.awk: what report.awk, summary.awk and paired.awk share (given to
# awk with -f before each): the median, a schedule's name in a CSV field,
# and which schedules are auto's.

# a[1..k] sorted ascending (insertion sort: a few dozen rows)
function sort(a, k,    i, j, x) {
	for (i = 2; i <= k; i++) {
		x = a[i]
		for (j = i - 1; j >= 1 && a[j] > x; j--)
			a[j + 1] = a[j]
		a[j + 1] = x
	}
}

# The median of a[1..k] (a left as it is).
function median(a, k,    b, i) {
	for (i = 1; i <= k; i++)
		b[i] = a[i] + 0
	sort(b, k)
	return k % 2 ? b[(k + 1) / 2] : (b[k / 2] + b[k / 2 + 1]) / 2
}

# v as one CSV field: quoted where it holds a comma (fuse(ring,m=2))
function csvq(v) {
	return index(v, ",") ? "\"" v "\"" : v
}

# The record with its quoted fields' commas as "\034" and their quotes
# dropped, so that -F, splits it into its fields (no field here holds a
# quote); unsep turns a field's "\034" back into commas.
function unquote(s,    out, i, c, q) {
	if (!index(s, "\""))
		return s
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "\"")
			q = !q
		else
			out = out (q && c == "," ? "\034" : c)
	}
	return out
}
function unsep(v) {
	gsub("\034", ",", v)
	return v
}

# Is schedule v auto's, at the default margin or at P (auto@P: bench.sh's
# AUTO_MARGINS)?
function is_auto(v) {
	return v == "auto" || v ~ /^auto@/
}
