// The multimodal rows of the benchmark (`llama-cancel-bench bench-mtmd vision|audio`), in their own
// process: encode time, cancel latency inside the clip encode (through the hook and through the
// stateless eval callback bound by name) and inside the embedding decode, against a host that polls
// its byte between native calls, and the encode overhead of both callbacks with the byte at 0; for
// qwen3a, voxtral and glma a whole evaluation (text, an audio clip, text) in place of one encode, and
// for internvl-batch one of two images whose tiles are batched encodes. CPU.
#include "bench/bench_mtmd.h"
#include "common/args.h"
#include "common/ask_trace.h"
#include "common/json.h"
#include "common/stats.h"
#include "commands.h"
#include "support.h"
#include "common/video_frames.h"

#include "mtmd.h"
#include "mtmd-helper.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using mtmd_ptr   = mtmd::context_ptr;
using chunks_ptr = mtmd::input_chunks_ptr;
using bitmap_ptr = mtmd::bitmap_ptr;

// Deterministic media: a 224x224 gradient image, or 1.5 s of a 440 Hz tone.
bitmap_ptr make_media(mtmd_context * m, bool vision) {
    if (vision) {
        const uint32_t n = 224;
        std::vector<unsigned char> rgb(n * n * 3);
        for (size_t i = 0; i < rgb.size(); ++i) {
            rgb[i] = static_cast<unsigned char>((i * 7 + i / 672 * 13) & 0xff);
        }
        return bitmap_ptr(mtmd_bitmap_init(n, n, rgb.data()));
    }
    const int sr = mtmd_get_audio_sample_rate(m);
    std::vector<float> pcm(static_cast<size_t>(sr) * 3 / 2);
    for (size_t i = 0; i < pcm.size(); ++i) {
        pcm[i] = 0.5f * std::sin(2.0f * 3.14159265f * 440.0f * static_cast<float>(i) / static_cast<float>(sr));
    }
    return bitmap_ptr(mtmd_bitmap_init_from_audio(pcm.size(), pcm.data()));
}

// The media chunk of a prompt made of the marker alone.
const mtmd_input_chunk * media_chunk(mtmd_context * m, mtmd_bitmap * media, chunks_ptr & chunks) {
    chunks.reset(mtmd_input_chunks_init());
    const std::string prompt = mtmd_default_marker();
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    const mtmd_bitmap * bitmaps[] = {media};
    if (mtmd_tokenize(m, chunks.get(), &text, bitmaps, 1) != 0) {
        return nullptr;
    }
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
        if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_TEXT) {
            return c;
        }
    }
    return nullptr;
}

// `work` timed; with `frac` > 0 another thread stores the byte at `frac` of `full` ms into it and
// the result is the time from the store to work's return, or finished first when work returned
// before the store.
struct landed {
    double ms             = 0.0;
    bool   finished_first = false;
};
template <typename F> landed store_then(double frac, double full, int8_t * byte, F work) {
    double t_store = 0;
    const double t0 = common::now_ms();
    std::thread writer = frac > 0 ? common::store_at(byte, t0 + frac * full, &t_store) : std::thread();
    work();
    const double t_ret = common::now_ms();
    if (writer.joinable()) {
        writer.join();
        return {t_ret - t_store, t_store >= t_ret};
    }
    return {t_ret - t0, false};
}

// A projector context as llama_cancel_mtmd_init_from_file makes it, with `cb` as its cb_eval.
mtmd_ptr init_with_eval_cb(const std::string & mmproj, const llama_model * model, int threads, bool gpu,
                           ggml_backend_sched_eval_callback cb, void * cb_data) {
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = gpu;
    mp.print_timings     = false;
    mp.n_threads         = threads;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = cb_data;
    return mtmd_ptr(mtmd_init_from_file(mmproj.c_str(), model, mp));
}

// The stateless callback by name as mtmd's cb_eval, through a probe that forwards every call and
// counts checkpoints and stops. With a trace, the trace goes in front of the probe.
mtmd_ptr init_stateless(const std::string & mmproj, const llama_model * model, int threads, common::stateless_probe * probe,
                        bool gpu = false, common::ask_trace * trace = nullptr) {
    if (trace == nullptr) {
        return init_with_eval_cb(mmproj, model, threads, gpu, common::stateless_probe::eval_cb, probe);
    }
    trace->mtmd_target      = common::stateless_probe::eval_cb;
    trace->mtmd_target_data = probe;
    return init_with_eval_cb(mmproj, model, threads, gpu, common::ask_trace::forward_mtmd, trace);
}

// The three ways a clip encode runs: plain (a host polling its byte between native calls), through
// the hook bound to the mtmd context, through the stateless callback bound by name (via the probe).
enum way { plain = 0, with_hook = 1, by_name = 2, n_ways = 3 };

struct encoders {
    common::hook_ptr            hook;
    common::stateless_probe     probe;
    mtmd_ptr                 mctx[n_ways];
    chunks_ptr               chunks[n_ways];
    const mtmd_input_chunk * chunk[n_ways] = {nullptr, nullptr, nullptr};
    int8_t                   byte     = 0;
    int32_t                  last_ret = 0; // mtmd_encode_chunk's, for the last encode

    // False with a message when a projector or the media cannot be loaded or tokenized.
    bool make(const std::string & mmproj, const llama_model * model, int threads, bool vision) {
        hook.reset(llama_cancel_hook_init(nullptr));
        llama_cancel_load_result lr;
        mctx[plain].reset(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model, nullptr, threads, false, nullptr, &lr));
        mctx[with_hook].reset(
            llama_cancel_mtmd_init_from_file(mmproj.c_str(), model, hook.get(), threads, false, nullptr, &lr));
        if (!mctx[plain] || !mctx[with_hook]) {
            std::fprintf(stderr, "error: cannot load %s: %s\n", mmproj.c_str(), lr.message);
            return false;
        }
        mctx[by_name] = init_stateless(mmproj, model, threads, &probe);
        bitmap_ptr media = make_media(mctx[plain].get(), vision);
        for (int w = 0; w < n_ways; ++w) {
            chunk[w] = mctx[w] && media ? media_chunk(mctx[w].get(), media.get(), chunks[w]) : nullptr;
            if (chunk[w] == nullptr) {
                std::fprintf(stderr, "error: cannot load %s or tokenize its input\n", mmproj.c_str());
                return false;
            }
        }
        llama_cancel_hook_set_byte(hook.get(), &byte);
        return true;
    }

    // One encode the given way, the byte stored at `frac` of `full` ms when `frac` > 0; `stopped`
    // says whether the byte stopped its graph.
    landed encode(int w, double frac, double full, bool * stopped = nullptr, int * checkpoints = nullptr) {
        byte = 0;
        probe.rearm(-1);
        llama_cancel_hook_reset(hook.get());
        const uint64_t cp0 = llama_cancel_hook_get_stats(hook.get()).checkpoints;
        const landed l = store_then(frac, full, w == by_name ? &probe.byte : &byte,
                                    [&] { last_ret = mtmd_encode_chunk(mctx[w].get(), chunk[w]); });
        const auto st = llama_cancel_hook_get_stats(hook.get());
        if (stopped != nullptr) {
            *stopped = w == with_hook ? llama_cancel_hook_stopped(hook.get()) : w == by_name && probe.stopped_at >= 0;
        }
        if (checkpoints != nullptr) {
            *checkpoints = w == with_hook ? static_cast<int>(st.checkpoints - cp0) : w == by_name ? probe.checkpoints : 0;
        }
        return l;
    }
};

