// The one place where the library touches memory a host thread may write or read at any time: the
// caller's byte (loaded) and a sequence's `cancelled` entry (stored).
//
// That memory is plain host memory (a Dart malloc<Int8>, a ctypes c_int8), not a std::atomic, and
// C++17 has no std::atomic_ref. std::atomic<T> of a lock-free size has T's size and alignment and
// no other state on gcc, clang and MSVC, so its operations on the host's object are the atomic
// accesses each compiler's memory model defines (the static_asserts check the preconditions).
// A load goes through the atomic on every call: the compiler cannot hoist it out of ggml's node loop.
#pragma once

#include <atomic>
#include <cstdint>

namespace llama_cancel {

template <typename T> std::atomic<T> * as_atomic(T * p) {
    static_assert(sizeof(std::atomic<T>) == sizeof(T), "std::atomic<T> must be a plain T");
    static_assert(alignof(std::atomic<T>) == alignof(T), "std::atomic<T> must align as T");
    static_assert(std::atomic<T>::is_always_lock_free, "std::atomic<T> must be lock-free");
    return reinterpret_cast<std::atomic<T> *>(p);
}

// Relaxed load of the caller's byte; NULL is never set.
inline bool byte_is_set(const int8_t * byte) {
    return byte != nullptr && as_atomic(const_cast<int8_t *>(byte))->load(std::memory_order_relaxed) != 0;
}

// Release store into an entry another thread may poll (what the call did to that sequence is
// visible to a thread that reads the entry with acquire order).
inline void store_release(int32_t * entry, int32_t value) {
    as_atomic(entry)->store(value, std::memory_order_release);
}

} // namespace llama_cancel
