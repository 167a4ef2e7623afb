#include "view_plan.h"

#include "backend_wait.h"

#include <limits>

namespace llama_cancel {

std::vector<uint8_t> plan_views(const float * ms, const uint8_t * fence, const uint8_t * starts, size_t n,
                                double max_view_ms, double view_cost_ms, size_t max_nodes) {
    std::vector<uint8_t> cuts(n, 0);
    if (n == 0) {
        return cuts;
    }
    // prefix[i]: time of nodes [0, i). next_fence[i]: the first node from i on that can carry the
    // fence (n: none). split[i]: where the split holding node i begins. best[b]: least cost of
    // views covering nodes [0, b); start[b]: where the last of them begins.
    std::vector<double> prefix(n + 1, 0.0), best(n + 1, std::numeric_limits<double>::infinity());
    std::vector<size_t> start(n + 1, 0), next_fence(n + 1, n), split(n, 0);
    for (size_t i = 0; i < n; ++i) {
        prefix[i + 1] = prefix[i] + (ms[i] > 0.0f ? ms[i] : 0.0f);
        split[i]      = starts != nullptr && starts[i] != 0 ? i : (i > 0 ? split[i - 1] : 0);
    }
    for (size_t i = n; i-- > 0;) {
        next_fence[i] = fence[i] != 0 ? i : next_fence[i + 1];
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
            // first_spun_node of the view, from next_fence: the node the fence goes with, if any
            const size_t fenced = next_fence[a + fence_window(len)];
            const double spun   = prefix[b] - prefix[fenced < b ? fenced + 1 : a];
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
