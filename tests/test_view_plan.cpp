// The view planner (src/checkpoints/view_plan.h) on given node times: the limits of its views, views without a
// busy tail where a graph allows them, and no cheaper way to cut a small graph than its own.
#include "checkpoints/backend_wait.h"
#include "checkpoints/view_plan.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

using llama_cancel::plan_views;
using llama_cancel::spun_ms;

namespace {

struct view {
    size_t first = 0, end = 0; // nodes [first, end)
    double ms    = 0.0;
};

std::vector<view> views_of(const std::vector<float> & ms, const std::vector<uint8_t> & cuts) {
    std::vector<view> views;
    view              v;
    for (size_t i = 0; i < ms.size(); ++i) {
        v.ms += ms[i];
        if (cuts[i] != 0 || i + 1 == ms.size()) {
            v.end = i + 1;
            views.push_back(v);
            v = view{i + 1, i + 1, 0.0};
        }
    }
    return views;
}

// Within the planner's limits: views of at most `max_ms` (or one node) and `max_nodes`.
bool within_limits(const std::vector<float> & ms, const std::vector<uint8_t> & cuts, double max_ms, size_t max_nodes) {
    for (const view & v : views_of(ms, cuts)) {
        const size_t n = v.end - v.first;
        if (n > max_nodes || (n > 1 && v.ms > max_ms + 1e-9)) {
            return false;
        }
    }
    return true;
}

double cost_of(const std::vector<float> & ms, const std::vector<uint8_t> & fence, const std::vector<uint8_t> & cuts,
               double view_cost) {
    return spun_ms(ms.data(), fence.data(), nullptr, cuts.data(), ms.size()) +
           view_cost * static_cast<double>(views_of(ms, cuts).size());
}

} // namespace

// Ten layers of a Qwen3 prompt as llama.cpp builds them (35 nodes: products and attention of 8 ms,
// the rest 0.2 ms, memory-only nodes none), with the nodes ggml-vulkan surely records a dispatch
// for (backend_wait.h). Cut every twenty nodes, products spin; the plan keeps every product out
// of a busy tail, within a tenth of the graph.
TEST(ViewPlan, LayersOfHeavyProductsAreCutWhereNothingSpins) {
    enum kind { product, cheap, memory };
    const kind layer[35] = {cheap,  cheap,  product, product, product, memory, memory, memory, memory,
                            cheap,  cheap,  cheap,   cheap,   memory,  memory, memory, memory, cheap,
                            cheap,  cheap,  memory,  cheap,   memory,  memory, product, memory, product,
                            cheap,  cheap,  cheap,   product, product, cheap,  product, cheap};
    std::vector<float>   ms;
    std::vector<uint8_t> fence;
    for (int i = 0; i < 10; ++i) {
        for (kind k : layer) {
            ms.push_back(k == product ? 8.0f : k == cheap ? 0.2f : 0.0f);
            fence.push_back(k == product ? 1 : 0);
        }
    }
    double graph = 0.0;
    for (float t : ms) {
        graph += t;
    }
    const std::vector<uint8_t> cuts = plan_views(ms.data(), fence.data(), nullptr, ms.size(), 0.1 * graph, 0.5, 256);
    EXPECT_TRUE(within_limits(ms, cuts, 0.1 * graph, 256));
    EXPECT_LT(spun_ms(ms.data(), fence.data(), nullptr, cuts.data(), ms.size()), 8.0) << "no product in a busy tail";
    std::vector<uint8_t> every_twenty(ms.size(), 0);
    for (size_t i = 19; i + 1 < ms.size(); i += 20) {
        every_twenty[i] = 1;
    }
    EXPECT_GT(spun_ms(ms.data(), fence.data(), nullptr, every_twenty.data(), ms.size()), 8.0 * 5)
        << "the layers are a test: views of twenty nodes spin products";
    EXPECT_EQ(cuts.back(), 0) << "the graph's end ends its last view";
}

