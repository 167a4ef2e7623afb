// `llama-cancel-bench bench-seq`: what a per-sequence cancel (llama_cancel_decode_params.seq_bytes) costs
// the other sequences of a shared batch, how fast the cancelled one stops, and how fast a batch
// whose every sequence is cancelled returns. One context (n_seq_max 4, n_batch 512, n_ubatch 512 or
// --n-ubatch) decodes 4 sequences x 128 tokens, one after another, each asking for its last
// token's output, the way a server batches its slots.
//
// Per run: (a) plain: the batch with seq_bytes set, no byte stored: T0. (b) single: one random
// sequence's byte stored at a random 20-80% of T0's median (or of a faster recent run, see
// batch_ref); its stop latency is the time from the store until seqs[s].cancelled is set (the
// library stores it when it drops the sequence, then goes on with the survivors). Two observers
// watch the entry, and each sees it late in its own way: a thread polling it every ~0.2 ms (what a
// host's waiting thread sees; on cores the survivors' decode keeps busy, its wake-up can wait a
// scheduler slice, milliseconds) and the decoding thread itself, through a cb_eval that asks for
// no node (the context's on the CPU, chained through the hook elsewhere), at the next graph's
// first node (after that llama_decode call's set-up). Each is later than the store of the entry,
// so the first of the two to see it bounds the drop from above: that is the stop judged; both are
// shown. The survivors' extra time is T1 - median(T0). The targets: the median extra <= the ubatch in
// flight (median(T0) x n_ubatch / 512: the ubatches are equal) + 5% of median(T0); the survivors'
// logits bit-identical to the plain run's on the CPU at one ubatch, within k_logit_tolerance
// elsewhere (see there). (c) all: the 4 sequences' bytes stored at once: store-to-return latency.
// (d) solo: the single-sequence figure side by side: one sequence of 512 tokens in its own context
// (same n_ubatch), the batch byte stored at such a point, store-to-return latency; the cancelled
// sequence's stop is "within" it when its median is at most the solo p95.
// Runs whose decode returned before the store are counted apart ("finished first"), never as 0 ms.
#include "commands.h"
#include "common/args.h"
#include "common/json.h"
#include "common/stats.h"
#include "common/seq_bytes.h"
#include "support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
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
    int         n_ubatch = 512;
    uint32_t    seed    = 42;
    bool        header  = true;
};

// The decoding thread's view of a drop: a cb_eval asked about every node before it is computed
// (the context's own on the CPU, the hook's chain elsewhere); it notes when it first finds the
// watched entry set, and asks for no node.
struct drop_seen {
    const int32_t * entry = nullptr; // seqs[s].cancelled of the sequence stored, or null
    double          t     = -1.0;    // when this thread first saw it set, else -1

    void watch(const int32_t * e) {
        entry = e;
        t     = -1.0;
    }
    void note() {
        if (entry != nullptr && t < 0 && __atomic_load_n(entry, __ATOMIC_ACQUIRE) != 0) {
            t = common::now_ms();
        }
    }
    static bool eval_cb(ggml_tensor *, bool ask, void * data) {
        static_cast<drop_seen *>(data)->note();
        return !ask; // asks for no node; keeps going
    }
};

// The model, its contexts (hooked off the CPU: the shared batch's and the solo sequence's) and the
// prompts.
struct bench_setup {
    common::backend_setup                    setup;
    common::model_ptr                        model;
    common::hook_ptr                         hook, solo_hook;
    common::context_ptr                      ctx, solo_ctx;
    std::vector<std::vector<llama_token>> prompts;
    std::vector<llama_token>              solo_prompt;
    bool                                  cpu = true;
    drop_seen                             drop; // the shared batch's decoding thread

    common::context_ptr context(const seq_options & o, uint32_t n_seq_max, common::hook_ptr & h, drop_seen * seen) {
        common::context_options opt;
        opt.n_ctx       = 1024;
        opt.n_batch     = 512;
        opt.n_ubatch    = static_cast<uint32_t>(o.n_ubatch);
        opt.n_threads   = o.threads;
        opt.n_seq_max   = n_seq_max;
        opt.offload_kqv = !cpu;
        if (cpu && seen != nullptr) {
            opt.cb_eval      = drop_seen::eval_cb;
            opt.cb_eval_data = seen;
        }
        if (!cpu) { // off the CPU the abort callback is not called: the hook sees the bytes
            h                = seen != nullptr ? common::make_hook(drop_seen::eval_cb, seen) : common::make_hook();
            opt.cb_eval      = llama_cancel_hook_eval_callback;
            opt.cb_eval_data = h.get();
        }
        return common::make_context(model.get(), opt);
    }

