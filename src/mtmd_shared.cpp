// The multimodal entry points that are the same with libmtmd and without it (src/mtmd_stub.cpp):
// the defaults a host reads, and the plain forms of the _ext calls. One definition each, so the
// two builds cannot drift apart.
#include "llama-cancel.h"

extern "C" llama_cancel_mtmd_params llama_cancel_mtmd_default_params(void) {
    llama_cancel_mtmd_params p{};
    p.flag        = nullptr;
    p.decode_hook = nullptr;
    p.seq_id      = 0;
    p.n_batch     = 0;
    return p;
}

extern "C" int32_t llama_cancel_mtmd_eval_chunks(mtmd_context * mctx, llama_cancel_hook * encode_hook,
                                                 llama_context * lctx, const mtmd_input_chunks * chunks,
                                                 int32_t first_chunk, llama_pos n_past,
                                                 const llama_cancel_mtmd_params * params,
                                                 llama_cancel_mtmd_result * result) {
    return llama_cancel_mtmd_eval_chunks_ext(mctx, encode_hook, lctx, chunks, first_chunk, n_past, params, 0, result);
}

extern "C" int32_t llama_cancel_generate_mtmd(mtmd_context * mctx, llama_cancel_hook * encode_hook,
                                              llama_context * lctx, const mtmd_input_chunks * chunks,
                                              int32_t first_chunk, llama_pos n_past,
                                              const llama_cancel_generate_params * params, llama_token * out,
                                              int32_t n_out_max, llama_cancel_generate_result * result) {
    return llama_cancel_generate_mtmd_ext(mctx, encode_hook, lctx, chunks, first_chunk, n_past, params, 0, out,
                                          n_out_max, result);
}

extern "C" llama_cancel_tts_params llama_cancel_tts_default_params(void) {
    llama_cancel_tts_params p{};
    p.seed = 1;
    return p;
}

extern "C" llama_cancel_tts_run_params llama_cancel_tts_run_default_params(void) {
    return llama_cancel_tts_run_params{};
}
