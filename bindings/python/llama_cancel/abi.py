"""The C ABI of llama-cancel.h, as ctypes declarations: constants, structs and every function's
argument and result types. The layouts are checked against the loaded library at load time
(llama_cancel_struct_size, llama_cancel_field_offset), so a change in the header shows up as
AbiMismatch rather than as corrupted memory."""
import ctypes as C
import re

from ._layouts import LAYOUTS

# The header version this module was written against (LLAMA_CANCEL_VERSION_MAJOR/MINOR/PATCH).
VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH = 2, 0, 0

# enum llama_cancel_status
OK, CANCELLED, ERROR = 0, 1, -1
# enum llama_cancel_stop_reason
STOP_LENGTH, STOP_EOG, STOP_CANCELLED, STOP_ERROR = 0, 1, 2, 3
# enum llama_cancel_reach: where a decode's byte was read (llama_cancel_decode_result.reach). GRAPH:
# inside every graph (a llama-cancel eval callback ran in it: every backend); CPU: the abort
# callback alone (another device's split ran to its end: bind a hook); CALLS: between llama_decode calls.
REACH_GRAPH, REACH_CPU, REACH_CALLS = 0, 1, 2
REACH_NAMES = ("graph", "cpu", "calls")

HOOK_DEFAULT_INTERVAL_MS = 10.0

# bits of llama_cancel_mtmd_params.options (LLAMA_CANCEL_MTMD_*)
MTMD_BATCH_ENCODE = 1

# enum llama_cancel_tts_step: the text-to-speech step that stopped (CANCELLED) or failed (ERROR)
(TTS_STEP_NONE, TTS_STEP_VOICE, TTS_STEP_PROMPT, TTS_STEP_GEN_CODE, TTS_STEP_BACKBONE, TTS_STEP_GEN_WAV,
 TTS_STEP_BETWEEN) = range(7)
TTS_STEP_NAMES = ("none", "voice", "prompt", "gen_code", "backbone", "gen_wav", "between")

llama_token = C.c_int32
llama_pos = C.c_int32
llama_seq_id = C.c_int32

# bool (*)(void *): ggml_abort_callback
abort_callback_t = C.CFUNCTYPE(C.c_bool, C.c_void_p)
# bool (*)(struct ggml_tensor *, bool ask, void *): ggml_backend_sched_eval_callback
eval_callback_t = C.CFUNCTYPE(C.c_bool, C.c_void_p, C.c_bool, C.c_void_p)
# bool (*)(llama_token, void *): llama_cancel_token_callback
token_callback_t = C.CFUNCTYPE(C.c_bool, llama_token, C.c_void_p)
# bool (*)(int32_t n_frames, int64_t n_samples, void *): llama_cancel_tts_frame_callback
tts_frame_callback_t = C.CFUNCTYPE(C.c_bool, C.c_int32, C.c_int64, C.c_void_p)

_byte = C.POINTER(C.c_int8)

# The ctypes type of each field kind of _layouts.py (generated from the headers by
# scripts/gen_layouts.py; "char[N]" is a char array). Pointer fields the module passes through are
# c_void_p: abort_callback, chain, on_token, on_frame take native function addresses only
# (native_address(); a Python callback would run on ggml's thread); voice, sampler and the hooks are
# handles. `str` fields (llama_cancel_tts_params' text and lang) are UTF-8 bytes, copied at init.
# llama.h's and mtmd.h's structs add C enums (`enum`: an int), size_t (`usize`) and the arrays a
# host fills or reads (a llama_batch's tokens, mtmd_gen_out's codes...) as typed pointers.
_CTYPES = {
    "i32": C.c_int32, "u32": C.c_uint32, "i64": C.c_int64, "u64": C.c_uint64,
    "f32": C.c_float, "f64": C.c_double, "bool": C.c_bool,
    "enum": C.c_int, "usize": C.c_size_t,
    "ptr": C.c_void_p, "str": C.c_char_p,
    "byte": _byte,               # const int8_t *: a Byte's .ptr
    "bytes": C.POINTER(_byte),   # const int8_t * const *: an array of them (seq_bytes)
    "i8*": C.POINTER(C.c_int8), "i32*": C.POINTER(C.c_int32), "f32*": C.POINTER(C.c_float),
    "i32**": C.POINTER(C.POINTER(C.c_int32)),
}


