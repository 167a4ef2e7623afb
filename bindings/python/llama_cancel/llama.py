"""The part of llama.cpp's C API (llama.h, 0.7.0) a host needs around llama-cancel: model and context
parameters, batches, decode, memory, logits, vocabulary. The sizes of the three structs are checked
at load against those the loaded llama-cancel was compiled with (llama_cancel_struct_size)."""
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


STRUCTS = (llama_batch, llama_model_params, llama_context_params)


def prototypes():
    """name -> (restype, argtypes) of the llama.h functions this module declares."""
    P, I32, U32, B, V = C.c_void_p, C.c_int32, C.c_uint32, C.c_bool, None
    return {
        "llama_backend_init": (V, []),
        "llama_model_default_params": (llama_model_params, []),
        "llama_context_default_params": (llama_context_params, []),
        "llama_model_load_from_file": (P, [C.c_char_p, llama_model_params]),
        "llama_model_free": (V, [P]),
        "llama_init_from_model": (P, [P, llama_context_params]),
        "llama_free": (V, [P]),
        "llama_n_ctx": (U32, [P]),
        "llama_n_batch": (U32, [P]),
        "llama_n_ubatch": (U32, [P]),
        "llama_get_model": (P, [P]),
        "llama_get_memory": (P, [P]),
        "llama_model_get_vocab": (P, [P]),
        "llama_model_n_embd": (I32, [P]),
        "llama_model_is_recurrent": (B, [P]),
        "llama_model_is_hybrid": (B, [P]),
        "llama_vocab_n_tokens": (I32, [P]),
        "llama_tokenize": (I32, [P, C.c_char_p, I32, C.POINTER(C.c_int32), I32, B, B]),
        "llama_set_abort_callback": (V, [P, P, P]),
        "llama_batch_get_one": (llama_batch, [C.POINTER(C.c_int32), I32]),
        "llama_batch_init": (llama_batch, [I32, I32, I32]),
        "llama_batch_free": (V, [llama_batch]),
        "llama_decode": (I32, [P, llama_batch]),
        "llama_get_logits_ith": (C.POINTER(C.c_float), [P, I32]),
        "llama_get_embeddings_ith": (C.POINTER(C.c_float), [P, I32]),
        "llama_get_embeddings_seq": (C.POINTER(C.c_float), [P, I32]),
        "llama_model_has_encoder": (B, [P]),
        "llama_model_has_decoder": (B, [P]),
        "llama_encode": (I32, [P, llama_batch]),
        "llama_memory_clear": (V, [P, B]),
        "llama_memory_seq_rm": (B, [P, I32, I32, I32]),
        "llama_memory_seq_pos_min": (I32, [P, I32]),
        "llama_memory_seq_pos_max": (I32, [P, I32]),
    }


def ggml_prototypes():
    """The ggml-backend.h functions that load Debian's dynamically built backends."""
    P = C.c_void_p
    return {
        "ggml_backend_load_all": (None, []),
        "ggml_backend_reg_by_name": (P, [C.c_char_p]),
        "ggml_backend_unload": (None, [P]),
    }
