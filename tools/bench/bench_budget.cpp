#include "bench/bench_budget.h"

#include "common/json.h"
#include "common/stats.h"
#include "common/stop_latency.h"
#include "support.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace bench {

namespace {

// A budget is kept when the worst stop is within it plus the return path (2 ms).
constexpr double k_slack_ms = 2.0;

// One model's budget rows: its path, its label in the table and the JSON, and the run.
struct budget_bench_options {
    std::string        model;
    std::string        label;   // shown in the table and the JSON
    std::vector<float> budgets; // ms
    int                tokens  = 512;
    int                runs    = 10;
    int                threads = k_row_threads;
    uint32_t           seed    = 42;
};

common::json row_json(const budget_bench_options & o, float budget, const common::stop_figures & f, double base_tps,
                      bool met) {
    using common::printed;
    // No run stopped (each finished first or took a late store): no figure, not 0 ms.
    auto figure = [&f](double v) { return f.stop_ms.empty() ? common::json(nullptr) : common::json(printed(v, "%f")); };
    const common::json row = {
        {"model", o.label},
        {"budget_ms", printed(budget)},
        {"tokens", o.tokens},
        {"threads", o.threads},
        {"decode_ms", printed(f.decode_ms, "%.3f")},
        {"tokens_per_s", printed(f.tokens_per_s, "%.2f")},
        {"throughput_vs_none_pct", printed(base_tps > 0 ? 100.0 * (f.tokens_per_s / base_tps - 1.0) : 0.0, "%.2f")},
        {"calls", f.calls},
        {"finished_first", f.finished_first},
        {"late_store", f.late_store},
        {"longest_node_ms", printed(f.longest_node_ms, "%.3f")},
        {"within_budget_plus_2ms", met},
        {"stop_ms",
         {{"p50", figure(common::percentile(f.stop_ms, 0.5))},
          {"p95", figure(common::percentile(f.stop_ms, 0.95))},
          {"max", figure(common::max_of(f.stop_ms))},
          {"all", common::printed_list(f.stop_ms)}}}};
    return common::with_threads_override(row);
}

void print_row(const budget_bench_options & o, float budget, const common::stop_figures & f, double base_tps, bool met) {
    auto fig = [&f](double v) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.2f", v);
        return f.stop_ms.empty() ? std::string("-") : std::string(buf);
    };
    std::printf("| %-12s | %6s | %9.1f | %8.1f | %+7.1f%% | %5d | %8s | %8s | %8s | %5zu | %5d | %4d | %8.2f | %-4s |\n",
                o.label.c_str(), budget > 0 ? std::to_string(static_cast<int>(budget)).c_str() : "none",
                f.decode_ms, f.tokens_per_s, base_tps > 0 ? 100.0 * (f.tokens_per_s / base_tps - 1.0) : 0.0,
                f.calls, fig(common::percentile(f.stop_ms, 0.5)).c_str(), fig(common::percentile(f.stop_ms, 0.95)).c_str(),
                fig(common::max_of(f.stop_ms)).c_str(),
                f.stop_ms.size(), f.finished_first, f.late_store, f.longest_node_ms, budget <= 0 ? "-" : met ? "yes" : "NO");
    std::fflush(stdout);
}

// Prints one table row per budget (and the no-budget baseline) and adds their JSON objects to
// `out`; out.ok is false once a row's worst stop exceeded its budget + 2 ms.
void model_rows(const budget_bench_options & o, section & out) {
    common::model_ptr model = common::load_model(o.model);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", o.model.c_str());
        out.ok = false;
        return;
    }
    common::context_options base;
    base.n_threads = o.threads;
    const common::stop_figures none = common::measure_stops(model.get(), base, nullptr, {o.tokens, 0.0f}, o.tokens, o.runs, o.seed);
    print_row(o, 0.0f, none, none.tokens_per_s, true);
    out.json.push_back(row_json(o, 0.0f, none, none.tokens_per_s, true));
    for (float budget : o.budgets) {
        const common::stop_figures f = common::measure_stops(model.get(), base, nullptr, {o.tokens, budget}, o.tokens, o.runs, o.seed);
        const bool ok = !f.stop_ms.empty() && common::max_of(f.stop_ms) <= budget + k_slack_ms;
        out.ok = out.ok && ok;
        print_row(o, budget, f, none.tokens_per_s, ok);
        out.json.push_back(row_json(o, budget, f, none.tokens_per_s, ok));
    }
}

} // namespace

section budget_rows(const options & opt, bool with_large) {
    section out;
    if (opt.budgets.empty()) {
        return out;
    }
    out.ran = true;
    std::printf("\nstop-time budget (CPU, %d threads, %d-token prefill, n_ubatch 512, %d runs; stop at a random "
                "10-90%% point): throughput against no budget, store-to-return latency\n\n", k_row_threads, 512, opt.runs);
    std::printf("| model        | budget | prefill ms | tok/s    | vs none | calls | stop p50 | stop p95 | stop max "
                "| stops | first | late | node max | met  |\n");
    std::printf("|:-------------|-------:|-----------:|---------:|--------:|------:|---------:|---------:|---------:"
                "|------:|------:|-----:|---------:|:-----|\n");
    std::vector<std::pair<std::string, std::string>> models = {{opt.model, with_large ? "default" : "model"}};
    const std::string large = common::models_cache_dir() + "bench-large.gguf";
    if (with_large && common::ensure_model(common::script_path("make_model.py"), large, "bench", "llama",
                                           {"--n-embd", "1024", "--n-ff", "8192", "--n-layer", "2", "--n-head", "16"})) {
        models.push_back({large, "large"});
    }
    for (const auto & [path, label] : models) {
        budget_bench_options b;
        b.model   = path;
        b.label   = label;
        b.budgets = opt.budgets;
        b.runs    = opt.runs;
        b.seed    = opt.seed;
        model_rows(b, out);
    }
    std::printf("\ntargets (budget): worst stop <= budget + 2 ms in every row: %s\n", out.ok ? "met" : "MISSED (see rows)");
    return out;
}

} // namespace bench