def _ctype(kind):
    array = re.fullmatch(r"char\[(\d+)\]", kind)
    if array:
        return C.c_char * int(array.group(1))
    if kind not in _CTYPES:
        raise TypeError(f"llama_cancel/_layouts.py has field kind {kind!r}, which abi.py's _CTYPES does not map")
    return _CTYPES[kind]


def structures(layouts, module):
    """{name: ctypes Structure} of generated `layouts` (struct -> [(field, kind)]), in their order."""
    return {name: type(name, (C.Structure,), {"_fields_": [(f, _ctype(kind)) for f, kind in fields],
                                              "__module__": module})
            for name, fields in layouts.items()}


# Every struct of llama-cancel.h, in the header's order: those the generated layouts list (one added
# to the header comes with no code change here), checked field by field at load.
_BY_NAME = structures(LAYOUTS, __name__)
STRUCTS = tuple(_BY_NAME.values())

llama_cancel_hook_params = _BY_NAME["llama_cancel_hook_params"]
llama_cancel_hook_stats = _BY_NAME["llama_cancel_hook_stats"]
llama_cancel_snapshot_stats = _BY_NAME["llama_cancel_snapshot_stats"]
llama_cancel_decode_params = _BY_NAME["llama_cancel_decode_params"]
llama_cancel_seq_result = _BY_NAME["llama_cancel_seq_result"]
llama_cancel_decode_result = _BY_NAME["llama_cancel_decode_result"]
llama_cancel_generate_params = _BY_NAME["llama_cancel_generate_params"]
llama_cancel_generate_result = _BY_NAME["llama_cancel_generate_result"]
llama_cancel_load_result = _BY_NAME["llama_cancel_load_result"]
llama_cancel_mtmd_params = _BY_NAME["llama_cancel_mtmd_params"]
llama_cancel_mtmd_result = _BY_NAME["llama_cancel_mtmd_result"]
llama_cancel_tts_params = _BY_NAME["llama_cancel_tts_params"]
llama_cancel_tts_run_params = _BY_NAME["llama_cancel_tts_run_params"]
llama_cancel_tts_result = _BY_NAME["llama_cancel_tts_result"]
llama_cancel_gen_audio_params = _BY_NAME["llama_cancel_gen_audio_params"]
llama_cancel_gen_audio_result = _BY_NAME["llama_cancel_gen_audio_result"]
llama_cancel_embed_params = _BY_NAME["llama_cancel_embed_params"]
llama_cancel_embed_result = _BY_NAME["llama_cancel_embed_result"]


