#include "slice_budget.h"

#include <algorithm>
#include <cmath>

namespace llama_cancel {

namespace {
// The first call probes with a few tokens: its nodes are short whatever the model.
constexpr int32_t k_probe_tokens = 16;
// Slices aim at this share of the budget: node times vary from call to call on a busy machine.
constexpr double k_headroom = 0.7;
} // namespace

slice_budget::slice_budget(float budget_ms, int32_t n_ubatch)
    : budget_ms_(budget_ms), n_ubatch_(std::max(1, n_ubatch)),
      next_(budget_ms > 0.0f ? std::min(k_probe_tokens, std::max(1, n_ubatch)) : std::max(1, n_ubatch)) {}

void slice_budget::begin_call() {
    last_node_ = -1.0;
    top_[0] = top_[1] = top_[2] = 0.0;
}

void slice_budget::on_node(double now_ms) {
    // The first node's time also holds the graph's build and allocation: not counted.
    if (last_node_ >= 0.0) {
        double d = now_ms - last_node_;
        for (double & t : top_) {
            if (d > t) {
                std::swap(d, t);
            }
        }
    }
    last_node_ = now_ms;
}

void slice_budget::end_call(int32_t n_tokens, double device_node_ms) {
    longest_all_ = std::max({longest_all_, top_[0], device_node_ms});
    const double heavy = std::max(top_[2] > 0.0 ? top_[2] : top_[0], device_node_ms);
    if (!active() || n_tokens <= 0) {
        return;
    }
    if (heavy <= 0.0) {
        next_ = n_ubatch_; // no node timed nor estimated: nothing says the slice must be smaller
        return;
    }
    // Matrix products scale with the tokens of the slice: the per-token cost sets the next size.
    const double per_token = heavy / n_tokens;
    per_token_ = per_token_ > 0.0 ? 0.5 * (per_token_ + per_token) : per_token;
    const double fit = std::floor(k_headroom * budget_ms_ / per_token_);
    next_ = static_cast<int32_t>(std::clamp(fit, 1.0, static_cast<double>(n_ubatch_)));
}

} // namespace llama_cancel
