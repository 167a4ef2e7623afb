// llama_cancel_generate_mtmd(_ext): the token loop after a multimodal prompt. The prompt's chunks go
// through llama_cancel_mtmd_eval_chunks_ext (with the caller's options), the tokens through
// llama_cancel_generate.
#include "llama-cancel.h"

#include "abi_guard.h"
#include "checks.h"
#include "status.h"

#include <cstring>

namespace {

int32_t generate_mtmd(mtmd_context * mctx, llama_cancel_hook * encode_hook, llama_context * lctx,
                      const mtmd_input_chunks * chunks, int32_t first_chunk, llama_pos n_past,
                      const llama_cancel_generate_params & gp, uint32_t options, llama_token * out,
                      int32_t n_out_max, llama_cancel_generate_result * result) {
    if (result != nullptr) {
        result->n_chunks_done = first_chunk;
        result->n_past        = n_past;
    }
    // What the token loop would refuse, refused before the prompt: nothing is evaluated.
    int32_t n_batch = 0;
    if (!llama_cancel::check_out(gp.n_predict, out, n_out_max, result) ||
        (lctx != nullptr && !llama_cancel::resolve_n_batch(lctx, gp.n_batch, result, &n_batch))) {
        return LLAMA_CANCEL_ERROR;
    }
    llama_cancel_mtmd_params mp = llama_cancel_mtmd_default_params();
    mp.flag        = gp.flag;
    mp.decode_hook = gp.hook;
    mp.seq_id      = gp.seq_id;
    mp.n_batch     = lctx != nullptr ? n_batch : gp.n_batch;
    mp.max_stop_ms = gp.max_stop_ms;
    llama_cancel_mtmd_result mr{};
    const int32_t st =
        llama_cancel_mtmd_eval_chunks_ext(mctx, encode_hook, lctx, chunks, first_chunk, n_past, &mp, options, &mr);
    if (st != LLAMA_CANCEL_OK) {
        if (result != nullptr) {
            std::memset(result, 0, sizeof(*result));
            result->n_chunks_done      = mr.n_chunks_done;
            result->status             = st;
            result->stop_reason        = st == LLAMA_CANCEL_CANCELLED ? LLAMA_CANCEL_STOP_CANCELLED : LLAMA_CANCEL_STOP_ERROR;
            result->n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
            result->n_past             = mr.n_past;
            std::memcpy(result->message, mr.message, sizeof(result->message));
        }
        return st;
    }
    // The prompt is in memory with the last token's logits: the token loop continues from there.
    const int32_t rc = llama_cancel_generate(lctx, nullptr, 0, &gp, out, n_out_max, result);
    if (result != nullptr) {
        result->n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
        result->n_chunks_done      = mr.n_chunks_done;
    }
    return rc;
}

} // namespace

extern "C" int32_t llama_cancel_generate_mtmd_ext(mtmd_context * mctx, llama_cancel_hook * encode_hook,
                                                  llama_context * lctx, const mtmd_input_chunks * chunks,
                                                  int32_t first_chunk, llama_pos n_past,
                                                  const llama_cancel_generate_params * params, uint32_t options,
                                                  llama_token * out, int32_t n_out_max,
                                                  llama_cancel_generate_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    const llama_cancel_generate_params gp = params != nullptr ? *params : llama_cancel_generate_default_params();
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR), [&] {
        return generate_mtmd(mctx, encode_hook, lctx, chunks, first_chunk, n_past, gp, options, out, n_out_max,
                             result);
    });
}
