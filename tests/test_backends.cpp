// Cancel on GPU-API, RPC and BLAS backends through eval-callback checkpoints (llama_cancel_hook).
//
// LLAMA_CANCEL_BACKEND picks the setup: vulkan (Mesa llvmpipe, all layers offloaded), rpc1 / rpc2
// (one or two ggml-rpc-server processes started here, layers split across them and the local
// CPU), blas (Debian's BLAS backend beside the CPU). Stops are triggered at a chosen node through
// the hook's chained callback, so no test depends on timing.
#include "support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string env(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? v : "";
}

struct fixture {
    std::string                              backend;
    lcs::backend_setup                       setup;
    lcs::model_ptr model;     // on the backend under test
    lcs::model_ptr cpu_model; // reference, CPU backend
};
fixture * g = nullptr;


struct hooked_context {
    lcs::hook_ptr hook;
    lcs::context_ptr ctx;
};

hooked_context make(llama_model * model, uint32_t n_batch, uint32_t n_ubatch, lcs::node_trigger * trig = nullptr) {
    hooked_context h;
    h.hook = lcs::make_hook(trig != nullptr ? lcs::node_trigger::eval_cb : nullptr, trig);
    lcs::context_options opt;
    opt.n_batch  = n_batch;
    opt.n_ubatch = n_ubatch;
    // cb_eval goes through llama_cancel_hook_bind, as a host would do it.
    llama_context_params cp = llama_context_default_params();
    llama_cancel_hook_bind(h.hook.get(), &cp);
    opt.cb_eval      = cp.cb_eval;
    opt.cb_eval_data = cp.cb_eval_user_data;
    h.ctx = lcs::make_context(model, opt);
    return h;
}

llama_pos pos_max(llama_context * ctx) {
    return llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
}

// Largest absolute difference relative to the reference's largest magnitude.
double rel_diff(const std::vector<float> & a, const std::vector<float> & b) {
    double d = 0, m = 1e-6;
    for (size_t i = 0; i < a.size(); ++i) {
        d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
        m = std::max(m, std::fabs(static_cast<double>(b[i])));
    }
    return d / m;
}

// Non-deterministic or reduced-precision backends agree with the CPU within this (relative to the
// largest logit); measured differences are printed.
constexpr double k_tolerance = 2e-2;

} // namespace

class Backend : public ::testing::Test {
  protected:
    static std::vector<float> decode_plain(llama_model * model, const std::vector<llama_token> & prompt,
                                           uint32_t n_ubatch) {
        lcs::context_options opt;
        opt.n_batch  = static_cast<uint32_t>(prompt.size());
        opt.n_ubatch = n_ubatch;
        auto ctx = lcs::make_context(model, opt);
        lcs::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
        EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
        return lcs::last_logits(ctx.get());
    }
};

TEST_F(Backend, ByteAtZeroLeavesResultsUnchanged) {
    const int n = 128;
    auto prompt = lcs::make_prompt(g->model.get(), n, 3);
    const auto plain = decode_plain(g->model.get(), prompt, 64);
    const auto cpu   = decode_plain(g->cpu_model.get(), prompt, 64);

    auto h = make(g->model.get(), n, 64);
    ASSERT_NE(h.ctx, nullptr);
    int8_t flag = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = &flag;
    p.hook = h.hook.get();
    llama_cancel_decode_result r;
    lcs::seq_batch b(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_committed, n);
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1);
    const auto got = lcs::last_logits(h.ctx.get());
    ASSERT_EQ(got.size(), plain.size());
    EXPECT_EQ(std::memcmp(got.data(), plain.data(), got.size() * sizeof(float)), 0)
        << "checkpoints changed the " << g->backend << " result";
    const double d = rel_diff(got, cpu);
    std::printf("[%s] relative difference to the CPU backend: %.3g\n", g->backend.c_str(), d);
    EXPECT_LE(d, k_tolerance);
    const auto stats = llama_cancel_hook_get_stats(h.hook.get());
    EXPECT_GE(stats.checkpoints, 1u) << "the work budget placed no checkpoint";
    EXPECT_FALSE(stats.stopped);
    EXPECT_EQ(llama_cancel_hook_get_flag(h.hook.get()), nullptr) << "the hook's own byte is restored";
}

// Upstream's behaviour that the library guards against: a graph stopped by the eval callback
// still makes llama_decode return 0.
TEST_F(Backend, PlainDecodeReportsStoppedGraphAsSuccess) {
    const int n = 64;
    auto prompt = lcs::make_prompt(g->model.get(), n, 5);
    lcs::node_trigger trig;
    int8_t flag = 0;
    trig.flag = &flag;
    trig.at   = 10;
    auto h = make(g->model.get(), n, n, &trig);
    llama_cancel_hook_set_flag(h.hook.get(), &flag);
    lcs::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_decode(h.ctx.get(), b.get()), 0);
    EXPECT_TRUE(llama_cancel_hook_stopped(h.hook.get())) << "the hook saw the byte and stopped the graph";
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1) << "and llama_decode kept the half-computed cells";
}

