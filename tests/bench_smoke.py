#!/usr/bin/env python3
"""Runs `llama-cancel-bench bench` briefly and checks its JSON: every configured row is there, the thread
probe saw reader calls and none off-thread, every rollback was measured at the first ubatch's end
(read from the memory, checked here against the batch), every latency row stopped at least one
decode, the plan stability rows decoded every call, and each figure is a number. Timing figures are not asserted.
usage: bench_smoke.py LLAMA_CANCEL_BENCH MODEL OUT_JSON [BACKENDS]
MODEL: the bench-preset model (a decode of 32-512 tokens lasts 70-600 ms, so that a store at 20-66%
of it lands inside the decode on a loaded machine; on the tiny model a 1 ms decode can finish
before the storing thread wakes). BACKENDS: rpc, the default, or none where the RPC backend is
absent."""
import json
import os
import subprocess
import sys

exe, model, out = sys.argv[1:4]
backend_rows = sys.argv[4] if len(sys.argv) > 4 else "rpc"
if os.path.getsize(model) < 10_000_000:  # the tiny preset is under 1 MB, bench 36-63 MB
    sys.exit(f"bench smoke: {model} is not a bench-preset model: its decodes are too short for a store "
             "from another thread to land in them (tests/CMakeLists.txt passes BENCH_MODEL)")
RUNS = 3
subprocess.run([exe, "bench", "--model", model, "--runs", str(RUNS), "--batches", "32,64", "--threads", "1",
                "--backends", backend_rows, "--backend-batch", "64", "--no-mtmd", "--archs", "mamba,lfm2",
                "--arch-preset", "tiny", "--budgets", "50", "--seq-backends", "cpu", "--seq-ubatches", "512,128",
                "--json", out],
               check=True, timeout=900)
with open(out) as f:
    data = json.load(f)
assert data["all"] is False and data["runs"] == RUNS, data["all"]
rows = data["rows"]
assert [(r["batch"], r["threads"]) for r in rows] == [(32, 1), (64, 1)], rows
for r in rows:
    assert r["reader_calls"] > 0 and r["off_thread_calls"] == 0, r
    # A run stops, finishes before the store, or takes the store after its last checkpoint; at
    # least one must have stopped, or the latency figures measure nothing.
    assert r["cancelled"] + r["completed_before_store"] + r["completed_after_store"] == RUNS, r
    assert r["cancelled"] >= 1 and len(r["cancel_ms"]["all"]) == r["cancelled"], r
    # The rollback as measured: n_ubatch at half the batch, stopped at 80% of the nodes, so the
    # memory must end with the first ubatch (seq_pos_max read from llama.cpp after the call).
    rb = r["rollback"]
    assert rb["n_ubatch"] == r["batch"] // 2, rb
    assert rb["status"] == "cancelled" and rb["seq_pos_max"] == r["batch"] // 2 - 1 and rb["ok"] is True, rb
    assert r["n_nodes"] > 0 and r["longest_node_op"], r
    assert r["overhead_pairs"] >= 4, r
    # The same stores without the reader: a decode that returned first has no wait, counted apart.
    today = r["today_ms"]
    assert len(today["all"]) + today["finished_first"] == RUNS and all(v > 0 for v in today["all"]), today
    assert (r["today_over_ours"] is None) == (not today["all"]), r
    for key in ("decode_ms", "reader_overhead_pct", "reader_overhead_cpu_time_pct", "longest_node_ms"):
        assert isinstance(r[key], (int, float)), key
for key in ("overhead_le_1pct", "worst_latency_le_2x_node_plus_1ms", "zero_off_thread", "stored_runs_stopped"):
    assert isinstance(data["targets"][key], bool), key
assert data["targets"]["rollback_ok"] is True, data["targets"]
backends = data["backends"]
assert [b["backend"] for b in backends] == ([] if backend_rows == "none" else ["rpc"]), backends
for b in backends:
    assert "error" not in b, backends
    # Each latency run either landed (a latency) or finished before the store (counted apart).
    for key in ("abort_callback_only_ms", "llama_cancel_ms", "stateless_ms"):
        lat = b[key]
        assert len(lat["all"]) + lat["finished_first"] == RUNS and 0 <= lat["cancelled"] <= RUNS, (key, lat)
        assert all(v > 0 for v in lat["all"]), (key, lat)
    # The abort callback alone does not reach the RPC backend; the hook and the stateless callback must.
    for key in ("llama_cancel_ms", "stateless_ms"):
        assert b[key]["cancelled"] >= 1, (key, b[key])
    for key in ("hook_overhead_pct", "stateless_overhead_pct", "checkpoints_per_decode",
                "stateless_checkpoints_per_decode", "ours_over_abort_pct", "stateless_over_abort_pct"):
        assert isinstance(b[key], (int, float)), key
    for key in ("latency_le_10pct_of_abort", "overhead_le_3pct", "stateless_latency_le_10pct_of_abort",
                "stateless_overhead_le_3pct"):
        assert isinstance(b["targets"][key], bool), key
