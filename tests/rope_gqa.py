"""rope_gqa.py HEADER INPUTS OUTPUTS: RoPE and grouped-query attention of
tests/e2e/rope_gqa.cf recomputed with NumPy from the driver's
--dump-inputs file, against its --dump file (f64). The formulas are
written here from their definitions (RoPE: Su et al., in the rotate-half
layout of GPT-NeoX and Llama in Hugging Face; GQA: Ainslie et al., query
head h reads key/value head h // (H / KV)), not from the runtime's code.
Exits 1 when an element differs by more than 1e-10."""
import re
import sys

import numpy as np

head = open(sys.argv[1]).read()
ins = np.fromfile(sys.argv[2], dtype=np.float64)
outs = np.fromfile(sys.argv[3], dtype=np.float64)


def dims(name):
    m = re.search(r"#define ROPE_GQA_%s_DIMS \{([0-9, ]+)\}" % name, head)
    return tuple(int(d) for d in m[1].split(","))


def take(buf, pos, shape):
    n = int(np.prod(shape))
    return buf[pos:pos + n].reshape(shape), pos + n


pos = 0
x, pos = take(ins, pos, dims("x"))
wq, pos = take(ins, pos, dims("wq"))
wk, pos = take(ins, pos, dims("wk"))
wv, pos = take(ins, pos, dims("wv"))
assert pos == ins.size, "inputs: %d of %d values" % (pos, ins.size)
B, S, D = x.shape
H, KV = 4, 2
Dh = D // H


def heads(t, n):  # [B, S, n*Dh] -> [B, n, S, Dh]
    return t.reshape(B, S, n, -1).transpose(0, 2, 1, 3)


def merge(t):  # [B, n, S, Dh] -> [B, S, n*Dh]
    return t.transpose(0, 2, 1, 3).reshape(B, S, -1)


def rope(t, base):
    d = t.shape[-1]
    inv = base ** (-np.arange(0, d, 2) / d)              # theta_j
    ang = np.arange(t.shape[-2])[:, None] * inv[None, :]  # [S, d/2]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)
    half = np.concatenate([-t[..., d // 2:], t[..., :d // 2]], axis=-1)
    return t * cos + half * sin


def attention(q, k, v):
    g = q.shape[1] // k.shape[1]
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones((S, S), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


want = {
    "r": merge(rope(heads(x, H), 500.0)),
    "o": merge(attention(rope(heads(x @ wq, H), 500.0), rope(heads(x @ wk, KV), 500.0),
                         heads(x @ wv, KV))),
}
pos, worst = 0, 0.0
for name in re.findall(r"^/\* output (\w+):", head, re.M):
    got, pos = take(outs, pos, dims(name))
    err = np.abs(got - want[name]).max()
    worst = max(worst, err)
    if err > 1e-10:
        sys.exit("rope_gqa.py: %s differs from NumPy by %.3g" % (name, err))
assert pos == outs.size and pos > 0, "outputs: %d of %d values" % (pos, outs.size)
print("rope_gqa.py: r and o equal NumPy's, max abs diff %.3g" % worst)
