// The multimodal functions of a library built without libmtmd: every one of them exists, so that a
// host binding the full header links and loads, and answers at run time with a clear error.
#include "llama-cancel.h"

#include "abi/status.h"

#include <cstring>

namespace {

const char * const no_mtmd = "built without libmtmd";

} // namespace

extern "C" int32_t llama_cancel_mtmd_eval_chunks(mtmd_context *, llama_context *, const mtmd_input_chunks *,
                                                 int32_t first_chunk, llama_pos n_past, const llama_cancel_mtmd_params *,
                                                 llama_cancel_mtmd_result * result) {
    // As for any error: memory holds chunks [first_chunk, n_chunks_done), here none.
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
        result->n_chunks_done = first_chunk;
        result->n_past        = n_past;
    }
    llama_cancel::set_status(result, LLAMA_CANCEL_ERROR, "%s", no_mtmd);
    return LLAMA_CANCEL_ERROR;
}

extern "C" mtmd_context * llama_cancel_mtmd_init_from_file(const char *, const llama_model *, llama_cancel_hook *,
                                                           int32_t, bool, const int8_t *,
                                                           llama_cancel_load_result * result) {
    llama_cancel::set_status(result, LLAMA_CANCEL_ERROR, "%s", no_mtmd);
    return nullptr;
}

namespace {

int32_t tts_error(llama_cancel_tts_result * result) {
    if (result != nullptr) {
        *result = llama_cancel_tts_result{};
    }
    return llama_cancel::fail(result, "%s", no_mtmd);
}

} // namespace

extern "C" llama_cancel_tts * llama_cancel_tts_init(llama_context *, mtmd_context *, const llama_cancel_tts_params *,
                                                    llama_cancel_tts_result * result) {
    tts_error(result);
    return nullptr;
}

extern "C" void llama_cancel_tts_free(llama_cancel_tts *) {}

extern "C" int32_t llama_cancel_tts_generate(llama_cancel_tts *, const llama_cancel_tts_run_params *,
                                             llama_cancel_tts_result * result) {
    return tts_error(result);
}

extern "C" int32_t llama_cancel_tts_flush(llama_cancel_tts *, const llama_cancel_tts_run_params *,
                                          llama_cancel_tts_result * result) {
    return tts_error(result);
}

extern "C" const float * llama_cancel_tts_get_pcm(const llama_cancel_tts *, int64_t * n_samples) {
    if (n_samples != nullptr) {
        *n_samples = 0;
    }
    return nullptr;
}

extern "C" int32_t llama_cancel_mtmd_gen_audio_process(mtmd_context *, const mtmd_gen_inp *, mtmd_gen_out *,
                                                       const llama_cancel_gen_audio_params *,
                                                       llama_cancel_gen_audio_result * result) {
    if (result != nullptr) {
        *result = llama_cancel_gen_audio_result{};
    }
    return llama_cancel::fail(result, "%s", no_mtmd);
}
