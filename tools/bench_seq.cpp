// `llama-cancel bench-seq`: what a per-sequence cancel (llama_cancel_decode_params.seq_flags) costs
// the other sequences of a shared batch, and how fast a batch whose every sequence is cancelled
// returns. One context (n_seq_max 4, n_batch = n_ubatch = 512) decodes 4 sequences x 128 tokens,
// one after another, each asking for its last token's output, the way a server batches its slots.
//
// Per run: (a) plain: the batch with seq_flags set, no byte stored: T0. (b) single: one random
// sequence's byte stored at a random 20-80% of T0's median; the call is rolled back and the other
// three are decoded again: the survivors' extra time is T1 - median(T0). As n_ubatch holds the whole
// batch, the ubatch in flight is the whole plain decode: the target is extra <= plain + 5%.
// (c) all: the 4 sequences' bytes stored at once at such a point: store-to-return latency.
// Runs whose decode returned before the store are counted apart ("finished first"), never as 0 ms.
#include "commands.h"
#include "args.h"
#include "bench_util.h"
#include "seq_batch.h"
#include "support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int k_seqs = 4;
constexpr int k_len  = 128;

struct seq_options {
    std::string model;
    std::string backend    = "cpu";
    std::string json;
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         runs    = 10;
    int         threads = 2;
    uint32_t    seed    = 42;
    bool        header  = true;
};

// The model, its context (hooked off the CPU) and the 4 prompts.
struct bench_setup {
    common::backend_setup                    setup;
    common::model_ptr                        model;
    common::hook_ptr                         hook;
    common::context_ptr                      ctx;
    std::vector<std::vector<llama_token>> prompts;
    bool                                  cpu = true;

    bool make(const seq_options & o) {
        if (!common::setup_backend(o.backend, o.rpc_server, o.threads, setup)) {
            return false;
        }
        model = setup.load(o.model, -1);
        if (!model) {
            std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.backend.c_str());
            return false;
        }
        cpu = setup.devices.empty();
        common::context_options opt;
        opt.n_ctx       = 1024;
        opt.n_batch     = 512;
        opt.n_ubatch    = 512;
        opt.n_threads   = o.threads;
        opt.n_seq_max   = k_seqs;
        opt.offload_kqv = !cpu;
        if (!cpu) { // off the CPU the abort callback is not called: the hook sees the bytes
            hook             = common::make_hook();
            opt.cb_eval      = llama_cancel_hook_eval_callback;
            opt.cb_eval_data = hook.get();
        }
        ctx = common::make_context(model.get(), opt);
        for (int s = 0; s < k_seqs; ++s) {
            prompts.push_back(common::make_prompt(model.get(), k_len, o.seed + 100 + s));
        }
        return ctx != nullptr;
    }
};

struct outcome {
    int32_t status         = LLAMA_CANCEL_OK;
    double  ms             = 0.0; // whole decode
    double  after_store_ms = 0.0; // from the store to the return
    bool    finished_first = false;
    int32_t n_cancelled    = 0;
};

// One decode from empty memory; with `store` another thread stores it at `at_ms` after the start.
outcome decode(bench_setup & b, common::seq_bytes & sb, int8_t * store, double at_ms) {
    llama_memory_clear(llama_get_memory(b.ctx.get()), true);
    common::multi_seq_batch batch(b.prompts, k_len);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook = b.hook.get();
    sb.fill(p);
    llama_cancel_decode_result r;
    double       t_store = 0;
    const double t0      = common::now_ms();
    std::thread  writer;
    if (store != nullptr) {
        writer = common::store_at(store, t0 + at_ms, &t_store);
    }
    outcome o;
    o.status = llama_cancel_decode(b.ctx.get(), batch.get(), &p, &r, nullptr, 0);
    llama_synchronize(b.ctx.get()); // GPU-API backends compute asynchronously
    const double t_ret = common::now_ms();
    o.ms          = t_ret - t0;
    o.n_cancelled = r.n_seq_cancelled;
    if (writer.joinable()) {
        writer.join();
        o.after_store_ms = t_ret - t_store;
        o.finished_first = t_store >= t_ret;
    }
    if (o.status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: decode failed: %s\n", r.message);
    }
    return o;
}

// Survivors' last logits against the plain run's: mismatching sequences (bit for bit) and the
// largest absolute difference.
struct logit_check {
    int    compared   = 0;
    int    mismatches = 0;
    double max_abs    = 0.0;

    void add(const std::vector<float> & got, const std::vector<float> & want, int run, int seq) {
        ++compared;
        if (got.size() != want.size()) {
            ++mismatches;
            std::fprintf(stderr, "  run %d sequence %d: no logits\n", run, seq);
            return;
        }
        double d = 0.0;
        for (size_t i = 0; i < got.size(); ++i) {
            d = std::max(d, static_cast<double>(std::fabs(got[i] - want[i])));
        }
        max_abs = std::max(max_abs, d);
        if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
            ++mismatches;
            std::fprintf(stderr, "  run %d sequence %d: logits differ from the plain run's (max |diff| %g)\n", run,
                         seq, d);
        }
    }
};

