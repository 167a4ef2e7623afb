// Eval-callback checkpoints: the one hook ggml's scheduler runs for every backend (GPU APIs, RPC,
// BLAS) and for clip encodes.
//
// The scheduler asks `ask = true` for the nodes of a split *before* computing them, and groups the
// nodes up to the first one answered true into one graph view; only after computing and
// synchronizing that view does it call `ask = false`, where returning false leaves the split.
// So the byte can only be seen at nodes answered true (checkpoints), and each costs a backend
// synchronize. Both forms below leave where checkpoints go to checkpoint_policy (by work and
// measured rate, not by node).
#include "llama-cancel.h"

#include "backend_wait.h"
#include "checkpoint_policy.h"
#include "clock.h"
#include "eval_callback.h"
#include "flag.h"
#include "work.h"

#include <new>

namespace {

using llama_cancel::checkpoint_policy;
using llama_cancel::device_key;
using llama_cancel::now_ms;

// The stateless form's state: per thread, since ggml's scheduler calls cb_eval on the thread that
// computes the graph, so no lock and nothing shared between hosts' decoding threads. It outlives
// graphs and contexts: work left over at a graph's end counts toward the next one's first checkpoint,
// and rates learnt on a device serve every later graph on it.
thread_local checkpoint_policy t_policy;
// Set when the stateless form stopped a graph on this thread: llama_decode still returns 0 then,
// and llama_cancel_decode (on the same thread) must not report that as success.
thread_local bool t_stopped = false;
// Asks about device nodes on this thread, by either callback (llama_cancel::device_asks).
thread_local uint64_t t_device_asks = 0;

const void * asked_device(const ggml_tensor * t) {
    const void * device = device_key(t);
    t_device_asks += device != nullptr ? 1 : 0;
    return device;
}

// A checkpoint passed: the view's rate, and now and then the checkpoint's own round trip.
void pass_checkpoint(checkpoint_policy & policy, const ggml_tensor * t) noexcept {
    try {
        const double done = now_ms();
        const double trip = policy.wants_round_trip() ? llama_cancel::round_trip_ms(t, now_ms) : -1.0;
        policy.passed(done, trip);
    } catch (...) {
        policy.reset(); // out of memory: the view measures nothing (no exception may reach ggml)
    }
}

// Whether a checkpoint ends the view at `t`. The policy's node records can allocate; should that
// fail, a checkpoint at every node is the safe answer (no exception may reach ggml).
bool checkpoint_due(checkpoint_policy & policy, const ggml_tensor * t) noexcept {
    try {
        return policy.place(t, asked_device(t), now_ms(), llama_cancel::sleeps_until_almost_ready(t));
    } catch (...) {
        return true;
    }
}

} // namespace

uint64_t llama_cancel::device_asks() {
    return t_device_asks;
}

bool llama_cancel::take_stateless_stop() {
    const bool stopped = t_stopped;
    t_stopped = false;
    return stopped;
}

// Stateless form: checkpoints by work and measured rate, as the hook places them, and at once when
// the byte is already set while the scheduler is still grouping nodes.
extern "C" bool llama_cancel_eval_callback(ggml_tensor * t, bool ask, void * flag) {
    const auto * byte = static_cast<const int8_t *>(flag);
    if (byte == nullptr) {
        return !ask; // nothing can stop it: no checkpoint, no synchronize
    }
    if (ask) {
        return llama_cancel::flag_is_set(byte) || checkpoint_due(t_policy, t);
    }
    llama_cancel::wait_computed(t);
    if (llama_cancel::flag_is_set(byte)) {
        t_policy.reset(); // the graph is abandoned: its cut view measures nothing
        t_stopped = true;
        return false;
    }
    pass_checkpoint(t_policy, t);
    return true;
}

struct llama_cancel_hook {
    llama_cancel_hook_params params;
    checkpoint_policy        policy;

    bool                chain_asked = false;
    const ggml_tensor * chain_node  = nullptr;

    bool     stopped     = false;
    uint64_t checkpoints = 0;
    uint64_t asks        = 0;

    const int8_t * const * seq_flags   = nullptr; // llama_cancel::hook_watch_seq_flags
    size_t                 n_seq_flags = 0;

    bool stop_requested() const {
        if (llama_cancel::flag_is_set(params.flag)) {
            return true;
        }
        for (size_t i = 0; i < n_seq_flags; ++i) {
            if (llama_cancel::flag_is_set(seq_flags[i])) {
                return true;
            }
        }
        return false;
    }
};

extern "C" llama_cancel_hook_params llama_cancel_hook_default_params(void) {
    llama_cancel_hook_params p{};
    p.flag        = nullptr;
    p.interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    p.chain       = nullptr;
    p.chain_data  = nullptr;
    return p;
}

