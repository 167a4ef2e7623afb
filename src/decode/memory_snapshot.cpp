#include "decode/memory_snapshot.h"

#include "checkpoints/clock.h"

#include <algorithm>

namespace llama_cancel {

namespace {

// Empty sequence ids outside `seqs` that may hold a shared state cell on ctx: none on a hybrid model
// with a KV stream per sequence (llama_n_ctx_seq < llama_n_ctx) or with n_rs_seq rollback planes.
std::vector<llama_seq_id> spare_seqs(llama_context * ctx, const std::vector<llama_seq_id> & seqs) {
    std::vector<llama_seq_id> spare;
    const bool split_kv = llama_model_is_hybrid(llama_get_model(ctx)) && llama_n_ctx_seq(ctx) < llama_n_ctx(ctx);
    if (split_kv || llama_n_rs_seq(ctx) != 0) {
        return spare;
    }
    llama_memory_t mem = llama_get_memory(ctx);
    const llama_seq_id n_seq_max = static_cast<llama_seq_id>(llama_n_seq_max(ctx));
    for (llama_seq_id s = 0; s < n_seq_max && spare.size() < seqs.size(); ++s) {
        if (std::find(seqs.begin(), seqs.end(), s) == seqs.end() && llama_memory_seq_pos_max(mem, s) < 0) {
            spare.push_back(s);
        }
    }
    return spare;
}

} // namespace

bool memory_snapshot::needs_state(const llama_context * ctx) {
    const llama_model * model = llama_get_model(ctx);
    return llama_model_is_recurrent(model) || llama_model_is_hybrid(model);
}

bool memory_snapshot::capture(llama_context * ctx, const std::vector<llama_seq_id> & seqs, bool with_state,
                                bool may_share) {
    release();
    llama_memory_t mem = llama_get_memory(ctx);
    if (seqs_.size() < seqs.size()) {
        seqs_.resize(seqs.size());
    }
    ctx_   = ctx;
    n_     = seqs.size();
    state_ = with_state;
    for (size_t i = 0; i < n_; ++i) {
        seqs_[i].seq     = seqs[i];
        seqs_[i].pos_max = mem != nullptr ? llama_memory_seq_pos_max(mem, seqs[i]) : -1; // encoders have none
        seqs_[i].spare   = -1;
        seqs_[i].size    = 0;
    }
    if (!with_state) {
        return true;
    }
    counters_.snapshots++;
    return (may_share && share(ctx, seqs)) || copy(ctx);
}

// Each of `seqs` (the captured ones) shares its state cell with a spare sequence; false (nothing
// done) without enough.
bool memory_snapshot::share(llama_context * ctx, const std::vector<llama_seq_id> & seqs) {
    const std::vector<llama_seq_id> spare = spare_seqs(ctx, seqs);
    if (spare.size() < n_) {
        return false;
    }
    llama_memory_t mem = llama_get_memory(ctx);
    for (size_t i = 0; i < n_; ++i) {
        seqs_[i].spare = spare[i];
        llama_memory_seq_cp(mem, seqs_[i].seq, spare[i], -1, -1);
    }
    shared_ = true;
    counters_.shared++;
    return true;
}

bool memory_snapshot::copy(llama_context * ctx) {
    llama_synchronize(ctx); // the previous call's graph may still be writing the state (GPU backends)
    const double t0 = now_ms();
    for (size_t i = 0; i < n_; ++i) {
        seq_state & s = seqs_[i];
        const size_t need = llama_state_seq_get_size_ext(ctx, s.seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        if (s.state.size() < need) {
            s.state.resize(need);
        }
        s.size = llama_state_seq_get_data_ext(ctx, s.state.data(), need, s.seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        counters_.bytes += s.size;
        if (s.size != need) {
            return false;
        }
    }
    counters_.copy_ms += now_ms() - t0;
    return true;
}

// One sequence back as captured: its state (from the shared cell or the copy), no later position.
bool memory_snapshot::put_back(llama_context * ctx, const seq_state & s) {
    llama_memory_t mem = llama_get_memory(ctx);
    if (mem == nullptr) {
        return true; // an encoder-only model's context: nothing to put back
    }
    if (s.spare >= 0) {
        // The sequence leaves the cells the stopped call wrote and shares the untouched ones again.
        llama_memory_seq_rm(mem, s.seq, -1, -1);
        llama_memory_seq_cp(mem, s.spare, s.seq, -1, -1);
        llama_memory_seq_rm(mem, s.spare, -1, -1);
        return llama_memory_seq_pos_max(mem, s.seq) == s.pos_max;
    }
    if (state_ && llama_state_seq_set_data_ext(ctx, s.state.data(), s.size, s.seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) !=
                      s.size) {
        return false;
    }
    // With the partial state back, removing the later positions is a plain KV removal.
    return llama_memory_seq_rm(mem, s.seq, s.pos_max + 1, -1);
}

bool memory_snapshot::restore(llama_context * ctx, llama_seq_id * failed_seq) {
    llama_synchronize(ctx); // a stopped graph's later splits may still run on an asynchronous backend
    if (state_) {
        counters_.restores++;
    }
    bool ok = true;
    for (size_t i = 0; i < n_; ++i) {
        const seq_state & s = seqs_[i];
        if (!put_back(ctx, s)) {
            llama_memory_seq_rm(llama_get_memory(ctx), s.seq, -1, -1);
            if (ok && failed_seq != nullptr) {
                *failed_seq = s.seq;
            }
            ok = false;
        }
        seqs_[i].spare = -1; // put back (or cleared): nothing left to release
    }
    shared_ = false;
    return ok;
}

void memory_snapshot::release() {
    if (!shared_) {
        return;
    }
    for (size_t i = 0; i < n_; ++i) {
        if (seqs_[i].spare >= 0) {
            llama_memory_seq_rm(llama_get_memory(ctx_), seqs_[i].spare, -1, -1);
            seqs_[i].spare = -1;
        }
    }
    shared_ = false;
}

} // namespace llama_cancel
