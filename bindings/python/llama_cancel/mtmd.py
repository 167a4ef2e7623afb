"""The part of libmtmd's C API (mtmd.h, llama.cpp 0.7.0) that prepares a multimodal prompt for
llama_cancel_mtmd_eval_chunks: bitmaps (image pixels, audio samples) and their tokenization; and
the audio-generation calls around the text-to-speech API (mtmd.h marks them experimental; the
library does not know these layouts, so they are not checked at load)."""
import ctypes as C

# enum mtmd_gen_audio_type
MTMD_GEN_AUDIO_TYPE_NONE, MTMD_GEN_AUDIO_TYPE_QWEN3TTS, MTMD_GEN_AUDIO_TYPE_POCKETTTS = 0, 1, 2
# enum mtmd_gen_process_type
MTMD_GEN_PROCESS_TYPE_GEN_CODE, MTMD_GEN_PROCESS_TYPE_GEN_WAV = 0, 1


class mtmd_input_text(C.Structure):
    _fields_ = [("text", C.c_char_p), ("text_len", C.c_size_t), ("add_special", C.c_bool),
                ("parse_special", C.c_bool)]


class mtmd_gen_audio_info(C.Structure):
    _fields_ = [("type", C.c_int), ("sample_rate", C.c_int32), ("model_variant", C.c_char_p)]


class mtmd_gen_inp(C.Structure):
    # state_data: the streaming state, binary (a c_void_p, never a C string)
    _fields_ = [("type", C.c_int), ("code0", C.c_int32), ("embd", C.POINTER(C.c_float)), ("top_k", C.c_int32),
                ("top_p", C.c_float), ("seed", C.c_uint32), ("temp", C.c_float), ("codes", C.POINTER(C.c_int32)),
                ("n_codes", C.c_size_t), ("feats", C.POINTER(C.c_float)), ("n_feats", C.c_size_t),
                ("state_data", C.c_void_p), ("state_size", C.c_size_t)]


class mtmd_gen_out(C.Structure):
    # owned by the mtmd context until its next mtmd_gen_audio_process
    _fields_ = [("codes", C.POINTER(C.c_int32)), ("n_codes", C.c_size_t), ("feats", C.POINTER(C.c_float)),
                ("n_feats", C.c_size_t), ("embd", C.POINTER(C.c_float)), ("is_eos", C.c_bool),
                ("audio", C.POINTER(C.c_float)), ("n_samples", C.c_size_t), ("state_data", C.c_void_p),
                ("state_size", C.c_size_t)]


def prototypes():
    P, I32, U32, SZ = C.c_void_p, C.c_int32, C.c_uint32, C.c_size_t
    return {
        "mtmd_default_marker": (C.c_char_p, []),
        "mtmd_free": (None, [P]),
        "mtmd_support_vision": (C.c_bool, [P]),
        "mtmd_support_audio": (C.c_bool, [P]),
        "mtmd_bitmap_init": (P, [U32, U32, C.POINTER(C.c_ubyte)]),
        "mtmd_bitmap_init_from_audio": (P, [SZ, C.POINTER(C.c_float)]),
        "mtmd_bitmap_free": (None, [P]),
        "mtmd_input_chunks_init": (P, []),
        "mtmd_input_chunks_size": (SZ, [P]),
        "mtmd_input_chunks_free": (None, [P]),
        "mtmd_tokenize": (I32, [P, P, C.POINTER(mtmd_input_text), C.POINTER(P), SZ]),
        "mtmd_gen_audio_get_info": (mtmd_gen_audio_info, [P]),
        "mtmd_gen_inp_default": (mtmd_gen_inp, [P]),
        "mtmd_gen_audio_process": (I32, [P, C.POINTER(mtmd_gen_inp), C.POINTER(mtmd_gen_out)]),
    }
