#!/usr/bin/env python3
"""An FFI host like llamadart's, in Python ctypes: binds llama.cpp and llama-cancel by name, decodes
on a worker thread with the GIL released, and cancels by storing 1 into a ctypes byte from the main
thread. usage: ffi_host.py LIBLLAMA_CANCEL TINY_MODEL [FFI_PROBE_LIB]"""
import ctypes as C
import os
import sys
import threading

lib_path, model_path, probe_path = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


class llama_batch(C.Structure):
    _fields_ = [("n_tokens", C.c_int32), ("token", C.POINTER(C.c_int32)), ("embd", C.POINTER(C.c_float)),
                ("pos", C.POINTER(C.c_int32)), ("n_seq_id", C.POINTER(C.c_int32)),
                ("seq_id", C.POINTER(C.POINTER(C.c_int32))), ("logits", C.POINTER(C.c_int8))]


class llama_model_params(C.Structure):
    _fields_ = [("devices", C.c_void_p), ("tensor_buft_overrides", C.c_void_p), ("n_gpu_layers", C.c_int32),
                ("split_mode", C.c_int), ("load_mode", C.c_int), ("lazy_mode", C.c_int), ("main_gpu", C.c_int32),
                ("tensor_split", C.c_void_p), ("progress_callback", C.c_void_p),
                ("progress_callback_user_data", C.c_void_p), ("kv_overrides", C.c_void_p),
                ("vocab_only", C.c_bool), ("check_tensors", C.c_bool), ("use_extra_bufts", C.c_bool),
                ("no_host", C.c_bool), ("no_alloc", C.c_bool), ("load_mtp", C.c_bool)]


class llama_context_params(C.Structure):
    _fields_ = [(n, C.c_uint32) for n in ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_rs_seq", "n_outputs_max",
                                          "n_outputs_max_per_seq")] + \
               [("n_threads", C.c_int32), ("n_threads_batch", C.c_int32)] + \
               [(n, C.c_int) for n in ("ctx_type", "rope_scaling_type", "pooling_type", "attention_type",
                                       "flash_attn_type")] + \
               [(n, C.c_float) for n in ("rope_freq_base", "rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor",
                                         "yarn_beta_fast", "yarn_beta_slow")] + \
               [("yarn_orig_ctx", C.c_uint32), ("defrag_thold", C.c_float), ("cb_eval", C.c_void_p),
                ("cb_eval_user_data", C.c_void_p), ("type_k", C.c_int), ("type_v", C.c_int),
                ("moe_cache_size", C.c_size_t), ("abort_callback", C.c_void_p), ("abort_callback_data", C.c_void_p)] + \
               [(n, C.c_bool) for n in ("embeddings", "offload_kqv", "no_perf", "op_offload", "swa_full",
                                        "kv_unified")] + \
               [("samplers", C.c_void_p), ("n_samplers", C.c_size_t), ("ctx_other", C.c_void_p)]


class llama_cancel_decode_params(C.Structure):
    _fields_ = [("flag", C.POINTER(C.c_int8)), ("abort_callback", C.c_void_p), ("abort_callback_data", C.c_void_p),
                ("hook", C.c_void_p)]


class llama_cancel_decode_result(C.Structure):
    _fields_ = [("status", C.c_int32), ("decode_ret", C.c_int32), ("n_committed", C.c_int32),
                ("message", C.c_char * 256)]


class ffi_probe(C.Structure):
    _fields_ = [("flag", C.POINTER(C.c_int8)), ("owner_tid", C.c_int64), ("calls", C.c_int64),
                ("off_thread", C.c_int64), ("started", C.c_int32), ("hold_at", C.c_int32)]


cancel = C.CDLL(lib_path, mode=C.RTLD_GLOBAL)  # pulls in libllama and libggml as its dependencies
llama = C.CDLL("libllama.so.0")
ggml = C.CDLL("libggml.so.0")
probe_lib = C.CDLL(probe_path)

ggml.ggml_backend_load_all.restype = None
ggml.ggml_backend_reg_by_name.restype = C.c_void_p
ggml.ggml_backend_reg_by_name.argtypes = [C.c_char_p]
ggml.ggml_backend_unload.argtypes = [C.c_void_p]
llama.llama_model_default_params.restype = llama_model_params
llama.llama_context_default_params.restype = llama_context_params
llama.llama_model_load_from_file.restype = C.c_void_p
llama.llama_model_load_from_file.argtypes = [C.c_char_p, llama_model_params]
llama.llama_init_from_model.restype = C.c_void_p
llama.llama_init_from_model.argtypes = [C.c_void_p, llama_context_params]
llama.llama_set_abort_callback.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
llama.llama_batch_get_one.restype = llama_batch
llama.llama_batch_get_one.argtypes = [C.POINTER(C.c_int32), C.c_int32]
llama.llama_decode.restype = C.c_int32
llama.llama_decode.argtypes = [C.c_void_p, llama_batch]
llama.llama_get_memory.restype = C.c_void_p
llama.llama_get_memory.argtypes = [C.c_void_p]
llama.llama_memory_seq_pos_max.restype = C.c_int32
llama.llama_memory_seq_pos_max.argtypes = [C.c_void_p, C.c_int32]
llama.llama_memory_clear.argtypes = [C.c_void_p, C.c_bool]
llama.llama_free.argtypes = [C.c_void_p]
llama.llama_model_free.argtypes = [C.c_void_p]
cancel.llama_cancel_abort_callback.restype = C.c_bool
cancel.llama_cancel_abort_callback.argtypes = [C.c_void_p]
cancel.llama_cancel_decode_default_params.restype = llama_cancel_decode_params
cancel.llama_cancel_decode.restype = C.c_int32
cancel.llama_cancel_decode.argtypes = [C.c_void_p, llama_batch, C.POINTER(llama_cancel_decode_params),
                                       C.POINTER(llama_cancel_decode_result), C.POINTER(C.c_int32), C.c_int32]

