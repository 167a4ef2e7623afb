// Models, contexts, prompts and batches (see models.h).
#include "models.h"

#include "paths.h"
#include "processes.h"
#include "threads.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <dirent.h>
#include <sys/stat.h>

namespace common {

model_ptr load_model(const std::string & path, int32_t n_gpu_layers) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = n_gpu_layers;
    return model_ptr(llama_model_load_from_file(path.c_str(), mp));
}

context_ptr make_context(llama_model * model, const context_options & opt) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = opt.n_ctx;
    cp.n_batch         = opt.n_batch;
    cp.n_ubatch        = opt.n_ubatch;
    cp.n_seq_max       = opt.n_seq_max;
    cp.n_threads       = threads_override().value_or(opt.n_threads); // LLAMA_CANCEL_THREADS wins
    cp.n_threads_batch = cp.n_threads;
    cp.op_offload      = false;
    cp.offload_kqv     = opt.offload_kqv;
    cp.embeddings      = opt.embeddings;
    cp.pooling_type    = opt.pooling;
    cp.kv_unified      = opt.kv_unified;
    cp.n_rs_seq        = opt.n_rs_seq;
    cp.no_perf         = true;
    cp.cb_eval           = opt.cb_eval;
    cp.cb_eval_user_data = opt.cb_eval_data;
    cp.abort_callback      = opt.abort_callback;
    cp.abort_callback_data = opt.abort_callback_data;
    return context_ptr(llama_init_from_model(model, cp));
}

std::vector<llama_token> make_prompt(const llama_model * model, int32_t n, uint32_t seed) {
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(3, n_vocab - 1); // past <unk>, <s>, </s>
    std::vector<llama_token> out(n);
    for (auto & t : out) {
        t = dist(rng);
    }
    return out;
}

void owned_batch::add(llama_token token, llama_pos pos, std::vector<llama_seq_id> seqs, bool output) {
    token_.push_back(token);
    pos_.push_back(pos);
    n_seq_id_.push_back(static_cast<int32_t>(seqs.size()));
    seqs_.push_back(std::move(seqs));
    logits_.push_back(output ? 1 : 0);
}

llama_batch owned_batch::get() {
    // Pointers into seqs_ are taken here, not when adding: a copied or moved batch stays valid.
    seq_ptr_.resize(seqs_.size());
    for (size_t i = 0; i < seqs_.size(); ++i) {
        seq_ptr_[i] = seqs_[i].data();
    }
    llama_batch b{};
    b.n_tokens = size();
    b.token    = token_.data();
    b.pos      = pos_.data();
    b.n_seq_id = n_seq_id_.data();
    b.seq_id   = seq_ptr_.data();
    b.logits   = logits_.data();
    return b;
}

int32_t owned_batch::last_of(llama_seq_id s) const {
    int32_t last = -1;
    for (int32_t i = 0; i < size(); ++i) {
        for (llama_seq_id q : seqs_[i]) {
            last = q == s ? i : last;
        }
    }
    return last;
}

seq_batch::seq_batch(const std::vector<llama_token> & tokens, int32_t first, int32_t n, llama_pos start_pos,
                     llama_seq_id seq) {
    for (int32_t i = 0; i < n; ++i) {
        add(tokens[first + i], start_pos + i, {seq}, i == n - 1);
    }
}

multi_seq_batch::multi_seq_batch(const std::vector<std::vector<llama_token>> & prompts, int32_t len) {
    for (size_t s = 0; s < prompts.size(); ++s) {
        for (int32_t i = 0; i < len; ++i) {
            add(prompts[s][i], i, {static_cast<llama_seq_id>(s)}, i == len - 1);
        }
    }
}

std::vector<float> last_logits(llama_context * ctx) {
    const float * l = llama_get_logits_ith(ctx, -1);
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

bool in_cache_and_current(const std::string & path, const std::string & generator) {
    struct stat st{};
    if (stat(path.c_str(), &st) != 0) {
        return false;
    }
    const std::string cache = models_cache_dir();
    if (path.compare(0, cache.size(), cache) != 0) {
        return true; // the caller's file: never made again
    }
    const std::string dir = generator.substr(0, generator.find_last_of('/') + 1);
    DIR *             d   = opendir(dir.empty() ? "." : dir.c_str());
    bool              current = true;
    for (const dirent * e = d != nullptr ? readdir(d) : nullptr; e != nullptr && current; e = readdir(d)) {
        const std::string name = e->d_name;
        struct stat       script{};
        const bool        py = name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0;
        current = !(py && stat((dir + name).c_str(), &script) == 0 && script.st_mtime > st.st_mtime);
    }
    if (d != nullptr) {
        closedir(d);
    }
    if (!current) {
        std::fprintf(stderr, "%s is older than the scripts that generate it: generating it again\n", path.c_str());
    }
    return current;
}

bool ensure_model(const std::string & generator, const std::string & path, const std::string & preset,
                  const std::string & arch, const std::vector<std::string> & extra) {
    if (in_cache_and_current(path, generator)) {
        return true;
    }
    std::fprintf(stderr, "generating the synthetic %s '%s' model at %s ...\n", arch.c_str(), preset.c_str(),
                 path.c_str());
    std::vector<std::string> cmd = {"python3", generator, path, "--preset", preset, "--arch", arch};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    if (run_command(cmd) != 0) {
        std::fprintf(stderr, "error: %s failed to generate %s\n", generator.c_str(), path.c_str());
        return false;
    }
    return true;
}

} // namespace common
