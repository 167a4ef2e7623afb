// Cancel on GPU-API, RPC and BLAS backends through eval-callback checkpoints (llama_cancel_hook and
// the stateless llama_cancel_eval_callback).
//
// LLAMA_CANCEL_BACKEND picks the setup: vulkan (Mesa llvmpipe, all layers offloaded), rpc1 / rpc2
// (one or two ggml-rpc-server processes started here, layers split across them and the local
// CPU), rpc1-lan / rpc2-lan (the same, each server behind a delay proxy: LLAMA_CANCEL_RPC_DELAY_MS
// each way), blas (Debian's BLAS backend beside the CPU). Stops are triggered at a chosen node
// through the hook's chained callback, or a probe around the stateless callback, so that no test
// depends on timing for where the byte is stored.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace {

using fixtures::env;
using fixtures::make_hooked;
using fixtures::node_trigger;
using fixtures::plain_last_logits;
using fixtures::pos_max;
using fixtures::relative_difference;
using fixtures::test_backend;

// The setup under test (LLAMA_CANCEL_BACKEND), the small model on it and, as the reference, on the
// CPU. Vulkan: every layer offloaded; RPC: 3 of 4 layers across the servers, the last layer and the
// output on the local CPU.
const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env     = "LLAMA_CANCEL_SMALL_MODEL";
    o.model_what    = "the tests' small model";
    o.n_gpu_layers  = [](const std::string & backend) { return backend == "vulkan" ? -1 : 3; };
    o.cpu_reference = true;
    return o;
}());

// Non-deterministic or reduced-precision backends agree with the CPU within this (relative to the
// largest logit); measured differences are printed.
constexpr double k_tolerance = 2e-2;

} // namespace

// llama_cancel_decode and the hook on the setup under test.
class Backend : public ::testing::Test {};

TEST_F(Backend, ByteAtZeroLeavesResultsUnchanged) {
    const int n = 128;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 3);
    const auto plain = plain_last_logits(test_backend().model.get(), prompt, 64);
    const auto cpu   = plain_last_logits(test_backend().cpu_model.get(), prompt, 64);

    auto h = make_hooked(test_backend().model.get(), n, 64);
    ASSERT_NE(h.ctx, nullptr);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = h.hook.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_committed, n);
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1);
    const auto got = common::last_logits(h.ctx.get());
    ASSERT_EQ(got.size(), plain.size());
    EXPECT_EQ(std::memcmp(got.data(), plain.data(), got.size() * sizeof(float)), 0)
        << "checkpoints changed the " << test_backend().name() << " result";
    const double d = relative_difference(got, cpu);
    std::printf("[%s] relative difference to the CPU backend: %.3g\n", test_backend().name().c_str(), d);
    EXPECT_LE(d, k_tolerance);
    // How many checkpoints the learnt work budget placed depends on the measured rate: a figure,
    // printed (the stop tests below make their checkpoints through the hook's chain instead).
    const auto stats = llama_cancel_hook_get_stats(h.hook.get());
    std::printf("[%s] hook checkpoints with the byte at 0: %llu\n", test_backend().name().c_str(),
                static_cast<unsigned long long>(stats.checkpoints));
    EXPECT_GT(stats.asks, 0u) << "the hook was asked about the graph's nodes";
    EXPECT_FALSE(llama_cancel_hook_stopped(h.hook.get()));
}

// Upstream's behaviour that the library guards against: a graph stopped by the eval callback
// still makes llama_decode return 0.
TEST_F(Backend, PlainDecodeReportsStoppedGraphAsSuccess) {
    const int n = 64;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 5);
    node_trigger trig;
    int8_t byte = 0;
    trig.byte = &byte;
    trig.at   = 10;
    auto h = make_hooked(test_backend().model.get(), n, n, &trig);
    llama_cancel_hook_set_byte(h.hook.get(), &byte);
    common::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_decode(h.ctx.get(), b.get()), 0);
    EXPECT_TRUE(llama_cancel_hook_stopped(h.hook.get())) << "the hook saw the byte and stopped the graph";
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1) << "and llama_decode kept the half-computed cells";
}

