// `llama-cancel generate`: generate from a prompt; Ctrl-C stores the byte from the signal handler,
// the decode in flight stops, and the tool prints what it had and how long the stop took. A second
// Ctrl-C exits at once.
#include "commands.h"
#include "cli/ctrl_c.h"
#include "common/args.h"
#include "common/mtmd_generate.h"
#include "support.h"

#ifdef LLAMA_CANCEL_HAVE_MTMD
#    include "mtmd-helper.h"
#    include "mtmd.h"
#    include "common/video_frames.h"
#endif

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace {


// Says once, on stderr, that the prompt's first graph is computing: from then on a Ctrl-C stops a
// decode in flight (tests/cli_ctrl_c.sh waits for it rather than for a time). The hook's chained
// callback, asked about every node; it never asks for one, so it adds no checkpoint.
struct decode_announcer {
    bool done = false;
    static bool cb(ggml_tensor *, bool ask, void * d) {
        auto * a = static_cast<decode_announcer *>(d);
        if (ask && !a->done) {
            a->done = true;
            static const char msg[] = "[decoding]\n";
            (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
        }
        return false;
    }
};

struct printer {
    const llama_vocab * vocab;
    static bool cb(llama_token t, void * d) {
        char buf[128];
        const int n = llama_token_to_piece(static_cast<printer *>(d)->vocab, t, buf, sizeof(buf), 0, true);
        if (n > 0) {
            std::fwrite(buf, 1, static_cast<size_t>(n), stdout);
            std::fflush(stdout);
        }
        return true;
    }
};

std::string default_model() {
    return common::models_cache_dir() + "bench.gguf";
}

struct generate_options {
    std::string model, prompt = "hello world", mmproj, media, video;
    int         n_predict = 32, threads = 2, batch = 512, prompt_tokens = 0;
};

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, generate_options & o) {
    cli_args::parser p("usage: llama-cancel generate [--model PATH] [--prompt TEXT | --prompt-tokens N]\n"
                     "                            [--n-predict N] [--threads N] [--batch N]\n"
                     "                            [--mmproj PATH (--image FILE | --audio FILE | --video FILE)]\n"
                     "--video reads the whole video first (libmtmd's helper: ffprobe and ffmpeg on PATH, 4 frames\n"
                     "a second), then evaluates its frames; Ctrl-C stops the frame in flight, in its encode or its\n"
                     "decode, or the reading between two frames. The prompt's media marker, if any, marks where the\n"
                     "video goes, else it comes first.\n");
    p.option("--model|-m", &o.model, "PATH", "model (default: the built-in synthetic model)")
        .option("--prompt|-p", &o.prompt, "TEXT", "the prompt")
        .option("--prompt-tokens", &o.prompt_tokens, "N", "a prompt of N generated tokens instead (0: the text)")
        .option("--n-predict|-n", &o.n_predict, "N", "tokens to generate")
        .option("--threads|-t", &o.threads, "N", "CPU threads")
        .option("--batch|-b", &o.batch, "N", "n_batch")
        .option("--mmproj", &o.mmproj, "PATH", "multimodal projector")
        .option("--image", &o.media, "FILE", "an image for the projector")
        .option("--audio", &o.media, "FILE", "an audio file for the projector")
        .option("--video", &o.video, "FILE", "a video for a vision projector, its frames read before the evaluation");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.mmproj.empty() != (o.media.empty() && o.video.empty()), "--mmproj and --image/--audio/--video go together"},
                    {!o.media.empty() && !o.video.empty(), "--video and --image/--audio exclude each other"},
                    {!llama_cancel_has_mtmd() && !o.mmproj.empty(), "this build has no libmtmd: --mmproj is not available"},
                    {o.n_predict < 0, "--n-predict must be at least 0"},
                    {o.threads < 1, "--threads must be at least 1"},
                    {o.batch < 1, "--batch must be at least 1"},
                    {o.prompt_tokens < 0, "--prompt-tokens must be at least 0"}});
}


