#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs a consumer against it twice:
# with CMake's find_package(llama-cancel) and with pkg-config. usage: install_consumer.sh BUILD SRC
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
find "$prefix" -type f -o -type l | sed "s|$prefix|  <prefix>|" | sort
libdir=$(dirname "$(find "$prefix" -name 'libllama-cancel.so' | head -n 1)")

cmake -S "$src/tests/consumer" -B "$prefix/cbuild" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cbuild" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/cbuild/consumer"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -o "$prefix/consumer-pc" "$src/tests/consumer/main.c" $(pkg-config --cflags --libs llama-cancel)
LD_LIBRARY_PATH="$libdir" "$prefix/consumer-pc"
echo "install tree: CMake package and pkg-config consumers ok"
