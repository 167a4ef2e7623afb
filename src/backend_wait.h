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

// Whether ggml-vulkan surely records a dispatch for `node` of its own, so that the almost-ready
// fence can go with it. It records none for a node that only describes memory (NONE, RESHAPE,
// VIEW, PERMUTE, TRANSPOSE) and none for a node it fuses into a node before it and skips (a MUL
// after an RMS_NORM, a ROPE after those, a SET_ROWS after a ROPE and a VIEW, an ADD after a
// product or another ADD, the nodes of a mixture-of-experts router after its first...). Which ops
// fuse changes from one version to the next; no fusion skips the ops below, so they are the ones
// counted on. Measured on llvmpipe (a Qwen3 prompt, views cut every k nodes): views
// of 10 to 13 nodes whose last node was a fused or memory-only one kept the core busy for 30-40%
// of the decode, as this rule predicts, where the rule by node count alone predicted none.
inline bool carries_fence(const ggml_tensor * node) {
    switch (node->op) {
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
            return ggml_nelements(node) > 0;
        default:
            return false;
    }
}

// The first node of an n-node view that the almost-ready fence may go with: the first i with
// (n - i) < n / 5; n where there is none (fewer than 10 nodes).
inline size_t fence_window(size_t n) {
    const size_t fifth = n / 5;
    return fifth >= 2 ? n - fifth + 1 : n;
}

// Index of the first node of an n-node view that ggml-vulkan waits for busy: the one after the
// node the almost-ready fence goes with, the first node of fence_window that can carry it
// (fence[i] != 0, carries_fence); 0 (all of them) where none can.
inline size_t first_spun_node(const uint8_t * fence, size_t n) {
    for (size_t i = fence_window(n); i < n; ++i) {
        if (fence[i] != 0) {
            return i + 1;
        }
    }
    return 0;
}

// Share of a view's work (one entry per node, in order, and whether each can carry the fence)
// that is waited for busy.
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