struct bench_results {
    std::vector<double> plain_ms;
    std::vector<double> single_ms;           // T1 of the runs the byte stopped
    std::vector<double> extra_ms, extra_pct; // T1 - median(T0), filled by finish()
    int                 single_cancelled = 0, single_first = 0, single_missed = 0;
    common::latencies      all;
    int                 all_missed = 0; // the store came before the return, yet the call was not cancelled
    logit_check         logits;
    double plain_p50() const { return common::percentile(plain_ms, 0.5); }
};

std::vector<std::vector<float>> plain_logits(bench_setup & b, const common::seq_bytes & sb) {
    std::vector<std::vector<float>> out;
    for (int s = 0; s < k_seqs; ++s) {
        out.push_back(common::logits_at(b.ctx.get(), b.model.get(), sb.output[s]));
    }
    return out;
}

// (b): one random sequence's byte; the survivors' extra time and their logits.
void single_run(bench_setup & b, bench_results & r, std::mt19937 & rng, int run,
                const std::vector<std::vector<float>> & want) {
    common::seq_bytes sb(k_seqs);
    const int    seq  = std::uniform_int_distribution<int>(0, k_seqs - 1)(rng);
    const double frac = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    const outcome o   = decode(b, sb, &sb.bytes[seq], frac * r.plain_p50());
    std::fprintf(stderr, "  run %d single: sequence %d at %.0f%%: %.1f ms, status %d, %d dropped%s\n", run, seq,
                 100 * frac, o.ms, o.status, o.n_cancelled, o.finished_first ? ", finished first" : "");
    if (o.finished_first || sb.cancelled[seq] == 0) {
        (o.finished_first ? r.single_first : r.single_missed)++;
        return;
    }
    r.single_cancelled++;
    r.single_ms.push_back(o.ms);
    for (int s = 0; s < k_seqs; ++s) {
        if (s != seq && o.status == LLAMA_CANCEL_OK) {
            r.logits.add(common::logits_at(b.ctx.get(), b.model.get(), sb.output[s]), want[s], run, s);
        }
    }
}

// (c): the 4 sequences' bytes at once (one shared byte): store-to-return latency.
void all_run(bench_setup & b, bench_results & r, std::mt19937 & rng) {
    common::seq_bytes sb(k_seqs);
    int8_t shared = 0;
    sb.point_all_at(&shared);
    const double  frac    = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    const outcome o       = decode(b, sb, &shared, frac * r.plain_p50());
    const bool    stopped = o.status == LLAMA_CANCEL_CANCELLED;
    std::fprintf(stderr, "  all: at %.0f%%: %.1f ms, status %d, %.2f ms after the store%s\n", 100 * frac, o.ms,
                 o.status, o.after_store_ms, o.finished_first ? ", finished first" : "");
    r.all_missed += !o.finished_first && !stopped ? 1 : 0;
    if (o.finished_first || stopped) {
        r.all.add(o.after_store_ms, o.finished_first, stopped);
    }
}

bool run_all(bench_setup & b, const seq_options & opt, bench_results & r) {
    std::mt19937   rng(opt.seed);
    common::seq_bytes sb(k_seqs);
    std::vector<double> warm;
    for (int i = 0; i < 2; ++i) { // warm-up; also the first estimate of T0
        const outcome o = decode(b, sb, nullptr, 0);
        if (o.status != LLAMA_CANCEL_OK) {
            return false;
        }
        r.plain_ms.push_back(o.ms);
    }
    const auto want = plain_logits(b, sb);
    r.plain_ms.clear();
    for (int run = 0; run < opt.runs; ++run) {
        const outcome o = decode(b, sb, nullptr, 0);
        if (o.status != LLAMA_CANCEL_OK) {
            return false;
        }
        r.plain_ms.push_back(o.ms);
        std::fprintf(stderr, "  run %d plain: %.1f ms\n", run, o.ms);
        single_run(b, r, rng, run, want);
        all_run(b, r, rng);
    }
    return true;
}

// Extra time against the median of every plain run (the store times used the median so far).
void finish(bench_results & r) {
    const double p50 = r.plain_p50();
    for (double t1 : r.single_ms) {
        r.extra_ms.push_back(t1 - p50);
        r.extra_pct.push_back(100.0 * (t1 - p50) / p50);
    }
}

// Bit for bit on the CPU; elsewhere (other kernels may reorder sums) the largest difference.
std::string logits_text(const bench_results & r, bool cpu) {
    char buf[96];
    if (cpu) {
        std::snprintf(buf, sizeof(buf), "%d of %d differ", r.logits.mismatches, r.logits.compared);
    } else {
        std::snprintf(buf, sizeof(buf), "max abs diff %g (%d compared)", r.logits.max_abs, r.logits.compared);
    }
    return buf;
}

