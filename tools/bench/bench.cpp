// `llama-cancel-bench bench`, the cancel benchmark: reader overhead, cancel latency, rollback, thread probe
// and the physical floor on the CPU backend for each batch size and thread count, then the rows of
// the other backends, multimodal encodes, memory kinds, stop-time budgets and per-sequence cancels.
// By default only the headline rows run (a few minutes); --all, or each section's option, runs the
// others. Figures are printed as tables and saved as JSON (a plot beside it); nothing here is a
// pass/fail timing assertion except the reported targets. This file: the command line, the run's
// phases in order, the JSON file (see bench.h for the other files).
#include "bench/bench.h"
#include "bench/bench_budget.h"
#include "bench/bench_children.h"
#include "bench/bench_cpu.h"
#include "bench/bench_mtmd.h"
#include "bench/bench_tts.h"
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "support.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <cstdio>
#include <sstream>
#include <sys/stat.h>
#include <string>
#include <thread>
#include <vector>

using namespace bench;

namespace {

const char k_synopsis[] =
    "usage: llama-cancel-bench bench [--all] [--model PATH] [--json PATH] [--batches 64,256,512]\n"
    "                                [--threads 1,2] [--runs N] [--seed N]\n"
    "                                [--backends vulkan,vulkan-1t,rpc,rpc2,rpc-lan,rpc2-lan,blas,cpu|none] [--backend-batch 128]\n"
    "                                [--mtmd vision,audio,qwen3a,voxtral,glma,internvl-batch,video,qwen3a:vulkan,...|none] [--no-mtmd]\n"
    "                                [--tts qwen3tts,pockettts,qwen3tts-pred,qwen3tts:vulkan,pockettts:vulkan|none] [--archs llama,gemma3,mamba,mamba2,rwkv7,lfm2,...|none]\n"
    "                                [--arch-preset bench|tiny] [--budgets 5,20,100|none]\n"
    "                                [--seq-backends cpu,rpc1|none] [--seq-ubatches 512,128] [--plans cpu,vulkan|none]\n"
    "                                [--embed cpu,vulkan|none]\n"
    "\n"
    "Without --model, generates (once) and uses the built-in synthetic model.\n"
    "By default, the headline rows a host decides on (about 3 min on 2 cores): CPU at batches 64 and 512 on 2 threads,\n"
    "vulkan at batch 64, the Qwen3-ASR audio evaluation, Qwen3-TTS's steps on the CPU, plan stability on the CPU. --all runs every row\n"
    "of every section (the lists shown above; about 16 min on 2 cores); an option given beside it wins.\n";

// --all anywhere on the command line: every section's full lists, before the other options apply.
bool asks_for_all(int argc, char ** argv) {
    return std::any_of(argv + 1, argv + argc, [](const char * a) { return std::strcmp(a, "--all") == 0; });
}

// The budgets as --help shows their default: "5,20,100", or "none".
std::string budgets_text(const std::vector<float> & budgets) {
    std::string text;
    for (const float b : budgets) {
        text += (text.empty() ? "" : ",") + std::to_string(static_cast<int>(b));
    }
    return text.empty() ? "none" : text;
}

// The command line into `opt`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, options & opt) {
    // --budgets: whole ms; "none" and values <= 0 are left out.
    auto budgets = [&opt](const char * v) {
        std::vector<float> out;
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) {
            long long b = 0;
            const std::string err = item == "none" ? "" : cli_args::parser::to_int(item.c_str(), INT_MIN, INT_MAX, &b);
            if (!err.empty()) {
                return "item '" + item + "' " + err;
            }
            if (b > 0) {
                out.push_back(static_cast<float>(b));
            }
        }
        opt.budgets = out;
        return std::string();
    };
    if (asks_for_all(argc, argv)) {
        opt = options::every();
    }
    bool no_mtmd = false;
    cli_args::parser p(k_synopsis);
    p.flag("--all", &opt.all, true, "every row of every section (the lists in the synopsis)")
        .option("--model", &opt.model, "PATH", "model to benchmark (default: the built-in synthetic model)")
        .option("--json", &opt.json, "PATH", "where the results go (JSON; a plot beside it)")
        .option("--batches", &opt.batches, "LIST", "batch sizes (>= 2)")
        .option("--threads", &opt.threads, "LIST", "thread counts (>= 1)")
        .option("--runs", &opt.runs, "N", "latency runs per row (>= 1)")
        .option("--seed", &opt.seed, "N", "random seed")
        .option("--backends", &opt.backends, "LIST", "backend rows, each in its own process, or none")
        .option("--backend-batch", &opt.backend_batch, "N", "batch of the backend rows (>= 2)")
        .option("--mtmd", &opt.mtmd, "LIST", "multimodal rows (vision, audio: one encode; qwen3a, voxtral, glma: an audio prompt evaluated "
                "whole; internvl-batch: two images, their tiles batched encodes, evaluated whole; video: a generated clip's frames evaluated "
                "whole; an evaluation as KIND:vulkan on Vulkan), or none")
        .flag("--no-mtmd", &no_mtmd, true, "leave out the multimodal rows, text to speech too (--mtmd none --tts none)")
        .option("--tts", &opt.tts, "LIST", "text-to-speech rows: PAIR (qwen3tts, pockettts; qwen3tts-pred: a 15-20 ms GEN_CODE) or PAIR:vulkan, "
                "each step's stop latency and the byte at 0's cost a frame, or none")
        .option("--archs", &opt.archs, "LIST", "memory-kind rows (architectures; ARCH:PRESET for another make_model.py preset, e.g. mamba2:real), or none")
        .option("--arch-preset", &opt.arch_preset, "NAME", "make_model.py preset of the memory-kind models")
        .option("--budgets", budgets, "LIST", "stop-time budget rows, ms, or none", budgets_text(opt.budgets))
        .option("--seq-backends", &opt.seq_backends, "LIST", "per-sequence cancel rows (cpu, vulkan, rpc1), or none")
        .option("--seq-ubatches", &opt.seq_ubatches, "LIST", "n_ubatch of each per-sequence row, 1..512")
        .option("--plans", &opt.plans, "LIST", "plan stability rows (cpu, vulkan, vulkan-1t, rpc, blas), or none")
        .option("--embed", &opt.embed, "LIST", "embedding job rows (cpu, vulkan, vulkan-1t, rpc, blas), or none");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    if (no_mtmd) {
        opt.mtmd.clear();
        opt.tts.clear();
    }
    const bool bad_kind = std::any_of(opt.mtmd.begin(), opt.mtmd.end(),
                                      [](const std::string & k) { return !bench_mtmd::is_row(k); });
    const bool bad_tts = std::any_of(opt.tts.begin(), opt.tts.end(),
                                     [](const std::string & r) { return !bench_tts::is_row(r); });
    const bool bad_ubatch = std::any_of(opt.seq_ubatches.begin(), opt.seq_ubatches.end(),
                                        [](int u) { return u < 1 || u > 512; });
    auto any_below = [](const std::vector<int> & v, int min) {
        return v.empty() || std::any_of(v.begin(), v.end(), [min](int x) { return x < min; });
    };
    return p.check({{opt.runs < 1, "--runs must be at least 1"},
                    {any_below(opt.batches, 2), "--batches needs batch sizes of at least 2"},
                    {any_below(opt.threads, 1), "--threads needs thread counts of at least 1"},
                    {opt.backend_batch < 2, "--backend-batch must be at least 2"},
                    {bad_kind, std::string("--mtmd takes ") + bench_mtmd::k_kinds + " or none"},
                    {bad_tts, std::string("--tts takes ") + bench_tts::k_rows + " or none"},
                    {opt.seq_ubatches.empty() || bad_ubatch, "--seq-ubatches needs values of 1..512"}});
}

