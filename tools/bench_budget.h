// The benchmark's stop-time budget rows (CPU): for each budget, worst and p95 stop latency and the
// prefill throughput against no budget, side by side in one run. Part of the `bench` command.
#pragma once

#include "common/json.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct budget_bench_options {
    std::string        model;
    std::string        label;   // shown in the table and the JSON
    std::vector<float> budgets; // ms
    int                tokens  = 512;
    int                runs    = 10;
    int                threads = 2;
    uint32_t           seed    = 42;
};

// Prints one table row per budget (and the no-budget baseline) and returns their JSON objects;
// *met is false when a row's worst stop exceeded its budget + 2 ms.
std::vector<common::json> budget_rows(const budget_bench_options & o, bool * met);

} // namespace bench