// The model, its load cancellable by Ctrl-C; -1 when it loaded, else the exit status.
int load_model(const std::string & path, common::model_ptr & model) {
    std::fprintf(stderr, "loading %s (Ctrl-C cancels)\n", path.c_str());
    llama_cancel_load_result lr;
    model.reset(llama_cancel_model_load(path.c_str(), llama_model_default_params(), ctrl_c::byte(), &lr));
    if (model) {
        return -1;
    }
    if (lr.status == LLAMA_CANCEL_CANCELLED) {
        std::printf("\n[load cancelled after %.1f ms from Ctrl-C]\n", ctrl_c::ms_since());
        return 130;
    }
    std::fprintf(stderr, "error: %s\n", lr.message);
    return 1;
}

#ifdef LLAMA_CANCEL_HAVE_MTMD
// --video: every item libmtmd's helper gives, read before anything is evaluated; Ctrl-C stops the
// reading between two items. -1 when read, else the exit status.
int read_video(video_frames & video, mtmd_context * mctx, const std::string & path) {
    std::fprintf(stderr, "reading %s (Ctrl-C cancels)\n", path.c_str());
    std::string error;
    switch (video.read(mctx, path, [] { return ctrl_c::pressed(); }, error)) {
        case video_frames::outcome::stopped:
            std::printf("\n[video reading cancelled after %zu frames, %.1f ms from Ctrl-C]\n", video.frames.size(),
                        ctrl_c::ms_since());
            return 130;
        case video_frames::outcome::failed:
            std::fprintf(stderr, "error: %s\n", error.c_str());
            return 1;
        case video_frames::outcome::read:
            break;
    }
    std::fprintf(stderr, "video: %zu frames read (%ux%u at %.2f a second), now evaluated one by one\n",
                 video.frames.size(), video.info.width, video.info.height, video.info.fps);
    return -1;
}

// With --mmproj: the projector (its load cancellable, its encodes through a hook) and the prompt as
// mtmd chunks holding the image, audio or video frames.
struct media_prompt {
    common::hook_ptr       mtmd_hook{llama_cancel_hook_init(nullptr)};
    mtmd::context_ptr      mctx;
    mtmd::input_chunks_ptr chunks;
    video_frames           video; // --video's frames, the chunks' bitmaps

    bool active() const { return mctx != nullptr; }

