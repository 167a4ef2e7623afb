#!/usr/bin/env bash
# Builds tests/consumer_subdir twice, a host project that adds this source tree with
# add_subdirectory() beside its own `llama` (and `mtmd`) targets: (1) llama-cancel static, linked
# whole into the host's shared library, with the host's mtmd; (2) shared, without libmtmd. Each
# time a loader binds llama_cancel_* by name in the host library, and the Python module loads the
# host library itself (its layouts checked; llama.cpp's functions from libllama.so.0, the copy the
# host library links, opened by its soname).
# usage: subdir_consumer.sh SRC WORKDIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"

run() { # NAME EXPECT_MTMD CMAKE_ARGS...
    local name=$1 expect=$2
    shift 2
    local dir="$work/$name"
    cmake -S "$src/tests/consumer_subdir" -B "$dir" -G Ninja -DLLAMA_CANCEL_SOURCE="$src" "$@" >"$dir.log" 2>&1 ||
        { cat "$dir.log"; exit 1; }
    grep -E "llama-cancel: (mtmd|no libmtmd)" "$dir.log" || true
    cmake --build "$dir" >>"$dir.log" 2>&1 || { tail -n 40 "$dir.log"; exit 1; }
    "$dir/ffi_loader" "$dir/libhost.so" "$expect"
    python3 -c '
import sys, llama_cancel
lc = llama_cancel.load(sys.argv[1])
assert lc.has_mtmd == (sys.argv[2] == "1"), lc.has_mtmd
assert lc.llama.llama_model_default_params().n_gpu_layers is not None
assert lc.llama.sources["llama_model_default_params"] == "libllama.so.0", lc.llama.sources
print("python module on the host library: version %d.%d.%d, layouts match, mtmd" % lc.version(), lc.has_mtmd)
' "$dir/libhost.so" "$expect"
}

mkdir -p "$work"
run static-mtmd 1 -DLLAMA_CANCEL_STATIC=ON -DHOST_WITH_MTMD=ON
run shared-no-mtmd 0 -DLLAMA_CANCEL_STATIC=OFF -DHOST_WITH_MTMD=OFF -DLLAMA_CANCEL_WITH_MTMD=OFF
echo "add_subdirectory consumers (static with the host's mtmd, shared without libmtmd): ok"
