// The benchmark's rows for one backend, run in its own process (`llama-cancel bench-backend NAME`)
// so that each setup loads exactly its ggml backends: cancel latency with upstream's abort callback
// alone, with llama-cancel's hook (llama_cancel_decode), and with the stateless eval callback bound
// by name; the hook's and the stateless callback's overhead with the byte at 0, side by side.
#include "commands.h"
#include "bench_util.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

struct backend_options {
    std::string name;
    std::string model;
    std::string json;
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         runs       = 10;
    int         batch      = 128;
    int         threads    = 2;
    uint32_t    seed       = 42;
    float       interval_ms = 0; // hook checkpoint interval, 0 = the library's default
};

// One decode's outcome. A run whose decode returned before the byte was stored finished first:
// it is counted apart, never as a latency.
struct timed {
    int32_t status         = LLAMA_CANCEL_OK;
    double  ms             = 0.0; // decode time, or store-to-return latency
    bool    finished_first = false;
};

// Decodes the prompt from an empty memory through llama_cancel_decode with the byte at `flag`;
// with `at_frac` > 0 another thread stores the byte at that share of `full_ms` and the result is the
// store-to-return latency.
timed run(llama_context * ctx, llama_cancel_hook * hook, int8_t * flag, const std::vector<llama_token> & prompt,
          double at_frac, double full_ms) {
    llama_memory_clear(llama_get_memory(ctx), true);
    lcs::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = flag;
    p.hook = hook;
    double t_store = 0;
    const double t0 = lcs::now_ms();
    std::thread writer;
    if (at_frac > 0) {
        writer = lcs::store_at(flag, t0 + at_frac * full_ms, &t_store);
    }
    timed r;
    r.status = llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr, 0);
    llama_synchronize(ctx); // GPU-API backends compute asynchronously: wait for what the host would
    const double t_ret = lcs::now_ms();
    r.ms = t_ret - t0;
    if (writer.joinable()) {
        writer.join();
        r.ms             = t_ret - t_store;
        r.finished_first = t_store >= t_ret;
    }
    return r;
}

using lcs::latencies;

// A latency as a share of the abort callback's, or -1 when either has no landed run.
double share_of(const latencies & ours, const latencies & abort_only) {
    return ours.ms.empty() || abort_only.ms.empty() || abort_only.p50() <= 0 ? -1.0
                                                                             : ours.p50() / abort_only.p50() * 100.0;
}

// One table row: a way of cancelling on this setup.
void print_row(const backend_options & o, const char * method, double decode_ms, const latencies & l, double share,
               const char * overhead, const char * checkpoints) {
    char pct[32] = "-";
    if (share >= 0) {
        std::snprintf(pct, sizeof(pct), "%.1f%%", share);
    }
    std::printf("| %-9s | %-14s | %5d | %7d | %9.2f | %8.3f | %8.3f | %8.3f | %10s | %9s | %11s | %5d/%-3d | %14d |\n",
                o.name.c_str(), method, o.batch, o.threads, decode_ms, l.p50(), l.p95(),
                lcs::max_of(l.ms), pct, overhead, checkpoints, l.cancelled, o.runs, l.finished_first);
}

} // namespace

