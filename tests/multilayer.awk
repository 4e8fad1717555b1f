# multilayer.awk: reads cfc --backward --emit=sched of
# examples/llama_tpdp.cf (L blocks) and prints one line per block l >= 1:
# "ok block l" when every dp all_reduce of block l's weight matrices
# (d_blockl.attnl.w*, d_blockl.mlpl.w*) is tail-free, hosts compute, and
# runs before the last collective of block l - 1's backward, and one of
# them hosts compute of block l - 1 (its backward or its recomputed
# forward); else "bad block l: " and why.
/^backward schedule / { bwd = 1 }
bwd && /^\[[0-9]+\] backward collective / { name = $4; grp = "" }
bwd && /^    schedule .* ranks of / {
	for (i = 1; i <= NF; i++) if ($i == "of") { grp = $(i + 1); sub(/,$/, "", grp) }
}
bwd && /^verify: ok / {
	n++
	nm[n] = name; gr[n] = grp; tf[n] = 0; ho[n] = ""
	for (i = 1; i <= NF; i++) {
		if ($i == "tail-free=yes") tf[n] = 1
		if ($i ~ /^hosted=/) { ho[n] = $i; sub(/^hosted=/, "", ho[n]) }
	}
	if (match(name, /^d_block[0-9]+\./)) {
		b = substr(name, 8, RLENGTH - 8)
		last[b] = n
		if (b + 1 > nb) nb = b + 1
	}
}
END {
	for (l = 1; l < nb; l++) {
		why = ""; cnt = 0; below = 0
		for (k = 1; k <= n; k++) {
			if (gr[k] != "dp" || nm[k] !~ ("^d_block" l "\\.(attn|mlp)" l "\\.w"))
				continue
			cnt++
			if (!tf[k]) why = why " " nm[k] " not tail-free;"
			if (ho[k] == "") why = why " " nm[k] " hosts nothing;"
			if (k > last[l - 1]) why = why " " nm[k] " after block " l - 1 "'s backward;"
			m = split(ho[k], h, ",")
			for (j = 1; j <= m; j++)
				if (h[j] ~ ("^(d_)?block" (l - 1) "\\.")) below = 1
		}
		if (cnt != 7) why = why " " cnt " dp weight all_reduces, not 7;"
		if (!below) why = why " none hosts compute of block " l - 1 ";"
		print (why == "" ? "ok block " l : "bad block " l ":" why)
	}
}
