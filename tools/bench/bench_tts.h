// What the text-to-speech rows' command (`bench-tts`, bench_tts.cpp) shares with the bench that runs
// them as child processes (bench_children.cpp) and checks their names (bench.cpp): the rows' names,
// the targets and the table's header.
#pragma once

#include "common/backends.h"

#include <string>

namespace bench_tts {

// A row: PAIR or PAIR:BACKEND (cpu, vulkan, vulkan-1t: llvmpipe on one thread, common::setup_backend).
// PAIR names a pipeline and the scripts/make_tts.py preset of its pair: qwen3tts and pockettts the
// bench pairs, qwen3tts-pred the pred pair (a code predictor of the real one's depth: GEN_CODE of
// 15-20 ms on one core).
inline bool is_pipeline(const std::string & p) {
    return p == "qwen3tts" || p == "pockettts";
}
inline std::string pair_pipeline(const std::string & pair) {
    return pair == "qwen3tts-pred" ? "qwen3tts" : pair;
}
inline std::string pair_preset(const std::string & pair) {
    return pair == "qwen3tts-pred" ? "pred" : "bench";
}
inline bool is_row(const std::string & row) {
    const size_t colon = row.find(':');
    const std::string backend = colon == std::string::npos ? "cpu" : row.substr(colon + 1);
    const std::string pair    = row.substr(0, colon);
    return (is_pipeline(pair) || pair == "qwen3tts-pred") && (backend == "cpu" || common::is_vulkan_setup(backend));
}
// For messages and --help.
constexpr const char * k_rows = "qwen3tts, pockettts, qwen3tts-pred, PAIR:vulkan, PAIR:vulkan-1t";

// Targets: a stop within 10% of the call, or within 10 ms for calls under 100 ms; the byte at 0
// costs at most 2% a frame.
constexpr double k_stop_pct = 10.0, k_short_call_ms = 100.0, k_short_stop_ms = 10.0, k_overhead_pct = 2.0;
// Runs of the stop latency per step and way (at most), and the overhead's repeats.
constexpr int k_runs_max = 6, k_repeats = 5;
// CPU threads (the generation's and the projector's): one, as the pairs' sizes were measured.
constexpr int k_threads = 1;

// The table's header: what the rows measure. Defined where libmtmd is built in.
void print_header(int repeats);

} // namespace bench_tts
