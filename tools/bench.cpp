// The cancel benchmark: reader overhead, cancel latency, rollback, thread probe and the physical
// floor, on the CPU backend, for each batch size and thread count. Figures are printed as a table
// and saved as JSON; nothing here is a pass/fail timing assertion except the reported targets.
#include "commands.h"
#include "common/args.h"
#include "bench_budget.h"
#include "common/json_child.h"
#include "common/json.h"
#include "common/stats.h"
#include "support.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

extern char ** environ;

namespace {

struct options {
    std::string      model;      // empty: the built-in synthetic model
    std::string      json = "llama-cancel-bench.json";
    std::vector<int> batches = {64, 256, 512};
    std::vector<int> threads = {1, 2};
    std::vector<std::string> backends = {"vulkan", "vulkan-1t", "rpc", "rpc2", "rpc-lan", "rpc2-lan", "blas", "cpu"};
    int              backend_batch = 128;
    bool             mtmd = true; // multimodal rows, where the CLI was built with libmtmd
    // Memory-kind rows: the rollback's cost on a generated bench model of each architecture.
    std::vector<std::string> archs = {"llama", "gemma3", "mamba", "mamba2", "lfm2", "qwen35"};
    std::string              arch_preset = "bench"; // make_model.py preset of those models
    // Stop-time budget rows, ms, on the default model and on a larger one (batch 512).
    std::vector<float>       budgets = {5, 20, 100};
    // Per-sequence cancel rows (4 sequences x 128 tokens): the CPU and one hook backend.
    std::vector<std::string> seq_backends = {"cpu", "rpc1"};
    int              runs = 10;
    uint32_t         seed = 42;
};

const char k_synopsis[] =
    "usage: llama-cancel bench [--model PATH] [--json PATH] [--batches 64,256,512]\n"
    "                          [--threads 1,2] [--runs N] [--seed N]\n"
    "                          [--backends vulkan,vulkan-1t,rpc,rpc2,rpc-lan,rpc2-lan,blas,cpu|none] [--backend-batch 128]\n"
    "                          [--no-mtmd] [--archs llama,gemma3,mamba,mamba2,lfm2,qwen35|none]\n"
    "                          [--arch-preset bench|tiny] [--budgets 5,20,100|none]\n"
    "                          [--seq-backends cpu,rpc1|none]\n"
    "\n"
    "Without --model, generates (once) and uses the built-in synthetic model.\n";

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
    cli_args::parser p(k_synopsis);
    p.option("--model", &opt.model, "PATH", "model to benchmark (default: the built-in synthetic model)")
        .option("--json", &opt.json, "PATH", "where the results go (JSON; a plot beside it)")
        .option("--batches", &opt.batches, "LIST", "batch sizes (>= 2)")
        .option("--threads", &opt.threads, "LIST", "thread counts (>= 1)")
        .option("--runs", &opt.runs, "N", "latency runs per row (>= 1)")
        .option("--seed", &opt.seed, "N", "random seed")
        .option("--backends", &opt.backends, "LIST", "backend rows, each in its own process, or none")
        .option("--backend-batch", &opt.backend_batch, "N", "batch of the backend rows (>= 2)")
        .flag("--no-mtmd", &opt.mtmd, false, "leave out the multimodal rows")
        .option("--archs", &opt.archs, "LIST", "memory-kind rows (architectures), or none")
        .option("--arch-preset", &opt.arch_preset, "NAME", "make_model.py preset of the memory-kind models")
        .option("--budgets", budgets, "LIST", "stop-time budget rows, ms, or none", "5,20,100")
        .option("--seq-backends", &opt.seq_backends, "LIST", "per-sequence cancel rows (cpu, vulkan, rpc1), or none");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    auto any_below = [](const std::vector<int> & v, int min) {
        return v.empty() || std::any_of(v.begin(), v.end(), [min](int x) { return x < min; });
    };
    return p.check({{opt.runs < 1, "--runs must be at least 1"},
                    {any_below(opt.batches, 2), "--batches needs batch sizes of at least 2"},
                    {any_below(opt.threads, 1), "--threads needs thread counts of at least 1"},
                    {opt.backend_batch < 2, "--backend-batch must be at least 2"}});
}

using common::max_of;
using common::now_ms;
using common::percentile;

// Counts reader calls and those not on the thread that called llama_decode; reads the byte through
// the exported reader so the probe measures exactly what hosts register.
struct thread_probe {
    const int8_t *  flag = nullptr;
    std::thread::id owner;
    int64_t         calls      = 0;
    int64_t         off_thread = 0;

    static bool callback(void * data) {
        auto * p = static_cast<thread_probe *>(data);
        p->calls++;
        if (std::this_thread::get_id() != p->owner) {
            p->off_thread++;
        }
        return llama_cancel_abort_callback(const_cast<int8_t *>(p->flag));
    }
};

