#include "checkpoint_policy.h"

#include "work.h"

#include "ggml-backend.h"

#include <algorithm>

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

checkpoint_policy::checkpoint_policy(double interval_ms) : interval_(LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS) {
    set_interval(interval_ms);
}

void checkpoint_policy::set_interval(double interval_ms) {
    const double next = interval_ms > 0.0 ? interval_ms : LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    for (device_rate & d : devices_) {
        if (d.used) {
            d.budget = std::clamp(d.budget * next / interval_, k_min_budget, k_max_budget);
        }
    }
    interval_ = next;
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

bool checkpoint_policy::pause_was_compute(const device_rate & d, double now) const {
    const double pause = now - last_ask_;
    return pause <= k_ask_gap_ms || pause <= k_pause_factor * view_work_ / d.budget * interval_;
}

bool checkpoint_policy::place(const ggml_tensor * node, const void * device, double now) {
    device_rate & d = rate_of(device);
    if (!range_open_ || device != range_device_ || !pause_was_compute(d, now)) {
        range_open_   = true;
        range_device_ = device;
        range_start_  = now;
        range_work_   = 0.0;
    }
    if (now - last_ask_ > k_ask_gap_ms) {
        view_work_ = 0.0; // the view before the pause is computed
    }
    last_ask_    = now;
    last_device_ = device;
    const double work = node_work(node);
    range_work_ += work;
    view_work_  += work;
    progress_   += work / d.budget;
    return progress_ >= 1.0;
}

void checkpoint_policy::passed(double now) {
    if (range_open_ && range_work_ > 0.0) {
        learn(rate_of(range_device_), range_work_, now - range_start_);
    }
    reset();
}

void checkpoint_policy::reset() {
    progress_   = 0.0;
    range_open_ = false;
    range_work_ = 0.0;
    view_work_  = 0.0;
}

void checkpoint_policy::learn(device_rate & d, double work, double ms) {
    d.sample_work += work;
    d.sample_ms   += std::max(ms, 0.0);
    if (d.sample_ms < k_sample_share * interval_) {
        return;
    }
    const double want = std::clamp(d.sample_work / d.sample_ms * interval_, k_min_budget, k_max_budget);
    // Checkpoints too far apart cost latency: adopt a smaller budget at once. Too close cost only
    // synchronizes: grow halfway, so that one fast sample does not overshoot.
    d.budget      = want < d.budget ? want : 0.5 * (d.budget + want);
    d.sample_work = 0.0;
    d.sample_ms   = 0.0;
}

double checkpoint_policy::budget(const void * device) const {
    for (const device_rate & d : devices_) {
        if (d.used && d.device == device) {
            return d.budget;
        }
    }
    return k_initial_budget;
}

double checkpoint_policy::budget() const {
    return budget(last_device_);
}

} // namespace llama_cancel
