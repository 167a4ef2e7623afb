// Statistics over the benchmarks' timings: percentiles, the maximum, and the store-to-return
// latencies of one way of cancelling with the runs it did not reach counted apart. Not part of the
// library's API.
#pragma once

#include <vector>

namespace common {

// p in [0, 1], linear interpolation; 0 for an empty list.
double percentile(std::vector<double> v, double p);
double max_of(const std::vector<double> & v);
// The median of the paired ratios s[i] / ref[i], as % over 1 (what a way costs against its
// reference, the two measured turn by turn).
double paired_overhead_pct(const std::vector<double> & s, const std::vector<double> & ref);

// How a run whose byte another thread stored ended: the byte stopped it; it returned before the
// store (finished first); or the store came before the return, after its last checkpoint, and it
// completed (late). Only a stopped run has a stop latency.
enum class store_outcome { stopped, finished_first, late };
store_outcome classify_store(bool stopped, double t_store, double t_ret);

// Store-to-return latencies of one way of cancelling over a benchmark's runs. A run whose work
// returned before the byte was stored finished first: it is counted apart, never as a latency.
struct latencies {
    std::vector<double> ms;             // runs the store reached first
    int                 cancelled = 0;  // runs the byte stopped
    int                 finished_first = 0;

    void   add(double latency_ms, bool finished_first, bool stopped);
    double p50() const { return percentile(ms, 0.5); }
    double p95() const { return percentile(ms, 0.95); }
};

} // namespace common
