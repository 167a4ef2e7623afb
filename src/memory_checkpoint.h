// What a set of sequences holds before a decode step, so that a stopped step is undone exactly.
//
// A KV cache is rolled back by removing the step's positions (llama_memory_seq_rm). A recurrent
// state (Mamba, RWKV, the recurrent layers of LFM2, Qwen3.5 and other hybrids) cannot be: the
// layers a stopped graph computed have already overwritten it in place, and llama.cpp refuses to
// remove part of it. For models with such state the checkpoint also keeps each sequence's partial
// state (llama_state_seq_get_data_ext with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent part
// alone, whose size does not grow with the context) and writes it back before the positions go.
#pragma once

#include "llama.h"

#include <cstdint>
#include <vector>

namespace llama_cancel {

class memory_checkpoint {
  public:
    // True when ctx's model keeps state that removing positions cannot undo.
    static bool needs_state(const llama_context * ctx);

    // Records, for each sequence in `seqs`, its last position and (when `with_state`) its partial
    // state. Buffers are kept between captures. False when llama.cpp could not copy a state.
    bool capture(llama_context * ctx, const std::vector<llama_seq_id> & seqs, bool with_state);

    // Puts every captured sequence back: its state, then no position past the captured one. Waits
    // for the backends first. False when a state could not be written back; that sequence is then
    // cleared (empty, usable) and `failed_seq` names it.
    bool restore(llama_context * ctx, llama_seq_id * failed_seq);

    // Bytes of partial state held by the last capture.
    size_t state_bytes() const;

  private:
    struct seq_state {
        llama_seq_id         seq     = 0;
        llama_pos            pos_max = -1;
        std::vector<uint8_t> state;
        size_t               size = 0;
    };
    std::vector<seq_state> seqs_;
    size_t                 n_     = 0;
    bool                   state_ = false;
};

} // namespace llama_cancel
