#!/usr/bin/env bash
# Installs the build into a scratch prefix and uses only the install tree: a consumer built with
# CMake's find_package(llama-cancel) and with pkg-config; the Python module finding the library from
# its installed place; the CLI running its installed generator and writing the model it generates
# into a cache folder, not beside itself, with no source-tree path compiled in; `llama-cancel check`
# on the model; llama-cancel-bench installed only where LLAMA_CANCEL_INSTALL_BENCH is on.
# usage: install_consumer.sh BUILD SRC MODEL [INSTALL_BENCH]
set -euo pipefail
build=$1
src=$2
model=$3
install_bench=${4:-OFF}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
find "$prefix" -type f -o -type l | sed "s|$prefix|  <prefix>|" | sort
libdir=$(dirname "$(find "$prefix" -name 'libllama-cancel.so' | head -n 1)")

cmake -S "$src/tests/consumer" -B "$prefix/cbuild" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cbuild" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cbuild/consumer"
# The header's promises (issue 30) through the installed library alone, on a model.
LD_LIBRARY_PATH="$libdir" "$prefix/cbuild/promises" "$model" 2>/dev/null

# The header's versioning rule: a host built against X.Y.Z runs on any library of MAJOR X and MINOR >= Y.
# The installed version file, rewritten to say a library one minor release newer, must satisfy
# find_package(llama-cancel X.Y); a newer minor, the next major and the previous one must not.
read -r major minor patch <<<"$(sed -n 's/^#define LLAMA_CANCEL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
    "$src/include/llama-cancel.h" | tr '\n' ' ')"
vfile=$(find "$prefix" -name llama-cancel-config-version.cmake)
sed -i "s/\"$major\.$minor\.$patch\"/\"$major.$((minor + 1)).0\"/" "$vfile"
grep -q "\"$major.$((minor + 1)).0\"" "$vfile" || { echo "FAIL: no version $major.$minor.$patch in $vfile"; exit 1; }
finds() { cmake -S "$src/tests/consumer_version" -B "$prefix/vbuild-$1" -G Ninja -DWANT="$1" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; }
for want in "$major.$minor" "$major.$((minor + 1))" "$major"; do
    finds "$want" || { echo "FAIL: find_package(llama-cancel $want) refused a $major.$((minor + 1)) library"; exit 1; }
done
for want in "$major.$((minor + 2))" "$((major + 1)).0" "$((major - 1)).$minor"; do
    if finds "$want"; then echo "FAIL: find_package(llama-cancel $want) took a $major.$((minor + 1)) library"; exit 1; fi
done
sed -i "s/\"$major\.$((minor + 1))\.0\"/\"$major.$minor.$patch\"/" "$vfile"
echo "install tree: the CMake package follows the header's versioning rule"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -o "$prefix/consumer-pc" "$src/tests/consumer/main.c" $(pkg-config --cflags --libs llama-cancel)
LD_LIBRARY_PATH="$libdir" "$prefix/consumer-pc"
echo "install tree: CMake package and pkg-config consumers ok"

# The Python module, installed under share/llama-cancel/python: load() with no path finds the library.
env -u LLAMA_CANCEL_LIBRARY PYTHONPATH="$prefix/share/llama-cancel/python" python3 -c '
import llama_cancel, os, sys
lc = llama_cancel.load()
assert lc.path.startswith(sys.argv[1]), lc.path
print("installed python module:", os.path.relpath(lc.path, sys.argv[1]), "version %d.%d.%d" % lc.version())
' "$prefix"

# The CLI: no source path inside it; it runs from the prefix (its RPATH), generates its default model
# with the installed make_model.py into the cache folder, and writes nothing beside itself.
if grep -q -F "$src/scripts" "$prefix/bin/llama-cancel"; then
    echo "FAIL: the installed CLI names the source tree's scripts"
    exit 1
fi
# Its constant data (its debug information names the build folder as where it was compiled).
objcopy -O binary --only-section=.rodata "$prefix/bin/llama-cancel" "$prefix/cli.rodata"
if grep -q -F "$(cd "$build" && pwd -P)" "$prefix/cli.rodata"; then
    echo "FAIL: the installed CLI names a path in the build tree ($build)"
    exit 1
fi
cache="$prefix/cache"
LLAMA_CANCEL_CACHE_DIR="$cache" "$prefix/bin/llama-cancel" generate --prompt-tokens 4 --n-predict 1 --threads 1 >/dev/null 2>"$prefix/cli.log" ||
    { cat "$prefix/cli.log"; exit 1; }
test -s "$cache/models/bench.gguf" || { echo "FAIL: no model in the cache folder"; cat "$prefix/cli.log"; exit 1; }
test ! -e "$prefix/bin/models" || { echo "FAIL: models written beside the CLI"; exit 1; }
echo "installed CLI: generated its model into the cache folder with the installed generator"
check=$("$prefix/bin/llama-cancel" check --model "$model" --threads 1)
grep -q "^  CPU (cpu, .*): abort callback after each node$" <<<"$check" ||
    { echo "FAIL: the installed llama-cancel check gave no CPU stop path:"; echo "$check"; exit 1; }
case "$install_bench" in
    ON | on | 1 | TRUE | true | YES | yes) want_bench=1 ;;
    *) want_bench=0 ;;
esac
# The benchmark's programs and scripts (its delay proxy, plotters, projector and TTS generators) are
# installed with it alone: the user commands are llama-cancel and its model generator.
bench_files=(bin/llama-cancel-bench bin/llama-cancel-delay-proxy share/llama-cancel/scripts/plot_bench.py
    share/llama-cancel/scripts/plot_tune.py)
for f in "${bench_files[@]}"; do
    if [ "$want_bench" = 1 ] && [ ! -e "$prefix/$f" ]; then
        echo "FAIL: LLAMA_CANCEL_INSTALL_BENCH is on but $f is not installed"
        exit 1
    elif [ "$want_bench" = 0 ] && [ -e "$prefix/$f" ]; then
        echo "FAIL: $f installed without LLAMA_CANCEL_INSTALL_BENCH"
        exit 1
    fi
done
echo "installed CLI: llama-cancel check ran; llama-cancel-bench installed: $([ "$want_bench" = 1 ] && echo yes || echo no)"

# The user CLI alone configures without nlohmann_json (the benchmark's JSON library).
cmake -S "$src" -B "$prefix/cli-only" -G Ninja -DLLAMA_CANCEL_BUILD_TESTS=OFF -DLLAMA_CANCEL_BUILD_BENCH=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON >"$prefix/cli-only.log" 2>&1 ||
    { cat "$prefix/cli-only.log"; echo "FAIL: the CLI alone does not configure without nlohmann_json"; exit 1; }
echo "the CLI alone configures without nlohmann_json"
