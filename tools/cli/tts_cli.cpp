// `llama-cancel tts`: text to speech (libmtmd's Qwen3-TTS or Pocket-TTS pipeline) under the
// library's llama_cancel_tts_*, a line of progress per frame, the audio written as a WAV (RIFF,
// 16-bit PCM, mono, at the pipeline's rate). Ctrl-C stores the byte from the signal handler: the
// step in flight (a backbone decode, GEN_CODE, GEN_WAV) stops inside its graph, and the tool writes
// the audio produced so far (the windows GEN_WAV finished; frames still waiting for their window are
// not audio yet), says so and exits 130. A second Ctrl-C exits at once.
#include "commands.h"
#include "cli/ctrl_c.h"
#include "common/args.h"
#include "common/backends.h"
#include "support.h"

#include "mtmd-helper.h"
#include "mtmd.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace {



// Exit statuses: 0 done, 1 an error (bad input included), 2 a bad command line, 130 stopped by
// Ctrl-C (the WAV holds the audio so far).
constexpr int k_exit_cancelled = 130;

struct tts_options {
    std::string model, mmproj, text, out, lang, voice, backend = "cpu";
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    uint32_t    seed       = 1;
    int         max_frames = 0, window = 0, threads = 2, n_ctx = 0;
};

const char k_synopsis[] =
    "usage: llama-cancel tts --model BACKBONE.gguf --mmproj MMPROJ.gguf --text TEXT --out OUT.wav\n"
    "                        [--seed N] [--max-frames N] [--window N] [--threads N] [--lang L]\n"
    "                        [--voice FILE] [--ctx N] [--backend cpu|blas|vulkan|rpc1|rpc2]\n"
    "\n"
    "Text to speech with a Qwen3-TTS or Pocket-TTS pair (libmtmd's audio generation): a line per\n"
    "frame, the audio written to OUT.wav (16-bit PCM, mono, 24 kHz). Ctrl-C stops the step in flight\n"
    "at once and writes the audio produced so far (exit status 130).\n";

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, tts_options & o) {
    cli_args::parser p(k_synopsis);
    p.option("--model|-m", &o.model, "PATH", "the TTS backbone (Qwen3-TTS talker, Pocket-TTS backbone; required)")
        .option("--mmproj", &o.mmproj, "PATH", "its audio-generation projector (required)")
        .option("--text|-p", &o.text, "TEXT", "the utterance (required)")
        .option("--out|-o", &o.out, "PATH", "the WAV file to write (required)")
        .option("--seed", &o.seed, "N", "GEN_CODE's draws")
        .option("--max-frames|-n", &o.max_frames, "N", "frames in all, 80 ms each (0: until end of speech or a full context)")
        .option("--window", &o.window, "N", "frames per GEN_WAV (0: the pipeline's, Qwen3-TTS 72, Pocket-TTS 8)")
        .option("--threads|-t", &o.threads, "N", "CPU threads")
        .option("--lang", &o.lang, "L", "Qwen3-TTS language (en, english, ...; default english)")
        .option("--voice", &o.voice, "FILE", "voice reference audio for the projector's speaker encoder")
        .option("--ctx", &o.n_ctx, "N", "the backbone's context (0: --max-frames and the text's length, or 4096)")
        .option("--backend", &o.backend, "NAME", "backend setup")
        .option("--rpc-server", &o.rpc_server, "PATH", "ggml's RPC server (the rpc setups)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {o.mmproj.empty(), "--mmproj is required"},
                    {o.text.empty(), "--text is required"},
                    {o.out.empty(), "--out is required"},
                    {o.max_frames < 0, "--max-frames must be at least 0"},
                    {o.window < 0, "--window must be at least 0"},
                    {o.threads < 1, "--threads must be at least 1"},
                    {o.n_ctx < 0, "--ctx must be at least 0"},
                    {!common::is_setup_name(o.backend),
                     "unknown --backend '" + o.backend + "' (" + common::setup_names() + ")"}});
}

// "error: OPTION PATH: why" when an input file cannot be read; true when it can.
bool readable(const char * option, const std::string & path) {
    if (access(path.c_str(), R_OK) == 0) {
        return true;
    }
    std::fprintf(stderr, "error: %s %s: %s\n", option, path.c_str(), std::strerror(errno));
    return false;
}

