// The text-to-speech rows of the benchmark (`llama-cancel-bench bench-tts qwen3tts|pockettts`), in their
// own process, on a generated pair (scripts/make_tts.py) and a backend setup (cpu, vulkan): for each
// step of a frame, GEN_CODE (code predictor or flow step), GEN_WAV (code2wav or the mimi decoder, a
// whole window) and the backbone's decode of a frame's feedback row, the stop latency of a byte
// stored at a random point inside the call, through the hook and through the stateless callbacks,
// against today's host that polls its byte between steps (the call runs to its end); and the byte
// at 0's cost per frame (GEN_CODE + decode + a window's GEN_WAV / window), paired runs.
//
// Each step is called as the generation calls it: llama_cancel_mtmd_gen_audio_process for the clip
// graphs (the same run as llama_cancel_tts_generate's) and llama_cancel_decode of one embedding row
// for the backbone; today's: mtmd_gen_audio_process and llama_decode. A store lands inside a call
// by time: a writer thread, started and waiting before the call, takes the call's start time and
// stores at `frac` of the call's uninterrupted median after it (no thread start inside the timed
// part: a frame decode lasts well under a millisecond); a call that returned before the store
// finished first and is counted apart, never as a latency. A store that reaches a call after its
// last checkpoint lets it complete with valid outputs (late: its latency is in the figures, and the
// generation's check between steps returns CANCELLED next).
#include "bench/bench_tts.h"
#include "common/args.h"
#include "common/backends.h"
#include "common/json.h"
#include "common/stats.h"
#include "commands.h"
#include "support.h"

#include "mtmd-helper.h"
#include "mtmd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using mtmd_ptr = mtmd::context_ptr;

// The ways a step runs: today (plain contexts, the byte unread inside a call), the hooks, the
// stateless callbacks bound by name (cb_eval of both contexts, the backbone's abort callback).
enum way { today = 0, hooks = 1, stateless = 2, n_ways = 3 };
const char * const k_way_names[n_ways] = {"today (between steps)", "hook", "stateless callbacks"};
const char * const k_way_keys[n_ways]  = {"today", "hook", "stateless"};

// The steps of a frame.
enum step { gen_code = 0, frame_decode = 1, gen_wav = 2, n_steps = 3 };
const char * const k_step_names[n_steps] = {"GEN_CODE", "frame decode", "GEN_WAV"};
const char * const k_step_keys[n_steps]  = {"gen_code", "frame_decode", "gen_wav"};

constexpr int32_t k_prompt_rows = 32; // positions in memory before the frame decode

struct tts_options {
    std::string pipeline, model, mmproj, json, backend = "cpu";
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         runs = 5, threads = 1, repeats = bench_tts::k_repeats, window = 0;
    bool        header = true;
    uint32_t    seed   = 42;
};

struct landed {
    double ms             = 0.0;
    bool   finished_first = false;
    bool   stopped        = false;
    bool   late           = false; // the store came before the return, the call completed
    int    checkpoints    = 0;     // the hook's, during the call (the hook way)
    int    asks           = 0;     // nodes the hook was asked about, during the call
};

struct tts_bench {
    common::backend_setup setup;
    common::model_ptr     model;
    bool                  cpu = true;
    common::hook_ptr      mtmd_hook, dec_hook;
    mtmd_ptr              mctx[n_ways];
    common::context_ptr   lctx[n_ways];
    int8_t                bytes[n_ways] = {0, 0, 0}; // today's is stored and never read inside a call
    mtmd_gen_audio_type   type = MTMD_GEN_AUDIO_TYPE_NONE;
    int32_t               window = 0, n_embd = 0, n_embd_inp = 0, sections = 1;
    std::vector<float>    h, row, prompt;
    std::vector<int32_t>  codes; // a window's frames (Qwen3-TTS)
    std::vector<float>    feats; // (Pocket-TTS)
    std::string           error;

    bool fail(const std::string & why) {
        error = why;
        return false;
    }

    common::context_ptr context(int w, int threads) {
        common::context_options opt;
        opt.n_ctx       = 256;
        opt.n_batch     = opt.n_ubatch = 64;
        opt.n_threads   = threads;
        opt.embeddings  = true;
        opt.offload_kqv = !cpu;
        if (w == hooks) {
            opt.cb_eval      = llama_cancel_hook_eval_callback;
            opt.cb_eval_data = dec_hook.get();
        } else if (w == stateless) {
            opt.cb_eval             = llama_cancel_eval_callback;
            opt.cb_eval_data        = &bytes[stateless];
            opt.abort_callback      = llama_cancel_abort_callback;
            opt.abort_callback_data = &bytes[stateless];
        }
        return common::make_context(model.get(), opt);
    }

