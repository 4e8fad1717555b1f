"""torch_layer.py: the Llama layer of examples/llama.cf written in plain
PyTorch, timed on one GPU beside the generated code (bench/gpu/layer1.sh).

The layer, [B, S, D] activations, bf16, as Hugging Face's Llama writes it
and as llama.cf computes it:
    h = x + attn(rmsnorm(x, g1));  y = h + mlp(rmsnorm(h, g2))
    attn: q = rope(split_heads(xn @ wq, H)), k = rope(split_heads(xn @ wk, KV)),
          v = split_heads(xn @ wv, KV), o = merge_heads(sdpa(q, k, v, causal,
          GQA)) @ wo
    mlp:  (silu(xn @ wg) * (xn @ wu)) @ wd
F.rms_norm, rotate-half rope with cos/sin tables made once,
F.scaled_dot_product_attention (enable_gqa, is_causal).

What it prints, one "key=value ..." line each (layer1.sh's report reads them):
  torch what=step mode=eager|compile fwd_ms= step_ms= peak_mb=
      the whole layer: forward alone, and forward + backward (autograd,
      dy given), medians of ITERS runs after warm-ups, CUDA events; peak_mb
      the allocator's high-water mark of a step with weights, their .grad,
      x, dy and everything autograd saves
  torch what=op op=NAME kind=gemm|attention|memory fwd_ms= bwd_ms= flop= bytes=
      each op of the layer run alone (forward, then its backward by
      torch.autograd.grad), medians; flop for GEMMs and attention
      (causal: half), bytes the HBM traffic of a memory-bound op
  torch what=attn backend=cudnn|flash|default fwd_ms= bwd_ms=
      SDPA with each backend that runs here (the limit for attention is
      cuDNN's)
  torch what=hbm gbps=   the bandwidth a large device copy reaches (the limit
      for memory-bound ops)

usage: python3 torch_layer.py --B 1 --S 4096 --D 4096 --H 32 --KV 8 --Dh 128 --F 14336
         [--iters 20] [--no-compile] [--no-ops]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
for k, v in (("B", 1), ("S", 4096), ("D", 4096), ("H", 32), ("KV", 8), ("Dh", 128), ("F", 14336),
             ("iters", 20)):
    ap.add_argument("--" + k, type=int, default=v)
ap.add_argument("--no-compile", action="store_true")
ap.add_argument("--no-ops", action="store_true")
a = ap.parse_args()
B, S, D, H, KV, Dh, FF, IT = a.B, a.S, a.D, a.H, a.KV, a.Dh, a.F, a.iters
dev, dt = "cuda", torch.bfloat16
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True


def rnd(*shape, scale=1.0, grad=False):
    t = ((torch.rand(*shape, device=dev) - 0.5) * scale).to(dt)
    return t.requires_grad_(grad)


def timed(fn, iters=IT, warm=3):
    ts = []
    for i in range(iters + warm):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        if i >= warm:
            ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


# rope tables: angle i * base^(-2j/Dh) for the pair (j, j + Dh/2)
inv = 10000.0 ** (-torch.arange(0, Dh // 2, device=dev, dtype=torch.float32) * 2 / Dh)
ang = torch.outer(torch.arange(S, device=dev, dtype=torch.float32), inv)
COS = torch.cat([ang.cos(), ang.cos()], -1).to(dt)
SIN = torch.cat([ang.sin(), ang.sin()], -1).to(dt)


def rope(t):  # t: [B, heads, S, Dh]
    h = Dh // 2
    rot = torch.cat([-t[..., h:], t[..., :h]], -1)
    return t * COS + rot * SIN


def split_heads(t, n):
    return t.view(B, S, n, Dh).transpose(1, 2)


def layer(x, w):
    xn = F.rms_norm(x, (D,), w["g1"], 1e-6)
    q = rope(split_heads(xn @ w["wq"], H))
    k = rope(split_heads(xn @ w["wk"], KV))
    v = split_heads(xn @ w["wv"], KV)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    h = x + o.transpose(1, 2).reshape(B, S, H * Dh) @ w["wo"]
    hn = F.rms_norm(h, (D,), w["g2"], 1e-6)
    return h + (F.silu(hn @ w["wg"]) * (hn @ w["wu"])) @ w["wd"]


W = {
    "g1": rnd(D, scale=0.2, grad=True), "g2": rnd(D, scale=0.2, grad=True),
    "wq": rnd(D, H * Dh, scale=2 / D**0.5, grad=True),
    "wk": rnd(D, KV * Dh, scale=2 / D**0.5, grad=True),
    "wv": rnd(D, KV * Dh, scale=2 / D**0.5, grad=True),
    "wo": rnd(H * Dh, D, scale=2 / D**0.5, grad=True),
    "wg": rnd(D, FF, scale=2 / D**0.5, grad=True),
    "wu": rnd(D, FF, scale=2 / D**0.5, grad=True),
    "wd": rnd(FF, D, scale=2 / FF**0.5, grad=True),
}
with torch.no_grad():
    for n in ("g1", "g2"):
        W[n] += 1
x = rnd(B, S, D, grad=True)
dy = rnd(B, S, D)


def step_of(fn):
    def fwd():
        with torch.no_grad():
            fn(x, W)

    def step():
        for t in list(W.values()) + [x]:
            t.grad = None
        fn(x, W).backward(dy)

    return fwd, step


def peak_of(step):
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20


def run_step(mode, fn):
    fwd, step = step_of(fn)
    f, s = timed(fwd), timed(step)
    print(f"torch what=step mode={mode} fwd_ms={f:.4f} step_ms={s:.4f} peak_mb={peak_of(step):.1f}",
          flush=True)


run_step("eager", layer)
if not a.no_compile:
    try:
        run_step("compile", torch.compile(layer, fullgraph=True))
    except Exception as e:  # a torch without a working inductor here
        print(f"torch what=step mode=compile error={type(e).__name__}", flush=True)
        print(f"torch_layer: compile failed: {e}", file=sys.stderr)

if a.no_ops:
    sys.exit(0)

# -- the HBM bandwidth a large copy reaches
def hbm_gbps(n=1 << 30):
    src = torch.empty(n, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return 2 * n / timed(lambda: dst.copy_(src)) / 1e6


print(f"torch what=hbm gbps={hbm_gbps():.1f}", flush=True)

# -- each op alone: (name, kind, inputs, f(*inputs), flop, bytes of fwd)
E = 2  # bytes per element
M = B * S
xn = rnd(B, S, D, grad=True)
qh = rnd(B, H, S, Dh, grad=True)
kh = rnd(B, KV, S, Dh, grad=True)
vh = rnd(B, KV, S, Dh, grad=True)
a1 = rnd(B, S, FF, grad=True)
a2 = rnd(B, S, FF, grad=True)
o4 = rnd(B, H, S, Dh, grad=True)


def gemm(n, wn, k, nout):
    w = W[wn]
    return (n, "gemm", (xn if k == D else rnd(B, S, k, grad=True), w), lambda a_, b_: a_ @ b_,
            2.0 * M * k * nout, E * (M * k + k * nout + M * nout))


ops = [
    ("rmsnorm", "memory", (x, W["g1"]), lambda t, g: F.rms_norm(t, (D,), g, 1e-6), 0, E * 2 * M * D),
    gemm("gemm_q", "wq", D, H * Dh),
    gemm("gemm_k", "wk", D, KV * Dh),
    gemm("gemm_v", "wv", D, KV * Dh),
    ("rope_q", "memory", (qh,), rope, 0, E * 2 * M * H * Dh),
    ("rope_k", "memory", (kh,), rope, 0, E * 2 * M * KV * Dh),
    ("attention", "attention", (qh, kh, vh),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
     4.0 * B * H * S * S * Dh / 2, 0),
    ("merge_heads", "memory", (o4,), lambda o: o.transpose(1, 2).reshape(B, S, H * Dh), 0,
     E * 2 * M * H * Dh),
    gemm("gemm_o", "wo", H * Dh, D),
    ("residual_add", "memory", (x, xn), lambda p, q: p + q, 0, E * 3 * M * D),
    gemm("gemm_gate", "wg", D, FF),
    gemm("gemm_up", "wu", D, FF),
    ("swiglu", "memory", (a1, a2), lambda p, q: F.silu(p) * q, 0, E * 3 * M * FF),
    gemm("gemm_down", "wd", FF, D),
]
for name, kind, ins, f, flop, nbytes in ops:
    out = f(*ins)
    g = torch.rand_like(out)
    fwd_ms = timed(lambda: f(*ins))
    bwd_ms = timed(lambda: torch.autograd.grad(out, ins, g, retain_graph=True))
    print(f"torch what=op op={name} kind={kind} fwd_ms={fwd_ms:.4f} bwd_ms={bwd_ms:.4f} "
          f"flop={flop:.6g} bytes={nbytes:.6g}", flush=True)

# -- SDPA by backend: the limit for attention is cuDNN's
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

# cuDNN's SDPA takes no enable_gqa: it gets K and V expanded to H heads
# (the same FLOPs; the expansion is outside the timing)
ke = kh.detach().repeat_interleave(H // KV, 1).requires_grad_()
ve = vh.detach().repeat_interleave(H // KV, 1).requires_grad_()
for bname, be, kk, vv, gqa in (("cudnn", SDPBackend.CUDNN_ATTENTION, ke, ve, False),
                               ("flash", SDPBackend.FLASH_ATTENTION, kh, vh, True)):
    try:
        with sdpa_kernel(be):
            f = lambda: F.scaled_dot_product_attention(qh, kk, vv, is_causal=True, enable_gqa=gqa)
            out = f()
            g = torch.rand_like(out)
            fm = timed(f)
            bm = timed(lambda: torch.autograd.grad(out, (qh, kk, vv), g, retain_graph=True))
        print(f"torch what=attn backend={bname} fwd_ms={fm:.4f} bwd_ms={bm:.4f}", flush=True)
    except RuntimeError as e:
        print(f"torch what=attn backend={bname} error=unsupported", flush=True)
        print(f"torch_layer: sdpa {bname}: {str(e).splitlines()[0]}", file=sys.stderr)
