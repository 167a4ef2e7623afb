// Text-to-speech under the caller's byte (llama_cancel_tts_*): libmtmd's audio-generation loop
// (as its mtmd_helper_gen_audio runs it for Qwen3-TTS and Pocket-TTS) rebuilt from steps that each
// commit whole or not at all, so that a stop anywhere leaves the generation at its last committed
// step and a resume repeats the uninterrupted run.
//
// Steps and what each commits:
//  - voice: the speaker/voice encoder's rows (a clip graph; a stop discards them);
//  - prompt: prompt rows per llama_cancel_decode (a stop keeps its committed rows: memory holds
//    exactly those), the hidden state and logits of the last row;
//  - a frame: codebook 0 sampled (Qwen3-TTS, kept once drawn: the caller's sampler advances once
//    a frame), GEN_CODE (kept once finished), the backbone's decode of the feedback; then the frame's
//    codes or latent join the window and the position advances;
//  - a window: GEN_WAV of the window's frames with the streaming state, then the PCM and the new
//    state replace the old ones.
// The outputs of a stopped clip graph are garbage (libmtmd returns 0): never committed.
//
// GEN_CODE's sampler is reseeded by libmtmd only when a call's seed differs from the previous
// call's, and every call draws, a stopped one too. Call g therefore gets the seed mix(seed, g);
// before a call whose seed mctx saw last (a retry after a stop) or may have seen (the object's first
// call: mctx's last seed is unknown), a call with another seed, stopped at its first checkpoint,
// reseeds it. Between the object's calls mctx's generation is taken to be the object's alone.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "abi/checks.h"
#include "mtmd/clip_call.h"
#include "checkpoints/byte.h"
#include "decode/seq_batch.h"
#include "abi/status.h"
#include "tts/tts_code0.h"
#include "tts/tts_prompt.h"

#include "mtmd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using llama_cancel::fail;
using llama_cancel::tts_pipeline;

// A frame's sub-steps already finished, kept across a stop.
struct pending_frame {
    bool                 has_code0 = false;
    llama_token          code0     = LLAMA_TOKEN_NULL;
    bool                 has_gen   = false;
    std::vector<int32_t> codes;    // Qwen3-TTS: the frame's codebooks
    std::vector<float>   feats;    // Pocket-TTS: the frame's latent
    std::vector<float>   feedback; // the backbone's next input row
};

// Seed of GEN_CODE call g: a 64-bit mix of (seed, g), never UINT32_MAX (libmtmd's "random").
uint32_t call_seed(uint32_t seed, uint64_t g) {
    uint64_t x = (static_cast<uint64_t>(seed) << 32) ^ (g + 0x9E3779B97F4A7C15ull);
    x          = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x          = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const uint32_t s = static_cast<uint32_t>(x);
    return s == UINT32_MAX ? 0x7FFFFFFFu : s;
}

} // namespace

struct llama_cancel_tts {
    llama_context *          lctx  = nullptr;
    mtmd_context *           mctx  = nullptr;
    llama_cancel_tts_params  p{};
    llama_cancel::tts_prompt prompt;
    std::unique_ptr<llama_cancel::code0_sampler> code0; // Qwen3-TTS
    int32_t                  n_batch = 0;
    int32_t                  window  = 0;
    int32_t                  n_vocab = 0;
    bool                     mrope   = false;
    mtmd_gen_inp             defaults{};

    // Prompt phase: rows [0, prompt_done) of `rows` are in memory from position prompt_pos0.
    bool               voice_done = true;
    std::vector<float> rows;
    int32_t            prompt_done = 0;
    llama_pos          prompt_pos0 = 0;
    llama_pos          n_voice_pos = 0; // Pocket-TTS: positions a later chunk keeps

    // Generation.
    llama_pos            pos = 0;
    std::vector<float>   h_state; // the backbone's last hidden state
    std::vector<float>   logits;  // and its logits (Qwen3-TTS: codebook 0)
    pending_frame        pending;
    uint64_t             n_gen_calls = 0;
    bool                 seed_known  = false; // mctx's last seed is last_seed
    uint32_t             last_seed   = 0;
    int32_t              chunk       = 0;  // Pocket-TTS: the chunk being generated
    int32_t              chunk_step  = 0;  // its frames so far
    int32_t              eos_step    = -1; // the frame its end-of-speech head fired at
    bool                 chunk_ending = false; // its last GEN_CODE ended it: end_chunk is next
    int32_t              n_frames    = 0;
    int32_t              n_window    = 0; // frames in the window not yet in the PCM
    std::vector<int32_t> win_codes;
    std::vector<float>   win_feats;
    std::vector<char>    wav_state;
    std::vector<float>   pcm;
    llama_cancel_tts_result state{};
};

