#!/usr/bin/env python3
"""Cancel a long prompt prefill from Python: the decode runs on a worker thread (ctypes releases the
GIL), the main thread stores 1 into a byte it owns, llama_cancel_decode returns CANCELLED within a
graph node, and the prefill resumes later from the committed position.

    python3 ctypes_cancel.py path/to/libllama-cancel.so MODEL.gguf
"""
import ctypes as C
import sys
import threading
import time

from llama_ctypes import bind, llama_cancel_decode_result, load_cpu_backend

cancel, llama, ggml = bind(sys.argv[1])
load_cpu_backend(ggml)
model = llama.llama_model_load_from_file(sys.argv[2].encode(), llama.llama_model_default_params())
cp = llama.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 1024, 512, 128, 2, 2
ctx = llama.llama_init_from_model(model, cp)
mem = llama.llama_get_memory(ctx)

n = 512
tokens = (C.c_int32 * n)(*[3 + (i * 7919) % 1000 for i in range(n)])
flag = C.c_int8(0)                        # the host owns the byte; it must outlive the decode
params = cancel.llama_cancel_decode_default_params()
params.flag = C.pointer(flag)             # the library only reads it
result = llama_cancel_decode_result()
status = []

worker = threading.Thread(target=lambda: status.append(
    cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(tokens, n), C.byref(params), C.byref(result), None, 0)))
worker.start()
time.sleep(0.05)                          # ... the user presses "stop"
flag.value = 1                            # one byte store, from any thread
t_store = time.perf_counter()
worker.join()
print(f"status {status[0]} ({'cancelled' if status[0] == 1 else 'not cancelled'}) "
      f"{(time.perf_counter() - t_store) * 1e3:.1f} ms after the store; "
      f"{result.n_committed} of {n} tokens committed, memory ends at {llama.llama_memory_seq_pos_max(mem, 0)}")
assert status[0] == 1 and llama.llama_memory_seq_pos_max(mem, 0) == result.n_committed - 1

# Resume: decode the rest from the committed position (positions continue automatically).
flag.value = 0
rest = (C.c_int32 * (n - result.n_committed)).from_buffer(tokens, 4 * result.n_committed)
status = cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(rest, len(rest)), C.byref(params),
                                    C.byref(result), None, 0)
print(f"resumed: status {status}, memory ends at {llama.llama_memory_seq_pos_max(mem, 0)}")
assert status == 0 and llama.llama_memory_seq_pos_max(mem, 0) == n - 1

llama.llama_free(ctx)
llama.llama_model_free(model)
