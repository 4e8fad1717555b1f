#!/usr/bin/env python3
"""cfgen.py: random valid CommFuse specs, in the manner of Csmith.

    cfgen.py --seed S [--count K] [-o DIR] [--compile-only-every J]

Writes K specs (seeds S, S+1, ...) as DIR/gen_SEED.cf, or one spec on
stdout without -o. The same seed always gives the same spec.

Every spec is valid by construction: the generator keeps, for every tensor,
its shape, its dimension labels and its distribution (replicated, split along
a dimension, partial sum) exactly as LANGUAGE.md (and sema.c) infer them, and
only applies an op, a collective or a schedule where the language allows it.
So `cfc` must accept every spec (exit 0), and its parallel run must match the
serial reference: a rejection, a crash or a wrong result is a compiler bug.

What varies, across seeds: every op (matmul with .T on either side, batched
matmuls, add, mul with broadcasting, swiglu, scale, gelu, silu, relu, layernorm with
and without gamma/beta, rmsnorm, softmax, split_heads, merge_heads, attention
with and without causal, scan), every collective (all_gather, reduce_scatter,
all_reduce, all_to_all) on first, middle and last dimensions, 2-D to 5-D
layouts, extent-1 dimensions, group sizes 1..6, f32 and f64 (bf16 and f16 in
compile-only specs: the CPU runtime has neither), layers with weights and
sizes of their own, called directly, nested and through repeat(), schedule
sections with a default and per-collective entries (model tensors and
layer.tensor keys) of every kind, and --schedule / --type on the command line.
Also rope, grouped-query attention (fewer key/value heads), `save` of
gathered tensors, and --backward on a third of the single-group run specs
(their gradients checked too: tests/gen/run.sh). Every fourth seed (3, 7,
11, ...) is a grid of 2 or 3 groups built with --backward (cfgrid.py):
data, tensor (also sequence) and context parallelism in any declaration
order, norms, MLPs, GQA attention with rope, `grad split`, gathered
outputs and logits.

Each spec starts with comment lines the runner (tests/gen/run.sh) reads:
    // cfgen seed=S: tests/gen/cfgen.py --seed S
    // ranks: N
    // args: -D tp=N ...        (the cfc arguments, shell-quoted)
    // mode: run | compile      (compile: bf16/f16, cfc only)
    // gradcheck: yes | no      (with --backward in f64: finite differences)
    // features: ...            (what the spec exercises, for coverage)
"""
import argparse
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cfgrid import Grid  # noqa: E402

MAXEL = 4096          # most elements of any tensor (whole, not per rank)
# Tensor names are a prefix and a number (x1, w2, h3, p4), sizes come from
# SIZE_NAMES, groups from GROUP_NAMES: none is a keyword, a type or a
# built-in, and none collides with another.
SIZE_NAMES = ["B", "S", "D", "E", "F", "H", "K", "M", "P", "Q", "R", "U", "V",
              "W", "Z", "C", "G", "J", "N1", "N2", "N3", "N4", "N5", "N6", "N7",
              "N8", "N9"]
GROUP_NAMES = ["tp", "sp", "dp", "cp", "grp", "ranks"]
ROWS = (("layernorm", 0), ("rmsnorm", 1), ("softmax", 0), ("layernorm", 2),
        ("rmsnorm", 0), ("layernorm", 1))
CHOICES = (("fuse", "ring", 1, False), ("vanilla",), ("fuse", "bidir", 2, False),
           ("slice", 2), ("fuse", "pairwise", 2, False), ("auto",),
           ("fuse", "ring", 1, True), ("fuse", "ring", 2, False), ("fuse", "bidir", 1, False),
           ("slice", 3), ("fuse", "pairwise", 1, False), ("fuse", "pairwise", 3, True))
FOCI = (None, "block_mlp", "gather", "block_tpsp", "reduce", "a2a", "block_ulysses",
        "attention", "scan", "block_zero", "layer", "split_heads", "row")


def numel(shape):
    n = 1
    for e in shape:
        n *= e
    return n


