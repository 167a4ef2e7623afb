#!/usr/bin/env bash
# llama-cancel's one entry point for set-up, build, tests and benchmark.
#
#   scripts/dev.sh bench [ARGS]   build llama-cancel-bench (what the benchmark runs), then run the
#                                 cancel benchmark (main job): the headline rows, about 3 minutes; --all
#                                 for every row (llama-cancel-bench bench --help)
#   scripts/dev.sh test           build, then run every test, then the ASan/UBSan and TSan
#                                 builds' tests, the fuzz run, and the arm64 core tests under
#                                 qemu-user (what .ci/run calls; LLAMA_CANCEL_ARM64=0 leaves arm64 out)
#   scripts/dev.sh build          configure and build only
#   scripts/dev.sh run CMD...     run CMD in the build environment, from the checkout
#   scripts/dev.sh --arch arm64 build|test
#                                 the arm64 cross build only, and its core tests under qemu-user
#
# Where the host has llama.cpp >= 0.7 development files (CMake package, python3-gguf), everything
# runs natively. Elsewhere the script makes, once, a Debian sid root with mmdebstrap holding
# Debian's llama.cpp and ggml packages, caches it under $LLAMA_CANCEL_ROOT, and runs each command
# inside it (unshare -m, bind mount of the checkout, chroot). A second call costs seconds.
#
# LLAMA_CANCEL_ENV=root|native forces one; LLAMA_CANCEL_ROOT picks the cache folder;
# LLAMA_CANCEL_ARM64_CPUS the qemu CPU models of the arm64 tests (default: max cortex-a76 neoverse-n2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${LLAMA_CANCEL_ROOT:-/var/cache/llama-cancel/sid-root}
jobs=${LLAMA_CANCEL_JOBS:-$(nproc)}

# Debian sid packages the root holds. Changing this list installs the difference on the next call.
packages=(
    g++ cmake ninja-build pkg-config file binutils procps tmux python3-matplotlib clang libclang-rt-dev
    libllama-dev libggml-dev libgtest-dev nlohmann-json3-dev
    python3 python3-gguf python3-numpy python3-pytest python3-pip python3-setuptools
    libggml0-backend-vulkan mesa-vulkan-drivers libggml0-backend-rpc libggml0-backend-blas
    llama.cpp-tools llama.cpp-tools-extra llama.cpp-examples ffmpeg
    nodejs npm
)
apt_opt='Acquire::Check-Valid-Until "false"'

# The arm64 cross build's extras (cross compiler, Debian's arm64 llama.cpp and ggml, qemu-user),
# installed into the root only when an arm64 step runs, with their own stamp: the list above, and
# what other checkouts install from it, stay as they are.
arm64_packages=(
    g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user
    libllama-dev:arm64 libggml-dev:arm64 libgtest-dev:arm64
)

# The Windows cross build's compiler and binutils (tests/mingw_build.sh: a DLL linked against import
# libraries made with dlltool), with their own stamp, so that checkouts whose list above is older
# do not reinstall on every call.
mingw_packages=(g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64)

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
    ensure_base_root
    ensure_mingw_packages
}

