// `llama-cancel-bench stress`: cancel/resume cycles at random graph nodes, through both hooks, and cancel
// storms from another thread; after each cancel the memory must hold exactly the committed ubatches,
// and every resumed prefill must end with logits bit-identical to an uninterrupted one. A run fails
// unless it also saw what it exists to see: a minimum of cancels (or dropped sequences) over its
// cycles and of stopped decodes in its storm; it prints what it counted.
#include "commands.h"
#include "common/args.h"
#include "common/seq_bytes.h"
#include "support.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {


struct stress_options {
    std::string model;
    std::string backend    = "cpu";
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         cycles  = 1000;
    int         storm_s = 2;
    int         n       = 256;
    int         ubatch  = 32;
    uint32_t    seed    = 1;
    bool        seq_cancel = false;
    // What a run must have seen to pass (issue #26: a trigger that never fires must fail the run):
    // cancels (--seq-cancel: dropped sequences) over the cycles, -1: half the cycles; stops in the storm.
    int         min_cancels       = -1;
    int         min_storm_cancels = 1;

    int min_cycle_cancels() const { return min_cancels >= 0 ? min_cancels : cycles / 2; }
};

// The storm goes on past --storm-seconds until it has seen its minimum of stops, up to this many
// times as long: a run whose stops are rare still ends, and fails.
constexpr int k_storm_extension = 5;

// --seq-cancel: each cycle decodes 4 sequences x 32 tokens in one batch and stores one or two
// sequences' bytes at a random graph node (llama_cancel_decode_params.seq_bytes).
constexpr int k_seqs    = 4;
constexpr int k_seq_len = 32;

// The node trigger plus an optional second byte stored at the same node, right after the first.
struct seq_trigger {
    common::node_trigger t;
    int8_t *          second = nullptr;

    void after() const {
        if (second != nullptr && __atomic_load_n(t.byte, __ATOMIC_RELAXED) != 0) {
            __atomic_store_n(second, 1, __ATOMIC_RELAXED);
        }
    }
    static bool abort_cb(void * d) {
        auto * s = static_cast<seq_trigger *>(d);
        common::node_trigger::abort_cb(&s->t);
        s->after();
        return false;
    }
    static bool eval_cb(ggml_tensor * x, bool ask, void * d) {
        auto *     s = static_cast<seq_trigger *>(d);
        const bool r = common::node_trigger::eval_cb(x, ask, &s->t);
        if (!ask) {
            s->after();
        }
        return r;
    }
};

struct seq_stress {
    const stress_options &                o;
    llama_model *                         model;
    bool                                  exact; // CPU: survivors' logits bit for bit
    std::vector<std::vector<llama_token>> prompts;
    seq_trigger                           trig;
    int8_t                                idle = 0; // the trigger's byte while no store is planned
    common::hook_ptr                         hook;
    common::context_ptr                      ctx[2]; // 0: abort callback, 1: eval hook
    std::vector<std::vector<float>>       want[2];
    int                                   ticks[2] = {0, 0};
    long                                  drops = 0, kept_tokens = 0, late = 0, errors = 0;
    double                                max_diff = 0.0;

    seq_stress(const stress_options & opt, llama_model * m, bool bit_exact) : o(opt), model(m), exact(bit_exact) {}

    bool make(bool offloaded) {
        trig.t.byte = &idle;
        hook        = common::make_hook(seq_trigger::eval_cb, &trig);
        common::context_options opt;
        opt.n_ctx       = static_cast<uint32_t>(std::max(o.n, k_seqs * k_seq_len));
        opt.n_batch     = k_seqs * k_seq_len;
        opt.n_ubatch    = static_cast<uint32_t>(o.ubatch);
        opt.n_threads   = 1;
        opt.n_seq_max   = k_seqs;
        opt.offload_kqv = offloaded;
        ctx[0]           = common::make_context(model, opt);
        opt.cb_eval      = llama_cancel_hook_eval_callback;
        opt.cb_eval_data = hook.get();
        ctx[1]           = common::make_context(model, opt);
        return ctx[0] && ctx[1];
    }

