// Outputs after llama_cancel_decode, read the ways llama.cpp's own examples read them after
// llama_decode: by batch index (llama_get_logits_ith(ctx, batch.n_tokens - 1), what hosts hand to
// samplers), by negative index, every row of an embeddings context, and through
// llama_cancel_get_logits_ith / _embeddings_ith. CPU backend, tiny model, with and without a hook.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using fixtures::suite_model;

constexpr int k_n = 128; // batch tokens
constexpr int k_u = 32;  // n_ubatch: four slices

class Outputs : public fixtures::model_suite<Outputs> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_TINY_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";

  protected:
    // A context with n_batch k_n and n_ubatch k_u; with `hook`, bound the way a host binds it.
    static common::context_ptr context(llama_cancel_hook * hook, bool embeddings = false) {
        common::context_options opt = fixtures::context_options(k_n, k_u);
        opt.embeddings = embeddings;
        return fixtures::make_bound_context(suite_model(), hook, opt);
    }

    static int32_t n_vocab() { return llama_vocab_n_tokens(llama_model_get_vocab(suite_model())); }
};

std::vector<float> row(const float * p, int32_t n) {
    return p != nullptr ? std::vector<float>(p, p + n) : std::vector<float>();
}

// Logits of batch index `i` after a plain llama_decode of the prompt with outputs at `outputs`.
std::vector<float> plain_logits(llama_context * ctx, common::seq_batch & b, int32_t i, int32_t n_vocab) {
    EXPECT_EQ(llama_decode(ctx, b.get()), 0);
    return row(llama_get_logits_ith(ctx, i), n_vocab);
}

} // namespace

// With a hook, a batch whose only output lies in its last n_ubatch tokens goes one ubatch per
// llama_decode call: its output is read through the result (batch index) or by negative index.
TEST_F(Outputs, HookedDecodeReadsOutputsThroughResult) {
    auto prompt = common::make_prompt(suite_model(), k_n, 11);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());
    ASSERT_FALSE(want.empty());

    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get());
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = hook.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_decode_calls, k_n / k_u) << "one llama_decode call per ubatch";
    EXPECT_EQ(r.output_base, k_n - k_u) << "four slices: the last llama_decode started at 96";
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), n_vocab()), want) << "batch index";
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, -1), n_vocab()), want) << "negative index";
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), -1), n_vocab()), want) << "llama.cpp's negative index";
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 2), nullptr) << "not an output of the batch";
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n), nullptr) << "past the batch";
}

// Nodes the hook's chain is asked about for one uninterrupted ubatch of k_u tokens.
static int asks_per_ubatch(const std::vector<llama_token> & prompt, fixtures::node_trigger & trig,
                    common::context_ptr (*make)(llama_cancel_hook *, bool)) {
    common::hook_ptr counting = common::make_hook(fixtures::node_trigger::eval_cb, &trig);
    auto c = make(counting.get(), false);
    common::seq_batch one(prompt, 0, k_u, 0);
    EXPECT_EQ(llama_decode(c.get(), one.get()), 0);
    const int asks = trig.calls;
    trig.reset();
    return asks;
}

// A hook stop inside the second ubatch keeps the first (the default keeps finished slices), and
// the resume from n_committed ends bit-identical to an uninterrupted decode.
TEST_F(Outputs, HookedStopKeepsFinishedSlicesAndResumesBitIdentical) {
    auto prompt = common::make_prompt(suite_model(), k_n, 12);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());
    ASSERT_FALSE(want.empty());

    fixtures::node_trigger trig;
    int8_t byte = 0;
    trig.byte = &byte;
    const int asks = asks_per_ubatch(prompt, trig, &Outputs::context);
    ASSERT_GT(asks, 4);
    trig.at = asks + asks / 2; // inside the second ubatch's graph
    common::hook_ptr hook = common::make_hook(fixtures::node_trigger::eval_cb, &trig);
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte  = &byte;
    p.hook  = hook.get();
    p.n_seq = 1;
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{INT32_MIN, INT32_MIN, INT32_MIN}};
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_GE(trig.calls, trig.at) << "the trigger fired";
    EXPECT_EQ(r.n_committed, k_u) << "the first ubatch is kept";
    EXPECT_EQ(per_seq[0].n_committed, k_u);
    EXPECT_EQ(per_seq[0].output, -1) << "no output after a cancel";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), k_u - 1);
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), nullptr) << "no outputs after a cancel";

    byte = 0;
    trig.reset();
    common::seq_batch rest(prompt, r.n_committed, k_n - r.n_committed, r.n_committed);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - k_u - 1), n_vocab()), want)
        << "resumed logits (last index of the resumed batch)";
}

