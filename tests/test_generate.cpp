// The token loop (llama_cancel_generate) on the tiny model (CPU); the cancellable model load is in
// test_model_load.cpp.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using fixtures::suite_model;

// Greedy reference: plain llama_decode of the whole prompt, then token by token.
std::vector<llama_token> reference(const std::vector<llama_token> & prompt, int n_predict) {
    const auto n = static_cast<uint32_t>(prompt.size());
    auto ctx = fixtures::make_bound_context(suite_model(), nullptr, fixtures::context_options(n, n));
    common::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    std::vector<llama_token> out;
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
    for (int i = 0; i < n_predict; ++i) {
        const float * l = llama_get_logits_ith(ctx.get(), -1);
        const llama_token t = static_cast<llama_token>(std::max_element(l, l + n_vocab) - l);
        out.push_back(t);
        std::vector<llama_token> one{t};
        common::seq_batch nb(one, 0, 1, static_cast<llama_pos>(prompt.size()) + i);
        EXPECT_EQ(llama_decode(ctx.get(), nb.get()), 0);
    }
    return out;
}

} // namespace

class Generate : public fixtures::model_suite<Generate> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_TINY_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";
};

TEST_F(Generate, GreedyMatchesPlainLoopAndLeavesContextReady) {
    auto prompt = common::make_prompt(suite_model(), 40, 2);
    const auto want = reference(prompt, 8);
    auto s = fixtures::make_hooked(suite_model(), 16, 16);
    int8_t byte = 0;
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.byte      = &byte;
    p.n_predict = 8;
    p.hook      = s.hook.get();
    std::vector<llama_token> out(8, -1);
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 40, &p, out.data(), 8, &r), LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_LENGTH);
    EXPECT_EQ(r.n_prompt_committed, 40);
    EXPECT_EQ(r.n_generated, 8);
    EXPECT_EQ(r.n_generated_committed, 8);
    EXPECT_EQ(r.n_past, 48);
    EXPECT_EQ(out, want);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(s.ctx.get()), 0), 47);
}

// n_prompt 0 continues from the logits the previous call left: two calls of 4 equal one of 8.
TEST_F(Generate, EmptyPromptContinuesFromTheLastLogits) {
    auto prompt = common::make_prompt(suite_model(), 24, 5);
    const auto want = reference(prompt, 8);
    auto s = fixtures::make_hooked(suite_model(), 16, 16);
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.n_predict = 4;
    std::vector<llama_token> out(8, -1);
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 24, &p, out.data(), 4, &r), LLAMA_CANCEL_OK);
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), nullptr, 0, &p, out.data() + 4, 4, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_past, 32);
    EXPECT_EQ(out, want);
}

TEST_F(Generate, CancelDuringPrefillThenResumeGivesTheSameTokens) {
    const int u = 16;
    auto prompt = common::make_prompt(suite_model(), 64, 4);
    const auto want = reference(prompt, 6);

    fixtures::node_trigger count;
    int8_t unused = 0;
    count.byte = &unused;
    {
        auto c = fixtures::make_hooked(suite_model(), u, u, &count);
        common::seq_batch b(prompt, 0, u, 0);
        ASSERT_EQ(llama_decode(c.ctx.get(), b.get()), 0);
    }
    fixtures::node_trigger trig;
    int8_t byte = 0;
    trig.byte = &byte;
    trig.at   = 2 * count.calls + count.calls / 2; // inside the third prefill ubatch
    auto s = fixtures::make_hooked(suite_model(), u, u, &trig);
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.byte      = &byte;
    p.n_predict = 6;
    p.hook      = s.hook.get();
    std::vector<llama_token> out(6, -1);
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 64, &p, out.data(), 6, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_CANCELLED);
    EXPECT_EQ(r.n_prompt_committed, 2 * u);
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(r.n_past, 2 * u);

    byte    = 0;
    trig.at = -1;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data() + r.n_past, 64 - r.n_past, &p, out.data(), 6, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(out, want) << "resumed generation differs from an uninterrupted one";
}

TEST_F(Generate, StopsBetweenTokensAndReportsWhatIsInMemory) {
    auto prompt = common::make_prompt(suite_model(), 8, 6);
    struct stopper {
        int      seen = 0;
        int8_t * byte;
        static bool cb(llama_token, void * d) {
            auto * s = static_cast<stopper *>(d);
            if (++s->seen == 3) {
                __atomic_store_n(s->byte, 1, __ATOMIC_RELAXED); // the host's cancel, between tokens
            }
            return true;
        }
    };
    auto s = fixtures::make_hooked(suite_model(), 16, 16);
    int8_t byte = 0;
    stopper st{0, &byte};
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.byte          = &byte;
    p.n_predict     = 10;
    p.on_token      = stopper::cb;
    p.on_token_data = &st;
    std::vector<llama_token> out(10, -1);
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 8, &p, out.data(), 10, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_generated, 3);
    EXPECT_EQ(r.n_generated_committed, 2) << "the third token was sampled but not decoded";
    EXPECT_EQ(r.n_past, 10);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(s.ctx.get()), 0), 9);
}

