// One backend row of the benchmark, run in its own process (`llama-cancel bench-backend NAME`) so
// that each setup loads exactly its ggml backends: cancel latency with upstream's abort callback
// alone against llama-cancel's hook, and the hook's overhead with the byte at 0, side by side.
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

struct timed {
    int32_t status;
    double  ms;
};

// Decodes the prompt from an empty memory through llama_cancel_decode; with `at` > 0 another
// thread stores the byte at that absolute time and the result is the store-to-return latency.
timed run(llama_context * ctx, llama_cancel_hook * hook, const std::vector<llama_token> & prompt, double at_frac,
          double full_ms) {
    llama_memory_clear(llama_get_memory(ctx), true);
    lcs::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    int8_t flag = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.flag = &flag;
    p.hook = hook;
    double t_store = 0;
    const double t0 = lcs::now_ms();
    std::thread writer;
    if (at_frac > 0) {
        writer = lcs::store_at(&flag, t0 + at_frac * full_ms, &t_store);
    }
    const int32_t status = llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr, 0);
    llama_synchronize(ctx); // GPU-API backends compute asynchronously: wait for what the host would
    const double  t_ret  = lcs::now_ms();
    if (writer.joinable()) {
        writer.join();
        return {status, t_ret - t_store};
    }
    return {status, t_ret - t0};
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
        std::fprintf(stderr, "usage: llama-cancel bench-backend vulkan|vulkan-1t|rpc|blas --model PATH [--json PATH]\n"
                             "       [--runs N] [--batch N] [--threads N] [--interval MS] [--rpc-server PATH]\n");
        return 2;
    }

    lcs::quiet_logs();
    // vulkan-1t: the same device with llvmpipe on one thread (bench sets LP_NUM_THREADS), so that
    // the host's spin-wait at each synchronize does not take a core from the "GPU".
    const std::string setup_name = o.name == "vulkan-1t" ? "vulkan" : o.name == "rpc" ? "rpc1" : o.name;
    if (setup_name != "vulkan" && setup_name != "rpc1" && setup_name != "blas") {
        std::fprintf(stderr, "error: unknown backend '%s' (vulkan, vulkan-1t, rpc, blas)\n", o.name.c_str());
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
    if (!plain || !hooked) {
        std::fprintf(stderr, "error: cannot create contexts on %s\n", o.name.c_str());
        return 1;
    }
    const auto prompt = lcs::make_prompt(model.get(), o.batch, o.seed);

    // Warm-up; the hook also learns the device's rate here.
    for (int i = 0; i < 2; ++i) {
        const timed a = run(plain.get(), nullptr, prompt, 0, 0);
        const timed b = run(hooked.get(), hook.get(), prompt, 0, 0);
        if (a.status != LLAMA_CANCEL_OK || b.status != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "error: decoding on %s failed (status %d, %d)\n", o.name.c_str(), a.status, b.status);
            return 1;
        }
    }

    std::fprintf(stderr, "[%s] overhead\n", o.name.c_str());
    std::vector<double> ratios, plain_ms;
    const uint64_t cp0 = llama_cancel_hook_get_stats(hook.get()).checkpoints;
    const int pairs = std::max(3, o.runs / 2); // the slow backends make each pair seconds long
    for (int i = 0; i < pairs; ++i) {
        double t_plain = 0, t_hook = 0;
        for (int k = 0; k < 2; ++k) {
            if ((i + k) % 2 == 0) {
                t_plain = run(plain.get(), nullptr, prompt, 0, 0).ms;
            } else {
                t_hook = run(hooked.get(), hook.get(), prompt, 0, 0).ms;
            }
        }
        ratios.push_back(t_hook / t_plain);
        plain_ms.push_back(t_plain);
    }
    const double checkpoints_per_decode =
        static_cast<double>(llama_cancel_hook_get_stats(hook.get()).checkpoints - cp0) / pairs;
    const double full = lcs::percentile(plain_ms, 0.5);

    std::fprintf(stderr, "[%s] cancel latency\n", o.name.c_str());
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    std::vector<double> lat_abort, lat_ours;
    int cancelled_abort = 0, cancelled_ours = 0;
    for (int i = 0; i < o.runs; ++i) {
        const double frac = point(rng);
        const timed a = run(plain.get(), nullptr, prompt, frac, full);
        lat_abort.push_back(std::max(0.0, a.ms));
        cancelled_abort += a.status == LLAMA_CANCEL_CANCELLED;
        const timed h = run(hooked.get(), hook.get(), prompt, frac, full);
        lat_ours.push_back(std::max(0.0, h.ms));
        cancelled_ours += h.status == LLAMA_CANCEL_CANCELLED;
    }

    const double overhead = (lcs::percentile(ratios, 0.5) - 1.0) * 100.0;
    const double p50_abort = lcs::percentile(lat_abort, 0.5), p50_ours = lcs::percentile(lat_ours, 0.5);
    const double share = p50_abort > 0 ? p50_ours / p50_abort * 100.0 : 0.0;
    std::printf("| %-7s | %5d | %7d | %9.2f | %12.2f | %9.3f | %9.3f | %10.1f%% | %13.2f%% | %11.1f | %5d/%-3d | %5d/%-3d |\n",
                o.name.c_str(), o.batch, o.threads, full, p50_abort, p50_ours, lcs::max_of(lat_ours), share, overhead,
                checkpoints_per_decode, cancelled_abort, o.runs, cancelled_ours, o.runs);
    std::fflush(stdout);

    if (!o.json.empty()) {
        std::ofstream js(o.json);
        js << "{\"backend\": \"" << o.name << "\", \"device\": \"" << lcs::json_escape(device_desc)
           << "\", \"batch\": " << o.batch << ", \"threads\": " << o.threads << ", \"runs\": " << o.runs
           << ", \"decode_ms\": " << full << ", \"hook_overhead_pct\": " << overhead
           << ", \"checkpoints_per_decode\": " << checkpoints_per_decode
           << ", \"budget_flops\": " << llama_cancel_hook_get_stats(hook.get()).budget_flops
           << ", \"abort_callback_only_ms\": {\"p50\": " << p50_abort << ", \"max\": " << lcs::max_of(lat_abort)
           << ", \"cancelled\": " << cancelled_abort << ", \"all\": " << lcs::json_list(lat_abort) << "}"
           << ", \"llama_cancel_ms\": {\"p50\": " << p50_ours << ", \"p95\": " << lcs::percentile(lat_ours, 0.95)
           << ", \"max\": " << lcs::max_of(lat_ours) << ", \"cancelled\": " << cancelled_ours
           << ", \"all\": " << lcs::json_list(lat_ours) << "}"
           << ", \"ours_over_abort_pct\": " << share
           << ", \"targets\": {\"latency_le_10pct_of_abort\": " << (share <= 10.0 ? "true" : "false")
           << ", \"overhead_le_3pct\": " << (overhead <= 3.0 ? "true" : "false") << "}}\n";
        if (!js) {
            std::fprintf(stderr, "error: cannot write %s\n", o.json.c_str());
            return 1;
        }
    }
    return 0;
}