// Longest single graph node: an eval callback that asks for every node makes the scheduler compute
// one node at a time, so the time between ask and answer is that node's compute time.
struct node_timer {
    double t_ask    = 0.0;
    double longest  = 0.0;
    int    n_nodes  = 0;
    std::string longest_name;

    static bool callback(ggml_tensor * t, bool ask, void * data) {
        auto * nt = static_cast<node_timer *>(data);
        if (ask) {
            nt->t_ask = now_ms();
            return true;
        }
        const double dt = now_ms() - nt->t_ask;
        nt->n_nodes++;
        if (dt > nt->longest) {
            nt->longest      = dt;
            nt->longest_name = ggml_op_desc(t);
        }
        return true;
    }
};

struct row {
    int    batch = 0, threads = 0, runs = 0;
    double decode_ms = 0, overhead_pct = 0, overhead_cpu_pct = 0;
    int    pairs = 0;
    std::vector<double> lat, today;
    int    cancelled = 0, completed_early = 0, completed_late = 0; // late: stored before the return, after the last checkpoint
    double longest_node_ms = 0;
    std::string longest_node_op;
    int    n_nodes = 0;
    int64_t probe_calls = 0, probe_off_thread = 0;
    int    rollback_ubatch = 0;
    llama_pos rollback_pos_max = -2;
    int    rollback_status = 0;
    bool   rollback_ok = false;
};

class cpu_bench {
  public:
    cpu_bench(const options & opt, llama_model * model) : opt_(opt), model_(model), rng_(opt.seed) {}

    row run(int batch, int threads, int step, int n_steps) {
        row r;
        r.batch   = batch;
        r.threads = threads;
        r.runs    = opt_.runs;
        prompt_   = common::make_prompt(model_, batch, opt_.seed);

        auto ctx = make_ctx(batch, batch, threads);
        if (!ctx) {
            std::fprintf(stderr, "error: cannot create a context for batch %d\n", batch);
            std::exit(1);
        }
        decode_plain(ctx.get()); // warm-up: first-use allocations and page faults

        progress(step, n_steps, batch, threads, "overhead");
        overhead(ctx.get(), r);
        progress(step, n_steps, batch, threads, "cancel latency");
        latency(ctx.get(), r);
        progress(step, n_steps, batch, threads, "rollback");
        rollback(batch, threads, r);
        progress(step, n_steps, batch, threads, "thread probe");
        probe(ctx.get(), r);
        progress(step, n_steps, batch, threads, "node profile");
        profile(batch, threads, r);
        return r;
    }

  private:
    const options & opt_;
    llama_model *   model_;
    std::mt19937    rng_;
    std::vector<llama_token> prompt_;

    static void progress(int step, int n_steps, int batch, int threads, const char * what) {
        std::fprintf(stderr, "[%d/%d] batch %3d, threads %d: %s\n", step, n_steps, batch, threads, what);
    }

    common::context_ptr make_ctx(int batch, int ubatch, int threads, ggml_backend_sched_eval_callback cb = nullptr,
                              void * cb_data = nullptr) {
        common::context_options o;
        o.n_ctx        = static_cast<uint32_t>(std::max(batch, 256));
        o.n_batch      = batch;
        o.n_ubatch     = ubatch;
        o.n_threads    = threads;
        o.cb_eval      = cb;
        o.cb_eval_data = cb_data;
        return common::make_context(model_, o);
    }

    // Decodes the prompt from an empty memory with no abort callback: what hosts run today.
    double decode_plain(llama_context * ctx) {
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
        const double t0 = now_ms();
        const int32_t ret = llama_decode(ctx, b.get());
        const double t1 = now_ms();
        if (ret != 0) {
            std::fprintf(stderr, "error: llama_decode returned %d\n", ret);
            std::exit(1);
        }
        return t1 - t0;
    }