TEST_F(Backend, CancelMidGraphKeepsOnlyWholeUbatchesAndResumesIdentically) {
    const int n = 128, u = 32;
    auto prompt = lcs::make_prompt(g->model.get(), n, 9);
    const auto want = decode_plain(g->model.get(), prompt, u);

    // Nodes asked per ubatch, counted on an uninterrupted run.
    lcs::node_trigger count;
    int8_t unused = 0;
    count.flag = &unused;
    {
        auto h = make(g->model.get(), u, u, &count);
        lcs::seq_batch b(prompt, 0, u, 0);
        ASSERT_EQ(llama_decode(h.ctx.get(), b.get()), 0);
    }
    const int per_ubatch = count.calls;
    ASSERT_GT(per_ubatch, 8);

    lcs::node_trigger trig;
    int8_t flag = 0;
    trig.flag = &flag;
    trig.at   = per_ubatch + per_ubatch / 2; // inside the second ubatch's graph
    auto h = make(g->model.get(), n, u, &trig);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag           = &flag;
    p.hook           = h.hook.get();
    p.sliced_outputs = true; // the last logits are read by negative index
    llama_cancel_decode_result r;
    int32_t per_seq[1] = {-1};
    lcs::seq_batch b(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, per_seq, 1), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, u);
    EXPECT_EQ(per_seq[0], u);
    EXPECT_EQ(pos_max(h.ctx.get()), u - 1) << "the stopped ubatch's cells are removed";
    EXPECT_TRUE(llama_cancel_hook_get_stats(h.hook.get()).stopped);

    flag = 0;
    trig.at = -1;
    lcs::seq_batch rest(prompt, r.n_committed, n - r.n_committed, r.n_committed);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), rest.get(), &p, &r, nullptr, 0), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1);
    const auto got = lcs::last_logits(h.ctx.get());
    ASSERT_EQ(got.size(), want.size());
    const double d = rel_diff(got, want);
    std::printf("[%s] resumed vs uninterrupted relative difference: %.3g\n", g->backend.c_str(), d);
    if (g->backend == "vulkan" || g->backend == "blas") {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "resume not bit-identical";
    } else {
        EXPECT_LE(d, k_tolerance);
    }
}

TEST_F(Backend, ByteSetWhileGroupingStopsAtOnce) {
    const int n = 64;
    auto prompt = lcs::make_prompt(g->model.get(), n, 11);
    // The trigger stores the byte at its first ask without asking: the hook must checkpoint at the
    // very next node instead of waiting for its work budget.
    struct early {
        int8_t * flag;
        int      asks = 0;
        static bool cb(ggml_tensor *, bool ask, void * data) {
            auto * e = static_cast<early *>(data);
            if (ask && ++e->asks == 3) {
                __atomic_store_n(e->flag, 1, __ATOMIC_RELAXED);
            }
            return !ask;
        }
    };
    int8_t flag = 0;
    early e{&flag};
    lcs::hook_ptr hook = lcs::make_hook(early::cb, &e);
    lcs::context_options opt;
    opt.n_batch = opt.n_ubatch = n;
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = hook.get();
    auto ctx = lcs::make_context(g->model.get(), opt);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = &flag;
    p.hook = hook.get();
    lcs::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr, 0), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(pos_max(ctx.get()), -1);
    EXPECT_LE(e.asks, 40) << "the graph went on for " << e.asks << " asks after the byte was set";
}

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    fixture s;
    g = &s;
    s.backend = env("LLAMA_CANCEL_BACKEND");
    const std::string model = env("LLAMA_CANCEL_SMALL_MODEL");
    if (s.backend.empty() || model.empty()) {
        std::fprintf(stderr, "set LLAMA_CANCEL_BACKEND (vulkan, rpc1, rpc2, blas) and LLAMA_CANCEL_SMALL_MODEL\n");
        return 2;
    }
    lcs::quiet_logs();
    if (!lcs::setup_backend(s.backend, env("LLAMA_CANCEL_RPC_SERVER"), 1, s.setup)) {
        return 1;
    }
    std::printf("%s: %s\n", s.backend.c_str(), s.setup.description.c_str());
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    // Vulkan: every layer offloaded; RPC: 3 of 4 layers across the servers, the last layer and the
    // output on the local CPU.
    s.model     = s.setup.load(model, s.backend == "vulkan" ? -1 : 3);
    s.cpu_model = lcs::load_model_on(model, {cpu}, 0);
    if (!s.model || !s.cpu_model) {
        std::fprintf(stderr, "cannot load %s on %s\n", model.c_str(), s.backend.c_str());
        return 1;
    }
    const int rc = RUN_ALL_TESTS();
    s.model.reset();
    s.cpu_model.reset();
    return rc;
}
