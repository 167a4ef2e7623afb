// The benchmark's rows for one backend, run in its own process (`llama-cancel-bench bench-backend NAME`)
// so that each setup loads exactly its ggml backends: cancel latency with upstream's abort callback
// alone, with llama-cancel's hook (llama_cancel_decode), and with the stateless eval callback bound
// by name; the hook's and the stateless callback's overhead with the byte at 0, side by side.
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cstdlib>
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
    double  total_ms       = 0.0; // decode time, start to return
    bool    finished_first = false;
    int     checkpoints    = 0;   // eval-callback checkpoints passed
    double  thread_cpu_ms  = 0.0; // CPU time of the decoding thread (the host's waits included)
    double  process_cpu_ms = 0.0; // of the whole process (llvmpipe's workers included; not a server's)
};

// Decodes the prompt from an empty memory through llama_cancel_decode with the byte at `byte`;
// with `at_frac` > 0 another thread stores the byte at that share of `full_ms` and the result is the
// store-to-return latency.
timed run(llama_context * ctx, llama_cancel_hook * hook, int8_t * byte, const std::vector<llama_token> & prompt,
          double at_frac, double full_ms) {
    llama_memory_clear(llama_get_memory(ctx), true);
    common::seq_batch b(prompt, 0, static_cast<int32_t>(prompt.size()), 0);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = byte;
    p.hook = hook;
    double t_store = 0;
    const double t0 = common::now_ms();
    std::thread writer;
    if (at_frac > 0) {
        writer = common::store_at(byte, t0 + at_frac * full_ms, &t_store);
    }
    timed r;
    const double thread0 = common::thread_cpu_ms(), process0 = common::process_cpu_ms();
    r.status = llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr);
    llama_synchronize(ctx); // GPU-API backends compute asynchronously: wait for what the host would
    const double t_ret = common::now_ms();
    r.thread_cpu_ms  = common::thread_cpu_ms() - thread0;
    r.process_cpu_ms = common::process_cpu_ms() - process0;
    r.ms       = t_ret - t0;
    r.total_ms = r.ms;
    if (writer.joinable()) {
        writer.join();
        r.ms             = t_ret - t_store;
        r.finished_first = t_store >= t_ret;
    }
    return r;
}

using common::latencies;

// The three ways of cancelling, each on its own context of the same model: upstream's abort
// callback alone (llama_cancel_decode without a hook), the hook (llama_cancel_decode with it), and
// the stateless callback bound by name as cb_eval beside the abort callback, seen through a probe
// that forwards every call and counts checkpoints and stops (a few nanoseconds a node).
enum way { abort_only = 0, with_hook = 1, by_name = 2, n_ways = 3 };
const char * const k_way_names[n_ways] = {"abort callback", "hook", "stateless"};

struct contenders {
    common::context_ptr     ctx[n_ways];
    common::hook_ptr        hook;
    common::stateless_probe probe;
    int8_t               byte = 0;

    bool make(llama_model * model, const backend_options & o, bool offloaded) {
        common::context_options opt;
        opt.n_ctx       = static_cast<uint32_t>(std::max(o.batch, 256));
        opt.n_batch     = o.batch;
        opt.n_ubatch    = o.batch;
        opt.n_threads   = o.threads;
        opt.offload_kqv = offloaded; // attention and KV cache on the device too
        ctx[abort_only] = common::make_context(model, opt);
        llama_cancel_hook_params hp = llama_cancel_hook_default_params();
        hp.interval_ms = o.interval_ms;
        hook.reset(llama_cancel_hook_init(&hp));
        llama_context_params cp = llama_context_default_params();
        if (!hook || !llama_cancel_hook_bind(hook.get(), &cp)) {
            return false;
        }
        opt.cb_eval      = cp.cb_eval;
        opt.cb_eval_data = cp.cb_eval_user_data;
        ctx[with_hook]   = common::make_context(model, opt);
        opt.cb_eval      = common::stateless_probe::eval_cb;
        opt.cb_eval_data = &probe;
        ctx[by_name]     = common::make_context(model, opt);
        return ctx[abort_only] && ctx[with_hook] && ctx[by_name];
    }

    // One decode of `prompt` the given way, the byte stored at `frac` of `full` ms when `frac` > 0.
    timed decode(int w, const std::vector<llama_token> & prompt, double frac, double full) {
        if (w == by_name) {
            probe.rearm(-1); // the byte back to 0, the probe's counters for this decode
            timed t = run(ctx[w].get(), nullptr, &probe.byte, prompt, frac, full);
            t.checkpoints = probe.checkpoints;
            return t;
        }
        byte = 0;
        const uint64_t cp0 = llama_cancel_hook_get_stats(hook.get()).checkpoints;
        timed t = run(ctx[w].get(), w == with_hook ? hook.get() : nullptr, &byte, prompt, frac, full);
        t.checkpoints = static_cast<int>(llama_cancel_hook_get_stats(hook.get()).checkpoints - cp0);
        return t;
    }
    bool stopped(int w, const timed & t) const {
        return t.status == LLAMA_CANCEL_CANCELLED || (w == by_name && probe.stopped_at >= 0);
    }
};

