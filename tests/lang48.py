"""lang48.py HEADER INPUTS OUTPUTS: the models of issue 48's language
items recomputed with NumPy from the driver's --dump-inputs file, against
its --dump file (f64): tests/e2e/sub.cf (a - b), causal_br.cf (causal
attention with fewer queries than keys, aligned bottom-right: query i
sees keys j <= i + Sk - Sq) and rope_layout.cf (RoPE along the dimension
labelled S, before or after the heads). The formulas are written here
from their definitions, not from the runtime's code. Exits 1 when an
element differs by more than 1e-10."""
import re
import sys

import numpy as np

head = open(sys.argv[1]).read()
ins = np.fromfile(sys.argv[2], dtype=np.float64)
outs = np.fromfile(sys.argv[3], dtype=np.float64)
model = re.search(r"#define (\w+)_DTYPE ", head)[1]


def dims(name):
    m = re.search(r"#define %s_%s_DIMS \{([0-9, ]+)\}" % (model, name), head)
    return tuple(int(d) for d in m[1].split(","))


def take(buf, pos, shape):
    n = int(np.prod(shape))
    return buf[pos:pos + n].reshape(shape), pos + n


t, pos = {}, 0
for name in re.findall(r"^/\* (?:input|weight) (\w+):", head, re.M):
    t[name], pos = take(ins, pos, dims(name))
# with a backward the output gradients' fills follow, as many as outputs
assert pos > 0 and ins.size - pos in (0, outs.size), "inputs: %d of %d values" % (pos, ins.size)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def heads(x, n):  # [B, S, n*Dh] -> [B, n, S, Dh]
    b, s, _ = x.shape
    return x.reshape(b, s, n, -1).transpose(0, 2, 1, 3)


def merge(x):  # [B, n, S, Dh] -> [B, S, n*Dh]
    b, n, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * d)


def attention_br(q, k, v):
    sq, sk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    s = np.where(j <= i + (sk - sq), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def rope(x, base, pdim):
    """x's last dim turned in pairs (j, j + d/2) by angle p * base^(-2j/d),
    p the index along dim pdim."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2) / d)
    shape = [1] * x.ndim
    shape[pdim] = x.shape[pdim]
    p = np.arange(x.shape[pdim]).reshape(shape)[..., None]  # broadcast over d/2
    ang = (p * inv).reshape(shape[:-1] + [d // 2]) if pdim != x.ndim - 1 else None
    c, s = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


if model == "SUB":
    x, u, xs, g = t["x"], t["u"], t["xs"], t["g"]
    w1, w2, w3, w4 = t["w1"], t["w2"], t["w3"], t["w4"]
    a, b, c = x - u, x - g, g - x
    h = gelu(a @ w1) - b @ w2
    want = {"y": h @ w3 - gelu(c @ w2) @ w4, "z": xs - g, "z2": g - xs - xs}
elif model == "CAUSAL_BR":
    x, xr, m = t["x"], t["xr"], t["m"]
    H = 6
    o = attention_br(heads(x @ t["wq"], H), heads(m @ t["wk"], H), heads(m @ t["wv"], H))
    o2 = attention_br(heads(xr @ t["wq2"], H), heads(m @ t["wk2"], H), heads(m @ t["wv2"], H))
    o3 = attention_br(heads(x @ t["wq"], H), heads(t["ms"] @ t["wk"], H),
                      heads(t["ms"] @ t["wv"], H))
    want = {"o": merge(o), "o2": merge(o2) @ t["wo2"], "o3": merge(o3)}
elif model == "ROPE_LAYOUT":
    want = {"ra": rope(t["a"], 100.0, 1), "rb": rope(t["b"], 100.0, 2),
            "rc": rope(t["c"], 100.0, 1), "rd": rope(t["d"], 100.0, 2),
            "re": rope(t["e"], 100.0, 1) @ t["wr"], "rf": rope(t["f"], 100.0, 1)}
else:
    sys.exit("lang48.py: no oracle for model %s" % model)

pos, worst = 0, 0.0
for name in re.findall(r"^/\* output (\w+):", head, re.M):
    got, pos = take(outs, pos, dims(name))
    err = np.abs(got - want[name]).max()
    worst = max(worst, err)
    if err > 1e-10:
        sys.exit("lang48.py: %s differs from NumPy by %.3g" % (name, err))
assert pos == outs.size and pos > 0, "outputs: %d of %d values" % (pos, outs.size)
print("lang48.py: %s equal NumPy's, max abs diff %.3g" % (", ".join(sorted(want)), worst))