    // -1 when the chunks are ready, else the exit status; their positions in *n_pos.
    int load(const generate_options & o, llama_model * model, size_t * n_pos) {
        mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr); // mtmd's and its helper's
        llama_cancel_load_result lr;
        mctx.reset(llama_cancel_mtmd_init_from_file(o.mmproj.c_str(), model, mtmd_hook.get(), o.threads, false,
                                                    ctrl_c::byte(), &lr));
        if (!mctx) {
            std::fprintf(stderr, "%s: %s\n", lr.status == LLAMA_CANCEL_CANCELLED ? "cancelled" : "error", lr.message);
            return lr.status == LLAMA_CANCEL_CANCELLED ? 130 : 1;
        }
        const std::string marker = mtmd_default_marker();
        const size_t      at     = o.prompt.find(marker);
        if (!o.video.empty()) {
            // The video's part where the prompt's marker is (else first): its texts, a marker per frame.
            const int vrc = read_video(video, mctx.get(), o.video);
            if (vrc >= 0) {
                return vrc;
            }
            const std::string text = at == std::string::npos
                                         ? video.text + "\n" + o.prompt
                                         : o.prompt.substr(0, at) + video.text + o.prompt.substr(at + marker.size());
            return tokenize(text, video.bitmaps(), n_pos);
        }
        mtmd_helper_bitmap_wrapper w =
            mtmd_helper_bitmap_init_from_file(mctx.get(), o.media.c_str(), false, mtmd_helper_init_opt_default());
        if (w.bitmap == nullptr) {
            std::fprintf(stderr, "error: cannot read %s as an image or audio file this projector takes\n",
                         o.media.c_str());
            return 1;
        }
        const std::string text = at == std::string::npos ? marker + "\n" + o.prompt : o.prompt;
        const int         rc   = tokenize(text, {w.bitmap}, n_pos);
        mtmd_bitmap_free(w.bitmap);
        if (w.video_ctx != nullptr) { // a video given as --image: its frames were read by mtmd_tokenize
            mtmd_helper_video_free(w.video_ctx);
        }
        return rc;
    }

    // mtmd_tokenize of `text` with `bitmaps`, one per marker; -1 when done, else the exit status.
    int tokenize(const std::string & text, const std::vector<const mtmd_bitmap *> & bitmaps, size_t * n_pos) {
        mtmd_input_text in{text.c_str(), text.size(), true, true};
        chunks.reset(mtmd_input_chunks_init());
        const int32_t rc = mtmd_tokenize(mctx.get(), chunks.get(), &in, bitmaps.data(), bitmaps.size());
        if (rc != 0) {
            std::fprintf(stderr, "error: mtmd_tokenize returned %d\n", rc);
            return 1;
        }
        *n_pos = static_cast<size_t>(mtmd_helper_get_n_pos(chunks.get()));
        return -1;
    }

    int32_t generate(llama_context * ctx, const llama_cancel_generate_params & gp, std::vector<llama_token> & out,
                     llama_cancel_generate_result & r) {
        llama_cancel_mtmd_result mr{};
        const int32_t st = common::generate_after_chunks(mctx.get(), mtmd_hook.get(), 0, ctx, chunks.get(), 0, 0, gp,
                                                         out.data(), static_cast<int32_t>(out.size()), r, mr);
        if (mr.status == LLAMA_CANCEL_CANCELLED && !video.frames.empty()) {
            // Memory holds exactly chunks [0, n_chunks_done): the frames among them.
            int in_memory = 0;
            for (int32_t i = 0; i < mr.n_chunks_done; ++i) {
                in_memory += mtmd_input_chunk_get_type(mtmd_input_chunks_get(chunks.get(), i)) == MTMD_INPUT_CHUNK_TYPE_IMAGE;
            }
            std::printf("\n[video: %d of %zu frames in memory; a resume would go on from chunk %d of %zu]", in_memory,
                        video.frames.size(), mr.n_chunks_done, mtmd_input_chunks_size(chunks.get()));
        }
        return st;
    }
};
#else
// Without libmtmd, --mmproj is refused before anything loads: never active.
struct media_prompt {
    bool    active() const { return false; }
    int     load(const generate_options &, llama_model *, size_t *) { return 1; }
    int32_t generate(llama_context *, const llama_cancel_generate_params &, std::vector<llama_token> &,
                     llama_cancel_generate_result &) {
        return LLAMA_CANCEL_ERROR;
    }
};
#endif

// The text prompt's tokens (or --prompt-tokens generated ones); false with a message when it
// cannot be tokenized.
bool text_prompt(const generate_options & o, const llama_model * model, std::vector<llama_token> & tokens) {
    if (o.prompt_tokens > 0) {
        tokens = common::make_prompt(model, o.prompt_tokens, 1);
        return true;
    }
    tokens.resize(o.prompt.size() + 8);
    const int n = llama_tokenize(llama_model_get_vocab(model), o.prompt.c_str(), static_cast<int32_t>(o.prompt.size()),
                                 tokens.data(), static_cast<int32_t>(tokens.size()), true, false);
    if (n < 0) {
        std::fprintf(stderr, "error: cannot tokenize the prompt\n");
        return false;
    }
    tokens.resize(n);
    return true;
}

// The context, with `hook` as its eval callback: the byte reaches every backend's graphs.
common::context_ptr make_generate_context(const generate_options & o, llama_model * model, size_t n_prompt_pos,
                                          llama_cancel_hook * hook) {
    common::context_options opt;
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = hook;
    opt.n_ctx     = static_cast<uint32_t>(n_prompt_pos + o.n_predict + 16);
    opt.n_batch   = static_cast<uint32_t>(o.batch);
    opt.n_ubatch  = static_cast<uint32_t>(std::min(o.batch, 512));
    opt.n_threads = o.threads;
    return common::make_context(model, opt);
}