    // n rows of `embd` from position pos0 of sequence 0 (M-RoPE: the position in every section).
    int32_t decode_rows(llama_context * ctx, const float * embd, int32_t n, llama_pos pos0, int w) {
        std::vector<llama_pos>      pos(static_cast<size_t>(n) * sections);
        std::vector<int32_t>        n_seq(n, 1);
        llama_seq_id                seq0 = 0;
        std::vector<llama_seq_id *> seq(n, &seq0);
        std::vector<int8_t>         logits(n, 0);
        for (int32_t s = 0; s < sections; ++s) {
            for (int32_t i = 0; i < n; ++i) {
                pos[static_cast<size_t>(s) * n + i] = pos0 + i;
            }
        }
        logits[n - 1] = 1;
        const llama_batch b{n, nullptr, const_cast<float *>(embd), pos.data(), n_seq.data(), seq.data(), logits.data()};
        if (w == today) {
            return llama_decode(ctx, b);
        }
        llama_cancel_decode_params dp = llama_cancel_decode_default_params();
        dp.byte = &bytes[w];
        dp.hook = w == hooks ? dec_hook.get() : nullptr;
        llama_cancel_decode_result dr{};
        return llama_cancel_decode(ctx, b, &dp, &dr, nullptr);
    }

    mtmd_gen_inp code_input(int w, uint32_t seed) {
        mtmd_gen_inp inp = mtmd_gen_inp_default(mctx[w].get());
        inp.type  = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
        inp.code0 = 5;
        inp.embd  = h.data();
        inp.seed  = seed;
        return inp;
    }

    mtmd_gen_inp wav_input(int w) {
        mtmd_gen_inp inp = mtmd_gen_inp_default(mctx[w].get());
        inp.type = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
        if (type == MTMD_GEN_AUDIO_TYPE_QWEN3TTS) {
            inp.codes   = codes.data();
            inp.n_codes = codes.size();
        } else {
            inp.feats   = feats.data();
            inp.n_feats = feats.size();
        }
        return inp; // no state: the first window, every time
    }

    // Each way's projector and backbone contexts, anew (the prompt rows not yet decoded).
    bool make_contexts(const tts_options & o) {
        for (int w = 0; w < n_ways; ++w) {
            mctx[w].reset();
            lctx[w].reset();
        }
        llama_cancel_load_result lr;
        mctx[today].reset(llama_cancel_mtmd_init_from_file(o.mmproj.c_str(), model.get(), nullptr, o.threads, !cpu,
                                                           nullptr, &lr));
        mctx[hooks].reset(llama_cancel_mtmd_init_from_file(o.mmproj.c_str(), model.get(), mtmd_hook.get(), o.threads,
                                                           !cpu, nullptr, &lr));
        mtmd_context_params mp = mtmd_context_params_default();
        mp.use_gpu             = !cpu;
        mp.print_timings       = false;
        mp.warmup              = false;
        mp.n_threads           = o.threads;
        mp.cb_eval             = llama_cancel_eval_callback;
        mp.cb_eval_user_data   = &bytes[stateless];
        mctx[stateless].reset(mtmd_init_from_file(o.mmproj.c_str(), model.get(), mp));
        if (!mctx[today] || !mctx[hooks] || !mctx[stateless]) {
            return fail("cannot load " + o.mmproj + ": " + lr.message);
        }
        for (int w = 0; w < n_ways; ++w) {
            lctx[w] = context(w, o.threads);
            if (!lctx[w]) {
                return fail("cannot create the backbone's contexts");
            }
        }
        return true;
    }

    // The prompt rows in each way's backbone memory (prompt: n_embd_inp floats a row).
    bool decode_prompts() {
        for (int w = 0; w < n_ways; ++w) {
            if (decode_rows(lctx[w].get(), prompt.data(), k_prompt_rows, 0, today) != 0) {
                return fail("cannot decode the prompt rows");
            }
        }
        return true;
    }

