// The checkpoint strategy for a ggml-vulkan device that computes on the host's own cores (Mesa's
// llvmpipe, SwiftShader): the one device the library can run here, and none of its users'. Off for
// real GPUs (computes_on_host_cores). The general rules are checkpoint_policy.h's.
//
// ggml-vulkan's synchronize sleeps until an almost-ready fence and spins through the rest of a
// view (backend_wait.h). On a real GPU the spinning core is idle anyway. On an emulated one it is
// a core the compute needs, so where the quota is reached the view goes on to a node where little
// of it spins: one with a node for the fence and a busy tail of at most k_spun_share of its work,
// or k_sleep_quotas quotas with a node for the fence. That is only worth it while a view stays a
// small share of its graph (k_sleep_graph_share of the graph's work there, and of what ran before
// it in its call or run); past it the quota ends the view. A graph's work is what a graph with
// the same first node did last time (k_graph_records remembered), or its work so far.
//
// Once a graph was seen whole twice (its first run compiles shaders: its times are replaced, not
// kept), its views are planned (view_plan.h) where its nodes are slow for
// the interval (more than 1/k_plan_nodes_per_interval of it on average). Its second run, where the
// first says so, is timed node by node, each node a view of its own (a view's time does not tell
// which of its nodes took it: by work, a norm on llvmpipe is priced at a sixth of its time, and a
// busy tail ending in one spins). Each node's time is kept
// (its view's measured time shared by what its nodes took before, or by work), and the graph's
// next run (graph_head.h) ends its views where the plan says while its nodes are the planned ones.
// Where the graph leaves the device for the host and comes back, the device's split ends there by
// itself: no planned view spans it. A plan's views last at most k_sleep_graph_share of the graph
// or k_sleep_quotas intervals, and cost the least busy-waited time. A plan is kept while its views
// stay within the stable plans' band of that (stable_plan.h), however the whole graph drifts.
//
// Outside the library's calls no call says where a run of graphs began (upstream's mtmd helper:
// a prompt's encodes and decodes). The policies of one thread share a run_clock that tells it from
// the gaps between graphs: a graph whose first ask comes within k_run_gap_ms of the time the graph
// before it was due computed goes on with that run.
//
// A stop-time budget's cap turns the strategy off (checkpoint_policy keeps it by the rules).
#pragma once

#include "checkpoints/graph_head.h"
#include "checkpoints/policy_constants.h"

#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

// Whether a device of ggml's `type` (ggml_backend_dev_type) and `description` computes on the
// host's cores: a CPU device, or a GPU API's software implementation (llvmpipe reports itself a GPU).
bool computes_on_host_cores(int type, const char * description);

// Whether `node` is computed by ggml-vulkan on such a device: the emulated-device strategy's node.
bool on_emulated_vulkan(const ggml_tensor * node);

struct run_clock {
    double began    = 0.0; // ms: the run's first ask
    double busy_end = 0.0; // ms: when the work asked last was due computed; 0: nothing asked yet
};

// What checkpoint_policy knows of a device: its rate and the interval in force there.
struct device_timing {
    double rate        = 0.0; // FLOPs per ms
    bool   measured    = false;
    double interval_ms = 0.0;
};

class emulated_device_views {
  public:
    // The run clock of graphs no call tells of (NULL: each such graph on its own); not owned.
    void set_run_clock(run_clock * clock) { run_ = clock; }
    // The work asked last is due computed at `ms`.
    void busy_until(double ms) {
        if (run_ != nullptr) {
            run_->busy_end = ms;
        }
    }

    // The graph in flight ended; `plannable`: seen whole, not stopped or held; `graph_ms`: its
    // compute on all its devices.
    void end_graph(bool plannable, double graph_ms);
    // A graph begins at `head` at `now`; `told_before_ms` >= 0: what ran before it in its call
    // (a call told of it), else the run clock says.
    void begin_graph(const graph_head & head, double told_before_ms, double now);