// A node longer than a view may be is a view of its own; no view holds more than `max_nodes`.
TEST(ViewPlan, LimitsOfAView) {
    std::vector<float>         ms(40, 1.0f);
    const std::vector<uint8_t> fence(100, 1);
    ms[20] = 50.0f;
    const std::vector<uint8_t> cuts = plan_views(ms.data(), fence.data(), nullptr, ms.size(), 12.0, 0.1, 256);
    EXPECT_TRUE(within_limits(ms, cuts, 12.0, 256));
    EXPECT_EQ(cuts[19], 1);
    EXPECT_EQ(cuts[20], 1);
    const std::vector<float>   idle(100, 0.0f);
    const std::vector<uint8_t> short_views = plan_views(idle.data(), fence.data(), nullptr, idle.size(), 12.0, 0.1, 16);
    EXPECT_TRUE(within_limits(idle, short_views, 12.0, 16));
    EXPECT_TRUE(plan_views(nullptr, nullptr, nullptr, 0, 12.0, 0.1, 16).empty());
}

// Against every way to cut small graphs of random node times (some far longer than others),
// random nodes that can carry the fence (surely or maybe) and, in half the graphs, random splits on the host between
// the device's nodes: the plan is within the limits, ends a view before each split's start, and
// none within them costs less.
TEST(ViewPlan, NoCheaperCutOfASmallGraph) {
    std::mt19937                          rng(31);
    std::exponential_distribution<float> time(1.0f);
    std::uniform_real_distribution<double> share(0.05, 0.6);
    std::bernoulli_distribution            carries(0.6);
    std::bernoulli_distribution            split_here(0.2);
    std::bernoulli_distribution            maybe(0.5);
    for (int trial = 0; trial < 200; ++trial) {
        const size_t         n = 13;
        std::vector<float>   ms(n);
        std::vector<uint8_t> fence(n), starts(n, 0);
        for (uint8_t & f : fence) { // in a third of the graphs, some nodes only may carry it
            f = carries(rng) ? (trial % 3 == 0 && maybe(rng) ? llama_cancel::k_fence_maybe : llama_cancel::k_fence_carries)
                             : llama_cancel::k_fence_none;
        }
        for (size_t i = 1; i < n && trial % 2 == 1; ++i) {
            starts[i] = split_here(rng) ? 1 : 0;
        }
        double             graph = 0.0;
        for (float & t : ms) {
            t = trial % 2 == 0 ? time(rng) : time(rng) * time(rng) * time(rng); // heavier tails
            graph += t;
        }
        const double max_ms    = share(rng) * graph;
        const size_t max_nodes = 6 + trial % 9;
        const double view_cost = 0.01 * (trial % 5);
        const std::vector<uint8_t> cuts = plan_views(ms.data(), fence.data(), starts.data(), n, max_ms, view_cost, max_nodes);
        auto splits_kept = [&](const std::vector<uint8_t> & c) {
            for (size_t i = 1; i < n; ++i) {
                if (starts[i] != 0 && c[i - 1] == 0) {
                    return false; // a view across a split's start: not a way the device computes
                }
            }
            return true;
        };
        double best = 1e300;
        for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
            std::vector<uint8_t> other(n, 0);
            for (size_t i = 0; i + 1 < n; ++i) {
                other[i] = (mask >> i) & 1u;
            }
            if (splits_kept(other) && within_limits(ms, other, max_ms, max_nodes)) {
                best = std::min(best, cost_of(ms, fence, other, view_cost));
            }
        }
        EXPECT_TRUE(splits_kept(cuts)) << "trial " << trial;
        EXPECT_TRUE(within_limits(ms, cuts, max_ms, max_nodes)) << "trial " << trial;
        EXPECT_NEAR(cost_of(ms, fence, cuts, view_cost), best, 1e-4) << "trial " << trial;
    }
}
