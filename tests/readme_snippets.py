#!/usr/bin/env python3
"""Runs the README's host-guide snippets as written: each fenced block right after a
`<!-- snippet: LANG -->` line, Python with python3 and Node with node (the binding reachable as
`require('llama-cancel')`), with the model path as their one argument. Blocks marked
`<!-- snippet: LANG, not run: REASON -->` are listed with the reason. Each must exit 0 and print, last,
the line the README's snippets print (EXPECTED_LAST_LINE). A Node snippet that cannot run
(no node, or no koffi: npm ci in bindings/node) is listed with the reason too, and in CI (CI=true),
where the README says both are there, fails the test. Each snippet gets 300 s.
usage: readme_snippets.py README MODEL [NODE]   (env: LLAMA_CANCEL_LIBRARY, LLAMA_CANCEL_NODE_BINDING)"""
import os
import re
import subprocess
import sys
import tempfile

# What each snippet prints last: the status of a 512-token decode and the tokens it kept (all of them
# when the decode finished before the store; the snippets assert memory agrees).
EXPECTED_LAST_LINE = r"(ok 512|cancelled (0|[1-9][0-9]*)) tokens in memory"

readme, model = sys.argv[1], sys.argv[2]
node = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] and not sys.argv[3].endswith("NOTFOUND") else None
in_ci = os.environ.get("CI", "").lower() in ("true", "1")
with open(readme) as f:
    text = f.read()
snippets = re.findall(r"<!-- snippet: ([^>]*?) -->\n```\w*\n(.*?)```", text, re.S)
failures, ran = [], []
with tempfile.TemporaryDirectory() as tmp:
    # `require('llama-cancel')` finds bindings/node through a link named like the package.
    binding = os.environ.get("LLAMA_CANCEL_NODE_BINDING", "")
    if binding:
        os.symlink(binding, os.path.join(tmp, "llama-cancel"))
    for i, (tag, code) in enumerate(snippets):
        lang, _, why_not = tag.partition(", not run: ")
        if why_not:
            print(f"-- {lang} snippet not run: {why_not}")
            continue
        if lang == "node" and (not node or not os.path.isfile(os.path.join(binding, "node_modules/koffi/package.json"))):
            why = "no node" if not node else f"koffi is not installed in {binding}/node_modules (npm ci there)"
            print(f"-- node snippet not run: {why}")
            if in_ci:
                failures.append(f"node snippet not run in CI (CI={os.environ['CI']}): {why}")
            continue
        path = os.path.join(tmp, f"snippet{i}.{ {'python': 'py', 'node': 'js'}[lang] }")
        with open(path, "w") as f:
            f.write(code)
        cmd = [sys.executable, path, model] if lang == "python" else [node, path, model]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                                  env=dict(os.environ, NODE_PATH=tmp))
        except subprocess.TimeoutExpired as e:
            print(f"-- {lang} snippet: no exit within {e.timeout} s; output so far: {(e.stdout or b'')[-3000:]!r}")
            failures.append(f"{lang} snippet timed out")
            continue
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        print(f"-- {lang} snippet: exit {proc.returncode}; output: {lines[-1] if lines else '(none)'}")
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            failures.append(lang)
        elif not lines or not re.fullmatch(EXPECTED_LAST_LINE, lines[-1]):
            failures.append(f"{lang} snippet printed {lines[-1] if lines else 'nothing'!r}, "
                            f"not what the README says it prints ({EXPECTED_LAST_LINE})")
        ran.append(lang)
if "python" not in ran:
    failures.append("no Python snippet ran")
print("FAIL: " + ", ".join(failures) if failures else f"README snippets ok: {', '.join(ran)}")
sys.exit(1 if failures else 0)
