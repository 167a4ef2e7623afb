// The checkpoint policy (src/checkpoints/checkpoint_policy.h) without a model: fake nodes (tensors without data,
// whose estimated work is their element count) asked the way ggml's scheduler asks them, on a
// simulated clock; and the set its graph-end detector keeps (src/checkpoints/pointer_set.h). The stop-time
// budget's slices are in test_slice_budget.cpp, ggml-vulkan's waiting rule in test_backend_wait.cpp.
#include "checkpoints/backend_wait.h"
#include "checkpoints/buffer_policies.h"
#include "checkpoints/call.h"
#include "checkpoints/checkpoint_policy.h"
#include "mtmd/clip_call.h"
#include "checkpoints/pointer_set.h"
#include "checkpoints/work.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

using llama_cancel::checkpoint_policy;

namespace {

constexpr double k_interval = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;

// A context for tensors without data, as the fake nodes are.
ggml_context * metadata_context(size_t bytes) {
    ggml_init_params ip{};
    ip.mem_size = bytes;
    ip.no_alloc = true;
    return ggml_init(ip);
}

// Two fake devices (any distinct addresses: the policy only compares them).
const int   g_dev_a = 0, g_dev_b = 0;
const void * const dev_a = &g_dev_a;
const void * const dev_b = &g_dev_b;

// ggml's scheduler around a policy, on a simulated clock: asks nodes back to back, computes the
// view up to each node the policy answers true (work / rate, plus a synchronize), then calls it
// at that checkpoint; a split that ends without one is computed with no call. Node i of a split
// of a given work is the same tensor in every graph, as llama.cpp builds its graphs in the same
// memory (the policy sees a graph end when a node comes again).
struct scheduler_sim {
    checkpoint_policy & policy;
    std::vector<ggml_context *> nodes_ctx; // each holds k_ctx_nodes nodes
    size_t                      n_nodes = 0;
    std::map<std::pair<int64_t, int>, ggml_tensor *> nodes; // by work (and graph, unseen), and index
    static constexpr size_t k_ctx_nodes = 100000;

    ~scheduler_sim() {
        for (ggml_context * c : nodes_ctx) {
            ggml_free(c);
        }
    }

    // Every graph made of new nodes, as a host's graphs of ever new shapes: none is seen again, so
    // the rules at each ask place every checkpoint (stable_plan.h plans only graphs seen before).
    bool unseen = false;
    int  graphs = 0;

    const ggml_tensor * node_at(int64_t work, int i) {
        ggml_tensor *& t = nodes[{unseen ? -static_cast<int64_t>(graphs) : work, i}];
        if (t == nullptr) {
            if (n_nodes++ % k_ctx_nodes == 0) {
                nodes_ctx.push_back(metadata_context(k_ctx_nodes * ggml_tensor_overhead()));
            }
            t = ggml_new_tensor_1d(nodes_ctx.back(), GGML_TYPE_F32, work);
        }
        return t;
    }
    double              now       = 1000.0; // ms
    double              sync_ms   = 0.02;   // cost of one synchronize
    double              ask_ms    = 1e-5;   // the scheduler's asks follow each other within microseconds
    double              view_work = 0.0;
    double              round_trip = -1.0;  // >= 0: a checkpoint's timed round trip, when asked for
    int                 trips      = 0;     // round trips timed
    std::vector<double> checkpoints;        // times of the checkpoints passed

    // One split of `n` nodes of `node`'s work on `device`, which computes `rate` FLOPs per ms.
    void split(const ggml_tensor * node, int n, const void * device, double rate) {
        const int64_t work = ggml_nelements(node);
        graphs++;
        for (int i = 0; i < n; ++i) {
            now += ask_ms;
            view_work += static_cast<double>(work);
            // the time as the eval callbacks take it: the clock read every few asks
            const ggml_tensor * t = node_at(work, i);
            if (policy.uncut_ask(t)) { // a graph within the interval, answered at once
                if (i == n - 1) {
                    now += view_work / rate + sync_ms;
                    view_work = 0.0;
                }
                continue;
            }
            const double asked = policy.ask_time(t, device, [&] { return now; });
            const bool checkpoint = policy.place(t, device, asked);
            if (checkpoint || i == n - 1) {
                now += view_work / rate + sync_ms;
                view_work = 0.0;
            }
            if (checkpoint) {
                const bool timed = round_trip >= 0.0 && policy.wants_round_trip();
                policy.passed(now, timed ? round_trip : -1.0);
                checkpoints.push_back(now);
                if (timed) {
                    now += round_trip;
                    trips++;
                }
            }
        }
    }

    // Mean time between the last `n` checkpoints.
    double spacing(size_t n) const {
        if (checkpoints.size() < n + 1) {
            return 0.0;
        }
        return (checkpoints.back() - checkpoints[checkpoints.size() - 1 - n]) / static_cast<double>(n);
    }
};

// A graph on a device the host sleeps on, its nodes given in quotas (distinct nodes, as in a real
// graph): asked once whole, then again from the start. The index of the first checkpoint of each
// pass (-1: none).
struct sleeping_graph {
    std::vector<ggml_tensor *> nodes;
    std::pair<int, int>        checkpoints(checkpoint_policy & policy, bool sleeps) const {
        int first[2] = {-1, -1};
        double now = 1000.0;
        for (int pass = 0; pass < 2; ++pass) {
            policy.reset(); // a new graph, as llama_cancel_decode does
            for (size_t i = 0; i < nodes.size(); ++i) {
                now += 1e-5;
                if (policy.place(nodes[i], dev_a, now, sleeps)) {
                    first[pass] = first[pass] < 0 ? static_cast<int>(i) : first[pass];
                    policy.reset(); // no rate learnt from the simulated clock: the quota stays
                }
            }
        }
        return {first[0], first[1]};
    }
};

class Policy : public ::testing::Test {
  protected:
    void SetUp() override {
        ctx = metadata_context(1 << 20); // the fake nodes hold no data
        ASSERT_NE(ctx, nullptr);
    }
    void TearDown() override { ggml_free(ctx); }

    // A node whose estimated work is `work` FLOPs (an op-less tensor counts its elements).
    ggml_tensor * node(int64_t work) { return ggml_new_tensor_1d(ctx, GGML_TYPE_F32, work); }

    ggml_context * ctx = nullptr;
};

} // namespace

TEST_F(Policy, QuotaAdaptsToASlowDevice) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double rate = 1.0e6; // FLOPs per ms (1 GFLOP/s): the default quota is 200 ms of it
    for (int g = 0; g < 20; ++g) {
        sim.split(node(100000), 1000, dev_a, rate); // 100 ms graphs of 0.1 ms nodes
    }
    EXPECT_NEAR(policy.quota(dev_a), rate * k_interval, 0.1 * rate * k_interval);
    const double planned = llama_cancel::tuning::k_target * k_interval; // a repeated graph's views
    EXPECT_NEAR(sim.spacing(20), planned, 0.15 * planned) << "checkpoints about one interval apart";
}

// Short graphs never seen before (each of new nodes): the work left at a graph's end counts toward
// the next one's first checkpoint, so that checkpoints fall an interval apart across graphs.
TEST_F(Policy, QuotaAdaptsToAFastDevice) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    sim.unseen = true;
    const double rate = 1.0e10; // 10 TFLOP/s: the default quota is 20 microseconds of it
    for (int g = 0; g < 200; ++g) {
        sim.split(node(10000000), 2000, dev_a, rate); // 2 ms graphs of 1 microsecond nodes
    }
    // A synchronize per checkpoint makes the measured rate a little lower than the device's.
    EXPECT_NEAR(policy.quota(dev_a), rate * k_interval, 0.1 * rate * k_interval);
    EXPECT_NEAR(sim.spacing(10), k_interval, 0.15 * k_interval);
    EXPECT_LT(sim.checkpoints.size(), 200u) << "not a synchronize per graph, let alone per node";
}

// A new graph on a measured device, of a shape never seen (the first encode of a clip graph, the
// first prefill of a shape), is cut by the rate the device showed before, from its first node.
TEST_F(Policy, ANewGraphIsCutByTheRateItsDeviceShowed) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    sim.unseen        = true;
    const double rate = 1.0e7; // 10 GFLOP/s: llvmpipe, or a CPU's clip graph
    for (int g = 0; g < 3; ++g) {
        sim.split(node(100000), 4000, dev_a, rate); // 40 ms graphs of 0.01 ms nodes
    }
    const size_t before = sim.checkpoints.size();
    const double begun  = sim.now + 1.0;
    sim.now             = begun;
    sim.split(node(300000), 2000, dev_a, rate); // a new shape: 60 ms of 0.03 ms nodes
    ASSERT_GT(sim.checkpoints.size(), before + 3);
    EXPECT_LE(sim.checkpoints[before] - begun, 1.1 * k_interval) << "from the learned rate";
    for (size_t i = before + 1; i < sim.checkpoints.size(); ++i) {
        EXPECT_NEAR(sim.checkpoints[i] - sim.checkpoints[i - 1], k_interval, 0.15 * k_interval) << "checkpoint " << i;
    }
}

TEST_F(Policy, IdleGapBetweenGraphsDoesNotCollapseTheQuota) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    sim.unseen = true; // 5 ms graphs: seen again, each runs uncut (RepeatedGraphs below)
    const double rate = 1.0e8;
    for (int g = 0; g < 10; ++g) {
        sim.split(node(1000000), 500, dev_a, rate);
    }
    const double learnt = policy.quota(dev_a);
    ASSERT_NEAR(learnt, rate * k_interval, 0.1 * rate * k_interval);

    // A graph that ends between checkpoints, then ten minutes of host idle time, then more graphs:
    // the view after the pause starts at its own first ask, not at the last checkpoint.
    sim.split(node(1000000), 50, dev_a, rate);
    ASSERT_FALSE(sim.checkpoints.empty());
    const double last_checkpoint = sim.checkpoints.back();
    sim.now += 10 * 60 * 1000.0;
    const size_t before = sim.checkpoints.size();
    for (int g = 0; g < 4 && sim.checkpoints.size() < before + 2; ++g) {
        sim.split(node(1000000), 500, dev_a, rate);
    }
    ASSERT_GE(sim.checkpoints.size(), before + 2) << "checkpoints after the pause";
    EXPECT_GT(sim.checkpoints[before], last_checkpoint + 10 * 60 * 1000.0);
    EXPECT_NEAR(policy.quota(dev_a), learnt, 0.1 * learnt) << "the pause was taken for compute";
    for (int g = 0; g < 20; ++g) {
        sim.split(node(1000000), 500, dev_a, rate);
    }
    EXPECT_NEAR(sim.spacing(5), k_interval, 0.15 * k_interval);
}