TEST_F(Backend, CancelMidGraphKeepsOnlyWholeUbatchesAndResumesIdentically) {
    const int n = 128, u = 32;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 9);
    const auto want = plain_last_logits(test_backend().model.get(), prompt, u);

    // Nodes asked per ubatch, counted on an uninterrupted run.
    node_trigger count;
    int8_t unused = 0;
    count.byte = &unused;
    {
        auto h = make_hooked(test_backend().model.get(), u, u, &count);
        common::seq_batch b(prompt, 0, u, 0);
        ASSERT_EQ(llama_decode(h.ctx.get(), b.get()), 0);
    }
    const int per_ubatch = count.calls;
    ASSERT_GT(per_ubatch, 8);

    node_trigger trig;
    int8_t byte = 0;
    trig.byte = &byte;
    trig.at   = per_ubatch + per_ubatch / 2; // inside the second ubatch's graph
    auto h = make_hooked(test_backend().model.get(), n, u, &trig);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte  = &byte;
    p.hook  = h.hook.get(); // default params otherwise: finished slices are kept
    p.n_seq = 1;
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{INT32_MIN, INT32_MIN, INT32_MIN}};
    common::seq_batch b(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, u);
    EXPECT_EQ(per_seq[0].n_committed, u);
    EXPECT_EQ(pos_max(h.ctx.get()), u - 1) << "the stopped ubatch's cells are removed";
    EXPECT_TRUE(llama_cancel_hook_stopped(h.hook.get()));

    byte = 0;
    trig.at = -1;
    common::seq_batch rest(prompt, r.n_committed, n - r.n_committed, r.n_committed);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), rest.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(pos_max(h.ctx.get()), n - 1);
    const auto got = common::last_logits(h.ctx.get());
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    const double d = relative_difference(got, want);
    std::printf("[%s] resumed vs uninterrupted relative difference: %.3g\n", test_backend().name().c_str(), d);
    if (test_backend().name() == "vulkan" || test_backend().name() == "blas") {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "resume not bit-identical";
    } else {
        EXPECT_LE(d, k_tolerance);
    }
}

TEST_F(Backend, ByteSetWhileGroupingStopsAtOnce) {
    const int n = 64;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 11);
    // The trigger stores the byte at its third ask without asking for the node: the hook must
    // checkpoint at the very next node instead of waiting for its work budget.
    int8_t byte = 0;
    node_trigger trig;
    trig.byte           = &byte;
    trig.at             = 3;
    trig.while_grouping = true;
    auto h = make_hooked(test_backend().model.get(), n, n, &trig);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = h.hook.get();
    common::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, nullptr, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(pos_max(h.ctx.get()), -1);
    EXPECT_LE(trig.calls, 40) << "the graph went on for " << trig.calls << " asks after the byte was set";
}

// A stop-time budget on a backend the abort callback does not time: slices are sized from the eval
// callback's time between checkpoints, through the hook and through the contract name alone. A
// budget no view can meet (1 microsecond) must shrink every slice after the 16-token probe to one
// token, whatever the device's speed; without that the rest of the batch went in one call.
TEST_F(Backend, BudgetSlicesFromTheEvalCallbacksEstimate) {
    const int n = 40, probe = 16;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 31);
    int8_t byte = 0;
    for (const bool stateless : {false, true}) {
        fixtures::hooked_context h = make_hooked(test_backend().model.get(), n, n);
        if (stateless) {
            // As a host binds the contract name.
            h.ctx = fixtures::make_bound_context(test_backend().model.get(), nullptr,
                                                 fixtures::context_options(n, n, 1, llama_cancel_eval_callback, &byte));
        }
        ASSERT_NE(h.ctx, nullptr);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte        = &byte;
        p.hook        = stateless ? nullptr : h.hook.get();
        p.max_stop_ms = 1e-3f;
        llama_cancel_decode_result r;
        common::seq_batch b(prompt, 0, n, 0);
        ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_committed, n);
        EXPECT_EQ(pos_max(h.ctx.get()), n - 1);
        EXPECT_EQ(r.n_decode_calls, 1 + (n - probe)) << (stateless ? "stateless" : "hook")
                                                      << ": slices after the probe were not sized to one token";
        EXPECT_TRUE(r.budget_missed);
        EXPECT_GT(r.longest_node_ms, 0.0f);
        std::printf("[%s] %s: %d calls, longest view %.3f ms\n", test_backend().name().c_str(),
                    stateless ? "stateless" : "hook", r.n_decode_calls, r.longest_node_ms);
    }
}

