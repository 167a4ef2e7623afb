// Per-sequence cancel (llama_cancel_decode_params.seq_bytes): one request inside a shared batch is
// dropped, the other sequences go on, and end exactly as a decode of their tokens alone leaves them.
//
// One model per process (LLAMA_CANCEL_MODEL: a KV-cache, recurrent or hybrid tiny model), on the
// CPU; the batch and the references are in seq_cancel_fixtures.h. Stops inside calls of several
// ubatches or slices are in test_seq_cancel_slices.cpp.
#include "seq_cancel_fixtures.h"

using namespace seq_cancel;

TEST_P(SeqCancel, OneSequenceStoppedMidCallOthersGoOn) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, 10); // sequence 2's byte, at node 10 of the first graph
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 1);
    EXPECT_GE(r.n_decode_calls, 2) << "the stopped call, then the rest without sequence 2";
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].n_committed, s == 2 ? 0 : k_len) << "sequence " << s;
    }
    expect_survivors_whole(ctx.get(), st, {false, false, true, false});
    EXPECT_EQ(r.output_base, -1) << "sequence 2's tokens left a gap among the last call's";
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(3)), nullptr)
        << "after a drop left gaps, batch indices are not readable (seqs[s].output is)";
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, -1), nullptr) << "nor negative ones";
    const auto last = logits_at(ctx.get(), -1);
    EXPECT_EQ(last, logits_at(ctx.get(), st.seqs[3].output)) << "negative index: the last output, sequence 3's";
}

TEST_P(SeqCancel, BytesSetOnEntryDropTheirSequencesBeforeAnythingRuns) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    st.bytes[0] = st.bytes[3] = 1;
    llama_cancel_decode_params p = st.params(-1, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 2);
    EXPECT_EQ(r.n_decode_calls, 1) << "only the other sequences' tokens were decoded";
    expect_survivors_whole(ctx.get(), st, {true, false, false, true});
    // The survivors are batch tokens 32..95, consecutive and whole: batch indices still read them.
    EXPECT_EQ(r.output_base, k_len);
    const float * l = llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(2));
    ASSERT_NE(l, nullptr);
    const auto want = logits_at(ctx.get(), st.seqs[2].output);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(std::memcmp(l, want.data(), want.size() * sizeof(float)), 0) << "every logit of sequence 2's output";
}

TEST_P(SeqCancel, TwoSequencesStoppedAtOnce) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    st.bytes[1] = 0;
    llama_cancel_decode_params p = st.params(1, 10);
    st.trigger.byte = &st.bytes[1];
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
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 2);
    expect_survivors_whole(ctx.get(), st, {false, true, false, true});
}

TEST_P(SeqCancel, AllSequencesCancelledIsACancelAndLeavesMemoryEmpty) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(-1, 0);
    st.bytes[0] = st.bytes[1] = st.bytes[2] = st.bytes[3] = 1;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    EXPECT_EQ(r.n_decode_calls, 0);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].n_committed, 0);
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
    p.seq_bytes = flags;
    p.n_seq     = k_seqs + 1;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 0);
    // The first output is in the first ubatch: one call, whatever the memory kind.
    EXPECT_EQ(r.n_decode_calls, 1);
    EXPECT_EQ(r.output_base, 0) << "nothing dropped: batch indices stay readable";
    for (int s = 0; s < k_seqs; ++s) {
        const float * l = llama_cancel_get_logits_ith(ctx.get(), &r, b.last_of(s));
        ASSERT_NE(l, nullptr) << "sequence " << s << "'s output by batch index";
        const auto want = logits_at(ctx.get(), b.last_of(s));
        EXPECT_EQ(std::memcmp(l, want.data(), want.size() * sizeof(float)), 0) << "sequence " << s;
    }
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
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    expect_survivors_whole(ctx.get(), st, {false, true, false, false});

    // And the other way round: sequence 0 dropped, sequence 1 keeps the shared tokens.
    auto ctx2 = context(GetParam());
    seq_stop st2;
    st2.bytes[0] = 1;
    llama_cancel_decode_params p2 = st2.params(-1, 0);
    ASSERT_EQ(llama_cancel_decode(ctx2.get(), b.get(), &p2, &r, st2.seqs), LLAMA_CANCEL_OK) << r.message;
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
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 1);
    EXPECT_EQ(st.seqs[2].cancelled, 1);
    EXPECT_GT(r.n_decode_calls, k_n / 2) << "budget-sized slices";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), -1);
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(seq_state(ctx.get(), s), decode_alone(prompts[s], s).state) << "memory of sequence " << s;
    }
    ASSERT_GE(st.seqs[3].output, 0);
    const auto want = decode_alone(prompts[3], 3).logits;
    const auto got  = logits_at(ctx.get(), st.seqs[3].output);
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

TEST_P(SeqCancel, BatchByteStillStopsEverything) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    int8_t batch_byte = 0;
    llama_cancel_decode_params p = st.params(0, 10);
    st.trigger.byte = &batch_byte;
    p.byte = &batch_byte;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_seq_cancelled, 0);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].cancelled, 0);
    }
}