    bool make(const tts_options & o) {
        if (!common::setup_backend(o.backend, o.rpc_server, o.threads, setup)) {
            return fail("cannot set up backend " + o.backend);
        }
        cpu   = setup.devices.empty();
        model = setup.load(o.model, -1);
        if (!model) {
            return fail("cannot load " + o.model);
        }
        mtmd_hook = common::make_hook();
        dec_hook = common::make_hook();
        if (!make_contexts(o)) {
            return false;
        }
        type = mtmd_gen_audio_get_info(mctx[today].get()).type;
        if (type != (o.pipeline == "qwen3tts" ? MTMD_GEN_AUDIO_TYPE_QWEN3TTS : MTMD_GEN_AUDIO_TYPE_POCKETTTS)) {
            return fail(o.mmproj + " is not a " + o.pipeline + " projector");
        }
        window     = o.window > 0 ? o.window : type == MTMD_GEN_AUDIO_TYPE_QWEN3TTS ? 72 : 8;
        n_embd     = llama_model_n_embd(model.get());
        n_embd_inp = llama_model_n_embd_inp(model.get());
        const int rope = llama_model_rope_type(model.get());
        sections       = rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE ? 4 : 1;
        std::mt19937 rng(o.seed);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        h.resize(static_cast<size_t>(n_embd));
        for (float & x : h) x = normal(rng);
        prompt.resize(static_cast<size_t>(n_embd_inp) * (k_prompt_rows + 1));
        for (float & x : prompt) x = 0.1f * normal(rng);
        row.assign(prompt.end() - n_embd_inp, prompt.end());
        if (!decode_prompts()) {
            return false;
        }
        // A window's frames: GEN_CODE outputs, as the generation collects them.
        for (int32_t f = 0; f < window; ++f) {
            mtmd_gen_inp inp = code_input(today, o.seed + 1000 + f);
            mtmd_gen_out out{};
            if (mtmd_gen_audio_process(mctx[today].get(), &inp, &out) != 0) {
                return fail("GEN_CODE failed");
            }
            if (out.codes != nullptr) codes.insert(codes.end(), out.codes, out.codes + out.n_codes);
            if (out.feats != nullptr) feats.insert(feats.end(), out.feats, out.feats + out.n_feats);
        }
        if (codes.empty() && feats.empty()) {
            return fail("GEN_CODE gave neither codes nor latents");
        }
        return true;
    }

    // The longest single node of today's GEN_CODE and GEN_WAV calls, on a projector context of its
    // own whose eval callback asks for every node, each timed on the second of two calls (the first
    // builds what a backend builds once). GEN_CODE first: libmtmd 0.7.0's deferred warmup asserts
    // when a context's first call is Pocket-TTS's GEN_WAV. What no checkpoint can split.
    bool profile_nodes(const tts_options & o, common::node_timer (&nt)[n_steps]) {
        common::node_timer  timer;
        mtmd_context_params mp = mtmd_context_params_default();
        mp.use_gpu             = !cpu;
        mp.print_timings       = false;
        mp.n_threads           = o.threads;
        mp.cb_eval             = common::node_timer::callback;
        mp.cb_eval_user_data   = &timer;
        mtmd_ptr m(mtmd_init_from_file(o.mmproj.c_str(), model.get(), mp));
        if (!m) {
            return fail("cannot load " + o.mmproj);
        }
        std::swap(mctx[today], m);
        bool ok = true;
        for (int s : {gen_code, gen_wav}) {
            for (int i = 0; i < 2; ++i) {
                timer = common::node_timer{};
                run(s, today, 0, 0, o.seed + static_cast<uint32_t>(i), &ok);
            }
            nt[s] = timer;
        }
        std::swap(mctx[today], m);
        return ok || fail("a step failed under the node timer");
    }