// A context that decodes the media chunk's embeddings (a plain encode's output) in one batch,
// with llama_decode (a host polling between calls) or llama_cancel_decode.
struct embd_decoder {
    common::context_ptr            ctx;
    std::vector<float>          embd;
    std::vector<llama_pos>      pos;
    std::vector<int32_t>        n_seq;
    std::vector<llama_seq_id>   seq;
    std::vector<llama_seq_id *> seq_ptr;
    std::vector<int8_t>         logits;
    int8_t                      byte = 0;

    bool make(llama_model * model, encoders & e, int32_t n_tokens, int threads) {
        e.encode(plain, 0, 0);
        const float * out = mtmd_get_output_embd(e.mctx[plain].get());
        embd.assign(out, out + static_cast<size_t>(n_tokens) * llama_model_n_embd_inp(model));
        common::context_options opt;
        opt.n_ctx = opt.n_batch = opt.n_ubatch = static_cast<uint32_t>(std::max(n_tokens, 64));
        opt.n_threads = threads;
        ctx = common::make_context(model, opt);
        // An M-RoPE decoder (mtmd_decode_use_mrope) reads 4 positions per embedding, section-major;
        // every section is i here (the decode's time does not depend on the values).
        const int32_t sections = mtmd_decode_use_mrope(e.mctx[plain].get()) ? 4 : 1;
        pos.resize(static_cast<size_t>(n_tokens) * sections);
        n_seq.assign(n_tokens, 1);
        seq.assign(n_tokens, 0);
        seq_ptr.resize(n_tokens);
        logits.assign(n_tokens, 0);
        for (int32_t i = 0; i < n_tokens; ++i) {
            for (int32_t s = 0; s < sections; ++s) {
                pos[static_cast<size_t>(s) * n_tokens + i] = i;
            }
            seq_ptr[i] = &seq[i];
        }
        logits[n_tokens - 1] = 1;
        // Set once: each change of the attention type makes llama.cpp reserve its graphs again.
        if (ctx) {
            llama_set_causal_attn(ctx.get(), !mtmd_decode_use_non_causal(e.mctx[plain].get(), e.chunk[plain]));
        }
        return ctx != nullptr;
    }

    landed decode(bool ours, double frac, double full, bool * cancelled = nullptr) {
        const llama_batch batch{static_cast<int32_t>(n_seq.size()), nullptr, embd.data(), pos.data(), n_seq.data(),
                                seq_ptr.data(), logits.data()};
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        byte = 0;
        int32_t st = 0;
        const landed l = store_then(frac, full, &byte, [&] {
            if (ours) {
                llama_cancel_decode_params p = llama_cancel_decode_default_params();
                p.byte = &byte;
                st     = llama_cancel_decode(ctx.get(), batch, &p, nullptr, nullptr);
            } else {
                st = llama_decode(ctx.get(), batch);
            }
            llama_synchronize(ctx.get()); // the outputs computed, either way (GPU-API backends)
        });
        if (cancelled != nullptr) {
            *cancelled = st == LLAMA_CANCEL_CANCELLED;
        }
        return l;
    }
};

struct results {
    int32_t        n_tokens  = 0;
    double         encode_ms = 0.0, decode_ms = 0.0;
    double         overhead_pct[n_ways] = {0, 0, 0}; // encode, against the plain one, byte at 0
    double         checkpoints[n_ways]  = {0, 0, 0}; // per encode
    common::latencies enc[n_ways], dec_without, dec_with;
};

// Encode time and overhead: triples of encodes in rotating order; median ratios to the plain one.
void measure_encode(encoders & e, int runs, results & r) {
    std::vector<double> ratios[n_ways], plain_ms;
    for (int i = 0; i < runs; ++i) {
        double t[n_ways] = {0, 0, 0};
        for (int k = 0; k < n_ways; ++k) {
            const int w = (i + k) % n_ways;
            int checkpoints = 0;
            t[w] = e.encode(w, 0, 0, nullptr, &checkpoints).ms;
            r.checkpoints[w] += static_cast<double>(checkpoints) / runs;
        }
        for (int w = 0; w < n_ways; ++w) {
            ratios[w].push_back(t[w] / t[plain]);
        }
        plain_ms.push_back(t[plain]);
    }
    r.encode_ms = common::percentile(plain_ms, 0.5);
    for (int w = with_hook; w < n_ways; ++w) {
        r.overhead_pct[w] = (common::percentile(ratios[w], 0.5) - 1.0) * 100.0;
    }
}

// Cancel latency: the byte stored at the same random 30-66% point of each encode and decode.
void measure_latency(encoders & e, embd_decoder & d, int runs, uint32_t seed, results & r) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    for (int i = 0; i < runs; ++i) {
        const double frac = point(rng);
        for (int w = 0; w < n_ways; ++w) {
            bool stopped = false;
            const landed l = e.encode(w, frac, r.encode_ms, &stopped);
            r.enc[w].add(l.ms, l.finished_first, stopped);
        }
        landed l = d.decode(false, frac, r.decode_ms);
        r.dec_without.add(l.ms, l.finished_first, false);
        bool cancelled = false;
        l = d.decode(true, frac, r.decode_ms, &cancelled);
        r.dec_with.add(l.ms, l.finished_first, cancelled);
    }
}

// One table row: a path (encode through the hook or the stateless callback, embedding decode).
void print_row(const std::string & kind, const char * path, const results & r, double full_ms,
               const common::latencies & without, const common::latencies & with, const char * overhead, int runs) {
    // A way no run of which has a latency (each finished first) has no figure: "-", not 0 ms.
    auto fig = [](const common::latencies & l, double v, const char * format) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), format, v);
        return l.ms.empty() ? std::string("-") : std::string(buf);
    };
    std::printf("| %-6s | %-17s | %6d | %9.1f | %14s | %8s | %8s | %8s | %10s | %9s | %5d/%-3d | %6d/%-6d |\n",
                kind.c_str(), path, r.n_tokens, full_ms, fig(without, without.p50(), "%.1f").c_str(),
                fig(with, with.p50(), "%.2f").c_str(), fig(with, with.p95(), "%.2f").c_str(),
                fig(with, common::max_of(with.ms), "%.2f").c_str(),
                fig(with, with.p50() / full_ms * 100.0, "%.1f%%").c_str(), overhead, with.cancelled, runs,
                with.finished_first, without.finished_first);
}