// What the JSON file holds beside the options.
struct bench_report {
    std::string          desc;     // llama_model_desc: "llama ?B F16" where llama.cpp knows no size class
    std::string          arch, ftype;
    uint64_t             n_params = 0, file_bytes = 0;
    int32_t              n_layer = 0, n_embd = 0;
    std::vector<cpu_row> rows;
    cpu_targets          cpu;
    section              backends, mtmd, tts, memory, budgets, seq, plans, embed;
    double               wall_s = 0.0; // the model's load to the last row, seconds
    std::vector<std::pair<std::string, double>> section_s; // each section's wall time, seconds
};

// Runs `f` and notes its wall time under `name` in rep.section_s; returns what it returned.
template <typename F> auto timed(bench_report & rep, const char * name, F f) {
    const double t = common::now_ms();
    auto         r = f();
    rep.section_s.emplace_back(name, (common::now_ms() - t) / 1000.0);
    return r;
}

// Without --model, the built-in synthetic model (generated once); false when it cannot be made.
bool ensure_default_model(options & opt) {
    if (!opt.model.empty()) {
        return true;
    }
    opt.model = common::models_cache_dir() + "bench.gguf";
    return common::ensure_model(common::script_path("make_model.py"), opt.model, "bench");
}

// The model, with its description line on stderr; null with a message when it does not load.
common::model_ptr load_bench_model(const options & opt, bench_report & rep) {
    common::quiet_logs();
    common::load_backends();
    common::model_ptr model = common::load_model(opt.model);
    if (!model) {
        std::fprintf(stderr, "error: cannot load model %s\n", opt.model.c_str());
        return model;
    }
    char desc[128];
    llama_model_desc(model.get(), desc, sizeof(desc));
    rep.desc = desc;
    // The size class llama.cpp names ("?B" for a model of no known class, such as the generated
    // ones) says less than the figures themselves: architecture, layers, width, parameters, file.
    char arch[64] = "";
    if (llama_model_meta_val_str(model.get(), "general.architecture", arch, sizeof(arch)) < 0) {
        std::snprintf(arch, sizeof(arch), "%s", rep.desc.substr(0, rep.desc.find(' ')).c_str());
    }
    rep.arch = arch;
    // llama_model_desc is "ARCH SIZE FTYPE": the file type is what follows the second space.
    const size_t second = rep.desc.find(' ', rep.desc.find(' ') + 1);
    rep.ftype      = second == std::string::npos ? "" : rep.desc.substr(second + 1);
    rep.n_params   = llama_model_n_params(model.get());
    rep.n_layer    = llama_model_n_layer(model.get());
    rep.n_embd     = llama_model_n_embd(model.get());
    struct stat st{};
    rep.file_bytes = stat(opt.model.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::fprintf(stderr, "model: %s (%s, %d layers, n_embd %d, %.1f M parameters, %s, %.1f MB), CPU backend, %u cores\n",
                 opt.model.c_str(), rep.arch.c_str(), rep.n_layer, rep.n_embd, rep.n_params / 1e6,
                 rep.ftype.empty() ? "?" : rep.ftype.c_str(), rep.file_bytes / 1e6, std::thread::hardware_concurrency());
    return model;
}

// A section's target in the file: null when the options left the section out (nothing was measured).
common::json target(const section & s, bool met) {
    return s.ran ? common::json(met) : common::json(nullptr);
}

// The whole file: the model and the run, the CPU rows and their targets, then each section's rows
// (the child processes' objects as they wrote them, or their error entries) and its targets.
common::json bench_json(const options & opt, const bench_report & rep) {
    common::json js;
    js["model"] = {{"path", opt.model},   {"desc", rep.desc},       {"arch", rep.arch},
                   {"n_layer", rep.n_layer}, {"n_embd", rep.n_embd},   {"n_params", rep.n_params},
                   {"ftype", rep.ftype},     {"file_bytes", rep.file_bytes}};
    js["backend"] = "CPU";
    js["cores"]   = std::thread::hardware_concurrency();
    js["runs"]    = opt.runs;
    js["seed"]    = opt.seed;
    js["all"]     = opt.all;
    js["wall_s"]  = common::printed(rep.wall_s, "%.1f");
    js            = common::with_threads_override(std::move(js), "seed");
    js["targets"] = {{"overhead_le_1pct", rep.cpu.overhead},
                     {"worst_latency_le_2x_node_plus_1ms", rep.cpu.latency},
                     {"zero_off_thread", rep.cpu.thread},
                     {"stored_runs_stopped", rep.cpu.stopped},
                     {"rollback_ok", rep.cpu.rollback}};
    js["rows"] = common::json::array();
    for (const cpu_row & r : rep.rows) {
        js["rows"].push_back(cpu_row_json(r));
    }
    js["backends"]                       = rep.backends.json;
    js["backends_targets_met"]           = target(rep.backends, rep.backends.ok);
    js["backends_stateless_targets_met"] = target(rep.backends, rep.backends.stateless_ok);
    js["mtmd"]                           = rep.mtmd.json;
    js["mtmd_targets_met"]               = target(rep.mtmd, rep.mtmd.ok);
    js["mtmd_stateless_targets_met"]     = target(rep.mtmd, rep.mtmd.stateless_ok);
    js["tts"]                            = rep.tts.json;
    js["tts_targets_met"]                = target(rep.tts, rep.tts.ok);
    js["tts_stateless_targets_met"]      = target(rep.tts, rep.tts.stateless_ok);
    js["memory_kinds"]                   = rep.memory.json;
    js["memory_rollback_exact"]          = target(rep.memory, rep.memory.ok);
    js["budgets"]                        = rep.budgets.json;
    js["budget_targets_met"]             = target(rep.budgets, rep.budgets.ok);
    js["seq"]                            = rep.seq.json;
    js["seq_targets_met"]                = target(rep.seq, rep.seq.ok);
    js["plans"]                          = rep.plans.json;
    js["plans_targets_met"]              = target(rep.plans, rep.plans.ok);
    js["embed"]                          = rep.embed.json;
    js["embed_targets_met"]              = target(rep.embed, rep.embed.ok);
    common::json sections                = common::json::object();
    for (const auto & sec : rep.section_s) {
        sections[sec.first] = common::printed(sec.second, "%.1f");
    }
    js["section_s"] = sections;
    return js;
}

bool write_bench_json(const options & opt, const bench_report & rep) {
    if (!common::write_json_file(opt.json, bench_json(opt, rep))) {
        return false;
    }
    std::printf("\nsaved %s\n", opt.json.c_str());
    return true;
}

void plot(const std::string & json) {
    const std::string plotter = common::script_path("plot_bench.py");
    if (common::run_command({"python3", plotter, json}) != 0) {
        std::printf("(no plot: %s needs python3 with matplotlib)\n", plotter.c_str());
    }
}

} // namespace

