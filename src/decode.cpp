// llama_cancel_decode: llama_decode under the caller's byte, with committed-token accounting.
#include "llama-cancel.h"

#include "abi_guard.h"
#include "clock.h"
#include "eval_callback.h"
#include "flag.h"
#include "memory_checkpoint.h"
#include "pending_batch.h"
#include "slice_budget.h"
#include "status.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// The abort callback of one decode when more than the byte is needed: the caller's own callback
// chained behind the byte, and the node clock of a stop-time budget.
struct chained_abort {
    const int8_t *               flag;
    ggml_abort_callback          callback; // may be NULL
    void *                       data;
    llama_cancel::slice_budget * budget;   // may be NULL
    std::vector<const int8_t *>  seq_flags; // the bytes of the sequences in the call in flight
};

bool any_set(const std::vector<const int8_t *> & flags) {
    for (const int8_t * f : flags) {
        if (llama_cancel::flag_is_set(f)) {
            return true;
        }
    }
    return false;
}

bool chained_abort_callback(void * user_data) {
    const auto * c = static_cast<const chained_abort *>(user_data);
    if (c->budget != nullptr) {
        c->budget->on_node(llama_cancel::now_ms(), llama_cancel::device_asks());
    }
    return llama_cancel::flag_is_set(c->flag) || any_set(c->seq_flags) ||
           (c->callback != nullptr && c->callback(c->data));
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

using llama_cancel::batch_seq_count;
using llama_cancel::batch_seq_of;

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
        pos[i] = next[batch_seq_of(batch, i, 0)]++;
    }
    return pos;
}

// Index of the first output the batch asks for; n_tokens when none. With batch.logits NULL,
// llama.cpp outputs the last token, or every token in an embeddings context (whose embeddings
// buffer exists from its creation on: that is how one is recognised here).
int32_t first_output(llama_context * ctx, const llama_batch & batch) {
    if (batch.logits == nullptr) {
        return llama_get_embeddings(ctx) != nullptr ? 0 : batch.n_tokens - 1;
    }
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        if (batch.logits[i] != 0) {
            return i;
        }
    }
    return batch.n_tokens;
}

// How one call decodes its batch.
struct decode_plan {
    int32_t step         = 0;     // most tokens per llama_decode call: the whole batch, or n_ubatch
    bool    with_state   = false; // a partial-state snapshot before each call (recurrent state)
    bool    budgeted     = false; // slices sized by the stop-time budget, at most `step`
    bool    outputs_last = false; // per-sequence bytes: outputs (and what follows them) go last
};

// Slices of n_ubatch tokens (one llama_decode each) let a stop roll back to a slice boundary where
// llama.cpp's own rollback is not exact: a graph stopped by the hook still returns 0, and a
// recurrent state is overwritten in place. llama.cpp keeps only the last call's outputs, so a
// batch is sliced only when no output is lost, and when outputs would move to other indices only
// if the caller reads them through the result (sliced_outputs). Pooled embeddings need the batch whole.
// A stop-time budget slices any batch whose only output is its last token (the slice sizes are
// not known in advance), and reads outputs as sliced_outputs does.
decode_plan make_plan(llama_context * ctx, const llama_batch & batch, const llama_cancel_decode_params & p) {
    decode_plan plan;
    plan.step       = batch.n_tokens;
    plan.with_state = llama_cancel::memory_checkpoint::needs_state(ctx);
    // Only these stops are undone to the start of a call (not ubatch by ubatch, as llama.cpp does).
    const bool call_rollback = p.hook != nullptr || plan.with_state;
    const int32_t n_ubatch = static_cast<int32_t>(llama_n_ubatch(ctx));
    const int32_t first    = first_output(ctx, batch);
    if (llama_pooling_type(ctx) != LLAMA_POOLING_TYPE_NONE) {
        return plan;
    }
    if (p.max_stop_ms > 0.0f && first >= batch.n_tokens - 1) {
        plan.step     = std::min(batch.n_tokens, n_ubatch);
        plan.budgeted = true;
        return plan;
    }
    if (!call_rollback || batch.n_tokens <= n_ubatch) {
        return plan;
    }
    const int32_t last_start = (batch.n_tokens - 1) / n_ubatch * n_ubatch;
    // With per-sequence bytes outputs are read through seq_output anyway: a server batch (each
    // sequence's last token an output) is sliced with its outputs moved to the last slice, so that a
    // sequence's stop undoes one ubatch, not the whole batch.
    if (p.seq_flags != nullptr && p.n_seq_flags > 0 && first < batch.n_tokens && llama_get_embeddings(ctx) == nullptr) {
        plan.step         = n_ubatch;
        plan.outputs_last = true;
        return plan;
    }
    if (first < last_start || (first < batch.n_tokens && !p.sliced_outputs)) {
        return plan;
    }
    plan.step = n_ubatch;
    return plan;
}

} // namespace

