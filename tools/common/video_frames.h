// A video's frames as libmtmd's helper gives them (mtmd_helper_video_*: ffprobe and ffmpeg run as
// child programs), for `llama-cancel generate --video` and the benchmark's video row.
#pragma once

#include "mtmd.h"
#include "mtmd-helper.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

struct video_frames {
    std::vector<mtmd::bitmap_ptr> frames; // in order
    std::string text; // the prompt's part for the video: the helper's texts, a media marker per frame
    mtmd_helper_video_info info{}; // the video's size and the rate its frames are read at

    enum class outcome { read, stopped, failed };
    // Reads every item of the video at `path` for `mctx` (its texts in place, a marker per frame).
    // `stopped`, asked after each item, ends the reading (a Ctrl-C also ends ffmpeg, which reads as
    // the end: the caller asks first). On failed, `error` says why.
    outcome read(mtmd_context * mctx, const std::string & path, const std::function<bool()> & stopped,
                 std::string & error);
    // The frames as mtmd_tokenize takes them.
    std::vector<const mtmd_bitmap *> bitmaps() const;
};
