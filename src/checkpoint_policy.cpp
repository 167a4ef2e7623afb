#include "checkpoint_policy.h"

#include "backend_wait.h"
#include "slots.h"
#include "view_plan.h"
#include "work.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cmath>

namespace llama_cancel {

const void * device_key(const ggml_tensor * node) {
    const ggml_backend_buffer_t buf = node->buffer;
    if (buf == nullptr || ggml_backend_buffer_is_host(buf)) {
        return nullptr;
    }
    const ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(buf);
    const ggml_backend_dev_t         dev  = ggml_backend_buft_get_device(buft);
    return dev != nullptr ? static_cast<const void *>(dev) : static_cast<const void *>(buft);
}

checkpoint_policy::node_device checkpoint_policy::device_of(const ggml_tensor * node) {
    if (node->buffer == nullptr) {
        return {};
    }
    // A buffer freed and another made at its address may belong to another type: the type is
    // compared too (types live as long as their backend).
    const ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(node->buffer);
    if (node->buffer != cached_buffer_ || buft != cached_buft_) {
        cached_buffer_ = node->buffer;
        cached_buft_   = buft;
        cached_device_ = {device_key(node), sleeps_until_almost_ready(node)};
    }
    return cached_device_;
}

checkpoint_policy::checkpoint_policy(double interval_ms) : interval_(LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS) {
    set_interval(interval_ms);
}

void checkpoint_policy::set_interval(double interval_ms) {
    interval_   = interval_ms > 0.0 ? interval_ms : LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    inv_budget_ = 0.0;
}

double checkpoint_policy::interval_of(const device_rate & d) const {
    // Only a measured rate is lengthened: with a guessed one, rarer checkpoints would only make
    // the measure slower to come.
    double paid = interval_;
    if (d.measured) {
        double stretch = d.round_trip / k_cost_share;
        if (graph_ms_ > 0.0) {
            stretch = std::min(stretch, graph_ms_ / k_min_graph_checkpoints);
        }
        paid = std::max(interval_, stretch);
    }
    return cap_ > 0.0 ? std::min(paid, cap_) : paid;
}

double checkpoint_policy::budget_of(const device_rate & d) const {
    return std::clamp(d.rate * interval_of(d), k_min_budget, k_max_budget);
}

const checkpoint_policy::device_rate * checkpoint_policy::find(const void * device) const {
    for (const device_rate & d : devices_) {
        if (d.used && d.device == device) {
            return &d;
        }
    }
    return nullptr;
}

checkpoint_policy::device_rate & checkpoint_policy::rate_of(const void * device) {
    device_rate * oldest = &devices_[0];
    for (device_rate & d : devices_) {
        if (d.used && d.device == device) {
            d.last_use = ++uses_;
            return d;
        }
        if (!d.used || (oldest->used && d.last_use < oldest->last_use)) {
            oldest = &d;
        }
    }
    *oldest = device_rate{};
    oldest->device   = device;
    oldest->used     = true;
    oldest->last_use = ++uses_;
    return *oldest;
}

checkpoint_policy::device_rate & checkpoint_policy::asked(const void * device) {
    if (asked_ < 0 || devices_[asked_].device != device) {
        asked_      = static_cast<int>(&rate_of(device) - devices_);
        inv_budget_ = 0.0;
    }
    return devices_[asked_];
}

double checkpoint_policy::inv_budget() {
    if (inv_budget_ == 0.0) {
        inv_budget_ = 1.0 / budget_of(devices_[asked_]);
    }
    return inv_budget_;
}

bool checkpoint_policy::pause_was_compute(const device_rate & d, double now) const {
    const double pause = now - last_ask_;
    return pause <= k_ask_gap_ms || pause <= k_pause_factor * view_work_ / d.rate;
}

bool checkpoint_policy::due(const device_rate & d, bool sleeps) const {
    if (progress_ < 1.0) {
        return false;
    }
    // A stop-time budget's cap is a promise: no view runs past it to let the host sleep.
    if (!sleeps || cap_ > 0.0) {
        return true;
    }
    // the graph's work (known, or a lower bound), and what ran before it in its call or run
    const double graph = (d.graph_work > 0.0 ? d.graph_work : d.graph_acc) + call_before_ms_ * d.rate;
    if (view_work_ > k_sleep_graph_share * graph) {
        return true; // a longer view would cost more than the share of the graph
    }
    // A view of fewer than ten nodes, or with no node to carry the almost-ready fence near its
    // end, is waited for busy from start to end: ending it there would keep the core spinning at
    // every checkpoint when single nodes outlast the budget (a slow device).
    if (first_spun_node(view_fence_.data(), view_fence_.size()) == 0) {
        return false;
    }
    return progress_ >= k_sleep_budgets ||
           spun_share(view_nodes_.data(), view_fence_.data(), view_nodes_.size()) <= k_spun_share;
}

bool checkpoint_policy::place(const ggml_tensor * node, const void * device, double now, bool sleeps, uint8_t fence) {
    device_rate & d = asked(device);
    const bool opened = open_graph_at(node, now);
    // A planned graph's views are its own, timed from its first ask: the view that ended the graph
    // before was timed as this one opened (time_tail), and read as that graph returned.
    if (!range_open_ || device != range_device_ || !pause_was_compute(d, now) || (opened && stable_.following())) {
        range_open_   = true;
        range_device_ = device;
        range_start_  = now;
        range_work_   = 0.0;
        range_log_first_ = graph_log_.size();
        range_stable_first_ = stable_.asked();
        range_sleeps_ = sleeps;
    }
    const bool paused = now - last_ask_ > k_ask_gap_ms;
    if (paused) {
        view_work_ = 0.0; // the view before the pause is computed
    }
    // Another device's node came between: the split before it ended there, its view computed
    // whole; the device's view begins again here (however short the other split took).
    const bool split_start = device != last_device_;
    if (paused || split_start) {
        view_nodes_.clear();
        view_fence_.clear();
    }
    last_ask_    = now;
    last_device_ = device;
    const double work = node_work(node, sizes_);
    range_work_ += work;
    view_work_  += work;
    if (sleeps) {
        view_nodes_.push_back(work);
        view_fence_.push_back(fence);
    }
    count_graph(node, d, work);
    if (run_ != nullptr) {
        run_->busy_end = now + view_work_ / d.rate; // the view grouped so far computes after its asks
    }
    progress_   += work * inv_budget();
    // A stop-time budget's cap is a promise no plan knows of: the rules at each ask keep it. A
    // sleeping device's view plan goes first.
    const int stable = stable_.ask(device, sleeps, work, !cap_strict_ && plan_ < 0);
    if (stable == 0 && graph_asks_ == 1 && stable_.uncut() && !cap_strict_) {
        // The graph fits in the interval: the rest of its asks only look for the next graph.
        uncut_       = true;
        uncut_start_ = now;
        graph_held_  = true;
        range_open_  = false;
        return false;
    }
    if (sleeps) {
        log_node(device, work, fence, split_start);
        if (plan_ >= 0 && cap_ <= 0.0) {
            const int cut = planned_cut(device, work);
            if (cut >= 0) {
                return cut != 0;
            }
        }
    }
    return stable >= 0 ? stable != 0 : due(d, sleeps);
}

void checkpoint_policy::log_node(const void * device, double work, uint8_t fence, bool start) {
    if (graph_log_.empty()) {
        log_device_ = device;
    }
    if (device != log_device_ || graph_log_.size() >= k_plan_nodes) {
        log_valid_ = false; // two such devices, or too many nodes: not planned
    }
    if (log_valid_) {
        graph_log_.push_back(logged_node{static_cast<float>(work), -1.0f, fence,
                                         static_cast<uint8_t>(start && !graph_log_.empty() ? 1 : 0)});
    }
}

// Whether the plan ends a view at the node just logged: 1 or 0, or -1 where the graph is not the
// one planned (the plan is dropped for the rest of it).
int checkpoint_policy::planned_cut(const void * device, double work) {
    const view_plan_record & p = plans_[plan_];
    const size_t             i = graph_log_.size() - 1;
    if (log_valid_ && device == p.device && i < p.nodes.size()) {
        const double planned = p.nodes[i].work;
        const double lo = std::min(work, planned), hi = std::max(work, planned);
        if (hi <= k_plan_work_slack * lo + 1e3) { // a few kFLOP: views and copies of a few elements
            return p.cuts[i];
        }
    }
    plan_ = -1;
    return -1;
}

bool checkpoint_policy::open_graph_at(const ggml_tensor * node, double now) {
    const bool full = graph_asks_ >= k_graph_nodes;
    began_ = !full && (graph_pending_ || graph_nodes_.contains(node));
    if (full || began_ || graph_asks_ == 0) {
        // Asked before in this graph, or a call began a graph, or the policy's first ask: a new
        // graph begins here (or no end in sight: its work not known).
        open_graph(node, !full, now);
        return true;
    }
    return false;
}

void checkpoint_policy::count_graph(const ggml_tensor * node, device_rate & d, double work) {
    if (graph_nodes_.size() < k_graph_first_nodes) {
        graph_nodes_.insert(node);
    }
    graph_asks_++;
    d.graph_acc += work;
}

// The graph in flight ended (`whole`: seen from its first node to its last): its work is
// remembered, and the one beginning at `head` gets what it did last time. Rates are never 0.
void checkpoint_policy::open_graph(const ggml_tensor * head, bool whole, double now) {
    const bool seen = whole && !graph_held_; // a held graph's asks were not counted
    if (seen && !graph_cut_) {
        keep_plan();
    }
    const device_rate * on = find(stable_.device());
    if (uncut_) {
        finish_uncut(now);
    } else {
        time_tail(now);
    }
    graph_ms_ = 0.0;
    for (device_rate & r : devices_) {
        if (seen && r.graph_acc > 0.0) {
            remember_graph(r.device, r.graph_acc);
        }
        graph_ms_ += seen ? r.graph_acc / r.rate : 0.0;
        r.graph_acc = 0.0;
    }
    const double interval = interval_of(on != nullptr ? *on : device_rate{});
    const stable_plans::device_rates rates{this, [](const void * self, const void * device) {
        const device_rate * r = static_cast<const checkpoint_policy *>(self)->find(device);
        return r != nullptr && r->measured ? r->rate : 0.0;
    }};
    stable_.end(seen && !graph_cut_ && !cap_strict_, rates, interval,
                std::max(k_sleep_budgets * interval, k_sleep_graph_share * (graph_ms_ + call_before_ms_)));
    graph_held_ = false;
    head_ = graph_head::of(head);
    double own_ms = 0.0; // the new graph's time, as it last ran
    for (device_rate & r : devices_) {
        r.graph_work = whole ? recall_graph(r.device) : 0.0;
        own_ms += r.graph_work / r.rate;
    }
    call_before_ms_ = graph_pending_ ? pending_before_ms_ : run_before(now, own_ms);
    graph_nodes_.clear();
    graph_asks_     = 0;
    graph_pending_  = false;
    inv_budget_     = 0.0; // the graph's time may stretch the interval
    graph_log_.clear();
    log_device_      = nullptr;
    log_valid_       = true;
    range_log_first_ = 0;
    range_stable_first_ = 0;
    graph_cut_       = false;
    stable_.begin(head_);
    find_plan();
}

// A graph's last view ends with its split, at no checkpoint: it is timed at the next graph's first
// ask where the pause since its asks is one it could take (k_pause_factor of what it took before),
// not a host's idle time. A graph within the interval has no other view, and this is how it is
// seen to grow past it.
void checkpoint_policy::time_tail(double now) {
    if (!range_open_ || range_stable_first_ >= stable_.asked()) {
        return;
    }
    const device_rate * d        = find(range_device_);
    const double        took     = now - range_start_;
    const double        expected = stable_.expected_ms(range_stable_first_, d != nullptr && d->measured ? d->rate : 0.0);
    if (took <= k_ask_gap_ms || took <= k_pause_factor * expected) {
        stable_.timed(range_stable_first_, took, range_work_);
    }
}

// The uncut graph in flight ended at `now`, the next graph's first ask. A held graph's: nothing of
// it is remembered but its plan's fit (its asks after the first went uncounted).
void checkpoint_policy::finish_uncut(double now) {
    const device_rate * d = find(stable_.device());
    stable_.end_uncut(now - uncut_start_, k_pause_factor, interval_of(d != nullptr ? *d : device_rate{}));
    uncut_ = false;
}

// What ran before a graph no call told of, beginning at `now`, in its run (run_clock); 0 without a
// clock. A gap past k_run_gap_ms begins a new run there.
double checkpoint_policy::run_before(double now, double graph_ms) {
    if (run_ == nullptr) {
        return 0.0;
    }
    if (run_->busy_end <= 0.0 || now - run_->busy_end > k_run_gap_ms) {
        run_->began = now;
    }
    return std::clamp(now - run_->began, 0.0, k_run_graphs * graph_ms);
}

// The graph that ended (head_) is kept with its nodes' times, and planned again from them.
void checkpoint_policy::keep_plan() {
    if (!log_valid_ || graph_log_.empty()) {
        return;
    }
    auto this_graph = [&](const view_plan_record & p) {
        return p.last_use != 0 && p.head == head_ && p.device == log_device_;
    };
    view_plan_record & slot = slot_for(plans_, this_graph, [](const view_plan_record & p) { return p.last_use == 0; });
    // The same graph again keeps its cuts while its views stay within the band (plan); another is
    // planned when a graph with its first node begins (find_plan).
    const bool same = this_graph(slot) && slot.nodes.size() == graph_log_.size();
    if (same) {
        // Each node's time averaged with what it took before: a graph's noise (a tenth on llvmpipe)
        // halved, its drift followed within a few graphs.
        for (size_t i = 0; i < graph_log_.size(); ++i) {
            const float before = slot.nodes[i].ms, now = graph_log_[i].ms;
            graph_log_[i].ms   = before >= 0.0f && now >= 0.0f ? 0.5f * (before + now) : now;
        }
    }
    slot.head     = head_;
    slot.device   = log_device_;
    slot.last_use = ++plan_uses_;
    slot.nodes.swap(graph_log_); // graph_log_ keeps the old nodes' memory for the next graph
    if (!same) {
        slot.cuts.clear();
    }
}

// The cuts of `p` for a graph that begins `before_ms` into its run: planned again where the
// longest view allowed left the band; none where its nodes are fast enough for the rules at each ask.
void checkpoint_policy::plan(view_plan_record & p, double before_ms) const {
    const device_rate * d = find(p.device);
    if (d == nullptr || !d->measured) {
        p.cuts.clear();
        return;
    }
    auto ms_of = [&](const logged_node & n) {
        return n.ms >= 0.0f ? static_cast<double>(n.ms) : n.work / d->rate;
    };
    double graph = 0.0;
    for (const logged_node & n : p.nodes) {
        graph += ms_of(n);
    }
    const double interval = interval_of(*d);
    if (graph * k_plan_nodes_per_interval <= interval * static_cast<double>(p.nodes.size())) {
        p.cuts.clear();
        return;
    }
    const double longest = std::max(k_sleep_graph_share * (graph + before_ms), k_sleep_budgets * interval);
    // Noise never moves a view: the cuts stay while the longest view allowed stays within the
    // stable plans' band of the one they were planned for, and their views as last timed within
    // k_plan_view_over of it.
    if (!p.cuts.empty() && longest <= stable_plans::k_slower * p.longest_ms &&
        longest * stable_plans::k_faster >= p.longest_ms && longest_cut_view(p, ms_of) <= k_plan_view_over * longest) {
        return;
    }
    std::vector<float>   ms(p.nodes.size());
    std::vector<uint8_t> fence(p.nodes.size()), starts(p.nodes.size());
    for (size_t i = 0; i < p.nodes.size(); ++i) {
        ms[i]     = static_cast<float>(ms_of(p.nodes[i]));
        fence[i]  = p.nodes[i].fence;
        starts[i] = p.nodes[i].start;
    }
    // Planned below the longest allowed (stable_plans::k_target), so that noise leaves the cuts
    // be, unless that spins more than a view's cost longer than views up to the longest.
    auto cuts_for = [&](double max_view_ms) {
        return plan_views(ms.data(), fence.data(), starts.data(), ms.size(), max_view_ms, k_plan_view_cost * interval,
                          k_plan_max_nodes);
    };
    auto spin = [&](const std::vector<uint8_t> & cuts) {
        return spun_ms(ms.data(), fence.data(), starts.data(), cuts.data(), ms.size());
    };
    p.cuts = cuts_for(stable_plans::k_target * longest);
    std::vector<uint8_t> loose = cuts_for(longest);
    if (spin(p.cuts) > spin(loose) + k_plan_view_cost * interval) {
        p.cuts.swap(loose);
    }
    p.longest_ms = longest;
}

// The longest view `p`'s cuts make of its nodes' times (`ms_of`), ms; a split's start ends one too.
template <typename MsOf> double checkpoint_policy::longest_cut_view(const view_plan_record & p, MsOf ms_of) {
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

void checkpoint_policy::find_plan() {
    plan_ = -1;
    for (int i = 0; i < k_plans; ++i) {
        view_plan_record & p = plans_[i];
        if (p.last_use != 0 && p.head == head_) {
            p.last_use = ++plan_uses_;
            plan(p, call_before_ms_);
            plan_ = p.cuts.empty() ? -1 : i;
            return;
        }
    }
}

bool checkpoint_policy::is_graph(const graph_record & g, const void * device) const {
    return g.work > 0.0 && g.device == device && g.head == head_;
}

void checkpoint_policy::remember_graph(const void * device, double work) {
    graph_record & slot = slot_for(
        graphs_, [&](const graph_record & g) { return is_graph(g, device); },
        [](const graph_record & g) { return g.work <= 0.0; });
    slot = graph_record{head_, device, work, ++graph_uses_};
}

double checkpoint_policy::recall_graph(const void * device) const {
    for (const graph_record & g : graphs_) {
        if (is_graph(g, device)) {
            return g.work;
        }
    }
    return 0.0;
}

bool checkpoint_policy::wants_round_trip() const {
    const device_rate * d = find(last_device_);
    return d == nullptr || d->round_trip <= 0.0 || d->since_trip + 1 >= k_cost_sample_every;
}

void checkpoint_policy::passed(double now, double round_trip_ms) {
    device_rate & d = rate_of(last_device_);
    d.since_trip++;
    if (round_trip_ms >= 0.0) {
        d.trips[d.n_trips++ % k_trip_samples] = round_trip_ms;
        d.round_trip = *std::min_element(d.trips, d.trips + std::min(d.n_trips, k_trip_samples));
        d.since_trip = 0;
    }
    bool unwaited = false;
    if (range_open_ && range_work_ > 0.0) {
        device_rate & r  = rate_of(range_device_);
        const double  ms = now - range_start_;
        // ggml-vulkan's synchronize returns at once after some views (one that ends in a KV cache's
        // SET_ROWS, fused into the ROPE before it: 0.1 ms for five products on llvmpipe); the view
        // is computed with the next one. Its range goes on, so that what both took is shared by
        // both: taken alone it would price its nodes at nothing, and a plan would gather them.
        // Only there: where views end at any node (a cap's budget), fast views taken for unwaited
        // left the rate to the slow ones (ten times the checkpoints on a code predictor).
        const bool fenced = !view_fence_.empty() && view_fence_.back() == k_fence_carries;
        unwaited = range_sleeps_ && !fenced && cap_ <= 0.0 && r.measured && ms < k_unwaited_share * range_work_ / r.rate;
        if (!unwaited) {
            time_range(ms, r.rate);
            stable_.timed(range_stable_first_, ms, range_work_); // a range's nodes are one device's
            learn(r, range_work_, ms);
            if (range_device_ != nullptr) {
                longest_view_ = std::max(longest_view_, ms);
            }
        }
    }
    stable_.passed();
    if (run_ != nullptr) {
        run_->busy_end = now;
    }
    if (unwaited) {
        end_view();
    } else {
        reset();
    }
}

// The measured range took `ms`: the graph's nodes in it share their part of it (a range may begin
// in the graph before) by what each took last time the graph ran, where it followed a plan, else
// by work. A view's time says nothing of which of its nodes took it; the same nodes grouped other
// ways graph after graph do, once each view's time is shared as the ones before were.
void checkpoint_policy::time_range(double ms, double rate) {
    if (!log_valid_ || range_device_ != log_device_ || range_work_ <= 0.0 || rate <= 0.0) {
        return;
    }
    const view_plan_record * prior = plan_ >= 0 ? &plans_[plan_] : nullptr;
    // What the node took before, at least a quarter of what its work takes: a node once timed at
    // nothing is not held there by its own past.
    auto before = [&](size_t i) {
        const double by_work = graph_log_[i].work / rate;
        const bool   timed   = prior != nullptr && i < prior->nodes.size() && prior->nodes[i].ms >= 0.0f;
        return timed ? std::max(static_cast<double>(prior->nodes[i].ms), k_work_weight * by_work) : by_work;
    };
    double work = 0.0, weight = 0.0;
    for (size_t i = range_log_first_; i < graph_log_.size(); ++i) {
        work += graph_log_[i].work;
        weight += before(i);
    }
    const double mine = std::max(ms, 0.0) * std::min(work / range_work_, 1.0);
    for (size_t i = range_log_first_; i < graph_log_.size(); ++i) {
        const double share = weight > 0.0 ? before(i) / weight : (work > 0.0 ? graph_log_[i].work / work : 0.0);
        graph_log_[i].ms   = static_cast<float>(mine * share);
    }
}

void checkpoint_policy::note_graph_ms(double ms) {
    timed_graph & slot = slot_for(
        timed_, [&](const timed_graph & g) { return g.last_use != 0 && g.head == call_head_; },
        [](const timed_graph & g) { return g.last_use == 0; });
    slot.head     = call_head_;
    slot.ms       = ms;
    slot.last_use = ++timed_uses_;
}

bool checkpoint_policy::graph_is_short() {
    call_head_ = head_;
    for (const timed_graph & g : timed_) {
        if (g.last_use != 0 && g.head == head_) {
            return g.ms > 0.0 && g.ms < interval_ms(last_device_);
        }
    }
    return false;
}

void checkpoint_policy::hold_graph() {
    graph_held_ = true;
    range_open_ = false;
}

void checkpoint_policy::abandon_graph() {
    reset();
    graph_cut_ = true;
}

void checkpoint_policy::reset() {
    end_view();
    range_open_ = false;
    range_work_ = 0.0;
}

void checkpoint_policy::end_view() {
    asked_      = -1; // rates, round trips or devices may have changed
    inv_budget_ = 0.0;
    progress_   = 0.0;
    view_work_  = 0.0;
    view_nodes_.clear();
    view_fence_.clear();
}

void checkpoint_policy::learn(device_rate & d, double work, double ms) {
    d.sample_work += work;
    d.sample_ms   += std::max(ms, 0.0);
    if (d.sample_ms < k_sample_share * interval_of(d)) {
        return;
    }
    const double want = d.sample_work / d.sample_ms;
    // Checkpoints too far apart cost latency: adopt a lower rate at once. Too close cost only
    // synchronizes: grow halfway, so that one fast sample does not overshoot.
    d.rate        = want < d.rate ? want : 0.5 * (d.rate + want);
    d.measured    = true;
    d.sample_work = 0.0;
    d.sample_ms   = 0.0;
}

double checkpoint_policy::budget(const void * device) const {
    const device_rate * d = find(device);
    return budget_of(d != nullptr ? *d : device_rate{});
}

double checkpoint_policy::interval_ms(const void * device) const {
    const device_rate * d = find(device);
    return interval_of(d != nullptr ? *d : device_rate{});
}

double checkpoint_policy::round_trip_ms(const void * device) const {
    const device_rate * d = find(device);
    return d != nullptr ? d->round_trip : 0.0;
}

double checkpoint_policy::budget() const {
    return budget(last_device_);
}

double checkpoint_policy::take_longest_view_ms() {
    const double ms = longest_view_;
    longest_view_ = 0.0;
    return ms;
}

} // namespace llama_cancel
