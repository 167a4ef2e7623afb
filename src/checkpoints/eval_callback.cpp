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

#include "checkpoints/backend_wait.h"
#include "checkpoints/buffer_policies.h"
#include "checkpoints/call.h"
#include "checkpoints/checkpoint_policy.h"
#include "checkpoints/clock.h"
#include "checkpoints/byte.h"
#include "checkpoints/hook.h"
#include "decode/memory_snapshot.h"
#include "checkpoints/work.h"

#include <algorithm>
#include <new>

namespace {

using llama_cancel::call;
using llama_cancel::checkpoint_policy;
using llama_cancel::now_ms;

// The stateless form's policies: per thread, since ggml's scheduler calls cb_eval on the thread that
// computes the graph, so no lock and nothing shared between hosts' decoding threads. They outlive
// graphs and contexts: work left over at a graph's end counts toward the next one's first checkpoint,
// and rates learnt on a device serve every later graph on it. Inside the library's calls, text and
// projector graphs keep one each (stateless_policy_of); outside, each compute buffer keeps its own
// (buffer_policies.h: the buffer tells one context's graphs from another's).
thread_local checkpoint_policy t_policy;
thread_local checkpoint_policy t_projector_policy;
thread_local llama_cancel::buffer_policies<checkpoint_policy> t_outside_policies;
thread_local llama_cancel::run_clock t_outside_run; // their graphs' runs (checkpoint_policy.h)

// Before an ask: the cap a call puts on the interval, its stop-time budget's share or its share of
// the interval, whichever is shorter (none outside a call).
void apply_cap(checkpoint_policy & policy, const call * c) {
    double cap = c != nullptr ? c->cap_ms : 0.0;
    if (c != nullptr && c->interval_share < 1.0) {
        const double share = c->interval_share * policy.interval_ms();
        cap                = cap > 0.0 ? std::min(cap, share) : share;
    }
    policy.set_cap(cap, c != nullptr && c->cap_ms > 0.0);
}

// A checkpoint passed: the view's rate, now and then the checkpoint's own round trip, and the
// view's length for the call (a budget sizes slices from it where no abort callback times nodes).
void pass_checkpoint(checkpoint_policy & policy, const ggml_tensor * t, call * c) noexcept {
    try {
        const double done = now_ms();
        const double trip = policy.wants_round_trip() ? llama_cancel::round_trip_ms(t, now_ms) : -1.0;
        policy.passed(done, trip);
        const double view = policy.take_longest_view_ms();
        if (c != nullptr) {
            c->longest_view_ms = std::max(c->longest_view_ms, view);
        }
    } catch (...) {
        policy.reset(); // out of memory: the view measures nothing (no exception may reach ggml)
    }
}

// Whether a checkpoint ends the view at `t`. The policy's node records can allocate; should that
// fail, a checkpoint at every node is the safe answer (no exception may reach ggml).
bool checkpoint_due(checkpoint_policy & policy, const ggml_tensor * t, call * c) noexcept {
    try {
        llama_cancel::tell_graph_begin(c, policy);
        if (policy.uncut_ask(t)) {
            return false; // a graph within the interval, as upstream runs it (never under a budget)
        }
        const checkpoint_policy::node_device device = policy.device_of(t);
        if (c != nullptr && device.key != nullptr) {
            c->device_asks++; // a budget's node clock sees that a device split ran in between
            c->rpc_asked = c->rpc_asked || device.rpc;
        }
        // A held graph stops nowhere. The call's abort callback stops this node's backend by
        // itself: a checkpoint would only cost a synchronize.
        if (c != nullptr && (c->hold || (c->abort_installed && c->reach.stops_on_abort(t)))) {
            return false;
        }
        // A node that only describes memory computes nothing: no work to count, no clock to read
        // (attention makes several a layer). On an emulated device it stays a node of the view:
        // ggml-vulkan's fence counts it.
        if (!device.emulated && llama_cancel::describes_memory(t)) {
            return false;
        }
        const bool due = policy.place(t, device.key, policy.ask_time(t, device.key, now_ms), device.emulated,
                                      device.emulated ? llama_cancel::fence_role(t) : llama_cancel::k_fence_none);
        if (c != nullptr && c->hold_if_short) { // the call's first node that computes
            c->hold_if_short = false;
            if (policy.graph_is_short()) {
                c->hold = true; // the rest of the graph asks a third as much; the call reads the bytes
                policy.hold_graph();
                return false;
            }
        }
        return due;
    } catch (...) {
        return true;
    }
}

// The graph is abandoned: its cut view measures nothing, and the call learns it was stopped.
void note_stop(checkpoint_policy & policy, call * c) {
    policy.abandon_graph();
    if (c != nullptr) {
        c->eval_stopped = true;
    }
}

} // namespace