void print_rows(const std::string & kind, const results & r, int runs) {
    char oh_hook[32], oh_name[32];
    std::snprintf(oh_hook, sizeof(oh_hook), "%.2f%%", r.overhead_pct[with_hook]);
    std::snprintf(oh_name, sizeof(oh_name), "%.2f%%", r.overhead_pct[by_name]);
    print_row(kind, "encode, hook", r, r.encode_ms, r.enc[plain], r.enc[with_hook], oh_hook, runs);
    print_row(kind, "encode, stateless", r, r.encode_ms, r.enc[plain], r.enc[by_name], oh_name, runs);
    print_row(kind, "embd decode", r, r.decode_ms, r.dec_without, r.dec_with, "-", runs);
    std::fflush(stdout);
}

// The row's object: the media, the encode's and the embedding decode's figures, the targets.
common::json row_json(const std::string & kind, const std::string & mmproj, int threads, int runs, const results & r) {
    using common::printed;
    auto pct         = [&](int w) { return r.enc[w].p50() / r.encode_ms * 100.0; };
    auto latency_met = [&](int w) { return !r.enc[w].ms.empty() && pct(w) <= 10.0; };
    const common::json row = {
        {"kind", kind},
        {"mmproj", mmproj},
        {"media_tokens", r.n_tokens},
        {"threads", threads},
        {"runs", runs},
        {"encode_ms", printed(r.encode_ms)},
        {"encode_hook_overhead_pct", printed(r.overhead_pct[with_hook])},
        {"encode_checkpoints_per_encode", printed(r.checkpoints[with_hook])},
        {"encode_stateless_overhead_pct", printed(r.overhead_pct[by_name])},
        {"encode_stateless_checkpoints_per_encode", printed(r.checkpoints[by_name])},
        {"encode_cancel_without_ms", common::to_json(r.enc[plain])},
        {"encode_cancel_with_ms", common::to_json(r.enc[with_hook])},
        {"encode_cancel_stateless_ms", common::to_json(r.enc[by_name])},
        {"encode_cancel_pct_of_encode", r.enc[with_hook].ms.empty() ? common::json(nullptr) : common::json(printed(pct(with_hook)))},
        {"encode_stateless_pct_of_encode", r.enc[by_name].ms.empty() ? common::json(nullptr) : common::json(printed(pct(by_name)))},
        {"embd_decode_ms", printed(r.decode_ms)},
        {"decode_cancel_without_ms", common::to_json(r.dec_without)},
        {"decode_cancel_with_ms", common::to_json(r.dec_with)},
        {"targets",
         {{"latency_le_10pct_of_encode", latency_met(with_hook)},
          {"overhead_le_3pct", r.overhead_pct[with_hook] <= 3.0},
          {"stateless_latency_le_10pct_of_encode", latency_met(by_name)},
          {"stateless_overhead_le_3pct", r.overhead_pct[by_name] <= 3.0}}}};
    return common::with_threads_override(row);
}

struct mtmd_options {
    std::string kind, model, mmproj, json, trace, video;
    std::string backend = "cpu"; // the evaluation kinds: cpu or vulkan
    int         runs = 10, threads = 2;
    int         seconds = bench_mtmd::k_eval_seconds; // the evaluation kinds: clip length, overhead repeats
    int         repeats = bench_mtmd::k_eval_repeats;
    int         repeat_for_s = bench_mtmd::k_eval_repeat_for_s;
    bool        header = true;             // the evaluation kinds: table header and targets printed
    uint32_t    seed = 42;
};

using bench_mtmd::is_eval_kind;

