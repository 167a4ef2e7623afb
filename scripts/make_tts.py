#!/usr/bin/env python3
"""Write a synthetic text-to-speech model pair (backbone GGUF + generation mmproj) for tests and
benchmarks, for Debian's llama-tts and libmtmd's mtmd_gen_audio_process.

    make_tts.py --pipeline qwen3tts|pockettts --model OUT.gguf --mmproj OUT_MMPROJ.gguf
                [--preset tiny|bench|mimi512 (pockettts)] [--seed N]

Each pipeline is a module exposing PRESETS (preset name -> dict of sizes) and
write_pair(model_path, mmproj_path, preset_cfg, seed); PIPELINES maps --pipeline to it. The files
are written atomically (via PATH.tmp), byte-identical for the same arguments, f32 seeded random
weights that mean nothing.

Pipelines:
  qwen3tts  (tts_qwen3.py) a Qwen3-TTS talker (architecture qwen3tts) and a qwen3tts_gen projector
            (code predictor + code2wav, 24 kHz, 1920 samples a frame). The talker's logits are
            steered so that it samples codec codes and only rarely EOS. See tts_qwen3.py.
  pockettts (tts_pocket.py) a Pocket-TTS backbone (architecture pockettts) and a pockettts_gen
            projector (flow-matching net + mimi decoder, 24 kHz, 1920 samples a frame). Its EOS
            head never fires: each text chunk runs mtmd-helper's frame budget. See tts_pocket.py.
"""

import argparse
import sys

import tts_pocket
import tts_qwen3

PIPELINES = {"qwen3tts": tts_qwen3, "pockettts": tts_pocket}


def parse_args(argv):
    p = argparse.ArgumentParser(description="Write a synthetic TTS backbone + mmproj pair with seeded random weights.")
    p.add_argument("--pipeline", choices=list(PIPELINES), required=True)
    p.add_argument("--model", required=True, metavar="OUT.gguf", help="the backbone (written via OUT.gguf.tmp)")
    p.add_argument("--mmproj", required=True, metavar="OUT_MMPROJ.gguf", help="the generation projector")
    p.add_argument("--preset", default="tiny", help="size preset (default tiny)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    presets = PIPELINES[a.pipeline].PRESETS
    if a.preset not in presets:
        p.error("--preset %s: --pipeline %s has the presets %s" % (a.preset, a.pipeline, ", ".join(presets)))
    if a.seed < 0:
        p.error("--seed must be >= 0")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    mod = PIPELINES[a.pipeline]
    mod.write_pair(a.model, a.mmproj, dict(mod.PRESETS[a.preset]), a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