TEST_F(Policy, ShortPausesBetweenSplitsCountInTheInterval) {
    // Splits on a fast device separated by host work (input copies, other backends): the pauses
    // are part of the wall time between checkpoints, which is what a cancel waits for.
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    sim.unseen = true;
    const double rate = 1.0e9;
    for (int s = 0; s < 200; ++s) {
        sim.split(node(1000000), 499, dev_a, rate); // 0.5 ms of compute
        sim.now += 0.5;                              // then 0.5 ms of something else
    }
    EXPECT_NEAR(sim.spacing(10), k_interval, 0.15 * k_interval);
    EXPECT_NEAR(policy.quota(dev_a), 0.5 * rate * k_interval, 0.1 * rate * k_interval);
}

TEST_F(Policy, DevicesKeepTheirOwnRates) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double slow = 1.0e6, fast = 1.0e9;
    sim.unseen = true; // graphs seen again are planned: the fast one's 2 ms would then go uncut
    // One thread alternating a graph on a fast device and one on the CPU (say a clip encode).
    for (int g = 0; g < 40; ++g) {
        sim.split(node(1000000), 1999, dev_b, fast); // 2 ms
        sim.split(node(100000), 999, nullptr, slow); // 100 ms
    }
    EXPECT_NEAR(policy.quota(nullptr), slow * k_interval, 0.15 * slow * k_interval);
    EXPECT_NEAR(policy.quota(dev_b), fast * k_interval, 0.15 * fast * k_interval);
    EXPECT_EQ(policy.quota(dev_a), llama_cancel::tuning::k_initial_quota) << "a device never seen";

    // Beyond k_devices devices, the least recently used one is forgotten.
    static const int more[llama_cancel::tuning::k_devices] = {};
    for (const int & d : more) {
        sim.split(node(10000), 10, &d, slow);
    }
    EXPECT_EQ(policy.quota(dev_b), llama_cancel::tuning::k_initial_quota);
}

TEST_F(Policy, ResetKeepsTheQuotaAndIntervalScalesIt) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double rate = 1.0e7;
    for (int g = 0; g < 10; ++g) {
        sim.split(node(100000), 999, dev_a, rate);
    }
    const double learnt = policy.quota(dev_a);
    ASSERT_NEAR(learnt, rate * k_interval, 0.1 * rate * k_interval);

    // Work counted before a reset does not count after it.
    const double now = sim.now + 1.0;
    policy.reset(); // what the last graph left since its last checkpoint
    ASSERT_FALSE(policy.place(node(static_cast<int64_t>(0.9 * learnt)), dev_a, now));
    EXPECT_TRUE(policy.place(node(static_cast<int64_t>(0.2 * learnt)), dev_a, now + 1e-3));
    policy.reset();
    EXPECT_FALSE(policy.place(node(static_cast<int64_t>(0.2 * learnt)), dev_a, now + 2e-3));
    EXPECT_EQ(policy.quota(dev_a), learnt) << "reset keeps what was learnt";

    policy.set_interval(2 * k_interval);
    EXPECT_DOUBLE_EQ(policy.quota(dev_a), 2 * learnt);
    EXPECT_EQ(policy.interval_ms(), 2 * k_interval);
    policy.set_interval(0);
    EXPECT_EQ(policy.interval_ms(), k_interval) << "<= 0 means the default";
    EXPECT_DOUBLE_EQ(policy.quota(dev_a), learnt);

    // A stop-time budget lowers the interval for one call, past the quota's lower bound; the
    // interval put back afterwards brings the learnt quota back whole.
    policy.set_interval(1e-3);
    EXPECT_EQ(policy.quota(dev_a), llama_cancel::tuning::k_min_quota);
    policy.set_interval(k_interval);
    EXPECT_DOUBLE_EQ(policy.quota(dev_a), learnt);
}

TEST_F(Policy, QuotaStaysWithinItsBounds) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    for (int g = 0; g < 10; ++g) {
        sim.split(node(1000000), 100, dev_a, 1.0e3); // 1 MFLOP/s: 10 kFLOPs an interval
    }
    EXPECT_EQ(policy.quota(dev_a), llama_cancel::tuning::k_min_quota);
    for (int g = 0; g < 300; ++g) {
        sim.split(node(1000000000), 100, dev_b, 1.0e15); // 1 EFLOP/s
    }
    EXPECT_LE(policy.quota(dev_b), llama_cancel::tuning::k_max_quota);
    EXPECT_GT(policy.quota(dev_b), 0.5 * llama_cancel::tuning::k_max_quota);
}

TEST_F(Policy, NodesWithoutABufferAreHostNodes) {
    EXPECT_EQ(llama_cancel::device_key(node(10)), nullptr);
    checkpoint_policy policy;
    EXPECT_EQ(policy.device_of(node(10)).key, nullptr);
    EXPECT_FALSE(policy.device_of(node(10)).emulated);
}

// A graph's end is seen where one of its first nodes is asked again: llama.cpp and clip build the
// next graph in the same memory, so its first node is one of the last graph's first ones.
TEST_F(Policy, AGraphBeginsWhereItsFirstNodesComeAgain) {
    checkpoint_policy policy;
    std::vector<ggml_tensor *> nodes;
    for (int i = 0; i < 500; ++i) {
        nodes.push_back(node(10));
    }
    double now   = 1000.0;
    auto   ask   = [&](size_t i) {
        now += 1e-5;
        policy.place(nodes[i], dev_a, now);
        return policy.graph_began();
    };
    for (size_t i = 0; i < nodes.size(); ++i) {
        EXPECT_FALSE(ask(i)) << "first pass, node " << i;
    }
    EXPECT_TRUE(ask(0)) << "the same graph again";
    for (size_t i = 1; i < nodes.size(); ++i) {
        EXPECT_FALSE(ask(i)) << "second pass, node " << i;
    }
    EXPECT_TRUE(ask(3)) << "a graph built in the same memory from its fourth node on";
    EXPECT_FALSE(ask(4));
}

// A call that may run held (call::hold_if_short) is known by its first graph: short where the last
// call that began with it finished within the interval in force (a cap included), never where no
// such call finished yet, nor for another graph.
TEST_F(Policy, ACallIsShortWhereOneBeginningWithItsGraphFinishedWithinTheInterval) {
    checkpoint_policy policy;
    std::vector<ggml_tensor *> a, b;
    for (int i = 0; i < 20; ++i) {
        a.push_back(node(10));
        b.push_back(node(20));
    }
    double now  = 1000.0;
    auto   call = [&](const std::vector<ggml_tensor *> & g, double took_ms) {
        policy.begin_graph();
        bool short_call = false;
        for (size_t i = 0; i < g.size(); ++i) {
            now += 1e-5;
            policy.place(g[i], dev_a, now);
            short_call = i == 0 ? policy.graph_is_short() : short_call;
        }
        now += took_ms;
        policy.note_graph_ms(took_ms);
        return short_call;
    };
    EXPECT_FALSE(call(a, 3.0)) << "no call of graph a finished yet";
    EXPECT_TRUE(call(a, 12.0)) << "the last took 3 ms of a 10 ms interval";
    EXPECT_FALSE(call(a, 3.0)) << "the last took 12 ms";
    EXPECT_FALSE(call(b, 3.0)) << "graph b is another call's";
    EXPECT_TRUE(call(a, 3.0));
    policy.set_cap(2.0);
    EXPECT_FALSE(call(a, 3.0)) << "3 ms is past a 2 ms cap";
}

// The eval callbacks read the clock at the first ask of a range (after a checkpoint, a reset, on
// another device) and every k_clock_every asks; in between an ask takes the time read last.
TEST_F(Policy, ClockIsReadEveryFewAsksAndAfterEachCheckpoint) {
    checkpoint_policy policy;
    const uint32_t    every = llama_cancel::tuning::k_clock_every;
    int    reads = 0;
    double now   = 1000.0;
    auto   clock = [&] {
        reads++;
        return now;
    };
    ggml_tensor * t = nullptr;
    for (uint32_t i = 0; i < 4 * every; ++i) { // the nodes of one graph, each asked once
        now += 0.001;
        t = node(10);
        EXPECT_FALSE(policy.place(t, dev_a, policy.ask_time(t, dev_a, clock)));
    }
    EXPECT_EQ(reads, 4);
    EXPECT_EQ(policy.ask_time(t, dev_b, clock), now) << "another device: read at once";
    EXPECT_EQ(reads, 5);
    policy.place(t, dev_b, now);
    policy.passed(now);
    now += 1.0;
    EXPECT_EQ(policy.ask_time(t, dev_b, clock), now) << "first ask after a checkpoint";
    EXPECT_EQ(reads, 6);
}

// A graph's first ask reads the clock, however few asks came since the last read: the pause
// before it may be seconds, and the run clock reads from it when the graph's run began.
TEST_F(Policy, AGraphsFirstAskReadsTheClock) {
    checkpoint_policy policy;
    int    reads = 0;
    double now   = 1000.0;
    auto   clock = [&] {
        reads++;
        return now;
    };
    std::vector<ggml_tensor *> graph; // of more untimed work than the smallest quota: not planned
    for (int i = 0; i < 3; ++i) {
        graph.push_back(node(2000000 + i));
    }
    for (ggml_tensor * t : graph) { // one view, no checkpoint: the range stays open
        now += 0.001;
        EXPECT_FALSE(policy.place(t, dev_a, policy.ask_time(t, dev_a, clock)));
    }
    EXPECT_EQ(reads, 1);
    now += 5000.0; // the host's user thinks
    EXPECT_EQ(policy.ask_time(graph[0], dev_a, clock), now) << "the graph's first node again: read at once";
    EXPECT_EQ(reads, 2);
    policy.place(graph[0], dev_a, now);
    now += 0.001;
    EXPECT_LT(policy.ask_time(graph[1], dev_a, clock), now) << "its next node takes the time read";
    policy.begin_graph(); // a call tells of a graph built elsewhere
    EXPECT_EQ(policy.ask_time(graph[2], dev_a, clock), now) << "a graph told of: read at once";
}

TEST_F(Policy, LongestDeviceViewIsWhatAStopWaitsFor) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double rate = 1.0e6; // FLOPs per ms
    for (int g = 0; g < 20; ++g) {
        sim.split(node(100000), 1000, dev_a, rate);
    }
    EXPECT_NEAR(policy.take_longest_view_ms(), k_interval, 0.3 * k_interval) << "views held near the interval";
    sim.split(node(100000), 1000, dev_a, rate);
    sim.split(node(40000000), 1, dev_a, rate); // one node of 40 ms: no checkpoint can split it
    EXPECT_GE(policy.take_longest_view_ms(), 40.0) << "a graph's heaviest node comes once: it counts";
    EXPECT_EQ(policy.take_longest_view_ms(), 0.0) << "a take clears it";
    sim.split(node(40000000), 2, nullptr, rate);
    EXPECT_EQ(policy.take_longest_view_ms(), 0.0) << "host nodes are timed by the abort callback instead";
}

