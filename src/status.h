// Filling a result struct's status and readable message: every result of the API has both.
#pragma once

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

} // namespace llama_cancel
