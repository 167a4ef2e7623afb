#!/usr/bin/env python3
"""Runs `llama-cancel-bench bench-tts` briefly on the tiny pairs of both pipelines (CPU) and checks each
row's JSON: the three steps and three ways are there, each way has --runs latencies (its runs that
finished first counted apart, never 0 ms, and tried again up to 5x --runs attempts), a way's stopped and late runs are among its latencies, figures are
numbers or null where no run produced one, the overhead repeats are as many as asked, and the
targets are booleans. Timing figures are not asserted.
usage: bench_tts_smoke.py LLAMA_CANCEL_BENCH QWEN3_MODEL QWEN3_MMPROJ POCKET_MODEL POCKET_MMPROJ OUT_DIR"""
import json
import os
import subprocess
import sys

exe, q_model, q_mmproj, p_model, p_mmproj, out_dir = sys.argv[1:7]
RUNS, REPEATS = 2, 2
os.makedirs(out_dir, exist_ok=True)
for pipeline, model, mmproj in (("qwen3tts", q_model, q_mmproj), ("pockettts", p_model, p_mmproj)):
    out = os.path.join(out_dir, f"bench_tts_{pipeline}.json")
    if os.path.exists(out):
        os.remove(out)
    # A window of 8 frames keeps the tiny Qwen3-TTS GEN_WAV short.
    p = subprocess.run([exe, "bench-tts", pipeline, "--model", model, "--mmproj", mmproj, "--runs", str(RUNS),
                        "--repeats", str(REPEATS), "--window", "8", "--json", out],
                       capture_output=True, text=True, timeout=600)
    print(p.stdout[-3000:])
    assert p.returncode == 0, (pipeline, p.returncode, p.stderr[-2000:])
    assert "| step " in p.stdout and "targets (" in p.stdout, p.stdout[-500:]
    with open(out) as f:
        row = json.load(f)
    assert row["pipeline"] == pipeline and row["backend"] == "cpu" and row["row"] == pipeline, row["row"]
    assert row["runs"] == RUNS and row["repeats"] == REPEATS and row["window"] == 8, row
    assert row["frame_ms"] > 0, row["frame_ms"]
    assert set(row["steps"]) == {"gen_code", "frame_decode", "gen_wav"}, row["steps"].keys()
    for name, step in row["steps"].items():
        assert step["call_ms"] > 0 and step["stop_limit_ms"] > 0, (name, step)
        assert step["hook_checkpoints_per_call"] >= 0 and step["hook_asks_per_call"] > 0, (name, step)
        # The node profile: GEN_CODE's and GEN_WAV's longest node, not the frame decode's.
        profiled = name != "frame_decode"
        assert ("longest_node_ms" in step) == profiled, (name, step)
        if profiled:
            # (no bound against the call's time: a node preempted on a loaded machine outlasts it)
            assert step["longest_node_ms"] > 0 and step["longest_node_op"], (name, step)
            assert step["longest_node_pct_of_call"] > 0, (name, step)
        for way in ("today", "hook", "stateless"):
            lat = step[way]
            # Attempts go on until RUNS stores landed, at most 5x RUNS in all.
            attempts = len(lat["all"]) + lat["finished_first"]
            # (fewer where the step's attempts passed 60 s: not on the tiny pairs)
            assert len(lat["all"]) == RUNS or (len(lat["all"]) < RUNS and attempts == 5 * RUNS), (name, way, lat)
            assert all(v >= 0 for v in lat["all"]), (name, way, lat)
            has = bool(lat["all"])
            for key in ("p50", "p95", "max", "p50_pct_of_call", "max_pct_of_call"):
                assert (lat[key] is not None) == has, (name, way, key, lat)
            if way == "today":
                assert lat["cancelled"] == 0 and "late" not in lat, (name, lat)  # today's call runs to its end
            else:
                assert lat["cancelled"] + lat["late"] == len(lat["all"]), (name, way, lat)
                assert len(lat["overhead_repeats_pct"]) == REPEATS, (name, way, lat)
                if profiled and lat["all"]:
                    assert isinstance(lat["worst_stop_le_interval_plus_longest_node"], bool), (name, way, lat)
    for way in ("hook", "stateless"):
        assert isinstance(row[f"frame_{way}_overhead_pct"], (int, float)), row
        assert len(row[f"frame_{way}_overhead_repeats_pct"]) == REPEATS, row
    for key in ("every_stop_cancelled", "stop_within_10pct_or_10ms", "overhead_le_2pct"):
        for pre in ("", "stateless_"):
            assert isinstance(row["targets"][pre + key], bool), (pre + key, row["targets"])
    print(f"bench-tts {pipeline}: JSON well formed")
print("bench-tts smoke: both pipelines")