    // One call of step `s` the way `w`; the byte stored at `frac` of `full` ms after it begins when
    // frac > 0. False in *ok when the call failed.
    landed run(int s, int w, double frac, double full, uint32_t seed, bool * ok) {
        bytes[w] = 0;
        llama_cancel_hook * hook = s == frame_decode ? dec_hook.get() : mtmd_hook.get();
        const llama_cancel_hook_stats st0 = llama_cancel_hook_get_stats(hook);
        const llama_cancel_gen_audio_params rp{&bytes[w], w == hooks ? mtmd_hook.get() : nullptr};
        double            t_store = 0.0;
        int32_t           st      = 0;
        std::atomic<bool> ready{false}, go{false};
        double            t0 = 0.0;
        std::thread       writer;
        if (frac > 0) {
            writer = std::thread([&] {
                ready.store(true, std::memory_order_release);
                while (!go.load(std::memory_order_acquire)) {
                }
                t_store = common::store_when(&bytes[w], t0 + frac * full);
            });
            while (!ready.load(std::memory_order_acquire)) {
            }
        }
        t0 = common::now_ms();
        go.store(true, std::memory_order_release);
        if (s == frame_decode) {
            st = decode_rows(lctx[w].get(), row.data(), 1, k_prompt_rows, w);
            // The row's output computed, every way: llama_decode returns before a GPU-API backend
            // computed it, and the next way's call (same device) would wait for the rest.
            llama_synchronize(lctx[w].get());
        } else {
            mtmd_gen_inp inp = s == gen_code ? code_input(w, seed) : wav_input(w);
            mtmd_gen_out out{};
            st = w == today ? mtmd_gen_audio_process(mctx[w].get(), &inp, &out)
                            : llama_cancel_mtmd_gen_audio_process(mctx[w].get(), &inp, &out, &rp, nullptr);
        }
        const double t_ret = common::now_ms();
        if (writer.joinable()) {
            writer.join();
        }
        if (s == frame_decode) { // the frame's row out again (a stopped decode left nothing)
            llama_memory_seq_rm(llama_get_memory(lctx[w].get()), 0, k_prompt_rows, -1);
        }
        const bool stopped = w != today && st == LLAMA_CANCEL_CANCELLED;
        *ok = *ok && (st == 0 || stopped);
        landed l;
        l.stopped        = stopped;
        l.finished_first = frac > 0 && t_store >= t_ret;
        l.late           = frac > 0 && !l.finished_first && !stopped;
        const llama_cancel_hook_stats st1 = llama_cancel_hook_get_stats(hook);
        l.checkpoints    = w == hooks ? static_cast<int>(st1.checkpoints - st0.checkpoints) : 0;
        l.asks           = w == hooks ? static_cast<int>(st1.asks - st0.asks) : 0;
        l.ms             = frac > 0 ? t_ret - t_store : t_ret - t0;
        return l;
    }
};

struct results {
    double                  call_ms[n_steps] = {0, 0, 0}; // today's uninterrupted median
    common::latencies       lat[n_steps][n_ways];
    int                     late[n_steps][n_ways] = {};
    std::vector<double>     frame_overhead[n_ways];          // per repeat, %
    std::vector<double>     step_overhead[n_steps][n_ways];  // per repeat, %
    double                  frame_ms = 0.0;                  // today's, per frame
    double                  checkpoints[n_steps] = {0, 0, 0}; // the hook's per call, byte at 0
    double                  asks[n_steps]        = {0, 0, 0}; // nodes it was asked about per call
    double                  longest_ms[n_steps]  = {0, 0, 0}; // the call's longest node (0: not timed)
    std::string             longest_op[n_steps];
};

double median(std::vector<double> v) {
    return v.empty() ? NAN : common::percentile(std::move(v), 0.5);
}

// Paired triples of a step per repeat: about 2 s of today's calls, 3 to 200; fewer (3 at least)
// where the triples already took 6 s (a way much slower than today's: Vulkan's frame decode).
int pairs_of(double call_ms) {
    return static_cast<int>(std::min(200.0, std::max(3.0, std::round(2000.0 / std::max(call_ms, 0.01)))));
}
constexpr double k_pairs_max_ms = 6000.0;

// Warm-up and each step's uninterrupted median, today's way.
bool measure_calls(tts_bench & b, const tts_options & o, results & r) {
    bool ok = true;
    for (int s = 0; s < n_steps; ++s) {
        for (int w = 0; w < n_ways; ++w) {
            for (int i = 0; i < 2; ++i) {
                b.run(s, w, 0, 0, o.seed + i, &ok);
            }
        }
        std::vector<double> t;
        for (int i = 0; i < (s == gen_wav ? 3 : 10); ++i) {
            t.push_back(b.run(s, today, 0, 0, o.seed + i, &ok).ms);
        }
        r.call_ms[s] = median(t);
    }
    return ok;
}

// Fresh contexts for every way, their prompt rows decoded, two calls of each step and way to warm them.
bool remake_contexts(tts_bench & b, const tts_options & o) {
    bool ok = b.make_contexts(o) && b.decode_prompts();
    for (int s = 0; ok && s < n_steps; ++s) {
        for (int w = 0; w < n_ways; ++w) {
            for (int i = 0; i < 2; ++i) {
                b.run(s, w, 0, 0, o.seed + i, &ok);
            }
        }
    }
    return ok;
}

