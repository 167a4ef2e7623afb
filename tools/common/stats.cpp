// Statistics: percentile, max_of and latencies (see stats.h).
#include "stats.h"

#include <algorithm>

namespace common {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) {
        return 0.0;
    }
    std::sort(v.begin(), v.end());
    const double idx = p * (v.size() - 1);
    const size_t lo  = static_cast<size_t>(idx);
    const size_t hi  = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

double paired_overhead_pct(const std::vector<double> & s, const std::vector<double> & ref) {
    std::vector<double> r;
    for (size_t i = 0; i < s.size() && i < ref.size(); ++i) {
        r.push_back(100.0 * (s[i] / ref[i] - 1.0));
    }
    return percentile(r, 0.5);
}

double max_of(const std::vector<double> & v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

store_outcome classify_store(bool stopped, double t_store, double t_ret) {
    if (stopped) {
        return store_outcome::stopped;
    }
    return t_store >= t_ret ? store_outcome::finished_first : store_outcome::late;
}

void latencies::add(double latency_ms, bool first, bool stopped) {
    if (first) {
        finished_first++;
    } else {
        ms.push_back(latency_ms);
    }
    cancelled += stopped ? 1 : 0;
}

} // namespace common
