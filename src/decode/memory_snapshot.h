// What a set of sequences holds before a decode step, so that a stopped step is undone exactly.
//
// A KV cache is rolled back by removing the step's positions (llama_memory_seq_rm). A recurrent
// state (Mamba, RWKV, the recurrent layers of LFM2, Qwen3.5 and other hybrids) cannot be: the
// layers a stopped graph computed have already overwritten it in place, and llama.cpp refuses to
// remove part of it. For models with such state the snapshot also keeps each sequence's partial
// state (llama_state_seq_get_data_ext with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent part
// alone, whose size does not grow with the context) and writes it back before the positions go.
//
// No host copy where the context has a spare sequence id for each sequence of the call (empty, below
// n_seq_max): the sequence then shares its state cell with the spare one (llama_memory_seq_cp,
// bookkeeping only), llama.cpp moves the sequence to a free cell for the call (its graph copies the
// state there on the state's own device) and the old cell stays intact until release().
// Not on a hybrid model whose KV cache is split per sequence (a copy between streams would move the
// whole KV cache) nor where n_rs_seq keeps rollback planes.
//
// Otherwise the state is copied. The copy runs at memory speed; what costs is fresh memory: the first
// touch of each page of a new buffer (a page fault) costs far more than the copy. A hook therefore
// keeps its snapshots for every call made with it (hook.h), whose buffers stay allocated.
#pragma once

#include "llama-cancel.h"

#include <cstdint>
#include <vector>

namespace llama_cancel {

class memory_snapshot {
  public:
    // True when ctx's model keeps state that removing positions cannot undo.
    static bool needs_state(const llama_context * ctx);

    // Records, for each sequence in `seqs`, its last position and (when `with_state`) its partial
    // state: shared with spare sequences when `may_share` and the context has them, else copied
    // (buffers kept between captures). Releases the previous capture's spares first. False when
    // llama.cpp could not copy a state.
    bool capture(llama_context * ctx, const std::vector<llama_seq_id> & seqs, bool with_state, bool may_share = false);

    // Puts every captured sequence back: its state, then no position past the captured one. Waits
    // for the backends first. False when a state could not be written back; that sequence is then
    // cleared (empty, usable) and `failed_seq` names it.
    bool restore(llama_context * ctx, llama_seq_id * failed_seq);

    // Empties the spare sequences of the last capture (the call committed, or ends): the host never
    // sees them. Does nothing after a copy.
    void release();

    // A call that took no snapshot because it holds the step (runs it to its end).
    void note_held() { counters_.held_steps++; }

    // What the captures and restores through this snapshot copied, in all.
    const llama_cancel_snapshot_stats & counters() const { return counters_; }

  private:
    struct seq_state {
        llama_seq_id         seq     = 0;
        llama_pos            pos_max = -1;
        llama_seq_id         spare   = -1; // sharing its state cell; -1: copied (or positions only)
        std::vector<uint8_t> state;
        size_t               size = 0;
    };
    bool share(llama_context * ctx, const std::vector<llama_seq_id> & seqs);
    bool copy(llama_context * ctx);
    bool put_back(llama_context * ctx, const seq_state & s);

    std::vector<seq_state> seqs_;
    size_t                 n_      = 0;
    bool                   state_  = false;
    bool                   shared_ = false;
    llama_context *        ctx_    = nullptr; // of the last capture
    llama_cancel_snapshot_stats counters_{};
};

// Empties the spare sequences a snapshot shares state cells with when a call ends, however it ends.
struct snapshot_release {
    memory_snapshot & snapshot;
    ~snapshot_release() { snapshot.release(); }
};

} // namespace llama_cancel