// A hooked batch with an output before its last ubatch cannot go one ubatch per call (llama.cpp
// keeps only the last call's outputs): it is decoded whole, and a stop inside rolls it back whole.
TEST_F(Outputs, HookedBatchWithEarlyOutputRollsBackWhole) {
    auto prompt = common::make_prompt(suite_model(), k_n, 17);
    fixtures::node_trigger trig;
    int8_t byte = 0;
    trig.byte = &byte;
    const int asks = asks_per_ubatch(prompt, trig, &Outputs::context);
    ASSERT_GT(asks, 4);
    trig.at = asks + asks / 2; // inside the second ubatch's graph
    common::hook_ptr hook = common::make_hook(fixtures::node_trigger::eval_cb, &trig);
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = hook.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    b.set_output(10, true);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_GE(trig.calls, trig.at) << "the trigger fired";
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), -1);
}

// Outputs before the last slice are never dropped: such a batch is decoded whole.
TEST_F(Outputs, EarlierOutputsAreKept) {
    auto prompt = common::make_prompt(suite_model(), k_n, 14);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    rb.set_output(10, true);
    const auto want10 = plain_logits(ref.get(), rb, 10, n_vocab());
    const auto want_last = row(llama_get_logits_ith(ref.get(), k_n - 1), n_vocab());
    ASSERT_FALSE(want10.empty());
    ASSERT_FALSE(want_last.empty());

    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook = hook.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    b.set_output(10, true);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.output_base, 0);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, 10), n_vocab()), want10);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), n_vocab()), want_last);
}

// An embeddings context with batch.logits NULL outputs every token: all rows stay readable.
TEST_F(Outputs, EmbeddingsContextKeepsEveryRow) {
    auto prompt = common::make_prompt(suite_model(), k_n, 15);
    const int32_t n_embd = llama_model_n_embd(suite_model());
    auto ref = context(nullptr, true);
    ASSERT_EQ(llama_decode(ref.get(), llama_batch_get_one(prompt.data(), k_n)), 0);
    std::vector<std::vector<float>> want;
    for (int i = 0; i < k_n; ++i) {
        want.push_back(row(llama_get_embeddings_ith(ref.get(), i), n_embd));
        ASSERT_FALSE(want.back().empty()) << "row " << i;
    }
    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get(), true);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook = hook.get();
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), llama_batch_get_one(prompt.data(), k_n), &p, &r, nullptr),
              LLAMA_CANCEL_OK) << r.message;
    for (int i = 0; i < k_n; ++i) {
        EXPECT_EQ(row(llama_cancel_get_embeddings_ith(ctx.get(), &r, i), n_embd), want[i]) << "row " << i;
    }
}

// Without a hook (abort callback alone, KV cache) the batch is sliced all the same (the library
// cannot see which eval callback the context has): its output is read by batch index through the
// result, and by llama.cpp's -1.
TEST_F(Outputs, AbortPathSlicesAndOutputsStayReadable) {
    auto prompt = common::make_prompt(suite_model(), k_n, 16);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());
    ASSERT_FALSE(want.empty());
    auto ctx = context(nullptr);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.output_base, k_n - k_u);
    EXPECT_EQ(r.n_decode_calls, k_n / k_u);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), n_vocab()), want);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, -1), n_vocab()), want);
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), -1), n_vocab()), want);
}

TEST_F(Outputs, AccessorsRejectNullContext) {
    llama_cancel_decode_result r{};
    EXPECT_EQ(llama_cancel_get_logits_ith(nullptr, &r, 0), nullptr);
    EXPECT_EQ(llama_cancel_get_embeddings_ith(nullptr, nullptr, -1), nullptr);
}
