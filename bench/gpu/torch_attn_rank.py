"""torch_attn_rank.py: one rank's compute of the GPU benchmark's case (c)
in PyTorch, beside bench/attn_rank.cf (bench/gpu/block1.sh casec): x [B, S,
D] bf16 projected onto HL heads of Dh (wq, wk, wv [D, HL * Dh]), the heads
split, causal F.scaled_dot_product_attention (whichever backend PyTorch
picks), the heads merged and projected back (wo [HL * Dh, D]); no
communication. Eager and under torch.compile; the forward alone and the
training step (backward into x and the four weights), and the step's peak
memory, one line a mode (bench/gpu/torch_step.py says what).

Case (c) at tp = 4: B 16, S 4096, D 4096, 32 heads of 128, so a rank's
share is HL 8 heads of Dh 128 over the whole gathered sequence.

usage: python3 torch_attn_rank.py [--B 16 --S 4096 --D 4096 --HL 8 --Dh 128]
         [--iters N] [--warmup N] [--no-compile] [--device cuda|cpu]
"""
import math

import torch
import torch.nn.functional as F

import torch_step as ts

a = ts.options(__doc__, (("B", 16), ("S", 4096), ("D", 4096), ("HL", 8), ("Dh", 128))).parse_args()
B, S, D, HL, Dh, dev = a.B, a.S, a.D, a.HL, a.Dh, a.device
E = HL * Dh
ts.setup(dev)
x = ts.rnd(dev, B, S, D, grad=True)
W = [ts.rnd(dev, D, E, scale=2 / D**0.5, grad=True) for _ in range(3)]
W.append(ts.rnd(dev, E, D, scale=2 / E**0.5, grad=True))
dy = ts.rnd(dev, B, S, D)

if hasattr(F, "scaled_dot_product_attention"):
    sdpa, how = F.scaled_dot_product_attention, "sdpa"
else:  # torch before 2.0 (only to try the script on a CPU)
    how = "manual"

    def sdpa(q, k, v, is_causal):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
        return torch.softmax(s.float().masked_fill(~mask, float("-inf")), -1).to(q.dtype) @ v


def heads(t):  # [B, S, HL * Dh] -> [B, HL, S, Dh]
    return t.view(B, S, HL, Dh).transpose(1, 2)


def attn(x_, wq, wk, wv, wo):
    o = sdpa(heads(x_ @ wq), heads(x_ @ wk), heads(x_ @ wv), is_causal=True)
    return o.transpose(1, 2).reshape(B, S, E) @ wo


print(f"torch what=sizes B={B} S={S} D={D} HL={HL} Dh={Dh} attention={how}", flush=True)
ts.run_modes("torch_attn_rank", attn, (x,), W, dy, a)