    bool make(const seq_options & o) {
        if (!common::setup_backend(o.backend, o.rpc_server, o.threads, setup)) {
            return false;
        }
        model = setup.load(o.model, -1);
        if (!model) {
            std::fprintf(stderr, "error: cannot load %s on %s\n", o.model.c_str(), o.backend.c_str());
            return false;
        }
        cpu      = setup.devices.empty();
        ctx      = context(o, k_seqs, hook, &drop);
        solo_ctx = context(o, 1, solo_hook, nullptr);
        for (int s = 0; s < k_seqs; ++s) {
            prompts.push_back(common::make_prompt(model.get(), k_len, o.seed + 100 + s));
        }
        solo_prompt = common::make_prompt(model.get(), k_seqs * k_len, o.seed + 200);
        return ctx != nullptr && solo_ctx != nullptr;
    }
};

struct outcome {
    int32_t status         = LLAMA_CANCEL_OK;
    double  ms             = 0.0; // whole decode
    double  after_store_ms = 0.0; // from the store to the return
    double  seen_ms        = -1.0; // store to the watched seqs[s].cancelled seen set by the polling thread (-1: not)
    double  dropped_ms     = -1.0; // the same, seen by the decoding thread at its next graph (-1: not)
    bool    finished_first = false;
    int32_t n_cancelled    = 0;
};

// Stores `byte` at time `at` (common::store_when), then polls
// `watched` (when given) until it is set or the decode is `done`: when the library dropped the
// sequence, to ~0.2 ms plus a scheduler wake-up.
std::thread store_and_watch(int8_t * byte, double at, const int32_t * watched, const std::atomic<bool> * done,
                            double * t_store, double * t_seen) {
    return std::thread([=] {
        *t_store = common::store_when(byte, at);
        while (watched != nullptr) {
            if (__atomic_load_n(watched, __ATOMIC_ACQUIRE) != 0) {
                *t_seen = common::now_ms();
                return;
            }
            if (done->load(std::memory_order_acquire)) { // a last look: the entry is set before the return
                if (__atomic_load_n(watched, __ATOMIC_ACQUIRE) != 0) {
                    *t_seen = common::now_ms();
                }
                return;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200)); // shorter polls slow a 2-core decode
        }
    });
}

// One decode of `batch` on `ctx` from empty memory; with `store` another thread stores it at
// `at_ms` after the start and watches `watched`.
outcome decode_on(llama_context * ctx, llama_cancel_hook * hook, common::owned_batch & batch,
                  llama_cancel_decode_params p, llama_cancel_seq_result * seqs, int8_t * store, double at_ms,
                  const int32_t * watched, drop_seen * seen) {
    llama_memory_clear(llama_get_memory(ctx), true);
    p.hook = hook;
    if (seen != nullptr) {
        seen->watch(watched);
    }
    llama_cancel_decode_result r;
    double            t_store = 0, t_seen = -1;
    std::atomic<bool> done{false};
    const double      t0 = common::now_ms();
    std::thread       writer;
    if (store != nullptr) {
        writer = store_and_watch(store, t0 + at_ms, watched, &done, &t_store, &t_seen);
    }
    outcome o;
    o.status = llama_cancel_decode(ctx, batch.get(), &p, &r, seqs);
    llama_synchronize(ctx); // GPU-API backends compute asynchronously
    const double t_ret = common::now_ms();
    done.store(true, std::memory_order_release);
    o.ms          = t_ret - t0;
    o.n_cancelled = r.n_seq_cancelled;
    if (writer.joinable()) {
        writer.join();
        o.after_store_ms = t_ret - t_store;
        o.seen_ms        = t_seen >= 0 ? t_seen - t_store : -1.0;
        o.dropped_ms     = seen != nullptr && seen->t >= 0 ? seen->t - t_store : -1.0;
        o.finished_first = t_store >= t_ret;
    }
    if (o.status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: decode failed: %s\n", r.message);
    }
    return o;
}

