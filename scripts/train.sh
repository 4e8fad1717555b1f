#!/bin/sh
# train.sh B OUTDIR [STEPS]: examples/train/train.c, the training
# application, built against the block of examples/train/block.cf under
# vanilla, fuse(ring) and fuse(bidir) and run on 4 ranks for STEPS (300)
# SGD steps each. Prints one line: the first and last loss, the steps, and
# the largest relative difference between the schedules' per-step losses.
# Fails unless the loss falls tenfold and the schedules agree within 1e-5
# (f32).
set -u
B=$1 out=$2 steps=${3:-300}
rm -rf "$out"
mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe --timeout 300 -n 4"
for s in vanilla "fuse(ring)" "fuse(bidir)"; do
	t=$(echo "$s" | tr -d ' ' | tr '(),=' '___-' | sed 's/_*$//')
	d=$out/$t
	mkdir -p "$d"
	if ! "$B/cfc" examples/train/block.cf --backward --schedule="$s" --emit=h,c -o "$d" ||
	   ! mpicc -std=c11 -O2 -Wall -Wextra -Werror ${SANFLAGS:-} -Iruntime -I"$d" -o "$d/train" \
	     examples/train/train.c "$d/block.c" "$B/libcfrt.a" $(pkg-config --libs openblas) \
	     -lm -pthread; then
		echo "train: building the block under $s failed" >&2
		exit 1
	fi
	if ! $MPIRUN "$d/train" "$steps" 2 "$out/loss.$t" >"$d.out" 2>&1; then
		echo "train: the run under $s failed:" >&2
		cat "$d.out" >&2
		exit 1
	fi
done
paste "$out/loss.vanilla" "$out/loss.fuse_ring" "$out/loss.fuse_bidir" | awk -v n="$steps" '
	NR == 1 { first = $2 }
	{ last = $2; for (k = 4; k <= 6; k += 2) { d = $k - $2; if (d < 0) d = -d
	  if (d / $2 > m) m = d / $2 } }
	END {
		ok = NR == n && last < first / 10 && m <= 1e-5
		printf "train: transformer block (attention + MLP, TPSP, 4 ranks, f32): %d SGD steps, " \
		       "loss %.6f -> %.6f; vanilla, fuse(ring), fuse(bidir) %s (max rel diff %.1e)\n",
		       NR, first, last, m <= 1e-5 ? "agree" : "DISAGREE", m
		exit !ok
	}'
