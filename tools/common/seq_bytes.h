// Per-sequence pieces bench-seq and `stress --seq-cancel` share: the per-sequence bytes of
// llama_cancel_decode_params and the call's per-sequence results (the batch is
// common::multi_seq_batch). Header-only, tools only.
#pragma once

#include "models.h"
#include "llama-cancel.h"
#include "llama.h"

#include <climits>
#include <cstdint>
#include <vector>

namespace common {

// What a result field holds until the library writes it: no sequence has this many tokens or
// this output index, so a field the call left unwritten shows as a failure, not as a value.
constexpr int32_t k_unwritten = INT32_MIN;

// One byte per sequence and the call's per-sequence results. Not copyable: params point into it.
struct seq_bytes {
    std::vector<int8_t>                  bytes;
    std::vector<const int8_t *>          flags;
    std::vector<llama_cancel_seq_result> results; // the `seqs` array of llama_cancel_decode

    explicit seq_bytes(int n) : bytes(n, 0), flags(n), results(n, llama_cancel_seq_result{k_unwritten, k_unwritten, 0}) {
        point_each();
    }
    seq_bytes(const seq_bytes &) = delete;
    seq_bytes & operator=(const seq_bytes &) = delete;

    int size() const { return static_cast<int>(bytes.size()); }

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
    // The bytes into the params; pass seqs() to llama_cancel_decode.
    void fill(llama_cancel_decode_params & p) {
        p.seq_bytes = flags.data();
        p.n_seq     = size();
    }
    llama_cancel_seq_result * seqs() { return results.data(); }

    // The entry the library stores (release order) when it drops sequence s; another thread may poll it.
    const int32_t * cancelled_entry(int s) const { return &results[s].cancelled; }
    bool cancelled(int s) const { return __atomic_load_n(&results[s].cancelled, __ATOMIC_ACQUIRE) != 0; }
    int32_t output(int s) const { return results[s].output; }
    int32_t committed(int s) const { return results[s].n_committed; }
    // The call wrote sequence s's count and output index.
    bool written(int s) const { return results[s].n_committed != k_unwritten && results[s].output != k_unwritten; }
};

// Logits at llama.cpp's output index i (a seqs[s].output), copied; empty when there are none.
inline std::vector<float> logits_at(llama_context * ctx, const llama_model * model, int32_t i) {
    const float * l = i >= 0 ? llama_get_logits_ith(ctx, i) : nullptr;
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(model));
    return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

} // namespace common