    int32_t decode(int mode, common::seq_bytes & sb, llama_cancel_decode_result & r) {
        llama_memory_clear(llama_get_memory(ctx[mode].get()), true);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        if (mode == 0) {
            p.abort_callback      = seq_trigger::abort_cb;
            p.abort_callback_data = &trig;
        } else {
            p.hook = hook.get();
        }
        sb.fill(p);
        common::multi_seq_batch b(prompts, k_seq_len);
        return llama_cancel_decode(ctx[mode].get(), b.get(), &p, &r, sb.seqs());
    }

    // Uninterrupted decodes: the reference logits, and the trigger calls a whole decode makes.
    bool reference(int mode) {
        common::seq_bytes sb(k_seqs);
        llama_cancel_decode_result r;
        trig.t.calls = 0;
        trig.t.at    = -1;
        if (decode(mode, sb, r) != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "error: reference decode failed: %s\n", r.message);
            return false;
        }
        ticks[mode] = trig.t.calls;
        for (int s = 0; s < k_seqs; ++s) {
            want[mode].push_back(common::logits_at(ctx[mode].get(), model, sb.output(s)));
            if (want[mode].back().empty()) {
                std::fprintf(stderr, "error: reference decode left sequence %d without logits (output %d)\n", s,
                             sb.output(s));
                return false;
            }
        }
        return true;
    }

    void fail(int c, const char * what, int s) {
        std::fprintf(stderr, "FAIL seq cycle %d: %s (sequence %d)\n", c, what, s);
        ++errors;
    }

    // A survivor's memory and last logits; a dropped sequence's memory holds its committed tokens
    // (the ubatches finished before its stop), short of its whole prompt.
    void check_seq(int c, int mode, const common::seq_bytes & sb, int s) {
        const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(ctx[mode].get()), s);
        if (!sb.written(s)) {
            fail(c, "the call left its n_committed or output unwritten", s);
            return;
        }
        if (sb.cancelled(s)) {
            if (sb.bytes[s] == 0 || sb.output(s) != -1 || sb.committed(s) >= k_seq_len ||
                pos_max != sb.committed(s) - 1) {
                fail(c, "dropped without its byte, with an output, whole, or memory beyond its committed tokens", s);
            }
            kept_tokens += sb.committed(s);
            return;
        }
        late += sb.bytes[s] != 0 ? 1 : 0; // stored once its tokens were all computed: kept
        if (sb.committed(s) != k_seq_len) {
            fail(c, "survivor's n_committed is not its whole prompt", s);
        }
        const auto got = common::logits_at(ctx[mode].get(), model, sb.output(s));
        if (pos_max != k_seq_len - 1 || got.size() != want[mode][s].size()) {
            fail(c, "survivor's memory incomplete or no output", s);
            return;
        }
        for (size_t i = 0; i < got.size(); ++i) {
            max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[mode][s][i])));
        }
        if (exact && got != want[mode][s]) {
            fail(c, "survivor's logits differ from the uninterrupted decode's", s);
        }
    }

    void cycle(int c, int mode, std::mt19937 & rng) {
        common::seq_bytes sb(k_seqs);
        const int a   = std::uniform_int_distribution<int>(0, k_seqs - 1)(rng);
        const int b   = (a + std::uniform_int_distribution<int>(1, k_seqs - 1)(rng)) % k_seqs;
        trig.t.byte   = &sb.bytes[a];
        trig.second   = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? &sb.bytes[b] : nullptr;
        trig.t.calls  = 0;
        trig.t.at     = std::uniform_int_distribution<int>(1, ticks[mode])(rng);
        llama_cancel_decode_result r;
        const int32_t st = decode(mode, sb, r);
        if (st != LLAMA_CANCEL_OK) {
            fail(c, r.message[0] ? r.message : "status not OK", a);
        }
        int marked = 0;
        for (int s = 0; s < k_seqs; ++s) {
            marked += sb.cancelled(s) ? 1 : 0;
            check_seq(c, mode, sb, s);
        }
        if (marked != r.n_seq_cancelled) {
            fail(c, "n_seq_cancelled disagrees with the seqs[].cancelled entries", a);
        }
        drops += marked;
        trig.t.byte = &idle;
        trig.second = nullptr;
    }

    int run(const std::string & backend, bool cpu) {
        for (int mode = 0; mode < 2; ++mode) {
            if (!reference(mode)) {
                return 1;
            }
        }
        if (ticks[1] == 0) {
            std::fprintf(stderr, "error: the hook's chain was never called\n");
            return 1;
        }
        if (exact && want[0] != want[1]) {
            std::fprintf(stderr, "FAIL: the hooked context's uninterrupted logits differ\n");
            return 1;
        }
        std::mt19937 rng(o.seed);
        const double t0 = common::now_ms();
        for (int c = 0; c < o.cycles; ++c) {
            // Off the CPU the abort callback is not called (ticks 0): the hook alone.
            const int mode = cpu && ticks[0] > 0 ? c % 2 : 1;
            cycle(c, mode, rng);
        }
        const long need = o.min_cycle_cancels();
        std::printf("seq-cancel stress on %s: %d cycles, %ld sequences dropped (at least %ld required; %ld of their "
                    "tokens committed before the stop), %ld stored after their tokens were done (kept), %ld errors; "
                    "survivors' logits %s (max |diff| %g)\n",
                    backend.c_str(), o.cycles, drops, need, kept_tokens, late, errors,
                    exact ? "bit-identical to the uninterrupted decode's" : "compared", max_diff);
        if (drops < need) {
            std::fprintf(stderr, "FAIL: %ld sequences dropped, fewer than the %ld required: the bytes did not stop "
                                 "the decodes\n", drops, need);
        }
        return errors == 0 && drops >= need ? 0 : 1;
    }
};

