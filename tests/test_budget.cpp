// The stop-time budget (llama_cancel_decode_params.max_stop_ms) on the CPU, bench-size model: it
// changes how a batch is sliced, never what ends in memory. A recorder bound as the context's
// cb_eval notes the tokens of each llama_decode call, so the reference can decode the same slices
// with plain llama_decode.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using fixtures::suite_model;

constexpr int k_n = 128;

// cb_eval that places no checkpoint and records each graph's token count (its first layer's
// "attn_norm-0" node is as wide as the ubatch).
struct slice_recorder {
    std::vector<int> slices;
    static bool cb(ggml_tensor * t, bool ask, void * data) {
        if (ask && std::strcmp(t->name, "attn_norm-0") == 0) {
            static_cast<slice_recorder *>(data)->slices.push_back(static_cast<int>(t->ne[1]));
        }
        return false;
    }
};

class Budget : public fixtures::model_suite<Budget> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_BENCH_MODEL";
    static constexpr const char * model_what = "the bench model of scripts/make_model.py";

  protected:
    static common::context_ptr context(slice_recorder * rec) {
        const ggml_backend_sched_eval_callback cb = rec != nullptr ? slice_recorder::cb : nullptr;
        return fixtures::make_bound_context(suite_model(), nullptr, fixtures::context_options(k_n, k_n, 1, cb, rec));
    }

    // Plain llama_decode of prompt[first...] in the given slices; last logits.
    static std::vector<float> plain(const std::vector<llama_token> & prompt, const std::vector<int> & slices,
                                    llama_context * ctx, int first = 0) {
        int a = first;
        for (int n : slices) {
            common::seq_batch b(prompt, a, n, a);
            EXPECT_EQ(llama_decode(ctx, b.get()), 0);
            a += n;
        }
        return common::last_logits(ctx);
    }

    static llama_cancel_decode_params params(int8_t * byte, float budget_ms) {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte        = byte;
        p.max_stop_ms = budget_ms;
        return p;
    }
};

} // namespace

TEST_F(Budget, SlicesTheBatchAndLeavesWhatPlainDecodesOfThoseSlicesLeave) {
    auto prompt = common::make_prompt(suite_model(), k_n, 31);
    slice_recorder rec;
    auto ctx = context(&rec);
    int8_t byte = 0;
    const llama_cancel_decode_params p = params(&byte, 5.0f);
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    std::printf("slices:");
    for (int n : rec.slices) {
        std::printf(" %d", n);
    }
    std::printf("; longest node %.3f ms\n", r.longest_node_ms);
    ASSERT_GT(rec.slices.size(), 1u) << "the first slice probes, so a 128-token batch takes several";
    EXPECT_EQ(static_cast<int>(rec.slices.size()), r.n_decode_calls);
    int sum = 0;
    for (int n : rec.slices) {
        sum += n;
    }
    EXPECT_EQ(sum, k_n);
    EXPECT_EQ(rec.slices.front(), 16) << "the first slice probes with 16 tokens";
    EXPECT_GT(r.longest_node_ms, 0.0f);
    EXPECT_EQ(r.output_base, k_n - rec.slices.back());

    auto ref = context(nullptr);
    const auto want = plain(prompt, rec.slices, ref.get());
    const float * got = llama_cancel_get_logits_ith(ctx.get(), &r, k_n - 1);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::memcmp(got, want.data(), want.size() * sizeof(float)), 0) << "budget changed the logits";
}

TEST_F(Budget, CancelKeepsWholeSlicesAndResumesIdentically) {
    auto prompt = common::make_prompt(suite_model(), k_n, 32);
    slice_recorder rec;
    auto ctx = context(&rec);
    int8_t byte = 0;
    fixtures::node_trigger trig;
    trig.byte = &byte;
    trig.at   = 200; // a few slices in: the bench model's graphs have well over 100 nodes
    llama_cancel_decode_params p = params(&byte, 5.0f);
    p.abort_callback      = fixtures::node_trigger::abort_cb;
    p.abort_callback_data = &trig;
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    ASSERT_GE(rec.slices.size(), 2u);
    int finished = 0;
    for (size_t i = 0; i + 1 < rec.slices.size(); ++i) {
        finished += rec.slices[i];
    }
    EXPECT_EQ(r.n_committed, finished) << "every finished slice, not the stopped one";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), r.n_committed - 1);

    const std::vector<int> before(rec.slices.begin(), rec.slices.end() - 1);
    rec.slices.clear();
    byte    = 0;
    trig.at = -1;
    common::seq_batch rest(prompt, r.n_committed, k_n - r.n_committed, r.n_committed);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    std::vector<int> all = before;
    all.insert(all.end(), rec.slices.begin(), rec.slices.end());
    auto ref = context(nullptr);
    const auto want = plain(prompt, all, ref.get());
    const auto got  = common::last_logits(ctx.get());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "resumed logits differ";
}

