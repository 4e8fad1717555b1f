#!/usr/bin/env python3
"""triage.py: keeps the generator's finds of a `make fuzz` run.

    triage.py GENLOG SPECDIR REGRESS [--build B] [--time SECONDS] [--max K]
    triage.py --kind SPEC...      (the kind each spec's failure has)

GENLOG is tests/gen/run.sh's output over the specs of SPECDIR. For each
FAIL, in order: its kind (tests/gen/reduce.py's: the cfc error, the
runtime call that failed, the -Werror flag, or a wrong result), skipped
when a spec of REGRESS has that kind already or an earlier find of this
run had it; else shrunk by reduce.py (at most SECONDS each, K in all) and
written to REGRESS/gen-SEED.cf under two comment lines:
    // failure: the FAIL line's reason
    // failure kind: KIND
A wrong result has no message to tell one bug from another: its kind adds
the collectives and schedules left in the shrunk spec (cfc --explain), so
a new wrong result under other collectives is kept too.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gen"))
import reduce  # noqa: E402


def fails(log):
    """(seed, reason, text) of every FAIL in a run.sh log."""
    out, cur = [], None
    for line in open(log, errors="replace"):
        if line.startswith(("PASS ", "FAIL ")):
            cur = None
        m = re.match(r"^FAIL .* gen_(\d+) [^(]*\((.*)\)$", line.rstrip("\n"))
        if m:
            cur = [m.group(1), m.group(2), line]
            out.append(cur)
        elif cur is not None:
            cur[2] += line
    return out


def known(regress):
    ks = set()
    for f in os.listdir(regress):
        try:
            for line in open(os.path.join(regress, f), errors="replace"):
                if line.startswith("// failure kind: "):
                    ks.add(line[len("// failure kind: "):].rstrip("\n"))
        except OSError:
            pass
    return ks


def explain(spec, build):
    """'all_to_all fuse(ring,m=2), ...': the collectives of spec as cfc
    schedules them."""
    hdr = open(spec).read()
    m = re.search(r"^// args: (.*)$", hdr, re.M)
    args = []
    if m:
        args = subprocess.run(["sh", "-c", 'eval "set -- $1"; for a; do echo "$a"; done',
                               "sh", m.group(1)], stdout=subprocess.PIPE,
                              text=True).stdout.split("\n")[:-1]
    p = subprocess.run([os.path.join(build, "cfc"), spec, "--explain"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cs = sorted({"%s %s" % (a, b) for a, b in
                 re.findall(r"^\S+:\d+: (\w+) \S+: (\S+)", p.stdout, re.M)})
    return ", ".join(cs)


def spec_kind(spec, build):
    """The kind of spec's failure as a find of its own would get; None when
    it passes."""
    tmp = tempfile.mkdtemp(prefix="cftriage")
    text = reduce.run(spec, build, tmp)
    if not re.search(r"^FAIL ", text, re.M):
        return None
    k = reduce.kind(text)
    if re.match(r"(max_rel_err|runs differ)", k.replace("\\", "")):
        k = "%s under %s" % (k, explain(spec, build))
    return k


def main():
    if sys.argv[1:2] == ["--kind"]:
        for spec in sys.argv[2:]:
            print("%s: %s" % (spec, spec_kind(spec, os.environ.get("B", "build"))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("specs")
    ap.add_argument("regress")
    ap.add_argument("--build", default=os.environ.get("B", "build"))
    ap.add_argument("--time", type=float, default=600)
    ap.add_argument("--max", type=int, default=4)
    a = ap.parse_args()
    have = known(a.regress)
    done = 0
    for seed, why, text in fails(a.log):
        k = reduce.kind(text) or why
        wrong = re.match(r"(max_rel_err|runs differ)", k.replace("\\", ""))
        if not wrong and k in have:
            print("triage: gen_%s: a '%s' failure is kept already" % (seed, k))
            continue
        if done >= a.max:
            print("triage: gen_%s: not kept, %d finds shrunk already" % (seed, done))
            continue
        spec = os.path.join(a.specs, "gen_%s.cf" % seed)
        small = os.path.join(a.specs, "gen_%s.min.cf" % seed)
        n = reduce.shrink(spec, small, k, a.build, time.time() + a.time, log=None)
        done += 1
        if wrong:
            k = "%s under %s" % (k, explain(small, a.build))
            if k in have:
                print("triage: gen_%s: a '%s' failure is kept already" % (seed, k))
                continue
        have.add(k)
        out = os.path.join(a.regress, "gen-%s.cf" % seed)
        with open(out, "w") as f:
            f.write("// failure: %s (make fuzz; gen_%s.cf shrunk in %d tries)\n" % (why, seed, n))
            f.write("// failure kind: %s\n" % k)
            f.write(open(small).read().rstrip("\n") + "\n")
        print("triage: new find %s: %s" % (out, why))


if __name__ == "__main__":
    main()
