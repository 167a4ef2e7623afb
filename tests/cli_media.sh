#!/usr/bin/env bash
# The CLI with an image and with an audio file (synthetic projectors), and with a video where VIDEO
# is given: the media go through the cancellable mtmd path and generation follows; a file that is
# not there is a clear error. usage: cli_media.sh LLAMA_CANCEL MODEL VISION AUDIO [VIDEO FRAMES]
set -euo pipefail
exe=$1 model=$2 vision=$3 audio=$4 video=${5:-} frames=${6:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import math, struct, sys, wave, zlib
d = sys.argv[1]
w, h = 48, 40
rows = b"".join(b"\x00" + bytes((x * 5 + y * 3 + c * 70) & 255 for x in range(w) for c in range(3)) for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + \
      chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(f"{d}/picture.png", "wb").write(png)
with wave.open(f"{d}/speech.wav", "wb") as f:
    f.setnchannels(1); f.setsampwidth(2); f.setframerate(16000)
    f.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i * 0.17))) for i in range(16000)))
PY
fail=0
for kind in image audio; do
    if [ $kind = image ]; then proj=$vision file=$dir/picture.png; else proj=$audio file=$dir/speech.wav; fi
    out=$("$exe" generate --model "$model" --mmproj "$proj" --$kind "$file" --prompt "what is this?" -n 4 2>&1) || {
        echo "FAIL: $kind run exited $?"; echo "$out"; fail=1; continue; }
    echo "$out" | tail -n 3
    grep -q "prefill: [0-9]* positions (text and media)" <<<"$out" || { echo "FAIL: $kind prompt"; fail=1; }
    grep -Eq "stop: length; prompt ([0-9]+)/\1 tokens in memory; 4 tokens generated, 4 in memory" <<<"$out" ||
        { echo "FAIL: $kind generation"; fail=1; }
done
"$exe" generate --model "$model" --mmproj "$vision" --image "$dir/missing.png" -n 1 >"$dir/err" 2>&1 && fail=1
grep -q "cannot read" "$dir/err" || { echo "FAIL: no clear error for a missing image"; cat "$dir/err"; fail=1; }
if [ -n "$video" ]; then
    # every frame read first, each an image chunk of the prompt, then the generation
    if out=$("$exe" generate --model "$model" --mmproj "$vision" --video "$video" --prompt "what happens?" -n 4 2>&1); then
        echo "$out" | tail -n 3
        grep -q "video: $frames frames read" <<<"$out" || { echo "FAIL: video frames"; echo "$out"; fail=1; }
        grep -Eq "stop: length; prompt ([0-9]+)/\1 tokens in memory; 4 tokens generated, 4 in memory" <<<"$out" ||
            { echo "FAIL: video generation"; fail=1; }
    else
        echo "FAIL: video run exited $?"; echo "$out"; fail=1
    fi
    "$exe" generate --model "$model" --mmproj "$vision" --video "$dir/missing.mp4" -n 1 >"$dir/err" 2>&1 && fail=1
    grep -q "error: cannot read .*missing.mp4 as a video" "$dir/err" ||
        { echo "FAIL: no clear error for a missing video"; cat "$dir/err"; fail=1; }
fi
exit $fail
