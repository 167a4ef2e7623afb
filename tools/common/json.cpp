// JSON files: printed numbers, latencies, writing a file (see json.h).
#include "json.h"

#include "threads.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace common {

double printed(double v, const char * format) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), format, v);
    return std::strtod(buf, nullptr);
}

json printed_list(const std::vector<double> & v, const char * format) {
    json out = json::array();
    for (double x : v) {
        out.push_back(printed(x, format));
    }
    return out;
}

json to_json(const latencies & l) {
    // No run with a latency (every one finished first, or none stopped): no figure, not 0 ms.
    auto figure = [&l](double v) { return l.ms.empty() ? json(nullptr) : json(printed(v, "%.4f")); };
    return {{"p50", figure(l.p50())},
            {"p95", figure(l.p95())},
            {"max", figure(max_of(l.ms))},
            {"cancelled", l.cancelled},
            {"finished_first", l.finished_first},
            {"all", printed_list(l.ms)}};
}

json with_threads_override(json j, const char * after) {
    const std::optional<int> n = threads_override();
    if (!n) {
        return j;
    }
    json out = json::object();
    for (auto & [key, value] : j.items()) {
        out[key] = std::move(value);
        if (key == after) {
            out["threads_override"] = *n;
        }
    }
    return out;
}

bool write_json_file(const std::string & path, const json & j) {
    std::ofstream out(path);
    // Strings come from models and devices: bytes that are not UTF-8 are replaced, not thrown on.
    out << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    out.close();
    if (!out) {
        std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
        return false;
    }
    return true;
}

} // namespace common
