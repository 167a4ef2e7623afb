#include "checkpoints/checkpoint_policy.h"

#include "checkpoints/slots.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cmath>

namespace llama_cancel {

using namespace tuning;

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
        cached_device_ = {device_key(node), on_emulated_vulkan(node), is_rpc_buffer(node->buffer)};
    }
    return cached_device_;
}

checkpoint_policy::checkpoint_policy(double interval_ms) : interval_(LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS) {
    set_interval(interval_ms);
}

void checkpoint_policy::set_interval(double interval_ms) {
    interval_  = interval_ms > 0.0 ? interval_ms : LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    inv_quota_ = 0.0;
}

double checkpoint_policy::interval_of(const device_rate & d) const {
    // Only a measured rate is lengthened, and only by k_trip_samples round trips: with a guessed
    // rate, or one round trip a busy core delayed, rarer checkpoints would only make the measure
    // slower to come.
    double paid = interval_;
    if (d.measured && d.n_trips >= k_trip_samples) {
        double stretch = d.round_trip / k_cost_share;
        if (graph_ms_ > 0.0) {
            stretch = std::min(stretch, graph_ms_ / k_min_graph_checkpoints);
        }
        paid = std::max(interval_, stretch);
    }
    return cap_ > 0.0 ? std::min(paid, cap_) : paid;
}

double checkpoint_policy::quota_of(const device_rate & d) const {
    return std::clamp(d.rate * interval_of(d), k_min_quota, k_max_quota);
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
        asked_     = static_cast<int>(&rate_of(device) - devices_);
        inv_quota_ = 0.0;
    }
    return devices_[asked_];
}

double checkpoint_policy::inv_quota() {
    if (inv_quota_ == 0.0) {
        inv_quota_ = 1.0 / quota_of(devices_[asked_]);
    }
    return inv_quota_;
}

bool checkpoint_policy::pause_was_compute(const device_rate & d, double now) const {
    const double pause = now - last_ask_;
    return pause <= k_ask_gap_ms || pause <= k_pause_factor * view_work_ / d.rate;
}

device_timing checkpoint_policy::timing(const device_rate & d) const {
    return device_timing{d.rate, d.measured, interval_of(d)};
}

double checkpoint_policy::interval_on(const void * device) const {
    const device_rate * d = find(device);
    return interval_of(d != nullptr ? *d : device_rate{});
}

bool checkpoint_policy::place(const ggml_tensor * node, const void * device, double now, bool emulated, uint8_t fence) {
    device_rate & d = asked(device);
    const bool opened = open_graph_at(node, now);
    // A planned graph's views are its own, timed from its first ask: the view that ended the graph
    // before was timed as this one opened (time_tail).
    if (!range_open_ || device != range_device_ || !pause_was_compute(d, now) || (opened && stable_.following())) {
        open_range(device, emulated, now);
    }
    const bool paused = now - last_ask_ > k_ask_gap_ms;
    if (paused) {
        view_work_ = 0.0; // the view before the pause is computed
    }
    // Another device's node came between: the split before it ended there, computed whole.
    const bool split_start = device != last_device_;
    last_ask_    = now;
    last_device_ = device;
    const double work = node_work(node, sizes_);
    ids_.add(work);
    range_work_ += work;
    view_work_ += work;
    if (graph_nodes_.size() < k_graph_first_nodes) {
        graph_nodes_.insert(node);
    }
    graph_asks_++;
    d.graph_acc += work;
    progress_ += work * inv_quota();
    emulated_.busy_until(now + view_work_ / d.rate); // the view grouped so far computes after its asks
    // A cap turns the emulated device's strategy off: a stop-time budget's is a promise no plan knows of.
    emulated = emulated && emulated_.ask(device, work, fence, paused || split_start, split_start, timing(d));
    const int stable = stable_.ask(device, emulated, work, !cap_strict_ && !emulated_.planned() && !emulated_.profiling());
    if (emulated && cap_ <= 0.0 && emulated_.profiling()) {
        return true;
    }
    if (stable == 0 && graph_asks_ == 1 && stable_.uncut() && !cap_strict_) {
        // The graph fits in the interval: the rest of its asks only look for the next graph.
        uncut_          = true;
        uncut_start_    = now;
        graph_unpriced_ = true;
        range_open_     = false;
        return false;
    }
    if (emulated && cap_ <= 0.0) {
        const int cut = emulated_.planned_cut(work);
        if (cut >= 0) {
            return cut != 0;
        }
    }
    if (stable >= 0) {
        return stable != 0;
    }
    return progress_ >= 1.0 && (!emulated || cap_ > 0.0 || emulated_.view_ends(progress_, view_work_, d.rate));
}

