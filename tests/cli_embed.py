"""`llama-cancel embed`: lines in, one pooled vector per line out (.npy and JSON), bad input refused
clearly, and Ctrl-C (SIGINT, as the terminal sends it) after the first call's progress line: exit
130 with the finished lines' vectors written, bit for bit those of an uninterrupted run.
usage: cli_embed.py LLAMA_CANCEL BERT_MODEL DECODER_MODEL WORKDIR"""
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

exe, bert, decoder, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
failures = []
WORDS = "hello world the of and to in is it that for on with as was this be at by from".split()


def lines_file(name, n, seed=1):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        for i in range(n):
            k = 3 + (i * 7 + seed) % 20
            f.write(" ".join(WORDS[(i * 13 + j * 5 + seed) % len(WORDS)] for j in range(k)) + "\n")
            if i % 10 == 3:
                f.write("\n")  # empty lines are left out
    return path


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", "not an .npy file"
    hlen = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + hlen].decode()
    shape = tuple(int(x) for x in header.split("(")[1].split(")")[0].split(",") if x.strip())
    assert (10 + hlen) % 64 == 0, "header not 64-byte aligned"
    floats = struct.unpack("<%df" % ((len(data) - 10 - hlen) // 4), data[10 + hlen:])
    return shape, floats


def run(args, timeout=300):
    return subprocess.run([exe, "embed"] + args, capture_output=True, text=True, timeout=timeout)


def check(cond, what):
    if not cond:
        failures.append(what)


# .npy and JSON agree, one row per non-empty line, every row finite, rows differ.
small = lines_file("small.txt", 40)
npy = os.path.join(work, "small.npy")
r = run(["--model", bert, "--input", small, "--output", npy, "--seqs", "8"])
check(r.returncode == 0, f"npy run: exit {r.returncode}: {r.stderr[-500:]}")
shape, floats = read_npy(npy)
check(shape[0] == 40 and shape[1] > 0, f"npy shape {shape}, want (40, n)")
r = run(["--model", bert, "--input", small, "--seqs", "8"])
check(r.returncode == 0, f"json run: exit {r.returncode}")
doc = json.loads(r.stdout)
check(doc["n_lines"] == 40 and doc["n_done"] == 40 and not doc["cancelled"], f"json counts {doc['n_lines']}, {doc['n_done']}")
flat = [x for v in doc["vectors"] for x in v]
check(len(flat) == len(floats) and all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(flat, floats)),
      "JSON and .npy vectors differ")
check(doc["vectors"][0] != doc["vectors"][1], "two lines gave the same vector")

# Bad input: a line over --ubatch tokens, a missing file, no pooling: exit 1 with the reason.
r = run(["--model", bert, "--input", small, "--ubatch", "4", "--batch", "64"])
check(r.returncode == 1 and "tokens; a line needs 1..--ubatch" in r.stderr, f"long line: {r.returncode} {r.stderr[-300:]}")
r = run(["--model", bert, "--input", os.path.join(work, "no-such-file.txt")])
check(r.returncode == 1 and "cannot read" in r.stderr, f"missing input: {r.returncode} {r.stderr[-300:]}")
r = run(["--model", decoder, "--input", small])
check(r.returncode == 1 and "pools" in r.stderr, f"a model that pools nothing: {r.returncode} {r.stderr[-300:]}")

# Ctrl-C after the first call's progress line: exit 130, the finished lines' vectors, bit for bit.
big = lines_file("big.txt", 2000, seed=3)
out = os.path.join(work, "big.json")
p = subprocess.Popen([exe, "embed", "--model", decoder, "--pooling", "mean", "--input", big, "--output", out,
                      "--seqs", "32"], stderr=subprocess.PIPE)
seen, deadline = b"", time.monotonic() + 120
while b"[32/" not in seen and time.monotonic() < deadline and p.poll() is None:
    if select.select([p.stderr], [], [], 0.5)[0]:
        seen += os.read(p.stderr.fileno(), 4096)
check(b"[32/" in seen, f"no progress line before the deadline: {seen[-300:]!r}")
p.send_signal(signal.SIGINT)
try:
    rest = p.communicate(timeout=60)[1]
except subprocess.TimeoutExpired:
    p.kill()
    rest = b""
    failures.append("no exit within 60 s of SIGINT")
check(p.returncode == 130, f"exit {p.returncode} after SIGINT, want 130: {(seen + rest)[-400:]!r}")
check(b"cancelled by Ctrl-C" in seen + rest, "no stop report")
if p.returncode == 130:
    doc = json.load(open(out))
    check(doc["cancelled"] and 32 <= doc["n_done"] < doc["n_lines"] == 2000,
          f"after SIGINT: n_done {doc['n_done']} of {doc['n_lines']}, cancelled {doc['cancelled']}")
    check(len(doc["vectors"]) == doc["n_done"], "vectors of other lines than the finished ones")
    head = os.path.join(work, "head.txt")
    with open(big) as f:
        kept = [line for line in f if line.strip()][:64]
    with open(head, "w") as f:
        f.writelines(kept)
    r = run(["--model", decoder, "--pooling", "mean", "--input", head, "--seqs", "32"])
    want = json.loads(r.stdout)["vectors"]
    n = min(doc["n_done"], 64)
    check(doc["vectors"][:n] == want[:n], "the finished lines' vectors are not an uninterrupted run's")

for f in failures:
    print("FAIL:", f)
print("cli_embed:", "ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
