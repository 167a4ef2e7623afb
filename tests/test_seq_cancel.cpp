// Per-sequence cancel (llama_cancel_decode_params.seq_flags): one request inside a shared batch is
// dropped, the other sequences go on, and end exactly as a decode of their tokens alone leaves them.
//
// One model per process (LLAMA_CANCEL_MODEL: a KV-cache, recurrent or hybrid tiny model), on the
// CPU. A batch holds 4 sequences of 32 tokens, one after another, each asking for the output of its
// last token, the way servers batch their slots. A sequence's byte is stored at a chosen graph node
// by the caller's abort callback, so no test depends on timing.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

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

common::context_ptr context(uint32_t n_ubatch) {
    return fixtures::make_bound_context(suite_model(), nullptr, fixtures::context_options(k_n, n_ubatch, k_seqs));
}

std::vector<float> logits_at(llama_context * ctx, int32_t i) {
    const float * l = llama_get_logits_ith(ctx, i);
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
    return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

// What sequence s's tokens alone leave: its memory and its last logits, decoded as sequence s in a
// fresh context (with `shared` tokens of sequence 0's prompt first, for the shared-prefix case).
struct alone {
    std::vector<uint8_t> state;
    std::vector<float>   logits;
};
common::context_ptr unified_context(uint32_t n_ubatch) {
    common::context_options opt = fixtures::context_options(k_n, n_ubatch, k_seqs);
    opt.kv_unified = true;
    return fixtures::make_bound_context(suite_model(), nullptr, opt);
}

// (With one KV stream for all sequences when `unified`: the stream count is part of a sequence's
// state.)
alone decode_alone(const std::vector<llama_token> & prompt, llama_seq_id s, bool unified = false) {
    auto ctx = unified ? unified_context(k_n) : context(k_n);
    common::seq_batch b(prompt, 0, k_len, 0, s);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    return {seq_state(ctx.get(), s), common::last_logits(ctx.get())};
}

// A caller's abort callback that stores sequence `seq`'s byte at node `at` of the decode.
struct seq_stop {
    int8_t            bytes[k_seqs] = {0, 0, 0, 0};
    const int8_t *    flags[k_seqs] = {&bytes[0], &bytes[1], &bytes[2], &bytes[3]};
    fixtures::node_trigger trigger;
    int8_t            cancelled[k_seqs] = {0, 0, 0, 0};
    int32_t           output[k_seqs]    = {0, 0, 0, 0};

    llama_cancel_decode_params params(llama_seq_id seq, int at) {
        trigger.at   = at;
        trigger.flag = seq >= 0 ? &bytes[seq] : nullptr;
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.seq_flags     = flags;
        p.n_seq_flags   = k_seqs;
        p.seq_cancelled = cancelled;
        p.seq_output    = output;
        if (seq >= 0) {
            p.abort_callback      = fixtures::node_trigger::abort_cb;
            p.abort_callback_data = &trigger;
        }
        return p;
    }
};

// With per-sequence bytes, a context that rolls a stop back to the start of a call (recurrent state
// here) decodes a batch larger than n_ubatch one ubatch per call, its outputs moved to the last:
// batch indices then do not read them (seq_output does).
bool outputs_moved(uint32_t n_ubatch) {
    const bool state = llama_model_is_recurrent(suite_model()) || llama_model_is_hybrid(suite_model());
    return state && n_ubatch < static_cast<uint32_t>(k_n);
}

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
    // logits bit-identical, read where seq_output says); a cancelled one holds nothing.
    void expect_survivors_whole(llama_context * ctx, const seq_stop & st, const std::vector<bool> & cancelled,
                                bool unified = false) {
        for (llama_seq_id s = 0; s < k_seqs; ++s) {
            EXPECT_EQ(st.cancelled[s], cancelled[s] ? 1 : 0) << "sequence " << s;
            if (cancelled[s]) {
                EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx), s), -1) << "sequence " << s << " holds nothing";
                EXPECT_EQ(st.output[s], -1);
                continue;
            }
            const alone want = decode_alone(prompts[s], s, unified);
            EXPECT_EQ(seq_state(ctx, s), want.state) << "memory of sequence " << s;
            ASSERT_GE(st.output[s], 0) << "sequence " << s << " has no readable output";
            const auto got = logits_at(ctx, st.output[s]);
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

    std::vector<std::vector<llama_token>> prompts;
};

} // namespace