const char k_synopsis[] = "usage: llama-cancel-bench bench-mtmd vision|audio|qwen3a|voxtral|glma|internvl-batch|video --model TEXT.gguf --mmproj MMPROJ.gguf "
                          "[--runs N] [--threads N] [--seconds N] [--repeats N] [--repeat-for S] [--backend cpu|vulkan] [--no-header] [--json PATH]\n"
                          "                          [--trace PATH] [--video FILE]\n";

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, mtmd_options & o) {
    cli_args::parser p(k_synopsis);
    bool no_header = false;
    p.positional("KIND", &o.kind, "vision or audio (one encode); qwen3a, voxtral or glma (an audio prompt evaluated "
                                  "whole); internvl-batch (two images, their tiles batched encodes, evaluated whole); "
                                  "video (a clip's frames, --video, evaluated whole)")
        .option("--model", &o.model, "TEXT.gguf", "the text model (required)")
        .option("--mmproj", &o.mmproj, "MMPROJ.gguf", "the projector (required)")
        .option("--json", &o.json, "PATH", "where the row's JSON goes")
        .option("--video", &o.video, "FILE", "video: the clip, read with libmtmd's helper (ffprobe and ffmpeg on PATH)")
        .option("--trace", &o.trace, "PATH", "the evaluation kinds: each ask of the overhead's evaluations, wall and thread CPU time, every way (scripts/trace_views.py reads it)")
        .option("--runs", &o.runs, "N", "runs (>= 1)")
        .option("--threads", &o.threads, "N", "CPU threads (>= 1)")
        .option("--seed", &o.seed, "N", "random seed")
        .option("--seconds", &o.seconds, "N", "qwen3a, voxtral, glma: the clip's length, s (>= 1)")
        .option("--repeats", &o.repeats, "N", "the evaluation kinds: repeats of the overhead's paired runs, at least (>= 1)")
        .option("--repeat-for", &o.repeat_for_s, "S", "the evaluation kinds: more repeats, up to 3x, while they took under S s (>= 0)")
        .option("--backend", &o.backend, "NAME", "the evaluation kinds: cpu, vulkan (model and projector offloaded) or vulkan-1t (llvmpipe on one thread)")
        .flag("--no-header", &no_header, true, "the evaluation kinds: the rows alone (bench prints header and targets)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    o.header = !no_header;
    return p.check({{!bench_mtmd::is_kind(o.kind), std::string("KIND must be one of ") + bench_mtmd::k_kinds},
                    {o.backend != "cpu" && !common::is_vulkan_setup(o.backend), "--backend must be cpu, vulkan or vulkan-1t"},
                    {o.backend != "cpu" && !is_eval_kind(o.kind), "--backend vulkan(-1t) applies to the evaluation kinds"},
                    {!o.trace.empty() && !is_eval_kind(o.kind), "--trace applies to the evaluation kinds"},
                    {(o.kind == "video") == o.video.empty(), "KIND video and --video FILE go together"},
                    {o.seconds < 1, "--seconds must be at least 1"},
                    {o.repeats < 1, "--repeats must be at least 1"},
                    {o.repeat_for_s < 0, "--repeat-for must be at least 0"},
                    {o.model.empty(), "--model is required"},
                    {o.mmproj.empty(), "--mmproj is required"},
                    {o.runs < 1, "--runs must be at least 1"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

// Two encodes each way; the hook and the stateless callback learn the CPU's rate.
bool warm_up(encoders & e) {
    for (int i = 0; i < 2 * n_ways; ++i) {
        e.encode(i % n_ways, 0, 0);
        if (e.last_ret != 0) {
            std::fprintf(stderr, "error: mtmd_encode_chunk returned %d\n", e.last_ret);
            return false;
        }
    }
    return true;
}

// The embedding decode's plain time: the median of a few decodes after one warm-up.
double measure_decode(embd_decoder & d, int runs) {
    d.decode(false, 0, 0);
    std::vector<double> dec;
    for (int i = 0; i < std::max(3, runs / 2); ++i) {
        dec.push_back(d.decode(false, 0, 0).ms);
    }
    return common::percentile(dec, 0.5);
}

// ---- Whole evaluations: text, an audio clip (qwen3a: one chunk per 8 s window), text (qwen3a,
// voxtral, glma), or text and two images whose InternVL tiles are batched encodes (internvl-batch),
// evaluated end to end; the byte stored at a random point inside the evaluation.

// `seconds` of a deterministic tone that glides from 220 to 880 Hz, with a little xorshift noise.
bitmap_ptr make_clip(mtmd_context * m, int seconds) {
    const int sr = mtmd_get_audio_sample_rate(m);
    std::vector<float> pcm(static_cast<size_t>(sr) * seconds);
    uint32_t x = 2463534242u;
    double phase = 0.0;
    for (size_t i = 0; i < pcm.size(); ++i) {
        const double f = 220.0 + 660.0 * static_cast<double>(i) / static_cast<double>(pcm.size());
        phase += 2.0 * 3.14159265358979 * f / sr;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        pcm[i] = static_cast<float>(0.4 * std::sin(phase) + 0.05 * (static_cast<double>(x) / 4294967296.0 - 0.5));
    }
    return bitmap_ptr(mtmd_bitmap_init_from_audio(pcm.size(), pcm.data()));
}

// A 448x224 gradient, `seed` varying it: InternVL's preprocessor cuts it into two tiles and adds a
// thumbnail, three chunks of one size in a row, which libmtmd batches.
bitmap_ptr make_wide_image(uint32_t seed) {
    const uint32_t w = 448, h = 224;
    std::vector<unsigned char> rgb(static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < rgb.size(); ++i) {
        rgb[i] = static_cast<unsigned char>((i * (7 + seed) + i / (3 * w) * (13 + 2 * seed)) & 0xff);
    }
    return bitmap_ptr(mtmd_bitmap_init(w, h, rgb.data()));
}

// The three ways an evaluation runs: today (upstream's per-chunk helper, the byte checked between
// chunks; internvl-batch: mtmd-cli's loop, each run of batchable image chunks one mtmd_batch_encode,
// then mtmd_helper_decode_image_chunk per chunk), llama-cancel's hooks
// (llama_cancel_mtmd_eval_chunks, with LLAMA_CANCEL_MTMD_BATCH_ENCODE for internvl-batch), the
// stateless callback bound by name in both contexts (the same loop as today's, the byte also read
// inside every graph).
enum eval_way { today = 0, hooks = 1, stateless = 2 };
const char * const k_eval_way_names[n_ways] = {"today (between chunks)", "hook", "stateless callback"};

struct evaluator {
    common::hook_ptr        enc_hook, dec_hook;
    common::stateless_probe probe; // the stateless way's byte (the text context reads it too)
    mtmd_ptr                mctx[n_ways];
    common::context_ptr     lctx[n_ways];
    chunks_ptr              chunks[n_ways];
    int8_t                  byte     = 0;
    int32_t                 n_batch  = 512;
    int                     n_media  = 0;   // media chunks of the prompt
    int                     n_tokens = 0;   // media tokens
    int                     n_encodes = 0;  // clip graphs of one evaluation (batched: fewer than n_media)
    bool                    batched  = false;
    bool                    gpu      = false; // projectors on the GPU (the model's layers as it was loaded)
    int32_t                 last_ret = 0;
    uint64_t                last_checkpoints = 0; // both hooks', in the last evaluation the hook way
    double                  last_cpu_ms      = 0.0; // the evaluating thread's CPU time in the last one
    common::ask_trace *     trace   = nullptr; // --trace: bound into every way's contexts (set before make)
    std::string             video;             // the video kind's clip (set before make)
    bool                    tracing = false;   // the evaluations now are traced (the overhead's)

    // `batched`: two wide images, their tiles batched; otherwise a `seconds` audio clip.
    // `first`: the way whose contexts are made first.
    bool make(const std::string & mmproj, llama_model * model, int threads, int seconds, bool batched_, bool gpu_,
              int first) {
        batched = batched_;
        gpu     = gpu_;
        llama_cancel_hook_params hp = llama_cancel_hook_default_params();
        if (trace != nullptr) {
            hp.chain      = common::ask_trace::observe;
            hp.chain_data = trace;
        }
        enc_hook.reset(llama_cancel_hook_init(&hp));
        dec_hook.reset(llama_cancel_hook_init(&hp));
        if (trace != nullptr) {
            trace->hooks[0] = enc_hook.get();
            trace->hooks[1] = dec_hook.get();
        }
        llama_cancel_load_result lr;
        for (int k = 0; k < n_ways; ++k) { // in rotating order: where a context lands is part of its speed
            const int w = (first + k) % n_ways;
            if (w == stateless) {
                mctx[w] = init_stateless(mmproj, model, threads, &probe, gpu, trace);
            } else if (w == today && trace != nullptr) {
                // today's loop, with the trace as its cb_eval (which never checkpoints)
                mctx[w] = init_with_eval_cb(mmproj, model, threads, gpu, common::ask_trace::observe, trace);
            } else {
                mctx[w].reset(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model, w == hooks ? enc_hook.get() : nullptr,
                                                               threads, gpu, nullptr, &lr));
            }
            if (!mctx[w]) {
                std::fprintf(stderr, "error: cannot load %s: %s\n", mmproj.c_str(), w == stateless ? "" : lr.message);
                return false;
            }
        }
        const std::string marker = mtmd_default_marker();
        std::vector<bitmap_ptr> media;
        video_frames frames; // the video kind's: a chunk per frame, the helper's texts between them
        std::string prompt;
        if (mctx[stateless] && !video.empty()) {
            std::string error;
            if (frames.read(mctx[today].get(), video, nullptr, error) != video_frames::outcome::read) {
                std::fprintf(stderr, "error: %s\n", error.c_str());
                return false;
            }
            prompt = "Describe this clip: " + frames.text + " Description:";
        } else if (mctx[stateless] && batched) {
            media.push_back(make_wide_image(0));
            media.push_back(make_wide_image(1));
            prompt = "Compare " + marker + " with " + marker + " Answer:";
        } else if (mctx[stateless]) {
            media.push_back(make_clip(mctx[today].get(), seconds));
            prompt = "Transcribe this clip: " + marker + " Transcript:";
        }
        const bool have_media = !frames.frames.empty() || (!media.empty() && std::all_of(media.begin(), media.end(),
                                                                   [](const bitmap_ptr & b) { return b != nullptr; }));
        std::vector<const mtmd_bitmap *> bitmaps = frames.bitmaps();
        for (const bitmap_ptr & b : media) {
            bitmaps.push_back(b.get());
        }
        for (int w = 0; w < n_ways; ++w) {
            chunks[w].reset(mtmd_input_chunks_init());
            mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
            if (!have_media || mtmd_tokenize(mctx[w].get(), chunks[w].get(), &text, bitmaps.data(), bitmaps.size()) != 0) {
                std::fprintf(stderr, "error: cannot load %s or tokenize its input\n", mmproj.c_str());
                return false;
            }
        }
        n_media = n_tokens = n_encodes = 0;
        for (size_t i = 0; i < mtmd_input_chunks_size(chunks[today].get()); ++i) {
            const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks[today].get(), i);
            if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_TEXT) {
                ++n_media;
                n_tokens += static_cast<int>(mtmd_input_chunk_get_n_tokens(c));
            }
        }
        n_encodes = batched ? 0 : n_media; // counted by the first batched evaluation
        common::context_options opt;
        opt.n_ctx       = 2048;
        opt.n_batch     = opt.n_ubatch = static_cast<uint32_t>(n_batch);
        opt.n_threads   = threads;
        opt.offload_kqv = gpu; // offloaded: attention and KV cache on the device too, as a GPU host has them
        for (int k = 0; k < n_ways; ++k) {
            const int w = (first + k) % n_ways;
            common::context_options o = opt;
            if (w == stateless) { // both names, as the README tells a host that binds them alone
                o.cb_eval             = llama_cancel_eval_callback;
                o.cb_eval_data        = &probe.byte;
                o.abort_callback      = llama_cancel_abort_callback;
                o.abort_callback_data = &probe.byte;
                if (trace != nullptr) {
                    trace->text_target      = o.cb_eval;
                    trace->text_target_data = o.cb_eval_data;
                    o.cb_eval               = common::ask_trace::forward_text;
                    o.cb_eval_data          = trace;
                }
            } else if (w == today && trace != nullptr) {
                o.cb_eval      = common::ask_trace::observe;
                o.cb_eval_data = trace;
            } else if (w == hooks) { // the decode hook bound as llama_cancel_hook_bind sets it
                llama_context_params cp = llama_context_default_params();
                llama_cancel_hook_bind(dec_hook.get(), &cp);
                o.cb_eval      = cp.cb_eval;
                o.cb_eval_data = cp.cb_eval_user_data;
            }
            lctx[w] = common::make_context(model, o);
        }
        if (!lctx[today] || !lctx[hooks] || !lctx[stateless]) {
            std::fprintf(stderr, "error: cannot create the text contexts\n");
            return false;
        }
        llama_cancel_hook_set_byte(enc_hook.get(), &byte);
        llama_cancel_hook_set_byte(dec_hook.get(), &byte);
        return true;
    }

    // Upstream's helper chunk by chunk, the byte checked before each; batched, each run of media
    // chunks mtmd_batch_add_chunk takes is one mtmd_batch_encode, then every chunk of it decoded by
    // mtmd_helper_decode_image_chunk (mtmd-cli's loop). True when all ran.
    bool per_chunk(int w, const int8_t * byte) {
        llama_pos n_past = 0;
        const size_t n = mtmd_input_chunks_size(chunks[w].get());
        mtmd::batch_ptr batch;
        int encodes = 0;
        for (size_t i = 0; i < n; ++i) {
            if (*reinterpret_cast<const volatile int8_t *>(byte) != 0) {
                return false;
            }
            const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks[w].get(), i);
            if (!batched || mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
                last_ret = mtmd_helper_eval_chunk_single(mctx[w].get(), lctx[w].get(), c, n_past, 0, n_batch, i == n - 1,
                                                         &n_past);
            } else {
                float * embd = batch ? mtmd_batch_get_output_embd(batch.get(), c) : nullptr;
                if (embd == nullptr) {
                    batch.reset(mtmd_batch_init(mctx[w].get()));
                    last_ret = mtmd_batch_add_chunk(batch.get(), c);
                    for (size_t j = i + 1; last_ret == 0 && j < n; ++j) {
                        const mtmd_input_chunk * next = mtmd_input_chunks_get(chunks[w].get(), j);
                        if (mtmd_input_chunk_get_type(next) == MTMD_INPUT_CHUNK_TYPE_TEXT ||
                            mtmd_batch_add_chunk(batch.get(), next) != 0) {
                            break;
                        }
                    }
                    last_ret = last_ret == 0 ? mtmd_batch_encode(batch.get()) : last_ret;
                    embd     = last_ret == 0 ? mtmd_batch_get_output_embd(batch.get(), c) : nullptr;
                    ++encodes;
                }
                last_ret = embd == nullptr ? (last_ret != 0 ? last_ret : -1)
                                           : mtmd_helper_decode_image_chunk(mctx[w].get(), lctx[w].get(), c, embd, n_past,
                                                                            0, n_batch, &n_past, nullptr, nullptr);
            }
            if (last_ret != 0) {
                return false;
            }
        }
        if (batched && n_encodes == 0) {
            n_encodes = encodes;
        }
        return true;
    }

    // The longest single node of today's evaluation (clip graphs and text decodes), on contexts of
    // their own whose eval callback asks for every node: what no checkpoint can split, so a stop
    // landing at its start waits for it whatever the interval.
    bool profile_nodes(const std::string & mmproj, llama_model * model, int threads, common::node_timer & nt) {
        mtmd_context_params mp = mtmd_context_params_default();
        mp.use_gpu           = gpu;
        mp.print_timings     = false;
        mp.n_threads         = threads;
        mp.cb_eval           = common::node_timer::callback;
        mp.cb_eval_user_data = &nt;
        mtmd_ptr m(mtmd_init_from_file(mmproj.c_str(), model, mp));
        common::context_options opt;
        opt.n_ctx        = 2048;
        opt.n_batch      = opt.n_ubatch = static_cast<uint32_t>(n_batch);
        opt.n_threads    = threads;
        opt.offload_kqv  = gpu;
        opt.cb_eval      = common::node_timer::callback;
        opt.cb_eval_data = &nt;
        common::context_ptr l = common::make_context(model, opt);
        if (!m || !l) {
            return false;
        }
        std::swap(mctx[today], m);
        std::swap(lctx[today], l);
        int8_t zero = 0;
        const bool ran = per_chunk(today, &zero);
        std::swap(mctx[today], m);
        std::swap(lctx[today], l);
        return ran;
    }

    // One evaluation the given way from an empty memory, the byte stored at `frac` of `full` ms
    // when `frac` > 0; `stopped`: the byte cut it short.
    landed eval(int w, double frac, double full, bool * stopped = nullptr) {
        llama_memory_clear(llama_get_memory(lctx[w].get()), true);
        byte = 0;
        probe.rearm(-1);
        llama_cancel_hook_reset(enc_hook.get());
        llama_cancel_hook_reset(dec_hook.get());
        bool cut = false;
        const uint64_t cp0 = llama_cancel_hook_get_stats(enc_hook.get()).checkpoints +
                             llama_cancel_hook_get_stats(dec_hook.get()).checkpoints;
        const double   cpu0 = common::thread_cpu_ms();
        if (trace != nullptr && tracing) {
            trace->begin(w);
        }
        const landed l = store_then(frac, full, w == stateless ? &probe.byte : &byte, [&] {
            if (w == hooks) {
                llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
                p.byte      = &byte;
                p.hook      = dec_hook.get();
                p.mtmd_hook = enc_hook.get();
                p.n_batch   = n_batch;
                p.options   = batched ? LLAMA_CANCEL_MTMD_BATCH_ENCODE : 0u;
                llama_cancel_mtmd_result r;
                last_ret = llama_cancel_mtmd_eval_chunks(mctx[w].get(), lctx[w].get(), chunks[w].get(), 0, 0, &p, &r);
                cut      = last_ret == LLAMA_CANCEL_CANCELLED;
                last_ret = cut ? 0 : last_ret;
            } else {
                cut = !per_chunk(w, w == stateless ? &probe.byte : &byte) || (w == stateless && probe.stopped_at >= 0);
            }
            // Every way's evaluation ends with the last logits read (llama_decode returns before a
            // GPU-API backend computed them: the next way's call would wait for this one's rest).
            llama_synchronize(lctx[w].get());
        });
        if (stopped != nullptr) {
            *stopped = cut;
        }
        last_cpu_ms = common::thread_cpu_ms() - cpu0;
        if (trace != nullptr) {
            trace->end();
        }
        if (w == hooks) {
            last_checkpoints = llama_cancel_hook_get_stats(enc_hook.get()).checkpoints +
                               llama_cancel_hook_get_stats(dec_hook.get()).checkpoints - cp0;
        }
        return l;
    }
};

struct eval_results {
    int    n_media = 0, n_tokens = 0, n_encodes = 0, seconds = 0; // seconds: 0 for images
    bool   batched = false;
    std::string backend = "cpu";
    double eval_ms = 0.0;
    double longest_node_ms = 0.0; // the evaluation's longest single node (profile_nodes)
    std::string longest_node_op;
    std::vector<double> overhead_pct[n_ways]; // each repeat's median paired ratio, byte at 0
    std::vector<double> hook_checkpoints;     // each repeat's mean checkpoints an evaluation, the hook way
    std::vector<double> thread_cpu_pct[n_ways]; // each repeat's evaluating thread's CPU, % of the wall (mean)
    common::latencies   lat[n_ways];
};

double median_pct(const std::vector<double> & v) {
    return v.empty() ? NAN : common::percentile(v, 0.5);
}

// One round of the overhead: `runs` triples in rotating order; the median ratio of each way to
// today's run of the same triple.
void measure_eval_round(evaluator & e, int runs, eval_results & r, std::vector<double> & today_ms) {
    std::vector<double> ratios[n_ways];
    double checkpoints = 0.0, cpu_pct[n_ways] = {0, 0, 0};
    e.tracing = true;
    for (int i = 0; i < runs; ++i) {
        double t[n_ways] = {0, 0, 0};
        for (int k = 0; k < n_ways; ++k) {
            const int w = (i + k) % n_ways;
            t[w] = e.eval(w, 0, 0).ms;
            cpu_pct[w] += e.last_cpu_ms / t[w] * 100.0 / runs;
        }
        checkpoints += static_cast<double>(e.last_checkpoints) / runs;
        for (int w = hooks; w < n_ways; ++w) {
            ratios[w].push_back(t[w] / t[today]);
        }
        today_ms.push_back(t[today]);
    }
    e.tracing = false;
    for (int w = hooks; w < n_ways; ++w) {
        r.overhead_pct[w].push_back((common::percentile(ratios[w], 0.5) - 1.0) * 100.0);
    }
    r.hook_checkpoints.push_back(checkpoints);
    for (int w = 0; w < n_ways; ++w) {
        r.thread_cpu_pct[w].push_back(cpu_pct[w]);
    }
    // Each repeat as it ends: a spread between repeats is read against the hook's checkpoints and
    // the evaluating thread's CPU (on a device the host sleeps on, what it spun).
    std::fprintf(stderr,
                 "  repeat %zu: hook %+.2f%% (%.1f checkpoints an evaluation), stateless %+.2f%%; evaluating "
                 "thread's CPU %% of the wall: today %.1f, hook %.1f, stateless %.1f\n",
                 r.hook_checkpoints.size(), r.overhead_pct[hooks].back(), checkpoints, r.overhead_pct[stateless].back(),
                 cpu_pct[today], cpu_pct[hooks], cpu_pct[stateless]);
}

// Stop latency: the byte stored at the same random 2-98% point of each way's evaluation.
void measure_eval_latency(evaluator & e, int runs, uint32_t seed, eval_results & r) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> point(0.02, 0.98);
    for (int i = 0; i < runs; ++i) {
        const double frac = point(rng);
        for (int w = 0; w < n_ways; ++w) {
            bool stopped = false;
            const landed l = e.eval(w, frac, r.eval_ms, &stopped);
            r.lat[w].add(l.ms, l.finished_first, stopped);
        }
    }
}

