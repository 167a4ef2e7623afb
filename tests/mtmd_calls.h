// The tests' shorthands for the multimodal calls: llama_cancel_mtmd_eval_chunks with the mtmd
// context's hook and options as arguments, and the prompt's chunks then the token loop
// (common/mtmd_generate.h).
#pragma once

#include "common/mtmd_generate.h"
#include "llama-cancel.h"

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

// common::generate_after_chunks, its evaluation's n_chunks_done in the result.
inline int32_t generate_mtmd(mtmd_context * mctx, llama_cancel_hook * mtmd_hook, llama_context * lctx,
                             const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past,
                             const llama_cancel_generate_params * gp, llama_token * out, int32_t n_out_max,
                             generate_mtmd_result * r, uint32_t options = 0) {
    llama_cancel_mtmd_result mr{};
    const int32_t rc = common::generate_after_chunks(mctx, mtmd_hook, options, lctx, chunks, first, n_past, *gp, out,
                                                     n_out_max, *r, mr);
    r->n_chunks_done = mr.n_chunks_done;
    return rc;
}

} // namespace mtmd_test