TEST_P(SeqCancel, BadPerSequenceArgumentsAreClearErrors) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(-1, 0);
    p.n_seq = -1;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "n_seq"), nullptr) << r.message;
    p.n_seq = 0; // seq_bytes given without entries
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "n_seq"), nullptr) << r.message;
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), -1) << "nothing decoded";
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
    p.seq_bytes     = flags;
    st.trigger.byte = &all;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    EXPECT_EQ(r.n_decode_calls, 1);
    for (int s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].cancelled, 1);
        EXPECT_EQ(st.seqs[s].n_committed, 0);
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), -1) << "sequence " << s;
    }
}

// Tokens shared by sequences 0 and 1, one of them stopped in the middle of the call: the shared
// tokens stay with the other. llama.cpp takes a token in several sequences only with one KV stream
// for all (kv_unified), where attention spans every sequence's cells, so a sequence's rows are not
// those of its tokens alone: the reference is the same batch with that sequence's byte set on
// entry (dropped before anything runs), which the survivors must match byte for byte and bit for bit.
TEST_P(SeqCancel, SharedTokensStoppedMidCall) {
    ASSERT_FALSE(llama_model_is_recurrent(suite_model())) << k_no_shared_tokens << k_filtered_out;
    const int shared = 8;
    share_prefix(shared);
    multi_batch b(prompts, shared);
    for (llama_seq_id stopped : {0, 1}) {
        auto ref = unified_context(GetParam());
        seq_stop want;
        want.bytes[stopped] = 1;
        llama_cancel_decode_params pw = want.params(-1, 0);
        llama_cancel_decode_result r;
        ASSERT_EQ(llama_cancel_decode(ref.get(), b.get(), &pw, &r, want.seqs), LLAMA_CANCEL_OK) << r.message;

        auto ctx = unified_context(GetParam());
        seq_stop st;
        llama_cancel_decode_params p = st.params(stopped, 10);
        ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_seq_cancelled, 1);
        EXPECT_EQ(st.seqs[stopped].cancelled, 1);
        EXPECT_EQ(st.seqs[stopped].n_committed, 0) << "stopped in the first ubatch";
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), stopped), -1);
        for (llama_seq_id s = 0; s < k_seqs; ++s) {
            if (s == stopped) {
                continue;
            }
            EXPECT_EQ(st.seqs[s].n_committed, k_len) << "sequence " << s << ": its batch tokens, shared ones included";
            EXPECT_EQ(seq_state(ctx.get(), s), seq_state(ref.get(), s)) << "memory of sequence " << s;
            ASSERT_GE(st.seqs[s].output, 0);
            EXPECT_EQ(logits_at(ctx.get(), st.seqs[s].output), logits_at(ref.get(), want.seqs[s].output)) << "sequence " << s;
        }
    }
}

// The batch byte stopping a ubatch that holds tokens of two sequences: llama.cpp removes an aborted
// ubatch's positions by each token's first sequence id only, which would leave sequence 1 holding
// shared tokens nothing committed. Memory holds exactly the committed tokens (none here).
TEST_P(SeqCancel, ACancelInsideSharedTokensLeavesNoneBehind) {
    ASSERT_FALSE(llama_model_is_recurrent(suite_model())) << k_no_shared_tokens << k_filtered_out;
    const int shared = 8;
    share_prefix(shared);
    multi_batch b(prompts, shared);
    auto ctx = unified_context(GetParam());
    seq_stop st;
    int8_t batch_byte = 0;
    llama_cancel_decode_params p = st.params(0, 10);
    st.trigger.byte = &batch_byte;
    p.byte = &batch_byte;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, 0);
    for (llama_seq_id s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].n_committed, 0) << "sequence " << s;
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), -1) << "sequence " << s;
    }
}

// seqs[s].cancelled is stored when the sequence is dropped, during the call: the caller's abort
// callback, run at every node of the call that decodes the others, already sees it.
TEST_P(SeqCancel, TheCancelledEntryIsStoredWhenTheSequenceIsDropped) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, 10);
    struct watch {
        seq_stop * st;
        int32_t    seen = 0;
        static bool cb(void * d) {
            auto * w = static_cast<watch *>(d);
            fixtures::node_trigger::abort_cb(&w->st->trigger);
            w->seen = std::max(w->seen, __atomic_load_n(&w->st->seqs[2].cancelled, __ATOMIC_ACQUIRE));
            return false;
        }
    } w{&st};
    p.abort_callback      = watch::cb;
    p.abort_callback_data = &w;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_GE(r.n_decode_calls, 2);
    EXPECT_EQ(w.seen, 1) << "seqs[2].cancelled was not set while the other sequences were decoded";
}

INSTANTIATE_TEST_SUITE_P(Ubatch, SeqCancel, ::testing::Values(uint32_t{k_n}, uint32_t{k_len}),
                         [](const ::testing::TestParamInfo<uint32_t> & i) {
                             return i.param == k_n ? std::string("whole") : std::string("ubatch32");
                         });
