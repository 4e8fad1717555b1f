"""nsys_gaps.py CSV: the GPU's busy and idle time in each pass of a layer
run, from `nsys stats -r cuda_gpu_trace -f csv` (every kernel and copy
with its start and duration, ns). A pass is a run of GPU work with no
idle stretch over 1 ms (the driver synchronizes between passes); within
it, idle is the time no kernel or copy runs. Prints, per pass: its span,
busy and idle time, the count of operations and the ten longest idle
stretches with the operations on either side."""
import csv
import sys


def main(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            try:
                start = float(r.get("Start (ns)") or r["Start"])
                dur = float(r.get("Duration (ns)") or r["Duration"])
            except (KeyError, ValueError):
                continue
            rows.append((start, dur, r.get("Name", "?")))
    rows.sort()
    passes, cur = [], []
    for e in rows:
        if cur and e[0] - (cur[-1][0] + cur[-1][1]) > 1e6:
            passes.append(cur)
            cur = []
        cur.append(e)
    if cur:
        passes.append(cur)
    for i, p in enumerate(passes):
        end, busy, gaps = p[0][0], 0.0, []
        for a, b in zip(p, p[1:]):
            gaps.append((b[0] - max(end, a[0] + a[1]), a[2], b[2]))
            end = max(end, a[0] + a[1])
        end = max(end, p[-1][0] + p[-1][1])
        span = end - p[0][0]
        busy = sum(d for _, d, _ in p)
        idle = sum(g for g, _, _ in gaps if g > 0)
        print("pass %d: %d ops, span %.3f ms, busy %.3f ms, idle %.3f ms" %
              (i, len(p), span / 1e6, busy / 1e6, idle / 1e6))
        for g, a, b in sorted(gaps, reverse=True)[:10]:
            if g > 0:
                print("   idle %.1f us: %s -> %s" % (g / 1e3, a[:60], b[:60]))


if __name__ == "__main__":
    main(sys.argv[1])