// The shared batch with the sequences' bytes of `sb`.
outcome decode(bench_setup & b, common::seq_bytes & sb, int8_t * store, double at_ms, const int32_t * watched = nullptr) {
    common::multi_seq_batch batch(b.prompts, k_len);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    sb.fill(p);
    return decode_on(b.ctx.get(), b.hook.get(), batch, p, sb.seqs(), store, at_ms, watched, &b.drop);
}

// The solo sequence, its batch byte stored at `at_ms` when `store` is given.
outcome decode_solo(bench_setup & b, int8_t * store, double at_ms) {
    common::seq_batch batch(b.solo_prompt, 0, static_cast<int32_t>(b.solo_prompt.size()), 0);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = store;
    return decode_on(b.solo_ctx.get(), b.solo_hook.get(), batch, p, nullptr, store, at_ms, nullptr, nullptr);
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
            max_abs = INFINITY; // no logits: no tolerance holds
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
    common::latencies   seq_stop;     // (b): store to the cancelled sequence dropped: the first observer's
    common::latencies   seq_seen;     // the same, as the thread polling the entry saw it
    common::latencies   seq_next;     // the same, as the decoding thread saw it at its next graph
    common::latencies      all;
    int                 all_missed = 0; // the store came before the return, yet the call was not cancelled
    std::vector<double> solo_plain_ms;
    common::latencies   solo;          // (d): store to return, one sequence, the batch byte
    int                 solo_missed = 0;
    logit_check         logits;
    double plain_p50() const { return common::percentile(plain_ms, 0.5); }
    // Where the stores of a run point to: the plain decode's median, or less when the machine
    // decodes faster now (the last plain run, or a run that finished before its store): on a
    // shared machine the load moves between runs, and a store after the return measures nothing.
    double batch_ms = 1e300, solo_ms = 1e300; // the fastest runs that finished before their store
    double batch_ref() const { return std::min({plain_p50(), plain_ms.back(), batch_ms}); }
    double solo_ref() const {
        return std::min({common::percentile(solo_plain_ms, 0.5), solo_plain_ms.back(), solo_ms});
    }
};

std::vector<std::vector<float>> plain_logits(bench_setup & b, const common::seq_bytes & sb) {
    std::vector<std::vector<float>> out;
    for (int s = 0; s < k_seqs; ++s) {
        out.push_back(common::logits_at(b.ctx.get(), b.model.get(), sb.output(s)));
    }
    return out;
}

// "1.23 ms" (or "-" when it was not seen) for the progress lines.
std::string ms_or_dash(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f ms", ms);
    return ms >= 0 ? buf : "-";
}

// (b): one random sequence's byte; the survivors' extra time and their logits.
void single_run(bench_setup & b, bench_results & r, std::mt19937 & rng, int run,
                const std::vector<std::vector<float>> & want) {
    common::seq_bytes sb(k_seqs);
    const int    seq  = std::uniform_int_distribution<int>(0, k_seqs - 1)(rng);
    const double frac = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    const outcome o   = decode(b, sb, &sb.bytes[seq], frac * r.batch_ref(), sb.cancelled_entry(seq));
    std::fprintf(stderr, "  run %d single: sequence %d at %.0f%%: %.1f ms, status %d, %d dropped, to the drop %s "
                 "(decoding thread), %s (polling thread)%s\n",
                 run, seq, 100 * frac, o.ms, o.status, o.n_cancelled, ms_or_dash(o.dropped_ms).c_str(),
                 ms_or_dash(o.seen_ms).c_str(), o.finished_first ? ", finished first" : "");
    if (o.finished_first) {
        r.batch_ms = std::min(r.batch_ms, o.ms);
    }
    if (o.finished_first || !sb.cancelled(seq)) {
        (o.finished_first ? r.single_first : r.single_missed)++;
        return;
    }
    r.single_cancelled++;
    r.single_ms.push_back(o.ms);
    // Set before the call returns, the entry is seen by one observer at least (the polling thread
    // takes a last look once the call is done).
    const double first = o.dropped_ms < 0 ? o.seen_ms : o.seen_ms < 0 ? o.dropped_ms : std::min(o.seen_ms, o.dropped_ms);
    if (first >= 0) {
        r.seq_stop.add(first, false, true);
    }
    if (o.seen_ms >= 0) {
        r.seq_seen.add(o.seen_ms, false, true);
    }
    if (o.dropped_ms >= 0) {
        r.seq_next.add(o.dropped_ms, false, true);
    }
    for (int s = 0; s < k_seqs; ++s) {
        if (s != seq && o.status == LLAMA_CANCEL_OK) {
            r.logits.add(common::logits_at(b.ctx.get(), b.model.get(), sb.output(s)), want[s], run, s);
        }
    }
}

