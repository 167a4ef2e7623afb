// llama_cancel_decode and llama_cancel_encode: llama_decode / llama_encode under the caller's bytes,
// with committed-token accounting.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/abort_guard.h"
#include "checkpoints/call.h"
#include "decode/decode_batch.h"
#include "checkpoints/byte.h"
#include "checkpoints/hook.h"
#include "decode/memory_snapshot.h"
#include "decode/pending_batch.h"
#include "checkpoints/slice_budget.h"
#include "abi/status.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using llama_cancel::fail;
using llama_cancel::pending_batch;

const char * decode_error_str(int32_t ret) {
    switch (ret) {
        case 1:  return "no KV cache slot for the batch (reduce the batch or enlarge the context)";
        case -1: return "invalid input batch";
        default: return ret < -1 ? "fatal compute error" : "unexpected return value";
    }
}

// How one call decodes its batch.
struct decode_plan {
    int32_t step       = 0;     // tokens per llama_decode call while slicing: n_ubatch (or the budget's)
    int32_t sliced_end = 0;     // batch tokens before this index go `step` at a time, the rest in one call
    bool    with_state = false; // a partial-state snapshot before each call (recurrent state)
    bool    budgeted   = false; // slices sized by the stop-time budget, at most `step`
};

// llama.cpp undoes an aborted ubatch of a KV cache by itself, keeping the finished ones. Two stops it
// cannot undo: a graph an eval callback stopped (llama_decode returns 0, whichever callback the host
// bound: the library cannot see it before the graph runs) and recurrent state (overwritten in
// place). Those are undone here to the start of a llama_decode call, so every batch larger than
// n_ubatch goes one n_ubatch slice per call up to the slice of its first output, then the rest in one
// call: llama.cpp keeps only the last call's outputs, and the calls' ubatches are those of one whole
// call. Pooled embeddings need the whole batch. A stop-time budget sizes the slices of a batch whose
// only output is its last token.
decode_plan make_plan(llama_context * ctx, const llama_batch & batch, const llama_cancel_decode_params & p,
                      bool embeddings_mode, bool encode) {
    decode_plan plan;
    plan.step       = batch.n_tokens;
    plan.with_state = !encode && llama_cancel::memory_snapshot::needs_state(ctx);
    if (encode) {
        return plan; // one graph over the whole batch, which memory never holds
    }
    const int32_t n_ubatch = static_cast<int32_t>(llama_n_ubatch(ctx));
    const int32_t first    = llama_cancel::first_output(batch, embeddings_mode);
    if (llama_pooling_type(ctx) != LLAMA_POOLING_TYPE_NONE) {
        return plan;
    }
    if (p.max_stop_ms > 0.0f && first >= batch.n_tokens - 1) {
        plan.step       = std::min(batch.n_tokens, n_ubatch);
        plan.sliced_end = batch.n_tokens;
        plan.budgeted   = true;
        return plan;
    }
    if (batch.n_tokens > n_ubatch) {
        plan.step       = n_ubatch;
        plan.sliced_end = std::min(first, batch.n_tokens) / n_ubatch * n_ubatch;
    }
    return plan;
}

// Share of a stop-time budget the eval callbacks' checkpoint interval may take: a stop waits at
// most for the next checkpoint, its synchronize and the rollback.
constexpr double k_hook_budget_share = 0.7;

// How one llama_decode call ended, classified once.
enum class call_end {
    finished,    // every token of the call is in memory
    cancelled,   // the call's byte (or the caller's abort callback) stopped it
    seq_stopped, // only a pending sequence's byte stopped it: drop that sequence and go on
    failed,      // llama_decode failed
};

call_end classify(int32_t ret, bool eval_stopped, bool byte_set, bool seq_flagged) {
    if (ret != 0 && ret != 2) {
        return call_end::failed;
    }
    if (ret == 0 && !eval_stopped) {
        return call_end::finished;
    }
    return byte_set || !seq_flagged ? call_end::cancelled : call_end::seq_stopped;
}

struct outcome {
    int32_t ret        = 0;     // the last llama_decode's return
    bool    stopped    = false; // the byte stopped the batch before its end
    int32_t n_calls    = 0;     // llama_decode calls made
    int32_t reach      = LLAMA_CANCEL_REACH_GRAPH; // where the bytes were read (the worst graph)
    bool    unsliced   = false; // a drop moved an output before the last slice: the rest went whole
    char    error[200] = {0};   // a snapshot or rollback that failed
};

