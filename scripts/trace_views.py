#!/usr/bin/env python3
"""Which views keep the host's thread busy: reads a trace of `llama-cancel-bench bench-mtmd --trace PATH`
(each ask of the overhead's evaluations: wall and thread CPU time, checkpoints passed so far) and
sums, way by way, the views computed between asks by their last nodes.

A view ends where a checkpoint passed between two asks, or where the asks pause longer than
--gap ms (a split computed to its end with no checkpoint). Its wall time is from its last ask to
the next; its thread CPU over that time is what the host spun waiting (on llvmpipe, which
computes on other threads, the host sleeps otherwise) or computed itself (a split on the host).
"""
import argparse
import collections
import sys

WAYS = {0: "today", 1: "hook", 2: "stateless"}


def read(path):
    """Evaluations, each its E line (written first) and the A lines after it."""
    evals, cur = [], None
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            if p[0] == "E":
                cur = {"way": int(p[2]), "wall": float(p[5]) - float(p[3]), "cpu": float(p[6]) - float(p[4]),
                       "end": (float(p[5]), float(p[6])), "asks": []}
                evals.append(cur)
            elif p[0] == "A" and cur is not None:
                cur["asks"].append((float(p[1]), float(p[2]), int(p[3]), p[4]))
    return evals


def views(ev, gap_ms, tail):
    asks, first = ev["asks"], 0
    for i, a in enumerate(asks):
        nxt = asks[i + 1] if i + 1 < len(asks) else (ev["end"][0], ev["end"][1], a[2], "")
        wall, cpu = nxt[0] - a[0], nxt[1] - a[1]
        checkpoint = nxt[2] != a[2]
        if checkpoint or wall > gap_ms:
            ops = [x[3] for x in asks[first:i + 1]]
            kind = "checkpoint" if checkpoint else "split end"
            yield "%-10s n=%-4d ..%s" % (kind, len(ops), " ".join(ops[-tail:])), wall, cpu
            first = i + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--gap", type=float, default=1.0, help="a pause between asks longer than this, ms, is a view computed")
    ap.add_argument("--tail", type=int, default=6, help="last nodes that name a view")
    ap.add_argument("--top", type=int, default=12, help="views listed a way, by CPU time")
    a = ap.parse_args()
    evals = read(a.trace)
    if not evals:
        sys.exit("no evaluations in %s" % a.trace)
    for way in sorted({e["way"] for e in evals}):
        mine = [e for e in evals if e["way"] == way]
        n = len(mine)
        wall = sum(e["wall"] for e in mine) / n
        cpu = sum(e["cpu"] for e in mine) / n
        print("%s: %d evaluations, %.0f ms wall, thread CPU %.0f ms (%.1f%%)" % (WAYS.get(way, way), n, wall, cpu,
                                                                                  100 * cpu / wall))
        sums = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for e in mine:
            for name, w, c in views(e, a.gap, a.tail):
                s = sums[name]
                s[0] += 1
                s[1] += w
                s[2] += c
        print("  %7s %9s %9s %5s  %s" % ("a eval", "wall ms", "CPU ms", "CPU%", "view (its last nodes)"))
        for name, s in sorted(sums.items(), key=lambda kv: -kv[1][2])[:a.top]:
            print("  %7.1f %9.1f %9.1f %4.0f%%  %s" % (s[0] / n, s[1] / s[0], s[2] / s[0], 100 * s[2] / max(s[1], 1e-9), name))


if __name__ == "__main__":
    main()
