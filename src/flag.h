// Reading the caller's byte: the one operation every hook shares.
#pragma once

#include <atomic>
#include <cstdint>

namespace llama_cancel {

// Relaxed atomic load of a byte another thread may store at any time. The byte is plain memory
// owned by the host (not a std::atomic), hence atomic_ref semantics through the GCC builtin:
// a real load on every call that the compiler cannot hoist out of ggml's node loop.
inline bool flag_is_set(const int8_t * flag) {
    return flag != nullptr && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

} // namespace llama_cancel
