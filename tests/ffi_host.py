#!/usr/bin/env python3
"""An FFI host like llamadart's, in Python ctypes: binds llama.cpp and llama-cancel by name, decodes
on a worker thread with the GIL released, and cancels by storing 1 into a ctypes byte from the main
thread. usage: ffi_host.py LIBLLAMA_CANCEL TINY_MODEL [FFI_PROBE_LIB]"""
import ctypes as C
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import llama_cancel  # noqa: E402
from llama_cancel import llama_cancel_decode_result, llama_cancel_seq_result  # noqa: E402

lib_path, model_path, probe_path = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


class ffi_probe(C.Structure):
    _fields_ = [("byte", C.POINTER(C.c_int8)), ("owner_tid", C.c_int64), ("calls", C.c_int64),
                ("off_thread", C.c_int64), ("started", C.c_int32), ("hold_at", C.c_int32)]


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


lc = llama_cancel.load(lib_path)  # llama-cancel's functions by name, llama.cpp's on lc.llama
cancel, llama = lc, lc.llama
probe_lib = C.CDLL(probe_path)

# The reader bound by its symbol's address, as Dart's `lookup<NativeFunction<...>>` gives it.
reader = C.cast(cancel.llama_cancel_abort_callback, C.c_void_p).value
probe_reader = C.cast(probe_lib.ffi_probe_abort_callback, C.c_void_p).value

lc.load_backends()

model = llama.llama_model_load_from_file(model_path.encode(), llama.llama_model_default_params())
check(bool(model), "model loads")
cp = llama.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 512, 256, 256, 2, 2
cp.op_offload = cp.offload_kqv = False
ctx = llama.llama_init_from_model(model, cp)
check(bool(ctx), "context created")
mem = llama.llama_get_memory(ctx)
tokens = (C.c_int32 * 256)(*[3 + (i * 7919) % 200 for i in range(256)])
byte = C.c_int8(0)  # the host's byte, like Dart's malloc<Int8>(1)

# 1. Exported reader by address, byte already set: llama_decode stops after its first node.
llama.llama_set_abort_callback(ctx, reader, C.addressof(byte))
byte.value = 1
ret = llama.llama_decode(ctx, llama.llama_batch_get_one(tokens, 256))
check(ret == 2, f"llama_decode with the exported reader and the byte set returns 2 (got {ret})")
check(llama.llama_memory_seq_pos_max(mem, 0) == -1, "the stopped ubatch left nothing in memory")

# 2. Worker thread decodes (ctypes releases the GIL); the main thread stores 1 mid-decode.
byte.value = 0
probe = ffi_probe(byte=C.pointer(byte), hold_at=20)  # node 20 waits for the store, then stops
llama.llama_set_abort_callback(ctx, probe_reader, C.addressof(probe))
result = {}


def worker():
    probe.owner_tid = threading.get_native_id()
    result["ret"] = llama.llama_decode(ctx, llama.llama_batch_get_one(tokens, 256))


t = threading.Thread(target=worker, daemon=True)  # a hung decode fails the check below, not the exit
t.start()
deadline = time.monotonic() + 60
while not probe.started and t.is_alive() and time.monotonic() < deadline:  # the graph runs on the worker
    time.sleep(0.001)
check(probe.started, "the decode reached reader call 20 on the worker (waited at most 60 s)")
byte.value = 1  # the cancel: one byte store from another thread (it also releases a held probe)
t.join(timeout=60)
check(not t.is_alive(), "worker returned")
check(result.get("ret") == 2, f"llama_decode on the worker returned 2 after the store (got {result.get('ret')})")
check(probe.calls == 20 and probe.off_thread == 0,
      f"all {probe.calls} reader calls ran on the worker thread ({probe.off_thread} elsewhere)")

# 3. The cancellable decode by name: byte at 0 decodes everything, byte set returns cancelled.
llama.llama_set_abort_callback(ctx, None, None)
byte.value = 0
params = cancel.llama_cancel_decode_default_params()
params.byte = C.pointer(byte)
params.n_seq = 1  # no per-sequence bytes: n_seq sizes the results array alone
res = llama_cancel_decode_result()
seqs = (llama_cancel_seq_result * 1)((-7, -7, -7))  # impossible values: each one must be written
status = cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(tokens, 64), C.byref(params), C.byref(res), seqs)
check(status == 0 and res.n_committed == 64 and seqs[0].n_committed == 64 and seqs[0].cancelled == 0,
      f"llama_cancel_decode ok, 64 committed ({status}, {seqs[0].n_committed}, {seqs[0].cancelled})")
check(seqs[0].output >= 0 and bool(llama.llama_get_logits_ith(ctx, seqs[0].output)),
      f"seqs[0].output names the last output ({seqs[0].output})")
logits = cancel.llama_cancel_get_logits_ith(ctx, C.byref(res), 63)
address = lambda ptr: C.cast(ptr, C.c_void_p).value  # noqa: E731
check(bool(logits) and address(logits) == address(llama.llama_get_logits_ith(ctx, -1)),
      "llama_cancel_get_logits_ith(batch index 63) is the last output")
byte.value = 1
status = cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(tokens, 64), C.byref(params), C.byref(res), seqs)
check(status == 1 and llama.llama_memory_seq_pos_max(mem, 0) == 63, "byte set on entry: cancelled, memory kept")
status = cancel.llama_cancel_decode(None, llama.llama_batch_get_one(tokens, 4), C.byref(params), C.byref(res), None)
check(status == -1 and b"NULL" in res.message, f"NULL context: error with message '{res.message.decode()}'")

llama.llama_free(ctx)
llama.llama_model_free(model)
print(f"{len(failures) == 0 and 'PASS' or 'FAIL'}: ffi host")
sys.exit(1 if failures else 0)
