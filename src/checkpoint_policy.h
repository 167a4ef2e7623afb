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
//
// A checkpoint also has a cost of its own where the backend's synchronize is a network round trip
// (RPC): the remote device idles while the byte's read goes and comes back. Where the callback can
// time that round trip (a second read of a computed node, now and then), the interval of that
// device grows so that checkpoints cost about k_cost_share of the compute, but never past
// 1/k_min_graph_checkpoints of the last graph's compute (all its devices): a graph shorter than
// 100 round trips still gets a few checkpoints (a stop within about a quarter of it, for a few
// round trips more than 1%). A stop-time budget caps the interval whatever it costs (set_cap): the budget wins.
//
// Where the host can sleep through part of a synchronize (ggml-vulkan, backend_wait.h), a view
// whose heavy nodes fall in the busy-waited tail keeps a core spinning, and a view of fewer than
// ten nodes, or with no node to carry the almost-ready fence near its end, is waited for busy
// whole. Once the budget is reached on such a device, the checkpoint goes on the first
// node where the view has a node for the fence and a busy tail of at most k_spun_share of its
// work, or k_sleep_budgets budgets with a node for the fence.
// Where a 10 ms view holds hundreds of nodes (a GPU) this moves checkpoints by a node or two; where
// single nodes outlast the budget (llvmpipe, a slow GPU) views hold ten nodes instead of one, a
// longer stop for a core that sleeps. That is only worth it while a view stays a small share of
// the graph (k_sleep_graph_share of the graph's work on that device: a stop then waits about that
// share of what it would wait without checkpoints); past it the budget ends the view. The graph's
// work is what a graph with the same first node (address, op and shape) did last time, on that
// device (k_graph_records remembered), or before one was seen, its work so far: a lower bound, so
// views grow with the graph. A llama.cpp context alternates graphs of several shapes (a prompt's
// text, then media embeddings ten times its size), and the last graph's work was the wrong share
// for the next. A graph's end is seen when one of its first nodes comes again (llama.cpp and clip
// build each graph in the same memory), or where a call says its graph begins (begin_graph). A
// stop-time budget's cap turns it off.
//
// Once such a graph was seen whole (not stopped), its views are planned (view_plan.h) where its
// nodes are slow for the interval (on average more than 1/k_plan_nodes_per_interval of it): the
// policy keeps each node's time there (its view's measured time, shared out by the times its
// nodes took the graph before, or by work; work at the device's rate where no view was timed),
// and the next graph with the same first node ends its views where the plan says, while its nodes
// are the ones planned (the same device, each node's work within a factor k_plan_work_slack of the
// planned one's). Where the graph leaves the device for the host and comes back (attention kept on
// the host, layers not offloaded), the device's split ends there by itself, computed and waited
// for whole: a view never spans the host's split, in a plan as at each ask. A plan's views last at most
// k_sleep_graph_share of the graph or k_sleep_budgets intervals, whichever is longer, and cost
// the least busy-waited time. Each time the graph ends whole it is planned again from the times
// just measured, so a node slower than its work says (im2col and a conv's product on llvmpipe
// take twice the time of others of their work) is given the time it took.
#pragma once

#include "llama-cancel.h"
#include "backend_wait.h"
#include "graph_head.h"
#include "pointer_set.h"
#include "stable_plan.h"
#include "work.h"

#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

// Which device computes `node`, as a key for the policy's per-device rates: the device of the
// node's buffer, or NULL for host memory (the CPU and BLAS backends, which share the host's cores).
const void * device_key(const ggml_tensor * node);