    // Decodes through llama_cancel_decode (the reader registered) with the byte at `flag`.
    int32_t decode_cancellable(llama_context * ctx, const int8_t * flag, double * t_ret = nullptr) {
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.flag = flag;
        const int32_t status = llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr, 0);
        if (t_ret != nullptr) {
            *t_ret = now_ms();
        }
        return status;
    }

    // Process CPU time in ms: unlike wall time, it does not count the moments another process
    // holds the cores, the main noise of a shared machine.
    static double cpu_ms() {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    }

    void overhead(llama_context * ctx, row & r) {
        std::vector<double> ratios, cpu_ratios, plain;
        const int8_t zero = 0;
        // A ratio near 1 needs more pairs than latency runs to rise above the machine's noise:
        // 2 x runs, and at least 3 s of decoding for the short batches.
        const double first = decode_plain(ctx);
        const int pairs = std::max(2 * opt_.runs, static_cast<int>(3000.0 / std::max(first, 1.0)));
        for (int i = 0; i < pairs; ++i) {
            double t_plain = 0, t_reader = 0, c_plain = 0, c_reader = 0;
            // Alternate the order inside each pair so drift does not favour one side.
            for (int k = 0; k < 2; ++k) {
                const double c0 = cpu_ms();
                if ((i + k) % 2 == 0) {
                    t_plain = decode_plain(ctx);
                    c_plain = cpu_ms() - c0;
                } else {
                    const double t0 = now_ms();
                    decode_cancellable(ctx, &zero);
                    t_reader = now_ms() - t0;
                    c_reader = cpu_ms() - c0;
                }
            }
            ratios.push_back(t_reader / t_plain);
            cpu_ratios.push_back(c_reader / c_plain);
            plain.push_back(t_plain);
        }
        r.pairs            = pairs;
        r.decode_ms        = percentile(plain, 0.5);
        r.overhead_pct     = (percentile(ratios, 0.5) - 1.0) * 100.0;
        r.overhead_cpu_pct = (percentile(cpu_ratios, 0.5) - 1.0) * 100.0;
    }

    void latency(llama_context * ctx, row & r) {
        std::uniform_real_distribution<double> point(0.30, 0.66);
        for (int i = 0; i < opt_.runs; ++i) {
            const double frac = point(rng_);
            // With the reader: the decode stops.
            {
                int8_t flag = 0;
                double t_store = 0, t_ret = 0;
                const double t0 = now_ms();
                std::thread writer = common::store_at(&flag, t0 + frac * r.decode_ms, &t_store);
                const int32_t status = decode_cancellable(ctx, &flag, &t_ret);
                writer.join();
                switch (common::classify_store(status == LLAMA_CANCEL_CANCELLED, t_store, t_ret)) {
                    case common::store_outcome::stopped:
                        r.cancelled++;
                        r.lat.push_back(t_ret - t_store);
                        break;
                    case common::store_outcome::finished_first: r.completed_early++; break;
                    case common::store_outcome::late:           r.completed_late++; break;
                }
            }
            // Today, without the reader: the host sees the byte only when llama_decode returns.
            {
                int8_t flag = 0;
                double t_store = 0;
                llama_memory_clear(llama_get_memory(ctx), true);
                common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
                const double t0 = now_ms();
                std::thread writer = common::store_at(&flag, t0 + frac * r.decode_ms, &t_store);
                llama_decode(ctx, b.get());
                const double t_ret = now_ms();
                writer.join();
                r.today.push_back(std::max(0.0, t_ret - t_store));
            }
        }
    }

    // n_ubatch at half the batch, byte stored at 80% of the decode: only the first ubatch may remain.
    // 80% is counted in graph nodes (a first pass counts them), so that the store cannot miss the
    // decode on a noisy machine; the byte is stored from the decode thread's own abort callback.
    void rollback(int batch, int threads, row & r) {
        r.rollback_ubatch = batch / 2;
        auto ctx = make_ctx(batch, r.rollback_ubatch, threads);
        int8_t flag = 0;
        common::node_trigger trig;
        trig.flag = &flag;
        auto decode = [&] {
            llama_memory_clear(llama_get_memory(ctx.get()), true);
            common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
            llama_cancel_decode_params p = llama_cancel_decode_default_params();
            p.flag                = &flag;
            p.abort_callback      = common::node_trigger::abort_cb;
            p.abort_callback_data = &trig;
            return llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr, 0);
        };
        decode();
        trig.at    = trig.calls * 8 / 10;
        trig.calls = 0;
        r.rollback_status  = decode();
        r.rollback_pos_max = llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0);
        r.rollback_ok = r.rollback_status == LLAMA_CANCEL_CANCELLED && r.rollback_pos_max == r.rollback_ubatch - 1;
    }

    void probe(llama_context * ctx, row & r) {
        int8_t flag = 0;
        thread_probe p;
        p.flag  = &flag;
        p.owner = std::this_thread::get_id();
        llama_set_abort_callback(ctx, thread_probe::callback, &p);
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
        llama_decode(ctx, b.get());
        llama_set_abort_callback(ctx, nullptr, nullptr);
        r.probe_calls      = p.calls;
        r.probe_off_thread = p.off_thread;
    }

    void profile(int batch, int threads, row & r) {
        node_timer nt;
        auto ctx = make_ctx(batch, batch, threads, node_timer::callback, &nt);
        decode_plain(ctx.get());
        nt = node_timer{};
        decode_plain(ctx.get());
        r.longest_node_ms = nt.longest;
        r.longest_node_op = nt.longest_name;
        r.n_nodes         = nt.n_nodes;
    }
};

