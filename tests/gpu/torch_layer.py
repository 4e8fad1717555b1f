"""torch_layer.py F32DIR BF16DIR: the torch layer (llama.Layer, docs/TORCH.md)
of examples/llama.cf on one GPU, under torchrun --nproc_per_node=1 with no
MPI in the process (tests/gpu/torch_layer.sh builds the two libraries
against libcfrt_cuda: f32 and bf16, tp = 1). One line per check,
"torch-gpu: NAME ok" or "torch-gpu: NAME FAIL why"; figures on "  ..." lines.
  - no MPI: the layer made its context without MPI_Init;
  - f32: forward and every gradient against the same block in plain
    PyTorch (TF32 off) within 1e-5;
  - bf16: the layer's and plain PyTorch's bf16 block against float32 on the
    same bf16 weights and inputs: the layer's error at most 2e-2 and at
    most twice plain PyTorch's (tests/gpu/run.sh's bf16 tolerance);
  - torch's stream: inputs written by torch work queued just before, the
    output read by torch work queued just after, no synchronisation: the
    same bits as with synchronisation; on a side stream with events too;
  - the saved buffer and workspaces from torch's allocator
    (torch.cuda.memory_allocated grows by the saved buffer while the graph
    lives and is back after the backward);
  - fused gradient accumulation over two micro-batches;
  - autocast of the built dtype passes, of another raises;
  - torch.compile(fullgraph=True) of a model holding the layer (torch >=
    2.4): the custom ops run, and forward and gradients equal eager's."""
import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "torch"))
import llama_ref  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
torch.cuda.set_device(dev)
fails = 0


def report(name, ok, why=""):
    global fails
    fails += not ok
    print("torch-gpu: %s %s" % (name, "ok" if ok else "FAIL " + why), flush=True)


def rel(got, want):
    d = (got.double() - want.double()).abs().max().item()
    m = want.double().abs().max().item()
    return d / m if m > 0 else d


def load(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("llama_" + os.path.basename(path),
                                                  os.path.join(path, "llama.py"))
    m = importlib.util.module_from_spec(spec)
    # importlib's recipe: registered before it runs, so that torch.compile
    # (dynamo) finds the module by its name as it would an imported one
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


def grads(block, x, dy):
    block.zero_grad(set_to_none=True)
    xr = x.clone().requires_grad_()
    y = block(xr)
    y.backward(dy)
    return y.detach(), xr.grad, {k: p.grad.clone() for k, p in block.named_parameters()}


def layer_grads(layer, x, dy):
    layer.zero_grad(set_to_none=True)
    xl = x.clone().requires_grad_()
    y = layer(xl)
    y.backward(dy)
    return y.detach(), xl.grad, {k: p.grad.clone() for k, p in layer.named_parameters()}


f32 = load(sys.argv[1])
bf = load(sys.argv[2])
print("  torch %s, %s, custom ops: %s" % (torch.__version__, torch.cuda.get_device_name(dev),
                                           f32.TORCH_FEATURES["custom_ops"]), flush=True)
B, S, D = f32._tensor("x").dims
torch.manual_seed(7)
ref = llama_ref.LlamaBlock(D, 8, 4, 128, device=dev)
whole = {k: v.detach().clone() for k, v in ref.named_parameters()}
x = torch.randn(B, S, D, device=dev)
dy = torch.randn(B, S, D, device=dev)

# -- f32, no MPI
L = f32.Layer()
up = __import__("ctypes").c_int(-1)
L._mpi.dll.MPI_Initialized(__import__("ctypes").byref(up))
report("the layer runs without MPI (mpi=%s, MPI_Initialized %d, backend %s)"
       % (L.mpi, up.value, L.backend), not L.mpi and up.value == 0 and L.gpu)
L.load_whole(whole)
y, dx, dw = grads(ref, x, dy)
yl, dxl, dwl = layer_grads(L, x, dy)
errs = {"y": rel(yl, y), "d_x": rel(dxl, dx)}
errs.update({k: rel(dwl[k], dw[k]) for k in dw})
worst = max(errs, key=errs.get)
print("  f32 errors: " + " ".join("%s %.2e" % kv for kv in sorted(errs.items())), flush=True)
report("f32: forward and every gradient = plain PyTorch's within 1e-5 (worst %s %.2e)"
       % (worst, errs[worst]), errs[worst] <= 1e-5)

# -- torch's stream: a producer just before, a consumer just after
a = torch.randn(4096, 4096, device=dev)


def produced():
    t = a
    for _ in range(8):  # long enough that a pass not ordered after it reads stale x
        t = (t @ a) / 64.0
    return x + (t[:1, :1].sum() * 0.0).nan_to_num(0.0)


torch.cuda.synchronize()
want = L(produced()).detach().clone()
torch.cuda.synchronize()
outs = []
for _ in range(3):
    xs = produced()
    xs.mul_(1.0)          # queued right before the pass
    out = L(xs) * 1.0     # read right after it
    outs.append(out)
torch.cuda.synchronize()
report("torch's current stream: producer before, consumer after, no synchronisation: the "
       "same bits", all(torch.equal(o, want) for o in outs))
side = torch.cuda.Stream()
xs = produced()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    ys = L(xs)
torch.cuda.current_stream().wait_stream(side)
got = ys * 1.0
torch.cuda.synchronize()
report("a side stream ordered by events: the same bits (a context of its own)",
       torch.equal(got, want) and len(L._ctxs) == 2)

# -- memory from torch's allocator
torch.cuda.synchronize()
m0 = torch.cuda.memory_allocated(dev)
xl = x.clone().requires_grad_()
yl = L(xl)
m1 = torch.cuda.memory_allocated(dev)
saved = dict(f32._SIZES)["saved_bytes"]
yl.backward(dy)
del yl
torch.cuda.synchronize()
m2 = torch.cuda.memory_allocated(dev)
print("  memory_allocated: %d before, %d with the graph (saved buffer %d bytes), %d after"
      % (m0, m1, saved, m2 - xl.numel() * 4), flush=True)
report("the saved buffer is torch's: memory_allocated grows by it while the graph lives",
       m1 - m0 >= saved)

# -- fused accumulation
L.zero_grad(set_to_none=True)
for i in range(2):
    L(x.clone()).backward(dy)
acc = {k: p.grad.clone() for k, p in L.named_parameters()}
e = max(rel(acc[k], 2 * dwl[k]) for k in acc)
report("two micro-batches accumulate into .grad: twice one's (%.2e)" % e, e <= 1e-5)

# -- bf16
Lb = bf.Layer()
Lb.load_whole({k: v.to(torch.bfloat16) for k, v in whole.items()})
refb = llama_ref.LlamaBlock(D, 8, 4, 128, device=dev, dtype=torch.bfloat16)
refb.load_state_dict({k: v.to(torch.bfloat16) for k, v in whole.items()})
ref32 = llama_ref.LlamaBlock(D, 8, 4, 128, device=dev)
ref32.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in whole.items()})
xb, dyb = x.to(torch.bfloat16), dy.to(torch.bfloat16)
y32, dx32, dw32 = grads(ref32, xb.float(), dyb.float())
yb, dxb, dwb = grads(refb, xb, dyb)
ylb, dxlb, dwlb = layer_grads(Lb, xb, dyb)
names = ["y", "d_x"] + sorted(dw32)
ours = [rel(ylb, y32), rel(dxlb, dx32)] + [rel(dwlb[k], dw32[k]) for k in sorted(dw32)]
theirs = [rel(yb, y32), rel(dxb, dx32)] + [rel(dwb[k], dw32[k]) for k in sorted(dw32)]
for n, o, t in zip(names, ours, theirs):
    print("  bf16 %-9s layer %.2e  plain PyTorch bf16 %.2e" % (n, o, t), flush=True)