TEST_F(Budget, UnmeetableBudgetStillDecodesAndSaysSo) {
    auto prompt = common::make_prompt(suite_model(), 32, 33);
    auto ctx = context(nullptr);
    const llama_cancel_decode_params p = params(nullptr, 1e-4f);
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, 32, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_TRUE(r.budget_missed);
    EXPECT_GT(r.longest_node_ms, 1e-4f);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), 31);
}

TEST_F(Budget, NoBudgetMeansOneCallAndNothingMeasured) {
    auto prompt = common::make_prompt(suite_model(), 64, 34);
    auto ctx = context(nullptr);
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, 64, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), nullptr, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_decode_calls, 1);
    EXPECT_FALSE(r.budget_missed);
    EXPECT_EQ(r.longest_node_ms, 0.0f);
}

TEST_F(Budget, NegativeOrNanBudgetIsAClearErrorAndLosesNothing) {
    auto prompt = common::make_prompt(suite_model(), 16, 35);
    auto ctx = context(nullptr);
    for (float bad : {-1.0f, std::nanf("")}) {
        const llama_cancel_decode_params p = params(nullptr, bad);
        llama_cancel_decode_result r;
        common::seq_batch b(prompt, 0, 16, 0);
        EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find("max_stop_ms"), std::string::npos) << r.message;
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), -1);
    }
}

// With a hook, the budget also caps the checkpoint interval for the call, and only for it: read from
// the hook's statistics by its chained callback while each graph runs (no checkpoint is counted, so
// no timing decides the result; how many checkpoints that makes is a figure of the benchmark).
namespace {
struct interval_watch {
    llama_cancel_hook * hook  = nullptr;
    int                 asks  = 0;
    double              low   = 1e30;
    double              high  = 0.0;

    static bool cb(ggml_tensor *, bool ask, void * data) {
        auto * w = static_cast<interval_watch *>(data);
        if (ask && ++w->asks > 8) { // past the first nodes, where the call's cap is in force
            const double ms = llama_cancel_hook_get_stats(w->hook).interval_ms;
            w->low  = std::min(w->low, ms);
            w->high = std::max(w->high, ms);
        }
        return false;
    }
    void reset() { asks = 0, low = 1e30, high = 0.0; }
};
} // namespace

TEST_F(Budget, HookIntervalFollowsTheBudgetDuringTheCall) {
    auto prompt = common::make_prompt(suite_model(), k_n, 36);
    interval_watch watch;
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.interval_ms = 50.0;
    hp.chain       = interval_watch::cb;
    hp.chain_data  = &watch;
    common::hook_ptr hook(llama_cancel_hook_init(&hp));
    ASSERT_NE(hook, nullptr);
    watch.hook = hook.get();
    auto ctx = fixtures::make_bound_context(suite_model(), hook.get(), fixtures::context_options(k_n, k_n));
    auto decode_with = [&](float budget_ms) {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        watch.reset();
        llama_cancel_decode_params p = params(nullptr, budget_ms);
        p.hook = hook.get();
        llama_cancel_decode_result r;
        common::seq_batch b(prompt, 0, k_n, 0);
        EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
        EXPECT_GT(watch.asks, 8) << "the chained callback was asked about the graph's nodes";
    };
    decode_with(2.0f);
    std::printf("interval during a 2 ms budget: %.3f..%.3f ms\n", watch.low, watch.high);
    EXPECT_LE(watch.high, 2.0) << "a 2 ms budget caps the 50 ms interval during the call";
    decode_with(0.0f);
    std::printf("interval after it: %.3f..%.3f ms\n", watch.low, watch.high);
    EXPECT_GT(watch.low, 2.0) << "the hook's own interval is back after the call";
}