void checkpoint_policy::open_range(const void * device, bool emulated, double now) {
    range_open_     = true;
    range_device_   = device;
    range_start_    = now;
    range_work_     = 0.0;
    range_emulated_ = emulated;
    range_first_    = stable_.asked();
    emulated_.range_begins();
}

bool checkpoint_policy::open_graph_at(const ggml_tensor * node, double now) {
    const bool full = graph_asks_ >= k_graph_nodes;
    began_ = !full && (graph_pending_ || uncut_overran_ || graph_nodes_.contains(node));
    if (full || began_ || graph_asks_ == 0) {
        // Asked before in this graph, or a call began a graph, or the policy's first ask: a new
        // graph begins here (or no end in sight: its work not known).
        open_graph(node, !full, now);
        return true;
    }
    return false;
}

// The graph in flight ended (`whole`: seen from its first node to its last); the one beginning at
// `head` follows its plan, if one was kept.
void checkpoint_policy::open_graph(const ggml_tensor * head, bool whole, double now) {
    const bool counted = whole && !graph_unpriced_; // its asks were priced
    const bool seen    = counted && !graph_cut_; // and a stopped one's nodes were not all computed
    const bool   returned = returned_ms_ > 0.0 && returned_ms_ <= now; // a call saw the graph end
    const double end      = returned ? returned_ms_ : now;
    returned_ms_          = 0.0;
    if (uncut_) {
        const double took = uncut_overran_ ? -1.0 : end - uncut_start_; // another graph's time
        stable_.end_uncut(took, returned ? HUGE_VAL : k_pause_factor, interval_on(stable_.device()));
        uncut_         = false;
        uncut_overran_ = false;
    } else {
        time_tail(end, returned);
    }
    graph_ms_ = 0.0;
    for (device_rate & r : devices_) {
        graph_ms_ += counted ? r.graph_acc / r.rate : 0.0;
        r.graph_acc = 0.0;
    }
    const stable_plans::device_rates rates{this, [](const void * self, const void * device) {
        const device_rate * r = static_cast<const checkpoint_policy *>(self)->find(device);
        return r != nullptr && r->measured ? r->rate : 0.0;
    }};
    const double interval = interval_on(stable_.device());
    const size_t asks = every_ask_ > 0 ? every_ask_ - 1 : 0; // this ask is the next graph's
    every_ask_        = every_ask_ > 0 ? 1 : 0;
    const graph_head ended = ids_.end(seen); // which graph it was, known from its nodes
    stable_.identified(ended);
    emulated_.identified(ended);
    stable_.end(seen && !cap_strict_, asks, rates, interval, emulated_.longest_view_ms(interval, graph_ms_));
    emulated_.end_graph(seen, graph_ms_);
    head_ = ids_.begin(head);
    emulated_.begin_graph(head_, graph_pending_ ? pending_before_ms_ : -1.0, now);
    graph_nodes_.clear();
    graph_asks_     = 0;
    graph_pending_  = false;
    graph_unpriced_ = false;
    graph_cut_      = false;
    inv_quota_      = 0.0; // the graph's time may stretch the interval
    range_first_    = 0;
    stable_.begin(head_);
}

