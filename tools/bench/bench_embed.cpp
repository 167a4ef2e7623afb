// `llama-cancel-bench bench-embed SETUP --model PATH`: an indexing job (2,048 passages by default,
// 64 to a call) three ways: llama_cancel_embed with a hook bound, llama_cancel_embed with the
// contract's stateless name as cb_eval, and llama.cpp's own idiom (llama_decode, or llama_encode
// for an encoder-only model, then llama_get_embeddings_seq) with the byte checked between calls, as
// a host does without llama-cancel. The byte at 0's cost: each call's time against the idiom's, the
// ways taking turns call by call, median of the paired ratios. Stops: another thread stores the
// byte at a random 10-90% point of the job; store to return, p50 and max, also as % of one call.
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

struct embed_bench_options {
    std::string name, model, json, pooling;
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         passages = 2048, per_call = 64, min_len = 8, max_len = 40, runs = 10, threads = 2;
    uint32_t    seed = 42;
};

enum way { with_hook = 0, by_name = 1, idiom = 2, n_ways = 3 };
const char * const k_way_names[n_ways] = {"hook", "stateless", "between calls"};

struct way_context {
    int                 w;
    common::hook_ptr    hook;
    common::context_ptr ctx;
    int8_t              byte = 0;
    std::vector<float>  rows;
    bool                encoder = false;

    // Passages [first, first + n) as one call, on a cleared memory; true when it stopped or failed.
    int32_t call(const std::vector<std::vector<llama_token>> & passages, size_t first, size_t n) {
        common::owned_batch b;
        for (size_t k = 0; k < n; ++k) {
            for (size_t i = 0; i < passages[first + k].size(); ++i) {
                b.add(passages[first + k][i], static_cast<llama_pos>(i), {static_cast<llama_seq_id>(k)}, true);
            }
        }
        if (llama_get_memory(ctx.get()) != nullptr) {
            llama_memory_clear(llama_get_memory(ctx.get()), true);
        }
        if (w != idiom) {
            llama_cancel_embed_params p = llama_cancel_embed_default_params();
            p.byte = &byte;
            p.hook = hook.get();
            return llama_cancel_embed(ctx.get(), b.get(), &p, rows.data(), static_cast<int64_t>(rows.size()), nullptr);
        }
        const int32_t ret = encoder ? llama_encode(ctx.get(), b.get()) : llama_decode(ctx.get(), b.get());
        const int32_t n_out = static_cast<int32_t>(rows.size() / n);
        for (size_t k = 0; ret == 0 && k < n; ++k) { // what a host copies out of each call
            const float * e = llama_get_embeddings_seq(ctx.get(), static_cast<llama_seq_id>(k));
            std::copy(e, e + n_out, rows.begin() + static_cast<std::ptrdiff_t>(k * n_out));
        }
        return ret == 0 ? LLAMA_CANCEL_OK : LLAMA_CANCEL_ERROR;
    }

    // The whole job from passage 0, the byte read between calls too; the status of the last call.
    int32_t job(const std::vector<std::vector<llama_token>> & passages, int per_call, std::vector<double> * call_ms) {
        for (size_t first = 0; first < passages.size(); first += per_call) {
            if (__atomic_load_n(&byte, __ATOMIC_RELAXED) != 0) {
                return LLAMA_CANCEL_CANCELLED;
            }
            const double  t0 = common::now_ms();
            const int32_t st = call(passages, first, std::min<size_t>(per_call, passages.size() - first));
            if (call_ms != nullptr) {
                call_ms->push_back(common::now_ms() - t0);
            }
            if (st != LLAMA_CANCEL_OK) {
                return st;
            }
        }
        return LLAMA_CANCEL_OK;
    }
};