// Removes each (sequence, position) pair's sequence from that position on.
void remove_from(llama_context * ctx, const std::vector<std::pair<llama_seq_id, llama_pos>> & from) {
    for (const auto & f : from) {
        llama_memory_seq_rm(llama_get_memory(ctx), f.first, f.second, -1);
    }
}

// The state of one decode: its plan, pending tokens, snapshot and the call the callbacks see.
struct decode_run {
    llama_context *                    ctx;
    const llama_cancel_decode_params & p;
    const llama_batch &                batch;
    decode_plan                        plan;
    llama_cancel::slice_budget &       budget;
    pending_batch &                    pending;
    llama_cancel::call &               call;
    llama_cancel::memory_snapshot &    snapshot; // the hook's, kept across calls, or this call's
    llama_cancel_seq_result *          seqs;     // the caller's per-sequence results, or NULL
    bool                               embd_mode; // the context outputs embeddings (as last known)
    bool                               encode;    // llama_encode, not llama_decode
    outcome                            o{};

    bool embeddings() const { return embd_mode; }

    int32_t next_size() {
        if (pending.next_index() >= plan.sliced_end) {
            return pending.size();
        }
        int32_t n = std::min(plan.budgeted ? std::min(plan.step, budget.next()) : plan.step, pending.size());
        // A drop can move an output out of the last slice: the rest then goes in one call.
        if (n < pending.size() && pending.output_before_end(n, embeddings())) {
            n = pending.size();
            o.unsliced = true;
        }
        return n;
    }

    // Puts memory back to the start of the last call. False (with the error noted) when a recurrent
    // state could not be written back.
    bool undo_call() {
        llama_seq_id failed = -1;
        if (snapshot.restore(ctx, &failed)) {
            return true;
        }
        std::snprintf(o.error, sizeof(o.error),
                      "could not restore the state of sequence %d after the stop; that sequence was cleared", failed);
        return false;
    }

    // After a sequence's byte aborted a call on a KV cache, where llama.cpp kept the finished
    // ubatches: those stay, minus the survivors' outputs (and what follows them), removed to be
    // decoded again in a later call, whose outputs are the ones llama.cpp keeps.
    bool keep_finished_ubatches(int32_t n) {
        std::vector<std::pair<llama_seq_id, llama_pos>> requeue;
        if (!pending.keep_in_memory(n, llama_cancel::seq_pos_max(ctx), embeddings(), requeue)) {
            return false;
        }
        remove_from(ctx, requeue);
        return true;
    }

    // A generation step (at most one token per sequence) on recurrent state: cheaper to let it run to
    // its end than to copy the state before it, and a stop then waits one step at most. Not with
    // the host's own abort callback, which may ask for a stop inside the graph.
    bool holds(int32_t n) const {
        return plan.with_state && call.abort_callback == nullptr && pending.one_token_per_seq(n);
    }

    // The context turned out to output embeddings (llama_set_embeddings since its last decode) after
    // a first slice of a batch without logits flags, whose every token is then an output: that slice
    // is undone and the batch goes whole, so that every output stays readable.
    bool embeddings_came_on(int32_t n) {
        embd_mode = llama_cancel::embeddings_mode(ctx);
        return batch.logits == nullptr && embd_mode && o.n_calls == 1 && n < pending.size();
    }

    // One llama_decode over the next n pending tokens.
    int32_t decode_next(int32_t n) {
        // Every pending sequence's byte, not only those in this call: a host waits for the drop.
        call.seq_bytes = pending.call_bytes();
        call.begin_graph();
        budget.begin_call();
        const llama_batch slice = pending.next(n);
        const int32_t     ret   = encode ? llama_encode(ctx, slice) : llama_decode(ctx, slice);
        llama_synchronize(ctx); // a GPU API computes on past the return: the policy times the end
        call.graph_returned(encode || llama_cancel::first_output(slice, embd_mode) < slice.n_tokens);
        if (ret == 0 || ret == 2) {
            o.reach = std::max(o.reach, call.graph_reach()); // the worst of the call's graphs
        }
        o.n_calls++;
        // Device nodes are not timed by the abort callback: there the eval callbacks' time between
        // checkpoints is what a stop waits for.
        budget.end_call(n, call.longest_view_ms);
        return ret;
    }