bad = [n for n, o, t in zip(names, ours, theirs) if not (o <= 2e-2 and o <= max(2 * t, 4e-3))]
report("bf16: forward and every gradient against float32: within 2e-2 and twice plain "
       "PyTorch bf16's", not bad, "off: %s" % bad)
with torch.autocast("cuda", dtype=torch.bfloat16):
    ya = Lb(x)  # f32 input cast to the built bf16
report("autocast to bf16 on the bf16 build: the input cast, the layer's output",
       ya.dtype == torch.bfloat16 and torch.equal(ya, Lb(xb)))
try:
    with torch.autocast("cuda", dtype=torch.float16):
        Lb(x)
    report("autocast to f16 on the bf16 build raises", False, "no exception")
except TypeError as ex:
    report("autocast to f16 on the bf16 build raises (%s)" % ex, "autocast to torch.float16" in
           str(ex))
try:
    Lb(x.to(torch.bfloat16).cpu())
    report("a CPU tensor to the CUDA build raises", False, "no exception")
except TypeError as ex:
    report("a CPU tensor to the CUDA build raises (%s)" % ex, "input x: on cpu" in str(ex))

# -- torch.compile
if not bf.TORCH_FEATURES["custom_ops"]:
    print("SKIP torch-gpu: compile: %s" % bf.TORCH_FEATURES["custom_ops_why"], flush=True)
else:
    class Net(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.inp = nn.Linear(D, D, bias=False, device=dev, dtype=torch.bfloat16)
            self.layer = layer
            self.out = nn.Linear(D, D, bias=False, device=dev, dtype=torch.bfloat16)

        def forward(self, t):
            return self.out(torch.relu(self.layer(self.inp(t))))

    net = Net(Lb)
    net.layer.grad_mode = "autograd"  # compiled and eager alike

    def step(fn):
        net.zero_grad(set_to_none=True)
        t = xb.clone().requires_grad_()
        o = fn(t)
        o.float().pow(2).sum().backward()
        return o.detach(), t.grad, {k: p.grad.clone() for k, p in net.named_parameters()}

    ye, dxe, dwe = step(net)
    before = dict(Lb.calls)
    comp = torch.compile(net, fullgraph=True)
    yc, dxc, dwc = step(comp)
    yc, dxc, dwc = step(comp)
    ran = {k: Lb.calls[k] - before[k] for k in before}
    e = max([rel(yc, ye), rel(dxc, dxe)] + [rel(dwc[k], dwe[k]) for k in dwe])
    report("torch.compile(fullgraph=True): the custom ops ran (%s) and forward and gradients "
           "equal eager's (%.2e)" % (ran, e), ran["forward"] >= 2 and ran["backward"] >= 2 and
           e <= 2e-2)
print("torch-gpu: %d failed" % fails, flush=True)
sys.exit(1 if fails else 0)