// Per-sequence cancel through the hook: sequence 1's byte, stored at a node inside the device's
// graph, stops the call; sequence 0 goes on and ends as its tokens alone leave it.
TEST_F(Backend, PerSequenceCancelThroughTheHookKeepsTheOtherSequence) {
    const int n = 32;
    llama_model * model = test_backend().model.get();
    auto p0 = common::make_prompt(model, n, 41), p1 = common::make_prompt(model, n, 42);
    std::vector<llama_token> both(p0);
    both.insert(both.end(), p1.begin(), p1.end());
    llama_batch b = llama_batch_init(2 * n, 0, 1);
    for (int i = 0; i < 2 * n; ++i) {
        b.token[i] = both[i], b.pos[i] = i % n, b.n_seq_id[i] = 1, b.seq_id[i][0] = i / n, b.logits[i] = i % n == n - 1;
    }
    b.n_tokens = 2 * n;
    int8_t bytes[2] = {0, 0};
    const int8_t * flags[2] = {&bytes[0], &bytes[1]};
    node_trigger trig;
    trig.byte = &bytes[1];
    trig.at   = 12;
    auto h = make_hooked(test_backend().model.get(), 2 * n, 2 * n, &trig, 2);
    ASSERT_NE(h.ctx, nullptr);
    llama_cancel_seq_result seqs[2] = {{INT32_MIN, INT32_MIN, INT32_MIN}, {INT32_MIN, INT32_MIN, INT32_MIN}};
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook      = h.hook.get();
    p.seq_bytes = flags;
    p.n_seq     = 2;
    llama_cancel_decode_result r;
    const int32_t status = llama_cancel_decode(h.ctx.get(), b, &p, &r, seqs);
    llama_batch_free(b);
    ASSERT_EQ(status, LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_seq_cancelled, 1);
    EXPECT_EQ(seqs[1].cancelled, 1);
    EXPECT_EQ(seqs[0].cancelled, 0);
    EXPECT_EQ(seqs[0].n_committed, n);
    EXPECT_GE(r.n_decode_calls, 2) << "the stopped call, then sequence 0 alone";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(h.ctx.get()), 1), -1) << "sequence 1 holds nothing";
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(h.ctx.get()), 0), n - 1);
    ASSERT_GE(seqs[0].output, 0);
    const float * l = llama_get_logits_ith(h.ctx.get(), seqs[0].output);
    ASSERT_NE(l, nullptr);
    const auto want = plain_last_logits(test_backend().model.get(), p0, n);
    ASSERT_FALSE(want.empty());
    const std::vector<float> got(l, l + want.size());
    const double d = relative_difference(got, want);
    std::printf("[%s] survivor vs its tokens alone, relative difference: %.3g\n", test_backend().name().c_str(), d);
    // Measured 0 on vulkan (llvmpipe), rpc1, rpc2 and blas: each row is computed independently.
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "survivor not bit-identical";
}

using common::stateless_probe;

// The stateless callback bound as a host binds it (cb_eval = llama_cancel_eval_callback).
class Stateless : public ::testing::Test {
  protected:
    // A context whose cb_eval is `cb` with `data`, n_batch = n_ubatch = `batch`; attention and KV
    // cache on the device too, as a host offloads them, so that the device's splits are long.
    static common::context_ptr context(llama_model * model, int batch, ggml_backend_sched_eval_callback cb, void * data) {
        const auto b = static_cast<uint32_t>(batch);
        return fixtures::make_backend_context(model, nullptr, fixtures::context_options(b, b, 1, cb, data));
    }

    // llama_decode of `prompt` from an empty memory, as a host decodes; its duration in ms.
    static double decode(llama_context * ctx, const std::vector<llama_token> & prompt) {
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
        const double t0 = common::now_ms();
        EXPECT_EQ(llama_decode(ctx, b.get()), 0);
        llama_synchronize(ctx);
        return common::now_ms() - t0;
    }

