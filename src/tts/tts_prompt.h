// The prompt rows of a text-to-speech generation (src/tts/tts.cpp), built as libmtmd 0.7.0's audio
// helper lays them out for each pipeline, from the backbone's token embedding rows:
//  - Qwen3-TTS: the role rows of "<|im_start|>assistant\n", four think/language rows (each
//    tts_pad + a codec row), [a voice row: tts_pad + the speaker encoder's x-vector], then
//    tts_text_bos + codec_pad, each text token + codec_pad, tts_text_eod + codec_pad, tts_pad +
//    codec_bos. Every frame's feedback adds the tts_pad row.
//  - Pocket-TTS: [<|bos_before_voice|> and the voice's rows], then a text chunk's tokens and
//    <|audio_bos|>. The text is normalised as the reference does and, over 50 tokens, split after
//    sentence (then clause) punctuation into chunks; each later chunk restarts from the voice.
// The voice rows come from an encode (a cancellable step), so the prompt is `head`, the voice,
// then `tail`.
#pragma once

#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llama_cancel {

enum class tts_pipeline { qwen3tts, pockettts };

struct tts_prompt {
    tts_pipeline                    kind = tts_pipeline::qwen3tts;
    int32_t                         n_embd = 0;
    std::vector<float>              head;        // rows before the voice
    std::vector<float>              voice_base;  // Qwen3-TTS: the row the x-vector is added to (tts_pad)
    std::vector<float>              overlay;     // Qwen3-TTS: added to every frame's feedback (tts_pad)
    std::vector<std::vector<float>> chunks;      // rows after the voice: Qwen3-TTS one, Pocket-TTS a chunk each
    std::vector<int32_t>            chunk_tokens; // Pocket-TTS: text tokens per chunk (its frame budget)
    llama_token                     codec_0   = LLAMA_TOKEN_NULL; // Qwen3-TTS: code0 = sampled - codec_0
    llama_token                     codec_eos = LLAMA_TOKEN_NULL; // Qwen3-TTS: end of speech
};

// Builds the prompt of `text` (lang: Qwen3-TTS's language, NULL english) for `model`. False with
// `error` set when the vocabulary lacks the pipeline's special tokens, the language is unknown,
// the text tokenizes to nothing, or the token rows cannot be read.
bool build_tts_prompt(const llama_model * model, tts_pipeline kind, const std::string & text, const char * lang,
                      bool with_voice, tts_prompt & out, std::string & error);

} // namespace llama_cancel
