// Per-sequence cancel where one batch goes in several ubatches or llama_decode calls: what a stop
// keeps (finished ubatches on a KV cache; one slice per call with a hook or recurrent state, outputs
// last), and that every survivor's output stays readable. Built into test_seq_cancel's program.
#include "seq_cancel_fixtures.h"

using namespace seq_cancel;

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