// The prefill stress: one context stopped through the abort callback (mode 0, the trigger chained
// as the caller's), one through the eval hook (mode 1, the trigger chained behind it).
struct prefill_stress {
    const stress_options &          o;
    llama_model *                   model;
    const std::vector<llama_token> & prompt;
    common::node_trigger               trig;
    int8_t                          byte = 0;
    common::hook_ptr                   hook;
    common::context_ptr                plain, hooked;
    std::vector<float>              want;
    int                             ticks[2] = {0, 0};
    long                            cancels = 0, completions = 0, errors = 0;
    double                          t_cycles = 0.0; // ms
    long                            storm_decodes = 0, storm_cancelled = 0, storm_toggles = 0;

    prefill_stress(const stress_options & opt, llama_model * m, const std::vector<llama_token> & p)
        : o(opt), model(m), prompt(p) {}

    bool make(bool offloaded) {
        trig.byte = &byte;
        hook      = common::make_hook(common::node_trigger::eval_cb, &trig);
        common::context_options opt;
        opt.n_ctx        = static_cast<uint32_t>(o.n);
        opt.n_batch      = static_cast<uint32_t>(o.n);
        opt.n_ubatch     = static_cast<uint32_t>(o.ubatch);
        opt.n_threads    = 1;
        opt.offload_kqv  = offloaded;
        plain            = common::make_context(model, opt);
        opt.cb_eval      = llama_cancel_hook_eval_callback;
        opt.cb_eval_data = hook.get();
        hooked           = common::make_context(model, opt);
        return plain && hooked;
    }

    llama_context * ctx(int mode) const { return mode == 0 ? plain.get() : hooked.get(); }

    llama_cancel_decode_params params_for(int mode) {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte = &byte;
        if (mode == 0) {
            p.abort_callback      = common::node_trigger::abort_cb;
            p.abort_callback_data = &trig;
        } else {
            p.hook = hook.get();
        }
        return p;
    }

