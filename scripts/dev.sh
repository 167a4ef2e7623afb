#!/usr/bin/env bash
# llama-cancel's one entry point for set-up, build, tests and benchmark.
#
#   scripts/dev.sh bench [ARGS]   build, then run the cancel benchmark (main job)
#   scripts/dev.sh test           build, then run every test, then the ASan/UBSan and TSan
#                                 builds' tests (what .ci/run calls)
#   scripts/dev.sh build          configure and build only
#   scripts/dev.sh run CMD...     run CMD in the build environment, from the checkout
#
# Where the host has llama.cpp >= 0.7 development files (CMake package, python3-gguf), everything
# runs natively. Elsewhere the script makes, once, a Debian sid root with mmdebstrap holding
# Debian's llama.cpp and ggml packages, caches it under $LLAMA_CANCEL_ROOT, and runs each command
# inside it (unshare -m, bind mount of the checkout, chroot). A second call costs seconds.
#
# LLAMA_CANCEL_ENV=root|native forces one; LLAMA_CANCEL_ROOT picks the cache folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${LLAMA_CANCEL_ROOT:-/var/cache/llama-cancel/sid-root}
jobs=${LLAMA_CANCEL_JOBS:-$(nproc)}

# Debian sid packages the root holds. Changing this list installs the difference on the next call.
packages=(
    g++ cmake ninja-build pkg-config file binutils procps tmux python3-matplotlib clang libclang-rt-dev
    libllama-dev libggml-dev libgtest-dev
    python3 python3-gguf python3-numpy
    libggml0-backend-vulkan mesa-vulkan-drivers libggml0-backend-rpc libggml0-backend-blas
    llama.cpp-tools llama.cpp-tools-extra
    nodejs npm
)
apt_opt='Acquire::Check-Valid-Until "false"'

log() { printf '[dev.sh] %s\n' "$*" >&2; }

host_has_llama() {
    command -v cmake >/dev/null && command -v pkg-config >/dev/null &&
        pkg-config --atleast-version=0.7.0 llama 2>/dev/null &&
        python3 -c 'import gguf, numpy' 2>/dev/null
}

use_root() {
    case "${LLAMA_CANCEL_ENV:-auto}" in
        root) return 0 ;;
        native) return 1 ;;
        *) ! host_has_llama ;;
    esac
}

ensure_root() {
    local stamp="$root/.llama-cancel-packages" want
    want=$(printf '%s\n' "${packages[@]}" | sort)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        log "making the Debian sid root needs root (or install llama.cpp >= 0.7 dev files on the host)"
        exit 1
    fi
    if [ -d "$root/usr" ]; then
        log "installing missing packages into $root"
        chroot "$root" apt-get update -qq
        chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
    else
        if ! command -v mmdebstrap >/dev/null; then
            log "installing mmdebstrap on the host"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
        fi
        log "creating Debian sid root in $root (about a minute)"
        mkdir -p "$(dirname "$root")"
        local tmp="$root.tmp.$$"
        rm -rf "$tmp"
        mmdebstrap --quiet --variant=apt --aptopt="$apt_opt" \
            --include="$(IFS=,; echo "${packages[*]}")" sid "$tmp"
        mv "$tmp" "$root"
    fi
    printf '%s\n' "$want" > "$stamp"
}

# Runs "$@" from the checkout, natively or inside the root with the checkout mounted at the same path.
in_env() {
    if ! use_root; then
        (cd "$here" && "$@")
        return
    fi
    ensure_root
    local q ca_mount="" ca_env=""
    q=$(printf ' %q' "$@")
    # The host's extra CA certificates (a TLS-inspecting proxy's), for npm inside the root.
    if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
        ca_mount="touch $(printf %q "$root/tmp/host-ca.crt")
        mount --bind $(printf %q "$NODE_EXTRA_CA_CERTS") $(printf %q "$root/tmp/host-ca.crt")"
        ca_env="NODE_EXTRA_CA_CERTS=/tmp/host-ca.crt"
    fi
    # A private /tmp first, so that a checkout under /tmp is mounted on top of it, not hidden.
    unshare -m --propagation private -- bash -c "
        set -e
        mount -t tmpfs tmpfs $(printf %q "$root/tmp")
        $ca_mount
        mkdir -p $(printf %q "$root$here")
        mount --bind $(printf %q "$here") $(printf %q "$root$here")
        mount -t proc proc $(printf %q "$root/proc")
        mount --rbind /dev $(printf %q "$root/dev")
        exec chroot $(printf %q "$root") /usr/bin/env -C $(printf %q "$here") $ca_env $q"
}

build_dir() { if use_root; then echo build-sid; else echo build; fi; }

build() {
    local dir
    dir=$(build_dir)
    in_env cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
    in_env cmake --build "$dir" -j "$jobs"
    node_deps
}

# koffi for the Node binding, exactly as bindings/node/package-lock.json pins it (npm ci, no install
# scripts: the prebuilt binary comes in its platform package), again only when the lockfile changes.
# Where the registry cannot be reached, the node_binding test is skipped and says why.
node_deps() {
    local lock="$here/bindings/node/package-lock.json" stamp="$here/bindings/node/node_modules/.llama-cancel-lock"
    if [ -f "$stamp" ] && cmp -s "$stamp" "$lock"; then
        return 0
    fi
    log "installing the Node binding's dependencies from its lockfile (npm ci)"
    if in_env sh -c 'cd bindings/node && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error'; then
        cp "$lock" "$stamp"
    else
        log "npm ci failed: the node_binding test will be skipped"
    fi
}

# A sanitizer build (NAME, -fsanitize value) of what the labelled tests need, then those tests.
sanitized_tests() {
    local dir
    dir="$(build_dir)-$1"
    in_env cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLLAMA_CANCEL_SANITIZE="$2"
    in_env cmake --build "$dir" -j "$jobs" --target test_callbacks test_decode test_generate test_outputs \
        test_memory_kinds test_budget llama-cancel-cli
    # One ggml thread under TSan: ggml's OpenMP workers synchronize in code TSan cannot see.
    in_env env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1 \
        LLAMA_CANCEL_THREADS="$([ "$1" = tsan ] && echo 1 || echo 2)" \
        ctest --test-dir "$dir" --output-on-failure -L "$1"
}

# The libFuzzer targets, built with clang, each run briefly.
fuzz_tests() {
    local dir
    dir="$(build_dir)-fuzz"
    in_env env CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DLLAMA_CANCEL_SANITIZE=fuzzer-no-link,address,undefined -DLLAMA_CANCEL_FUZZ=ON
    in_env cmake --build "$dir" -j "$jobs" --target fuzz_decode
    in_env ctest --test-dir "$dir" --output-on-failure -L fuzz
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    build) build ;;
    test)
        build
        in_env ctest --test-dir "$(build_dir)" --output-on-failure -j "$jobs" "$@"
        sanitized_tests asan address,undefined
        sanitized_tests tsan thread
        fuzz_tests
        ;;
    bench)
        build
        in_env "$(build_dir)/llama-cancel" bench "$@"
        ;;
    run) in_env "$@" ;;
    *)
        sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