// The byte at 0: `repeats` rounds, each on fresh contexts (where a context's buffers land moves one
// way against another by several percent for its whole life: bench_mtmd.cpp); in each, every step's
// triples (pairs_of) in rotating order, the median paired ratio per step; a frame's ratio weighs
// each step by today's median time in a frame (GEN_WAV: 1 / window of it).
bool measure_overhead(tts_bench & b, const tts_options & o, results & r) {
    bool ok = true;
    const double weight[n_steps] = {1.0, 1.0, 1.0 / b.window};
    double       cp_sum[n_steps] = {0, 0, 0}, ask_sum[n_steps] = {0, 0, 0}, cp_calls[n_steps] = {0, 0, 0};
    for (int rep = 0; rep < o.repeats; ++rep) {
        if (rep > 0 && !remake_contexts(b, o)) {
            return false;
        }
        double plain[n_steps], ratio[n_steps][n_ways];
        for (int s = 0; s < n_steps; ++s) {
            std::vector<double> ratios[n_ways], plain_ms;
            const double        t_step = common::now_ms();
            int                 n_pairs = 0;
            for (int i = 0; i < pairs_of(r.call_ms[s]) && (i < 3 || common::now_ms() - t_step < k_pairs_max_ms); ++i) {
                ++n_pairs;
                double t[n_ways] = {0, 0, 0};
                for (int k = 0; k < n_ways; ++k) {
                    const int w = (i + k) % n_ways;
                    const landed l = b.run(s, w, 0, 0, o.seed + i, &ok);
                    t[w]           = l.ms;
                    if (w == hooks) {
                        cp_sum[s] += l.checkpoints;
                        ask_sum[s] += l.asks;
                    }
                }
                for (int w = hooks; w < n_ways; ++w) {
                    ratios[w].push_back(t[w] / t[today]);
                }
                plain_ms.push_back(t[today]);
            }
            plain[s] = median(plain_ms);
            cp_calls[s] += n_pairs;
            for (int w = hooks; w < n_ways; ++w) {
                ratio[s][w] = median(ratios[w]);
                r.step_overhead[s][w].push_back((ratio[s][w] - 1.0) * 100.0);
            }
        }
        double frame = 0.0;
        for (int s = 0; s < n_steps; ++s) {
            frame += weight[s] * plain[s];
        }
        for (int w = hooks; w < n_ways; ++w) {
            double ours = 0.0;
            for (int s = 0; s < n_steps; ++s) {
                ours += weight[s] * plain[s] * ratio[s][w];
            }
            r.frame_overhead[w].push_back((ours / frame - 1.0) * 100.0);
        }
    }
    for (int s = 0; s < n_steps; ++s) {
        r.checkpoints[s] = cp_calls[s] > 0 ? cp_sum[s] / cp_calls[s] : 0.0;
        r.asks[s]        = cp_calls[s] > 0 ? ask_sum[s] / cp_calls[s] : 0.0;
    }
    r.frame_ms = r.call_ms[gen_code] + r.call_ms[frame_decode] + r.call_ms[gen_wav] / b.window;
    return ok;
}

// Stop latency: per step, the byte stored at the same random 5-95% point of the call each way, until
// `runs` stores landed each way.
// A way whose store did not land (the call returned first) tries again at the next point, up to
// k_attempts_per_run times the runs in all, and past the runs only while the step's attempts took
// under k_retry_ms: a sub-millisecond frame decode on a loaded machine, not a 10 s Vulkan GEN_WAV.
constexpr int    k_attempts_per_run = 5;
constexpr double k_retry_ms         = 60000.0;

bool measure_latency(tts_bench & b, const tts_options & o, results & r) {
    bool ok = true;
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<double> point(0.05, 0.95);
    for (int s = 0; s < n_steps; ++s) {
        const double t_step = common::now_ms();
        for (int i = 0; i < k_attempts_per_run * o.runs && (i < o.runs || common::now_ms() - t_step < k_retry_ms); ++i) {
            const double frac = point(rng);
            bool         more = false;
            for (int w = 0; w < n_ways; ++w) {
                if (static_cast<int>(r.lat[s][w].ms.size()) >= o.runs) {
                    continue;
                }
                const landed l = b.run(s, w, frac, r.call_ms[s], o.seed + i, &ok);
                r.lat[s][w].add(l.ms, l.finished_first, l.stopped);
                r.late[s][w] += l.late && w != today ? 1 : 0;
                more = more || static_cast<int>(r.lat[s][w].ms.size()) < o.runs;
            }
            if (!more) {
                break;
            }
        }
    }
    return ok;
}

double stop_limit_ms(double call_ms) {
    return call_ms < bench_tts::k_short_call_ms ? bench_tts::k_short_stop_ms : call_ms * bench_tts::k_stop_pct / 100.0;
}

