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

} // namespace lcs