// Issue #13's target for the survivors: extra time <= the ubatch in flight (here the whole plain
// decode) + 5%.
bool extra_met(const bench_results & r) {
    return common::max_of(r.extra_ms) <= r.plain_p50() * 1.05;
}

void print_header() {
    std::printf("| backend | runs | plain ms (p50) | single cancel: survivors' extra ms p50 / max | extra %% of plain "
                "(= ubatch in flight) p50 / max | cancelled / finished first / missed | extra <= ubatch + 5%% | "
                "all 4 cancelled: store-to-return ms p50 / p95 / max | finished first | survivor logits |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
}

void print_row(const seq_options & o, const bench_results & r, bool cpu) {
    if (o.header) {
        print_header();
    }
    std::printf("| %s | %d | %.2f | %.2f / %.2f | %.1f / %.1f | %d / %d / %d | %s | %.2f / %.2f / %.2f | %d | %s |\n",
                o.backend.c_str(), o.runs, r.plain_p50(), common::percentile(r.extra_ms, 0.5), common::max_of(r.extra_ms),
                common::percentile(r.extra_pct, 0.5), common::max_of(r.extra_pct), r.single_cancelled, r.single_first,
                r.single_missed, extra_met(r) ? "yes" : "NO", r.all.p50(), r.all.p95(), common::max_of(r.all.ms),
                r.all.finished_first, logits_text(r, cpu).c_str());
    std::fflush(stdout);
}

bool write_json(const seq_options & o, const std::string & description, const bench_results & r) {
    std::ofstream f(o.json);
    char buf[768];
    std::snprintf(buf, sizeof(buf),
                  "{\n  \"backend\": \"%s\",\n  \"description\": \"%s\",\n  \"runs\": %d,\n"
                  "  \"plain_ms\": %.4f,\n  \"single\": {\"extra_ms\": {\"p50\": %.4f, \"max\": %.4f}, "
                  "\"extra_pct_of_plain\": {\"p50\": %.2f, \"max\": %.2f}, \"cancelled_count\": %d, "
                  "\"finished_first\": %d, \"missed\": %d, \"logits_compared\": %d, \"logits_mismatches\": %d, "
                  "\"logits_max_abs_diff\": %g},\n  \"all\": ",
                  common::json_escape(o.backend).c_str(), common::json_escape(description).c_str(), o.runs, r.plain_p50(),
                  common::percentile(r.extra_ms, 0.5), common::max_of(r.extra_ms), common::percentile(r.extra_pct, 0.5),
                  common::max_of(r.extra_pct), r.single_cancelled, r.single_first, r.single_missed, r.logits.compared,
                  r.logits.mismatches, r.logits.max_abs);
    f << buf << r.all.json() << ",\n  \"all_missed\": " << r.all_missed
      << ",\n  \"extra_le_ubatch_plus_5pct\": " << (extra_met(r) ? "true" : "false")
      << ",\n  \"plain_all_ms\": " << common::json_list(r.plain_ms) << "\n}\n";
    if (!f) {
        std::fprintf(stderr, "error: cannot write %s\n", o.json.c_str());
    }
    return static_cast<bool>(f);
}

const char k_synopsis[] = "usage: llama-cancel bench-seq --model PATH [--backend cpu|vulkan|rpc1|rpc1-lan] [--runs 10]\n"
                          "       [--json FILE] [--threads 2] [--seed 42] [--rpc-server PATH] [--no-header]\n";

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, seq_options & o) {
    cli_args::parser p(k_synopsis);
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--backend", &o.backend, "NAME", "backend setup")
        .option("--json", &o.json, "FILE", "where the JSON goes")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--runs", &o.runs, "N", "runs (>= 1)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--seed", &o.seed, "N", "random seed")
        .flag("--no-header", &o.header, false, "print the table row alone (the benchmark prints the header)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    if (o.model.empty() || o.runs < 1 || o.threads < 1) {
        std::fprintf(stderr, "%s", k_synopsis);
        return 2;
    }
    return -1;
}

// Survivors' logits that differ on the CPU fail the run.
bool report_logits(const bench_results & r, bool cpu) {
    if (cpu && r.logits.mismatches > 0) {
        std::fprintf(stderr, "FAIL: %d survivors' logits differ from the plain run's\n", r.logits.mismatches);
        return false;
    }
    return true;
}

} // namespace

int bench_seq_main(int argc, char ** argv) {
    seq_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    bench_setup b;
    if (!b.make(o)) {
        return 1;
    }
    bench_results r;
    if (!run_all(b, o, r)) {
        std::fprintf(stderr, "error: the plain decode on %s failed\n", o.backend.c_str());
        return 1;
    }
    finish(r);
    print_row(o, r, b.cpu);
    const bool logits_ok = report_logits(r, b.cpu);
    const bool ok        = o.json.empty() || write_json(o, b.setup.description, r);
    return ok && logits_ok ? 0 : 1;
}
