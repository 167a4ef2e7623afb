// A trace of the scheduler's asks during an evaluation, to see which views keep the host's thread
// busy: at each ask (a node about to be grouped into a view) the steady clock, the thread's CPU
// time and the checkpoints passed so far. Between two asks where a checkpoint passed, or across a
// split's end, a view was computed and waited for: its wall time against its thread CPU time is
// what the host spun (on llvmpipe it sleeps otherwise). bench-mtmd --trace writes one;
// scripts/trace_views.py sums its views by their last nodes. Not part of the library's API.
#pragma once

#include "llama-cancel.h"

#include "ggml-backend.h"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace common {

struct ask_trace {
    // Each way binds the trace differently, all of them at ask time only:
    //  - a hook: observe as its chained eval callback (hook_params.chain, chain_data = this),
    //    checkpoints read from the hooks named in `hooks`;
    //  - no checkpoints at all (today's loop): observe as the context's cb_eval, which groups every
    //    split whole, as a context without a cb_eval does;
    //  - another eval callback (the stateless name): in front of it (forward_mtmd or forward_text,
    //    after setting the matching target), checkpoints counted from its answers.
    static bool observe(ggml_tensor * t, bool ask, void * trace);
    static bool forward_mtmd(ggml_tensor * t, bool ask, void * trace);
    static bool forward_text(ggml_tensor * t, bool ask, void * trace);

    const llama_cancel_hook *        hooks[2] = {nullptr, nullptr};
    ggml_backend_sched_eval_callback mtmd_target = nullptr;
    void *                           mtmd_target_data = nullptr;
    ggml_backend_sched_eval_callback text_target = nullptr;
    void *                           text_target_data = nullptr;

    // Opens `path` for writing; false when it cannot be.
    bool open(const char * path);
    ~ask_trace();
    // An evaluation the way numbered `way` begins (recording on) and ends (its asks written out).
    void begin(int way);
    void end();

  private:
    struct ask {
        double      wall_ms, cpu_ms;
        uint64_t    checkpoints;
        const char * op; // ggml_op_desc's (static) text
        int64_t     ne0;
        const void * node;
        const void * buffer; // the node's buffer: the stateless form keeps a policy per compute buffer
        char        name[32];
    };
    void     record(const ggml_tensor * t, uint64_t checkpoints);
    uint64_t hook_checkpoints() const;
    bool     forward(ggml_tensor * t, bool ask, ggml_backend_sched_eval_callback f, void * data);

    FILE *           out_       = nullptr;
    bool             on_        = false;
    int              way_       = 0;
    int              n_evals_   = 0;
    uint64_t         forwarded_ = 0; // checkpoints the forwarded callback passed
    double           wall0_ = 0.0, cpu0_ = 0.0;
    std::vector<ask> asks_;
};

} // namespace common
