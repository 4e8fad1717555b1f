"""check.py DIR MODEL [options]: runs model MODEL through the module that
cfc --emit=py wrote into DIR (and the library libMODEL.so beside it) on
the C driver's data (the header's seeds), under mpirun. Each rank prints
one line per check, "rank R: NAME ok" or "rank R: NAME FAIL why"; t-py.sh
counts them.
  --mpi4py        the communicator from mpi4py (MPI.COMM_WORLD), else
                  comm=None (and mpi4py is never imported)
  --split N       mpi4py: COMM_WORLD split into groups of N ranks, a model
                  on each
  --dump FILE     the driver's --dump (outputs, whole, doubles): the forward
                  here must give the same bits
  --errors        wrong arguments raise the exceptions they should
  --uncaught R    rank R passes a wrong dtype, uncaught: the job must end
  --log PREFIX    the lines go to PREFIX.R too (mpirun mixes the ranks'
                  standard outputs)"""
import os
import sys

import numpy as np

args = sys.argv[1:]
sys.path.insert(0, args[0])
mod = __import__(args[1])
opt = {a: args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
       for i, a in enumerate(args) if a.startswith("--")}
comm = None
if "--mpi4py" in opt:
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if "--split" in opt:
        n = int(opt["--split"])
        comm = comm.Split(comm.Get_rank() // n, comm.Get_rank())
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


log = open("%s.%d" % (opt["--log"], rank), "w") if "--log" in opt else None


def report(name, ok, why=""):
    line = "rank %d: %s %s%s" % (rank, name, "ok" if ok else "FAIL ", "" if ok else why)
    print(line, flush=True)
    if log:
        log.write(line + "\n")
        log.flush()


def rel(got, want):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
    m = np.abs(want.astype(np.float64)).max()
    return d / m if m > 0 else d


def raises(m, kind, text, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except kind as e:
        if str(e) == text:
            return True
        print("rank %d: %s says %r, not %r" % (rank, kind.__name__, str(e), text))
        return False
    except Exception as e:
        print("rank %d: %s, not %s: %s" % (rank, type(e).__name__, kind.__name__, e))
        return False
    print("rank %d: no %s (%s)" % (rank, kind.__name__, text))
    return False


def errors(m, ins):
    """Wrong arguments: each raises before anything runs, on every rank
    alike, so the model goes on afterwards."""
    M = mod.MODEL
    x = mod.INPUTS[0]
    a = ins[x.cname]
    bad_shape = np.zeros(x.dims, dtype=a.dtype)
    ok = raises(m, ValueError, "%s.forward: input %s: shape %s, expected %s (this rank's shard "
                "of %s)" % (M, x.name, x.dims, x.rank_dims, x.dims), m.forward,
                **dict(ins, **{x.cname: bad_shape}))
    ok &= raises(m, TypeError, "%s.forward: input %s: dtype float64, expected float32 (the model "
                 "is f32)" % (M, x.name), m.forward, **dict(ins, **{x.cname: a.astype(np.float64)}))
    ok &= raises(m, TypeError, "%s.forward: input %s: a numpy.ndarray, not list" % (M, x.name),
                 m.forward, **dict(ins, **{x.cname: a.tolist()}))
    strided = np.zeros(x.rank_dims[:-1] + (2 * x.rank_dims[-1],), np.float32)[..., ::2]
    ok &= raises(m, ValueError, "%s.forward: input %s: not C-contiguous (numpy.ascontiguousarray "
                 "makes it so)" % (M, x.name), m.forward, **dict(ins, **{x.cname: strided}))
    w = mod.WEIGHTS[0]
    ok &= raises(m, TypeError, "%s.forward: missing %s" % (M, w.cname), m.forward,
                 **{k: v for k, v in ins.items() if k != w.cname})
    ok &= raises(m, TypeError, "%s.forward: no input or weight named 'nope' (it takes %s)"
                 % (M, ", ".join(t.cname for t in mod.INPUTS + mod.WEIGHTS)), m.forward,
                 nope=a, **ins)
    ok &= raises(m, ValueError, "%s.reference_forward: input %s: shape %s, expected %s (whole)"
                 % (M, x.name, x.rank_dims, x.dims), m.reference_forward, **dict(
                     {t.cname: mod.seeded(t.cname) for t in mod.INPUTS + mod.WEIGHTS},
                     **{x.cname: a}))
    if mod.BACKWARD:
        dy = mod.OUTPUT_GRADS[0]
        ok &= raises(m, ValueError, "%s.backward: output gradient %s: shape %s, expected %s "
                     "(this rank's shard of %s)" % (M, dy.name, dy.dims, dy.rank_dims, dy.dims),
                     m.backward, **{dy.cname: np.zeros(dy.dims, np.float32)})
    report("errors", ok)


with mod.Model(comm=comm) as m:
    names = mod.INPUTS + mod.WEIGHTS
    whole = {t.cname: mod.seeded(t.cname) for t in names}
    ins = {t.cname: m.shard(t.cname, whole[t.cname]) for t in names}
    if "--errors" in opt:
        errors(m, ins)
    if "--uncaught" in opt and rank == int(opt["--uncaught"]):
        x = mod.INPUTS[0].cname
        m.forward(**dict(ins, **{x: ins[x].astype(np.float64)}))
    out = m.forward(**ins)
    outs = out if isinstance(out, tuple) else (out,)
    ref = m.reference_forward(**whole)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for t, o in zip(mod.OUTPUTS, outs):
        report("shape of %s" % t.name, o.shape == t.rank_dims and o.dtype == mod.NUMPY_DTYPE,
               "%s %s" % (o.shape, o.dtype))
    e = max(rel(o, m.shard(t.cname, r)) for t, o, r in zip(mod.OUTPUTS, outs, refs))
    report("forward matches the reference", e <= 1e-5, "max_rel_err=%.3e" % e)
    if "--dump" in opt:
        data = np.fromfile(opt["--dump"], dtype=np.float64)
        pos, same = 0, True
        for t, o in zip(mod.OUTPUTS, outs):
            n = int(np.prod(t.dims))
            want = data[pos:pos + n].reshape(t.dims)
            pos += n
            same &= bool(np.array_equal(o.astype(np.float64), m.shard(t.cname, want)))
        report("forward equals the C driver's output bit for bit", same and pos == data.size)
    if mod.BACKWARD:
        dys = {t.cname: mod.seeded(t.cname) for t in mod.OUTPUT_GRADS}
        g = m.backward(**{k: m.shard(k, v) for k, v in dys.items()})
        rg = m.reference_backward(**dys)
        worst = max(rel(g[t.cname], m.shard(t.cname, rg[t.cname])) for t in mod.GRADS)
        report("gradients match the reference's", worst <= 1e-5 and set(g) == set(rg) ==
               {t.cname for t in mod.GRADS}, "max_rel_err=%.3e" % worst)
        dsh = {k: m.shard(k, v) for k, v in dys.items()}
        if mod.KEEPS_SAVED:  # cfc --keep-saved
            g2 = m.backward(**dsh)
            report("a second backward of one forward gives the same gradients",
                   all(np.array_equal(g[k], g2[k]) for k in g))
        else:
            # the backward kept tensors in the saved bytes it had read
            try:
                m.backward(**dsh)
                said = ""
            except RuntimeError as e:
                said = str(e)
            m.forward(**ins)
            g2 = m.backward(**dsh)
            report("a second backward of one forward is refused; after the forward again, "
                   "the same gradients", "backward of the last forward pass ran already" in said
                   and all(np.array_equal(g[k], g2[k]) for k in g), said)
    else:
        report("no backward: backward() says so", raises(
            m, RuntimeError, "%s: no backward pass: compile the spec with cfc --backward"
            % mod.MODEL, m.backward))
report("mpi4py %s" % ("used" if comm is not None else "never imported"),
       ("mpi4py" in sys.modules) == (comm is not None))
