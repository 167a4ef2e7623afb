// `llama-cancel-bench bench-plans SETUP`: whether checkpoints fall on the same nodes call after call
// (issue 47). With cb_eval set, ggml's scheduler computes each view as a graph of its own, and
// ggml-cuda captures a CUDA graph per first node of each graph after two unchanged calls: a view
// that moves between calls is never captured. For a token loop and for prefills of one shape, each
// way records the nodes where each call's checkpoints fell (a probe in front of the callback sees
// ask = false only at checkpoints) and counts the calls whose views differ from the call before,
// after the first two; and each call's time against plain llama_decode without a callback (the
// ways take turns call by call; median of the paired ratios). Run in its own process per setup, as
// the other backend rows.
//
// A view is the nodes from one checkpoint to the next within a split: the scheduler ends a view at
// its split's last node whatever the callback answers, and synchronizes after every view
// (ggml-backend.cpp, ggml_backend_sched_compute_splits), so a checkpoint there ends no view of its
// own and changes nothing the backend runs. Such a checkpoint is counted in checkpoints per call,
// not in what moved.
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "support.h"

#include "ggml-backend.h"

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct plans_options {
    std::string name;
    std::string model;
    std::string json;
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         steps    = 200;
    int         prefills = 20;
    int         prompt   = 256;
    int         ubatch   = 0; // the prefill's ubatch; 0 until parsed: the prompt's
    int         threads  = 2;
    uint32_t    seed     = 42;
};

// In front of the callback a context was given: forwards every call, and notes the index of the
// ask each checkpoint ended (the scheduler calls ask = false only for a node answered true), and
// which of them ended a view inside a split: the next ask's node is in the same kind of buffer
// (another backend's split begins where it is not; the graph's last ask ends its last split).
struct probe {
    ggml_backend_sched_eval_callback inner = nullptr;
    void *                           data  = nullptr;
    int                              asks  = 0;
    std::vector<int>                 checkpoints;
    std::vector<int>                 views; // the checkpoints that end a view inside a split
    const void *                     checkpoint_buft = nullptr; // the last checkpoint's, until the next ask
    bool                             pending         = false;

    static const void * buft_of(const ggml_tensor * t) {
        return t->buffer != nullptr ? ggml_backend_buffer_get_type(t->buffer) : nullptr;
    }
    static bool cb(ggml_tensor * t, bool ask, void * self) {
        auto * p = static_cast<probe *>(self);
        if (ask) {
            if (p->pending && buft_of(t) == p->checkpoint_buft) {
                p->views.push_back(p->checkpoints.back());
            }
            p->pending = false;
            p->asks++;
        } else {
            p->checkpoints.push_back(p->asks - 1);
            p->checkpoint_buft = buft_of(t);
            p->pending         = true;
        }
        return p->inner(t, ask, p->data);
    }
    void rearm() {
        asks    = 0;
        pending = false;
        checkpoints.clear();
        views.clear();
    }
};

// `none`: plain llama_decode with no callback, the reference of the byte at 0's cost.
enum way { with_hook = 0, by_name = 1, none = 2, n_ways = 3 };
const char * const k_way_names[n_ways] = {"hook", "stateless", "none"};

// One workload's calls on one way: the checkpoints and views of each call, and its time.
struct series {
    std::vector<std::vector<int>> checkpoints;
    std::vector<std::vector<int>> views;
    std::vector<double>           ms;
    int                           failed = 0; // calls that did not return OK
    int                           asks   = 0; // nodes asked about in the last call

    // Calls whose views differ from the call before, after the first two.
    int changes() const {
        int n = 0;
        for (size_t i = 3; i < views.size(); ++i) {
            n += views[i] != views[i - 1] ? 1 : 0;
        }
        return n;
    }
    double per_call() const {
        double n = 0.0;
        for (const auto & c : checkpoints) {
            n += static_cast<double>(c.size());
        }
        return checkpoints.empty() ? 0.0 : n / static_cast<double>(checkpoints.size());
    }
};

struct way_context {
    common::context_ptr ctx;
    common::hook_ptr    hook; // the hook way's
    probe               p;
    int8_t              byte = 0;

