#!/bin/sh
# attn_probe.sh: our attention (bench/gpu/attn_probe.c: cuDNN and our
# fused kernels) and PyTorch's SDPA (bench/gpu/attn_sdpa.py: its cuDNN and
# flash backends) on one GPU, in one run, side by side: a markdown table
# of the medians in ms on stdout, one row per shape and direction, one
# column per implementation, and ours through cuDNN against SDPA's cuDNN
# (speed ratio: > 1 is faster). The raw lines go to $OUT/attn_probe.txt
# when OUT is set.
#   B=gbuild sh bench/gpu/attn_probe.sh   (after make B=gbuild
#   gbuild/bench/gpu/attn_probe; needs python3 with torch)
: "${B:=build}"
raw=$(mktemp)
mpirun --allow-run-as-root -n 1 "$B/bench/gpu/attn_probe" >"$raw" 2>&1
python3 bench/gpu/attn_sdpa.py >>"$raw" 2>&1
[ -n "${OUT:-}" ] && cp "$raw" "$OUT/attn_probe.txt"
grep '^attn_probe: torch' "$raw" | sed 's/^attn_probe: /PyTorch: /'
awk '
/^attn_probe: impl=/ {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	ms = $0; sub(/.* ms=/, "", ms)
	key = f["shape"] " " f["dir"]
	if (!(key in seen)) { seen[key] = 1; rows[++nr] = key }
	if (!(f["impl"] in cols)) { cols[f["impl"]] = 1; col[++nc] = f["impl"] }
	t[key, f["impl"]] = ms
}
END {
	printf "| shape | dir |"
	for (c = 1; c <= nc; c++) printf " %s |", col[c]
	printf " ours-cudnn vs sdpa-cudnn |\n|---|---|"
	for (c = 1; c <= nc; c++) printf "---|"
	printf "---|\n"
	for (r = 1; r <= nr; r++) {
		split(rows[r], sd, " ")
		printf "| %s | %s |", sd[1], sd[2]
		for (c = 1; c <= nc; c++) {
			v = t[rows[r], col[c]]
			printf " %s |", v == "" ? "-" : v
		}
		a = t[rows[r], "ours-cudnn"]; b = t[rows[r], "sdpa-cudnn"]
		if (a + 0 > 0 && b + 0 > 0) printf " %.2fx |\n", b / a
		else printf " - |\n"
	}
}' "$raw"
grep -v '^attn_probe: ' "$raw" | head -n 20
rm -f "$raw"
