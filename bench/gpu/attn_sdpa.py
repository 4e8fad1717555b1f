"""attn_sdpa.py: PyTorch's scaled_dot_product_attention on one GPU, at the
shapes of bench/gpu/attn_probe.c: B=16, H=8, S=4096, Dh=128, causal, bf16,
[B,H,S,Dh] contiguous, forward and backward (torch.autograd.grad of dq,
dk, dv from dout: no accumulation into .grad), through SDPA's cuDNN
backend and its flash backend (torch.nn.attention.sdpa_kernel); then the
query-split steps, a quarter of the queries at offsets r S/4, r = 0..3.
SDPA has no query offset: a step is the same attention over the keys it
sees, (r + 1) S/4 of them with the causal diagonal at the bottom right,
given as a boolean mask (cuDNN backend: "sdpa-cudnn") or as
causal_lower_right (whatever kernel PyTorch picks for it:
"sdpa-lower-right").

Each time is the median of ITERS calls after 3 warm-ups, each between two
torch.cuda.synchronize() (as attn_probe.c's cfrt_wtime). Prints
"attn_probe: impl=IMPL shape=SHAPE dir=fwd|bwd ms=T", or "... ms=n/a
(why)" where a backend refuses the call.

usage: python3 attn_sdpa.py [--iters N]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, S, DH = 16, 8, 4096, 128


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    ms = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def report(impl, shape, direction, fn, iters):
    try:
        t = "%.3f" % median_ms(fn, iters)
    except Exception as e:  # a backend that refuses the shape
        t = "n/a (%s)" % str(e).splitlines()[0][:120]
    print("attn_probe: impl=%s shape=%s dir=%s ms=%s" % (impl, shape, direction, t),
          flush=True)


def fwd_bwd(q, k, v, dout, backend, **kw):
    """The forward and the backward of one SDPA call through backend."""
    def fwd():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    out = fwd()

    def bwd():
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    return fwd, bwd


def run(impl, shape, q, k, v, dout, backend, iters, **kw):
    try:
        fwd, bwd = fwd_bwd(q, k, v, dout, backend, **kw)
    except Exception as e:
        for d in ("fwd", "bwd"):
            print("attn_probe: impl=%s shape=%s dir=%s ms=n/a (%s)"
                  % (impl, shape, d, str(e).splitlines()[0][:120]), flush=True)
        return
    report(impl, shape, "fwd", fwd, iters)
    report(impl, shape, "bwd", bwd, iters)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")

    def t(*shape):
        return (torch.rand(*shape, device=dev, dtype=torch.bfloat16) * 2 - 1)

    q, k, v, g = (t(B, H, S, DH).requires_grad_(i < 3) for i in range(4))
    print("attn_probe: torch %s cudnn %s device %s" % (
        torch.__version__, torch.backends.cudnn.version(),
        torch.cuda.get_device_name()), flush=True)
    for impl, be in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
        run(impl, "full", q, k, v, g, be, a.iters, is_causal=True)
    from torch.nn.attention.bias import causal_lower_right
    sq = S // 4
    for r in range(4):
        sk = (r + 1) * sq
        qs = q.detach()[:, :, r * sq:(r + 1) * sq].contiguous().requires_grad_()
        ks = k.detach()[:, :, :sk].contiguous().requires_grad_()
        vs = v.detach()[:, :, :sk].contiguous().requires_grad_()
        gs = g[:, :, r * sq:(r + 1) * sq].contiguous()
        shape = "q/4@%d" % r
        mask = torch.ones(sq, sk, dtype=torch.bool, device=dev).tril(sk - sq)
        run("sdpa-cudnn", shape, qs, ks, vs, gs, SDPBackend.CUDNN_ATTENTION,
            a.iters, attn_mask=mask)
        bias = causal_lower_right(sq, sk)
        run("sdpa-lower-right", shape, qs, ks, vs, gs,
            [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
             SDPBackend.EFFICIENT_ATTENTION], a.iters, attn_mask=bias)


if __name__ == "__main__":
    main()