def prototypes(llama):
    """name -> (restype, argtypes) of every function of llama-cancel.h; `llama` is the module with
    llama.h's structs (llama_batch, llama_model_params, llama_context_params)."""
    P, I32, B, F, V = C.c_void_p, C.c_int32, C.c_bool, C.POINTER(C.c_float), None
    decode_result = C.POINTER(llama_cancel_decode_result)
    tts_run, tts_result = C.POINTER(llama_cancel_tts_run_params), C.POINTER(llama_cancel_tts_result)
    return {
        "llama_cancel_version": (I32, []),
        "llama_cancel_struct_size": (C.c_int64, [C.c_char_p]),
        "llama_cancel_field_offset": (C.c_int64, [C.c_char_p, C.c_char_p]),
        "llama_cancel_status_str": (C.c_char_p, [I32]),
        "llama_cancel_has_mtmd": (B, []),
        "llama_cancel_abort_callback": (B, [P]),
        "llama_cancel_eval_callback": (B, [P, B, P]),
        "llama_cancel_hook_default_params": (llama_cancel_hook_params, []),
        "llama_cancel_hook_init": (P, [C.POINTER(llama_cancel_hook_params)]),
        "llama_cancel_hook_free": (V, [P]),
        "llama_cancel_hook_bind": (B, [P, C.POINTER(llama.llama_context_params)]),
        "llama_cancel_hook_eval_callback": (B, [P, B, P]),
        "llama_cancel_hook_set_byte": (V, [P, _byte]),
        "llama_cancel_hook_stopped": (B, [P]),
        "llama_cancel_hook_reset": (V, [P]),
        "llama_cancel_hook_get_stats": (llama_cancel_hook_stats, [P]),
        "llama_cancel_hook_get_snapshot_stats": (llama_cancel_snapshot_stats, [P]),
        "llama_cancel_decode_default_params": (llama_cancel_decode_params, []),
        "llama_cancel_decode": (I32, [P, llama.llama_batch, C.POINTER(llama_cancel_decode_params), decode_result,
                                      C.POINTER(llama_cancel_seq_result)]),
        "llama_cancel_get_logits_ith": (F, [P, decode_result, I32]),
        "llama_cancel_get_embeddings_ith": (F, [P, decode_result, I32]),
        "llama_cancel_encode": (I32, [P, llama.llama_batch, C.POINTER(llama_cancel_decode_params), decode_result]),
        "llama_cancel_process": (I32, [P, I32, P, C.POINTER(llama_cancel_decode_params), decode_result]),
        "llama_cancel_embed_default_params": (llama_cancel_embed_params, []),
        "llama_cancel_embed_n_out": (I32, [P]),
        "llama_cancel_embed": (I32, [P, llama.llama_batch, C.POINTER(llama_cancel_embed_params), F, C.c_int64,
                                     C.POINTER(llama_cancel_embed_result)]),
        "llama_cancel_generate_default_params": (llama_cancel_generate_params, []),
        "llama_cancel_generate": (I32, [P, C.POINTER(llama_token), I32, C.POINTER(llama_cancel_generate_params),
                                        C.POINTER(llama_token), I32, C.POINTER(llama_cancel_generate_result)]),
        "llama_cancel_stop_reason_str": (C.c_char_p, [I32]),
        "llama_cancel_model_load": (P, [C.c_char_p, llama.llama_model_params, _byte,
                                        C.POINTER(llama_cancel_load_result)]),
        "llama_cancel_mtmd_init_from_file": (P, [C.c_char_p, P, P, I32, B, _byte, C.POINTER(llama_cancel_load_result)]),
        "llama_cancel_mtmd_default_params": (llama_cancel_mtmd_params, []),
        "llama_cancel_mtmd_eval_chunks": (I32, [P, P, P, I32, llama_pos, C.POINTER(llama_cancel_mtmd_params),
                                                C.POINTER(llama_cancel_mtmd_result)]),
        "llama_cancel_tts_default_params": (llama_cancel_tts_params, []),
        "llama_cancel_tts_run_default_params": (llama_cancel_tts_run_params, []),
        "llama_cancel_tts_init": (P, [P, P, C.POINTER(llama_cancel_tts_params), tts_result]),
        "llama_cancel_tts_free": (V, [P]),
        "llama_cancel_tts_generate": (I32, [P, tts_run, tts_result]),
        "llama_cancel_tts_flush": (I32, [P, tts_run, tts_result]),
        "llama_cancel_tts_get_pcm": (F, [P, C.POINTER(C.c_int64)]),
        # inp, out: mtmd.h's struct mtmd_gen_inp and mtmd_gen_out (mtmd.py declares them)
        "llama_cancel_mtmd_gen_audio_process": (I32, [P, P, P, C.POINTER(llama_cancel_gen_audio_params),
                                                      C.POINTER(llama_cancel_gen_audio_result)]),
    }