    // The reference logits, and the number of trigger calls a whole prefill makes on each path.
    bool reference() {
        for (int mode = 0; mode < 2; ++mode) {
            trig.calls = 0;
            trig.at    = -1;
            const llama_cancel_decode_params p = params_for(mode);
            common::seq_batch b(prompt, 0, o.n, 0);
            if (llama_cancel_decode(ctx(mode), b.get(), &p, nullptr, nullptr) != LLAMA_CANCEL_OK) {
                std::fprintf(stderr, "error: reference decode failed\n");
                return false;
            }
            ticks[mode] = trig.calls;
            const auto got = common::last_logits(ctx(mode));
            if (mode == 0) {
                want = got;
            } else if (got != want) {
                std::fprintf(stderr, "FAIL: the hooked context's uninterrupted logits differ\n");
                return false;
            }
        }
        return true;
    }

    // One cycle: cancel at a random point, resume from the committed position, until the prefill
    // is whole; then the logits against the reference.
    void cycle(int c, std::mt19937 & rng) {
        const int mode = c % 2; // alternate: abort callback, eval hook
        llama_context * lctx = ctx(mode);
        llama_memory_clear(llama_get_memory(lctx), true);
        int committed = 0;
        for (int attempt = 0; committed < o.n; ++attempt) {
            byte       = 0;
            trig.calls = 0;
            trig.at    = attempt < 3 ? std::uniform_int_distribution<int>(1, ticks[mode])(rng) : -1;
            const llama_cancel_decode_params p = params_for(mode);
            llama_cancel_decode_result r;
            common::seq_batch b(prompt, committed, o.n - committed, committed);
            const int32_t st = llama_cancel_decode(lctx, b.get(), &p, &r, nullptr);
            const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(lctx), 0);
            if (st == LLAMA_CANCEL_ERROR) {
                std::fprintf(stderr, "FAIL cycle %d: error %s\n", c, r.message);
                ++errors;
                break;
            }
            if (st == LLAMA_CANCEL_CANCELLED && byte == 0) {
                std::fprintf(stderr, "FAIL cycle %d: cancelled with the byte at 0\n", c);
                ++errors;
                break;
            }
            committed += r.n_committed;
            if (pos_max != committed - 1 || (committed % o.ubatch != 0 && committed != o.n)) {
                std::fprintf(stderr, "FAIL cycle %d: memory ends at %d, committed %d (status %s)\n", c, pos_max,
                             committed, llama_cancel_status_str(st));
                ++errors;
                break;
            }
            cancels += st == LLAMA_CANCEL_CANCELLED;
        }
        if (committed == o.n) {
            ++completions;
            if (common::last_logits(lctx) != want) {
                std::fprintf(stderr, "FAIL cycle %d: resumed logits differ from the uninterrupted ones\n", c);
                ++errors;
            }
        }
    }

    void run_cycles() {
        std::mt19937 rng(o.seed);
        const double t0 = common::now_ms();
        for (int c = 0; c < o.cycles; ++c) {
            cycle(c, rng);
            if ((c + 1) % 1000 == 0) {
                std::fprintf(stderr, "  %d cycles, %ld cancels, %ld errors\n", c + 1, cancels, errors);
            }
        }
        t_cycles = common::now_ms() - t0;
    }

    // One prefill under the storm, resumed after each stop; memory checked after each call.
    void storm_prefill(int k) {
        llama_context * lctx = ctx(k % 2);
        llama_memory_clear(llama_get_memory(lctx), true);
        int committed = 0;
        for (int attempt = 0; committed < o.n && attempt < 10000; ++attempt) {
            trig.at = -1;
            llama_cancel_decode_params p = llama_cancel_decode_default_params();
            p.byte = &byte;
            p.hook = k % 2 == 0 ? nullptr : hook.get();
            llama_cancel_decode_result r;
            common::seq_batch b(prompt, committed, o.n - committed, committed);
            const int32_t st = llama_cancel_decode(lctx, b.get(), &p, &r, nullptr);
            committed += r.n_committed;
            ++storm_decodes;
            storm_cancelled += st == LLAMA_CANCEL_CANCELLED;
            if (st == LLAMA_CANCEL_ERROR || llama_memory_seq_pos_max(llama_get_memory(lctx), 0) != committed - 1) {
                std::fprintf(stderr, "FAIL storm: status %s, memory ends at %d, committed %d\n",
                             llama_cancel_status_str(st), llama_memory_seq_pos_max(llama_get_memory(lctx), 0),
                             committed);
                ++errors;
                break;
            }
        }
        if (committed == o.n && common::last_logits(lctx) != want) {
            std::fprintf(stderr, "FAIL storm: logits after resumes differ\n");
            ++errors;
        }
    }

    // Cancel storm: another thread toggles the byte as fast as it can while decodes run.
    void run_storm() {
        std::atomic<bool> stop{false};
        std::atomic<long> toggles{0};
        // How long the byte stays set each time, ms: a few microseconds, widened (up to 1 ms) while a
        // second passes without a stop, so that a loaded machine, whose storm thread runs seldom,
        // still lands stores inside decodes instead of failing the minimum.
        std::atomic<double> window_ms{0.005};
        std::thread storm([&] {
            // Thousands of set/reset pairs a second.
            while (!stop.load(std::memory_order_relaxed)) {
                __atomic_store_n(&byte, 1, __ATOMIC_RELAXED);
                const double until = common::now_ms() + window_ms.load(std::memory_order_relaxed);
                while (common::now_ms() < until) {
                }
                __atomic_store_n(&byte, 0, __ATOMIC_RELAXED);
                toggles.fetch_add(1, std::memory_order_relaxed);
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        });
        // --storm-seconds, then on until the minimum of stops was seen, for a bounded time.
        const double t0 = common::now_ms(), end = t0 + o.storm_s * 1000.0;
        const double limit = t0 + k_storm_extension * o.storm_s * 1000.0;
        double last_check = t0;
        long   seen       = 0;
        for (int k = 0; common::now_ms() < end || (storm_cancelled < o.min_storm_cancels && common::now_ms() < limit);
             ++k) {
            storm_prefill(k);
            if (common::now_ms() - last_check >= 1000.0) {
                if (storm_cancelled == seen) {
                    window_ms = std::min(1.0, window_ms.load() * 4.0);
                }
                seen       = storm_cancelled;
                last_check = common::now_ms();
            }
        }
        stop = true;
        storm.join();
        storm_toggles = toggles.load();
        std::printf("storm: %.1f s, %ld byte toggles, %ld decodes, %ld cancelled (at least %d required), memory %s\n",
                    (common::now_ms() - t0) / 1000.0, storm_toggles, storm_decodes, storm_cancelled,
                    o.min_storm_cancels, errors == 0 ? "consistent after each" : "NOT consistent (see above)");
    }

    // The run saw what it exists to see: cancels over the cycles, stops in the storm.
    bool saw_enough() const {
        bool ok = true;
        if (cancels < o.min_cycle_cancels()) {
            std::fprintf(stderr, "FAIL: %ld cancels over %d cycles, fewer than the %d required: the byte did not stop "
                                 "the decodes\n", cancels, o.cycles, o.min_cycle_cancels());
            ok = false;
        }
        if (o.storm_s > 0 && storm_cancelled < o.min_storm_cancels) {
            std::fprintf(stderr, "FAIL: the storm stopped %ld decodes, fewer than the %d required\n", storm_cancelled,
                         o.min_storm_cancels);
            ok = false;
        }
        return ok;
    }
};

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, stress_options & o) {
    cli_args::parser p("usage: llama-cancel-bench stress --model PATH [--backend cpu|blas|vulkan|rpc1|rpc2|rpc1-lan|rpc2-lan]\n"
                     "                                 [--cycles 1000] [--storm-seconds 2] [--seed 1] [--seq-cancel]\n"
                     "                                 [--min-cancels N] [--min-storm-cancels 1]\n");
    p.option("--model", &o.model, "PATH", "model to decode (required)")
        .option("--backend", &o.backend, "NAME", "backend setup")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server")
        .option("--cycles", &o.cycles, "N", "cancel/resume cycles (>= 0)")
        .option("--storm-seconds", &o.storm_s, "S", "seconds of cancel storm (>= 0)")
        .option("--seed", &o.seed, "N", "random seed")
        .flag("--seq-cancel", &o.seq_cancel, true, "per-sequence cancel inside a 4-sequence batch instead")
        .option("--min-cancels", &o.min_cancels, "N",
                "cancels (--seq-cancel: dropped sequences) the cycles must see; -1: half the cycles")
        .option("--min-storm-cancels", &o.min_storm_cancels, "N",
                "stopped decodes the storm must see (it runs on, up to 5x --storm-seconds, until it has)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {!common::is_setup_name(o.backend),
                     "unknown --backend '" + o.backend + "' (" + common::setup_names() + ")"},
                    {o.cycles < 0, "--cycles must be at least 0"},
                    {o.storm_s < 0, "--storm-seconds must be at least 0"},
                    {o.min_cancels < -1, "--min-cancels must be -1 (half the cycles) or more"},
                    {o.min_storm_cancels < 0, "--min-storm-cancels must be at least 0"}});
}