ensure_base_root() {
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

# Extra packages installed into the root with a stamp of their own (.llama-cancel-packages-NAME):
# the main list, and what other checkouts install from it, stay as they are.
# usage: ensure_extra_packages NAME WHAT PACKAGE...
ensure_extra_packages() {
    local name=$1 what=$2
    shift 2
    local stamp="$root/.llama-cancel-packages-$name" want
    want=$(printf '%s\n' "$@" | sort)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        log "adding $what to the Debian sid root needs root"
        exit 1
    fi
    log "adding $what to $root"
    if [ "$name" = arm64 ]; then
        chroot "$root" dpkg --add-architecture arm64
    fi
    chroot "$root" apt-get update -qq
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    printf '%s\n' "$want" > "$stamp"
}

ensure_mingw_packages() {
    ensure_extra_packages mingw "the mingw-w64 cross compiler" "${mingw_packages[@]}"
}

ensure_arm64_root() {
    ensure_root
    ensure_extra_packages arm64 "arm64 (cross compiler, arm64 llama.cpp and ggml, qemu-user)" "${arm64_packages[@]}"
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

configure() {
    in_env cmake -S . -B "$(build_dir)" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
}

build() {
    configure
    in_env cmake --build "$(build_dir)" -j "$jobs"
    node_deps
}

# What the benchmark runs, and nothing of the test suite: llama-cancel-bench (its rows are child
# processes of the same executable; configuring copies the model generators and the plotter beside
# it) and the delay proxy of the rpc-lan rows. The models are generated by llama-cancel-bench itself,
# into the cache folder (tools/common/paths.cpp), on first use; the RPC server and the backends are
# llama.cpp's.
build_bench() {
    configure
    in_env cmake --build "$(build_dir)" -j "$jobs" --target llama-cancel-bench llama-cancel-delay-proxy
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
    # Debug and sanitized: three times the suite's default timeout per test.
    in_env cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLLAMA_CANCEL_SANITIZE="$2" -DLLAMA_CANCEL_TEST_TIMEOUT=900
    # The labelled tests' programs (tests/CMakeLists.txt: tests_asan, tests_tsan), and the stress
    # command stress_short runs.
    in_env cmake --build "$dir" -j "$jobs" --target "tests_$1" llama-cancel-bench
    # One ggml thread under TSan: ggml's OpenMP workers synchronize in code TSan cannot see.
    in_env env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1 \
        LLAMA_CANCEL_THREADS="$([ "$1" = tsan ] && echo 1 || echo 2)" \
        ctest --test-dir "$dir" --output-on-failure --no-tests=error -L "$1"
}

# The libFuzzer targets, built with clang, each run briefly.
fuzz_tests() {
    local dir
    dir="$(build_dir)-fuzz"
    in_env env CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DLLAMA_CANCEL_SANITIZE=fuzzer-no-link,address,undefined -DLLAMA_CANCEL_FUZZ=ON -DLLAMA_CANCEL_TEST_TIMEOUT=900
    in_env cmake --build "$dir" -j "$jobs" --target fuzz_decode
    in_env ctest --test-dir "$dir" --output-on-failure --no-tests=error -L fuzz
}

# arm64: the cross build (cmake/aarch64-linux-gnu.cmake), in the sid root with its arm64 extras, or
# natively where the host has the cross compiler, qemu-aarch64 and arm64 llama.cpp files. Sets
# arm64_ok to 1 where the arm64 step can run (not called as a condition, so that set -e holds inside).
arm64_env() {
    arm64_ok=1
    if use_root; then
        ensure_arm64_root
    elif ! { command -v aarch64-linux-gnu-g++ && command -v qemu-aarch64 &&
        [ -f /usr/lib/aarch64-linux-gnu/cmake/llama/llama-config.cmake ]; } >/dev/null; then
        log "arm64 skipped: this host has no aarch64-linux-gnu-g++, qemu-aarch64 or arm64 llama.cpp files"
        log "  (LLAMA_CANCEL_ENV=root runs it in the sid root; LLAMA_CANCEL_ARM64=0 says so instead)"
        arm64_ok=0
    fi
}

arm64_build() {
    local dir
    dir="$(build_dir)-arm64"
    in_env cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo --no-warn-unused-cli \
        -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
    in_env cmake --build "$dir" -j "$jobs"
}

# The core tests (the cross build registers only those) through qemu-aarch64, once per CPU model in
# LLAMA_CANCEL_ARM64_CPUS, each loading another of ggml's arm64 CPU variants (printed): max (SVE
# 512-bit, SME: armv9.2_2), cortex-a76 (NEON, dotprod: armv8.2_2, most phones), neoverse-n2 (SVE2
# 128-bit, i8mm: armv8.6_2, recent phone cores). Timed.
arm64_tests() {
    local start=$SECONDS dir cpu
    dir="$(build_dir)-arm64"
    arm64_build
    for cpu in ${LLAMA_CANCEL_ARM64_CPUS:-max cortex-a76 neoverse-n2}; do
        log "arm64 core tests under qemu-aarch64 -cpu $cpu"
        in_env env LLAMA_CANCEL_QEMU_CPU="$cpu" ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@"
        in_env env LLAMA_CANCEL_QEMU_CPU="$cpu" ctest --test-dir "$dir" -R '^cpu_variant$' -FS models -V |
            sed -n 's/^[0-9]*: \(load_backend: loaded CPU\|features:\|repacked\)/  \1/p'
    done
    log "arm64 build and core tests under qemu-user: $((SECONDS - start)) s"
}

arch=x86-64
if [ "${1:-}" = --arch ]; then
    arch=${2:-}
    shift 2 || true
    if [ "$arch" != arm64 ]; then
        log "--arch takes arm64 (the default build is the host's)"
        exit 2
    fi
fi

cmd=${1:-}
[ $# -gt 0 ] && shift
if [ "$arch" = arm64 ]; then
    case "$cmd" in
        build)
            arm64_env
            if [ "$arm64_ok" != 1 ]; then exit 1; fi
            arm64_build
            ;;
        test)
            arm64_env
            if [ "$arm64_ok" != 1 ]; then exit 1; fi
            arm64_tests "$@"
            ;;
        *)
            log "--arch arm64 takes build or test"
            exit 2
            ;;
    esac
    exit
fi
case "$cmd" in
    build) build ;;
    test)
        build
        in_env ctest --test-dir "$(build_dir)" --output-on-failure -j "$jobs" "$@"
        sanitized_tests asan address,undefined
        sanitized_tests tsan thread
        fuzz_tests
        if [ "${LLAMA_CANCEL_ARM64:-1}" = 0 ]; then
            log "arm64 core tests left out (LLAMA_CANCEL_ARM64=0)"
        else
            arm64_env
            if [ "$arm64_ok" = 1 ]; then arm64_tests; fi
        fi
        ;;
    bench)
        build_bench
        in_env "$(build_dir)/llama-cancel-bench" bench "$@"
        ;;
    run) in_env "$@" ;;
    *)
        sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
