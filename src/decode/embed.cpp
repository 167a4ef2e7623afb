// llama_cancel_embed: pooled outputs of many sequences, a group of whole sequences per graph, each
// group's rows copied out as soon as it finishes, so that a stop keeps every finished group.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/byte.h"
#include "decode/decode_batch.h"
#include "abi/status.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

using llama_cancel::fail;

// One sequence of the batch: its id and its tokens [begin, end).
struct seq_span {
    llama_seq_id id;
    int32_t      begin;
    int32_t      end;
};

llama_seq_id seq_of(const llama_batch & batch, int32_t i) {
    return batch.seq_id != nullptr ? batch.seq_id[i][0] : 0;
}

// The batch's sequences in order, or an error message: each token in one sequence, a sequence's
// tokens together, ids below n_seq_max, at most n_ubatch tokens each (pooling reads a sequence from
// one ubatch).
std::vector<seq_span> split_sequences(llama_context * ctx, const llama_batch & batch, llama_cancel_embed_result * result) {
    std::vector<seq_span> spans;
    const llama_seq_id n_seq_max = static_cast<llama_seq_id>(llama_n_seq_max(ctx));
    const int32_t      n_ubatch  = static_cast<int32_t>(llama_n_ubatch(ctx));
    std::vector<char>  seen(n_seq_max, 0);
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        if (batch.n_seq_id != nullptr && batch.n_seq_id[i] != 1) {
            fail(result, "batch token %d is in %d sequences; a pooled output needs each token in one", i,
                 batch.n_seq_id[i]);
            return {};
        }
        const llama_seq_id s = seq_of(batch, i);
        if (s < 0 || s >= n_seq_max) {
            fail(result, "batch token %d has sequence id %d, outside the context's [0, %d)", i, s, n_seq_max);
            return {};
        }
        if (!spans.empty() && spans.back().id == s) {
            spans.back().end = i + 1;
            continue;
        }
        if (seen[s] != 0) {
            fail(result, "sequence %d's tokens are not together in the batch (again at token %d)", s, i);
            return {};
        }
        seen[s] = 1;
        spans.push_back(seq_span{s, i, i + 1});
    }
    for (const seq_span & sp : spans) {
        if (sp.end - sp.begin > n_ubatch) {
            fail(result, "sequence %d has %d tokens, more than the context's n_ubatch %d (a pooled output is one "
                         "ubatch's): raise n_ubatch or shorten it", sp.id, sp.end - sp.begin, n_ubatch);
            return {};
        }
    }
    return spans;
}

bool check_args(llama_context * ctx, const llama_batch & batch, const float * out, int64_t n_out_max,
                llama_cancel_embed_result * result) {
    if (ctx == nullptr) {
        fail(result, "%s", "ctx is NULL");
        return false;
    }
    if (llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_NONE || !llama_cancel::embeddings_mode(ctx)) {
        fail(result, "%s", "the context pools no embeddings (llama_context_params.embeddings and a pooling type; "
                           "per-token embeddings come from llama_cancel_decode)");
        return false;
    }
    if (batch.n_tokens <= 0 || (batch.token == nullptr) == (batch.embd == nullptr)) {
        fail(result, "%s", "batch needs tokens, and exactly one of token and embd");
        return false;
    }
    if (batch.embd != nullptr && llama_cancel::n_pos_per_token(ctx, batch) > 1) {
        fail(result, "%s", "an embeddings input on an M-RoPE model: use llama_cancel_decode");
        return false;
    }
    if (out == nullptr || n_out_max < 0) {
        fail(result, "%s", "out is NULL or n_out_max negative");
        return false;
    }
    return true;
}

