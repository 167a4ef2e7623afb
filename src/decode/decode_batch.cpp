// Batch facts for llama_cancel_decode (src/decode/decode_batch.h).
#include "decode/decode_batch.h"

#include "decode/pending_batch.h"

#include <cstdio>

namespace llama_cancel {

namespace {

template <typename... Args> std::vector<char> why(const char * fmt, Args... args) {
    std::vector<char> msg(256);
    std::snprintf(msg.data(), msg.size(), fmt, args...);
    return msg;
}

std::vector<char> check_tokens(llama_context * ctx, const llama_batch & batch) {
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    for (int32_t i = 0; batch.token != nullptr && i < batch.n_tokens; ++i) {
        if (batch.token[i] < 0 || batch.token[i] >= n_vocab) {
            return why("batch token %d is %d, outside the vocabulary [0, %d)", i, batch.token[i], n_vocab);
        }
    }
    return {};
}

std::vector<char> check_seq_ids(llama_context * ctx, const llama_batch & batch) {
    const int32_t n_seq_max = static_cast<int32_t>(llama_n_seq_max(ctx));
    for (int32_t i = 0; batch.seq_id != nullptr && i < batch.n_tokens; ++i) {
        const int32_t n = batch.n_seq_id != nullptr ? batch.n_seq_id[i] : 1;
        if (n < 1 || batch.seq_id[i] == nullptr) {
            return why("batch token %d has no sequence id", i);
        }
        for (int32_t k = 0; k < n; ++k) {
            const llama_seq_id s = batch.seq_id[i][k];
            if (s < 0 || s >= n_seq_max) {
                return why("batch token %d has sequence id %d, outside [0, %d)", i, s, n_seq_max);
            }
        }
    }
    return {};
}

} // namespace

int32_t n_pos_per_token(llama_context * ctx, const llama_batch & batch) {
    const llama_rope_type rope = llama_model_rope_type(llama_get_model(ctx));
    const bool mrope = rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE;
    return batch.embd != nullptr && mrope ? 4 : 1;
}

std::vector<char> check_batch(llama_context * ctx, const llama_batch & batch) {
    if (batch.n_tokens <= 0) {
        return why("batch has %d tokens; it needs at least one", batch.n_tokens);
    }
    if ((batch.token == nullptr) == (batch.embd == nullptr)) {
        return why("%s", "batch needs exactly one of token and embd");
    }
    if (batch.pos == nullptr && n_pos_per_token(ctx, batch) > 1) {
        // llama.cpp would make one position per token and read four
        return why("%s", "an embeddings batch on an M-RoPE model needs explicit positions (4 per token, section-major)");
    }
    const uint32_t n_batch = llama_n_batch(ctx);
    if (static_cast<uint32_t>(batch.n_tokens) > n_batch) {
        return why("batch has %d tokens, more than the context's n_batch %u", batch.n_tokens, n_batch);
    }
    std::vector<char> msg = check_tokens(ctx, batch);
    return msg.empty() ? check_seq_ids(ctx, batch) : msg;
}

llama_batch batch_slice(const llama_batch & batch, int32_t a, int32_t n, int32_t n_embd) {
    llama_batch s = batch;
    s.n_tokens    = n;
    s.token       = batch.token != nullptr ? batch.token + a : nullptr;
    s.embd        = batch.embd != nullptr ? batch.embd + static_cast<size_t>(a) * n_embd : nullptr;
    s.pos         = batch.pos != nullptr ? batch.pos + a : nullptr;
    s.n_seq_id    = batch.n_seq_id != nullptr ? batch.n_seq_id + a : nullptr;
    s.seq_id      = batch.seq_id != nullptr ? batch.seq_id + a : nullptr;
    s.logits      = batch.logits != nullptr ? batch.logits + a : nullptr;
    return s;
}

std::vector<llama_pos> seq_pos_max(llama_context * ctx) {
    llama_memory_t mem = llama_get_memory(ctx);
    std::vector<llama_pos> pos(llama_n_seq_max(ctx), -1);
    for (size_t s = 0; mem != nullptr && s < pos.size(); ++s) { // encoder-only models have none
        pos[s] = llama_memory_seq_pos_max(mem, static_cast<llama_seq_id>(s));
    }
    return pos;
}

std::vector<llama_pos> token_positions(const llama_batch & batch, const std::vector<llama_pos> & pos_max_before) {
    std::vector<llama_pos> pos(batch.n_tokens);
    if (batch.pos != nullptr) {
        pos.assign(batch.pos, batch.pos + batch.n_tokens);
        return pos;
    }
    std::vector<llama_pos> next(pos_max_before.size());
    for (size_t s = 0; s < next.size(); ++s) {
        next[s] = pos_max_before[s] + 1;
    }
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        pos[i] = next[batch_seq_of(batch, i, 0)];
        for (int32_t k = 0; k < batch_seq_count(batch, i); ++k) {
            next[batch_seq_of(batch, i, k)] = pos[i] + 1;
        }
    }
    return pos;
}

// With batch.logits NULL, llama.cpp outputs the last token, or every token in an embeddings context.
int32_t first_output(const llama_batch & batch, bool embeddings_mode) {
    if (batch.logits == nullptr) {
        return embeddings_mode ? 0 : batch.n_tokens - 1;
    }
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        if (batch.logits[i] != 0) {
            return i;
        }
    }
    return batch.n_tokens;
}

int32_t count_committed(const llama_batch & batch, const std::vector<llama_pos> & pos, bool all,
                        const std::vector<llama_pos> & before, const std::vector<llama_pos> & after,
                        int32_t * n_committed, int32_t n) {
    int32_t n_prefix = 0;
    bool    prefix   = true;
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        bool committed = true;
        for (int32_t k = 0; k < batch_seq_count(batch, i); ++k) {
            const llama_seq_id s         = batch_seq_of(batch, i, k);
            const bool         in_memory = all || (pos[i] > before[s] && pos[i] <= after[s]);
            committed = committed && in_memory;
            // Per sequence, a token counts where that sequence has it in memory: a token shared with a
            // dropped sequence is committed for the ones that keep it.
            if (n_committed != nullptr && s < n && in_memory) {
                n_committed[s]++;
            }
        }
        prefix = prefix && committed;
        n_prefix += prefix ? 1 : 0;
    }
    return n_prefix;
}

} // namespace llama_cancel
