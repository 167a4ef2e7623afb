// The pending tokens of a per-sequence decode (src/decode/pending_batch.cpp) alone, on hand-made batches.
// Issue 22: keep_in_memory promises that a refusal changes nothing, its out-parameter included; it used
// to return false with `requeue` already holding the (sequence, position) pairs of the tokens it had
// looked at before the refusal. Built from the library's sources (it exports only the C API).
#include "decode/pending_batch.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace {

using requeue_list = std::vector<std::pair<llama_seq_id, llama_pos>>;

// Token 0: sequence 0 alone, an output. Token 1: shared by sequences 1 and 2. Both at position 0.
struct two_token_batch {
    llama_token               token[2]    = {1, 2};
    llama_seq_id              seq_a[1]    = {0};
    llama_seq_id              seq_b[2]    = {1, 2};
    llama_seq_id *            seq_id[2]   = {seq_a, seq_b};
    int32_t                   n_seq_id[2] = {1, 2};
    int8_t                    logits[2]   = {1, 0};
    std::vector<llama_pos>    pos         = {0, 0};

    llama_batch get() {
        llama_batch b{};
        b.n_tokens = 2;
        b.token    = token;
        b.n_seq_id = n_seq_id;
        b.seq_id   = seq_id;
        b.logits   = logits;
        return b;
    }
};

} // namespace

TEST(PendingBatch, KeepHeldRefusalLeavesRequeueAndTokensAlone) {
    two_token_batch tb;
    const llama_batch batch = tb.get();
    int8_t         byte_of_seq2 = 0;
    const int8_t * flags[3]     = {nullptr, nullptr, &byte_of_seq2};
    llama_cancel::pending_batch pending(batch, tb.pos, 8, 1, flags, 3);

    // After an abort: sequence 0 holds its token (an output to decode again), sequence 1 holds the
    // shared token but sequence 2 does not: a token held by some of its sequences only.
    const std::vector<llama_pos> pos_max = {0, 0, -1};
    requeue_list requeue = {{99, 99}};
    EXPECT_FALSE(pending.keep_in_memory(2, pos_max, false, requeue));
    EXPECT_EQ(requeue, (requeue_list{{99, 99}})) << "a refusal must leave the caller's list as it was";
    EXPECT_EQ(pending.size(), 2);
    EXPECT_EQ(pending.next_index(), 0);
}

TEST(PendingBatch, KeepHeldNamesTheOutputsToDecodeAgain) {
    two_token_batch tb;
    const llama_batch batch = tb.get();
    int8_t         byte_of_seq2 = 0;
    const int8_t * flags[3]     = {nullptr, nullptr, &byte_of_seq2};
    llama_cancel::pending_batch pending(batch, tb.pos, 8, 1, flags, 3);

    // Every sequence holds what it has: the shared token is committed, sequence 0's output goes
    // back to be decoded in the last call.
    const std::vector<llama_pos> pos_max = {0, 0, 0};
    requeue_list requeue = {{99, 99}};
    ASSERT_TRUE(pending.keep_in_memory(2, pos_max, false, requeue));
    EXPECT_EQ(requeue, (requeue_list{{0, 0}}));
    EXPECT_EQ(pending.size(), 1) << "the shared token is committed, sequence 0's output is pending again";
    EXPECT_EQ(pending.next_index(), 0);
}
