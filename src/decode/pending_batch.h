// The batch tokens a cancellable decode still has to decode, and the llama_batch of its next
// llama_decode call. Without per-sequence bytes that is a plain slice of the caller's batch. With
// them (llama_cancel_decode_params.seq_bytes) a sequence whose byte is set is dropped from the
// tokens not yet committed: a token of that sequence alone goes, a token shared with other
// sequences loses that sequence id; the next calls' batches are then copies with explicit positions.
#pragma once

#include "llama.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace llama_cancel {

// The sequences of batch token i as llama_decode reads them: seq_id[i][0, n_seq_id[i]), or
// sequence 0 alone when the batch gives none.
inline int32_t batch_seq_count(const llama_batch & batch, int32_t i) {
    return batch.seq_id == nullptr ? 1 : (batch.n_seq_id != nullptr ? batch.n_seq_id[i] : 1);
}
inline llama_seq_id batch_seq_of(const llama_batch & batch, int32_t i, int32_t k) {
    return batch.seq_id == nullptr ? 0 : batch.seq_id[i][k];
}

class pending_batch {
  public:
    // `pos`: every batch token's position (explicit, or as llama_decode would assign it; for
    // M-RoPE, section t). `n_pos_per_token`: the sections batch.pos holds (n_pos_per_token()).
    // `seq_bytes`: n_seq_bytes bytes indexed by sequence id, entries may be NULL; NULL: none.
    pending_batch(const llama_batch & batch, const std::vector<llama_pos> & pos, int32_t n_embd,
                  int32_t n_pos_per_token, const int8_t * const * seq_bytes, int32_t n_seq_bytes);

    bool    per_seq() const { return n_bytes_ > 0 && bytes_ != nullptr; }
    int32_t size() const { return static_cast<int32_t>(index_.size()) - next_; }
    // Batch index of the next token (the batch's size when none is left).
    int32_t next_index() const { return size() > 0 ? index_[next_] : batch_.n_tokens; }

    // Drops every sequence with tokens left whose byte is set now. True when one was dropped.
    bool drop_flagged();
    // True when the byte of a sequence with tokens left is set.
    bool flagged() const;
    // The sequences of the next `n` tokens, each once.
    std::vector<llama_seq_id> seqs_in(int32_t n) const;
    // True when no sequence has more than one of the next `n` tokens (a generation step).
    bool one_token_per_seq(int32_t n) const;
    // The bytes (not NULL) of the sequences with tokens left, for the abort callback and the hook
    // during the next call: a byte stops it even when its sequence's tokens come in a later call.
    const std::vector<const int8_t *> & call_bytes();
    // The next `n` tokens as a llama_batch: valid until the next call of next().
    llama_batch next(int32_t n);
    // The next `n` tokens are committed; remembers them as the last call's, for outputs.
    void consume(int32_t n);
    // After a llama_decode call over the next `n` tokens was aborted with its finished ubatches
    // kept (a KV cache), `pos_max` being each sequence's last position in memory now: the tokens
    // every one of whose sequences holds them are committed and leave the pending tokens, except
    // that a sequence not dropped gives back its committed outputs and what follows them (llama.cpp
    // keeps only the last call's outputs, so those are decoded again, after `requeue` names
    // (sequence, first position) for llama_memory_seq_rm). False, with nothing changed, when a
    // token is in memory for some of its sequences only or a token to decode again is shared.
    bool keep_in_memory(int32_t n, const std::vector<llama_pos> & pos_max, bool embeddings_context,
                   std::vector<std::pair<llama_seq_id, llama_pos>> & requeue);
    // After a llama_decode call over the next `n` tokens was aborted: for each sequence that holds a
    // token some of whose other sequences do not (llama.cpp removes an aborted ubatch's positions by
    // a token's first sequence id only), the first such position, from which it must be removed.
    std::vector<std::pair<llama_seq_id, llama_pos>> partly_in_memory(int32_t n, const std::vector<llama_pos> & pos_max) const;
    // True when one of the next `n` tokens, short of the last pending one, asks for an output.
    bool output_before_end(int32_t n, bool embeddings_context) const;

    bool    dropped(llama_seq_id s) const;
    int32_t n_dropped() const { return n_dropped_; }
    // True when every sequence the batch had tokens of was dropped.
    bool    all_dropped() const;
    // After the last call: the batch index of its first token when its tokens are consecutive
    // batch tokens (llama.cpp's index i - that); -1 when a drop left gaps.
    int32_t last_call_base() const;
    // llama.cpp's index (into the last call) of sequence s's last output there; -1 when none.
    int32_t last_output_of(llama_seq_id s, bool embeddings_context) const;

  private:
    bool is_output(int32_t i, int32_t n_call, int32_t k, bool embeddings_context) const;
    // cpos_ = the positions of the next `n` tokens, every section of them, section-major.
    void copy_positions(int32_t n);

    const llama_batch &            batch_;
    const std::vector<llama_pos> & pos_;
    int32_t                        n_embd_;
    int32_t                        n_pos_;  // positions per token in batch_.pos (M-RoPE embeddings: 4)
    const int8_t * const *         bytes_;
    int32_t                        n_bytes_;

    std::vector<int32_t>                   index_;  // batch indices still to decode, in order
    int32_t                                next_ = 0;
    std::vector<std::vector<llama_seq_id>> seqs_;   // per batch token: the sequences still wanted
    std::vector<bool>                      whole_;  // per batch token: no sequence dropped from it
    std::vector<bool>                      dropped_;
    int32_t                                n_dropped_ = 0;
    bool                                   gaps_     = false;
    std::vector<int32_t>                   last_call_; // batch indices of the last call's tokens

    // The copy next() hands out.
    std::vector<llama_token>   token_;
    std::vector<float>         embd_;
    std::vector<llama_pos>     cpos_;
    std::vector<int32_t>       n_seq_;
    std::vector<llama_seq_id *> seq_ptr_;
    std::vector<int8_t>        logits_;
    std::vector<const int8_t *> call_bytes_;
};

} // namespace llama_cancel