TEST_P(SeqCancel, OneSequenceStoppedMidCallOthersGoOn) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, 10); // sequence 2's byte, at node 10 of the first graph
    int32_t committed[k_seqs] = {0};
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 1);
    EXPECT_GE(r.n_decode_calls, 2) << "the stopped call, then the rest without sequence 2";
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(committed[s], s == 2 ? 0 : k_len) << "sequence " << s;
    }
    expect_survivors_whole(ctx.get(), st, {false, false, true, false});
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(3)), nullptr)
        << "after a drop left gaps, batch indices are not readable (seq_output is)";
    const auto last = logits_at(ctx.get(), -1);
    EXPECT_EQ(last, logits_at(ctx.get(), st.output[3])) << "negative index: the last output, sequence 3's";
}

TEST_P(SeqCancel, BytesSetOnEntryDropTheirSequencesBeforeAnythingRuns) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    st.bytes[0] = st.bytes[3] = 1;
    llama_cancel_decode_params p = st.params(-1, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 2);
    EXPECT_EQ(r.n_decode_calls, outputs_moved(GetParam()) ? 2 : 1) << "only the other sequences' tokens were decoded";
    expect_survivors_whole(ctx.get(), st, {true, false, false, true});
    if (outputs_moved(GetParam())) {
        EXPECT_EQ(r.output_base, -1);
        return;
    }
    // The survivors are batch tokens 32..95, consecutive and whole: batch indices still read them.
    EXPECT_EQ(r.output_base, k_len);
    const float * l = llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(2));
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(std::memcmp(l, logits_at(ctx.get(), st.output[2]).data(), sizeof(float)), 0);
}

TEST_P(SeqCancel, TwoSequencesStoppedAtOnce) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    st.bytes[1] = 0;
    llama_cancel_decode_params p = st.params(1, 10);
    st.trigger.flag = &st.bytes[1];
    // Both bytes at the same node: a second trigger through the first's byte would not be "at once",
    // so sequence 3's byte is stored by the same callback right after.
    struct both {
        seq_stop * st;
        static bool cb(void * d) {
            auto * b = static_cast<both *>(d);
            fixtures::node_trigger::abort_cb(&b->st->trigger);
            if (b->st->bytes[1] != 0) {
                __atomic_store_n(&b->st->bytes[3], 1, __ATOMIC_RELAXED);
            }
            return false;
        }
    } two{&st};
    p.abort_callback      = both::cb;
    p.abort_callback_data = &two;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 2);
    expect_survivors_whole(ctx.get(), st, {false, true, false, true});
}

TEST_P(SeqCancel, AllSequencesCancelledIsACancelAndLeavesMemoryEmpty) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(-1, 0);
    st.bytes[0] = st.bytes[1] = st.bytes[2] = st.bytes[3] = 1;
    int32_t committed[k_seqs] = {9, 9, 9, 9};
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    EXPECT_EQ(r.n_decode_calls, 0);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(committed[s], 0);
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), -1);
    }
}

TEST_P(SeqCancel, ByteOfASequenceWithoutTokensChangesNothing) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    int8_t other = 1;
    const int8_t * flags[k_seqs + 1] = {nullptr, nullptr, nullptr, nullptr, &other}; // sequence 4: no tokens
    llama_cancel_decode_params p = st.params(-1, 0);
    p.seq_flags   = flags;
    p.n_seq_flags = k_seqs + 1;
    p.seq_cancelled = nullptr;
    p.seq_output    = nullptr;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 0);
    EXPECT_EQ(r.n_decode_calls, outputs_moved(GetParam()) ? k_seqs : 1);
    if (outputs_moved(GetParam())) {
        EXPECT_EQ(r.output_base, -1);
        return;
    }
    EXPECT_GE(r.output_base, 0) << "nothing dropped: batch indices stay readable";
    const float * l = llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(2));
    ASSERT_NE(l, nullptr);
}