extern "C" llama_cancel_decode_params llama_cancel_decode_default_params(void) {
    llama_cancel_decode_params p{};
    p.sliced_outputs = false;
    return p;
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

std::vector<llama_pos> seq_pos_max(llama_context * ctx) {
    llama_memory_t mem = llama_get_memory(ctx);
    std::vector<llama_pos> pos(llama_n_seq_max(ctx), -1);
    for (size_t s = 0; s < pos.size(); ++s) {
        pos[s] = llama_memory_seq_pos_max(mem, static_cast<llama_seq_id>(s));
    }
    return pos;
}

// A token is committed when every sequence it belongs to holds its position in memory now.
// Returns the committed prefix; fills the per-sequence counts when asked.
int32_t count_committed(const llama_batch & batch, const std::vector<llama_pos> & pos, bool all,
                        const std::vector<llama_pos> & before, const std::vector<llama_pos> & after,
                        int32_t * n_committed_seq, int32_t n_seq) {
    int32_t n_prefix = 0;
    bool    prefix   = true;
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        bool committed = true;
        for (int32_t k = 0; k < batch_seq_count(batch, i) && !all; ++k) {
            const llama_seq_id s = batch_seq_of(batch, i, k);
            committed = committed && pos[i] > before[s] && pos[i] <= after[s];
        }
        prefix = prefix && committed;
        n_prefix += prefix ? 1 : 0;
        // Per sequence, a token counts where that sequence holds it: a token shared with a dropped
        // sequence is committed for the ones that keep it.
        for (int32_t k = 0; k < batch_seq_count(batch, i) && n_committed_seq != nullptr; ++k) {
            const llama_seq_id s = batch_seq_of(batch, i, k);
            if (s < n_seq && (all || (pos[i] > before[s] && pos[i] <= after[s]))) {
                n_committed_seq[s]++;
            }
        }
    }
    return n_prefix;
}

// Share of a stop-time budget the eval callbacks' checkpoint interval may take: a stop waits at
// most for the next checkpoint, its synchronize and the rollback.
constexpr double k_hook_budget_share = 0.7;

// Installs the call's abort callback, the hook's byte and (with a budget) a cap on the checkpoint
// interval of the hook and of this thread's stateless eval callback (whichever the context runs):
// the budget wins over the interval a checkpoint's round trip would call for. Puts back the
// caller's callback, the hook's byte and the caps however the call ends.
struct callbacks_guard {
    llama_context *                    ctx;
    const llama_cancel_decode_params & p;
    chained_abort                      chain;
    const int8_t *                     hook_flag;
    double                             hook_cap;
    double                             stateless_cap;

    callbacks_guard(llama_context * c, const llama_cancel_decode_params & params, llama_cancel::slice_budget & budget)
        : ctx(c), p(params), chain{p.flag, p.abort_callback, p.abort_callback_data, nullptr, {}},
          hook_flag(llama_cancel_hook_get_flag(p.hook)), hook_cap(llama_cancel::hook_cap_ms(p.hook)),
          stateless_cap(llama_cancel::stateless_cap_ms()) {
        if (budget.active()) {
            chain.budget = &budget;
        }
        if (p.max_stop_ms > 0.0f) {
            const double cap = k_hook_budget_share * p.max_stop_ms;
            llama_cancel::hook_set_cap_ms(p.hook, hook_cap > 0.0 ? std::min(hook_cap, cap) : cap);
            llama_cancel::stateless_set_cap_ms(stateless_cap > 0.0 ? std::min(stateless_cap, cap) : cap);
        }
        if (p.abort_callback != nullptr || chain.budget != nullptr || p.seq_flags != nullptr) {
            llama_set_abort_callback(ctx, chained_abort_callback, &chain);
        } else {
            // The exported reader itself: what FFI hosts register, and what the benchmark measures.
            llama_set_abort_callback(ctx, llama_cancel_abort_callback, const_cast<int8_t *>(p.flag));
        }
        llama_cancel_hook_set_flag(p.hook, p.flag);
    }
    // The bytes of the sequences in the next llama_decode call, for the abort callback and the hook.
    void watch(const std::vector<const int8_t *> & seq_flags) {
        chain.seq_flags = seq_flags;
        llama_cancel::hook_watch_seq_flags(p.hook, chain.seq_flags.data(), chain.seq_flags.size());
    }
    ~callbacks_guard() {
        llama_cancel::hook_watch_seq_flags(p.hook, nullptr, 0);
        llama_cancel::hook_set_cap_ms(p.hook, hook_cap);
        llama_cancel::stateless_set_cap_ms(stateless_cap);
        llama_cancel_hook_set_flag(p.hook, hook_flag);
        llama_set_abort_callback(ctx, p.abort_callback, p.abort_callback_data);
    }
    callbacks_guard(const callbacks_guard &) = delete;
    callbacks_guard & operator=(const callbacks_guard &) = delete;
};

