// The one clock the library measures with.
#pragma once

#include <chrono>

namespace llama_cancel {

// Steady-clock milliseconds.
inline double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

} // namespace llama_cancel
