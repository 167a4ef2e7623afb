// The bench's CPU rows (see bench_cpu.h).
#include "bench/bench_cpu.h"

#include "common/stats.h"
#include "support.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

namespace bench {

namespace {

using common::max_of;
using common::now_ms;
using common::percentile;

// Counts reader calls and those not on the thread that called llama_decode; reads the byte through
// the exported reader so the probe measures exactly what hosts register.
struct thread_probe {
    const int8_t *  byte = nullptr;
    std::thread::id owner;
    int64_t         calls      = 0;
    int64_t         off_thread = 0;

    static bool callback(void * data) {
        auto * p = static_cast<thread_probe *>(data);
        p->calls++;
        if (std::this_thread::get_id() != p->owner) {
            p->off_thread++;
        }
        return llama_cancel_abort_callback(const_cast<int8_t *>(p->byte));
    }
};

// Measures one row after another on the model, each on contexts of its own batch and threads.
class cpu_bench {
  public:
    cpu_bench(const options & opt, llama_model * model) : opt_(opt), model_(model), rng_(opt.seed) {}

    cpu_row run(int batch, int threads, int step, int n_steps) {
        cpu_row r;
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

    // Decodes through llama_cancel_decode (the reader registered) with the byte at `byte`.
    int32_t decode_cancellable(llama_context * ctx, const int8_t * byte, double * t_ret = nullptr) {
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte = byte;
        const int32_t status = llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr);
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

    void overhead(llama_context * ctx, cpu_row & r) {
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

    // The store point is a share of the decode time measured before; a run that finished before its
    // store shows the machine decodes faster now, so later stores follow that run's time.
    void latency(llama_context * ctx, cpu_row & r) {
        std::uniform_real_distribution<double> point(0.30, 0.66);
        double full = r.decode_ms;
        for (int i = 0; i < opt_.runs; ++i) {
            const double at = point(rng_) * full; // the same point for both decodes of the run
            // With the reader: the decode stops.
            {
                int8_t byte = 0;
                double t_store = 0, t_ret = 0;
                const double t0 = now_ms();
                std::thread writer = common::store_at(&byte, t0 + at, &t_store);
                const int32_t status = decode_cancellable(ctx, &byte, &t_ret);
                writer.join();
                switch (common::classify_store(status == LLAMA_CANCEL_CANCELLED, t_store, t_ret)) {
                    case common::store_outcome::stopped:
                        r.cancelled++;
                        r.lat.push_back(t_ret - t_store);
                        break;
                    case common::store_outcome::finished_first:
                        r.completed_early++;
                        full = std::min(full, t_ret - t0);
                        break;
                    case common::store_outcome::late:           r.completed_late++; break;
                }
            }
            // Today, without the reader: the host sees the byte only when llama_decode returns.
            {
                int8_t byte = 0;
                double t_store = 0;
                llama_memory_clear(llama_get_memory(ctx), true);
                common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
                const double t0 = now_ms();
                std::thread writer = common::store_at(&byte, t0 + at, &t_store);
                llama_decode(ctx, b.get());
                const double t_ret = now_ms();
                writer.join();
                if (t_store >= t_ret) {
                    r.today_early++; // returned before the store: counted apart, not as a 0 ms wait
                } else {
                    r.today.push_back(t_ret - t_store);
                }
            }
        }
    }

    // n_ubatch at half the batch, byte stored at 80% of the decode: only the first ubatch may remain.
    // 80% is counted in graph nodes (a first pass counts them), so that the store cannot miss the
    // decode on a noisy machine; the byte is stored from the decode thread's own abort callback.
    void rollback(int batch, int threads, cpu_row & r) {
        r.rollback_ubatch = batch / 2;
        auto ctx = make_ctx(batch, r.rollback_ubatch, threads);
        int8_t byte = 0;
        common::node_trigger trig;
        trig.byte = &byte;
        auto decode = [&] {
            llama_memory_clear(llama_get_memory(ctx.get()), true);
            common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
            llama_cancel_decode_params p = llama_cancel_decode_default_params();
            p.byte                = &byte;
            p.abort_callback      = common::node_trigger::abort_cb;
            p.abort_callback_data = &trig;
            return llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr);
        };
        decode();
        trig.at    = trig.calls * 8 / 10;
        trig.calls = 0;
        r.rollback_status  = decode();
        r.rollback_pos_max = llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0);
        r.rollback_ok = r.rollback_status == LLAMA_CANCEL_CANCELLED && r.rollback_pos_max == r.rollback_ubatch - 1;
    }

