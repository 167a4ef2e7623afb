#include "checkpoints/slice_budget.h"

#include <algorithm>
#include <cmath>

namespace llama_cancel {

namespace {
// The first call probes with a few tokens: its nodes are short whatever the model.
constexpr int32_t k_probe_tokens = 16;
// Slices aim at this share of the budget: node times vary from call to call on a busy machine.
constexpr double k_headroom = 0.7;
// A device's time between checkpoints is held near the checkpoint interval (k_headroom of the
// budget, decode.cpp); one past this share of the budget holds a node checkpoints cannot split.
constexpr double k_view_share = 0.9;
} // namespace

slice_budget::slice_budget(float budget_ms, int32_t n_ubatch)
    : budget_ms_(budget_ms), n_ubatch_(std::max(1, n_ubatch)),
      next_(budget_ms > 0.0f ? std::min(k_probe_tokens, std::max(1, n_ubatch)) : std::max(1, n_ubatch)),
      ceiling_(std::max(1, n_ubatch) + 1) {}

void slice_budget::begin_call() {
    last_node_ = -1.0;
    top_[0] = top_[1] = top_[2] = 0.0;
}

void slice_budget::on_node(double now_ms, uint64_t device_asks) {
    // The first node's time also holds the graph's build and allocation: not counted; nor a gap
    // that holds a device split (the eval callback times those views).
    const bool device_between = device_asks != last_device_asks_;
    last_device_asks_ = device_asks;
    if (last_node_ >= 0.0 && !device_between) {
        double d = now_ms - last_node_;
        for (double & t : top_) {
            if (d > t) {
                std::swap(d, t);
            }
        }
    }
    last_node_ = now_ms;
}

void slice_budget::end_call(int32_t n_tokens, double device_view_ms) {
    longest_all_ = std::max({longest_all_, top_[0], device_view_ms});
    if (!active() || n_tokens <= 0) {
        return;
    }
    double fit = n_ubatch_; // nothing timed: nothing says the slice must be smaller
    const double heavy = top_[2] > 0.0 ? top_[2] : top_[0];
    if (heavy > 0.0) {
        // Matrix products scale with the tokens of the slice: the per-token cost sets the next size.
        const double per_token = heavy / n_tokens;
        per_token_ = per_token_ > 0.0 ? 0.5 * (per_token_ + per_token) : per_token;
        fit = std::floor(k_headroom * budget_ms_ / per_token_);
    }
    if (device_view_ms > 0.0) {
        fit = std::min(fit, device_fit(n_tokens, device_view_ms));
    }
    next_ = static_cast<int32_t>(std::clamp(fit, 1.0, static_cast<double>(n_ubatch_)));
}

double slice_budget::device_fit(int32_t n_tokens, double view_ms) {
    // Too long a view: shrink in proportion, and never grow back to this size in this decode.
    if (view_ms > k_view_share * budget_ms_) {
        ceiling_ = std::min(ceiling_, n_tokens);
        return std::floor(n_tokens * k_headroom * budget_ms_ / view_ms);
    }
    // Within the budget, the view says little of the nodes (checkpoints keep it short): grow twofold,
    // below the smallest size found too long.
    return std::min(2.0 * n_tokens, static_cast<double>(ceiling_ - 1));
}

} // namespace llama_cancel