using bench_mtmd::k_eval_overhead_pct;
using bench_mtmd::k_eval_worst_pct_cpu;

std::string pct_list(const std::vector<double> & v) {
    std::string s;
    for (double x : v) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.2f", s.empty() ? "" : ", ", x);
        s += buf;
    }
    char med[48];
    std::snprintf(med, sizeof(med), "%.2f%% (", median_pct(v));
    return v.empty() ? std::string("-") : med + s + ")";
}

void print_eval_rows(const std::string & kind, const eval_results & r, int runs) {
    for (int w = 0; w < n_ways; ++w) {
        const common::latencies & l = r.lat[w];
        auto fig = [&](double v, const char * format) {
            char buf[32];
            std::snprintf(buf, sizeof(buf), format, v);
            return l.ms.empty() ? std::string("-") : std::string(buf);
        };
        const double mx = l.ms.empty() ? 0.0 : common::max_of(l.ms);
        char media[32];
        if (r.batched) {
            std::snprintf(media, sizeof(media), "%d in %d", r.n_media, r.n_encodes);
        } else {
            std::snprintf(media, sizeof(media), "%d", r.n_media);
        }
        std::printf("| %-14s | %-22s | %6s | %7s | %6d | %9.1f | %11s | %6s | %5s | %5s | %-25s | %3d/%-3d | %14d |\n",
                    kind.c_str(), k_eval_way_names[w], r.seconds == 0 ? "-" : std::to_string(r.seconds).c_str(), media,
                    r.n_tokens, r.eval_ms,
                    fig(l.p50(), "%.2f").c_str(), fig(mx, "%.2f").c_str(), fig(l.p50() / r.eval_ms * 100.0, "%.1f").c_str(),
                    fig(mx / r.eval_ms * 100.0, "%.1f").c_str(), w == today ? "-" : pct_list(r.overhead_pct[w]).c_str(),
                    l.cancelled, runs, l.finished_first);
    }
    std::fflush(stdout);
}

