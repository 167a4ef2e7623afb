"""Minimal ctypes bindings of llama.cpp 0.7.0 and llama-cancel, by name, as an FFI host declares
them (struct layouts copied from llama.h and llama-cancel.h by hand, like Dart FFI structs).

    cancel, llama, ggml = bind("path/to/libllama-cancel.so")
"""
import ctypes as C


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
                ("hook", C.c_void_p), ("sliced_outputs", C.c_bool)]


class llama_cancel_decode_result(C.Structure):
    _fields_ = [("status", C.c_int32), ("decode_ret", C.c_int32), ("n_committed", C.c_int32),
                ("output_base", C.c_int32), ("message", C.c_char * 256)]


def bind(cancel_path):
    """Loads libllama-cancel (which pulls in libllama and libggml) and declares the functions used."""
    cancel = C.CDLL(cancel_path, mode=C.RTLD_GLOBAL)
    llama = C.CDLL("libllama.so.0")
    ggml = C.CDLL("libggml.so.0")
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
    return cancel, llama, ggml


def load_cpu_backend(ggml):
    """Loads Debian's dynamic ggml backends and keeps the CPU one, where the byte reader runs."""
    ggml.ggml_backend_load_all()
    for name in (b"BLAS", b"Vulkan", b"RPC"):
        reg = ggml.ggml_backend_reg_by_name(name)
        if reg:
            ggml.ggml_backend_unload(reg)