    // An ask of `work` FLOPs on `device` (fence: its fence_role); `new_view`: a pause or another
    // device's split came since the last ask. False where the node is not the strategy's (the
    // graph's first emulated device is: a second one goes by the general rules).
    bool ask(const void * device, double work, uint8_t fence, bool new_view, bool split_start, const device_timing & t);
    // Whether the view plan ends a view at the node just asked: 1 or 0; -1 where there is no plan
    // or the graph is not the planned one (dropped for the rest of it).
    int  planned_cut(double work);
    bool planned() const { return plan_ >= 0; }
    // The graph in flight, at its end, was `head`'s (graph_ids): its record is that one's, and a
    // plan followed for another is not its own.
    void identified(const graph_head & head) {
        plan_ = plan_ >= 0 && !(plans_[plan_].head == head) ? -1 : plan_;
        head_ = head;
    }
    // Whether the graph in flight is profiled: each of its nodes on the device a view of its own,
    // timed alone (a graph's second run, where its first showed nodes slow enough to be planned).
    bool profiling() const { return profiling_; }
    // The time the followed plan gives the graph's node i on the device, ms; < 0 where none.
    float planned_ms(size_t i) const {
        return plan_ >= 0 && i < plans_[plan_].nodes.size() ? plans_[plan_].nodes[i].ms : -1.0f;
    }
    // Past the quota: whether the view grouped so far (`view_work` FLOPs, `progress` quotas)
    // ends at the node just asked.
    bool view_ends(double progress, double view_work, double rate) const;

    // A measured range begins at the next ask.
    void range_begins() { range_first_ = log_.size(); }
    // A checkpoint ends the range: true where its view was not waited for (`ms` far below what its
    // `work` takes): timed with the next one.
    bool unwaited(double ms, double work, const device_timing & t) const;
    // The range (from range_begins) on `device` took `ms` for `range_work` FLOPs.
    void timed(const void * device, double ms, double range_work, double rate);
    // The view ends (a checkpoint or a reset).
    void end_view() {
        view_work_.clear();
        view_fence_.clear();
    }
    // The longest view the strategy allows in the graph in flight, ms.
    double longest_view_ms(double interval_ms, double graph_ms) const;

  private:
    struct logged_node {
        float   work  = 0.0f;
        float   ms    = -1.0f; // < 0: its view was not timed
        uint8_t fence = 0;     // its fence_role
        uint8_t start = 0;     // the device's split begins here, after one elsewhere
    };
    // A graph's nodes on its emulated device, their times and where its views end (no cuts: not planned).
    struct view_plan_record {
        graph_head               head;
        const void *             device   = nullptr;
        uint64_t                 last_use = 0; // 0: the slot is free
        std::vector<logged_node> nodes;
        std::vector<uint8_t>     cuts;
        double                   longest_ms = 0.0; // the longest view allowed when the cuts were planned
        double                   graph_ms   = 0.0; // and the graph's time then
        bool                     warm = false; // its times are a later run's than the graph's first
        tuning::band_strays      strays;           // graphs in a row out of the cuts' band
    };
    struct graph_record {
        graph_head   head;
        const void * device   = nullptr;
        double       work     = 0.0; // there; 0: the slot is free
        double       graph_ms = 0.0; // all devices
        uint64_t     last_use = 0;
    };

    void keep_plan();
    void find_plan(const device_timing & t);
    void plan(view_plan_record & p, const device_timing & t) const;
    static double node_ms(const logged_node & n, const device_timing & t);
    static double graph_ms_of(const view_plan_record & p, const device_timing & t);
    static bool   slow_for_the_interval(const view_plan_record & p, double graph_ms, const device_timing & t);
    template <typename MsOf> static double longest_cut_view(const view_plan_record & p, MsOf ms_of);

    run_clock *  run_ = nullptr;
    graph_head   head_;
    const void * device_     = nullptr; // the graph in flight's emulated device
    double       graph_work_ = 0.0;     // its whole work there as last seen; 0: not known
    double       graph_acc_  = 0.0;     // its work there so far
    double       before_ms_  = 0.0;     // what ran before it in its call or run
    std::vector<double>      view_work_; // the view being grouped, node by node, from the split's start
    std::vector<uint8_t>     view_fence_; // and each node's fence_role
    std::vector<logged_node> log_;
    bool         log_valid_   = true; // not too many nodes
    size_t       range_first_ = 0;    // the measured range's first logged node
    view_plan_record plans_[tuning::k_view_plans];
    uint64_t     plan_uses_ = 0;
    int          plan_      = -1; // the graph in flight's plan; -1: none followed
    bool         plan_looked_ = false;
    bool         profiling_   = false;
    graph_record graphs_[tuning::k_graph_records];
    uint64_t     graph_uses_ = 0;
};

} // namespace llama_cancel
