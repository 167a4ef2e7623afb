#!/usr/bin/env python3
"""Every command's command line behaves one way: --help prints the usage on stdout with exit status
0; an unknown option, a value that is not a number, or a value the command refuses after parsing
prints "error: ..." and the usage on stderr, with exit status 2. No model is needed: each command
stops before it loads anything. The two executables hold their own commands: llama-cancel what
users run (generate, embed, tts, check), llama-cancel-bench the others; each one's --help lists only its
own, and a command of the other one is refused with an error that names the other one.
usage: cli_args.py LLAMA_CANCEL LLAMA_CANCEL_BENCH COMMAND..."""
import re
import subprocess
import sys

user_exe, bench_exe, commands = sys.argv[1], sys.argv[2], sys.argv[3:]
USER_COMMANDS = {"generate", "embed", "tts", "check"}
EXES = {"llama-cancel": user_exe, "llama-cancel-bench": bench_exe}


def program(cmd):
    """The executable that holds `cmd`, by name."""
    return "llama-cancel" if cmd in USER_COMMANDS else "llama-cancel-bench"


# Per command: the arguments it needs to get past its positional argument, and one value it
# refuses after parsing (a range or a required option).
CASES = {
    "bench": ([], ["--runs", "0"]),
    "bench-backend": (["cpu"], ["--model", "m.gguf", "--batch", "1"]),
    "bench-memory": ([], ["--model", "m.gguf", "--runs", "2"]),
    "bench-plans": (["cpu"], ["--model", "m.gguf", "--steps", "2"]),
    "bench-embed": (["cpu"], ["--model", "m.gguf", "--per-call", "0"]),
    "bench-mtmd": (["vision"], ["--model", "m.gguf", "--mmproj", "p.gguf", "--threads", "0"]),
    "bench-seq": ([], ["--model", "m.gguf", "--backend", "no-such-backend"]),
    "generate": ([], ["--threads", "0"]),
    "embed": ([], ["--model", "m.gguf", "--input", "lines.txt", "--seqs", "0"]),
    "check": ([], ["--model", "m.gguf", "--threads", "0"]),
    "stress": ([], ["--model", "m.gguf", "--cycles", "-1"]),
    "tune": ([], ["--model", "m.gguf", "--budget-ms", "0"]),
    "bench-tts": (["qwen3tts"], ["--model", "m.gguf", "--mmproj", "p.gguf", "--runs", "0"]),
    "tts": ([], ["--model", "m.gguf", "--mmproj", "p.gguf", "--text", "hi", "--out", "o.wav", "--window", "-1"]),
}

failures = []


def run(name, args):
    return subprocess.run([EXES[name]] + args, capture_output=True, text=True, errors="replace", timeout=60)


def expect_error(args, usage):
    """`usage` names the program: its first word after "usage: "."""
    name = usage.split()[1]
    p = run(name, args)
    what = " ".join([name] + args)
    if p.returncode != 2:
        failures.append(f"{what}: exit status {p.returncode}, not 2")
    if not p.stderr.startswith("error: "):
        failures.append(f"{what}: stderr does not start with 'error: ': {p.stderr[:200]!r}")
    if usage not in p.stderr:
        failures.append(f"{what}: no usage ({usage!r}) on stderr: {p.stderr[:300]!r}")
    if p.stdout:
        failures.append(f"{what}: printed on stdout: {p.stdout[:200]!r}")


def expect_help(args, usage):
    name = usage.split()[1]
    p = run(name, args)
    what = " ".join([name] + args)
    if p.returncode != 0 or not p.stdout.startswith(usage) or p.stderr:
        failures.append(f"{what}: exit status {p.returncode}, stdout {p.stdout[:100]!r}, stderr {p.stderr[:100]!r}")
    return p.stdout


for cmd in commands:
    head, refused = CASES[cmd]
    usage = f"usage: {program(cmd)} {cmd}"
    expect_help([cmd, "--help"], usage)
    expect_error([cmd] + head + ["--no-such-option"], usage)
    expect_error([cmd] + head + ["--cycles" if cmd == "stress" else "--threads", "not-a-number"], usage)
    expect_error([cmd] + head + refused, usage)

# Further values refused after parsing: the bench's section options and stress's minimums.
MORE_REFUSED = {
    "bench": [["--mtmd", "hologram"], ["--mtmd", "vision:vulkan"], ["--tts", "qwen3tts:metal"], ["--seq-ubatches", "0"],
              ["--seq-ubatches", "513"]],
    # the video row's clip goes with KIND video, and only with it
    "bench-mtmd": [["video", "--model", "m.gguf", "--mmproj", "p.gguf"],
                   ["vision", "--model", "m.gguf", "--mmproj", "p.gguf", "--video", "v.mp4"]],
    "stress": [["--model", "m.gguf", "--min-cancels", "-2"], ["--model", "m.gguf", "--min-storm-cancels", "-1"]],
}
for cmd, cases in MORE_REFUSED.items():
    if cmd in commands:
        for args in cases:
            expect_error([cmd] + args, f"usage: {program(cmd)} {cmd}")

# Each executable: its usage lists its own commands and none of the other's; no command or an
# unknown one is refused; a command of the other executable is refused with an error naming it.
for name, other in (("llama-cancel", "llama-cancel-bench"), ("llama-cancel-bench", "llama-cancel")):
    top = f"usage: {name} COMMAND"
    listed = set(re.findall(r"^  (\S+) ", expect_help(["--help"], top), re.M))
    own = {c for c in commands if program(c) == name}
    if listed != own:
        failures.append(f"{name} --help lists {sorted(listed)}, not its commands {sorted(own)}")
    expect_error([], top)
    expect_error(["no-such-command"], top)
    for cmd in sorted(set(commands) - own):
        expect_error([cmd], top)
        p = run(name, [cmd, "--help"])
        hint = f"error: '{cmd}' is a command of {other}: run `{other} {cmd} ...`"
        if p.returncode != 2 or not p.stderr.startswith(hint):
            failures.append(f"{name} {cmd}: exit status {p.returncode}, stderr {p.stderr[:200]!r} "
                            f"(wanted 2 and {hint!r})")

for f in failures:
    print("FAIL:", f)
print(f"cli args: {len(commands)} commands in two executables, {len(failures)} failures")
sys.exit(1 if failures else 0)