# The reader bound by its symbol's address, as Dart's `lookup<NativeFunction<...>>` gives it.
reader = C.cast(cancel.llama_cancel_abort_callback, C.c_void_p).value
probe_reader = C.cast(probe_lib.ffi_probe_abort_callback, C.c_void_p).value

ggml.ggml_backend_load_all()
for name in (b"BLAS", b"Vulkan", b"RPC"):  # keep the CPU backend only: that is where the reader runs
    reg = ggml.ggml_backend_reg_by_name(name)
    if reg:
        ggml.ggml_backend_unload(reg)

model = llama.llama_model_load_from_file(model_path.encode(), llama.llama_model_default_params())
check(bool(model), "model loads")
cp = llama.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 512, 256, 256, 2, 2
cp.op_offload = cp.offload_kqv = False
ctx = llama.llama_init_from_model(model, cp)
check(bool(ctx), "context created")
mem = llama.llama_get_memory(ctx)
tokens = (C.c_int32 * 256)(*[3 + (i * 7919) % 200 for i in range(256)])
flag = C.c_int8(0)  # the host's byte, like Dart's malloc<Int8>(1)

# 1. Exported reader by address, byte already set: llama_decode stops after its first node.
llama.llama_set_abort_callback(ctx, reader, C.addressof(flag))
flag.value = 1
ret = llama.llama_decode(ctx, llama.llama_batch_get_one(tokens, 256))
check(ret == 2, f"llama_decode with the exported reader and the byte set returns 2 (got {ret})")
check(llama.llama_memory_seq_pos_max(mem, 0) == -1, "the stopped ubatch left nothing in memory")

# 2. Worker thread decodes (ctypes releases the GIL); the main thread stores 1 mid-decode.
flag.value = 0
probe = ffi_probe(flag=C.pointer(flag), hold_at=20)  # node 20 waits for the store, then stops
llama.llama_set_abort_callback(ctx, probe_reader, C.addressof(probe))
result = {}


def worker():
    probe.owner_tid = threading.get_native_id()
    result["ret"] = llama.llama_decode(ctx, llama.llama_batch_get_one(tokens, 256))


t = threading.Thread(target=worker)
t.start()
while not probe.started:  # the graph is running on the worker
    pass
flag.value = 1  # the cancel: one byte store from another thread
t.join(timeout=60)
check(not t.is_alive(), "worker returned")
check(result.get("ret") == 2, f"llama_decode on the worker returned 2 after the store (got {result.get('ret')})")
check(probe.calls == 20 and probe.off_thread == 0,
      f"all {probe.calls} reader calls ran on the worker thread ({probe.off_thread} elsewhere)")

# 3. The cancellable decode by name: byte at 0 decodes everything, byte set returns cancelled.
llama.llama_set_abort_callback(ctx, None, None)
flag.value = 0
params = cancel.llama_cancel_decode_default_params()
params.flag = C.pointer(flag)
res = llama_cancel_decode_result()
committed = (C.c_int32 * 1)()
status = cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(tokens, 64), C.byref(params), C.byref(res),
                                    committed, 1)
check(status == 0 and res.n_committed == 64 and committed[0] == 64, f"llama_cancel_decode ok, 64 committed ({status})")
flag.value = 1
status = cancel.llama_cancel_decode(ctx, llama.llama_batch_get_one(tokens, 64), C.byref(params), C.byref(res),
                                    committed, 1)
check(status == 1 and llama.llama_memory_seq_pos_max(mem, 0) == 63, "byte set on entry: cancelled, memory kept")
status = cancel.llama_cancel_decode(None, llama.llama_batch_get_one(tokens, 4), C.byref(params), C.byref(res),
                                    None, 0)
check(status == -1 and b"NULL" in res.message, f"NULL context: error with message '{res.message.decode()}'")

llama.llama_free(ctx)
llama.llama_model_free(model)
print(f"{len(failures) == 0 and 'PASS' or 'FAIL'}: ffi host")
sys.exit(1 if failures else 0)
