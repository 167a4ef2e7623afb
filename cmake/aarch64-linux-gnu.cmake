# Cross build for arm64 (aarch64) Linux with Debian's cross compiler and multiarch libraries:
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# Needs g++-aarch64-linux-gnu, libllama-dev:arm64, libggml-dev:arm64, libgtest-dev:arm64 (their
# files land in /usr/lib/aarch64-linux-gnu beside the host's) and, to run the tests, qemu-user
# (scripts/dev.sh --arch arm64 installs them into its sid root). CTest runs each test program
# through qemu-aarch64 (cmake/qemu-aarch64.sh), on `-cpu max` unless LLAMA_CANCEL_QEMU_CPU says
# otherwise: Debian's qemu-user turns pointer authentication off in its default CPU model, and
# ggml then picks its armv9.2 CPU variant anyway and dies on its first `retaa`
# (docs/development.md#arm64).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Where the arm64 loader and libraries are (qemu's -L): "/" with Debian multiarch, where
# /lib/ld-linux-aarch64.so.1 and /usr/lib/aarch64-linux-gnu sit beside the host's own files.
set(LLAMA_CANCEL_ARM64_SYSROOT "/" CACHE PATH "Root holding the arm64 loader and libraries, for qemu -L")
find_program(LLAMA_CANCEL_QEMU_AARCH64 qemu-aarch64)
if(LLAMA_CANCEL_QEMU_AARCH64)
    # qemu-aarch64 -cpu $LLAMA_CANCEL_QEMU_CPU (default max) -L <sysroot> PROGRAM, read at test time:
    # LLAMA_CANCEL_QEMU_CPU=cortex-a76 ctest ... runs the same tests on another CPU model.
    set(CMAKE_CROSSCOMPILING_EMULATOR
        ${CMAKE_CURRENT_LIST_DIR}/qemu-aarch64.sh ${LLAMA_CANCEL_QEMU_AARCH64} ${LLAMA_CANCEL_ARM64_SYSROOT})
endif()
