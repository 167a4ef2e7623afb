// The stop-time budget's slice sizes (src/checkpoints/slice_budget.h) without a model, on simulated node times:
// on the CPU from the timed nodes, on a device from the time between checkpoints.
#include "checkpoints/slice_budget.h"

#include <gtest/gtest.h>

#include <cstdint>

using llama_cancel::slice_budget;

TEST(SliceBudget, InactiveBudgetIsOneSliceOfTheUbatch) {
    slice_budget b(0.0f, 512);
    EXPECT_FALSE(b.active());
    EXPECT_EQ(b.next(), 512);
}

TEST(SliceBudget, SlicesFollowTheThirdLongestTimedNode) {
    slice_budget b(20.0f, 512);
    EXPECT_EQ(b.next(), 16) << "the first call probes with 16 tokens";
    b.begin_call();
    double t = 0.0;
    for (double d : {0.0, 1.0, 2.0, 2.0, 50.0, 2.0}) { // one preempted node (50 ms) is not the size
        t += d;
        b.on_node(t);
    }
    b.end_call(16);
    EXPECT_EQ(b.next(), 112) << "2 ms for 16 tokens: 0.7 x 20 ms fits 112";
    EXPECT_FLOAT_EQ(b.longest_ms(), 50.0f);
    EXPECT_TRUE(b.missed());
}

// A gap between two CPU nodes that holds a device split is not a node: the budget is not shrunk
// for it (the device's views are timed apart).
TEST(SliceBudget, GapsOverDeviceSplitsAreNotNodes) {
    slice_budget b(20.0f, 512);
    b.begin_call();
    double   t    = 0.0;
    uint64_t asks = 0;
    for (double d : {0.0, 2.0, 2.0, 2.0}) {
        t += d;
        b.on_node(t, asks);
    }
    t += 290.0;
    asks += 40; // a device split of 40 nodes ran
    b.on_node(t, asks);
    b.on_node(t + 2.0, asks);
    b.end_call(16);
    EXPECT_EQ(b.next(), 112) << "the 290 ms gap is not the slice's heavy node";
    EXPECT_FLOAT_EQ(b.longest_ms(), 2.0f);
}

TEST(SliceBudget, DeviceSlicesFollowTheTimeBetweenCheckpoints) {
    slice_budget b(20.0f, 512);
    b.begin_call();
    b.end_call(16, 0.0);
    EXPECT_EQ(b.next(), 512) << "nothing timed: back to n_ubatch";
    slice_budget d(20.0f, 512);
    d.end_call(16, 14.0);
    EXPECT_EQ(d.next(), 32) << "views within the budget: grow twofold";
    d.end_call(32, 14.0);
    d.end_call(64, 40.0);
    EXPECT_EQ(d.next(), 22) << "a 40 ms view at 64 tokens: 64 x 14 / 40";
    EXPECT_TRUE(d.missed());
    d.end_call(22, 14.0);
    d.end_call(44, 14.0);
    EXPECT_EQ(d.next(), 63) << "growing again, but not back to the size found too long";
    EXPECT_FLOAT_EQ(d.longest_ms(), 40.0f);
}