namespace {

using tts = llama_cancel_tts;

int32_t n_embd(const tts & t) {
    return t.prompt.n_embd;
}

// The step's report: CANCELLED or ERROR with the step, in t.state (what every call returns).
int32_t stopped(tts & t, int32_t step) {
    t.state.status      = LLAMA_CANCEL_CANCELLED;
    t.state.stop_reason = LLAMA_CANCEL_STOP_CANCELLED;
    t.state.step        = step;
    return LLAMA_CANCEL_CANCELLED;
}

template <typename... Args> int32_t failed(tts & t, int32_t step, const char * fmt, Args... args) {
    fail(&t.state, fmt, args...);
    t.state.step = step;
    return LLAMA_CANCEL_ERROR;
}

// GEN_CODE's checkpoints go this share of the interval apart: a frame's code predictor is a call of
// tens of ms, and at the whole interval a stop waits up to the interval plus a node and the return,
// past the 10 ms a host of a frame loop expects (measured on Vulkan: 10-12 ms at 10 ms, 100+ ms calls).
constexpr double k_gen_code_interval_share = 0.5;

// One clip graph (GEN_CODE, GEN_WAV, the voice's encode) under the run's byte. GEN_CODE runs held
// where it finished within its interval before (clip_call_options::hold_if_short): its thousands of
// asks cost a third (4688 in a 2.8 ms call on a small pair: pricing each was +5.5% of the call,
// +2.2% of a frame). Not when a byte is set already: a stop at the first ask costs nothing
// (ensure_reseed's call relies on it).
int32_t clip_step(tts & t, const llama_cancel_tts_run_params & rp, int32_t step, const char * what,
                  const std::function<int32_t()> & fn) {
    int32_t    ret  = 0;
    const bool code = step == LLAMA_CANCEL_TTS_STEP_GEN_CODE;
    llama_cancel::clip_call_options o;
    o.interval_share = code ? k_gen_code_interval_share : 1.0;
    o.hold_if_short  = code && !llama_cancel::byte_is_set(rp.byte);
    const auto c     = llama_cancel::run_clip_call(rp.byte, nullptr, rp.mtmd_hook, fn, &ret, t.state.mtmd_reach, &o);
    if (c == llama_cancel::clip_outcome::wrong_hook) {
        return failed(t, step, "mtmd_hook is not the hook bound to mctx; nothing was computed");
    }
    if (c == llama_cancel::clip_outcome::stopped) {
        return stopped(t, step);
    }
    if (ret != 0) {
        return failed(t, step, "%s failed (returned %d)", what, ret);
    }
    return LLAMA_CANCEL_OK;
}

int32_t process(tts & t, const llama_cancel_tts_run_params & rp, const mtmd_gen_inp & inp, mtmd_gen_out & out) {
    const bool    code = inp.type == MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    const int32_t st   = clip_step(t, rp, code ? LLAMA_CANCEL_TTS_STEP_GEN_CODE : LLAMA_CANCEL_TTS_STEP_GEN_WAV,
                                   code ? "GEN_CODE" : "GEN_WAV", [&] {
                                       out = mtmd_gen_out{};
                                       return mtmd_gen_audio_process(t.mctx, &inp, &out);
                                   });
    t.seed_known = true; // libmtmd saw the seed, whatever came of the graph
    t.last_seed  = inp.seed;
    return st;
}

// The voice's rows: the speaker encoder's x-vector added to tts_pad (Qwen3-TTS), or the voice
// encoder's frames (Pocket-TTS), between the prompt's head and its first chunk.
int32_t encode_voice(tts & t, const llama_cancel_tts_run_params & rp) {
    const std::string   marker = mtmd_default_marker();
    mtmd_input_text     text{marker.c_str(), marker.size(), false, true};
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    const mtmd_bitmap * bitmap = t.p.voice;
    const mtmd_input_chunk * audio = nullptr;
    if (mtmd_tokenize(t.mctx, chunks, &text, &bitmap, 1) == 0) {
        for (size_t i = 0; i < mtmd_input_chunks_size(chunks) && audio == nullptr; ++i) {
            const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks, i);
            audio = mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_AUDIO ? c : nullptr;
        }
    }
    int32_t st = audio == nullptr ? failed(t, LLAMA_CANCEL_TTS_STEP_VOICE, "the voice is no audio the mmproj reads")
                                  : clip_step(t, rp, LLAMA_CANCEL_TTS_STEP_VOICE, "the voice's encode",
                                              [&] { return mtmd_encode_chunk(t.mctx, audio); });
    if (st == LLAMA_CANCEL_OK) {
        const float * embd = mtmd_get_output_embd(t.mctx);
        const size_t  n    = static_cast<size_t>(llama_model_n_embd_inp(llama_get_model(t.lctx))) *
                         mtmd_input_chunk_get_n_tokens(audio);
        std::vector<float> voice(embd, embd + n);
        if (t.prompt.kind == tts_pipeline::qwen3tts) {
            for (size_t i = 0; i < voice.size() && i < t.prompt.voice_base.size(); ++i) {
                voice[i] += t.prompt.voice_base[i];
            }
            voice.resize(t.prompt.voice_base.size());
        }
        if (voice.size() % static_cast<size_t>(n_embd(t)) != 0) {
            st = failed(t, LLAMA_CANCEL_TTS_STEP_VOICE, "the voice's rows are not n_embd wide");
        } else {
            t.rows.insert(t.rows.end() - static_cast<std::ptrdiff_t>(t.prompt.chunks[0].size()), voice.begin(),
                          voice.end());
            t.n_voice_pos = static_cast<llama_pos>(t.rows.size() - t.prompt.chunks[0].size()) / n_embd(t);
            t.voice_done  = true;
        }
    }
    mtmd_input_chunks_free(chunks);
    return st;
}

