#include "memory_checkpoint.h"

namespace llama_cancel {

bool memory_checkpoint::needs_state(const llama_context * ctx) {
    const llama_model * model = llama_get_model(ctx);
    return llama_model_is_recurrent(model) || llama_model_is_hybrid(model);
}

bool memory_checkpoint::capture(llama_context * ctx, const std::vector<llama_seq_id> & seqs, bool with_state) {
    llama_memory_t mem = llama_get_memory(ctx);
    if (seqs_.size() < seqs.size()) {
        seqs_.resize(seqs.size());
    }
    n_     = seqs.size();
    state_ = with_state;
    if (with_state) {
        llama_synchronize(ctx); // the previous call's graph may still be writing the state (GPU backends)
    }
    for (size_t i = 0; i < n_; ++i) {
        seq_state & s = seqs_[i];
        s.seq     = seqs[i];
        s.pos_max = llama_memory_seq_pos_max(mem, s.seq);
        s.size    = 0;
        if (!with_state) {
            continue;
        }
        const size_t need = llama_state_seq_get_size_ext(ctx, s.seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        if (s.state.size() < need) {
            s.state.resize(need);
        }
        s.size = llama_state_seq_get_data_ext(ctx, s.state.data(), need, s.seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        if (s.size != need) {
            return false;
        }
    }
    return true;
}

bool memory_checkpoint::restore(llama_context * ctx, llama_seq_id * failed_seq) {
    llama_synchronize(ctx); // a stopped graph's later splits may still run on an asynchronous backend
    llama_memory_t mem = llama_get_memory(ctx);
    bool ok = true;
    for (size_t i = 0; i < n_; ++i) {
        const seq_state & s = seqs_[i];
        bool seq_ok = true;
        if (state_) {
            seq_ok = llama_state_seq_set_data_ext(ctx, s.state.data(), s.size, s.seq,
                                                  LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == s.size;
        }
        // With the partial state back, removing the later positions is a plain KV removal.
        seq_ok = seq_ok && llama_memory_seq_rm(mem, s.seq, s.pos_max + 1, -1);
        if (!seq_ok) {
            llama_memory_seq_rm(mem, s.seq, -1, -1);
            if (ok && failed_seq != nullptr) {
                *failed_seq = s.seq;
            }
            ok = false;
        }
    }
    return ok;
}

size_t memory_checkpoint::state_bytes() const {
    size_t n = 0;
    for (size_t i = 0; i < n_; ++i) {
        n += seqs_[i].size;
    }
    return n;
}

} // namespace llama_cancel
