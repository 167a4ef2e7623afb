#include "checkpoints/stable_plan.h"

#include "checkpoints/slots.h"

#include <algorithm>
#include <cmath>

namespace llama_cancel {

using namespace tuning;

stable_plans::record & stable_plans::slot_of(const graph_head & head) {
    return slot_for(
        plans_, [&](const record & r) { return r.last_use != 0 && r.head == head; },
        [](const record & r) { return r.last_use == 0; });
}

void stable_plans::begin(const graph_head & head) {
    head_   = head;
    device_ = nullptr;
    valid_  = true;
    emulated_ = false;
    log_.clear();
    plan_      = -1;
    replayed_  = false;
    measuring_ = false;
    for (int i = 0; i < k_stable_plans; ++i) {
        record & r = plans_[i];
        if (r.last_use != 0 && r.head == head && !r.cuts.empty()) {
            r.last_use  = ++uses_;
            plan_       = i;
            measuring_  = r.remeasure;
            r.remeasure = false;
            return;
        }
    }
}

int stable_plans::ask(const void * device, bool emulated, double work, bool follow) {
    if (log_.size() >= k_graph_nodes) {
        valid_ = false; // too many nodes: placed at each ask
        plan_  = -1;
        return -1;
    }
    if (device_ == nullptr) {
        device_ = device; // the graph's first device off the host, if any
    }
    emulated_ = emulated_ || emulated;
    log_.push_back(node{static_cast<float>(work), -1.0f, 0, device});
    if (plan_ < 0 || !follow) {
        return -1;
    }
    replayed_ = true;
    const record & r = plans_[plan_];
    const size_t   i = log_.size() - 1;
    if (i < r.nodes.size() && device == r.nodes[i].device) {
        const double planned = r.nodes[i].work;
        const double lo = std::min(work, planned), hi = std::max(work, planned);
        if (hi <= k_plan_work_slack * lo + 1e3) {
            return r.cuts[i] != 0 || (measuring_ && i + 1 == r.nodes.size()) ? 1 : 0;
        }
    }
    plan_ = -1;
    return -1;
}

void stable_plans::timed(size_t first, double ms, double range_work) {
    if (!valid_ || first >= log_.size() || range_work <= 0.0) {
        return;
    }
    double work = 0.0;
    for (size_t i = first; i < log_.size(); ++i) {
        work += log_[i].work;
    }
    const double mine = std::max(ms, 0.0) * std::min(work / range_work, 1.0);
    for (size_t i = first; i < log_.size(); ++i) {
        log_[i].ms = static_cast<float>(work > 0.0 ? mine * log_[i].work / work : 0.0);
    }
}

void stable_plans::passed() {
    if (valid_ && !log_.empty()) {
        log_.back().cut = 1;
    }
}

double stable_plans::expected_ms(size_t first, double rate) const {
    const bool planned = plan_ >= 0 && plans_[plan_].nodes.size() >= log_.size();
    double     ms      = 0.0;
    for (size_t i = first; i < log_.size(); ++i) {
        ms += planned ? plans_[plan_].nodes[i].ms : rate > 0.0 ? log_[i].work / rate : 0.0;
    }
    return ms;
}

// Each node's time: as timed, else its work at the rate its device's timed nodes in the graph
// showed (where they did k_timed_share of its work there), else at the device's measured rate
// (`rates`), else (less than a quota of it) at nothing. The graph's whole time; < 0 where a node
// has no price (not planned).
double stable_plans::price(std::vector<node> & nodes, const device_rates & rates) {
    struct per_device {
        const void * device = nullptr;
        double       work = 0.0, ms = 0.0, all = 0.0, rate = 0.0;
    };
    per_device seen[k_graph_devices];
    size_t     n_seen = 0;
    auto       of     = [&](const void * device) -> per_device * {
        for (size_t i = 0; i < n_seen; ++i) {
            if (seen[i].device == device) {
                return &seen[i];
            }
        }
        if (n_seen == k_graph_devices) {
            return nullptr;
        }
        seen[n_seen].device = device;
        return &seen[n_seen++];
    };
    for (const node & n : nodes) {
        per_device * d = of(n.device);
        if (d == nullptr) {
            return -1.0; // more devices than a plan prices
        }
        d->all += n.work;
        if (n.ms >= 0.0f) {
            d->work += n.work;
            d->ms += n.ms;
        }
    }
    for (size_t i = 0; i < n_seen; ++i) {
        per_device & d = seen[i];
        d.rate = d.ms > 0.0 && d.work >= k_timed_share * d.all ? d.work / d.ms : rates.of(rates.owner, d.device);
        if (d.rate <= 0.0 && d.all - d.work >= k_min_quota) {
            return -1.0; // untimed nodes on a device with no rate measured
        }
        // Less untimed work than the smallest quota never decides a cut (a host split's token
        // lookup, too short for a view to time): priced at nothing.
        d.rate = d.rate > 0.0 ? d.rate : HUGE_VAL;
    }
    double total = 0.0;
    for (node & n : nodes) {
        if (n.ms < 0.0f) {
            n.ms = static_cast<float>(n.work / of(n.device)->rate);
        }
        total += n.ms;
    }
    return total;
}

void stable_plans::end_uncut(double took_ms, double pause_factor, double interval_ms) {
    const int followed = plan_;
    plan_ = -1;
    log_.clear();
    if (followed < 0) {
        return;
    }
    record & r        = plans_[followed];
    double   expected = 0.0, heaviest = 0.0;
    for (const node & n : r.nodes) {
        expected += n.ms;
        heaviest = std::max(heaviest, static_cast<double>(n.ms));
    }
    if (took_ms < 0.0 || expected <= 0.0 || took_ms > pause_factor * expected) {
        // Not known: the host's pause, or a graph that slowed past the pause factor. Measured again
        // when it stays so (a call with a checkpoint at its last node, which times it whole); each
        // measure that finds it still fitting doubles the wait, or a host that pauses between its
        // graphs would see their views move every few calls.
        const int wait = k_plan_strays << std::min(r.remeasures, k_unknown_end_doublings);
        if (++r.unknown_ends >= wait) {
            r.unknown_ends = 0;
            r.remeasures++;
            r.remeasure = true;
        }
        return;
    }
    r.unknown_ends = 0;
    if (!strayed(r, took_ms - heaviest <= k_slower * interval_ms)) {
        return; // still fits, or one call did not
    }
    for (node & n : r.nodes) {
        n.ms = static_cast<float>(n.ms * took_ms / expected);
    }
    r.planned_ms = took_ms;
    r.served     = false;
    r.strays     = {};
    cut(r, interval_ms);
    r.remeasures = r.uncut ? r.remeasures : 0;
    replans_ += r.uncut ? 0 : 1;
}

// Cuts where the time since the last one reaches k_target of the interval; none at the last node
// (the graph's end is read anyway), none at all in a graph within the interval. On an emulated device, the
// cuts its strategy placed (they end views where little spins).
void stable_plans::cut(record & r, double interval_ms) {
    r.cuts.assign(r.nodes.size(), 0);
    r.interval_ms = interval_ms;
    r.uncut = false; // an emulated device's asks are its strategy's (fences, spin)
    if (r.emulated) {
        for (size_t i = 0; i < r.nodes.size(); ++i) {
            r.cuts[i] = r.nodes[i].cut;
        }
        return;
    }
    if (r.planned_ms <= interval_ms) {
        r.uncut = true; // the stop waits for the graph's end, within the interval
        return;
    }
    double since = 0.0;
    for (size_t i = 0; i + 1 < r.nodes.size(); ++i) {
        since += r.nodes[i].ms;
        if (since >= k_target * interval_ms) {
            r.cuts[i] = 1;
            since     = 0.0;
        }
    }
    r.uncut = std::find(r.cuts.begin(), r.cuts.end(), 1) == r.cuts.end();
}

// The longest time a view of the cuts made of `nodes` takes beside its longest node, ms: a node
// slower than its work said (a convolution beside products) shows here before the graph's time
// moves. (A view reaches the interval before its last node; one node past it is no stop's fault.)
double stable_plans::longest_view(const std::vector<uint8_t> & cuts, const std::vector<node> & nodes) {
    double longest = 0.0, view = 0.0, heaviest = 0.0;
    for (size_t i = 0; i < nodes.size(); ++i) {
        view += nodes[i].ms;
        heaviest = std::max(heaviest, static_cast<double>(nodes[i].ms));
        if (cuts[i] != 0 || i + 1 == nodes.size()) {
            longest  = std::max(longest, view - heaviest);
            view     = 0.0;
            heaviest = 0.0;
        }
    }
    return longest;
}

// Whether `r`'s cuts still serve the graph just run (its nodes' times in log_, `total` ms): no view
// past k_slower of the longest allowed beside its longest node (a stop would wait too long), and no
// more than k_faster times the views the graph needs now (each one a synchronize); an emulated
// device's graph no more than k_faster times faster than when planned.
bool stable_plans::keeps(const record & r, double total, double interval_ms, double emulated_view_ms) const {
    if (longest_view(r.cuts, log_) > k_slower * (r.emulated ? emulated_view_ms : interval_ms)) {
        return false;
    }
    double views = 1.0;
    for (uint8_t c : r.cuts) {
        views += c;
    }
    const bool few = views <= k_faster * (total / (k_target * interval_ms) + 1.0);
    return r.emulated ? few && total * k_faster >= r.planned_ms : few;
}

// Whether `r`'s cuts are to be made again after a call `in_band` or not: once they served a call,
// only after k_plan_strays calls in a row out of their band.
bool stable_plans::strayed(record & r, bool in_band) {
    const bool out = r.strays.out(in_band);
    r.served       = r.served || in_band;
    return !in_band && (!r.served || out);
}

void stable_plans::end(bool whole, size_t asks, const device_rates & rates, double interval_ms, double emulated_view_ms) {
    const int  followed = plan_;
    const bool measured = measuring_; // the unknown ends that asked for it were the strays
    plan_      = -1;
    measuring_ = false;
    if (!whole || !valid_ || log_.empty() || interval_ms <= 0.0) {
        return;
    }
    const double total = price(log_, rates);
    if (total < 0.0) {
        return;
    }
    record &   r    = followed >= 0 ? plans_[followed] : slot_of(head_);
    const bool same = followed >= 0 && r.nodes.size() == log_.size() &&
                      std::abs(r.interval_ms - interval_ms) <= 0.05 * interval_ms;
    const bool in_band = same && keeps(r, total, interval_ms, emulated_view_ms);
    if (same && (measured ? in_band : !strayed(r, in_band))) {
        r.asks = asks;
        return; // the cuts stay where they are
    }
    if (followed >= 0 && r.emulated && replayed_) {
        // This call replayed the cuts (no view plan placed them): the strategy's rules place the
        // next call's, kept from then.
        r.cuts.clear();
        replans_++;
        return;
    }
    // A graph's first run pays what runs once (kernels or shaders loaded, memory first touched):
    // kept, not planned from; its second is.
    const bool           seen = r.last_use != 0 && r.head == head_ && r.nodes.size() == log_.size();
    const bool           kept = seen && !r.cuts.empty();
    std::vector<uint8_t> before;
    if (kept) {
        before.swap(r.cuts);
    }
    r.head     = head_;
    r.emulated   = emulated_;
    r.last_use = ++uses_;
    r.nodes.swap(log_); // log_ keeps the old nodes' memory for the next graph
    r.asks       = asks;
    r.planned_ms = total;
    r.served     = false;
    r.strays     = {};
    r.unknown_ends = 0;
    r.remeasure    = false;
    if (!seen) {
        r.cuts.clear(); // not followed (begin)
        r.uncut      = false;
        r.remeasures = 0;
        return;
    }
    cut(r, interval_ms);
    r.remeasures = kept && r.uncut ? r.remeasures : 0; // the back-off holds while the graph fits
    replans_ += kept && before != r.cuts ? 1 : 0;
}

} // namespace llama_cancel
