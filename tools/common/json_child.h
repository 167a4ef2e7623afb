// The JSON object a child process of the benchmark (bench-backend, bench-mtmd, bench-memory,
// bench-seq) writes into a file, read back with a JSON parser so that the bench embeds the parsed
// object. Built into the CLI alone.
#pragma once

#include "json.h"

#include <initializer_list>
#include <string>

namespace common {

struct child_json {
    json doc; // the object the child wrote; null when there is no file or it holds no JSON object

    bool ok() const { return doc.is_object(); }
    // True when the member at `path` (object keys, outermost first) is the boolean true.
    bool is_true(std::initializer_list<const char *> path) const;
};

// Reads, parses and deletes the file a child row wrote.
child_json take_child_json(const std::string & path);

} // namespace common
