"""torch_train.py: the PyTorch autograd reference of the MLP block's
training step (case b, [S, B, D], bf16, one GPU): forward
y = gelu(x @ w1, tanh) @ w2, then torch.autograd.backward(y, dy) writing
dx, dw1 and dw2. Prints the medians (CUDA events, ITERS runs after 3
warm-ups) of the forward alone and of forward + backward.

usage: python3 torch_train.py [ITERS [S B D]]
"""
import statistics
import sys

import torch
import torch.nn.functional as F

it = int(sys.argv[1]) if len(sys.argv) > 1 else 20
S, B, D = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (4096, 16, 4096)
F4 = 4 * D
torch.manual_seed(0)
dev = "cuda"
x = (torch.rand(S, B, D, device=dev) - 0.5).to(torch.bfloat16).requires_grad_()
w1 = ((torch.rand(D, F4, device=dev) - 0.5) / 64).to(torch.bfloat16).requires_grad_()
w2 = ((torch.rand(F4, D, device=dev) - 0.5) / 128).to(torch.bfloat16).requires_grad_()
dy = (torch.rand(S, B, D, device=dev) - 0.5).to(torch.bfloat16)


def fwd():
    return torch.matmul(F.gelu(torch.matmul(x, w1), approximate="tanh"), w2)


def timed(fn):
    ts = []
    for i in range(it + 3):
        x.grad = w1.grad = w2.grad = None
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        if i >= 3:
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def step():
    y = fwd()
    torch.autograd.backward(y, dy)


with torch.no_grad():
    f_ms = timed(fwd)
s_ms = timed(step)
print(f"torch fwd_ms={f_ms:.3f} fwd_bwd_ms={s_ms:.3f} bwd_ms={s_ms - f_ms:.3f} torch={torch.__version__}")
