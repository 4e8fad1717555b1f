"""plot.py: draws a benchmark's results CSV as two SVG charts with
gnuplot, next to the CSV: X.csv -> X-time.svg and X-overlap.svg.

Reads either CSV: `make bench`'s ($B/bench/results.csv, bench/report.awk;
one panel per model) or `make bench-gpu`'s (bench/results/<date>-<device>
.csv, bench/gpu/report.py; one panel per case and TP). In each panel the
schedules stand side by side, one bar per progress mode (CPU) or transfer
mode (GPU) the schedule was run with:
  X-time.svg     the time of each run (bars); the schedule's compute alone
                 (its build with the transfers removed; PyTorch's rows:
                 its local computation alone) as a black dash over the
                 schedule's bars; the unsplit compute alone that ECT is
                 measured from as a dashed line across the panel;
  X-overlap.svg  overlap efficiency 1 - ECT / ECT(vanilla) of each run
                 (DESIGN.md section 4); 1 is a fully hidden transfer, 0
                 vanilla's. The CPU table leaves it empty where vanilla
                 exposes under 5% of the compute; such a panel says so.
The GPU machines have no gnuplot: their CSV is drawn here (make plots).

usage: python3 bench/plot.py [--header FILE] CSV...
  --header FILE   bench.sh's header ($B/bench/header.txt): the machine,
                  ranks and sizes for the titles of a CPU CSV.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
from report import CASES, ORDER  # noqa: E402 (the GPU cases and schedules)

# The modes, in the order of their bars within a schedule, with colours
# (Paul Tol's bright scheme) and legend text.
MODES = [
    ("none", "#4477AA", "progress: none"),
    ("panel", "#66CCEE", "progress: panel"),
    ("thread", "#228833", "progress: thread"),
    ("mpi", "#CCBB44", "hand-written MPI"),
    ("nccl", "#4477AA", "transfers: nccl"),
    ("ce", "#EE6677", "transfers: ce (copy engines)"),
    ("symm_mem", "#AA3377", "transfers: symm_mem (Async-TP)"),
]
MODE_COLOR = {m: c for m, c, _ in MODES}
MODE_TEXT = {m: t for m, _, t in MODES}
MODE_RANK = {m: i for i, (m, _, _) in enumerate(MODES)}


def num(s):
    return float(s) if s not in ("", None) else None


class Panel:
    """One model (CPU) or case and TP (GPU): bars[(group, mode)] = (ms,
    overlap), alone[group] = the group's compute alone, base = the unsplit
    compute alone, note = why it has no overlap (or None)."""

    def __init__(self, title):
        self.title = title
        self.groups = []
        self.bars = {}
        self.alone = {}
        self.base = None
        self.note = None

    def bar(self, group, mode, ms, overlap):
        if group not in self.groups:
            self.groups.append(group)
        self.bars[(group, mode)] = (ms, overlap)

    def modes(self, group):
        return sorted((m for g, m in self.bars if g == group),
                      key=lambda m: MODE_RANK.get(m, len(MODES)))


def read_header(path):
    """bench.sh's header: (date, machine, ranks and rounds, {model: sizes})."""
    date = machine = runs = ""
    sizes = {}
    for line in open(path):
        line = line.lstrip("# ").rstrip()
        if line.startswith("CommFuse CPU benchmark, "):
            date = line.split(", ", 1)[1].split(" ")[0]
        elif line.startswith("machine: "):
            machine = line[len("machine: "):].split(", Linux")[0]
        elif re.match(r"\d+ ranks; ", line):
            runs = line
        elif line.startswith("mlp ") and "; attention " in line:
            for part in line.split("; "):
                name, _, defs = part.partition(" ")
                sizes[name] = defs.replace("-D ", "")
    return date, machine, runs, sizes


def cpu_panels(rows, header):
    date, machine, runs, sizes = read_header(header) if header else ("", "", "", {})
    ranks = next((r["ranks"] for r in rows if r["progress"] == "none"), "?")
    title = "CommFuse CPU benchmark%s: %s" % (
        ", " + date if date else "", machine or "%s ranks" % ranks)
    if runs:
        title += "\\n" + runs
    panels = {}
    for r in rows:
        m = r["model"]
        if m not in panels:
            s = sizes.get(m.split(" ")[0])
            panels[m] = Panel("%s, %s ranks%s" % (m, ranks, ", " + s if s else ""))
        p = panels[m]
        if r["variant"].startswith("compute alone"):
            p.base = num(r["compute_ms"])
        elif r["ect_ms"] != "":  # a schedule's run (not a GEMM, not transfers alone)
            p.bar(r["variant"], r["progress"], num(r["time_ms"]), num(r["overlap_eff"]))
            if r["compute_ms"] != "":
                p.alone[r["variant"]] = num(r["compute_ms"])
    for p in panels.values():
        if all(o is None for _, o in p.bars.values()):
            p.note = "overlap not computed:\\nvanilla exposes under 5% of the compute"
    return {"title": title, "base": "best unsplit compute alone",
            "ylabel": "time (ms, median per iteration)",
            "overlap": "overlap efficiency", "panels": list(panels.values())}


