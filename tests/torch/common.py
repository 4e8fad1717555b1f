"""common.py: what tests/torch/check.py and shapes.py share. Each checks the
llama module that cfc --emit=py wrote into a directory (libllama.so beside
it) against the same block in plain PyTorch (examples/torch/llama_ref.py),
same weights and inputs, f32 CPU tensors, under mpirun, one line per check:
"rank R: NAME ok" or "rank R: NAME FAIL why" on standard output and in
the log PREFIX.R (t-torch.sh and t-torch-shapes.sh count them).

    llama, llama_ref = common.load(DIR)
    common.open_log(PREFIX)        # or not: standard output only
    ref, whole_w = common.reference(llama_ref, D)
    ... common.report(name, ok), common.rel(got, want), common.raises(...)
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
WORLD = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
TOL = 1e-5
_log = None


def load(moddir):
    """The llama module in moddir and examples/torch/llama_ref.py; one
    thread of torch per rank."""
    sys.path.insert(0, moddir)
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))
    import llama  # noqa: E402
    import llama_ref  # noqa: E402
    torch.set_num_threads(1)
    return llama, llama_ref


def open_log(prefix):
    """report's lines go to PREFIX.R too."""
    global _log
    _log = open("%s.%d" % (prefix, RANK), "w")


def report(name, ok, why=""):
    line = "rank %d: %s %s%s" % (RANK, name, "ok" if ok else "FAIL ", "" if ok else why)
    print(line, flush=True)
    if _log:
        _log.write(line + "\n")
        _log.flush()


def rel(got, want):
    """max |got - want| / max |want| (torch tensors or NumPy arrays)."""
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    d = (got - want).abs().max().item()
    m = want.abs().max().item()
    return d / m if m > 0 else d


def raises(kind, text, fn, *a, **kw):
    """fn(*a, **kw) raises kind with text in its message (what else came
    is printed)."""
    try:
        fn(*a, **kw)
    except kind as e:
        if text in str(e):
            return True
        print("rank %d: %s says %r, not %r" % (RANK, kind.__name__, str(e), text), flush=True)
        return False
    except Exception as e:  # noqa: BLE001
        print("rank %d: %s, not %s: %s" % (RANK, type(e).__name__, kind.__name__, e), flush=True)
        return False
    print("rank %d: no %s (%s)" % (RANK, kind.__name__, text), flush=True)
    return False


def reference(llama_ref, D):
    """The plain-PyTorch block (the spec's sizes: 8 heads, 4 key/value
    heads, F = 128) and its weights by name, the same on every rank
    (seeded: the data the caller draws next is the same too)."""
    torch.manual_seed(1234)
    ref = llama_ref.LlamaBlock(D=D, H=8, KV=4, F=128)
    return ref, {k: v.detach().clone() for k, v in ref.named_parameters()}


def ref_grads(ref, x, dy):
    """The reference's output, d_x and weight gradients for whole x, dy."""
    ref.zero_grad(set_to_none=True)
    xr = x.clone().requires_grad_()
    y = ref(xr)
    y.backward(dy)
    return y.detach(), xr.grad, {k: p.grad.clone() for k, p in ref.named_parameters()}


def run(layer, x, dy):
    """The layer's forward and backward on this rank's shards of whole x
    and dy: its output and d_x (weight gradients land in .grad)."""
    xl = layer.shard("x", x).requires_grad_()
    yl = layer(xl)
    yl.backward(layer.shard("y", dy))
    return yl.detach(), xl.grad
