// Stop latency and throughput of one decode configuration: measure_stops (see stop_latency.h).
#include "stop_latency.h"

#include "stats.h"
#include "timing.h"

#include <algorithm>
#include <random>
#include <thread>

namespace common {

namespace {

struct one_run {
    int32_t status    = 0;
    double  ms        = 0; // whole decode, or store to return
    bool    stopped   = false;
    store_outcome outcome = store_outcome::finished_first; // with a store
    double  longest   = 0;
    int     calls     = 0;
};

// Times graph nodes from the abort callback (the library does it itself under a budget).
struct node_timer {
    double last    = -1.0;
    double longest = 0.0;
    static bool cb(void * data) {
        auto * t = static_cast<node_timer *>(data);
        const double now = now_ms();
        if (t->last >= 0.0) {
            t->longest = std::max(t->longest, now - t->last);
        }
        t->last = now;
        return false;
    }
};

// One prefill from an empty memory; with `at_ms` > 0 another thread stores the byte then.
one_run prefill(llama_context * ctx, llama_cancel_hook * hook, const std::vector<llama_token> & prompt,
                float max_stop_ms, double at_ms) {
    llama_memory_clear(llama_get_memory(ctx), true);
    seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte        = &byte;
    p.hook        = hook;
    p.max_stop_ms = max_stop_ms;
    // The abort callback times CPU nodes only: through a hook, the gaps between them hold whole
    // device graphs, so without the library's estimate (a budget) there is no node figure.
    node_timer timer;
    if (max_stop_ms <= 0.0f && hook == nullptr) {
        p.abort_callback      = node_timer::cb;
        p.abort_callback_data = &timer;
    }
    llama_cancel_decode_result r;
    double t_store = 0;
    const double t0 = now_ms();
    std::thread writer;
    if (at_ms > 0) {
        writer = store_at(&byte, t0 + at_ms, &t_store);
    }
    one_run o;
    o.status = llama_cancel_decode(ctx, b.get(), &p, &r, nullptr);
    llama_synchronize(ctx);
    const double t_ret = now_ms();
    if (writer.joinable()) {
        writer.join();
    }
    o.stopped = o.status == LLAMA_CANCEL_CANCELLED;
    if (at_ms > 0) {
        o.outcome = classify_store(o.stopped, t_store, t_ret);
    }
    o.ms      = o.stopped ? t_ret - t_store : t_ret - t0;
    o.longest = max_stop_ms > 0.0f ? r.longest_node_ms : timer.longest;
    o.calls   = r.n_decode_calls;
    return o;
}

} // namespace

stop_figures measure_stops(llama_model * model, context_options base, llama_cancel_hook * hook,
                           const stop_config & cfg, int n_tokens, int runs, uint32_t seed) {
    stop_figures f;
    base.n_ctx    = static_cast<uint32_t>(std::max(n_tokens, 256));
    base.n_batch  = static_cast<uint32_t>(n_tokens);
    base.n_ubatch = static_cast<uint32_t>(cfg.n_ubatch);
    if (hook != nullptr) {
        base.cb_eval      = llama_cancel_hook_eval_callback;
        base.cb_eval_data = hook;
    }
    context_ptr ctx = make_context(model, base);
    if (!ctx) {
        return f;
    }
    const std::vector<llama_token> prompt = make_prompt(model, n_tokens, seed);
    prefill(ctx.get(), hook, prompt, cfg.max_stop_ms, 0); // warm-up
    std::vector<double> clean;
    for (int i = 0; i < runs; ++i) {
        const one_run o = prefill(ctx.get(), hook, prompt, cfg.max_stop_ms, 0);
        clean.push_back(o.ms);
        f.calls = o.calls;
        f.longest_node_ms = std::max(f.longest_node_ms, o.longest);
    }
    f.decode_ms    = percentile(clean, 0.5);
    f.tokens_per_s = f.decode_ms > 0 ? 1000.0 * n_tokens / f.decode_ms : 0;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> frac(0.1, 0.9);
    // A run that finished before its store shows the machine decodes faster now: later stores
    // follow that run's time.
    double full = f.decode_ms;
    for (int i = 0; i < runs; ++i) {
        const one_run o = prefill(ctx.get(), hook, prompt, cfg.max_stop_ms, frac(rng) * full);
        switch (o.outcome) {
            case store_outcome::stopped:        f.stop_ms.push_back(o.ms); break;
            case store_outcome::late:           f.late_store++; break;
            case store_outcome::finished_first:
                f.finished_first++;
                full = std::min(full, o.ms); // not stopped: o.ms is the whole prefill
                break;
        }
        f.longest_node_ms = std::max(f.longest_node_ms, o.longest);
    }
    return f;
}

} // namespace common