// (c): the 4 sequences' bytes at once (one shared byte): store-to-return latency.
void all_run(bench_setup & b, bench_results & r, std::mt19937 & rng) {
    common::seq_bytes sb(k_seqs);
    int8_t shared = 0;
    sb.point_all_at(&shared);
    const double  frac    = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    const outcome o       = decode(b, sb, &shared, frac * r.batch_ref());
    if (o.finished_first) {
        r.batch_ms = std::min(r.batch_ms, o.ms);
    }
    const bool    stopped = o.status == LLAMA_CANCEL_CANCELLED;
    std::fprintf(stderr, "  all: at %.0f%%: %.1f ms, status %d, %.2f ms after the store%s\n", 100 * frac, o.ms,
                 o.status, o.after_store_ms, o.finished_first ? ", finished first" : "");
    r.all_missed += !o.finished_first && !stopped ? 1 : 0;
    if (o.finished_first || stopped) {
        r.all.add(o.after_store_ms, o.finished_first, stopped);
    }
}

// (d): the solo sequence decoded plainly, then with its byte stored at a random 20-80% point.
bool solo_run(bench_setup & b, bench_results & r, std::mt19937 & rng) {
    const outcome plain = decode_solo(b, nullptr, 0);
    if (plain.status != LLAMA_CANCEL_OK) {
        return false;
    }
    r.solo_plain_ms.push_back(plain.ms);
    int8_t        byte    = 0;
    const double  frac    = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    const outcome o       = decode_solo(b, &byte, frac * r.solo_ref());
    if (o.finished_first) {
        r.solo_ms = std::min(r.solo_ms, o.ms);
    }
    const bool    stopped = o.status == LLAMA_CANCEL_CANCELLED;
    std::fprintf(stderr, "  solo: plain %.1f ms; at %.0f%%: status %d, %.2f ms after the store%s\n", plain.ms, 100 * frac,
                 o.status, o.after_store_ms, o.finished_first ? ", finished first" : "");
    r.solo_missed += !o.finished_first && !stopped ? 1 : 0;
    if (o.finished_first || stopped) {
        r.solo.add(o.after_store_ms, o.finished_first, stopped);
    }
    return true;
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
        if (!solo_run(b, r, rng)) {
            return false;
        }
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

// The survivors' logits against the plain run's. Bit-identical on the CPU when the batch is one
// ubatch: the call done again without the dropped sequence is one ubatch too, and each survivor's
// attention spans its own tokens. With smaller ubatches the survivors' rest goes in ubatches of
// other shapes than the plain run's, whose attention spans other cache lengths, so the sums round
// differently: within k_logit_tolerance (measured 4.9e-4 on the bench model at n_ubatch 128, on
// the CPU and over RPC). Off the CPU the same tolerance: a device's kernels may order sums by the
// ubatch's shape too. The README (Limits) and docs/benchmark.md state the same rule.
constexpr double k_logit_tolerance = 5e-3;

bool logits_exact_rule(const seq_options & o, bool cpu) {
    return cpu && o.n_ubatch >= k_seqs * k_len;
}

bool logits_ok(const seq_options & o, const bench_results & r, bool cpu) {
    if (logits_exact_rule(o, cpu)) {
        return r.logits.mismatches == 0;
    }
    return r.logits.max_abs <= k_logit_tolerance;
}

// The rule that applies, as the table and the JSON name it.
std::string logits_rule(const seq_options & o, bool cpu) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "within %g", k_logit_tolerance);
    return logits_exact_rule(o, cpu) ? "bit-identical" : buf;
}

