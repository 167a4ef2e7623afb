// No exception crosses the C ABI: every extern "C" entry point that can throw runs its body
// through abi_guard, which turns any exception into the entry point's own error report. (The eval
// callbacks, which ggml calls, catch what they could throw themselves: src/checkpoints/eval_callback.cpp.)
#pragma once

#include "llama-cancel.h"

#include "abi/status.h"

#include <exception>

namespace llama_cancel {

// Returns body(). Should it throw, `result` (may be NULL) gets LLAMA_CANCEL_ERROR and the message
// "internal error: <what()>" ("internal error: unknown exception" for one that is no
// std::exception), and the entry point returns `error_value`. Allocation failures are the only
// exceptions expected; the body's RAII guards have put back whatever they changed by then.
template <typename Ret, typename Result, typename Body>
Ret abi_guard(Result * result, Ret error_value, Body && body) noexcept {
    try {
        return body();
    } catch (const std::exception & e) {
        fail(result, "internal error: %s", e.what());
    } catch (...) {
        fail(result, "%s", "internal error: unknown exception");
    }
    return error_value;
}

} // namespace llama_cancel
