// The registry rule (src/checkpoints/abort_reach.h): inside a llama_cancel_decode call, the eval callbacks place
// no checkpoint on nodes of a backend whose registry offers "ggml_backend_set_abort_callback" (that
// backend stops on the call's abort callback by itself) and keep them everywhere else.
//
// - The real registries: what each loaded one answers (upstream ggml: only the CPU offers it).
// - abort_reach with a test double for the registry question: nodes in buffers of a registry that
//   "takes" the callback need no checkpoint, the question is asked once per buffer type, and host
//   memory of another registry (Vulkan's pinned buffers) does not count as stopping.
// - End to end with a hook bound, on the setup in LLAMA_CANCEL_BACKEND: cpu (0 checkpoints, yet a
//   byte stored mid-decode stops it with exact memory), blas (Debian's ggml-blas computes into the
//   CPU buffer type, so its nodes count as the CPU's), vulkan (llvmpipe: checkpoints placed).
//   tests/platforms.cmake runs each setup's tests through --gtest_filter.
//
// LLAMA_CANCEL_SMALL_MODEL: the model; LLAMA_CANCEL_EXPECT_REGISTRIES: the registries (besides the
// CPU) this build must find, comma-separated, so that a missing module fails instead of skipping.
#include "checkpoints/abort_reach.h"
#include "llama-cancel.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "llama.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using llama_cancel::abort_reach;
using llama_cancel::registry_takes_abort_callback;

std::string env(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? v : "";
}

// What every registry answered when all of ggml's modules were loaded, before the setup unloaded
// those it does not use.
std::map<std::string, bool> g_registry_answers;
llama_model *               g_model = nullptr;
std::string                 g_setup;

// Loads every backend module, records the registries' answers, keeps the setup's backends only
// (a stray BLAS or Vulkan module would take nodes from the CPU), and loads the model on them.
class setup_environment : public ::testing::Environment {
  public:
    void SetUp() override {
        g_setup = env("LLAMA_CANCEL_BACKEND");
        ASSERT_TRUE(g_setup == "cpu" || g_setup == "blas" || g_setup == "vulkan")
            << "set LLAMA_CANCEL_BACKEND to cpu, blas or vulkan";
        llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
        ggml_backend_load_all();
        for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
            ggml_backend_reg_t reg = ggml_backend_reg_get(i);
            g_registry_answers[ggml_backend_reg_name(reg)] = registry_takes_abort_callback(reg);
        }
        const std::map<std::string, bool> keep = {{"BLAS", g_setup == "blas"}, {"Vulkan", g_setup == "vulkan"}};
        for (const char * name : {"BLAS", "Vulkan", "RPC"}) {
            ggml_backend_reg_t reg = ggml_backend_reg_by_name(name);
            if (reg != nullptr && !(keep.count(name) && keep.at(name))) {
                ggml_backend_unload(reg);
            }
        }
        std::vector<ggml_backend_dev_t> devices;
        if (g_setup == "vulkan") {
            ggml_backend_dev_t dev = ggml_backend_dev_by_name("Vulkan0");
            ASSERT_NE(dev, nullptr) << "no Vulkan0 device (GGML_VK_VISIBLE_DEVICES=0, mesa-vulkan-drivers)";
            devices.push_back(dev);
        }
        devices.push_back(nullptr);
        llama_model_params mp = llama_model_default_params();
        mp.devices            = devices.data();
        mp.n_gpu_layers       = g_setup == "vulkan" ? -1 : 0;
        const std::string path = env("LLAMA_CANCEL_SMALL_MODEL");
        ASSERT_FALSE(path.empty()) << "set LLAMA_CANCEL_SMALL_MODEL to the tests' small model";
        g_model = llama_model_load_from_file(path.c_str(), mp);
        ASSERT_NE(g_model, nullptr) << path;
    }
    void TearDown() override { llama_model_free(g_model); }
};

