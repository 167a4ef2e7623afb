// The JSON files the benchmarks and `tune` write, built with nlohmann's ordered_json so that keys
// keep the order the files have always had; numbers keep the precision the files have always
// printed. Built into the CLI alone (the tests need no JSON library). Not part of the library's API.
#pragma once

#include "stats.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace common {

using json = nlohmann::ordered_json;

// `v` as `format` prints it, read back ("%g": six significant digits, as a C++ stream prints a
// double): the figures keep the precision the files have always had.
double printed(double v, const char * format = "%g");

// Each value of `v`, printed().
json printed_list(const std::vector<double> & v, const char * format = "%.4f");

// {"p50", "p95", "max", "cancelled", "finished_first", "all"}, four decimals; the three figures are
// null when no run has a latency.
json to_json(const latencies & l);

// `j` with "threads_override": N right after its key `after` when LLAMA_CANCEL_THREADS is set
// (threads.h); `j` as it is otherwise.
json with_threads_override(json j, const char * after = "threads");

// `j` into the file at `path`, indented; false with a message on stderr when it cannot be written.
bool write_json_file(const std::string & path, const json & j);

} // namespace common
