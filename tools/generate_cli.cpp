// `llama-cancel generate`: generate from a prompt; Ctrl-C stores the byte from the signal handler,
// the decode in flight stops, and the tool prints what it had and how long the stop took. A second
// Ctrl-C exits at once.
#include "commands.h"
#include "support.h"

#ifdef LLAMA_CANCEL_HAVE_MTMD
#    include "mtmd-helper.h"
#    include "mtmd.h"
#endif

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// The signal handler's only state (a tool, not the library): the byte and the time it was stored.
int8_t                g_flag = 0;
volatile sig_atomic_t g_signals = 0;
timespec              g_signal_time{};

void on_sigint(int) {
    if (g_signals++ > 0) {
        static const char msg[] = "\nsecond Ctrl-C: exiting\n";
        (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(130);
    }
    clock_gettime(CLOCK_MONOTONIC, &g_signal_time); // async-signal-safe
    __atomic_store_n(&g_flag, 1, __ATOMIC_RELAXED);  // lock-free: async-signal-safe
}

double ms_since_signal() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - g_signal_time.tv_sec) * 1e3 + (now.tv_nsec - g_signal_time.tv_nsec) / 1e6;
}

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
    return lcs::models_cache_dir() + "bench.gguf";
}

} // namespace

int generate_main(int argc, char ** argv) {
    std::string model_path, prompt = "hello world", mmproj, media;
    int n_predict = 32, threads = 2, batch = 512, prompt_tokens = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (v == nullptr) {
            std::fprintf(stderr, "usage: llama-cancel generate [--model PATH] [--prompt TEXT | --prompt-tokens N]\n"
                                 "                            [--n-predict N] [--threads N] [--batch N]\n"
                                 "                            [--mmproj PATH (--image FILE | --audio FILE)]\n");
            return 2;
        }
        ++i;
        if (a == "--model" || a == "-m") {
            model_path = v;
        } else if (a == "--prompt" || a == "-p") {
            prompt = v;
        } else if (a == "--mmproj") {
            mmproj = v;
        } else if (a == "--image" || a == "--audio") {
            media = v;
        } else if (a == "--prompt-tokens") {
            prompt_tokens = std::atoi(v);
        } else if (a == "--n-predict" || a == "-n") {
            n_predict = std::atoi(v);
        } else if (a == "--threads" || a == "-t") {
            threads = std::atoi(v);
        } else if (a == "--batch" || a == "-b") {
            batch = std::atoi(v);
        } else {
            std::fprintf(stderr, "error: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (mmproj.empty() != media.empty()) {
        std::fprintf(stderr, "error: --mmproj and --image/--audio go together\n");
        return 2;
    }
#ifndef LLAMA_CANCEL_HAVE_MTMD
    if (!mmproj.empty()) {
        std::fprintf(stderr, "error: this build has no libmtmd: --mmproj is not available\n");
        return 2;
    }
#endif
    if (n_predict < 0 || threads < 1 || batch < 1 || prompt_tokens < 0) {
        std::fprintf(stderr, "error: --n-predict, --threads, --batch and --prompt-tokens need positive values\n");
        return 2;
    }
    if (model_path.empty()) {
        model_path = default_model();
        if (!lcs::ensure_model(lcs::script_path("make_model.py"), model_path, "bench")) {
            return 1;
        }
    }

    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);

    lcs::quiet_logs();
    lcs::load_backends();
    std::fprintf(stderr, "loading %s (Ctrl-C cancels)\n", model_path.c_str());
    llama_cancel_load_result lr;
    lcs::model_ptr model(llama_cancel_model_load(model_path.c_str(), llama_model_default_params(), &g_flag, &lr));
    if (!model) {
        if (lr.status == LLAMA_CANCEL_CANCELLED) {
            std::printf("\n[load cancelled after %.1f ms from Ctrl-C]\n", ms_since_signal());
            return 130;
        }
        std::fprintf(stderr, "error: %s\n", lr.message);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model.get());

    // The prompt: text tokens, or (with --mmproj) mtmd chunks holding the image or audio.
    std::vector<llama_token> tokens;
    size_t n_prompt_pos = 0;
#ifdef LLAMA_CANCEL_HAVE_MTMD
    struct mtmd_free_t { void operator()(mtmd_context * m) const { mtmd_free(m); } };
    struct chunks_free_t { void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); } };
    lcs::hook_ptr encode_hook(llama_cancel_hook_init(nullptr));
    std::unique_ptr<mtmd_context, mtmd_free_t> mctx;
    std::unique_ptr<mtmd_input_chunks, chunks_free_t> chunks;
    if (!mmproj.empty()) {
        mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
        mctx.reset(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model.get(), encode_hook.get(), threads, false,
                                                    &g_flag, &lr));
        if (!mctx) {
            std::fprintf(stderr, "%s: %s\n", lr.status == LLAMA_CANCEL_CANCELLED ? "cancelled" : "error", lr.message);
            return lr.status == LLAMA_CANCEL_CANCELLED ? 130 : 1;
        }
        mtmd_helper_bitmap_wrapper w =
            mtmd_helper_bitmap_init_from_file(mctx.get(), media.c_str(), false, mtmd_helper_init_opt_default());
        if (w.bitmap == nullptr) {
            std::fprintf(stderr, "error: cannot read %s as an image or audio file this projector takes\n", media.c_str());
            return 1;
        }
        const std::string marker = mtmd_default_marker();
        const std::string text   = prompt.find(marker) == std::string::npos ? marker + "\n" + prompt : prompt;
        mtmd_input_text in{text.c_str(), text.size(), true, true};
        const mtmd_bitmap * bitmaps[] = {w.bitmap};
        chunks.reset(mtmd_input_chunks_init());
        const int32_t rc = mtmd_tokenize(mctx.get(), chunks.get(), &in, bitmaps, 1);
        mtmd_bitmap_free(w.bitmap);
        if (rc != 0) {
            std::fprintf(stderr, "error: mtmd_tokenize returned %d\n", rc);
            return 1;
        }
        n_prompt_pos = static_cast<size_t>(mtmd_helper_get_n_pos(chunks.get()));
    }
