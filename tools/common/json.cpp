// JSON text: json_escape and json_list (see json.h).
#include "json.h"

#include <cstdio>

namespace common {

std::string json_escape(const std::string & s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out;
}

std::string json_list(const std::vector<double> & v) {
    std::string out = "[";
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof(buf), "%s%.4f", i ? ", " : "", v[i]);
        out += buf;
    }
    return out + "]";
}

} // namespace common
