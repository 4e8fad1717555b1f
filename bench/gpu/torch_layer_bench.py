"""torch_layer_bench.py DIR [ITERS]: a training step (forward and backward)
of the Llama block at the size of a Llama-3-8B layer (the build in DIR:
tests/gpu/torch_layer.sh makes it, D = 4096, 32 heads, 8 KV heads, F =
14336, S = 4096, B = 1, bf16, tp = 1) on one GPU, the generated layer
(llama.Layer) against the same block in plain PyTorch, eager and
torch.compile'd, on the same weights and inputs in the same process.
Each: ITERS (default 20) steps after 3 warm-ups (compile: after its own
compilation), timed with CUDA events, the median; the peak of
torch.cuda.max_memory_allocated over a step (what torch's allocator
holds), and the device's memory in use (cudaMemGetInfo, which also sees
the runtime's own cuBLAS workspaces) after the steps. Prints one line per
variant: "bench NAME step_ms X peak_alloc_MiB Y device_used_MiB Z"."""
import os
import statistics
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "torch"))
import llama  # noqa: E402
import llama_ref  # noqa: E402

iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
B, S, D = llama._tensor("x").dims
F = llama._tensor("mlp0_wg").dims[1]
H, KV = 32, 8
torch.manual_seed(0)
ref = llama_ref.LlamaBlock(D, H, KV, F, dtype=torch.bfloat16, device=dev)
x = torch.randn(B, S, D, device=dev, dtype=torch.bfloat16)
dy = torch.randn(B, S, D, device=dev, dtype=torch.bfloat16)
print("bench: %s, torch %s, B %d S %d D %d H %d KV %d F %d bf16" % (
    torch.cuda.get_device_name(dev), torch.__version__, B, S, D, H, KV, F), flush=True)


def measure(name, fn, params):
    def step():
        for p in params:
            p.grad = None
        xi = x.detach().requires_grad_()
        fn(xi).backward(dy)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    peak = torch.cuda.max_memory_allocated(dev)
    free, total = torch.cuda.mem_get_info(dev)
    print("bench %s step_ms %.3f peak_alloc_MiB %.0f step_extra_MiB %.0f device_used_MiB %.0f "
          "(min %.3f max %.3f)" % (name, statistics.median(times), peak / 2**20,
                                   (peak - base) / 2**20, (total - free) / 2**20, min(times),
                                   max(times)), flush=True)
    return statistics.median(times)


layer = llama.Layer()
layer.load_whole({k: v.detach() for k, v in ref.named_parameters()})
with torch.no_grad():  # the outputs agree (bf16)
    ya, yb = layer(x), ref(x)
    print("bench: layer vs plain eager output: max|d|/max|y| %.2e" % (
        ((ya.float() - yb.float()).abs().max() / yb.float().abs().max()).item()), flush=True)
t_layer = measure("cfc_layer", layer, list(layer.parameters()))
t_eager = measure("torch_eager", ref, list(ref.parameters()))
try:
    comp = torch.compile(ref)
    t_comp = measure("torch_compile", comp, list(ref.parameters()))
except Exception as e:  # noqa: BLE001
    print("bench torch_compile failed: %s: %s" % (type(e).__name__, e), flush=True)
print("bench: layer / eager %.3f" % (t_layer / t_eager), flush=True)
