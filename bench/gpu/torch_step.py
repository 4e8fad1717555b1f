"""torch_step.py: what the one-GPU block benchmarks' PyTorch sides share
(bench/gpu/torch_train.py, bench/gpu/torch_attn_rank.py; bench/gpu/block1.sh
runs them): the options, the timing, the peak memory, and the step timed
eager and under torch.compile.

A step is the block's forward and then autograd's backward from a given dy
into the .grad of the inputs and weights (set to None before each step, so
that nothing accumulates); the forward alone runs under torch.no_grad. Each
time is the median of ITERS runs after WARMUP, CUDA events around each run
(perf_counter on a CPU). peak_mb: the allocator's high-water mark over a
step (torch.cuda.max_memory_allocated after a reset): the weights, their
.grad, x, dy and everything autograd saves; n/a on a CPU.

Prints one line a mode, read by bench/gpu/block_report.py:
  torch what=step mode=eager|compile fwd_ms= step_ms= bwd_ms= peak_mb= torch=VERSION
  torch what=step mode=compile error=NAME      (torch.compile failed: the
      message goes to stderr; the phase goes on)
"""
import argparse
import statistics
import sys
import time

import torch


def options(doc, sizes):
    """The command line: --NAME for each (NAME, default) of sizes, --iters,
    --warmup, --no-compile, --device (cuda; cpu only to try the script)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    for k, v in sizes:
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda")
    return ap


def setup(device, seed=0):
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True


def rnd(device, *shape, scale=1.0, grad=False, dtype=torch.bfloat16):
    t = ((torch.rand(*shape, device=device) - 0.5) * scale).to(dtype)
    return t.requires_grad_(grad)


def timed(fn, device, iters, warm):
    cuda = device.startswith("cuda")
    ts = []
    for i in range(iters + warm):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            e0.record()
            fn()
            e1.record()
            torch.cuda.synchronize()
            ms = e0.elapsed_time(e1)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= warm:
            ts.append(ms)
    return statistics.median(ts)


def peak_mb(step, device):
    if not device.startswith("cuda"):
        return "n/a"
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return "%.1f" % (torch.cuda.max_memory_allocated() / 2**20)


def run_step(mode, fn, ins, params, dy, a):
    """Times fn(*ins, *params) (a tensor) alone and with its backward from
    dy into every tensor of ins and params, and prints the line."""
    def fwd():
        with torch.no_grad():
            fn(*ins, *params)

    def step():
        for t in list(ins) + list(params):
            t.grad = None
        fn(*ins, *params).backward(dy)

    f = timed(fwd, a.device, a.iters, a.warmup)
    s = timed(step, a.device, a.iters, a.warmup)
    print(f"torch what=step mode={mode} fwd_ms={f:.4f} step_ms={s:.4f} bwd_ms={s - f:.4f} "
          f"peak_mb={peak_mb(step, a.device)} torch={torch.__version__}", flush=True)


def run_modes(name, fn, ins, params, dy, a):
    """run_step eager, then under torch.compile(fullgraph=True) unless
    --no-compile; a compile that fails is reported, not raised."""
    run_step("eager", fn, ins, params, dy, a)
    if a.no_compile:
        return
    try:
        run_step("compile", torch.compile(fn, fullgraph=True), ins, params, dy, a)
    except Exception as e:  # no inductor here, or a graph it refuses
        print(f"torch what=step mode=compile error={type(e).__name__}", flush=True)
        msg = str(e).strip().splitlines()
        print(f"{name}: torch.compile failed: {type(e).__name__}: {msg[0] if msg else ''}",
              file=sys.stderr)
