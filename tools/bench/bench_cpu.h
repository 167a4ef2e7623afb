// The bench's CPU rows, measured in this process on the CPU backend for each batch size and thread
// count: reader overhead, cancel latency, rollback, thread probe and the physical floor (the
// longest graph node). Part of the `bench` command.
#pragma once

#include "bench/bench.h"
#include "common/json.h"
#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// One batch size and thread count: reader overhead, cancel latency against a host today, the
// longest node, the thread probe and the rollback check.
struct cpu_row {
    int    batch = 0, threads = 0, runs = 0;
    double decode_ms = 0, overhead_pct = 0, overhead_cpu_pct = 0;
    int    pairs = 0;
    std::vector<double> lat, today; // store to return: runs the byte stopped; plain decodes the store came before
    int    cancelled = 0, completed_early = 0, completed_late = 0; // late: stored before the return, after the last checkpoint
    int    today_early = 0; // plain decodes that returned before the store: no wait, and no latency either
    double longest_node_ms = 0;
    std::string longest_node_op;
    int    n_nodes = 0;
    int64_t probe_calls = 0, probe_off_thread = 0;
    int    rollback_ubatch = 0;
    llama_pos rollback_pos_max = -2;
    int    rollback_status = 0;
    bool   rollback_ok = false;
};

// The CPU rows' targets, read off the table. stopped: every run whose store came before its return
// stopped with status 2 (runs that finished before the store are counted apart), and one at least.
struct cpu_targets {
    bool overhead = true, latency = true, thread = true, rollback = true, stopped = true;
};

// One row per batch size and thread count, with progress lines on stderr.
std::vector<cpu_row> measure_cpu_rows(const options & opt, llama_model * model);

// The CPU table (llama-bench style), the rollback lines and the targets line; the targets.
cpu_targets print_cpu_rows(const std::vector<cpu_row> & rows);

// One row as the file has always had it.
common::json cpu_row_json(const cpu_row & r);

} // namespace bench