// Decodes `n` rows from position pos0 (M-RoPE: the same position in every section), the last one's
// outputs copied into h_state and logits when `output`. Returns the status; *n_committed rows in memory.
int32_t decode_rows(tts & t, const llama_cancel_tts_run_params & rp, const float * embd, int32_t n, llama_pos pos0,
                    bool output, int32_t step, int32_t * n_committed) {
    const int32_t sections = t.mrope ? llama_cancel::k_mrope_sections : 1;
    std::vector<llama_pos> all(static_cast<size_t>(n) * sections);
    for (int32_t s = 0; s < sections; ++s) {
        for (int32_t i = 0; i < n; ++i) {
            all[static_cast<size_t>(s) * n + i] = pos0 + i;
        }
    }
    llama_cancel::seq_batch batch(n, t.p.seq_id);
    const llama_batch b = batch.get_media(embd, n, 0, all, n, sections, output);
    llama_cancel_decode_params dp = llama_cancel_decode_default_params();
    dp.byte        = rp.byte;
    dp.hook        = rp.hook;
    dp.max_stop_ms = rp.max_stop_ms;
    llama_cancel_decode_result dr{};
    const int32_t st = llama_cancel_decode(t.lctx, b, &dp, &dr, nullptr);
    t.state.reach    = std::max(t.state.reach, dr.reach);
    *n_committed     = st == LLAMA_CANCEL_OK ? n : std::max(dr.n_committed, 0);
    if (st == LLAMA_CANCEL_CANCELLED) {
        return stopped(t, step);
    }
    if (st != LLAMA_CANCEL_OK) {
        return failed(t, step, "decoding: %.200s", dr.message);
    }
    if (output) {
        const float * h = llama_cancel_get_embeddings_ith(t.lctx, &dr, -1);
        if (h == nullptr) {
            return failed(t, step, "the backbone gives no hidden state (llama_context_params.embeddings off?)");
        }
        t.h_state.assign(h, h + n_embd(t));
        const float * l = llama_cancel_get_logits_ith(t.lctx, &dr, -1);
        t.logits.assign(l, l == nullptr ? l : l + t.n_vocab);
    }
    return LLAMA_CANCEL_OK;
}

