#include "decode/pending_batch.h"

#include "checkpoints/byte.h"
#include "decode/decode_batch.h"

#include <algorithm>

namespace llama_cancel {

pending_batch::pending_batch(const llama_batch & batch, const std::vector<llama_pos> & pos, int32_t n_embd,
                             int32_t n_pos_per_token, const int8_t * const * seq_bytes, int32_t n_seq_bytes)
    : batch_(batch), pos_(pos), n_embd_(n_embd), n_pos_(batch.pos != nullptr ? n_pos_per_token : 1), bytes_(seq_bytes),
      n_bytes_(seq_bytes != nullptr ? n_seq_bytes : 0) {
    index_.resize(batch.n_tokens);
    seqs_.resize(batch.n_tokens);
    whole_.assign(batch.n_tokens, true);
    for (int32_t i = 0; i < batch.n_tokens; ++i) {
        index_[i] = i;
        for (int32_t k = 0; k < batch_seq_count(batch, i); ++k) {
            seqs_[i].push_back(batch_seq_of(batch, i, k));
        }
    }
    dropped_.assign(n_bytes_, false);
}

bool pending_batch::dropped(llama_seq_id s) const {
    return s >= 0 && s < static_cast<llama_seq_id>(dropped_.size()) && dropped_[s];
}

bool pending_batch::drop_flagged() {
    if (!per_seq()) {
        return false;
    }
    std::vector<llama_seq_id> now;
    for (llama_seq_id s : seqs_in(size())) {
        if (s < n_bytes_ && byte_is_set(bytes_[s])) {
            now.push_back(s);
        }
    }
    if (now.empty()) {
        return false;
    }
    std::vector<int32_t> kept(index_.begin(), index_.begin() + next_);
    for (int32_t j = next_; j < static_cast<int32_t>(index_.size()); ++j) {
        auto & seqs = seqs_[index_[j]];
        const size_t before = seqs.size();
        seqs.erase(std::remove_if(seqs.begin(), seqs.end(),
                                  [&](llama_seq_id s) { return std::find(now.begin(), now.end(), s) != now.end(); }),
                   seqs.end());
        whole_[index_[j]] = whole_[index_[j]] && seqs.size() == before;
        gaps_ = gaps_ || seqs.size() != before;
        if (!seqs.empty()) {
            kept.push_back(index_[j]);
        }
    }
    index_.swap(kept);
    for (llama_seq_id s : now) {
        dropped_[s] = true;
        n_dropped_++;
    }
    return true;
}

bool pending_batch::flagged() const {
    if (!per_seq()) {
        return false;
    }
    for (llama_seq_id s : seqs_in(size())) {
        if (s < n_bytes_ && byte_is_set(bytes_[s])) {
            return true;
        }
    }
    return false;
}

bool pending_batch::one_token_per_seq(int32_t n) const {
    std::vector<llama_seq_id> seen;
    for (int32_t k = 0; k < n; ++k) {
        for (const llama_seq_id s : seqs_[index_[next_ + k]]) {
            if (std::find(seen.begin(), seen.end(), s) != seen.end()) {
                return false;
            }
            seen.push_back(s);
        }
    }
    return true;
}

std::vector<llama_seq_id> pending_batch::seqs_in(int32_t n) const {
    std::vector<llama_seq_id> seqs;
    for (int32_t j = next_; j < next_ + n && j < static_cast<int32_t>(index_.size()); ++j) {
        for (const llama_seq_id s : seqs_[index_[j]]) {
            if (std::find(seqs.begin(), seqs.end(), s) == seqs.end()) {
                seqs.push_back(s);
            }
        }
    }
    return seqs;
}

const std::vector<const int8_t *> & pending_batch::call_bytes() {
    call_bytes_.clear();
    for (llama_seq_id s : seqs_in(size())) {
        if (s < n_bytes_ && bytes_[s] != nullptr) {
            call_bytes_.push_back(bytes_[s]);
        }
    }
    return call_bytes_;
}

void pending_batch::copy_positions(int32_t n) {
    cpos_.clear();
    for (int32_t s = 0; s < n_pos_; ++s) {
        for (int32_t j = next_; j < next_ + n; ++j) {
            const int32_t i = index_[j];
            cpos_.push_back(n_pos_ == 1 ? pos_[i] : batch_.pos[static_cast<size_t>(s) * batch_.n_tokens + i]);
        }
    }
}

llama_batch pending_batch::next(int32_t n) {
    if (!gaps_) {
        llama_batch b = batch_slice(batch_, index_[next_], n, n_embd_); // untouched so far: the caller's arrays
        if (n_pos_ > 1 && n < batch_.n_tokens) {
            copy_positions(n); // sections of n_tokens each: a slice needs its own, n each
            b.pos = cpos_.data();
        }
        return b;
    }
    token_.clear(), embd_.clear(), n_seq_.clear(), seq_ptr_.clear(), logits_.clear();
    for (int32_t j = next_; j < next_ + n; ++j) {
        const int32_t i = index_[j];
        if (batch_.token != nullptr) {
            token_.push_back(batch_.token[i]);
        } else {
            embd_.insert(embd_.end(), batch_.embd + static_cast<size_t>(i) * n_embd_,
                         batch_.embd + static_cast<size_t>(i + 1) * n_embd_);
        }
        n_seq_.push_back(static_cast<int32_t>(seqs_[i].size()));
        seq_ptr_.push_back(seqs_[i].data());
        if (batch_.logits != nullptr) {
            logits_.push_back(batch_.logits[i]);
        }
    }
    copy_positions(n);
    llama_batch b{};
    b.n_tokens = n;
    b.token    = batch_.token != nullptr ? token_.data() : nullptr;
    b.embd     = batch_.token != nullptr ? nullptr : embd_.data();
    b.pos      = cpos_.data();
    b.n_seq_id = n_seq_.data();
    b.seq_id   = seq_ptr_.data();
    b.logits   = batch_.logits != nullptr ? logits_.data() : nullptr;
    return b;
}

void pending_batch::consume(int32_t n) {
    last_call_.assign(index_.begin() + next_, index_.begin() + next_ + n);
    next_ += n;
}

bool pending_batch::keep_in_memory(int32_t n, const std::vector<llama_pos> & pos_max, bool embeddings_context,
                              std::vector<std::pair<llama_seq_id, llama_pos>> & requeue) {
    // Filled here and handed out only on success: a false leaves the caller's vector as it was.
    std::vector<std::pair<llama_seq_id, llama_pos>> again_from;
    std::vector<bool> in_memory(n);
    for (int32_t k = 0; k < n; ++k) {
        const int32_t i = index_[next_ + k];
        in_memory[k] = pos_[i] <= pos_max[seqs_[i][0]];
        for (const llama_seq_id s : seqs_[i]) {
            if ((pos_[i] <= pos_max[s]) != in_memory[k]) {
                return false; // llama.cpp removes an aborted ubatch's positions by its first sequence id only
            }
        }
        // An output in memory of a sequence that goes on: from it on, that sequence is decoded again.
        const bool output = is_output(i, n, k, embeddings_context);
        for (const llama_seq_id s : seqs_[i]) {
            const bool going_on = !(s < n_bytes_ && byte_is_set(bytes_[s]));
            const bool seen = std::any_of(again_from.begin(), again_from.end(), [&](const auto & r) { return r.first == s; });
            if (in_memory[k] && output && going_on && !seen) {
                again_from.emplace_back(s, pos_[i]);
            }
        }
    }
    const auto again = [&](int32_t i) {
        return std::any_of(seqs_[i].begin(), seqs_[i].end(), [&](llama_seq_id s) {
            return std::any_of(again_from.begin(), again_from.end(),
                               [&](const auto & r) { return r.first == s && pos_[i] >= r.second; });
        });
    };
    std::vector<bool> committed(batch_.n_tokens, false); // by batch index
    for (int32_t k = 0; k < n; ++k) {
        const int32_t i = index_[next_ + k];
        if (again(i) && seqs_[i].size() > 1) {
            return false; // removing it from one sequence would leave it in the others
        }
        committed[i] = in_memory[k] && !again(i);
    }
    const auto first = index_.begin() + next_;
    const auto rest  = std::stable_partition(first, first + n, [&](int32_t i) { return committed[i]; });
    next_ += static_cast<int32_t>(rest - first);
    gaps_ = gaps_ || rest != first;
    requeue = std::move(again_from);
    return true;
}

std::vector<std::pair<llama_seq_id, llama_pos>> pending_batch::partly_in_memory(int32_t n,
                                                                          const std::vector<llama_pos> & pos_max) const {
    std::vector<std::pair<llama_seq_id, llama_pos>> from;
    for (int32_t k = 0; k < n; ++k) {
        const int32_t i    = index_[next_ + k];
        const auto &  seqs = seqs_[i];
        const bool    some = std::any_of(seqs.begin(), seqs.end(), [&](llama_seq_id s) { return pos_[i] <= pos_max[s]; });
        const bool    all  = std::all_of(seqs.begin(), seqs.end(), [&](llama_seq_id s) { return pos_[i] <= pos_max[s]; });
        for (const llama_seq_id s : seqs) {
            const bool seen = std::any_of(from.begin(), from.end(), [&](const auto & f) { return f.first == s; });
            if (some && !all && pos_[i] <= pos_max[s] && !seen) {
                from.emplace_back(s, pos_[i]);
            }
        }
    }
    return from;
}

bool pending_batch::output_before_end(int32_t n, bool embeddings_context) const {
    for (int32_t j = next_; j < next_ + n && j + 1 < static_cast<int32_t>(index_.size()); ++j) {
        const int32_t i = index_[j];
        if (is_output(i, 0, 0, embeddings_context)) {
            return true;
        }
    }
    return false;
}

bool pending_batch::all_dropped() const {
    if (n_dropped_ == 0) {
        return false;
    }
    // Every sequence of the batch, including tokens committed before its drop.
    for (int32_t i = 0; i < batch_.n_tokens; ++i) {
        for (int32_t k = 0; k < batch_seq_count(batch_, i); ++k) {
            if (!dropped(batch_seq_of(batch_, i, k))) {
                return false;
            }
        }
    }
    return true;
}

int32_t pending_batch::last_call_base() const {
    if (last_call_.empty()) {
        return -1;
    }
    const int32_t n = static_cast<int32_t>(last_call_.size());
    const bool consecutive = last_call_.back() - last_call_.front() == n - 1;
    const bool whole = std::all_of(last_call_.begin(), last_call_.end(), [&](int32_t i) { return whole_[i]; });
    return consecutive && whole ? last_call_.front() : -1;
}

bool pending_batch::is_output(int32_t i, int32_t n_call, int32_t k, bool embeddings_context) const {
    if (batch_.logits != nullptr) {
        return batch_.logits[i] != 0;
    }
    return embeddings_context || k == n_call - 1;
}

int32_t pending_batch::last_output_of(llama_seq_id s, bool embeddings_context) const {
    const int32_t n_call = static_cast<int32_t>(last_call_.size());
    int32_t found = -1;
    for (int32_t k = 0; k < n_call; ++k) {
        const int32_t i = last_call_[k];
        const bool in_seq = std::find(seqs_[i].begin(), seqs_[i].end(), s) != seqs_[i].end();
        if (in_seq && is_output(i, n_call, k, embeddings_context)) {
            found = k;
        }
    }
    return found;
}

} // namespace llama_cancel
