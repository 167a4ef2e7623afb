#!/usr/bin/env python3
"""Plots a `llama-cancel-bench bench` JSON file next to it (same name, .png): cancel latency per CPU
configuration against what a host sees today, overheads, and the backend rows. Works on the
headline run and on --all alike: only the panels whose rows ran are drawn, laid out three a row.
A figure no run produced (every run finished before its store) is left out, never drawn as 0.

    plot_bench.py llama-cancel-bench.json
"""
import json
import math
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
    mtmd = [m for m in data.get("mtmd", []) if "encode_ms" in m or "eval_ms" in m]
    memory = [m for m in data.get("memory_kinds", []) if "prefill_ms" in m]
    budgets = data.get("budgets", [])
    seqs = [q for q in data.get("seq", []) if "plain_ms" in q]
    tts = [t for t in data.get("tts", []) if "steps" in t]
    host_cpu = [b for b in backends if "cpu" in b]
    budget_rows = [b for b in budgets if b["budget_ms"] > 0]
    # Each panel with the rows it draws; a panel whose rows did not run is not drawn at all.
    panels = [(plot_cpu_latency, rows, rows), (plot_overheads, (rows, backends, mtmd), rows or backends or mtmd),
              (plot_backends, backends, backends), (plot_mtmd, mtmd, mtmd)] + [(plot_tts, t, t) for t in tts] + [(plot_memory, memory, memory),
              (plot_budgets, budgets, budget_rows), (plot_host_cpu, host_cpu, host_cpu), (plot_seq, seqs, seqs)]
    panels = [(draw, arg) for draw, arg, has in panels if has]
    ncols = min(3, max(len(panels), 1))
    nrows = max(math.ceil(len(panels) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.4 * ncols, 5.4 * nrows + 0.6), squeeze=False)
    axes = axes.flatten()
    for ax, (draw, arg) in zip(axes, panels):
        draw(ax, arg)
    for ax in axes[len(panels):]:
        ax.axis("off")

    selection = "every row (--all)" if data.get("all") else "headline rows"
    fig.suptitle(f"llama-cancel-bench bench: {model_text(data['model'])}; {data['cores']} cores, {data['runs']} runs, "
                 f"{selection}")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # the title's line above the panels
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print(f"saved {out}")


def model_text(model):
    """The model by its figures: llama.cpp's size class is "?B" for the generated models."""
    if "n_layer" not in model:  # a file from before the bench wrote them
        return f"{model['desc']}, {model['n_params'] / 1e6:.1f} M parameters"
    text = (f"{model['arch']}, {model['n_layer']} layers, n_embd {model['n_embd']}, "
            f"{model['n_params'] / 1e6:.1f} M parameters")
    if model.get("ftype"):
        text += f", {model['ftype']}"
    if model.get("file_bytes"):
        text += f", {model['file_bytes'] / 1e6:.1f} MB file"
    return text


def plot_cpu_latency(ax, rows):
    """Cancel latency per CPU row beside what a host polling between native calls waits; the runs
    that finished before their store have no latency and are in neither box."""
    labels = [f"b{r['batch']} t{r['threads']}" for r in rows]
    pos = list(range(len(rows)))
    for key, dx, color in (("today_ms", -0.18, "#f4a582"), ("cancel_ms", 0.18, "#92c5de")):
        have = [(p, r[key]["all"]) for p, r in zip(pos, rows) if r[key]["all"]]
        if have:
            ax.boxplot([v for _, v in have], positions=[p + dx for p, _ in have], widths=0.3, patch_artist=True,
                       boxprops=dict(facecolor=color), medianprops=dict(color="black"))
    ax.scatter([p + 0.18 for p in pos], [r["longest_node_ms"] for r in rows], marker="_", s=300, color="#b2182b",
               label="longest graph node", zorder=3)
    ax.set_yscale("log")
    ax.set_xticks(pos)
    ax.set_xticklabels(labels)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel("store to return, ms (log)")
    ax.set_title("CPU: cancel latency, today (orange) vs llama-cancel (blue)")
    ax.legend(loc="upper left")


