// Where eval-callback checkpoints go: the one cost model behind llama_cancel_hook and the stateless
// llama_cancel_eval_callback. Its numbers: policy_constants.h.
//
// ggml's scheduler asks about the nodes of a split (ask = true) before computing them, back to back,
// groups them up to the first node answered true into one graph view, computes and synchronizes
// that view, and only then calls ask = false for that node. Each node answered true is a checkpoint:
// the only place a stop can be seen, and a backend synchronize. The policy answers true once the
// work grouped since the last checkpoint reaches a quota, the work a device gets through in
// `interval` ms at the rate measured on it, so that checkpoints fall about that far apart in compute
// time whatever the node sizes and the device's speed.
//
// Rates are measured over ranges that end in a checkpoint, from the range's first ask (a view's
// compute starts right after its asks) to the checkpoint. A pause between two asks is counted as
// compute, and the range goes on, only when the view before it could take that long at the rate
// known so far (k_pause_factor); otherwise the next ask opens a new range, so a host's idle time is
// never taken for compute. Every timing error this leaves makes a rate look lower: more
// checkpoints, not later ones.
//
// Where a checkpoint's synchronize is a network round trip (RPC), the interval of that device grows
// so that checkpoints cost about k_cost_share of the compute, but never past 1/k_min_graph_checkpoints
// of the last graph's compute. A stop-time budget caps the interval whatever it costs (set_cap).
//
// A graph seen before (its first node asked again: llama.cpp and clip build each graph in the same
// memory) follows a stable plan (stable_plan.h): its checkpoints fall on the same nodes call after
// call, so that each view is the same graph for a GPU API to replay, and a graph within the
// interval runs uncut. A ggml-vulkan device that computes on the host's cores (llvmpipe) gets the
// emulated-device strategy's views (emulated_device.h); real GPUs never do.
#pragma once

#include "llama-cancel.h"
#include "checkpoints/backend_wait.h"
#include "checkpoints/emulated_device.h"
#include "checkpoints/graph_head.h"
#include "checkpoints/pointer_set.h"
#include "checkpoints/policy_constants.h"
#include "checkpoints/stable_plan.h"
#include "checkpoints/work.h"

#include "ggml.h"

#include <cstddef>
#include <cstdint>

namespace llama_cancel {

// Which device computes `node`, as a key for the policy's per-device rates: the device of the
// node's buffer, or NULL for host memory (the CPU and BLAS backends, which share the host's cores).
const void * device_key(const ggml_tensor * node);

class checkpoint_policy {
  public:
    // What the policy needs of a node's device: its key (device_key) and whether it is an emulated
    // one (on_emulated_vulkan).
    struct node_device {
        const void * key      = nullptr;
        bool         emulated = false;
        bool         rpc      = false; // an RPC server's memory (on_rpc_server)
    };

    explicit checkpoint_policy(double interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS);

