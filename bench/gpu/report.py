"""report.py: the GPU benchmark's table (bench/gpu/bench.sh): reads our
runs (runs.txt) and the PyTorch references (torch.jsonl), writes
RESULTS/<date>-<device>.csv and .md.

Metrics (Flux, arXiv 2406.06858; DESIGN.md section 4), per case and TP:
  compute   the unsplit compute alone: ours = vanilla with
            CFRT_TRANSFER=none; PyTorch's = its local computation alone;
  ECT       effective communication time = median - compute (of the same
            implementation);
  overlap   1 - ECT / ECT(vanilla of the same implementation): vanilla
            moves its data by one NCCL collective in every transfer mode,
            so its nccl run is the reference of the ce rows too;
  decomp    on the transfer=none rows (the schedule's compute alone):
            that time over the unsplit compute, minus 1: smaller GEMMs plus
            per-step work (PyTorch 'chunks': the GEMM as TP row chunks);
  err       max |ours - torch| / max |torch| of the output;
  predicted cfc --profile's prediction of the row on the profile of its
            TP and transfer mode (the none rows: the predicted compute
            alone), pred_err = predicted / ms - 1; "auto" is the schedule
            cfc takes on that profile ("auto@P": with --auto-margin=P).
            The summary gives the median and worst |pred_err| over the
            schedule rows that move data, and auto's regret: its time
            over the fastest schedule of the same case, TP and mode
            (vanilla and slice(k) move by NCCL collectives in every mode:
            their nccl rows count for ce).
  clock_mhz with --smi: the SM clock the row's GPUs ran at (clocks()).
"""
import argparse
import bisect
import csv
import datetime
import json
import os
import re

CASES = {
    "a": "row-parallel GEMM + reduce-scatter (M=32*4096, K=16384/tp, N=4096)",
    "b": "MLP block (b,s,d)=(32,4096,4096), F=4d",
    "c": "attention (b,s,d)=(16,4096,4096), 32 heads, causal",
    "d": "all-gather + column-parallel GEMM + gelu (M=32*4096, K=4096, N=16384/tp)",
}

# The schedules' order in the table; others follow.
ORDER = ["vanilla", "slice(4)", "fuse(ring)", "fuse(ring,m=2)", "fuse(bidir)", "fuse(bidir,m=2)",
         "auto"]


def rows_of(path, what):
    """The "WHAT case=C tp=N schedule=S transfer=M ms=X ..." lines of
    bench.sh's runs.txt (what: run) or predicted.txt (predict), in order:
    ((C, N, S, M), {field: value}) each."""
    if path and os.path.exists(path):
        for line in open(path):
            if line.startswith(what + " "):
                kv = dict(re.findall(r"(\w+)=(\S+)", line))
                yield (kv["case"], int(kv["tp"]), kv["schedule"], kv["transfer"]), kv


def read_times(path, what):
    """rows_of's lines: {(C, N, S, M): ms, None where it failed}, ms the
    median of the row's lines (its rounds), and {(C, N, S, M): their
    spread}, the slowest over the fastest less 1, for the rows of two
    lines and more, and the most lines a row has."""
    seen = {}
    for k, kv in rows_of(path, what):
        seen.setdefault(k, []).append(float(kv["ms"]) if kv["ms"] != "fail" else None)
    out, spread = {}, {}
    for k, v in seen.items():
        ok = [x for x in v if x is not None]
        # a row that failed in any round is not a time
        out[k] = median(ok) if ok and len(ok) == len(v) else None
        if len(ok) > 1 and out[k] is not None:
            spread[k] = max(ok) / min(ok) - 1
    return out, spread, max([1] + [len(v) for v in seen.values()])


def read_torch(path):
    out = {}
    if not os.path.exists(path):
        return out, []
    notes = []
    for line in open(path):
        j = json.loads(line)
        if "note" in j:
            n = "tp=%s %s: %s" % (j["tp"], j["impl"], j["note"])
            if j["case"] != "-":
                n = "case %s %s" % (j["case"], n)
            if n not in notes:
                notes.append(n)
        out[(j["case"], j["tp"], j["impl"])] = j
    return out, notes


