#!/usr/bin/env python3
"""Checks the shared library's dynamic symbol table: the two contract callbacks are exported, and
every exported symbol is llama_cancel_*. usage: [NM=nm] check_exports.py LIBLLAMA_CANCEL
(NM: the target's nm, e.g. aarch64-linux-gnu-nm for a cross build)"""
import os
import subprocess
import sys

out = subprocess.run([os.environ.get("NM") or "nm", "-D", "--defined-only", sys.argv[1]], check=True, capture_output=True, text=True).stdout
names = sorted({line.split()[-1].split("@")[0] for line in out.splitlines()
                if len(line.split()) >= 3 and line.split()[1] in "TtDdBbRrVvWwi"})
print("exported:", " ".join(names))
stray = [n for n in names if not n.startswith("llama_cancel_")]
required = {"llama_cancel_abort_callback", "llama_cancel_decode"}
missing = sorted(required - set(names))
if stray:
    print("FAIL: symbols outside llama_cancel_*:", " ".join(stray))
if missing:
    print("FAIL: missing:", " ".join(missing))
sys.exit(1 if stray or missing else 0)