// "3 of 30 differ, max 0.00049: within 0.005: yes".
std::string logits_text(const seq_options & o, const bench_results & r, bool cpu) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%d of %d differ, max %.2g; %s: %s", r.logits.mismatches, r.logits.compared,
                  r.logits.max_abs, logits_rule(o, cpu).c_str(), logits_ok(o, r, cpu) ? "yes" : "NO");
    return buf;
}

// The ubatch in flight at a stop: n_ubatch of the batch's 512 tokens, in equal ubatches.
double ubatch_ms(const seq_options & o, const bench_results & r) {
    return r.plain_p50() * std::min(o.n_ubatch, k_seqs * k_len) / (k_seqs * k_len);
}

// Issue #13's targets, on medians: on a shared machine single runs of the same decode differ by
// hundreds of ms (the plain runs' spread is in the JSON), and a run is one sample of either side.
// The survivors: extra time <= the ubatch in flight + 5% of the plain decode.
double extra_target_ms(const seq_options & o, const bench_results & r) {
    return ubatch_ms(o, r) + 0.05 * r.plain_p50();
}
bool extra_met(const seq_options & o, const bench_results & r) {
    return !r.extra_ms.empty() && common::percentile(r.extra_ms, 0.5) <= extra_target_ms(o, r);
}
// The cancelled sequence: its stop within the single-sequence figures (its median <= their p95),
// both timed on the decoding thread.
bool stop_within(const bench_results & r) {
    return !r.seq_stop.ms.empty() && !r.solo.ms.empty() && r.seq_stop.p50() <= r.solo.p95();
}

// "p50 / p95 / max" of the runs that have a latency, "-" when none has.
std::string lat_text(const common::latencies & l) {
    if (l.ms.empty()) {
        return "-";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f / %.2f / %.2f", l.p50(), l.p95(), common::max_of(l.ms));
    return buf;
}

// "p50 / max", or "-".
std::string pair_text(const std::vector<double> & v, const char * format) {
    if (v.empty()) {
        return "-";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), format, common::percentile(v, 0.5), common::max_of(v));
    return buf;
}

// The two observers' medians: "3.12 / 0.95".
std::string observers_text(const bench_results & r) {
    auto one = [](const common::latencies & l) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.2f", l.p50());
        return l.ms.empty() ? std::string("-") : std::string(buf);
    };
    return one(r.seq_seen) + " / " + one(r.seq_next);
}