TEST_P(SeqCancel, SharedTokensLoseOnlyTheCancelledSequence) {
    auto ctx = context(GetParam());
    const int shared = 8;
    share_prefix(shared); // sequence 1 starts with sequence 0's first tokens, held once
    multi_batch b(prompts, shared);
    seq_stop st;
    st.bytes[1] = 1;
    llama_cancel_decode_params p = st.params(-1, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    expect_survivors_whole(ctx.get(), st, {false, true, false, false});

    // And the other way round: sequence 0 dropped, sequence 1 keeps the shared tokens.
    auto ctx2 = context(GetParam());
    seq_stop st2;
    st2.bytes[0] = 1;
    llama_cancel_decode_params p2 = st2.params(-1, 0);
    ASSERT_EQ(llama_cancel_decode(ctx2.get(), b.get(), &p2, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    expect_survivors_whole(ctx2.get(), st2, {true, false, false, false});
}

// With a stop-time budget the batch (whose only output is its last token) goes in budget-sized
// slices; a sequence dropped in one of them leaves the others whole all the same.
TEST_P(SeqCancel, UnderAStopTimeBudget) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    for (int s = 0; s + 1 < k_seqs; ++s) {
        b.set_output(b.last_of(s), false);
    }
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, 10);
    p.max_stop_ms = 1e-3f; // no node meets it: one-token slices after the 16-token probe
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 1);
    EXPECT_EQ(st.cancelled[2], 1);
    EXPECT_GT(r.n_decode_calls, k_n / 2) << "budget-sized slices";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), -1);
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(seq_state(ctx.get(), s), decode_alone(prompts[s], s).state) << "memory of sequence " << s;
    }
    ASSERT_GE(st.output[3], 0);
    const auto want = decode_alone(prompts[3], 3).logits;
    const auto got  = logits_at(ctx.get(), st.output[3]);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

TEST_P(SeqCancel, BatchByteStillStopsEverything) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    int8_t batch_byte = 0;
    llama_cancel_decode_params p = st.params(0, 10);
    st.trigger.flag = &batch_byte;
    p.flag = &batch_byte;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_seq_cancelled, 0);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.cancelled[s], 0);
    }
}

TEST_P(SeqCancel, BadPerSequenceArgumentsAreClearErrors) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(-1, 0);
    p.n_seq_flags = -1;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "n_seq_flags"), nullptr) << r.message;
    p.n_seq_flags = 0;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "n_seq_flags"), nullptr) << r.message;
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), -1) << "nothing decoded";
}

namespace {

// Memory and last logits of prompt[0, n) decoded alone as sequence s in a fresh context (with one
// KV stream for all sequences when `unified`).
alone decode_prefix_alone(const std::vector<llama_token> & prompt, llama_seq_id s, int32_t n, bool unified = false) {
    auto ctx = unified ? unified_context(k_n) : context(k_n);
    common::seq_batch b(prompt, 0, n, 0, s);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    return {seq_state(ctx.get(), s), common::last_logits(ctx.get())};
}

// Abort-callback calls of an uninterrupted decode of `b`: the node clock of a whole call.
int nodes_of_decode(llama_context * ctx, common::owned_batch & b) {
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, -1); // counts, never stores
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx, b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    llama_memory_clear(llama_get_memory(ctx), true);
    return st.trigger.calls;
}

bool has_recurrent_state() {
    return llama_model_is_recurrent(suite_model()) || llama_model_is_hybrid(suite_model());
}

} // namespace

