"""llama_ref.py: the Llama block of examples/llama.cf written in plain
PyTorch (torch ops and their autograd), whole tensors on one process: the
reference the generated layer is checked against (tests/t-torch.sh) and
the block train.py swaps in with --impl=torch.

The formulas are written from their definitions, not from cfrt's code:
RMSNorm x / sqrt(mean(x^2) + eps) * g; RoPE in the rotate-half layout of
GPT-NeoX and Llama in Hugging Face (position p of the whole sequence,
theta_j = base^(-2j/Dh)); grouped-query attention (query head h reads
key/value head h // (H / KV)) with a causal mask and scale 1/sqrt(Dh);
SwiGLU silu(x wg) * (x wu) wd. Norms, softmax and the rotary angles are
computed in float32 for bf16 and f16 blocks, as cfrt accumulates them.
Parameter names are the C names of the spec's weights (g1, attn0_wq, ...),
so state dicts map one to one onto llama.Layer's load_whole()."""
import math

import torch
from torch import nn

WEIGHTS = ("g1", "g2", "attn0_wq", "attn0_wk", "attn0_wv", "attn0_wo",
           "mlp0_wg", "mlp0_wu", "mlp0_wd")


def shapes(D, H, KV, F):
    Dh = D // H
    return {"g1": (D,), "g2": (D,), "attn0_wq": (D, H * Dh), "attn0_wk": (D, KV * Dh),
            "attn0_wv": (D, KV * Dh), "attn0_wo": (H * Dh, D), "mlp0_wg": (D, F),
            "mlp0_wu": (D, F), "mlp0_wd": (F, D)}


def rmsnorm(x, g, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * g


def rope(t, base):
    """t: [B, n, S, Dh], position = index along S."""
    d, s = t.shape[-1], t.shape[-2]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)
    ang = torch.arange(s, dtype=torch.float64, device=t.device)[:, None] * inv[None, :]
    cos = torch.cat([torch.cos(ang)] * 2, dim=-1).to(t.dtype)
    sin = torch.cat([torch.sin(ang)] * 2, dim=-1).to(t.dtype)
    half = torch.cat([-t[..., d // 2:], t[..., :d // 2]], dim=-1)
    return t * cos + half * sin


def attention(q, k, v):
    """q: [B, H, S, Dh], k and v: [B, KV, S, Dh]; causal. torch's fused
    scaled_dot_product_attention where torch has it (>= 2.0) and the
    tensors are CUDA ones; else written out, softmax in float32."""
    g = q.shape[1] // k.shape[1]
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None and q.is_cuda:
        try:
            return sdpa(q, k, v, is_causal=True, enable_gqa=True)
        except TypeError:  # torch < 2.5: no enable_gqa
            return sdpa(q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1),
                        is_causal=True)
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    S = q.shape[-2]
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, dim=-1).to(q.dtype) @ v)


class LlamaBlock(nn.Module):
    """y = h + mlp(rmsnorm(h, g2)), h = x + attn(rmsnorm(x, g1)) on x: [B, S, D]."""

    def __init__(self, D=64, H=8, KV=4, F=128, eps=1e-6, base=10000.0, dtype=torch.float32,
                 device=None):
        super().__init__()
        self.D, self.H, self.KV, self.F, self.eps, self.base = D, H, KV, F, eps, base
        for name, shape in shapes(D, H, KV, F).items():
            if len(shape) == 1:
                w = torch.ones(shape, dtype=torch.float64)
            else:
                w = (torch.rand(shape, dtype=torch.float64) * 2 - 1) / math.sqrt(shape[0])
            self.register_parameter(name, nn.Parameter(w.to(device=device, dtype=dtype)))

    def heads(self, t, n):  # [B, S, n*Dh] -> [B, n, S, Dh]
        B, S, _ = t.shape
        return t.reshape(B, S, n, -1).transpose(1, 2)

    def forward(self, x):
        B, S, _ = x.shape
        a = rmsnorm(x, self.g1, self.eps)
        q = rope(self.heads(a @ self.attn0_wq, self.H), self.base)
        k = rope(self.heads(a @ self.attn0_wk, self.KV), self.base)
        v = self.heads(a @ self.attn0_wv, self.KV)
        o = attention(q, k, v).transpose(1, 2).reshape(B, S, -1)
        h = x + o @ self.attn0_wo
        m = rmsnorm(h, self.g2, self.eps)
        return h + (torch.nn.functional.silu(m @ self.mlp0_wg) * (m @ self.mlp0_wu)) @ self.mlp0_wd