struct results {
    double    decode_ms = 0.0;
    double    overhead_pct[n_ways]   = {0, 0, 0}; // against the abort callback alone, byte at 0
    std::vector<double> ratio_pct[n_ways];         // every paired ratio, as %: the spread behind the median
    double    interval_ms   = 0.0;                 // the hook's interval in force, and its round trip
    double    round_trip_ms = 0.0;
    double    checkpoints[n_ways]    = {0, 0, 0}; // per decode
    double    wall_ms[n_ways]        = {0, 0, 0}; // median decode time, byte at 0
    double    thread_cpu_ms[n_ways]  = {0, 0, 0}; // median CPU time of the decoding thread, byte at 0
    double    process_cpu_ms[n_ways] = {0, 0, 0}; // median CPU time of the process, byte at 0
    latencies lat[n_ways];
    double    share_pct[n_ways]      = {0, 0, 0}; // p50 as % of the abort callback's, -1: no landed run
};

// Decode time and overhead: triples of decodes with the byte at 0, in rotating order so that drift
// favours none; the median ratio to the abort callback alone.
void measure_overhead(contenders & c, const backend_options & o, const std::vector<llama_token> & prompt,
                      results & r) {
    std::vector<double> ratios[n_ways], wall[n_ways], thread_cpu[n_ways], process_cpu[n_ways];
    double checkpoints[n_ways] = {0, 0, 0};
    const int triples = std::max(3, o.runs / 2); // the slow backends make each decode seconds long
    for (int i = 0; i < triples; ++i) {
        double t[n_ways] = {0, 0, 0};
        for (int k = 0; k < n_ways; ++k) {
            const int   w = (i + k) % n_ways;
            const timed d = c.decode(w, prompt, 0, 0);
            t[w] = d.ms;
            checkpoints[w] += d.checkpoints;
            wall[w].push_back(d.ms);
            thread_cpu[w].push_back(d.thread_cpu_ms);
            process_cpu[w].push_back(d.process_cpu_ms);
        }
        for (int w = 0; w < n_ways; ++w) {
            ratios[w].push_back(t[w] / t[abort_only]);
        }
    }
    for (int w = 0; w < n_ways; ++w) {
        r.wall_ms[w]        = common::percentile(wall[w], 0.5);
        r.thread_cpu_ms[w]  = common::percentile(thread_cpu[w], 0.5);
        r.process_cpu_ms[w] = common::percentile(process_cpu[w], 0.5);
    }
    r.decode_ms = r.wall_ms[abort_only];
    for (int w = with_hook; w < n_ways; ++w) {
        r.overhead_pct[w] = (common::percentile(ratios[w], 0.5) - 1.0) * 100.0;
        for (double x : ratios[w]) {
            r.ratio_pct[w].push_back((x - 1.0) * 100.0);
        }
        r.checkpoints[w]  = checkpoints[w] / triples;
    }
}

// Cancel latency: the byte stored at the same random 30-66% point for each way in turn. The point
// is a share of the decode time measured before; a run that finished before its store shows the
// machine decodes faster now (a shared machine's load moves), so later stores follow that run's time.
void measure_latency(contenders & c, const backend_options & o, const std::vector<llama_token> & prompt,
                     results & r) {
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    double full = r.decode_ms;
    for (int i = 0; i < o.runs; ++i) {
        const double frac = point(rng), ref = full; // the same point for each way of the run
        for (int w = 0; w < n_ways; ++w) {
            const timed t = c.decode(w, prompt, frac, ref);
            r.lat[w].add(t.ms, t.finished_first, c.stopped(w, t));
            if (t.finished_first) {
                full = std::min(full, t.total_ms);
            }
        }
    }
    c.probe.rearm(-1);
    for (int w = 0; w < n_ways; ++w) {
        const latencies & l = r.lat[w], & a = r.lat[abort_only];
        r.share_pct[w] = l.ms.empty() || a.ms.empty() || a.p50() <= 0 ? -1.0 : l.p50() / a.p50() * 100.0;
    }
}

// The decoding thread's CPU time as % of the decode's wall time.
double cpu_share_pct(const results & r, int w) {
    return r.wall_ms[w] > 0 ? r.thread_cpu_ms[w] / r.wall_ms[w] * 100.0 : 0.0;
}

// Issue #16's target: the thread's CPU time with checkpoints at most the plain decode's plus 10% of
// the wall time.
bool cpu_met(const results & r, int w) {
    return r.thread_cpu_ms[w] <= r.thread_cpu_ms[abort_only] + 0.1 * r.wall_ms[w];
}