// A KV cache decodes the batch in one llama_decode call of 4 ubatches (one stream per sequence:
// each ubatch holds a quarter of every sequence). Sequence 2 stopped in the third keeps what the
// first two committed, as a cancel keeps finished ubatches; the others are not computed again.
// With recurrent state (a stop undoes a whole call) the batch goes one ubatch per call, outputs last.
TEST_P(SeqCancel, AStopInALaterUbatchKeepsTheFinishedOnes) {
    if (GetParam() != k_len) {
        GTEST_SKIP() << "the batch is one ubatch: nothing is finished before the stop";
    }
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, total * 5 / 8); // inside the third of 4 ubatches
    int32_t committed[k_seqs] = {0};
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_GE(r.n_decode_calls, 2);
    EXPECT_EQ(st.cancelled[2], 1);
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(committed[s], k_len) << "sequence " << s;
    }
    // Recurrent state: one ubatch per call, so the stop undoes the third call alone.
    EXPECT_GT(committed[2], 0) << "the finished ubatches hold sequence 2's first tokens";
    EXPECT_LT(committed[2], k_len);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), committed[2] - 1);
    if (committed[2] > 0) {
        EXPECT_EQ(seq_state(ctx.get(), 2), decode_prefix_alone(prompts[2], 2, committed[2]).state)
            << "sequence 2 holds its committed tokens as a decode of them alone leaves them";
    }
    for (llama_seq_id s : {0, 1, 3}) {
        const alone want = decode_alone(prompts[s], s);
        EXPECT_EQ(seq_state(ctx.get(), s), want.state) << "memory of sequence " << s;
        const auto got = logits_at(ctx.get(), st.output[s]);
        ASSERT_EQ(got.size(), want.logits.size()) << "sequence " << s;
        EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0) << "sequence " << s;
    }
}

// One KV stream for all sequences: ubatch k is sequence k. Sequence 2 stopped in the third leaves
// sequences 0 and 1 committed with their outputs, which llama.cpp would not keep past the next
// call: their last tokens are decoded again beside sequence 3, and every output stays readable.
TEST_P(SeqCancel, OutputsOfFinishedUbatchesStayReadable) {
    if (GetParam() != k_len) {
        GTEST_SKIP() << "the batch is one ubatch: nothing is finished before the stop";
    }
    if (outputs_moved(GetParam())) {
        GTEST_SKIP() << "recurrent state: outputs go to the last call from the start (AHookStopUndoesOneSlice...)";
    }
    auto ctx = unified_context(GetParam());
    ASSERT_NE(ctx, nullptr);
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, total * 5 / 8);
    int32_t committed[k_seqs] = {0};
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_decode_calls, 2);
    EXPECT_EQ(committed[2], 0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), -1);
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(committed[s], k_len) << "sequence " << s;
        const alone want = decode_prefix_alone(prompts[s], s, k_len, true);
        EXPECT_EQ(seq_state(ctx.get(), s), want.state) << "memory of sequence " << s;
        ASSERT_GE(st.output[s], 0) << "sequence " << s << " has no readable output";
        const auto got = logits_at(ctx.get(), st.output[s]);
        ASSERT_EQ(got.size(), want.logits.size()) << "sequence " << s;
        EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0) << "sequence " << s;
    }
}

// Slices end where n_ubatch says; once sequence 1 (60 tokens, no output) is dropped, sequence 0's
// output (batch index 69) would fall into the first of the remaining slices, whose outputs the
// next call discards: the rest goes in one call instead, and sequence 0's output stays readable.
TEST_P(SeqCancel, ADropNeverLeavesAnOutputBeforeTheLastSlice) {
    auto hc = fixtures::make_hooked(suite_model(), 96, GetParam() == k_len ? 32 : 96, nullptr, k_seqs);
    ASSERT_NE(hc.ctx, nullptr);
    common::owned_batch b;
    for (int i = 0; i < 60; ++i) {
        b.add(prompts[1][i % k_len], i, {1}, false);
    }
    for (int i = 0; i < 10; ++i) {
        b.add(prompts[0][i], i, {0}, i == 9);
    }
    for (int i = 0; i < 26; ++i) {
        b.add(prompts[3][i], i, {3}, false);
    }
    seq_stop st;
    llama_cancel_decode_params p = st.params(1, 10);
    p.hook           = hc.hook.get();
    p.sliced_outputs = true;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(hc.ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(st.cancelled[1], 1);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(hc.ctx.get()), 1), -1);
    ASSERT_GE(st.output[0], 0) << "sequence 0's output was lost";
    const alone want = decode_prefix_alone(prompts[0], 0, 10);
    EXPECT_EQ(seq_state(hc.ctx.get(), 0), want.state);
    const auto got = logits_at(hc.ctx.get(), st.output[0]);
    ASSERT_EQ(got.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0);
    EXPECT_EQ(seq_state(hc.ctx.get(), 3), decode_prefix_alone(prompts[3], 3, 26).state);
}

