#include "checkpoints/emulated_device.h"

#include "checkpoints/backend_wait.h"
#include "checkpoints/slots.h"
#include "checkpoints/view_plan.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cstring>

namespace llama_cancel {

using namespace tuning;

bool computes_on_host_cores(int type, const char * description) {
    if (type == GGML_BACKEND_DEVICE_TYPE_CPU) {
        return true;
    }
    return description != nullptr &&
           (std::strstr(description, "llvmpipe") != nullptr || std::strstr(description, "SwiftShader") != nullptr);
}

bool on_emulated_vulkan(const ggml_tensor * node) {
    if (!sleeps_until_almost_ready(node)) {
        return false;
    }
    const ggml_backend_dev_t dev = ggml_backend_buft_get_device(ggml_backend_buffer_get_type(node->buffer));
    return dev != nullptr && computes_on_host_cores(ggml_backend_dev_type(dev), ggml_backend_dev_description(dev));
}

void emulated_device_views::end_graph(bool plannable, double graph_ms) {
    if (!plannable || graph_acc_ <= 0.0) {
        return; // stopped, held, or none of it here
    }
    keep_plan();
    graph_record & slot = slot_for(
        graphs_, [&](const graph_record & g) { return g.work > 0.0 && g.head == head_; },
        [](const graph_record & g) { return g.work <= 0.0; });
    slot = graph_record{head_, device_, graph_acc_, graph_ms, ++graph_uses_};
}

void emulated_device_views::begin_graph(const graph_head & head, double told_before_ms, double now) {
    head_        = head;
    device_      = nullptr;
    graph_work_  = 0.0;
    graph_acc_   = 0.0;
    double own_ms = 0.0; // the graph's time, as it last ran
    for (graph_record & g : graphs_) {
        if (g.work > 0.0 && g.head == head) {
            graph_work_ = g.work;
            own_ms      = g.graph_ms;
            device_     = g.device; // confirmed or dropped at the first ask (ask)
        }
    }
    if (told_before_ms >= 0.0) {
        before_ms_ = told_before_ms;
    } else if (run_ == nullptr) {
        before_ms_ = 0.0;
    } else {
        // A gap past k_run_gap_ms begins a new run here.
        if (run_->busy_end <= 0.0 || now - run_->busy_end > k_run_gap_ms) {
            run_->began = now;
        }
        before_ms_ = std::clamp(now - run_->began, 0.0, k_run_graphs * own_ms);
    }
    log_.clear();
    log_valid_   = true;
    range_first_ = 0;
    plan_        = -1;
    plan_looked_ = false;
    profiling_   = false;
    end_view();
}

bool emulated_device_views::ask(const void * device, double work, uint8_t fence, bool new_view, bool split_start,
                                const device_timing & t) {
    if (new_view) {
        end_view();
    }
    if (log_.empty() && !plan_looked_ && device_ != device) {
        device_     = device; // the graph's first emulated device (not the one recorded: unknown work)
        graph_work_ = 0.0;
    }
    if (device != device_) {
        return false;
    }
    view_work_.push_back(work);
    view_fence_.push_back(fence);
    graph_acc_ += work;
    log_valid_ = log_valid_ && log_.size() < k_plan_nodes;
    if (log_valid_) {
        log_.push_back(logged_node{static_cast<float>(work), -1.0f, fence,
                                   static_cast<uint8_t>(split_start && !log_.empty() ? 1 : 0)});
    }
    if (!plan_looked_) {
        plan_looked_ = true;
        find_plan(t);
    }
    return true;
}

int emulated_device_views::planned_cut(double work) {
    if (plan_ < 0) {
        return -1;
    }
    const view_plan_record & p = plans_[plan_];
    const size_t             i = log_.size() - 1;
    if (log_valid_ && i < p.nodes.size()) {
        const double planned = p.nodes[i].work;
        const double lo = std::min(work, planned), hi = std::max(work, planned);
        if (hi <= k_plan_work_slack * lo + 1e3) { // a few kFLOP: views and copies of a few elements
            return p.cuts[i];
        }
    }
    plan_ = -1;
    return -1;
}

bool emulated_device_views::view_ends(double progress, double view_work, double rate) const {
    // the graph's work (known, or a lower bound), and what ran before it in its call or run
    const double graph = (graph_work_ > 0.0 ? graph_work_ : graph_acc_) + before_ms_ * rate;
    if (view_work > k_sleep_graph_share * graph) {
        return true; // a longer view would cost more than the share of the graph
    }
    // A view of fewer than ten nodes, or with no node to carry the almost-ready fence near its
    // end, is waited for busy from start to end: ending it there would keep the core spinning at
    // every checkpoint where single nodes outlast the quota.
    if (first_spun_node(view_fence_.data(), view_fence_.size()) == 0) {
        return false;
    }
    return progress >= k_sleep_quotas ||
           spun_share(view_work_.data(), view_fence_.data(), view_work_.size()) <= k_spun_share;
}

// ggml-vulkan's synchronize returns at once after some views (one that ends in a KV cache's
// SET_ROWS fused into the ROPE before it); the view is computed with the next one, and its range
// goes on so that both share what both took: taken alone it would price its nodes at nothing.
bool emulated_device_views::unwaited(double ms, double work, const device_timing & t) const {
    const bool fenced = !view_fence_.empty() && view_fence_.back() == k_fence_carries;
    return !fenced && t.measured && ms < k_unwaited_share * work / t.rate;
}

double emulated_device_views::longest_view_ms(double interval_ms, double graph_ms) const {
    return std::max(k_sleep_quotas * interval_ms, k_sleep_graph_share * (graph_ms + before_ms_));
}

// The measured range took `ms`: the graph's nodes in it share their part of it (a range may begin
// in the graph before) by what each took last time the graph ran, where it followed a plan, else
// by work. The same nodes grouped other ways graph after graph tell which of them took the time.
void emulated_device_views::timed(const void * device, double ms, double range_work, double rate) {
    if (!log_valid_ || device != device_ || range_work <= 0.0 || rate <= 0.0) {
        return;
    }
    const view_plan_record * prior = plan_ >= 0 ? &plans_[plan_] : nullptr;
    // What the node took before, at least k_work_weight of what its work takes: a node once timed
    // at nothing is not held there by its own past.
    auto before = [&](size_t i) {
        const double by_work = log_[i].work / rate;
        const bool   timed   = prior != nullptr && i < prior->nodes.size() && prior->nodes[i].ms >= 0.0f;
        return timed ? std::max(static_cast<double>(prior->nodes[i].ms), k_work_weight * by_work) : by_work;
    };
    double work = 0.0, weight = 0.0;
    for (size_t i = range_first_; i < log_.size(); ++i) {
        work += log_[i].work;
        weight += before(i);
    }
    const double mine = std::max(ms, 0.0) * std::min(work / range_work, 1.0);
    for (size_t i = range_first_; i < log_.size(); ++i) {
        const double share = weight > 0.0 ? before(i) / weight : (work > 0.0 ? log_[i].work / work : 0.0);
        log_[i].ms         = static_cast<float>(mine * share);
    }
}

// The graph that ended is kept with its nodes' times, to be planned from when it comes again.
void emulated_device_views::keep_plan() {
    if (!log_valid_ || log_.empty()) {
        return;
    }
    auto this_graph = [&](const view_plan_record & p) {
        return p.last_use != 0 && p.head == head_ && p.device == device_;
    };
    view_plan_record & slot = slot_for(plans_, this_graph, [](const view_plan_record & p) { return p.last_use == 0; });
    const bool same = this_graph(slot) && slot.nodes.size() == log_.size();
    if (same && slot.warm) {
        // Each node's time averaged with what it took before: a graph's noise halved, its drift
        // followed within a few graphs. (Not the first run's: what ran once would stay for a few.)
        for (size_t i = 0; i < log_.size(); ++i) {
            const float before = slot.nodes[i].ms, now = log_[i].ms;
            log_[i].ms         = before >= 0.0f && now >= 0.0f ? 0.5f * (before + now) : now;
        }
    }
    slot.head     = head_;
    slot.device   = device_;
    slot.warm     = same;
    slot.last_use = ++plan_uses_;
    slot.nodes.swap(log_); // log_ keeps the old nodes' memory for the next graph
    if (!same) {
        slot.cuts.clear(); // the same graph keeps its cuts while its views stay within the band (plan)
    }
}

void emulated_device_views::find_plan(const device_timing & t) {
    plan_ = -1;
    for (int i = 0; i < k_view_plans; ++i) {
        view_plan_record & p = plans_[i];
        if (p.last_use != 0 && p.head == head_ && p.device == device_) {
            p.last_use = ++plan_uses_;
            if (p.warm) { // planned from a graph's second run on (keep_plan)
                plan(p, t);
                plan_ = p.cuts.empty() ? -1 : i;
            } else {
                // its second run: each node timed alone, where the first says a plan will be made
                profiling_ = t.measured && slow_for_the_interval(p, graph_ms_of(p, t), t);
            }
            return;
        }
    }
}

// A node's time in a plan, ms: as timed, else its work at the measured rate.
double emulated_device_views::node_ms(const logged_node & n, const device_timing & t) {
    return n.ms >= 0.0f ? static_cast<double>(n.ms) : n.work / t.rate;
}

// The time of `p`'s nodes, ms.
double emulated_device_views::graph_ms_of(const view_plan_record & p, const device_timing & t) {
    double graph = 0.0;
    for (const logged_node & n : p.nodes) {
        graph += node_ms(n, t);
    }
    return graph;
}

// Whether `p`'s nodes, `graph_ms` in all, average more than 1/k_plan_nodes_per_interval of the interval.
bool emulated_device_views::slow_for_the_interval(const view_plan_record & p, double graph_ms, const device_timing & t) {
    return graph_ms * k_plan_nodes_per_interval > t.interval_ms * static_cast<double>(p.nodes.size());
}

// The cuts of `p`: planned again where the longest view allowed left the band; none where its
// nodes are fast enough for the rules at each ask.
void emulated_device_views::plan(view_plan_record & p, const device_timing & t) const {
    if (!t.measured) {
        p.cuts.clear();
        return;
    }
    auto         ms_of = [&](const logged_node & n) { return node_ms(n, t); };
    const double graph = graph_ms_of(p, t);
    if (!slow_for_the_interval(p, graph, t)) {
        p.cuts.clear();
        return;
    }
    const double interval = t.interval_ms;
    const double longest = std::max(k_sleep_graph_share * (graph + before_ms_), k_sleep_quotas * interval);
    // Noise never moves a view, nor a drift of the whole graph (each view stays its share of it):
    // the cuts stay while the longest view allowed stays within the stable plans' band of the one
    // they were planned for, scaled by the graph's drift (a new run or interval is no drift), and
    // their views within k_slower of it or out of it for fewer than k_plan_strays graphs in a row.
    const double drifted = p.cuts.empty() ? 0.0 : p.longest_ms * graph / p.graph_ms;
    if (!p.cuts.empty() && longest * k_slower >= drifted && longest <= k_faster * drifted) {
        if (!p.strays.out(longest_cut_view(p, ms_of) <= k_slower * longest)) {
            return;
        }
    }
    p.strays = {};
    std::vector<float>   ms(p.nodes.size());
    std::vector<uint8_t> fence(p.nodes.size()), starts(p.nodes.size());
    for (size_t i = 0; i < p.nodes.size(); ++i) {
        ms[i]     = static_cast<float>(ms_of(p.nodes[i]));
        fence[i]  = p.nodes[i].fence;
        starts[i] = p.nodes[i].start;
    }
    // Planned below the longest allowed (k_target), so that noise leaves the cuts be, unless that
    // spins more than a view's cost longer than views up to the longest.
    auto cuts_for = [&](double max_view_ms) {
        return plan_views(ms.data(), fence.data(), starts.data(), ms.size(), max_view_ms, k_plan_view_cost * interval,
                          k_plan_max_nodes);
    };
    auto spin = [&](const std::vector<uint8_t> & cuts) {
        return spun_ms(ms.data(), fence.data(), starts.data(), cuts.data(), ms.size());
    };
    p.cuts = cuts_for(k_target * longest);
    std::vector<uint8_t> loose = cuts_for(longest);
    if (spin(p.cuts) > spin(loose) + k_plan_view_cost * interval) {
        p.cuts.swap(loose);
    }
    p.longest_ms = longest;
    p.graph_ms   = graph;
}

// The longest view `p`'s cuts make of its nodes' times (`ms_of`), ms; a split's start ends one too.
template <typename MsOf> double emulated_device_views::longest_cut_view(const view_plan_record & p, MsOf ms_of) {
    double longest = 0.0, view = 0.0;
    for (size_t i = 0; i < p.nodes.size() && i < p.cuts.size(); ++i) {
        if (p.nodes[i].start != 0) {
            view = 0.0;
        }
        view += ms_of(p.nodes[i]);
        longest = std::max(longest, view);
        view    = p.cuts[i] != 0 ? 0.0 : view;
    }
    return longest;
}

} // namespace llama_cancel
