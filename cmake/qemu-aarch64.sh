#!/bin/sh
# CTest's emulator in the arm64 cross build (cmake/aarch64-linux-gnu.cmake): runs an arm64 program
# with qemu-user on the CPU model LLAMA_CANCEL_QEMU_CPU names (default max, see the toolchain file).
# usage: qemu-aarch64.sh QEMU SYSROOT PROGRAM [ARGS...]
qemu=$1
sysroot=$2
shift 2
exec "$qemu" -cpu "${LLAMA_CANCEL_QEMU_CPU:-max}" -L "$sysroot" "$@"