def plot_overheads(ax, sections):
    """The byte at 0: the CPU reader's, the backends' and the encodes' paired overheads."""
    rows, backends, mtmd = sections
    names = [f"CPU b{r['batch']} t{r['threads']}" for r in rows]
    values = [r["reader_overhead_pct"] for r in rows]
    colors = ["#4393c3"] * len(rows)
    for b in backends:
        names += [f"{b['backend']} hook", f"{b['backend']} stateless"]
        values += [b["hook_overhead_pct"], b.get("stateless_overhead_pct", 0.0)]
        colors += ["#d6604d", "#b8860b"]
    for m in mtmd:
        if "eval_ms" in m:  # a whole evaluation (audio, or internvl-batch): the median of its repeats
            names += [f"{m['kind']} eval hook", f"{m['kind']} eval stateless"]
            values += [m["eval_hook_overhead_pct"], m["eval_stateless_overhead_pct"]]
        else:
            names += [f"{m['kind']} encode hook", f"{m['kind']} encode stateless"]
            values += [m["encode_hook_overhead_pct"], m.get("encode_stateless_overhead_pct", 0.0)]
        colors += ["#d6604d", "#b8860b"]
    ax.barh(names, values, color=colors)
    if rows:
        ax.axvline(1.0, color="#4393c3", linestyle="--", linewidth=1, label="CPU target 1%")
    if backends or mtmd:
        ax.axvline(3.0, color="#d6604d", linestyle="--", linewidth=1, label="backend and encode target 3%")
    ax.set_xlabel("overhead with the byte at 0, % (median paired ratio)")
    ax.set_title("Overhead (blue: CPU reader, red: hook, ochre: stateless eval callback)")
    ax.legend(loc="lower right")


def plot_backends(ax, backends):
    """Cancel latency per backend row, three ways; runs that finished before the store have no
    latency: they are not in these lists, and a way with none has no box."""
    methods = [("abort_callback_only_ms", "#f4a582", "abort callback alone"),
               ("llama_cancel_ms", "#92c5de", "llama-cancel hook"),
               ("stateless_ms", "#fee08b", "stateless eval callback")]
    x = list(range(len(backends)))
    for k, (key, color, label) in enumerate(methods):
        have = [(i, [max(v, 1e-3) for v in b[key]["all"]]) for i, b in zip(x, backends) if b.get(key, {}).get("all")]
        if have:
            ax.boxplot([v for _, v in have], positions=[i + (k - 1) * 0.27 for i, _ in have], widths=0.24,
                       patch_artist=True, boxprops=dict(facecolor=color), medianprops=dict(color="black"))
        ax.plot([], [], color=color, linewidth=8, label=label)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{b['backend']}\nb{b['batch']}" for b in backends])
    ax.set_xlim(-0.6, len(backends) - 0.4)
    ax.set_yscale("log")
    ax.set_ylabel("store to return, ms (log)")
    ax.legend()
    ax.set_title("Backends: cancel latency")


def plot_mtmd(ax, mtmd):
    """Encode and embedding-decode stops, p50, and whole evaluations' (audio, internvl-batch: without =
    today's check between chunks; the label gives the worst stop as % of the evaluation); a way
    without a latency (no run stopped) has no bar."""
    groups = []
    for m in mtmd:
        if "eval_ms" in m:
            worst = [m[k].get("max_pct_of_eval") for k in ("eval_stop_hook_ms", "eval_stop_stateless_ms")]
            label = "/".join("-" if w is None else f"{w:.1f}" for w in worst)
            groups.append((f"{m['kind']} eval\n(worst {label}%)", m["eval_stop_today_ms"]["p50"],
                           m["eval_stop_hook_ms"]["p50"], m["eval_stop_stateless_ms"]["p50"]))
            continue
        groups.append((f"{m['kind']} encode", m["encode_cancel_without_ms"]["p50"],
                       m["encode_cancel_with_ms"]["p50"], m.get("encode_cancel_stateless_ms", {}).get("p50")))
        groups.append((f"{m['kind']} embd decode", m["decode_cancel_without_ms"]["p50"],
                       m["decode_cancel_with_ms"]["p50"], None))
    for k, (color, label) in enumerate((("#f4a582", "without (p50)"), ("#92c5de", "llama-cancel hook (p50)"),
                                        ("#fee08b", "stateless eval callback (p50)"))):
        have = [(i, g[k + 1]) for i, g in enumerate(groups) if g[k + 1] is not None]
        ax.bar([i + (k - 1) * 0.27 for i, _ in have], [max(v, 1e-3) for _, v in have], width=0.27, color=color,
               label=label)
    ax.set_xticks(list(range(len(groups))))
    ax.set_xticklabels([g[0] for g in groups], rotation=15)
    ax.set_yscale("log")
    ax.set_ylabel("store to return, ms (log)")
    ax.legend()
    ax.set_title("Multimodal (mtmd): cancel latency")