struct outcome {
    int32_t ret        = 0;     // the last llama_decode's return
    bool    stopped    = false; // the byte (or the hook) stopped the batch before its end
    int32_t n_calls    = 0;     // llama_decode calls made
    bool    unsliced   = false; // a drop moved an output before the last slice: the rest went whole
    char    error[200] = {0};   // a snapshot or rollback that failed
};

// True when an eval callback stopped the graph of the call that just returned (llama_decode
// returns 0 then).
bool graph_stopped(const llama_cancel_decode_params & p) {
    const bool stateless = llama_cancel::take_stateless_stop(); // always taken: it is per call
    return llama_cancel_hook_stopped(p.hook) || stateless;
}

// Removes each (sequence, position) pair's sequence from that position on: a KV cache removes any
// suffix exactly.
void remove_from(llama_context * ctx, const std::vector<std::pair<llama_seq_id, llama_pos>> & from) {
    for (const auto & f : from) {
        llama_memory_seq_rm(llama_get_memory(ctx), f.first, f.second, -1);
    }
}

// After a sequence's byte aborted a llama_decode call over the next `n` pending tokens on a KV
// cache, where llama.cpp removed the ubatch in flight and kept the finished ones: those stay
// committed, minus the outputs of sequences that go on (and what follows them in each), removed
// here to be decoded again in a later call, whose outputs are the ones llama.cpp keeps. False when
// the finished ubatches cannot be kept exactly (then the call is rolled back to its start).
bool keep_finished_ubatches(llama_context * ctx, llama_cancel::pending_batch & pending, int32_t n) {
    std::vector<std::pair<llama_seq_id, llama_pos>> requeue;
    if (!pending.keep_held(n, seq_pos_max(ctx), llama_get_embeddings(ctx) != nullptr, requeue)) {
        return false;
    }
    remove_from(ctx, requeue);
    return true;
}

// A dropped sequence's seq_cancelled entry is stored at once, not when the call returns: its memory
// is final from here on, and a host thread watching the entry can answer that request now.
void announce_drops(const llama_cancel_decode_params & p, const llama_cancel::pending_batch & pending) {
    for (int32_t s = 0; p.seq_cancelled != nullptr && s < p.n_seq_flags; ++s) {
        if (pending.dropped(s)) {
            __atomic_store_n(&p.seq_cancelled[s], int8_t{1}, __ATOMIC_RELEASE);
        }
    }
}

