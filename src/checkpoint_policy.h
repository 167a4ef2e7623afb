// Where eval-callback checkpoints go: the one cost model behind llama_cancel_hook and the stateless
// llama_cancel_eval_callback.
//
// ggml's scheduler asks about the nodes of a split (ask = true) before computing them, back to back,
// groups them up to the first node answered true into one graph view, computes and synchronizes
// that view, and only then calls ask = false for that node. Each node answered true is a checkpoint:
// the only place a stop can be seen, and a backend synchronize. The policy answers true once the
// work grouped since the last checkpoint reaches a budget, the work a device gets through in
// `interval` ms at the rate measured on it, so that checkpoints fall about that far apart in compute
// time whatever the node sizes and the device's speed.
//
// Rates are measured over ranges that end in a checkpoint, from the range's first ask (a view's
// compute starts right after its asks) to the checkpoint. A pause between two asks means the view
// asked before it was computed without a checkpoint (the end of a split), and maybe that the host
// did something else meanwhile: built the next graph, or waited minutes for its user. The pause is
// counted as compute, and the range goes on, only when that view could take that long at the rate
// known so far (k_pause_factor); otherwise the next ask opens a new range, so idle time is never
// taken for compute. Every timing error this leaves makes a rate look lower, never higher: more
// checkpoints, not later ones.
#pragma once

#include "llama-cancel.h"

#include "ggml.h"

#include <cstdint>

namespace llama_cancel {

// Which device computes `node`, as a key for the policy's per-device rates: the device of the
// node's buffer, or NULL for host memory (the CPU and BLAS backends, which share the host's cores).
const void * device_key(const ggml_tensor * node);

class checkpoint_policy {
  public:
    // Budget bounds (FLOPs between checkpoints): at least a few MFLOPs, so that tiny graphs do not
    // synchronize at every node; at most enough that even a slow device, once measured, reaches a
    // checkpoint within the interval. A device not measured yet starts at k_initial_budget.
    static constexpr double k_min_budget     = 4.0e6;
    static constexpr double k_initial_budget = 2.0e8;
    static constexpr double k_max_budget     = 1.0e13;
    // Asks of one view follow each other within microseconds: a shorter pause is part of the range.
    static constexpr double k_ask_gap_ms = 0.25;
    // A longer pause is compute when at most this many times what the view before it takes at the
    // rate known so far.
    static constexpr double k_pause_factor = 3.0;
    // The budget is updated once measured views add up to this share of the interval, so that one
    // short view (mostly synchronize) does not steer it.
    static constexpr double k_sample_share = 0.25;
    // Devices whose rates are kept; the least recently used one is forgotten beyond that.
    static constexpr int k_devices = 4;

    explicit checkpoint_policy(double interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS);

    // At ask time, `now` in ms (now_ms, clock.h): counts `node`'s work against the budget of `device`.
    // True when the node should be a checkpoint.
    bool place(const ggml_tensor * node, const void * device, double now);
    // At a checkpoint (ask = false, the view computed): measures the view's rate, adapts its
    // device's budget and restarts the count.
    void passed(double now);
    // Forgets the work counted and the open view, keeps what was learnt: for a new graph, or a
    // graph abandoned at a stop (its cut view measures nothing).
    void reset();
    // Target compute time between checkpoints; <= 0 means LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS.
    // Learnt budgets scale with it.
    void   set_interval(double interval_ms);
    double interval_ms() const { return interval_; }

    // Current budget of `device` (k_initial_budget when not measured yet).
    double budget(const void * device) const;
    // Budget of the device most recently asked about.
    double budget() const;

  private:
    struct device_rate {
        const void * device      = nullptr;
        bool         used        = false;
        uint64_t     last_use    = 0;
        double       budget      = k_initial_budget;
        double       sample_work = 0.0; // measured views not yet applied to the budget
        double       sample_ms   = 0.0;
    };

    device_rate & rate_of(const void * device);
    bool          pause_was_compute(const device_rate & d, double now) const;
    void          learn(device_rate & d, double work, double ms);

    double      interval_;
    device_rate devices_[k_devices];
    uint64_t    uses_ = 0;

    double       progress_     = 0.0;   // work since the last checkpoint, in budgets (1 = due)
    bool         range_open_   = false;
    const void * range_device_ = nullptr;
    double       range_start_  = 0.0;   // ms: first ask of the measured range
    double       range_work_   = 0.0;
    double       view_work_    = 0.0;   // work asked since the last pause: the view being grouped
    double       last_ask_     = 0.0;
    const void * last_device_ = nullptr;
};

} // namespace llama_cancel