extern "C" llama_cancel_hook * llama_cancel_hook_init(const llama_cancel_hook_params * params) {
    auto * hook = new (std::nothrow) llama_cancel_hook();
    if (hook == nullptr) {
        return nullptr;
    }
    hook->params = params != nullptr ? *params : llama_cancel_hook_default_params();
    if (!(hook->params.interval_ms > 0.0f)) {
        hook->params.interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    }
    hook->policy.set_interval(hook->params.interval_ms);
    return hook;
}

extern "C" void llama_cancel_hook_free(llama_cancel_hook * hook) {
    delete hook;
}

extern "C" void llama_cancel_hook_set_flag(llama_cancel_hook * hook, const int8_t * flag) {
    if (hook != nullptr) {
        hook->params.flag = flag;
    }
}

extern "C" const int8_t * llama_cancel_hook_get_flag(const llama_cancel_hook * hook) {
    return hook != nullptr ? hook->params.flag : nullptr;
}

extern "C" bool llama_cancel_hook_stopped(const llama_cancel_hook * hook) {
    return hook != nullptr && hook->stopped;
}

extern "C" void llama_cancel_hook_reset(llama_cancel_hook * hook) {
    if (hook != nullptr) {
        hook->stopped     = false;
        hook->policy.reset();
        hook->chain_asked = false;
        hook->chain_node  = nullptr;
    }
}

extern "C" llama_cancel_hook_stats llama_cancel_hook_get_stats(const llama_cancel_hook * hook) {
    llama_cancel_hook_stats s{};
    if (hook != nullptr) {
        s.checkpoints  = hook->checkpoints;
        s.asks         = hook->asks;
        s.budget_flops  = hook->policy.budget();
        s.stopped       = hook->stopped;
        s.interval_ms   = hook->policy.interval_ms(hook->policy.last_device());
        s.round_trip_ms = hook->policy.round_trip_ms(hook->policy.last_device());
    }
    return s;
}

extern "C" void llama_cancel_hook_bind(llama_cancel_hook * hook, llama_context_params * params) {
    if (hook == nullptr || params == nullptr) {
        return;
    }
    if (params->cb_eval != nullptr && params->cb_eval != llama_cancel_hook_eval_callback) {
        hook->params.chain      = params->cb_eval;
        hook->params.chain_data = params->cb_eval_user_data;
    }
    params->cb_eval           = llama_cancel_hook_eval_callback;
    params->cb_eval_user_data = hook;
}

extern "C" bool llama_cancel_hook_eval_callback(ggml_tensor * t, bool ask, void * user_data) {
    auto * h = static_cast<llama_cancel_hook *>(user_data);
    if (h == nullptr) {
        return !ask;
    }
    const auto & p = h->params;
    if (ask) {
        h->asks++;
        // Once stopped, every later split of this graph stops at its first node.
        if (h->stopped || h->stop_requested()) {
            h->chain_asked = false;
            return true;
        }
        const bool due = checkpoint_due(h->policy, t);
        h->chain_asked = p.chain != nullptr && p.chain(t, true, p.chain_data);
        h->chain_node  = t;
        return h->chain_asked || due;
    }

    // ask == false: the view up to `t` is computed and the backend synchronized.
    llama_cancel::wait_computed(t);
    bool keep_going = true;
    if (h->chain_asked && h->chain_node == t) {
        keep_going = p.chain(t, false, p.chain_data);
    }
    h->chain_asked = false;
    // A stop by the byte, or by the chained callback: either way the graph is incomplete.
    if (h->stopped || h->stop_requested() || !keep_going) {
        h->stopped = true;
        h->policy.reset();
        return false;
    }
    pass_checkpoint(h->policy, t);
    h->checkpoints++;
    return true;
}

double llama_cancel::hook_cap_ms(const llama_cancel_hook * hook) {
    return hook != nullptr ? hook->policy.cap_ms() : 0.0;
}

void llama_cancel::hook_set_cap_ms(llama_cancel_hook * hook, double ms) {
    if (hook != nullptr) {
        hook->policy.set_cap(ms);
    }
}

void llama_cancel::hook_watch_seq_flags(llama_cancel_hook * hook, const int8_t * const * flags, size_t n) {
    if (hook != nullptr) {
        hook->seq_flags   = flags;
        hook->n_seq_flags = flags != nullptr ? n : 0;
    }
}

double llama_cancel::hook_take_longest_view_ms(llama_cancel_hook * hook) {
    return hook != nullptr ? hook->policy.take_longest_view_ms() : 0.0;
}

double llama_cancel::stateless_cap_ms() {
    return t_policy.cap_ms();
}

void llama_cancel::stateless_set_cap_ms(double ms) {
    t_policy.set_cap(ms);
}

double llama_cancel::take_stateless_longest_view_ms() {
    return t_policy.take_longest_view_ms();
}