TEST_F(Policy, RoundTripLengthensTheIntervalSoCheckpointsCostOnePercent) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double rate = 1.0e6;
    sim.sync_ms    = 0.5; // each checkpoint waits for a 0.5 ms round trip (RPC)
    sim.round_trip = 0.5;
    for (int g = 0; g < 40; ++g) {
        sim.split(node(100000), 2000, dev_a, rate); // 200 ms graphs
    }
    const double want = 0.5 / llama_cancel::tuning::k_cost_share; // 50 ms
    EXPECT_NEAR(policy.round_trip_ms(dev_a), 0.5, 1e-9);
    EXPECT_NEAR(policy.interval_ms(dev_a), want, 1e-9);
    const double planned = llama_cancel::tuning::k_target * want; // a repeated graph's views
    EXPECT_NEAR(sim.spacing(20), planned, 0.15 * planned) << "checkpoints one round-trip-paying interval apart";
    EXPECT_EQ(policy.interval_ms(dev_b), k_interval) << "a device without a round trip keeps the interval";
    const int checkpoints = static_cast<int>(sim.checkpoints.size());
    EXPECT_LE(sim.trips, static_cast<int>(llama_cancel::tuning::k_trip_samples) +
                             checkpoints / static_cast<int>(llama_cancel::tuning::k_cost_sample_every) + 1)
        << "the round trip is timed at the first checkpoints, then now and then, not at every checkpoint";
    EXPECT_GE(sim.trips, checkpoints / static_cast<int>(llama_cancel::tuning::k_cost_sample_every));

    // One round trip a busy host delayed does not stretch the interval: the minimum of the last ones.
    const double t = sim.now + 1.0;
    policy.place(node(1000), dev_a, t);
    policy.passed(t + 0.1, 5.0);
    EXPECT_EQ(policy.round_trip_ms(dev_a), 0.5);

    // A stop-time budget's cap wins over what the round trip calls for, and goes with it.
    policy.set_cap(7.0);
    EXPECT_EQ(policy.interval_ms(dev_a), 7.0);
    EXPECT_NEAR(policy.quota(dev_a), rate * 7.0, 0.2 * rate * 7.0);
    policy.set_cap(0.0);
    EXPECT_NEAR(policy.interval_ms(dev_a), want, 1e-9);
}

// The first round trips decide the interval only together: one that waited for a busy core (5 ms
// among 0.5 ms ones) does not stretch it a hundredfold before the others are in.
TEST_F(Policy, FirstRoundTripAloneDoesNotStretchTheInterval) {
    checkpoint_policy policy;
    const double rate = 1.0e6;
    double now = 0.0;
    policy.place(node(1000), dev_a, now);
    policy.passed(now += 1.0, -1.0); // the rate measured
    for (uint32_t i = 0; i < llama_cancel::tuning::k_trip_samples; ++i) {
        ASSERT_TRUE(policy.wants_round_trip()) << "every checkpoint times one until the samples are in: " << i;
        policy.place(node(static_cast<int64_t>(rate)), dev_a, now);
        policy.passed(now += 1.0, i == 0 ? 5.0 : 0.5);
        if (i + 1 < llama_cancel::tuning::k_trip_samples) {
            EXPECT_EQ(policy.interval_ms(dev_a), k_interval) << "after " << i + 1 << " round trips";
        }
    }
    EXPECT_NEAR(policy.interval_ms(dev_a), 0.5 / llama_cancel::tuning::k_cost_share, 1e-9) << "their minimum";
    EXPECT_FALSE(policy.wants_round_trip()) << "then now and then";
}

// A graph shorter than 100 round trips keeps about four checkpoints: the round trip's stretch
// stops at a quarter of the graph.
TEST_F(Policy, RoundTripStretchLeavesShortGraphsFourCheckpoints) {
    checkpoint_policy policy;
    scheduler_sim     sim{policy};
    const double rate = 1.0e6;
    sim.sync_ms    = 0.5;
    sim.round_trip = 0.5; // 100 round trips: 50 ms
    for (int g = 0; g < 40; ++g) {
        sim.split(node(100000), 800, dev_a, rate); // 80 ms graphs
    }
    EXPECT_NEAR(policy.interval_ms(dev_a), 80.0 / llama_cancel::tuning::k_min_graph_checkpoints, 1.0);
    const size_t before = sim.checkpoints.size();
    sim.split(node(100000), 800, dev_a, rate);
    EXPECT_GE(sim.checkpoints.size() - before, 3u) << "four views an 80 ms graph: three checkpoints and its end";
    EXPECT_LE(sim.checkpoints.size() - before, 5u)
        << "(up to five where a plan's views, k_target of the interval, reach its last node)";
    EXPECT_NEAR(sim.spacing(2), 20.0, 0.2 * 20.0);
}

class SleepingPolicy : public Policy {
  protected:
    // `n` nodes; node i holds quotas(i) quotas of a fresh policy.
    template <typename F> sleeping_graph graph(int n, F quotas) {
        const double quota = checkpoint_policy().quota(dev_a);
        sleeping_graph g;
        for (int i = 0; i < n; ++i) {
            g.nodes.push_back(node(static_cast<int64_t>(quotas(i) * quota)));
        }
        return g;
    }
    static int second(const sleeping_graph & g, bool sleeps, double cap = 0.0) {
        checkpoint_policy policy;
        policy.set_cap(cap);
        return g.checkpoints(policy, sleeps).second;
    }
};

// A view that reached its quota ends where the busy tail is cheap: one cheap node after the heavy
// one here, instead of at the heavy node; not where that view is more than a tenth of the graph.
TEST_F(SleepingPolicy, ViewsEndAfterTheHeavyNode) {
    auto pattern = [](int i) { return i % 9 == 8 ? 0.5 : 1e-4; };
    const sleeping_graph large = graph(400, pattern); // 22 quotas: a tenth holds the 2-quota view
    EXPECT_EQ(second(large, false), 17) << "the second heavy node reaches the quota";
    EXPECT_EQ(second(large, true), 18) << "one cheap node later the heavy one is slept through";
    EXPECT_EQ(second(large, true, 5.0), 8)
        << "a 5 ms stop-time budget's cap halves the quota and lets no view run past it";
    const sleeping_graph small = graph(20, pattern); // 1 quota: a tenth is less than a view
    EXPECT_EQ(second(small, true), 17) << "a view past a tenth of the graph ends at the quota";
}

// Nodes that each hold half a quota: the view reaches its quota at its second node, yet ends at
// its tenth, the first view ggml-vulkan sleeps through, once a graph was seen whole and where ten
// nodes are at most a tenth of it; past ten nodes, at two quotas with a heavy tail.
TEST_F(SleepingPolicy, ViewsHoldTenNodes) {
    const sleeping_graph heavy = graph(400, [](int) { return 0.5; });
    checkpoint_policy policy;
    const auto first_two = heavy.checkpoints(policy, true);
    EXPECT_EQ(first_two.first, 1) << "before a graph was seen whole the quota ends the view";
    EXPECT_EQ(first_two.second, 9) << "then a sleeping device's view holds 10 nodes";
    EXPECT_EQ(second(heavy, false), 1) << "elsewhere the quota ends the view";
    EXPECT_EQ(second(graph(30, [](int) { return 0.5; }), true), 3)
        << "in a 15-quota graph a view ends past 1.5 quotas, whatever its nodes";
    EXPECT_EQ(second(graph(400, [](int i) { return i < 14 ? 1e-4 : 0.5; }), true), 17)
        << "after 14 cheap nodes the busy tail holds a heavy node at every node: 2 quotas end the view";
}

// Nodes of a tenth of a quota, one in thirteen able to carry ggml-vulkan's almost-ready fence (a
// product among fused and memory-only nodes): a view past its quota ends at such a node, the
// last of a view of 13 nodes, which the host sleeps through whole; where every node could carry
// it, at the quota (the tenth node).
TEST_F(SleepingPolicy, ViewsEndWhereTheFenceCanGo) {
    const sleeping_graph g = graph(400, [](int) { return 0.1; });
    for (bool every : {false, true}) {
        checkpoint_policy policy;
        std::vector<int>  at;
        double            now = 1000.0;
        for (int pass = 0; pass < 2; ++pass) { // the second pass knows the graph's work
            at.clear();
            policy.reset();
            for (size_t i = 0; i < g.nodes.size(); ++i) {
                now += 1e-5;
                if (policy.place(g.nodes[i], dev_a, now, true, every || i % 13 == 12)) {
                    at.push_back(static_cast<int>(i));
                    policy.reset();
                }
            }
        }
        ASSERT_GE(at.size(), 3u);
        for (size_t k = 1; k < 3; ++k) {
            EXPECT_EQ(at[k] % 13 == 12, !every) << "checkpoint " << at[k] << (every ? ", every node a fence" : "");
            EXPECT_LE(at[k] - at[k - 1], 13);
        }
    }
}

// One pass over `g` on a device the host sleeps on, as a call runs a graph (`begin`: the call tells
// the policy that a graph begins, as llama_cancel_decode and a clip call do) or as a host outside
// any call does. The index of each checkpoint.
std::vector<int> checkpoints_of_pass(checkpoint_policy & policy, const sleeping_graph & g, bool begin, double & now) {
    std::vector<int> at;
    policy.reset();
    if (begin) {
        policy.begin_graph();
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        now += 1e-5;
        if (policy.place(g.nodes[i], dev_a, now, true)) {
            at.push_back(static_cast<int>(i));
            policy.reset();
        }
    }
    return at;
}

// A context's graphs alternate shapes (a prompt's text, then media embeddings many times its
// size), each built in memory of its own: each graph's views are sized by the share of what a
// graph with its first node did last time, not of the graph before it.
TEST_F(SleepingPolicy, EachGraphKeepsTheShareOfItsOwnShape) {
    const sleeping_graph large = graph(400, [](int) { return 0.5; }); // 200 quotas
    const sleeping_graph small = graph(30, [](int) { return 0.5; });  // 15 quotas, other nodes
    checkpoint_policy    policy;
    double               now = 1000.0;
    for (int round = 0; round < 2; ++round) {
        checkpoints_of_pass(policy, large, true, now);
        checkpoints_of_pass(policy, small, true, now);
    }
    const std::vector<int> after_small = checkpoints_of_pass(policy, large, true, now);
    ASSERT_GE(after_small.size(), 2u);
    EXPECT_EQ(after_small[1] - after_small[0], 10) << "a large graph after a small one: views of ten nodes";
    const std::vector<int> after_large = checkpoints_of_pass(policy, small, true, now);
    ASSERT_GE(after_large.size(), 2u);
    EXPECT_EQ(after_large[1] - after_large[0], 4)
        << "a small graph after a large one, where the call says it begins: views of a tenth of it";
}