common::json eval_latency_json(const eval_results & r, int w) {
    const common::latencies & l = r.lat[w];
    common::json j = common::to_json(l);
    j["p50_pct_of_eval"] = l.ms.empty() ? common::json(nullptr) : common::json(common::printed(l.p50() / r.eval_ms * 100.0));
    j["max_pct_of_eval"] = l.ms.empty() ? common::json(nullptr)
                                        : common::json(common::printed(common::max_of(l.ms) / r.eval_ms * 100.0));
    return j;
}

double worst_target_pct(const eval_results & r) {
    return r.backend == "cpu" ? k_eval_worst_pct_cpu : bench_mtmd::k_eval_worst_pct_vulkan;
}

bool worst_met(const eval_results & r, int w) {
    return !r.lat[w].ms.empty() && common::max_of(r.lat[w].ms) / r.eval_ms * 100.0 <= worst_target_pct(r);
}

double node_bound_ms(const eval_results & r) {
    return common::node_timer::bound_ms(r.longest_node_ms);
}
bool node_bound_met(const eval_results & r, int w) {
    return !r.lat[w].ms.empty() && r.longest_node_ms > 0.0 && common::max_of(r.lat[w].ms) <= node_bound_ms(r);
}

common::json eval_row_json(const std::string & kind, const std::string & mmproj, const std::string & model,
                           const std::string & video, int threads, int runs, const eval_results & r) {
    using common::printed;
    const double oh_hook = median_pct(r.overhead_pct[hooks]), oh_name = median_pct(r.overhead_pct[stateless]);
    const common::json row = {
        {"kind", kind},
        {"mode", "eval"},
        {"backend", r.backend},
        {"model", model},
        {"mmproj", mmproj},
        {"clip_s", r.seconds == 0 ? common::json(nullptr) : common::json(r.seconds)},
        {"video", video.empty() ? common::json(nullptr) : common::json(video)},
        {"media_chunks", r.n_media},
        {"media_tokens", r.n_tokens},
        {"batch_encode", r.batched},
        {"clip_graphs", r.n_encodes},
        {"threads", threads},
        {"runs", runs},
        {"eval_ms", printed(r.eval_ms)},
        {"eval_stop_today_ms", eval_latency_json(r, today)},
        {"eval_stop_hook_ms", eval_latency_json(r, hooks)},
        {"eval_stop_stateless_ms", eval_latency_json(r, stateless)},
        {"eval_hook_overhead_pct", printed(oh_hook)},
        {"eval_hook_overhead_repeats_pct", common::printed_list(r.overhead_pct[hooks])},
        {"eval_stateless_overhead_pct", printed(oh_name)},
        {"eval_stateless_overhead_repeats_pct", common::printed_list(r.overhead_pct[stateless])},
        {"eval_hook_checkpoints_repeats", common::printed_list(r.hook_checkpoints)},
        {"eval_thread_cpu_pct_repeats", {{"today", common::printed_list(r.thread_cpu_pct[today])},
                                         {"hook", common::printed_list(r.thread_cpu_pct[hooks])},
                                         {"stateless", common::printed_list(r.thread_cpu_pct[stateless])}}},
        {"longest_node_ms", printed(r.longest_node_ms)},
        {"longest_node_op", r.longest_node_op},
        {"longest_node_pct_of_eval", printed(r.longest_node_ms / r.eval_ms * 100.0)},
        {"targets",
         {{"worst_stop_target_pct", worst_target_pct(r)},
          {"worst_stop_le_target", worst_met(r, hooks)},
          {"worst_stop_le_interval_plus_longest_node", node_bound_met(r, hooks)},
          {"stateless_worst_stop_le_interval_plus_longest_node", node_bound_met(r, stateless)},
          {"overhead_le_2pct", oh_hook <= k_eval_overhead_pct},
          {"stateless_worst_stop_le_target", worst_met(r, stateless)},
          {"stateless_overhead_le_2pct", oh_name <= k_eval_overhead_pct}}}};
    return common::with_threads_override(row);
}

