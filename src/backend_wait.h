// How a backend's synchronize waits, where the host can sleep through part of it. Each fact here is
// upstream's, named after the backend it belongs to, and pinned by tests/test_backend_wait.cpp.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <cstddef>
#include <cstring>

namespace llama_cancel {

// ggml-vulkan (ggml_backend_vk_graph_compute, ggml_vk_wait_for_fence): for a graph view of n nodes
// it submits an "almost ready" fence with the first node i where (n - i) < n / 5 (integer
// division); the synchronize sleeps in vkWaitForFences until that fence, then spin-polls the fence
// of the whole view. So the nodes after i are waited for with a busy core, and a view of fewer
// than 10 nodes (no such i before its last node) is waited for busy from start to end.
inline bool sleeps_until_almost_ready(const ggml_tensor * node) {
    if (node->buffer == nullptr || ggml_backend_buffer_is_host(node->buffer)) {
        return false;
    }
    const char * name = ggml_backend_buffer_name(node->buffer);
    return name != nullptr && std::strncmp(name, "Vulkan", 6) == 0;
}

// Index of the first node of an n-node view that ggml-vulkan waits for busy: the one after the
// almost-ready fence's node n - n/5 + 1; 0 (all of them) when n/5 < 2; n when none.
inline size_t first_spun_node(size_t n) {
    const size_t fifth = n / 5;
    return fifth >= 2 ? n - fifth + 2 : 0;
}

// Share of a view's work (one entry per node, in order) that is waited for busy.
inline double spun_share(const double * work, size_t n) {
    double all = 0.0, spun = 0.0;
    const size_t first = first_spun_node(n);
    for (size_t i = 0; i < n; ++i) {
        all += work[i];
        spun += i >= first ? work[i] : 0.0;
    }
    return all > 0.0 ? spun / all : 1.0;
}

} // namespace llama_cancel