// Outside any call a graph is seen to begin only where its first nodes come again: one built in
// other memory runs on as the graph before it. A call's begin_graph tells the policy.
TEST_F(SleepingPolicy, ACallTellsWhereItsGraphBegins) {
    const sleeping_graph large = graph(400, [](int) { return 0.5; });
    const sleeping_graph small = graph(30, [](int) { return 0.5; });
    checkpoint_policy    told, untold;
    double               now = 1000.0;
    for (int round = 0; round < 2; ++round) {
        checkpoints_of_pass(told, large, true, now);
        checkpoints_of_pass(untold, large, false, now);
    }
    const std::vector<int> with_begin = checkpoints_of_pass(told, small, true, now);
    const std::vector<int> without    = checkpoints_of_pass(untold, small, false, now);
    ASSERT_GE(with_begin.size(), 2u);
    ASSERT_GE(without.size(), 2u);
    EXPECT_EQ(with_begin[1] - with_begin[0], 2) << "a graph not seen before: the quota ends its views";
    EXPECT_EQ(without[1] - without[0], 10) << "taken for the large graph's rest";
}

// A graph that begins late in its call or run (an mtmd evaluation's media embeddings after its
// encode) may hold views of a tenth of what ran before it and the graph together.
TEST_F(SleepingPolicy, AGraphLateInItsRunHoldsLongerViews) {
    const sleeping_graph small = graph(30, [](int) { return 0.5; }); // 15 quotas
    const double         graph_ms = 15.0 * k_interval;                 // at the rate not measured yet
    checkpoint_policy    policy;
    double               now = 1000.0;
    for (int round = 0; round < 2; ++round) {
        checkpoints_of_pass(policy, small, true, now);
    }
    const std::vector<int> first = checkpoints_of_pass(policy, small, true, now);
    ASSERT_GE(first.size(), 2u);
    EXPECT_EQ(first[1] - first[0], 4) << "at a run's start: a tenth of the graph";
    policy.reset();
    policy.begin_graph(9.0 * graph_ms);
    std::vector<int> late;
    for (size_t i = 0; i < small.nodes.size(); ++i) {
        now += 1e-5;
        if (policy.place(small.nodes[i], dev_a, now, true)) {
            late.push_back(static_cast<int>(i));
            policy.reset();
        }
    }
    ASSERT_GE(late.size(), 2u);
    EXPECT_EQ(late[1] - late[0], 10) << "nine graphs' time into its run: views of ten nodes";
}

// Before a graph of its shape was seen whole, its share is its work so far (a lower bound): the
// quota ends its first views, and views hold ten nodes once that work makes them a tenth or less.
TEST_F(SleepingPolicy, AnUnseenGraphsViewsGrowWithIt) {
    const sleeping_graph heavy = graph(400, [](int) { return 0.5; });
    checkpoint_policy    policy;
    double               now = 1000.0;
    const std::vector<int> at = checkpoints_of_pass(policy, heavy, true, now);
    ASSERT_GE(at.size(), 3u);
    EXPECT_EQ(at[0], 1) << "the first view ends at the quota";
    int longest = 0;
    for (size_t i = 1; i < at.size(); ++i) {
        const int nodes = at[i] - at[i - 1];
        longest = std::max(longest, nodes);
        if (nodes > 2) { // past the quota (two nodes)
            EXPECT_LE((nodes - 1) * 10, at[i] + 1)
                << "a view past the quota ends at the node that takes it past a tenth of the work so far";
        }
    }
    EXPECT_EQ(longest, 10) << "later views hold ten nodes, which ggml-vulkan sleeps through";
}

// A graph on a device the host sleeps on whose nodes take `ms` each, whatever their work says, run
// by a scheduler on a simulated clock: each view computed up to its checkpoint, then the checkpoint
// passed; a pause between graphs. Where each checkpoint fell and what each view took.
struct timed_pass {
    std::vector<int>    cuts;
    std::vector<double> view_ms;
    double              spun_ms = 0.0; // what ggml-vulkan waited for busy
    bool                planned = false; // the last node was placed by a plan
};

struct timed_graph {
    std::vector<ggml_tensor *> nodes;
    std::vector<double>        ms;
    std::vector<uint8_t>       fence; // each node's fence_role (backend_wait.h)
    std::vector<uint8_t>       early; // a checkpoint at the node returns before its view is computed
    std::vector<uint8_t>       host;  // the node is in a split on the host (empty: none is)

    double total_ms() const {
        double t = 0.0;
        for (double m : ms) {
            t += m;
        }
        return t;
    }

    // `stop_at`: the graph is stopped at that node (abandon_graph), as a host's byte does.
    // `unwaited`: a checkpoint at a node of `early` returns before its view is computed (ggml-vulkan
    // after a view that ends in a KV cache's SET_ROWS); the next view waits for both.
    // `told`: a call tells the policy where the graph begins; else it sees its first node again.
    timed_pass run(checkpoint_policy & policy, double & now, size_t stop_at = SIZE_MAX, bool unwaited = false,
                   bool told = true) const {
        timed_pass r;
        if (told) {
            policy.begin_graph(); // as a call's llama_decode or encode tells it
        }
        size_t first = 0;
        double view  = 0.0;
        auto on_host = [&](size_t i) { return !host.empty() && host[i] != 0; };
        for (size_t i = 0; i < nodes.size(); ++i) {
            if (i > first && on_host(i) != on_host(i - 1)) {
                // a split ends before node i: its view is computed and waited for with no checkpoint
                for (size_t j = first + (on_host(first) ? i - first : llama_cancel::first_spun_node(fence.data() + first, i - first));
                     j < i; ++j) {
                    r.spun_ms += ms[j];
                }
                now += view + 0.02;
                view  = 0.0;
                first = i;
            }
            now += 1e-5;
            const bool checkpoint = on_host(i) ? policy.place(nodes[i], nullptr, now, false, false)
                                               : policy.place(nodes[i], dev_a, now, true, fence[i] != 0);
            view += ms[i];
            if (i == stop_at) {
                now += view;
                policy.abandon_graph();
                return r;
            }
            if (checkpoint || i + 1 == nodes.size()) {
                const size_t n = i + 1 - first;
                for (size_t j = first + (on_host(i) ? n : llama_cancel::first_spun_node(fence.data() + first, n)); j <= i; ++j) {
                    r.spun_ms += ms[j];
                }
                first = i + 1;
                if (checkpoint && unwaited && early[i] != 0) {
                    now += 0.02; // the view's time goes on to the next one
                    policy.passed(now);
                    r.cuts.push_back(static_cast<int>(i));
                    continue;
                }
                now += view + 0.02;
                r.view_ms.push_back(view);
                view  = 0.0;
                if (checkpoint) {
                    r.cuts.push_back(static_cast<int>(i));
                    policy.passed(now);
                }
            }
        }
        r.planned = policy.emulated().planned();
        now += 5.0; // the host between two graphs
        return r;
    }
};

class PlannedPolicy : public Policy {
  protected:
    // Ten layers of a Qwen3 prompt (test_view_plan.cpp): products of 8 ms that carry the fence,
    // 0.2 ms nodes that may not, memory-only nodes; each node's work its time's (1e8 FLOP a ms).
    timed_graph layers() {
        enum kind { product, cheap, memory };
        const kind layer[35] = {cheap,  cheap,  product, product, product, memory, memory, memory, memory,
                                cheap,  cheap,  cheap,   cheap,   memory,  memory, memory, memory, cheap,
                                cheap,  cheap,  memory,  cheap,   memory,  memory, product, memory, product,
                                cheap,  cheap,  cheap,   product, product, cheap,  product, cheap};
        timed_graph g;
        for (int i = 0; i < 10; ++i) {
            for (size_t j = 0; j < 35; ++j) {
                const kind k = layer[j];
                g.ms.push_back(k == product ? 8.0 : k == cheap ? 0.2 : 0.0);
                g.fence.push_back(k == product ? 1 : 0);
                g.early.push_back(j == 12 || j == 21 ? 1 : 0); // the layer's two SET_ROWS
                g.nodes.push_back(node(static_cast<int64_t>(g.ms.back() * 1e8)));
            }
        }
        return g;
    }
    // The longest a view of a plan may take on `g`: a tenth of it or two intervals.
    static double longest_view(const timed_graph & g) {
        return std::max(llama_cancel::tuning::k_sleep_graph_share * g.total_ms(),
                        llama_cancel::tuning::k_sleep_quotas * k_interval);
    }
};

// Outside the library's calls (no call tells where graphs begin), a run clock makes graphs that
// follow each other within milliseconds one run: a later one's views may last a tenth of it and of
// what ran before it, up to k_run_graphs times its own time; a pause of a second begins a new run.
// Without a clock every such graph is on its own: a tenth of itself.
TEST_F(PlannedPolicy, OutsideCallsAGraphGoesOnWithItsRun) {
    const timed_graph g = layers();
    const double      own_tenth = longest_view(g);
    const double      run_tenth = llama_cancel::tuning::k_sleep_graph_share * (1.0 + llama_cancel::tuning::k_run_graphs) *
                             g.total_ms();
    auto longest = [](const timed_pass & p) { return *std::max_element(p.view_ms.begin(), p.view_ms.end()); };
    llama_cancel::run_clock clock;
    checkpoint_policy       policy, alone;
    policy.set_run_clock(&clock);
    double now = 1000.0, now_alone = 1000.0;
    double late = 0.0;
    for (int pass = 0; pass < 6; ++pass) {
        const timed_pass p = g.run(policy, now, SIZE_MAX, false, false);
        const timed_pass a = g.run(alone, now_alone, SIZE_MAX, false, false);
        EXPECT_LE(longest(p), 1.01 * run_tenth) << "pass " << pass << ": at most k_run_graphs graphs before it";
        EXPECT_LE(longest(a), 1.01 * own_tenth) << "pass " << pass << ": without a clock, a tenth of itself";
        late = pass >= 2 ? std::max(late, longest(p)) : late;
    }
    EXPECT_GT(late, 1.5 * own_tenth) << "graphs late in a run hold longer views";
    now += 1000.0; // the host's user thinks
    const timed_pass fresh = g.run(policy, now, SIZE_MAX, false, false);
    EXPECT_TRUE(fresh.planned);
    EXPECT_LE(longest(fresh), 1.01 * own_tenth) << "after a pause: a new run, a tenth of the graph";
}

// Seen whole twice (its first run pays what runs once), a graph of heavy nodes is cut where no
// product falls in a busy tail, in views of at most a tenth of it; asked node by node it was not.
TEST_F(PlannedPolicy, AKnownGraphsViewsEndWhereNothingSpins) {
    const timed_graph g = layers();
    checkpoint_policy policy;
    double            now   = 1000.0;
    const timed_pass  first = g.run(policy, now);
    EXPECT_FALSE(first.planned);
    EXPECT_GT(first.spun_ms, 0.05 * g.total_ms()) << "asked node by node, views spin";
    EXPECT_FALSE(g.run(policy, now).planned) << "the second run is planned from";
    for (int pass = 0; pass < 3; ++pass) {
        const timed_pass p = g.run(policy, now);
        EXPECT_TRUE(p.planned) << "pass " << pass;
        EXPECT_LT(p.spun_ms, 8.0) << "pass " << pass << ": no product in a busy tail";
        for (double v : p.view_ms) {
            // the times the plan went by held the synchronizes and the pause between graphs too
            EXPECT_LE(v, 1.01 * longest_view(g)) << "pass " << pass;
        }
    }
}