#endif
    if (!mmproj.empty()) {
        // the chunks hold the prompt
    } else if (prompt_tokens > 0) {
        tokens = lcs::make_prompt(model.get(), prompt_tokens, 1);
    } else {
        tokens.resize(prompt.size() + 8);
        const int n = llama_tokenize(vocab, prompt.c_str(), static_cast<int32_t>(prompt.size()), tokens.data(),
                                     static_cast<int32_t>(tokens.size()), true, false);
        if (n < 0) {
            std::fprintf(stderr, "error: cannot tokenize the prompt\n");
            return 1;
        }
        tokens.resize(n);
    }
    if (mmproj.empty()) {
        n_prompt_pos = tokens.size();
    }

    lcs::context_options opt;
    opt.n_ctx    = static_cast<uint32_t>(n_prompt_pos + n_predict + 16);
    opt.n_batch  = static_cast<uint32_t>(batch);
    opt.n_ubatch = static_cast<uint32_t>(std::min(batch, 512));
    opt.n_threads = threads;
    lcs::context_ptr ctx = lcs::make_context(model.get(), opt);
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create a context\n");
        return 1;
    }

    printer pr{vocab};
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.flag          = &g_flag;
    gp.n_predict     = n_predict;
    gp.on_token      = printer::cb;
    gp.on_token_data = &pr;
    std::vector<llama_token> out(static_cast<size_t>(std::max(n_predict, 1)));
    llama_cancel_generate_result r;
    std::fprintf(stderr, "prefill: %zu %s, then up to %d generated\n", n_prompt_pos,
                 mmproj.empty() ? "tokens" : "positions (text and media)", n_predict);
    const double t0 = lcs::now_ms();
    int32_t status = LLAMA_CANCEL_ERROR;
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (mctx) {
        status = llama_cancel_generate_mtmd(mctx.get(), encode_hook.get(), ctx.get(), chunks.get(), 0, 0, &gp,
                                            out.data(), static_cast<int32_t>(out.size()), &r, nullptr);
    } else
#endif
    {
        status = llama_cancel_generate(ctx.get(), tokens.data(), static_cast<int32_t>(tokens.size()), &gp, out.data(),
                                       static_cast<int32_t>(out.size()), &r);
    }
    const double total = lcs::now_ms() - t0;
    std::printf("\n");
    if (status == LLAMA_CANCEL_CANCELLED && g_signals > 0) {
        std::printf("[cancelled by Ctrl-C: the in-flight decode or encode stopped %.1f ms after the signal]\n",
                    ms_since_signal());
    }
    std::printf("[stop: %s; prompt %d/%zu tokens in memory; %d tokens generated, %d in memory; next position %d; "
                "%.0f ms]\n",
                llama_cancel_stop_reason_str(r.stop_reason), r.n_prompt_committed, n_prompt_pos, r.n_generated,
                r.n_generated_committed, r.n_past, total);
    if (status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: %s\n", r.message);
        return 1;
    }
    return status == LLAMA_CANCEL_CANCELLED ? 130 : 0;
}