const auto * const g_environment = ::testing::AddGlobalTestEnvironment(new setup_environment);

//
// The real registries
//

TEST(Registries, OnlyTheCpuOffersTheAbortCallback) {
    ASSERT_TRUE(g_registry_answers.count("CPU"));
    EXPECT_TRUE(g_registry_answers.at("CPU")) << "the CPU registry must offer ggml_backend_set_abort_callback";
    std::stringstream expected(env("LLAMA_CANCEL_EXPECT_REGISTRIES"));
    for (std::string name; std::getline(expected, name, ',');) {
        EXPECT_TRUE(g_registry_answers.count(name)) << "registry " << name << " was not loaded";
    }
    for (const auto & [name, takes] : g_registry_answers) {
        std::printf("registry %-8s offers ggml_backend_set_abort_callback: %s\n", name.c_str(), takes ? "yes" : "no");
        if (name != "CPU") {
            EXPECT_FALSE(takes) << name << " now offers the abort callback: its nodes lose their checkpoints";
        }
    }
}

//
// abort_reach with a test double for the registry question
//

// The double: claims that `g_claimed` takes the abort callback, and counts the questions.
ggml_backend_reg_t g_claimed = nullptr;
int                g_asked   = 0;
bool               claims_registry(ggml_backend_reg_t reg) {
    ++g_asked;
    return reg != nullptr && reg == g_claimed;
}

// `n` small tensors allocated in one buffer of `buft` (freed with the object).
struct tensors_in {
    ggml_context *              ctx    = nullptr;
    ggml_backend_buffer_t       buffer = nullptr;
    std::vector<ggml_tensor *>  list;

    tensors_in(ggml_backend_buffer_type_t buft, int n) {
        ggml_init_params ip = {static_cast<size_t>(n + 1) * ggml_tensor_overhead(), nullptr, true};
        ctx                 = ggml_init(ip);
        for (int i = 0; i < n; ++i) {
            list.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64));
        }
        buffer = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    }
    ~tensors_in() {
        ggml_backend_buffer_free(buffer);
        ggml_free(ctx);
    }
};

