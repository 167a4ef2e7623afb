#!/bin/sh
# CTest's emulator in the arm64 cross build (cmake/aarch64-linux-gnu.cmake): runs an arm64 program
# with qemu-user on the CPU model LLAMA_CANCEL_QEMU_CPU names (default max, see the toolchain file).
# usage: qemu-aarch64.sh QEMU SYSROOT PROGRAM [ARGS...]
#
# ggml's OpenMP workers wait passively: spinning is emulated code too, and on 2 shared cores it
# more than doubles a test's time (test_memory_llama on -cpu max: 16 s spinning, 7 s passive).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
qemu=$1
sysroot=$2
shift 2
exec "$qemu" -cpu "${LLAMA_CANCEL_QEMU_CPU:-max}" -L "$sysroot" "$@"
