#include "common/video_frames.h"

#include <cstdlib>

video_frames::outcome video_frames::read(mtmd_context * mctx, const std::string & path,
                                         const std::function<bool()> & stopped, std::string & error) {
    if (!mtmd_helper_support_video(mctx)) {
        error = "this libmtmd was built without video support";
        return outcome::failed;
    }
    const mtmd_helper_video_init_params vp = mtmd_helper_video_init_params_default();
    mtmd_helper::video_ptr video(mtmd_helper_video_init(mctx, path.c_str(), vp));
    if (!video) {
        error = "cannot read " + path + " as a video (libmtmd's helper runs ffprobe and ffmpeg from PATH)";
        return outcome::failed;
    }
    info = mtmd_helper_video_get_info(video.get());
    const std::string marker = mtmd_default_marker();
    for (;;) {
        mtmd_bitmap * bm = nullptr;
        char *        tx = nullptr;
        const int32_t rc = mtmd_helper_video_read_next(video.get(), &bm, &tx);
        mtmd::bitmap_ptr frame(bm);
        std::unique_ptr<char, decltype(&std::free)> t(tx, &std::free);
        if (stopped && stopped()) {
            return outcome::stopped;
        }
        if (rc == -1) {
            break;
        }
        if (rc != 0) {
            error = "reading " + path + " failed after " + std::to_string(frames.size()) + " frames (" +
                    std::to_string(rc) + ")";
            return outcome::failed;
        }
        if (frame) {
            text += marker;
            frames.push_back(std::move(frame));
        } else if (t) {
            text += t.get();
        }
    }
    if (frames.empty()) {
        error = path + " has no frames";
        return outcome::failed;
    }
    return outcome::read;
}

std::vector<const mtmd_bitmap *> video_frames::bitmaps() const {
    std::vector<const mtmd_bitmap *> out;
    for (const auto & f : frames) {
        out.push_back(f.get());
    }
    return out;
}