    // One call of `n` tokens of `tokens` from `first` at position `pos`.
    bool decode(const std::vector<llama_token> & tokens, int32_t first, int32_t n, llama_pos pos, series * s) {
        common::seq_batch b(tokens, first, n, pos);
        p.rearm(); // (the none way's context has no probe: nothing recorded)
        const double t0 = common::now_ms();
        bool ok;
        if (hook) {
            llama_cancel_decode_params dp = llama_cancel_decode_default_params();
            dp.byte = &byte;
            dp.hook = hook.get();
            ok = llama_cancel_decode(ctx.get(), b.get(), &dp, nullptr, nullptr) == LLAMA_CANCEL_OK;
        } else {
            ok = llama_decode(ctx.get(), b.get()) == 0; // a host that binds the name alone
        }
        llama_synchronize(ctx.get());
        if (s != nullptr) {
            s->ms.push_back(common::now_ms() - t0);
            s->checkpoints.push_back(p.checkpoints);
            s->views.push_back(p.views);
            s->asks = p.asks;
            s->failed += ok ? 0 : 1;
        }
        return ok;
    }
};

bool make_way(llama_model * model, const plans_options & o, bool offloaded, int w, way_context & out) {
    common::context_options opt;
    opt.n_ctx       = static_cast<uint32_t>(std::max(o.prompt, 32 + o.steps) + 64);
    opt.n_batch     = static_cast<uint32_t>(o.prompt);
    opt.n_ubatch    = static_cast<uint32_t>(o.ubatch);
    opt.n_threads   = o.threads;
    opt.offload_kqv = offloaded;
    if (w == none) {
        out.ctx = common::make_context(model, opt);
        return out.ctx != nullptr;
    }
    if (w == with_hook) {
        out.hook.reset(llama_cancel_hook_init(nullptr));
        llama_context_params cp = llama_context_default_params();
        if (!out.hook || !llama_cancel_hook_bind(out.hook.get(), &cp)) {
            return false;
        }
        out.p.inner = cp.cb_eval;
        out.p.data  = cp.cb_eval_user_data;
    } else {
        out.p.inner = llama_cancel_eval_callback;
        out.p.data  = &out.byte;
    }
    opt.cb_eval      = probe::cb;
    opt.cb_eval_data = &out.p;
    out.ctx          = common::make_context(model, opt);
    return out.ctx != nullptr;
}

// A 32-token prompt, then `steps` single tokens; then `prefills` prompts of one shape from an
// empty memory (in ubatches of --ubatch: a call of several graphs). The ways take turns call by
// call, so that the machine's drift favours none.
void measure(way_context (&c)[n_ways], const plans_options & o, const std::vector<llama_token> & tokens,
             series (&steps)[n_ways], series (&prefill)[n_ways]) {
    for (way_context & w : c) {
        llama_memory_clear(llama_get_memory(w.ctx.get()), true);
        w.decode(tokens, 0, 32, 0, nullptr);
    }
    for (int i = 0; i < o.steps; ++i) {
        for (int w = 0; w < n_ways; ++w) {
            c[(w + i) % n_ways].decode(tokens, 32 + i, 1, 32 + i, &steps[(w + i) % n_ways]);
        }
    }
    for (int i = 0; i < o.prefills; ++i) {
        for (int w = 0; w < n_ways; ++w) {
            way_context & x = c[(w + i) % n_ways];
            llama_memory_clear(llama_get_memory(x.ctx.get()), true);
            x.decode(tokens, 0, o.prompt, 0, &prefill[(w + i) % n_ways]);
        }
    }
}

common::json series_json(const char * way, const char * workload, const series & s, double overhead) {
    return {{"way", way},
            {"workload", workload},
            {"calls", s.checkpoints.size()},
            {"failed", s.failed},
            {"checkpoints_per_call", common::printed(s.per_call())},
            {"asks_per_call", s.asks},
            {"changes_after_two", s.changes()},
            {"call_ms_p50", common::printed(common::percentile(s.ms, 0.5))},
            {"overhead_pct_vs_none", common::printed(overhead)}};
}

const char k_synopsis[] =
    "usage: llama-cancel-bench bench-plans cpu|vulkan|vulkan-1t|rpc|blas --model PATH [--steps N] [--prefills N]\n"
    "       [--prompt N] [--ubatch N] [--threads N] [--json PATH] [--rpc-server PATH]\n";

