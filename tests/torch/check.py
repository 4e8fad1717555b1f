"""check.py DIR [options]: the torch layer of the llama module that cfc
--emit=py wrote into DIR (libllama.so beside it) against the same block
in plain PyTorch (examples/torch/llama_ref.py), same weights and inputs,
f32 CPU tensors, under mpirun. Each rank prints one line per check,
"rank R: NAME ok" or "rank R: NAME FAIL why"; t-torch.sh counts them.
  --grad MODE   the Layer's grad= ("auto": fused into .grad for an
                --accumulate build; "autograd")
  --accum       gradient accumulation: two micro-batches = one batch of both
  --errors      wrong tensors and groups raise, naming them; the layer runs
                on afterwards
  --groups      torch.distributed (gloo, a file store in DIR) and mpi4py:
                the spec's groups passed as process groups and
                communicators, checked
  --log PREFIX  the lines go to PREFIX.R too"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RANK as rank, TOL, WORLD as world, raises, rel, report  # noqa: E402
import common  # noqa: E402

args = sys.argv[1:]
llama, llama_ref = common.load(args[0])
opt = {a: args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
       for i, a in enumerate(args) if a.startswith("--")}
if "--log" in opt:
    common.open_log(opt["--log"])


X = llama._tensor("x")
B, S, D = X.dims
sizes = dict(llama.GROUPS)
ref, whole_w = common.reference(llama_ref, D)  # every rank: the same weights and data
xs = [torch.randn(B, S, D) for _ in range(2)]
dys = [torch.randn(B, S, D) for _ in range(2)]

groups = {}
if "--groups" in opt:
    import torch.distributed as dist
    from mpi4py import MPI
    dist.init_process_group("gloo", init_method="file://" + os.path.abspath(
        os.path.join(args[0], "store")), rank=rank, world_size=world)
    # tp: ranks {0, 1}, {2, 3}, ... as the grid makes them (tp fastest)
    tp = sizes["tp"]
    mine = None
    for base in range(0, world, tp):
        g = dist.new_group(list(range(base, base + tp)))
        if base <= rank < base + tp:
            mine = g
    groups["tp_group"] = mine
    if "dp" in sizes:
        groups["dp_group"] = MPI.COMM_WORLD.Split(rank % tp, rank)

layer = llama.Layer(grad=opt.get("--grad", "auto"), **groups)
layer.load_whole(whole_w)
report("the layer's parameters are the shards of the whole weights, by name", all(
    torch.equal(getattr(layer, k).detach(), layer.shard(k, v)) for k, v in whole_w.items()) and
    sorted(n for n, _ in layer.named_parameters()) == sorted(whole_w))


def ref_grads(x, dy):
    return common.ref_grads(ref, x, dy)


def run(x, dy):
    return common.run(layer, x, dy)


# -- forward and every gradient, one batch
y, dx, dw = ref_grads(xs[0], dys[0])
layer.zero_grad(set_to_none=True)
yl, dxl = run(xs[0], dys[0])
e = rel(yl, layer.shard("y", y))
report("forward = plain PyTorch's within %g (%.2e)" % (TOL, e), e <= TOL)
e = rel(dxl, layer.shard("x", dx))
report("d_x = plain PyTorch's within %g (%.2e)" % (TOL, e), e <= TOL)
ew = {k: rel(getattr(layer, k).grad, layer.shard(k, g)) for k, g in dw.items()}
worst = max(ew, key=ew.get)
report("every weight's .grad = plain PyTorch's within %g (worst %s %.2e)" % (TOL, worst, ew[worst]),
       ew[worst] <= TOL)
print("rank %d: errors: y %.2e, d_x %.2e, %s" % (rank, rel(yl, layer.shard("y", y)), e, " ".join(
    "%s %.2e" % kv for kv in sorted(ew.items()))), flush=True)

# -- checkpoints: unshard gives the whole weights back
report("unshard() of every weight = the whole weight loaded", all(
    torch.equal(layer.unshard(k), v) for k, v in whole_w.items()))

if "--accum" in opt:
    # two micro-batches, gradients accumulated, = one batch of both (the
    # reference's on the batch of 2B)
    _, dx2, dw2 = ref_grads(torch.cat(xs), torch.cat(dys))
    layer.zero_grad(set_to_none=True)
    dxs = [run(xs[i], dys[i])[1] for i in range(2)]
    ew = {k: rel(getattr(layer, k).grad, layer.shard(k, g)) for k, g in dw2.items()}
    worst = max(ew, key=ew.get)
    report("2 micro-batches accumulated in .grad = one batch of both within %g (worst %s %.2e)"
           % (TOL, worst, ew[worst]), ew[worst] <= TOL)
    e = max(rel(dxs[i], layer.shard("x", dx2[i * B:(i + 1) * B])) for i in range(2))
    report("... and each micro-batch's d_x is its own (%.2e)" % e, e <= TOL)
    # several forwards before their backwards (each keeps its own saved
    # buffer), in the other order
    layer.zero_grad(set_to_none=True)
    xl = [layer.shard("x", xs[i]).requires_grad_() for i in range(2)]
    yl = [layer(a) for a in xl]
    for i in (1, 0):
        yl[i].backward(layer.shard("y", dys[i]))
    ew = {k: rel(getattr(layer, k).grad, layer.shard(k, g)) for k, g in dw2.items()}
    worst = max(ew, key=ew.get)
    report("2 forwards, then their backwards in reverse order: the same (worst %s %.2e)"
           % (worst, ew[worst]), ew[worst] <= TOL)


if "--errors" in opt:
    good = layer.shard("x", xs[0])
    sh = tuple(X.rank_dims)
    ok = raises(TypeError, "llama.forward: input x: dtype torch.float64, expected torch.float32 "
                "(the model is f32)", layer, good.double())
    ok &= raises(ValueError, "llama.forward: input x: shape %s, expected %s" % (
        tuple(X.dims) if X.dims != X.rank_dims else (B, S + 1, D), sh), layer,
        torch.zeros(X.dims) if X.dims != X.rank_dims else torch.zeros(B, S + 1, D))
    nc = torch.zeros(sh[::-1]).transpose(0, 2)
    ok &= raises(ValueError, "llama.forward: input x: not contiguous (strides %s): .contiguous() "
                 "makes it so" % (nc.stride(),), layer, nc)
    ok &= raises(TypeError, "llama.forward: input x: on meta, but the layer runs on cpu (the "
                 "library is built against the MPI backend", layer, torch.empty(sh, device="meta"))
    ok &= raises(TypeError, "llama.forward: input x: a torch.Tensor, not list", layer, [1.0])
    ok &= raises(TypeError, "llama.forward: no input named 'z'", layer, z=good)
    with torch.no_grad():
        w = layer.g1.data
        layer.g1.data = w.double()
    ok &= raises(TypeError, "llama.forward: weight g1: dtype torch.float64", layer, good)
    layer.g1.data = w
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ok &= raises(TypeError, "llama.forward: autocast to torch.bfloat16, but the model is "
                     "built f32: compile it with --type=bf16", layer, good)
    from mpi4py import MPI
    ok &= raises(ValueError, "llama.Layer: tp_group has 1 ranks, but the model was built for "
                 "tp = %d" % sizes["tp"], llama.Layer, tp_group=MPI.COMM_SELF)
    ok &= raises(TypeError, "llama.Layer: no argument pp_group (the spec's groups: tp_group",
                 llama.Layer, pp_group=None)
    ok &= raises(RuntimeError, "llama: cfrt_init: no MPI communicator (MPI_COMM_NULL): the "
                 "mpi+openblas backend runs on MPI", llama.Layer, mpi=False)
    report("wrong dtype, shape, stride, device, type, name, autocast, group size raise naming "
           "them; no MPI on the MPI backend raises cfrt's refusal", ok)
    # the layer runs on, and gives what it gave
    layer.zero_grad(set_to_none=True)
    yl, _ = run(xs[0], dys[0])
    e = rel(yl, layer.shard("y", y))
    report("after the errors the layer runs on: forward within %g (%.2e)" % (TOL, e), e <= TOL)

if "--groups" in opt:
    import torch.distributed as dist
    # a tp group of the wrong ranks: ranks paired across the tp groups
    bad = None
    tp = sizes["tp"]
    if tp == 2 and world == 4:
        for r in range(2):  # {0, 2} and {1, 3}: across the tp groups
            ranks = [r, r + 2]
            g = dist.new_group(ranks)
            if rank in ranks:
                bad = g
        ok = raises(ValueError, "llama.Layer: tp_group holds the ranks", llama.Layer, tp_group=bad)
        report("a tp group of the right size but other ranks raises", ok)
    report("the groups passed (%s) were checked and accepted" % ", ".join(
        "%s: %s" % (k, type(v).__name__) for k, v in groups.items()), True)

f = llama.TORCH_FEATURES
if not f["custom_ops"]:
    if rank == 0:
        print("note: skip: torch: torch.compile with the layer's custom ops: %s" % f["custom_ops_why"],
              flush=True)
report("done", True)
