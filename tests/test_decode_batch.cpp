// What llama_cancel_decode reads off a batch (src/decode/decode_batch.cpp) alone, on hand-made batches: the
// positions of a batch without positions and the committed counts they give. Issue 22: a token in
// several sequences advances every one of them (as llama.cpp's batch allocator does where it
// assigns positions), not only its first; counting by first-sequence positions credited a sequence
// with tokens it does not hold. Built from the library's sources (it exports only the C API).
#include "decode/decode_batch.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

// A batch without positions: `seqs[i]` are token i's sequences.
class seq_only_batch {
  public:
    explicit seq_only_batch(const std::vector<std::vector<llama_seq_id>> & seqs) : seqs_(seqs) {
        for (auto & s : seqs_) {
            n_seq_id_.push_back(static_cast<int32_t>(s.size()));
            seq_ptr_.push_back(s.data());
            token_.push_back(1);
        }
    }
    llama_batch get() {
        llama_batch b{};
        b.n_tokens = static_cast<int32_t>(token_.size());
        b.token    = token_.data();
        b.n_seq_id = n_seq_id_.data();
        b.seq_id   = seq_ptr_.data();
        return b;
    }

  private:
    std::vector<std::vector<llama_seq_id>> seqs_;
    std::vector<int32_t>                   n_seq_id_;
    std::vector<llama_seq_id *>            seq_ptr_;
    std::vector<llama_token>               token_;
};

// 4 tokens in sequences 0 and 1, then 2 of sequence 1, then 2 of sequence 0.
seq_only_batch shared_then_own() {
    return seq_only_batch({{0, 1}, {0, 1}, {0, 1}, {0, 1}, {1}, {1}, {0}, {0}});
}

} // namespace

TEST(TokenPositions, ExplicitPositionsAreKept) {
    seq_only_batch sb({{0}, {0}});
    llama_batch b = sb.get();
    llama_pos pos[2] = {7, 8};
    b.pos = pos;
    EXPECT_EQ(llama_cancel::token_positions(b, {-1}), (std::vector<llama_pos>{7, 8}));
}

TEST(TokenPositions, ATokenInSeveralSequencesAdvancesEveryOne) {
    seq_only_batch sb = shared_then_own();
    EXPECT_EQ(llama_cancel::token_positions(sb.get(), {-1, -1}), (std::vector<llama_pos>{0, 1, 2, 3, 4, 5, 4, 5}))
        << "sequence 1's own tokens follow the shared ones";
    // From memory: each token after its first sequence's last position, then all of its sequences on.
    EXPECT_EQ(llama_cancel::token_positions(sb.get(), {9, 9}),
              (std::vector<llama_pos>{10, 11, 12, 13, 14, 15, 14, 15}));
    seq_only_batch first_is_1({{1, 0}, {1, 0}, {0}});
    EXPECT_EQ(llama_cancel::token_positions(first_is_1.get(), {-1, -1}), (std::vector<llama_pos>{0, 1, 2}))
        << "sequence 0 continues after tokens whose first sequence is 1";
}

// Memory holds the shared tokens only (each sequence at 0..3): each sequence has 4 committed tokens
// and the committed prefix is 4. With first-sequence positions, sequence 1's own tokens (then at
// 0 and 1) would count as held: 6 for sequence 1 and a prefix of 6.
TEST(CountCommitted, FollowsThePositionsOfSharedTokens) {
    seq_only_batch sb = shared_then_own();
    const llama_batch b = sb.get();
    const std::vector<llama_pos> before = {-1, -1}, after = {3, 3};
    const auto pos = llama_cancel::token_positions(b, before);
    int32_t per_seq[2] = {0, 0};
    EXPECT_EQ(llama_cancel::count_committed(b, pos, false, before, after, per_seq, 2), 4);
    EXPECT_EQ(per_seq[0], 4);
    EXPECT_EQ(per_seq[1], 4);

    // Everything in memory: 6 tokens of each sequence, the whole batch.
    int32_t all[2] = {0, 0};
    EXPECT_EQ(llama_cancel::count_committed(b, pos, false, before, {5, 5}, all, 2), 8);
    EXPECT_EQ(all[0], 6);
    EXPECT_EQ(all[1], 6);
}
