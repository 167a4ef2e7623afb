// LLAMA_CANCEL_THREADS: read once here for the contexts and the commands' notes (see threads.h).
#include "threads.h"

#include <cstdio>
#include <cstdlib>

namespace common {

std::optional<int> threads_override() {
    const char * v = std::getenv("LLAMA_CANCEL_THREADS");
    if (v == nullptr) {
        return std::nullopt;
    }
    return std::atoi(v);
}

std::optional<int> note_threads_override(const std::string & who) {
    const std::optional<int> n = threads_override();
    if (n) {
        std::fprintf(stderr, "%s%snote: LLAMA_CANCEL_THREADS is set: every context runs %d thread(s), whatever "
                             "thread counts are printed or written\n",
                     who.empty() ? "" : ("[" + who + "]").c_str(), who.empty() ? "" : " ", *n);
    }
    return n;
}

} // namespace common
