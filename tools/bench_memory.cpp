// One memory-kind row of the benchmark (`llama-cancel bench-memory --model PATH`), in its own
// process: what exact rollback costs on a model's memory (KV cache, sliding window, recurrent,
// hybrid). With the byte at 0 it measures llama_cancel_decode against plain llama_decode, paired
// and alternated, for a prefill in n_ubatch slices (a partial-state snapshot before each slice on
// models with recurrent state) and for single-token decodes (one snapshot per token); the snapshot
// itself (bytes, copy and restore times); and checks one cancel against a clean decode.
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "commands.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct memory_options {
    std::string model;
    std::string json;
    int         runs    = 10;
    int         batch   = 256;
    int         ubatch  = 64;
    int         prefix  = 64; // tokens in memory before each timed decode, so that a state exists
    int         tokens  = 32; // single-token decodes per timed block
    int         threads = 2;
};

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, memory_options & o) {
    cli_args::parser p("usage: llama-cancel bench-memory --model PATH [--runs N>=3] [--threads N] [--json OUT]\n");
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--json", &o.json, "OUT", "where the row's JSON goes")
        .option("--runs", &o.runs, "N", "paired runs (>= 3)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {o.runs < 3, "--runs must be at least 3"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

std::vector<uint8_t> seq_state(llama_context * ctx) {
    std::vector<uint8_t> buf(llama_state_seq_get_size(ctx, 0));
    buf.resize(llama_state_seq_get_data(ctx, buf.data(), buf.size(), 0));
    return buf;
}

struct ratio_stats {
    double median = 0, lo = 0, hi = 0; // of ours/plain - 1, in %
};

ratio_stats pct(std::vector<double> ratios) {
    ratio_stats s;
    s.median = (common::percentile(ratios, 0.5) - 1.0) * 100.0;
    s.lo     = (common::percentile(ratios, 0.0) - 1.0) * 100.0;
    s.hi     = (common::percentile(ratios, 1.0) - 1.0) * 100.0;
    return s;
}

class memory_bench {
  public:
    memory_bench(const memory_options & o, llama_model * model) : o_(o), model_(model) {
        prompt_ = common::make_prompt(model, o.prefix + o.batch + o.tokens, 7);
        common::context_options opt;
        opt.n_ctx     = 1024;
        opt.n_batch   = static_cast<uint32_t>(o.batch);
        opt.n_ubatch  = static_cast<uint32_t>(o.ubatch);
        opt.n_threads = o.threads;
        ctx_          = common::make_context(model, opt);
        if (ctx_) {
            common::seq_batch b(prompt_, 0, o.prefix, 0);
            ok_ = llama_decode(ctx_.get(), b.get()) == 0;
            prefix_state_ = seq_state(ctx_.get());
        }
    }
    bool ok() const { return ok_; }

    // ms of one prefill after the prefix: plain (mode 0) or ours (1), which decodes it in n_ubatch
    // slices on models with recurrent state (a snapshot before each).
    double prefill(int mode) {
        reset();
        common::seq_batch b(prompt_, o_.prefix, o_.batch, o_.prefix);
        const double t0 = common::now_ms();
        decode(b.get(), mode);
        return common::now_ms() - t0;
    }

    // ms per token of o.tokens single-token decodes after the prefix: plain (0) or ours (1).
    double tokens(int mode) {
        reset();
        const double t0 = common::now_ms();
        for (int i = 0; i < o_.tokens; ++i) {
            common::seq_batch b(prompt_, o_.prefix + i, 1, o_.prefix + i);
            decode(b.get(), mode);
        }
        return (common::now_ms() - t0) / o_.tokens;
    }

    // Median ms of copying (`copy`) or writing back the partial state of sequence 0 after the prefix.
    double snapshot_ms(bool copy, size_t * bytes) {
        reset();
        std::vector<uint8_t> buf(llama_state_seq_get_size_ext(ctx_.get(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY));
        *bytes = llama_state_seq_get_data_ext(ctx_.get(), buf.data(), buf.size(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        std::vector<double> t;
        for (int i = 0; i < 50; ++i) {
            const double t0 = common::now_ms();
            if (copy) {
                llama_state_seq_get_data_ext(ctx_.get(), buf.data(), buf.size(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            } else {
                llama_state_seq_set_data_ext(ctx_.get(), buf.data(), *bytes, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            }
            t.push_back(common::now_ms() - t0);
        }
        return common::percentile(t, 0.5);
    }

    // One sliced prefill stopped at 80% of its graph nodes (a first pass counts them): true when
    // memory then equals a clean decode of the committed tokens, byte for byte.
    bool rollback_exact(int * committed) {
        common::node_trigger count;
        int8_t flag = 0;
        count.flag = &flag;
        reset();
        run_with(count, &flag);
        count.at    = count.calls * 4 / 5;
        count.calls = 0;
        flag        = 0;
        reset();
        llama_cancel_decode_result r = run_with(count, &flag);
        *committed = r.n_committed;
        if (r.status != LLAMA_CANCEL_CANCELLED) {
            return false;
        }
        const std::vector<uint8_t> got = seq_state(ctx_.get());
        reset();
        for (int a = 0; a < r.n_committed; a += o_.ubatch) {
            common::seq_batch b(prompt_, o_.prefix + a, std::min(o_.ubatch, r.n_committed - a), o_.prefix + a);
            llama_decode(ctx_.get(), b.get());
        }
        return got == seq_state(ctx_.get());
    }

  private:
    void reset() {
        llama_memory_clear(llama_get_memory(ctx_.get()), true);
        llama_state_seq_set_data(ctx_.get(), prefix_state_.data(), prefix_state_.size(), 0);
    }

    void decode(llama_batch b, int mode) {
        if (mode == 0) {
            llama_decode(ctx_.get(), b);
            return;
        }
        int8_t flag = 0;
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.flag = &flag;
        llama_cancel_decode(ctx_.get(), b, &p, nullptr, nullptr);
    }

    llama_cancel_decode_result run_with(common::node_trigger & trig, int8_t * flag) {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.flag                = flag;
        p.abort_callback      = common::node_trigger::abort_cb;
        p.abort_callback_data = &trig;
        llama_cancel_decode_result r;
        common::seq_batch b(prompt_, o_.prefix, o_.batch, o_.prefix);
        llama_cancel_decode(ctx_.get(), b.get(), &p, &r, nullptr);
        return r;
    }

    const memory_options &   o_;
    llama_model *            model_;
    common::context_ptr         ctx_;
    std::vector<llama_token> prompt_;
    std::vector<uint8_t>     prefix_state_;
    bool                     ok_ = false;
};

// Paired ratios ours/plain, alternating which runs first; ms of the plain runs in *plain_ms.
template <typename Run> std::vector<double> paired(int runs, Run run, int mode, double * plain_ms) {
    std::vector<double> ratios, plain;
    run(0);
    run(mode); // warm-up
    for (int i = 0; i < runs; ++i) {
        double a = 0, b = 0;
        if (i % 2 == 0) {
            a = run(0);
            b = run(mode);
        } else {
            b = run(mode);
            a = run(0);
        }
        ratios.push_back(b / a);
        plain.push_back(a);
    }
    *plain_ms = common::percentile(plain, 0.5);
    return ratios;
}

common::json stats_json(const ratio_stats & s) {
    return {{"median", common::printed(s.median, "%.3f")},
            {"min", common::printed(s.lo, "%.3f")},
            {"max", common::printed(s.hi, "%.3f")}};
}

// One row's figures. The snapshot's are 0 on a model without one (KV cache only).
struct memory_figures {
    std::string arch;
    const char * memory = "kv"; // "kv", "recurrent", "hybrid"
    ratio_stats sliced, token; // overhead of ours against plain llama_decode
    double      prefill_ms = 0, token_ms = 0;
    size_t      snapshot_bytes = 0;
    double      copy_ms = 0, restore_ms = 0;
    double      share_prefill_pct = 0, share_token_pct = 0;
    int         committed = 0;
    bool        exact     = false;
};

// The model's architecture and memory kind.
void describe(const llama_model * model, memory_figures & f) {
    char arch[64] = {0};
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch));
    f.arch   = arch;
    f.memory = llama_model_is_recurrent(model) ? "recurrent" : llama_model_is_hybrid(model) ? "hybrid" : "kv";
}

// The paired overheads, the snapshot's size and times, and one rollback checked byte for byte.
memory_figures measure(memory_bench & b, const memory_options & o, const llama_model * model) {
    memory_figures f;
    describe(model, f);
    f.sliced = pct(paired(o.runs, [&](int m) { return b.prefill(m); }, 1, &f.prefill_ms));
    f.token  = pct(paired(o.runs, [&](int m) { return b.tokens(m); }, 1, &f.token_ms));
    size_t       bytes      = 0;
    const double copy_ms    = b.snapshot_ms(true, &bytes);
    const double restore_ms = b.snapshot_ms(false, &bytes);
    f.exact = b.rollback_exact(&f.committed);
    if (llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) {
        // The snapshot's own share of the work, from its measured copy time: one copy per slice, one
        // per token. Unlike the paired ratios it does not move with the machine's noise.
        const int n_slices  = (o.batch + o.ubatch - 1) / o.ubatch;
        f.snapshot_bytes    = bytes;
        f.copy_ms           = copy_ms;
        f.restore_ms        = restore_ms;
        f.share_prefill_pct = 100.0 * copy_ms * n_slices / f.prefill_ms;
        f.share_token_pct   = 100.0 * copy_ms / f.token_ms;
    }
    return f;
}

void print_row(const memory_figures & f) {
    std::printf("| %-7s | %-9s | %8zu | %7.4f | %8.4f | %8.1f | %7.3f%% | %+7.2f%% [%+.1f, %+.1f] | %6.2f "
                "| %7.3f%% | %+7.2f%% [%+.1f, %+.1f] | %9d | %-5s |\n",
                f.arch.c_str(), f.memory, f.snapshot_bytes, f.copy_ms, f.restore_ms, f.prefill_ms, f.share_prefill_pct,
                f.sliced.median, f.sliced.lo, f.sliced.hi, f.token_ms, f.share_token_pct,
                f.token.median, f.token.lo, f.token.hi, f.committed, f.exact ? "yes" : "NO");
    std::fflush(stdout);
}

common::json row_json(const memory_options & o, const memory_figures & f) {
    using common::printed;
    const common::json row = {
        {"arch", f.arch},
        {"model", o.model},
        {"memory", f.memory},
        {"batch", o.batch},
        {"n_ubatch", o.ubatch},
        {"threads", o.threads},
        {"runs", o.runs},
        {"snapshot_bytes", f.snapshot_bytes},
        {"snapshot_copy_ms", printed(f.copy_ms)},
        {"snapshot_restore_ms", printed(f.restore_ms)},
        {"prefill_ms", printed(f.prefill_ms)},
        {"snapshot_share_prefill_pct", printed(f.share_prefill_pct)},
        {"snapshot_share_token_pct", printed(f.share_token_pct)},
        {"prefill_overhead_sliced_pct", stats_json(f.sliced)},
        {"token_ms", printed(f.token_ms)},
        {"token_overhead_pct", stats_json(f.token)},
        {"rollback_committed", f.committed},
        {"rollback_exact", f.exact},
        {"snapshot_share_le_1pct", f.share_prefill_pct <= 1.0}};
    return common::with_threads_override(row);
}

} // namespace

int bench_memory_main(int argc, char ** argv) {
    memory_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    common::note_threads_override("memory");
    common::load_backends();
    common::model_ptr model = common::load_model(o.model);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", o.model.c_str());
        return 1;
    }
    memory_bench b(o, model.get());
    if (!b.ok()) {
        std::fprintf(stderr, "error: cannot decode on %s\n", o.model.c_str());
        return 1;
    }
    const memory_figures f = measure(b, o, model.get());
    print_row(f);
    if (!o.json.empty() && !common::write_json_file(o.json, row_json(o, f))) {
        return 1;
    }
    return f.exact ? 0 : 1;
}
