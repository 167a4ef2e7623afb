// A child row's JSON file: read, parsed, deleted (see json_child.h).
#include "json_child.h"

#include <cstdio>
#include <fstream>

namespace common {

bool child_json::is_true(std::initializer_list<const char *> path) const {
    const json * at = &doc;
    for (const char * key : path) {
        if (!at->is_object()) {
            return false;
        }
        const auto it = at->find(key);
        if (it == at->end()) {
            return false;
        }
        at = &*it;
    }
    return at->is_boolean() && at->get<bool>();
}

child_json take_child_json(const std::string & path) {
    child_json out;
    {
        std::ifstream in(path);
        if (in) {
            out.doc = json::parse(in, nullptr, false);
        }
    }
    std::remove(path.c_str());
    if (!out.doc.is_object()) {
        out.doc = nullptr; // not a row: discarded text, or a value of another kind
    }
    return out;
}

} // namespace common