// Every sequence's byte stored at one node of the first graph: the call is a cancel, and memory
// holds only what was committed before the stop (nothing, at node 10 of the first ubatch).
TEST_P(SeqCancel, AllSequencesStoppedMidCall) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, 10);
    int8_t all = 0;
    const int8_t * flags[k_seqs] = {&all, &all, &all, &all}; // one store drops them all at once
    p.seq_flags     = flags;
    st.trigger.flag = &all;
    int32_t committed[k_seqs] = {9, 9, 9, 9};
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    EXPECT_EQ(r.n_decode_calls, 1);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.cancelled[s], 1);
        EXPECT_EQ(committed[s], 0);
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), -1) << "sequence " << s;
    }
}

// Tokens shared by sequences 0 and 1, one of them stopped in the middle of the call: the shared
// tokens stay with the other. llama.cpp takes a token in several sequences only with one KV stream
// for all (kv_unified), where attention spans every sequence's cells, so a sequence's rows are not
// those of its tokens alone: the reference is the same batch with that sequence's byte set on
// entry (dropped before anything runs), which the survivors must match byte for byte and bit for bit.
TEST_P(SeqCancel, SharedTokensStoppedMidCall) {
    if (llama_model_is_recurrent(suite_model())) {
        GTEST_SKIP() << k_no_shared_tokens;
    }
    const int shared = 8;
    share_prefix(shared);
    multi_batch b(prompts, shared);
    for (llama_seq_id stopped : {0, 1}) {
        auto ref = unified_context(GetParam());
        seq_stop want;
        want.bytes[stopped] = 1;
        llama_cancel_decode_params pw = want.params(-1, 0);
        llama_cancel_decode_result r;
        ASSERT_EQ(llama_cancel_decode(ref.get(), b.get(), &pw, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;

        auto ctx = unified_context(GetParam());
        seq_stop st;
        llama_cancel_decode_params p = st.params(stopped, 10);
        int32_t committed[k_seqs] = {0};
        ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_seq_cancelled, 1);
        EXPECT_EQ(st.cancelled[stopped], 1);
        EXPECT_EQ(committed[stopped], 0) << "stopped in the first ubatch";
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), stopped), -1);
        for (llama_seq_id s = 0; s < k_seqs; ++s) {
            if (s == stopped) {
                continue;
            }
            EXPECT_EQ(committed[s], k_len) << "sequence " << s << ": its batch tokens, shared ones included";
            EXPECT_EQ(seq_state(ctx.get(), s), seq_state(ref.get(), s)) << "memory of sequence " << s;
            ASSERT_GE(st.output[s], 0);
            EXPECT_EQ(logits_at(ctx.get(), st.output[s]), logits_at(ref.get(), want.output[s])) << "sequence " << s;
        }
    }
}

// The batch byte stopping a ubatch that holds tokens of two sequences: llama.cpp removes an aborted
// ubatch's positions by each token's first sequence id only, which would leave sequence 1 holding
// shared tokens nothing committed. Memory holds exactly the committed tokens (none here).
TEST_P(SeqCancel, ACancelInsideSharedTokensLeavesNoneBehind) {
    if (llama_model_is_recurrent(suite_model())) {
        GTEST_SKIP() << k_no_shared_tokens;
    }
    const int shared = 8;
    share_prefix(shared);
    multi_batch b(prompts, shared);
    auto ctx = unified_context(GetParam());
    seq_stop st;
    int8_t batch_byte = 0;
    llama_cancel_decode_params p = st.params(0, 10);
    st.trigger.flag = &batch_byte;
    p.flag = &batch_byte;
    int32_t committed[k_seqs] = {0};
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, 0);
    for (llama_seq_id s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(committed[s], 0) << "sequence " << s;
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), -1) << "sequence " << s;
    }
}