def gpu_panels(rows):
    r0 = rows[0]
    title = "CommFuse GPU benchmark, %s, %s, bf16" % (r0["device"], r0["date"])
    panels = {}
    for r in rows:
        key = (r["case"], r["tp"])
        if key not in panels:
            what = CASES.get(r["case"], r["case"])
            what = what.replace(" (", ",\\n(", 1)
            panels[key] = Panel("(%s) TP=%s: %s" % (r["case"], r["tp"], what))
        p = panels[key]
        ms, ov = num(r["ms"]), num(r["overlap"])
        if r["impl"] == "ours":
            if r["transfer"] == "none":
                p.alone[r["schedule"]] = ms
            else:
                p.bar(r["schedule"], r["transfer"], ms, ov)
            p.base = num(r["compute_ms"])
        else:
            g = {"torch": "PyTorch", "asynctp": "Async-TP"}.get(r["impl"], r["impl"])
            p.bar(g, r["transfer"], ms, ov)
            if r["compute_ms"] != "":
                p.alone[g] = num(r["compute_ms"])
    for p in panels.values():
        rank = lambda g: ORDER.index(g) if g in ORDER else len(ORDER)
        p.groups = sorted(p.groups, key=lambda g: (rank(g), p.groups.index(g)))
    return {"title": title, "base": "unsplit compute alone (ours)",
            "ylabel": "time (ms, median of the slowest rank)",
            "overlap": "overlap efficiency (PyTorch, Async-TP: against PyTorch's "
                       "matmul + NCCL collective)", "panels": list(panels.values())}


def q(s):
    """A gnuplot string constant (double quotes: \\n is a line break)."""
    return '"%s"' % s.replace('"', '\\"')


