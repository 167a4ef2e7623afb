"""The part of libmtmd's C API (mtmd.h, llama.cpp 0.7.0) that prepares a multimodal prompt for
llama_cancel_mtmd_eval_chunks: bitmaps (image pixels, audio samples) and their tokenization."""
import ctypes as C


class mtmd_input_text(C.Structure):
    _fields_ = [("text", C.c_char_p), ("text_len", C.c_size_t), ("add_special", C.c_bool),
                ("parse_special", C.c_bool)]


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
    }
