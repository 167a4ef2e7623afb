// llama_cancel_decode: llama_decode under the caller's byte, with committed-token accounting.
#include "llama-cancel.h"

#include "flag.h"
#include "status.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

namespace {

// The caller's own abort callback chained behind the byte for the duration of one decode.
struct chained_abort {
    const int8_t *      flag;
    ggml_abort_callback callback;
    void *              data;
};

bool chained_abort_callback(void * user_data) {
    const auto * c = static_cast<const chained_abort *>(user_data);
    return llama_cancel::flag_is_set(c->flag) || c->callback(c->data);
}

template <typename... Args> int32_t fail(llama_cancel_decode_result * result, const char * fmt, Args... args) {
    llama_cancel::set_status(result, LLAMA_CANCEL_ERROR, fmt, args...);
    return LLAMA_CANCEL_ERROR;
}

const char * decode_error_str(int32_t ret) {
    switch (ret) {
        case 1:  return "no KV cache slot for the batch (reduce the batch or enlarge the context)";
        case -1: return "invalid input batch";
        default: return ret < -1 ? "fatal compute error" : "unexpected return value";
    }
}

// Validates what llama_decode would otherwise assert on or reject without saying why.
bool check_batch(llama_context * ctx, const llama_batch & batch, llama_cancel_decode_result * result) {
    if (batch.n_tokens <= 0) {
        fail(result, "batch has %d tokens; it needs at least one", batch.n_tokens);
        return false;
    }
    if ((batch.token == nullptr) == (batch.embd == nullptr)) {
        fail(result, "batch needs exactly one of token and embd");
        return false;
    }
    const uint32_t n_batch = llama_n_batch(ctx);
    if (static_cast<uint32_t>(batch.n_tokens) > n_batch) {
        fail(result, "batch has %d tokens, more than the context's n_batch %u", batch.n_tokens, n_batch);
        return false;
    }
    const int32_t n_seq_max = static_cast<int32_t>(llama_n_seq_max(ctx));
    if (batch.token != nullptr) {
        const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
        for (int32_t i = 0; i < batch.n_tokens; ++i) {
            if (batch.token[i] < 0 || batch.token[i] >= n_vocab) {
                fail(result, "batch token %d is %d, outside the vocabulary [0, %d)", i, batch.token[i], n_vocab);
                return false;
            }
        }
    }
    if (batch.seq_id != nullptr) {
        for (int32_t i = 0; i < batch.n_tokens; ++i) {
            const int32_t n = batch.n_seq_id != nullptr ? batch.n_seq_id[i] : 1;
            if (n < 1 || batch.seq_id[i] == nullptr) {
                fail(result, "batch token %d has no sequence id", i);
                return false;
            }
            for (int32_t k = 0; k < n; ++k) {
                const llama_seq_id s = batch.seq_id[i][k];
                if (s < 0 || s >= n_seq_max) {
                    fail(result, "batch token %d has sequence id %d, outside [0, %d)", i, s, n_seq_max);
                    return false;
                }
            }
        }
    }
    return true;
}

int32_t seq_count(const llama_batch & batch, int32_t i) {
    return batch.seq_id == nullptr ? 1 : (batch.n_seq_id != nullptr ? batch.n_seq_id[i] : 1);
}

llama_seq_id seq_of(const llama_batch & batch, int32_t i, int32_t k) {
    return batch.seq_id == nullptr ? 0 : batch.seq_id[i][k];
}

// Positions of the batch tokens: explicit, or as llama_decode assigns them when batch.pos is NULL
// (each sequence continues after its last position in memory).
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
        pos[i] = next[seq_of(batch, i, 0)]++;
    }
    return pos;
}

struct outcome {
    int32_t ret     = 0;     // the last llama_decode's return
    bool    stopped = false; // the byte (or the hook) stopped the batch before its end
};