// The PCM as a WAV file: RIFF, "fmt " (PCM, 1 channel, 16 bits, `rate` Hz), "data"; each sample
// clamped to [-1, 1] and rounded. False with a message on stderr when it cannot be written.
bool write_wav(const std::string & path, const float * pcm, int64_t n, int32_t rate) {
    if (n > (INT32_MAX - 36) / 2) {
        std::fprintf(stderr, "error: %lld samples do not fit in one WAV file\n", static_cast<long long>(n));
        return false;
    }
    const uint32_t data_bytes = static_cast<uint32_t>(n) * 2;
    std::vector<unsigned char> buf;
    buf.reserve(44 + data_bytes);
    auto tag = [&](const char * s) { buf.insert(buf.end(), s, s + 4); };
    auto u32 = [&](uint32_t v) {
        for (int i = 0; i < 4; ++i) buf.push_back(static_cast<unsigned char>(v >> (8 * i)));
    };
    auto u16 = [&](uint32_t v) {
        buf.push_back(static_cast<unsigned char>(v));
        buf.push_back(static_cast<unsigned char>(v >> 8));
    };
    tag("RIFF");
    u32(36 + data_bytes);
    tag("WAVE");
    tag("fmt ");
    u32(16);                            // the PCM format's chunk size
    u16(1);                             // PCM
    u16(1);                             // mono
    u32(static_cast<uint32_t>(rate));   // samples a second
    u32(static_cast<uint32_t>(rate) * 2); // bytes a second
    u16(2);                             // bytes a frame
    u16(16);                            // bits a sample
    tag("data");
    u32(data_bytes);
    for (int64_t i = 0; i < n; ++i) {
        const float   x = std::isnan(pcm[i]) ? 0.0f : std::min(1.0f, std::max(-1.0f, pcm[i]));
        const int32_t s = static_cast<int32_t>(std::lrint(x * 32767.0f));
        u16(static_cast<uint16_t>(static_cast<int16_t>(s)));
    }
    std::FILE * f = std::fopen(path.c_str(), "wb");
    const bool  ok = f != nullptr && std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
    if (f != nullptr && std::fclose(f) != 0) {
        std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    if (!ok) {
        std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    }
    return ok;
}

// The backbone, its load stopped by Ctrl-C; -1 when it loaded, else the exit status.
int load_model(const tts_options & o, const common::backend_setup & setup, common::model_ptr & model) {
    std::fprintf(stderr, "loading %s on %s (Ctrl-C cancels)\n", o.model.c_str(), setup.description.c_str());
    std::vector<ggml_backend_dev_t> devices(setup.devices);
    devices.push_back(nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = setup.devices.empty() ? 0 : -1;
    if (!setup.devices.empty()) {
        mp.devices = devices.data();
    }
    llama_cancel_load_result lr;
    model.reset(llama_cancel_model_load(o.model.c_str(), mp, ctrl_c::byte(), &lr));
    if (model) {
        return -1;
    }
    if (lr.status == LLAMA_CANCEL_CANCELLED) {
        std::fprintf(stderr, "[load cancelled %.1f ms after Ctrl-C]\n", ctrl_c::ms_since());
        return k_exit_cancelled;
    }
    std::fprintf(stderr, "error: cannot load %s: %s\n", o.model.c_str(), lr.message);
    return 1;
}

struct mtmd_deleter { void operator()(mtmd_context * m) const { mtmd_free(m); } };
struct tts_deleter { void operator()(llama_cancel_tts * t) const { llama_cancel_tts_free(t); } };
struct bitmap_deleter { void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); } };

const char * pipeline_name(mtmd_gen_audio_type t) {
    return t == MTMD_GEN_AUDIO_TYPE_QWEN3TTS ? "Qwen3-TTS" : t == MTMD_GEN_AUDIO_TYPE_POCKETTTS ? "Pocket-TTS" : "none";
}

const char * step_name(int32_t step) {
    switch (step) {
        case LLAMA_CANCEL_TTS_STEP_VOICE: return "the voice's encode";
        case LLAMA_CANCEL_TTS_STEP_PROMPT: return "a prompt decode";
        case LLAMA_CANCEL_TTS_STEP_GEN_CODE: return "GEN_CODE (the code predictor or flow step)";
        case LLAMA_CANCEL_TTS_STEP_BACKBONE: return "the backbone's frame decode";
        case LLAMA_CANCEL_TTS_STEP_GEN_WAV: return "GEN_WAV (code2wav or the mimi decoder)";
        case LLAMA_CANCEL_TTS_STEP_BETWEEN: return "between steps";
        default: return "no step";
    }
}