void print_eval_targets(const std::string & kind, const eval_results & r) {
    for (int w = hooks; w < n_ways; ++w) {
        const double mx = r.lat[w].ms.empty() ? NAN : common::max_of(r.lat[w].ms) / r.eval_ms * 100.0;
        const double oh = median_pct(r.overhead_pct[w]);
        const double mx_ms = r.lat[w].ms.empty() ? NAN : common::max_of(r.lat[w].ms);
        std::printf("  %s, %s: worst stop %.1f%% of the evaluation <= %.0f%%: %s; byte at 0 %.2f%% <= %.0f%%: %s; "
                    "worst stop %.1f ms <= interval + longest node (%s, %.1f ms, %.1f%% of the evaluation) + %.0f ms: %s\n",
                    kind.c_str(), k_eval_way_names[w], mx, worst_target_pct(r), worst_met(r, w) ? "met" : "MISSED", oh,
                    k_eval_overhead_pct, oh <= k_eval_overhead_pct ? "met" : "MISSED", mx_ms, r.longest_node_op.c_str(),
                    r.longest_node_ms, r.longest_node_ms / r.eval_ms * 100.0, common::node_timer::k_return_ms,
                    node_bound_met(r, w) ? "met" : "MISSED");
    }
    std::fflush(stdout);
}

// An evaluator on fresh contexts, warmed up (the hooks learn the CPU's rate); null after an error.
std::unique_ptr<evaluator> make_warm_evaluator(const mtmd_options & o, llama_model * model, int first,
                                               common::ask_trace * trace) {
    auto e   = std::make_unique<evaluator>();
    e->trace = trace;
    e->video = o.video;
    if (!e->make(o.mmproj, model, o.threads, o.seconds, o.kind == "internvl-batch", o.backend != "cpu", first)) {
        return nullptr;
    }
    for (int i = 0; i < 2 * n_ways; ++i) {
        e->eval(i % n_ways, 0, 0);
        if (e->last_ret != 0) {
            std::fprintf(stderr, "error: the evaluation returned %d\n", e->last_ret);
            return nullptr;
        }
    }
    return e;
}

