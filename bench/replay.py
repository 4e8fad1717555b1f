#!/usr/bin/env python3
"""replay.py: a saved benchmark's rows predicted again by this cfc.

A cost-model change is judged on runs already made: every row of a
results CSV (make bench-gpu's report.py or make bench's report.awk) is
predicted again with build/cfc on the profiles that run was calibrated
on, and set against the time it measured. Nothing runs but cfc.

  bench/replay.py gpu CSV NCCL.prof CE.prof [--runs RUNS.txt] [--probe-overlap]
  bench/replay.py cpu CSV PROFILE [--sizes-from HEADER.txt] [--mix] [--probe-overlap]

gpu: the rows of bench-gpu's four cases (bf16) at the CSV's TP; a row
moving data on the profile of its transfer mode, a "none" row's compute
alone on the NCCL one (as bench.sh predicts). cpu: make bench's schedule
rows (mlp, attention, their backward; progress none) on the profile,
against each row's median of rounds where the CSV has it; with --mix,
against its mix time (every schedule in one job, passes interleaved),
and each kind against vanilla launch by launch (mix_vs_vanilla).
--probe-overlap reads each profile's overlaps as cfrt-calibrate computes
them now (since 2026-11-29: the ring's moved transfer time over its
GEMM's, or 1 where it had landed; on CPUs a library collective's time
alone less what it added to the GEMM alone, over that GEMM's), from the
probe lines the profile keeps as comments.

Prints each row (measured, predicted, error), then the median and worst
|error| of the rows that move data and of the compute alone, each kind's
error against vanilla's in the same pass (what can mislead auto), and what
auto takes now per case and mode: its predicted time, and its regret
against the fastest measured row where a row measured what it takes
(one kind for every collective, or the same schedules the run's auto
took, from RUNS' "auto ... takes" lines).
"""
import argparse
import atexit
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

CFC = os.environ.get("CFC", "build/cfc")
# bench-gpu's cases as its spec() gives them ("a) echo "SPEC" ;;")
GPU_SPEC = dict(re.findall(r'^\t(\w)\) echo "([^"]*)" ;;$',
                           open(os.path.join(os.path.dirname(__file__), "gpu", "bench.sh")).read(),
                           re.M))
# make bench's default sizes ("${MLP_SIZES:=...}")
CPU_SIZES = {"mlp" if k == "MLP" else "attention": v for k, v in re.findall(
    r'"\$\{(MLP|ATT)_SIZES:=([^}]*)\}"', open(os.path.join(os.path.dirname(__file__), "bench.sh")).read())}