// A graph's first run of a shape compiles its shaders (llvmpipe: a 128-token prefill's first run
// took 2.4 s, the next ones 1.5 s): its node times, averaged into the next runs', stayed for a few,
// and the plan moved as they went (Vulkan prefills, 2-4 of 17 moved) or kept views cut for costs
// that were gone. They are replaced by the second run's: the plan is the one a graph that never
// paid them gets.
TEST_F(PlannedPolicy, AGraphsFirstRunIsNotPlannedFrom) {
    const timed_graph g     = layers();
    timed_graph       first = g;
    for (size_t i = 0; i < 35; ++i) {
        first.ms[i] += first.fence[i] != 0 ? 60.0 : 0.0; // each product's shader compiled in the first layer
    }
    checkpoint_policy policy, fresh; // `fresh` never sees the first run's costs
    double            now = 1000.0, now_fresh = 1000.0;
    first.run(policy, now);
    g.run(policy, now);
    g.run(fresh, now_fresh);
    g.run(fresh, now_fresh);
    for (int pass = 0; pass < 4; ++pass) {
        const timed_pass p = g.run(policy, now), f = g.run(fresh, now_fresh);
        EXPECT_TRUE(p.planned) << "pass " << pass;
        EXPECT_EQ(p.cuts, f.cuts) << "pass " << pass;
    }
}

// llvmpipe's prefills drift by a quarter from call to call and back (the host's other work), the
// whole graph at once: each view stays the same share of it, so its views stay where they are. A
// plan made again each time the graph's time left a band moved 2-5 of 17 prefills (bench-plans
// vulkan).
TEST_F(PlannedPolicy, AViewPlanHoldsWhileItsGraphDriftsAsAWhole) {
    timed_graph g; // many places to cut at much the same cost, as a real graph's
    for (int i = 0; i < 200; ++i) {
        g.ms.push_back(1.0);
        g.fence.push_back(1);
        g.early.push_back(0);
        g.nodes.push_back(node(100000000));
    }
    const double drift[] = {1.0, 1.4, 1.4, 1.4, 1.4, 1.0, 1.0, 0.8, 0.8, 0.8, 1.2, 1.2};
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    checkpoint_policy policy;
    double            now = 1000.0;
    g.run(policy, now);
    g.run(policy, now);
    std::vector<int> cuts;
    for (int pass = 0; pass < 24; ++pass) {
        timed_graph d = g;
        for (double & m : d.ms) {
            m *= drift[pass % 12] * jitter(rng);
        }
        const timed_pass p = d.run(policy, now);
        EXPECT_TRUE(p.planned) << "pass " << pass;
        if (pass > 0) {
            EXPECT_EQ(p.cuts, cuts) << "pass " << pass << ", the graph at " << drift[pass % 12] << " of its time";
        }
        cuts = p.cuts;
    }
}

// Where part of each layer runs on the host (attention with offload_kqv off, or a layer not
// offloaded), the device's split ends by itself before the host's nodes, computed and waited for
// whole: its nodes are not one view with the ones after the host's split. A plan that took them
// for one ended views a few nodes after a host split, products in a busy tail (a core spinning
// through 60-80% of each such view on llvmpipe).
TEST_F(PlannedPolicy, AHostSplitEndsTheDevicesView) {
    timed_graph g = layers();
    g.host.assign(g.nodes.size(), 0);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const size_t j = i % 35;
        g.host[i] = j >= 12 && j <= 23 ? 1 : 0; // the KV cache's writes and attention
        g.early[i] = 0;
    }
    // The graph's first split (12 nodes, three products among its first five) holds no view that
    // ggml-vulkan sleeps through: it spins whatever the plan.
    double first_split = 0.0;
    for (size_t i = 0; i < 12; ++i) {
        first_split += g.ms[i];
    }
    checkpoint_policy policy;
    double            now = 1000.0;
    g.run(policy, now);
    g.run(policy, now);
    for (int pass = 0; pass < 3; ++pass) {
        const timed_pass p = g.run(policy, now);
        EXPECT_TRUE(p.planned) << "pass " << pass;
        EXPECT_LT(p.spun_ms, first_split + 8.0) << "pass " << pass << ": past the first split, no product in a busy tail";
    }
}

// Two nodes that take far longer than their work says (im2col and a conv's product on llvmpipe):
// priced by work, their view is far past a tenth of the graph. A view's time does not tell which
// of its nodes took it, so a graph's second run is timed node by node (each node a view of its
// own), and its plan, made from those times, holds every view within a tenth from its first call.
TEST_F(PlannedPolicy, NodesSlowerThanTheirWorkAreGivenTheTimeTheyTook) {
    timed_graph g;
    for (int i = 0; i < 200; ++i) {
        g.ms.push_back(i == 100 || i == 101 ? 14.0 : 1.0);
        g.fence.push_back(1);
        g.early.push_back(0);
        g.nodes.push_back(node(10000000)); // all the same work
    }
    checkpoint_policy policy;
    double            now = 1000.0;
    const timed_pass  first = g.run(policy, now), second = g.run(policy, now);
    EXPECT_GT(*std::max_element(first.view_ms.begin(), first.view_ms.end()),
              llama_cancel::tuning::k_slower * longest_view(g)) << "priced by work, their view is too long";
    EXPECT_EQ(second.cuts.size(), g.nodes.size()) << "the second run: each node a view";
    for (int pass = 0; pass < 10; ++pass) {
        const timed_pass p = g.run(policy, now);
        EXPECT_TRUE(p.planned) << "pass " << pass;
        EXPECT_LE(*std::max_element(p.view_ms.begin(), p.view_ms.end()), 1.01 * longest_view(g)) << "pass " << pass;
    }
}

// A graph of nodes fast for the interval, which no view plan cuts, on a device the host sleeps on:
// the checkpoints the rules placed are replayed, call after call, whatever its times' noise.
TEST_F(PlannedPolicy, AGraphOfFastNodesKeepsItsCheckpoints) {
    timed_graph g;
    for (int i = 0; i < 300; ++i) {
        g.ms.push_back(0.1); // 30 ms
        g.fence.push_back(i % 3 == 0 ? 1 : 0);
        g.early.push_back(0);
        g.nodes.push_back(node(10000000 + i));
    }
    checkpoint_policy policy;
    std::mt19937      rng(11);
    std::uniform_real_distribution<double> jitter(0.85, 1.15);
    double            now = 1000.0;
    std::vector<int>  cuts;
    int               changes = 0;
    for (int pass = 0; pass < 40; ++pass) {
        timed_graph noisy = g;
        for (double & m : noisy.ms) {
            m *= jitter(rng);
        }
        const timed_pass p = noisy.run(policy, now);
        EXPECT_FALSE(p.planned) << "nodes fast for the interval: no view plan";
        if (pass >= 2) {
            changes += !cuts.empty() && p.cuts != cuts ? 1 : 0;
            cuts = p.cuts;
        }
    }
    EXPECT_FALSE(cuts.empty());
    EXPECT_EQ(changes, 0) << "views changed between calls after the first two";
}

// An emulated device's replayed cuts that are far more than the graph needs (placed under a
// call's cap of 1 ms, here) are dropped: the next call is cut by the strategy's rules and those
// cuts are kept. Replayed and recorded again from the call that replayed them, they stayed for
// good (the hook's Vulkan token steps held 17 checkpoints a call where the rules place 3).
TEST_F(PlannedPolicy, TooManyReplayedCutsAreDropped) {
    timed_graph g;
    for (int i = 0; i < 300; ++i) {
        g.ms.push_back(0.1); // 30 ms
        g.fence.push_back(i % 3 == 0 ? 1 : 0);
        g.early.push_back(0);
        g.nodes.push_back(node(10000000 + i));
    }
    checkpoint_policy policy;
    double            now = 1000.0;
    policy.set_cap(1.0, false); // a call's share of the interval: not a promise, plans recorded
    size_t capped = 0;
    for (int pass = 0; pass < 3; ++pass) {
        capped = g.run(policy, now).cuts.size();
    }
    ASSERT_GE(capped, 20u) << "the test: views of about 1 ms under the cap";
    policy.set_cap(0.0);
    std::vector<int> cuts;
    for (int pass = 0; pass < 12; ++pass) {
        const timed_pass p = g.run(policy, now);
        if (pass >= 4) {
            EXPECT_LE(p.cuts.size(), 6u) << "pass " << pass << ": about one per quota";
            if (pass > 4) {
                EXPECT_EQ(p.cuts, cuts) << "pass " << pass;
            }
            cuts = p.cuts;
        }
    }
}

// Where a checkpoint returns before its view is computed (ggml-vulkan after a view that ends in a
// KV cache's SET_ROWS, measured on llvmpipe: 5% of its time), the view is timed with the next
// one: each node is given the time it took. Timed alone, its nodes would look free and the next's
// twice as slow, and a plan would gather the free-looking ones into views past a tenth of the graph.
TEST_F(PlannedPolicy, AViewNotWaitedForIsTimedWithTheNext) {
    timed_graph g;
    for (int i = 0; i < 200; ++i) {
        g.ms.push_back(1.0);
        g.fence.push_back(1);
        g.early.push_back(0);
        g.nodes.push_back(node(100000000));
    }
    checkpoint_policy policy;
    double            now = 1000.0;
    g.run(policy, now);
    g.run(policy, now);
    const timed_pass planned = g.run(policy, now);
    ASSERT_GE(planned.cuts.size(), 6u);
    for (size_t k = 1; k < planned.cuts.size(); k += 2) {
        g.early[planned.cuts[k]] = 1; // every other planned view is not waited for: one that ends in
        g.fence[planned.cuts[k]] = 0; // a node fused into the ones before it
    }
    const timed_pass unwaited = g.run(policy, now, SIZE_MAX, true);
    ASSERT_GT(std::count_if(unwaited.cuts.begin(), unwaited.cuts.end(), [&](int i) { return g.early[i] != 0; }), 2)
        << "the test: views end where the checkpoint does not wait";
    const timed_pass p = g.run(policy, now); // planned from the graph before
    ASSERT_TRUE(p.planned);
    // from the second view on (the first one's range began in the graph before) to the last
    // checkpoint that waited (past it nothing was timed: the graph's end has no checkpoint)
    size_t last = 0;
    for (int c : unwaited.cuts) {
        last = g.early[c] == 0 ? static_cast<size_t>(c) : last;
    }
    for (size_t i = static_cast<size_t>(unwaited.cuts.front()) + 1; i <= last; ++i) {
        EXPECT_NEAR(policy.emulated().planned_ms(i), 1.0, 0.25) << "node " << i << (g.early[i] != 0 ? ", its view not waited for" : "");
    }
}