    void probe(llama_context * ctx, cpu_row & r) {
        int8_t byte = 0;
        thread_probe p;
        p.byte  = &byte;
        p.owner = std::this_thread::get_id();
        llama_set_abort_callback(ctx, thread_probe::callback, &p);
        llama_memory_clear(llama_get_memory(ctx), true);
        common::seq_batch b(prompt_, 0, static_cast<int32_t>(prompt_.size()), 0);
        llama_decode(ctx, b.get());
        llama_set_abort_callback(ctx, nullptr, nullptr);
        r.probe_calls      = p.calls;
        r.probe_off_thread = p.off_thread;
    }

    void profile(int batch, int threads, cpu_row & r) {
        common::node_timer nt;
        auto ctx = make_ctx(batch, batch, threads, common::node_timer::callback, &nt);
        decode_plain(ctx.get());
        nt = common::node_timer{};
        decode_plain(ctx.get());
        r.longest_node_ms = nt.longest;
        r.longest_node_op = nt.longest_op;
        r.n_nodes         = nt.n_nodes;
    }
};

} // namespace

std::vector<cpu_row> measure_cpu_rows(const options & opt, llama_model * model) {
    cpu_bench b(opt, model);
    std::vector<cpu_row> rows;
    const int n_steps = static_cast<int>(opt.batches.size() * opt.threads.size());
    for (int batch : opt.batches) {
        for (int threads : opt.threads) {
            rows.push_back(b.run(batch, threads, static_cast<int>(rows.size()) + 1, n_steps));
        }
    }
    return rows;
}

namespace {

// "%.3f" of a latency figure, or "-" when no run has one.
std::string ms3(const std::vector<double> & v, double x) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f", x);
    return v.empty() ? "-" : buf;
}

} // namespace