ggml_backend_buffer_type_t cpu_buft() {
    return ggml_backend_dev_buffer_type(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
}

TEST(AbortReachDouble, ClaimedRegistryNeedsNoCheckpointAskedOncePerBufferType) {
    tensors_in cpu(cpu_buft(), 3);
    ASSERT_NE(cpu.buffer, nullptr);
    g_claimed = ggml_backend_reg_by_name("CPU");
    g_asked   = 0;
    abort_reach reach(claims_registry);
    for (int round = 0; round < 2; ++round) {
        for (ggml_tensor * t : cpu.list) {
            EXPECT_TRUE(reach.stops_on_abort(t));
        }
    }
    EXPECT_EQ(g_asked, 1) << "asked once for the one buffer type";

    g_claimed = nullptr; // a registry that does not take it: every node keeps its checkpoint
    g_asked   = 0;
    abort_reach none(claims_registry);
    for (ggml_tensor * t : cpu.list) {
        EXPECT_FALSE(none.stops_on_abort(t));
    }
    EXPECT_EQ(g_asked, 1);
}

TEST(AbortReachDouble, NodeWithoutBufferKeepsItsCheckpointUnasked) {
    ggml_init_params ip  = {2 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    ggml_tensor *    t   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 64);
    g_claimed            = ggml_backend_reg_by_name("CPU");
    g_asked              = 0;
    abort_reach reach(claims_registry);
    EXPECT_FALSE(reach.stops_on_abort(t));
    EXPECT_EQ(g_asked, 0);
    ggml_free(ctx);
}

// Vulkan's buffers, its pinned host buffers included (host memory of a registry without the
// callback), next to the CPU's: the answer follows the buffer type's registry, once per type.
TEST(AbortReachDouble, HostMemoryOfAnotherRegistryIsNotTheCpus) {
    ASSERT_EQ(g_setup, "vulkan") << "registered for the vulkan setup only (tests/platforms.cmake)";
    ggml_backend_dev_t         vk   = ggml_backend_dev_by_name("Vulkan0");
    ggml_backend_buffer_type_t host = ggml_backend_dev_host_buffer_type(vk);
    ASSERT_NE(host, nullptr);
    ASSERT_TRUE(ggml_backend_buft_is_host(host));
    tensors_in device(ggml_backend_dev_buffer_type(vk), 2);
    tensors_in pinned(host, 2);
    tensors_in cpu(cpu_buft(), 2);
    ASSERT_TRUE(device.buffer && pinned.buffer && cpu.buffer);

    abort_reach real;
    for (ggml_tensor * t : {device.list[0], pinned.list[0], pinned.list[1]}) {
        EXPECT_FALSE(real.stops_on_abort(t)) << ggml_backend_buft_name(ggml_backend_buffer_get_type(t->buffer));
    }
    EXPECT_TRUE(real.stops_on_abort(cpu.list[0]));

    g_claimed = ggml_backend_dev_backend_reg(vk);
    g_asked   = 0;
    abort_reach reach(claims_registry);
    for (int round = 0; round < 2; ++round) {
        for (const tensors_in * in : {&device, &pinned, &cpu}) {
            for (ggml_tensor * t : in->list) {
                EXPECT_EQ(reach.stops_on_abort(t), in != &cpu);
            }
        }
    }
    EXPECT_EQ(g_asked, 3) << "once per buffer type";
}

// Debian's ggml-blas: its device computes into the CPU buffer type (upstream's ggml-blas.cpp does
// the same), so the nodes it computes sit in CPU buffers and count as the CPU's. Nothing but the
// CPU backend's abort check at the next CPU node stops a BLAS split.
TEST(AbortReachDouble, BlasComputesIntoTheCpuBufferType) {
    ASSERT_EQ(g_setup, "blas") << "registered for the blas setup only (tests/platforms.cmake)";
    ggml_backend_dev_t blas = ggml_backend_dev_by_name("BLAS");
    ASSERT_NE(blas, nullptr);
    EXPECT_EQ(ggml_backend_dev_buffer_type(blas), cpu_buft())
        << "ggml-blas has its own buffer type now: " << ggml_backend_buft_name(ggml_backend_dev_buffer_type(blas));
    EXPECT_FALSE(registry_takes_abort_callback(ggml_backend_dev_backend_reg(blas)));
}

//
// End to end: a hook bound, llama_cancel_decode on the setup
//

constexpr int k_tokens = 128;
constexpr int k_ubatch = 32; // BLAS takes products of 32 rows and more

struct context_deleter {
    void operator()(llama_context * c) const { llama_free(c); }
};
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

context_ptr make_context(llama_cancel_hook * hook) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx                = 256;
    cp.n_batch              = k_tokens;
    cp.n_ubatch             = k_ubatch;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.offload_kqv                    = g_setup == "vulkan";
    if (hook != nullptr) {
        EXPECT_TRUE(llama_cancel_hook_bind(hook, &cp));
    }
    return context_ptr(llama_init_from_model(g_model, cp));
}

// The first `n` tokens of the test's batch, with the last one's output.
struct test_batch {
    llama_batch b;
    explicit test_batch(int n) : b(llama_batch_init(n, 0, 1)) {
        for (int i = 0; i < n; ++i) {
            b.token[i]     = 3 + (i * 7) % 200;
            b.pos[i]       = i;
            b.n_seq_id[i]  = 1;
            b.seq_id[i][0] = 0;
            b.logits[i]    = i == n - 1;
        }
        b.n_tokens = n;
    }
    ~test_batch() { llama_batch_free(b); }
};