TEST_F(Generate, ClearErrors) {
    auto s = fixtures::make_hooked(suite_model(), 16, 16);
    auto prompt = common::make_prompt(suite_model(), 4);
    llama_token out[4];
    llama_cancel_generate_result r;
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.n_predict = 4;
    EXPECT_EQ(llama_cancel_generate(nullptr, prompt.data(), 4, &p, out, 4, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("ctx is NULL"), std::string::npos);
    EXPECT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 0, &p, out, 4, &r), LLAMA_CANCEL_ERROR)
        << "no prompt on a context with no logits yet";
    EXPECT_NE(std::string(r.message).find("no logits to continue from"), std::string::npos) << r.message;
    EXPECT_EQ(llama_cancel_generate(s.ctx.get(), nullptr, 3, &p, out, 4, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("no array"), std::string::npos) << r.message;
    EXPECT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 4, &p, out, 2, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("fewer than n_predict"), std::string::npos);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_ERROR);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(s.ctx.get()), 0), -1);
}

// An embeddings-only context has no logits to sample from (issue 22): the token loop says so with
// ERROR and a message instead of reading through a NULL pointer. The prompt is decoded first (its
// tokens stay in memory, as for any decode), nothing is generated.
TEST_F(Generate, EmbeddingsOnlyContextIsAClearError) {
    auto prompt = common::make_prompt(suite_model(), 8, 7);
    // Embeddings pooled per sequence: llama.cpp then keeps no logits.
    auto embeddings_context = [] {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx        = 64;
        cp.n_batch      = 16;
        cp.n_ubatch     = 16;
        cp.n_threads    = 2;
        cp.embeddings   = true;
        cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
        return common::context_ptr(llama_init_from_model(suite_model(), cp));
    };
    {
        // The premise: llama.cpp gives such a context no logits.
        auto plain = embeddings_context();
        ASSERT_NE(plain, nullptr);
        common::seq_batch b(prompt, 0, 8, 0);
        ASSERT_EQ(llama_decode(plain.get(), b.get()), 0);
        ASSERT_NE(llama_get_embeddings_seq(plain.get(), 0), nullptr);
        ASSERT_EQ(llama_get_logits_ith(plain.get(), -1), nullptr)
            << "this llama.cpp gives a pooled embeddings context logits: the test has no embeddings-only context";
    }
    auto ctx = embeddings_context();
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.n_predict = 4;
    std::vector<llama_token> out(4, -1);
    llama_cancel_generate_result r;
    EXPECT_EQ(llama_cancel_generate(ctx.get(), prompt.data(), 8, &p, out.data(), 4, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_ERROR);
    EXPECT_NE(std::string(r.message).find("no logits"), std::string::npos) << r.message;
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(out, std::vector<llama_token>(4, -1)) << "nothing written to out";
}

// reach: the worst of the call's decodes, as llama_cancel_decode reports each: inside every graph
// with a hook bound, the CPU's nodes alone without one; on OK and on CANCELLED alike.
TEST_F(Generate, TheResultSaysWhereTheByteWasRead) {
    auto prompt = common::make_prompt(suite_model(), 16, 2);
    auto reach_of = [&](llama_context * ctx, int on_token_stops) {
        struct stopper { // false (a stop) at token `at`; never for 0
            int         at;
            int         calls = 0;
            static bool cb(llama_token, void * data) {
                auto * s = static_cast<stopper *>(data);
                return s->at <= 0 || ++s->calls < s->at;
            }
        } stop{on_token_stops};
        int8_t byte = 0;
        llama_cancel_generate_params p = llama_cancel_generate_default_params();
        p.byte          = &byte;
        p.n_predict     = 4;
        p.on_token      = stopper::cb;
        p.on_token_data = &stop;
        std::vector<llama_token> out(4, -1);
        llama_cancel_generate_result r;
        r.reach = -1;
        const int32_t want = on_token_stops > 0 ? LLAMA_CANCEL_CANCELLED : LLAMA_CANCEL_OK;
        EXPECT_EQ(llama_cancel_generate(ctx, prompt.data(), 16, &p, out.data(), 4, &r), want) << r.message;
        return r.reach;
    };
    for (const int stops : {0, 2}) {
        auto hooked = fixtures::make_hooked(suite_model(), 16, 16);
        EXPECT_EQ(reach_of(hooked.ctx.get(), stops), LLAMA_CANCEL_REACH_GRAPH) << "a hook bound";
        auto plain = fixtures::make_bound_context(suite_model(), nullptr, fixtures::context_options(16, 16));
        EXPECT_EQ(reach_of(plain.get(), stops), LLAMA_CANCEL_REACH_CPU) << "no eval callback: the CPU's nodes only";
    }
}