int32_t run_prompt(tts & t, const llama_cancel_tts_run_params & rp) {
    const int32_t n_rows = static_cast<int32_t>(t.rows.size() / static_cast<size_t>(n_embd(t)));
    while (t.prompt_done < n_rows) {
        const int32_t k    = std::min(t.n_batch, n_rows - t.prompt_done);
        const bool    last = t.prompt_done + k == n_rows;
        int32_t       done = 0;
        const int32_t st = decode_rows(t, rp, t.rows.data() + static_cast<size_t>(t.prompt_done) * n_embd(t), k,
                                       t.prompt_pos0 + t.prompt_done, last, LLAMA_CANCEL_TTS_STEP_PROMPT, &done);
        t.prompt_done += done;
        if (st != LLAMA_CANCEL_OK) {
            return st;
        }
    }
    t.pos = t.prompt_pos0 + n_rows;
    t.rows.clear();
    t.rows.shrink_to_fit();
    t.prompt_done = 0;
    return LLAMA_CANCEL_OK;
}

// GEN_WAV of the window's frames: the PCM and the new streaming state replace the old ones.
int32_t flush_window(tts & t, const llama_cancel_tts_run_params & rp) {
    if (t.n_window == 0) {
        return LLAMA_CANCEL_OK;
    }
    mtmd_gen_inp inp = t.defaults;
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
    inp.seed = t.seed_known ? t.last_seed : call_seed(t.p.seed, t.n_gen_calls); // not a reseed
    if (t.prompt.kind == tts_pipeline::qwen3tts) {
        inp.codes   = t.win_codes.data();
        inp.n_codes = t.win_codes.size();
    } else {
        inp.feats   = t.win_feats.data();
        inp.n_feats = t.win_feats.size();
    }
    inp.state_data = t.wav_state.empty() ? nullptr : t.wav_state.data();
    inp.state_size = t.wav_state.size();
    mtmd_gen_out out{};
    const int32_t st = process(t, rp, inp, out);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    t.pcm.insert(t.pcm.end(), out.audio, out.audio + out.n_samples);
    t.wav_state.assign(out.state_data, out.state_data + out.state_size);
    t.win_codes.clear();
    t.win_feats.clear();
    t.n_window = 0;
    return LLAMA_CANCEL_OK;
}

// Makes libmtmd reseed at the next GEN_CODE of seed `s`: when mctx saw `s` last (or its last seed
// is unknown), a GEN_CODE with another seed, stopped at its first checkpoint (run whole when no
// eval callback is bound to mctx), its outputs dropped.
int32_t ensure_reseed(tts & t, const llama_cancel_tts_run_params & rp, uint32_t s) {
    if (t.seed_known && t.last_seed != s) {
        return LLAMA_CANCEL_OK;
    }
    static const int8_t stop_now = 1;
    llama_cancel_tts_run_params quick = rp;
    quick.byte       = &stop_now;
    mtmd_gen_inp inp = t.defaults;
    inp.type  = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    inp.code0 = t.pending.has_code0 ? t.pending.code0 - t.prompt.codec_0 : 0;
    inp.embd  = t.h_state.data();
    inp.seed  = s ^ 0x5A5A5A5Au;
    mtmd_gen_out  out{};
    const int32_t st = process(t, quick, inp, out);
    return st == LLAMA_CANCEL_ERROR ? st : LLAMA_CANCEL_OK;
}

// GEN_CODE of the pending frame (its code0, the backbone's hidden state): the frame's codes or
// latent and its feedback row, kept in t.pending. *eos: Pocket-TTS's end-of-speech head fired.
int32_t gen_code(tts & t, const llama_cancel_tts_run_params & rp, bool * eos) {
    const uint32_t s  = call_seed(t.p.seed, t.n_gen_calls);
    int32_t        st = ensure_reseed(t, rp, s);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    mtmd_gen_inp inp = t.defaults;
    inp.type  = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    inp.code0 = t.pending.code0 - t.prompt.codec_0;
    inp.embd  = t.h_state.data();
    inp.seed  = s;
    mtmd_gen_out out{};
    st = process(t, rp, inp, out);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    if (out.embd == nullptr) {
        return failed(t, LLAMA_CANCEL_TTS_STEP_GEN_CODE, "GEN_CODE gave no feedback embedding");
    }
    ++t.n_gen_calls;
    pending_frame & f = t.pending;
    f.codes.assign(out.codes, out.codes + (out.codes != nullptr ? out.n_codes : 0));
    f.feats.assign(out.feats, out.feats + (out.feats != nullptr ? out.n_feats : 0));
    f.feedback.assign(out.embd, out.embd + n_embd(t));
    for (size_t i = 0; i < t.prompt.overlay.size(); ++i) {
        f.feedback[i] += t.prompt.overlay[i];
    }
    f.has_gen = true;
    *eos      = out.is_eos;
    return LLAMA_CANCEL_OK;
}

