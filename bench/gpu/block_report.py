"""block_report.py RUNS: the summary of bench/gpu/block1.sh in Markdown on
stdout.

RUNS: its runs.txt: "ours case=C build=fwd|step SIZES tensor_bytes=N"
followed by the generated driver's line (time_ms: the forward;
backward_ms; mem_peak_bytes: cfrt_alloc's high-water mark over the
tensors), and "torch case=C what=..." lines of bench/gpu/torch_step.py.

Per case, ours beside PyTorch eager and torch.compile: the forward alone
(ours: the build without --backward; PyTorch: under no_grad), ours'
forward of the training build (which saves what the backward reads), the
backward (PyTorch: step - forward), the step (forward + backward), the
ratios PyTorch / ours (above 1: ours faster) and the step's peak memory;
then the issue's target, ours >= 1.0x of PyTorch, against each mode.
"""
import re
import sys

TITLE = {
    "mlp": "the MLP block's training step (`bench/mlp_sbd.cf`, [S, B, D], F = 4D)",
    "casec": "case (c)'s compute of one rank at tp = 4 (`bench/attn_rank.cf`: Q/K/V "
             "projections onto HL heads of Dh, causal attention, the output projection)",
}
# the pass the target is judged on first; both are reported
TARGET = {"mlp": ("step",), "casec": ("forward", "step")}


def kv(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def num(d, k):
    try:
        return float(d[k])
    except (KeyError, ValueError):
        return None


def ms(v):
    return "-" if v is None else "%.3f" % v


def ratio(t, o):
    return "-" if not t or not o else "%.2fx" % (t / o)


head, ours, torch, sizes, order = "", {}, {}, {}, []
for line in open(sys.argv[1]):
    d = kv(line)
    c = d.get("case")
    if line.startswith("host"):
        head = line.strip()
        continue
    if c and c not in order:
        order.append(c)
    if line.startswith("ours "):
        ours.setdefault(c, {})[d["build"]] = d
    elif line.startswith("torch ") and d.get("what") == "step":
        torch.setdefault(c, {})[d["mode"]] = d
    elif line.startswith("torch ") and d.get("what") == "sizes":
        sizes[c] = d

print("# One-GPU blocks (issue 52): ours against PyTorch\n")
print("`%s`. Ours: the C cfc generated at tp = 1, bf16, run by its driver (`--iters N "
      "--warmup N`, medians); the forward alone is the build without `--backward`, the "
      "step the training build's forward (which saves what the backward reads) plus its "
      "backward. PyTorch (`bench/gpu/torch_step.py`): the same block eager and under "
      "`torch.compile(fullgraph=True)`, the forward alone under `no_grad`, the step "
      "forward + `backward(dy)`, medians of as many runs (CUDA events); its backward is "
      "step - forward. A ratio is PyTorch's time over ours (above 1: ours faster). Peak "
      "MiB of the step: ours, the tensors (inputs, weights, outputs, their gradients) "
      "plus the driver's `mem_peak_bytes` (cfrt_alloc's high-water mark of saved "
      "activations and workspace; cuBLAS's and cuDNN's own workspaces not counted); "
      "PyTorch, `torch.cuda.max_memory_allocated` over a step.\n" % head)
for c in order:
    o, t = ours.get(c, {}), torch.get(c, {})
    od = o.get("step") or o.get("fwd") or {}
    sz = " ".join("%s %s" % (k, od[k]) for k in ("B", "S", "D", "HL", "Dh") if k in od)
    print("## %s: %s\n" % (c, TITLE.get(c, c)))
    if sz:
        print("Sizes: %s; bf16, one GPU, nothing communicated.%s\n" % (
            sz, " PyTorch's attention: %s." % sizes[c]["attention"]
            if "attention" in sizes.get(c, {}) else ""))
    of = num(o.get("fwd", {}), "time_ms")
    osf, ob = num(o.get("step", {}), "time_ms"), num(o.get("step", {}), "backward_ms")
    ostep = osf + ob if osf is not None and ob is not None else None
    peak = "-"
    if "step" in o and num(o["step"], "mem_peak_bytes") is not None:
        peak = "%.0f" % ((num(o["step"], "tensor_bytes") + num(o["step"], "mem_peak_bytes"))
                         / 2**20)
    print("| | forward ms | forward, saving ms | backward ms | step ms | forward: PyTorch / ours "
          "| backward: PyTorch / ours | step: PyTorch / ours | peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("| ours | %s | %s | %s | %s | | | | %s |" % (ms(of), ms(osf), ms(ob), ms(ostep), peak))
    res = {}
    for m in ("eager", "compile"):
        d = t.get(m)
        if not d or "error" in d:
            print("| torch %s | %s ||||||||" % (m, "failed: %s" % d["error"] if d else "not run"))
            continue
        tf, tb, tstep = num(d, "fwd_ms"), num(d, "bwd_ms"), num(d, "step_ms")
        res[m] = {"forward": (tf, of), "step": (tstep, ostep)}
        print("| torch %s | %s | - | %s | %s | %s | %s | %s | %s |" % (
            m, ms(tf), ms(tb), ms(tstep), ratio(tf, of), ratio(tb, ob), ratio(tstep, ostep),
            d.get("peak_mb", "-")))
    print()
    for p in TARGET.get(c, ("step",)):
        parts = []
        for m, r in res.items():
            tv, ov = r[p]
            if tv and ov:
                parts.append("%s %.2fx (%s)" % (m, tv / ov, "met" if tv / ov >= 1.0 else "not met"))
        print("- target, ours >= 1.0x of PyTorch, %s: %s" % (
            p, ", ".join(parts) if parts else "no pair of times to judge"))
    print()
