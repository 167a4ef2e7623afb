// A multimodal prompt, then the token loop: what a 1.x host of llama_cancel_generate_mtmd calls in
// 2.0 (the CHANGELOG's migration table). One place for `llama-cancel generate --mmproj` and the tests.
#pragma once

#include "llama-cancel.h"

#include <cstdio>

namespace common {

// Chunks [first, end) of `chunks` at position `n_past` through llama_cancel_mtmd_eval_chunks, with
// gp's byte, hook, sequence, n_batch and stop-time budget beside `mtmd_hook` and `options`; then
// llama_cancel_generate from their last logits (n_prompt 0). `mr`: the evaluation's result, whose
// n_chunks_done a resume passes as `first`. A stopped or failed evaluation returns its status in `r`
// with nothing generated. r.n_prompt_committed: the positions the chunks took.
inline int32_t generate_after_chunks(mtmd_context * mctx, llama_cancel_hook * mtmd_hook, uint32_t options,
                                     llama_context * lctx, const mtmd_input_chunks * chunks, int32_t first,
                                     llama_pos n_past, const llama_cancel_generate_params & gp, llama_token * out,
                                     int32_t n_out_max, llama_cancel_generate_result & r, llama_cancel_mtmd_result & mr) {
    llama_cancel_mtmd_params mp = llama_cancel_mtmd_default_params();
    mp.byte        = gp.byte;
    mp.hook        = gp.hook;
    mp.mtmd_hook   = mtmd_hook;
    mp.options     = options;
    mp.seq_id      = gp.seq_id;
    mp.n_batch     = gp.n_batch;
    mp.max_stop_ms = gp.max_stop_ms;
    mr             = llama_cancel_mtmd_result{};
    const int32_t st = llama_cancel_mtmd_eval_chunks(mctx, lctx, chunks, first, n_past, &mp, &mr);
    if (st != LLAMA_CANCEL_OK) {
        r                    = llama_cancel_generate_result{};
        r.status             = st;
        r.stop_reason        = st == LLAMA_CANCEL_CANCELLED ? LLAMA_CANCEL_STOP_CANCELLED : LLAMA_CANCEL_STOP_ERROR;
        r.n_past             = mr.n_past;
        r.n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
        std::snprintf(r.message, sizeof(r.message), "%s", mr.message);
        return st;
    }
    const int32_t rc     = llama_cancel_generate(lctx, nullptr, 0, &gp, out, n_out_max, &r);
    r.n_prompt_committed = static_cast<int32_t>(mr.n_past - n_past);
    return rc;
}

} // namespace common
