// `llama-cancel-bench tune --model PATH --budget-ms B`: what a stop-time budget costs on this machine.
// For each candidate n_ubatch (and for the library's budget slicing at the full n_ubatch) it
// measures prefill throughput and stop latency, prints a table as it goes, recommends the fastest
// setting whose worst stop is within the budget, and writes JSON and a plot.
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "common/stop_latency.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct tune_options {
    std::string model;
    std::string backend    = "cpu";
    std::string json       = "llama-cancel-tune.json";
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    float       budget_ms  = 0;
    int         tokens     = 512;
    int         runs       = 5;
    int         threads    = 2;
    uint32_t    seed       = 42;
};

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, tune_options & o) {
    cli_args::parser p("usage: llama-cancel-bench tune --model PATH --budget-ms B [--backend cpu|vulkan|rpc1|rpc1-lan|blas]\n"
                     "                               [--json FILE] [--tokens 512] [--runs 5] [--threads 2]\n"
                     "       B > 0; --tokens >= 16\n");
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--budget-ms", &o.budget_ms, "B", "the stop-time budget, ms (> 0, required)")
        .option("--backend", &o.backend, "NAME", "backend setup")
        .option("--json", &o.json, "FILE", "where the results go (JSON; a plot beside it)")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--tokens", &o.tokens, "N", "prefill tokens (>= 16)")
        .option("--runs", &o.runs, "N", "runs per row (>= 1)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {!(o.budget_ms > 0), "--budget-ms must be above 0"},
                    {!common::is_setup_name(o.backend),
                     "unknown --backend '" + o.backend + "' (" + common::setup_names() + ")"},
                    {o.tokens < 16, "--tokens must be at least 16"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

struct tune_row {
    common::stop_config   cfg;
    common::stop_figures  fig;
    double worst() const { return common::max_of(fig.stop_ms); }
    bool   meets(float budget) const { return !fig.stop_ms.empty() && worst() <= budget; }
};

std::vector<int32_t> candidates(int tokens) {
    std::vector<int32_t> out;
    for (int32_t u = 16; u < tokens; u *= 2) {
        out.push_back(u);
    }
    out.push_back(tokens);
    return out;
}

void print_row(const tune_row & r, float budget) {
    char node[32] = "-"; // not known through a hook without a budget
    if (r.fig.longest_node_ms > 0) {
        std::snprintf(node, sizeof(node), "%.2f", r.fig.longest_node_ms);
    }
    std::printf("| %8d | %9s | %9.1f | %8.1f | %8.2f | %8.2f | %5d | %7d | %4d | %8s | %-5s |\n", r.cfg.n_ubatch,
                r.cfg.max_stop_ms > 0 ? "library" : "-", r.fig.decode_ms, r.fig.tokens_per_s,
                common::percentile(r.fig.stop_ms, 0.95), r.worst(), static_cast<int>(r.fig.stop_ms.size()),
                r.fig.finished_first, r.fig.late_store, node, r.meets(budget) ? "yes" : "no");
    std::fflush(stdout);
}

// The fastest row within the budget; else the one with the smallest worst stop.
const tune_row & recommend(const std::vector<tune_row> & rows, float budget) {
    const tune_row * best = nullptr;
    for (const tune_row & r : rows) {
        if (r.meets(budget) && (best == nullptr || r.fig.tokens_per_s > best->fig.tokens_per_s)) {
            best = &r;
        }
    }
    if (best == nullptr) {
        best = &*std::min_element(rows.begin(), rows.end(),
                                  [](const tune_row & a, const tune_row & b) { return a.worst() < b.worst(); });
    }
    return *best;
}

common::json row_json(const tune_row & r, float budget) {
    using common::printed;
    return {{"n_ubatch", r.cfg.n_ubatch},
            {"max_stop_ms", printed(r.cfg.max_stop_ms)},
            {"decode_ms", printed(r.fig.decode_ms)},
            {"tokens_per_s", printed(r.fig.tokens_per_s)},
            {"calls", r.fig.calls},
            {"stop_ms",
             {{"p50", printed(common::percentile(r.fig.stop_ms, 0.5))},
              {"p95", printed(common::percentile(r.fig.stop_ms, 0.95))},
              {"max", printed(r.worst())},
              {"all", common::printed_list(r.fig.stop_ms)}}},
            {"finished_first", r.fig.finished_first},
            {"late_store", r.fig.late_store},
            {"longest_node_ms", printed(r.fig.longest_node_ms)},
            {"meets_budget", r.meets(budget)}};
}

// The whole file: the run, the recommendation, every row.
common::json tune_json(const tune_options & o, const std::vector<tune_row> & rows, const tune_row & rec,
                       const std::string & device) {
    using common::printed;
    const common::json run = {
        {"model", o.model},
        {"backend", o.backend},
        {"device", device},
        {"budget_ms", printed(o.budget_ms)},
        {"tokens", o.tokens},
        {"threads", o.threads},
        {"runs", o.runs}};
    common::json js = common::with_threads_override(run);
    js["recommended"] = {{"n_ubatch", rec.cfg.n_ubatch},
                         {"max_stop_ms", printed(rec.cfg.max_stop_ms)},
                         {"tokens_per_s", printed(rec.fig.tokens_per_s)},
                         {"worst_stop_ms", printed(rec.worst())},
                         {"meets_budget", rec.meets(o.budget_ms)}};
    js["rows"] = common::json::array();
    for (const tune_row & r : rows) {
        js["rows"].push_back(row_json(r, o.budget_ms));
    }
    return js;
}

// What the rows run on: the backend setup, the model on it, and (off the CPU) the hook whose
// checkpoints follow the budget. Declared in that order: the model goes before its setup.
struct tune_setup {
    common::backend_setup   backend;
    common::model_ptr       model;
    common::hook_ptr        hook;
    common::context_options base; // threads and offload of every row's context
};

// False with a message when the backend cannot be set up or the model does not load on it.
bool make_setup(const tune_options & o, tune_setup & s) {
    common::quiet_logs();
    common::note_threads_override();
    if (!common::setup_backend(o.backend, o.rpc_server, o.threads, s.backend)) {
        return false;
    }
    s.model = s.backend.load(o.model, -1);
    if (!s.model) {
        std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.backend.c_str());
        return false;
    }
    // Backends beyond the CPU are stopped through a hook whose checkpoints follow the budget.
    const bool offloaded = !s.backend.devices.empty();
    if (offloaded) {
        llama_cancel_hook_params hp = llama_cancel_hook_default_params();
        hp.interval_ms = std::min(hp.interval_ms, 0.5 * o.budget_ms);
        s.hook.reset(llama_cancel_hook_init(&hp));
    }
    s.base.n_threads   = o.threads;
    s.base.offload_kqv = offloaded;
    return true;
}

// One row per candidate n_ubatch, then the library's budget slicing at the full n_ubatch; the
// table printed as they come.
std::vector<tune_row> measure_rows(const tune_options & o, const tune_setup & s) {
    std::printf("tune: %s on %s, %d-token prefill, budget %.1f ms, %d runs per row (stop at a random 10-90%% point)\n\n",
                o.model.c_str(), s.backend.description.c_str(), o.tokens, o.budget_ms, o.runs);
    std::printf("| n_ubatch | budget    | prefill ms | tok/s    | stop p95 | stop max | stops | finished first "
                "| late | node max | meets |\n");
    std::printf("|---------:|:----------|----------:|---------:|---------:|---------:|------:|--------:|-----:|---------:|:------|\n");
    std::vector<common::stop_config> configs;
    for (int32_t u : candidates(o.tokens)) {
        configs.push_back({u, 0.0f});
    }
    configs.push_back({o.tokens, o.budget_ms});
    std::vector<tune_row> rows;
    for (const common::stop_config & cfg : configs) {
        rows.push_back({cfg, common::measure_stops(s.model.get(), s.base, s.hook.get(), cfg, o.tokens, o.runs, o.seed)});
        print_row(rows.back(), o.budget_ms);
    }
    return rows;
}

void print_recommendation(const tune_row & rec, float budget) {
    std::printf("\nrecommended: n_ubatch %d%s: %.1f tokens/s, worst stop %.2f ms (%s the %.1f ms budget)\n",
                rec.cfg.n_ubatch, rec.cfg.max_stop_ms > 0 ? " with max_stop_ms set" : "", rec.fig.tokens_per_s,
                rec.worst(), rec.meets(budget) ? "within" : "OVER", budget);
}

void plot(const std::string & json) {
    const std::string plotter = common::script_path("plot_tune.py");
    if (common::run_command({"python3", plotter, json}) != 0) {
        std::printf("(no plot: %s needs python3 with matplotlib)\n", plotter.c_str());
    }
}

} // namespace

int tune_main(int argc, char ** argv) {
    tune_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    tune_setup s;
    if (!make_setup(o, s)) {
        return 1;
    }
    const std::vector<tune_row> rows = measure_rows(o, s);
    const tune_row &            rec  = recommend(rows, o.budget_ms);
    print_recommendation(rec, o.budget_ms);
    if (!common::write_json_file(o.json, tune_json(o, rows, rec, s.backend.description))) {
        return 1;
    }
    std::printf("saved %s\n", o.json.c_str());
    plot(o.json);
    return 0;
}