    // Handles the end of a call over n tokens; false when the decode is over.
    bool settle(int32_t n, int32_t ret) {
        const bool aborted_kv = ret == 2 && !call.eval_stopped && !plan.with_state && !encode &&
                                llama_get_memory(ctx) != nullptr;
        if (call.wrong_hook) {
            undo_call();
            std::snprintf(o.error, sizeof(o.error), "%s",
                          "params.hook is not the hook bound to this context; nothing was decoded");
            return false;
        }
        switch (classify(ret, call.eval_stopped, llama_cancel::byte_is_set(p.byte), pending.flagged())) {
            case call_end::finished:
                if (embeddings_came_on(n)) {
                    plan.sliced_end = 0;
                    return undo_call();
                }
                pending.consume(n);
                return true;
            case call_end::seq_stopped:
                // The next turn drops the sequence; the others keep what is committed.
                return (aborted_kv && keep_finished_ubatches(n)) || undo_call();
            case call_end::cancelled:
                o.stopped = true;
                if (aborted_kv) {
                    // llama.cpp removes an aborted ubatch's positions by each token's first sequence
                    // id only: the other sequences of such a token lose it here.
                    remove_from(ctx, pending.partly_in_memory(n, llama_cancel::seq_pos_max(ctx)));
                    return false;
                }
                undo_call();
                return false;
            case call_end::failed:
                if (plan.with_state && !call.hold) {
                    undo_call();
                }
                return false;
        }
        return false;
    }

    void run() {
        for (;;) {
            if (pending.drop_flagged()) {
                announce_drops();
            }
            if (pending.size() == 0) {
                break;
            }
            if (o.n_calls > 0 && llama_cancel::byte_is_set(p.byte)) {
                o.stopped = true;
                break;
            }
            const int32_t n = next_size();
            call.hold = holds(n);
            if (call.hold) {
                snapshot.note_held();
            }
            // Positions are always noted (cheap): a graph a stateless cb_eval stopped is undone too.
            if (!snapshot.capture(ctx, pending.seqs_in(n), plan.with_state && !call.hold, true)) {
                std::snprintf(o.error, sizeof(o.error), "could not copy the recurrent state before batch token %d",
                              pending.next_index());
                break;
            }
            o.ret = decode_next(n);
            const bool held_stop = call.hold && call.held_stop;
            const bool more      = settle(n, o.ret);
            call.hold = false;
            if (!more) {
                break;
            }
            if (held_stop && pending.size() > 0) {
                o.stopped = true; // the chained cb_eval's stop, after the held step committed
                break;
            }
            o.ret = o.ret == 2 ? 0 : o.ret; // a sequence's stop, handled: the decode goes on
        }
        call.seq_bytes.clear();
    }

    // A dropped sequence's entry is stored at once: its memory is final from here on, and a host
    // thread watching the entry can answer that request now.
    void announce_drops() {
        for (int32_t s = 0; seqs != nullptr && s < p.n_seq; ++s) {
            if (pending.dropped(s)) {
                llama_cancel::store_release(&seqs[s].cancelled, 1);
            }
        }
    }
};

bool check_params(const llama_cancel_decode_params & p, llama_cancel_decode_result * result) {
    if (!(p.max_stop_ms >= 0.0f)) {
        fail(result, "max_stop_ms is %g; it must be 0 (no budget) or a positive number of ms",
             static_cast<double>(p.max_stop_ms));
        return false;
    }
    if (p.n_seq < 0) {
        fail(result, "n_seq is %d; it must be 0 or more", p.n_seq);
        return false;
    }
    if (p.n_seq == 0 && p.seq_bytes != nullptr) {
        fail(result, "%s", "seq_bytes needs n_seq > 0 entries");
        return false;
    }
    return true;
}

// The per-sequence results as a call that drops nothing and reads nothing leaves them.
void clear_seqs(llama_cancel_seq_result * seqs, int32_t n) {
    for (int32_t s = 0; seqs != nullptr && s < n; ++s) {
        seqs[s].n_committed = 0;
        seqs[s].output      = -1;
        llama_cancel::store_release(&seqs[s].cancelled, 0); // another thread may watch it
    }
}

// Which sequences were dropped, what each holds, and where each one's last output can be read.
void report_seqs(llama_context * ctx, const llama_cancel_decode_params & p, const pending_batch & pending,
                 int32_t status, const std::vector<int32_t> & committed, llama_cancel_seq_result * seqs) {
    const bool embeddings = llama_get_embeddings(ctx) != nullptr;
    for (int32_t s = 0; seqs != nullptr && s < p.n_seq; ++s) {
        seqs[s].n_committed = committed[s];
        seqs[s].output      = status == LLAMA_CANCEL_OK && !pending.dropped(s) ? pending.last_output_of(s, embeddings) : -1;
        llama_cancel::store_release(&seqs[s].cancelled, pending.dropped(s) ? 1 : 0);
    }
}

