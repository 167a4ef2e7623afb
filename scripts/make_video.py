#!/usr/bin/env python3
"""Write a short synthetic test video for libmtmd's video path (mtmd_helper_video_*).

The frames are one of ffmpeg's test sources (lavfi testsrc by default: colour bars, a moving
gradient and a frame counter, so that consecutive frames differ), encoded by the ffmpeg program
with bit-exact flags, one thread and no metadata: the same arguments give a byte-identical file
with the same ffmpeg (checked twice in a row with Debian's ffmpeg 9.0.2). The container and codec
follow OUT's extension:

  .mp4   H.264 (libx264, yuv420p), what most real clips are
  .mkv   FFV1 (lossless, ffmpeg's own encoder)
  .avi   Motion JPEG
  .webm  VP9 (libvpx-vp9)

    make_video.py OUT.{mp4,mkv,avi,webm} [--size WxH] [--fps N] [--duration S]
                  [--source testsrc|testsrc2|smptebars|rgbtestsrc] [--ffmpeg PATH]

Defaults: 64x64, 4 fps, 2 s: 8 frames. libmtmd's helper samples a video at 4 fps unless told
otherwise (mtmd_helper_video_init_params.fps_target), so the default file gives it every frame.

How libmtmd 0.7.0 reads a video (mtmd-helper.h; Debian's libmtmd is built with MTMD_VIDEO, see
mtmd_helper_support_video): it links no ffmpeg library but runs the ffprobe and ffmpeg programs
(posix_spawn, from params.ffmpeg_bin_dir or else PATH): ffprobe for width, height, r_frame_rate,
nb_frames and duration of the first video stream, then one ffmpeg that decodes and resamples
to fps_target (-vf fps=...) and pipes raw rgb24 frames back (from a file path, or from a memory
buffer it feeds through a pipe with mtmd_helper_video_init_from_buf). Any container and codec the
installed ffmpeg decodes will do; without ffprobe/ffmpeg, mtmd_helper_video_init returns NULL.
This script needs the ffmpeg program itself (in the build root: scripts/dev.sh run).
"""

import argparse
import os
import subprocess
import sys

import gguf_files

FORMATS = {
    # extension: (muxer, encoder arguments)
    "mp4": ("mp4", ["-c:v", "libx264", "-preset", "medium", "-crf", "23", "-pix_fmt", "yuv420p",
                    "-x264-params", "threads=1"]),
    "mkv": ("matroska", ["-c:v", "ffv1", "-pix_fmt", "yuv420p"]),
    "avi": ("avi", ["-c:v", "mjpeg", "-q:v", "5", "-pix_fmt", "yuvj420p"]),
    "webm": ("webm", ["-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "40", "-row-mt", "0",
                      "-pix_fmt", "yuv420p"]),
}
SOURCES = ("testsrc", "testsrc2", "smptebars", "rgbtestsrc")


def parse_args(argv):
    p = argparse.ArgumentParser(description="Write a short deterministic test video with ffmpeg.")
    p.add_argument("out", metavar="OUT", help="output file; its extension picks the format: "
                   + ", ".join(sorted(FORMATS)) + " (written atomically via OUT.tmp)")
    p.add_argument("--size", default="64x64", help="WxH, both even (default 64x64)")
    p.add_argument("--fps", type=int, default=4, help="frames per second (default 4)")
    p.add_argument("--duration", type=float, default=2.0, help="seconds (default 2)")
    p.add_argument("--source", choices=SOURCES, default="testsrc", help="ffmpeg test source (default testsrc)")
    p.add_argument("--ffmpeg", default="ffmpeg", help="the ffmpeg program (default: ffmpeg from PATH)")
    a = p.parse_args(argv)

    ext = os.path.splitext(a.out)[1].lstrip(".").lower()
    if ext not in FORMATS:
        p.error("OUT must end in one of " + ", ".join("." + e for e in sorted(FORMATS)))
    try:
        w, h = (int(x) for x in a.size.lower().split("x"))
    except ValueError:
        p.error("--size must be WxH")
    if w < 16 or h < 16 or w % 2 or h % 2:
        p.error("--size: both sides even and at least 16 (yuv420p)")
    if a.fps < 1:
        p.error("--fps must be >= 1")
    if not 0 < a.duration <= 60:
        p.error("--duration must be in (0, 60] seconds")
    return a.out, dict(ext=ext, width=w, height=h, fps=a.fps, duration=a.duration, source=a.source,
                       ffmpeg=a.ffmpeg)


def build(path, cfg):
    muxer, codec = FORMATS[cfg["ext"]]
    n_frames = max(1, round(cfg["fps"] * cfg["duration"]))
    src = "%s=size=%dx%d:rate=%d" % (cfg["source"], cfg["width"], cfg["height"], cfg["fps"])
    cmd = [cfg["ffmpeg"], "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
           "-f", "lavfi", "-i", src, "-frames:v", str(n_frames),
           "-threads", "1", "-fflags", "+bitexact", "-flags:v", "+bitexact",
           "-map_metadata", "-1"] + codec + ["-f", muxer, path]
    subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(gguf_files.main(parse_args, build))
