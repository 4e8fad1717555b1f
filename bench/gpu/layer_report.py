"""layer_report.py RUNS OUT: the summary of a one-GPU layer benchmark
(bench/gpu/layer1.sh) in Markdown on stdout.

RUNS: the run's runs.txt ("ours config=C ..." lines from the generated
driver, "torch config=C what=..." lines from torch_layer.py). OUT: the
folder with each configuration's trace-C.json.gz (CFRT_TRACE of the
generated code), which gives our time per op.

Per configuration: the step (forward, backward, peak memory) of ours, PyTorch
eager and torch.compile; then each op, ours (the mean of the traced passes:
the compute spans of the trace, each a runtime call from its start to the
next call on the stream) beside PyTorch's op alone, with what ours reaches
against the op's limit: a GEMM against torch.matmul's time (cuBLAS) for the
same shape, attention against cuDNN's SDPA, a memory-bound op against the
HBM bandwidth a large copy reached in the same run.
"""
import gzip
import json
import os
import re
import statistics
import sys
from collections import defaultdict

runs, out = sys.argv[1], sys.argv[2]
WEIGHTS = ("wq", "wk", "wv", "wo", "wg", "wu", "wd")


def kv(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


ours, torch_steps, torch_ops, torch_attn, hbm = {}, defaultdict(dict), defaultdict(dict), \
    defaultdict(dict), {}
base = {}  # BASE=DIR of layer1.sh: an earlier commit's code, same run
head = ""
for line in open(runs):
    d = kv(line)
    if line.startswith("host"):
        head = line.strip()
    elif line.startswith("ours"):
        ours[d["config"]] = d
    elif line.startswith("base"):
        base[d["config"]] = d
    elif line.startswith("torch"):
        c, w = d["config"], d.get("what")
        if w == "step":
            torch_steps[c][d["mode"]] = d
        elif w == "op":
            torch_ops[c][d["op"]] = d
        elif w == "attn":
            torch_attn[c][d["backend"]] = d
        elif w == "hbm":
            hbm[c] = float(d["gbps"])


def label(call, tensors):
    """Our runtime call -> the row of the per-op table it counts in."""
    lhs = tensors.split(" = ")[0]
    if call == "matmul":
        for w in WEIGHTS:
            if re.search(r"\b\w*\.?%s\b" % w, tensors):
                return "gemm_" + {"wq": "q", "wk": "k", "wv": "v", "wo": "o", "wg": "gate",
                                  "wu": "up", "wd": "down"}[w]
        return "gemm (other)"
    if call.startswith("attention"):
        return "attention"
    if call.startswith("rmsnorm") or "_rows" in lhs or call == "sum_leading":
        return "rmsnorm"
    if call == "rope":
        return "rope"
    if call in ("silu", "silu_grad", "swiglu", "swiglu_da", "swiglu_db") or \
            (call == "mul" and "mlp" in tensors):
        return "swiglu"
    if call == "add":
        return "residual_add" if "mlp" not in lhs and "attn" not in lhs else "grad adds"
    if call == "copy":
        return "copies (heads, gathers)"
    if call == "scale":
        return "zero fills"
    return call


def our_ops(c, who=""):
    """{(row, pass): ms per pass} from the trace of configuration c: each
    call of the pass (its span name and tensors) at the median of its
    traced runs (the first, warm-up, pass builds plans and autotunes), times
    how often it runs in a pass; the rows sum their calls.

    Which pass a call belongs to is read from the timeline, not from its
    name: the backward repeats some of the forward's calls under the same
    name (at tp = 1 the gather of a matmul's input, `attn0.xa = t1`, is a
    copy that the backward makes again for its weight gradient). A forward
    pass begins at the first call of the trace (that call's name), a
    backward pass at the first call after it whose result is a gradient
    (d_...) or a norm's x_hat; every call belongs to the pass it runs in."""
    p = os.path.join(out, "trace-%s%s.json.gz" % (who, c))
    if not os.path.exists(p):
        return {}, 0, 0
    ev = json.load(gzip.open(p))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    ev = sorted((e for e in ev if e.get("ph") == "X" and e.get("tid") == 0 and
                 e["args"].get("op", "-") != "-"), key=lambda e: e["ts"])
    runs = defaultdict(list)
    n = defaultdict(int)
    start, pas = None, "fwd"
    for e in ev:
        call = e["name"].split(": ", 1)[1].split(" ")[0]
        t = e["args"].get("tensors", "")
        lhs = t.split(" = ")[0]
        key = (e["name"], t)
        if start is None:
            start = key
        if key == start:
            pas = "fwd"
            n["fwd"] += 1
        elif pas == "fwd" and (lhs.startswith("d_") or e["args"]["op"].startswith("d_") or
                               lhs.endswith("_hat")):
            pas = "bwd"
            n["bwd"] += 1
        runs[(e["name"], t, call, pas)].append(e["dur"] / 1e3)
    tot = defaultdict(float)
    for (name, t, call, pas), d in runs.items():
        tot[(label(call, t), pas)] += statistics.median(d) * len(d) / max(n[pas], 1)
    return tot, n["fwd"], n["bwd"]


def f(x, nd=3):
    return "-" if x is None else ("%.*f" % (nd, x))


def ratio(a, b):
    return "-" if not a or not b else "%.2fx" % (a / b)


print("# One-GPU layer benchmark: the Llama layer, ours against PyTorch\n")
print("`%s`. Ours: the generated code of `examples/llama.cf` at tp = 1, bf16, run by its "
      "driver (`--iters N --warmup 3`, medians of the forward and of the backward; the "
      "step is their sum); per op, each call at the median of its traced runs (CFRT_TRACE). PyTorch: "
      "`bench/gpu/torch_layer.py`, the same layer in plain torch (F.rms_norm, rotate-half "
      "rope, SDPA with GQA, SwiGLU), eager and `torch.compile(fullgraph=True)`, medians "
      "of N steps (forward, then forward + backward by autograd), and each op alone. "
      "A ratio is PyTorch's time over ours (above 1: ours faster).\n" % head)
for c, o in ours.items():
    D, B, S = int(o["D"]), int(o["B"]), int(o["S"])
    H, KV, Dh, FF = int(o["H"]), int(o["KV"]), int(o["Dh"]), int(o["F"])
    ws, saved, bws = (int(x) for x in o["ws_saved_bws"].split(","))
    wb = 2 * (2 * D * H * Dh + 2 * D * KV * Dh + 3 * D * FF + 2 * D)
    ours_mb = (2 * wb + 4 * 2 * B * S * D + saved + max(ws, bws)) / 2**20
    fo, bo = float(o["time_ms"]), float(o.get("backward_ms", "nan"))
    print("## %s: B %d, S %d, D %d, %d heads of %d, %d KV heads, F %d\n" % (c, B, S, D, H, Dh, KV, FF))
    print("| | forward ms | backward ms | step ms | step: PyTorch / ours | peak MiB |")
    print("|---|---|---|---|---|---|")
    print("| ours | %.3f | %.3f | %.3f | | %.0f (planned) |" % (fo, bo, fo + bo, ours_mb))
    bl = base.get(c)
    if bl:
        bf, bb = float(bl["time_ms"]), float(bl.get("backward_ms", "nan"))
        print("| ours before (base) | %.3f | %.3f | %.3f | | |" % (bf, bb, bf + bb))
    for m in ("eager", "compile"):
        t = torch_steps[c].get(m)
        if not t or "error" in t:
            print("| torch %s | %s |||||" % (m, t.get("error", "not run") if t else "not run"))
            continue
        tf, ts = float(t["fwd_ms"]), float(t["step_ms"])
        print("| torch %s | %.3f | %.3f | %.3f | %s | %s |" % (m, tf, ts - tf, ts,
              ratio(ts, fo + bo), t["peak_mb"]))
    ops, nf, nb = our_ops(c)
    bops, bnf, bnb = our_ops(c, "base-") if bl else ({}, 0, 0)
    gb = hbm.get(c)
    cud = torch_attn[c].get("cudnn", {})
    print("\nPer op (ms per pass; ours from %d forward and %d backward traced passes; "
          "HBM %s GB/s by a copy; attention's limit cuDNN SDPA %s / %s ms):\n"
          % (nf, nb, f(gb, 0), cud.get("fwd_ms", "-"), cud.get("bwd_ms", "-")))
    sf = sum(v for k, v in ops.items() if k[1] == "fwd")
    sb = sum(v for k, v in ops.items() if k[1] == "bwd")
    if ops and (abs(sf - fo) > 0.1 * fo or abs(sb - bo) > 0.1 * bo):
        print("**The traced calls do not add up to the measured passes** (forward %.3f ms "
              "traced against %.3f measured, backward %.3f against %.3f): the trace's "
              "spans misplace time between calls on this machine, so our per-op column "
              "is not a measurement of each op; PyTorch's column is.\n" % (sf, fo, sb, bo))
    if bops:
        print("Before: the base's traced calls, %d forward and %d backward passes, the same "
              "way, in the same run.\n" % (bnf, bnb))
        print("| op | before fwd | ours fwd | torch fwd | before bwd | ours bwd | torch bwd | "
              "torch/ours (fwd+bwd) | ours reaches |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
        print("| op | ours fwd | torch fwd | ours bwd | torch bwd | torch/ours (fwd+bwd) | ours reaches |")
        print("|---|---|---|---|---|---|---|")
    mult = {"rmsnorm": 2, "residual_add": 2}
    rows = ["rmsnorm", "gemm_q", "gemm_k", "gemm_v", "rope", "attention", "gemm_o",
            "residual_add", "gemm_gate", "gemm_up", "swiglu", "gemm_down"]
    rows += sorted({k[0] for k in list(ops) + list(bops)} - set(rows))
    for r in rows:
        of, ob = ops.get((r, "fwd")), ops.get((r, "bwd"))
        if r == "rope":
            tq, tk = torch_ops[c].get("rope_q"), torch_ops[c].get("rope_k")
            t = tq and tk and {"fwd_ms": float(tq["fwd_ms"]) + float(tk["fwd_ms"]),
                               "bwd_ms": float(tq["bwd_ms"]) + float(tk["bwd_ms"]),
                               "kind": "memory", "bytes": float(tq["bytes"]) + float(tk["bytes"])}
        elif r.startswith("copies"):
            t = torch_ops[c].get("merge_heads")
        else:
            t = torch_ops[c].get(r)
        k = mult.get(r, 1)
        tf = t and float(t["fwd_ms"]) * k
        tb = t and float(t["bwd_ms"]) * k
        reach = ""
        if t and of:
            kind = t["kind"]
            if kind == "gemm":
                reach = "%.0f TFLOP/s fwd, %.0f%% of cuBLAS" % (float(t["flop"]) / of / 1e9,
                                                                100 * tf / of)
            elif kind == "attention" and cud.get("fwd_ms"):
                reach = "%.0f%% of cuDNN fwd" % (100 * float(cud["fwd_ms"]) / of)
                if ob:
                    reach += ", %.0f%% bwd" % (100 * float(cud["bwd_ms"]) / ob)
            elif kind == "memory" and gb:
                reach = "%.0f GB/s fwd, %.0f%% of HBM" % (float(t["bytes"]) * k / of / 1e6,
                                                          100 * float(t["bytes"]) * k / of / 1e6 / gb)
        both = (of or 0) + (ob or 0)
        rt = ratio((tf or 0) + (tb or 0), both) if t else "-"
        if bops:
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r, f(bops.get((r, "fwd"))), f(of), f(tf), f(bops.get((r, "bwd"))), f(ob), f(tb),
                rt, reach))
        else:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (r, f(of), f(tf), f(ob), f(tb), rt,
                                                            reach))
    print()
