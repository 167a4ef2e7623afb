// The tests' shorthands for the multimodal calls: llama_cancel_mtmd_eval_chunks with the mtmd
// context's hook and options as arguments, and what a 1.x host of llama_cancel_generate_mtmd calls
// in 2.0 (the CHANGELOG's migration table): the prompt's chunks, then the token loop.
#pragma once

#include "llama-cancel.h"

#include <cstdio>

namespace mtmd_test {

// llama_cancel_mtmd_eval_chunks with `mtmd_hook` and `options` set in a copy of `p`.
inline int32_t eval_chunks(mtmd_context * mctx, llama_cancel_hook * mtmd_hook, llama_context * lctx,
                           const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past,
                           const llama_cancel_mtmd_params * p, llama_cancel_mtmd_result * r, uint32_t options = 0) {
    llama_cancel_mtmd_params q = p != nullptr ? *p : llama_cancel_mtmd_default_params();
    q.mtmd_hook = mtmd_hook;
    q.options   = options;
    return llama_cancel_mtmd_eval_chunks(mctx, lctx, chunks, first, n_past, &q, r);
}

// n_chunks_done: where the prompt stands, as the evaluation reported it.
struct generate_mtmd_result : llama_cancel_generate_result {
    int32_t n_chunks_done = 0;
};

// The prompt's chunks through llama_cancel_mtmd_eval_chunks (gp's byte, hook, sequence, n_batch and
// budget), then llama_cancel_generate from their last logits (n_prompt 0).
inline int32_t generate_mtmd(mtmd_context * mctx, llama_cancel_hook * mtmd_hook, llama_context * lctx,
                             const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past,
                             const llama_cancel_generate_params * gp, llama_token * out, int32_t n_out_max,
                             generate_mtmd_result * r, uint32_t options = 0) {
    llama_cancel_mtmd_params mp = llama_cancel_mtmd_default_params();
    mp.byte        = gp->byte;
    mp.hook        = gp->hook;
    mp.seq_id      = gp->seq_id;
    mp.n_batch     = gp->n_batch;
    mp.max_stop_ms = gp->max_stop_ms;
    llama_cancel_mtmd_result mr{};
    const int32_t st = eval_chunks(mctx, mtmd_hook, lctx, chunks, first, n_past, &mp, &mr, options);
    r->n_chunks_done = mr.n_chunks_done;
    if (st != LLAMA_CANCEL_OK) {
        static_cast<llama_cancel_generate_result &>(*r) = llama_cancel_generate_result{};
        r->status             = st;
        r->stop_reason        = st == LLAMA_CANCEL_CANCELLED ? LLAMA_CANCEL_STOP_CANCELLED : LLAMA_CANCEL_STOP_ERROR;
        r->n_past             = mr.n_past;
        r->n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
        std::snprintf(r->message, sizeof(r->message), "%s", mr.message);
        return st;
    }
    const int32_t rc      = llama_cancel_generate(lctx, nullptr, 0, gp, out, n_out_max, r);
    r->n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
    return rc;
}

} // namespace mtmd_test
