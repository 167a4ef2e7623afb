#include "json_child.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace common {

bool child_json::is_true(std::initializer_list<const char *> path) const {
    const nlohmann::json * at = &doc;
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
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    in.close();
    std::remove(path.c_str());
    child_json out;
    out.text = text.str();
    while (!out.text.empty() && (out.text.back() == '\n' || out.text.back() == ' ')) {
        out.text.pop_back();
    }
    out.doc = nlohmann::json::parse(out.text, nullptr, false);
    return out;
}

} // namespace common
