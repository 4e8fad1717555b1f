#!/bin/sh
# The whole-pass order (compiler/order.c, issue 51).
#  exposure: per example, the transfers waited with no compute since their
#            post (the verifier's exposed=, summed over the collectives)
#            and the collectives that are not tail-free, forward and
#            backward, at the examples' own sizes, under the whole-pass
#            order and under --order=region (today's region-by-region
#            order), diffed against tests/golden/order/exposed.txt
#            (UPDATE=1 rewrites it).
. tests/lib.sh
out=$B/tests/order
mkdir -p "$out"
EXAMPLES="attention llama mamba mlp tpdp transformer ulysses zero_dp"

# counts EXAMPLE [FLAGS]: "forward E T backward E T" of --emit=sched
counts() {
	_ex=$1
	shift
	"$CFC" "examples/$_ex.cf" --backward --emit=sched -o - "$@" 2>&1 | awk '
		/^backward schedule / { bwd = 1 }
		/^verify: ok/ {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^exposed=/) { split($i, a, "="); e[bwd] += a[2] }
				if ($i == "tail-free=no") t[bwd]++
			}
		}
		END { printf "forward exposed=%d tail-free=no:%d  backward exposed=%d tail-free=no:%d\n",
		      e[0], t[0], e[1], t[1] }'
}

: >"$out/exposed.txt"
for order in region pass; do
	for ex in $EXAMPLES; do
		if [ $order = pass ]; then
			printf '%-12s %-6s %s\n' "$ex" $order "$(counts $ex)"
		else
			printf '%-12s %-6s %s\n' "$ex" $order "$(counts $ex ${ORDER_FLAG-"--order=region"})"
		fi
	done
done >>"$out/exposed.txt"
golden order-exposed "$out/exposed.txt" tests/golden/order/exposed.txt
