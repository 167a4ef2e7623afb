// The current call of a thread (src/checkpoints/call.h).
#include "checkpoints/call.h"

#include "checkpoints/checkpoint_policy.h"
#include "checkpoints/clock.h"
#include "checkpoints/byte.h"
#include "checkpoints/slice_budget.h"

namespace llama_cancel {

namespace {
// The only per-thread state besides the stateless eval callback's policy: which call this thread is
// making, and when the run it is part of began (0: none). Set and cleared by call_scope and
// run_scope alone.
thread_local call * t_current   = nullptr;
thread_local double t_run_began = 0.0;
} // namespace

bool call::stop_requested() const {
    if (hold) {
        return false;
    }
    if (byte_is_set(byte)) {
        return true;
    }
    for (const int8_t * f : seq_bytes) {
        if (byte_is_set(f)) {
            return true;
        }
    }
    return false;
}

void call::graph_returned(bool outputs_read) {
    if (policy != nullptr && (outputs_read || !rpc_asked)) {
        policy->graph_returned(now_ms());
    }
}

call * current_call() {
    return t_current;
}

call_scope::call_scope(call & c) : previous_(t_current) {
    c.began_ms = t_run_began > 0.0 ? t_run_began : previous_ != nullptr ? previous_->began_ms : now_ms();
    t_current  = &c;
}

run_scope::run_scope() : previous_(t_run_began) {
    if (t_run_began <= 0.0) {
        t_run_began = now_ms();
    }
}

run_scope::~run_scope() {
    t_run_began = previous_;
}

call_scope::~call_scope() {
    t_current = previous_;
}

bool call_abort_callback(void * user_data) {
    auto * c = static_cast<call *>(user_data);
    c->abort_seen = true;
    if (c->budget != nullptr) {
        c->budget->on_node(now_ms(), c->device_asks);
    }
    if (c->wrong_hook) {
        return true;
    }
    if (c->hold) {
        return false;
    }
    return c->stop_requested() || (c->abort_callback != nullptr && c->abort_callback(c->abort_data));
}

} // namespace llama_cancel