common::json cpu_json(const results & r) {
    common::json js;
    const char * const keys[n_ways] = {"plain", "hook", "stateless"};
    for (int w = 0; w < n_ways; ++w) {
        js[keys[w]] = {{"wall_ms", common::printed(r.wall_ms[w], "%.2f")},
                       {"thread_cpu_ms", common::printed(r.thread_cpu_ms[w], "%.2f")},
                       {"process_cpu_ms", common::printed(r.process_cpu_ms[w], "%.2f")},
                       {"thread_cpu_pct_of_wall", common::printed(cpu_share_pct(r, w), "%.1f")}};
    }
    return js;
}

// One table row per way of cancelling.
void print_rows(const backend_options & o, const results & r) {
    for (int w = 0; w < n_ways; ++w) {
        char pct[32] = "-", overhead[48] = "-", checkpoints[32] = "-", interval[32] = "-";
        if (r.share_pct[w] >= 0) {
            std::snprintf(pct, sizeof(pct), "%.1f%%", r.share_pct[w]);
        }
        if (w != abort_only) {
            const auto & x = r.ratio_pct[w];
            std::snprintf(overhead, sizeof(overhead), "%+.2f%% (%+.1f..%+.1f)", r.overhead_pct[w],
                          x.empty() ? 0.0 : *std::min_element(x.begin(), x.end()), common::max_of(x));
            std::snprintf(checkpoints, sizeof(checkpoints), "%.1f", r.checkpoints[w]);
        }
        if (w == with_hook) {
            std::snprintf(interval, sizeof(interval), "%.1f (%.2f)", r.interval_ms, r.round_trip_ms);
        }
        const latencies & l = r.lat[w];
        char p50[32] = "-", p95[32] = "-", mx[32] = "-"; // no run with a latency: no figure
        if (!l.ms.empty()) {
            std::snprintf(p50, sizeof(p50), "%.3f", l.p50());
            std::snprintf(p95, sizeof(p95), "%.3f", l.p95());
            std::snprintf(mx, sizeof(mx), "%.3f", common::max_of(l.ms));
        }
        std::printf("| %-9s | %-14s | %5d | %7d | %9.2f | %8s | %8s | %8s | %10s | %22s | %11s | %13s "
                    "| %5d/%-3d | %14d | %13.1f | %6.0f%% | %14.1f |\n",
                    o.name.c_str(), k_way_names[w], o.batch, o.threads, r.decode_ms, p50, p95,
                    mx, pct, overhead, checkpoints, interval, l.cancelled, o.runs, l.finished_first,
                    r.thread_cpu_ms[w], cpu_share_pct(r, w), r.process_cpu_ms[w]);
    }
    std::fflush(stdout);
}

// The row's object: the setup, the figures of each way of cancelling, the targets.
common::json row_json(const backend_options & o, const std::string & device, const results & r, double budget_flops) {
    using common::printed;
    auto latency_met = [&](int w) { return r.share_pct[w] >= 0 && r.share_pct[w] <= 10.0; };
    common::json js = common::with_threads_override(
        {{"backend", o.name}, {"device", device}, {"batch", o.batch}, {"threads", o.threads}});
    js["runs"]                             = o.runs;
    js["decode_ms"]                        = printed(r.decode_ms);
    js["hook_overhead_pct"]                = printed(r.overhead_pct[with_hook]);
    js["hook_overhead_pairs_pct"]          = common::printed_list(r.ratio_pct[with_hook], "%.3f");
    js["stateless_overhead_pairs_pct"]     = common::printed_list(r.ratio_pct[by_name], "%.3f");
    js["hook_interval_ms"]                 = printed(r.interval_ms);
    js["round_trip_ms"]                    = printed(r.round_trip_ms);
    js["checkpoints_per_decode"]           = printed(r.checkpoints[with_hook]);
    js["budget_flops"]                     = printed(budget_flops);
    js["stateless_overhead_pct"]           = printed(r.overhead_pct[by_name]);
    js["stateless_checkpoints_per_decode"] = printed(r.checkpoints[by_name]);
    js["abort_callback_only_ms"]           = common::to_json(r.lat[abort_only]);
    js["llama_cancel_ms"]                  = common::to_json(r.lat[with_hook]);
    js["stateless_ms"]                     = common::to_json(r.lat[by_name]);
    js["ours_over_abort_pct"]              = printed(r.share_pct[with_hook]);
    js["stateless_over_abort_pct"]         = printed(r.share_pct[by_name]);
    js["cpu"]                              = cpu_json(r);
    js["targets"] = {{"latency_le_10pct_of_abort", latency_met(with_hook)},
                     {"overhead_le_3pct", r.overhead_pct[with_hook] <= 3.0},
                     {"stateless_latency_le_10pct_of_abort", latency_met(by_name)},
                     {"stateless_overhead_le_3pct", r.overhead_pct[by_name] <= 3.0},
                     {"thread_cpu_le_plain_plus_10pct_of_wall", cpu_met(r, with_hook)},
                     {"stateless_thread_cpu_le_plain_plus_10pct_of_wall", cpu_met(r, by_name)}};
    return js;
}

