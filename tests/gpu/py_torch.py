"""py_torch.py DIR: the module cfc --emit=py wrote into DIR (mlp with
--backward, one rank), its library built against libcfrt_cuda, run on
torch CUDA tensors: the same bits as on NumPy arrays through the same
library, the reference's within 1e-5, PyTorch's own ops (gelu(x @ w1) @ w2
and its autograd gradients, in float64) within 1e-5, torch's pending
work on its current
stream seen by the pass, and the wrong tensors refused. One line per
check, "torch: NAME ok" or "torch: NAME FAIL ...". (GPU machine.)"""
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[1])
import mlp  # noqa: E402


def report(name, ok, why=""):
    print("torch: %s %s" % (name, "ok" if ok else "FAIL " + why), flush=True)


def raises(kind, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except kind as e:
        print("   (%s: %s)" % (kind.__name__, e))
        return True
    except Exception as e:  # noqa: BLE001
        print("   (%s, not %s: %s)" % (type(e).__name__, kind.__name__, e))
    return False


with mlp.Model(device=0) as m:
    report("the library runs on CUDA", m.gpu, m.backend)
    names = mlp.INPUTS + mlp.WEIGHTS
    whole = {t.cname: mlp.seeded(t.cname) for t in names}
    ins = {k: m.shard(k, v) for k, v in whole.items()}
    dy = m.shard("d_y", mlp.seeded("d_y"))
    y = m.forward(**ins)
    g = m.backward(d_y=dy)
    ry = m.reference_forward(**whole)
    rg = m.reference_backward(d_y=mlp.seeded("d_y"))
    e = np.abs(y - ry).max() / np.abs(ry).max()
    report("NumPy on the CUDA build: the reference's output", e <= 1e-5, "%.3e" % e)
    eg = max(np.abs(g[k] - rg[k]).max() / np.abs(rg[k]).max() for k in g)
    report("NumPy on the CUDA build: the reference's gradients", eg <= 1e-5, "%.3e" % eg)

    tins = {k: torch.from_numpy(v).cuda() for k, v in ins.items()}
    ty = m.forward(**tins)
    report("the output is a CUDA tensor of the shard's shape",
           isinstance(ty, torch.Tensor) and ty.is_cuda and tuple(ty.shape) == y.shape)
    report("the same output as NumPy's", np.array_equal(ty.cpu().numpy(), y))
    tg = m.backward(d_y=torch.from_numpy(dy).cuda())
    report("the same gradients as NumPy's",
           all(np.array_equal(tg[k].cpu().numpy(), g[k]) for k in g))
    # against PyTorch's own ops: mlp.cf's forward (tp = 1: its collectives
    # are the identity) and its gradients by autograd, in float64
    t64 = {k: torch.from_numpy(v).cuda().double().requires_grad_() for k, v in whole.items()}
    yt = torch.nn.functional.gelu(t64["x"] @ t64["w1"], approximate="tanh") @ t64["w2"]
    yt.backward(torch.from_numpy(mlp.seeded("d_y")).cuda().double())
    e = ((ty.double() - yt).abs().max() / yt.abs().max()).item()
    report("PyTorch's ops (gelu(x @ w1) @ w2, float64): the output", e <= 1e-5, "%.3e" % e)
    for k in tg:
        want = t64[k[2:]].grad
        e = ((tg[k].double() - want).abs().max() / want.abs().max()).item()
        report("PyTorch's autograd (float64): %s" % k, e <= 1e-5, "%.3e" % e)
    # work still queued on torch's stream when the pass starts
    big = torch.randn(4096, 4096, device="cuda")
    for _ in range(20):
        big = torch.tanh(big @ big)  # bounded: the sum below is finite
    x2 = tins["x"] * 2 + (big.sum() * 0)
    ty2 = m.forward(**dict(tins, x=x2))
    y2 = m.forward(**dict(ins, x=ins["x"] * 2))
    report("the pass sees work pending on torch's stream",
           np.array_equal(ty2.cpu().numpy(), y2))
    x = mlp.INPUTS[0].cname
    report("a CPU torch tensor: TypeError", raises(TypeError, m.forward,
                                                   **dict(tins, x=tins[x].cpu())))
    report("a float64 tensor: TypeError", raises(TypeError, m.forward,
                                                 **dict(tins, x=tins[x].double())))
    report("NumPy and torch mixed: TypeError", raises(TypeError, m.forward,
                                                      **dict(tins, x=ins[x])))
    report("a non-contiguous tensor: ValueError", raises(
        ValueError, m.forward, **dict(tins, x=torch.zeros(
            tins[x].shape[:-1] + (2 * tins[x].shape[-1],), device="cuda")[..., ::2])))
