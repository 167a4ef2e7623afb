// Per-sequence pieces bench-seq and `stress --seq-cancel` share: the per-sequence bytes and outputs
// of llama_cancel_decode_params (the batch is common::multi_seq_batch). Header-only, tools only.
#pragma once

#include "models.h"
#include "llama-cancel.h"
#include "llama.h"

#include <cstdint>
#include <vector>

namespace common {

// One byte per sequence and the call's per-sequence outputs. Not copyable: params point into it.
struct seq_bytes {
    std::vector<int8_t>         bytes;
    std::vector<const int8_t *> flags;
    std::vector<int8_t>         cancelled;
    std::vector<int32_t>        output;
    std::vector<int32_t>        committed; // n_committed_seq: each sequence's batch tokens in memory

    explicit seq_bytes(int n) : bytes(n, 0), flags(n), cancelled(n, 0), output(n, -1), committed(n, 0) {
        point_each();
    }
    seq_bytes(const seq_bytes &) = delete;
    seq_bytes & operator=(const seq_bytes &) = delete;

    // Each sequence its own byte, all at 0.
    void point_each() {
        for (size_t s = 0; s < bytes.size(); ++s) {
            bytes[s] = 0;
            flags[s] = &bytes[s];
        }
    }
    // Every sequence reads `shared`: one store stops them all at the same instant.
    void point_all_at(const int8_t * shared) {
        for (auto & f : flags) {
            f = shared;
        }
    }
    void fill(llama_cancel_decode_params & p) {
        p.seq_flags     = flags.data();
        p.n_seq_flags   = static_cast<int32_t>(flags.size());
        p.seq_cancelled = cancelled.data();
        p.seq_output    = output.data();
    }
};

// Logits at llama.cpp's output index i, copied; empty when there are none.
inline std::vector<float> logits_at(llama_context * ctx, const llama_model * model, int32_t i) {
    const float * l = i >= 0 ? llama_get_logits_ith(ctx, i) : nullptr;
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(model));
    return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

} // namespace common
