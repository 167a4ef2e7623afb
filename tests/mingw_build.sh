#!/usr/bin/env bash
# The library cross-built for 64-bit Windows with mingw-w64, warnings as errors: tests/consumer_mingw
# adds this source tree to a Windows host project whose llama.cpp targets are import libraries made
# here from the C functions Debian's libllama, libggml-base, libggml and libmtmd export (a .def file
# each, x86_64-w64-mingw32-dlltool). So the link proves that every llama.cpp function the library
# calls exists upstream under that name; it cannot prove the DLL runs (nothing here runs Windows
# code). Two builds: (1) shared with mtmd: libllama-cancel.dll exports exactly the header's functions;
# (2) static without libmtmd (the stub), linked whole into the host's one DLL, which then exports
# every one of them too.
# usage: mingw_build.sh SRC WORKDIR INCLUDE_DIRS LIBLLAMA LIBGGML_BASE LIBGGML LIBMTMD
# (INCLUDE_DIRS: llama.cpp's and ggml's header folders, ';'-separated; LIBMTMD "": both without mtmd)
set -euo pipefail
src=$1 work=$2 headers=$3
declare -A so=([llama]=$4 [ggml-base]=$5 [ggml]=$6)
with_mtmd=OFF
if [ -n "${7:-}" ]; then
    so[mtmd]=$7
    with_mtmd=ON
fi
triple=x86_64-w64-mingw32
rm -rf "$work"
mkdir -p "$work/import/include"

# llama.cpp's headers alone: the build machine's /usr/include would bring glibc's headers along.
IFS=';' read -r -a header_dirs <<<"$headers"
for dir in "${header_dirs[@]}"; do
    for h in "$dir"/llama.h "$dir"/ggml*.h "$dir"/gguf.h "$dir"/mtmd*.h; do
        if [ -f "$h" ]; then ln -sf "$h" "$work/import/include/"; fi
    done
done

# An import library per llama.cpp library, from the functions (and data) its ELF build exports.
for lib in "${!so[@]}"; do
    {
        echo "LIBRARY $lib.dll"
        echo "EXPORTS"
        nm -D --defined-only "${so[$lib]}" | awk '$3 ~ /^[A-Za-z_][A-Za-z0-9_]*$/ {
            if ($2 == "T" || $2 == "W" || $2 == "i") print "    " $3
            else if ($2 == "D" || $2 == "B" || $2 == "R") print "    " $3 " DATA" }'
    } >"$work/import/$lib.def"
    "$triple-dlltool" -d "$work/import/$lib.def" -l "$work/import/lib$lib.dll.a" -D "$lib.dll"
done

flags="-Wall -Wextra -Wpedantic -Werror"
build() { # NAME CMAKE_ARGS...
    local name=$1 dir="$work/$1"
    shift
    cmake -S "$src/tests/consumer_mingw" -B "$dir" -G Ninja --no-warn-unused-cli \
        -DCMAKE_TOOLCHAIN_FILE="$src/cmake/mingw-w64-x86_64.cmake" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--no-undefined \
        -DLLAMA_CANCEL_SOURCE="$src" -DHOST_IMPORT_DIR="$work/import" "$@" >"$dir.log" 2>&1 ||
        { cat "$dir.log"; exit 1; }
    cmake --build "$dir" -j1 >>"$dir.log" 2>&1 || { tail -n 60 "$dir.log"; exit 1; }
    echo "$name: built with $triple-g++ $flags"
}
failed=0
exports() { # DLL EXTRA_RE: checked, and the next build goes on whatever the answer
    OBJDUMP=$triple-objdump python3 "$src/tests/api_names.py" "$src/include/llama-cancel.h" pe "$@" || failed=1
}
imports() { # DLL: the DLLs it loads, on one line
    "$triple-objdump" -p "$1" | sed -n 's/^\s*DLL Name: //p' | sort | tr '\n' ' '
}

build shared -DLLAMA_CANCEL_STATIC=OFF -DHOST_WITH_MTMD=$with_mtmd -DLLAMA_CANCEL_WITH_MTMD=$with_mtmd
dll="$work/shared/llama-cancel/libllama-cancel.dll" # mingw's "lib" prefix (MSVC: llama-cancel.dll)
echo "libllama-cancel.dll imports: $(imports "$dll")"
exports "$dll"

build static -DLLAMA_CANCEL_STATIC=ON -DHOST_WITH_MTMD=OFF -DLLAMA_CANCEL_WITH_MTMD=OFF
# The host's own function is its business (host.c does not export it); nothing of llama-cancel's
# insides may show.
exports "$work/static/libhost.dll" '^host_'
if [ "$failed" != 0 ]; then
    exit 1
fi
echo "mingw-w64 builds (libllama-cancel.dll, mtmd $with_mtmd; static inside the host's DLL, without libmtmd): ok"
