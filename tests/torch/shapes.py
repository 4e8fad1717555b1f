"""shapes.py DIR --log PREFIX: a build of several sequence lengths
(cfc -D S=16,32: the llama module in DIR, libllama.so beside it) used at
both lengths in one process, under mpirun on CPU tensors: the torch Layer
and the NumPy Model against the same block in plain PyTorch
(examples/torch/llama_ref.py), forward and every gradient within 1e-5 at
each length; weight gradients of an S=16 and an S=32 micro-batch
accumulate in .grad; a length the build does not have raises ValueError
naming the tensor, the dimension and the sizes built, and the job goes
on. One line per check, "rank R: NAME ok" or "rank R: NAME FAIL why"
(tests/t-torch-shapes.sh counts them)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import TOL, raises, rel, report  # noqa: E402
import common  # noqa: E402

args = sys.argv[1:]
llama, llama_ref = common.load(args[0])
common.open_log(args[args.index("--log") + 1])


lengths = sorted(v.sizes["S"] for v in llama.VARIANTS)
report("the module carries the variants S = %s" % lengths, lengths == [16, 32] and
       [v.prefix for v in llama.VARIANTS] == ["llama_S16", "llama_S32"])
B, _, D = llama._tensor("x").dims
tp = dict(llama.GROUPS)["tp"]
ref, whole_w = common.reference(llama_ref, D)  # every rank: the same weights and data
data = {S: (torch.randn(B, S, D), torch.randn(B, S, D)) for S in lengths}


def ref_grads(x, dy):
    return common.ref_grads(ref, x, dy)


want = {S: ref_grads(*data[S]) for S in lengths}
bad_S = 24
bad_msg = ("input x: shape (%d, %d, %d): dimension 1 is %d, but llama is built for %d or %d "
           "there" % (B, bad_S // tp, D, bad_S // tp, 16 // tp, 32 // tp))

# -- the NumPy Model: this rank's shards, each length in turn and back
with llama.Model() as m:
    w = {k: m.shard(k, v.numpy()) for k, v in whole_w.items()}
    for S in lengths + lengths[:1]:
        x, dy = data[S]
        y = m.forward(m.shard("x", x.numpy()), **w)
        g = m.backward(m.shard("y", dy.numpy()))
        y0, dx0, dw0 = want[S]
        ey = rel(y, m.shard("y", y0.numpy()))
        ex = rel(g["d_x"], m.shard("x", dx0.numpy()))
        m.zero_grad()
        ew = max(rel(g["d_" + k], m.shard(k, v.numpy())) for k, v in dw0.items())
        report("Model at S = %d: forward (%.1e), d_x (%.1e), every weight gradient (%.1e) = "
               "plain PyTorch's within %g" % (S, ey, ex, ew, TOL), max(ey, ex, ew) <= TOL)
    # the reference passes (whole tensors) pick their variant too
    x, dy = data[32]
    yr = m.reference_forward(x.numpy(), **{k: v.numpy() for k, v in whole_w.items()})
    e = rel(yr, want[32][0])
    report("Model.reference_forward at S = 32 = plain PyTorch's within %g (%.1e)" % (TOL, e),
           e <= TOL)
    xb = np.zeros((B, bad_S // tp, D), np.float32)
    ok = raises(ValueError, "llama.forward: " + bad_msg, m.forward, xb, **w)
    ok &= raises(ValueError, "llama.shard: input x: shape (%d, %d, %d): dimension 1 is %d, but "
                 "llama is built for 16 or 32 there (whole" % (B, bad_S, D, bad_S), m.shard, "x",
                 np.zeros((B, bad_S, D), np.float32))
    x, dy = data[16]
    y = m.forward(m.shard("x", x.numpy()), **w)
    ok &= raises(ValueError, "llama.backward: output gradient d_y: shape", m.backward,
                 m.shard("y", data[32][1].numpy()))
    e = rel(y, m.shard("y", want[16][0].numpy()))
    report("Model: an unbuilt length raises ValueError naming x, its dimension 1 and the sizes "
           "built; a d_y of another length than the forward's raises; the model runs on (%.1e)"
           % e, ok and e <= TOL)

# -- the torch Layer
layer = llama.Layer()
layer.load_whole(whole_w)


def run(S):
    return common.run(layer, *data[S])


for S in lengths + lengths[:1]:
    layer.zero_grad(set_to_none=True)
    yl, dxl = run(S)
    y0, dx0, dw0 = want[S]
    ey = rel(yl, layer.shard("y", y0))
    ex = rel(dxl, layer.shard("x", dx0))
    ew = {k: rel(getattr(layer, k).grad, layer.shard(k, g)) for k, g in dw0.items()}
    worst = max(ew, key=ew.get)
    report("Layer at S = %d: forward (%.1e), d_x (%.1e), every weight's .grad (worst %s %.1e) = "
           "plain PyTorch's within %g" % (S, ey, ex, worst, ew[worst], TOL),
           max(ey, ex, ew[worst]) <= TOL)

# micro-batches of both lengths: their weight gradients add up in .grad
layer.zero_grad(set_to_none=True)
run(16)
run(32)
ew = {k: rel(getattr(layer, k).grad, layer.shard(k, want[16][2][k] + want[32][2][k]))
      for k in whole_w}
worst = max(ew, key=ew.get)
report("Layer: an S = 16 and an S = 32 micro-batch accumulate in .grad = the sum of plain "
       "PyTorch's (worst %s %.1e)" % (worst, ew[worst]), ew[worst] <= TOL)

# two forwards of different lengths before their backwards
layer.zero_grad(set_to_none=True)
xl = {S: layer.shard("x", data[S][0]).requires_grad_() for S in lengths}
yl = {S: layer(xl[S]) for S in lengths}
for S in reversed(lengths):
    yl[S].backward(layer.shard("y", data[S][1]))
e = max(rel(xl[S].grad, layer.shard("x", want[S][1])) for S in lengths)
report("Layer: forwards at S = 16 and 32, then their backwards in reverse order: d_x of each "
       "(%.1e)" % e, e <= TOL)

ok = raises(ValueError, "llama.forward: " + bad_msg, layer, torch.zeros(B, bad_S // tp, D))
ok &= raises(ValueError, "llama.shard: input x: shape (%d, %d, %d): dimension 1 is %d" % (
    B, bad_S, D, bad_S), layer.shard, "x", torch.zeros(B, bad_S, D))
ok &= raises(ValueError, "llama.forward: input x: shape (%d, 16, %d), expected" % (B, D + 1),
             layer, torch.zeros(B, 16, D + 1))
layer.zero_grad(set_to_none=True)
yl, _ = run(32)
e = rel(yl, layer.shard("y", want[32][0]))
report("Layer: an unbuilt length raises ValueError naming x, its dimension 1 and the sizes "
       "built (another wrong dimension the ordinary shape error); the layer runs on (%.1e)" % e,
       ok and e <= TOL)
report("done", True)
