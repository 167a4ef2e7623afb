// No exception crosses the C ABI: every extern "C" entry point that can throw runs its body
// through abi_guard, which turns any exception into the entry point's own error report. (The eval
// callbacks, which ggml calls, catch what they could throw themselves: src/eval_callback.cpp.)
#pragma once

#include "llama-cancel.h"

#include "status.h"

#include <exception>

namespace llama_cancel {

// What an error sets in a result struct beyond status and message: nothing for most of them,
// the stop reason for the token loop's.
template <typename Result> void mark_error(Result *) {}
inline void mark_error(llama_cancel_generate_result * result) {
    if (result != nullptr) {
        result->stop_reason = LLAMA_CANCEL_STOP_ERROR;
    }
}

// Returns body(). Should it throw, `result` (may be NULL) gets LLAMA_CANCEL_ERROR and the message
// "internal error: <what()>" ("internal error: unknown exception" for one that is no
// std::exception), and the entry point returns `error_value`. Allocation failures are the only
// exceptions expected; the body's RAII guards have put back whatever they changed by then.
template <typename Ret, typename Result, typename Body>
Ret abi_guard(Result * result, Ret error_value, Body && body) noexcept {
    try {
        return body();
    } catch (const std::exception & e) {
        set_status(result, LLAMA_CANCEL_ERROR, "internal error: %s", e.what());
    } catch (...) {
        set_status(result, LLAMA_CANCEL_ERROR, "%s", "internal error: unknown exception");
    }
    mark_error(result);
    return error_value;
}

} // namespace llama_cancel
