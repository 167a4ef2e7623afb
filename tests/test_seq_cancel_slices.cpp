// Per-sequence cancel where one batch goes in several ubatches or llama_decode calls: what a stop
// keeps (finished ubatches of a KV cache that the abort callback stopped; with an eval-callback stop
// or recurrent state the call is undone, and a server batch, whose first output is in its first
// ubatch, goes in one call), and that every survivor's output stays readable. Built into
// test_seq_cancel's program.
#include "seq_cancel_fixtures.h"

#include <cstdio>

using namespace seq_cancel;

// The tests of a batch in several ubatches: n_ubatch 32, a quarter of the batch.
class SeqCancelSlices : public SeqCancel {};
INSTANTIATE_TEST_SUITE_P(Ubatch, SeqCancelSlices, ::testing::Values(uint32_t{k_len}),
                         [](const ::testing::TestParamInfo<uint32_t> &) { return std::string("ubatch32"); });

// A KV cache decodes the batch in one llama_decode call of 4 ubatches (one stream per sequence:
// each ubatch holds a quarter of every sequence). Sequence 2 stopped in the third keeps what the
// first two committed, as a cancel keeps finished ubatches; the others are not computed again.
// With recurrent state a stop undoes the whole call: sequence 2 then keeps nothing, the others go on.
TEST_P(SeqCancelSlices, AStopInALaterUbatchKeepsTheFinishedOnes) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, total * 5 / 8); // inside the third of 4 ubatches
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_GE(r.n_decode_calls, 2);
    EXPECT_EQ(st.seqs[2].cancelled, 1);
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(st.seqs[s].n_committed, k_len) << "sequence " << s;
    }
    if (has_recurrent_state()) {
        EXPECT_EQ(st.seqs[2].n_committed, 0) << "recurrent state: the stopped call is undone whole";
    } else {
        ASSERT_GT(st.seqs[2].n_committed, 0) << "the finished ubatches hold sequence 2's first tokens";
        EXPECT_LT(st.seqs[2].n_committed, k_len);
    }
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), st.seqs[2].n_committed - 1);
    if (st.seqs[2].n_committed > 0) {
        EXPECT_EQ(seq_state(ctx.get(), 2), decode_prefix_alone(prompts[2], 2, st.seqs[2].n_committed).state)
            << "sequence 2 holds its committed tokens as a decode of them alone leaves them";
    }
    for (llama_seq_id s : {0, 1, 3}) {
        const alone want = decode_alone(prompts[s], s);
        EXPECT_EQ(seq_state(ctx.get(), s), want.state) << "memory of sequence " << s;
        ASSERT_GE(st.seqs[s].output, 0) << "sequence " << s << " has no readable output";
        ASSERT_FALSE(want.logits.empty());
        const auto got = logits_at(ctx.get(), st.seqs[s].output);
        ASSERT_EQ(got.size(), want.logits.size()) << "sequence " << s;
        EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0) << "sequence " << s;
    }
}

// One KV stream for all sequences: on a KV cache ubatch k is sequence k. Sequence 2 stopped in the third leaves
// sequences 0 and 1 committed with their outputs, which llama.cpp would not keep past the next
// call: their last tokens are decoded again beside sequence 3, and every output stays readable.
TEST_P(SeqCancelSlices, OutputsOfFinishedUbatchesStayReadable) {
    auto ctx = unified_context(GetParam());
    ASSERT_NE(ctx, nullptr);
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(2, total * 5 / 8);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    // The stopped call (ubatch k is sequence k), then one for the rest; sequence 2 keeps nothing:
    // the stop came in its own ubatch (KV cache) or undid the call (recurrent state).
    EXPECT_EQ(r.n_decode_calls, 2);
    const int32_t kept2 = 0;
    EXPECT_EQ(st.seqs[2].n_committed, kept2);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 2), kept2 - 1);
    if (kept2 > 0) {
        EXPECT_EQ(seq_state(ctx.get(), 2), decode_prefix_alone(prompts[2], 2, kept2, true).state)
            << "sequence 2 holds its committed tokens as a decode of them alone leaves them";
    }
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(st.seqs[s].n_committed, k_len) << "sequence " << s;
        const alone want = decode_prefix_alone(prompts[s], s, k_len, true);
        EXPECT_EQ(seq_state(ctx.get(), s), want.state) << "memory of sequence " << s;
        ASSERT_GE(st.seqs[s].output, 0) << "sequence " << s << " has no readable output";
        ASSERT_FALSE(want.logits.empty());
        const auto got = logits_at(ctx.get(), st.seqs[s].output);
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
    p.hook = hc.hook.get();
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(hc.ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(st.seqs[1].cancelled, 1);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(hc.ctx.get()), 1), -1);
    ASSERT_GE(st.seqs[0].output, 0) << "sequence 0's output was lost";
    const alone want = decode_prefix_alone(prompts[0], 0, 10);
    EXPECT_EQ(seq_state(hc.ctx.get(), 0), want.state);
    ASSERT_FALSE(want.logits.empty());
    const auto got = logits_at(hc.ctx.get(), st.seqs[0].output);
    ASSERT_EQ(got.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.data(), want.logits.data(), got.size() * sizeof(float)), 0);
    EXPECT_EQ(seq_state(hc.ctx.get(), 3), decode_prefix_alone(prompts[3], 3, 26).state);
}

