#!/usr/bin/env python3
"""LLAMA_CANCEL_THREADS replaces every context's thread count; each command that prints or writes
thread counts says so: a note on stderr and "threads_override" in its JSON, right after the thread
count it was asked for. Runs each such command briefly on the tiny model with LLAMA_CANCEL_THREADS=1
(bench-mtmd, which needs a projector, is left out). usage: cli_threads.py LLAMA_CANCEL_BENCH TINY_MODEL OUT_DIR"""
import json
import os
import subprocess
import sys

exe, model, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
env = dict(os.environ, LLAMA_CANCEL_THREADS="1")
NOTE = "note: LLAMA_CANCEL_THREADS is set: every context runs 1 thread(s)"
failures = []


def run(name, args):
    """Runs the command writing OUT/NAME.json; its JSON object, or None when it failed."""
    path = os.path.join(out, name + ".json")
    p = subprocess.run([exe] + args + ["--json", path], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        failures.append(f"{name}: exit status {p.returncode}: {p.stderr[-500:]}")
        return None
    if NOTE not in p.stderr:
        failures.append(f"{name}: no note on stderr: {p.stderr[:500]!r}")
    with open(path) as f:
        return json.load(f)


def expect_override(name, obj, after):
    keys = list(obj)
    if obj.get("threads_override") != 1 or after not in keys or keys.index("threads_override") != keys.index(after) + 1:
        failures.append(f"{name}: no threads_override 1 after {after!r}: {keys}")


row = run("tune", ["tune", "--model", model, "--budget-ms", "5", "--tokens", "16", "--runs", "1"])
if row:
    expect_override("tune", row, "threads")
row = run("bench-memory", ["bench-memory", "--model", model, "--runs", "3"])
if row:
    expect_override("bench-memory", row, "threads")
row = run("bench-seq", ["bench-seq", "--model", model, "--runs", "1"])
if row:
    expect_override("bench-seq", row, "runs")
row = run("bench-backend", ["bench-backend", "cpu", "--model", model, "--runs", "1", "--batch", "8"])
if row:
    expect_override("bench-backend", row, "threads")
data = run("bench", ["bench", "--model", model, "--runs", "1", "--batches", "8", "--threads", "1", "--backends", "none",
                     "--no-mtmd", "--archs", "none", "--budgets", "5", "--seq-backends", "none"])
if data:
    expect_override("bench", data, "seed")
    for b in data["budgets"]:
        expect_override("bench budget row", b, "threads")

for f in failures:
    print("FAIL:", f)
print(f"cli threads: {len(failures)} failures")
sys.exit(1 if failures else 0)