    // The smallest batch of `batches` whose plain decode takes at least 8 checkpoint intervals (the
    // last one otherwise), so that a graph holds several of the callback's checkpoints on this
    // machine. Only sizes the work; nothing is asserted on time.
    static int long_enough_batch(llama_model * model, std::initializer_list<int> batches) {
        int batch = 0;
        for (int b : batches) {
            batch = b;
            auto ctx = context(model, b, nullptr, nullptr);
            EXPECT_NE(ctx, nullptr);
            const auto prompt = common::make_prompt(model, b, 21);
            decode(ctx.get(), prompt);
            double ms = decode(ctx.get(), prompt);
            for (int i = 0; i < 2; ++i) { // the fastest of three: one a busy core slowed sizes too small
                ms = std::min(ms, decode(ctx.get(), prompt));
            }
            std::printf("[%s] plain decode of %d tokens: %.1f ms (fastest of 3)\n", test_backend().name().c_str(), b, ms);
            if (ms >= 8 * LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS) {
                break;
            }
        }
        return batch;
    }

    // Counts the asks of one decode of `prompt` through the probe, then arms it to store the byte
    // while the scheduler groups ask n_asks / 3. Returns n_asks.
    static int arm_while_grouping(llama_context * ctx, const std::vector<llama_token> & prompt, stateless_probe & probe) {
        decode(ctx, prompt);
        const int n_asks = probe.asks;
        probe.rearm(n_asks / 3);
        probe.while_grouping = true;
        return n_asks;
    }

    // Decodes through the probe with the byte at 0 until the thread's policy has measured the device,
    // then stores the byte at a quarter of the graph's asks; the graph must stop at the checkpoint
    // that ends that node's view, before the graph's end.
    void stops_before_the_end(llama_model * model, int batch, double min_work, double max_work) {
        const std::string & backend = test_backend().name();
        stateless_probe probe;
        probe.measure_work = true;
        auto ctx = context(model, batch, stateless_probe::eval_cb, &probe);
        ASSERT_NE(ctx, nullptr);
        const auto prompt = common::make_prompt(model, batch, 23);
        double ms = 0;
        for (int i = 0; i < 3; ++i) {
            probe.rearm(-1);
            ms = decode(ctx.get(), prompt);
        }
        const int n_asks = probe.asks;
        std::printf("[%s] batch %d: %d nodes, largest %.3g FLOPs, %.1f ms, %d checkpoints with the byte at 0\n",
                    backend.c_str(), batch, n_asks, probe.max_work, ms, probe.checkpoints);
        ASSERT_GE(probe.max_work, min_work) << "the model's largest node is smaller than this test needs";
        ASSERT_LT(probe.max_work, max_work) << "the model's largest node is larger than this test needs";
        // How many checkpoints the byte-at-0 decodes get follows the measured rate: printed above, a
        // figure (a checkpoint's round trip stretches the interval on RPC up to a quarter of the
        // graph, checkpoint_policy's cost rule: fewer there, by design). That there are some is the
        // point on a device, where no abort callback runs: the old 1 GFLOP threshold gave none.
        EXPECT_EQ(probe.stopped_at, -1) << "the byte at 0 stopped nothing";
        const bool device = backend == "vulkan" || backend == "rpc1" || backend == "rpc1-lan";
        if (device) {
            EXPECT_GT(probe.checkpoints, 0) << "the byte-at-0 decode passed no checkpoint: nothing could stop it inside a device split";
        }

        probe.rearm(n_asks / 4);
        decode(ctx.get(), prompt);
        ASSERT_GT(probe.stored_at, 0) << "the probe never stored the byte";
        ASSERT_GT(probe.stopped_at, 0) << "the graph ran to its end with the byte set at node " << probe.store_at;
        EXPECT_GE(probe.stopped_at, probe.store_at);
        if (device && probe.stored_late) {
            // Node store_at's view reached its split's end with no checkpoint (where it falls against
            // the checkpoints is the measured rate's doing): the check made while the next split is
            // grouped must stop it at that split's first node.
            EXPECT_EQ(probe.stopped_at, probe.stored_at) << "the next split did not stop at its first node";
        }
        EXPECT_LT(probe.stopped_at, n_asks) << "stopped only at the graph's last node";
        std::printf("[%s] byte stored during node %d of %d%s: stopped at the checkpoint after node %d "
                    "(%d nodes computed after it, %.0f%% of the rest)\n",
                    backend.c_str(), probe.store_at, n_asks,
                    probe.stored_late ? " (its view ended with its split, no checkpoint)" : "",
                    probe.stopped_at, probe.stopped_at - probe.store_at,
                    100.0 * (probe.stopped_at - probe.store_at) / (n_asks - probe.store_at));
    }
};

