#!/usr/bin/env python3
"""Cancel a long prompt prefill from Python with the llama_cancel module: the decode runs on a
worker thread (ctypes releases the GIL), the main thread stores 1 into a byte it owns, and
llama_cancel_decode returns CANCELLED with the committed ubatches in memory; the prefill then
resumes from there. Whether the store lands before or inside the decode, memory holds exactly the
committed tokens.

    PYTHONPATH=bindings/python python3 examples/ctypes_cancel.py path/to/libllama-cancel.so MODEL.gguf

The tests run it with LLAMA_CANCEL_PROBE set to tests/ffi_probe.c built: then, so that the stop
lands inside the prefill on a machine of any speed, that native probe (the decode's own abort
callback, which llama_cancel_decode consults beside the byte) holds a graph node in the third
ubatch until the store, and the example checks that the decode stopped there.
"""
import ctypes as C
import os
import sys
import threading
import time

import llama_cancel


def hold_inside_decode(byte, node):
    """The test probe, when given: (abort_callback, its data) that hold graph node `node` until the
    byte is set, and a wait for that moment. A real host has no such thing: its user presses stop."""
    path = os.environ.get("LLAMA_CANCEL_PROBE")
    if not path:
        return None, None, lambda: None
    so = C.CDLL(path)
    so.host_probe_new.restype, so.host_probe_new.argtypes = C.c_void_p, [C.c_void_p]
    so.host_probe_arm.argtypes = [C.c_void_p, C.c_int32]
    so.host_probe_wait_started.restype, so.host_probe_wait_started.argtypes = C.c_int32, [C.c_void_p, C.c_int32]
    probe = so.host_probe_new(byte.address)
    so.host_probe_arm(probe, node)

    def wait():
        assert so.host_probe_wait_started(probe, 60000), f"the prefill did not reach graph node {node} in 60 s"
    return llama_cancel.native_address(so.host_probe_abort_callback), probe, wait


lc = llama_cancel.load(sys.argv[1])      # checks the library's version and struct layouts
lc.load_backends()                       # Debian's dynamic ggml backends; the CPU one kept
model, loaded = lc.model_load(sys.argv[2])
assert model, loaded.message.decode()
ctx = lc.context(model, n_ctx=1024, n_batch=512, n_ubatch=128, n_threads=2, n_threads_batch=2)
mem = lc.llama.llama_get_memory(ctx)

n = 512
tokens = [3 + (i * 7919) % 1000 for i in range(n)]
batch, keep = lc.tokens_batch(tokens)    # `keep` holds the token array the batch points into
byte = llama_cancel.Byte()               # the host owns the byte; it must outlive the decode
probe_cb, probe, wait_inside = hold_inside_decode(byte, 300)
out = {}
worker = threading.Thread(target=lambda: out.update(r=lc.decode(ctx, batch, byte, abort_callback=probe_cb,
                                                                abort_callback_data=probe)),
                          daemon=True)          # should it hang, the assert below ends the process
worker.start()
wait_inside()
byte.set()                               # the user presses "stop": one byte store, from any thread
t_store = time.perf_counter()
worker.join(60)
assert not worker.is_alive(), "llama_cancel_decode did not return within 60 s of the store"
status, result, _ = out["r"]
print(f"status {lc.llama_cancel_status_str(status).decode()} {(time.perf_counter() - t_store) * 1e3:.1f} ms "
      f"after the store; {result.n_committed} of {n} tokens committed, "
      f"memory ends at {lc.llama.llama_memory_seq_pos_max(mem, 0)}")
assert status in (llama_cancel.CANCELLED, llama_cancel.OK)
assert lc.llama.llama_memory_seq_pos_max(mem, 0) == result.n_committed - 1
if probe:                                # held inside the prefill: stopped there, earlier ubatches kept
    assert status == llama_cancel.CANCELLED and 0 < result.n_committed < n, (status, result.n_committed)

# Resume: decode the rest from the committed position (positions continue automatically).
byte.clear()
rest, keep = lc.tokens_batch(tokens[result.n_committed:])
status, result, _ = lc.decode(ctx, rest, byte)
print(f"resumed: status {lc.llama_cancel_status_str(status).decode()}, "
      f"memory ends at {lc.llama.llama_memory_seq_pos_max(mem, 0)}")
assert status == llama_cancel.OK and lc.llama.llama_memory_seq_pos_max(mem, 0) == n - 1

lc.llama.llama_free(ctx)
lc.llama.llama_model_free(model)
