// Deterministic media for the mtmd tests: no file, no timing, the same bytes on every run.
#pragma once

#include "mtmd.h"

#include <cstdint>
#include <vector>

namespace fixtures {

// A second of 16 kHz audio, or an RGB image of w x h, both varied by `seed` (xorshift).
inline mtmd_bitmap * make_media(bool audio, uint32_t seed, uint32_t w = 64, uint32_t h = 64) {
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&x] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    if (audio) {
        std::vector<float> pcm(16000);
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

} // namespace fixtures