int bench_backend_main(int argc, char ** argv) {
    backend_options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a[0] != '-' && o.name.empty()) {
            o.name = a;
            continue;
        }
        if (v == nullptr) {
            std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return 2;
        }
        ++i;
        if (a == "--model") {
            o.model = v;
        } else if (a == "--json") {
            o.json = v;
        } else if (a == "--rpc-server") {
            o.rpc_server = v;
        } else if (a == "--runs") {
            o.runs = std::atoi(v);
        } else if (a == "--batch") {
            o.batch = std::atoi(v);
        } else if (a == "--threads") {
            o.threads = std::atoi(v);
        } else if (a == "--interval") {
            o.interval_ms = static_cast<float>(std::atof(v));
        } else if (a == "--seed") {
            o.seed = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        } else {
            std::fprintf(stderr, "error: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (o.name.empty() || o.model.empty() || o.runs < 1 || o.batch < 2 || o.threads < 1) {
        std::fprintf(stderr, "usage: llama-cancel bench-backend vulkan|vulkan-1t|rpc|rpc2|blas --model PATH [--json PATH]\n"
                             "       [--runs N] [--batch N] [--threads N] [--interval MS] [--rpc-server PATH]\n");
        return 2;
    }

    lcs::quiet_logs();
    // vulkan-1t: the same device with llvmpipe on one thread (bench sets LP_NUM_THREADS), so that
    // the host's spin-wait at each synchronize does not take a core from the "GPU".
    const std::string setup_name = o.name == "vulkan-1t" ? "vulkan" : o.name == "rpc" ? "rpc1" : o.name;
    if (setup_name != "vulkan" && setup_name != "rpc1" && setup_name != "rpc2" && setup_name != "blas") {
        std::fprintf(stderr, "error: unknown backend '%s' (vulkan, vulkan-1t, rpc, rpc2, blas)\n", o.name.c_str());
        return 2;
    }
    lcs::backend_setup setup;
    if (!lcs::setup_backend(setup_name, o.rpc_server, o.threads, setup)) {
        return 1;
    }
    const std::string & device_desc = setup.description;
    lcs::model_ptr model = setup.load(o.model, -1);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.name.c_str());
        return 1;
    }

    lcs::context_options opt;
    opt.n_ctx     = static_cast<uint32_t>(std::max(o.batch, 256));
    opt.n_batch   = o.batch;
    opt.n_ubatch  = o.batch;
    opt.n_threads = o.threads;
    opt.offload_kqv = !setup.devices.empty(); // fully offloaded: attention and KV cache on the device too
    lcs::context_ptr plain = lcs::make_context(model.get(), opt);
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.interval_ms = o.interval_ms;
    lcs::hook_ptr hook(llama_cancel_hook_init(&hp));
    llama_context_params cp = llama_context_default_params();
    llama_cancel_hook_bind(hook.get(), &cp);
    opt.cb_eval      = cp.cb_eval;
    opt.cb_eval_data = cp.cb_eval_user_data;
    lcs::context_ptr hooked = lcs::make_context(model.get(), opt);
    // The stateless callback by name with the byte as user data, seen through a probe that forwards
    // every call and counts checkpoints and stops (a few nanoseconds a node).
    lcs::stateless_probe probe;
    opt.cb_eval      = lcs::stateless_probe::eval_cb;
    opt.cb_eval_data = &probe;
    lcs::context_ptr stateless = lcs::make_context(model.get(), opt);
    if (!plain || !hooked || !stateless) {
        std::fprintf(stderr, "error: cannot create contexts on %s\n", o.name.c_str());
        return 1;
    }
    const auto prompt = lcs::make_prompt(model.get(), o.batch, o.seed);
    int8_t flag = 0;

    // Warm-up; the hook and the stateless callback also learn the device's rate here.
    for (int i = 0; i < 2; ++i) {
        const timed a = run(plain.get(), nullptr, &flag, prompt, 0, 0);
        const timed b = run(hooked.get(), hook.get(), &flag, prompt, 0, 0);
        const timed c = run(stateless.get(), nullptr, &probe.byte, prompt, 0, 0);
        if (a.status != LLAMA_CANCEL_OK || b.status != LLAMA_CANCEL_OK || c.status != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "error: decoding on %s failed (status %d, %d, %d)\n", o.name.c_str(), a.status,
                         b.status, c.status);
            return 1;
        }
    }

    std::fprintf(stderr, "[%s] overhead\n", o.name.c_str());
    std::vector<double> hook_ratios, stateless_ratios, plain_ms;
    const uint64_t cp0 = llama_cancel_hook_get_stats(hook.get()).checkpoints;
    probe.rearm(-1);
    const int triples = std::max(3, o.runs / 2); // the slow backends make each decode seconds long
    for (int i = 0; i < triples; ++i) {
        double t[3] = {0, 0, 0}; // plain, hook, stateless; the order rotates so that drift favours none
        for (int k = 0; k < 3; ++k) {
            const int which = (i + k) % 3;
            t[which] = which == 0 ? run(plain.get(), nullptr, &flag, prompt, 0, 0).ms
                     : which == 1 ? run(hooked.get(), hook.get(), &flag, prompt, 0, 0).ms
                                  : run(stateless.get(), nullptr, &probe.byte, prompt, 0, 0).ms;
        }
        hook_ratios.push_back(t[1] / t[0]);
        stateless_ratios.push_back(t[2] / t[0]);
        plain_ms.push_back(t[0]);
    }
    const double hook_checkpoints =
        static_cast<double>(llama_cancel_hook_get_stats(hook.get()).checkpoints - cp0) / triples;
    const double stateless_checkpoints = static_cast<double>(probe.checkpoints) / triples;
    const double full = lcs::percentile(plain_ms, 0.5);

    std::fprintf(stderr, "[%s] cancel latency\n", o.name.c_str());
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    latencies abort_only, ours, by_name;
    for (int i = 0; i < o.runs; ++i) {
        const double frac = point(rng);
        flag = 0;
        const timed a = run(plain.get(), nullptr, &flag, prompt, frac, full);
        abort_only.add(a.ms, a.finished_first, a.status == LLAMA_CANCEL_CANCELLED);
        flag = 0;
        const timed h = run(hooked.get(), hook.get(), &flag, prompt, frac, full);
        ours.add(h.ms, h.finished_first, h.status == LLAMA_CANCEL_CANCELLED);
        probe.rearm(-1);
        const timed n = run(stateless.get(), nullptr, &probe.byte, prompt, frac, full);
        by_name.add(n.ms, n.finished_first, n.status == LLAMA_CANCEL_CANCELLED || probe.stopped_at >= 0);
    }
    probe.rearm(-1);

    const double hook_overhead      = (lcs::percentile(hook_ratios, 0.5) - 1.0) * 100.0;
    const double stateless_overhead = (lcs::percentile(stateless_ratios, 0.5) - 1.0) * 100.0;
    const double hook_share         = share_of(ours, abort_only);
    const double stateless_share    = share_of(by_name, abort_only);
    char oh_hook[32], oh_name[32], cp_hook[32], cp_name[32];
    std::snprintf(oh_hook, sizeof(oh_hook), "%.2f%%", hook_overhead);
    std::snprintf(oh_name, sizeof(oh_name), "%.2f%%", stateless_overhead);
    std::snprintf(cp_hook, sizeof(cp_hook), "%.1f", hook_checkpoints);
    std::snprintf(cp_name, sizeof(cp_name), "%.1f", stateless_checkpoints);
    print_row(o, "abort callback", full, abort_only, abort_only.ms.empty() ? -1.0 : 100.0, "-", "-");
    print_row(o, "hook", full, ours, hook_share, oh_hook, cp_hook);
    print_row(o, "stateless", full, by_name, stateless_share, oh_name, cp_name);
    std::fflush(stdout);

    if (!o.json.empty()) {
        auto met = [](bool b) { return b ? "true" : "false"; };
        std::ofstream js(o.json);
        js << "{\"backend\": \"" << o.name << "\", \"device\": \"" << lcs::json_escape(device_desc)
           << "\", \"batch\": " << o.batch << ", \"threads\": " << o.threads << ", \"runs\": " << o.runs
           << ", \"decode_ms\": " << full << ", \"hook_overhead_pct\": " << hook_overhead
           << ", \"checkpoints_per_decode\": " << hook_checkpoints
           << ", \"budget_flops\": " << llama_cancel_hook_get_stats(hook.get()).budget_flops
           << ", \"stateless_overhead_pct\": " << stateless_overhead
           << ", \"stateless_checkpoints_per_decode\": " << stateless_checkpoints
           << ", \"abort_callback_only_ms\": " << abort_only.json() << ", \"llama_cancel_ms\": " << ours.json()
           << ", \"stateless_ms\": " << by_name.json() << ", \"ours_over_abort_pct\": " << hook_share
           << ", \"stateless_over_abort_pct\": " << stateless_share
           << ", \"targets\": {\"latency_le_10pct_of_abort\": " << met(hook_share >= 0 && hook_share <= 10.0)
           << ", \"overhead_le_3pct\": " << met(hook_overhead <= 3.0)
           << ", \"stateless_latency_le_10pct_of_abort\": " << met(stateless_share >= 0 && stateless_share <= 10.0)
           << ", \"stateless_overhead_le_3pct\": " << met(stateless_overhead <= 3.0) << "}}\n";
        if (!js) {
            std::fprintf(stderr, "error: cannot write %s\n", o.json.c_str());
            return 1;
        }
    }
    return 0;
}
