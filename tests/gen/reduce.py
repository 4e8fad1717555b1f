#!/usr/bin/env python3
"""reduce.py: shrinks a failing spec while it keeps failing the same way.

    reduce.py SPEC [-o OUT] [--grep REGEX] [--build B] [--time SECONDS]

Runs tests/gen/run.sh on candidates (from the repository root) and keeps
one that still prints a FAIL line whose output matches REGEX: by default
the failure's kind, read from the first run (the cfc exit status, the
runtime call that failed, the build error, or max_rel_err). It deletes
whole layers, statements (chunks, then one at a time: schedule entries
too) and names from 'out' lists, until no deletion keeps the failure.
The header lines (// ranks:, // args:, // mode:) stay. Writes OUT
(default SPEC.min.cf), the best so far after every step.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HEADER = re.compile(r"^// (cfgen seed|ranks|args|mode|run|features|failure)")


def run(path, build, work):
    env = dict(os.environ, B=build, GEN_WORK=work)
    p = subprocess.run(["sh", "tests/gen/run.sh", path], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.stdout


def kind(out):
    """A regex for the kind of failure out shows."""
    m = re.search(r"^FAIL .*\(cfc (exit \d+|crash|hang)", out, re.M)
    if m:
        e = re.search(r"error: (.*)", out)
        if not e:
            return re.escape(m.group(0)[5:])
        words = [re.escape(w) if re.match(r"^[a-z]+$", w) else r"\S+"
                 for w in e.group(1).split()]
        return r"error: " + r"\s+".join(words)
    m = re.search(r"cfrt: rank \d+: op \S+ step -?\d+: (\w+: [a-z ]+)", out)
    if m:
        return re.escape(m.group(1))
    m = re.search(r"error: (.*?)\[(-Werror=[\w-]+)\]", out)
    if m:
        return re.escape(m.group(2))
    m = re.search(r"^FAIL .*\((max_rel_err|runs differ|run \d failed|build|emit)", out, re.M)
    if m:
        return re.escape(m.group(1))
    return None


def structural(line):
    s = line.strip()
    return (not s or HEADER.match(s) or s.startswith("model ") or s.startswith("layer ")
            or s == "}" or s.startswith("group ") or s.startswith("type ")
            or s == "schedule {")


def candidates(lines):
    """Indices of lines a reduction may delete."""
    return [i for i, l in enumerate(lines) if not structural(l)]


def layer_spans(lines):
    """(first, last) line indices of every layer definition."""
    spans, start = [], None
    for i, l in enumerate(lines):
        if l.startswith("layer "):
            start = i
        elif l.startswith("}") and start is not None:
            spans.append((start, i))
            start = None
    return spans


def shrink(spec, out_path, pat, build="build", deadline=None, log=sys.stderr):
    """Writes to out_path the smallest spec found that still fails like
    spec (its run.sh output matching pat); returns the number of tries."""
    lines = open(spec).read().split("\n")
    tmp = tempfile.mkdtemp(prefix="cfreduce")
    cand_path = os.path.join(tmp, os.path.basename(out_path))
    tries = [0]

    def interesting(ls):
        if deadline and time.time() > deadline:
            return False
        tries[0] += 1
        with open(cand_path, "w") as f:
            f.write("\n".join(ls))
        o = run(cand_path, build, tmp)
        ok = bool(re.search(r"^FAIL ", o, re.M)) and (not pat or re.search(pat, o))
        if ok:  # the best so far, in case we are stopped
            with open(out_path, "w") as f:
                f.write("\n".join(ls))
        return ok

    with open(out_path, "w") as f:
        f.write("\n".join(lines))
    changed = True
    while changed and not (deadline and time.time() > deadline):
        changed = False
        for a, b in reversed(layer_spans(lines)):  # whole layers
            trial = lines[:a] + lines[b + 1:]
            if interesting(trial):
                lines, changed = trial, True
        idx = candidates(lines)
        n = max(1, len(idx) // 2)
        while n >= 1:
            i = 0
            while i < len(idx):
                drop = set(idx[i:i + n])
                trial = [l for k, l in enumerate(lines) if k not in drop]
                if interesting(trial):
                    lines = trial
                    idx = candidates(lines)
                    changed = True
                else:
                    i += n
            n //= 2
        # names of out lists, one at a time
        for k, l in enumerate(lines):
            m = re.match(r"^(\s*out )(.*);$", l)
            if not m:
                continue
            names = [x.strip() for x in m.group(2).split(",")]
            for nm in list(names):
                if len(names) < 2:
                    break
                rest = [x for x in names if x != nm]
                trial = lines[:k] + ["%s%s;" % (m.group(1), ", ".join(rest))] + lines[k + 1:]
                if interesting(trial):
                    lines, names, changed = trial, rest, True
    with open(out_path, "w") as f:
        f.write("\n".join(lines))
    return tries[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("-o", "--out")
    ap.add_argument("--grep")
    ap.add_argument("--build", default=os.environ.get("B", "build"))
    ap.add_argument("--time", type=float, help="give up after this many seconds")
    a = ap.parse_args()
    out_path = a.out or re.sub(r"\.cf$", "", a.spec) + ".min.cf"
    first = run(a.spec, a.build, tempfile.mkdtemp(prefix="cfreduce"))
    if not re.search(r"^FAIL ", first, re.M):
        sys.exit("reduce: %s does not fail" % a.spec)
    pat = a.grep or kind(first)
    print("reduce: keeping failures matching /%s/" % pat, file=sys.stderr)
    n = shrink(a.spec, out_path, pat, a.build, time.time() + a.time if a.time else None)
    print("reduce: %s (%d tries)" % (out_path, n), file=sys.stderr)


if __name__ == "__main__":
    main()