cpu_targets print_cpu_rows(const std::vector<cpu_row> & rows) {
    std::printf("\n| batch | threads | decode ms | reader overhead | (CPU time) | cancel p50 ms | p95 ms | max ms "
                "| today p50 ms | today/ours | longest node ms | max/node | stopped / finished first / late "
                "| off-thread |\n");
    std::printf("|------:|--------:|----------:|----------------:|-----------:|--------------:|-------:|-------:"
                "|-------------:|-----------:|----------------:|---------:|--------------------------------:"
                "|-----------:|\n");
    cpu_targets t;
    int         early = 0, today_early = 0;
    for (const cpu_row & r : rows) {
        const double p50 = percentile(r.lat, 0.5), today50 = percentile(r.today, 0.5), mx = max_of(r.lat);
        char ratio[32] = "-", over_node[32] = "-", stops[48];
        if (!r.lat.empty() && !r.today.empty() && p50 > 0) {
            std::snprintf(ratio, sizeof(ratio), "%.0fx", today50 / p50);
        }
        if (!r.lat.empty() && r.longest_node_ms > 0) {
            std::snprintf(over_node, sizeof(over_node), "%.2f", mx / r.longest_node_ms);
        }
        std::snprintf(stops, sizeof(stops), "%d / %d / %d of %d", r.cancelled, r.completed_early, r.completed_late,
                      r.runs);
        std::printf("| %5d | %7d | %9.2f | %14.2f%% | %9.2f%% | %13s | %6s | %6s | %12s | %10s | %15.3f "
                    "| %8s | %31s | %10" PRId64 " |\n",
                    r.batch, r.threads, r.decode_ms, r.overhead_pct, r.overhead_cpu_pct, ms3(r.lat, p50).c_str(),
                    ms3(r.lat, percentile(r.lat, 0.95)).c_str(), ms3(r.lat, mx).c_str(),
                    ms3(r.today, today50).c_str(), ratio, r.longest_node_ms, over_node, stops, r.probe_off_thread);
        t.overhead = t.overhead && r.overhead_pct <= 1.0;
        t.latency  = t.latency && !r.lat.empty() && mx <= 2.0 * r.longest_node_ms + 1.0;
        t.thread   = t.thread && r.probe_off_thread == 0;
        t.rollback = t.rollback && r.rollback_ok;
        t.stopped  = t.stopped && r.cancelled >= 1 && r.completed_late == 0;
        early += r.completed_early;
        today_early += r.today_early;
    }
    std::printf("\nrollback (n_ubatch = batch/2, byte stored at 80%% of the decode's graph nodes):\n");
    for (const cpu_row & r : rows) {
        std::printf("  batch %3d threads %d: status %s, seq_pos_max %d (first ubatch ends at %d): %s\n", r.batch,
                    r.threads, llama_cancel_status_str(r.rollback_status), r.rollback_pos_max, r.rollback_ubatch - 1,
                    r.rollback_ok ? "ok" : "MISMATCH");
    }
    if (early > 0 || today_early > 0) {
        std::printf("\n%d run(s) with the reader and %d without returned before their store: counted apart, in no "
                    "latency figure\n", early, today_early);
    }
    std::printf("\ntargets: reader overhead <= 1%%: %s; worst latency <= 2x longest node + 1 ms: %s; "
                "off-thread calls 0: %s; every run stored before its return stopped with status 2: %s; rollback "
                "to the first ubatch: %s\n",
                t.overhead ? "met" : "MISSED", t.latency ? "met" : "MISSED", t.thread ? "met" : "MISSED",
                t.stopped ? "met" : "MISSED", t.rollback ? "met" : "MISSED");
    return t;
}

common::json cpu_row_json(const cpu_row & r) {
    using common::printed;
    const double p50 = percentile(r.lat, 0.5), today50 = percentile(r.today, 0.5);
    return {{"batch", r.batch},
            {"threads", r.threads},
            {"decode_ms", printed(r.decode_ms)},
            {"reader_overhead_pct", printed(r.overhead_pct)},
            {"reader_overhead_cpu_time_pct", printed(r.overhead_cpu_pct)},
            {"overhead_pairs", r.pairs},
            {"cancel_ms",
             {{"p50", r.lat.empty() ? common::json(nullptr) : common::json(printed(p50))},
              {"p95", r.lat.empty() ? common::json(nullptr) : common::json(printed(percentile(r.lat, 0.95)))},
              {"max", r.lat.empty() ? common::json(nullptr) : common::json(printed(max_of(r.lat)))},
              {"all", common::printed_list(r.lat)}}},
            {"today_ms",
             {{"p50", r.today.empty() ? common::json(nullptr) : common::json(printed(today50))},
              {"finished_first", r.today_early},
              {"all", common::printed_list(r.today)}}},
            {"today_over_ours",
             p50 > 0 && !r.today.empty() ? common::json(printed(today50 / p50)) : common::json(nullptr)},
            {"cancelled", r.cancelled},
            {"completed_before_store", r.completed_early},
            {"completed_after_store", r.completed_late},
            {"longest_node_ms", printed(r.longest_node_ms)},
            {"longest_node_op", r.longest_node_op},
            {"n_nodes", r.n_nodes},
            {"worst_over_node", r.longest_node_ms > 0 && !r.lat.empty() ? common::json(printed(max_of(r.lat) / r.longest_node_ms))
                                                                         : common::json(nullptr)},
            {"reader_calls", r.probe_calls},
            {"off_thread_calls", r.probe_off_thread},
            {"rollback",
             {{"n_ubatch", r.rollback_ubatch},
              {"status", llama_cancel_status_str(r.rollback_status)},
              {"seq_pos_max", r.rollback_pos_max},
              {"expected_pos_max", r.rollback_ubatch - 1},
              {"ok", r.rollback_ok}}}};
}

} // namespace bench
