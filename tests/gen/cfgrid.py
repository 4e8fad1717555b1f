"""cfgrid.py: random grid specs for cfgen.py (2 or 3 groups, --backward).

A transformer-like model over a grid of a data-parallel group (the batch
split over it, weight gradients reduced over it, some reduce-scattered:
`grad split`), a tensor-parallel group (column- then row-parallel
matmuls, heads split over it; in sequence-parallel form the sequence is
split over it between the blocks, gathered and reduce-scattered back)
and a context-parallel group (the sequence split over it, keys and
values gathered for the attention): any two or all three of them,
declared in any order, under random names. The blocks: norms (rmsnorm,
layernorm, with or without gamma and beta), an MLP, attention with
grouped-query heads (fewer key/value heads than query heads), rope and
causal or full masks; `save` of gathered tensors; outputs that are the
hidden state, a gathered hidden state or gathered logits. The schedule
is the built-in default, auto, vanilla, or a choice written as the
default (or with --schedule) that cuts every forward collective's
dimension (the backward's take their twins' or fall back to vanilla).
Every spec is compiled with --backward: its gradients are checked
against the reference backward (and in f64 finite differences).
"""


def lcm(a, b):
    x, y = a, b
    while y:
        x, y = y, x % y
    return a * b // x


class Grid:
    def __init__(self, gen, gradcheck):
        self.gradcheck = gradcheck
        self.g = gen
        self.r = gen.r
        self.lines = []
        self.colls = []       # (name, op, extents it may cut, group size)
        self.n = 0

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    def chance(self, p):
        return self.r.random() < p

    def fresh(self, p):
        self.n += 1
        return "%s%d" % (p, self.n)

    # ---- spreads: by role, the dim of the activation [B, S, D] ----
    def split_text(self, parts):
        """' split A over g, B over h' for parts [(dimname, role)]."""
        parts = [(d, self.gn[ro]) for d, ro in parts if ro in self.gn]
        if not parts:
            return ""
        return " split " + ", ".join("%s over %s" % (d, g) for d, g in parts)

    def act_split(self, seq_tp):
        """The activation's spread: B over dp, S over cp, or over tp
        between blocks in sequence-parallel form (seq_tp)."""
        parts = [("B", "dp")]
        if "cp" in self.gn:
            parts.append(("S", "cp"))
        elif seq_tp:
            parts.append(("S", "tp"))
        return parts

    def weight(self, shape, split=None, gsplit=None):
        """A weight; split: (dimname, 'tp'); gsplit: its gradient's dim
        reduce-scattered over dp (ZeRO), when that divides."""
        w = self.fresh("w")
        ext = {"D": self.D, "F": self.F, "H * Dh": self.H * self.Dh,
               "Hk * Dh": self.Hk * self.Dh, "V": self.V}
        n = 1
        for d in shape:
            n *= ext[d]
        self.elems += n
        s = self.split_text([split]) if split else ""
        gs = ""
        if gsplit and "dp" in self.gn and self.chance(0.5):
            d, ext = gsplit
            if ext % self.sz["dp"] == 0:
                gs = " grad split %s over %s" % (d, self.gn["dp"])
                self.g.feat("grid-grad-split")
        self.lines.append("weight %s : [%s]%s%s;" % (w, ", ".join(shape), s, gs))
        return w

    def coll(self, name, op, exts, role):
        self.colls.append((name, op, exts, self.sz[role]))
        self.g.feat("grid-" + op)

    def gather_seq(self, h):
        """h whole along S over tp (sequence-parallel form), or h."""
        if not self.seq_tp:
            return h
        xa = self.fresh("xa")
        self.lines.append("%s = all_gather(%s, S);" % (xa, h))
        self.coll(xa, "all_gather", [self.S], "tp")
        if self.chance(0.4):
            self.lines.append("save %s;" % xa)
            self.g.feat("save")
        return xa

    def reduce_back(self, p):
        """The partial sum p over tp back to the activation's spread."""
        h = self.fresh("h")
        if self.seq_tp:
            self.lines.append("%s = reduce_scatter(%s, S);" % (h, p))
            self.coll(h, "reduce_scatter", [self.S], "tp")
        else:
            self.lines.append("%s = all_reduce(%s);" % (h, p))
            # the dims no other group splits: D always
            exts = [self.D] + ([self.S] if "cp" not in self.gn else []) + \
                   ([self.B] if "dp" not in self.gn else [])
            self.coll(h, "all_reduce", exts, "tp")
        return h

    # ---- blocks ----
    def block_norm(self, h):
        k = self.r.randrange(4)
        y = self.fresh("h")
        if k == 0:
            self.lines.append("%s = rmsnorm(%s);" % (y, h))
        elif k == 1:
            g = self.weight(["D"], gsplit=("0", self.D))
            self.lines.append("%s = rmsnorm(%s, %s);" % (y, h, g))
        else:
            g = self.weight(["D"], gsplit=("0", self.D))
            args = [g] if k == 2 else [g, self.weight(["D"], gsplit=("0", self.D))]
            self.lines.append("%s = layernorm(%s, %s);" % (y, h, ", ".join(args)))
        self.g.feat("grid-norm")
        return y

    def block_mlp(self, h):
        xa = self.gather_seq(h)
        w1 = self.weight(["D", "F"], ("F", "tp"), ("D", self.D))
        w2 = self.weight(["F", "D"], ("F", "tp"), ("D", self.D))
        t = self.fresh("t")
        self.lines.append("%s = %s(%s @ %s);" % (t, self.pick(["gelu", "silu", "relu"]), xa, w1))
        p = self.fresh("p")
        self.lines.append("%s = %s @ %s;" % (p, t, w2))
        h2 = self.reduce_back(p) if "tp" in self.gn else p
        y = self.fresh("h")
        self.lines.append("%s = %s + %s;" % (y, h, h2))
        self.g.feat("grid-mlp")
        return y

    def block_attn(self, h):
        xa = self.gather_seq(h)
        wq = self.weight(["D", "H * Dh"], ("1", "tp"), ("D", self.D))
        wk = self.weight(["D", "Hk * Dh"], ("1", "tp"), ("D", self.D))
        wv = self.weight(["D", "Hk * Dh"], ("1", "tp"), ("D", self.D))
        q, k, v = self.fresh("q"), self.fresh("k"), self.fresh("v")
        self.lines.append("%s = split_heads(%s @ %s, H);" % (q, xa, wq))
        self.lines.append("%s = split_heads(%s @ %s, Hk);" % (k, xa, wk))
        self.lines.append("%s = split_heads(%s @ %s, Hk);" % (v, xa, wv))
        if self.Hk < self.H:
            self.g.feat("grid-gqa")
        if self.chance(0.6):
            base = self.pick(["", ", 10000", ", 500.0"])
            qr, kr = self.fresh("qr"), self.fresh("kr")
            self.lines.append("%s = rope(%s%s);" % (qr, q, base))
            self.lines.append("%s = rope(%s%s);" % (kr, k, base))
            q, k = qr, kr
            self.g.feat("grid-rope")
        if "cp" in self.gn:
            # context parallel: every rank's queries against all keys
            for x in (k, v):
                self.lines.append("%s = all_gather(%s, 2);" % (x + "a", x))
                self.coll(x + "a", "all_gather", [self.S], "cp")
            k, v = k + "a", v + "a"
            self.g.feat("grid-cp")
        causal = self.chance(0.5)
        o = self.fresh("o")
        self.lines.append("%s = attention(%s, %s, %s%s);" % (o, q, k, v, ", causal" if causal else ""))
        wo = self.weight(["H * Dh", "D"], ("0", "tp"), ("1", self.D))
        p = self.fresh("p")
        self.lines.append("%s = merge_heads(%s) @ %s;" % (p, o, wo))
        h2 = self.reduce_back(p) if "tp" in self.gn else p
        y = self.fresh("h")
        self.lines.append("%s = %s + %s;" % (y, h, h2))
        self.g.feat("grid-attention")
        return y

    def outputs(self, h):
        """The hidden state; or gathered along S (over tp or cp); and
        maybe gathered logits."""
        outs = []
        hf = self.gather_seq(h) if self.seq_tp else h
        if hf == h and "cp" in self.gn and self.chance(0.5):
            hf = self.fresh("hidden")
            self.lines.append("%s = all_gather(%s, S);" % (hf, h))
            self.coll(hf, "all_gather", [self.S], "cp")
            self.g.feat("grid-out-gathered")
        elif hf != h:
            self.g.feat("grid-out-gathered")
        if "tp" in self.gn and self.chance(0.6):
            wl = self.weight(["D", "V"], ("V", "tp"), ("D", self.D))
            lg = self.fresh("logits")
            self.lines.append("%s = all_gather(%s @ %s, V);" % (lg, hf, wl))
            self.coll(lg, "all_gather", [self.V], "tp")
            self.g.feat("grid-out-logits")
            outs.append(lg)
            if self.chance(0.5):
                return outs
        if hf == h or self.chance(0.5):
            outs.append(hf)
        else:
            o = self.fresh("y")
            self.lines.append("%s = scale(%s, 0.5);" % (o, hf))
            outs.append(o)
        return outs

    # ---- schedules ----
    def fits(self, ch):
        """Does choice ch cut every forward collective's dimension?"""
        kind = ch[0]
        if kind in ("vanilla", "auto"):
            return True
        for name, op, exts, n in self.colls:
            if kind == "slice":
                k = ch[1] if op == "all_reduce" else n * ch[1]
            else:
                if ch[3] and op != "reduce_scatter" and op != "all_reduce":
                    return False
                k = n * ch[2] * (2 if ch[1] == "bidir" else 1)
                if n == 1 and ch[1] != "pairwise":
                    return False  # issue 48 item 11: one rank under a ring
            if not any(e % k == 0 for e in exts):
                return False
        return True

    def schedule(self):
        g = self.g
        one = any(s == 1 for s in self.sz.values())
        r = self.r.random()
        if r < 0.2 and not one:
            g.feat("sched-implicit-default")
            return [], []
        if r < 0.35 and not one:
            ch = ("auto",)
        elif r < 0.5:
            ch = ("vanilla",)
        else:
            ch = None
            for _ in range(12):
                c = g.rand_choice()
                if c[0] != "auto" and self.fits(c):
                    ch = c
                    break
            ch = ch or ("vanilla",)
        g.feat("sched-" + g.choice_feat(ch))
        if self.chance(0.2):
            g.feat("cli-schedule")
            return [], ["--schedule=" + g.choice_text(ch).replace(" ", "")]
        return ["schedule {", "  default %s;" % g.choice_text(ch), "}"], []

    # ---- the spec ----
    def run(self):
        g = self.g
        roles = self.pick([["dp", "tp"], ["dp", "tp"], ["tp", "cp"], ["dp", "cp"],
                           ["dp", "tp", "cp"], ["dp", "tp", "cp"]])
        names = list(g.group_names_all)
        self.r.shuffle(names)
        self.gn = dict(zip(roles, names))
        # sizes: 2 mostly; a 3 or a 1 sometimes; at most 8 ranks
        while True:
            self.sz = {ro: self.pick([2, 2, 2, 3, 1]) for ro in roles}
            nr = 1
            for s in self.sz.values():
                nr *= s
            if 2 <= nr <= 8:
                break
        order = list(roles)
        self.r.shuffle(order)
        g.feat("grid-%dgroups" % len(roles))
        if order != sorted(order, key=["dp", "tp", "cp"].index):
            g.feat("grid-order")
        P = self.sz.get("dp", 1)
        T = self.sz.get("tp", 1)
        C = self.sz.get("cp", 1)
        self.seq_tp = "tp" in self.gn and "cp" not in self.gn and self.chance(0.5)
        if self.seq_tp:
            g.feat("grid-seq-tp")
        self.B = P * self.pick([1, 2])
        self.S = T * C * self.pick([2, 2, 4]) if self.seq_tp else C * self.pick([2, 4, 6])
        self.D = lcm(P, 2) * self.pick([2, 3, 4])
        self.F = T * self.pick([2, 4])
        self.H = T * self.pick([1, 2])
        self.Hk = self.pick([h for h in range(1, self.H + 1)
                             if self.H % h == 0 and h % T == 0])
        self.Dh = self.pick([2, 4])
        self.V = T * self.pick([2, 4])
        g.dtype = self.pick(["f32", "f64", "f64"])
        g.feat("dtype-" + g.dtype)
        body = ["group %s = %d;" % (self.gn[ro], self.sz[ro]) for ro in order]
        body.append("size B = %d, S = %d, D = %d, F = %d;" % (self.B, self.S, self.D, self.F))
        body.append("size H = %d, Hk = %d, Dh = %d, V = %d;" % (self.H, self.Hk, self.Dh, self.V))
        body.append("type %s;" % g.dtype)
        self.lines.append("in x : [B, S, D]%s;" % self.split_text(self.act_split(self.seq_tp)))
        self.elems = self.B * self.S * self.D
        h = "x"
        blocks = [self.pick(["norm", "mlp", "attn"]) for _ in range(self.r.randint(1, 3))]
        if "attn" not in blocks and self.chance(0.5):
            blocks.append("attn")
        for b in blocks:
            h = getattr(self, "block_" + b)(h)
        outs = self.outputs(h)
        body += self.lines
        body.append("out %s;" % ", ".join(outs))
        sched, cli = self.schedule()
        body += sched
        nr = P * T * C
        args = []
        for ro in roles:
            args += ["-D", "%s=%d" % (self.gn[ro], self.sz[ro])]
        args += cli + ["--backward"]
        g.feat("backward")
        qargs = " ".join("'%s'" % a if any(ch in a for ch in "(), =") and a.startswith("--")
                         else a for a in args)
        feats = sorted(g.features)
        head = ["// cfgen seed=%d: tests/gen/cfgen.py --seed %d" % (g.seed, g.seed),
                "// ranks: %d" % nr,
                "// args: %s" % qargs,
                "// mode: run",
                "// gradcheck: %s" % self.gradcheck(self.elems),
                "// run: cfc %s SPEC; mpirun -n %d DIR/run --check" % (qargs, nr)]
        for i in range(0, len(feats), 8):
            head.append("// features: " + " ".join(feats[i:i + 8]))
        text = "\n".join(head) + "\n"
        text += "model %s {\n" % self.pick(["m", "net", "grid", "lm"])
        text += "".join("  " + l + "\n" for l in body)
        text += "}\n"
        return text