TEST_F(Stateless, ByteAtZeroLeavesResultsUnchanged) {
    const int n = 64;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 3);
    const auto plain = plain_last_logits(test_backend().model.get(), prompt, n);
    int8_t byte = 0;
    auto ctx = context(test_backend().model.get(), n, llama_cancel_eval_callback, &byte); // as a host binds it
    ASSERT_NE(ctx, nullptr);
    for (int i = 0; i < 2; ++i) {
        decode(ctx.get(), prompt);
        const auto got = common::last_logits(ctx.get());
        ASSERT_EQ(got.size(), plain.size());
        EXPECT_EQ(std::memcmp(got.data(), plain.data(), got.size() * sizeof(float)), 0)
            << "checkpoints changed the " << test_backend().name() << " result (decode " << i << ")";
    }
    EXPECT_EQ(byte, 0) << "the callback never writes the byte";
}

TEST_F(Stateless, StopsAGraphOfSmallNodes) {
    // Every node under 0.1 GFLOP: the old single-node threshold (1 GFLOP) never checkpointed here.
    const int batch = long_enough_batch(test_backend().model.get(), {64, 128, 256});
    stops_before_the_end(test_backend().model.get(), batch, 0.0, 1.0e8);
}

TEST_F(Stateless, StopsAGraphOfLargeNodes) {
    const std::string path = env("LLAMA_CANCEL_WIDE_MODEL");
    ASSERT_FALSE(path.empty()) << "set LLAMA_CANCEL_WIDE_MODEL (tests/CMakeLists.txt sets it for the vulkan, rpc1 and "
                                  "rpc1-lan runs and leaves this test out of the others)";
    common::model_ptr wide = test_backend().setup.load(path, test_backend().n_gpu_layers);
    ASSERT_NE(wide, nullptr) << "cannot load " << path;
    // 2 x 256 x 8192 x 256: the first layer's feed-forward products are over 1 GFLOP each (the
    // last layer computes only the rows that have outputs).
    stops_before_the_end(wide.get(), 256, 1.0e9, 1.0e12);
}

TEST_F(Stateless, ByteSetWhileGroupingStopsAtOnce) {
    const int n = 64;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 11);
    stateless_probe probe;
    auto ctx = context(test_backend().model.get(), n, stateless_probe::eval_cb, &probe);
    const int n_asks = arm_while_grouping(ctx.get(), prompt, probe);
    decode(ctx.get(), prompt);
    EXPECT_EQ(probe.stored_at, n_asks / 3);
    EXPECT_EQ(probe.stopped_at, probe.stored_at) << "the node asked with the byte set is a checkpoint that stops";
    // Later splits stop at their first node (BLAS makes a split of each matrix product).
    EXPECT_LT(probe.asks - probe.stopped_at, (n_asks - probe.stopped_at) / 2)
        << "the graph went on for " << probe.asks - probe.stopped_at << " asks after the stop";
}

// The contract name alone (cb_eval = llama_cancel_eval_callback, user data = the byte, no hook):
// llama_decode reports the stopped graph as success, llama_cancel_decode must not.
TEST_F(Stateless, CancellableDecodeNeverReportsAStoppedGraphAsSuccess) {
    const int n = 64;
    auto prompt = common::make_prompt(test_backend().model.get(), n, 12);
    stateless_probe probe;
    auto ctx = context(test_backend().model.get(), n, stateless_probe::eval_cb, &probe);
    arm_while_grouping(ctx.get(), prompt, probe);
    llama_memory_clear(llama_get_memory(ctx.get()), true);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &probe.byte; // the same byte the callback reads
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    // Where the node is computed by the CPU (RPC's local layers), the abort reader stops first (2).
    EXPECT_TRUE(probe.stopped_at > 0 || r.decode_ret == 2) << "neither reader stopped the graph";
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(pos_max(ctx.get()), -1) << "the stopped graph's cells are removed";
    std::printf("[%s] llama_decode returned %d under the stop (0: the stopped graph reported as success)\n",
                test_backend().name().c_str(), r.decode_ret);
}
