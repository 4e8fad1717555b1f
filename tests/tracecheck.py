#!/usr/bin/env python3
"""tracecheck.py FILE NRANKS: checks a job's trace (CFRT_TRACE, cfrt.h
"TRACING"), standard library only. The file parses as JSON; it has a named
process row per rank 0..NRANKS-1 and a named track for every (pid, tid)
with events; no two "X" events of one track overlap (in whole nanoseconds,
as the runtime writes them); every flow id has one "s" and one "f" (bp
"e"), the "s" inside a send event and the "f" inside a receive event of
its track, the two of one message (peers, message number and bytes
agree) and the receive ending no earlier than its send started, less
SKEW ms (default 50: the ranks' time 0 is taken after a barrier, and on
a loaded machine a rank can wait a time slice before it reads its clock;
a timeline off by more is a bug, as is one send joined to another
message's receive); every send event has its flow; every event inside
the generated code (op not "-") names its tensors in args. Prints a
summary line, or the first problems and exits 1.
Usage: tracecheck.py FILE NRANKS [SKEW_MS]"""
import json
import sys


def ns(x):
    return round(float(x) * 1000)


def main():
    path, nranks = sys.argv[1], int(sys.argv[2])
    skew = ns(sys.argv[3] if len(sys.argv) > 3 else 50) * 1000
    ev = json.load(open(path))["traceEvents"]
    bad = []
    procs = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    if procs != set(range(nranks)):
        bad.append(f"process rows {sorted(procs)}, want 0..{nranks - 1}")
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    xs = [e for e in ev if e["ph"] == "X"]
    tracks = {}
    for e in xs:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
        a = e.get("args", {})
        if a.get("op", "-") != "-" and not a.get("tensors"):
            bad.append(f"no tensors in args: {e['name']} (pid {e['pid']})")
    for k, es in tracks.items():
        if k not in named:
            bad.append(f"track {k} has no thread_name")
        es.sort(key=lambda e: ns(e["ts"]))
        for a, b in zip(es, es[1:]):
            if ns(a["ts"]) + ns(a["dur"]) > ns(b["ts"]):
                bad.append(f"overlap on pid {k[0]} tid {k[1]}: {a['name']} / {b['name']}")

    def inside(f, kind):
        """The X event of kind (send, recv) on f's track that holds f."""
        for e in tracks.get((f["pid"], f["tid"]), []):
            t = ns(f["ts"])
            if (e["args"].get("peer") is not None and f": {kind} " in e["name"]
                    and ns(e["ts"]) <= t <= ns(e["ts"]) + ns(e["dur"])):
                return e
        return None

    starts, ends = {}, {}
    for e in ev:
        if e["ph"] == "s":
            starts.setdefault(e["id"], []).append(e)
        elif e["ph"] == "f":
            ends.setdefault(e["id"], []).append(e)
            if e.get("bp") != "e":
                bad.append(f"flow end without bp e: {e}")
    held = set()
    for i in set(starts) | set(ends):
        s, f = starts.get(i, []), ends.get(i, [])
        if len(s) != 1 or len(f) != 1:
            bad.append(f"flow {i}: {len(s)} starts, {len(f)} ends")
            continue
        snd, rcv = inside(s[0], "send"), inside(f[0], "recv")
        if not snd or not rcv:
            bad.append(f"flow {i}: start in a send {bool(snd)}, end in a receive {bool(rcv)}")
            continue
        if snd["args"]["peer"] != rcv["pid"] or rcv["args"]["peer"] != snd["pid"]:
            bad.append(f"flow {i} joins {snd['name']} (pid {snd['pid']}) and {rcv['name']} "
                       f"(pid {rcv['pid']})")
        sa, ra = snd["args"], rcv["args"]
        if (sa.get("msg"), sa.get("bytes")) != (ra.get("msg"), ra.get("bytes")):
            bad.append(f"flow {i}: send message {sa.get('msg')} of {sa.get('bytes')} bytes, "
                       f"receive message {ra.get('msg')} of {ra.get('bytes')} bytes")
        if ns(rcv["ts"]) + ns(rcv["dur"]) < ns(snd["ts"]) - skew:
            bad.append(f"flow {i}: the receive {rcv['name']} (pid {rcv['pid']}) ends "
                       f"{(ns(snd['ts']) - ns(rcv['ts']) - ns(rcv['dur'])) / 1e6:.3f} ms "
                       f"before its send {snd['name']} (pid {snd['pid']}) starts")
        held.add(id(snd))
    sends = [e for e in xs if e["args"].get("peer") is not None and ": send " in e["name"]]
    for e in sends:
        if id(e) not in held:
            bad.append(f"send without a flow: {e['name']} (pid {e['pid']})")
    if bad:
        print(f"{path}: {len(bad)} problems")
        for b in bad[:20]:
            print("  " + b)
        sys.exit(1)
    print(f"{path}: ok: {nranks} ranks, {len(tracks)} tracks, {len(xs)} events, "
          f"{len(sends)} sends with flows")


main()
