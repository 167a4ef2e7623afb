// Prefill throughput and stop latency of one decode configuration (n_ubatch, stop-time budget),
// measured the way a host sees them: shared by `llama-cancel-bench tune` and the benchmark's budget rows.
#pragma once

#include "llama-cancel.h"
#include "models.h"

#include <cstdint>
#include <vector>

namespace common {

struct stop_config {
    int32_t n_ubatch    = 512;
    float   max_stop_ms = 0.0f; // 0: no budget
};

struct stop_figures {
    double              decode_ms      = 0; // median of the uninterrupted prefills
    double              tokens_per_s   = 0;
    std::vector<double> stop_ms;            // store to return, runs that stopped
    int                 finished_first = 0; // runs that finished before the store: not latencies
    int                 late_store     = 0; // stored before the return but after the last checkpoint:
                                            // the call completed; not latencies either
    double              longest_node_ms = 0; // longest CPU node measured (with a budget), worst run
    int                 calls          = 0;  // llama_decode calls of one uninterrupted prefill
};

// On `model`, a context of n_batch = `n_tokens` and cfg.n_ubatch (threads, offload as `base`), with
// `hook` bound when given: `runs` uninterrupted prefills of `n_tokens`, then `runs` prefills that
// another thread stops at a random 10-90% point of the median prefill (seeded).
stop_figures measure_stops(llama_model * model, context_options base, llama_cancel_hook * hook,
                           const stop_config & cfg, int n_tokens, int runs, uint32_t seed);

} // namespace common