// What stopped the generation, how much of it is in memory, and Ctrl-C's stop latency.
int report(int32_t status, const llama_cancel_generate_result & r, size_t n_prompt_pos, double total_ms) {
    std::printf("\n");
    if (status == LLAMA_CANCEL_CANCELLED && ctrl_c::pressed()) {
        std::printf("[cancelled by Ctrl-C: the in-flight decode or encode stopped %.1f ms after the signal]\n",
                    ctrl_c::ms_since());
    }
    std::printf("[stop: %s; prompt %d/%zu tokens in memory; %d tokens generated, %d in memory; next position %d; "
                "%.0f ms]\n",
                llama_cancel_stop_reason_str(r.stop_reason), r.n_prompt_committed, n_prompt_pos, r.n_generated,
                r.n_generated_committed, r.n_past, total_ms);
    if (status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: %s\n", r.message);
        return 1;
    }
    return status == LLAMA_CANCEL_CANCELLED ? 130 : 0;
}

// The prefill and the generation, each token printed as it comes; returns the exit status.
int generate(const generate_options & o, llama_model * model, llama_context * ctx, llama_cancel_hook * hook,
             media_prompt & media, const std::vector<llama_token> & tokens, size_t n_prompt_pos) {
    printer pr{llama_model_get_vocab(model)};
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.byte          = ctrl_c::byte();
    gp.hook          = hook;
    gp.n_predict     = o.n_predict;
    gp.on_token      = printer::cb;
    gp.on_token_data = &pr;
    std::vector<llama_token> out(static_cast<size_t>(std::max(o.n_predict, 1)));
    llama_cancel_generate_result r;
    std::fprintf(stderr, "prefill: %zu %s, then up to %d generated\n", n_prompt_pos,
                 o.mmproj.empty() ? "tokens" : "positions (text and media)", o.n_predict);
    const double t0 = common::now_ms();
    const int32_t status =
        media.active() ? media.generate(ctx, gp, out, r)
                       : llama_cancel_generate(ctx, tokens.data(), static_cast<int32_t>(tokens.size()), &gp,
                                               out.data(), static_cast<int32_t>(out.size()), &r);
    return report(status, r, n_prompt_pos, common::now_ms() - t0);
}

} // namespace

int generate_main(int argc, char ** argv) {
    generate_options o;
    int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    if (o.model.empty()) {
        o.model = default_model();
        if (!common::ensure_model(common::script_path("make_model.py"), o.model, "bench")) {
            return 1;
        }
    }
    ctrl_c::install("\nsecond Ctrl-C: exiting\n");
    common::quiet_logs();
    common::load_backends();
    common::model_ptr model;
    if ((rc = load_model(o.model, model)) >= 0) {
        return rc;
    }
    // The prompt: text tokens, or (with --mmproj) mtmd chunks holding the image or audio.
    media_prompt             media;
    std::vector<llama_token> tokens;
    size_t                   n_prompt_pos = 0;
    if (!o.mmproj.empty()) {
        if ((rc = media.load(o, model.get(), &n_prompt_pos)) >= 0) {
            return rc;
        }
    } else {
        if (!text_prompt(o, model.get(), tokens)) {
            return 1;
        }
        n_prompt_pos = tokens.size();
    }
    decode_announcer    announcer;
    common::hook_ptr    hook = common::make_hook(decode_announcer::cb, &announcer); // outlives the context
    common::context_ptr ctx  = hook ? make_generate_context(o, model.get(), n_prompt_pos, hook.get()) : nullptr;
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create a context\n");
        return 1;
    }
    return generate(o, model.get(), ctx.get(), hook.get(), media, tokens, n_prompt_pos);
}
