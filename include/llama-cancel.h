#ifndef LLAMA_CANCEL_H
#define LLAMA_CANCEL_H

// llama-cancel: stop an in-flight llama.cpp computation from any thread by storing one byte.
//
// The byte is owned by the caller (a host's `malloc<Int8>(1)`, a ctypes c_int8, a C int8_t). Any
// thread stores a nonzero value into it to ask for a stop; the functions here only load it, with
// relaxed atomic loads, never write it, and never keep the pointer past the call that received it
// (the callbacks keep it as long as the caller leaves them installed).

#include "llama.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef LLAMA_CANCEL_SHARED
#    if defined(_WIN32) && !defined(__MINGW32__)
#        ifdef LLAMA_CANCEL_BUILD
#            define LLAMA_CANCEL_API __declspec(dllexport)
#        else
#            define LLAMA_CANCEL_API __declspec(dllimport)
#        endif
#    else
#        define LLAMA_CANCEL_API __attribute__((visibility("default")))
#    endif
#else
#    define LLAMA_CANCEL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

    //
    // Callbacks
    //

    // A ggml_abort_callback for llama_set_abort_callback(ctx, llama_cancel_abort_callback, flag).
    // Returns true (stop) when the byte at `flag` is nonzero: one relaxed atomic load, nothing else.
    // A NULL `flag` never stops. ggml calls it on the CPU backend only, after each graph node, on
    // the thread that called llama_decode; llama_decode then returns 2 and drops the positions of
    // the ubatch it was computing (earlier ubatches stay in memory).
    LLAMA_CANCEL_API bool llama_cancel_abort_callback(void * flag);

    //
    // Cancellable decode
    //

    enum llama_cancel_status {
        LLAMA_CANCEL_OK        =  0, // every token of the batch is in memory, outputs are valid
        LLAMA_CANCEL_CANCELLED =  1, // stopped by the byte: only whole ubatches are in memory
        LLAMA_CANCEL_ERROR     = -1, // invalid argument or a llama_decode failure; see `message`
    };

    struct llama_cancel_decode_params {
        // Caller-owned byte, nonzero = stop. NULL never cancels. Only read during the call.
        const int8_t * flag;

        // The caller's own abort callback, if any: consulted beside the byte during the call and
        // installed on the context again before the call returns (NULL = none installed).
        ggml_abort_callback abort_callback;
        void *              abort_callback_data;
    };

    struct llama_cancel_decode_result {
        int32_t status;      // enum llama_cancel_status, the same value the call returns
        int32_t decode_ret;  // what llama_decode returned (0 when it was not called)
        int32_t n_committed; // leading batch tokens now in memory: resume from batch index n_committed
        char    message[256]; // readable reason for LLAMA_CANCEL_ERROR, empty otherwise
    };

    // Defaults: no byte, no caller abort callback.
    LLAMA_CANCEL_API struct llama_cancel_decode_params llama_cancel_decode_default_params(void);

    // Decodes `batch` on `ctx` while honouring the byte at params->flag, for CPU computation.
    // Call it on the thread that owns `ctx` (not thread-safe per context, like llama_decode); any
    // other thread may store into the byte at any time. The batch stays owned by the caller.
    // - A byte already set on entry: returns LLAMA_CANCEL_CANCELLED at once, memory untouched.
    // - A cancel during the call: returns LLAMA_CANCEL_CANCELLED; memory holds the previous content
    //   plus the ubatches computed in full, which are the first result->n_committed batch tokens
    //   (per sequence: n_committed_seq[s], when given). Resume by decoding the batch from index
    //   n_committed: the committed ubatches are not computed again.
    // - Errors (NULL ctx, a batch larger than n_batch, a failed llama_decode): LLAMA_CANCEL_ERROR
    //   with result->message; memory is as llama_decode leaves it for that error.
    // On return the context's abort callback is params->abort_callback again. `params` NULL means
    // the defaults. `result` and `n_committed_seq` may be NULL; n_committed_seq, when given, holds
    // `n_seq` counters indexed by sequence id, each set to that sequence's committed batch tokens.
    LLAMA_CANCEL_API int32_t llama_cancel_decode(
            struct llama_context                    * ctx,
            struct llama_batch                        batch,
            const struct llama_cancel_decode_params * params,
            struct llama_cancel_decode_result       * result,
            int32_t                                 * n_committed_seq,
            int32_t                                   n_seq);

    // Returns a static, readable name for a status ("ok", "cancelled", "error"); never NULL.
    LLAMA_CANCEL_API const char * llama_cancel_status_str(int32_t status);

#ifdef __cplusplus
}
#endif

#endif // LLAMA_CANCEL_H
