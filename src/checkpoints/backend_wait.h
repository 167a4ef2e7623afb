// How a backend's synchronize waits, where the host can sleep through part of it. Each fact here is
// upstream's, named after the backend it belongs to, and pinned by tests/test_backend_wait.cpp.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace llama_cancel {

// ggml-vulkan (ggml_backend_vk_graph_compute, ggml_vk_build_graph, ggml_vk_wait_for_fence): for a
// graph view of n nodes it submits an "almost ready" fence with the first node i where
// (n - i) < n / 5 (integer division) that it records a dispatch for; the synchronize sleeps in
// vkWaitForFences until that fence, then spin-polls the fence of the whole view. So the nodes after
// it are waited for with a busy core, and a view with no such node (fewer than 10 nodes, or none
// past that point it records) is waited for busy from start to end.
inline bool sleeps_until_almost_ready(const ggml_tensor * node) {
    if (node->buffer == nullptr || ggml_backend_buffer_is_host(node->buffer)) {
        return false;
    }
    const char * name = ggml_backend_buffer_name(node->buffer);
    return name != nullptr && std::strncmp(name, "Vulkan", 6) == 0;
}

// What a node may do for the almost-ready fence (fence_role): nothing (it records no dispatch),
// carry it surely (a dispatch of its own that no fusion skips), or maybe (a dispatch, unless a
// fusion skips it).
constexpr uint8_t k_fence_none    = 0;
constexpr uint8_t k_fence_carries = 1;
constexpr uint8_t k_fence_maybe   = 2;

// Whether ggml-vulkan records a dispatch of its own for `node`, where the almost-ready fence can go.
// None for a node that only describes memory (NONE, RESHAPE, VIEW, PERMUTE, TRANSPOSE). Surely for
// the ops below, which no fusion skips. Maybe for the rest: a node fused into a node before it is
// skipped (a MUL after an RMS_NORM, a ROPE after those, a SET_ROWS after a ROPE and a VIEW, an ADD
// after a product or another ADD, the nodes of a mixture-of-experts router after its first...),
// and which ops fuse changes from one version to the next. Measured on llvmpipe (a Qwen3 prompt,
// views cut every k nodes): views of 10 to 13 nodes whose last node was a fused or memory-only one
// kept the core busy for 30-40% of the decode, where the rule by node count alone predicted none;
// and views of 25 nodes ending in ADD, RMS_NORM, MUL and a product spun through the product (38%
// of each view, qwen3a's decoder): the fence went with the RMS_NORM.
inline uint8_t fence_role(const ggml_tensor * node) {
    if (ggml_nelements(node) == 0) {
        return k_fence_none;
    }
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return k_fence_none;
        case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID:
        case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_IM2COL:
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_CONT:
        case GGML_OP_DUP:
            return k_fence_carries;
        default:
            return k_fence_maybe;
    }
}

// The first node of an n-node view that the almost-ready fence may go with: the first i with
// (n - i) < n / 5; n where there is none (fewer than 10 nodes).
inline size_t fence_window(size_t n) {
    const size_t fifth = n / 5;
    return fifth >= 2 ? n - fifth + 1 : n;
}

// Index of the first node of an n-node view (fence: each node's fence_role) that ggml-vulkan may
// wait for busy: 0 (all of them) where no node of fence_window surely carries the fence; else the
// one after the first node there that may carry it (the fence goes with it or a later one).
inline size_t first_spun_node(const uint8_t * fence, size_t n) {
    size_t first = n;
    bool   sure  = false;
    for (size_t i = fence_window(n); i < n; ++i) {
        first = fence[i] != k_fence_none && first == n ? i : first;
        sure  = sure || fence[i] == k_fence_carries;
    }
    return sure ? first + 1 : 0;
}

// Share of a view's work (one entry per node, in order, and each one's fence_role) that may be
// waited for busy.
inline double spun_share(const double * work, const uint8_t * fence, size_t n) {
    double all = 0.0, spun = 0.0;
    const size_t first = first_spun_node(fence, n);
    for (size_t i = 0; i < n; ++i) {
        all += work[i];
        spun += i >= first ? work[i] : 0.0;
    }
    return all > 0.0 ? spun / all : 1.0;
}

} // namespace llama_cancel