    // device_key and on_emulated_vulkan of `node`, remembered for the last buffer and its type: a
    // graph's nodes share a few buffers, and asking ggml twice an ask was a seventh of its cost.
    node_device device_of(const ggml_tensor * node);
    // The time of the ask at hand of `node` on `device`, ms: `now()` (a clock, ms) at the first ask
    // after a checkpoint or reset, on a change of device, at a graph's first node and every
    // tuning::k_clock_every asks; the time read last in between (a clock read was half an ask's
    // cost, and the asks of one view follow each other within microseconds).
    template <typename Clock> double ask_time(const ggml_tensor * node, const void * device, Clock now) {
        if (!range_open_ || device != range_device_ || ++stale_asks_ >= tuning::k_clock_every || graph_pending_ ||
            node == head_.node) {
            stale_asks_ = 0;
            return now();
        }
        return last_ask_;
    }
    // At ask time `now` (ms): counts `node`'s work against the quota of `device`. `emulated`: the
    // device is one the emulated-device strategy places views on; `fence`: the node's fence_role
    // there. True when the node should be a checkpoint.
    bool place(const ggml_tensor * node, const void * device, double now, bool emulated = false,
               uint8_t fence = k_fence_carries);
    // True when the checkpoint at hand should time its round trip (passed's `round_trip_ms`): the
    // device of the node asked last has none measured yet, or its turn came.
    bool wants_round_trip() const;
    // At a checkpoint (ask = false, the view computed at `now`): measures the view's rate, adapts
    // its device's quota and restarts the count. `round_trip_ms` >= 0: what one more read of the
    // node took (a checkpoint's own cost).
    void passed(double now, double round_trip_ms = -1.0);
    // The next ask is a new graph's first (a call's llama_decode or encode), wherever that graph was
    // built; `before_ms` ran before it in the same call (the emulated-device strategy's views may
    // last a share of both).
    void begin_graph(double before_ms = 0.0) {
        graph_pending_     = true;
        pending_before_ms_ = before_ms > 0.0 ? before_ms : 0.0;
    }
    // The graph in flight returned at `now` (a call saw llama_decode or the encode return): its last
    // view, which no checkpoint ends, took until then. Outside calls that end is seen only at the
    // next graph's first ask, where host time cannot be told from compute (k_pause_factor).
    void graph_returned(double now) { returned_ms_ = now; }
    // The run clock of graphs no call tells of (emulated_device.h); not owned.
    void set_run_clock(run_clock * clock) { emulated_.set_run_clock(clock); }
    // Forgets the work counted and the open view, keeps what was learnt: for a new graph, or a
    // graph abandoned at a stop (its cut view measures nothing).
    void reset();
    // The graph in flight was stopped: reset(), and it is not planned from.
    void abandon_graph();
    // Calls a policy may run held (call::hold_if_short), known by their first graph.
    // `graph_is_short`: at a call's first ask, remembers the graph in flight as the call's, and
    // answers whether a call that began with it finished within the interval in force when last
    // noted. `note_graph_ms`: that call took `ms`. `hold_graph`: the graph in flight runs on with no
    // asks priced; nothing of it is learnt, and the next ask opens a new range.
    bool graph_is_short();
    void note_graph_ms(double ms);
    void hold_graph();
    // While the graph in flight follows a stable plan with no cut (it fits in the interval), its
    // asks after the first need only see where the next graph begins: true where `node` is such an
    // ask (answer false, nothing priced); false where the ask goes to place() (ask_time first).
    // Every ask comes here first: its count is what a plan knows its graph by.
    bool uncut_ask(const ggml_tensor * node) {
        every_ask_++;
        if (!uncut_ || graph_pending_ || graph_asks_ >= tuning::k_graph_nodes) {
            return false;
        }
        if (graph_nodes_.size() < tuning::k_graph_first_nodes ? !graph_nodes_.insert(node) : graph_nodes_.contains(node)) {
            return false; // asked before: a new graph begins here
        }
        if (every_ask_ > stable_.uncut_asks()) {
            // Past the planned graph's asks with no node of it asked again: another graph (a new
            // context's, in a buffer an old one left) runs on. It begins here, to be measured.
            uncut_overran_ = true;
            return false;
        }
        graph_asks_++;
        return true;
    }
    // True while the graph in flight follows a stable plan; how many times a kept graph's
    // checkpoints moved.
    bool     stable() const { return stable_.following(); }
    uint64_t stable_replans() const { return stable_.replans(); }
    // The emulated-device strategy, as it stands (its plan).
    const emulated_device_views & emulated() const { return emulated_; }
    // Target compute time between checkpoints; <= 0 means LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS.
    void   set_interval(double interval_ms);
    double interval_ms() const { return interval_; }
    // A hard upper bound on the interval, round-trip cost or not (a stop-time budget's share, or a
    // call's share of the interval); <= 0: none. `strict`: a promise (a stop-time budget's), kept
    // by the rules at each ask, no plan followed.
    void set_cap(double cap_ms, bool strict = true) {
        const double cap = cap_ms > 0.0 ? cap_ms : 0.0;
        if (cap != cap_) {
            cap_       = cap;
            inv_quota_ = 0.0;
        }
        cap_strict_ = cap > 0.0 && strict;
    }
    double cap_ms() const { return cap_; }
    // The interval in force on `device`: the target, lengthened for the round trip, within the cap.
    double interval_ms(const void * device) const;
    // The measured round trip of one checkpoint on `device`, ms; 0 when not measured.
    double round_trip_ms(const void * device) const;
    // The device most recently asked about.
    const void * last_device() const { return last_device_; }
    // True when the node of the last place() began a new graph (it was asked before in the graph).
    bool graph_began() const { return began_; }
    // Current quota of `device`, FLOPs (tuning::k_initial_quota when not measured yet); of the
    // device most recently asked about.
    double quota(const void * device) const;
    double quota() const;
    // The longest time between two checkpoints on a device (not the host) since the last take, ms
    // (0: none): what a stop there may wait for (a stop-time budget sizes slices from it).
    double take_longest_view_ms();

