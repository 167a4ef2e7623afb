// One multimodal row of the benchmark (`llama-cancel bench-mtmd vision|audio`), in its own
// process: encode time, cancel latency inside the clip encode and inside the embedding decode, with
// llama-cancel and without it (a host that polls its byte between native calls), and the encode
// hook's overhead with the byte at 0. CPU backend.
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

// Time from the byte store (at `frac` of `full` ms into `work`) to work's return; -1: no store.
template <typename F> double store_then(double frac, double full, int8_t * flag, F work) {
    double t_store = 0;
    const double t0 = lcs::now_ms();
    std::thread writer = frac > 0 ? lcs::store_at(flag, t0 + frac * full, &t_store) : std::thread();
    work();
    const double t_ret = lcs::now_ms();
    if (writer.joinable()) {
        writer.join();
        return std::max(0.0, t_ret - t_store);
    }
    return t_ret - t0;
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
    llama_cancel_load_result lr;
    mtmd_ptr plain(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model.get(), nullptr, threads, false, nullptr, &lr));
    mtmd_ptr hooked(llama_cancel_mtmd_init_from_file(mmproj.c_str(), model.get(), hook.get(), threads, false, nullptr, &lr));
    if (!plain || !hooked) {
        std::fprintf(stderr, "error: %s\n", lr.message);
        return 1;
    }
    bitmap_ptr media = make_media(plain.get(), vision);
    chunks_ptr chunks_plain, chunks_hooked;
    const mtmd_input_chunk * chunk_plain  = media ? media_chunk(plain.get(), media.get(), chunks_plain) : nullptr;
    const mtmd_input_chunk * chunk_hooked = media ? media_chunk(hooked.get(), media.get(), chunks_hooked) : nullptr;
    if (chunk_plain == nullptr || chunk_hooked == nullptr) {
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
    for (int i = 0; i < 2; ++i) {
        if (encode_plain() != 0 || encode_hooked() != 0) {
            std::fprintf(stderr, "error: mtmd_encode_chunk failed\n");
            return 1;
        }
    }

    std::fprintf(stderr, "[mtmd %s] encode overhead\n", kind.c_str());
    std::vector<double> ratios, enc_ms;
    for (int i = 0; i < runs; ++i) {
        double tp = 0, th = 0;
        for (int k = 0; k < 2; ++k) {
            if ((i + k) % 2 == 0) {
                tp = store_then(0, 0, &flag, encode_plain);
            } else {
                th = store_then(0, 0, &flag, encode_hooked);
            }
        }
        ratios.push_back(th / tp);
        enc_ms.push_back(tp);
    }
    const double encode_ms = lcs::percentile(enc_ms, 0.5);
    const double overhead  = (lcs::percentile(ratios, 0.5) - 1.0) * 100.0;
    const uint64_t checkpoints = llama_cancel_hook_get_stats(hook.get()).checkpoints;

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
        dec.push_back(store_then(0, 0, &flag, [&] { decode(false); }));
    }
    const double decode_ms = lcs::percentile(dec, 0.5);

    std::fprintf(stderr, "[mtmd %s] cancel latency\n", kind.c_str());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> point(0.30, 0.66);
    std::vector<double> enc_without, enc_with, dec_without, dec_with;
    int enc_cancelled = 0, dec_cancelled = 0;
    for (int i = 0; i < runs; ++i) {
        const double frac = point(rng);
        flag = 0;
        enc_without.push_back(store_then(frac, encode_ms, &flag, encode_plain));
        flag = 0;
        enc_with.push_back(store_then(frac, encode_ms, &flag, encode_hooked));
        enc_cancelled += llama_cancel_hook_stopped(hook.get());
        flag = 0;
        dec_without.push_back(store_then(frac, decode_ms, &flag, [&] { decode(false); }));
        flag = 0;
        int32_t st = 0;
        dec_with.push_back(store_then(frac, decode_ms, &flag, [&] { st = decode(true); }));
        dec_cancelled += st == LLAMA_CANCEL_CANCELLED;
    }
    flag = 0;

    const double ew = lcs::percentile(enc_with, 0.5), dw = lcs::percentile(dec_with, 0.5);
    std::printf("| %-6s | %6d | %9.1f | %15.1f | %12.2f | %12.2f | %11.1f%% | %12.2f%% | %9.1f | %15.1f | %12.2f | "
                "%5d/%-3d | %5d/%-3d |\n",
                kind.c_str(), n_tokens, encode_ms, lcs::percentile(enc_without, 0.5), ew, lcs::max_of(enc_with),
                ew / encode_ms * 100.0, overhead, decode_ms, lcs::percentile(dec_without, 0.5), dw, enc_cancelled, runs,
                dec_cancelled, runs);
    std::fflush(stdout);
    if (!json.empty()) {
        std::ofstream js(json);
        js << "{\"kind\": \"" << kind << "\", \"mmproj\": \"" << lcs::json_escape(mmproj) << "\", \"media_tokens\": "
           << n_tokens << ", \"threads\": " << threads << ", \"runs\": " << runs << ", \"encode_ms\": " << encode_ms
           << ", \"encode_hook_overhead_pct\": " << overhead << ", \"encode_checkpoints_total\": " << checkpoints
           << ", \"encode_cancel_without_ms\": {\"p50\": " << lcs::percentile(enc_without, 0.5)
           << ", \"all\": " << lcs::json_list(enc_without) << "}, \"encode_cancel_with_ms\": {\"p50\": " << ew
           << ", \"max\": " << lcs::max_of(enc_with) << ", \"stopped\": " << enc_cancelled
           << ", \"all\": " << lcs::json_list(enc_with) << "}, \"encode_cancel_pct_of_encode\": " << ew / encode_ms * 100.0
           << ", \"embd_decode_ms\": " << decode_ms << ", \"decode_cancel_without_ms\": {\"p50\": "
           << lcs::percentile(dec_without, 0.5) << ", \"all\": " << lcs::json_list(dec_without)
           << "}, \"decode_cancel_with_ms\": {\"p50\": " << dw << ", \"max\": " << lcs::max_of(dec_with)
           << ", \"cancelled\": " << dec_cancelled << ", \"all\": " << lcs::json_list(dec_with) << "}"
           << ", \"targets\": {\"latency_le_10pct_of_encode\": " << (ew <= 0.1 * encode_ms ? "true" : "false")
           << ", \"overhead_le_3pct\": " << (overhead <= 3.0 ? "true" : "false") << "}}\n";
    }
    return 0;
}
