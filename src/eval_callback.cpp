// Eval-callback checkpoints: the one hook ggml's scheduler runs for every backend (GPU APIs, RPC,
// BLAS) and for clip encodes.
//
// The scheduler asks `ask = true` for the nodes of a split *before* computing them, and groups the
// nodes up to the first one answered true into one graph view; only after computing and
// synchronizing that view does it call `ask = false`, where returning false leaves the split.
// So the byte can only be seen at nodes answered true (checkpoints), and each costs a backend
// synchronize. The policies below place checkpoints by work (estimated FLOPs), not by node.
#include "llama-cancel.h"

#include "flag.h"
#include "work.h"

#include <algorithm>
#include <chrono>
#include <new>

// Stateless form: a checkpoint after each node heavy enough to be worth a synchronize, and at once
// when the byte is already set while the scheduler is still grouping nodes.
extern "C" bool llama_cancel_eval_callback(ggml_tensor * t, bool ask, void * flag) {
    const auto * byte = static_cast<const int8_t *>(flag);
    if (ask) {
        return llama_cancel::flag_is_set(byte) || llama_cancel::node_work(t) >= LLAMA_CANCEL_EVAL_NODE_WORK;
    }
    llama_cancel::wait_computed(t);
    return !llama_cancel::flag_is_set(byte);
}

struct llama_cancel_hook {
    llama_cancel_hook_params params;

    double work_since   = 0.0;  // estimated FLOPs grouped since the last checkpoint
    double budget       = 0.0;  // FLOPs between checkpoints, adapted to the measured rate
    double range_start  = -1.0; // ms: first ask after a checkpoint (≈ start of the range's compute)
    bool   chain_asked  = false;
    const ggml_tensor * chain_node = nullptr;

    bool     stopped     = false;
    uint64_t checkpoints = 0;
    uint64_t asks        = 0;
};

namespace {

double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// Budget bounds: at least a few MFLOPs (so tiny graphs do not sync per node), at most enough that
// even a slow device reaches a checkpoint within the interval once the rate is known.
constexpr double k_min_budget     = 4.0e6;
constexpr double k_initial_budget = 2.0e8;
constexpr double k_max_budget     = 1.0e13;

} // namespace

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
    hook->budget = k_initial_budget;
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
        hook->work_since  = 0.0;
        hook->range_start = -1.0;
        hook->chain_asked = false;
        hook->chain_node  = nullptr;
    }
}

extern "C" llama_cancel_hook_stats llama_cancel_hook_get_stats(const llama_cancel_hook * hook) {
    llama_cancel_hook_stats s{};
    if (hook != nullptr) {
        s.checkpoints  = hook->checkpoints;
        s.asks         = hook->asks;
        s.budget_flops = hook->budget;
        s.stopped      = hook->stopped;
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
        if (h->stopped || llama_cancel::flag_is_set(p.flag)) {
            h->chain_asked = false;
            return true;
        }
        if (h->range_start < 0.0) {
            h->range_start = now_ms();
        }
        h->work_since += llama_cancel::node_work(t);
        h->chain_asked = p.chain != nullptr && p.chain(t, true, p.chain_data);
        h->chain_node  = t;
        return h->chain_asked || h->work_since >= h->budget;
    }

    // ask == false: the view up to `t` is computed and the backend synchronized.
    llama_cancel::wait_computed(t);
    bool keep_going = true;
    if (h->chain_asked && h->chain_node == t) {
        keep_going = p.chain(t, false, p.chain_data);
    }
    h->chain_asked = false;
    if (h->stopped || llama_cancel::flag_is_set(p.flag)) {
        h->stopped = true;
        return false;
    }
    if (!keep_going) {
        h->stopped = true; // the chained callback asked to stop: the graph is incomplete too
        return false;
    }
    // A checkpoint that the budget placed: adapt the budget to the rate just measured.
    if (h->range_start >= 0.0 && h->work_since > 0.0) {
        const double dt = now_ms() - h->range_start;
        if (dt > 0.05) {
            const double want = h->work_since / dt * p.interval_ms;
            h->budget = std::clamp(0.5 * h->budget + 0.5 * want, k_min_budget, k_max_budget);
        }
    }
    h->checkpoints++;
    h->work_since  = 0.0;
    h->range_start = -1.0;
    return true;
}