def layout(n):
    """Rows and columns for n panels and the legend's own panel."""
    cols = 4 if n + 1 > 6 else min(3, n + 1)
    return -(-(n + 1) // cols), cols


def bars(p, what):
    """Panel p's bars, side by side within a schedule: {mode: lines "x
    value width"}, the overlap labels ("x value text") and the compute-alone
    dashes ("x y dx dy", for gnuplot's vectors)."""
    width = 0.8 / max(len(p.modes(g)) for g in p.groups)
    blocks, labels, dashes = {}, [], []
    for x, g in enumerate(p.groups):
        ms = p.modes(g)
        for j, m in enumerate(ms):
            bx = x + (j - (len(ms) - 1) / 2) * width
            t, ov = p.bars[(g, m)]
            v = t if what == "time" else ov
            if v is None:
                continue
            blocks.setdefault(m, []).append("%.4f %.6g %.4f" % (bx, v, width))
            labels.append("%.4f %.6g %s" % (bx, v, q("%.3f" % v)))
        if g in p.alone:
            half = len(ms) * width / 2 + 0.05
            dashes.append("%.4f %.6g %.4f 0" % (x - half, p.alone[g], 2 * half))
    return blocks, labels, dashes


def panel_script(p, i, what):
    """The gnuplot commands of panel i: what is "time" or "overlap"."""
    blocks, labels, dashes = bars(p, what)
    tics = ", ".join("%s %d" % (q(g), x) for x, g in enumerate(p.groups))
    out = ["set title %s" % q(p.title),
           "set xtics (%s) rotate by 30 right" % tics,
           "set xrange [-0.6:%.1f]" % (len(p.groups) - 0.4)]
    vals = [float(v.split()[1]) for b in blocks.values() for v in b]
    plots = []
    for m in sorted(blocks, key=lambda m: MODE_RANK.get(m, len(MODES))):
        name = "$b%d_%s" % (i, re.sub(r"\W", "_", m))
        out.append("%s << EOD\n%s\nEOD" % (name, "\n".join(blocks[m])))
        plots.append("%s using 1:2:3 with boxes lc rgb %s notitle"
                     % (name, q(MODE_COLOR.get(m, "#BBBBBB"))))
    if what == "time":
        top = max(vals + list(p.alone.values()) + [p.base or 0]) or 1
        out.append("set yrange [0:%.6g]" % (top * 1.08))
        if dashes:
            out.append("$d%d << EOD\n%s\nEOD" % (i, "\n".join(dashes)))
            plots.append("$d%d using 1:2:3:4 with vectors nohead lw 3 lc rgb \"black\" notitle" % i)
        if p.base is not None:
            plots.append("%.6g with lines dt 2 lw 1.5 lc rgb \"black\" notitle" % p.base)
    else:
        lo, hi = min(vals + [0]), max(vals + [1]) + 0.2  # noise can pass 1
        out.append("set yrange [%.6g:%.6g]" % (lo - 0.1 * (hi - lo), hi))
        out.append("set xzeroaxis lt -1")
        plots.append("1 with lines dt 2 lw 1.5 lc rgb \"black\" notitle")
        if labels:
            out.append("$l%d << EOD\n%s\nEOD" % (i, "\n".join(labels)))
            for cond, up in ((">=", 0.6), ("<", -0.6)):
                plots.append("$l%d using 1:($2 %s 0 ? $2 : NaN):3 with labels boxed "
                             "offset 0,%g font \",8\" notitle" % (i, cond, up))
        else:  # a frame that says why
            out.append("set label 1 %s at graph 0.5, 0.5 center"
                       % q(p.note or "no overlap values"))
    out.append("plot " + ", \\\n     ".join(plots))
    out += ["unset label 1", "unset xzeroaxis"]
    return out


def key_script(panels, what, base_text):
    """The legend, in a panel of its own."""
    modes = sorted({m for p in panels for _, m in p.bars},
                   key=lambda m: MODE_RANK.get(m, len(MODES)))
    out = ["unset title", "unset border", "unset xtics", "unset ytics",
           "unset xlabel", "unset ylabel", "set xrange [0:1]", "set yrange [0:1]",
           "set key center center vertical Left reverse samplen 2 spacing 1.3 font \",11\""]
    plots = ["NaN with boxes lc rgb %s title %s"
             % (q(MODE_COLOR.get(m, "#BBBBBB")), q(MODE_TEXT.get(m, m))) for m in modes]
    if what == "time":
        plots.append("NaN with lines lw 3 lc rgb \"black\" title \"the schedule's compute alone\"")
        plots.append("NaN with lines dt 2 lw 1.5 lc rgb \"black\" title %s" % q(base_text))
    else:
        plots.append("NaN with lines dt 2 lw 1.5 lc rgb \"black\" title \"1: transfers fully hidden\"")
    out.append("plot " + ", ".join(plots))
    return out


def script(k, what, out_path):
    """The gnuplot script of chart what ("time" or "overlap") of kind k
    (cpu_panels' or gpu_panels' answer), writing out_path."""
    panels = k["panels"]
    rows, cols = layout(len(panels))
    s = ["set terminal svg size %d,%d font \"sans,10\" noenhanced background rgb \"white\""
         % (cols * 430, rows * 360 + 40),
         "set output %s" % q(out_path),
         "set encoding utf8",
         "set style fill solid 0.9 border lc rgb \"#333333\"",
         "set style textbox opaque noborder margins 0.5,0.5",
         "set grid ytics lc rgb \"#DDDDDD\"", "unset key", "set xlabel \"schedule\"",
         "set ylabel %s" % q(k["ylabel"] if what == "time"
                             else "overlap efficiency, 1 - ECT/ECT(vanilla)"),
         "set multiplot layout %d,%d title %s font \",13\""
         % (rows, cols, q(k["title"] + ("" if what == "time" else "\\n" + k["overlap"])))]
    for i, p in enumerate(panels):
        s += panel_script(p, i, what)
    s += key_script(panels, what, k["base"])
    s.append("unset multiplot")
    return "\n".join(s) + "\n"


def plot(path, header):
    rows = list(csv.DictReader(open(path, newline="")))
    if not rows:
        sys.exit("plot: %s has no rows" % path)
    if "device" in rows[0]:
        k = gpu_panels(rows)
    elif "model" in rows[0]:
        k = cpu_panels(rows, header)
    else:
        sys.exit("plot: %s is neither make bench's nor make bench-gpu's CSV" % path)
    k["panels"] = [p for p in k["panels"] if p.groups]
    stem = os.path.splitext(path)[0]
    made = []
    for what in ("time", "overlap"):
        out = "%s-%s.svg" % (stem, what)
        gp = script(k, what, out)
        r = subprocess.run(["gnuplot"], input=gp, text=True, capture_output=True)
        if r.returncode != 0 or r.stderr.strip():
            sys.exit("plot: gnuplot failed on %s:\n%s" % (out, r.stderr))
        made.append(out)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", help="bench.sh's header.txt, for a CPU CSV's titles")
    ap.add_argument("csv", nargs="+")
    args = ap.parse_args()
    if not shutil.which("gnuplot"):
        sys.exit("plot: no gnuplot here (sh scripts/install-deps.sh gnuplot-nox)")
    for path in args.csv:
        print("plots: " + " ".join(plot(path, args.header)))


if __name__ == "__main__":
    main()
