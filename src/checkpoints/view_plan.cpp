#include "checkpoints/view_plan.h"

#include "checkpoints/backend_wait.h"

#include <limits>

namespace llama_cancel {

std::vector<uint8_t> plan_views(const float * ms, const uint8_t * fence, const uint8_t * starts, size_t n,
                                double max_view_ms, double view_cost_ms, size_t max_nodes) {
    std::vector<uint8_t> cuts(n, 0);
    if (n == 0) {
        return cuts;
    }
    // prefix[i]: time of nodes [0, i). next_sure[i], next_maybe[i]: the first node from i on that
    // surely carries the fence, that may carry it (n: none). split[i]: where the split holding node
    // i begins. best[b]: least cost of views covering nodes [0, b); start[b]: where the last of
    // them begins.
    std::vector<double> prefix(n + 1, 0.0), best(n + 1, std::numeric_limits<double>::infinity());
    std::vector<size_t> start(n + 1, 0), next_sure(n + 1, n), next_maybe(n + 1, n), split(n, 0);
    for (size_t i = 0; i < n; ++i) {
        prefix[i + 1] = prefix[i] + (ms[i] > 0.0f ? ms[i] : 0.0f);
        split[i]      = starts != nullptr && starts[i] != 0 ? i : (i > 0 ? split[i - 1] : 0);
    }
    for (size_t i = n; i-- > 0;) {
        next_sure[i]  = fence[i] == k_fence_carries ? i : next_sure[i + 1];
        next_maybe[i] = fence[i] != k_fence_none ? i : next_maybe[i + 1];
    }
    best[0] = 0.0;
    for (size_t b = 1; b <= n; ++b) {
        // views [a, b) within one split, the shortest first: once one is too long, longer ones are too
        for (size_t len = 1; len <= b - split[b - 1] && len <= max_nodes; ++len) {
            const size_t a    = b - len;
            const double time = prefix[b] - prefix[a];
            if (len > 1 && time > max_view_ms) {
                break;
            }
            // first_spun_node of the view: after the first node of its window that may carry the
            // fence, where one there surely can; else all of it
            const size_t window = a + fence_window(len);
            const bool   sure   = next_sure[window] < b;
            const double spun   = prefix[b] - prefix[sure ? next_maybe[window] + 1 : a];
            const double cost   = best[a] + spun + view_cost_ms;
            if (cost < best[b]) {
                best[b]  = cost;
                start[b] = a;
            }
        }
    }
    for (size_t b = start[n]; b > 0; b = start[b]) {
        cuts[b - 1] = 1;
    }
    return cuts;
}

double spun_ms(const float * ms, const uint8_t * fence, const uint8_t * starts, const uint8_t * cuts, size_t n) {
    double spun = 0.0;
    size_t a    = 0;
    for (size_t i = 0; i < n; ++i) {
        if (cuts[i] != 0 || i + 1 == n || (starts != nullptr && starts[i + 1] != 0)) {
            const size_t len = i + 1 - a;
            for (size_t j = a + first_spun_node(fence + a, len); j <= i; ++j) {
                spun += ms[j];
            }
            a = i + 1;
        }
    }
    return spun;
}

} // namespace llama_cancel
