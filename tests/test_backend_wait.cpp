// How a backend's synchronize waits (src/checkpoints/backend_wait.h), pinned to upstream's rule.
#include "checkpoints/backend_wait.h"

#include "ggml.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

using llama_cancel::first_spun_node;
using llama_cancel::spun_share;

// ggml-vulkan's rule as upstream writes it (ggml_backend_vk_graph_compute): the almost-ready fence
// goes with the first node i of an n-node view where (n - i) < n / 5 that it records a dispatch
// for; the nodes after it are waited for busy, all of them when there is no such node.
TEST(BackendWait, VulkanAlmostReadyFenceRule) {
    for (int n = 1; n <= 500; ++n) {
        int fence = -1;
        for (int i = 0; i < n; ++i) {
            if ((n - i) < n / 5) {
                fence = i;
                break;
            }
        }
        const std::vector<uint8_t> every(static_cast<size_t>(n), 1);
        const size_t want = fence < 0 ? 0 : static_cast<size_t>(fence + 1);
        EXPECT_EQ(first_spun_node(every.data(), every.size()), want) << "view of " << n << " nodes";
    }
    std::vector<uint8_t> fence(15, 1);
    EXPECT_EQ(first_spun_node(fence.data(), 9), 0u) << "under 10 nodes: waited for busy throughout";
    EXPECT_EQ(first_spun_node(fence.data(), 10), 10u) << "10 nodes: the fence goes with the last one";
    fence[9] = 0;
    EXPECT_EQ(first_spun_node(fence.data(), 10), 0u) << "10 nodes, the last one fused or a view: busy throughout";
    fence[13] = 0;
    EXPECT_EQ(first_spun_node(fence.data(), 15), 15u) << "15 nodes: the fence goes with the last one instead";
    fence[14] = 0;
    EXPECT_EQ(first_spun_node(fence.data(), 15), 0u);
    const double  work[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 100};
    const uint8_t all[]  = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_NEAR(spun_share(work, all, 15), 100.0 / 114.0, 1e-12) << "15 nodes: the last one is spun";
    EXPECT_EQ(spun_share(work, all, 14), 0.0);
    EXPECT_EQ(spun_share(work, fence.data(), 15), 1.0) << "no node to carry the fence: all of it";
}

// A node that may carry the fence (a dispatch, unless a fusion skips it) in a view's window before
// the one that surely does: the fence may go with it, and the nodes after it may spin (a product
// after an RMS_NORM and its MUL, at the end of a 25-node view). Alone, it is not counted on.
TEST(BackendWait, AFenceThatMayGoEarlierSpinsWhatFollows) {
    using llama_cancel::k_fence_carries;
    using llama_cancel::k_fence_maybe;
    using llama_cancel::k_fence_none;
    std::vector<uint8_t> fence(25, k_fence_carries); // window: nodes 21 to 24
    fence[21] = k_fence_maybe;                        // ADD
    fence[22] = k_fence_maybe;                        // RMS_NORM
    fence[23] = k_fence_maybe;                        // MUL
    EXPECT_EQ(first_spun_node(fence.data(), 25), 22u) << "the fence may go with the ADD";
    fence[21] = k_fence_none;
    EXPECT_EQ(first_spun_node(fence.data(), 25), 23u) << "the window's first node records nothing";
    fence[24] = k_fence_maybe;
    EXPECT_EQ(first_spun_node(fence.data(), 25), 0u) << "no node surely carries it: all of it may spin";
    fence[24] = k_fence_none;
    fence[22] = fence[23] = k_fence_none;
    EXPECT_EQ(first_spun_node(fence.data(), 25), 0u);
}

// The nodes counted on to carry the fence: products, attention, convolutions, copies; none that
// only describe memory; maybe the rest (a fusion may skip a MUL after an RMS_NORM, an ADD after a
// product, or begin with an op only in some versions).
TEST(BackendWait, NodesThatCarryTheFence) {
    using llama_cancel::fence_role;
    using llama_cancel::k_fence_carries;
    using llama_cancel::k_fence_maybe;
    using llama_cancel::k_fence_none;
    ggml_init_params ip{};
    ip.mem_size   = 1 << 20;
    ip.no_alloc   = true;
    ggml_context * ctx = ggml_init(ip);
    ASSERT_NE(ctx, nullptr);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 32);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 8);
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    EXPECT_EQ(fence_role(y), k_fence_carries);
    EXPECT_EQ(fence_role(ggml_cont(ctx, ggml_transpose(ctx, x))), k_fence_carries);
    ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 8, 8);
    ggml_tensor * s = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 32, 8, 1);
    EXPECT_EQ(fence_role(ggml_im2col(ctx, k, s, 1, 0, 1, 0, 1, 0, false, GGML_TYPE_F32)), k_fence_carries);
    EXPECT_EQ(fence_role(ggml_reshape_2d(ctx, y, 32 * 8, 1)), k_fence_none);
    EXPECT_EQ(fence_role(ggml_view_1d(ctx, y, 16, 0)), k_fence_none);
    EXPECT_EQ(fence_role(ggml_permute(ctx, y, 1, 0, 2, 3)), k_fence_none);
    ggml_tensor * norm = ggml_rms_norm(ctx, x, 1e-6f);
    EXPECT_EQ(fence_role(ggml_mul(ctx, norm, x)), k_fence_maybe) << "fused into the RMS_NORM, or not";
    EXPECT_EQ(fence_role(ggml_add(ctx, y, y)), k_fence_maybe) << "fused into the product, or not";
    EXPECT_EQ(fence_role(norm), k_fence_maybe);
    ggml_free(ctx);
}
