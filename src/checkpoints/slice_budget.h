// Slice sizes for a decode under a stop-time budget (llama_cancel_decode_params.max_stop_ms).
//
// On the CPU a stop waits for the graph node in flight, and the longest node (a feed-forward or
// output matrix product) grows with the tokens in the ubatch. The abort callback runs after every
// node on the decoding thread, so the time between two of its calls is that node's time, measured
// for free. This keeps each llama_decode call small enough that its longest node stays within the
// budget, from what the previous calls measured, and lets slices grow back when the nodes allow.
// The size follows the third-longest node of a call: a model's heavy nodes (the feed-forward
// products) come three to a layer, while a thread preempted by another process makes one node
// look long, and that must not shrink the slices to nothing.
#pragma once

#include <cstdint>

namespace llama_cancel {

class slice_budget {
  public:
    // `budget_ms` <= 0: inactive, one slice of n_ubatch.
    slice_budget(float budget_ms, int32_t n_ubatch);

    bool active() const { return budget_ms_ > 0.0f; }
    // Tokens for the next llama_decode call.
    int32_t next() const { return next_; }

    void begin_call();
    // From the abort callback, after each node of the call in flight. `device_asks`: the eval
    // callbacks' count of asks about device nodes (device_asks, eval_callback.h); where it moved
    // since the previous node, a device split ran between the two and the gap is not a CPU node.
    void on_node(double now_ms, uint64_t device_asks = 0);
    // Adapts the next slice to the call that decoded `n_tokens`: to its longest nodes as on_node
    // timed them, and to `device_view_ms`, the longest time between two eval-callback checkpoints
    // on a GPU or RPC device (whose nodes the abort callback never sees; 0: none).
    void end_call(int32_t n_tokens, double device_view_ms = 0.0);

    // Longest CPU node or device view over the decode, ms (0 before any): what a stop waited for.
    float longest_ms() const { return static_cast<float>(longest_all_); }
    // True when a node took longer than the budget.
    bool missed() const { return active() && longest_all_ > budget_ms_; }

  private:
    double device_fit(int32_t n_tokens, double view_ms);

    float   budget_ms_;
    int32_t n_ubatch_;
    int32_t next_;
    double  last_node_   = -1.0;           // time of the previous node's end in this call
    uint64_t last_device_asks_ = 0;        // device_asks at that node
    double  top_[3]      = {0.0, 0.0, 0.0}; // this call's three longest nodes, longest first
    double  per_token_   = 0.0;            // smoothed ms per slice token of the heavy nodes
    double  longest_all_ = 0.0;
    int32_t ceiling_;                      // smallest slice whose device view outlasted the budget
};

} // namespace llama_cancel