int32_t status_of(const outcome & o, const pending_batch & pending) {
    if (o.error[0] != 0 || (o.ret != 0 && o.ret != 2)) {
        return LLAMA_CANCEL_ERROR;
    }
    return o.stopped || pending.all_dropped() ? LLAMA_CANCEL_CANCELLED : LLAMA_CANCEL_OK;
}

void report(llama_cancel_decode_result * result, const outcome & o, int32_t status, int32_t n_prefix,
            const pending_batch & pending, const llama_cancel::slice_budget & budget, bool budget_missed) {
    if (result == nullptr) {
        return;
    }
    result->status          = status;
    result->decode_ret      = o.ret;
    result->n_committed     = n_prefix;
    result->output_base     = status == LLAMA_CANCEL_OK ? pending.last_call_base() : 0;
    result->n_seq_cancelled = pending.n_dropped();
    result->reach           = o.reach;
    result->n_decode_calls  = o.n_calls;
    result->longest_node_ms = budget.longest_ms();
    result->budget_missed   = budget_missed ? 1 : 0;
    if (o.error[0] != 0) {
        std::snprintf(result->message, sizeof(result->message), "%s", o.error);
    } else if (status == LLAMA_CANCEL_ERROR) {
        std::snprintf(result->message, sizeof(result->message), "llama_decode returned %d: %s", o.ret,
                      decode_error_str(o.ret));
    }
}

// An encode (llama_encode, or llama_decode on a context without memory, which encodes) is one graph
// over the whole batch: llama.cpp asserts, ending the process, when the batch exceeds n_ubatch.
bool check_encode(llama_context * ctx, const llama_batch & batch, const llama_cancel_decode_params & p, bool encode,
                  llama_cancel_decode_result * result) {
    if (!encode && llama_get_memory(ctx) != nullptr) {
        return true;
    }
    if (encode && !llama_model_has_encoder(llama_get_model(ctx))) {
        fail(result, "%s", "the model has no encoder (llama_model_has_encoder): decode its batches instead");
        return false;
    }
    const uint32_t n_ubatch = llama_n_ubatch(ctx);
    if (static_cast<uint32_t>(batch.n_tokens) > n_ubatch) {
        fail(result, "batch has %d tokens, more than the context's n_ubatch %u: an encode is one ubatch (raise "
                     "n_ubatch, or use llama_cancel_embed, which groups whole sequences)", batch.n_tokens, n_ubatch);
        return false;
    }
    if (encode && (p.seq_bytes != nullptr || p.max_stop_ms > 0.0f)) {
        fail(result, "%s", "an encode is one graph: seq_bytes and max_stop_ms are for decodes");
        return false;
    }
    return true;
}