// Qwen3-TTS: codebook 0 of the pending frame from the kept logits (code0_sampler: the caller's
// chain, or greedy, over the tokens a frame may start with). A token code2wav would refuse (a chain
// that picked a -inf candidate) is an ERROR here, before the frame's GEN_CODE: nothing of the frame
// is kept, and the next call samples again.
int32_t sample_code0(tts & t) {
    if (t.logits.empty()) {
        return failed(t, LLAMA_CANCEL_TTS_STEP_BACKBONE, "the talker gives no logits to sample codebook 0 from");
    }
    const llama_token code0 = t.code0->sample(t.logits, t.p.sampler);
    std::string       why;
    if (!t.code0->allows(code0, why)) {
        return failed(t, LLAMA_CANCEL_TTS_STEP_GEN_CODE, "frame %d: codebook 0's sampler chose %s; frame not committed",
                      t.n_frames, why.c_str());
    }
    t.pending.code0     = code0;
    t.pending.has_code0 = true;
    return LLAMA_CANCEL_OK;
}

// The generation's end: every frame into the PCM, then finished with `reason`.
int32_t finish(tts & t, const llama_cancel_tts_run_params & rp, int32_t reason) {
    const int32_t st = flush_window(t, rp);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    t.state.finished    = 1;
    t.state.stop_reason = reason;
    // The chunk it ended in counts as done (Qwen3-TTS: its one chunk).
    t.state.n_chunks_done = std::min(t.chunk + 1, static_cast<int32_t>(t.prompt.chunks.size()));
    return LLAMA_CANCEL_OK;
}

// Pocket-TTS: a chunk ended (end of speech and its tail, or its frame budget). Its frames go into
// the PCM and the decoder restarts; the next chunk rewinds the backbone to the voice and is
// prompted there. *more: a chunk follows.
int32_t end_chunk(tts & t, const llama_cancel_tts_run_params & rp, bool * more) {
    int32_t st = flush_window(t, rp);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    t.wav_state.clear();
    t.pending      = pending_frame{};
    t.chunk_ending = false;
    ++t.chunk;
    t.state.n_chunks_done = t.chunk;
    *more = static_cast<size_t>(t.chunk) < t.prompt.chunks.size();
    if (*more) {
        llama_memory_seq_rm(llama_get_memory(t.lctx), t.p.seq_id, t.n_voice_pos, -1);
        t.rows        = t.prompt.chunks[static_cast<size_t>(t.chunk)];
        t.prompt_pos0 = t.n_voice_pos;
        t.prompt_done = 0;
        t.chunk_step  = 0;
        t.eos_step    = -1;
    }
    return LLAMA_CANCEL_OK;
}

// Pocket-TTS: the frame GEN_CODE just gave ends its chunk (the reference's rule: end of speech
// plus a tail of 5 frames for chunks of up to 6 tokens, else 3, or the budget (n/3 + 2) * 12.5).
bool chunk_over(tts & t, bool eos) {
    if (eos && t.eos_step < 0) {
        t.eos_step = t.chunk_step;
    }
    const int32_t n_tok  = t.prompt.chunk_tokens[static_cast<size_t>(t.chunk)];
    const int32_t tail   = n_tok <= 6 ? 5 : 3;
    const int32_t budget = static_cast<int32_t>(std::ceil((n_tok / 3.0 + 2.0) * 12.5));
    return (t.eos_step >= 0 && t.chunk_step >= t.eos_step + tail) || t.chunk_step >= budget;
}

// Commits the pending frame after the backbone decoded its feedback.
void commit_frame(tts & t) {
    pending_frame & f = t.pending;
    t.win_codes.insert(t.win_codes.end(), f.codes.begin(), f.codes.end());
    t.win_feats.insert(t.win_feats.end(), f.feats.begin(), f.feats.end());
    ++t.n_window;
    ++t.n_frames;
    ++t.chunk_step;
    ++t.pos;
    t.pending = pending_frame{};
}

