"""The part of llama.cpp's C API (llama.h, 0.7.0) a host needs around llama-cancel: model and context
parameters, batches, decode, memory, logits, vocabulary. The three structs are generated from llama.h
by scripts/gen_layouts.py (_layouts.py's LLAMA_LAYOUTS) and checked at load, size and every field's
offset, against those the loaded llama-cancel was compiled with (llama_cancel_struct_size,
llama_cancel_field_offset)."""
import ctypes as C

from ._layouts import LLAMA_LAYOUTS
from .abi import structures

_BY_NAME = structures(LLAMA_LAYOUTS, __name__)
llama_batch = _BY_NAME["llama_batch"]
llama_model_params = _BY_NAME["llama_model_params"]
llama_context_params = _BY_NAME["llama_context_params"]

STRUCTS = tuple(_BY_NAME.values())


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
