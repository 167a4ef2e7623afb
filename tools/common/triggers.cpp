// Hooks, node triggers and the stateless probe (see triggers.h). The probe estimates node work
// with the library's own node_work (src/checkpoints/work.h), so its figures match what the hook measures.
#include "triggers.h"

#include "timing.h"

#include "ggml-backend.h"
#include "checkpoints/work.h"

#include <algorithm>

namespace common {

hook_ptr make_hook(ggml_backend_sched_eval_callback chain, void * chain_data, double interval_ms) {
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.chain      = chain;
    hp.chain_data = chain_data;
    if (interval_ms > 0.0) {
        hp.interval_ms = interval_ms;
    }
    return hook_ptr(llama_cancel_hook_init(&hp));
}

bool node_trigger::eval_cb(ggml_tensor *, bool ask, void * data) {
    auto * t = static_cast<node_trigger *>(data);
    if (ask) {
        return ++t->calls == t->at;
    }
    __atomic_store_n(t->byte, 1, __ATOMIC_RELAXED);
    return true;
}

bool node_trigger::abort_cb(void * data) {
    auto * t = static_cast<node_trigger *>(data);
    if (++t->calls == t->at) {
        __atomic_store_n(t->byte, 1, __ATOMIC_RELAXED);
    }
    return false;
}

namespace {

// The scheduler splits a graph where the buffer type changes: the probe's stand-in for "same split".
const void * buffer_type_of(const ggml_tensor * t) {
    return t->buffer != nullptr ? ggml_backend_buffer_get_type(t->buffer) : nullptr;
}

} // namespace

bool node_timer::callback(ggml_tensor * t, bool ask, void * data) {
    auto * nt = static_cast<node_timer *>(data);
    if (ask) {
        nt->t_ask = now_ms();
        return true;
    }
    const double dt = now_ms() - nt->t_ask;
    nt->n_nodes++;
    if (dt > nt->longest) {
        nt->longest    = dt;
        nt->longest_op = ggml_op_desc(t);
    }
    return true;
}

bool stateless_probe::eval_cb(ggml_tensor * t, bool ask, void * data) {
    auto * p = static_cast<stateless_probe *>(data);
    if (!ask) {
        const bool go = llama_cancel_eval_callback(t, false, &p->byte);
        if (go) {
            p->checkpoints++;
        } else if (p->stopped_at < 0) {
            p->stopped_at = p->asks;
        }
        return go;
    }
    p->asks++;
    if (p->measure_work) {
        p->max_work = std::max(p->max_work, llama_cancel::node_work(t));
    }
    if (p->pending_ && buffer_type_of(t) != p->store_buft_) {
        p->store(true); // another split: the view of store_at was computed without a checkpoint
    }
    if (p->asks == p->store_at) {
        p->pending_    = true;
        p->store_buft_ = buffer_type_of(t);
        if (p->while_grouping) {
            p->store(false);
        }
    }
    const bool checkpoint = llama_cancel_eval_callback(t, true, &p->byte);
    if (checkpoint && p->pending_) {
        p->store(false);
    }
    return checkpoint;
}

void stateless_probe::store(bool late) {
    __atomic_store_n(&byte, 1, __ATOMIC_RELAXED);
    stored_at   = asks;
    stored_late = late;
    pending_    = false;
}

void stateless_probe::rearm(int at) {
    const bool measure = measure_work;
    *this        = stateless_probe{};
    store_at     = at;
    measure_work = measure;
}

} // namespace common