// seq_cancelled[s] is stored when the sequence is dropped, during the call: the caller's abort
// callback, run at every node of the call that decodes the others, already sees it.
TEST_P(SeqCancel, TheCancelledEntryIsStoredWhenTheSequenceIsDropped) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, 10);
    struct watch {
        seq_stop * st;
        int8_t     seen = 0;
        static bool cb(void * d) {
            auto * w = static_cast<watch *>(d);
            fixtures::node_trigger::abort_cb(&w->st->trigger);
            w->seen = std::max(w->seen, __atomic_load_n(&w->st->cancelled[2], __ATOMIC_ACQUIRE));
            return false;
        }
    } w{&st};
    p.abort_callback      = watch::cb;
    p.abort_callback_data = &w;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_GE(r.n_decode_calls, 2);
    EXPECT_EQ(w.seen, 1) << "seq_cancelled[2] was not set while the other sequences were decoded";
}

// Every sequence's byte stored in the third of 4 ubatches: still a cancel, with the finished
// ubatches kept on a KV cache (each sequence holds its committed tokens).
TEST_P(SeqCancel, AllSequencesStoppedInALaterUbatch) {
    if (GetParam() != k_len) {
        GTEST_SKIP() << "the batch is one ubatch: nothing is finished before the stop";
    }
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, total * 5 / 8);
    int8_t all = 0;
    const int8_t * flags[k_seqs] = {&all, &all, &all, &all};
    p.seq_flags     = flags;
    st.trigger.flag = &all;
    int32_t committed[k_seqs] = {0};
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    for (llama_seq_id s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.cancelled[s], 1);
        EXPECT_LT(committed[s], k_len);
        EXPECT_LE(committed[s], k_len) << "sequence " << s;
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), committed[s] - 1) << "sequence " << s;
    }
}

// With a hook (and on recurrent state) a stop undoes a whole llama_decode call: with per-sequence
// bytes the server batch goes one ubatch per call with every output moved to the last one, so a
// sequence stopped by the hook in the third slice leaves the first two committed, its share of them
// included, and the others' outputs readable.
TEST_P(SeqCancel, AHookStopUndoesOneSliceOfAServerBatch) {
    if (GetParam() != k_len) {
        GTEST_SKIP() << "the batch is one ubatch";
    }
    fixtures::node_trigger count;
    auto counted = fixtures::make_hooked(suite_model(), k_n, k_len, &count, k_seqs);
    multi_batch b(prompts);
    seq_stop plain;
    llama_cancel_decode_params pc = plain.params(-1, 0);
    pc.hook = counted.hook.get();
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(counted.ctx.get(), b.get(), &pc, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_decode_calls, k_n / k_len) << "one call per ubatch";

    seq_stop st;
    fixtures::node_trigger trig;
    trig.flag = &st.bytes[2];
    trig.at   = count.calls * 5 / 8; // inside the third of 4 equal calls
    auto hc = fixtures::make_hooked(suite_model(), k_n, k_len, &trig, k_seqs);
    llama_cancel_decode_params p = st.params(-1, 0);
    p.hook = hc.hook.get();
    int32_t committed[k_seqs] = {0};
    ASSERT_EQ(llama_cancel_decode(hc.ctx.get(), b.get(), &p, &r, committed, k_seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(st.cancelled[2], 1);
    EXPECT_EQ(committed[2], 2 * k_len - 2 * (k_len - 1)) << "sequence 2's share of the two finished slices (the "
                                                         "first 64 tokens without outputs: 31, 31 and 2)";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(hc.ctx.get()), 2), committed[2] - 1);
    EXPECT_EQ(r.output_base, -1) << "outputs moved to the last slice: read through seq_output";
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(committed[s], k_len);
        EXPECT_EQ(seq_state(hc.ctx.get(), s), seq_state(counted.ctx.get(), s)) << "memory of sequence " << s;
        EXPECT_EQ(logits_at(hc.ctx.get(), st.output[s]), logits_at(counted.ctx.get(), plain.output[s]))
            << "sequence " << s;
    }
}

INSTANTIATE_TEST_SUITE_P(Ubatch, SeqCancel, ::testing::Values(uint32_t{k_n}, uint32_t{k_len}),
                         [](const ::testing::TestParamInfo<uint32_t> & i) {
                             return i.param == k_n ? std::string("whole") : std::string("ubatch32");
                         });
