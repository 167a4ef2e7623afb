#!/usr/bin/env python3
"""`llama-cancel-bench bench-mtmd video` on the test clip (8 frames) with the tiny vision projector:
the row's JSON names the clip, counts a media chunk per frame, and for each way (today's loop, the
hook, the stateless name) accounts for every latency run: stopped, or finished before the store
(counted apart); the hook and the stateless name stopped at least one. Timing figures are not
asserted. usage: bench_video.py LLAMA_CANCEL_BENCH TEXT_MODEL MMPROJ VIDEO OUT_JSON"""
import json
import subprocess
import sys

exe, model, mmproj, video, out = sys.argv[1:6]
RUNS, FRAMES = 3, 8
subprocess.run([exe, "bench-mtmd", "video", "--model", model, "--mmproj", mmproj, "--video", video, "--runs",
                str(RUNS), "--repeats", "1", "--repeat-for", "0", "--json", out],
               check=True, timeout=600, stdout=subprocess.DEVNULL)
with open(out) as f:
    row = json.load(f)
assert row["kind"] == "video" and row["mode"] == "eval" and row["video"] == video, row
assert row["media_chunks"] == FRAMES and row["clip_s"] is None and row["batch_encode"] is False, row
assert row["media_tokens"] > 0 and row["eval_ms"] > 0, row
for way in ("today", "hook", "stateless"):
    lat = row["eval_stop_%s_ms" % way]
    assert len(lat["all"]) + lat["finished_first"] == RUNS and all(v > 0 for v in lat["all"]), (way, lat)
    if way != "today":
        assert lat["cancelled"] >= 1, (way, lat)
for key in ("eval_hook_overhead_pct", "eval_stateless_overhead_pct", "longest_node_ms"):
    assert isinstance(row[key], (int, float)), key
assert isinstance(row["targets"]["worst_stop_le_target"], bool), row["targets"]
print("bench video: ok")