// Tokens [a, a + n) of `batch`, sharing its arrays.
llama_batch slice(const llama_batch & batch, int32_t a, int32_t n, int32_t n_embd) {
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

// Outputs requested before the last ubatch would be lost by decoding one ubatch per call.
bool outputs_before(const llama_batch & batch, int32_t end) {
    if (batch.logits == nullptr) {
        return false;
    }
    for (int32_t i = 0; i < end; ++i) {
        if (batch.logits[i] != 0) {
            return true;
        }
    }
    return false;
}

// Removes what tokens [a, n_tokens) may have written: the positions from each sequence's first
// position among them on. Used when a stopped graph left garbage cells that llama_decode kept.
void forget(llama_context * ctx, const llama_batch & batch, const std::vector<llama_pos> & pos, int32_t a) {
    const int32_t n_seq_max = static_cast<int32_t>(llama_n_seq_max(ctx));
    std::vector<llama_pos> first(n_seq_max, -1);
    for (int32_t i = a; i < batch.n_tokens; ++i) {
        for (int32_t k = 0; k < seq_count(batch, i); ++k) {
            llama_pos & f = first[seq_of(batch, i, k)];
            f = f < 0 ? pos[i] : std::min(f, pos[i]);
        }
    }
    llama_memory_t mem = llama_get_memory(ctx);
    for (llama_seq_id s = 0; s < n_seq_max; ++s) {
        if (first[s] >= 0) {
            llama_memory_seq_rm(mem, s, first[s], -1);
        }
    }
}

// Runs llama_decode. With a hook, one ubatch per call: the hook's stopped state then names the
// exact ubatch whose graph is garbage, and the byte is also checked between ubatches.
outcome run_decode(llama_context * ctx, const llama_batch & batch, const llama_cancel_decode_params & p,
                   const std::vector<llama_pos> & pos) {
    outcome o;
    const int32_t n_ubatch = static_cast<int32_t>(llama_n_ubatch(ctx));
    const bool    whole    = p.hook == nullptr || batch.n_tokens <= n_ubatch ||
                       outputs_before(batch, batch.n_tokens - (batch.n_tokens - 1) % n_ubatch - 1);
    const int32_t step     = whole ? batch.n_tokens : n_ubatch;
    const int32_t n_embd   = llama_model_n_embd_inp(llama_get_model(ctx));
    for (int32_t a = 0; a < batch.n_tokens; a += step) {
        if (a > 0 && llama_cancel::flag_is_set(p.flag)) {
            o.stopped = true;
            break;
        }
        llama_cancel_hook_reset(p.hook);
        o.ret = llama_decode(ctx, slice(batch, a, std::min(step, batch.n_tokens - a), n_embd));
        if (llama_cancel_hook_stopped(p.hook)) {
            llama_synchronize(ctx); // the graph's later splits may still run on an asynchronous backend
            forget(ctx, batch, pos, a);
            o.stopped = true;
            break;
        }
        if (o.ret != 0) {
            o.stopped = o.ret == 2;
            break;
        }
    }
    return o;
}

} // namespace

extern "C" llama_cancel_decode_params llama_cancel_decode_default_params(void) {
    return llama_cancel_decode_params{nullptr, nullptr, nullptr, nullptr};
}

extern "C" const char * llama_cancel_status_str(int32_t status) {
    switch (status) {
        case LLAMA_CANCEL_OK:        return "ok";
        case LLAMA_CANCEL_CANCELLED: return "cancelled";
        case LLAMA_CANCEL_ERROR:     return "error";
        default:                     return "unknown";
    }
}