  private:
    struct device_rate {
        const void * device   = nullptr;
        bool         used     = false;
        uint64_t     last_use = 0;
        // FLOPs per ms, kept apart from the interval: a quota clamped for a short interval comes
        // back whole with the longer one.
        double       rate        = tuning::k_initial_quota / LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
        double       sample_work = 0.0; // measured views not yet applied to the rate
        double       sample_ms   = 0.0;
        bool         measured    = false; // the rate was learnt at least once
        // The last round trips timed, ms; the interval follows their minimum (a busy host only
        // makes some longer).
        double       trips[tuning::k_trip_samples] = {};
        uint32_t     n_trips    = 0;
        double       round_trip = 0.0; // ms, the minimum of trips; 0: not measured
        uint32_t     since_trip = 0;   // checkpoints since the round trip was last timed
        double       graph_acc  = 0.0; // the graph in flight's work there so far
    };
    struct timed_graph {
        graph_head head;
        double     ms       = 0.0;
        uint64_t   last_use = 0; // 0: the slot is free
    };

    device_rate &       rate_of(const void * device);
    device_rate &       asked(const void * device);
    const device_rate * find(const void * device) const;
    device_timing       timing(const device_rate & d) const;
    double              inv_quota();
    double              quota_of(const device_rate & d) const;
    double              interval_of(const device_rate & d) const;
    double              interval_on(const void * device) const;
    bool                pause_was_compute(const device_rate & d, double now) const;
    void                open_range(const void * device, bool emulated, double now);
    bool                open_graph_at(const ggml_tensor * node, double now); // true where a graph begins
    void                open_graph(const ggml_tensor * head, bool whole, double now);
    void                time_tail(double end, bool returned);
    void                learn(device_rate & d, double work, double ms);
    void                end_view(); // reset() but for the measured range, which goes on

    double      interval_;
    double      cap_        = 0.0;
    bool        cap_strict_ = false;
    device_rate devices_[tuning::k_devices];
    uint64_t    uses_ = 0;
    // The device of the last ask and its quota's reciprocal (0: to compute), kept while nothing
    // they depend on changes: finding them at every ask was a third of the policy's cost.
    int    asked_     = -1; // index into devices_ (a copied policy stays whole)
    double inv_quota_ = 0.0;

    // The view being grouped and the measured range it belongs to.
    double       progress_       = 0.0; // work since the last checkpoint, in quotas (1 = due)
    bool         range_open_     = false;
    const void * range_device_   = nullptr;
    double       range_start_    = 0.0; // ms: first ask of the measured range
    double       range_work_     = 0.0;
    bool         range_emulated_ = false;
    size_t       range_first_    = 0;   // the range's first node in the graph (stable plans' count)
    double       view_work_      = 0.0; // work asked since the last pause
    double       last_ask_       = 0.0;
    uint32_t     stale_asks_     = 0;   // asks since the clock was read
    const void * last_device_    = nullptr;
    double       longest_view_   = 0.0;

    // The graph in flight.
    graph_head  head_;                     // its first node, and which graph begins there
    graph_ids   ids_;                      // tells graphs beginning at one node apart
    pointer_set graph_nodes_;              // its first nodes asked
    size_t      graph_asks_        = 0;
    double      graph_ms_          = 0.0;  // the last whole graph's compute, all devices; 0: not known
    bool        began_             = false;
    bool        graph_pending_     = false; // begin_graph() was called: the next ask opens a graph
    double      pending_before_ms_ = 0.0;
    bool        graph_cut_         = false; // stopped (abandon_graph)
    bool        graph_unpriced_    = false; // held or uncut: its asks not priced
    bool        uncut_             = false; // runs uncut (uncut_ask)
    double      uncut_start_       = 0.0;   // ms: its first ask
    bool        uncut_overran_     = false; // it ran past them: a new graph begins
    size_t      every_ask_         = 0;     // asks since its first, every one (uncut_ask's count)
    double      returned_ms_       = 0.0;   // graph_returned's; 0: not told

    timed_graph timed_[tuning::k_graph_records]; // note_graph_ms's
    graph_head  call_head_;                     // graph_is_short's
    uint64_t    timed_uses_ = 0;

    type_sizes            sizes_;
    const void *          cached_buffer_ = nullptr; // device_of's last buffer, its type and its answer
    const void *          cached_buft_   = nullptr;
    node_device           cached_device_;
    stable_plans          stable_;
    emulated_device_views emulated_;
};

} // namespace llama_cancel