// --seq-cancel: the 4 sequences cut from the prompt, stopped one or two at a time.
int run_seq_stress(const stress_options & o, llama_model * model, const std::vector<llama_token> & prompt,
                   bool cpu) {
    seq_stress ss(o, model, cpu);
    for (int s = 0; s < k_seqs; ++s) {
        ss.prompts.emplace_back(prompt.begin() + s * k_seq_len, prompt.begin() + (s + 1) * k_seq_len);
    }
    if (!ss.make(!cpu)) {
        std::fprintf(stderr, "error: cannot create contexts\n");
        return 1;
    }
    return ss.run(o.backend, cpu);
}

int run_prefill_stress(const stress_options & o, llama_model * model, const std::vector<llama_token> & prompt,
                       const common::backend_setup & setup) {
    prefill_stress ps(o, model, prompt);
    if (!ps.make(!setup.devices.empty())) {
        std::fprintf(stderr, "error: cannot create contexts\n");
        return 1;
    }
    if (!ps.reference()) {
        return 1;
    }
    ps.run_cycles();
    if (o.storm_s > 0) {
        ps.run_storm();
    }
    std::printf("stress on %s (%s): %d cycles (%ld cancels, at least %d required; %ld completed prefills) in %.1f s, "
                "%ld errors; final logits bit-identical to the uninterrupted prefill in every cycle: %s\n",
                o.backend.c_str(), setup.description.c_str(), o.cycles, ps.cancels, o.min_cycle_cancels(),
                ps.completions, ps.t_cycles / 1000.0, ps.errors, ps.errors == 0 ? "yes" : "NO");
    const bool enough = ps.saw_enough();
    return ps.errors == 0 && enough ? 0 : 1;
}

} // namespace

int stress_main(int argc, char ** argv) {
    stress_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    common::backend_setup setup;
    if (!common::setup_backend(o.backend, o.rpc_server, 1, setup)) {
        return 1;
    }
    common::model_ptr model = setup.load(o.model, -1);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", o.model.c_str());
        return 1;
    }
    const auto prompt = common::make_prompt(model.get(), o.n, o.seed);
    if (o.seq_cancel) {
        return run_seq_stress(o, model.get(), prompt, setup.devices.empty());
    }
    return run_prefill_stress(o, model.get(), prompt, setup);
}
