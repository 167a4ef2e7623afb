// llama_cancel_generate: prefill, then sample and decode token by token, under the caller's byte.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "abi/checks.h"
#include "checkpoints/byte.h"
#include "decode/seq_batch.h"
#include "abi/status.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace {

using llama_cancel::fail;

// The most likely next token; -1 when the context has no logits (an embeddings-only context).
llama_token greedy(llama_context * ctx, int32_t n_vocab) {
    const float * logits = llama_get_logits_ith(ctx, -1);
    if (logits == nullptr) {
        return -1;
    }
    return static_cast<llama_token>(std::max_element(logits, logits + n_vocab) - logits);
}

int32_t generate(llama_context * ctx, const llama_token * prompt, int32_t n_prompt,
                 const llama_cancel_generate_params & p, llama_token * out, int32_t n_out_max,
                 llama_cancel_generate_result * r) {
    if (ctx == nullptr) {
        return fail(r, "ctx is NULL");
    }
    llama_memory_t mem      = llama_get_memory(ctx);
    auto           next_pos = [&] { return llama_memory_seq_pos_max(mem, p.seq_id) + 1; };
    if (r != nullptr && p.seq_id >= 0 && static_cast<uint32_t>(p.seq_id) < llama_n_seq_max(ctx)) {
        r->n_past = next_pos(); // where a request goes on, whatever the checks below refuse
    }
    if (!llama_cancel::check_out(p.n_predict, out, n_out_max, r)) {
        return LLAMA_CANCEL_ERROR;
    }
    if (n_prompt < 0 || (n_prompt > 0 && prompt == nullptr)) {
        return fail(r, "the prompt has %d tokens and %s", n_prompt, prompt == nullptr ? "no array" : "a bad count");
    }
    // No prompt: continue from the logits the last decode left (after an mtmd prefill, say).
    if (n_prompt == 0 && llama_get_logits_ith(ctx, -1) == nullptr) {
        return fail(r, "no prompt and no logits to continue from: the prompt needs at least one token");
    }
    int32_t n_batch = 0;
    if (!llama_cancel::check_seq_id(ctx, p.seq_id, r) || !llama_cancel::resolve_n_batch(ctx, p.n_batch, r, &n_batch)) {
        return LLAMA_CANCEL_ERROR;
    }
    const llama_vocab * vocab   = llama_model_get_vocab(llama_get_model(ctx));
    const int32_t       n_vocab = llama_vocab_n_tokens(vocab);

    llama_cancel_decode_params dp = llama_cancel_decode_default_params();
    dp.byte        = p.byte;
    dp.hook        = p.hook;
    dp.max_stop_ms = p.max_stop_ms;
    llama_cancel_decode_result dr{};
    int32_t reach = LLAMA_CANCEL_REACH_GRAPH; // the worst of the decodes'
    auto decode = [&](const llama_batch & b) {
        const int32_t st = llama_cancel_decode(ctx, b, &dp, &dr, nullptr);
        reach = std::max(reach, dr.reach);
        return st;
    };

    auto finish = [&](int32_t status, int32_t reason) {
        if (r != nullptr) {
            r->status      = status;
            r->stop_reason = reason;
            r->n_past      = next_pos();
            r->reach       = reach;
            if (status == LLAMA_CANCEL_ERROR) {
                std::snprintf(r->message, sizeof(r->message), "%.255s", dr.message);
            }
        }
        return status;
    };

    // Prefill in chunks of n_batch; each is a cancellable decode.
    llama_cancel::seq_batch batch(std::min(n_prompt, n_batch), p.seq_id); // at least one: the token loop's
    int32_t                 done = 0;
    while (done < n_prompt) {
        const int32_t n = std::min(n_batch, n_prompt - done);
        const int32_t st = decode(batch.get(prompt + done, nullptr, n, next_pos(), true));
        done += st == LLAMA_CANCEL_OK ? n : dr.n_committed;
        if (r != nullptr) {
            r->n_prompt_committed = done;
        }
        if (st != LLAMA_CANCEL_OK) {
            return finish(st, st == LLAMA_CANCEL_CANCELLED ? LLAMA_CANCEL_STOP_CANCELLED : LLAMA_CANCEL_STOP_ERROR);
        }
    }

    // Token loop: the byte is read inside every decode and between tokens.
    for (int32_t i = 0; i < p.n_predict; ++i) {
        if (llama_cancel::byte_is_set(p.byte)) {
            return finish(LLAMA_CANCEL_CANCELLED, LLAMA_CANCEL_STOP_CANCELLED);
        }
        const llama_token tok = p.sampler != nullptr ? llama_sampler_sample(p.sampler, ctx, -1) : greedy(ctx, n_vocab);
        if (tok < 0) {
            std::snprintf(dr.message, sizeof(dr.message), "%s",
                          "the context has no logits to sample from (an embeddings-only context?)");
            return finish(LLAMA_CANCEL_ERROR, LLAMA_CANCEL_STOP_ERROR);
        }
        if (llama_vocab_is_eog(vocab, tok)) {
            return finish(LLAMA_CANCEL_OK, LLAMA_CANCEL_STOP_EOG);
        }
        out[i] = tok;
        if (r != nullptr) {
            r->n_generated = i + 1;
        }
        if (p.on_token != nullptr && !p.on_token(tok, p.on_token_data)) {
            return finish(LLAMA_CANCEL_CANCELLED, LLAMA_CANCEL_STOP_CANCELLED);
        }
        const int32_t st = decode(batch.get(&tok, nullptr, 1, next_pos(), true));
        if (st != LLAMA_CANCEL_OK) {
            return finish(st, st == LLAMA_CANCEL_CANCELLED ? LLAMA_CANCEL_STOP_CANCELLED : LLAMA_CANCEL_STOP_ERROR);
        }
        if (r != nullptr) {
            r->n_generated_committed = i + 1;
        }
    }
    return finish(LLAMA_CANCEL_OK, LLAMA_CANCEL_STOP_LENGTH);
}

} // namespace

extern "C" llama_cancel_generate_params llama_cancel_generate_default_params(void) {
    llama_cancel_generate_params p{};
    p.n_predict = 32;
    return p;
}

extern "C" const char * llama_cancel_stop_reason_str(int32_t reason) {
    switch (reason) {
        case LLAMA_CANCEL_STOP_LENGTH:    return "length";
        case LLAMA_CANCEL_STOP_EOG:       return "end of generation";
        case LLAMA_CANCEL_STOP_CANCELLED: return "cancelled";
        case LLAMA_CANCEL_STOP_ERROR:     return "error";
        default:                          return "unknown";
    }
}

extern "C" int32_t llama_cancel_generate(llama_context * ctx, const llama_token * prompt, int32_t n_prompt,
                                         const llama_cancel_generate_params * params, llama_token * out,
                                         int32_t n_out_max, llama_cancel_generate_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    const llama_cancel_generate_params p = params != nullptr ? *params : llama_cancel_generate_default_params();
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return generate(ctx, prompt, n_prompt, p, out, n_out_max, result); });
}
