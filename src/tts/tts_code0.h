// Qwen3-TTS's codebook 0 (src/tts/tts.cpp): the talker's tokens a frame may start with, and the
// sampling that keeps to them. The talker's logits cover its whole vocabulary: text tokens, the
// codec's codes and the codec's specials (pad, bos, think, languages). Only the codes and the
// end-of-speech token may be sampled: the file lists the rest in tokenizer.ggml.suppress_tokens
// (llama_vocab_get_suppress_tokens), which llama.cpp's own sampling applies as a -inf logit bias
// before its chain, and code2wav refuses any code past its codebook. So the same: every other
// token's logit is -inf before the caller's chain (or the greedy pick) sees the candidates, and a
// frame whose code0 is not one of them is refused before anything of it is committed.
#pragma once

#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llama_cancel {

// Codebook 0's codes: libmtmd 0.7.0's Qwen3-TTS codec (12 Hz, code2wav's first codebook) has 2048,
// at <|codec_0|> on in the talker's vocabulary.
constexpr int32_t k_qwen3tts_codebook = 2048;

class code0_sampler {
  public:
    // The tokens of `vocab` codebook 0 may take: [codec_0, codec_0 + k_qwen3tts_codebook) and
    // codec_eos, less what the vocabulary suppresses.
    code0_sampler(const llama_vocab * vocab, llama_token codec_0, llama_token codec_eos);

    // Codebook 0 from the talker's `logits` (n_vocab of them): the others at -inf, then `chain`
    // (the caller's; it advances by the pick) or, NULL, the greedy pick.
    llama_token sample(const std::vector<float> & logits, llama_sampler * chain) const;

    // True when a frame may start with `token`; else false with `why`.
    bool allows(llama_token token, std::string & why) const;

  private:
    std::vector<uint8_t> ok_;         // by token: 1 where codebook 0 may take it
    std::vector<uint8_t> suppressed_; // by token: 1 where the vocabulary suppresses it
};

} // namespace llama_cancel
