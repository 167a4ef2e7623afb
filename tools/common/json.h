// The little JSON text the benchmarks write by hand: a string escaped for quotes, a list of numbers.
// Not part of the library's API.
#pragma once

#include <string>
#include <vector>

namespace common {

// `s` with '"' and '\\' escaped, to go between quotes (the tools' strings hold no control bytes).
std::string json_escape(const std::string & s);

// "[a, b, ...]" with four decimals each.
std::string json_list(const std::vector<double> & v);

} // namespace common