int32_t decode(llama_context * ctx, llama_batch batch, const llama_cancel_decode_params & p,
               llama_cancel_decode_result * result, llama_cancel_seq_result * seqs, bool encode) {
    if (ctx == nullptr) {
        return fail(result, "ctx is NULL");
    }
    if (!check_params(p, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    clear_seqs(seqs, p.n_seq);
    const std::vector<char> bad = llama_cancel::check_batch(ctx, batch);
    if (!bad.empty()) {
        return fail(result, "%s", bad.data());
    }
    if (!check_encode(ctx, batch, p, encode, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    if (llama_cancel::byte_is_set(p.byte)) {
        llama_cancel::set_status(result, LLAMA_CANCEL_CANCELLED, "%s", "");
        return LLAMA_CANCEL_CANCELLED;
    }

    const std::vector<llama_pos> before = llama_cancel::seq_pos_max(ctx);
    const std::vector<llama_pos> pos    = llama_cancel::token_positions(batch, before);
    const bool        embd_mode = llama_cancel::embeddings_mode(ctx);
    const decode_plan plan      = make_plan(ctx, batch, p, embd_mode, encode);
    llama_cancel::slice_budget budget(plan.budgeted ? p.max_stop_ms : 0.0f, plan.step);
    pending_batch pending(batch, pos, llama_model_n_embd_inp(llama_get_model(ctx)),
                          llama_cancel::n_pos_per_token(ctx, batch), p.seq_bytes, p.n_seq);

    llama_cancel::call call;
    call.byte = p.byte;
    call.hook = p.hook;
    const llama_cancel::host_abort host = llama_cancel::host_abort_of(p.abort_callback, p.abort_callback_data, p.hook);
    call.abort_callback  = host.callback;
    call.abort_data      = host.data;
    call.cap_ms          = p.max_stop_ms > 0.0f ? k_hook_budget_share * p.max_stop_ms : 0.0;
    call.budget          = budget.active() ? &budget : nullptr;
    call.abort_installed = true; // abort_guard below
    llama_cancel::memory_snapshot   own;
    llama_cancel::memory_snapshot * kept = llama_cancel::hook_decode_snapshot(p.hook);
    decode_run run{ctx, p, batch, plan, budget, pending, call, kept != nullptr ? *kept : own, seqs, embd_mode, encode};
    {
        llama_cancel::call_scope scope(call);
        llama_cancel::abort_guard guard(ctx, call, p.abort_callback, p.abort_callback_data);
        llama_cancel::snapshot_release spares{run.snapshot};
        run.run();
    }
    const int32_t status = status_of(run.o, pending);
    const bool    whole  = status == LLAMA_CANCEL_OK && pending.n_dropped() == 0;
    std::vector<int32_t> committed(std::max(p.n_seq, 0), 0);
    const int32_t n_prefix = llama_cancel::count_committed(batch, pos, whole, before, llama_cancel::seq_pos_max(ctx),
                                                           committed.data(), p.n_seq);
    report_seqs(ctx, p, pending, status, committed, seqs);
    const bool missed = p.max_stop_ms > 0.0f && (!plan.budgeted || budget.missed() || run.o.unsliced);
    report(result, run.o, status, n_prefix, pending, budget, missed);
    return status;
}

// Output i of the batch that `result` describes, as llama.cpp indexes it after the last call: every
// output of the batch is in the last call unless a sequence was dropped (output_base -1).
template <typename Get> const float * output_ith(llama_context * ctx, const llama_cancel_decode_result * result,
                                                 int32_t i, Get get) {
    if (ctx == nullptr) {
        return nullptr;
    }
    if (result == nullptr) {
        return get(ctx, i);
    }
    if (result->status != LLAMA_CANCEL_OK || result->output_base < 0) {
        return nullptr;
    }
    if (i < 0) {
        return get(ctx, i); // from the last output, which llama.cpp checks
    }
    // After a sequence was dropped the committed prefix says nothing of later tokens: llama.cpp
    // checks the index against the last call's outputs itself.
    const bool whole = result->n_seq_cancelled == 0;
    if ((whole && i >= result->n_committed) || i < result->output_base) {
        return nullptr;
    }
    return get(ctx, i - result->output_base);
}

} // namespace

extern "C" llama_cancel_decode_params llama_cancel_decode_default_params(void) {
    return llama_cancel_decode_params{};
}

extern "C" const char * llama_cancel_status_str(int32_t status) {
    switch (status) {
        case LLAMA_CANCEL_OK:        return "ok";
        case LLAMA_CANCEL_CANCELLED: return "cancelled";
        case LLAMA_CANCEL_ERROR:     return "error";
        default:                     return "unknown";
    }
}

extern "C" int32_t llama_cancel_decode(llama_context * ctx, llama_batch batch, const llama_cancel_decode_params * params,
                                       llama_cancel_decode_result * result, llama_cancel_seq_result * seqs) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    const llama_cancel_decode_params p = params != nullptr ? *params : llama_cancel_decode_default_params();
    // The guards have put the caller's abort callback back by the time an exception reaches abi_guard.
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return decode(ctx, batch, p, result, seqs, false); });
}

extern "C" int32_t llama_cancel_encode(llama_context * ctx, llama_batch batch, const llama_cancel_decode_params * params,
                                       llama_cancel_decode_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    const llama_cancel_decode_params p = params != nullptr ? *params : llama_cancel_decode_default_params();
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return decode(ctx, batch, p, result, nullptr, true); });
}

extern "C" const float * llama_cancel_get_logits_ith(llama_context * ctx, const llama_cancel_decode_result * result,
                                                     int32_t i) {
    return output_ith(ctx, result, i, llama_get_logits_ith);
}

extern "C" const float * llama_cancel_get_embeddings_ith(llama_context * ctx,
                                                         const llama_cancel_decode_result * result, int32_t i) {
    return output_ith(ctx, result, i, llama_get_embeddings_ith);
}