// One frame, or what ends the generation or a chunk. Returns OK with *done when the generation
// ended (t.state.finished), else OK after a committed frame (or a chunk's end), or the stop.
int32_t step_frame(tts & t, const llama_cancel_tts_run_params & rp, bool * done) {
    *done = false;
    const bool qwen = t.prompt.kind == tts_pipeline::qwen3tts;
    if (t.n_window >= t.window) { // a full window whose GEN_WAV was stopped: it comes first
        return flush_window(t, rp);
    }
    if (t.chunk_ending) {
        bool          more = false;
        const int32_t st   = end_chunk(t, rp, &more);
        if (st != LLAMA_CANCEL_OK || more) {
            return st == LLAMA_CANCEL_OK ? run_prompt(t, rp) : st;
        }
        *done = true;
        return finish(t, rp, LLAMA_CANCEL_STOP_EOG);
    }
    const bool full = t.pos + 1 > static_cast<llama_pos>(llama_n_ctx(t.lctx));
    if ((t.p.max_frames > 0 && t.n_frames >= t.p.max_frames) || full) {
        *done = true;
        return finish(t, rp, LLAMA_CANCEL_STOP_LENGTH);
    }
    if (qwen && !t.pending.has_code0) {
        const int32_t st = sample_code0(t);
        if (st != LLAMA_CANCEL_OK) {
            return st;
        }
    }
    if (qwen && (t.pending.code0 == t.prompt.codec_eos ||
                 llama_vocab_is_eog(llama_model_get_vocab(llama_get_model(t.lctx)), t.pending.code0))) {
        *done = true;
        return finish(t, rp, LLAMA_CANCEL_STOP_EOG);
    }
    if (!t.pending.has_gen) {
        bool eos = false;
        const int32_t st = gen_code(t, rp, &eos);
        if (st != LLAMA_CANCEL_OK) {
            return st;
        }
        if (!qwen && chunk_over(t, eos)) {
            t.chunk_ending = true; // the reference drops this frame
            return step_frame(t, rp, done);
        }
    }
    int32_t done_rows = 0;
    const int32_t st = decode_rows(t, rp, t.pending.feedback.data(), 1, t.pos, true, LLAMA_CANCEL_TTS_STEP_BACKBONE,
                                   &done_rows);
    if (st != LLAMA_CANCEL_OK) {
        return st;
    }
    commit_frame(t);
    return t.n_window >= t.window ? flush_window(t, rp) : LLAMA_CANCEL_OK;
}

void report(tts & t, int32_t status, llama_cancel_tts_result * result) {
    t.state.status           = status;
    t.state.n_samples        = static_cast<int64_t>(t.pcm.size());
    t.state.n_frames         = t.n_frames;
    t.state.n_frames_pending = t.n_window;
    if (status == LLAMA_CANCEL_OK) {
        t.state.step       = LLAMA_CANCEL_TTS_STEP_NONE;
        t.state.message[0] = '\0';
        if (!t.state.finished) {
            t.state.stop_reason = LLAMA_CANCEL_STOP_LENGTH;
        }
    }
    if (result != nullptr) {
        *result = t.state;
    }
}

int32_t generate(tts & t, const llama_cancel_tts_run_params & rp) {
    if (t.state.finished) {
        return LLAMA_CANCEL_OK;
    }
    if (llama_cancel::byte_is_set(rp.byte)) {
        return stopped(t, LLAMA_CANCEL_TTS_STEP_BETWEEN);
    }
    if (!t.voice_done) {
        const int32_t st = encode_voice(t, rp);
        if (st != LLAMA_CANCEL_OK) {
            return st;
        }
    }
    if (!t.rows.empty()) {
        const int32_t st = run_prompt(t, rp);
        if (st != LLAMA_CANCEL_OK) {
            return st;
        }
    }
    for (int32_t added = 0; rp.n_frames <= 0 || added < rp.n_frames;) {
        if (llama_cancel::byte_is_set(rp.byte)) {
            return stopped(t, LLAMA_CANCEL_TTS_STEP_BETWEEN);
        }
        const int32_t before = t.n_frames;
        bool          done   = false;
        const int32_t st     = step_frame(t, rp, &done);
        if (st != LLAMA_CANCEL_OK || done) {
            return st;
        }
        if (t.n_frames > before) {
            ++added;
            if (rp.on_frame != nullptr && !rp.on_frame(t.n_frames, static_cast<int64_t>(t.pcm.size()), rp.on_frame_data)) {
                return stopped(t, LLAMA_CANCEL_TTS_STEP_BETWEEN);
            }
        }
    }
    return LLAMA_CANCEL_OK;
}