int32_t embed(llama_context * ctx, const llama_batch & batch, const llama_cancel_embed_params & p, float * out,
              int64_t n_out_max, llama_cancel_embed_result * result) {
    if (!check_args(ctx, batch, out, n_out_max, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    const std::vector<seq_span> spans = split_sequences(ctx, batch, result);
    if (spans.empty()) {
        return LLAMA_CANCEL_ERROR;
    }
    const int32_t n_out = llama_cancel_embed_n_out(ctx);
    llama_seq_id  top   = 0;
    for (const seq_span & sp : spans) {
        top = std::max(top, sp.id);
    }
    if ((static_cast<int64_t>(top) + 1) * n_out > n_out_max) {
        return fail(result, "out holds %lld floats; sequence id %d needs %lld (rows of %d)",
                    static_cast<long long>(n_out_max), top, (static_cast<long long>(top) + 1) * n_out, n_out);
    }
    result->n_out = n_out;

    const llama_model * model    = llama_get_model(ctx);
    const bool          encoder  = llama_model_has_encoder(model); // pooled from the encoder (T5's too)
    const int32_t       n_ubatch = static_cast<int32_t>(llama_n_ubatch(ctx));
    llama_cancel_decode_params dp = llama_cancel_decode_default_params();
    dp.byte                = p.byte;
    dp.hook                = p.hook;
    dp.abort_callback      = p.abort_callback;
    dp.abort_callback_data = p.abort_callback_data;
    for (size_t g = 0; g < spans.size();) {
        size_t e = g + 1; // the group: whole sequences while they fit in one ubatch
        while (e < spans.size() && spans[e].end - spans[g].begin <= n_ubatch) {
            ++e;
        }
        llama_cancel_decode_result dr;
        const llama_batch group = llama_cancel::batch_slice(batch, spans[g].begin, spans[e - 1].end - spans[g].begin,
                                                            llama_model_n_embd_inp(model));
        const std::vector<llama_pos> before = llama_cancel::seq_pos_max(ctx);
        const int32_t status = encoder ? llama_cancel_encode(ctx, group, &dp, &dr) : llama_cancel_decode(ctx, group, &dp, &dr, nullptr);
        result->n_calls += dr.n_decode_calls;
        result->reach = std::max(result->reach, dr.reach);
        if (status != LLAMA_CANCEL_OK) {
            // The group is not done: the ubatches llama.cpp finished inside it (a sequence each when
            // it splits by sequence) leave memory too, or a resume would find their positions taken.
            for (size_t k = g; k < e && !encoder; ++k) {
                llama_memory_seq_rm(llama_get_memory(ctx), spans[k].id, before[spans[k].id] + 1, -1);
            }
            llama_cancel::set_status(result, status, "%s", dr.message);
            return status;
        }
        for (size_t k = g; k < e; ++k) {
            const float * row = llama_get_embeddings_seq(ctx, spans[k].id);
            if (row == nullptr) {
                return fail(result, "llama_get_embeddings_seq gave nothing for sequence %d", spans[k].id);
            }
            std::memcpy(out + static_cast<size_t>(spans[k].id) * n_out, row, sizeof(float) * n_out);
        }
        result->n_committed = spans[e - 1].end;
        result->n_seq_done += static_cast<int32_t>(e - g);
        g = e;
    }
    result->status = LLAMA_CANCEL_OK;
    return LLAMA_CANCEL_OK;
}

} // namespace

extern "C" llama_cancel_embed_params llama_cancel_embed_default_params(void) {
    return llama_cancel_embed_params{};
}

extern "C" int32_t llama_cancel_embed_n_out(const llama_context * ctx) {
    if (ctx == nullptr) {
        return 0;
    }
    const llama_model * model = llama_get_model(ctx);
    switch (llama_pooling_type(ctx)) {
        case LLAMA_POOLING_TYPE_NONE: return 0;
        case LLAMA_POOLING_TYPE_RANK: return static_cast<int32_t>(llama_model_n_cls_out(model));
        default:                      return llama_model_n_embd_out(model);
    }
}

extern "C" int32_t llama_cancel_embed(llama_context * ctx, llama_batch batch, const llama_cancel_embed_params * params,
                                      float * out, int64_t n_out_max, llama_cancel_embed_result * result) {
    llama_cancel_embed_result own;
    llama_cancel_embed_result * r = result != nullptr ? result : &own;
    std::memset(r, 0, sizeof(*r));
    const llama_cancel_embed_params p = params != nullptr ? *params : llama_cancel_embed_default_params();
    return llama_cancel::abi_guard(r, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return embed(ctx, batch, p, out, n_out_max, r); });
}
