// Models, contexts and inputs for the tools and the tests: owning pointers for llama.cpp's model
// and context, the loading and context options the protocols need, deterministic prompts, a
// one-sequence batch, the last logits, and the synthetic models generated on demand. Not part of
// the library's API.
#pragma once

#include "llama.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace common {

struct model_deleter { void operator()(llama_model * m) const { llama_model_free(m); } };
struct context_deleter { void operator()(llama_context * c) const { llama_free(c); } };
using model_ptr   = std::unique_ptr<llama_model, model_deleter>;
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

// CPU-only model (n_gpu_layers 0) unless `n_gpu_layers` says otherwise. NULL on failure.
model_ptr load_model(const std::string & path, int32_t n_gpu_layers = 0);

struct context_options {
    uint32_t n_ctx     = 1024;
    uint32_t n_batch   = 512;
    uint32_t n_ubatch  = 512;
    int32_t  n_threads = 2;
    uint32_t n_seq_max = 1;
    bool     offload_kqv = false; // the CPU protocol keeps attention on the CPU; offloaded setups set it
    bool     embeddings  = false;
    enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_UNSPECIFIED; // with embeddings: the model's, or this
    bool     kv_unified  = false; // one KV stream for all sequences: ubatches are batch slices
    uint32_t n_rs_seq    = 0;     // recurrent-state rollback planes per sequence (llama.cpp's own)
    ggml_backend_sched_eval_callback cb_eval      = nullptr;
    void *                           cb_eval_data = nullptr;
    ggml_abort_callback              abort_callback      = nullptr; // the host's own, set at creation
    void *                           abort_callback_data = nullptr;
};
// Context with op_offload off (and offload_kqv as asked), as the protocols need. NULL on failure.
context_ptr make_context(llama_model * model, const context_options & opt);

// Deterministic prompt of `n` ordinary (non-control) tokens.
std::vector<llama_token> make_prompt(const llama_model * model, int32_t n, uint32_t seed = 1);

// A llama_batch that owns its arrays, built token by token. `get()` is valid while the object lives
// and no token is added.
class owned_batch {
  public:
    void add(llama_token token, llama_pos pos, std::vector<llama_seq_id> seqs, bool output);
    llama_batch get();
    int32_t size() const { return static_cast<int32_t>(token_.size()); }
    // Asks (or not) for the output of batch index i.
    void set_output(int32_t i, bool on) { logits_.at(i) = on ? 1 : 0; }
    // Batch index of sequence s's last token; -1 when it has none.
    int32_t last_of(llama_seq_id s) const;

  private:
    std::vector<llama_token>               token_;
    std::vector<llama_pos>                 pos_;
    std::vector<std::vector<llama_seq_id>> seqs_;
    std::vector<int32_t>                   n_seq_id_;
    std::vector<llama_seq_id *>            seq_ptr_;
    std::vector<int8_t>                    logits_;
};

// A batch for one sequence: tokens[first, first + n) at positions start_pos + i, logits for the
// last token only.
class seq_batch : public owned_batch {
  public:
    seq_batch(const std::vector<llama_token> & tokens, int32_t first, int32_t n, llama_pos start_pos,
              llama_seq_id seq = 0);
};

// Sequences one after another, the way servers batch their slots: sequence s holds prompts[s][0,
// len) at positions 0..len-1 and asks for the output of its last token.
class multi_seq_batch : public owned_batch {
  public:
    multi_seq_batch(const std::vector<std::vector<llama_token>> & prompts, int32_t len);
};

// Logits of the last output of the last decode, copied.
std::vector<float> last_logits(llama_context * ctx);

// True where `path` exists and, when it lies in the model cache, is newer than every script beside
// `generator` (a cached model a changed generator would write otherwise is made again).
bool in_cache_and_current(const std::string & path, const std::string & generator);

// Generates a synthetic model with scripts/make_model.py unless `path` is there and current
// (in_cache_and_current). Returns false and prints why on failure.
bool ensure_model(const std::string & generator, const std::string & path, const std::string & preset,
                  const std::string & arch = "llama", const std::vector<std::string> & extra = {});

} // namespace common
