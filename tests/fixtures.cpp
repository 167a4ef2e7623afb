#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace fixtures {

std::string env(const char * name);

namespace {
common::model_ptr g_suite_model;
std::string    g_suite_model_path;
// Held by pointer so that its reset frees the models first, then stops the servers in the order
// common::backend_setup declares them.
std::unique_ptr<test_backend_state> g_test_backend;

class backend_environment : public ::testing::Environment {
  public:
    explicit backend_environment(const backend_environment_options & opt) : opt_(opt) {}
    void SetUp() override;
    void TearDown() override { g_test_backend.reset(); }

  private:
    backend_environment_options opt_;
};

void backend_environment::SetUp() {
    const std::string backend = env("LLAMA_CANCEL_BACKEND").empty() && opt_.default_backend != nullptr
                                    ? opt_.default_backend : env("LLAMA_CANCEL_BACKEND");
    const std::string model = env(opt_.model_env);
    ASSERT_FALSE(backend.empty()) << "set LLAMA_CANCEL_BACKEND (vulkan, rpc1, rpc2, rpc1-lan, rpc2-lan, blas)";
    ASSERT_FALSE(model.empty()) << "set " << opt_.model_env << " to " << opt_.model_what;
    g_test_backend = std::make_unique<test_backend_state>();
    test_backend_state & b = *g_test_backend;
    common::quiet_logs();
    ASSERT_TRUE(common::setup_backend(backend, env("LLAMA_CANCEL_RPC_SERVER"), 1, b.setup))
        << "cannot make the " << backend << " setup";
    std::printf("%s: %s\n", backend.c_str(), b.setup.description.c_str());
    b.n_gpu_layers = opt_.n_gpu_layers != nullptr ? opt_.n_gpu_layers(backend) : -1;
    b.model        = b.setup.load(model, b.n_gpu_layers);
    ASSERT_NE(b.model, nullptr) << "cannot load " << model << " on " << backend;
    if (opt_.cpu_reference) {
        b.cpu_model = common::load_model_on(model, {ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)}, 0);
        ASSERT_NE(b.cpu_model, nullptr) << "cannot load " << model << " on the CPU";
    }
    std::printf("%s on %s: recurrent %d, hybrid %d\n", model.c_str(), backend.c_str(),
                llama_model_is_recurrent(b.model.get()), llama_model_is_hybrid(b.model.get()));
    if (opt_.check != nullptr) {
        opt_.check();
    }
}
// In CI (CI=true) a skipped test is a failure, its reason printed: a skip there means the setup
// lacks something the README says CI provides. Appended to every fixtures-linked program's
// listeners before gtest_main runs the tests; it runs after the result printer, so the test shows
// as skipped, then fails with this message.
class ci_skips_fail : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo & info) override {
        const ::testing::TestResult * result = info.result();
        if (result == nullptr || !result->Skipped()) {
            return;
        }
        std::string reason;
        for (int i = 0; i < result->total_part_count(); ++i) {
            if (result->GetTestPartResult(i).skipped()) {
                reason += result->GetTestPartResult(i).message();
            }
        }
        ADD_FAILURE() << "skipped in CI (CI=true), which counts as a failure: " << reason;
    }
};

const bool g_ci_listener = [] {
    if (env("CI") == "true") {
        ::testing::UnitTest::GetInstance()->listeners().Append(new ci_skips_fail);
    }
    return true;
}();
} // namespace

std::string env(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? v : "";
}

llama_model * suite_model() { return g_suite_model.get(); }

const std::string & suite_model_path() { return g_suite_model_path; }

void load_suite_model(const char * var, const char * what) {
    const char * path = std::getenv(var);
    ASSERT_NE(path, nullptr) << "set " << var << " to " << what;
    g_suite_model_path = path;
    common::quiet_logs();
    common::load_backends();
    g_suite_model = common::load_model(g_suite_model_path);
    ASSERT_NE(g_suite_model, nullptr) << "cannot load " << g_suite_model_path;
}

void free_suite_model() { g_suite_model.reset(); }

::testing::Environment * add_backend_environment(const backend_environment_options & opt) {
    return ::testing::AddGlobalTestEnvironment(new backend_environment(opt));
}

const test_backend_state & test_backend() {
    static const test_backend_state none;
    return g_test_backend ? *g_test_backend : none;
}

