// One memory-kind row of the benchmark (`llama-cancel-bench bench-memory --model PATH`), in its own
// process: what exact rollback costs on a model's memory (KV cache, sliding window, recurrent,
// hybrid). With the byte at 0 it measures llama_cancel_decode against plain llama_decode, paired
// and alternated: a prefill in n_ubatch slices (on models with recurrent state a partial-state
// snapshot before each slice) with a hook bound (its snapshot buffer kept across calls) and without
// one (a fresh buffer per call), and single-token decodes (held: no snapshot). The snapshots the
// library took are read from the hook's counters, not modelled. Then the stop latency of a prefill
// and of a token loop (store to return, runs that finished first counted apart), and one cancel
// checked byte for byte against a clean decode.
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "common/stop_latency.h"
#include "common/timing.h"
#include "common/triggers.h"
#include "commands.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
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

// How a timed decode runs: plain llama_decode; llama_cancel_decode with default params (no hook);
// with a hook bound (a context of n_seq_max 1: snapshots are copies into the hook's kept buffer);
// with a hook bound on a context with a spare sequence id (n_seq_max 2, one KV stream: snapshots
// share the state cell where llama.cpp allows it).
enum mode { plain = 0, ours = 1, ours_hook = 2, ours_spare = 3 };

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, memory_options & o) {
    cli_args::parser p("usage: llama-cancel-bench bench-memory --model PATH [--runs N>=3] [--threads N] [--batch N]\n"
                       "                                        [--ubatch N] [--json OUT]\n");
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--json", &o.json, "OUT", "where the row's JSON goes")
        .option("--runs", &o.runs, "N", "paired runs (>= 3)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--batch", &o.batch, "N", "prefill tokens after the 64-token prefix")
        .option("--ubatch", &o.ubatch, "N", "n_ubatch: the prefill's slices");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {o.runs < 3, "--runs must be at least 3"},
                    {o.threads < 1, "--threads must be at least 1"},
                    {o.ubatch < 1 || o.batch < 2 * o.ubatch || o.batch > 512,
                     "--batch must be at least two --ubatch slices and at most 512"}});
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
        opt_.n_ctx     = 1024;
        opt_.n_batch   = static_cast<uint32_t>(o.batch);
        opt_.n_ubatch  = static_cast<uint32_t>(o.ubatch);
        opt_.n_threads = o.threads;
        ctx_           = common::make_context(model, opt_);
        hook_          = common::make_hook();
        spare_hook_    = common::make_hook();
        common::context_options hooked = opt_;
        hooked.cb_eval      = llama_cancel_hook_eval_callback;
        hooked.cb_eval_data = hook_.get();
        ctx_hook_           = common::make_context(model, hooked);
        hooked.cb_eval_data = spare_hook_.get();
        hooked.n_seq_max    = 2;
        hooked.kv_unified   = true;
        ctx_spare_          = common::make_context(model, hooked);
        if (ctx_ && ctx_hook_ && ctx_spare_) {
            common::seq_batch b(prompt_, 0, o.prefix, 0);
            ok_ = llama_decode(ctx_.get(), b.get()) == 0;
            prefix_state_ = seq_state(ctx_.get());
        }
    }
    bool ok() const { return ok_; }
    llama_cancel_hook * hook(int m) const { return m == ours_spare ? spare_hook_.get() : hook_.get(); }

    // ms of one prefill after the prefix, decoded the way `m` says (ours: in n_ubatch slices on models
    // with recurrent state, a snapshot before each).
    double prefill(int m) {
        reset(m);
        common::seq_batch b(prompt_, o_.prefix, o_.batch, o_.prefix);
        const double t0 = common::now_ms();
        decode(b.get(), m);
        return common::now_ms() - t0;
    }

    // ms per token of o.tokens single-token decodes after the prefix, decoded the way `m` says.
    double tokens(int m) {
        reset(m);
        const double t0 = common::now_ms();
        for (int i = 0; i < o_.tokens; ++i) {
            common::seq_batch b(prompt_, o_.prefix + i, 1, o_.prefix + i);
            decode(b.get(), m);
        }
        return (common::now_ms() - t0) / o_.tokens;
    }

    // Median ms of writing back the partial state of sequence 0 after the prefix (what a stop adds).
    double restore_ms(size_t * bytes) {
        reset();
        std::vector<uint8_t> buf(llama_state_seq_get_size_ext(ctx_.get(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY));
        *bytes = llama_state_seq_get_data_ext(ctx_.get(), buf.data(), buf.size(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        std::vector<double> t;
        for (int i = 0; i < 20; ++i) {
            const double t0 = common::now_ms();
            llama_state_seq_set_data_ext(ctx_.get(), buf.data(), *bytes, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            t.push_back(common::now_ms() - t0);
        }
        return common::percentile(t, 0.5);
    }

    // Token-loop stops: `runs` llama_cancel_generate calls of o.tokens tokens after the prefix (hook
    // bound) whose byte another thread stores at a random 10-90% point of the uninterrupted loop.
    common::latencies token_stops(int runs, double * loop_ms) {
        std::vector<double> clean;
        for (int i = 0; i < 3; ++i) {
            clean.push_back(generate(0.0).ms);
        }
        *loop_ms = common::percentile(clean, 0.5);
        std::mt19937 rng(11);
        std::uniform_real_distribution<double> frac(0.1, 0.9);
        common::latencies l;
        for (int i = 0; i < runs; ++i) {
            const timed_run r = generate(frac(rng) * *loop_ms);
            l.add(r.ms, r.finished_first, r.stopped);
        }
        return l;
    }

    // One sliced prefill stopped at 80% of its graph nodes (a first pass counts them): true when
    // memory then equals a clean decode of the committed tokens, byte for byte.
    bool rollback_exact(int * committed) {
        common::node_trigger count;
        int8_t byte = 0;
        count.byte = &byte;
        reset();
        run_with(count, &byte);
        count.at    = count.calls * 4 / 5;
        count.calls = 0;
        byte        = 0;
        reset();
        llama_cancel_decode_result r = run_with(count, &byte);
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
    struct timed_run {
        double ms = 0; // the whole run, or store to return when stopped
        bool   stopped = false, finished_first = false;
    };

    // The context a decode of mode `m` runs on: plain and no-hook runs share the first.
    llama_context * context_of(int m) const {
        return m == ours_hook ? ctx_hook_.get() : m == ours_spare ? ctx_spare_.get() : ctx_.get();
    }

    // The prefix alone in the memory of the context mode `m` decodes on.
    void reset(int m = plain) {
        llama_context * c = context_of(m);
        llama_memory_clear(llama_get_memory(c), true);
        llama_state_seq_set_data(c, prefix_state_.data(), prefix_state_.size(), 0);
    }

    void decode(llama_batch b, int m) {
        if (m == plain) {
            llama_decode(ctx_.get(), b);
            return;
        }
        int8_t byte = 0;
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte = &byte;
        p.hook = m == ours ? nullptr : hook(m);
        llama_cancel_decode(context_of(m), b, &p, nullptr, nullptr);
    }

    // o.tokens generated after the prefix on the hooked context; with `at_ms` > 0 another thread
    // stores the byte that long after the start.
    timed_run generate(double at_ms) {
        reset(ours_hook);
        int8_t byte = 0;
        llama_cancel_generate_params gp = llama_cancel_generate_default_params();
        gp.byte      = &byte;
        gp.hook      = hook_.get();
        gp.n_predict = o_.tokens;
        std::vector<llama_token> out(static_cast<size_t>(o_.tokens));
        llama_cancel_generate_result r;
        double t_store = 0;
        const double t0 = common::now_ms();
        std::thread writer;
        if (at_ms > 0) {
            writer = common::store_at(&byte, t0 + at_ms, &t_store);
        }
        const int32_t st = llama_cancel_generate(context_of(ours_hook), prompt_.data() + o_.prefix, 1, &gp, out.data(),
                                                 o_.tokens, &r);
        const double t_ret = common::now_ms();
        if (writer.joinable()) {
            writer.join();
        }
        timed_run t;
        t.stopped        = st == LLAMA_CANCEL_CANCELLED;
        t.finished_first = at_ms > 0 && common::classify_store(t.stopped, t_store, t_ret) != common::store_outcome::stopped;
        t.ms             = t.stopped ? t_ret - t_store : t_ret - t0;
        return t;
    }

    llama_cancel_decode_result run_with(common::node_trigger & trig, int8_t * byte) {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte                = byte;
        p.abort_callback      = common::node_trigger::abort_cb;
        p.abort_callback_data = &trig;
        llama_cancel_decode_result r;
        common::seq_batch b(prompt_, o_.prefix, o_.batch, o_.prefix);
        llama_cancel_decode(ctx_.get(), b.get(), &p, &r, nullptr);
        return r;
    }

    const memory_options &   o_;
    llama_model *            model_;
    common::context_options  opt_;
    common::context_ptr      ctx_;      // plain and no-hook runs
    common::hook_ptr         hook_;
    common::context_ptr      ctx_hook_; // the hook bound
    common::hook_ptr         spare_hook_;
    common::context_ptr      ctx_spare_; // spare_hook_ bound, a spare sequence id
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
    ratio_stats sliced_hook, sliced_spare, sliced, token; // overheads of ours against plain llama_decode
    double      prefill_ms = 0, token_ms = 0;
    size_t      state_bytes = 0;     // partial state of the sequence after the prefix
    double      snapshots_per_prefill = 0, bytes_per_snapshot = 0, ms_per_snapshot = 0;
    double      shared_per_prefill = 0; // with a spare sequence id: snapshots with no host copy
    double      held_per_token = 0;  // held steps per single-token decode (1: no snapshot)
    double      snapshots_per_token = 0;
    double      restore_ms = 0;
    double      share_prefill_pct = 0; // the snapshots' measured time over the plain prefill
    common::stop_figures prefill_stops;
    common::latencies    token_stops;
    double               loop_ms = 0; // the uninterrupted token loop the stops were taken in
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

// What the hooks counted: snapshots per prefill and their mean copy time over the paired prefills
// with the hook (`before`: its counters before them; runs + 1 prefills, the warm-up included), then
// one token loop with the hook and one prefill with a spare sequence.
void count_snapshots(memory_bench & b, const memory_options & o, const llama_cancel_snapshot_stats & before,
                     memory_figures & f) {
    const llama_cancel_snapshot_stats s1 = llama_cancel_hook_get_snapshot_stats(b.hook(ours_hook));
    const double n = static_cast<double>(s1.snapshots - before.snapshots);
    f.snapshots_per_prefill = n / (o.runs + 1);
    f.bytes_per_snapshot    = n > 0 ? static_cast<double>(s1.bytes - before.bytes) / n : 0.0;
    f.ms_per_snapshot       = n > 0 ? (s1.copy_ms - before.copy_ms) / n : 0.0;
    b.tokens(ours_hook);
    const llama_cancel_snapshot_stats s2 = llama_cancel_hook_get_snapshot_stats(b.hook(ours_hook));
    f.held_per_token      = static_cast<double>(s2.held_steps - s1.held_steps) / o.tokens;
    f.snapshots_per_token = static_cast<double>(s2.snapshots - s1.snapshots) / o.tokens;
    const llama_cancel_snapshot_stats t0 = llama_cancel_hook_get_snapshot_stats(b.hook(ours_spare));
    b.prefill(ours_spare);
    const llama_cancel_snapshot_stats t1 = llama_cancel_hook_get_snapshot_stats(b.hook(ours_spare));
    f.shared_per_prefill = static_cast<double>(t1.shared - t0.shared);
}

// The paired overheads, the snapshots the library took, the stop latencies, and one rollback
// checked byte for byte.
memory_figures measure(memory_bench & b, const memory_options & o, llama_model * model) {
    memory_figures f;
    describe(model, f);
    double unused = 0;
    b.prefill(ours_hook); // the hook's buffer allocated (its first touch is the no-hook column's cost)
    const llama_cancel_snapshot_stats before = llama_cancel_hook_get_snapshot_stats(b.hook(ours_hook));
    f.sliced_hook = pct(paired(o.runs, [&](int m) { return b.prefill(m); }, ours_hook, &f.prefill_ms));
    f.sliced_spare = pct(paired(o.runs, [&](int m) { return b.prefill(m); }, ours_spare, &unused));
    f.sliced      = pct(paired(o.runs, [&](int m) { return b.prefill(m); }, ours, &unused));
    f.token       = pct(paired(o.runs, [&](int m) { return b.tokens(m); }, ours, &f.token_ms));
    count_snapshots(b, o, before, f);
    f.restore_ms        = b.restore_ms(&f.state_bytes);
    f.share_prefill_pct = 100.0 * f.ms_per_snapshot * f.snapshots_per_prefill / f.prefill_ms;
    common::context_options base;
    base.n_threads  = o.threads;
    common::hook_ptr stops_hook = common::make_hook();
    f.prefill_stops = common::measure_stops(model, base, stops_hook.get(), {o.ubatch, 0.0f}, o.batch, o.runs, 5);
    f.token_stops   = b.token_stops(o.runs, &f.loop_ms);
    f.exact         = b.rollback_exact(&f.committed);
    return f;
}

std::string spread(const ratio_stats & r) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%+.2f%% [%+.1f, %+.1f]", r.median, r.lo, r.hi);
    return buf;
}

// "p50 / max" of the runs that stopped, "-" when none did.
std::string stops_text(const std::vector<double> & v, int width) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%*.1f / %*.1f", width, common::percentile(v, 0.5), width, common::max_of(v));
    return v.empty() ? std::string("-") : std::string(buf);
}

void print_row(const memory_figures & f) {
    const std::vector<double> & ps = f.prefill_stops.stop_ms;
    std::printf("| %-13s | %-9s | %11zu | %2.0f/%-2.0f | %7.3f | %7.3f | %10.1f | %9.3f%% | %-24s | %-24s | %-24s "
                "| %8.2f | %4.2f | %-24s | %s (%d first, %d late) | %s (%d first) | %9d | %-5s |\n",
                f.arch.c_str(), f.memory, f.state_bytes, f.snapshots_per_prefill, f.shared_per_prefill,
                f.ms_per_snapshot, f.restore_ms, f.prefill_ms, f.share_prefill_pct, spread(f.sliced_hook).c_str(),
                spread(f.sliced_spare).c_str(), spread(f.sliced).c_str(), f.token_ms,
                f.held_per_token, spread(f.token).c_str(), stops_text(ps, 7).c_str(), f.prefill_stops.finished_first,
                f.prefill_stops.late_store, stops_text(f.token_stops.ms, 6).c_str(), f.token_stops.finished_first,
                f.committed, f.exact ? "yes" : "NO");
    std::fflush(stdout);
}

common::json row_json(const memory_options & o, const memory_figures & f) {
    using common::printed;
    const std::vector<double> & ps = f.prefill_stops.stop_ms;
    // A figure of the stops, null when no run stopped.
    auto figure = [](const std::vector<double> & v, double x) { return v.empty() ? common::json(nullptr) : common::json(printed(x)); };
    const common::json row = {
        {"arch", f.arch},
        {"model", o.model},
        {"memory", f.memory},
        {"batch", o.batch},
        {"n_ubatch", o.ubatch},
        {"threads", o.threads},
        {"runs", o.runs},
        {"snapshot_bytes", f.state_bytes},
        {"snapshots_per_prefill", printed(f.snapshots_per_prefill)},
        {"shared_snapshots_per_prefill_spare_seq", printed(f.shared_per_prefill)},
        {"bytes_per_snapshot", printed(f.bytes_per_snapshot)},
        {"ms_per_snapshot", printed(f.ms_per_snapshot)},
        {"snapshots_per_token", printed(f.snapshots_per_token)},
        {"held_steps_per_token", printed(f.held_per_token)},
        {"snapshot_restore_ms", printed(f.restore_ms)},
        {"prefill_ms", printed(f.prefill_ms)},
        {"snapshot_share_prefill_pct", printed(f.share_prefill_pct)},
        {"prefill_overhead_sliced_pct", stats_json(f.sliced_hook)},
        {"prefill_overhead_sliced_spare_seq_pct", stats_json(f.sliced_spare)},
        {"prefill_overhead_sliced_no_hook_pct", stats_json(f.sliced)},
        {"token_ms", printed(f.token_ms)},
        {"token_overhead_pct", stats_json(f.token)},
        {"prefill_stop_ms", {{"p50", figure(ps, common::percentile(ps, 0.5))},
                             {"max", figure(ps, common::max_of(ps))},
                             {"stopped", static_cast<int>(ps.size())},
                             {"finished_first", f.prefill_stops.finished_first},
                             {"late_store", f.prefill_stops.late_store}}},
        {"token_loop_stop_ms", {{"p50", figure(f.token_stops.ms, f.token_stops.p50())},
                                {"max", figure(f.token_stops.ms, common::max_of(f.token_stops.ms))},
                                {"stopped", static_cast<int>(f.token_stops.ms.size())},
                                {"finished_first", f.token_stops.finished_first},
                                {"loop_ms", printed(f.loop_ms)}}},
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