// A line per committed frame: frames so far, their seconds, and the seconds already audio (PCM).
struct progress {
    int32_t sample_rate   = 24000;
    int64_t frame_samples = 1920; // both pipelines: 80 ms a frame at 24 kHz
    bool    tty           = false;
    static bool cb(int32_t n_frames, int64_t n_samples, void * d) {
        const auto * p = static_cast<const progress *>(d);
        std::fprintf(stderr, "%sframes %d: %.2f s generated, %.2f s of audio%s", p->tty ? "\r" : "", n_frames,
                     static_cast<double>(n_frames) * p->frame_samples / p->sample_rate,
                     static_cast<double>(n_samples) / p->sample_rate, p->tty ? "   " : "\n");
        std::fflush(stderr);
        return true;
    }
};

// The backbone's context, sized for the prompt and the frames, embeddings on, `hook` bound.
common::context_ptr make_tts_context(const tts_options & o, llama_model * model, bool cpu, llama_cancel_hook * hook) {
    common::context_options opt;
    uint32_t n_ctx = static_cast<uint32_t>(o.n_ctx);
    if (n_ctx == 0) {
        n_ctx = o.max_frames > 0 ? static_cast<uint32_t>(o.max_frames + o.text.size() + 256) : 4096u;
    }
    opt.n_ctx        = n_ctx;
    opt.n_batch      = 512;
    opt.n_ubatch     = 512;
    opt.n_threads    = o.threads;
    opt.embeddings   = true;
    opt.offload_kqv  = !cpu;
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = hook;
    return common::make_context(model, opt);
}

// What the run ends with: the report, the WAV, the exit status.
int finish(const tts_options & o, llama_cancel_tts * tts, int32_t status, const llama_cancel_tts_result & r,
           double total_ms, bool tty) {
    if (tty) {
        std::fprintf(stderr, "\n");
    }
    const double rate = r.sample_rate > 0 ? r.sample_rate : 24000.0;
    if (status == LLAMA_CANCEL_CANCELLED && ctrl_c::pressed()) {
        std::printf("[cancelled by Ctrl-C: %s stopped %.1f ms after the signal]\n", step_name(r.step),
                    ctrl_c::ms_since());
    }
    const int32_t in_wav = r.n_frames - r.n_frames_pending;
    std::printf("[stop: %s%s%s; %d frames generated, %d in the audio (%d awaited their GEN_WAV window); %lld samples, "
                "%.2f s of audio at %d Hz; %.0f ms]\n",
                llama_cancel_stop_reason_str(r.stop_reason), status == LLAMA_CANCEL_OK ? "" : " at ",
                status == LLAMA_CANCEL_OK ? "" : step_name(r.step), r.n_frames, in_wav, r.n_frames_pending,
                static_cast<long long>(r.n_samples), static_cast<double>(r.n_samples) / rate,
                static_cast<int>(rate), total_ms);
    int64_t       n   = 0;
    const float * pcm = llama_cancel_tts_get_pcm(tts, &n);
    const bool    wav = write_wav(o.out, pcm, n, static_cast<int32_t>(rate));
    if (wav) {
        std::printf("[wrote %s: %lld samples, 16-bit mono, %d Hz]\n", o.out.c_str(), static_cast<long long>(n),
                    static_cast<int>(rate));
    }
    std::fflush(stdout);
    if (status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: %s\n", r.message);
        return 1;
    }
    if (!wav) {
        return 1;
    }
    if (status == LLAMA_CANCEL_CANCELLED) {
        std::printf("[stopped by Ctrl-C: %s holds the audio produced before the stop (exit status %d)]\n",
                    o.out.c_str(), k_exit_cancelled);
        return k_exit_cancelled;
    }
    return 0;
}

} // namespace