bool node_trigger::eval_cb(ggml_tensor * t, bool ask, void * data) {
    auto * tr = static_cast<node_trigger *>(data);
    if (tr->record_threads) {
        tr->threads.push_back(std::this_thread::get_id());
    }
    if (ask) {
        ++tr->calls;
        if (std::strcmp(t->name, "result_output") == 0) {
            tr->graph_ends.push_back(tr->calls);
        }
        if (tr->while_grouping) {
            if (tr->calls == tr->at && tr->byte != nullptr) {
                __atomic_store_n(tr->byte, 1, __ATOMIC_RELAXED);
            }
            return false;
        }
        return tr->calls == tr->at;
    }
    if (tr->byte != nullptr) {
        __atomic_store_n(tr->byte, 1, __ATOMIC_RELAXED);
    }
    return true;
}

bool node_trigger::abort_cb(void * data) {
    auto * tr = static_cast<node_trigger *>(data);
    if (tr->record_threads) {
        tr->threads.push_back(std::this_thread::get_id());
    }
    if (++tr->calls == tr->at && tr->byte != nullptr) {
        __atomic_store_n(tr->byte, 1, __ATOMIC_RELAXED);
    }
    return false;
}

void node_trigger::reset() {
    calls = 0;
    at    = -1;
    graph_ends.clear();
    threads.clear();
}

bool gate::cb(void * data) {
    auto * g = static_cast<gate *>(data);
    g->threads.push_back(std::this_thread::get_id());
    if (++g->calls == g->hold_at) {
        g->started = true;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (__atomic_load_n(g->byte, __ATOMIC_RELAXED) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                g->timed_out = true; // released without the store: the test fails on it
                break;
            }
        }
    }
    return false;
}

llama_pos pos_max(llama_context * ctx, llama_seq_id seq) {
    return llama_memory_seq_pos_max(llama_get_memory(ctx), seq);
}

std::vector<uint8_t> seq_state(llama_context * ctx, llama_seq_id seq) {
    std::vector<uint8_t> buf(llama_state_seq_get_size(ctx, seq));
    buf.resize(llama_state_seq_get_data(ctx, buf.data(), buf.size(), seq));
    return buf;
}

double relative_difference(const std::vector<float> & a, const std::vector<float> & b) {
    double d = 0, m = 1e-6;
    for (size_t i = 0; i < a.size(); ++i) {
        d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
        m = std::max(m, std::fabs(static_cast<double>(b[i])));
    }
    return d / m;
}

std::vector<float> plain_last_logits(llama_model * model, const std::vector<llama_token> & prompt, uint32_t n_ubatch) {
    auto ctx = make_bound_context(model, nullptr, context_options(static_cast<uint32_t>(prompt.size()), n_ubatch));
    common::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    return common::last_logits(ctx.get());
}

common::hook_ptr make_hook(node_trigger * trig) {
    return common::make_hook(trig != nullptr ? node_trigger::eval_cb : nullptr, trig);
}

common::context_options context_options(uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq_max,
                                        ggml_backend_sched_eval_callback cb, void * cb_data) {
    common::context_options opt;
    opt.n_batch      = n_batch;
    opt.n_ubatch     = n_ubatch;
    opt.n_seq_max    = n_seq_max;
    opt.cb_eval      = cb;
    opt.cb_eval_data = cb_data;
    return opt;
}

common::context_ptr make_bound_context(llama_model * model, llama_cancel_hook * hook, common::context_options opt) {
    llama_context_params cp = llama_context_default_params();
    cp.cb_eval           = opt.cb_eval;
    cp.cb_eval_user_data   = opt.cb_eval_data;
    cp.abort_callback      = opt.abort_callback;
    cp.abort_callback_data = opt.abort_callback_data;
    if (hook != nullptr && !llama_cancel_hook_bind(hook, &cp)) {
        ADD_FAILURE() << "llama_cancel_hook_bind refused the hook (a cb_eval already set, or the hook bound before)";
    }
    opt.cb_eval      = cp.cb_eval;
    opt.cb_eval_data = cp.cb_eval_user_data;
    return common::make_context(model, opt);
}

common::context_ptr make_backend_context(llama_model * model, llama_cancel_hook * hook, common::context_options opt) {
    opt.offload_kqv = test_backend().offload_kqv();
    return make_bound_context(model, hook, opt);
}

hooked_context make_hooked(llama_model * model, uint32_t n_batch, uint32_t n_ubatch, node_trigger * trig,
                           uint32_t n_seq_max) {
    hooked_context h;
    h.hook = make_hook(trig);
    h.ctx  = make_bound_context(model, h.hook.get(), context_options(n_batch, n_ubatch, n_seq_max));
    return h;
}

} // namespace fixtures