def is_call(expr):
    """Is expr one call, f(...), that needs no parentheses around it?"""
    m = re.match(r"^[a-z_]\w*\(", expr)
    if not m or not expr.endswith(")"):
        return False
    depth = 0
    for i in range(m.end() - 1, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return i == len(expr) - 1
    return False


class Val:
    """A tensor: shape, labels and distribution as sema infers them.
    dist: ('R',) replicated, ('S', d) split along d, ('P',) partial sum."""

    def __init__(self, shape, labels, dist, name=None, expr=None, args=(),
                 role="act", op=None):
        self.shape = list(shape)
        self.labels = list(labels)
        self.dist = dist
        self.name = name      # a declared or assigned name, or None (inline)
        self.expr = expr      # format string over args: "{0} @ {1}"
        self.args = list(args)
        self.role = role      # in, weight, act, param
        self.op = op          # the op, for features and schedule keys
        self.uses = 0
        self.atomic = True    # the expression needs no parentheses

    @property
    def nd(self):
        return len(self.shape)

    def typ(self):
        return (tuple(self.shape), tuple(self.labels), self.dist)


class Scope:
    """The model or a layer: its statements, sizes and tensors."""

    def __init__(self, gen, kind, name, parent=None):
        self.gen = gen
        self.kind = kind          # model | layer
        self.name = name
        self.parent = parent      # layers: the model scope (sizes)
        self.sizes = []           # (name, value, text) declared here
        self.stmts = []           # Val (assignments, declarations) and strings
        self.pool = []            # values ops may use
        self.names = set()
        self.ntemp = 0

    def all_sizes(self):
        s = list(self.sizes)
        if self.parent:
            s = self.parent.sizes + s
        return s

    def fresh(self, prefix):
        while True:
            self.ntemp += 1
            n = "%s%d" % (prefix, self.ntemp)
            if n not in self.names and n not in self.gen.global_names:
                self.names.add(n)
                return n


class Gen:
    def __init__(self, seed, mode=None):
        self.seed = seed
        self.r = random.Random(seed)
        self.features = set()
        self.global_names = set()
        self.layers = []          # the text of every layer
        self.nlayer = 0
        self.size_names = list(SIZE_NAMES)
        self.r.shuffle(self.size_names)
        self.mode = mode
        self.leaf_elems = 0

    # ---- small helpers ----
    def chance(self, p):
        return self.r.random() < p

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    def feat(self, f):
        self.features.add(f)

    # ---- sizes ----
    def size_for(self, sc, value):
        """A size name whose value is `value`, declared when needed (in the
        layer, sometimes, when sc is one)."""
        have = [s for s in sc.all_sizes() if s[1] == value]
        if have and self.chance(0.8):
            return self.pick(have)[0]
        if not self.size_names:
            return None
        name = self.size_names.pop(0)
        self.global_names.add(name)
        home = sc if sc.kind == "layer" and self.chance(0.5) else self.model
        if home is not self.model:
            self.feat("layer-size")
        home.sizes.append((name, value, self.size_text(home, value)))
        return name

    def size_text(self, sc, value):
        """The expression of a size: a number, or in terms of earlier sizes
        or the group, evaluating to value."""
        r = self.r.random()
        earlier = [s for s in sc.all_sizes() if s[1] > 1 and value % s[1] == 0]
        if r < 0.25 and earlier:
            s = self.pick(earlier)
            k = value // s[1]
            self.feat("size-expr")
            return s[0] if k == 1 else self.pick(["%d * %s" % (k, s[0]), "%s * %d" % (s[0], k)])
        if r < 0.4 and self.N > 1 and value % self.N == 0:
            k = value // self.N
            self.feat("size-expr-group")
            return self.gname if k == 1 else "%s * %d" % (self.gname, k)
        if r < 0.45 and value in (4, 8, 16, 32):
            self.feat("size-pow")
            return "2^%d" % {4: 2, 8: 3, 16: 4, 32: 5}[value]
        if r < 0.5 and value > 2:
            self.feat("size-expr")
            return "(%d + %d)" % (value - 1, 1) if self.chance(0.5) else "%d - 1" % (value + 1)
        return str(value)

    def extent(self, cut=True, allow1=False):
        """A dimension's extent: mostly a multiple of the group, so that it
        can be split and cut into slices; sometimes 1 or odd."""
        N = self.N
        r = self.r.random()
        if allow1 and r < 0.15:
            return 1
        if not cut and r < 0.35:
            return self.pick([1, 2, 3, 5, 6, 7])
        return N * self.pick([1, 2, 2, 3, 4, 4, 4, 6, 8])

    # ---- dims ----
    def dim_ref(self, v, d):
        """Text naming dim d of v: its label when unique, else its position."""
        lab = v.labels[d]
        if lab and lab.isidentifier() and v.labels.count(lab) == 1 and self.chance(0.75):
            return lab
        self.feat("dim-by-position")
        return str(d)

    def shape_text(self, sc, shape, labels):
        out = []
        for e, l in zip(shape, labels):
            out.append(l if l else self.anon_dim(sc, e))
        return "[" + ", ".join(out) + "]"

    def anon_dim(self, sc, e):
        """A dimension without a label: a literal, or an expression."""
        earlier = [s for s in sc.all_sizes() if s[1] > 1 and e % s[1] == 0 and e != s[1]]
        if earlier and self.chance(0.3):
            s = self.pick(earlier)
            self.feat("shape-expr")
            return "%d * %s" % (e // s[1], s[0])
        return str(e)

    def labels_for(self, sc, shape, p_label=0.85):
        """Labels (size names) for a new tensor's dims, or None (literal)."""
        labels = []
        for e in shape:
            if self.chance(p_label):
                name = self.size_for(sc, e)
                labels.append(name)
            else:
                labels.append(None)
        return labels

    # ---- declarations ----
    def declare(self, sc, role, shape, labels, dist):
        """A new input or weight of the given type; returns it."""
        prefix = "x" if role == "in" else "w"
        visible = {n for n, _, _ in sc.all_sizes()}
        labels = [l if l in visible else None for l in labels]
        v = Val(shape, labels, dist, name=sc.fresh(prefix), role=role)
        # the elements finite differences perturb (a layer's, per call)
        self.leaf_elems += numel(shape) * (3 if sc.kind == "layer" else 1)
        dt = ""
        if self.chance(0.1):
            dt = self.dtype + " "
            self.feat("decl-dtype")
        sp = ""
        if dist[0] == "S":
            ref = self.dim_ref(v, dist[1])
            sp = " split %s over %s" % (ref, self.gname)
        text = "%s %s : %s%s%s;" % ("in    " if role == "in" else "weight", v.name, dt,
                                    self.shape_text(sc, shape, labels), sp)
        sc.stmts.append(text)
        sc.pool.append(v)
        self.feat(role + "-" + ("split" if dist[0] == "S" else "repl"))
        return v

    def leaf(self, sc, shape, labels, dist):
        """A fresh tensor: a weight, or an input where the scope allows."""
        role = "weight" if sc.kind == "layer" or self.chance(0.6) else "in"
        return self.declare(sc, role, shape, labels, dist)

    # ---- values and statements ----
    def emit(self, sc, v, name_it=None):
        """Adds v (an op result) to sc; named by a statement, or inline."""
        for a in v.args:
            a.uses += 1
            if a.uses > 1 and not a.name and a.role == "act":
                a.name = sc.fresh("h")
        if name_it is None:
            name_it = not self.chance(0.3)
        if name_it:
            v.name = sc.fresh("h")
        sc.stmts.append(v)
        sc.pool.append(v)
        self.feat("op-" + v.op)
        return v

    def text(self, v, top=False):
        """v's text in an expression: its name, or its expression inline;
        top: its expression, for the statement that defines it."""
        if v.name and not top:
            return v.name
        s = v.expr.format(*[self.text(a) for a in v.args])
        return s if top or v.atomic else "(" + s + ")"

    def choose(self, sc, ok, recent=True):
        """A value of the pool that satisfies ok, the recent ones likelier."""
        cand = [v for v in sc.pool if ok(v)]
        if not cand:
            return None
        if recent and self.chance(0.7):
            cand = cand[-3:]
        return self.pick(cand)

    # ---- inference (mirrors sema.c) ----
    @staticmethod
    def view(v, t):
        shape, labels, dist = list(v.shape), list(v.labels), v.dist
        if t and v.nd >= 2:
            a, b = v.nd - 2, v.nd - 1
            shape[a], shape[b] = shape[b], shape[a]
            labels[a], labels[b] = labels[b], labels[a]
            if dist[0] == "S" and dist[1] >= a:
                dist = ("S", a + b - dist[1])
        return shape, labels, dist

    def mm_infer(self, a, b, ta, tb):
        """The result type of (a[.T]) @ (b[.T]), or None when invalid."""
        if a.nd < 2 or b.nd < 2:
            return None
        sa, la, da = self.view(a, ta)
        sb, lb, db = self.view(b, tb)
        na, nb = len(sa), len(sb)
        if nb > 2 and nb != na:
            return None
        if sa[-1] != sb[-2]:
            return None
        for d in range(nb - 2):
            if sa[d] != sb[d]:
                return None
        shape = sa[:-1] + [sb[-1]]
        labels = la[:-1] + [lb[-1]]
        ak, bk, bn, batched = na - 1, nb - 2, nb - 1, nb > 2
        r = None
        if da[0] == "R" and db[0] == "R":
            r = ("R",)
        elif da[0] == "P" and db[0] == "R":
            r = da
        elif da[0] == "R" and db[0] == "P":
            r = db
        elif da[0] == "S" and db[0] == "R" and da[1] != ak:
            r = da
        elif da[0] == "R" and db[0] == "S" and (db[1] == bn or (batched and db[1] < bk)):
            r = ("S", na - 1 if db[1] == bn else db[1])
        elif da[0] == "S" and db[0] == "S":
            if da[1] == ak and db[1] == bk:
                r = ("P",)
            elif batched and da[1] == db[1] and da[1] < bk:
                r = da
        if r is None:
            return None
        return shape, labels, r

    @staticmethod
    def ew_infer(x, y, op):
        """add/mul of x and y (either order): the result type or None."""
        a, b = (y, x) if y.nd > x.nd else (x, y)
        off = a.nd - b.nd
        if a.shape[off:] != b.shape:
            return None
        labels = list(a.labels)
        for d in range(b.nd):
            if not labels[d + off]:
                labels[d + off] = b.labels[d]
        da, db = a.dist, b.dist
        if db[0] == "S":
            db = ("S", db[1] + off)
        if da == db and not (da[0] == "P" and op == "mul"):
            return a.shape, labels, da
        if (da[0], db[0]) in (("R", "S"), ("S", "R")):
            return a.shape, labels, da if da[0] == "S" else db
        if op == "mul" and (da[0], db[0]) in (("P", "R"), ("R", "P")):
            return a.shape, labels, ("P",)
        return None

    # ---- ops ----
    def split_ok(self, v, d):
        return v.shape[d] % self.N == 0

    def splittable(self, shape):
        return [d for d in range(len(shape)) if shape[d] % self.N == 0]

    def rand_dist(self, shape, p_split=0.6):
        ds = self.splittable(shape)
        if ds and self.chance(p_split):
            return ("S", self.pick(ds))
        return ("R",)

    def op_unary(self, sc):
        x = self.choose(sc, lambda v: True)
        if x is None:
            return None
        if x.dist[0] == "P":
            op = "scale"
        else:
            op = self.pick(["gelu", "silu", "relu", "scale", "gelu", "silu", "relu"])
        if op == "scale":
            f = self.pick(["0.5", "2", "-1.5", "0.25", "1e-1", "3.0"])
            form = self.r.randrange(4)
            if form == 0:
                e = "%s * {0}" % f
            elif form == 1:
                e = "{0} * %s" % f
            elif form == 2:
                e = "scale({0}, %s)" % f
            else:
                e = "-{0}"
            v = Val(x.shape, x.labels, x.dist, expr=e, args=[x], op="scale")
            v.atomic = form == 2
        else:
            v = Val(x.shape, x.labels, x.dist, expr=op + "({0})", args=[x], op=op)
        return self.emit(sc, v)

    def op_ew(self, sc):
        op = self.pick(["add", "mul"])
        x = self.choose(sc, lambda v: True)
        if x is None:
            return None
        y = None
        # an existing partner, same shape or a suffix
        cands = [u for u in sc.pool if u is not x and self.ew_infer(x, u, op)]
        if cands and self.chance(0.5):
            y = self.pick(cands)
        elif self.chance(0.15) and self.ew_infer(x, x, op):
            y = x
            self.feat("ew-self")
        else:
            # a fresh tensor shaped like a suffix of x, spread to fit
            k = self.r.randint(1, x.nd)
            off = x.nd - k
            shape, labels = x.shape[off:], x.labels[off:]
            if self.chance(0.2):
                labels = self.labels_for(sc, shape)
            dists = [("R",)]
            if x.dist[0] == "S" and x.dist[1] >= off:
                dists.append(("S", x.dist[1] - off))
            if x.dist[0] == "R":
                dists += [("S", d) for d in self.splittable(shape)]
            dists = [d for d in dists if self.ew_infer(x, Val(shape, labels, d), op)]
            if not dists:
                return None
            y = self.leaf(sc, shape, labels, self.pick(dists))
            if k < x.nd:
                self.feat("broadcast")
        # sema infers in the written order: the first operand's labels win
        a, b = (x, y) if self.chance(0.5) else (y, x)
        t = self.ew_infer(a, b, op)
        if t is None:
            return None
        if op == "mul" and a.shape == b.shape and a.dist[0] != "P" and self.chance(0.5):
            # silu(a) * b as the op cfc fuses it into (a no partial sum)
            op, e, atomic = "swiglu", "swiglu({0}, {1})", True
        elif self.chance(0.5):
            e = "{0} + {1}" if op == "add" else "{0} * {1}"
            atomic = False
        else:
            e = op + "({0}, {1})"
            atomic = True
        v = Val(t[0], t[1], t[2], expr=e, args=[a, b], op=op)
        v.atomic = atomic
        return self.emit(sc, v)

    def mm_forms(self, ta, tb):
        ta_s = ".T" if ta else ""
        tb_s = ".T" if tb else ""
        form = self.r.randrange(5)
        if form <= 2:
            return "{0}%s @ {1}%s" % (ta_s, tb_s), False
        if form == 3:
            return "matmul({0}%s, {1}%s)" % (ta_s, tb_s), True
        return "linear({0}%s, {1}%s)" % (ta_s, tb_s), True

    def op_matmul(self, sc, want=None, x=None):
        """x @ w for a fresh or existing w; want: the result's dist kind."""
        if x is None:
            x = self.choose(sc, lambda v: v.nd >= 2)
        if x is None:
            return None
        ta = 1 if self.chance(0.2) else 0
        sa, la, da = self.view(x, ta)
        if sa[-1] * 1 > 64 and self.chance(0.5):
            ta = 0
            sa, la, da = self.view(x, 0)
        opts = []
        # an existing right operand: batched or 2-D
        for u in sc.pool:
            if u is x and not self.chance(0.3):
                continue
            for tb in (0, 1):
                t = self.mm_infer(x, u, ta, tb)
                if t and numel(t[0]) <= MAXEL:
                    opts.append((u, tb, t))
        fresh = []
        K = sa[-1]
        for rank in ([2, len(sa)] if len(sa) > 2 else [2]):
            for tb in (0, 1):
                ncol = self.extent(cut=self.chance(0.7))
                if numel(sa[:-1]) * ncol > MAXEL:
                    ncol = self.pick([1, 2, self.N])
                shape = sa[:rank - 2] + [K, ncol]
                if tb:
                    shape[-1], shape[-2] = shape[-2], shape[-1]
                for d in [("R",)] + [("S", i) for i in self.splittable(shape)]:
                    w = Val(shape, [None] * rank, d)
                    t = self.mm_infer(x, w, ta, tb)
                    if t and numel(t[0]) <= MAXEL and numel(shape) <= MAXEL:
                        fresh.append((w, tb, t))
        if want:
            opts = [o for o in opts if o[2][2][0] == want]
            fresh = [o for o in fresh if o[2][2][0] == want]
        if opts and (not fresh or self.chance(0.3)):
            u, tb, t = self.pick(opts)
            self.feat("matmul-act")
        elif fresh:
            w, tb, t = self.pick(fresh)
            rank = w.nd
            labels = la[:rank - 2] + [la[-1], None] if rank > 2 else [la[-1], None]
            if not labels[-2] or self.chance(0.2):
                labels[-2] = None if self.chance(0.3) else self.size_for(sc, K)
            ncol = w.shape[-2] if tb else w.shape[-1]
            labels[-1] = None if self.chance(0.2) else self.size_for(sc, ncol)
            if tb:
                labels[-1], labels[-2] = labels[-2], labels[-1]
            labels = [l if (l is None or l.isidentifier()) else None for l in labels]
            u = self.leaf(sc, w.shape, labels, w.dist)
            t = self.mm_infer(x, u, ta, tb)
        else:
            return None
        if ta:
            self.feat("matmul-ta")
        if tb:
            self.feat("matmul-tb")
        if u.nd > 2:
            self.feat("matmul-batched")
        e, atomic = self.mm_forms(ta, tb)
        v = Val(t[0], t[1], t[2], expr=e, args=[x, u], op="matmul")
        v.atomic = atomic
        if t[2][0] == "P":
            self.feat("partial")
        return self.emit(sc, v)

    def op_row(self, sc):
        x = self.choose(sc, lambda v: v.dist[0] != "P" and v.dist != ("S", v.nd - 1))
        if x is None:
            return None
        # the op and its number of parameters cycle with the seed (and the
        # row ops so far), so that a few seeds cover all six
        self.nrow += 1
        op, k = ROWS[(self.seed + self.nrow) % len(ROWS)]
        last = x.shape[-1]
        params = []
        for _ in range(k):
            have = [u for u in sc.pool if u.nd == 1 and u.shape == [last] and u.dist == ("R",)]
            if have and self.chance(0.4):
                params.append(self.pick(have))
            else:
                params.append(self.leaf(sc, [last], [x.labels[-1] if x.labels[-1] and
                                                      x.labels[-1].isidentifier() else None],
                                        ("R",)))
        e = op + "(" + ", ".join("{%d}" % i for i in range(k + 1)) + ")"
        v = Val(x.shape, x.labels, x.dist, expr=e, args=[x] + params, op=op)
        self.feat("%s-%dparams" % (op, k))
        return self.emit(sc, v)

    def op_split_heads(self, sc):
        x = self.choose(sc, lambda v: 2 <= v.nd <= 5 and v.dist[0] != "P" and
                        numel(v.shape) <= MAXEL)
        if x is None:
            return None
        nd = x.nd
        D = x.shape[-1]
        hs = [h for h in range(1, D + 1) if D % h == 0]
        if x.dist[0] == "S" and x.dist[1] >= nd - 2:
            hs = [h for h in hs if h % self.N == 0]
        if not hs:
            return None
        h = 1 if 1 in hs and self.chance(0.2) else self.pick(hs)
        if h == 1:
            self.feat("heads-1")
        return self.split_heads_of(sc, x, h)

    def split_heads_of(self, sc, x, h, name_it=None):
        """split_heads(x, h): [..., S, D] -> [..., h, S, D/h]; a split along
        S or D moves with it. h is a size's name or a number."""
        hname = self.size_for(sc, h) if self.chance(0.7) else None
        nd, lx = x.nd, x.labels
        shape = x.shape[:nd - 2] + [h, x.shape[nd - 2], x.shape[-1] // h]
        labels = lx[:nd - 2] + [hname, lx[nd - 2],
                                "%s/%s" % (lx[-1], hname) if lx[-1] and hname else None]
        dist = x.dist
        if dist[0] == "S" and dist[1] >= nd - 2:
            dist = ("S", nd - 2 if dist[1] == nd - 1 else nd - 1)
        return self.apply(sc, x, "split_heads", "split_heads({0}, %s)" % (hname or h),
                          shape=shape, labels=labels, dist=dist, name_it=name_it)

    def op_merge_heads(self, sc):
        x = self.choose(sc, lambda v: v.nd >= 3 and v.dist[0] != "P" and
                        v.dist != ("S", v.nd - 1))
        if x is None:
            return None
        return self.merge_heads_of(sc, x)

    def op_attention(self, sc):
        q = self.choose(sc, lambda v: v.nd >= 2 and v.dist[0] != "P" and
                        v.dist != ("S", v.nd - 1) and numel(v.shape) <= MAXEL)
        if q is None:
            return None
        nd = q.nd
        causal = self.chance(0.5)
        qsplit = q.dist == ("S", nd - 2)
        kvdist = ("R",) if qsplit else q.dist

        def kv_ok(u, sk=None):
            return (u.nd == nd and u.dist[0] != "P" and u.dist != ("S", nd - 1) and
                    u.dist != ("S", nd - 2) and
                    all(u.shape[d] == q.shape[d] for d in range(nd) if d != nd - 2) and
                    (not causal or u.shape[nd - 2] == q.shape[nd - 2]) and
                    (u.dist[0] == "R" or q.dist[0] == "R" or u.dist == q.dist) and
                    (sk is None or u.shape[nd - 2] == sk))
        ks = [u for u in sc.pool if kv_ok(u)]
        if ks and self.chance(0.6):
            k = self.pick(ks)
        else:
            sk = q.shape[nd - 2] if causal or self.chance(0.5) else self.extent(cut=False)
            shape = q.shape[:nd - 2] + [sk, q.shape[-1]]
            if numel(shape) > MAXEL:
                sk = q.shape[nd - 2]
                shape = q.shape[:nd - 2] + [sk, q.shape[-1]]
            labels = q.labels[:nd - 2] + [None, q.labels[-1]]
            labels[nd - 2] = self.size_for(sc, sk) if self.chance(0.8) else None
            labels = [l if (l is None or l.isidentifier()) else None for l in labels]
            k = self.leaf(sc, shape, labels, kvdist)
        vs = [u for u in sc.pool if kv_ok(u, k.shape[nd - 2]) and u.shape == k.shape and
              (u.dist[0] == "R" or k.dist[0] == "R" or u.dist == k.dist)]
        if vs and self.chance(0.6):
            vv = self.pick(vs)
        else:
            vv = self.leaf(sc, k.shape, [l if (l is None or l.isidentifier()) else None
                                         for l in k.labels], k.dist)
        # operands split differently are an error: every split one alike
        splits = {u.dist for u in (q, k, vv) if u.dist[0] == "S"}
        if len(splits) > 1:
            return None
        dist = next(iter(splits)) if splits else ("R",)
        e = "attention({0}, {1}, {2}%s)" % (", causal" if causal else "")
        v = Val(q.shape, q.labels, dist, expr=e, args=[q, k, vv], op="attention")
        self.feat("attention-causal" if causal else "attention-full")
        if qsplit:
            self.feat("attention-qsplit")
        return self.emit(sc, v)

    def op_rope(self, sc):
        x = self.choose(sc, lambda v: v.nd >= 2 and v.dist[0] != "P" and
                        v.dist != ("S", v.nd - 1) and v.shape[-1] % 2 == 0)
        if x is None:
            return None
        base = self.pick(["", ", 10000", ", 100.0", ", 5e2"])
        expr = "rope({0}%s)" % base
        if x.nd > 2:
            # past 2 dims the positions are named: the second-to-last
            expr = "rope({0}%s, %d)" % (base or ", 10000", x.nd - 2)
        v = Val(x.shape, x.labels, x.dist, expr=expr, args=[x], op="rope")
        if x.dist == ("S", x.nd - 2):
            self.feat("rope-split-S")
        return self.emit(sc, v)

    def op_scan(self, sc):
        x = self.choose(sc, lambda v: v.dist[0] != "P" and (v.nd > 1 or v.dist[0] == "R"))
        if x is None:
            return None
        dims = [d for d in range(x.nd) if x.dist != ("S", d)]
        d = self.pick(dims)
        r = self.r.randrange(4)
        decay = "" if r == 0 else ", " + self.pick(["0.9", "0.5", "-0.5", "1", "0.25"])
        v = Val(x.shape, x.labels, x.dist, expr="scan({0}, %s%s)" % (self.dim_ref(x, d), decay),
                args=[x], op="scan")
        return self.emit(sc, v)

    # ---- collectives ----
    def coll(self, sc, x, op, d=None, d2=None):
        if op == "all_gather":
            v = Val(x.shape, x.labels, ("R",), expr="all_gather({0}, %s)" % self.dim_ref(x, d),
                    args=[x], op=op)
            v.cut = d
        elif op == "reduce_scatter":
            v = Val(x.shape, x.labels, ("S", d),
                    expr="reduce_scatter({0}, %s)" % self.dim_ref(x, d), args=[x], op=op)
            v.cut = d
        elif op == "all_reduce":
            v = Val(x.shape, x.labels, ("R",), expr="all_reduce({0})", args=[x], op=op)
            v.cut = None
        else:
            v = Val(x.shape, x.labels, ("S", d2), expr="all_to_all({0}, %s, %s)" % (
                self.dim_ref(x, d), self.dim_ref(x, d2)), args=[x], op=op)
            v.cut = d2
        pos = "last" if v.cut == x.nd - 1 else "first" if v.cut == 0 else "middle"
        if v.cut is not None:
            self.feat("%s-dim-%s" % (op, pos))
        v.scope = sc
        # most collectives are named: schedule entries need a name
        self.emit(sc, v, name_it=self.chance(0.85))
        self.colls.append(v)
        if op == "all_gather" and v.name and self.chance(0.25):
            # with --backward the forward keeps it whole
            sc.stmts.append("save %s;" % v.name)
            self.feat("save")
        return v

    def op_gather(self, sc):
        x = self.choose(sc, lambda v: v.dist[0] == "S")
        if x is None:
            return None
        return self.coll(sc, x, "all_gather", x.dist[1])

    def op_reduce(self, sc):
        x = self.choose(sc, lambda v: v.dist[0] == "P", recent=False)
        if x is None:
            x = self.make_partial(sc)
        if x is None:
            return None
        ds = self.splittable(x.shape)
        if not ds or self.chance(0.3):
            return self.coll(sc, x, "all_reduce")
        return self.coll(sc, x, "reduce_scatter", self.pick(ds))

    def op_a2a(self, sc):
        x = self.choose(sc, lambda v: v.dist[0] == "S" and v.nd >= 2 and
                        [d for d in self.splittable(v.shape) if d != v.dist[1]])
        if x is None:
            return None
        d2 = self.pick([d for d in self.splittable(x.shape) if d != x.dist[1]])
        return self.coll(sc, x, "all_to_all", x.dist[1], d2)

    def make_partial(self, sc):
        """A partial sum: a value split along its last dim times a weight
        split along K (a row-parallel matmul); makes that value if needed."""
        x = self.choose(sc, lambda v: v.nd >= 2 and v.dist == ("S", v.nd - 1))
        if x is None:
            y = self.choose(sc, lambda v: v.nd >= 2 and v.dist[0] == "R")
            if y is None:
                return None
            x = self.op_matmul(sc, want="S", x=y)
            if x is None or x.dist != ("S", x.nd - 1):
                return None
        return self.op_matmul(sc, want="P", x=x)

    # ---- blocks: the patterns the paper fuses, on random shapes ----
    def new_leaf(self, sc, shape, dist, labels=None, role=None):
        """A fresh tensor of the given shape and dist, labels from sizes."""
        if labels is None:
            labels = self.labels_for(sc, shape)
        labels = [l if (l is None or l.isidentifier()) else None for l in labels]
        if role and sc.kind == "model":
            return self.declare(sc, role, shape, labels, dist)
        return self.leaf(sc, shape, labels, dist)

    def apply(self, sc, x, op, expr, shape=None, labels=None, dist=None, args=None,
              name_it=None):
        v = Val(shape or x.shape, labels or x.labels, dist or x.dist, expr=expr,
                args=args or [x], op=op)
        v.atomic = is_call(expr)
        return self.emit(sc, v, name_it)

    def gather_all(self, sc, x):
        """x replicated: gathered when split."""
        if x.dist[0] == "S":
            return self.coll(sc, x, "all_gather", x.dist[1])
        return x

    def reduce_any(self, sc, p, prefer=None):
        ds = self.splittable(p.shape)
        if prefer is not None and prefer in ds and self.chance(0.6):
            return self.coll(sc, p, "reduce_scatter", prefer)
        if ds and self.chance(0.75):
            return self.coll(sc, p, "reduce_scatter", self.pick(ds))
        return self.coll(sc, p, "all_reduce")

    def op_block(self, sc):
        self.feat("block")
        return getattr(self, "block_" + self.pick(["mlp", "mlp", "tpsp", "ulysses",
                                                    "zero"]))(sc)

    def block_mlp(self, sc):
        """Megatron MLP on any layout: gather, column- then row-parallel
        matmuls, reduce (scatter along any dim, or all_reduce)."""
        x = self.choose(sc, lambda v: v.nd >= 2 and v.dist[0] != "P")
        if x is None:
            return None
        home = x.dist[1] if x.dist[0] == "S" else None
        xa = self.gather_all(sc, x)
        h = self.op_matmul(sc, want="S", x=xa)
        if h is None or h.dist != ("S", h.nd - 1):
            return h
        if self.chance(0.6):
            h = self.apply(sc, h, "gelu", "%s({0})" % self.pick(["gelu", "silu", "relu"]))
        p = self.op_matmul(sc, want="P", x=h)
        if p is None:
            return h
        self.feat("block-mlp")
        return self.reduce_any(sc, p, home)

    def heads_for(self, width, need_n):
        hs = [h for h in range(1, width + 1) if width % h == 0 and (not need_n or h % self.N == 0)]
        return self.pick(hs) if hs else None

    def block_tpsp(self, sc):
        """Attention, tensor + sequence parallel: gather, heads split over
        the group, row-parallel output projection, reduce."""
        x = self.choose(sc, lambda v: 2 <= v.nd <= 4 and v.dist[0] != "P" and
                        numel(v.shape) <= MAXEL // 2)
        if x is None:
            return None
        home = x.dist[1] if x.dist[0] == "S" else None
        xa = self.gather_all(sc, x)
        nd, D = xa.nd, xa.shape[-1]
        dh = self.pick([1, 2, 4])
        H = self.N * self.pick([1, 2, 2])
        Dq = H * dh
        if numel(xa.shape[:-1]) * Dq > MAXEL:
            return None
        qkv = []
        # grouped-query attention: keys and values of Hk heads, Hk | H,
        # whole groups on every rank (Hk divides by N)
        hks = [h for h in range(1, H + 1) if H % h == 0 and h % self.N == 0]
        Hk = hks[0] if self.chance(0.7) else self.pick(hks)
        if Hk < H:
            self.feat("attention-gqa")
        for j in range(3):
            heads = H if j == 0 else Hk
            Dj = heads * dh
            if self.chance(0.25):
                w = self.new_leaf(sc, [Dj, D], ("S", 0), [None, xa.labels[-1]])
                mm, lw = "{0} @ {1}.T", w.labels[0]
            else:
                w = self.new_leaf(sc, [D, Dj], ("S", 1), [xa.labels[-1], None])
                mm, lw = "{0} @ {1}", w.labels[-1]
            t = self.apply(sc, xa, "matmul", mm, shape=xa.shape[:-1] + [Dj],
                           labels=xa.labels[:-1] + [lw], dist=("S", nd - 1), args=[xa, w],
                           name_it=self.chance(0.3))
            hv = self.split_heads_of(sc, t, heads)
            if j < 2 and dh % 2 == 0 and self.chance(0.3):
                hv = self.apply(sc, hv, "rope", "rope({0}, 10000, %d)" % (hv.nd - 2))
            qkv.append(hv)
        causal = self.chance(0.5)
        q, k, v = qkv
        o = self.apply(sc, q, "attention", "attention({0}, {1}, {2}%s)" % (", causal" if causal else ""),
                       args=[q, k, v])
        self.feat("attention-causal" if causal else "attention-full")
        m = self.merge_heads_of(sc, o)
        p = self.op_matmul(sc, want="P", x=m)
        if p is None:
            return m
        self.feat("block-tpsp")
        return self.reduce_any(sc, p, home if home is not None else nd - 2)

    def merge_heads_of(self, sc, x):
        """merge_heads(x): [..., H, S, Dh] -> [..., S, H*Dh], the label D
        back when Dh's is "D/H"; a split along H or S moves with it."""
        nd, lx = x.nd, x.labels
        h, dh = lx[nd - 3], lx[nd - 1]
        merged = None
        if h and dh:
            merged = dh[:len(dh) - len(h) - 1] if dh.endswith("/" + h) and len(dh) > len(h) + 1 \
                else "%s*%s" % (h, dh)
        dist = x.dist
        if dist[0] == "S" and dist[1] >= nd - 3:
            dist = ("S", nd - 2 if dist[1] == nd - 3 else nd - 3)
        return self.apply(sc, x, "merge_heads", "merge_heads({0})",
                          shape=x.shape[:nd - 3] + [x.shape[nd - 2], x.shape[nd - 3] * x.shape[nd - 1]],
                          labels=lx[:nd - 3] + [lx[nd - 2], merged], dist=dist)

    def block_ulysses(self, sc):
        """Ulysses: the sequence split traded for a head split by
        all_to_all, attention, and back."""
        x = self.choose(sc, lambda v: 2 <= v.nd <= 4 and v.dist == ("S", v.nd - 2) and
                        numel(v.shape) <= MAXEL // 2)
        if x is None:
            x = self.choose(sc, lambda v: 2 <= v.nd <= 4 and v.dist[0] != "P" and
                            v.shape[-2] % self.N == 0 and numel(v.shape) <= MAXEL // 2)
            if x is None:
                return None
            if x.dist[0] == "S":
                x = self.coll(sc, x, "all_to_all", x.dist[1], x.nd - 2) if x.dist[1] != x.nd - 2 else x
            else:
                # a replicated value times a sequence-split one is split
                s = self.new_leaf(sc, x.shape, ("S", x.nd - 2), list(x.labels), role="in")
                x = self.apply(sc, x, "add", "{0} + {1}", args=[x, s], dist=("S", x.nd - 2))
        nd, D = x.nd, x.shape[-1]
        dh = self.pick([1, 2, 4])
        H = self.N * self.pick([1, 2])
        Dq = H * dh
        if numel(x.shape[:-1]) * Dq > MAXEL:
            return None
        heads = []
        for _ in range(3):
            w = self.new_leaf(sc, [D, Dq], ("R",), [x.labels[-1], None])
            t = self.apply(sc, x, "matmul", "{0} @ {1}", shape=x.shape[:-1] + [Dq],
                           labels=x.labels[:-1] + [w.labels[-1]], args=[x, w],
                           name_it=self.chance(0.3))
            q = self.split_heads_of(sc, t, H)
            heads.append(self.coll(sc, q, "all_to_all", nd - 1, nd - 2))
        causal = self.chance(0.5)
        q, k, v = heads
        o = self.apply(sc, q, "attention", "attention({0}, {1}, {2}%s)" % (", causal" if causal else ""),
                       args=[q, k, v])
        self.feat("attention-causal" if causal else "attention-full")
        back = self.coll(sc, o, "all_to_all", nd - 2, nd - 1)
        m = self.merge_heads_of(sc, back)
        self.feat("block-ulysses")
        if self.chance(0.6):
            return self.op_matmul(sc, x=m) or m
        return m

    def block_zero(self, sc):
        """ZeRO: x^T dy over tokens split over the group is a partial sum,
        reduce-scattered along a weight dim."""
        x = self.choose(sc, lambda v: v.nd >= 2 and v.dist == ("S", v.nd - 2))
        if x is None:
            x = self.choose(sc, lambda v: v.nd >= 2 and v.dist[0] == "R" and
                            v.shape[-2] % self.N == 0)
            if x is None:
                return None
            s = self.new_leaf(sc, x.shape, ("S", x.nd - 2), list(x.labels), role="in")
            x = self.apply(sc, x, "mul", "{0} * {1}", args=[x, s], dist=("S", x.nd - 2))
        F = self.extent()
        if numel(x.shape[:-1]) * F > MAXEL or x.shape[-1] * F > MAXEL:
            F = self.N
        labels = x.labels[:-1] + [None]
        dy = self.new_leaf(sc, x.shape[:-1] + [F], ("S", x.nd - 2), labels, role="in")
        t = self.mm_infer(x, dy, 1, 0)
        if t is None:
            return None
        g = self.apply(sc, x, "matmul", "{0}.T @ {1}", shape=t[0], labels=t[1], dist=t[2],
                       args=[x, dy])
        self.feat("matmul-ta")
        self.feat("block-zero")
        return self.reduce_any(sc, g)

    def op_input(self, sc):
        """A fresh input (or weight in a layer) of a random layout."""
        base = self.choose(sc, lambda v: True, recent=False)
        if base is not None and self.chance(0.7):
            shape, labels = list(base.shape), list(base.labels)
            labels = [l if (l is None or l.isidentifier()) else None for l in labels]
        else:
            nd = self.r.randint(2, 4)
            shape = self.layout_shape(nd)
            labels = self.labels_for(sc, shape)
        if numel(shape) > MAXEL:
            return None
        return self.leaf(sc, shape, labels, self.rand_dist(shape))

    # ---- layers ----
    def op_layer(self, sc):
        if sc.kind == "layer" and (sc.depth >= 2 or (self.focus != "layer" and self.chance(0.5))):
            return None
        if self.nlayer >= 3:
            return None
        x = self.choose(sc, lambda v: v.dist[0] != "P" and v.nd >= 2)
        if x is None:
            return None
        nparams = 1 if self.chance(0.7) else 2
        args = [x]
        if nparams == 2:
            y = self.choose(sc, lambda v: v is not x, recent=False)
            if y is None:
                return None
            args.append(y)
        lname, ret = self.gen_layer(sc, args)
        if ret is None:
            return None
        same = ret.typ() == x.typ() and nparams == 1
        if same and (self.focus == "layer" or self.chance(0.6)):
            n = self.pick([1, 2, 3])
            v = Val(ret.shape, ret.labels, ret.dist,
                    expr="repeat(%d, %s, {0})" % (n, lname), args=[x], op="repeat")
            self.feat("repeat")
        else:
            e = "%s(%s)" % (lname, ", ".join("{%d}" % i for i in range(nparams)))
            v = Val(ret.shape, ret.labels, ret.dist, expr=e, args=args, op="layer-call")
            self.feat("layer-call-%dparam" % nparams)
        if sc.kind == "layer":
            self.feat("layer-nested")
        return self.emit(sc, v)

    def gen_layer(self, caller, args):
        """A layer of len(args) parameters typed like args; returns its name
        and what it returns (a Val of the layer's scope)."""
        self.nlayer += 1
        lname = "%s%d" % (self.pick(["blk", "mlp", "attn", "mix", "f"]), self.nlayer)
        self.global_names.add(lname)
        sc = Scope(self, "layer", lname, parent=self.model)
        sc.depth = getattr(caller, "depth", 0) + 1
        pnames = []
        for a in args:
            p = sc.fresh("p" if self.chance(0.5) else "x")
            pnames.append(p)
            pv = Val(a.shape, a.labels, a.dist, name=p, role="param")
            sc.pool.append(pv)
        params = list(sc.pool)
        if self.focus == "layer" and sc.depth == 1:
            self.op_layer(sc)  # a nested layer, at least tried
        self.walk(sc, self.r.randint(2, 6))
        # return something of the parameter's type when that is easy (repeat)
        ret = None
        if self.focus == "layer" or self.chance(0.7):
            ret = self.coerce(sc, [v for v in sc.pool if v.role != "weight"][-1], params[0])
        if ret is None:
            ret = self.choose(sc, lambda v: v.role != "weight") or params[0]
        if ret.role == "param":
            # the call's result would be the argument itself, which may be
            # an input: an output must be computed
            ret = self.emit(sc, Val(ret.shape, ret.labels, ret.dist, expr="scale({0}, 1.5)",
                                    args=[ret], op="scale"), name_it=False)
        ret.uses += 1
        lines = ["layer %s(%s) {" % (lname, ", ".join(pnames))]
        for name, val, text in sc.sizes:
            lines.append("  size %s = %s;" % (name, text))
        lines += ["  " + s for s in self.render(sc)]
        lines.append("  return %s;" % self.text(ret))
        lines.append("}")
        self.layers.append("\n".join(lines))
        return lname, ret

    def coerce(self, sc, v, target):
        """Ops turning v into target's type (shape, dist), or None."""
        if v.nd != target.nd or v.shape[:-1] != target.shape[:-1]:
            return None
        if v.shape[-1] != target.shape[-1]:
            # a matmul to the last dim: row-parallel when v is split along it
            lab = [l if (l is None or l.isidentifier()) else None
                   for l in (v.labels[-1], target.labels[-1])]
            u = self.leaf(sc, [v.shape[-1], target.shape[-1]], lab,
                          ("S", 0) if v.dist == ("S", v.nd - 1) else ("R",))
            t = self.mm_infer(v, u, 0, 0)
            if t is None:
                return None
            v = self.emit(sc, Val(t[0], t[1], t[2], expr="{0} @ {1}", args=[v, u], op="matmul"))
            v.atomic = False
        td = target.dist
        if v.dist == td:
            return v if v.shape == target.shape else None
        if v.dist[0] == "P":
            if td[0] == "S":
                v = self.coll(sc, v, "reduce_scatter", td[1])
            else:
                v = self.coll(sc, v, "all_reduce")
        elif v.dist[0] == "S" and td[0] == "R":
            v = self.coll(sc, v, "all_gather", v.dist[1])
        elif v.dist[0] == "S" and td[0] == "S":
            v = self.coll(sc, v, "all_to_all", v.dist[1], td[1])
        elif v.dist[0] == "R" and td[0] == "S":
            # a residual with the split parameter splits the result
            t = self.ew_infer(v, target, "add")
            v = self.emit(sc, Val(t[0], t[1], t[2], expr="{0} + {1}", args=[v, target],
                                  op="add"))
            v.atomic = False
            self.feat("residual")
        return v if v.shape == target.shape and v.dist == td else None

    # ---- the walk ----
    ACTIONS = [("unary", 3), ("ew", 3), ("matmul", 5), ("row", 2), ("split_heads", 1.5),
               ("merge_heads", 1.5), ("attention", 1.5), ("scan", 1), ("rope", 1), ("gather", 4),
               ("reduce", 4), ("a2a", 3), ("input", 1), ("layer", 1.5), ("block", 3)]

    def walk(self, sc, steps):
        acts = list(self.ACTIONS)
        if self.focus:
            acts.append((self.focus, 6))
        tot = sum(w for _, w in acts)
        done = tries = 0
        while done < steps and tries < steps * 20:
            tries += 1
            x = self.r.random() * tot
            for name, w in acts:
                x -= w
                if x < 0:
                    break
            if name == "input" and sc.kind == "layer":
                name = "matmul"
            before = len(sc.stmts)
            v = getattr(self, name if name.startswith("block_") else "op_" + name)(sc)
            if v is not None:
                done += 1
            elif len(sc.stmts) > before:
                done += 1  # a declaration made on the way counts too

    # ---- the model ----
    def layout_shape(self, nd):
        """A global shape of nd dims: leading batch-like dims (maybe 1),
        then sequence-like and feature-like ones, at most MAXEL elements."""
        for _ in range(50):
            shape = [self.extent(cut=d >= nd - 2 or self.chance(0.5), allow1=d < nd - 1)
                     for d in range(nd)]
            if numel(shape) <= MAXEL and numel(shape) >= 8:
                return shape
        return [self.N] * (nd - 1) + [2]

    def run(self):
        r = self.r
        # every fourth seed (3, 7, 11, ...) is a grid of 2 or 3 groups
        # with --backward (cfgrid.py)
        if self.mode is None and self.seed % 4 == 3:
            self.group_names_all = GROUP_NAMES
            return Grid(self, gradcheck).run()
        # every tenth seed is compile-only (bf16, f16), so any ten
        # consecutive seeds hold one
        compile_only = self.mode == "compile" or (self.mode is None and self.seed % 10 == 0)
        # the group size cycles with the seed: 1 to 6 in any 9 seeds
        self.N = (2, 3, 4, 1, 4, 5, 6, 2, 3)[self.seed % 9]
        self.gname = self.pick(GROUP_NAMES)
        self.global_names.add(self.gname)
        if compile_only:
            self.dtype = ["bf16", "f16"][(self.seed // 10) % 2]
        else:
            self.dtype = self.pick(["f32", "f64"])
        self.feat("dtype-" + self.dtype)
        self.feat("N=%d" % self.N)
        # the focus, an action tried first and likelier after, cycles with
        # the seed: any 13 consecutive seeds hold every one
        self.focus = FOCI[self.seed % len(FOCI)]
        self.model = Scope(self, "model", self.pick(["m", "net", "model1", "g"]))
        self.model.depth = 0
        self.colls = []
        self.nrow = 0
        sc = self.model
        nd = self.pick([2, 3, 3, 3, 4, 4])
        self.feat("layout-%dd" % nd)
        shape = self.layout_shape(nd)
        if 1 in shape:
            self.feat("extent-1")
        labels = self.labels_for(sc, shape, p_label=0.9)
        self.leaf(sc, shape, labels, self.rand_dist(shape, p_split=0.8))
        if self.focus:
            f = self.focus
            getattr(self, f if f.startswith("block_") else "op_" + f)(sc)
        self.walk(sc, r.randint(3, 9))
        if not self.colls:
            for op in ("gather", "reduce", "a2a"):
                if getattr(self, "op_" + op)(sc):
                    break
        outs = self.outputs(sc)
        sched, args = self.schedules()
        # a third of the run specs also build and check their backward
        if not compile_only and self.seed % 3 == 1:
            args.append("--backward")
            self.feat("backward")
        return self.render_spec(outs, sched, args, compile_only)

    def outputs(self, sc):
        """The values nothing uses; partial sums are reduced first."""
        sinks = [v for v in sc.pool if v.role == "act" and v.uses == 0]
        outs = []
        for v in sinks:
            if v.dist[0] == "P":
                ds = self.splittable(v.shape)
                if ds and self.chance(0.5):
                    v = self.coll(sc, v, "reduce_scatter", self.pick(ds))
                else:
                    v = self.coll(sc, v, "all_reduce")
            if not v.name:
                v.name = sc.fresh("h")
            outs.append(v)
        if not outs:
            x = sc.pool[-1]
            if x.dist[0] == "P":
                x = self.coll(sc, x, "all_reduce")
            v = Val(x.shape, x.labels, x.dist, expr="relu({0})", args=[x], op="relu")
            v = self.emit(sc, v, name_it=True)
            outs.append(v)
        for v in outs:
            self.feat("out-" + v.dist[0])
        return outs

    # ---- schedules ----
    def cut_extents(self, c):
        """The extents a schedule may cut c along (all_reduce: any dim)."""
        if c.op == "all_reduce":
            return list(c.shape)
        return [c.shape[c.cut]]

    def valid(self, c, ch):
        """Does schedule choice ch apply to collective c (LANGUAGE.md:
        slice(k) needs k*N slices, fuse(..., m) m*N, bidir 2*m*N)?"""
        N = self.N
        kind = ch[0]
        exts = self.cut_extents(c)
        if kind == "vanilla":
            return True
        if kind == "auto":
            # fuse(ring) where there is compute to hide under, else vanilla:
            # either way nothing the spec could do wrong
            return True
        if kind == "slice":
            k = ch[1]
            n = k if c.op == "all_reduce" else N * k
            return any(e % n == 0 for e in exts)
        topo, m, query = ch[1], ch[2], ch[3]
        if query and c.op != "reduce_scatter" and not getattr(c, "by_default", False):
            return False
        lanes = m * (2 if topo == "bidir" else 1)
        return any(e % (N * lanes) == 0 for e in exts)

    def rand_choice(self, first=False):
        """A schedule choice; first: the spec's first, which cycles with the
        seed through every kind, so that a few seeds cover them all."""
        if first:
            return CHOICES[self.seed % len(CHOICES)]
        r = self.r.random()
        if r < 0.15:
            return ("vanilla",)
        if r < 0.25:
            return ("auto",)
        if r < 0.45:
            return ("slice", self.pick([1, 2, 2, 3, 4]))
        topo = self.pick(["ring", "ring", "bidir", "bidir", "pairwise"])
        m = self.pick([1, 1, 2, 2, 3])
        query = self.chance(0.15)
        return ("fuse", topo, m, query)

    def choice_text(self, ch):
        if ch[0] in ("vanilla", "auto"):
            return ch[0]
        if ch[0] == "slice":
            return "slice(%d)" % ch[1]
        s = "fuse(" + ch[1]
        if ch[2] != 1 or self.chance(0.1):
            s += ", m = %d" % ch[2]
        if ch[3]:
            s += ", split = query"
        return s + ")"

    def choice_feat(self, ch):
        if ch[0] in ("vanilla", "auto"):
            return ch[0]
        if ch[0] == "slice":
            return "slice"
        return "fuse-%s%s%s" % (ch[1], "-m" if ch[2] > 1 else "", "-query" if ch[3] else "")

    def schedules(self):
        """The schedule section and the cfc arguments. Collectives named in
        the model or a layer may get an entry; the default (or fuse(ring)
        when none is given) must fit every other one; --schedule, every one."""
        colls = [c for c in self.colls]
        args = ["-D", "%s=%d" % (self.gname, self.N)]
        entries = []
        keyed = set()
        # keys: a model tensor, or layer.tensor for every instance of a layer
        for c in colls:
            if not c.name or id(c) in keyed or not self.chance(0.5):
                continue
            if c.scope.kind == "model":
                key = c.name
                group = [c]
            else:
                key = "%s.%s" % (c.scope.name, c.name)
                group = [d for d in colls if d.scope is c.scope and d.name == c.name]
            for i in range(10):
                ch = CHOICES[(self.seed + 5 + len(entries)) % len(CHOICES)] if i == 0 \
                    else self.rand_choice()
                if all(self.valid(d, ch) for d in group):
                    break
            else:
                ch = ("vanilla",)
            for d in group:
                keyed.add(id(d))
                self.feat("sched-" + self.choice_feat(ch))
            entries.append((key, ch))
            self.feat("sched-key-layer" if "." in key else "sched-key-tensor")
        rest = [c for c in colls if id(c) not in keyed]
        for c in rest:
            c.by_default = True
        default = None
        if self.chance(0.75):
            for i in range(10):
                ch = self.rand_choice(first=i == 0)
                if all(self.valid(c, ch) for c in rest):
                    default = ch
                    break
            else:
                default = ("vanilla",)
        elif not all(self.valid(c, ("fuse", "ring", 1, False)) for c in rest):
            default = ("vanilla",)
        for c in rest:
            self.feat("sched-" + self.choice_feat(default or ("fuse", "ring", 1, False)))
        if default is None:
            self.feat("sched-implicit-default")
        force = None
        if self.chance(0.1) and colls:
            for c in colls:
                c.by_default = True
            for _ in range(10):
                ch = self.rand_choice()
                if all(self.valid(c, ch) for c in colls):
                    force = ch
                    break
        if force:
            args.append("--schedule=" + self.choice_text(force).replace(" ", ""))
            self.feat("cli-schedule")
            self.feat("sched-" + self.choice_feat(force))
        lines = []
        if default or entries:
            lines.append("schedule {")
            items = [("default", default)] if default else []
            items += entries
            self.r.shuffle(items)
            for k, ch in items:
                if k == "default":
                    lines.append("  default %s;" % self.choice_text(ch))
                else:
                    lines.append("  %s: %s;" % (k, self.choice_text(ch)))
            lines.append("}")
        return lines, args

    # ---- text ----
    def render(self, sc):
        """The statements of sc: declarations, and named values."""
        out = []
        for s in sc.stmts:
            if isinstance(s, Val) and not s.name and s.uses == 0:
                s.name = sc.fresh("h")
        for s in sc.stmts:
            if isinstance(s, str):
                out.append(s)
            elif s.name:
                out.append("%s = %s;" % (s.name, self.text(s, top=True)))
            if self.chance(0.03):
                out.append(self.pick(["// a comment", "/* a block comment */"]))
        return out

    def render_spec(self, outs, sched, args, compile_only):
        sc = self.model
        body = ["group %s = %d;" % (self.gname, self.N)]
        sizes = list(sc.sizes)
        while sizes:
            k = self.r.randint(1, len(sizes))
            body.append("size " + ", ".join("%s = %s" % (n, t) for n, _, t in sizes[:k]) + ";")
            sizes = sizes[k:]
        body.append("type %s;" % self.dtype)
        body += self.render(sc)
        names = [v.name for v in outs]
        if len(names) > 1 and self.chance(0.3):
            for n in names:
                body.append("out %s;" % n)
        else:
            body.append("out %s;" % ", ".join(names))
        body += sched
        self.feat("ops=%d" % sum(1 for s in sc.stmts if isinstance(s, Val)))
        ranks = self.N
        qargs = " ".join("'%s'" % a if any(ch in a for ch in "(), =") and a.startswith("--")
                         else a for a in args)
        feats = sorted(f for f in self.features if not f.startswith("ops="))
        head = ["// cfgen seed=%d: tests/gen/cfgen.py --seed %d" % (self.seed, self.seed),
                "// ranks: %d" % ranks,
                "// args: %s" % qargs,
                "// mode: %s" % ("compile" if compile_only else "run"),
                "// gradcheck: %s" % gradcheck(self.leaf_elems),
                "// run: cfc %s SPEC; mpirun -n %d DIR/run --check" % (qargs, ranks)]
        for i in range(0, len(feats), 8):
            head.append("// features: " + " ".join(feats[i:i + 8]))
        text = "\n".join(head) + "\n"
        for l in self.layers:
            text += l + "\n\n"
        text += "model %s {\n" % sc.name
        text += "".join("  " + l + "\n" for l in body)
        text += "}\n"
        return text


# What a batch must exercise (tests/t-gen.sh checks the default batch).
REQUIRED = (
    ["op-" + o for o in ("matmul", "add", "mul", "scale", "gelu", "silu", "relu",
                         "layernorm", "rmsnorm", "softmax", "split_heads", "merge_heads",
                         "attention", "scan", "all_gather", "reduce_scatter",
                         "all_reduce", "all_to_all", "repeat", "layer-call")]
    + ["matmul-ta", "matmul-tb", "matmul-batched", "broadcast", "partial",
       "layernorm-0params", "layernorm-1params", "layernorm-2params",
       "rmsnorm-0params", "rmsnorm-1params", "attention-causal", "attention-full",
       "attention-qsplit", "heads-1", "layer-nested", "layer-size", "block-mlp",
       "block-tpsp", "block-ulysses", "block-zero"]
    + ["%s-dim-%s" % (c, p) for c in ("all_gather", "reduce_scatter", "all_to_all")
       for p in ("first", "middle", "last")]
    + ["layout-2d", "layout-3d", "layout-4d", "extent-1", "dim-by-position"]
    + ["N=%d" % n for n in range(1, 7)]
    + ["dtype-" + t for t in ("f32", "f64", "bf16", "f16")]
    + ["sched-" + k for k in ("vanilla", "auto", "slice", "fuse-ring", "fuse-bidir",
                              "fuse-pairwise", "fuse-ring-m", "fuse-bidir-m",
                              "fuse-pairwise-m", "fuse-ring-query", "key-tensor",
                              "key-layer", "implicit-default")]
    + ["cli-schedule", "size-expr", "size-expr-group", "in-split", "in-repl",
       "weight-split", "weight-repl", "out-R", "out-S"]
    + ["op-rope", "attention-gqa", "save", "backward"]
    + ["grid-" + f for f in ("2groups", "3groups", "order", "seq-tp", "cp", "norm", "mlp",
                             "attention", "gqa", "rope", "grad-split", "out-gathered",
                             "out-logits", "all_gather", "reduce_scatter", "all_reduce")])


# Finite differences cost two reference forwards per element of every
# input and weight: run.sh checks the gradients against them (f64) only
# for specs with at most this many.
FD_ELEMS = 1024


def gradcheck(elems):
    return "yes" if elems <= FD_ELEMS else "no"


def coverage(paths):
    """Prints the required features no spec of paths exercises; their
    number is the exit status."""
    seen = set()
    for p in paths:
        for line in open(p):
            if line.startswith("// features: "):
                seen.update(line[len("// features: "):].split())
    missing = [f for f in REQUIRED if f not in seen]
    print("coverage: %d specs, %d of %d required features%s" % (
        len(paths), len(REQUIRED) - len(missing), len(REQUIRED),
        "; missing: " + " ".join(missing) if missing else ""))
    return len(missing)


def generate(seed, mode=None):
    return Gen(seed, mode).run()


def main():
    if sys.argv[1:2] == ["--coverage"]:
        sys.exit(min(coverage(sys.argv[2:]), 1))
    ap = argparse.ArgumentParser(description="random valid CommFuse specs")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("-o", "--out", help="directory for gen_SEED.cf (else stdout)")
    ap.add_argument("--mode", choices=["run", "compile"],
                    help="force run (f32/f64) or compile-only (bf16/f16) specs")
    a = ap.parse_args()
    for s in range(a.seed, a.seed + a.count):
        text = generate(s, a.mode)
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "gen_%d.cf" % s), "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
