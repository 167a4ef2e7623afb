#!/usr/bin/env python3
"""Plots a `llama-cancel-bench tune` JSON file next to it (same name, .png): prefill throughput and worst
stop latency against n_ubatch, the budget, and the library's budget slicing beside them.

    plot_tune.py llama-cancel-tune.json
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path):
    with open(path) as f:
        data = json.load(f)
    fixed = [r for r in data["rows"] if r["max_stop_ms"] == 0]
    lib = [r for r in data["rows"] if r["max_stop_ms"] > 0]
    budget = data["budget_ms"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = [r["n_ubatch"] for r in fixed]
    a1.plot(x, [r["tokens_per_s"] for r in fixed], "o-", label="fixed n_ubatch")
    a2.plot(x, [r["stop_ms"]["max"] for r in fixed], "o-", label="fixed n_ubatch: worst stop")
    a2.plot(x, [r["stop_ms"]["p95"] for r in fixed], "o--", alpha=0.6, label="fixed n_ubatch: p95")
    for r in lib:
        a1.scatter([r["n_ubatch"]], [r["tokens_per_s"]], marker="*", s=200, color="#d6604d",
                   label=f"max_stop_ms {budget:g} (library slicing)", zorder=3)
        a2.scatter([r["n_ubatch"]], [r["stop_ms"]["max"]], marker="*", s=200, color="#d6604d",
                   label=f"max_stop_ms {budget:g}: worst stop", zorder=3)
    rec = data["recommended"]
    a1.scatter([rec["n_ubatch"]], [rec["tokens_per_s"]], facecolors="none", edgecolors="black", s=300,
               label="recommended")
    a2.axhline(budget, color="gray", linestyle="--", label=f"budget {budget:g} ms")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n_ubatch")
        ax.legend(fontsize=8)
    a1.set_ylabel("prefill tokens/s")
    a2.set_ylabel("store to return, ms")
    a2.set_yscale("log")
    a1.set_title("Throughput")
    a2.set_title("Stop latency")
    fig.suptitle(f"llama-cancel-bench tune: {os.path.basename(data['model'])} on {data['device']}, "
                 f"{data['tokens']}-token prefill, {data['runs']} runs per row")
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"saved {out}")


if __name__ == "__main__":
    main(sys.argv[1])