// A plan is followed while the nodes are the planned ones: a graph with the same first node whose
// node differs from the plan's is left to the rules at each ask from there; a stopped graph is
// not planned from (its nodes were not all seen), so the plan of the whole graph stays.
TEST_F(PlannedPolicy, APlanIsFollowedWhileItsNodesAreThePlannedOnes) {
    const timed_graph g = layers();
    checkpoint_policy policy;
    double            now = 1000.0;
    g.run(policy, now);
    g.run(policy, now);
    ASSERT_TRUE(g.run(policy, now).planned);
    timed_graph other = g;
    other.nodes[151]  = node(static_cast<int64_t>(other.ms[151] * 1e8 * 3.0)); // a product
    EXPECT_FALSE(other.run(policy, now).planned) << "left at its node 151";
    g.run(policy, now); // whole again: planned from
    g.run(policy, now, 60);
    EXPECT_TRUE(g.run(policy, now).planned) << "the plan of the whole graph stays after a stop";
}

// A stop-time budget's cap is a promise the plan does not know: with one, views end at the capped quota.
TEST_F(PlannedPolicy, AStopTimeCapLeavesThePlanAside) {
    const timed_graph g = layers();
    checkpoint_policy policy;
    double            now = 1000.0;
    g.run(policy, now);
    g.run(policy, now);
    policy.set_cap(5.0);
    const timed_pass capped = g.run(policy, now);
    for (double v : capped.view_ms) {
        EXPECT_LE(v, 5.0 + 8.0 + 1e-6) << "a view ends once it reaches the capped quota";
    }
}

// A graph on a device the host does not sleep on (the CPU's clip graphs, a GPU API, RPC) whose
// nodes take `ms` each, whatever their work says, run by a scheduler on a simulated clock, each
// node's time scaled by `scale` and by a noise of up to +-`noise` (seeded): where each checkpoint
// fell and how long each view took (the last one ends with the graph, where a call reads the byte).
struct device_graph {
    std::vector<ggml_tensor *> nodes;
    std::vector<double>        ms;
    bool                       told = true; // a call tells the policy where it begins (begin_graph)
    double                     host_ms = 2.0; // the host between two graphs
    size_t                     host_nodes = 0; // the first nodes are the host's, then dev_a's

    struct pass {
        std::vector<int>    cuts;
        std::vector<double> view_ms;      // each view's time
        std::vector<double> view_heavy;   // its longest node's
        int                 at_once = 0;  // asks answered with nothing priced (uncut_ask)
    };

    // `returned`: a call tells the policy when the graph returned (call::graph_returned).
    pass run(checkpoint_policy & policy, double & now, std::mt19937 & rng, double noise, double scale = 1.0,
             bool returned = false) const {
        std::uniform_real_distribution<double> jitter(1.0 - noise, 1.0 + noise);
        pass   r;
        double view = 0.0, heavy = 0.0;
        if (told) {
            policy.begin_graph(); // as a call's llama_decode or encode tells it
        }
        for (size_t i = 0; i < nodes.size(); ++i) {
            now += 1e-5;
            // as the eval callbacks ask: a graph that runs uncut answers at once
            const bool   at_once    = policy.uncut_ask(nodes[i]);
            r.at_once += at_once ? 1 : 0;
            const void * device     = i < host_nodes ? nullptr : dev_a;
            const bool   checkpoint = !at_once && policy.place(nodes[i], device, now);
            const double t          = ms[i] * scale * jitter(rng);
            view += t;
            heavy = std::max(heavy, t);
            if (checkpoint || i + 1 == nodes.size()) {
                now += view + 0.02;
                r.view_ms.push_back(view);
                r.view_heavy.push_back(heavy);
                view  = 0.0;
                heavy = 0.0;
                if (checkpoint) {
                    r.cuts.push_back(static_cast<int>(i));
                    policy.passed(now);
                }
            }
        }
        if (returned) {
            policy.graph_returned(now);
        }
        now += host_ms;
        return r;
    }
};

class RepeatedGraph : public Policy {
  protected:
    // 400 nodes of 1e6 FLOP; the first 100 take 0.8 ms each (a convolution's nodes, slow for their
    // work), the rest 0.1 ms: 110 ms in all.
    device_graph graph() {
        device_graph g;
        for (int i = 0; i < 400; ++i) {
            g.nodes.push_back(node(1000000 + i)); // distinct nodes, as a graph's are
            g.ms.push_back(i < 100 ? 0.8 : 0.1);
        }
        return g;
    }
    // Runs `g` (a short_graph) with noise until it runs uncut: warmed up, then a call with no cut.
    static void run_until_uncut(const device_graph & g, checkpoint_policy & policy, double & now, std::mt19937 & rng) {
        for (int call = 0; call < 12; ++call) {
            g.run(policy, now, rng, 0.1);
        }
        ASSERT_TRUE(g.run(policy, now, rng, 0.1).cuts.empty()) << "runs uncut";
    }
    // Runs `g` `calls` times with 15% noise: the calls whose cuts differ from the call before's,
    // after the first two; `last`: the last call's cuts.
    static int moved(const device_graph & g, checkpoint_policy & policy, int calls, std::vector<int> & last) {
        std::mt19937 rng(7);
        double       now   = 1000.0;
        int          moves = 0;
        last.clear();
        for (int call = 0; call < calls; ++call) {
            const device_graph::pass p = g.run(policy, now, rng, 0.15);
            if (call >= 2) {
                moves += call > 2 && p.cuts != last ? 1 : 0;
                last = p.cuts;
            }
        }
        return moves;
    }
    // 200 nodes of 0.03 ms: 6 ms, within the interval.
    device_graph short_graph() {
        device_graph g;
        for (int i = 0; i < 200; ++i) {
            g.nodes.push_back(node(1000000 + i));
            g.ms.push_back(0.03);
        }
        return g;
    }
};

// ggml-cuda keeps a CUDA graph per first node of each graph it computes, and with cb_eval set each
// view is one: checkpoints that move by a node from call to call leave every view uncaptured. Once a
// graph is planned its checkpoints fall on the same nodes, call after call, whatever its times' noise.
TEST_F(RepeatedGraph, CheckpointsFallOnTheSameNodesEveryCall) {
    checkpoint_policy policy;
    std::vector<int>  planned;
    EXPECT_EQ(moved(graph(), policy, 60, planned), 0) << "views changed between calls after the first two";
    EXPECT_TRUE(policy.stable());
    EXPECT_GE(planned.size(), 8u) << "a 110 ms graph is cut about every interval";
}

// A graph's first run pays what runs once (CUDA's kernels loaded lazily, shaders compiled, memory
// first touched): planned from it, a graph kept views cut for costs that were gone while the
// plan stayed in its band (19 checkpoints where 13 serve). It is planned from its second run: the
// views a graph that never paid them gets.
TEST_F(RepeatedGraph, AGraphsFirstRunIsNotPlannedFrom) {
    const device_graph g     = graph();
    device_graph       first = g;
    for (size_t i = 0; i < 50; ++i) {
        first.ms[i] += 1.0; // 50 ms more in its first half
    }
    checkpoint_policy policy, fresh; // `fresh` never sees the first run's costs
    std::mt19937      rng(7), rng_fresh(7);
    double            now = 1000.0, now_fresh = 1000.0;
    first.run(policy, now, rng, 0.0);
    g.run(policy, now, rng, 0.0);
    g.run(fresh, now_fresh, rng_fresh, 0.0);
    g.run(fresh, now_fresh, rng_fresh, 0.0);
    for (int call = 0; call < 4; ++call) {
        const device_graph::pass p = g.run(policy, now, rng, 0.0), f = g.run(fresh, now_fresh, rng_fresh, 0.0);
        EXPECT_TRUE(policy.stable()) << "call " << call;
        // (the nodes' times come from views the rules placed on other rates: cuts may differ by one)
        EXPECT_LE(p.cuts.size(), f.cuts.size() + 1) << "call " << call;
        EXPECT_GE(p.cuts.size() + 1, f.cuts.size()) << "call " << call;
    }
}

// A GPU graph begins with a host split too short for any view to time (a token's row lookup, a
// few microseconds): with no rate ever measured on the host, its nodes had no price and the graph
// no plan, its checkpoints placed by the rules, moving with the noise, every call. Less untimed
// work than the smallest quota decides no cut: the graph is planned.
TEST_F(RepeatedGraph, AHostSplitTooShortToTimeLeavesTheGraphPlanned) {
    device_graph g;
    g.host_nodes = 2;
    for (int i = 0; i < 2; ++i) {
        g.nodes.push_back(node(500000 + i));
        g.ms.push_back(0.005);
    }
    const device_graph device = graph();
    g.nodes.insert(g.nodes.end(), device.nodes.begin(), device.nodes.end());
    g.ms.insert(g.ms.end(), device.ms.begin(), device.ms.end());
    checkpoint_policy policy;
    std::vector<int>  planned;
    EXPECT_EQ(moved(g, policy, 30, planned), 0) << "views changed between calls after the first two";
    EXPECT_TRUE(policy.stable());
}

// Nodes slower than their work says get views by the time they took, not by the device's rate: a
// stop waits about the interval wherever it lands (the rate learnt over the whole graph would leave
// the convolution's views four times longer).
TEST_F(RepeatedGraph, ViewsAreCutByTheTimesTheNodesTook) {
    const device_graph g = graph();
    checkpoint_policy  policy;
    std::mt19937       rng(7);
    double             now = 1000.0;
    for (int call = 0; call < 4; ++call) {
        g.run(policy, now, rng, 0.05);
    }
    const device_graph::pass p = g.run(policy, now, rng, 0.05);
    for (size_t v = 0; v < p.view_ms.size(); ++v) {
        EXPECT_LE(p.view_ms[v] - p.view_heavy[v], llama_cancel::tuning::k_slower * k_interval)
            << "view " << v << " of " << p.view_ms.size();
    }
}

// A graph whose last nodes are slow for their work (code2wav's convolutions after fast products):
// measured by the rate its first nodes showed, its last view looks short, and timed at the next
// graph's first ask it took far longer than that could: taken for the host's idle time, it was
// never timed, the graph ran uncut and a stop waited for its slow half. A call that tells when the
// graph returned times that view: the next call is cut through the slow half.
TEST_F(RepeatedGraph, AReturnedGraphsLastViewIsTimedToItsReturn) {
    device_graph g;
    for (int i = 0; i < 400; ++i) {
        g.nodes.push_back(node(1000000 + i));
        g.ms.push_back(i < 200 ? 0.01 : 1.0); // 2 ms of fast nodes, then 200 ms of slow ones
    }
    checkpoint_policy policy;
    std::mt19937      rng(5);
    double            now = 1000.0;
    device_graph::pass p;
    for (int call = 0; call < 6; ++call) {
        p = g.run(policy, now, rng, 0.05, 1.0, true);
    }
    ASSERT_FALSE(p.view_ms.empty());
    for (size_t v = 0; v < p.view_ms.size(); ++v) {
        EXPECT_LE(p.view_ms[v] - p.view_heavy[v], llama_cancel::tuning::k_slower * k_interval) << "view " << v;
    }
}