std::vector<uint8_t> seq_state(llama_context * ctx) {
    std::vector<uint8_t> data(llama_state_seq_get_size(ctx, 0));
    data.resize(llama_state_seq_get_data(ctx, data.data(), data.size(), 0));
    return data;
}

// The caller's abort callback: counts its calls and stores the byte at call `at`.
struct store_at {
    int      calls = 0;
    int      at    = -1;
    int8_t * byte  = nullptr;
    static bool cb(void * data) {
        auto * s = static_cast<store_at *>(data);
        if (++s->calls == s->at) {
            *s->byte = 1; // the decoding thread itself: no other thread reads it meanwhile
        }
        return false;
    }
};

TEST(EndToEnd, CheckpointsOnlyWhereTheAbortCallbackCannotReach) {
    // A short interval: wherever the rule does not rule checkpoints out, the policy places some.
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.interval_ms              = 0.01;
    llama_cancel_hook * hook    = llama_cancel_hook_init(&hp);
    ASSERT_NE(hook, nullptr);
    context_ptr ctx = make_context(hook);
    ASSERT_NE(ctx, nullptr);
    test_batch  batch(k_tokens);
    int8_t      byte = 0;
    store_at    trigger;
    trigger.byte                          = &byte;
    llama_cancel_decode_params p          = llama_cancel_decode_default_params();
    p.byte                                = &byte;
    p.hook                                = hook;
    p.abort_callback                      = store_at::cb;
    p.abort_callback_data                 = &trigger;
    llama_cancel_decode_result r;

    // The byte at 0: checkpoints only on the nodes the abort callback does not reach.
    ASSERT_EQ(llama_cancel_decode(ctx.get(), batch.b, &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    const llama_cancel_hook_stats clean = llama_cancel_hook_get_stats(hook);
    std::printf("[%s] clean decode: %llu asks, %llu checkpoints, %d abort-callback calls\n", g_setup.c_str(),
                (unsigned long long) clean.asks, (unsigned long long) clean.checkpoints, trigger.calls);
    EXPECT_GT(clean.asks, 0u) << "the hook was not asked: not bound?";
    if (g_setup == "vulkan") {
        EXPECT_GT(clean.checkpoints, 0u) << "Vulkan nodes need checkpoints: its registry has no abort callback";
    } else {
        EXPECT_EQ(clean.checkpoints, 0u) << "every node of the " << g_setup << " setup sits in CPU buffers";
    }
    ASSERT_GT(trigger.calls, 1);

    // The byte stored half-way (by the caller's abort callback, on the decoding thread): still a
    // stop, and memory holds exactly the committed tokens.
    llama_memory_clear(llama_get_memory(ctx.get()), true);
    trigger.at    = trigger.calls / 2;
    trigger.calls = 0;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), batch.b, &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    const llama_cancel_hook_stats stopped = llama_cancel_hook_get_stats(hook);
    std::printf("[%s] byte stored at abort-callback call %d: n_committed %d of %d, %llu checkpoints in that decode\n",
                g_setup.c_str(), trigger.at, r.n_committed, k_tokens,
                (unsigned long long) (stopped.checkpoints - clean.checkpoints));
    if (g_setup != "vulkan") {
        EXPECT_EQ(stopped.checkpoints, 0u) << "the stop came from the abort callback, no checkpoint";
    }
    EXPECT_GT(r.n_committed, 0);
    EXPECT_LT(r.n_committed, k_tokens);
    EXPECT_EQ(r.n_committed % k_ubatch, 0);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), r.n_committed - 1);

    // Byte for byte what a clean decode of those tokens leaves (no hook, plain llama_decode).
    context_ptr reference = make_context(nullptr);
    test_batch  head(r.n_committed);
    ASSERT_EQ(llama_decode(reference.get(), head.b), 0);
    EXPECT_EQ(seq_state(ctx.get()), seq_state(reference.get())) << "memory after the stop differs";

    ctx.reset();
    llama_cancel_hook_free(hook);
}

} // namespace