// The delay the rpc-lan rows' proxies add each way (support.cpp reads the same variable).
std::string lan_delay_ms() {
    const char * v = std::getenv("LLAMA_CANCEL_RPC_DELAY_MS");
    return v != nullptr && *v != 0 ? v : "0.5";
}

// This process's environment for a child; for vulkan-1t with llvmpipe on one thread
// (LP_NUM_THREADS=1 in place of any value it has here).
std::vector<std::string> child_environment(const std::string & backend) {
    std::vector<std::string> env;
    const bool one_thread = backend == "vulkan-1t";
    for (char ** e = environ; *e != nullptr; ++e) {
        if (!one_thread || std::strncmp(*e, "LP_NUM_THREADS=", 15) != 0) {
            env.emplace_back(*e);
        }
    }
    if (one_thread) {
        env.emplace_back("LP_NUM_THREADS=1");
    }
    return env;
}

// Runs this executable again with `args`, for vulkan-1t with llvmpipe on one thread. Returns the
// exit code (127 when it cannot be started, -1 when this executable's path cannot be read).
int run_self(const std::vector<std::string> & args, const std::string & backend) {
    std::vector<std::string> argv = {common::executable_path()};
    if (argv[0].empty()) {
        return -1;
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return common::run_command(argv, child_environment(backend));
}

// Where the generated models live: the user's cache folder, never beside the executable.
std::string models_dir() {
    return common::models_cache_dir();
}

// Memory-kind rows, each in its own process, on the generated bench model of each architecture
// (written once into `dir`). Returns their JSON objects; *ok is false when a rollback was not exact.
std::vector<common::json> memory_rows(const options & opt, const std::string & dir, bool * ok) {
    std::vector<common::json> out;
    *ok = true;
    if (opt.archs.empty()) {
        return out;
    }
    std::printf("\nmemory kinds (CPU, %d threads): batch 256 after 64 tokens, n_ubatch 64; llama_cancel_decode with "
                "the byte at 0 against plain llama_decode, median paired ratio [min, max] of %d pairs; the snapshot "
                "share is its measured copy time per slice (per token) over the decode\n\n", 2, opt.runs);
    std::printf("| arch    | memory    | snap bytes | copy ms | restore ms | prefill ms | snap share | sliced overhead "
                "| whole overhead | token ms | snap share | token overhead | committed | exact |\n");
    std::printf("|:--------|:----------|-----------:|--------:|-----------:|-----------:|-----------:|----------------:"
                "|---------------:|---------:|-----------:|---------------:|----------:|:------|\n");
    std::fflush(stdout);
    for (const std::string & arch : opt.archs) {
        const std::string model = dir + opt.arch_preset + (arch == "llama" ? "" : "-" + arch) + ".gguf";
        const std::string tmp   = opt.json + ".memory-" + arch + ".tmp";
        std::remove(tmp.c_str());
        int rc = common::ensure_model(common::script_path("make_model.py"), model, opt.arch_preset, arch) ? 0 : 1;
        if (rc == 0) {
            rc = run_self({"bench-memory", "--model", model, "--runs", std::to_string(std::max(opt.runs, 3)), "--json",
                           tmp}, "");
        }
        common::child_json j = common::take_child_json(tmp);
        if (!j.ok()) {
            std::printf("| %-7s | skipped: the row failed (exit %d), see the messages above |\n", arch.c_str(), rc);
            j.doc = {{"arch", arch}, {"error", "exit " + std::to_string(rc)}};
        }
        *ok = *ok && rc == 0 && j.is_true({"rollback_exact"});
        out.push_back(std::move(j.doc));
    }
    std::printf("\ntargets (memory kinds): rollback exact on every row: %s\n", *ok ? "met" : "MISSED (see rows)");
    return out;
}

// Budget rows on the model benchmarked and on a larger generated one whose longest node at batch
// 512 is several times the middle budget.
std::vector<common::json> budget_rows(const options & opt, bool with_large, bool * ok) {
    std::vector<common::json> out;
    *ok = true;
    if (opt.budgets.empty()) {
        return out;
    }
    std::printf("\nstop-time budget (CPU, 2 threads, %d-token prefill, n_ubatch 512, %d runs; stop at a random "
                "10-90%% point): throughput against no budget, store-to-return latency\n\n", 512, opt.runs);
    std::printf("| model        | budget | prefill ms | tok/s    | vs none | calls | stop p50 | stop p95 | stop max "
                "| stops | first | late | node max | met  |\n");
    std::printf("|:-------------|-------:|-----------:|---------:|--------:|------:|---------:|---------:|---------:"
                "|------:|------:|-----:|---------:|:-----|\n");
    std::vector<std::pair<std::string, std::string>> models = {{opt.model, with_large ? "default" : "model"}};
    const std::string large = models_dir() + "bench-large.gguf";
    if (with_large && common::ensure_model(common::script_path("make_model.py"), large, "bench", "llama",
                                        {"--n-embd", "1024", "--n-ff", "8192", "--n-layer", "2", "--n-head", "16"})) {
        models.push_back({large, "large"});
    }
    for (const auto & [path, label] : models) {
        bench::budget_bench_options b;
        b.model   = path;
        b.label   = label;
        b.budgets = opt.budgets;
        b.runs    = opt.runs;
        b.seed    = opt.seed;
        bool met  = true;
        for (common::json & j : bench::budget_rows(b, &met)) {
            out.push_back(std::move(j));
        }
        *ok = *ok && met;
    }
    std::printf("\ntargets (budget): worst stop <= budget + 2 ms in every row: %s\n", *ok ? "met" : "MISSED (see rows)");
    return out;
}

// Per-sequence cancel rows (bench-seq), one child process per backend and ubatch size: the batch as
// one ubatch, and as four (a stop then keeps the finished ones).
std::vector<common::json> seq_rows(const options & opt, bool * ok) {
    std::vector<common::json> out;
    *ok = true;
    if (opt.seq_backends.empty()) {
        return out;
    }
    std::printf("\nper-sequence cancel (4 sequences x 128 tokens in one batch, n_ubatch 512 and 128, %d runs): one "
                "sequence's byte stored at a random 20-80%% point: its stop (store to the sequence dropped) beside one "
                "sequence alone (store to return), the survivors' extra time against the batch without a cancel; "
                "all four stored at once: store to return\n\n", opt.runs);
    std::fflush(stdout);
    bool header = true;
    for (const std::string & name : opt.seq_backends) {
        for (const int n_ubatch : {512, 128}) {
            const std::string tmp = opt.json + ".seq-" + name + "-" + std::to_string(n_ubatch) + ".tmp";
            std::remove(tmp.c_str());
            std::vector<std::string> args = {"bench-seq", "--model", opt.model, "--backend", name, "--runs",
                                             std::to_string(opt.runs), "--seed", std::to_string(opt.seed),
                                             "--n-ubatch", std::to_string(n_ubatch), "--json", tmp};
            if (!header) {
                args.push_back("--no-header");
            }
            const int rc = run_self(args, name);
            common::child_json j = common::take_child_json(tmp);
            if (!j.ok()) {
                std::printf("| %s | %d | skipped: the row failed (exit %d), see the messages above |\n", name.c_str(),
                            n_ubatch, rc);
                j.doc = {{"backend", name}, {"n_ubatch", n_ubatch}, {"error", "exit " + std::to_string(rc)}};
            } else {
                header = false;
            }
            *ok = *ok && rc == 0 && j.is_true({"extra_le_ubatch_plus_5pct"}) && j.is_true({"stop_within_single"});
            out.push_back(std::move(j.doc));
        }
    }
    std::printf("\ntargets (per-sequence): the cancelled sequence's stop within one sequence's, survivors' extra time "
                "<= the ubatch in flight + 5%%, logits exact: %s\n", *ok ? "met" : "MISSED (see rows)");
    return out;
}

// The CPU rows' targets, read off the table.
struct cpu_targets {
    bool overhead = true, latency = true, thread = true, rollback = true, all_cancelled = true;
};

// One section of rows run in child processes: their JSON objects and whether their targets were met
// through the hook and through the stateless callback.
struct child_rows {
    std::vector<common::json> json;
    bool                     ok = true, stateless_ok = true;
};

// A child process's row: how it is named in the table and the JSON, and its latency target's key
// (the stateless callback's is the same with "stateless_" in front).
struct child_row_label {
    const char *      key;   // "backend", "kind"
    std::string       name;
    int               width; // of the table's first column
    const char *      latency_target;
};

// Adds one child's JSON to `out` and folds its hook and stateless targets in; a child that failed
// (exit `rc`, or no JSON object) gets a "skipped" table line, an error entry, and misses both.
void add_child_row(child_rows & out, common::child_json j, int rc, const child_row_label & l) {
    if (rc != 0 || !j.ok()) {
        std::printf("| %-*s | skipped: the setup failed (exit %d), see the messages above |\n", l.width,
                    l.name.c_str(), rc);
        j.doc = {{l.key, l.name}, {"error", "setup failed, exit " + std::to_string(rc)}};
        out.ok           = false;
        out.stateless_ok = false;
    } else {
        const std::string stateless = std::string("stateless_") + l.latency_target;
        out.ok = out.ok && j.is_true({"targets", l.latency_target}) && j.is_true({"targets", "overhead_le_3pct"});
        out.stateless_ok = out.stateless_ok && j.is_true({"targets", stateless.c_str()}) &&
                           j.is_true({"targets", "stateless_overhead_le_3pct"});
    }
    out.json.push_back(std::move(j.doc));
}

// What the JSON file holds beside the options.
struct bench_report {
    std::string              desc;
    uint64_t                 n_params = 0;
    bool                     threads_overridden = false;
    int                      threads_override   = 0;
    std::vector<row>         rows;
    cpu_targets              cpu;
    child_rows               backends, mtmd;
    std::vector<common::json> memory, budgets, seq;
    bool                     memory_ok = true, budget_ok = true, seq_ok = true;
};

// Without --model, the built-in synthetic model (generated once); false when it cannot be made.
bool ensure_default_model(options & opt) {
    if (!opt.model.empty()) {
        return true;
    }
    opt.model = models_dir() + "bench.gguf";
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
    rep.desc     = desc;
    rep.n_params = llama_model_n_params(model.get());
    std::fprintf(stderr, "model: %s (%s, %.1f M parameters), CPU backend, %u cores\n", opt.model.c_str(), desc,
                 rep.n_params / 1e6, std::thread::hardware_concurrency());
    return model;
}

// LLAMA_CANCEL_THREADS replaces every context's thread count: said on stderr, kept for the JSON.
void report_threads_override(bench_report & rep) {
    rep.threads_overridden = cli_args::threads_override(&rep.threads_override);
    if (rep.threads_overridden) {
        std::fprintf(stderr, "note: LLAMA_CANCEL_THREADS is set: every context runs %d thread(s), whatever the "
                             "thread counts printed below say\n", rep.threads_override);
    }
}

// One row per batch size and thread count.
std::vector<row> measure_cpu_rows(const options & opt, llama_model * model) {
    cpu_bench b(opt, model);
    std::vector<row> rows;
    const int n_steps = static_cast<int>(opt.batches.size() * opt.threads.size());
    for (int batch : opt.batches) {
        for (int threads : opt.threads) {
            rows.push_back(b.run(batch, threads, static_cast<int>(rows.size()) + 1, n_steps));
        }
    }
    return rows;
}

// The CPU table (llama-bench style), the rollback lines and the targets line.
cpu_targets print_cpu_rows(const std::vector<row> & rows) {
    std::printf("\n| batch | threads | decode ms | reader overhead | (CPU time) | cancel p50 ms | p95 ms | max ms "
                "| today p50 ms | today/ours | longest node ms | max/node | cancelled | off-thread |\n");
    std::printf("|------:|--------:|----------:|----------------:|-----------:|--------------:|-------:|-------:"
                "|-------------:|-----------:|----------------:|---------:|----------:|-----------:|\n");
    cpu_targets t;
    for (const row & r : rows) {
        const double p50 = percentile(r.lat, 0.5), today50 = percentile(r.today, 0.5), mx = max_of(r.lat);
        std::printf("| %5d | %7d | %9.2f | %14.2f%% | %9.2f%% | %13.3f | %6.3f | %6.3f | %12.2f | %9.0fx | %15.3f "
                    "| %8.2f | %5d/%-3d | %10" PRId64 " |\n",
                    r.batch, r.threads, r.decode_ms, r.overhead_pct, r.overhead_cpu_pct, p50, percentile(r.lat, 0.95), mx, today50,
                    p50 > 0 ? today50 / p50 : 0.0, r.longest_node_ms, r.longest_node_ms > 0 ? mx / r.longest_node_ms : 0.0,
                    r.cancelled, r.runs, r.probe_off_thread);
        t.overhead      = t.overhead && r.overhead_pct <= 1.0;
        t.latency       = t.latency && mx <= 2.0 * r.longest_node_ms + 1.0;
        t.thread        = t.thread && r.probe_off_thread == 0;
        t.rollback      = t.rollback && r.rollback_ok;
        t.all_cancelled = t.all_cancelled && r.cancelled == r.runs;
    }
    std::printf("\nrollback (n_ubatch = batch/2, byte stored at 80%% of the decode's graph nodes):\n");
    for (const row & r : rows) {
        std::printf("  batch %3d threads %d: status %s, seq_pos_max %d (first ubatch ends at %d): %s\n", r.batch,
                    r.threads, llama_cancel_status_str(r.rollback_status), r.rollback_pos_max, r.rollback_ubatch - 1,
                    r.rollback_ok ? "ok" : "MISMATCH");
    }
    std::printf("\ntargets: reader overhead <= 1%%: %s; worst latency <= 2x longest node + 1 ms: %s; "
                "off-thread calls 0: %s; every cancelled run returned 2: %s; rollback: %s\n",
                t.overhead ? "met" : "MISSED", t.latency ? "met" : "MISSED", t.thread ? "met" : "MISSED",
                t.all_cancelled ? "yes" : "NO", t.rollback ? "ok" : "MISMATCH");
    return t;
}

void print_backend_header() {
    std::printf("\nbackends: upstream's abort callback alone, llama-cancel's hook (llama_cancel_decode) and the "
                "stateless eval callback by name (beside the abort callback), byte stored at a random 30-66%% "
                "point; latency over the runs the store reached before the decode returned, %% of the abort "
                "callback's p50; overhead with the byte at 0 (median paired ratio, and the pairs' range); the "
                "hook's interval in force and a checkpoint's measured round trip, ms (rpc-lan, rpc2-lan: "
                "servers behind a %s ms delay each way)\n\n", lan_delay_ms().c_str());
    std::printf("| backend   | method         | batch | threads | decode ms |   p50 ms |   p95 ms |   max ms "
                "| %% of abort | overhead (min..max)    | checkpoints | interval (rt) | stopped   | finished first "
                "| thread CPU ms | of wall | process CPU ms |\n");
    std::printf("|:----------|:---------------|------:|--------:|----------:|---------:|---------:|---------:"
                "|-----------:|-----------------------:|------------:|--------------:|----------:|---------------:"
                "|--------------:|--------:|---------------:|\n");
    std::fflush(stdout);
}

// Backend rows, each in its own process (bench-backend NAME) with exactly its backends loaded.
child_rows backend_rows(const options & opt) {
    child_rows out;
    if (opt.backends.empty()) {
        return out;
    }
    print_backend_header();
    for (const std::string & name : opt.backends) {
        const std::string tmp = opt.json + "." + name + ".tmp";
        std::remove(tmp.c_str());
        const int rc = run_self({"bench-backend", name, "--model", opt.model, "--runs", std::to_string(opt.runs),
                                 "--batch", std::to_string(opt.backend_batch), "--threads", "2", "--seed",
                                 std::to_string(opt.seed), "--json", tmp},
                                name);
        add_child_row(out, common::take_child_json(tmp), rc, {"backend", name, 9, "latency_le_10pct_of_abort"});
    }
    std::printf("\ntargets (backends): p50 <= 10%% of the abort callback's, overhead <= 3%%: hook %s, "
                "stateless %s\n",
                out.ok ? "met" : "MISSED (see rows)", out.stateless_ok ? "met" : "MISSED (see rows)");
    return out;
}

#ifdef LLAMA_CANCEL_HAVE_MTMD
void print_mtmd_header() {
    std::printf("\nmultimodal (mtmd, CPU): byte stored at a random 30-66%% point of the clip encode (through "
                "the hook, or the stateless eval callback by name) or of the embedding decode; without = a host "
                "polling between native calls; latency over the runs the store reached before the return, %% "
                "of the full encode or decode; overhead with the byte at 0 (median paired ratio)\n\n");
    std::printf("| kind   | path              | tokens |   full ms | without p50 ms |   p50 ms |   p95 ms "
                "|   max ms |    %% of full | overhead  | stopped   | finished first (ours/without) |\n");
    std::printf("|:-------|:------------------|-------:|----------:|---------------:|---------:|---------:"
                "|---------:|-------------:|----------:|----------:|------------------------------:|\n");
    std::fflush(stdout);
}

// One multimodal row in its own process (bench-mtmd KIND), its projector generated once beside the model.
int run_mtmd_row(const options & opt, int n_embd, const char * kind, const std::string & tmp) {
    const std::string dir    = opt.model.substr(0, opt.model.find_last_of('/') + 1);
    const std::string mmproj = dir + "mmproj-" + kind + "-small-" + std::to_string(n_embd) + ".gguf";
    int rc = 0;
    if (access(mmproj.c_str(), R_OK) != 0) {
        rc = common::run_command({"python3", common::script_path("make_mmproj.py"), mmproj, "--kind", kind, "--preset",
                               "small", "--n-embd-text", std::to_string(n_embd)});
    }
    if (rc == 0) {
        rc = run_self({"bench-mtmd", kind, "--model", opt.model, "--mmproj", mmproj, "--runs",
                       std::to_string(opt.runs), "--seed", std::to_string(opt.seed), "--json", tmp},
                      "");
    }
    return rc;
}
#endif

// Multimodal rows: clip encodes (vision, audio) of synthetic projectors sized to the text model.
child_rows mtmd_rows(const options & opt, const llama_model * model) {
    child_rows out;
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (!opt.mtmd) {
        return out;
    }
    print_mtmd_header();
    for (const char * kind : {"vision", "audio"}) {
        const std::string tmp = opt.json + ".mtmd-" + kind + ".tmp";
        std::remove(tmp.c_str());
        const int rc = run_mtmd_row(opt, llama_model_n_embd(model), kind, tmp);
        add_child_row(out, common::take_child_json(tmp), rc, {"kind", kind, 6, "latency_le_10pct_of_encode"});
    }
    std::printf("\ntargets (mtmd): encode cancel p50 <= 10%% of the encode, overhead <= 3%%: hook %s, "
                "stateless %s\n",
                out.ok ? "met" : "MISSED (see rows)", out.stateless_ok ? "met" : "MISSED (see rows)");
#else
    (void) opt;
    (void) model;
#endif
    return out;
}

// One CPU row as the file has always had it.
common::json cpu_row_json(const row & r) {
    using common::printed;
    const double p50 = percentile(r.lat, 0.5), today50 = percentile(r.today, 0.5);
    return {{"batch", r.batch},
            {"threads", r.threads},
            {"decode_ms", printed(r.decode_ms)},
            {"reader_overhead_pct", printed(r.overhead_pct)},
            {"reader_overhead_cpu_time_pct", printed(r.overhead_cpu_pct)},
            {"overhead_pairs", r.pairs},
            {"cancel_ms",
             {{"p50", printed(p50)},
              {"p95", printed(percentile(r.lat, 0.95))},
              {"max", printed(max_of(r.lat))},
              {"all", common::printed_list(r.lat)}}},
            {"today_ms", {{"p50", printed(today50)}, {"all", common::printed_list(r.today)}}},
            {"today_over_ours", printed(p50 > 0 ? today50 / p50 : 0.0)},
            {"cancelled", r.cancelled},
            {"completed_before_store", r.completed_early},
            {"completed_after_store", r.completed_late},
            {"longest_node_ms", printed(r.longest_node_ms)},
            {"longest_node_op", r.longest_node_op},
            {"n_nodes", r.n_nodes},
            {"worst_over_node", printed(r.longest_node_ms > 0 ? max_of(r.lat) / r.longest_node_ms : 0.0)},
            {"reader_calls", r.probe_calls},
            {"off_thread_calls", r.probe_off_thread},
            {"rollback",
             {{"n_ubatch", r.rollback_ubatch},
              {"status", llama_cancel_status_str(r.rollback_status)},
              {"seq_pos_max", r.rollback_pos_max},
              {"expected_pos_max", r.rollback_ubatch - 1},
              {"ok", r.rollback_ok}}}};
}

// The whole file: the model and the run, the CPU rows and their targets, then each section's rows
// (the child processes' objects as they wrote them, or their error entries) and its targets.
common::json bench_json(const options & opt, const bench_report & rep) {
    common::json js;
    js["model"] = {{"path", opt.model}, {"desc", rep.desc}, {"n_params", rep.n_params}};
    js["backend"] = "CPU";
    js["cores"]   = std::thread::hardware_concurrency();
    js["runs"]    = opt.runs;
    js["seed"]    = opt.seed;
    if (rep.threads_overridden) {
        js["threads_override"] = rep.threads_override;
    }
    js["targets"] = {{"overhead_le_1pct", rep.cpu.overhead},
                     {"worst_latency_le_2x_node_plus_1ms", rep.cpu.latency},
                     {"zero_off_thread", rep.cpu.thread},
                     {"all_cancelled_returned_2", rep.cpu.all_cancelled},
                     {"rollback_ok", rep.cpu.rollback}};
    js["rows"] = common::json::array();
    for (const row & r : rep.rows) {
        js["rows"].push_back(cpu_row_json(r));
    }
    js["backends"]                       = rep.backends.json;
    js["backends_targets_met"]           = rep.backends.ok;
    js["backends_stateless_targets_met"] = rep.backends.stateless_ok;
    js["mtmd"]                           = rep.mtmd.json;
    js["mtmd_targets_met"]               = rep.mtmd.ok;
    js["mtmd_stateless_targets_met"]     = rep.mtmd.stateless_ok;
    js["memory_kinds"]                   = rep.memory;
    js["memory_rollback_exact"]          = rep.memory_ok;
    js["budgets"]                        = rep.budgets;
    js["budget_targets_met"]             = rep.budget_ok;
    js["seq"]                            = rep.seq;
    js["seq_targets_met"]                = rep.seq_ok;
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
    bench_report rep;
    common::model_ptr model = load_bench_model(opt, rep);
    if (!model) {
        return 1;
    }
    report_threads_override(rep);

    rep.rows     = measure_cpu_rows(opt, model.get());
    rep.cpu      = print_cpu_rows(rep.rows);
    rep.backends = backend_rows(opt);
    rep.mtmd     = mtmd_rows(opt, model.get());
    rep.memory   = memory_rows(opt, models_dir(), &rep.memory_ok);
    rep.budgets  = budget_rows(opt, builtin_model, &rep.budget_ok);
    rep.seq      = seq_rows(opt, &rep.seq_ok);

    if (!write_bench_json(opt, rep)) {
        return 1;
    }
    plot(opt.json);
    return 0;
}