// A host's hiccup (another process, a page fault) makes one call slow: its views ran past the band,
// but the graph did not change, and moving the checkpoints would cost a GPU its captured views.
// The cuts stay through it; the graph is cut again only when the next call strays too.
TEST_F(RepeatedGraph, OneSlowCallMovesNoCheckpoint) {
    const device_graph g = graph();
    checkpoint_policy  policy;
    std::mt19937       rng(11);
    double             now = 1000.0;
    std::vector<int>   planned;
    for (int call = 0; call < 8; ++call) {
        planned = g.run(policy, now, rng, 0.05).cuts;
    }
    const uint64_t replans = policy.stable_replans();
    for (int call = 0; call < 12; ++call) {
        const double scale = call % 4 == 1 ? 2.0 : 1.0; // every fourth call twice as slow
        EXPECT_EQ(g.run(policy, now, rng, 0.05, scale).cuts, planned) << "call " << call;
    }
    EXPECT_EQ(policy.stable_replans(), replans);
    g.run(policy, now, rng, 0.05, 2.0);
    g.run(policy, now, rng, 0.05, 2.0);
    EXPECT_GT(g.run(policy, now, rng, 0.05, 2.0).cuts.size(), planned.size()) << "two slow calls in a row: cut again";
}

// A graph within the interval runs as upstream runs it, one view per split, call after call (the
// call reads the byte as it returns); one that stays slower is cut again, once, and stays so.
TEST_F(RepeatedGraph, AShortGraphIsNotCutAndASlowerOneIsCutAgain) {
    const device_graph g = short_graph();
    checkpoint_policy  policy;
    std::mt19937       rng(3);
    double             now = 1000.0;
    for (int call = 0; call < 12; ++call) {
        g.run(policy, now, rng, 0.1);
    }
    for (int call = 0; call < 20; ++call) {
        const device_graph::pass p = g.run(policy, now, rng, 0.1);
        EXPECT_TRUE(p.cuts.empty()) << "call " << call;
        EXPECT_EQ(p.at_once, 199) << "call " << call << ": the asks after the first cost nothing";
    }
    const uint64_t replans = policy.stable_replans();
    std::vector<int> cuts;
    for (int call = 0; call < 20; ++call) {
        // 15 ms now: its one view is timed as the next graph begins (within k_pause_factor of
        // what it took before; a longer pause is taken for the host's idle time)
        const device_graph::pass p = g.run(policy, now, rng, 0.1, 2.5);
        if (call >= 3) { // seen slower by two calls (k_plan_strays), cut from the third
            EXPECT_EQ(p.cuts, cuts) << "call " << call;
        }
        cuts = p.cuts;
    }
    EXPECT_FALSE(cuts.empty()) << "a graph of two intervals is cut";
    EXPECT_EQ(policy.stable_replans(), replans + 1) << "planned again once";
}

// Outside calls an uncut graph's end is seen only as the next begins, and a pause longer than
// k_pause_factor times its time is taken for the host's: a graph that became ten times slower (a
// loaded machine, a device that clocked down) would look paused after every call and run uncut for
// good, a stop waiting for its whole 60 ms. Its plan is dropped instead, and the graph cut again.
TEST_F(RepeatedGraph, AnUncutGraphWhoseEndStaysUnknownIsCutAgain) {
    const device_graph g = short_graph();
    checkpoint_policy  policy;
    std::mt19937       rng(3);
    double             now = 1000.0;
    ASSERT_NO_FATAL_FAILURE(run_until_uncut(g, policy, now, rng));
    device_graph::pass p;
    for (int call = 0; call < 6; ++call) {
        p = g.run(policy, now, rng, 0.1, 10.0);
    }
    EXPECT_FALSE(p.cuts.empty()) << "a 60 ms graph is cut";
    for (size_t v = 0; v < p.view_ms.size(); ++v) {
        EXPECT_LE(p.view_ms[v] - p.view_heavy[v], llama_cancel::tuning::k_slower * k_interval) << "view " << v;
    }
}

// Outside calls a host that pauses between its graphs (its other work, other contexts' calls) hides
// each uncut graph's end: measured again every second call, the graph's views moved with the rules'
// checkpoints each time (61 of 197 token steps in the Vulkan plans row). Each measure that finds it
// still fitting doubles the wait: a few measures in 200 calls.
TEST_F(RepeatedGraph, AHostsPausesMeasureAnUncutGraphEverRarely) {
    device_graph g = short_graph();
    g.told    = false;
    g.host_ms = 50.0;
    checkpoint_policy policy;
    std::mt19937      rng(3);
    double            now = 1000.0;
    ASSERT_NO_FATAL_FAILURE(run_until_uncut(g, policy, now, rng));
    int measured = 0;
    for (int call = 0; call < 200; ++call) {
        measured += g.run(policy, now, rng, 0.1).at_once < 199 ? 1 : 0;
    }
    EXPECT_GE(measured, 1) << "an end never known is measured again";
    EXPECT_LE(measured, 8) << "measured again every few calls";
}

// Outside calls an uncut graph ends where a node of it is asked again. A host that frees a context
// and makes another, whose compute buffer lands where the old one's was (the stateless name's
// policy is kept per buffer), runs graphs none of whose nodes the policy saw: taken for the uncut
// graph's tail, they ran with no checkpoint for 65,536 asks. Past the planned graph's asks a new
// graph begins, measured and cut.
TEST_F(RepeatedGraph, AGraphOfNewNodesAfterAnUncutOneIsCut) {
    device_graph small = short_graph(), large = graph();
    small.told = large.told = false;
    checkpoint_policy policy;
    std::mt19937      rng(3);
    double            now = 1000.0;
    ASSERT_NO_FATAL_FAILURE(run_until_uncut(small, policy, now, rng));
    for (int call = 0; call < 6; ++call) {
        EXPECT_FALSE(large.run(policy, now, rng, 0.1).cuts.empty()) << "call " << call << " of a 110 ms graph";
    }
}

// A prompt's ubatches: llama.cpp builds each in the same memory, so all begin at the same node,
// and each reads more of the KV cache (here every tenth node's work and time grow with the
// ubatch: a 2,048-token prompt in 256-token ubatches). Taken for one graph, a ubatch followed the
// plan of another and was cut again (the stateless name's 1,024-token prefill in 256-token
// ubatches moved on every call, bench-plans cpu). Each keeps its own checkpoints, call after call.
TEST_F(RepeatedGraph, UbatchesBeginningAtOneNodeKeepTheirOwnCheckpoints) {
    ggml_tensor * const       first = node(1000000);
    std::vector<device_graph> ubatches(8);
    for (size_t k = 0; k < ubatches.size(); ++k) {
        device_graph & g = ubatches[k];
        g.nodes.push_back(first);
        g.ms.push_back(0.2);
        for (int i = 1; i < 300; ++i) {
            const bool attention = i % 10 == 0;
            g.nodes.push_back(node(attention ? 2000000 * static_cast<int64_t>(k + 1) + i : 1000000 + i));
            g.ms.push_back(attention ? 0.4 * static_cast<double>(k + 1) : 0.2);
        }
    }
    checkpoint_policy policy;
    std::mt19937      rng(5);
    double            now = 1000.0;
    std::vector<std::vector<int>> last(ubatches.size());
    int moves = 0;
    for (int call = 0; call < 20; ++call) {
        for (size_t k = 0; k < ubatches.size(); ++k) {
            const device_graph::pass p = ubatches[k].run(policy, now, rng, 0.15);
            EXPECT_FALSE(p.cuts.empty()) << "a " << 54 + 12 * (k + 1) << " ms ubatch is cut";
            moves += call > 2 && p.cuts != last[k] ? 1 : 0;
            last[k] = p.cuts;
        }
    }
    EXPECT_EQ(moves, 0) << "ubatches whose views changed between calls after the first three";
}

// An encoder's memory-bound run (issue 31): a product with a short inner dimension (a conv stack's
// first, over im2col's 9 rows), then a run of nodes that take the time of the bytes they move (adds,
// activations, copies, norms), on a device that moves a byte in the time of 3 FLOPs (a CPU's
// balance). Once its rate is learnt, no stretch between checkpoints (from a graph's start, between
// two, to its end) outlasts the interval by more than the longest node. Priced by FLOPs alone, the
// run costs a twentieth of the product and checkpoints fall once a layer, twice the interval apart.
TEST(WorkModel, MemoryBoundRunsStayWithinTheInterval) {
    ggml_context * ctx = metadata_context(4 << 20);
    ASSERT_NE(ctx, nullptr);
    const int64_t n_tok = 2000, n_chan = 480, k = 9;
    std::vector<ggml_tensor *> nodes;
    ggml_tensor * cols = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n_tok);
    for (int layer = 0; layer < 6; ++layer) {
        ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n_chan);
        ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_chan);
        ggml_tensor * y = ggml_mul_mat(ctx, w, cols);
        nodes.push_back(y);
        for (int i = 0; i < 4; ++i) {
            ggml_tensor * a = ggml_add(ctx, y, b);
            ggml_tensor * g = ggml_gelu(ctx, a);
            nodes.insert(nodes.end(), {a, g});
            y = g;
        }
        ggml_tensor * c = ggml_cont(ctx, ggml_transpose(ctx, y));
        ggml_tensor * n = ggml_norm(ctx, c, 1e-5f);
        nodes.insert(nodes.end(), {c, n});
    }
    const double rate    = 1.0e7; // FLOPs per ms
    const double balance = 3.0;   // FLOPs in the time of one byte
    auto node_ms = [&](const ggml_tensor * t) {
        return std::max(llama_cancel::node_flops(t, llama_cancel::elements(t)), balance * llama_cancel::node_bytes(t)) / rate;
    };
    double longest = 0.0;
    for (const ggml_tensor * t : nodes) {
        longest = std::max(longest, node_ms(t));
    }
    checkpoint_policy policy;
    double now = 1000.0, worst = 0.0;
    for (int graph = 0; graph < 40; ++graph) {
        double view_ms = 0.0, since = now;
        for (const ggml_tensor * t : nodes) {
            now += 1e-5;
            view_ms += node_ms(t);
            if (policy.place(t, dev_a, now)) {
                now += view_ms + 0.02;
                view_ms = 0.0;
                policy.passed(now);
                worst = graph >= 20 ? std::max(worst, now - since) : worst;
                since = now;
            }
        }
        now += view_ms;
        worst = graph >= 20 ? std::max(worst, now - since) : worst;
        now += 5.0; // the host between graphs
    }
    ggml_free(ctx);
    EXPECT_LT(longest, 0.5 * k_interval) << "the setup: nodes shorter than the interval";
    EXPECT_LE(worst, k_interval + longest) << "longest node " << longest << " ms";
    EXPECT_GT(worst, 0.5 * k_interval) << "not a checkpoint at every node";
}

