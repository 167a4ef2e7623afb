#!/usr/bin/env python3
"""`llama-cancel-bench bench-mtmd --trace` on a small Qwen3-ASR pair: the trace holds every way's
evaluations of the overhead (runs x repeats each), each with its asks in time order, the hook's and
the stateless callback's checkpoint counts never falling, today's never moving (its cb_eval never
checkpoints); and scripts/trace_views.py reads it, a line for each way.
usage: bench_trace.py LLAMA_CANCEL_BENCH TEXT_MODEL MMPROJ OUT_DIR"""
import os
import subprocess
import sys

exe, model, mmproj, out_dir = sys.argv[1:5]
os.makedirs(out_dir, exist_ok=True)
trace = os.path.join(out_dir, "trace.txt")
RUNS, REPEATS = 2, 1
subprocess.run([exe, "bench-mtmd", "qwen3a", "--model", model, "--mmproj", mmproj, "--runs", str(RUNS), "--repeats",
                str(REPEATS), "--repeat-for", "0", "--seconds", "9", "--trace", trace, "--json",
                os.path.join(out_dir, "row.json")], check=True, timeout=600, stdout=subprocess.DEVNULL)

scripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")
sys.path.insert(0, scripts)
import trace_views  # noqa: E402 (the reader the report uses)

evals = trace_views.read(trace)
ways = sorted(e["way"] for e in evals)
assert ways == sorted([0, 1, 2] * RUNS * REPEATS), ways
for e in evals:
    asks = e["asks"]
    assert len(asks) > 100, (e["way"], len(asks))  # an encode and decodes of a 9 s clip
    assert all(b[0] >= a[0] and b[1] >= a[1] and b[2] >= a[2] for a, b in zip(asks, asks[1:])), e["way"]
    if e["way"] == 0:
        assert asks[-1][2] == asks[0][2], "today's loop never checkpoints"
# (How many checkpoints the hook and the stateless name pass depends on what their policies measured
# before the traced evaluations: a few while a device is measured, none once the small model's
# graphs run uncut. Not asserted.)

report = subprocess.run([sys.executable, os.path.join(scripts, "trace_views.py"), trace], check=True,
                        capture_output=True, text=True).stdout
for name in ("today", "hook", "stateless"):
    assert any(line.startswith(name + ": %d evaluations" % (RUNS * REPEATS)) for line in report.splitlines()), report
print(report)