def cfc(args):
    """cfc --explain's predicted pass, compute alone and auto's picks."""
    p = subprocess.run([CFC] + args + ["--explain"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("replay: cfc %s: %s" % (" ".join(args), p.stderr.strip()))
    which = "backward pass" if "--backward" in args else "pass"
    m = re.search(r"^%s: predicted ([0-9.]+) ms \(compute alone ([0-9.]+) ms\)" % which,
                  p.stdout, re.M)
    if not m:
        sys.exit("replay: cfc %s: no prediction in\n%s" % (" ".join(args), p.stdout))
    picks = re.findall(r"auto: ([^ ]+), predicted", p.stdout)
    return float(m.group(1)), float(m.group(2)), picks


PROBE = re.compile(r"# (.*) of \S+ bytes a rank: (\S+) s alone; the GEMM (\S+) s under it, "
                   r"waited (\S+) s after it(?:, (\S+) s more than the GEMM alone)?$")
ALONE = re.compile(r"# a \S+ GEMM (\S+) s alone$")


def probe_overlap(path):
    """A copy of profile path whose overlap, overlap_coll and defer lines are its
    probes' (the comment before each) as runtime/tools/calibrate.c's
    probe_overlap (the ring's, and on GPUs every one) and
    probe_overlap_coll (the library collectives' on CPUs) compute them;
    path itself when it has none. A
    collective's extra time, which files before 2026-11-29 do not write,
    is its GEMM under it and wait less the GEMM alone, of the medians."""
    lines, want, n, gemm, gpu = open(path).read().split("\n"), None, 0, 0.0, False
    for i, l in enumerate(lines):
        m, g0 = PROBE.match(l), ALONE.match(l)
        if l.startswith("backend "):
            gpu = l.split()[1].startswith("cuda")
        elif g0:
            gemm = float(g0.group(1))
        elif m:
            a, g, w = map(float, m.group(2, 3, 4))
            if gpu or m.group(1) in ("a ring of transfers", "the ring both ways"):
                want = 1.0 if a <= 0 or w < 0.05 * a else (
                    min(1.0, max(0.0, (a - w) / g)) if g > 0 else 0.0)
            else:
                x = float(m.group(5)) if m.group(5) else g + w - gemm
                want = 1.0 if a <= 0 else (
                    min(1.0, max(0.0, (a - max(x, 0.0)) / gemm)) if gemm > 0 else 0.0)
        elif want is not None and l.startswith("overlap"):
            lines[i] = "%s %.4g" % (l.rsplit(" ", 1)[0], want)
            want, n = None, n + 1
        elif want is not None and l.startswith("defer "):
            # defer OV SD: OV as the ring's rule computes it
            lines[i] = "defer %.4g %s" % (want, l.split()[2])
            want, n = None, n + 1
    if not n:
        return path
    f = tempfile.NamedTemporaryFile("w", suffix=".prof", delete=False)
    f.write("\n".join(lines))
    f.close()
    atexit.register(os.unlink, f.name)
    return f.name


def summary(rows, key):
    e = [abs(r[key]) for r in rows if r.get(key) is not None]
    if not e:
        return "none"
    w = max(rows, key=lambda r: abs(r[key]) if r.get(key) is not None else -1)
    return "median %.1f%%, worst %+.1f%% (%s), %d of %d within 15%%" % (
        100 * statistics.median(e), 100 * w[key], w["name"], sum(x <= 0.15 for x in e), len(e))


def against_vanilla(rows):
    """Each kind's time over its price, over vanilla's in the same pass.

    auto compares the kinds of one collective, so an error shared by
    every row of a pass leaves its pick alone; one kind priced low
    against vanilla misleads it. Per kind: the median over the rows with
    a vanilla row in their group of (ms / pred) / (vanilla ms / vanilla
    pred) - 1, and how many came out above 0 (slower than priced, as
    against vanilla)."""
    van = {r["group"]: r for r in rows if r["kind"] == "vanilla"}
    by = {}
    for r in rows:
        v = van.get(r["group"])
        if r["kind"] != "vanilla" and v:
            # measured against vanilla: in the same launches where known
            vs = r.get("vs_van") or r["ms"] / v["ms"]
            by.setdefault(r["kind"], []).append(vs / (r["pred"] / v["pred"]) - 1)
    return ["against vanilla: %s median %+.1f%% over %d, %d above 0" % (
        k, 100 * statistics.median(e), len(e), sum(x > 0 for x in e)) for k, e in by.items()]


def auto_line(name, picks, pred, measured, taken_before, auto_ms):
    """auto's pick now, and its regret where a row measured it."""
    kinds = sorted(set(picks))
    ms = None
    if taken_before is not None and picks == taken_before:
        ms = auto_ms
    elif len(kinds) == 1 and kinds[0] in measured:
        ms = measured[kinds[0]]
    best = min(measured, key=measured.get)
    s = "auto %s: %s, predicted %.3f" % (name, ", ".join(picks), pred)
    if ms is None:
        return s + "; not measured"
    return s + "; measured %.3f, the fastest row %s %.3f: regret %+.1f%%" % (
        ms, best, measured[best], 100 * (ms / measured[best] - 1))


def gpu(a):
    rows = list(csv.DictReader(open(a.csv, newline="")))
    taken = {}
    if a.runs:
        for l in open(a.runs):
            m = re.match(r"auto case=(\w) tp=(\d+) transfer=(\w+) takes (.*)", l)
            if m:
                taken[(m.group(1), m.group(3))] = m.group(4).split()
    prof = {"nccl": a.nccl, "ce": a.ce}
    out, autos = [], {}
    for r in rows:
        if r["impl"] != "ours" or not r["ms"]:
            continue
        c, s, mode, tp = r["case"], r["schedule"], r["transfer"], r["tp"]
        if s.startswith("auto@"):
            continue  # auto at another margin: CFC's own auto replays the rule
        if mode != "none" and not prof.get(mode):
            continue
        args = GPU_SPEC[c].split() + ["-D", "tp=" + tp, "--type=bf16",
                                      "--schedule=" + s, "--profile=" + prof[mode if mode != "none" else "nccl"]]
        t, alone, picks = cfc(args)
        ms = float(r["ms"])
        if s == "auto":
            autos[(c, mode)] = (picks, t, ms)
            continue
        p = alone if mode == "none" else t
        out.append({"name": "%s %s %s" % (c, s, mode), "ms": ms, "pred": p,
                    "err": p / ms - 1, "moving": mode != "none", "kind": s, "group": (c, mode)})
    for o in out:
        print("%-34s %9.3f %9.3f %+6.1f%%" % (o["name"], o["ms"], o["pred"], 100 * o["err"]))
    print("moving data: " + summary([o for o in out if o["moving"]], "err"))
    print("compute alone: " + summary([o for o in out if not o["moving"]], "err"))
    for l in against_vanilla([o for o in out if o["moving"]]):
        print(l)
    for (c, mode), (picks, t, ms) in sorted(autos.items()):
        measured = {o["kind"]: o["ms"] for o in out if o["group"] == (c, mode)}
        print(auto_line("%s %s" % (c, mode), picks, t, measured, taken.get((c, mode)), ms))


def cpu(a):
    rows = list(csv.DictReader(open(a.csv, newline="")))
    sizes = dict(CPU_SIZES)
    if a.sizes_from:
        for l in open(a.sizes_from):
            m = re.match(r"# mlp (.*); attention (.*)", l.strip())
            if m:
                sizes = {"mlp": m.group(1), "attention": m.group(2)}
    out, autos = [], {}
    col = "mix_ms" if a.mix else "time_ms"
    if a.mix and not any(r.get("mix_ms") for r in rows):
        sys.exit("replay: %s has no mix rows" % a.csv)
    for r in rows:
        if r["progress"] != "none" or not r[col] or r["variant"].startswith(("compute", "gemm")):
            continue
        if r["variant"].startswith("auto@"):
            continue  # auto at another margin: CFC's own auto replays the rule
        model = r["model"]
        base = model.split()[0]
        args = ["examples/%s.cf" % base] + sizes[base].split() + [
            "-D", "tp=" + r["ranks"], "--schedule=" + r["variant"], "--profile=" + a.profile]
        if model.endswith("backward"):
            args.append("--backward")
        t, _, picks = cfc(args)
        ms = float(r["mix_ms"] if a.mix else r.get("median_ms") or r["time_ms"])
        if r["variant"] == "auto":
            autos[model] = (picks, t, ms)
            continue
        out.append({"name": "%s %s" % (model, r["variant"]), "ms": ms, "pred": t, "err": t / ms - 1,
                    "kind": r["variant"], "group": model,
                    "vs_van": 1 + float(r["mix_vs_vanilla"]) if a.mix and r.get("mix_vs_vanilla") else None})
    for o in out:
        print("%-34s %9.1f %9.1f %+6.1f%%" % (o["name"], o["ms"], o["pred"], 100 * o["err"]))
    print("schedule rows: " + summary(out, "err"))
    for l in against_vanilla(out):
        print(l)
    for model, (picks, t, ms) in autos.items():
        measured = {o["kind"]: o["ms"] for o in out if o["group"] == model}
        print(auto_line(model, picks, t, measured, None, ms))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    g = sub.add_parser("gpu")
    g.add_argument("csv")
    g.add_argument("nccl")
    g.add_argument("ce", nargs="?")
    g.add_argument("--runs")
    g.add_argument("--probe-overlap", action="store_true")
    c = sub.add_parser("cpu")
    c.add_argument("csv")
    c.add_argument("profile")
    c.add_argument("--sizes-from")
    c.add_argument("--mix", action="store_true")
    c.add_argument("--probe-overlap", action="store_true")
    a = ap.parse_args()
    for k in ("nccl", "ce", "profile"):
        if a.probe_overlap and getattr(a, k, None):
            setattr(a, k, probe_overlap(getattr(a, k)))
    gpu(a) if a.kind == "gpu" else cpu(a)


if __name__ == "__main__":
    main()