def plot_tts(ax, t):
    """One text-to-speech row (a panel each): the worst stop of each step (GEN_CODE, the backbone's
    frame decode, a window's GEN_WAV) as % of its call, today's (the call runs to its end) beside the
    hook's and the stateless callbacks'; the byte at 0's cost a frame in the title. A way without a
    latency (every run finished first) has no bar."""
    groups = []
    for step, name in (("gen_code", "GEN_CODE"), ("frame_decode", "frame decode"), ("gen_wav", "GEN_WAV")):
        s = t["steps"][step]
        groups.append((f"{name}\n({s['call_ms']:.3g} ms)", s["today"]["max_pct_of_call"],
                       s["hook"]["max_pct_of_call"], s["stateless"]["max_pct_of_call"]))
    for k, (color, label) in enumerate((("#f4a582", "today: between steps (max)"), ("#92c5de", "hook (max)"),
                                        ("#fee08b", "stateless callbacks (max)"))):
        have = [(i, g[k + 1]) for i, g in enumerate(groups) if g[k + 1] is not None]
        ax.bar([i + (k - 1) * 0.27 for i, _ in have], [max(v, 1e-2) for _, v in have], width=0.27, color=color,
               label=label)
    ax.axhline(10.0, color="#555555", linestyle="--", linewidth=1, label="10% of the call")
    values = [v for g in groups for v in g[1:] if v is not None]
    ax.set_ylim(bottom=max(min(values + [10.0]) / 2, 1e-2))
    ax.set_xticks(list(range(len(groups))))
    ax.set_xticklabels([g[0] for g in groups])
    ax.set_yscale("log")
    ax.set_ylabel("worst stop, % of the call (log)")
    ax.legend(fontsize=8)
    cost = " / ".join("-" if t.get(k) is None else f"{t[k]:+.1f}%"
                      for k in ("frame_hook_overhead_pct", "frame_stateless_overhead_pct"))
    ax.set_title(f"Text to speech, {t['row']}: stop inside each step\n(byte at 0 a frame: hook / stateless {cost})")


def plot_budgets(ax, budgets):
    """Stop-time budget rows: worst and p95 stop per budget and model, the budget itself, and the
    throughput cost against no budget written above each group."""
    rows = [b for b in budgets if b["budget_ms"] > 0 and b["stop_ms"]["max"] is not None]
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
                            if nones.get(b["model"], {}).get("stop_ms", {}).get("max") is not None
                            else f"{b['model']}\n{b['budget_ms']:g} ms" for b in rows],
                           fontsize=8)
        ax.set_yscale("log")
        values = [max(b["stop_ms"]["p95"], 1e-3) for b in rows] + [b["budget_ms"] for b in rows]
        ax.set_ylim(min(values) / 4, max(values + [max(b["stop_ms"]["max"], 1e-3) for b in rows]) * 4)
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
    """Per-sequence cancel (issue #13), per backend and n_ubatch: the stops, p50 with their p95 (the
    cancelled sequence's drop, the first of its two observers to see it, and each observer; one
    sequence alone; all four at once), and the survivors' extra time against its target written
    above. A stop no run produced has no bar."""
    seqs = [q for q in seqs if "single" in q]
    bars = [("cancelled sequence's drop (first observer)", "seq_stop", "#0571b0"),
            ("  seen by a thread polling 0.2 ms", "seq_stop_polling_thread", "#92c5de"),
            ("  seen by the decoding thread, next graph", "seq_stop_decoding_thread", "#c6dbef"),
            ("one sequence alone: stop", "solo", "#ca0020"),
            ("all four sequences: stop", "all", "#f4a582")]
    w = 0.8 / len(bars)
    values = []
    for k, (label, key, color) in enumerate(bars):
        have = [(i, q[key]) for i, q in enumerate(seqs) if (q.get(key) or {}).get("p50") is not None]
        p50 = [max(v["p50"], 1e-3) for _, v in have]
        p95 = [max(v["p95"], 1e-3) for _, v in have]
        ax.bar([i - 0.4 + w * (k + 0.5) for i, _ in have], p50, width=w, color=color, label=label + ", p50 (p95)",
               yerr=[[0] * len(have), [b - a for a, b in zip(p50, p95)]], capsize=2)
        values += p50 + p95
    top = max(values or [1.0])
    for i, q in enumerate(seqs):
        extra = q["single"]["extra_ms"]["p50"]
        target = q.get("extra_target_ms")
        text = f"survivors' extra p50 {extra:.0f} ms" + (f"\n(target <= {target:.0f})" if target is not None else "")
        ax.annotate(text, (i, top), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.set_xticks(list(range(len(seqs))))
    ax.set_xticklabels(["%s\nn_ubatch %s" % (q["backend"], q.get("n_ubatch", 512)) for q in seqs])
    ax.set_xlim(-0.6, len(seqs) - 0.4)
    ax.set_yscale("log")
    ax.set_ylim(min(values or [0.1]) / 4, top * 8)
    ax.set_ylabel("store to stop, ms (log)")
    ax.set_title("Per-sequence cancel: 4 x 128 tokens in one batch")
    ax.legend(fontsize="x-small", loc="upper left")


if __name__ == "__main__":
    main(sys.argv[1])
