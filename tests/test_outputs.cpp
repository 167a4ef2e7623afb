// Outputs after llama_cancel_decode, read the ways llama.cpp's own examples read them after
// llama_decode: by batch index (llama_get_logits_ith(ctx, batch.n_tokens - 1), what hosts hand to
// samplers), by negative index, every row of an embeddings context, and through
// llama_cancel_get_logits_ith / _embeddings_ith. CPU backend, tiny model, with and without a hook.
#include "fixtures.h"

#include <gtest/gtest.h>

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

// The default keeps llama.cpp's batch indices: a hooked batch with an output is decoded whole.
TEST_F(Outputs, HookedDecodeKeepsBatchIndexIdiomByDefault) {
    auto prompt = common::make_prompt(suite_model(), k_n, 11);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());
    ASSERT_FALSE(want.empty());

    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get());
    int8_t flag = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = &flag;
    p.hook = hook.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.output_base, 0);
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), k_n - 1), n_vocab()), want) << "llama.cpp's batch index";
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), -1), n_vocab()), want) << "negative index";
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), n_vocab()), want);
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 2), nullptr) << "not an output of the batch";
}

// A stop inside a batch decoded whole with a hook rolls the whole batch back, exactly.
TEST_F(Outputs, HookedWholeBatchRollsBackWhole) {
    auto prompt = common::make_prompt(suite_model(), k_n, 12);
    fixtures::node_trigger trig;
    int8_t flag = 0;
    trig.flag = &flag;
    {
        // Nodes asked per ubatch, counted on one uninterrupted ubatch.
        common::hook_ptr counting = common::make_hook(fixtures::node_trigger::eval_cb, &trig);
        auto c = context(counting.get());
        common::seq_batch one(prompt, 0, k_u, 0);
        ASSERT_EQ(llama_decode(c.get(), one.get()), 0);
    }
    ASSERT_GT(trig.calls, 4);
    trig.at    = trig.calls + trig.calls / 2; // inside the second ubatch's graph
    trig.calls = 0;
    flag       = 0;
    common::hook_ptr hook = common::make_hook(fixtures::node_trigger::eval_cb, &trig);
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = &flag;
    p.hook = hook.get();
    llama_cancel_decode_result r;
    int32_t per_seq[1] = {-1};
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, per_seq, 1), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_GE(trig.calls, trig.at) << "the trigger fired";
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(per_seq[0], 0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), -1);
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), nullptr) << "no outputs after a cancel";
}

// sliced_outputs: the batch goes one n_ubatch slice per llama_decode; outputs are read by negative
// index or through the result, and equal a plain decode's.
TEST_F(Outputs, SlicedOutputsReadThroughResultAndNegativeIndex) {
    auto prompt = common::make_prompt(suite_model(), k_n, 13);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());

    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook           = hook.get();
    p.sliced_outputs = true;
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.output_base, k_n - k_u) << "four slices: the last llama_decode started at 96";
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1), n_vocab()), want);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, -1), n_vocab()), want);
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), -1), n_vocab()), want);
    EXPECT_EQ(llama_cancel_get_logits_ith(ctx.get(), &r, k_n), nullptr) << "past the batch";
}

// Outputs before the last slice are never dropped: such a batch is decoded whole.
TEST_F(Outputs, EarlierOutputsAreKeptWithSlicedOutputs) {
    auto prompt = common::make_prompt(suite_model(), k_n, 14);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    rb.set_output(10, true);
    const auto want10 = plain_logits(ref.get(), rb, 10, n_vocab());
    const auto want_last = row(llama_get_logits_ith(ref.get(), k_n - 1), n_vocab());

    common::hook_ptr hook = common::make_hook();
    auto ctx = context(hook.get());
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook           = hook.get();
    p.sliced_outputs = true;
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    b.set_output(10, true);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.output_base, 0);
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), 10), n_vocab()), want10);
    EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), k_n - 1), n_vocab()), want_last);
    EXPECT_EQ(row(llama_cancel_get_logits_ith(ctx.get(), &r, 10), n_vocab()), want10);
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
    for (bool sliced : {false, true}) {
        common::hook_ptr hook = common::make_hook();
        auto ctx = context(hook.get(), true);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.hook           = hook.get();
        p.sliced_outputs = sliced;
        llama_cancel_decode_result r;
        ASSERT_EQ(llama_cancel_decode(ctx.get(), llama_batch_get_one(prompt.data(), k_n), &p, &r, nullptr, 0),
                  LLAMA_CANCEL_OK) << r.message;
        for (int i = 0; i < k_n; ++i) {
            EXPECT_EQ(row(llama_get_embeddings_ith(ctx.get(), i), n_embd), want[i]) << "row " << i;
            EXPECT_EQ(row(llama_cancel_get_embeddings_ith(ctx.get(), &r, i), n_embd), want[i]) << "row " << i;
        }
    }
}

// Without a hook (abort callback alone, KV cache) a batch is always decoded whole.
TEST_F(Outputs, AbortPathKeepsBatchIndexIdiom) {
    auto prompt = common::make_prompt(suite_model(), k_n, 16);
    auto ref = context(nullptr);
    common::seq_batch rb(prompt, 0, k_n, 0);
    const auto want = plain_logits(ref.get(), rb, k_n - 1, n_vocab());
    for (bool sliced : {false, true}) {
        auto ctx = context(nullptr);
        int8_t flag = 0;
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.flag           = &flag;
        p.sliced_outputs = sliced;
        llama_cancel_decode_result r;
        common::seq_batch b(prompt, 0, k_n, 0);
        ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.output_base, 0);
        EXPECT_EQ(row(llama_get_logits_ith(ctx.get(), k_n - 1), n_vocab()), want);
    }
}

TEST_F(Outputs, AccessorsRejectNullContext) {
    llama_cancel_decode_result r{};
    EXPECT_EQ(llama_cancel_get_logits_ith(nullptr, &r, 0), nullptr);
    EXPECT_EQ(llama_cancel_get_embeddings_ith(nullptr, nullptr, -1), nullptr);
}
