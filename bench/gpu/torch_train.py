"""torch_train.py: the PyTorch autograd reference of the MLP block's
training step (case b, bench/mlp_sbd.cf at tp = 1: [S, B, D], bf16, one
GPU): forward y = gelu(x @ w1, tanh) @ w2, then y.backward(dy) writing the
.grad of x, w1 and w2. Eager and under torch.compile; prints the medians
(ITERS runs after WARMUP) of the forward alone and of the step, and the
step's peak memory, one line a mode (bench/gpu/torch_step.py says what).

usage: python3 torch_train.py [ITERS [S B D]] [--S S --B B --D D]
         [--iters N] [--warmup N] [--no-compile] [--device cuda|cpu]
The positional form is bench/gpu/train.sh's of before; the options win
where both are given.
"""
import torch.nn.functional as F

import torch_step as ts

ap = ts.options(__doc__, (("S", 4096), ("B", 16), ("D", 4096)))
ap.add_argument("pos", nargs="*", type=int, help="ITERS [S B D]")
a = ap.parse_args()
if len(a.pos) not in (0, 1, 4):
    ap.error("positional arguments: ITERS, or ITERS S B D")
if a.pos:
    a.iters = a.pos[0]
if len(a.pos) == 4:
    a.S, a.B, a.D = a.pos[1:]
S, B, D, dev = a.S, a.B, a.D, a.device
F4 = 4 * D
ts.setup(dev)
x = ts.rnd(dev, S, B, D, grad=True)
w1 = ts.rnd(dev, D, F4, scale=1 / 64, grad=True)
w2 = ts.rnd(dev, F4, D, scale=1 / 128, grad=True)
dy = ts.rnd(dev, S, B, D)


def mlp(x_, w1_, w2_):
    return F.gelu(x_ @ w1_, approximate="tanh") @ w2_


print(f"torch what=sizes S={S} B={B} D={D} F={F4}", flush=True)
ts.run_modes("torch_train", mlp, (x,), (w1, w2), dy, a)
