// Small pieces the benchmark's parts share: statistics, the timed writer thread, JSON text.
#pragma once

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace lcs {

// p in [0, 1], linear interpolation; 0 for an empty list.
double percentile(std::vector<double> v, double p);
double max_of(const std::vector<double> & v);

// A thread that stores 1 into `flag` at absolute steady-clock time `at` (ms, see now_ms) and writes
// the store's own time to *t_store. Sleeps until 1 ms before, then spins, for a precise store.
std::thread store_at(int8_t * flag, double at, double * t_store);

std::string json_escape(const std::string & s);
std::string json_list(const std::vector<double> & v);

// Store-to-return latencies of one way of cancelling over a benchmark's runs. A run whose work
// returned before the byte was stored finished first: it is counted apart, never as a latency.
struct latencies {
    std::vector<double> ms;             // runs the store reached first
    int                 cancelled = 0;  // runs the byte stopped
    int                 finished_first = 0;

    void   add(double latency_ms, bool finished_first, bool stopped);
    double p50() const { return percentile(ms, 0.5); }
    double p95() const { return percentile(ms, 0.95); }
    // {"p50", "p95", "max", "cancelled", "finished_first", "all"}
    std::string json() const;
};

} // namespace lcs
