// How a backend's synchronize waits (src/backend_wait.h), pinned to upstream's rule.
#include "backend_wait.h"

#include <gtest/gtest.h>

#include <cstddef>

// ggml-vulkan's rule as upstream writes it (ggml_backend_vk_graph_compute): the almost-ready fence
// goes with the first node i of an n-node view where (n - i) < n / 5; the nodes after it are
// waited for busy, all of them when there is no such node before the last.
TEST(BackendWait, VulkanAlmostReadyFenceRule) {
    for (int n = 1; n <= 500; ++n) {
        int fence = -1;
        for (int i = 0; i < n; ++i) {
            if ((n - i) < n / 5) {
                fence = i;
                break;
            }
        }
        const size_t want = fence < 0 ? 0 : static_cast<size_t>(fence + 1);
        EXPECT_EQ(llama_cancel::first_spun_node(static_cast<size_t>(n)), want) << "view of " << n << " nodes";
    }
    EXPECT_EQ(llama_cancel::first_spun_node(9), 0u) << "under 10 nodes: waited for busy throughout";
    EXPECT_EQ(llama_cancel::first_spun_node(10), 10u) << "10 nodes: the fence goes with the last one";
    const double work[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100};
    EXPECT_NEAR(llama_cancel::spun_share(work, 15), 100.0 / 114.0, 1e-12) << "15 nodes: the last one is spun";
    EXPECT_EQ(llama_cancel::spun_share(work, 14), 0.0);
}
