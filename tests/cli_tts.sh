#!/usr/bin/env bash
# `llama-cancel tts` on the tiny Qwen3-TTS pair. First a whole short run (exit 0, every frame in
# the WAV) and bad input (a missing file, a projector that generates no audio: a clear error, exit
# 1). Then Ctrl-C typed into a terminal as a person would (tmux send-keys) during a long generation
# with a small GEN_WAV window, once the progress line shows audio (never after a guessed delay;
# every wait is a bounded poll of the screen): the CLI reports the stop, writes the audio produced
# so far and exits 130; the WAV's header is checked field by field (RIFF/WAVE, fmt PCM 16-bit mono
# 24000 Hz, sizes consistent with the file) and its samples are the frames the CLI says are in the
# audio, 1920 each, at least one window's.
# usage: cli_tts.sh LLAMA_CANCEL MODEL MMPROJ SCRIPTS_DIR
set -u
exe=$1 model=$2 mmproj=$3 scripts=$4
dir=$(mktemp -d)
server="llama-cancel-tts-test-$$"
t() { tmux -L "$server" "$@"; }
screen() { t capture-pane -p -t cli -S -200 2>/dev/null; }
wait_for() { # EXTENDED-REGEX SECONDS
    for _ in $(seq 1 $(( $2 * 20 ))); do
        screen | grep -Eq -- "$1" && return 0
        sleep 0.05
    done
    return 1
}
trap 't kill-server 2>/dev/null; rm -rf "$dir"' EXIT
fail=0

# check_wav FILE SAMPLES: the header's fields and sizes, and SAMPLES 16-bit samples.
check_wav() {
    python3 - "$1" "$2" <<'PY'
import struct, sys
path, want = sys.argv[1], int(sys.argv[2])
b = open(path, "rb").read()
errors = []
def expect(what, got, exp):
    if got != exp:
        errors.append(f"{what}: {got!r}, expected {exp!r}")
expect("RIFF tag", b[0:4], b"RIFF")
expect("RIFF size", struct.unpack("<I", b[4:8])[0], len(b) - 8)
expect("WAVE tag", b[8:12], b"WAVE")
expect("fmt tag", b[12:16], b"fmt ")
size, fmt, ch, rate, byte_rate, align, bits = struct.unpack("<IHHIIHH", b[16:36])
expect("fmt size", size, 16)
expect("format (PCM)", fmt, 1)
expect("channels", ch, 1)
expect("sample rate", rate, 24000)
expect("byte rate", byte_rate, 48000)
expect("block align", align, 2)
expect("bits", bits, 16)
expect("data tag", b[36:40], b"data")
expect("data size", struct.unpack("<I", b[40:44])[0], len(b) - 44)
expect("samples", (len(b) - 44) // 2, want)
if want <= 0:
    errors.append("no samples")
if len(b) > 44 and not any(b[44:]):
    errors.append("every sample is 0")
print(f"{path}: {(len(b) - 44) // 2} samples, 24000 Hz, 16-bit mono" if not errors else "\n".join(errors))
sys.exit(1 if errors else 0)
PY
}

# 1. A whole short run: 5 frames in windows of 2, 2, 1, every frame in the WAV.
out=$("$exe" tts --model "$model" --mmproj "$mmproj" --text "Hello world." --out "$dir/short.wav" \
      --max-frames 5 --window 2 --threads 1 2>&1)
rc=$?
echo "$out" | tail -n 4
[ $rc -eq 0 ] || { echo "FAIL: the whole run exited $rc"; fail=1; }
grep -q "frames 5: 0.40 s generated, 0.32 s of audio" <<<"$out" || { echo "FAIL: no progress line for frame 5 (two windows of 2 in the audio)"; fail=1; }
grep -q "stop: length; 5 frames generated, 5 in the audio" <<<"$out" || { echo "FAIL: not 5 frames in the audio"; fail=1; }
check_wav "$dir/short.wav" $(( 5 * 1920 )) || { echo "FAIL: the whole run's WAV"; fail=1; }

# 2. Bad input: clear errors, exit status 1, no WAV.
"$exe" tts --model "$dir/missing.gguf" --mmproj "$mmproj" --text hi --out "$dir/bad.wav" >"$dir/err" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "error: --model $dir/missing.gguf: No such file" "$dir/err" ||
    { echo "FAIL: missing model (exit $rc)"; cat "$dir/err"; fail=1; }
python3 "$scripts/make_mmproj.py" "$dir/mmproj-audio-in.gguf" --kind audio --n-embd-text 64 >/dev/null ||
    { echo "FAIL: make_mmproj.py"; fail=1; }
"$exe" tts --model "$model" --mmproj "$dir/mmproj-audio-in.gguf" --text hi --out "$dir/bad.wav" >"$dir/err" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "is no text-to-speech projector" "$dir/err" ||
    { echo "FAIL: an audio-input projector (exit $rc)"; cat "$dir/err"; fail=1; }
[ -e "$dir/bad.wav" ] && { echo "FAIL: a WAV was written after bad input"; fail=1; }

# 3. Ctrl-C in a terminal during a long generation (up to 4096 frames, minutes), windows of 2 frames.
t new-session -d -s cli -x 220 -y 50 "bash --norc --noprofile"
t set-option -t cli remain-on-exit on >/dev/null
t send-keys -t cli "$exe tts --model $model --mmproj $mmproj --text 'Hello world, this is a long test.' --out $dir/stopped.wav --window 2 --threads 1; echo EXIT=\$?" Enter
# The progress line once a window is audio: more than 0.00 s of it.
wait_for "frames [0-9]+: [0-9.]+ s generated, ([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*) s of audio" 120 ||
    { echo "FAIL: no progress with audio"; screen; exit 1; }
t send-keys -t cli C-c
wait_for "EXIT=[0-9]" 60 || { echo "FAIL: no exit after Ctrl-C"; screen; exit 1; }
out=$(screen)
echo "$out" | tail -n 6
grep -q "cancelled by Ctrl-C: .* stopped [0-9.]* ms after the signal" <<<"$out" || { echo "FAIL: no stop report"; fail=1; }
grep -q "stop: cancelled at " <<<"$out" || { echo "FAIL: not reported as cancelled"; fail=1; }
grep -q "EXIT=130" <<<"$out" || { echo "FAIL: exit status is not 130"; fail=1; }
grep -q "holds the audio produced before the stop" <<<"$out" || { echo "FAIL: no message about the audio kept"; fail=1; }
in_audio=$(grep -Eo "[0-9]+ frames generated, [0-9]+ in the audio" <<<"$out" | grep -Eo "[0-9]+ in the audio" | grep -Eo "^[0-9]+")
written=$(grep -Eo "wrote [^ ]*: [0-9]+ samples" <<<"$out" | grep -Eo "[0-9]+ samples" | grep -Eo "^[0-9]+")
if [ -z "$in_audio" ] || [ -z "$written" ]; then
    echo "FAIL: no frame or sample count in the report"; fail=1
else
    [ "$in_audio" -ge 2 ] || { echo "FAIL: $in_audio frames in the audio, a window (2) or more expected"; fail=1; }
    [ "$written" -eq $(( in_audio * 1920 )) ] || { echo "FAIL: $written samples for $in_audio frames"; fail=1; }
    check_wav "$dir/stopped.wav" $(( in_audio * 1920 )) || { echo "FAIL: the stopped run's WAV"; fail=1; }
fi
ms=$(grep -o "stopped [0-9.]* ms after" <<<"$out" | grep -o "[0-9.]*")
echo "Ctrl-C to stop: ${ms:-?} ms"
exit $fail
