// Filling a result struct's status and readable message: every result of the API has both.
#pragma once

#include "llama-cancel.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace llama_cancel {

// Sets result->status and a printf-style result->message, when `result` is not NULL.
template <typename Result, typename... Args>
void set_status(Result * result, int32_t status, const char * fmt, Args... args) {
    if (result != nullptr) {
        result->status = status;
        if constexpr (sizeof...(Args) == 0) {
            std::snprintf(result->message, sizeof(result->message), "%s", fmt); // a plain message
        } else {
            std::snprintf(result->message, sizeof(result->message), fmt, args...);
        }
    }
}

// What an error sets in a result struct beyond status and message: nothing for most of them,
// the stop reason for the token loop's.
template <typename Result> void mark_error(Result *) {}
inline void mark_error(llama_cancel_generate_result * result) {
    if (result != nullptr) {
        result->stop_reason = LLAMA_CANCEL_STOP_ERROR;
    }
}
inline void mark_error(llama_cancel_tts_result * result) {
    if (result != nullptr) {
        result->stop_reason = LLAMA_CANCEL_STOP_ERROR;
    }
}

// The one error report of every entry point: status ERROR, the message, what mark_error adds.
// Returns LLAMA_CANCEL_ERROR, for `return fail(result, ...)`.
template <typename Result, typename... Args> int32_t fail(Result * result, const char * fmt, Args... args) {
    set_status(result, LLAMA_CANCEL_ERROR, fmt, args...);
    mark_error(result);
    return LLAMA_CANCEL_ERROR;
}

// The same for the entry points that return an object (a model, an mtmd context): sets `status`
// (ERROR or CANCELLED) and the message, returns NULL.
template <typename Result, typename... Args>
std::nullptr_t fail_null(Result * result, int32_t status, const char * fmt, Args... args) {
    set_status(result, status, fmt, args...);
    return nullptr;
}

} // namespace llama_cancel