int bench_mtmd_eval(const mtmd_options & o, llama_model * model) {
    // Each repeat on contexts of its own: where a context's buffers land moves one way against
    // another by several percent for the whole life of the contexts (the same loop on two sets of
    // contexts without callbacks: -3.6% to +4.6% across processes, steady within one), so repeats
    // on one set would repeat that draw, not sample it. The ways' contexts are made in rotating
    // order, a repeat each way first.
    eval_results r;
    std::vector<double> today_ms;
    common::ask_trace trace;
    if (!o.trace.empty() && !trace.open(o.trace.c_str())) {
        std::fprintf(stderr, "error: cannot write %s\n", o.trace.c_str());
        return 1;
    }
    std::unique_ptr<evaluator> e;
    std::fprintf(stderr, "[mtmd %s] evaluation overhead (%d repeats of %d, more up to %d s)\n", o.kind.c_str(), o.repeats,
                 o.runs, o.repeat_for_s);
    const double t_start = common::now_ms();
    for (int rep = 0; rep < o.repeats || (rep < 3 * o.repeats && common::now_ms() - t_start < 1000.0 * o.repeat_for_s);
         ++rep) {
        e.reset();
        e = make_warm_evaluator(o, model, rep % n_ways, o.trace.empty() ? nullptr : &trace);
        if (!e) {
            return 1;
        }
        measure_eval_round(*e, o.runs, r, today_ms);
    }
    r.eval_ms   = common::percentile(today_ms, 0.5);
    r.n_media   = e->n_media;
    r.n_tokens  = e->n_tokens;
    r.n_encodes = e->n_encodes;
    r.batched   = e->batched;
    r.seconds   = e->batched || !o.video.empty() ? 0 : o.seconds;
    r.backend   = o.backend;
    std::fprintf(stderr, "[mtmd %s] stop latency\n", o.kind.c_str());
    measure_eval_latency(*e, o.runs, o.seed, r);
    std::fprintf(stderr, "[mtmd %s] node profile\n", o.kind.c_str());
    common::node_timer nt;
    if (!e->profile_nodes(o.mmproj, model, o.threads, nt)) {
        std::fprintf(stderr, "error: the node profile's evaluation failed\n");
        return 1;
    }
    r.longest_node_ms = nt.longest;
    r.longest_node_op = nt.longest_op;
    if (o.header) {
        bench_mtmd::print_eval_header(o.seconds, o.repeats);
    }
    const std::string label = o.backend == "cpu" ? o.kind : o.kind + ":" + o.backend;
    print_eval_rows(label, r, o.runs);
    if (o.header) {
        std::printf("\ntargets (%s):\n", o.kind.c_str());
        print_eval_targets(label, r);
    }
    if (!o.json.empty() &&
        !common::write_json_file(o.json, eval_row_json(o.kind, o.mmproj, o.model, o.video, o.threads, o.runs, r))) {
        return 1;
    }
    return 0;
}

} // namespace

void bench_mtmd::print_eval_header(int seconds, int repeats) {
    std::printf("\nmultimodal evaluations (mtmd, CPU): text, a %d s audio clip (qwen3a: a chunk per 8 s window), "
                "text; internvl-batch: text, two 448x224 images (two tiles and a thumbnail each: 6 image chunks, "
                "\"media\": chunks in clip graphs, each image's three one batched encode), text; video: text, the frames "
                "libmtmd's helper reads from a %d s %dx%d clip at %d a second (%d image chunks, its timestamps between "
                "them), text; evaluated whole; "
                "byte stored at a random 2-98%% point of the evaluation; today = upstream's loop (the audio rows: "
                "mtmd_helper_eval_chunk_single chunk by chunk, the video's frames too; internvl-batch: mtmd-cli's mtmd_batch_encode, then "
                "mtmd_helper_decode_image_chunk per chunk), the byte checked between chunks (what a stop waits "
                "without llama-cancel); hook = llama_cancel_mtmd_eval_chunks (internvl-batch: with "
                "LLAMA_CANCEL_MTMD_BATCH_ENCODE); stop = store to return, %% of the whole evaluation, over the runs "
                "the store reached before the return (finished first counted apart); overhead with the byte at 0 "
                "against today (median paired ratio, each of at least %d repeats on fresh contexts, up to 3x as "
                "many while they took under %d s); targets: worst stop <= %.0f%% of the evaluation, overhead "
                "<= %.0f%%\n\n",
                seconds, k_video_seconds, k_video_side, k_video_side, k_video_fps, k_video_fps * k_video_seconds, repeats,
                bench_mtmd::k_eval_repeat_for_s, k_eval_worst_pct_cpu, k_eval_overhead_pct);
    std::printf("| kind           | path                   | clip s |   media | tokens |   eval ms | stop p50 ms | max ms "
                "| p50 %% | max %% | overhead (repeats)        | stopped | finished first |\n");
    std::printf("|:---------------|:-----------------------|-------:|--------:|-------:|----------:|------------:|-------:"
                "|------:|------:|:--------------------------|--------:|---------------:|\n");
    std::fflush(stdout);
}

int bench_mtmd_main(int argc, char ** argv) {
    mtmd_options o;
    const int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    common::note_threads_override("mtmd " + o.kind);
    mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    common::backend_setup setup; // Vulkan: the device, the model's layers offloaded
    common::model_ptr     model;
    if (o.backend == "cpu") {
        common::load_backends();
        model = common::load_model(o.model);
    } else if (common::setup_backend(o.backend, "", o.threads, setup)) {
        model = setup.load(o.model, -1);
    }
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", o.model.c_str());
        return 1;
    }
    if (is_eval_kind(o.kind)) {
        return bench_mtmd_eval(o, model.get());
    }
    encoders e;
    if (!e.make(o.mmproj, model.get(), o.threads, o.kind == "vision") || !warm_up(e)) {
        return 1;
    }
    results r;
    r.n_tokens = static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(e.chunk[plain]));
    std::fprintf(stderr, "[mtmd %s] encode overhead\n", o.kind.c_str());
    measure_encode(e, o.runs, r);

    embd_decoder d;
    if (!d.make(model.get(), e, r.n_tokens, o.threads)) {
        std::fprintf(stderr, "error: cannot create a context for the embeddings\n");
        return 1;
    }
    r.decode_ms = measure_decode(d, o.runs);

    std::fprintf(stderr, "[mtmd %s] cancel latency\n", o.kind.c_str());
    measure_latency(e, d, o.runs, o.seed, r);
    print_rows(o.kind, r, o.runs);
    if (!o.json.empty() && !common::write_json_file(o.json, row_json(o.kind, o.mmproj, o.threads, o.runs, r))) {
        return 1;
    }
    return 0;
}