// Stateless form: checkpoints by work and measured rate, as the hook places them, and at once when
// a byte is already set while the scheduler is still grouping nodes. Inside a llama_cancel_* call
// the call's bytes stop it too.
extern "C" bool llama_cancel_eval_callback(ggml_tensor * t, bool ask, void * user_data) {
    const auto * byte = static_cast<const int8_t *>(user_data);
    if (byte == nullptr) {
        return !ask; // nothing can stop it: no checkpoint, no synchronize
    }
    call * c = llama_cancel::current_call();
    auto stop = [&] {
        return c != nullptr ? c->stop_requested() || (!c->hold && llama_cancel::byte_is_set(byte))
                            : llama_cancel::byte_is_set(byte);
    };
    checkpoint_policy & policy = c != nullptr ? llama_cancel::stateless_policy_of(c, t_policy, t_projector_policy)
                                              : t_outside_policies.of(t);
    if (c == nullptr) {
        policy.set_run_clock(&t_outside_run); // a slot's policy is made anew for a new buffer
    }
    if (ask) {
        if (c != nullptr) {
            c->eval_seen = true; // the byte reaches this graph on every backend
        }
        apply_cap(policy, c);
        return stop() || checkpoint_due(policy, t, c);
    }
    llama_cancel::wait_computed(t);
    if (stop()) {
        note_stop(policy, c);
        return false;
    }
    pass_checkpoint(policy, t, c);
    return true;
}

struct llama_cancel_hook {
    llama_cancel_hook_params params;
    checkpoint_policy        policy;

    bool                chain_asked = false;
    const ggml_tensor * chain_node  = nullptr;

    // The graph the hook ran last was stopped (its results are garbage). Cleared when the next
    // graph begins: inside a call at its begin_graph, outside by the policy's graph end.
    bool     stopped     = false;
    uint64_t checkpoints = 0;
    // The runs of the graphs no call tells of (checkpoint_policy.h): a host's own loop of them.
    llama_cancel::run_clock run;
    uint64_t asks        = 0;

    // The abort callback of the context params the hook was bound into: put back after each call.
    // A hook is bound once (one context): a second bind would change the one noted for the first.
    llama_cancel::host_abort host_abort;
    bool                     bound = false;

    // The recurrent-state snapshots of the calls made with this hook, kept across them: a fresh
    // buffer per call costs a page fault per page, many times the copy itself.
    llama_cancel::memory_snapshot decode_snapshot;
    llama_cancel::memory_snapshot chunk_snapshot;

    // Inside a call, the call's bytes; outside, the hook's own.
    bool stop_requested(const call * c) const {
        return c != nullptr ? c->stop_requested() : llama_cancel::byte_is_set(params.byte);
    }

    // At an ask inside call `c`: names the hook to a call that has none, starts a new graph's stop
    // state clean. False when `c` named another hook (the host passed the wrong one).
    bool claim(call & c) {
        if (c.hook == nullptr) {
            c.hook = this;
            if (c.abort_callback == nullptr) {
                c.abort_callback = host_abort.callback; // the host's own, consulted beside the bytes
                c.abort_data     = host_abort.data;
            }
        }
        if (c.hook != this) {
            c.wrong_hook = true;
            return false;
        }
        if (c.graph_fresh) {
            c.graph_fresh = false;
            stopped       = false;
        }
        return true;
    }
};

extern "C" llama_cancel_hook_params llama_cancel_hook_default_params(void) {
    llama_cancel_hook_params p{};
    p.interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    return p;
}

extern "C" llama_cancel_hook * llama_cancel_hook_init(const llama_cancel_hook_params * params) {
    auto * hook = new (std::nothrow) llama_cancel_hook();
    if (hook == nullptr) {
        return nullptr;
    }
    hook->params = params != nullptr ? *params : llama_cancel_hook_default_params();
    if (!(hook->params.interval_ms > 0.0)) {
        hook->params.interval_ms = LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS;
    }
    hook->policy.set_interval(hook->params.interval_ms);
    hook->policy.set_run_clock(&hook->run);
    return hook;
}

extern "C" void llama_cancel_hook_free(llama_cancel_hook * hook) {
    delete hook;
}

