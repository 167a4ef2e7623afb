// The token loop (llama_cancel_generate) and the cancellable model load, on the tiny model (CPU).
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string g_path;
llama_model * g_model = nullptr;



struct setup {
    lcs::hook_ptr    hook;
    lcs::context_ptr ctx;
};

setup make(uint32_t n_batch, lcs::node_trigger * trig = nullptr) {
    setup s;
    s.hook = lcs::make_hook(trig != nullptr ? lcs::node_trigger::eval_cb : nullptr, trig);
    lcs::context_options opt;
    opt.n_batch = opt.n_ubatch = n_batch;
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = s.hook.get();
    s.ctx = lcs::make_context(g_model, opt);
    return s;
}

// Greedy reference: plain llama_decode of the whole prompt, then token by token.
std::vector<llama_token> reference(const std::vector<llama_token> & prompt, int n_predict) {
    lcs::context_options opt;
    opt.n_batch = opt.n_ubatch = static_cast<uint32_t>(prompt.size());
    auto ctx = lcs::make_context(g_model, opt);
    lcs::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    std::vector<llama_token> out;
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(g_model));
    for (int i = 0; i < n_predict; ++i) {
        const float * l = llama_get_logits_ith(ctx.get(), -1);
        const llama_token t = static_cast<llama_token>(std::max_element(l, l + n_vocab) - l);
        out.push_back(t);
        std::vector<llama_token> one{t};
        lcs::seq_batch nb(one, 0, 1, static_cast<llama_pos>(prompt.size()) + i);
        EXPECT_EQ(llama_decode(ctx.get(), nb.get()), 0);
    }
    return out;
}

} // namespace

class Generate : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        const char * path = std::getenv("LLAMA_CANCEL_TINY_MODEL");
        ASSERT_NE(path, nullptr);
        g_path = path;
        lcs::quiet_logs();
        lcs::load_backends();
        g_model = lcs::load_model(g_path).release();
        ASSERT_NE(g_model, nullptr);
    }
    static void TearDownTestSuite() { llama_model_free(g_model); }
};

TEST_F(Generate, GreedyMatchesPlainLoopAndLeavesContextReady) {
    auto prompt = lcs::make_prompt(g_model, 40, 2);
    const auto want = reference(prompt, 8);
    auto s = make(16);
    int8_t flag = 0;
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.flag      = &flag;
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
    auto prompt = lcs::make_prompt(g_model, 24, 5);
    const auto want = reference(prompt, 8);
    auto s = make(16);
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
    auto prompt = lcs::make_prompt(g_model, 64, 4);
    const auto want = reference(prompt, 6);

    lcs::node_trigger count;
    int8_t unused = 0;
    count.flag = &unused;
    {
        auto c = make(u, &count);
        lcs::seq_batch b(prompt, 0, u, 0);
        ASSERT_EQ(llama_decode(c.ctx.get(), b.get()), 0);
    }
    lcs::node_trigger trig;
    int8_t flag = 0;
    trig.flag = &flag;
    trig.at   = 2 * count.calls + count.calls / 2; // inside the third prefill ubatch
    auto s = make(u, &trig);
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.flag      = &flag;
    p.n_predict = 6;
    p.hook      = s.hook.get();
    std::vector<llama_token> out(6, -1);
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data(), 64, &p, out.data(), 6, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_CANCELLED);
    EXPECT_EQ(r.n_prompt_committed, 2 * u);
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(r.n_past, 2 * u);

    flag    = 0;
    trig.at = -1;
    ASSERT_EQ(llama_cancel_generate(s.ctx.get(), prompt.data() + r.n_past, 64 - r.n_past, &p, out.data(), 6, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(out, want) << "resumed generation differs from an uninterrupted one";
}

TEST_F(Generate, StopsBetweenTokensAndReportsWhatIsInMemory) {
    auto prompt = lcs::make_prompt(g_model, 8, 6);
    struct stopper {
        int      seen = 0;
        int8_t * flag;
        static bool cb(llama_token, void * d) {
            auto * s = static_cast<stopper *>(d);
            if (++s->seen == 3) {
                __atomic_store_n(s->flag, 1, __ATOMIC_RELAXED); // the host's cancel, between tokens
            }
            return true;
        }
    };
    auto s = make(16);
    int8_t flag = 0;
    stopper st{0, &flag};
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.flag          = &flag;
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
    auto s = make(16);
    auto prompt = lcs::make_prompt(g_model, 4);
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

class ModelLoad : public Generate {};

TEST_F(ModelLoad, LoadsAndReportsOk) {
    int8_t flag = 0;
    llama_cancel_load_result r;
    llama_model * m = llama_cancel_model_load(g_path.c_str(), llama_model_default_params(), &flag, &r);
    ASSERT_NE(m, nullptr) << r.message;
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    llama_model_free(m);
}

TEST_F(ModelLoad, BytePresetCancelsWithoutOpening) {
    int8_t flag = 1;
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load("/nonexistent.gguf", llama_model_default_params(), &flag, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
}

TEST_F(ModelLoad, CancelDuringLoadReturnsNullWithReason) {
    struct first_call {
        int8_t * flag;
        int      calls = 0;
        static bool cb(float, void * d) {
            auto * f = static_cast<first_call *>(d);
            ++f->calls;
            __atomic_store_n(f->flag, 1, __ATOMIC_RELAXED); // another thread's store, as it were
            return true;
        }
    };
    int8_t flag = 0;
    first_call fc{&flag};
    llama_model_params mp = llama_model_default_params();
    mp.progress_callback           = first_call::cb;
    mp.progress_callback_user_data = &fc;
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(g_path.c_str(), mp, &flag, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_NE(std::string(r.message).find("cancelled"), std::string::npos);
    EXPECT_GE(fc.calls, 1) << "the caller's progress callback is chained";
    // And the same file loads afterwards.
    flag = 0;
    llama_model * m = llama_cancel_model_load(g_path.c_str(), llama_model_default_params(), &flag, &r);
    EXPECT_NE(m, nullptr);
    llama_model_free(m);
}

TEST_F(ModelLoad, BadFilesAreClearErrors) {
    llama_cancel_load_result r;
    const auto mp = llama_model_default_params();
    EXPECT_EQ(llama_cancel_model_load(nullptr, mp, nullptr, &r), nullptr);
    EXPECT_NE(std::string(r.message).find("NULL"), std::string::npos);

    EXPECT_EQ(llama_cancel_model_load("/nonexistent/model.gguf", mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("cannot open"), std::string::npos) << r.message;

    const std::string dir = ::testing::TempDir();
    const std::string text = dir + "/not-a-model.gguf";
    std::ofstream(text) << "hello, I am not a model\n";
    EXPECT_EQ(llama_cancel_model_load(text.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_NE(std::string(r.message).find("not a GGUF file"), std::string::npos) << r.message;

    std::ifstream in(g_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = dir + "/truncated.gguf";
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
    EXPECT_EQ(llama_cancel_model_load(cut.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("could not load"), std::string::npos) << r.message;

    std::string corrupt = bytes;
    for (size_t i = 8; i < 64 && i < corrupt.size(); ++i) {
        corrupt[i] = static_cast<char>(0xff); // tensor and metadata counts become absurd
    }
    const std::string bad = dir + "/corrupt.gguf";
    std::ofstream(bad, std::ios::binary) << corrupt;
    EXPECT_EQ(llama_cancel_model_load(bad.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR) << r.message;
}