// The row names bench-backend takes.
const char k_names[] = "vulkan, vulkan-1t, rpc, rpc2, rpc-lan, rpc2-lan, blas, cpu";

// The support library's setup behind a row's name; empty for an unknown one.
// vulkan-1t: the same device with llvmpipe on one thread (the setup sets LP_NUM_THREADS), so that
// the host's spin-wait at each synchronize does not take a core from the "GPU".
// rpc-lan, rpc2-lan: the servers behind a delay proxy (LLAMA_CANCEL_RPC_DELAY_MS each way, 0.5).
std::string setup_name(const std::string & name) {
    const std::string setup = name == "rpc"     ? "rpc1"
                              : name == "rpc-lan" ? "rpc1-lan"
                                                  : name;
    return common::is_setup_name(setup) ? setup : "";
}

const char k_synopsis[] =
    "usage: llama-cancel-bench bench-backend vulkan|vulkan-1t|rpc|rpc2|rpc-lan|rpc2-lan|blas|cpu --model PATH\n"
    "       [--json PATH]\n"
    "       [--runs N] [--batch N] [--threads N] [--interval MS] [--rpc-server PATH]\n";

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, backend_options & o) {
    cli_args::parser p(k_synopsis);
    p.positional("NAME", &o.name, "the backend setup: vulkan, vulkan-1t, rpc, rpc2, rpc-lan, rpc2-lan, blas or cpu")
        .option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--json", &o.json, "PATH", "where the row's JSON goes")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--runs", &o.runs, "N", "latency runs (>= 1)")
        .option("--batch", &o.batch, "N", "prompt tokens, one ubatch (>= 2)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--interval", &o.interval_ms, "MS", "the hook's checkpoint interval, 0: the library's default")
        .option("--seed", &o.seed, "N", "random seed");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.name.empty(), "the backend NAME is required"},
                    {setup_name(o.name).empty(), "unknown backend '" + o.name + "' (" + k_names + ")"},
                    {o.model.empty(), "--model is required"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.batch < 2, "--batch must be at least 2"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

// Two decodes each way; the hook and the stateless callback also learn the device's rate here.
bool warm_up(contenders & c, const backend_options & o, const std::vector<llama_token> & prompt) {
    for (int i = 0; i < 2 * n_ways; ++i) {
        const timed t = c.decode(i % n_ways, prompt, 0, 0);
        if (t.status != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "error: decoding on %s (%s) failed: status %d\n", o.name.c_str(),
                         k_way_names[i % n_ways], t.status);
            return false;
        }
    }
    return true;
}

// Overhead, then cancel latency, then the hook's interval and round trip; the hook's FLOP budget in
// *budget_flops.
results measure(contenders & c, const backend_options & o, const std::vector<llama_token> & prompt,
                double * budget_flops) {
    results r;
    std::fprintf(stderr, "[%s] overhead\n", o.name.c_str());
    measure_overhead(c, o, prompt, r);
    std::fprintf(stderr, "[%s] cancel latency\n", o.name.c_str());
    measure_latency(c, o, prompt, r);
    const llama_cancel_hook_stats stats = llama_cancel_hook_get_stats(c.hook.get());
    r.interval_ms   = stats.interval_ms;
    r.round_trip_ms = stats.round_trip_ms;
    *budget_flops   = stats.work_flops;
    return r;
}

} // namespace

int bench_backend_main(int argc, char ** argv) {
    backend_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    const std::string setup_as = setup_name(o.name);
    common::note_threads_override(o.name);
    common::backend_setup setup;
    if (!common::setup_backend(setup_as, o.rpc_server, o.threads, setup)) {
        return 1;
    }
    common::model_ptr model = setup.load(o.model, -1);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.name.c_str());
        return 1;
    }
    contenders c;
    if (!c.make(model.get(), o, !setup.devices.empty())) {
        std::fprintf(stderr, "error: cannot create contexts on %s\n", o.name.c_str());
        return 1;
    }
    const auto prompt = common::make_prompt(model.get(), o.batch, o.seed);
    if (!warm_up(c, o, prompt)) {
        return 1;
    }
    double budget = 0;
    const results r = measure(c, o, prompt, &budget);
    print_rows(o, r);
    return o.json.empty() || common::write_json_file(o.json, row_json(o, setup.description, r, budget))
               ? 0
               : 1;
}
