"""torch_ref.py: the PyTorch references of the GPU benchmark (issue 5), on
the same inputs as the generated code (cfrt_fill_global's hash, computed
here on the GPU), one process per GPU under torchrun.

For each case it times, as medians over ITERS runs of the slowest rank
(CUDA events, a barrier before each run):
  compute   the local computation alone, unsplit (no communication);
  chunks    case a: the same GEMM as TP row chunks (decomposition loss);
  torch     torch.matmul (and the rest) + dist.all_gather_into_tensor /
            dist.reduce_scatter_tensor, the sequence dimension first;
  asynctp   PyTorch Async-TP (torch.ops.symm_mem.fused_all_gather_matmul,
            fused_matmul_reduce_scatter), when this torch has it;
and the max relative error max|x - y| / max|y| of our output (--dump of
the generated driver, when given) and of Async-TP against torch's.
Writes one JSON object per line to --out.

usage: torchrun --nproc_per_node=TP torch_ref.py --out FILE
       [--case a|b|c|d ...] [--dump CASE=FILE ...] [--iters N]
"""
import argparse
import json
import math
import os
import statistics
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

M64 = 1 << 64


def s64(c):
    c %= M64
    return c - M64 if c >= 1 << 63 else c


C1, C2 = 0xD1B54A32D192ED03, s64(0x9E3779B97F4A7C15)
C3, C4 = s64(0xBF58476D1CE4E5B9), s64(0x94D049BB133111EB)


