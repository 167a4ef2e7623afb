#include "tts/tts_code0.h"

#include <cmath>
#include <cstdio>

namespace llama_cancel {

code0_sampler::code0_sampler(const llama_vocab * vocab, llama_token codec_0, llama_token codec_eos) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    ok_.assign(static_cast<size_t>(n_vocab), 0);
    suppressed_.assign(static_cast<size_t>(n_vocab), 0);
    int32_t             n_suppressed = 0;
    const llama_token * suppressed   = llama_vocab_get_suppress_tokens(vocab, &n_suppressed);
    for (int32_t i = 0; suppressed != nullptr && i < n_suppressed; ++i) {
        if (suppressed[i] >= 0 && suppressed[i] < n_vocab) {
            suppressed_[static_cast<size_t>(suppressed[i])] = 1;
        }
    }
    for (llama_token t = codec_0; t >= 0 && t < codec_0 + k_qwen3tts_codebook && t < n_vocab; ++t) {
        ok_[static_cast<size_t>(t)] = 1;
    }
    if (codec_eos >= 0 && codec_eos < n_vocab) {
        ok_[static_cast<size_t>(codec_eos)] = 1;
    }
    for (size_t t = 0; t < ok_.size(); ++t) {
        ok_[t] = static_cast<uint8_t>(ok_[t] && !suppressed_[t]);
    }
}

llama_token code0_sampler::sample(const std::vector<float> & logits, llama_sampler * chain) const {
    std::vector<llama_token_data> cand(logits.size());
    for (size_t i = 0; i < cand.size(); ++i) {
        const bool ok = i < ok_.size() && ok_[i];
        cand[i] = llama_token_data{static_cast<llama_token>(i), ok ? logits[i] : -INFINITY, 0.0f};
    }
    if (chain == nullptr) {
        size_t best = 0;
        for (size_t i = 1; i < cand.size(); ++i) {
            best = cand[i].logit > cand[best].logit ? i : best;
        }
        return cand.empty() ? LLAMA_TOKEN_NULL : cand[best].id;
    }
    llama_token_data_array arr{cand.data(), cand.size(), -1, false};
    llama_sampler_apply(chain, &arr);
    const llama_token token = arr.selected >= 0 ? arr.data[arr.selected].id : arr.data[0].id;
    llama_sampler_accept(chain, token);
    return token;
}

bool code0_sampler::allows(llama_token token, std::string & why) const {
    if (token >= 0 && static_cast<size_t>(token) < ok_.size() && ok_[static_cast<size_t>(token)]) {
        return true;
    }
    char text[160];
    if (token >= 0 && static_cast<size_t>(token) < suppressed_.size() && suppressed_[static_cast<size_t>(token)]) {
        std::snprintf(text, sizeof(text), "token %d, which the model suppresses (tokenizer.ggml.suppress_tokens)", token);
    } else {
        std::snprintf(text, sizeof(text), "token %d, which is no codec code code2wav takes and not end of speech", token);
    }
    why = text;
    return false;
}

} // namespace llama_cancel