int bench_main(int argc, char ** argv) {
    options opt;
    const int rc = parse_options(argc, argv, opt);
    if (rc >= 0) {
        return rc;
    }
    const bool builtin_model = opt.model.empty(); // the budget rows add a larger model beside it
    if (!ensure_default_model(opt)) {
        return 1;
    }
    const double t0 = common::now_ms();
    bench_report rep;
    common::model_ptr model = load_bench_model(opt, rep);
    if (!model) {
        return 1;
    }
    common::note_threads_override(); // the child processes say it again for their rows

    rep.rows     = timed(rep, "cpu", [&] { return measure_cpu_rows(opt, model.get()); });
    rep.cpu      = print_cpu_rows(rep.rows);
    rep.backends = timed(rep, "backends", [&] { return backend_rows(opt); });
    rep.mtmd     = timed(rep, "mtmd", [&] { return mtmd_rows(opt, model.get()); });
    rep.tts      = timed(rep, "tts", [&] { return tts_rows(opt); });
    rep.memory   = timed(rep, "memory", [&] { return memory_rows(opt); });
    rep.budgets  = timed(rep, "budgets", [&] { return budget_rows(opt, builtin_model); });
    rep.seq      = timed(rep, "seq", [&] { return seq_rows(opt); });
    rep.plans    = timed(rep, "plans", [&] { return plans_rows(opt); });
    rep.embed    = timed(rep, "embed", [&] { return embed_rows(opt); });
    rep.wall_s   = (common::now_ms() - t0) / 1000.0;
    std::printf("\nbench: %.0f s (%s):", rep.wall_s, opt.all ? "--all" : "headline rows; --all for every row");
    for (const auto & s : rep.section_s) {
        std::printf(" %s %.0f s", s.first.c_str(), s.second);
    }
    std::printf("\n");

    if (!write_bench_json(opt, rep)) {
        return 1;
    }
    plot(opt.json);
    return 0;
}