bool make_way(llama_model * model, const embed_bench_options & o, bool offloaded, int w, way_context & out) {
    out.w       = w;
    out.encoder = llama_model_has_encoder(model) && !llama_model_has_decoder(model);
    common::context_options opt;
    opt.n_ctx       = static_cast<uint32_t>(o.per_call * o.max_len);
    opt.n_batch     = opt.n_ctx;
    opt.n_ubatch    = opt.n_ctx; // one graph a call, as llama.cpp's embedding example runs encoders
    opt.n_seq_max   = static_cast<uint32_t>(o.per_call);
    opt.kv_unified  = true;
    opt.n_threads   = o.threads;
    opt.offload_kqv = offloaded;
    opt.embeddings  = true;
    opt.pooling     = o.pooling == "mean" ? LLAMA_POOLING_TYPE_MEAN
                    : o.pooling == "cls"  ? LLAMA_POOLING_TYPE_CLS
                    : o.pooling == "last" ? LLAMA_POOLING_TYPE_LAST
                    : o.pooling == "rank" ? LLAMA_POOLING_TYPE_RANK
                                          : LLAMA_POOLING_TYPE_UNSPECIFIED;
    if (w == with_hook) {
        out.hook = common::make_hook();
        opt.cb_eval      = llama_cancel_hook_eval_callback;
        opt.cb_eval_data = out.hook.get();
    } else if (w == by_name) {
        opt.cb_eval      = llama_cancel_eval_callback;
        opt.cb_eval_data = &out.byte;
    }
    out.ctx = common::make_context(model, opt);
    if (!out.ctx || llama_cancel_embed_n_out(out.ctx.get()) <= 0) {
        return false;
    }
    out.rows.assign(static_cast<size_t>(o.per_call) * llama_cancel_embed_n_out(out.ctx.get()), 0.0f);
    return true;
}

std::vector<std::vector<llama_token>> make_passages(const llama_model * model, const embed_bench_options & o) {
    std::mt19937 rng(o.seed);
    std::uniform_int_distribution<int> len(o.min_len, o.max_len);
    std::vector<std::vector<llama_token>> p(o.passages);
    for (int i = 0; i < o.passages; ++i) {
        p[i] = common::make_prompt(model, len(rng), o.seed + 1 + i);
    }
    return p;
}

struct way_figures {
    std::vector<double> call_ms, job_ms;
    common::latencies   stops;
    int                 failed = 0;
};

// The clean jobs (calls taking turns across the ways), then each way's stopped jobs.
void measure(way_context (&c)[n_ways], const embed_bench_options & o,
             const std::vector<std::vector<llama_token>> & passages, way_figures (&f)[n_ways]) {
    for (size_t first = 0; first < passages.size(); first += o.per_call) {
        const size_t n = std::min<size_t>(o.per_call, passages.size() - first);
        for (int k = 0; k < n_ways; ++k) {
            way_context & x = c[(k + first / o.per_call) % n_ways];
            const double t0 = common::now_ms();
            f[x.w].failed += x.call(passages, first, n) == LLAMA_CANCEL_OK ? 0 : 1;
            f[x.w].call_ms.push_back(common::now_ms() - t0);
        }
    }
    std::mt19937 rng(o.seed);
    for (way_context & x : c) {
        const double t0 = common::now_ms();
        f[x.w].failed += x.job(passages, o.per_call, nullptr) == LLAMA_CANCEL_OK ? 0 : 1;
        f[x.w].job_ms.push_back(common::now_ms() - t0);
        std::uniform_real_distribution<double> at(0.1, 0.9);
        for (int r = 0; r < o.runs; ++r) {
            x.byte = 0;
            double t_store = 0.0;
            const double start = common::now_ms();
            std::thread writer = common::store_at(&x.byte, start + at(rng) * f[x.w].job_ms[0], &t_store);
            const int32_t st = x.job(passages, o.per_call, nullptr);
            const double t_ret = common::now_ms();
            writer.join();
            f[x.w].failed += st == LLAMA_CANCEL_ERROR ? 1 : 0;
            const bool stopped = st == LLAMA_CANCEL_CANCELLED;
            f[x.w].stops.add(t_ret - t_store, t_ret < t_store, stopped);
        }
        x.byte = 0;
    }
}


const char k_synopsis[] =
    "usage: llama-cancel-bench bench-embed cpu|vulkan|vulkan-1t|rpc|blas --model PATH [--passages N] [--per-call N]\n"
    "       [--pooling mean|cls|last|rank] [--runs N] [--threads N] [--json PATH] [--rpc-server PATH]\n";