// A graph's last view ends with its split, at no checkpoint: it is timed to `end`, where a call saw
// the graph return (`returned`), else at the next graph's first ask where the pause since its asks
// is one it could take (k_pause_factor of what it took before), not a host's idle time. A graph
// within the interval has no other view: this is how it is seen to grow past it.
void checkpoint_policy::time_tail(double end, bool returned) {
    if (!range_open_ || range_first_ >= stable_.asked()) {
        return;
    }
    const device_rate * d        = find(range_device_);
    const double        took     = end - range_start_;
    const double        expected = stable_.expected_ms(range_first_, d != nullptr && d->measured ? d->rate : 0.0);
    if (returned || took <= k_ask_gap_ms || took <= k_pause_factor * expected) {
        stable_.timed(range_first_, took, range_work_);
    }
}

bool checkpoint_policy::wants_round_trip() const {
    const device_rate * d = find(last_device_);
    // Every checkpoint until k_trip_samples are in: the interval stretches from their minimum, and
    // one read that waited for a busy core would stretch it a hundredfold.
    return d == nullptr || d->n_trips < k_trip_samples || d->since_trip + 1 >= k_cost_sample_every;
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
        unwaited = range_emulated_ && cap_ <= 0.0 && emulated_.unwaited(ms, range_work_, timing(r));
        if (!unwaited) {
            emulated_.timed(range_device_, ms, range_work_, r.rate);
            stable_.timed(range_first_, ms, range_work_); // a range's nodes are one device's
            learn(r, range_work_, ms);
            if (range_device_ != nullptr) {
                longest_view_ = std::max(longest_view_, ms);
            }
        }
    }
    stable_.passed();
    emulated_.busy_until(now);
    if (unwaited) {
        end_view(); // the range goes on: timed with the next view
    } else {
        reset();
    }
}

void checkpoint_policy::note_graph_ms(double ms) {
    timed_graph & slot = slot_for(
        timed_, [&](const timed_graph & g) { return g.last_use != 0 && g.head.same_node(call_head_); },
        [](const timed_graph & g) { return g.last_use == 0; });
    slot.head     = call_head_;
    slot.ms       = ms;
    slot.last_use = ++timed_uses_;
}

bool checkpoint_policy::graph_is_short() {
    call_head_ = head_;
    for (const timed_graph & g : timed_) {
        if (g.last_use != 0 && g.head.same_node(head_)) { // a call is known by its first graph's node
            return g.ms > 0.0 && g.ms < interval_ms(last_device_);
        }
    }
    return false;
}

void checkpoint_policy::hold_graph() {
    graph_unpriced_ = true;
    range_open_     = false;
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
    asked_     = -1; // rates, round trips or devices may have changed
    inv_quota_ = 0.0;
    progress_  = 0.0;
    view_work_ = 0.0;
    emulated_.end_view();
}

void checkpoint_policy::learn(device_rate & d, double work, double ms) {
    d.sample_work += work;
    d.sample_ms += std::max(ms, 0.0);
    if (d.sample_ms < (d.measured ? k_sample_share * interval_of(d) : k_first_sample_ms)) {
        return;
    }
    const double want = d.sample_work / d.sample_ms;
    // The first measure replaces the guess. Then checkpoints too far apart cost latency: adopt a
    // lower rate at once; too close cost only synchronizes: grow halfway, so that one fast sample
    // does not overshoot.
    d.rate        = !d.measured || want < d.rate ? want : 0.5 * (d.rate + want);
    d.measured    = true;
    d.sample_work = 0.0;
    d.sample_ms   = 0.0;
}

double checkpoint_policy::quota(const void * device) const {
    const device_rate * d = find(device);
    return quota_of(d != nullptr ? *d : device_rate{});
}

double checkpoint_policy::interval_ms(const void * device) const {
    return interval_on(device);
}

double checkpoint_policy::round_trip_ms(const void * device) const {
    const device_rate * d = find(device);
    return d != nullptr ? d->round_trip : 0.0;
}

double checkpoint_policy::quota() const {
    return quota(last_device_);
}

double checkpoint_policy::take_longest_view_ms() {
    const double ms = longest_view_;
    longest_view_ = 0.0;
    return ms;
}

} // namespace llama_cancel
