# stats.awk: the median that report.awk and summary.awk share (given to
# awk with -f before either).

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
