#!/usr/bin/env python3
"""Plots a `llama-cancel bench` JSON file next to it (same name, .png): cancel latency per CPU
configuration against what a host sees today, overheads, and the backend rows. Works on the
headline run and on --all alike: a section that did not run leaves its panel empty.

    plot_bench.py llama-cancel-bench.json
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
    rows = data["rows"]
    backends = [b for b in data.get("backends", []) if "llama_cancel_ms" in b]
    mtmd = [m for m in data.get("mtmd", []) if "encode_ms" in m]
    memory = [m for m in data.get("memory_kinds", []) if "prefill_ms" in m]
    budgets = data.get("budgets", [])
    seqs = [q for q in data.get("seq", []) if "plain_ms" in q]
    fig, axes = plt.subplots(3, 3, figsize=(22, 16))
    axes = axes.flatten()

    ax = axes[0]
    labels = [f"b{r['batch']} t{r['threads']}" for r in rows]
    ours = [r["cancel_ms"]["all"] or [0.0] for r in rows]
    today = [r["today_ms"]["all"] or [0.0] for r in rows]
    pos = range(len(rows))
    ax.boxplot(today, positions=[p - 0.18 for p in pos], widths=0.3, patch_artist=True,
               boxprops=dict(facecolor="#f4a582"), medianprops=dict(color="black"))
    ax.boxplot(ours, positions=[p + 0.18 for p in pos], widths=0.3, patch_artist=True,
               boxprops=dict(facecolor="#92c5de"), medianprops=dict(color="black"))
    ax.scatter([p + 0.18 for p in pos], [r["longest_node_ms"] for r in rows], marker="_", s=300, color="#b2182b",
               label="longest graph node", zorder=3)
    ax.set_yscale("log")
    ax.set_xticks(list(pos))
    ax.set_xticklabels(labels)
    ax.set_ylabel("store to return, ms (log)")
    ax.set_title("CPU: cancel latency, today (orange) vs llama-cancel (blue)")
    ax.legend(loc="upper left")

    ax = axes[1]
    names = [f"CPU b{r['batch']} t{r['threads']}" for r in rows]
    values = [r["reader_overhead_pct"] for r in rows]
    colors = ["#4393c3"] * len(rows)
    for b in backends:
        names += [f"{b['backend']} hook", f"{b['backend']} stateless"]
        values += [b["hook_overhead_pct"], b.get("stateless_overhead_pct", 0.0)]
        colors += ["#d6604d", "#b8860b"]
    for m in mtmd:
        names += [f"{m['kind']} encode hook", f"{m['kind']} encode stateless"]
        values += [m["encode_hook_overhead_pct"], m.get("encode_stateless_overhead_pct", 0.0)]
        colors += ["#d6604d", "#b8860b"]
    ax.barh(names, values, color=colors)
    ax.axvline(1.0, color="#4393c3", linestyle="--", linewidth=1, label="CPU target 1%")
    ax.axvline(3.0, color="#d6604d", linestyle="--", linewidth=1, label="backend and encode target 3%")
    ax.set_xlabel("overhead with the byte at 0, % (median paired ratio)")
    ax.set_title("Overhead (red: hook, ochre: stateless eval callback)")
    ax.legend(loc="lower right")

    ax = axes[2]
    if backends:
        # Runs that finished before the store have no latency: they are not in these lists.
        methods = [("abort_callback_only_ms", "#f4a582", "abort callback alone"),
                   ("llama_cancel_ms", "#92c5de", "llama-cancel hook"),
                   ("stateless_ms", "#fee08b", "stateless eval callback")]
        x = range(len(backends))
        for k, (key, color, label) in enumerate(methods):
            lat = [[max(v, 1e-3) for v in b.get(key, {}).get("all", [])] or [1e-3] for b in backends]
            ax.boxplot(lat, positions=[i + (k - 1) * 0.27 for i in x], widths=0.24, patch_artist=True,
                       boxprops=dict(facecolor=color), medianprops=dict(color="black"))
            ax.plot([], [], color=color, linewidth=8, label=label)
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{b['backend']}\nb{b['batch']}" for b in backends])
        ax.set_yscale("log")
        ax.set_ylabel("store to return, ms (log)")
        ax.legend()
    ax.set_title("Backends: cancel latency")

    ax = axes[3]
    if mtmd:
        groups = []
        for m in mtmd:
            groups.append((f"{m['kind']} encode", m["encode_cancel_without_ms"]["p50"],
                           m["encode_cancel_with_ms"]["p50"], m.get("encode_cancel_stateless_ms", {}).get("p50")))
            groups.append((f"{m['kind']} embd decode", m["decode_cancel_without_ms"]["p50"],
                           m["decode_cancel_with_ms"]["p50"], None))
        x = range(len(groups))
        ax.bar([i - 0.27 for i in x], [max(g[1], 1e-3) for g in groups], width=0.27, color="#f4a582",
               label="without (p50)")
        ax.bar(list(x), [max(g[2], 1e-3) for g in groups], width=0.27, color="#92c5de", label="llama-cancel hook (p50)")
        ax.bar([i + 0.27 for i in x], [max(g[3], 1e-3) if g[3] is not None else 0 for g in groups], width=0.27,
               color="#fee08b", label="stateless eval callback (p50)")
        ax.set_xticks(list(x))
        ax.set_xticklabels([g[0] for g in groups], rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("store to return, ms (log)")
        ax.legend()
    ax.set_title("Multimodal (mtmd): cancel latency")

    plot_memory(axes[4], memory)
    plot_budgets(axes[5], budgets)
    plot_host_cpu(axes[6], [b for b in backends if "cpu" in b])
    plot_seq(axes[7], seqs)
    axes[8].axis("off")

    selection = "every row (--all)" if data.get("all") else "headline rows"
    fig.suptitle(f"llama-cancel bench: {data['model']['desc']}, {data['model']['n_params'] / 1e6:.1f} M parameters, "
                 f"{data['cores']} cores, {data['runs']} runs, {selection}")
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"saved {out}")


def plot_budgets(ax, budgets):
    """Stop-time budget rows: worst and p95 stop per budget and model, the budget itself, and the
    throughput cost against no budget written above each group."""
    rows = [b for b in budgets if b["budget_ms"] > 0]
    if rows:
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [max(b["stop_ms"]["max"], 1e-3) for b in rows], width=0.4, color="#d6604d",
               label="worst stop")
        ax.bar([i + 0.2 for i in x], [max(b["stop_ms"]["p95"], 1e-3) for b in rows], width=0.4, color="#f4a582",
               label="p95 stop")
        ax.scatter(list(x), [b["budget_ms"] for b in rows], marker="_", s=900, color="black", zorder=3,
                   label="budget")
        for i, b in enumerate(rows):
            ax.annotate(f"{b['throughput_vs_none_pct']:+.0f}% tok/s", (i, max(b["stop_ms"]["max"], b["budget_ms"])),
                        textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        nones = {b["model"]: b for b in budgets if b["budget_ms"] == 0}
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{b['model']}\n{b['budget_ms']:g} ms\n(none: max {nones[b['model']]['stop_ms']['max']:.0f})"
                            if b["model"] in nones else f"{b['model']}\n{b['budget_ms']:g} ms" for b in rows],
                           fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("store to return, ms (log)")
        ax.legend(fontsize=8)
    ax.set_title("Stop-time budget (CPU): stop latency, throughput cost")


def plot_memory(ax, memory):
    """Exact rollback's cost per memory kind: the snapshot copies' share of the prefill (the library's
    own count and time) and the paired overheads with their spread: prefill with the hook (copies),
    with a spare sequence (shared, no copy), single tokens (held, no snapshot)."""
    if memory:
        x = range(len(memory))
        for dx, key, color, label in ((-0.25, "prefill_overhead_sliced_pct", "#92c5de", "prefill, hook"),
                                      (0.0, "prefill_overhead_sliced_spare_seq_pct", "#4393c3",
                                       "prefill, spare sequence"),
                                      (0.25, "token_overhead_pct", "#d6604d", "single tokens")):
            rows = [(i, m) for i, m in zip(x, memory) if key in m]
            med = [m[key]["median"] for _, m in rows]
            err = [[m[key]["median"] - m[key]["min"] for _, m in rows], [m[key]["max"] - m[key]["median"] for _, m in rows]]
            ax.errorbar([i + dx for i, _ in rows], med, yerr=err, fmt="o", color=color, capsize=3,
                        label=f"{label}: paired overhead, median [min, max]")
        ax.scatter([i - 0.25 for i in x], [m["snapshot_share_prefill_pct"] for m in memory], marker="x", color="black",
                   zorder=3, label="snapshot copies' share (their time / prefill)")
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="target 1%")
        ax.axhline(0.0, color="black", linewidth=0.5)
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"{m['arch']}\n{m['memory']}\n{m['snapshot_bytes'] / 1e6:.2f} MB" for m in memory])
        ax.set_ylabel("cost with the byte at 0, %")
        ax.legend(fontsize=7)
    ax.set_title("Memory kinds: exact rollback's cost")


def plot_host_cpu(ax, backends):
    """The decoding thread's CPU time as % of the decode's wall time, byte at 0 (issue #16)."""
    ways = [("plain", "#f4a582", "plain llama_decode"), ("hook", "#92c5de", "hook"),
            ("stateless", "#fee08b", "stateless eval callback")]
    x = range(len(backends))
    for k, (key, color, label) in enumerate(ways):
        ax.bar([i + (k - 1) * 0.27 for i in x], [b["cpu"][key]["thread_cpu_pct_of_wall"] for b in backends],
               width=0.27, color=color, label=label)
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{b['backend']}\nb{b['batch']}" for b in backends])
    ax.set_ylabel("decoding thread CPU, % of wall")
    ax.set_title("Backends: host CPU during a decode")
    if backends:
        ax.legend()


def plot_seq(ax, seqs):
    """Per-sequence cancel (issue #13): the survivors' extra time and the stops, per backend and n_ubatch."""
    seqs = [q for q in seqs if "single" in q]
    x = range(len(seqs))
    bars = [("survivors' extra time", lambda q: q["single"]["extra_ms"]["p50"], "#92c5de"),
            ("cancelled sequence's stop", lambda q: q.get("seq_stop", {}).get("p50") or 0, "#0571b0"),
            ("one sequence alone: stop", lambda q: q.get("solo", {}).get("p50") or 0, "#ca0020"),
            ("all sequences: stop", lambda q: q["all"]["p50"] or 0, "#f4a582")]
    w = 0.8 / len(bars)
    for k, (label, get, color) in enumerate(bars):
        ax.bar([i - 0.4 + w * (k + 0.5) for i in x], [get(q) for q in seqs], width=w, color=color,
               label=label + ", p50")
    ax.set_xticks(list(x))
    ax.set_xticklabels(["%s\nn_ubatch %s" % (q["backend"], q.get("n_ubatch", 512)) for q in seqs])
    ax.set_ylabel("ms")
    ax.set_title("Per-sequence cancel: 4 x 128 tokens")
    if seqs:
        ax.legend(fontsize="small")


if __name__ == "__main__":
    main(sys.argv[1])
