// The shared batch of the per-sequence cancel tests (test_seq_cancel.cpp: drops and what the
// others keep; test_seq_cancel_slices.cpp: stops inside calls of several ubatches or slices): 4
// sequences of 32 tokens one after another, each asking for its last token's output, the way
// servers batch their slots; a sequence's byte stored at a chosen graph node by the caller's abort
// callback, so that no test depends on timing; the references a survivor is compared with.
#pragma once

#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace seq_cancel {

using fixtures::seq_state;
using fixtures::suite_model;

constexpr int k_seqs = 4;
constexpr int k_len  = 32;
constexpr int k_n    = k_seqs * k_len;

// 4 sequences one after another; sequence s holds prompts[s] at positions 0..k_len-1. With
// `shared` > 0 the first `shared` tokens of sequences 0 and 1 are one set of tokens in both.
class multi_batch : public common::owned_batch {
  public:
    multi_batch(const std::vector<std::vector<llama_token>> & prompts, int shared = 0) {
        for (int s = 0; s < k_seqs; ++s) {
            for (int i = (s == 1 ? shared : 0); i < k_len; ++i) {
                add(prompts[s][i], i, s == 0 && i < shared ? std::vector<llama_seq_id>{0, 1} : std::vector<llama_seq_id>{s},
                    i == k_len - 1);
            }
        }
    }
};

inline common::context_ptr context(uint32_t n_ubatch) {
    return fixtures::make_bound_context(suite_model(), nullptr, fixtures::context_options(k_n, n_ubatch, k_seqs));
}

// Logits that llama_get_logits_ith gives for output index `i`. A missing output is a failure of the
// calling test (recorded here, the vector then empty), so that two missing outputs never compare
// equal in silence.
inline std::vector<float> logits_at(llama_context * ctx, int32_t i) {
    const float * l = llama_get_logits_ith(ctx, i);
    if (l == nullptr) {
        ADD_FAILURE() << "no logits at output index " << i;
        return {};
    }
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
    return std::vector<float>(l, l + n);
}

// No result field is ever this: an entry the library did not write keeps it, and fails every check.
constexpr int32_t k_unwritten = INT32_MIN;

// What sequence s's tokens alone leave: its memory and its last logits, decoded as sequence s in a
// fresh context (with `shared` tokens of sequence 0's prompt first, for the shared-prefix case).
struct alone {
    std::vector<uint8_t> state;
    std::vector<float>   logits;
};
inline common::context_ptr unified_context(uint32_t n_ubatch) {
    common::context_options opt = fixtures::context_options(k_n, n_ubatch, k_seqs);
    opt.kv_unified = true;
    return fixtures::make_bound_context(suite_model(), nullptr, opt);
}

// (With one KV stream for all sequences when `unified`: the stream count is part of a sequence's
// state.)
inline alone decode_alone(const std::vector<llama_token> & prompt, llama_seq_id s, bool unified = false) {
    auto ctx = unified ? unified_context(k_n) : context(k_n);
    common::seq_batch b(prompt, 0, k_len, 0, s);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    return {seq_state(ctx.get(), s), common::last_logits(ctx.get())};
}

// A caller's abort callback that stores sequence `seq`'s byte at node `at` of the decode, and the
// per-sequence results (pass `seqs` to llama_cancel_decode), every field unwritten to start with.
struct seq_stop {
    int8_t                  bytes[k_seqs] = {0, 0, 0, 0};
    const int8_t *          flags[k_seqs] = {&bytes[0], &bytes[1], &bytes[2], &bytes[3]};
    fixtures::node_trigger  trigger;
    llama_cancel_seq_result seqs[k_seqs];

    seq_stop() {
        for (auto & e : seqs) {
            e = {k_unwritten, k_unwritten, k_unwritten};
        }
    }

    llama_cancel_decode_params params(llama_seq_id seq, int at) {
        trigger.at   = at;
        trigger.byte = seq >= 0 ? &bytes[seq] : nullptr;
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.seq_bytes = flags;
        p.n_seq     = k_seqs;
        if (seq >= 0) {
            p.abort_callback      = fixtures::node_trigger::abort_cb;
            p.abort_callback_data = &trigger;
        }
        return p;
    }
};

// n_ubatch: the whole batch, or 32
class SeqCancel : public fixtures::model_suite<SeqCancel, ::testing::TestWithParam<uint32_t>> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_MODEL";
    static constexpr const char * model_what = "a tiny model of scripts/make_model.py";

  protected:
    void SetUp() override {
        for (int s = 0; s < k_seqs; ++s) {
            prompts.push_back(common::make_prompt(suite_model(), k_len, 100 + s));
        }
    }

    // Each sequence not cancelled ends as its tokens alone leave it (memory byte for byte, last
    // logits bit-identical, read where seqs[s].output says); a cancelled one holds nothing.
    void expect_survivors_whole(llama_context * ctx, const seq_stop & st, const std::vector<bool> & cancelled,
                                bool unified = false) {
        for (llama_seq_id s = 0; s < k_seqs; ++s) {
            EXPECT_EQ(st.seqs[s].cancelled, cancelled[s] ? 1 : 0) << "sequence " << s;
            if (cancelled[s]) {
                EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx), s), -1) << "sequence " << s << " holds nothing";
                EXPECT_EQ(st.seqs[s].output, -1);
                continue;
            }
            const alone want = decode_alone(prompts[s], s, unified);
            EXPECT_EQ(seq_state(ctx, s), want.state) << "memory of sequence " << s;
            ASSERT_GE(st.seqs[s].output, 0) << "sequence " << s << " has no readable output";
            ASSERT_FALSE(want.logits.empty()) << "sequence " << s << ": no reference logits";
            const auto got = logits_at(ctx, st.seqs[s].output);
            ASSERT_EQ(got.size(), want.logits.size()) << "sequence " << s;
            EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0)
                << "logits of sequence " << s << " differ from a decode of its tokens alone";
        }
    }

    // Sequence 1 starts with sequence 0's first `n` tokens (held once by multi_batch(prompts, n)).
    void share_prefix(int n) {
        std::copy(prompts[0].begin(), prompts[0].begin() + n, prompts[1].begin());
    }

    static constexpr const char * k_no_shared_tokens =
        "llama.cpp's recurrent memory takes no token in several sequences (llama_decode returns 1)";
    static constexpr const char * k_filtered_out = ": tests/CMakeLists.txt leaves this test out on recurrent models";

    std::vector<std::vector<llama_token>> prompts;
};


// Memory and last logits of prompt[0, n) decoded alone as sequence s in a fresh context (with one
// KV stream for all sequences when `unified`).
inline alone decode_prefix_alone(const std::vector<llama_token> & prompt, llama_seq_id s, int32_t n, bool unified = false) {
    auto ctx = unified ? unified_context(k_n) : context(k_n);
    common::seq_batch b(prompt, 0, n, 0, s);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    return {seq_state(ctx.get(), s), common::last_logits(ctx.get())};
}

// Abort-callback calls of an uninterrupted decode of `b`: the node clock of a whole call.
inline int nodes_of_decode(llama_context * ctx, common::owned_batch & b) {
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, -1); // counts, never stores
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx, b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    llama_memory_clear(llama_get_memory(ctx), true);
    return st.trigger.calls;
}

inline bool has_recurrent_state() {
    return llama_model_is_recurrent(suite_model()) || llama_model_is_hybrid(suite_model());
}

} // namespace seq_cancel