extern "C" void llama_cancel_hook_set_byte(llama_cancel_hook * hook, const int8_t * byte) {
    if (hook != nullptr) {
        hook->params.byte = byte;
    }
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
        s.checkpoints   = hook->checkpoints;
        s.asks          = hook->asks;
        s.work_flops    = hook->policy.quota();
        s.interval_ms   = hook->policy.interval_ms(hook->policy.last_device());
        s.round_trip_ms = hook->policy.round_trip_ms(hook->policy.last_device());
    }
    return s;
}

extern "C" llama_cancel_snapshot_stats llama_cancel_hook_get_snapshot_stats(const llama_cancel_hook * hook) {
    if (hook == nullptr) {
        return llama_cancel_snapshot_stats{};
    }
    llama_cancel_snapshot_stats s = hook->decode_snapshot.counters();
    const llama_cancel_snapshot_stats & c = hook->chunk_snapshot.counters();
    s.snapshots  += c.snapshots;
    s.shared     += c.shared;
    s.held_steps += c.held_steps;
    s.restores   += c.restores;
    s.bytes      += c.bytes;
    s.copy_ms    += c.copy_ms;
    return s;
}

llama_cancel::memory_snapshot * llama_cancel::hook_decode_snapshot(llama_cancel_hook * hook) {
    return hook != nullptr ? &hook->decode_snapshot : nullptr;
}

llama_cancel::memory_snapshot * llama_cancel::hook_chunk_snapshot(llama_cancel_hook * hook) {
    return hook != nullptr ? &hook->chunk_snapshot : nullptr;
}

llama_cancel::host_abort llama_cancel::hook_host_abort(const llama_cancel_hook * hook) {
    return hook != nullptr ? hook->host_abort : host_abort{};
}

// One way to chain a caller's cb_eval: the hook's params. A cb_eval already in the context params
// is refused rather than silently replaced or silently chained. The params' abort callback stays
// theirs; the hook notes it, so that the calls made on the context consult it and put it back
// (llama.cpp cannot tell the library which one a context has). A hook already bound is refused:
// noting another context's abort callback would install it on the first.
extern "C" bool llama_cancel_hook_bind(llama_cancel_hook * hook, llama_context_params * params) {
    if (hook == nullptr || params == nullptr) {
        return false;
    }
    if (params->cb_eval == llama_cancel_hook_eval_callback && params->cb_eval_user_data == hook) {
        return true; // these params carry it already: nothing to change
    }
    if (params->cb_eval != nullptr || hook->bound) {
        return false;
    }
    params->cb_eval           = llama_cancel_hook_eval_callback;
    params->cb_eval_user_data = hook;
    hook->host_abort          = {params->abort_callback, params->abort_callback_data};
    hook->bound               = true;
    return true;
}

extern "C" bool llama_cancel_hook_eval_callback(ggml_tensor * t, bool ask, void * user_data) {
    auto * h = static_cast<llama_cancel_hook *>(user_data);
    if (h == nullptr) {
        return !ask;
    }
    call *       c = llama_cancel::current_call();
    const auto & p = h->params;
    if (ask) {
        h->asks++;
        if (c != nullptr) {
            c->eval_seen = true; // the byte reaches this graph on every backend
        }
        // The chain is asked about every node the scheduler asks about, a stop's too.
        h->chain_asked = p.chain != nullptr && p.chain(t, true, p.chain_data);
        h->chain_node  = t;
        // A stop is the graph's own: each node stops while a byte asks for it, never for an
        // earlier graph's stop. A wrong hook stops every node of the call.
        if ((c != nullptr && !h->claim(*c)) || h->stop_requested(c)) {
            return true;
        }
        apply_cap(h->policy, c);
        const bool due = checkpoint_due(h->policy, t, c);
        if (c == nullptr && h->policy.graph_began()) {
            h->stopped = false; // outside a call: a node asked before came again, a new graph
        }
        return h->chain_asked || due;
    }

    // ask == false: the view up to `t` is computed and the backend synchronized.
    llama_cancel::wait_computed(t);
    bool keep_going = true;
    if (h->chain_asked && h->chain_node == t) {
        keep_going = p.chain(t, false, p.chain_data);
    }
    h->chain_asked = false;
    if (!keep_going && c != nullptr && c->hold) {
        c->held_stop = true; // a held graph runs on; the call stops once it returns
        keep_going   = true;
    }
    // A stop by a byte, or by the chained callback: either way the graph is incomplete.
    if ((c != nullptr && c->wrong_hook) || h->stop_requested(c) || !keep_going) {
        h->stopped = true;
        note_stop(h->policy, c);
        return false;
    }
    pass_checkpoint(h->policy, t, c);
    h->checkpoints++;
    return true;
}