// Every sequence's byte stored in the third of 4 ubatches: still a cancel, with the finished
// ubatches kept on a KV cache (each sequence holds its committed tokens).
TEST_P(SeqCancelSlices, AllSequencesStoppedInALaterUbatch) {
    auto ctx = context(GetParam());
    multi_batch b(prompts);
    const int total = nodes_of_decode(ctx.get(), b);
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, total * 5 / 8);
    int8_t all = 0;
    const int8_t * flags[k_seqs] = {&all, &all, &all, &all};
    p.seq_bytes     = flags;
    st.trigger.byte = &all;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, k_seqs);
    int32_t kept = 0;
    for (llama_seq_id s = 0; s < k_seqs; ++s) {
        EXPECT_EQ(st.seqs[s].cancelled, 1);
        ASSERT_GE(st.seqs[s].n_committed, 0) << "sequence " << s;
        EXPECT_LT(st.seqs[s].n_committed, k_len) << "sequence " << s;
        if (!has_recurrent_state()) {
            EXPECT_EQ(st.seqs[s].n_committed, k_len / 2) << "sequence " << s << ": its quarter of each finished ubatch";
        }
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), st.seqs[s].n_committed - 1) << "sequence " << s;
        kept += st.seqs[s].n_committed;
    }
    if (has_recurrent_state()) {
        EXPECT_EQ(kept, 0) << "recurrent state: the stopped call is undone whole";
    } else {
        EXPECT_GT(kept, 0) << "the two finished ubatches are kept";
    }
}