int parse_options(int argc, char ** argv, embed_bench_options & o) {
    cli_args::parser p(k_synopsis);
    p.positional("SETUP", &o.name, "the backend setup: cpu, vulkan, vulkan-1t, rpc or blas")
        .option("--model", &o.model, "PATH", "an embedding model (required)")
        .option("--json", &o.json, "PATH", "where the row's JSON goes")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--passages", &o.passages, "N", "passages of the job, 8-40 tokens each")
        .option("--per-call", &o.per_call, "N", "passages per call (the context's n_seq_max, <= 256)")
        .option("--pooling", &o.pooling, "KIND", "mean, cls, last or rank (default: the model's)")
        .option("--runs", &o.runs, "N", "stopped jobs per way")
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
                    {!o.pooling.empty() && o.pooling != "mean" && o.pooling != "cls" && o.pooling != "last" &&
                         o.pooling != "rank", "--pooling must be mean, cls, last or rank"},
                    {o.per_call < 1 || o.per_call > 256, "--per-call must be 1..256"},
                    {o.passages < o.per_call * 3, "--passages must be at least 3 calls' (3 x --per-call)"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

} // namespace

int bench_embed_main(int argc, char ** argv) {
    embed_bench_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
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
    way_context c[n_ways];
    for (int w = 0; w < n_ways; ++w) {
        if (!make_way(model.get(), o, !setup.devices.empty(), w, c[w])) {
            std::fprintf(stderr, "error: cannot make an embeddings context that pools on %s\n", o.name.c_str());
            return 1;
        }
    }
    const auto passages = make_passages(model.get(), o);
    std::fprintf(stderr, "[embed %s] %d passages, %d a call; the ways taking turns, then %d stopped jobs each\n",
                 o.name.c_str(), o.passages, o.per_call, o.runs);
    way_figures f[n_ways];
    measure(c, o, passages, f);
    common::json rows = common::json::array();
    bool failed = false, stops_met = true, cost_met = true;
    for (int w = 0; w < n_ways; ++w) {
        const double call  = common::percentile(f[w].call_ms, 0.5);
        const double cost  = w == idiom ? 0.0 : common::paired_overhead_pct(f[w].call_ms, f[idiom].call_ms);
        const double p50   = f[w].stops.p50(), worst = common::max_of(f[w].stops.ms);
        std::printf("| %-9s | %-13s | %8.1f | %+7.2f%% | %8.1f | %2d / %-2d | %8.2f | %8.2f | %6.1f%% | %6.1f%% |\n",
                    o.name.c_str(), k_way_names[w], call, cost, f[w].job_ms[0], f[w].stops.cancelled, o.runs, p50,
                    worst, 100.0 * p50 / call, 100.0 * worst / call);
        rows.push_back({{"way", k_way_names[w]},
                        {"call_ms_p50", common::printed(call)},
                        {"byte_at_0_pct_vs_idiom", common::printed(cost)},
                        {"job_ms", common::printed(f[w].job_ms[0])},
                        {"stopped", f[w].stops.cancelled},
                        {"finished_first", f[w].stops.finished_first},
                        {"stop_ms_p50", common::printed(p50)},
                        {"stop_ms_max", common::printed(worst)},
                        {"stop_pct_of_call_p50", common::printed(100.0 * p50 / call)},
                        {"stop_pct_of_call_max", common::printed(100.0 * worst / call)},
                        {"failed", f[w].failed}});
        failed = failed || f[w].failed > 0;
        if (w != idiom) {
            stops_met = stops_met && !f[w].stops.ms.empty() && 100.0 * p50 / call <= 10.0;
            cost_met  = cost_met && cost <= 1.0;
        }
    }
    std::fflush(stdout);
    if (failed) {
        std::fprintf(stderr, "error: a call on %s failed\n", o.name.c_str());
    }
    common::json j = {{"setup", o.name},       {"device", setup.description}, {"passages", o.passages},
                      {"per_call", o.per_call}, {"runs", o.runs},              {"threads", o.threads},
                      {"rows", rows},
                      {"targets", {{"stop_p50_le_10pct_of_call", stops_met}, {"byte_at_0_le_1pct", cost_met}}}};
    const bool written = o.json.empty() || common::write_json_file(o.json, common::with_threads_override(j));
    return written && !failed ? 0 : 1;
}