// Pipeline, sizes and prompt of a new generation; false with result's message.
bool setup(tts & t, llama_context * lctx, mtmd_context * mctx, const llama_cancel_tts_params & p,
           llama_cancel_tts_result * r) {
    const mtmd_gen_audio_info info = mtmd_gen_audio_get_info(mctx);
    if (info.type != MTMD_GEN_AUDIO_TYPE_QWEN3TTS && info.type != MTMD_GEN_AUDIO_TYPE_POCKETTTS) {
        fail(r, "mctx is no audio-generation projector (mtmd_gen_audio_get_info type %d)", static_cast<int>(info.type));
        return false;
    }
    if (p.text == nullptr) {
        fail(r, "params->text is NULL");
        return false;
    }
    if (!llama_cancel::check_seq_id(lctx, p.seq_id, r) || !llama_cancel::resolve_n_batch(lctx, p.n_batch, r, &t.n_batch)) {
        return false;
    }
    if (llama_memory_seq_pos_max(llama_get_memory(lctx), p.seq_id) >= 0) {
        fail(r, "sequence %d is not empty: a generation starts on an empty sequence", p.seq_id);
        return false;
    }
    const tts_pipeline kind = info.type == MTMD_GEN_AUDIO_TYPE_QWEN3TTS ? tts_pipeline::qwen3tts : tts_pipeline::pockettts;
    std::string error;
    if (!llama_cancel::build_tts_prompt(llama_get_model(lctx), kind, p.text, p.lang, p.voice != nullptr, t.prompt, error)) {
        fail(r, "%s", error.c_str());
        return false;
    }
    const llama_model * model = llama_get_model(lctx);
    t.lctx    = lctx;
    t.mctx    = mctx;
    t.p       = p;
    t.p.text  = nullptr; // copied into the prompt
    t.p.lang  = nullptr;
    t.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    t.mrope   = llama_model_rope_type(model) == LLAMA_ROPE_TYPE_MROPE || llama_model_rope_type(model) == LLAMA_ROPE_TYPE_IMROPE;
    t.window  = p.window > 0 ? p.window : kind == tts_pipeline::qwen3tts ? 72 : 8;
    if (t.p.seed == UINT32_MAX) {
        t.p.seed = static_cast<uint32_t>(std::random_device{}()) & 0x7FFFFFFFu;
    }
    if (kind == tts_pipeline::qwen3tts) {
        t.code0.reset(new llama_cancel::code0_sampler(llama_model_get_vocab(model), t.prompt.codec_0, t.prompt.codec_eos));
    }
    t.defaults = mtmd_gen_inp_default(mctx);
    if (p.top_k > 0) t.defaults.top_k = p.top_k;
    if (p.top_p > 0) t.defaults.top_p = p.top_p;
    if (p.temp > 0) t.defaults.temp = p.temp;
    t.rows       = t.prompt.head;
    t.rows.insert(t.rows.end(), t.prompt.chunks[0].begin(), t.prompt.chunks[0].end());
    t.voice_done = p.voice == nullptr;
    t.n_voice_pos = static_cast<llama_pos>(t.prompt.head.size() / static_cast<size_t>(t.prompt.n_embd));
    t.state.sample_rate = info.sample_rate;
    return true;
}

} // namespace

extern "C" llama_cancel_tts * llama_cancel_tts_init(llama_context * lctx, mtmd_context * mctx,
                                                    const llama_cancel_tts_params * params,
                                                    llama_cancel_tts_result * result) {
    if (result != nullptr) {
        *result = llama_cancel_tts_result{};
    }
    return llama_cancel::abi_guard(result, static_cast<llama_cancel_tts *>(nullptr), [&]() -> llama_cancel_tts * {
        if (lctx == nullptr || mctx == nullptr) {
            return llama_cancel::fail_null(result, LLAMA_CANCEL_ERROR, "%s is NULL", lctx == nullptr ? "lctx" : "mctx");
        }
        const llama_cancel_tts_params p = params != nullptr ? *params : llama_cancel_tts_default_params();
        std::unique_ptr<llama_cancel_tts> t(new llama_cancel_tts());
        if (!setup(*t, lctx, mctx, p, result)) {
            return nullptr;
        }
        report(*t, LLAMA_CANCEL_OK, result);
        return t.release();
    });
}

