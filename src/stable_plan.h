// Checkpoints that fall on the same nodes call after call (issue 47), for every graph the policy
// sees again: the CPU's clip and TTS graphs, a GPU API's, RPC's, ggml-vulkan's.
//
// Why: with cb_eval set, ggml's scheduler computes each view as a graph of its own, and ggml-cuda
// keeps a CUDA graph per first node of each graph it computes, captured after two unchanged calls
// and dropped when the nodes change (ggml-cuda.cu). Checkpoints placed by work and a rate that
// moves by a few percent from call to call move by a node or two, and no view is ever captured.
//
// How: a graph seen whole (first node to the next graph's first, not stopped) is kept with each
// node's time: a measured view's time shared among its nodes by work, the nodes of views no
// checkpoint timed (the end of a split) at the graph's measured rate. A graph with the same first
// node is then cut where the time since the last cut reaches k_target of the interval, and nowhere
// when the whole graph fits in that (one view per split, as upstream runs it; the byte is read
// when it returns). On a device the host sleeps on (ggml-vulkan), where the sleeping strategy's
// rules end views where little spins, the cuts they placed are replayed instead (where the
// strategy's own view plan does not place them). The cuts are kept while their views stay within
// k_slower of the interval, the graph needs no fewer than 1/k_faster of them, and its nodes are the
// planned ones (each on the same device, its work within k_work_slack): noise moves no checkpoint, a
// graph that got slower (or much faster) is cut again.
#pragma once

#include "graph_head.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

class stable_plans {
  public:
    // Views are planned to k_target of the interval; the cuts are kept while every view stays
    // within k_slower of the interval beside its longest node and the graph needs no fewer than
    // 1/k_faster of its views (keeps).
    static constexpr double k_target = 0.8;
    static constexpr double k_slower = 1.25;
    static constexpr double k_faster = 2.0;
    // A node is the planned one while its work is within this factor of the planned node's (a few
    // kFLOP more: views and copies of a few elements); a prompt's KV length grows the attention's.
    static constexpr double k_work_slack = 2.0;
    // A graph's timed nodes price its others where they did at least this share of its work (a
    // range that began in the graph before may time only its first nodes).
    static constexpr double k_timed_share = 0.25;
    // Graphs whose plans are kept (the least recently used is forgotten), and nodes a plan holds.
    static constexpr int    k_plans     = 8;
    static constexpr size_t k_max_nodes = 1u << 16;
    // Devices of one graph a plan prices (the host and a few GPUs or RPC servers).
    static constexpr size_t k_graph_devices = 8;

    // The rate (FLOPs per ms) measured on a device, 0 where none was: `of(owner, device)`.
    struct device_rates {
        const void * owner = nullptr;
        double (*of)(const void * owner, const void * device) = nullptr;
    };

    // A graph begins at `head`: its plan is followed, if one is kept for it.
    void begin(const graph_head & head);
    // The graph's next node, on `device` (`sleeps`: one the host sleeps on), of `work` FLOPs. 1 or
    // 0 where the plan cuts there or not; -1 where no plan is followed (none kept, `follow` false,
    // or the graph is not the planned one: dropped for the rest of it).
    int ask(const void * device, bool sleeps, double work, bool follow);
    // A checkpoint was passed at the node asked last (what a sleeping graph's plan replays).
    void passed();
    // Nodes asked in the graph so far (where a measured range of them begins).
    size_t asked() const { return log_.size(); }
    // The range of this graph's nodes from `first` to the last asked was measured at `ms` for
    // `range_work` FLOPs (a range may begin in the graph before: only this graph's part counts).
    void timed(size_t first, double ms, double range_work);
    // What the nodes from `first` to the last asked take, ms: as the followed plan timed them, else
    // their work at `rate` (0: not known).
    double expected_ms(size_t first, double rate) const;
    // The graph ended. `whole`: seen from its first node to its end, not stopped or held. Planned
    // again from its times for `interval_ms` (its device's) where its cuts no longer serve it
    // (keeps). `rates` price the nodes no view timed where the graph's timed ones cannot. `sleeping_view_ms`: the longest view the sleeping strategy allows (its
    // views end where little spins, past the interval).
    void end(bool whole, const device_rates & rates, double interval_ms, double sleeping_view_ms);
    // The graph in flight's first device off the host (NULL: the host's alone): whose rate and
    // interval plan it.
    const void * device() const { return device_; }
    bool following() const { return plan_ >= 0; }
    // The followed plan cuts the graph nowhere (it fits in the interval): its asks after the first
    // may go unlogged (end_uncut then ends it).
    bool uncut() const { return plan_ >= 0 && plans_[plan_].uncut; }
    // The uncut graph in flight ended, `took_ms` from its first ask to the next graph's (< 0: not
    // known, a pause longer than `pause_factor` times its time). Planned again, its nodes' times
    // scaled to that, where it no longer fits in k_slower of `interval_ms` beside its longest node.
    void end_uncut(double took_ms, double pause_factor, double interval_ms);
    // How many times a kept graph's cuts moved, since creation.
    uint64_t replans() const { return replans_; }

  private:
    struct node {
        float   work = 0.0f;
        float   ms   = -1.0f; // < 0: no view timed it
        uint8_t cut  = 0;     // a checkpoint was passed there
        const void * device = nullptr;
    };
    struct record {
        graph_head           head;
        bool                 sleeps   = false; // the sleeping strategy's cuts, replayed
        uint64_t             last_use = 0; // 0: the slot is free
        std::vector<node>    nodes;
        std::vector<uint8_t> cuts;
        double               planned_ms  = 0.0; // the graph's time when cut
        bool                 uncut       = false; // no cut (a graph within the interval)
        double               interval_ms = 0.0; // and the interval
    };

    static double price(std::vector<node> & nodes, const device_rates & rates);
    static double longest_view(const std::vector<uint8_t> & cuts, const std::vector<node> & nodes);
    bool          keeps(const record & r, double total, double interval_ms, double sleeping_view_ms) const;
    void          cut(record & r, double interval_ms);
    record &      slot_of(const graph_head & head);

    record       plans_[k_plans];
    uint64_t     uses_    = 0;
    uint64_t     replans_ = 0;
    graph_head   head_;
    std::vector<node> log_;
    const void * device_ = nullptr;
    bool         valid_  = true;  // not too many nodes
    bool         sleeps_ = false; // a device the host sleeps on
    int          plan_   = -1;   // the followed plan in plans_
};

} // namespace llama_cancel
