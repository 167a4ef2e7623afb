// Semantics of the exported byte reader, without a model.
#include "llama-cancel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

TEST(AbortCallback, NullByteNeverStops) {
    EXPECT_FALSE(llama_cancel_abort_callback(nullptr));
}

TEST(AbortCallback, ZeroContinuesAnyNonzeroStops) {
    int8_t byte = 0;
    EXPECT_FALSE(llama_cancel_abort_callback(&byte));
    for (int v : {1, 2, 127, -1, -128}) {
        byte = static_cast<int8_t>(v);
        EXPECT_TRUE(llama_cancel_abort_callback(&byte)) << "byte value " << v;
    }
    byte = 0;
    EXPECT_FALSE(llama_cancel_abort_callback(&byte));
}

TEST(AbortCallback, NeverWritesTheByte) {
    int8_t bytes[3] = {0x5a, 0, 0x5a};
    llama_cancel_abort_callback(&bytes[1]);
    bytes[1] = 7;
    llama_cancel_abort_callback(&bytes[1]);
    EXPECT_EQ(bytes[0], 0x5a);
    EXPECT_EQ(bytes[1], 7);
    EXPECT_EQ(bytes[2], 0x5a);
}

// A store from another thread becomes visible to a reader spinning on the byte (no hoisted load).
TEST(AbortCallback, SeesStoreFromAnotherThread) {
    int8_t byte = 0;
    std::atomic<bool> spinning{false};
    std::atomic<bool> seen{false};
    std::thread reader([&] {
        spinning = true;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!llama_cancel_abort_callback(&byte) && std::chrono::steady_clock::now() < deadline) {
        }
        seen = llama_cancel_abort_callback(&byte);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!spinning && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
    }
    const bool started = spinning;
    __atomic_store_n(&byte, 1, __ATOMIC_RELAXED); // also ends a reader that starts late
    reader.join();
    ASSERT_TRUE(started) << "the reader thread did not start within 20 s";
    EXPECT_TRUE(seen);
}

TEST(Status, Names) {
    EXPECT_STREQ(llama_cancel_status_str(LLAMA_CANCEL_OK), "ok");
    EXPECT_STREQ(llama_cancel_status_str(LLAMA_CANCEL_CANCELLED), "cancelled");
    EXPECT_STREQ(llama_cancel_status_str(LLAMA_CANCEL_ERROR), "error");
    EXPECT_STREQ(llama_cancel_status_str(42), "unknown");
}

// A hook's counters start at zero, and NULL reads as zeros rather than crashing.
TEST(Hook, SnapshotStatsStartAtZero) {
    llama_cancel_hook * hook = llama_cancel_hook_init(nullptr);
    ASSERT_NE(hook, nullptr);
    for (const llama_cancel_snapshot_stats s :
         {llama_cancel_hook_get_snapshot_stats(hook), llama_cancel_hook_get_snapshot_stats(nullptr)}) {
        EXPECT_EQ(s.snapshots + s.shared + s.held_steps + s.restores + s.bytes, 0u);
        EXPECT_EQ(s.copy_ms, 0.0);
    }
    llama_cancel_hook_free(hook);
}
