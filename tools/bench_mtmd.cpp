// The multimodal rows of the benchmark (`llama-cancel bench-mtmd vision|audio`), in their own
// process: encode time, cancel latency inside the clip encode (through the hook and through the
// stateless eval callback bound by name) and inside the embedding decode, against a host that polls
// its byte between native calls, and the encode overhead of both callbacks with the byte at 0. CPU.
#include "bench_util.h"
#include "commands.h"
#include "support.h"

#include "mtmd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

struct mtmd_deleter { void operator()(mtmd_context * m) const { mtmd_free(m); } };
struct chunks_deleter { void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); } };
struct bitmap_deleter { void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); } };
using mtmd_ptr   = std::unique_ptr<mtmd_context, mtmd_deleter>;
using chunks_ptr = std::unique_ptr<mtmd_input_chunks, chunks_deleter>;
using bitmap_ptr = std::unique_ptr<mtmd_bitmap, bitmap_deleter>;

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
template <typename F> landed store_then(double frac, double full, int8_t * flag, F work) {
    double t_store = 0;
    const double t0 = lcs::now_ms();
    std::thread writer = frac > 0 ? lcs::store_at(flag, t0 + frac * full, &t_store) : std::thread();
    work();
    const double t_ret = lcs::now_ms();
    if (writer.joinable()) {
        writer.join();
        return {t_ret - t_store, t_store >= t_ret};
    }
    return {t_ret - t0, false};
}

// The stateless callback by name as mtmd's cb_eval, through a probe that forwards every call and
// counts checkpoints and stops; everything else as llama_cancel_mtmd_init_from_file makes it.
mtmd_ptr init_stateless(const std::string & mmproj, const llama_model * model, int threads, lcs::stateless_probe * probe) {
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = false;
    mp.print_timings     = false;
    mp.n_threads         = threads;
    mp.cb_eval           = lcs::stateless_probe::eval_cb;
    mp.cb_eval_user_data = probe;
    return mtmd_ptr(mtmd_init_from_file(mmproj.c_str(), model, mp));
}

// One table row: a path (encode through the hook or the stateless callback, embedding decode).
void print_row(const std::string & kind, const char * path, int32_t n_tokens, double full_ms, const lcs::latencies & without,
               const lcs::latencies & with, const char * overhead, int runs) {
    std::printf("| %-6s | %-17s | %6d | %9.1f | %14.1f | %8.2f | %8.2f | %8.2f | %9.1f%% | %9s | %5d/%-3d | %6d/%-6d |\n",
                kind.c_str(), path, n_tokens, full_ms, without.p50(), with.p50(), with.p95(), lcs::max_of(with.ms),
                with.p50() / full_ms * 100.0, overhead, with.cancelled, runs, with.finished_first,
                without.finished_first);
}

} // namespace

