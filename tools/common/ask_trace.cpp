#include "ask_trace.h"

#include "timing.h"

#include "ggml.h"

namespace common {

bool ask_trace::open(const char * path) {
    out_ = std::fopen(path, "w");
    if (out_ != nullptr) {
        std::fprintf(out_, "# E evaluation way wall0_ms cpu0_ms wall1_ms cpu1_ms\n"
                           "# A wall_ms cpu_ms checkpoints op ne0 node buffer name\n");
    }
    return out_ != nullptr;
}

ask_trace::~ask_trace() {
    if (out_ != nullptr) {
        std::fclose(out_);
    }
}

void ask_trace::begin(int way) {
    asks_.clear();
    way_  = way;
    on_   = out_ != nullptr;
    wall0_ = now_ms();
    cpu0_  = thread_cpu_ms();
}

void ask_trace::end() {
    if (!on_) {
        return;
    }
    on_ = false;
    std::fprintf(out_, "E %d %d %.4f %.4f %.4f %.4f\n", n_evals_++, way_, wall0_, cpu0_, now_ms(), thread_cpu_ms());
    for (const ask & a : asks_) {
        std::fprintf(out_, "A %.4f %.4f %llu %s %lld %p %p %s\n", a.wall_ms, a.cpu_ms,
                     static_cast<unsigned long long>(a.checkpoints), a.op, static_cast<long long>(a.ne0), a.node,
                     a.buffer, a.name[0] != '\0' ? a.name : "-");
    }
    std::fflush(out_);
}

void ask_trace::record(const ggml_tensor * t, uint64_t checkpoints) {
    ask a{now_ms(), thread_cpu_ms(), checkpoints, ggml_op_desc(t), t->ne[0], t, t->buffer, {}};
    std::snprintf(a.name, sizeof(a.name), "%s", t->name);
    for (char * c = a.name; *c != '\0'; ++c) {
        *c = *c == ' ' ? '_' : *c; // one field in the line
    }
    asks_.push_back(a);
}

uint64_t ask_trace::hook_checkpoints() const {
    uint64_t n = 0;
    for (const llama_cancel_hook * h : hooks) {
        n += h != nullptr ? llama_cancel_hook_get_stats(h).checkpoints : 0;
    }
    return n;
}

bool ask_trace::observe(ggml_tensor * t, bool ask, void * trace) {
    auto * self = static_cast<ask_trace *>(trace);
    if (ask && self->on_) {
        self->record(t, self->hook_checkpoints());
    }
    return !ask; // no checkpoint of its own; never stops
}

bool ask_trace::forward(ggml_tensor * t, bool ask, ggml_backend_sched_eval_callback f, void * data) {
    const bool answer = f(t, ask, data);
    if (!ask && answer) {
        forwarded_++;
    }
    if (ask && on_) {
        record(t, forwarded_);
    }
    return answer;
}

bool ask_trace::forward_mtmd(ggml_tensor * t, bool ask, void * trace) {
    auto * self = static_cast<ask_trace *>(trace);
    return self->forward(t, ask, self->mtmd_target, self->mtmd_target_data);
}

bool ask_trace::forward_text(ggml_tensor * t, bool ask, void * trace) {
    auto * self = static_cast<ask_trace *>(trace);
    return self->forward(t, ask, self->text_target, self->text_target_data);
}

} // namespace common
