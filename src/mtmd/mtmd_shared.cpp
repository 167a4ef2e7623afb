// The multimodal entry points that are the same with libmtmd and without it (src/mtmd/mtmd_stub.cpp):
// the defaults a host reads. One definition each, so that the two builds cannot drift apart.
#include "llama-cancel.h"

extern "C" llama_cancel_mtmd_params llama_cancel_mtmd_default_params(void) {
    llama_cancel_mtmd_params p{};
    p.logits_last = 1;
    return p;
}

extern "C" llama_cancel_tts_params llama_cancel_tts_default_params(void) {
    llama_cancel_tts_params p{};
    p.seed = 1;
    return p;
}

extern "C" llama_cancel_tts_run_params llama_cancel_tts_run_default_params(void) {
    return llama_cancel_tts_run_params{};
}