// Every store that reached a call of 100 ms or more before its return stopped it (and at least one
// did); a shorter call may complete after its last checkpoint (late), its stop then bounded by 10 ms.
bool all_stopped(const common::latencies & l, double call_ms) {
    return call_ms < bench_tts::k_short_call_ms || (!l.ms.empty() && l.cancelled == static_cast<int>(l.ms.size()));
}
bool within(const common::latencies & l, double call_ms) {
    return !l.ms.empty() && common::max_of(l.ms) <= stop_limit_ms(call_ms);
}

// The GEN_CODE and GEN_WAV calls' longest nodes (profile_nodes).
bool measure_nodes(tts_bench & b, const tts_options & o, results & r) {
    common::node_timer nt[n_steps];
    if (!b.profile_nodes(o, nt)) {
        return false;
    }
    for (int s : {gen_code, gen_wav}) {
        r.longest_ms[s] = nt[s].longest;
        r.longest_op[s] = nt[s].longest_op;
    }
    return true;
}
bool node_bound_met(const results & r, int s, int w) {
    const common::latencies & l = r.lat[s][w];
    return !l.ms.empty() && r.longest_ms[s] > 0.0 && common::max_of(l.ms) <= common::node_timer::bound_ms(r.longest_ms[s]);
}

struct way_targets {
    bool stopped = true, stop = true, overhead = true;
};
way_targets targets_of(const results & r, int w) {
    way_targets t;
    for (int s = 0; s < n_steps; ++s) {
        t.stopped = t.stopped && all_stopped(r.lat[s][w], r.call_ms[s]);
        t.stop    = t.stop && within(r.lat[s][w], r.call_ms[s]);
    }
    t.overhead = median(r.frame_overhead[w]) <= bench_tts::k_overhead_pct;
    return t;
}

// The way's name; the hook's with its checkpoints and asks per call (byte at 0).
std::string path_name(int w, double checkpoints, double asks) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "hook (%.1f cp, %.0f asks)", checkpoints, asks);
    return w == hooks ? std::string(buf) : std::string(k_way_names[w]);
}

std::string fig(const common::latencies & l, double v, const char * format) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), format, v);
    return l.ms.empty() ? std::string("-") : std::string(buf);
}

std::string pct_list(const std::vector<double> & v) {
    if (v.empty()) {
        return "-";
    }
    std::string s;
    for (double x : v) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.2f", s.empty() ? "" : ", ", x);
        s += buf;
    }
    char med[48];
    std::snprintf(med, sizeof(med), "%.2f%% (", median(v));
    return med + s + ")";
}

void print_rows(const std::string & row, const results & r, int runs) {
    for (int s = 0; s < n_steps; ++s) {
        for (int w = 0; w < n_ways; ++w) {
            const common::latencies & l = r.lat[s][w];
            const double mx = l.ms.empty() ? 0.0 : common::max_of(l.ms);
            const bool   met = w == today || (all_stopped(l, r.call_ms[s]) && within(l, r.call_ms[s]));
            std::printf("| %-16s | %-12s | %-24s | %9.2f | %8s | %8s | %6s | %6s | %5d/%-3d | %4s | %14d | %-30s | %-6s |\n",
                        row.c_str(), k_step_names[s], path_name(w, r.checkpoints[s], r.asks[s]).c_str(), r.call_ms[s], fig(l, l.p50(), "%.2f").c_str(),
                        fig(l, mx, "%.2f").c_str(), fig(l, l.p50() / r.call_ms[s] * 100.0, "%.1f").c_str(),
                        fig(l, mx / r.call_ms[s] * 100.0, "%.1f").c_str(), l.cancelled, runs,
                        w == today ? "-" : std::to_string(r.late[s][w]).c_str(), l.finished_first,
                        w == today ? "-" : pct_list(r.step_overhead[s][w]).c_str(),
                        w == today ? "-" : met ? "met" : "MISSED");
        }
    }
    std::fflush(stdout);
}

void print_targets(const std::string & row, const results & r) {
    for (int w = hooks; w < n_ways; ++w) {
        const way_targets t = targets_of(r, w);
        std::printf("  %s, %s: every stop of a call >= 100 ms CANCELLED: %s; each stop within 10%% of its call (10 ms under 100 ms): %s; "
                    "byte at 0 %s a frame (%.2f ms a frame today) <= 2%%: %s\n",
                    row.c_str(), k_way_names[w], t.stopped ? "met" : "MISSED", t.stop ? "met" : "MISSED",
                    pct_list(r.frame_overhead[w]).c_str(), r.frame_ms, t.overhead ? "met" : "MISSED");
        for (int s : {gen_code, gen_wav}) {
            const common::latencies & l = r.lat[s][w];
            if (l.ms.empty() || r.longest_ms[s] <= 0.0) {
                continue;
            }
            std::printf("  %s, %s, %s: worst stop %.1f ms <= interval + longest node (%s, %.2f ms, %.1f%% of the call) + %.0f ms: %s\n",
                        row.c_str(), k_way_names[w], k_step_names[s], common::max_of(l.ms), r.longest_op[s].c_str(),
                        r.longest_ms[s], r.longest_ms[s] / r.call_ms[s] * 100.0, common::node_timer::k_return_ms,
                        node_bound_met(r, s, w) ? "met" : "MISSED");
        }
    }
    std::fflush(stdout);
}