def rows_for(case, tp, runs, spread, torch, dump_mode, pred, clk):
    rows = []
    get = lambda s, m: runs.get((case, tp, s, m))
    comp = get("vanilla", "none")
    scheds = sorted({k[2] for k in runs if k[0] == case and k[1] == tp},
                    key=lambda s: ORDER.index(s) if s in ORDER else len(ORDER))
    err = torch.get((case, tp, "ours-vs-torch"), {}).get("err")
    for m in ("nccl", "ce", "none"):
        van = get("vanilla", m) or get("vanilla", "nccl")
        for s in scheds:
            t = get(s, m)
            if t is None:
                continue
            r = {"case": case, "tp": tp, "impl": "ours", "schedule": s,
                 "transfer": m, "ms": t, "compute_ms": comp,
                 "spread": spread.get((case, tp, s, m)),
                 "clock_mhz": clk.get((case, tp, s, m))}
            if m == "none" and comp:  # the schedule's compute alone
                r["decomp"] = t / comp - 1
            elif comp:
                r["ect_ms"] = t - comp
                if van is not None and van - comp > 0:
                    r["overlap"] = 1 - (t - comp) / (van - comp)
            if s == "fuse(ring)" and m == dump_mode:
                r["err"] = err
            p = pred.get((case, tp, s, m))
            if p is not None:
                r["predicted_ms"] = p
                r["pred_err"] = p / t - 1
            rows.append(r)
    tc = torch.get((case, tp, "compute"), {}).get("ms")
    tt = torch.get((case, tp, "torch"), {}).get("ms")
    ch = torch.get((case, tp, "chunks"), {}).get("ms")
    for impl, key in (("torch", "torch"), ("asynctp", "asynctp")):
        j = torch.get((case, tp, key), {})
        t = j.get("ms")
        r = {"case": case, "tp": tp, "impl": impl, "schedule": "-",
             "transfer": "nccl" if impl == "torch" else "symm_mem", "ms": t,
             "compute_ms": tc, "err": j.get("err_vs_torch")}
        if t is not None and tc:
            r["ect_ms"] = t - tc
            if tt and tt - tc > 0:
                r["overlap"] = 1 - (t - tc) / (tt - tc)
        if impl == "torch" and ch and tc:
            r["decomp"] = ch / tc - 1
        rows.append(r)
    return rows


FIELDS = ["case", "tp", "impl", "schedule", "transfer", "ms", "spread", "compute_ms",
          "ect_ms", "overlap", "decomp", "err", "predicted_ms", "pred_err", "clock_mhz"]


def fmt(v, f="%.3f"):
    return "" if v is None else f % v if isinstance(v, float) else str(v)


def headline(rows):
    """Case a at the largest TP: our best fuse against the targets."""
    a = [r for r in rows if r["case"] == "a"]
    if not a:
        return []
    tp = max(r["tp"] for r in a)
    a = [r for r in a if r["tp"] == tp]
    # transfer=none rows are a schedule's compute alone, not a result
    fuse = [r for r in a if r["impl"] == "ours" and r["schedule"].startswith("fuse")
            and r["transfer"] != "none" and r["ms"] is not None]
    atp = next((r["ms"] for r in a if r["impl"] == "asynctp"), None)
    if not fuse:
        return []
    best = min(fuse, key=lambda r: r["ms"])
    out = ["Case (a), TP=%d: best fuse schedule %s with %s transfers: %.3f ms, "
           "overlap efficiency %s (target >= 0.90)" % (
               tp, best["schedule"], best["transfer"], best["ms"],
               fmt(best.get("overlap"), "%.3f"))]
    if atp:
        out.append("Against PyTorch Async-TP (%.3f ms): %.3fx (target <= 0.96x)"
                   % (atp, best["ms"] / atp))
    return out


def is_auto(schedule):
    """auto, or auto@P (cfc --auto-margin=P): cfc's pick, not a kind."""
    return schedule == "auto" or schedule.startswith("auto@")


def nccl_in_every_mode(schedule):
    """vanilla and slice(k) move data by NCCL collectives whatever
    CFRT_TRANSFER says: bench.sh runs them with nccl only."""
    return schedule == "vanilla" or schedule.startswith("slice")


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summary(rows):
    """The cost model's record: prediction errors and auto's regret."""
    ours = [r for r in rows if r["impl"] == "ours" and r.get("ms") is not None]
    out = []
    for what, sel in (("schedule rows that move data",
                       lambda r: r["transfer"] != "none" and not is_auto(r["schedule"])),
                      ("compute alone (transfer none)",
                       lambda r: r["transfer"] == "none")):
        e = [(abs(r["pred_err"]), r) for r in ours if sel(r) and "pred_err" in r]
        if not e:
            continue
        w = max(e, key=lambda x: x[0])
        out.append("prediction, %s: |error| median %.1f%%, worst %.1f%% (case %s tp=%d %s %s), "
                   "%d of %d within 15%%" % (
                       what, 100 * median([x[0] for x in e]), 100 * w[0], w[1]["case"],
                       w[1]["tp"], w[1]["schedule"], w[1]["transfer"],
                       sum(x[0] <= 0.15 for x in e), len(e)))
    for tp in sorted({r["tp"] for r in ours}, reverse=True):
        c = [r["clock_mhz"] for r in ours if r["tp"] == tp and r.get("clock_mhz")]
        if c:  # the power state a row ran in, which no profile holds
            out.append("SM clock the rows ran at, tp=%d: %.0f-%.0f MHz, median %.0f "
                       "(%d rows)" % (tp, min(c), max(c), median(c), len(c)))
    for r in ours:
        if not is_auto(r["schedule"]):
            continue
        same = [q for q in ours if q["case"] == r["case"] and q["tp"] == r["tp"] and
                not is_auto(q["schedule"]) and (q["transfer"] == r["transfer"] or
                (q["transfer"] == "nccl" and nccl_in_every_mode(q["schedule"])))]
        if not same:
            continue
        b = min(same, key=lambda q: q["ms"])
        van = next((q["ms"] for q in same if q["schedule"] == "vanilla"), None)
        out.append("%s: case %s tp=%d %s: %.3f ms, the fastest schedule %s %s %.3f ms: "
                   "regret %+.1f%%%s" % (
                       r["schedule"], r["case"], r["tp"], r["transfer"], r["ms"], b["schedule"], b["transfer"],
                       b["ms"], 100 * (r["ms"] / b["ms"] - 1),
                       "; vanilla %.3f ms (%+.1f%%)" % (van, 100 * (r["ms"] / van - 1))
                       if van else ""))
    return out