// Runs the plan's llama_decode calls over the pending tokens; the byte (and the sequences' bytes)
// are also checked between them. A call stopped by a sequence's byte alone is undone and the
// decode goes on without that sequence.
outcome run_decode(llama_context * ctx, const llama_cancel_decode_params & p, const decode_plan & plan,
                   llama_cancel::slice_budget & budget, llama_cancel::pending_batch & pending,
                   callbacks_guard & calls) {
    outcome o;
    llama_cancel::memory_checkpoint checkpoint;
    for (;;) {
        if (pending.drop_flagged()) {
            announce_drops(p, pending);
        }
        if (pending.size() == 0) {
            break;
        }
        if (o.n_calls > 0 && llama_cancel::flag_is_set(p.flag)) {
            o.stopped = true;
            break;
        }
        int32_t n = std::min(plan.budgeted ? std::min(plan.step, budget.next()) : plan.step, pending.size());
        // A drop can move an output out of the last slice: the rest then goes in one call.
        if (n < pending.size() && pending.output_before_end(n, llama_get_embeddings(ctx) != nullptr)) {
            n = pending.size();
            o.unsliced = true;
        }
        // Positions are always noted (cheap): a graph a stateless cb_eval stopped is undone too.
        if (!checkpoint.capture(ctx, pending.seqs_in(n), plan.with_state)) {
            std::snprintf(o.error, sizeof(o.error), "could not copy the recurrent state before batch token %d",
                          pending.next_index());
            break;
        }
        // Every pending sequence's byte, not only those in this call: a host waits for the drop, and
        // a call without that sequence would otherwise run to its end first (the others redo it).
        calls.watch(pending.flags());
        llama_cancel_hook_reset(p.hook);
        llama_cancel::take_stateless_stop();
        llama_cancel::hook_take_longest_view_ms(p.hook);
        llama_cancel::take_stateless_longest_view_ms();
        budget.begin_call();
        o.ret = llama_decode(ctx, pending.next(n));
        o.n_calls++;
        // Nodes on a device are not timed by the abort callback: there the eval callback's time
        // between checkpoints is what a stop waits for.
        budget.end_call(n, std::max(llama_cancel::hook_take_longest_view_ms(p.hook),
                                    llama_cancel::take_stateless_longest_view_ms()));
        const bool graph = graph_stopped(p);
        const bool by_seq = (graph || o.ret == 2) && !llama_cancel::flag_is_set(p.flag) && pending.flagged();
        // A call a sequence's byte aborted on a KV cache keeps its finished ubatches, as a cancel
        // does: only the ubatch in flight is computed again.
        if (by_seq && o.ret == 2 && !graph && !plan.with_state && keep_finished_ubatches(ctx, pending, n)) {
            o.ret = 0;
            continue;
        }
        // llama.cpp undoes an aborted KV ubatch exactly by itself; a graph an eval callback stopped
        // (which returns 0), a recurrent state, and a sequence's stop whose finished ubatches cannot
        // be kept are put back here, to the start of this call.
        llama_seq_id failed = -1;
        if ((graph || by_seq || (plan.with_state && o.ret != 0)) && !checkpoint.restore(ctx, &failed)) {
            std::snprintf(o.error, sizeof(o.error),
                          "could not restore the state of sequence %d after the stop; that sequence was cleared",
                          failed);
            break;
        }
        if (by_seq) {
            o.ret = 0;
            continue; // a sequence's byte: the next turn drops it and decodes the rest again
        }
        // A token of several sequences in an aborted KV ubatch is still held by all but its first
        // (llama.cpp removes the ubatch's positions by each token's first sequence id): those go too.
        if (o.ret == 2 && !graph && !plan.with_state) {
            remove_from(ctx, pending.partly_held(n, seq_pos_max(ctx)));
        }
        if (graph || o.ret != 0) {
            o.stopped = graph || o.ret == 2;
            break;
        }
        pending.consume(n);
    }
    calls.watch({});
    return o;
}

// The per-sequence arrays of the params must match their count.
bool check_seq_params(const llama_cancel_decode_params & p, llama_cancel_decode_result * result) {
    if (p.n_seq_flags < 0) {
        fail(result, "n_seq_flags is %d; it must be 0 or more", p.n_seq_flags);
        return false;
    }
    if (p.n_seq_flags == 0 && (p.seq_flags != nullptr || p.seq_cancelled != nullptr || p.seq_output != nullptr)) {
        fail(result, "%s", "seq_flags, seq_cancelled and seq_output need n_seq_flags > 0 entries");
        return false;
    }
    return true;
}

// The per-sequence outputs as a call that drops nothing and reads nothing leaves them: every early
// return (a byte set on entry, a bad batch) reports that.
void clear_seq_outputs(const llama_cancel_decode_params & p) {
    for (int32_t s = 0; s < p.n_seq_flags; ++s) {
        if (p.seq_cancelled != nullptr) {
            __atomic_store_n(&p.seq_cancelled[s], int8_t{0}, __ATOMIC_RELEASE); // another thread may watch it
        }
        if (p.seq_output != nullptr) {
            p.seq_output[s] = -1;
        }
    }
}

// Which sequences were dropped, and where each one's last output can be read.
void report_seqs(llama_context * ctx, const llama_cancel_decode_params & p, const llama_cancel::pending_batch & pending,
                 int32_t status) {
    const bool embeddings = llama_get_embeddings(ctx) != nullptr;
    for (int32_t s = 0; s < p.n_seq_flags; ++s) {
        if (p.seq_cancelled != nullptr) {
            __atomic_store_n(&p.seq_cancelled[s], static_cast<int8_t>(pending.dropped(s) ? 1 : 0), __ATOMIC_RELEASE);
        }
        if (p.seq_output != nullptr && status == LLAMA_CANCEL_OK && !pending.dropped(s)) {
            p.seq_output[s] = pending.last_output_of(s, embeddings);
        }
    }
}

