// The JSON object a child process of the benchmark (bench-backend, bench-mtmd, bench-memory) writes
// into a file: read with a JSON parser, its text kept as written for the bench's own file.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>

namespace common {

struct child_json {
    std::string    text; // as the child wrote it, trailing blanks trimmed; empty when there is none
    nlohmann::json doc;  // parsed; discarded (is_discarded()) when the text is not JSON

    // True when the member at `path` (object keys, outermost first) is the boolean true.
    bool is_true(std::initializer_list<const char *> path) const;
};

// Reads, parses and deletes the file a child row wrote.
child_json take_child_json(const std::string & path);

} // namespace common
