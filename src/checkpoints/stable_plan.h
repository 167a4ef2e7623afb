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
// checkpoint timed (the end of a split) at the graph's measured rate. Its first run pays what runs
// once (kernels or shaders loaded, memory first touched): from its second, the same graph
// (graph_head.h: the same first node and, once seen whole, the same nodes) is cut where the time
// since the last cut reaches k_target of the interval, and nowhere when the whole graph fits in
// the interval (one view per split, as upstream runs it; the byte is read when it returns). On an emulated device
// (emulated_device.h), whose strategy ends views where little spins, the cuts it placed are
// replayed instead (where its own view plan does not place them). The cuts are kept while their
// views stay within k_slower of the interval, the graph needs no fewer than 1/k_faster of them, and its nodes are the
// planned ones (each on the same device, its work within k_plan_work_slack): noise moves no checkpoint, a
// graph that got slower (or much faster) is cut again, once k_plan_strays calls in a row showed it
// (one slow call is the host's noise).
#pragma once

#include "checkpoints/graph_head.h"
#include "checkpoints/policy_constants.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

class stable_plans {
  public:
    // The rate (FLOPs per ms) measured on a device, 0 where none was: `of(owner, device)`.
    struct device_rates {
        const void * owner = nullptr;
        double (*of)(const void * owner, const void * device) = nullptr;
    };

    // A graph begins at `head`: its plan is followed, if one is kept for it.
    void begin(const graph_head & head);
    // The graph in flight, at its end, was `head`'s (graph_ids): a plan followed for another is
    // not its own.
    void identified(const graph_head & head) {
        plan_ = plan_ >= 0 && !(plans_[plan_].head == head) ? -1 : plan_;
        head_ = head;
    }
    // The graph's next node, on `device` (`emulated`: the emulated-device strategy's), of `work` FLOPs. 1 or
    // 0 where the plan cuts there or not; -1 where no plan is followed (none kept, `follow` false,
    // or the graph is not the planned one: dropped for the rest of it).
    int ask(const void * device, bool emulated, double work, bool follow);
    // A checkpoint was passed at the node asked last (what an emulated device's plan replays).
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
    // (keeps). `rates` price the nodes no view timed where the graph's timed ones cannot.
    // `emulated_view_ms`: the longest view the emulated-device strategy allows (past the interval).
    // `asks`: every ask the graph made, nodes a plan does not price and views included.
    void end(bool whole, size_t asks, const device_rates & rates, double interval_ms, double emulated_view_ms);
    // The graph in flight's first device off the host (NULL: the host's alone): whose rate and
    // interval plan it.
    const void * device() const { return device_; }
    bool following() const { return plan_ >= 0; }
    // The followed plan cuts the graph nowhere (it fits in the interval): its asks after the first
    // may go unlogged (end_uncut then ends it).
    bool uncut() const { return plan_ >= 0 && plans_[plan_].uncut && !measuring_; }
    // The followed plan's graph's asks (end's `asks`): an uncut graph that asks more is another one.
    size_t uncut_asks() const { return plan_ >= 0 ? plans_[plan_].asks : 0; }
    // The uncut graph in flight ended, `took_ms` from its first ask to the next graph's (< 0: not
    // known, a pause longer than `pause_factor` times its time). Planned again, its nodes' times
    // scaled to that, where it no longer fits in k_slower of `interval_ms` beside its longest node.
    // Where its end stays unknown, its next call is measured again (after k_plan_strays calls in a
    // row, twice as many each time it still fits: k_unknown_end_doublings).
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
        bool                 emulated = false; // the emulated-device strategy's cuts, replayed
        uint64_t             last_use = 0; // 0: the slot is free
        std::vector<node>    nodes;
        size_t               asks = 0; // every ask of the graph (end's `asks`)
        std::vector<uint8_t> cuts;
        double               planned_ms  = 0.0; // the graph's time when cut
        bool                 uncut       = false; // no cut (a graph within the interval)
        double               interval_ms = 0.0; // and the interval
        bool                 served      = false; // the cuts were kept after a call
        tuning::band_strays  strays;              // calls in a row out of the cuts' band
        int                  unknown_ends = 0;    // uncut calls in a row whose end was not known
        int                  remeasures   = 0;    // times those had the graph measured again
        bool                 remeasure    = false; // its next call is measured again
    };

    static double price(std::vector<node> & nodes, const device_rates & rates);
    static double longest_view(const std::vector<uint8_t> & cuts, const std::vector<node> & nodes);
    bool          keeps(const record & r, double total, double interval_ms, double emulated_view_ms) const;
    static bool   strayed(record & r, bool in_band);
    void          cut(record & r, double interval_ms);
    record &      slot_of(const graph_head & head);

    record       plans_[tuning::k_stable_plans];
    uint64_t     uses_    = 0;
    uint64_t     replans_ = 0;
    graph_head   head_;
    std::vector<node> log_;
    const void * device_ = nullptr;
    bool         valid_  = true;  // not too many nodes
    bool         emulated_ = false; // the emulated-device strategy placed its cuts
    int          plan_   = -1;   // the followed plan in plans_
    bool         replayed_ = false; // the graph in flight was cut by the followed plan
    bool         measuring_ = false; // it is measured again: a checkpoint at its last node (end_uncut)
};

} // namespace llama_cancel