int32_t status_of(const outcome & o) {
    if (o.error[0] != 0 || (o.ret != 0 && o.ret != 2)) {
        return LLAMA_CANCEL_ERROR;
    }
    return o.stopped ? LLAMA_CANCEL_CANCELLED : LLAMA_CANCEL_OK;
}

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
    if (params != nullptr && !(params->max_stop_ms >= 0.0f)) {
        return fail(result, "max_stop_ms is %g; it must be 0 (no budget) or a positive number of ms",
                    static_cast<double>(params->max_stop_ms));
    }
    if (n_committed_seq != nullptr && n_seq <= 0) {
        return fail(result, "n_seq is %d; n_committed_seq needs at least one counter", n_seq);
    }
    if (params != nullptr && !check_seq_params(*params, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    if (params != nullptr) {
        clear_seq_outputs(*params);
    }
    if (!check_batch(ctx, batch, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    const llama_cancel_decode_params p = params != nullptr ? *params : llama_cancel_decode_default_params();
    if (llama_cancel::flag_is_set(p.flag)) {
        llama_cancel::set_status(result, LLAMA_CANCEL_CANCELLED, "%s", "");
        return LLAMA_CANCEL_CANCELLED;
    }

    const std::vector<llama_pos> before = seq_pos_max(ctx);
    const std::vector<llama_pos> pos    = token_positions(batch, before);
    const decode_plan plan = make_plan(ctx, batch, p);
    llama_cancel::slice_budget budget(plan.budgeted ? p.max_stop_ms : 0.0f, plan.step);
    llama_cancel::pending_batch pending(batch, pos, llama_model_n_embd_inp(llama_get_model(ctx)), p.seq_flags,
                                        p.n_seq_flags);
    if (plan.outputs_last) {
        pending.move_outputs_last();
    }
    outcome o;
    {
        callbacks_guard guard(ctx, p, budget);
        o = run_decode(ctx, p, plan, budget, pending, guard);
    }
    const int32_t status = pending.all_dropped() && o.error[0] == 0 ? LLAMA_CANCEL_CANCELLED : status_of(o);
    const bool    whole  = status == LLAMA_CANCEL_OK && pending.n_dropped() == 0;
    const int32_t n_prefix = count_committed(batch, pos, whole, before, seq_pos_max(ctx), n_committed_seq, n_seq);
    report_seqs(ctx, p, pending, status);
    if (result != nullptr) {
        result->status      = status;
        result->decode_ret  = o.ret;
        result->n_committed = n_prefix;
        result->output_base     = status == LLAMA_CANCEL_OK ? pending.last_call_base() : 0;
        result->n_seq_cancelled = pending.n_dropped();
        result->n_decode_calls  = o.n_calls;
        result->longest_node_ms = budget.longest_ms();
        result->budget_missed   = p.max_stop_ms > 0.0f && (!plan.budgeted || budget.missed() || o.unsliced);
        if (o.error[0] != 0) {
            std::snprintf(result->message, sizeof(result->message), "%s", o.error);
        } else if (status == LLAMA_CANCEL_ERROR) {
            std::snprintf(result->message, sizeof(result->message), "llama_decode returned %d: %s", o.ret,
                          decode_error_str(o.ret));
        }
    }
    return status;
}

// Output i of the batch that `result` describes, as llama.cpp indexes it after the last call.
template <typename Get> const float * output_ith(llama_context * ctx, const llama_cancel_decode_result * result,
                                                 int32_t i, Get get) {
    if (ctx == nullptr) {
        return nullptr;
    }
    if (result == nullptr || i < 0) {
        return get(ctx, i);
    }
    // After a sequence was dropped the committed prefix says nothing of later tokens: llama.cpp
    // checks the index against the last call's outputs itself.
    const bool whole = result->n_seq_cancelled == 0;
    if (result->status != LLAMA_CANCEL_OK || result->output_base < 0 || (whole && i >= result->n_committed) ||
        i < result->output_base) {
        return nullptr;
    }
    return get(ctx, i - result->output_base);
}

} // namespace

extern "C" int32_t llama_cancel_decode(
        llama_context                    * ctx,
        llama_batch                        batch,
        const llama_cancel_decode_params * params,
        llama_cancel_decode_result       * result,
        int32_t                          * n_committed_seq,
        int32_t                            n_seq) {
    // The callbacks guard has put the caller's abort callback and the hook's byte back by the time
    // an exception reaches abi_guard.
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return decode(ctx, batch, params, result, n_committed_seq, n_seq); });
}

extern "C" const float * llama_cancel_get_logits_ith(llama_context * ctx, const llama_cancel_decode_result * result,
                                                     int32_t i) {
    return output_ith(ctx, result, i, llama_get_logits_ith);
}

extern "C" const float * llama_cancel_get_embeddings_ith(llama_context * ctx,
                                                         const llama_cancel_decode_result * result, int32_t i) {
    return output_ith(ctx, result, i, llama_get_embeddings_ith);
}