common::json row_json(const tts_options & o, const std::string & row, const tts_bench & b, const results & r) {
    using common::printed;
    common::json steps = common::json::object();
    for (int s = 0; s < n_steps; ++s) {
        common::json st = {{"call_ms", printed(r.call_ms[s])},
                           {"stop_limit_ms", printed(stop_limit_ms(r.call_ms[s]))},
                           {"hook_checkpoints_per_call", printed(r.checkpoints[s])},
                           {"hook_asks_per_call", printed(r.asks[s])}};
        if (r.longest_ms[s] > 0.0) {
            st["longest_node_ms"]          = printed(r.longest_ms[s]);
            st["longest_node_op"]          = r.longest_op[s];
            st["longest_node_pct_of_call"] = printed(r.longest_ms[s] / r.call_ms[s] * 100.0);
        }
        for (int w = 0; w < n_ways; ++w) {
            const common::latencies & l = r.lat[s][w];
            common::json j = common::to_json(l);
            j["p50_pct_of_call"] = l.ms.empty() ? common::json(nullptr) : common::json(printed(l.p50() / r.call_ms[s] * 100.0));
            j["max_pct_of_call"] =
                l.ms.empty() ? common::json(nullptr) : common::json(printed(common::max_of(l.ms) / r.call_ms[s] * 100.0));
            if (w != today) {
                j["late"]                 = r.late[s][w];
                j["overhead_repeats_pct"] = common::printed_list(r.step_overhead[s][w]);
                if (r.longest_ms[s] > 0.0) {
                    j["worst_stop_le_interval_plus_longest_node"] = node_bound_met(r, s, w);
                }
            }
            st[k_way_keys[w]] = j;
        }
        steps[k_step_keys[s]] = st;
    }
    const way_targets th = targets_of(r, hooks), ts = targets_of(r, stateless);
    const common::json j = {
        {"row", row},
        {"pipeline", o.pipeline},
        {"backend", o.backend},
        {"model", o.model},
        {"mmproj", o.mmproj},
        {"threads", o.threads},
        {"runs", o.runs},
        {"repeats", o.repeats},
        {"window", b.window},
        {"frame_ms", printed(r.frame_ms)},
        {"steps", steps},
        {"frame_hook_overhead_pct", printed(median(r.frame_overhead[hooks]))},
        {"frame_hook_overhead_repeats_pct", common::printed_list(r.frame_overhead[hooks])},
        {"frame_stateless_overhead_pct", printed(median(r.frame_overhead[stateless]))},
        {"frame_stateless_overhead_repeats_pct", common::printed_list(r.frame_overhead[stateless])},
        {"targets",
         {{"every_stop_cancelled", th.stopped},
          {"stop_within_10pct_or_10ms", th.stop},
          {"overhead_le_2pct", th.overhead},
          {"stateless_every_stop_cancelled", ts.stopped},
          {"stateless_stop_within_10pct_or_10ms", ts.stop},
          {"stateless_overhead_le_2pct", ts.overhead}}}};
    return common::with_threads_override(j);
}

const char k_synopsis[] = "usage: llama-cancel-bench bench-tts qwen3tts|pockettts --model BACKBONE.gguf --mmproj MMPROJ.gguf "
                          "[--backend cpu|vulkan|vulkan-1t] [--runs N] [--repeats N] [--threads N] [--window N] [--seed N] "
                          "[--no-header] [--json PATH]\n";