def lsr(z, k):
    """Logical right shift of int64 z (torch shifts arithmetically)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def fill(seed, gdims, offs, shape, dtype=torch.bfloat16):
    """cfrt_fill_global: the window `shape` at `offs` of the global tensor
    `gdims`: element e = cfrt_uniform(seed, row-major index of e), exact in
    float32, rounded to dtype (int64 arithmetic wraps like uint64)."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=dtype, device="cuda")
    gstr = [math.prod(gdims[d + 1:]) for d in range(len(gdims))]
    inner = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base = s64(seed * C1)
    step = 1 << 26
    for i0 in range(0, n, step):
        i = torch.arange(i0, min(n, i0 + step), device="cuda", dtype=torch.int64)
        g = torch.zeros_like(i)
        for d in range(len(shape)):
            g += ((i // inner[d]) % shape[d] + offs[d]) * gstr[d]
        z = (g + 1) * C2 + base
        z = (z ^ lsr(z, 30)) * C3
        z = (z ^ lsr(z, 27)) * C4
        z = z ^ lsr(z, 31)
        v = lsr(z, 40).to(torch.float32) * (2.0 ** -23) - 1.0
        out[i0:i0 + i.numel()] = v.to(dtype)
        del i, g, z, v
    return out.view(shape)


def median_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        t = torch.tensor([a.elapsed_time(b)], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ts.append(t.item())
    return statistics.median(ts)


def rel_err(x, y):
    """max |x - y| / max |y| over all ranks."""
    d = (x.double() - y.double()).abs().max().reshape(1)
    m = y.double().abs().max().reshape(1)
    if torch.isnan(x).any():
        d.fill_(float("inf"))
    dist.all_reduce(d, op=dist.ReduceOp.MAX)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return (d / m).item()


def ours(path, gdims, split, r, tp):
    """This rank's slice (split dim) of our whole output dump (doubles)."""
    mm = np.memmap(path, dtype=np.float64, mode="r", shape=tuple(gdims))
    n = gdims[split] // tp
    idx = [slice(None)] * len(gdims)
    idx[split] = slice(r * n, (r + 1) * n)
    return torch.from_numpy(np.ascontiguousarray(mm[tuple(idx)])).cuda()


class Ctx:
    def __init__(self, args):
        self.r = dist.get_rank()
        self.tp = dist.get_world_size()
        self.iters = args.iters
        self.out = open(args.out, "a") if self.r == 0 else None
        self.dumps = dict(d.split("=", 1) for d in args.dump)
        self.group = dist.group.WORLD.group_name
        self.symm = None
        try:
            from torch.distributed import _symmetric_memory as symm_mem
            symm_mem.enable_symm_mem_for_group(self.group)
            self.symm = torch.ops.symm_mem
            _ = self.symm.fused_matmul_reduce_scatter
            _ = self.symm.fused_all_gather_matmul
        except Exception as e:  # reported, not fatal
            self.symm = None
            self.note("asynctp", "missing: %s" % e)

    def emit(self, **kw):
        kw["tp"] = self.tp
        if self.out:
            self.out.write(json.dumps(kw) + "\n")
            self.out.flush()
            print(json.dumps(kw), flush=True)

    def note(self, what, text):
        self.emit(case="-", impl=what, note=text)


def case_a(c, case="a", S=4096, B=32, D=4096, Fd=16384):
    """Row-parallel GEMM [S,B,F/tp] @ [F/tp,D], reduce-scatter over S."""
    tp, r, K = c.tp, c.r, Fd // c.tp
    h = fill(1000, [S, B, Fd], [0, 0, r * K], [S, B, K])
    w2 = fill(1001, [Fd, D], [r * K, 0], [K, D])
    out = torch.empty(S, B, D, dtype=torch.bfloat16, device="cuda")
    y = torch.empty(S // tp, B, D, dtype=torch.bfloat16, device="cuda")
    n = S // tp

    def chunks():
        for j in range(tp):
            torch.matmul(h[j * n:(j + 1) * n], w2, out=out[j * n:(j + 1) * n])

    def mm_rs():
        torch.matmul(h, w2, out=out)
        dist.reduce_scatter_tensor(y, out)

    c.emit(case=case, impl="compute", ms=median_ms(lambda: torch.matmul(h, w2, out=out), c.iters))
    c.emit(case=case, impl="chunks", ms=median_ms(chunks, c.iters))
    c.emit(case=case, impl="torch", ms=median_ms(mm_rs, c.iters))
    mm_rs()
    compare(c, case, y, [S, B, D], 0)
    if c.symm:
        f = lambda: c.symm.fused_matmul_reduce_scatter(h, w2, "sum", 0, c.group)
        run_asynctp(c, case, f, y)


def time_local_and_tp(c, case, local, tp_run):
    """Cases b, c, d: times the local computation alone and the whole TP
    step, then runs the step once more for the output to compare; returns
    what it returns."""
    c.emit(case=case, impl="compute", ms=median_ms(local, c.iters))
    c.emit(case=case, impl="torch", ms=median_ms(tp_run, c.iters))
    return tp_run()


def gathered_x_w1(c, S, B, D):
    """The input of cases b and d: this rank's x [S/tp, B, D], its columns of
    w1 [D, 4D] and the all-gathered x (filled once)."""
    tp, r, Fl = c.tp, c.r, 4 * D // c.tp
    xt = fill(1000, [S, B, D], [r * S // tp, 0, 0], [S // tp, B, D])
    w1 = fill(1001, [D, 4 * D], [0, r * Fl], [D, Fl])
    xa = torch.empty(S, B, D, dtype=torch.bfloat16, device="cuda")
    dist.all_gather_into_tensor(xa, xt)
    return xt, w1, xa


def run_asynctp(c, case, f, y):
    try:
        ms = median_ms(f, c.iters)
        c.emit(case=case, impl="asynctp", ms=ms, err_vs_torch=rel_err(f(), y))
    except Exception as e:
        c.emit(case=case, impl="asynctp", note="failed: %s" % e)


def compare(c, case, y, gdims, split, to_sbd=False):
    path = c.dumps.get(case)
    if not path or not os.path.exists(path):
        return
    o = ours(path, gdims, split, c.r, c.tp)
    if to_sbd:  # ours is [B, S/tp, D]; torch's [S/tp, B, D]
        o = o.transpose(0, 1)
    c.emit(case=case, impl="ours-vs-torch", err=rel_err(o, y), dump=path)


def case_b(c, case="b", B=32, S=4096, D=4096):
    """The MLP block (bench/mlp_sbd.cf, [S, B, D]): all-gather, GEMM,
    gelu, GEMM, reduce-scatter."""
    tp, r, Fl = c.tp, c.r, 4 * D // c.tp
    xt, w1, xa = gathered_x_w1(c, S, B, D)
    w2 = fill(1002, [4 * D, D], [r * Fl, 0], [Fl, D])
    y = torch.empty(S // tp, B, D, dtype=torch.bfloat16, device="cuda")

    def local():
        return torch.matmul(F.gelu(torch.matmul(xa, w1), approximate="tanh"), w2)

    def tp_run():
        dist.all_gather_into_tensor(xa, xt)
        dist.reduce_scatter_tensor(y, local())

    time_local_and_tp(c, case, local, tp_run)
    compare(c, case, y, [S, B, D], 0)
    if c.symm:
        def f():
            _, (h,) = c.symm.fused_all_gather_matmul(xt, [w1], 0, c.group)
            g = F.gelu(h, approximate="tanh")
            return c.symm.fused_matmul_reduce_scatter(g, w2, "sum", 0, c.group)
        run_asynctp(c, case, f, y)


def case_d(c, case="d", B=32, S=4096, D=4096):
    """bench/ag_gemm.cf, [S, B, D]: all-gather, GEMM, gelu."""
    xt, w1, xa = gathered_x_w1(c, S, B, D)

    def local():
        return F.gelu(torch.matmul(xa, w1), approximate="tanh")

    def tp_run():
        dist.all_gather_into_tensor(xa, xt)
        return local()

    # ours is not dumped: 17 GB of doubles; case b checks the same ops
    h = time_local_and_tp(c, case, local, tp_run)
    if c.symm:
        def f():
            _, (g,) = c.symm.fused_all_gather_matmul(xt, [w1], 0, c.group)
            return F.gelu(g, approximate="tanh")
        run_asynctp(c, case, f, h)


def case_c(c, case="c", B=16, S=4096, D=4096, H=32):
    """Attention: all-gather, Q/K/V, causal SDPA, out-projection, RS."""
    tp, r, Dl, hl, dh = c.tp, c.r, D // c.tp, H // c.tp, D // H
    x = fill(1000, [B, S, D], [0, r * S // tp, 0], [B, S // tp, D])
    xt = x.transpose(0, 1).contiguous()
    del x
    wq, wk, wv = (fill(1001 + i, [D, D], [0, r * Dl], [D, Dl]) for i in range(3))
    wo = fill(1004, [D, D], [r * Dl, 0], [Dl, D])
    xa = torch.empty(S, B, D, dtype=torch.bfloat16, device="cuda")
    y = torch.empty(S // tp, B, D, dtype=torch.bfloat16, device="cuda")
    dist.all_gather_into_tensor(xa, xt)

    def heads(t):  # [S, B, Dl] -> [B, hl, S, dh]
        return t.view(S, B, hl, dh).permute(1, 2, 0, 3)

    def attn(q, k, v):
        o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return o.permute(2, 0, 1, 3).reshape(S, B, Dl)

    def local():
        return torch.matmul(attn(xa @ wq, xa @ wk, xa @ wv), wo)

    def tp_run():
        dist.all_gather_into_tensor(xa, xt)
        dist.reduce_scatter_tensor(y, local())

    time_local_and_tp(c, case, local, tp_run)
    compare(c, case, y, [B, S, D], 1, to_sbd=True)
    if c.symm:
        def f():
            _, (q, k, v) = c.symm.fused_all_gather_matmul(xt, [wq, wk, wv], 0, c.group)
            return c.symm.fused_matmul_reduce_scatter(attn(q, k, v), wo, "sum", 0, c.group)
        run_asynctp(c, case, f, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--dump", action="append", default=[])
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.backends.cuda.matmul.allow_tf32 = False
    c = Ctx(args)
    c.note("torch", torch.__version__)
    for case in args.case or ["a", "b", "c", "d"]:
        try:
            {"a": case_a, "b": case_b, "c": case_c, "d": case_d}[case](c)
        except Exception as e:
            c.emit(case=case, impl="error", note=repr(e))
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
