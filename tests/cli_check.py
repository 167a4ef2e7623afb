#!/usr/bin/env python3
"""`llama-cancel check` on the tiny model: exit status 0, the hook bound, and the CPU device's line
says a cancel stops it through the abort callback after each node. A missing model and a file that
is no GGUF: exit status 1 with "error: cannot load the model PATH: ..." on stderr. With a projector,
its encodes' line too.
usage: cli_check.py LLAMA_CANCEL TINY_MODEL [TEXT_MODEL MMPROJ]"""
import os
import re
import subprocess
import sys

exe, model = sys.argv[1], sys.argv[2]
failures = []


def run(args):
    return subprocess.run([exe, "check"] + args, capture_output=True, text=True, timeout=300)


p = run(["--model", model, "--threads", "1"])
print(p.stdout, end="")
if p.returncode != 0:
    failures.append(f"check: exit status {p.returncode}: {p.stderr[-500:]!r}")
if "hook: bound (llama_cancel_hook_bind)" not in p.stdout:
    failures.append("check: no 'hook: bound' line")
if not re.search(r"^  CPU \(cpu, .*\): abort callback after each node$", p.stdout, re.M):
    failures.append("check: no CPU device line with 'abort callback after each node'")

# A missing model and a file that is no GGUF (this script): a clear message, nonzero.
for bad in (os.path.join(os.path.dirname(model), "no-such-model.gguf"), os.path.abspath(__file__)):
    p = run(["--model", bad])
    want = f"error: cannot load the model {bad}: "
    if p.returncode != 1 or not p.stderr.startswith(want) or p.stdout:
        failures.append(f"check --model {bad}: exit status {p.returncode}, stdout {p.stdout[:200]!r}, "
                        f"stderr {p.stderr[:300]!r} (wanted 1 and {want!r})")

if len(sys.argv) > 4:
    text_model, mmproj = sys.argv[3], sys.argv[4]
    p = run(["--model", text_model, "--mmproj", mmproj, "--threads", "1"])
    print(p.stdout, end="")
    line = f"projector {mmproj}: its encodes stop at eval-callback checkpoints (hook)"
    if p.returncode != 0 or line not in p.stdout:
        failures.append(f"check --mmproj: exit status {p.returncode}, no {line!r}: {p.stderr[-500:]!r}")

for f in failures:
    print("FAIL:", f)
print(f"cli check: {len(failures)} failures")
sys.exit(1 if failures else 0)
