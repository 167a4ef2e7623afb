// The one batch builder of the token loop and the mtmd evaluation: one sequence's tokens or
// embeddings, a slice at a time, at consecutive positions (text) or at positions given per section
// (M-RoPE media). Owns its arrays; a batch it hands out is valid until the next get.
#pragma once

#include "llama.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

// Positions an M-RoPE decoder reads per embedding token (upstream's helper: 4).
constexpr int32_t k_mrope_sections = 4;

class seq_batch {
  public:
    seq_batch(int32_t n_max, llama_seq_id seq_id)
        : pos_(static_cast<size_t>(std::max(n_max, 1)) * k_mrope_sections), n_seq_id_(std::max(n_max, 1), 1),
          seq_(1, seq_id), seq_ptr_(std::max(n_max, 1)), logits_(std::max(n_max, 1), 0) {
        for (auto & p : seq_ptr_) {
            p = seq_.data();
        }
    }

    // `n` (at most n_max) tokens or embeddings from position `pos0`; the last one's output when
    // `output_last`.
    llama_batch get(const llama_token * token, const float * embd, int32_t n, llama_pos pos0, bool output_last) {
        for (int32_t i = 0; i < n; ++i) {
            pos_[i]    = pos0 + i;
            logits_[i] = output_last && i == n - 1;
        }
        llama_batch b{};
        b.n_tokens = n;
        b.token    = const_cast<llama_token *>(token);
        b.embd     = const_cast<float *>(embd);
        b.pos      = pos_.data();
        b.n_seq_id = n_seq_id_.data();
        b.seq_id   = seq_ptr_.data();
        b.logits   = logits_.data();
        return b;
    }

    // Embeddings [a, a + n) of a media chunk of `n_all` tokens whose positions `all` holds
    // (`sections` sections of n_all each): each section's slice, section-major again.
    llama_batch get_media(const float * embd, int32_t n, int32_t a, const std::vector<llama_pos> & all, int32_t n_all,
                          int32_t sections, bool output_last) {
        llama_batch b = get(nullptr, embd, n, 0, output_last);
        for (int32_t s = 0; s < sections; ++s) {
            const auto from = all.begin() + static_cast<std::ptrdiff_t>(s) * n_all + a;
            std::copy(from, from + n, pos_.begin() + static_cast<std::ptrdiff_t>(s) * n);
        }
        return b;
    }

  private:
    std::vector<llama_pos>      pos_;
    std::vector<int32_t>        n_seq_id_;
    std::vector<llama_seq_id>   seq_;
    std::vector<llama_seq_id *> seq_ptr_;
    std::vector<int8_t>         logits_;
};

} // namespace llama_cancel