// With a hook (and on recurrent state) a stop undoes a whole llama_decode call. A server batch (each
// sequence's last token an output, the first in the first ubatch) goes in one call, so a sequence
// the hook stopped in the third ubatch keeps nothing and the others are decoded again without it,
// their memory and outputs as a clean decode leaves them.
TEST_P(SeqCancelSlices, AHookStopInAServerBatchRedoesTheOthers) {
    fixtures::node_trigger count;
    auto counted = fixtures::make_hooked(suite_model(), k_n, k_len, &count, k_seqs);
    multi_batch b(prompts);
    seq_stop plain;
    llama_cancel_decode_params pc = plain.params(-1, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(counted.ctx.get(), b.get(), &pc, &r, plain.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_decode_calls, 1) << "the first output is in the first ubatch: one call";
    EXPECT_EQ(r.output_base, 0);

    seq_stop st;
    fixtures::node_trigger trig;
    trig.byte = &st.bytes[2];
    trig.at   = count.calls * 5 / 8; // inside the third of 4 equal ubatches
    auto hc = fixtures::make_hooked(suite_model(), k_n, k_len, &trig, k_seqs);
    llama_cancel_decode_params p = st.params(-1, 0); // the hook bound to hc is found by itself
    ASSERT_EQ(llama_cancel_decode(hc.ctx.get(), b.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(st.seqs[2].cancelled, 1);
    EXPECT_EQ(r.n_decode_calls, 2) << "the stopped call, then the others again";
    EXPECT_EQ(st.seqs[2].n_committed, 0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(hc.ctx.get()), 2), -1);
    EXPECT_EQ(r.output_base, -1) << "a drop left gaps: read through seqs[s].output";
    for (llama_seq_id s : {0, 1, 3}) {
        EXPECT_EQ(st.seqs[s].n_committed, k_len);
        EXPECT_EQ(seq_state(hc.ctx.get(), s), seq_state(counted.ctx.get(), s)) << "memory of sequence " << s;
        EXPECT_EQ(logits_at(hc.ctx.get(), st.seqs[s].output), logits_at(counted.ctx.get(), plain.seqs[s].output))
            << "sequence " << s;
    }
}

// Tokens in two sequences, with batch.pos NULL (issue 22): a llama.cpp that gives each token the
// next position of its first sequence and then advances every sequence of the token puts sequence
// 1's own tokens after the shared ones at positions 32..63, not 0..31. Batch: 32 tokens in sequences
// 0 and 1, then 32 of sequence 1 alone, then 32 more of sequence 0; three ubatches of 32 (one KV
// stream for all, so ubatches follow batch order). Committed counts must follow llama.cpp's
// positions: a stop in the second ubatch keeps the first (32 tokens of each sequence), not 64 of
// sequence 1; a drop of sequence 0 there leaves sequence 1 all 64 of its tokens at 0..63.
// A llama.cpp that advances the first sequence only (Debian's libllama 0.7.0) refuses this batch
// ("positions are decreasing"): there the defect cannot be shown through llama_decode (no batch it
// accepts gives the two rules different positions; test_decode_batch guards the rule itself), and
// llama_cancel_decode either refuses the batch too or, where it passes positions itself, decodes it
// at the every-sequence positions, each sequence whole.
class positionless_batch {
  public:
    explicit positionless_batch(int first = 0) {
        const auto shared = common::make_prompt(suite_model(), 2 * k_len, 300);
        const auto own1   = common::make_prompt(suite_model(), k_len, 301);
        for (int i = first; i < 3 * k_len; ++i) {
            const bool both = i < k_len, one = i >= k_len && i < 2 * k_len;
            const llama_token t = both ? shared[i] : one ? own1[i - k_len] : shared[i - k_len];
            b_.add(t, 0, both ? std::vector<llama_seq_id>{0, 1} : std::vector<llama_seq_id>{one ? 1 : 0},
                   i == 2 * k_len - 1 || i == 3 * k_len - 1);
        }
    }
    // The batch with positions left to llama.cpp.
    llama_batch get() {
        llama_batch b = b_.get();
        b.pos = nullptr;
        return b;
    }
    int32_t index_of_last(llama_seq_id s) const { return b_.last_of(s); }

  private:
    common::owned_batch b_;
};

// Abort-callback calls of an uninterrupted decode of `b` (memory cleared after).
static int abort_calls_of(llama_context * ctx, positionless_batch & b) {
    seq_stop counter;
    llama_cancel_decode_params p = counter.params(0, -1); // counts, never stores
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx, b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    llama_memory_clear(llama_get_memory(ctx), true);
    return counter.trigger.calls;
}

TEST_P(SeqCancelSlices, TokensOfTwoSequencesWithoutPositions) {
    ASSERT_FALSE(llama_model_is_recurrent(suite_model())) << k_no_shared_tokens << k_filtered_out;
    positionless_batch whole;
    // What llama.cpp does with the whole batch: every sequence at 0..63, two outputs.
    auto ref = unified_context(k_len);
    if (llama_decode(ref.get(), whole.get()) != 0) {
        std::printf("this llama.cpp refuses the batch (it advances a token's first sequence only)\n");
        auto ctx = unified_context(k_len);
        seq_stop st;
        llama_cancel_decode_params p = st.params(-1, 0);
        llama_cancel_decode_result r;
        const int32_t status = llama_cancel_decode(ctx.get(), whole.get(), &p, &r, st.seqs);
        // Where the library hands llama_decode its own positions (slices of a context with state),
        // it decodes the batch at the positions of a llama.cpp that advances every sequence;
        // elsewhere llama.cpp's refusal is an error, memory untouched.
        std::printf("llama_cancel_decode: %s %s\n", llama_cancel_status_str(status), r.message);
        ASSERT_TRUE(status == LLAMA_CANCEL_OK || status == LLAMA_CANCEL_ERROR) << r.message;
        EXPECT_EQ(status == LLAMA_CANCEL_ERROR, r.message[0] != '\0');
        for (llama_seq_id s : {0, 1}) {
            EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), status == LLAMA_CANCEL_OK ? 2 * k_len - 1 : -1)
                << "sequence " << s;
            if (status == LLAMA_CANCEL_OK) {
                EXPECT_EQ(st.seqs[s].n_committed, 2 * k_len) << "sequence " << s;
            }
        }
        return;
    }
    for (llama_seq_id s : {0, 1}) {
        ASSERT_EQ(llama_memory_seq_pos_max(llama_get_memory(ref.get()), s), 2 * k_len - 1) << "llama.cpp's positions";
    }

    for (bool seq_bytes : {false, true}) {
        SCOPED_TRACE(seq_bytes ? "with per-sequence bytes" : "batch byte alone");
        // OK: every batch token of each sequence committed, outputs as llama.cpp's.
        {
            auto ctx = unified_context(k_len);
            seq_stop st;
            llama_cancel_decode_params p = st.params(-1, 0);
            if (!seq_bytes) {
                p.seq_bytes = nullptr;
            }
            llama_cancel_decode_result r;
            ASSERT_EQ(llama_cancel_decode(ctx.get(), whole.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
            EXPECT_EQ(r.n_committed, 3 * k_len);
            for (llama_seq_id s : {0, 1}) {
                EXPECT_EQ(st.seqs[s].n_committed, 2 * k_len) << "sequence " << s;
                EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), 2 * k_len - 1) << "sequence " << s;
                EXPECT_EQ(seq_state(ctx.get(), s), seq_state(ref.get(), s)) << "memory of sequence " << s;
                ASSERT_GE(st.seqs[s].output, 0) << "sequence " << s;
                EXPECT_EQ(logits_at(ctx.get(), st.seqs[s].output), logits_at(ref.get(), whole.index_of_last(s)))
                    << "sequence " << s;
            }
        }
        // The batch byte stored in the second ubatch: the first is kept, and the resume (positions
        // again left to llama.cpp) ends as the whole batch did.
        {
            auto ctx = unified_context(k_len);
            const int total = abort_calls_of(ctx.get(), whole);
            seq_stop st;
            int8_t batch_byte = 0;
            llama_cancel_decode_params p = st.params(0, total / 2); // inside the second of 3 ubatches
            st.trigger.byte = &batch_byte;
            p.byte          = &batch_byte;
            if (!seq_bytes) {
                p.seq_bytes = nullptr;
            }
            llama_cancel_decode_result r;
            ASSERT_EQ(llama_cancel_decode(ctx.get(), whole.get(), &p, &r, st.seqs), LLAMA_CANCEL_CANCELLED) << r.message;
            EXPECT_EQ(r.n_committed, k_len) << "the first ubatch";
            for (llama_seq_id s : {0, 1}) {
                EXPECT_EQ(st.seqs[s].n_committed, k_len) << "sequence " << s << ": the shared tokens only";
                EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), k_len - 1) << "sequence " << s;
            }
            ASSERT_EQ(r.n_committed, k_len);
            positionless_batch rest(r.n_committed);
            seq_stop st2;
            llama_cancel_decode_params p2 = st2.params(-1, 0);
            ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p2, &r, st2.seqs), LLAMA_CANCEL_OK) << r.message;
            for (llama_seq_id s : {0, 1}) {
                EXPECT_EQ(st2.seqs[s].n_committed, k_len) << "sequence " << s << ": its resumed tokens";
                EXPECT_EQ(seq_state(ctx.get(), s), seq_state(ref.get(), s)) << "memory of sequence " << s;
                ASSERT_GE(st2.seqs[s].output, 0) << "sequence " << s;
                EXPECT_EQ(logits_at(ctx.get(), st2.seqs[s].output), logits_at(ref.get(), whole.index_of_last(s)))
                    << "resumed sequence " << s;
            }
        }
    }

    // Sequence 0's byte stored in the second ubatch: sequence 0 keeps the shared tokens, sequence 1
    // goes on with all its tokens at llama.cpp's positions.
    auto ctx = unified_context(k_len);
    seq_stop st;
    llama_cancel_decode_params p = st.params(0, 1);
    st.trigger.at = abort_calls_of(ctx.get(), whole) / 2; // inside the second of 3 ubatches
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), whole.get(), &p, &r, st.seqs), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(st.seqs[0].cancelled, 1);
    EXPECT_EQ(st.seqs[0].n_committed, k_len) << "sequence 0: the shared tokens of the finished ubatch";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), k_len - 1);
    EXPECT_EQ(st.seqs[1].cancelled, 0);
    EXPECT_EQ(st.seqs[1].n_committed, 2 * k_len) << "sequence 1: all its tokens";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 1), 2 * k_len - 1) << "at llama.cpp's positions";
    ASSERT_GE(st.seqs[1].output, 0);
    EXPECT_FALSE(logits_at(ctx.get(), st.seqs[1].output).empty());
}
