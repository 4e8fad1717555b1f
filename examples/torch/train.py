"""train.py: a small language model trained with torch.optim.AdamW: an
embedding, a stack of L Llama blocks, a linear head and a cross-entropy
loss, all plain PyTorch but the blocks, which are either

  --impl=cfc    the layer cfc generated from examples/llama.cf (llama.Layer,
                the module and libllama.so in --dir, examples/torch/build.sh
                makes them), tensor + sequence parallel over the ranks:
                each rank holds its shard of the weights and of the
                sequence; or
  --impl=torch  the same block written in plain PyTorch (llama_ref.py),
                whole, on one process.

Both start from the same weights (seeded) and see the same data, so they
print the same losses, step by step. The data: sequences in which each
token follows from the last by a fixed rule, so the loss falls.

  CPU, f32:   mpirun -n 2 python3 train.py --impl=cfc --dir DIR
              python3 train.py --impl=torch
  GPU, bf16:  torchrun --nproc_per_node=1 train.py --impl=cfc --dir DIR \\
                  --device=cuda --dtype=bf16
              python3 train.py --impl=torch --device=cuda --dtype=bf16

Under mpirun the embedding's and head's gradients are summed over the
ranks with mpi4py; under torchrun with torch.distributed. Each line is
"step K loss X"."""
import argparse
import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import llama_ref  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--impl", choices=("cfc", "torch"), required=True)
ap.add_argument("--dir", help="--impl=cfc: where llama.py and libllama.so are")
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--lr", type=float, default=3e-3)
ap.add_argument("--vocab", type=int, default=64)
ap.add_argument("--heads", type=int, default=8, help="H of the build")
ap.add_argument("--kv-heads", type=int, default=4, help="KV of the build")
ap.add_argument("--batch", type=int, default=2, help="--impl=torch: B (cfc: the build's)")
ap.add_argument("--seq", type=int, default=64, help="--impl=torch: S (cfc: the build's)")
ap.add_argument("--dim", type=int, default=64, help="--impl=torch: D (cfc: the build's)")
ap.add_argument("--ffn", type=int, default=128, help="--impl=torch: F (cfc: the build's)")
ap.add_argument("--device", default="cpu")
ap.add_argument("--dtype", choices=("f32", "bf16", "f16"), default="f32")
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
dev = torch.device(a.device)
torch.set_num_threads(1)

# -- the launcher: mpirun (mpi4py sums gradients) or torchrun (torch.distributed)
launcher, rank, world = "none", 0, 1
if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
    from mpi4py import MPI
    launcher, rank, world = "mpi", MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
    import torch.distributed as dist
    launcher, rank, world = "torch", int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if dev.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dev = torch.device("cuda", torch.cuda.current_device())
    if world > 1:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")


def allreduce_(t):
    """t summed over the ranks, in place."""
    if world == 1:
        return t
    if launcher == "mpi":
        from mpi4py import MPI
        h = t.detach().to("cpu", torch.float64)
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, h.numpy(), op=MPI.SUM)
        t.copy_(h)
    else:
        torch.distributed.all_reduce(t)
    return t


if a.impl == "cfc":
    sys.path.insert(0, a.dir)
    import llama
    B, S, D = llama._tensor("x").dims
    F = llama._tensor("mlp0_wg").dims[1]
else:
    B, S, D, F = a.batch, a.seq, a.dim, a.ffn

# -- the model, the same weights in both: the seed, then every module in order
torch.manual_seed(a.seed)
emb = nn.Embedding(a.vocab, D).to(dev, dtype)
refs = [llama_ref.LlamaBlock(D, a.heads, a.kv_heads, F, dtype=dtype, device=dev)
        for _ in range(a.layers)]
head = nn.Linear(D, a.vocab, bias=False).to(dev, dtype)
if a.impl == "cfc":
    blocks = []
    for r in refs:
        layer = llama.Layer()  # comm: MPI_COMM_WORLD; the spec's one group tp
        layer.load_whole({k: v.detach() for k, v in r.named_parameters()})
        blocks.append(layer)
    del refs
    tp = dict(llama.GROUPS)["tp"]
    lo, hi = blocks[0].ranks["tp"] * S // tp, (blocks[0].ranks["tp"] + 1) * S // tp
else:
    blocks = refs
    lo, hi = 0, S
model = nn.ModuleList([emb, *blocks, head])
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)

# -- the data: t[i + 1] = (5 t[i] + 3) mod V, each sequence from a random start
g = torch.Generator().manual_seed(a.seed + 1)


def batch():
    t = torch.empty(B, S + 1, dtype=torch.long)
    t[:, 0] = torch.randint(0, a.vocab, (B,), generator=g)
    for i in range(S):
        t[:, i + 1] = (5 * t[:, i] + 3) % a.vocab
    return t[:, :S].to(dev), t[:, 1:].to(dev)


for step in range(a.steps):
    tokens, targets = batch()
    opt.zero_grad(set_to_none=True)
    h = emb(tokens)[:, lo:hi].contiguous()  # this rank's rows of the sequence
    for blk in blocks:
        h = blk(h)
    logits = head(h).float()
    loss = nn.functional.cross_entropy(logits.reshape(-1, a.vocab),
                                       targets[:, lo:hi].reshape(-1), reduction="sum") / (B * S)
    loss.backward()
    if a.impl == "cfc":
        # the embedding and the head are whole on every rank, their
        # gradients partial (each rank's rows): summed over the ranks
        for p in list(emb.parameters()) + list(head.parameters()):
            allreduce_(p.grad)
    total = allreduce_(loss.detach().double().clone()) if a.impl == "cfc" else loss.detach()
    opt.step()
    if rank == 0:
        print("step %d loss %.8f" % (step, total.item()), flush=True)