int tts_main(int argc, char ** argv) {
    tts_options o;
    int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    if (!readable("--model", o.model) || !readable("--mmproj", o.mmproj) ||
        (!o.voice.empty() && !readable("--voice", o.voice))) {
        return 1;
    }
    ctrl_c::install("\nsecond Ctrl-C: exiting without writing the WAV\n");
    common::quiet_logs();
    mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    common::backend_setup setup;
    if (!common::setup_backend(o.backend, o.rpc_server, o.threads, setup)) {
        return 1;
    }
    const bool        cpu = setup.devices.empty();
    common::model_ptr model;
    if ((rc = load_model(o, setup, model)) >= 0) {
        return rc;
    }
    // The hooks outlive the contexts they are bound to.
    common::hook_ptr gen_hook(llama_cancel_hook_init(nullptr));
    common::hook_ptr dec_hook(llama_cancel_hook_init(nullptr));
    llama_cancel_load_result lr;
    std::unique_ptr<mtmd_context, mtmd_deleter> mctx(llama_cancel_mtmd_init_from_file(
        o.mmproj.c_str(), model.get(), gen_hook.get(), o.threads, !cpu, ctrl_c::byte(), &lr));
    if (!mctx) {
        if (lr.status == LLAMA_CANCEL_CANCELLED) {
            std::fprintf(stderr, "[projector load cancelled %.1f ms after Ctrl-C]\n", ctrl_c::ms_since());
            return k_exit_cancelled;
        }
        std::fprintf(stderr, "error: cannot load the projector %s for %s: %s\n", o.mmproj.c_str(), o.model.c_str(),
                     lr.message);
        return 1;
    }
    const mtmd_gen_audio_info info = mtmd_gen_audio_get_info(mctx.get());
    if (info.type != MTMD_GEN_AUDIO_TYPE_QWEN3TTS && info.type != MTMD_GEN_AUDIO_TYPE_POCKETTTS) {
        std::fprintf(stderr, "error: %s is no text-to-speech projector (it generates no audio); llama-cancel tts "
                     "needs a Qwen3-TTS or Pocket-TTS mmproj\n", o.mmproj.c_str());
        return 1;
    }
    std::unique_ptr<mtmd_bitmap, bitmap_deleter> voice;
    if (!o.voice.empty()) {
        mtmd_helper_bitmap_wrapper w =
            mtmd_helper_bitmap_init_from_file(mctx.get(), o.voice.c_str(), false, mtmd_helper_init_opt_default());
        voice.reset(w.bitmap);
        if (!voice) {
            std::fprintf(stderr, "error: --voice %s: cannot read it as audio this projector takes\n", o.voice.c_str());
            return 1;
        }
    }
    common::context_ptr ctx = make_tts_context(o, model.get(), cpu, dec_hook.get());
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create a context for %s\n", o.model.c_str());
        return 1;
    }
    llama_cancel_tts_params p = llama_cancel_tts_default_params();
    p.text       = o.text.c_str();
    p.lang       = o.lang.empty() ? nullptr : o.lang.c_str();
    p.voice      = voice.get();
    p.seed       = o.seed;
    p.max_frames = o.max_frames;
    p.window     = o.window;
    llama_cancel_tts_result r{};
    std::unique_ptr<llama_cancel_tts, tts_deleter> tts(llama_cancel_tts_init(ctx.get(), mctx.get(), &p, &r));
    if (!tts) {
        std::fprintf(stderr, "error: %s with %s: %s\n", o.model.c_str(), o.mmproj.c_str(), r.message);
        return 1;
    }
    progress pr;
    pr.sample_rate = r.sample_rate > 0 ? r.sample_rate : 24000;
    pr.tty         = isatty(STDERR_FILENO) != 0;
    llama_cancel_tts_run_params rp = llama_cancel_tts_run_default_params();
    rp.byte          = ctrl_c::byte();
    rp.hook   = dec_hook.get();
    rp.mtmd_hook      = gen_hook.get();
    rp.on_frame      = progress::cb;
    rp.on_frame_data = &pr;
    std::fprintf(stderr, "%s on %s: \"%s\", %s frames, window %s, seed %u (Ctrl-C stops and keeps the audio so "
                 "far)\n", pipeline_name(info.type), setup.description.c_str(), o.text.c_str(),
                 o.max_frames > 0 ? std::to_string(o.max_frames).c_str() : "up to end of speech",
                 o.window > 0 ? std::to_string(o.window).c_str() : "default", o.seed);
    const double  t0     = common::now_ms();
    const int32_t status = llama_cancel_tts_generate(tts.get(), &rp, &r);
    return finish(o, tts.get(), status, r, common::now_ms() - t0, pr.tty);
}
