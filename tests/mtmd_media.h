// Deterministic media for the mtmd tests: no file, no timing, the same bytes on every run.
#pragma once

#include "mtmd.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fixtures {

// `audio_s` seconds of 16 kHz audio, or an RGB image of w x h, both varied by `seed` (xorshift).
inline mtmd_bitmap * make_media(bool audio, uint32_t seed, uint32_t w = 64, uint32_t h = 64, uint32_t audio_s = 1) {
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&x] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    if (audio) {
        std::vector<float> pcm(static_cast<size_t>(16000) * audio_s);
        for (auto & v : pcm) {
            v = 0.2f * (static_cast<float>(next() % 2001) / 1000.0f - 1.0f);
        }
        return mtmd_bitmap_init_from_audio(pcm.size(), pcm.data());
    }
    std::vector<unsigned char> px(static_cast<size_t>(w) * h * 3);
    for (auto & v : px) {
        v = static_cast<unsigned char>(next());
    }
    return mtmd_bitmap_init(w, h, px.data());
}

// The mtmd tests' prompt into `chunks`: text, media, text, media, text (two images of wa x ha and
// wb x hb, or two audio clips, the first `audio_s_a` seconds long, the second one second; a projector
// that cuts audio into windows, as qwen3a's 8 s ones, makes each window a chunk of its own).
// mtmd_tokenize's return (0: done).
inline int32_t tokenize_two_media(mtmd_context * mctx, mtmd_input_chunks * chunks, bool audio, uint32_t wa = 64,
                                  uint32_t ha = 64, uint32_t wb = 64, uint32_t hb = 64, uint32_t audio_s_a = 1) {
    const std::string m      = mtmd_default_marker();
    const std::string prompt = "First item: " + m +
                               " and then, after a rather long pause to think it all over once more, here comes "
                               "the second one: " + m + " what are they?";
    mtmd_bitmap *       a          = make_media(audio, 1, wa, ha, audio_s_a);
    mtmd_bitmap *       b          = make_media(audio, 2, wb, hb);
    const mtmd_bitmap * bitmaps[2] = {a, b};
    mtmd_input_text     text{prompt.c_str(), prompt.size(), true, true};
    const int32_t       ret = mtmd_tokenize(mctx, chunks, &text, bitmaps, 2);
    mtmd_bitmap_free(a);
    mtmd_bitmap_free(b);
    return ret;
}

} // namespace fixtures