int bench_mtmd_main(int argc, char ** argv) {
    std::string kind, model_path, mmproj, json;
    int runs = 10, threads = 2;
    uint32_t seed = 42;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a[0] != '-' && kind.empty()) {
            kind = a;
            continue;
        }
        const char * v = i + 1 < argc ? argv[++i] : "";
        if (a == "--model") {
            model_path = v;
        } else if (a == "--mmproj") {
            mmproj = v;
        } else if (a == "--json") {
            json = v;
        } else if (a == "--runs") {
            runs = std::atoi(v);
        } else if (a == "--threads") {
            threads = std::atoi(v);
        } else if (a == "--seed") {
            seed = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        }
    }
    if ((kind != "vision" && kind != "audio") || model_path.empty() || mmproj.empty() || runs < 1 || threads < 1) {
        std::fprintf(stderr, "usage: llama-cancel bench-mtmd vision|audio --model TEXT.gguf --mmproj MMPROJ.gguf "
                             "[--runs N] [--threads N] [--json PATH]\n");
        return 2;
    }
    const bool vision = kind == "vision";
    lcs::quiet_logs();
    mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    lcs::load_backends();
    lcs::model_ptr model = lcs::load_model(model_path);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", model_path.c_str());
        return 1;
    }
    lcs::hook_ptr hook(llama_cancel_hook_init(nullptr));
    lcs::stateless_probe probe;
    llama_cancel_load_result lr;
    mtmd_ptr plain(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model.get(), nullptr, threads, false, nullptr, &lr));
    mtmd_ptr hooked(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model.get(), hook.get(), threads, false, nullptr, &lr));
    mtmd_ptr stateless = plain && hooked ? init_stateless(mmproj, model.get(), threads, &probe) : nullptr;
    if (!plain || !hooked || !stateless) {
        std::fprintf(stderr, "error: cannot load %s: %s\n", mmproj.c_str(), lr.message);
        return 1;
    }
    bitmap_ptr media = make_media(plain.get(), vision);
    chunks_ptr chunks_plain, chunks_hooked, chunks_stateless;
    const mtmd_input_chunk * chunk_plain  = media ? media_chunk(plain.get(), media.get(), chunks_plain) : nullptr;
    const mtmd_input_chunk * chunk_hooked = media ? media_chunk(hooked.get(), media.get(), chunks_hooked) : nullptr;
    const mtmd_input_chunk * chunk_stateless =
        media ? media_chunk(stateless.get(), media.get(), chunks_stateless) : nullptr;
    if (chunk_plain == nullptr || chunk_hooked == nullptr || chunk_stateless == nullptr) {
        std::fprintf(stderr, "error: cannot tokenize the %s input\n", kind.c_str());
        return 1;
    }
    const int32_t n_tokens = static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_plain));
    const int32_t n_embd   = llama_model_n_embd_inp(model.get());

    int8_t flag = 0;
    llama_cancel_hook_set_flag(hook.get(), &flag);
    auto encode_plain  = [&] { return mtmd_encode_chunk(plain.get(), chunk_plain); };
    auto encode_hooked = [&] {
        llama_cancel_hook_reset(hook.get());
        return mtmd_encode_chunk(hooked.get(), chunk_hooked);
    };
    auto encode_stateless = [&] { return mtmd_encode_chunk(stateless.get(), chunk_stateless); };
    for (int i = 0; i < 2; ++i) { // warm-up; the hook and the stateless callback learn the CPU's rate
        if (encode_plain() != 0 || encode_hooked() != 0 || encode_stateless() != 0) {
            std::fprintf(stderr, "error: mtmd_encode_chunk failed\n");
            return 1;
        }
    }

    std::fprintf(stderr, "[mtmd %s] encode overhead\n", kind.c_str());
    std::vector<double> hook_ratios, stateless_ratios, enc_ms;
    const uint64_t hook_cp0 = llama_cancel_hook_get_stats(hook.get()).checkpoints;
    probe.rearm(-1);
    for (int i = 0; i < runs; ++i) {
        double t[3] = {0, 0, 0}; // plain, hook, stateless; the order rotates so that drift favours none
        for (int k = 0; k < 3; ++k) {
            const int which = (i + k) % 3;
            t[which] = which == 0 ? store_then(0, 0, &flag, encode_plain).ms
                     : which == 1 ? store_then(0, 0, &flag, encode_hooked).ms
                                  : store_then(0, 0, &probe.byte, encode_stateless).ms;
        }
        hook_ratios.push_back(t[1] / t[0]);
        stateless_ratios.push_back(t[2] / t[0]);
        enc_ms.push_back(t[0]);
    }
    const double encode_ms          = lcs::percentile(enc_ms, 0.5);
    const double overhead           = (lcs::percentile(hook_ratios, 0.5) - 1.0) * 100.0;
    const double stateless_overhead = (lcs::percentile(stateless_ratios, 0.5) - 1.0) * 100.0;
    const double checkpoints =
        static_cast<double>(llama_cancel_hook_get_stats(hook.get()).checkpoints - hook_cp0) / runs;
    const double stateless_checkpoints = static_cast<double>(probe.checkpoints) / runs;

    // The embeddings to decode: a plain encode's output.
    encode_plain();
    const float * out = mtmd_get_output_embd(plain.get());
    std::vector<float> embd(out, out + static_cast<size_t>(n_tokens) * n_embd);
    lcs::context_options opt;
    opt.n_ctx = opt.n_batch = opt.n_ubatch = static_cast<uint32_t>(std::max(n_tokens, 64));
    opt.n_threads = threads;
    lcs::context_ptr ctx = lcs::make_context(model.get(), opt);
    std::vector<llama_pos> pos(n_tokens);
    std::vector<int32_t> n_seq(n_tokens, 1);
    std::vector<llama_seq_id> seq(n_tokens, 0);
    std::vector<llama_seq_id *> seq_ptr(n_tokens);
    std::vector<int8_t> logits(n_tokens, 0);
    for (int32_t i = 0; i < n_tokens; ++i) {
        pos[i]     = i;
        seq_ptr[i] = &seq[i];
    }
    logits[n_tokens - 1] = 1;
    const llama_batch batch{n_tokens, nullptr, embd.data(), pos.data(), n_seq.data(), seq_ptr.data(), logits.data()};
    // Set once: each change of the attention type makes llama.cpp reserve its graphs again.
    llama_set_causal_attn(ctx.get(), !mtmd_decode_use_non_causal(plain.get(), chunk_plain));
    auto decode = [&](bool ours) {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        int32_t st = 0;
        if (ours) {
            llama_cancel_decode_params p = llama_cancel_decode_default_params();
            p.flag = &flag;
            st     = llama_cancel_decode(ctx.get(), batch, &p, nullptr, nullptr, 0);
        } else {
            st = llama_decode(ctx.get(), batch);
        }
        return st;
    };
    decode(false);
    std::vector<double> dec;
    for (int i = 0; i < std::max(3, runs / 2); ++i) {
        dec.push_back(store_then(0, 0, &flag, [&] { decode(false); }).ms);
    }
    const double decode_ms = lcs::percentile(dec, 0.5);

    std::fprintf(stderr, "[mtmd %s] cancel latency\n", kind.c_str());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    lcs::latencies enc_without, enc_with, enc_stateless, dec_without, dec_with;
    for (int i = 0; i < runs; ++i) {
        const double frac = point(rng);
        flag = 0;
        landed l = store_then(frac, encode_ms, &flag, encode_plain);
        enc_without.add(l.ms, l.finished_first, false);
        flag = 0;
        l = store_then(frac, encode_ms, &flag, encode_hooked);
        enc_with.add(l.ms, l.finished_first, llama_cancel_hook_stopped(hook.get()));
        probe.rearm(-1);
        l = store_then(frac, encode_ms, &probe.byte, encode_stateless);
        enc_stateless.add(l.ms, l.finished_first, probe.stopped_at >= 0);
        flag = 0;
        l = store_then(frac, decode_ms, &flag, [&] { decode(false); });
        dec_without.add(l.ms, l.finished_first, false);
        flag = 0;
        int32_t st = 0;
        l = store_then(frac, decode_ms, &flag, [&] { st = decode(true); });
        dec_with.add(l.ms, l.finished_first, st == LLAMA_CANCEL_CANCELLED);
    }
    flag = 0;
    probe.rearm(-1);

    char oh_hook[32], oh_name[32];
    std::snprintf(oh_hook, sizeof(oh_hook), "%.2f%%", overhead);
    std::snprintf(oh_name, sizeof(oh_name), "%.2f%%", stateless_overhead);
    print_row(kind, "encode, hook", n_tokens, encode_ms, enc_without, enc_with, oh_hook, runs);
    print_row(kind, "encode, stateless", n_tokens, encode_ms, enc_without, enc_stateless, oh_name, runs);
    print_row(kind, "embd decode", n_tokens, decode_ms, dec_without, dec_with, "-", runs);
    std::fflush(stdout);
    if (!json.empty()) {
        const double ew = enc_with.p50(), es = enc_stateless.p50();
        auto met = [](bool b) { return b ? "true" : "false"; };
        std::ofstream js(json);
        js << "{\"kind\": \"" << kind << "\", \"mmproj\": \"" << lcs::json_escape(mmproj) << "\", \"media_tokens\": "
           << n_tokens << ", \"threads\": " << threads << ", \"runs\": " << runs << ", \"encode_ms\": " << encode_ms
           << ", \"encode_hook_overhead_pct\": " << overhead << ", \"encode_checkpoints_per_encode\": " << checkpoints
           << ", \"encode_stateless_overhead_pct\": " << stateless_overhead
           << ", \"encode_stateless_checkpoints_per_encode\": " << stateless_checkpoints
           << ", \"encode_cancel_without_ms\": " << enc_without.json()
           << ", \"encode_cancel_with_ms\": " << enc_with.json()
           << ", \"encode_cancel_stateless_ms\": " << enc_stateless.json()
           << ", \"encode_cancel_pct_of_encode\": " << ew / encode_ms * 100.0
           << ", \"encode_stateless_pct_of_encode\": " << es / encode_ms * 100.0
           << ", \"embd_decode_ms\": " << decode_ms << ", \"decode_cancel_without_ms\": " << dec_without.json()
           << ", \"decode_cancel_with_ms\": " << dec_with.json()
           << ", \"targets\": {\"latency_le_10pct_of_encode\": " << met(!enc_with.ms.empty() && ew <= 0.1 * encode_ms)
           << ", \"overhead_le_3pct\": " << met(overhead <= 3.0)
           << ", \"stateless_latency_le_10pct_of_encode\": " << met(!enc_stateless.ms.empty() && es <= 0.1 * encode_ms)
           << ", \"stateless_overhead_le_3pct\": " << met(stateless_overhead <= 3.0) << "}}\n";
    }
    return 0;
}
