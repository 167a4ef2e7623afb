// What llama_cancel_decode reads off a batch before and after it decodes: the checks llama_decode
// would otherwise assert on or fail without saying why, the positions llama.cpp gives the tokens,
// the first output, and which tokens ended in memory.
#pragma once

#include "llama.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llama_cancel {

// Empty when the batch is fine for ctx; else why not (for result->message).
std::vector<char> check_batch(llama_context * ctx, const llama_batch & batch);

// Positions llama_decode reads per batch token: 4 for an embeddings batch on an M-RoPE decoder
// (llama_model_rope_type MROPE or IMROPE; section-major in batch.pos, section t first, which is
// also the token's position in memory), 1 otherwise (text tokens take one position on any model).
int32_t n_pos_per_token(llama_context * ctx, const llama_batch & batch);

// Tokens [a, a + n) of `batch` as a batch of their own, sharing its arrays (`n_embd`: floats per
// row of batch.embd).
llama_batch batch_slice(const llama_batch & batch, int32_t a, int32_t n, int32_t n_embd);

// Each sequence's last position in memory (-1: empty), for every sequence id of ctx.
std::vector<llama_pos> seq_pos_max(llama_context * ctx);

// Every batch token's position (M-RoPE embeddings: section t): explicit, or as llama_decode
// assigns them when batch.pos is NULL (a token goes after its first sequence's last position, and
// every sequence of the token then continues after it).
std::vector<llama_pos> token_positions(const llama_batch & batch, const std::vector<llama_pos> & pos_max_before);

// Index of the first output the batch asks for in a context that outputs embeddings
// (`embeddings_mode`) or logits; n_tokens when none.
int32_t first_output(const llama_batch & batch, bool embeddings_mode);

// Whether ctx outputs embeddings. llama.h has no getter: the embeddings buffer is there after a
// decode in that mode, and from the context's creation when made so; after llama_set_embeddings
// it is right again once a decode ran (llama_cancel_decode checks after its first call).
inline bool embeddings_mode(llama_context * ctx) {
    return llama_get_embeddings(ctx) != nullptr;
}

// A token is committed for a sequence when that sequence holds its position now (`all`: every
// token is). Returns the committed prefix (tokens committed for every one of their sequences);
// adds each sequence's committed tokens to n_committed[s] when given (n entries).
int32_t count_committed(const llama_batch & batch, const std::vector<llama_pos> & pos, bool all,
                        const std::vector<llama_pos> & before, const std::vector<llama_pos> & after,
                        int32_t * n_committed, int32_t n);

} // namespace llama_cancel