namespace {

int32_t decode(
        llama_context                    * ctx,
        llama_batch                        batch,
        const llama_cancel_decode_params * params,
        llama_cancel_decode_result       * result,
        int32_t                          * n_committed_seq,
        int32_t                            n_seq) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    if (n_committed_seq != nullptr) {
        for (int32_t s = 0; s < n_seq; ++s) {
            n_committed_seq[s] = 0;
        }
    }
    if (ctx == nullptr) {
        return fail(result, "ctx is NULL");
    }
    if (n_committed_seq != nullptr && n_seq <= 0) {
        return fail(result, "n_seq is %d; n_committed_seq needs at least one counter", n_seq);
    }
    if (!check_batch(ctx, batch, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    const llama_cancel_decode_params p = params != nullptr ? *params : llama_cancel_decode_default_params();

    if (llama_cancel::flag_is_set(p.flag)) {
        if (result != nullptr) {
            result->status = LLAMA_CANCEL_CANCELLED;
        }
        return LLAMA_CANCEL_CANCELLED;
    }

    llama_memory_t mem = llama_get_memory(ctx);
    const int32_t n_seq_max = static_cast<int32_t>(llama_n_seq_max(ctx));
    std::vector<llama_pos> pos_max_before(n_seq_max, -1);
    for (llama_seq_id s = 0; s < n_seq_max; ++s) {
        pos_max_before[s] = llama_memory_seq_pos_max(mem, s);
    }
    const std::vector<llama_pos> pos = token_positions(batch, pos_max_before);

    // Puts back the caller's abort callback and the hook's byte however the call ends.
    struct restore {
        llama_context *                    ctx;
        const llama_cancel_decode_params & p;
        const int8_t *                     hook_flag;
        ~restore() {
            llama_cancel_hook_set_flag(p.hook, hook_flag);
            llama_set_abort_callback(ctx, p.abort_callback, p.abort_callback_data);
        }
    } restore_on_exit{ctx, p, llama_cancel_hook_get_flag(p.hook)};

    chained_abort chain{p.flag, p.abort_callback, p.abort_callback_data};
    if (p.abort_callback != nullptr) {
        llama_set_abort_callback(ctx, chained_abort_callback, &chain);
    } else {
        // The exported reader itself: what FFI hosts register, and what the benchmark measures.
        llama_set_abort_callback(ctx, llama_cancel_abort_callback, const_cast<int8_t *>(p.flag));
    }
    llama_cancel_hook_set_flag(p.hook, p.flag);
    const outcome o   = run_decode(ctx, batch, p, pos);
    const int32_t ret = o.ret;

    std::vector<llama_pos> pos_max_after(n_seq_max, -1);
    for (llama_seq_id s = 0; s < n_seq_max; ++s) {
        pos_max_after[s] = llama_memory_seq_pos_max(mem, s);
    }

    // A token is committed when every sequence it belongs to holds its position in memory now.
    int32_t n_prefix = 0;
    bool    prefix   = true;
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        bool committed = !o.stopped && ret == 0;
        if (!committed) {
            committed = true;
            for (int32_t k = 0; k < seq_count(batch, i); ++k) {
                const llama_seq_id s = seq_of(batch, i, k);
                committed = committed && pos[i] > pos_max_before[s] && pos[i] <= pos_max_after[s];
            }
        }
        prefix = prefix && committed;
        n_prefix += prefix ? 1 : 0;
        if (committed && n_committed_seq != nullptr) {
            for (int32_t k = 0; k < seq_count(batch, i); ++k) {
                const llama_seq_id s = seq_of(batch, i, k);
                if (s < n_seq) {
                    n_committed_seq[s]++;
                }
            }
        }
    }

    int32_t status = LLAMA_CANCEL_ERROR;
    if (ret == 0 || ret == 2) {
        status = o.stopped ? LLAMA_CANCEL_CANCELLED : LLAMA_CANCEL_OK;
    }
    if (result != nullptr) {
        result->decode_ret  = ret;
        result->n_committed = n_prefix;
        result->status      = status;
        if (status == LLAMA_CANCEL_ERROR) {
            std::snprintf(result->message, sizeof(result->message), "llama_decode returned %d: %s", ret,
                          decode_error_str(ret));
        }
    }
    return status;
}

} // namespace

extern "C" int32_t llama_cancel_decode(
        llama_context                    * ctx,
        llama_batch                        batch,
        const llama_cancel_decode_params * params,
        llama_cancel_decode_result       * result,
        int32_t                          * n_committed_seq,
        int32_t                            n_seq) {
    // No exception crosses the C ABI: the only ones possible here are allocation failures.
    try {
        return decode(ctx, batch, params, result, n_committed_seq, n_seq);
    } catch (const std::exception & e) {
        if (ctx != nullptr) {
            llama_set_abort_callback(ctx, params != nullptr ? params->abort_callback : nullptr,
                                     params != nullptr ? params->abort_callback_data : nullptr);
            // the hook's own byte is restored too (the exception may have left the call's byte in it)

        }
        return fail(result, "internal error: %s", e.what());
    }
}