assert isinstance(data["backends_stateless_targets_met"], bool if backends else type(None))
assert data["mtmd"] == [] and data["mtmd_targets_met"] is None, "--no-mtmd: the section is left out"
memory = data["memory_kinds"]
assert [m["arch"] for m in memory] == ["mamba", "lfm2"], memory
for m in memory:
    assert m["rollback_exact"] is True and m["snapshot_bytes"] > 0, m
    for key in ("ms_per_snapshot", "prefill_ms", "snapshot_share_prefill_pct", "token_ms"):
        assert isinstance(m[key], (int, float)), key
    for key in ("prefill_overhead_sliced_pct", "prefill_overhead_sliced_spare_seq_pct",
                "prefill_overhead_sliced_no_hook_pct", "token_overhead_pct"):
        assert isinstance(m[key]["median"], (int, float)), (key, m)
    # The library's own counts: a snapshot per slice (copied with the hook, shared with a spare
    # sequence on both of these models), none in the token loop, where every step is held.
    slices = m["batch"] // m["n_ubatch"]
    assert m["snapshots_per_prefill"] == slices and m["shared_snapshots_per_prefill_spare_seq"] == slices, m
    assert m["bytes_per_snapshot"] > 0 and m["snapshots_per_token"] == 0 and m["held_steps_per_token"] == 1, m
    for key in ("prefill_stop_ms", "token_loop_stop_ms"):
        assert m[key]["stopped"] + m[key]["finished_first"] + m[key].get("late_store", 0) == m["runs"], (key, m)
assert data["memory_rollback_exact"] is True
budgets = data["budgets"]
assert [b["budget_ms"] for b in budgets] == [0, 50], budgets
for b in budgets:
    assert b["finished_first"] + b["late_store"] + len(b["stop_ms"]["all"]) == RUNS, b
    assert len(b["stop_ms"]["all"]) >= 1, ("no run of the row was stopped", b)
    assert isinstance(b["tokens_per_s"], (int, float)) and b["calls"] >= 1, b
assert budgets[1]["calls"] >= 2, "the budget row slices the batch"
assert isinstance(data["budget_targets_met"], bool)
seq = data["seq"]
assert [(q["backend"], q["n_ubatch"]) for q in seq] == [("cpu", 512), ("cpu", 128)], seq
for q in seq:
    if q["n_ubatch"] == 512:  # one ubatch: bit-identical; smaller ones: within bench-seq's tolerance
        assert q["single"]["logits_mismatches"] == 0 and q["survivor_logits_rule"] == "bit-identical", q
    else:
        assert q["survivor_logits_rule"] == "within 0.005", q
    assert q["single"]["logits_max_abs_diff"] <= 5e-3 and q["survivor_logits_ok"] is True, q
    assert q["single"]["cancelled_count"] + q["single"]["finished_first"] + q["single"]["missed"] == RUNS, q
    # Every dropped sequence's stop is timed (the entry is set before the call returns, and the
    # polling thread takes a last look), each by the first of its two observers.
    assert len(q["seq_stop"]["all"]) == q["single"]["cancelled_count"], q
    assert len(q["seq_stop_polling_thread"]["all"]) == q["single"]["cancelled_count"], q
    for first, polled in zip(q["seq_stop"]["all"], q["seq_stop_polling_thread"]["all"]):
        assert first <= polled, q
    assert len(q["all"]["all"]) + q["all"]["finished_first"] + q["all_missed"] == RUNS, q
    assert len(q["solo"]["all"]) + q["solo"]["finished_first"] + q["solo_missed"] == RUNS, q
    # Each of the three stops was seen at least once, and the survivors' logits were compared.
    assert q["single"]["cancelled_count"] >= 1 and q["all"]["cancelled"] >= 1 and q["solo"]["cancelled"] >= 1, q
    assert q["single"]["logits_compared"] >= 3 * q["single"]["cancelled_count"], q
    assert isinstance(q["extra_le_ubatch_plus_5pct"], bool) and isinstance(q["stop_within_single"], bool), q
assert isinstance(data["seq_targets_met"], bool)
# Plan stability on the CPU (the default row): every call decoded, the moved calls counted; inside
# the library's calls the CPU takes the abort callback, so the hook places no checkpoint there.
plans = data["plans"]
assert [p["setup"] for p in plans] == ["cpu"], plans
assert plans[0]["ubatch"] == plans[0]["prompt"], plans  # one graph a prefill by default
rows = {(r["way"], r["workload"]): r for r in plans[0]["rows"]}
assert sorted(rows) == [("hook", "prefill"), ("hook", "token steps"), ("stateless", "prefill"),
                        ("stateless", "token steps")], rows
for (way, workload), r in rows.items():
    assert r["failed"] == 0 and r["calls"] == (200 if workload == "token steps" else 20), r
    assert 0 <= r["changes_after_two"] <= r["calls"] - 3, r
    assert r["asks_per_call"] > 0, r  # the scheduler asked about every node
    assert isinstance(r["overhead_pct_vs_none"], (int, float)), r
assert rows[("hook", "prefill")]["checkpoints_per_call"] == 0, rows
assert rows[("stateless", "prefill")]["checkpoints_per_call"] > 0, rows
assert isinstance(data["plans_targets_met"], bool)
png = out[:-len(".json")] + ".png"
assert os.path.getsize(png) > 10000, "no plot next to the JSON"
print("bench smoke: ok")