int parse_options(int argc, char ** argv, plans_options & o) {
    cli_args::parser p(k_synopsis);
    p.positional("SETUP", &o.name, "the backend setup: cpu, vulkan, vulkan-1t, rpc or blas")
        .option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--json", &o.json, "PATH", "where the row's JSON goes")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--steps", &o.steps, "N", "single-token decodes after a 32-token prompt (>= 3)")
        .option("--prefills", &o.prefills, "N", "prefills of one shape from an empty memory (>= 3)")
        .option("--prompt", &o.prompt, "N", "the prefill's tokens (>= 32)")
        .option("--ubatch", &o.ubatch, "N", "the prefill's ubatch (1 to --prompt; default: --prompt, one graph a call)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--seed", &o.seed, "N", "random seed");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    const std::string setup = o.name == "rpc" ? "rpc1" : o.name;
    return p.check({{o.name.empty(), "the SETUP is required"},
                    {!common::is_setup_name(setup), "unknown setup '" + o.name + "'"},
                    {o.model.empty(), "--model is required"},
                    {o.steps < 3, "--steps must be at least 3"},
                    {o.prefills < 3, "--prefills must be at least 3"},
                    {o.prompt < 32, "--prompt must be at least 32"},
                    {o.ubatch < 0 || o.ubatch > o.prompt, "--ubatch must be 1 to --prompt"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

} // namespace

int bench_plans_main(int argc, char ** argv) {
    plans_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    o.ubatch = o.ubatch > 0 ? o.ubatch : o.prompt;
    common::quiet_logs();
    common::note_threads_override(o.name);
    common::backend_setup setup;
    if (!common::setup_backend(o.name == "rpc" ? "rpc1" : o.name, o.rpc_server, o.threads, setup)) {
        return 1;
    }
    common::model_ptr model = setup.load(o.model, -1);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.name.c_str());
        return 1;
    }
    const auto tokens = common::make_prompt(model.get(), std::max(o.prompt, 32 + o.steps), o.seed);
    common::json rows = common::json::array();
    bool         stable = true, failed = false;
    way_context  c[n_ways];
    for (int w = 0; w < n_ways; ++w) {
        if (!make_way(model.get(), o, !setup.devices.empty(), w, c[w])) {
            std::fprintf(stderr, "error: cannot create a context on %s\n", o.name.c_str());
            return 1;
        }
    }
    std::fprintf(stderr, "[plans %s] %d token steps and %d prefills, the ways taking turns\n", o.name.c_str(), o.steps,
                 o.prefills);
    series steps[n_ways], prefill[n_ways];
    measure(c, o, tokens, steps, prefill);
    for (int w = 0; w < none; ++w) {
        for (const auto & [workload, s, ref] :
             {std::tuple<const char *, const series *, const series *>{"token steps", &steps[w], &steps[none]},
              std::tuple<const char *, const series *, const series *>{"prefill", &prefill[w], &prefill[none]}}) {
            const double overhead = common::paired_overhead_pct(s->ms, ref->ms);
            std::printf("| %-9s | %-9s | %-11s | %5zu | %8.2f | %+7.2f%% | %6.2f | %3d / %-3zu |\n", o.name.c_str(),
                        k_way_names[w], workload, s->checkpoints.size(), common::percentile(s->ms, 0.5), overhead,
                        s->per_call(), s->changes(), s->checkpoints.size() - 3);
            rows.push_back(series_json(k_way_names[w], workload, *s, overhead));
            stable = stable && s->changes() == 0;
            failed = failed || s->failed > 0 || ref->failed > 0;
        }
    }
    std::fflush(stdout);
    if (failed) {
        std::fprintf(stderr, "error: a decode on %s did not return OK\n", o.name.c_str());
    }
    common::json j = {{"setup", o.name},
                      {"device", setup.description},
                      {"steps", o.steps},
                      {"prefills", o.prefills},
                      {"prompt", o.prompt},
                      {"ubatch", o.ubatch},
                      {"threads", o.threads},
                      {"rows", rows},
                      {"targets", {{"no_changes_after_two", stable}}}};
    const bool written = o.json.empty() || common::write_json_file(o.json, common::with_threads_override(j));
    return written && !failed ? 0 : 1;
}
