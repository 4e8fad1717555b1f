"""diagfmt.py TEXT JSON SARIF: the diagnostics of one cfc run in its
three formats must say the same. TEXT is the text output (the golden
NAME.err), JSON that of -fdiagnostics-format=json, SARIF that of
-fdiagnostics-format=sarif. Checks that both parse; that GCC's JSON has
every error in order with its file, line, column and message, and its
notes as children; that the SARIF log has the fields SARIF 2.1.0
requires (version, runs, tool.driver.name, each result's message) and a
result per error with the same place and text. Exits 1 with the first
difference."""
import json
import re
import sys

POS = re.compile(r"^(.*?):(\d+):(\d+): (error|note): (.*)$")
NOPOS = re.compile(r"^(.*?): (error|note): (.*)$")


def fail(msg):
    print("diagfmt: " + msg)
    sys.exit(1)


def text_diags(path):
    """[(kind, file, line, col, msg)], line 0 without a position."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for ln in f.read().split("\n"):
            if ln.startswith(" ") or not ln:
                continue
            m = POS.match(ln)
            if m:
                out.append((m[4], m[1], int(m[2]), int(m[3]), m[5]))
                continue
            m = NOPOS.match(ln)
            if m:
                out.append((m[2], m[1], 0, 0, m[3]))
    return out


def check_json(want, path):
    with open(path, encoding="utf-8") as f:
        got = json.load(f)
    if not isinstance(got, list):
        fail("JSON: not a list")
    flat = []
    for d in got:
        flat.append(d)
        for c in d.get("children", []):
            if c.get("kind") != "note":
                fail("JSON: a child that is not a note")
            flat.append(c)
    if len(flat) != len(want):
        fail("JSON: %d diagnostics, the text has %d" % (len(flat), len(want)))
    for d, (kind, file, line, col, msg) in zip(flat, want):
        if d.get("kind") != kind or d.get("message") != msg:
            fail("JSON: %r %r, the text says %s %r" % (d.get("kind"), d.get("message"), kind, msg))
        locs = d.get("locations")
        if not isinstance(locs, list):
            fail("JSON: no locations list")
        if line == 0:
            if locs:
                fail("JSON: a location for %r, which has none" % msg)
            continue
        c = locs[0]["caret"] if locs else {}
        if (c.get("file"), c.get("line"), c.get("column")) != (file, line, col):
            fail("JSON: %r at %r, the text says %s:%d:%d" % (msg, c, file, line, col))
        fin = locs[0].get("finish")
        if fin and (fin["line"], fin["column"]) < (line, col):
            fail("JSON: %r finishes before its caret" % msg)


def check_sarif(want, path):
    with open(path, encoding="utf-8") as f:
        log = json.load(f)
    if log.get("version") != "2.1.0" or not isinstance(log.get("runs"), list):
        fail("SARIF: version 2.1.0 and runs are required")
    if len(log["runs"]) != 1:
        fail("SARIF: %d runs" % len(log["runs"]))
    run = log["runs"][0]
    if run.get("tool", {}).get("driver", {}).get("name") != "cfc":
        fail("SARIF: runs[0].tool.driver.name must be cfc")
    res = run.get("results")
    errs = [w for w in want if w[0] == "error"]
    if not isinstance(res, list) or len(res) != len(errs):
        fail("SARIF: %s results, the text has %d errors" % (len(res or []), len(errs)))
    for r, (_, file, line, col, msg) in zip(res, errs):
        if r.get("message", {}).get("text") != msg:
            fail("SARIF: result message %r, the text says %r" % (r.get("message"), msg))
        if r.get("level") not in ("none", "note", "warning", "error"):
            fail("SARIF: level %r" % r.get("level"))
        pl = r["locations"][0]["physicalLocation"]
        if pl["artifactLocation"]["uri"] != file and line:
            fail("SARIF: uri %r, the text says %r" % (pl["artifactLocation"]["uri"], file))
        reg = pl.get("region")
        if line == 0:
            if reg:
                fail("SARIF: a region for %r, which has no position" % msg)
            continue
        if (reg["startLine"], reg["startColumn"]) != (line, col):
            fail("SARIF: %r at %r, the text says %d:%d" % (msg, reg, line, col))
        if (reg["endLine"], reg["endColumn"]) <= (line, col):
            fail("SARIF: %r: the region ends before it starts (endColumn is exclusive)" % msg)
    notes = sum(len(r.get("relatedLocations", [])) for r in res)
    if notes != len(want) - len(errs):
        fail("SARIF: %d related locations, the text has %d notes" % (notes, len(want) - len(errs)))


def main():
    want = text_diags(sys.argv[1])
    if not want:
        fail("no diagnostics in " + sys.argv[1])
    check_json(want, sys.argv[2])
    check_sarif(want, sys.argv[3])


main()
