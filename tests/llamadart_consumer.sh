#!/usr/bin/env bash
# Builds tests/consumer_llamadart, a host shaped like llamadart-native's build (its own llama and
# mtmd targets, Release with IPO on, llama-cancel static and linked whole into its one shared
# library), then checks what link-time optimization could have lost: llama-cancel's archive holds
# LTO objects (so IPO really ran), the host library exports every LLAMA_CANCEL_API function of the
# header and nothing else of llama-cancel's, and an FFI loader binds them all by name and runs a
# cancel through them (tests/consumer_llamadart/ffi_loader.c).
# usage: llamadart_consumer.sh SRC WORKDIR MODEL
set -euo pipefail
src=$1 work=$2 model=$3
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src/tests/consumer_llamadart" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CANCEL_SOURCE="$src" >"$work.log" 2>&1 || { cat "$work.log"; exit 1; }
cmake --build "$work" -j1 >>"$work.log" 2>&1 || { tail -n 40 "$work.log"; exit 1; }

archive="$work/llama-cancel/libllama-cancel.a"
lto=$(readelf -S -W "$archive" | grep -c '\.gnu\.lto_' || true)
if [ "$lto" -eq 0 ]; then
    echo "FAIL: $archive holds no LTO sections: IPO did not reach llama-cancel"
    exit 1
fi
echo "libllama-cancel.a: $lto LTO sections (built with IPO), linked whole into libhost.so"
python3 "$src/tests/api_names.py" "$src/include/llama-cancel.h" elf "$work/libhost.so" '^(host_|_init$|_fini$)'
"$work/ffi_loader" "$work/libhost.so" "$src/include/llama-cancel.h" "$model"