void print_header() {
    std::printf("| backend | n_ubatch | runs | plain ms (p50) | single cancel: survivors' extra ms p50 / max | extra %% "
                "of plain p50 / max | ubatch in flight ms | cancelled / finished first / missed | extra p50 <= ubatch + 5%% | "
                "cancelled sequence: store to drop ms p50 / p95 / max | seen first by: polling thread 0.2 ms / decoding thread, p50 | "
                "one sequence alone: store to return ms p50 / p95 / max | finished first / missed | drop p50 <= its p95 | "
                "all 4 cancelled: store to return ms p50 / p95 / max | finished first / missed | survivors' logits: rule: met |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

void print_row(const seq_options & o, const bench_results & r, bool cpu) {
    if (o.header) {
        print_header();
    }
    std::printf("| %s | %d | %d | %.2f | %s | %s | %.1f | %d / %d / %d | %s | %s | %s | %s | %d / %d | %s | %s | %d / %d | %s |\n",
                o.backend.c_str(), o.n_ubatch, o.runs, r.plain_p50(), pair_text(r.extra_ms, "%.2f / %.2f").c_str(),
                pair_text(r.extra_pct, "%.1f / %.1f").c_str(), ubatch_ms(o, r), r.single_cancelled, r.single_first,
                r.single_missed, extra_met(o, r) ? "yes" : "NO", lat_text(r.seq_stop).c_str(),
                observers_text(r).c_str(), lat_text(r.solo).c_str(), r.solo.finished_first,
                r.solo_missed, stop_within(r) ? "yes" : "NO", lat_text(r.all).c_str(), r.all.finished_first,
                r.all_missed, logits_text(o, r, cpu).c_str());
    std::fflush(stdout);
}

// The row's object: the plain decode, the single-sequence cancels (the survivors' extra time and the
// cancelled sequence's stop), the one-sequence reference and the all-sequence cancels.
common::json row_json(const seq_options & o, const std::string & description, const bench_results & r, bool cpu) {
    using common::printed;
    const common::json single = {
        {"extra_ms",
         {{"p50", printed(common::percentile(r.extra_ms, 0.5), "%.4f")},
          {"max", printed(common::max_of(r.extra_ms), "%.4f")}}},
        {"extra_pct_of_plain",
         {{"p50", printed(common::percentile(r.extra_pct, 0.5), "%.2f")},
          {"max", printed(common::max_of(r.extra_pct), "%.2f")}}},
        {"cancelled_count", r.single_cancelled},
        {"finished_first", r.single_first},
        {"missed", r.single_missed},
        {"logits_compared", r.logits.compared},
        {"logits_mismatches", r.logits.mismatches},
        {"logits_max_abs_diff", printed(r.logits.max_abs)}};
    const common::json row = {
        {"backend", o.backend},
        {"description", description},
        {"runs", o.runs},
        {"plain_ms", printed(r.plain_p50(), "%.4f")},
        {"single", single},
        {"all", common::to_json(r.all)},
        {"all_missed", r.all_missed},
        {"n_ubatch", o.n_ubatch},
        {"ubatch_ms", printed(ubatch_ms(o, r), "%.4f")},
        {"seq_stop", common::to_json(r.seq_stop)},
        {"seq_stop_polling_thread", common::to_json(r.seq_seen)},
        {"seq_stop_decoding_thread", common::to_json(r.seq_next)},
        {"solo", common::to_json(r.solo)},
        {"solo_missed", r.solo_missed},
        {"solo_plain_ms", printed(common::percentile(r.solo_plain_ms, 0.5), "%.4f")},
        {"stop_within_single", stop_within(r)},
        {"extra_target_ms", printed(extra_target_ms(o, r), "%.4f")},
        {"extra_le_ubatch_plus_5pct", extra_met(o, r)},
        {"survivor_logits_rule", logits_rule(o, cpu)},
        {"survivor_logits_ok", logits_ok(o, r, cpu)},
        {"plain_all_ms", common::printed_list(r.plain_ms)}};
    return common::with_threads_override(row, "runs");
}

const char k_synopsis[] = "usage: llama-cancel-bench bench-seq --model PATH [--backend cpu|vulkan|rpc1|rpc1-lan] [--runs 10]\n"
                          "       [--n-ubatch 512] [--json FILE] [--threads 2] [--seed 42] [--rpc-server PATH] [--no-header]\n";

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, seq_options & o) {
    cli_args::parser p(k_synopsis);
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--backend", &o.backend, "NAME", "backend setup")
        .option("--json", &o.json, "FILE", "where the JSON goes")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--runs", &o.runs, "N", "runs (>= 1)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--n-ubatch", &o.n_ubatch, "N", "tokens per ubatch, 1..512 (512: the batch is one ubatch)")
        .option("--seed", &o.seed, "N", "random seed")
        .flag("--no-header", &o.header, false, "print the table row alone (the benchmark prints the header)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {!common::is_setup_name(o.backend),
                     "unknown --backend '" + o.backend + "' (" + common::setup_names() + ")"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.threads < 1, "--threads must be at least 1"},
                    {o.n_ubatch < 1 || o.n_ubatch > k_seqs * k_len, "--n-ubatch must be 1..512"}});
}

// A correctness failure, not a timing: the exit status says so (the row's JSON is written first).
bool report_logits(const seq_options & o, const bench_results & r, bool cpu) {
    if (logits_ok(o, r, cpu)) {
        return true;
    }
    if (logits_exact_rule(o, cpu)) {
        std::fprintf(stderr, "FAIL: %d survivors' logits differ from the plain run's (one ubatch on the CPU: they must "
                     "be bit-identical)\n", r.logits.mismatches);
    } else {
        std::fprintf(stderr, "FAIL: survivors' logits differ by %g, more than %g\n", r.logits.max_abs, k_logit_tolerance);
    }
    return false;
}

} // namespace

int bench_seq_main(int argc, char ** argv) {
    seq_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    common::note_threads_override("seq " + o.backend);
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
    const bool logits_ok = report_logits(o, r, b.cpu);
    const bool ok        = o.json.empty() || common::write_json_file(o.json, row_json(o, b.setup.description, r, b.cpu));
    return ok && logits_ok ? 0 : 1;
}