int parse_options(int argc, char ** argv, tts_options & o) {
    cli_args::parser p(k_synopsis);
    bool no_header = false;
    p.positional("PIPELINE", &o.pipeline, "qwen3tts or pockettts")
        .option("--model", &o.model, "BACKBONE.gguf", "the backbone (required)")
        .option("--mmproj", &o.mmproj, "MMPROJ.gguf", "its generation projector (required)")
        .option("--backend", &o.backend, "NAME", "backend setup (cpu, vulkan, vulkan-1t: llvmpipe on one thread)")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server (the rpc setups)")
        .option("--json", &o.json, "PATH", "where the row's JSON goes")
        .option("--runs", &o.runs, "N", "stores that land inside the call, per step and way (>= 1; up to 5x the attempts)")
        .option("--repeats", &o.repeats, "N", "repeats of the overhead's paired runs (>= 1)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--window", &o.window, "N", "frames per GEN_WAV (0: the pipeline's, 72 or 8)")
        .option("--seed", &o.seed, "N", "random seed")
        .flag("--no-header", &no_header, true, "the rows alone (bench prints header and targets)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    o.header = !no_header;
    return p.check({{!bench_tts::is_pipeline(o.pipeline), "PIPELINE must be qwen3tts or pockettts"},
                    {o.model.empty(), "--model is required"},
                    {o.mmproj.empty(), "--mmproj is required"},
                    {!common::is_setup_name(o.backend), "unknown --backend '" + o.backend + "' (" + common::setup_names() + ")"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.repeats < 1, "--repeats must be at least 1"},
                    {o.threads < 1, "--threads must be at least 1"},
                    {o.window < 0, "--window must be at least 0"}});
}

} // namespace

void bench_tts::print_header(int repeats) {
    std::printf("\ntext to speech (libmtmd's audio generation, generated bench pairs): each step of a frame called as "
                "llama_cancel_tts_generate calls it (GEN_CODE and a whole window's GEN_WAV through "
                "llama_cancel_mtmd_gen_audio_process, the backbone's decode of one feedback row after %d positions "
                "through llama_cancel_decode; cp, asks: the hook's checkpoints and the nodes it was asked about in one call, "
                "byte at 0), the byte stored at a random 5-95%% point of the call's uninterrupted "
                "median (a store the call beat is counted apart and tried again, up to 5x the runs); today = mtmd_gen_audio_process / llama_decode with the byte polled between steps (the call "
                "runs to its end); stop = store to return, over the runs the store reached before the return "
                "(finished first counted apart), ms and %% of the call; stopped = CANCELLED; late = the store reached the call "
                "after its last checkpoint and it completed, valid (its latency counted; the generation's next check "
                "returns CANCELLED); overhead with the byte "
                "at 0: median paired ratio per step (each of %d repeats), and per frame (GEN_CODE + decode + GEN_WAV "
                "/ window) under the table; targets: every stop of a call of 100 ms or more CANCELLED, each stop "
                "within 10%% of its call (10 ms under 100 ms), <= 2%% a frame\n\n",
                k_prompt_rows, repeats);
    std::printf("| row              | step         | path                     |   call ms | p50 ms |   max ms | p50 %% | max %% "
                "| stopped | late | finished first | overhead (repeats)             | target |\n");
    std::printf("|:-----------------|:-------------|:-------------------------|----------:|-------:|---------:|------:|------:"
                "|--------:|-----:|---------------:|:-------------------------------|:-------|\n");
    std::fflush(stdout);
}

int bench_tts_main(int argc, char ** argv) {
    tts_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    const std::string row = o.backend == "cpu" ? o.pipeline : o.pipeline + ":" + o.backend;
    common::note_threads_override("tts " + row);
    mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    tts_bench b;
    if (!b.make(o)) {
        std::fprintf(stderr, "error: %s\n", b.error.c_str());
        return 1;
    }
    results r;
    std::fprintf(stderr, "[tts %s] call times\n", row.c_str());
    bool ok = measure_calls(b, o, r);
    std::fprintf(stderr, "[tts %s] overhead (%d repeats)\n", row.c_str(), o.repeats);
    ok = ok && measure_overhead(b, o, r);
    std::fprintf(stderr, "[tts %s] stop latency (%d runs a step and way)\n", row.c_str(), o.runs);
    ok = ok && measure_latency(b, o, r);
    std::fprintf(stderr, "[tts %s] node profile\n", row.c_str());
    ok = ok && measure_nodes(b, o, r);
    if (!ok) {
        std::fprintf(stderr, "error: a step failed (neither done nor CANCELLED)\n");
        return 1;
    }
    if (o.header) {
        bench_tts::print_header(o.repeats);
    }
    print_rows(row, r, o.runs);
    if (o.header) {
        std::printf("\ntargets (%s):\n", row.c_str());
        print_targets(row, r);
    }
    if (!o.json.empty() && !common::write_json_file(o.json, row_json(o, row, b, r))) {
        return 1;
    }
    return 0;
}