def smi_samples(path):
    """The samples of bench.sh's nvidia-smi log (smi.csv): (seconds since
    the epoch, GPU, SM MHz, W, C, clock event reasons); lines that do not
    parse are left out. nvidia-smi's timestamps are the machine's local
    time, as is date +%s's epoch."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        f = [x.strip() for x in line.split(",")]
        try:
            out.append((datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(),
                        int(f[1]), float(f[2]), float(f[3]), float(f[4]), int(f[5], 16)))
        except (IndexError, ValueError):
            continue
    return out


# NVML's clock event reasons (nvidia-smi's clocks_throttle_reasons.active)
# that slow a GPU for heat or a hardware fault; its power limit (0x4) and
# idling (0x1) are the normal state of a loaded and of an idle GPU.
HOT = ((0x08, "HW slowdown"), (0x20, "SW thermal slowdown"),
       (0x40, "HW thermal slowdown"), (0x80, "HW power brake"))
HOT_MASK = sum(b for b, _ in HOT)


def throttled(path):
    """Lines for the GPUs of bench.sh's nvidia-smi log (timestamp, index,
    SM MHz, W, C, reasons) that slowed for heat or a fault in any sample.
    Lease 24 (4 H100s, 2026-11-28): GPU 0, at up to 94 C, ran at a
    median 772 MHz in 866 of 1365 samples under thermal slowdown; the
    calibration's 16384x4096x4096 GEMMs back to back took 2.4-3.0 ms a
    call (about 0.77 on sound machines), and every row of the job ran at
    its pace."""
    gpus = {}
    for _, g, mhz, _, temp, why in smi_samples(path):
        s = gpus.setdefault(g, {"n": 0, "hot": [], "why": 0, "temp": 0})
        s["n"] += 1
        s["temp"] = max(s["temp"], temp)
        bad = why & HOT_MASK
        if bad:
            s["hot"].append(mhz)
            s["why"] |= bad
    out = []
    for g, s in sorted(gpus.items()):
        if s["hot"]:
            out.append("GPU %d slowed for heat or a fault in %d of %d nvidia-smi samples (%s; "
                       "up to %.0f C; SM clock %.0f MHz, the median of those samples): its "
                       "times, and the calibration's, are not a sound machine's" % (
                           g, len(s["hot"]), s["n"],
                           ", ".join(n for b, n in HOT if s["why"] & b), s["temp"],
                           median(s["hot"])))
    return out


def run_windows(path):
    """{(C, N, S, M): [(start, end), ...]}: each round's mpirun, from the
    from= and at= of its runs.txt line (seconds since the epoch)."""
    out = {}
    for k, kv in rows_of(path, "run"):
        if "from" in kv and "at" in kv:
            out.setdefault(k, []).append((int(kv["from"]), int(kv["at"])))
    return out


# A sample counts as loaded at this share of its GPU's highest power in
# the log: lease 29's H200s (700 W limit) drew 100-200 W in 3586 of 7852
# samples, most of them waiting between runs at up to 1980 MHz, and up
# to 743 W in the runs.
LOADED = 0.4


def clocks(path, windows):
    """Each row's SM clock: for each round's run, the median SM clock of
    each GPU over its loaded samples in the run (from its start to the
    second after its end), the lowest of the GPUs' (the slowest rank
    sets a run's time); the median over the rounds. A GPU at its power
    limit runs a row's GEMMs at the clock that row's power draw leaves it
    (bench/results/2026-11-28-H200-lease29-136e386/lease29-tp4-predicted.md)."""
    samples = sorted(smi_samples(path))
    top = {}
    for _, g, _, w, _, _ in samples:
        top[g] = max(top.get(g, 0), w)
    times = [x[0] for x in samples]
    out = {}
    for k, ws in windows.items():
        per = []
        for a, b in ws:
            g = {}
            for _, gpu, mhz, w, _, _ in samples[bisect.bisect_left(times, a):
                                                bisect.bisect_left(times, b + 1)]:
                if w >= LOADED * top[gpu]:
                    g.setdefault(gpu, []).append(mhz)
            if g:
                per.append(min(median(v) for v in g.values()))
        if per:
            out[k] = median(per)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--torch", required=True)
    ap.add_argument("--predicted", default="",
                    help="bench.sh's predicted.txt (cfc --profile's predictions)")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--results", default="bench/results")
    ap.add_argument("--dump-mode", default="nccl",
                    help="the transfer mode of the fuse(ring) run dumped")
    ap.add_argument("--smi", default="",
                    help="bench.sh's nvidia-smi log (smi.csv): GPUs slowed for heat flagged")
    args = ap.parse_args()
    runs, spread, rounds = read_times(args.runs, "run")
    torch, notes = read_torch(args.torch)
    pred = read_times(args.predicted, "predict")[0]
    clk = clocks(args.smi, run_windows(args.runs)) if args.smi else {}

    rows = []
    for case in sorted({k[0] for k in runs}):
        for tp in sorted({k[1] for k in runs if k[0] == case}, reverse=True):
            rows += rows_for(case, tp, runs, spread, torch, args.dump_mode, pred, clk)
    date = datetime.date.today().isoformat()
    base = os.path.join(args.results, "%s-%s" % (date, args.device))
    with open(base + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["device", "date"] + FIELDS)
        for r in rows:
            w.writerow([args.device, date] + [fmt(r.get(k), "%.4g") for k in FIELDS])
    has_clk = any(r.get("clock_mhz") for r in rows)
    with open(base + ".md", "w") as f:
        f.write("# GPU benchmark, %s, %s\n\n" % (args.device, date))
        f.write("bf16; medians of the slowest rank%s; ms. compute = unsplit "
                "compute alone of the same implementation; ECT = ms - compute; "
                "overlap = 1 - ECT/ECT(vanilla); decomp = schedule's compute "
                "alone / unsplit - 1; err = max|x - torch|/max|torch|.%s%s\n\n" % (
                    ", the median of %d rounds" % rounds if rounds > 1 else "",
                    " spread = the slowest round over the fastest, less 1."
                    if rounds > 1 else "",
                    " MHz = the SM clock the row ran at (nvidia-smi: the lowest GPU's "
                    "median over its loaded samples in the run; the median of the rounds)."
                    if has_clk else ""))
        for line in throttled(args.smi) if args.smi else []:
            f.write("**Warning: %s.**\n\n" % line)
        for line in headline(rows):
            f.write("**%s**\n\n" % line)
        summ = summary(rows)
        if summ:
            f.write("cfc's cost model (predicted = cfc --profile on the profile "
                    "calibrated at the same TP and transfer mode):\n\n")
            for line in summ:
                f.write("- %s\n" % line)
            f.write("\n")
        for case in sorted({r["case"] for r in rows}):
            f.write("## (%s) %s\n\n" % (case, CASES.get(case, case)))
            f.write("| tp | impl | schedule | transfer | ms |%s compute | ECT | "
                    "overlap | decomp | err | predicted | pred_err |%s\n" % (
                        " spread |" if rounds > 1 else "", " MHz |" if has_clk else ""))
            f.write("|---|---|---|---|---|%s---|---|---|---|---|---|---|%s\n" % (
                "---|" if rounds > 1 else "", "---|" if has_clk else ""))
            for r in rows:
                if r["case"] != case:
                    continue
                f.write("| %s |\n" % " | ".join([
                    str(r["tp"]), r["impl"], r["schedule"], r["transfer"],
                    fmt(r.get("ms"))] + ([] if rounds < 2 else [
                    "" if r.get("spread") is None else "%.1f%%" % (100 * r["spread"])]) + [
                    fmt(r.get("compute_ms")),
                    fmt(r.get("ect_ms")), fmt(r.get("overlap"), "%.2f"),
                    fmt(r.get("decomp"), "%.3f"), fmt(r.get("err"), "%.1e"),
                    fmt(r.get("predicted_ms")),
                    "" if r.get("pred_err") is None else "%+.1f%%" % (100 * r["pred_err"])] +
                    ([fmt(r.get("clock_mhz"), "%.0f")] if has_clk else [])))
            f.write("\n")
        if notes:
            f.write("Notes from the PyTorch side:\n\n")
            for n in notes:
                f.write("- %s\n" % n)
    print(open(base + ".md").read())
    print("plots (where gnuplot is): make plots CSV=%s.csv" % base)


if __name__ == "__main__":
    main()
