// Argument checks more than one entry point makes, with the same message everywhere.
#pragma once

#include "abi/status.h"

#include "llama.h"

#include <cstdint>

namespace llama_cancel {

// The tokens per decode a call uses: `requested`, or the context's n_batch when <= 0. More than the
// context's n_batch is refused (llama.cpp would reject the batch later, after work was done).
template <typename Result> bool resolve_n_batch(llama_context * ctx, int32_t requested, Result * r, int32_t * n_batch) {
    const int32_t ctx_n_batch = static_cast<int32_t>(llama_n_batch(ctx));
    *n_batch = requested > 0 ? requested : ctx_n_batch;
    if (*n_batch > ctx_n_batch) {
        fail(r, "n_batch %d is more than the context's n_batch %d", *n_batch, ctx_n_batch);
        return false;
    }
    return true;
}

// A sequence id the context has.
template <typename Result> bool check_seq_id(llama_context * ctx, llama_seq_id seq_id, Result * r) {
    const uint32_t n_seq_max = llama_n_seq_max(ctx);
    if (seq_id < 0 || static_cast<uint32_t>(seq_id) >= n_seq_max) {
        fail(r, "seq_id %d is outside [0, %u)", seq_id, n_seq_max);
        return false;
    }
    return true;
}

// Room for the generated tokens: `out` holds at least n_predict entries (n_predict >= 0).
template <typename Result> bool check_out(int32_t n_predict, const llama_token * out, int32_t n_out_max, Result * r) {
    if (n_predict < 0) {
        fail(r, "n_predict is %d; it must be 0 or more", n_predict);
        return false;
    }
    if (n_predict > 0 && (out == nullptr || n_out_max < n_predict)) {
        fail(r, "out holds %d tokens, fewer than n_predict %d", out == nullptr ? 0 : n_out_max, n_predict);
        return false;
    }
    return true;
}

} // namespace llama_cancel
