// The current call of a thread (src/call.h).
#include "call.h"

#include "clock.h"
#include "flag.h"
#include "slice_budget.h"

namespace llama_cancel {

namespace {
// The only per-thread state besides the stateless eval callback's policy: which call this thread is
// making. Set and cleared by call_scope alone.
thread_local call * t_current = nullptr;
} // namespace

bool call::stop_requested() const {
    if (hold) {
        return false;
    }
    if (flag_is_set(flag)) {
        return true;
    }
    for (const int8_t * f : seq_flags) {
        if (flag_is_set(f)) {
            return true;
        }
    }
    return false;
}

call * current_call() {
    return t_current;
}

call_scope::call_scope(call & c) : previous_(t_current) {
    t_current = &c;
}

call_scope::~call_scope() {
    t_current = previous_;
}

bool call_abort_callback(void * user_data) {
    auto * c = static_cast<call *>(user_data);
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
