"""The part of libmtmd's C API (mtmd.h, llama.cpp 0.7.0) that prepares a multimodal prompt for
llama_cancel_mtmd_eval_chunks: bitmaps (image pixels, audio samples) and their tokenization; and
the audio-generation calls around the text-to-speech API (mtmd.h marks them experimental). The
structs are generated from mtmd.h by scripts/gen_layouts.py (_layouts.py's MTMD_LAYOUTS) and, where
the library is built with libmtmd, checked at load, size and every field's offset, against those it
was compiled with. mtmd_gen_inp's and mtmd_gen_out's state_data, the streaming state, is binary: a
c_void_p, never a C string. mtmd_gen_out's arrays are owned by the mtmd context until its next
mtmd_gen_audio_process."""
import ctypes as C

from ._layouts import MTMD_LAYOUTS
from .abi import structures

# enum mtmd_gen_audio_type
MTMD_GEN_AUDIO_TYPE_NONE, MTMD_GEN_AUDIO_TYPE_QWEN3TTS, MTMD_GEN_AUDIO_TYPE_POCKETTTS = 0, 1, 2
# enum mtmd_gen_process_type
MTMD_GEN_PROCESS_TYPE_GEN_CODE, MTMD_GEN_PROCESS_TYPE_GEN_WAV = 0, 1

_BY_NAME = structures(MTMD_LAYOUTS, __name__)
mtmd_input_text = _BY_NAME["mtmd_input_text"]
mtmd_gen_audio_info = _BY_NAME["mtmd_gen_audio_info"]
mtmd_gen_inp = _BY_NAME["mtmd_gen_inp"]
mtmd_gen_out = _BY_NAME["mtmd_gen_out"]

STRUCTS = tuple(_BY_NAME.values())


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