// Outside the library's calls no call says where a run of graphs began (upstream's mtmd helper: a
// prompt's encodes and decodes, one after the other). The policies of one thread share a run clock
// that tells it from the gaps between graphs: a graph whose first ask comes within
// checkpoint_policy::k_run_gap_ms of the time the graph before it was due computed goes on with
// that run.
struct run_clock {
    double began    = 0.0; // ms: the run's first ask
    double busy_end = 0.0; // ms: when the work asked last was due computed; 0: nothing asked yet
};

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
    // Checkpoints cost at most this share of the compute: the interval is at least the measured
    // round trip divided by it.
    static constexpr double k_cost_share = 0.01;
    // The round trip is timed again every this many checkpoints of a device (each timing is one
    // more round trip).
    static constexpr uint32_t k_cost_sample_every = 32;
    // The round trip's stretch leaves a graph at least about this many checkpoints.
    static constexpr double k_min_graph_checkpoints = 4.0;
    static constexpr uint32_t k_trip_samples      = 8;
    // Views on a device the host sleeps on: the busy tail's share that ends a view at once, how far
    // past the budget a view may run to find such a place, and the share of its graph (and of what
    // ran before it in its call or run) a view may take.
    static constexpr double k_spun_share      = 0.1;
    static constexpr double k_sleep_budgets   = 2.0;
    static constexpr double k_sleep_graph_share = 0.1;
    // Asks of one graph past which its end is not looked for (its work not known).
    static constexpr size_t k_graph_nodes = 1u << 16;
    // Nodes remembered to see a graph end: a graph's first ones. A graph built again in the same
    // memory asks one of them first, and a set that small stays in the nearest cache (one of every
    // node was a cache miss an ask, the policy's largest cost).
    static constexpr size_t k_graph_first_nodes = 64;
    // Graphs (first node and device) whose work is remembered; the least recently used is
    // forgotten beyond that.
    static constexpr int k_graph_records = 8;
    // A view on a device the host sleeps on that ends at a node not sure to carry the fence and
    // took less than this share of what its work takes at the measured rate was not waited for
    // (passed): it is timed with the next one. Not under a cap.
    static constexpr double k_unwaited_share = 0.25;
    // A view's time is shared among its nodes by what each took before, at least this share of what
    // its work takes (time_range).
    static constexpr double k_work_weight = 0.25;
    // Asks between two clock reads (ask_time).
    static constexpr uint32_t k_clock_every = 8;
    // Plans (view_plan.h): graphs whose nodes take on average more than this share of the interval
    // are planned; a view costs k_plan_view_cost of the interval beside its busy tail (a
    // synchronize and the next submit); a view holds at most k_plan_max_nodes nodes; a plan is
    // followed while each node's work is within this factor of the planned node's; graphs with
    // more sleeping nodes than k_plan_nodes are not planned; k_plans graphs are kept.
    static constexpr double k_plan_nodes_per_interval = 30.0;
    static constexpr double k_plan_view_cost          = 0.05;
    static constexpr size_t k_plan_max_nodes          = 256;
    static constexpr double k_plan_work_slack         = 2.0;
    static constexpr size_t k_plan_nodes              = 1u << 14;
    static constexpr int    k_plans                   = 4;
    // A plan's cuts are kept while its views, as last timed, stay within this factor of the
    // longest allowed (past it, planned again from the times just measured).
    static constexpr double k_plan_view_over          = 1.05;
    // A graph no call told of (run_clock): it goes on with the run of the graph before it when it
    // begins within k_run_gap_ms of that one's computed end (a host's work between graphs takes
    // milliseconds, its user's seconds), and what ran before it in that run counts up to
    // k_run_graphs times the graph's own time (a host whose graphs follow each other all day is
    // still stopped within a fifth of a graph).
    static constexpr double k_run_gap_ms = 100.0;
    static constexpr double k_run_graphs = 1.0;

    // What the policy needs of a node's device: its key (device_key) and whether the host sleeps
    // through its views (sleeps_until_almost_ready).
    struct node_device {
        const void * key    = nullptr;
        bool         sleeps = false;
    };

    explicit checkpoint_policy(double interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS);

    // device_key and sleeps_until_almost_ready of `node`, remembered for the last buffer and its
    // type: a graph's nodes share a few buffers, and asking ggml twice an ask was a seventh of
    // an ask's cost.
    node_device device_of(const ggml_tensor * node);
    // The time of the ask at hand of `node` on `device`, ms: `now()` (a clock, ms) at the first ask
    // after a checkpoint or reset, on a change of device, at a graph's first node (a call told of
    // the graph, or the first node of the graph before comes again) and every k_clock_every asks;
    // the time read last in between. A clock read was half an ask's cost (over 30 ns on a VM), and
    // the asks of one view follow each other within microseconds: a pause between views is seen at
    // most k_clock_every - 1 asks late, their work counted with the view before it (which ends the
    // view being grouped late, by a few nodes' work, and a measured rate only lower). A pause
    // between graphs may be seconds, and a graph's start is when its run is told (run_clock):
    // read late, a graph outside calls seconds after the one before took the time of that one's
    // last ask, began before its run did and held single-node views (the stateless name on
    // glma:vulkan, +30% with the byte at 0).
    template <typename Clock> double ask_time(const ggml_tensor * node, const void * device, Clock now) {
        if (!range_open_ || device != range_device_ || ++stale_asks_ >= k_clock_every || graph_pending_ ||
            node == head_.node) {
            stale_asks_ = 0;
            return now();
        }
        return last_ask_;
    }
    // At ask time, `now` in ms (now_ms, clock.h, or ask_time): counts `node`'s work against the budget of `device`.
    // `sleeps`: the host sleeps through that device's views up to an almost-ready fence
    // (sleeps_until_almost_ready); `fence`: whether that fence can go with this node (fence_role).
    // True when the node should be a checkpoint.
    bool place(const ggml_tensor * node, const void * device, double now, bool sleeps = false,
               uint8_t fence = k_fence_carries);
    // True when the checkpoint at hand should time its round trip (passed's `round_trip_ms`): the
    // device of the node asked last has none measured yet, or its turn came.
    bool wants_round_trip() const;
    // At a checkpoint (ask = false, the view computed): measures the view's rate, adapts its
    // device's budget and restarts the count. `now` is when the view was known computed;
    // `round_trip_ms` >= 0 is what one more read of the node took (a checkpoint's own cost).
    void passed(double now, double round_trip_ms = -1.0);
    // The next ask is a new graph's first (the caller knows it: a call's llama_decode or encode),
    // wherever that graph was built; `before_ms` ran before it in the same call or run (call.h):
    // on a device the host sleeps on, a view may last a tenth of that and the graph together.
    // The run clock of graphs no call tells of (NULL: each such graph on its own); not owned.
    void set_run_clock(run_clock * clock) { run_ = clock; }
    void begin_graph(double before_ms = 0.0) {
        graph_pending_     = true;
        pending_before_ms_ = before_ms > 0.0 ? before_ms : 0.0;
    }
    // Forgets the work counted and the open view, keeps what was learnt: for a new graph, or a
    // graph abandoned at a stop (its cut view measures nothing).
    void reset();
    // The graph in flight was stopped: reset(), and it is not planned from (its nodes were not all
    // computed, its last view not timed).
    void abandon_graph();
    // Calls a policy may run held (call::hold_if_short), known by their first graph (a call may run
    // several). `graph_is_short`: at a call's first ask, remembers the graph in flight as the
    // call's, and answers whether a call that began with it finished within the interval in force
    // (cap included) when last noted. `note_graph_ms`: that call took `ms` (build and return
    // included). `hold_graph`: the graph in flight runs on with no asks priced; nothing of it is
    // learnt or remembered, and the next ask opens a new range.
    bool graph_is_short();
    void note_graph_ms(double ms);
    void hold_graph();
    // While the graph in flight follows a stable plan with no cut (it fits in the interval), its
    // asks after the first need only see where the next graph begins: true where `node` is such an
    // ask (answer false, nothing priced); false where the ask goes to place() (ask_time first).
    bool uncut_ask(const ggml_tensor * node) {
        if (!uncut_ || graph_pending_ || graph_asks_ >= k_graph_nodes) {
            return false;
        }
        if (graph_nodes_.size() < k_graph_first_nodes ? !graph_nodes_.insert(node) : graph_nodes_.contains(node)) {
            return false; // asked before: a new graph begins here
        }
        graph_asks_++;
        return true;
    }
    // True while the graph in flight follows a plan (a sleeping device's).
    bool planned() const { return plan_ >= 0; }
    // True while the graph in flight follows a stable plan (stable_plan.h); how many times a kept
    // graph's checkpoints moved.
    bool     stable() const { return stable_.following(); }
    uint64_t stable_replans() const { return stable_.replans(); }
    // The time that plan gives its node i, ms (what the node took when the graph last ran whole);
    // < 0 where there is none.
    float planned_ms(size_t i) const {
        return plan_ >= 0 && i < plans_[plan_].nodes.size() ? plans_[plan_].nodes[i].ms : -1.0f;
    }
    // Target compute time between checkpoints; <= 0 means LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS.
    // Learnt budgets scale with it.
    void   set_interval(double interval_ms);
    double interval_ms() const { return interval_; }
    // A hard upper bound on the interval, round-trip cost or not (a stop-time budget's share, or a
    // call's share of the interval); <= 0: none. `strict`: a promise (a stop-time budget's), kept
    // by the rules at each ask, no plan followed.
    void   set_cap(double cap_ms, bool strict = true) {
        const double cap = cap_ms > 0.0 ? cap_ms : 0.0;
        if (cap != cap_) {
            cap_        = cap;
            inv_budget_ = 0.0;
        }
        cap_strict_ = cap > 0.0 && strict;
    }
    double cap_ms() const { return cap_; }
    // The interval in force on `device`: the target, lengthened for the checkpoint's round trip,
    // within the cap.
    double interval_ms(const void * device) const;
    // The measured round trip of one checkpoint on `device`, ms; 0 when not measured.
    double round_trip_ms(const void * device) const;
    // The device most recently asked about.
    const void * last_device() const { return last_device_; }
    // True when the node of the last place() was asked before: a new graph began there. (Each node
    // of a graph is asked once per compute, and llama.cpp and clip build each graph in the same
    // memory, so a graph's first nodes come again.)
    bool graph_began() const { return began_; }

    // Current budget of `device` (k_initial_budget when not measured yet).
    double budget(const void * device) const;
    // Budget of the device most recently asked about.
    double budget() const;

    // The longest time between two checkpoints on a device (not the host) since the last take, ms
    // (0: none): what a stop there may wait for. A stop-time budget sizes slices from it where no
    // abort callback times the nodes. The longest, not a more robust second-longest: a graph's
    // heaviest node (the output projection) comes once per graph.
    double take_longest_view_ms();

  private:
    struct device_rate {
        const void * device      = nullptr;
        bool         used        = false;
        uint64_t     last_use    = 0;
        // FLOPs per ms. Kept apart from the interval, so that a budget clamped for a short
        // interval (a stop-time budget's) comes back whole with the longer one.
        double       rate        = k_initial_budget / LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
        double       sample_work = 0.0; // measured views not yet applied to the rate
        double       sample_ms   = 0.0;
        bool         measured    = false; // the rate was learnt at least once
        // The last round trips timed, ms (0: none); the interval follows their minimum: a round
        // trip is never shorter than the network's, and a busy host only makes some longer.
        double       trips[k_trip_samples] = {};
        uint32_t     n_trips     = 0;
        double       round_trip  = 0.0; // ms, the minimum of trips; 0: not measured
        uint32_t     since_trip  = 0;   // checkpoints since the round trip was last timed
        double       graph_work  = 0.0; // the graph in flight's whole work there, as last seen; 0: not known
        double       graph_acc   = 0.0; // the graph in flight's work there so far
    };
    struct timed_graph {
        graph_head head;
        double     ms       = 0.0;
        uint64_t   last_use = 0; // 0: the slot is free
    };
    struct graph_record {
        graph_head   head;
        const void * device   = nullptr;
        double       work     = 0.0; // 0: the slot is free
        uint64_t     last_use = 0;
    };
    // A node of a graph on a device the host sleeps on, as the policy saw it.
    struct logged_node {
        float   work  = 0.0f;
        float   ms    = -1.0f; // < 0: its view was not timed
        uint8_t fence = 0;     // its fence_role
        uint8_t start = 0;     // the device's split begins here, after one elsewhere
    };
    // A graph's sleeping nodes, their times and where its views end (cuts empty: not planned).
    struct view_plan_record {
        graph_head               head;
        const void *             device   = nullptr;
        uint64_t                 last_use = 0; // 0: the slot is free
        std::vector<logged_node> nodes;
        std::vector<uint8_t>     cuts;
        double                   longest_ms = 0.0; // the longest view the cuts were planned for
    };

    device_rate & rate_of(const void * device);
    device_rate & asked(const void * device);
    double        inv_budget();
    double        budget_of(const device_rate & d) const;
    double        interval_of(const device_rate & d) const;
    const device_rate * find(const void * device) const;
    bool          pause_was_compute(const device_rate & d, double now) const;
    bool          due(const device_rate & d, bool sleeps) const;
    bool          open_graph_at(const ggml_tensor * node, double now); // true where a graph begins at node
    void          count_graph(const ggml_tensor * node, device_rate & d, double work);
    void          open_graph(const ggml_tensor * head, bool whole, double now);
    double        run_before(double now, double graph_ms);
    void          time_tail(double now);
    void          finish_uncut(double now);
    bool          is_graph(const graph_record & g, const void * device) const; // the in-flight head's record there
    void          remember_graph(const void * device, double work);
    double        recall_graph(const void * device) const;
    void          learn(device_rate & d, double work, double ms);
    void          end_view(); // reset() but for the measured range, which goes on
    void          log_node(const void * device, double work, uint8_t fence, bool start);
    int           planned_cut(const void * device, double work);
    void          time_range(double ms, double rate);
    void          keep_plan();
    void          find_plan();
    void          plan(view_plan_record & p, double before_ms) const;
    template <typename MsOf> static double longest_cut_view(const view_plan_record & p, MsOf ms_of);

    double      interval_;
    double      cap_ = 0.0;
    bool        cap_strict_ = false;
    device_rate devices_[k_devices];
    uint64_t    uses_ = 0;

    double       progress_     = 0.0;   // work since the last checkpoint, in budgets (1 = due)
    bool         range_open_   = false;
    const void * range_device_ = nullptr;
    double       range_start_  = 0.0;   // ms: first ask of the measured range
    double       range_work_   = 0.0;
    bool         range_sleeps_ = false; // the range's device is one the host sleeps on
    double       view_work_    = 0.0;   // work asked since the last pause: the view being grouped
    std::vector<double> view_nodes_;    // that view's work on its device, node by node (for a
    std::vector<uint8_t> view_fence_;   // sleeping device), and each one's fence_role; from the
                                        // device's split's start
    pointer_set  graph_nodes_;          // the first nodes asked in the graph in flight
    size_t       graph_asks_ = 0;       // asks in the graph in flight
    double       graph_ms_ = 0.0;       // the last whole graph's compute, all devices; 0: not known
    bool         began_    = false;     // the last place() saw a node of the graph before
    bool         graph_pending_ = false; // begin_graph() was called: the next ask opens a graph
    double       pending_before_ms_ = 0.0; // its before_ms
    double       call_before_ms_    = 0.0; // what ran before the graph in flight in its call or run
    run_clock *  run_ = nullptr;        // set_run_clock's
    graph_head   head_;                 // the graph in flight's first node
    graph_record graphs_[k_graph_records];
    uint64_t     graph_uses_ = 0;
    // The graph in flight's nodes on one device the host sleeps on (log_device_), and whether they
    // can be planned from (one such device, not too many nodes, not stopped).
    std::vector<logged_node> graph_log_;
    const void * log_device_ = nullptr;
    bool         log_valid_  = true;
    size_t       range_log_first_ = 0; // the first logged node of the measured range
    view_plan_record plans_[k_plans];
    uint64_t     plan_uses_ = 0;
    int          plan_      = -1; // the graph in flight's plan in plans_; -1: none followed
    bool         graph_cut_ = false; // the graph in flight was stopped (abandon_graph)
    bool         graph_held_ = false; // the graph in flight runs held (hold_graph)
    timed_graph  timed_[k_graph_records]; // note_graph_ms's
    graph_head   call_head_;                // graph_is_short's
    uint64_t     timed_uses_ = 0;
    // The device of the last ask and its budget's reciprocal (0: to compute), kept while nothing
    // they depend on changes: finding the device and its budget at every ask was a third of the
    // policy's cost.
    int           asked_      = -1; // index into devices_ (a copied policy stays whole)
    double        inv_budget_ = 0.0;
    double       last_ask_     = 0.0;
    uint32_t     stale_asks_   = 0;     // asks since the clock was read
    const void * last_device_ = nullptr;
    type_sizes   sizes_;
    const void * cached_buffer_ = nullptr; // device_of's last buffer, its type and its answer
    const void * cached_buft_   = nullptr;
    node_device  cached_device_;
    double       longest_view_ = 0.0;
    // Graphs seen before, cut on the same nodes call after call.
    stable_plans stable_;
    size_t       range_stable_first_ = 0; // the measured range's first node there
    bool         uncut_       = false;    // the graph in flight runs uncut (uncut_ask)
    double       uncut_start_ = 0.0;      // ms: its first ask
};

} // namespace llama_cancel
