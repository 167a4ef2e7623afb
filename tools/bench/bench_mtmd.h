// What the multimodal rows' command (`bench-mtmd`, bench_mtmd.cpp) shares with the bench that runs
// them as child processes (bench_children.cpp) and checks their kinds (bench.cpp): the kinds, and
// the evaluation rows' table header, printed by either (the child alone, or the bench above the
// rows of every child).
#pragma once

#include "common/backends.h"

#include <string>

namespace bench_mtmd {

// Kinds measured as one encode (vision, audio) and as a whole evaluation: an audio clip between
// text (qwen3a, voxtral, glma), two images whose tiles are batched encodes (internvl-batch), or a
// video's frames, an image chunk each (video).
inline bool is_eval_kind(const std::string & kind) {
    return kind == "qwen3a" || kind == "voxtral" || kind == "glma" || kind == "internvl-batch" || kind == "video";
}
inline bool is_kind(const std::string & kind) {
    return kind == "vision" || kind == "audio" || is_eval_kind(kind);
}
// A bench row: a kind, or an evaluation kind on Vulkan ("qwen3a:vulkan"; "qwen3a:vulkan-1t": llvmpipe
// on one thread, common::setup_backend).
inline std::string row_kind(const std::string & row) {
    return row.substr(0, row.find(':'));
}
inline std::string row_backend(const std::string & row) {
    const size_t colon = row.find(':');
    return colon == std::string::npos ? "cpu" : row.substr(colon + 1);
}
inline bool is_row(const std::string & row) {
    const std::string backend = row_backend(row);
    return backend == "cpu" ? is_kind(row)
                            : common::is_vulkan_setup(backend) && is_eval_kind(row_kind(row));
}
// For messages and --help.
constexpr const char * k_kinds = "vision, audio, qwen3a, voxtral, glma, internvl-batch, video (evaluations also KIND:vulkan, KIND:vulkan-1t)";

// The evaluation rows' audio clip, s (bench-mtmd --seconds' default), and the overhead's repeats.
constexpr int k_eval_seconds = 20, k_eval_repeats = 5;
// The video row's generated clip: square frames of the small vision projector's image size, at
// libmtmd's helper's default rate (every frame read), k_video_fps * k_video_seconds frames.
constexpr int k_video_side = 224, k_video_fps = 4, k_video_seconds = 2;
// The overhead's repeats go on past `repeats`, up to 3x as many, while they took under this many
// seconds: a short evaluation's repeats are cheap and each draws its contexts' placement anew.
constexpr int k_eval_repeat_for_s = 150;

// The evaluation rows' targets: worst stop, % of the evaluation (CPU, Vulkan), and overhead with the
// byte at 0, %.
constexpr double k_eval_worst_pct_cpu = 5.0, k_eval_worst_pct_vulkan = 10.0, k_eval_overhead_pct = 2.0;

// The evaluation rows' table: what they measure, the targets, the header lines. `seconds`: the
// audio clip's length; `repeats`: the overhead's repeats. Defined where libmtmd is built in.
void print_eval_header(int seconds, int repeats);

} // namespace bench_mtmd