// The policy's inline byte count (type_sizes) is ggml_nbytes for every kind of tensor a graph
// holds without gaps between its rows: plain, blocked (quantized) types, views, permuted and
// transposed ones, empty ones; a strided view counts the bytes of its elements alone.
TEST(WorkModel, TypeSizesAreGgmlNbytes) {
    ggml_context * ctx = metadata_context(1 << 20);
    ASSERT_NE(ctx, nullptr);
    std::vector<ggml_tensor *> tensors;
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,
                           GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_I32}) {
        const int64_t ne0 = ggml_blck_size(type) * 4;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, type, ne0, 6, 5);
        tensors.push_back(a);
        tensors.push_back(ggml_new_tensor_1d(ctx, type, ne0));
        tensors.push_back(ggml_view_2d(ctx, a, ne0, 3, a->nb[1], a->nb[1]));
        tensors.push_back(ggml_permute(ctx, a, 0, 2, 1, 3));
        tensors.push_back(ggml_new_tensor_2d(ctx, type, ne0, 0));
    }
    ggml_tensor * f = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 7, 6, 5);
    tensors.push_back(ggml_transpose(ctx, f));
    tensors.push_back(ggml_permute(ctx, f, 2, 0, 1, 3));
    const llama_cancel::type_sizes sizes;
    for (const ggml_tensor * t : tensors) {
        EXPECT_EQ(sizes.bytes(t), static_cast<double>(ggml_nbytes(t)))
            << ggml_type_name(t->type) << " [" << t->ne[0] << ", " << t->ne[1] << ", " << t->ne[2] << "]";
    }
    // the first 3 of each row of f's 7 floats: a view spanning all but the last row's 4
    ggml_tensor * strided = ggml_view_3d(ctx, f, 3, 6, 5, f->nb[1], f->nb[2], 0);
    EXPECT_EQ(sizes.bytes(strided), 3.0 * 6 * 5 * sizeof(float));
    ggml_tensor * w    = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 6);
    ggml_tensor * prod = ggml_mul_mat(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 3));
    EXPECT_EQ(llama_cancel::node_work(prod, sizes), llama_cancel::node_work(prod));
    ggml_free(ctx);
}

// A token's embedding lookup reads its rows, not the vocabulary's table: priced by the whole
// table, a token step's host split of two nodes weighed more than a quota, was never timed by a
// view of its own, and left the graph with no plan.
TEST(WorkModel, RowLookupsCostTheirRows) {
    ggml_context * ctx = metadata_context(1 << 20);
    ASSERT_NE(ctx, nullptr);
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    double        lookups[2];
    const llama_cancel::type_sizes sizes;
    for (int big = 0; big < 2; ++big) {
        ggml_tensor * get = ggml_get_rows(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, big ? 1000000 : 100), ids);
        lookups[big]      = llama_cancel::node_work(get, sizes);
        EXPECT_EQ(lookups[big], llama_cancel::node_work(get)) << "ggml's sizes agree";
    }
    EXPECT_EQ(lookups[0], lookups[1]) << "whatever the table's size";
    ggml_free(ctx);
}

// The stateless callback's graphs on clip's scheduler (a clip call: encodes, batch encodes, audio
// generation) use a policy apart from the text contexts' and from graphs outside any call, which
// cannot be told apart.
TEST(StatelessPolicy, ProjectorCallsKeepTheirOwn) {
    llama_cancel::checkpoint_policy text, projector;
    llama_cancel::call decode_call;
    const llama_cancel::checkpoint_policy * in_clip_call = nullptr;
    int32_t ret = -1, reach = LLAMA_CANCEL_REACH_GRAPH;
    const llama_cancel::clip_outcome outcome = llama_cancel::run_clip_call(nullptr, nullptr, nullptr, [&] {
        in_clip_call = &llama_cancel::stateless_policy_of(llama_cancel::current_call(), text, projector);
        return 0;
    }, &ret, reach);
    EXPECT_EQ(outcome, llama_cancel::clip_outcome::finished);
    EXPECT_EQ(reach, LLAMA_CANCEL_REACH_CALLS) << "no eval callback ran in the graph";
    EXPECT_EQ(in_clip_call, &projector);
    EXPECT_EQ(&llama_cancel::stateless_policy_of(nullptr, text, projector), &text);
    EXPECT_EQ(&llama_cancel::stateless_policy_of(&decode_call, text, projector), &text);
    EXPECT_EQ(llama_cancel::current_call(), nullptr) << "the clip call's scope ended";
}

// A call's graph begins once for its policy, at the first ask after each begin_graph (a decode's
// llama_decode, an encode); outside any call never: there the policy looks for the graph's end itself.
TEST(StatelessPolicy, ACallsGraphBeginsOnceForItsPolicy) {
    struct counting_policy {
        int    begins = 0;
        double before = -1.0;
        void   begin_graph(double before_ms) {
            begins++;
            before = before_ms;
        }
    } policy;
    llama_cancel::call c;
    llama_cancel::tell_graph_begin(nullptr, policy);
    llama_cancel::tell_graph_begin(&c, policy);
    EXPECT_EQ(policy.begins, 0) << "no graph began";
    c.begin_graph();
    llama_cancel::tell_graph_begin(&c, policy);
    llama_cancel::tell_graph_begin(&c, policy);
    EXPECT_EQ(policy.begins, 1) << "told at the first ask, not at the next";
    c.begin_graph();
    llama_cancel::tell_graph_begin(&c, policy);
    EXPECT_EQ(policy.begins, 2);
}

// A call tells its policy how long it has run when a graph of it begins; calls made inside a run
// (an mtmd evaluation) and calls nested in a call count from the outermost start.
TEST(StatelessPolicy, ACallsGraphsKnowWhatRanBeforeThem) {
    struct told_policy {
        double before = -1.0;
        void   begin_graph(double before_ms) { before = before_ms; }
    } policy;
    llama_cancel::call first, second, nested;
    {
        const llama_cancel::run_scope run;
        {
            const llama_cancel::call_scope scope(first);
        }
        {
            const llama_cancel::call_scope scope(second);
            const llama_cancel::call_scope inner(nested);
        }
    }
    EXPECT_EQ(first.began_ms, second.began_ms) << "two calls of one run: the run's start";
    EXPECT_EQ(nested.began_ms, first.began_ms);
    llama_cancel::call alone, inside;
    {
        const llama_cancel::call_scope scope(alone);
        const llama_cancel::call_scope inner(inside);
    }
    EXPECT_GT(alone.began_ms, first.began_ms) << "outside a run, a call's own start";
    EXPECT_EQ(inside.began_ms, alone.began_ms) << "a call nested in a call: the outer one's";
    alone.begin_graph();
    const double low = llama_cancel::now_ms() - alone.began_ms;
    llama_cancel::tell_graph_begin(&alone, policy);
    const double high = llama_cancel::now_ms() - alone.began_ms;
    EXPECT_GE(policy.before, low);
    EXPECT_LE(policy.before, high);
}

// Outside the library's calls the stateless callback picks a policy by the node's compute buffer:
// each context's graphs keep theirs (what they learnt survives the other context's graphs), a node
// outside compute buffers stays with the graph it is in, and a new buffer past the slots takes the
// least recently used one's place, fresh.
TEST(StatelessPolicy, OutsideCallsEachComputeBufferKeepsItsOwn) {
    struct buffer_free {
        void operator()(ggml_backend_buffer_t b) const { ggml_backend_buffer_free(b); }
    };
    using buffer_ptr = std::unique_ptr<ggml_backend_buffer, buffer_free>;
    auto make = [](ggml_backend_buffer_usage usage) {
        buffer_ptr b(ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64));
        ggml_backend_buffer_set_usage(b.get(), usage);
        return b;
    };
    const buffer_ptr a = make(GGML_BACKEND_BUFFER_USAGE_COMPUTE), b = make(GGML_BACKEND_BUFFER_USAGE_COMPUTE),
                     c = make(GGML_BACKEND_BUFFER_USAGE_COMPUTE), w = make(GGML_BACKEND_BUFFER_USAGE_WEIGHTS),
                     kv = make(GGML_BACKEND_BUFFER_USAGE_ANY); // a KV cache's or recurrent state's
    ggml_tensor in_a{}, in_b{}, in_c{}, weight{}, in_kv{}, no_buffer{};
    in_kv.buffer  = kv.get();
    in_a.buffer   = a.get();
    in_b.buffer   = b.get();
    in_c.buffer   = c.get();
    weight.buffer = w.get();
    llama_cancel::buffer_policies<int, 2> policies;
    int & of_a = policies.of(&in_a);
    int & of_b = policies.of(&in_b);
    EXPECT_NE(&of_a, &of_b);
    EXPECT_EQ(&policies.of(&weight), &of_b) << "a weight's node stays with the graph it is in";
    EXPECT_EQ(&policies.of(&in_kv), &of_b) << "a view of the KV cache too";
    EXPECT_EQ(&policies.of(&no_buffer), &of_b);
    EXPECT_EQ(&policies.of(&in_a), &of_a);
    of_a = 7;
    of_b = 9;
    EXPECT_EQ(policies.of(&in_b), 9);
    EXPECT_EQ(policies.of(&in_a), 7) << "what a graph's policy learnt survives another context's graphs";
    EXPECT_EQ(&policies.of(&in_c), &of_b) << "the least recently used slot";
    EXPECT_EQ(policies.of(&in_c), 0) << "a new buffer's policy starts fresh";
    EXPECT_EQ(policies.of(&in_a), 7);
}

// The graph-end detector's set: inserts report news, clearing empties it, growth keeps members.
TEST(PointerSet, InsertClearGrow) {
    llama_cancel::pointer_set set;
    std::vector<int> items(5000);
    for (int & i : items) {
        EXPECT_TRUE(set.insert(&i));
    }
    EXPECT_EQ(set.size(), items.size());
    for (int & i : items) {
        EXPECT_TRUE(set.contains(&i));
        EXPECT_FALSE(set.insert(&i)) << "kept through growth";
    }
    int other = 0;
    EXPECT_FALSE(set.contains(&other));
    set.clear();
    EXPECT_FALSE(set.contains(&items[7]));
    EXPECT_EQ(set.size(), 0u);
    EXPECT_TRUE(set.insert(&items[7]));
    EXPECT_FALSE(set.insert(&items[7]));
    EXPECT_TRUE(set.insert(&items[8]));
}
