#!/usr/bin/env python3
"""The functions the header declares with LLAMA_CANCEL_API, and a check that a binary exports them.

usage: api_names.py HEADER                          print the names, one a line
       api_names.py HEADER pe|elf BINARY [EXTRA_RE] check BINARY's export table: every name of the
                                                   header, and nothing else but names matching
                                                   EXTRA_RE (the host's own functions)
pe: a Windows DLL, read with $OBJDUMP -p (the target's objdump); elf: $NM -D --defined-only."""
import os
import re
import subprocess
import sys


def header_names(path):
    text = open(path, encoding="utf-8").read()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    names = re.findall(r"LLAMA_CANCEL_API\s+[^;(]*?\b(llama_cancel_\w+)\s*\(", body)
    # Every use of the macro outside preprocessor lines is one declaration: a parse that missed one
    # would make the checks below pass on too few names.
    if len(names) != body.count("LLAMA_CANCEL_API") or len(set(names)) != len(names):
        sys.exit(f"FAIL: {body.count('LLAMA_CANCEL_API')} LLAMA_CANCEL_API uses in {path}, parsed {len(names)}")
    return names


def pe_exports(path):
    out = subprocess.run([os.environ.get("OBJDUMP") or "objdump", "-p", path],
                         check=True, capture_output=True, text=True).stdout
    table = out.split("[Ordinal/Name Pointer] Table", 1)
    if len(table) < 2:
        return set()
    return set(re.findall(r"^\s*\[\s*\d+\]\s+\+base\[\s*\d+\]\s+[0-9a-f]+\s+(\S+)", table[1], re.M))


def elf_exports(path):
    out = subprocess.run([os.environ.get("NM") or "nm", "-D", "--defined-only", path],
                         check=True, capture_output=True, text=True).stdout
    return {f[-1].split("@")[0] for f in (line.split() for line in out.splitlines())
            if len(f) >= 3 and f[1] in "TtDdBbRrVvWwi"}


def main():
    names = header_names(sys.argv[1])
    if len(sys.argv) == 2:
        print("\n".join(names))
        return 0
    kind, binary = sys.argv[2], sys.argv[3]
    extra = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
    exported = pe_exports(binary) if kind == "pe" else elf_exports(binary)
    missing = sorted(set(names) - exported)
    stray = sorted(n for n in exported - set(names) if extra is None or not extra.search(n))
    print(f"{os.path.basename(binary)}: {len(exported)} exported, the header's {len(names)} "
          f"llama_cancel_* functions {'all among them' if not missing else 'NOT all among them'}")
    if missing:
        print("FAIL: not exported:", " ".join(missing))
    if stray:
        print(f"FAIL: {len(stray)} exported names outside the header:", " ".join(stray[:20]),
              "..." if len(stray) > 20 else "")
    return 1 if missing or stray else 0


if __name__ == "__main__":
    sys.exit(main())
