// Per-sequence cancel (llama_cancel_decode_params.seq_flags): one request inside a shared batch is
// dropped, the other sequences go on, and end exactly as a decode of their tokens alone leaves them.
//
// One model per process (LLAMA_CANCEL_MODEL: a KV-cache, recurrent or hybrid tiny model), on the
// CPU. A batch holds 4 sequences of 32 tokens, one after another, each asking for the output of its
// last token, the way servers batch their slots. A sequence's byte is stored at a chosen graph node
// by the caller's abort callback, so no test depends on timing.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

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
    common::context_options opt;
    opt.n_ctx     = 1024;
    opt.n_batch   = k_n;
    opt.n_ubatch  = n_ubatch;
    opt.n_seq_max = k_seqs;
    return common::make_context(suite_model(), opt);
}

std::vector<uint8_t> seq_state(llama_context * ctx, llama_seq_id s) {
    std::vector<uint8_t> buf(llama_state_seq_get_size(ctx, s));
    buf.resize(llama_state_seq_get_data(ctx, buf.data(), buf.size(), s));
    return buf;
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
alone decode_alone(const std::vector<llama_token> & prompt, llama_seq_id s) {
    auto ctx = context(k_n);
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
    void expect_survivors_whole(llama_context * ctx, const seq_stop & st, const std::vector<bool> & cancelled) {
        for (llama_seq_id s = 0; s < k_seqs; ++s) {
            EXPECT_EQ(st.cancelled[s], cancelled[s] ? 1 : 0) << "sequence " << s;
            if (cancelled[s]) {
                EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx), s), -1) << "sequence " << s << " holds nothing";
                EXPECT_EQ(st.output[s], -1);
                continue;
            }
            const alone want = decode_alone(prompts[s], s);
            EXPECT_EQ(seq_state(ctx, s), want.state) << "memory of sequence " << s;
            ASSERT_GE(st.output[s], 0) << "sequence " << s << " has no readable output";
            const auto got = logits_at(ctx, st.output[s]);
            ASSERT_EQ(got.size(), want.logits.size()) << "sequence " << s;
            EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0)
                << "logits of sequence " << s << " differ from a decode of its tokens alone";
        }
    }

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
    EXPECT_EQ(r.n_decode_calls, 1) << "only the other sequences' tokens were decoded";
    expect_survivors_whole(ctx.get(), st, {true, false, false, true});
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
    EXPECT_EQ(r.n_decode_calls, 1);
    EXPECT_GE(r.output_base, 0) << "nothing dropped: batch indices stay readable";
    const float * l = llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(2));
    ASSERT_NE(l, nullptr);
}

TEST_P(SeqCancel, SharedTokensLoseOnlyTheCancelledSequence) {
    auto ctx = context(GetParam());
    const int shared = 8;
    for (int i = 0; i < shared; ++i) {
        prompts[1][i] = prompts[0][i]; // sequence 1 starts with sequence 0's first tokens, held once
    }
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

INSTANTIATE_TEST_SUITE_P(Ubatch, SeqCancel, ::testing::Values(uint32_t{k_n}, uint32_t{k_len}),
                         [](const ::testing::TestParamInfo<uint32_t> & i) {
                             return i.param == k_n ? std::string("whole") : std::string("ubatch32");
                         });