extern "C" void llama_cancel_tts_free(llama_cancel_tts * tts) {
    delete tts;
}

namespace {

// A call on an existing generation: NULL checked, the run's params defaulted, `step` run under the
// exception guard, the outcome reported into the object's state and `result`.
template <typename Step>
int32_t run_call(llama_cancel_tts * tts, const llama_cancel_tts_run_params * params, llama_cancel_tts_result * result,
                 Step step) {
    if (tts == nullptr) {
        if (result != nullptr) {
            *result = llama_cancel_tts_result{};
        }
        return fail(result, "tts is NULL");
    }
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR), [&] {
        const llama_cancel_tts_run_params rp = params != nullptr ? *params : llama_cancel_tts_run_default_params();
        tts->state.reach      = LLAMA_CANCEL_REACH_GRAPH; // this call's graphs (none yet)
        tts->state.mtmd_reach = LLAMA_CANCEL_REACH_GRAPH;
        const int32_t st = step(*tts, rp);
        report(*tts, st, result);
        return st;
    });
}

} // namespace

extern "C" int32_t llama_cancel_tts_generate(llama_cancel_tts * tts, const llama_cancel_tts_run_params * params,
                                             llama_cancel_tts_result * result) {
    return run_call(tts, params, result, generate);
}

extern "C" int32_t llama_cancel_tts_flush(llama_cancel_tts * tts, const llama_cancel_tts_run_params * params,
                                          llama_cancel_tts_result * result) {
    return run_call(tts, params, result, [](llama_cancel_tts & t, const llama_cancel_tts_run_params & rp) {
        if (llama_cancel::byte_is_set(rp.byte)) {
            return stopped(t, LLAMA_CANCEL_TTS_STEP_BETWEEN);
        }
        const int32_t st = flush_window(t, rp);
        if (st == LLAMA_CANCEL_OK) {
            t.state.finished = 1;
        }
        return st;
    });
}

extern "C" const float * llama_cancel_tts_get_pcm(const llama_cancel_tts * tts, int64_t * n_samples) {
    const bool any = tts != nullptr && !tts->pcm.empty();
    if (n_samples != nullptr) {
        *n_samples = any ? static_cast<int64_t>(tts->pcm.size()) : 0;
    }
    return any ? tts->pcm.data() : nullptr;
}

extern "C" int32_t llama_cancel_mtmd_gen_audio_process(mtmd_context * mctx, const mtmd_gen_inp * inp,
                                                       mtmd_gen_out * out, const llama_cancel_gen_audio_params * params,
                                                       llama_cancel_gen_audio_result * result) {
    if (result != nullptr) {
        *result = llama_cancel_gen_audio_result{};
    }
    if (mctx == nullptr || inp == nullptr || out == nullptr) {
        return fail(result, "%s is NULL", mctx == nullptr ? "mctx" : inp == nullptr ? "inp" : "out");
    }
    return llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR), [&] {
        llama_cancel_tts_run_params rp = llama_cancel_tts_run_default_params();
        if (params != nullptr) {
            rp.byte      = params->byte;
            rp.mtmd_hook = params->mtmd_hook;
        }
        llama_cancel_tts t;
        t.mctx = mctx;
        const int32_t step = inp->type == MTMD_GEN_PROCESS_TYPE_GEN_CODE ? LLAMA_CANCEL_TTS_STEP_GEN_CODE
                                                                         : LLAMA_CANCEL_TTS_STEP_GEN_WAV;
        const int32_t st = llama_cancel::byte_is_set(rp.byte) ? stopped(t, step) : process(t, rp, *inp, *out);
        if (st != LLAMA_CANCEL_OK) {
            *out = mtmd_gen_out{}; // garbage after a stop, nothing after an error
        }
        if (result != nullptr) {
            result->status = st;
            result->step   = st == LLAMA_CANCEL_OK ? LLAMA_CANCEL_TTS_STEP_NONE : t.state.step;
            result->reach  = t.state.mtmd_reach;
            std::memcpy(result->message, t.state.message, sizeof(result->message));
        }
        return st;
    });
}
