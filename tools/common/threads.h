// LLAMA_CANCEL_THREADS: when set, every context the tools and the tests make runs that many threads,
// whatever thread count was asked for (the ThreadSanitizer run sets 1: ggml's CPU backend
// synchronizes its OpenMP workers in code TSan cannot see). Commands that print or write thread
// counts say so through note_threads_override() and, in their JSON, "threads_override" (json.h).
// Not part of the library's API.
#pragma once

#include <optional>
#include <string>

namespace common {

// The thread count LLAMA_CANCEL_THREADS sets; none when unset.
std::optional<int> threads_override();

// With LLAMA_CANCEL_THREADS set, a note on stderr ("[who] note: ..." when `who` is given) that every
// context runs its thread count whatever counts are printed or written; the count.
std::optional<int> note_threads_override(const std::string & who = "");

} // namespace common
