"""make_tts.py --pipeline qwen3tts: a synthetic Qwen3-TTS pair (talker backbone + qwen3tts_gen mmproj).

write_pair(model_path, mmproj_path, cfg, seed) writes two GGUF files, each atomically via PATH.tmp,
byte-identical for the same arguments, all weights f32 seeded numpy default_rng numbers:

  model   architecture qwen3tts (Qwen3 layers with q/k norms, SwiGLU, interleaved M-RoPE), the
          talker. Vocabulary: make_model.py's SPM text vocabulary (n_text tokens), the text
          specials <|im_start|>, <|im_end|>, <tts_pad>, <tts_text_bos>, <tts_text_eod> (CONTROL),
          then the codec block of n_codec_vocab CONTROL tokens "<|codec_I|>" whose named rows sit
          where the real model has them (relative to <|codec_0|>): codec_pad 2148, codec_bos 2149,
          codec_eos_token 2150, codec_think 2154, codec_nothink 2155, codec_think_bos 2156,
          codec_think_eos 2157, codec_language_english 2050 (and a few more languages).
          tokenizer.ggml.eos_token_id is <|codec_eos_token|>; tokenizer.ggml.suppress_tokens lists
          the last 1024 codec rows except EOS, as the real converter writes it: codebook 0 has
          2048 codes (code2wav's first codebook), the rows past them are the codec's specials.
  mmproj  clip.has_gen_audio_encoder, projector qwen3tts_gen: the code predictor (a small Qwen3
          transformer: proj_in, 15 codebook tables and heads, out_embd for codebook 0) and
          code2wav (RVQ decode, pre_conv, the 8-layer sliding-window transformer libmtmd hard-codes,
          two 2x ConvNeXt upsamplers, a DAC decoder with strides 8, 5, 4, 3: 1920 samples a frame,
          24 kHz). libmtmd takes the code2wav layer count (8), head count (16), window (72 frames)
          and block counts from clip.cpp, not from the file; the widths come from the tensors.

How the random talker is steered so that a generation runs for a controllable number of frames:
every embedding that reaches the talker (its token rows, out_embd and the 15 codebook tables, whose
feedback sum is what the talker decodes each frame) has a constant BIAS_C in hidden dimension 0,
much larger than the rest, and the layers write little into it. After the final RMS norm,
dimension 0 is then about +sqrt(n_embd) at every position, so column 0 of the output matrix acts
as a per-token logit bias: 0 for the n_code0 codec rows <|codec_0|>..<|codec_{n_code0-1}|> it
speaks in (their other columns give logits of std `code_logit_std`), `eos_bias` for
<|codec_eos_token|>, -40 for the codebook's other codes (valid, never used), and `suppressed_bias`
for the codec specials the file suppresses. Like the real talker's, those rows carry logits of
their own that nothing in the weights holds down: only tokenizer.ggml.suppress_tokens keeps them
from being sampled, as in llama.cpp's sampling (the presets' +2 makes a suppressed special the
unsuppressed argmax at every frame, so a sampler that ignores the list fails at once). With the list
applied, sampling picks a codec code or, rarely, EOS. llama-tts samples code0 with common_sampler's defaults (min_p 0.05 among them), so
EOS is only drawn when its logit comes near the best code's: measured with llama-tts -t 1 on tiny,
eos_bias 0.8 ended seed 1 after 23 frames; -0.5 (the presets') ran seeds 1-3 to llama-tts's
512-frame cap, so -n sets the length.

Measured with Debian's libmtmd 0.7.0, CPU, 1 thread, on a shared 2-core machine (noisy):
  tiny   2.1 + 2.7 MB. GEN_CODE ~6 ms; GEN_WAV of a 72-frame window ~340-390 ms (the DAC at 24 kHz
         dominates whatever the widths), state 150 KB; llama-tts: 512 frames in ~20-30 s.
  bench  20 + 20 MB. GEN_CODE ~14 ms; GEN_WAV ~1.3-1.6 s, state 614 KB.
The audio is noise, about a fifth of it clipped at +-1 by code2wav's final clamp.
"""

import numpy as np
import gguf

import gguf_files
import make_mmproj
import make_model
from model_archs import mrope_sections

T = gguf.MODEL_TENSOR

# Named codec rows, relative to <|codec_0|>, where the real Qwen3-TTS talker has them.
CODEC_SPECIALS = {
    2148: "<|codec_pad|>", 2149: "<|codec_bos|>", 2150: "<|codec_eos_token|>",
    2154: "<|codec_think|>", 2155: "<|codec_nothink|>", 2156: "<|codec_think_bos|>",
    2157: "<|codec_think_eos|>",
    2050: "<|codec_language_english|>", 2055: "<|codec_language_chinese|>",
    2058: "<|codec_language_japanese|>", 2064: "<|codec_language_korean|>",
}
CODEC_EOS = 2150
TEXT_SPECIALS = ["<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]
N_ACOUSTIC = 15            # codebooks 1..15 (the code predictor's); 16 codes a frame
DAC_STRIDES = (8, 5, 4, 3)  # x 4 (two 2x upsamplers) = 1920 samples a frame
BIAS_C = 24.0              # the constant in hidden dimension 0 (see the docstring)
NEG = -40.0                # logit bias of the codebook's codes the talker never speaks in
N_CODEBOOK = 2048          # codebook 0's codes (code2wav's first codebook); the codec rows after them are specials

PRESETS = {
    # talker n_embd/n_layer/n_ff/heads; code predictor width/layers/ff/heads; codebook-0 codes
    # the talker samples from; acoustic vocab; code2wav: RVQ dim, quantizer/transformer/upsampler
    # widths, DAC entry width and the 4 blocks' output widths, ConvNeXt ff, DAC residual kernel.
    "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2, n_text=512,
                 n_codec_vocab=3072, n_code0=64,
                 pred_embd=64, pred_layer=2, pred_ff=128, pred_head=4, pred_head_kv=2,
                 n_acoustic_vocab=64,
                 rvq_dim=32, wav_hidden=32, wav_tfm=32, wav_tfm_ff=64, wav_up=32, wav_up_ff=64,
                 dac_entry=16, dac_ch=(8, 4, 4, 4), dac_kernel=3,
                 code_logit_std=1.5, eos_bias=-0.5, suppressed_bias=2.0),
    "bench": dict(n_embd=256, n_layer=4, n_ff=768, n_head=4, n_head_kv=2, n_text=1024,
                  n_codec_vocab=3072, n_code0=64,
                  pred_embd=128, pred_layer=3, pred_ff=384, pred_head=4, pred_head_kv=2,
                  n_acoustic_vocab=256,
                  rvq_dim=64, wav_hidden=128, wav_tfm=128, wav_tfm_ff=256, wav_up=128, wav_up_ff=256,
                  dac_entry=64, dac_ch=(32, 16, 16, 8), dac_kernel=7,
                  code_logit_std=1.5, eos_bias=-0.5, suppressed_bias=2.0),
    # the bench pair with a code predictor of the real one's depth at a quarter of its width:
    # GEN_CODE of 15-20 ms on one core (issue 46's stop row)
    "pred": dict(n_embd=256, n_layer=4, n_ff=768, n_head=4, n_head_kv=2, n_text=1024,
                 n_codec_vocab=3072, n_code0=64,
                 pred_embd=256, pred_layer=5, pred_ff=768, pred_head=4, pred_head_kv=2,
                 n_acoustic_vocab=256,
                 rvq_dim=64, wav_hidden=128, wav_tfm=128, wav_tfm_ff=256, wav_up=128, wav_up_ff=256,
                 dac_entry=64, dac_ch=(32, 16, 16, 8), dac_kernel=7,
                 code_logit_std=1.5, eos_bias=-0.5, suppressed_bias=2.0),
}


class Rand:
    """Seeded f32 tensors added to a GGUFWriter in the order asked for; numpy shapes are ggml's ne
    reversed."""

    def __init__(self, writer, seed):
        self.w = writer
        self.rng = np.random.default_rng(seed)

    def add(self, name, data):
        self.w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))

    def normal(self, shape, std):
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def mat(self, name, n_out, n_in, std=None):
        self.add(name, self.normal((n_out, n_in), 1.0 / np.sqrt(n_in) if std is None else std))

    def const(self, name, n, value=1.0):
        self.add(name, np.full(n, value, dtype=np.float32))


def tn(t, bid=None, suffix=".weight"):
    return gguf.TENSOR_NAMES[t].format(bid=bid) + suffix


def vocab(cfg):
    """The talker's tokens, scores and types, and the id of <|codec_0|>."""
    tokens, scores, types = make_model.make_vocab(cfg["n_text"])
    tokens += TEXT_SPECIALS
    scores += [0.0] * len(TEXT_SPECIALS)
    types += [int(gguf.TokenType.CONTROL)] * len(TEXT_SPECIALS)
    codec_0 = len(tokens)
    for i in range(cfg["n_codec_vocab"]):
        tokens.append(CODEC_SPECIALS.get(i, "<|codec_%d|>" % i))
    scores += [0.0] * cfg["n_codec_vocab"]
    types += [int(gguf.TokenType.CONTROL)] * cfg["n_codec_vocab"]
    return tokens, scores, types, codec_0


def biased_rows(r, shape, std, dim0):
    """Embedding rows (numpy shape, the row width last) N(0, std^2) with dimension 0 set to dim0."""
    m = r.normal(shape, std)
    m[..., 0] = dim0
    return m


def build_model(path, cfg, seed):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    tokens, scores, types, codec_0 = vocab(cfg)
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3TTS])
    w.add_name("llama-cancel synthetic qwen3tts talker %dx%d seed %d" % (n_layer, n_embd, seed))
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_dimension_sections(mrope_sections(head_dim))
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))

    r = Rand(w, seed)
    # writers into the residual stream are small, so dimension 0 stays dominated by BIAS_C
    std_out = 0.5 / np.sqrt(n_embd * 2.0 * n_layer)
    r.add(tn(T.TOKEN_EMBD), biased_rows(r, (n_vocab, n_embd), 1.0, BIAS_C))
    for b in range(n_layer):
        r.const(tn(T.ATTN_NORM, b), n_embd)
        r.mat(tn(T.ATTN_Q, b), n_head * head_dim, n_embd)
        r.mat(tn(T.ATTN_K, b), n_head_kv * head_dim, n_embd)
        r.mat(tn(T.ATTN_V, b), n_head_kv * head_dim, n_embd)
        r.const(tn(T.ATTN_Q_NORM, b), head_dim)
        r.const(tn(T.ATTN_K_NORM, b), head_dim)
        r.mat(tn(T.ATTN_OUT, b), n_embd, n_head * head_dim, std_out)
        r.const(tn(T.FFN_NORM, b), n_embd)
        r.mat(tn(T.FFN_GATE, b), n_ff, n_embd)
        r.mat(tn(T.FFN_UP, b), n_ff, n_embd)
        r.mat(tn(T.FFN_DOWN, b), n_embd, n_ff, std_out)
    r.const(tn(T.OUTPUT_NORM), n_embd)
    # After the norm, h[0] ~ sqrt(n_embd) * BIAS_C / sqrt(BIAS_C^2 + rest), the rest of h small:
    # column 0 sets each token's logit bias, the other columns the codes' random logits.
    rest = 1.0 + 2.0                      # the other dimensions' summed variance, about
    h0 = np.sqrt(n_embd) * BIAS_C / np.sqrt(BIAS_C ** 2 + (n_embd - 1) * rest)
    h_rest = np.sqrt(n_embd * rest / (BIAS_C ** 2 + (n_embd - 1) * rest))
    # the output matrix covers the codec block only (libllama 0.7.0 wants 3072 rows: the text
    # tokens' logits are -inf), row i for <|codec_i|>
    n_codec = cfg["n_codec_vocab"]
    out = r.normal((n_codec, n_embd), cfg["code_logit_std"] / (h_rest * np.sqrt(n_embd - 1)))
    bias = np.full(n_codec, NEG, dtype=np.float32)
    bias[:cfg["n_code0"]] = 0.0
    bias[N_CODEBOOK:] = cfg["suppressed_bias"]
    bias[CODEC_EOS] = cfg["eos_bias"]
    out[:, 0] = bias / h0
    out[CODEC_EOS, 1:] = 0.0
    r.add(tn(T.OUTPUT), out)

    make_model.add_spm_vocab(w, tokens, scores, types, eos=codec_0 + CODEC_EOS, add_bos=False, space_prefix=False)
    w.add_suppress_tokens([codec_0 + i for i in range(N_CODEBOOK, n_codec) if i != CODEC_EOS])

    gguf_files.write_and_close(w)


def conv(r, name, k, n_in, n_out, std=None, bias=True):
    """A conv1d weight, ggml ne [k, n_in, n_out], and its bias."""
    r.add(name + ".weight", r.normal((n_out, n_in, k), 1.0 / np.sqrt(k * n_in) if std is None else std))
    if bias:
        r.add(name + ".bias", r.normal((n_out,), 0.01))


def convt(r, name, k, n_in, n_out):
    """A transposed conv1d weight, ggml ne [k, n_out, n_in] (stride k / 2 or k), and its bias."""
    r.add(name + ".weight", r.normal((n_in, n_out, k), 1.0 / np.sqrt(n_in)))
    r.add(name + ".bias", r.normal((n_out,), 0.01))


def snake(r, name, n):
    r.add(name + ".alpha", 1.0 + r.normal((n,), 0.1))
    r.add(name + ".beta", 0.5 + r.normal((n,), 0.05))


class AudioKeys:
    """The writer for make_mmproj.build_audio: its projector type goes to clip.audio.projector_type
    (clip.projector_type would be every part's, the gen-audio one included)."""

    def __init__(self, writer):
        self.w = writer

    def __getattr__(self, name):
        return getattr(self.w, name)

    def add_clip_projector_type(self, value):
        self.w.add_string(gguf.Keys.ClipAudio.PROJECTOR_TYPE, value)


def build_mmproj(path, cfg, seed):
    E, P = cfg["n_embd"], cfg["pred_embd"]
    n_codec, n_ac = cfg["n_codec_vocab"], cfg["n_acoustic_vocab"]
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name("llama-cancel synthetic qwen3tts_gen seed %d" % seed)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_clip_has_gen_audio_encoder(True)
    w.add_clip_gen_audio_projector_type(gguf.VisionProjectorType.QWEN3TTS_GEN)
    w.add_gen_audio_projection_dim(E)
    w.add_gen_audio_embedding_length(P)
    w.add_gen_audio_feed_forward_length(cfg["pred_ff"])
    w.add_gen_audio_block_count(cfg["pred_layer"])
    w.add_gen_audio_head_count(cfg["pred_head"])
    w.add_gen_audio_head_count_kv(cfg["pred_head_kv"])
    w.add_gen_audio_attention_layernorm_eps(1e-6)

    # libmtmd 0.7.0's mtmd_init_from_file refuses a projector file without a vision or audio
    # (input) encoder, even one with a gen-audio part: the real file has the qwen3tts_spkenc speaker
    # encoder there. This one carries make_mmproj.py's tiny whisper + ultravox audio encoder
    # instead, which llama-tts never runs (without --tts-speaker-file).
    make_mmproj.build_audio(AudioKeys(w), make_mmproj.Weights(seed), dict(
        make_mmproj.PRESETS[("audio", "tiny")], n_embd_text=E, projector="ultravox"))

    r = Rand(w, [seed, 1])
    # --- code predictor ---
    hd = P // cfg["pred_head"]
    r.mat(tn(T.A_GEN_CODE_PROJ_IN), P, E)
    r.add(tn(T.A_GEN_CODE_PROJ_IN, suffix=".bias"), r.normal((P,), 0.01))
    # the 16 rows fed back to the talker sum to BIAS_C in dimension 0
    r.add(tn(T.A_GEN_CODE_EMBD), biased_rows(r, (N_ACOUSTIC, n_ac, E), 0.25, BIAS_C / 16))
    r.add(tn(T.A_GEN_CODE_HEAD), r.normal((N_ACOUSTIC, n_ac, P), 2.0 / np.sqrt(P)))
    # codebook 0's feedback row is the talker's codec embedding, every codec row (as the converter
    # writes it): GEN_CODE takes a special as code0, only code2wav's codebook refuses it
    r.add(tn(T.A_GEN_CODE_OUT_EMBD), biased_rows(r, (n_codec, E), 0.25, BIAS_C / 16))
    for b in range(cfg["pred_layer"]):
        r.const(tn(T.A_GEN_CODE_ATTN_NORM, b), P)
        r.mat(tn(T.A_GEN_CODE_ATTN_Q, b), cfg["pred_head"] * hd, P)
        r.const(tn(T.A_GEN_CODE_ATTN_Q_NORM, b), hd)
        r.mat(tn(T.A_GEN_CODE_ATTN_K, b), cfg["pred_head_kv"] * hd, P)
        r.const(tn(T.A_GEN_CODE_ATTN_K_NORM, b), hd)
        r.mat(tn(T.A_GEN_CODE_ATTN_V, b), cfg["pred_head_kv"] * hd, P)
        r.mat(tn(T.A_GEN_CODE_ATTN_OUT, b), P, cfg["pred_head"] * hd, 0.5 / np.sqrt(P))
        r.const(tn(T.A_GEN_CODE_FFN_NORM, b), P)
        r.mat(tn(T.A_GEN_CODE_FFN_GATE, b), cfg["pred_ff"], P)
        r.mat(tn(T.A_GEN_CODE_FFN_UP, b), cfg["pred_ff"], P)
        r.mat(tn(T.A_GEN_CODE_FFN_DOWN, b), P, cfg["pred_ff"], 0.5 / np.sqrt(cfg["pred_ff"]))
    r.const(tn(T.A_GEN_CODE_OUTPUT_NORM), P)

    # --- code2wav ---
    D, H, F = cfg["rvq_dim"], cfg["wav_hidden"], cfg["wav_tfm"]
    Hp = cfg["wav_up"]                           # pre_conv output, upsampler width (1024 in the real one)
    r.mat(tn(T.A_GEN_WAV_QUANT_FIRST_IN), D, H)
    r.mat(tn(T.A_GEN_WAV_QUANT_FIRST_OUT), H, D)
    r.add(tn(T.A_GEN_WAV_QUANT_FIRST_CB), r.normal((N_CODEBOOK, D), 1.0))
    r.mat(tn(T.A_GEN_WAV_QUANT_REST_IN), D, H)
    r.mat(tn(T.A_GEN_WAV_QUANT_REST_OUT), H, D)
    r.add(tn(T.A_GEN_WAV_QUANT_REST_CB), r.normal((N_ACOUSTIC, n_ac, D), 1.0 / np.sqrt(N_ACOUSTIC)))
    conv(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_PRE_CONV], 3, H, Hp)
    r.mat(tn(T.A_GEN_WAV_TFM_IN_PROJ), F, Hp)
    r.add(tn(T.A_GEN_WAV_TFM_IN_PROJ, suffix=".bias"), r.normal((F,), 0.01))
    for b in range(8):                          # wav_tfm_n_layer, hard-coded in clip.cpp
        r.const(tn(T.A_GEN_WAV_TFM_ATTN_NORM, b), F)
        r.mat(tn(T.A_GEN_WAV_TFM_ATTN_Q, b), F, F)
        r.mat(tn(T.A_GEN_WAV_TFM_ATTN_K, b), F, F)
        r.mat(tn(T.A_GEN_WAV_TFM_ATTN_V, b), F, F)
        r.mat(tn(T.A_GEN_WAV_TFM_ATTN_OUT, b), F, F)
        r.const(tn(T.A_GEN_WAV_TFM_ATTN_SCALE, b), F, 0.1)
        r.const(tn(T.A_GEN_WAV_TFM_FFN_NORM, b), F)
        r.mat(tn(T.A_GEN_WAV_TFM_FFN_GATE, b), cfg["wav_tfm_ff"], F)
        r.mat(tn(T.A_GEN_WAV_TFM_FFN_UP, b), cfg["wav_tfm_ff"], F)
        r.mat(tn(T.A_GEN_WAV_TFM_FFN_DOWN, b), F, cfg["wav_tfm_ff"])
        r.const(tn(T.A_GEN_WAV_TFM_FFN_SCALE, b), F, 0.1)
    r.const(tn(T.A_GEN_WAV_TFM_OUTPUT_NORM), F)
    r.mat(tn(T.A_GEN_WAV_TFM_OUT_PROJ), Hp, F)
    r.add(tn(T.A_GEN_WAV_TFM_OUT_PROJ, suffix=".bias"), r.normal((Hp,), 0.01))
    for b in range(2):                          # wav_upsample_n_block: 2x each, kernel == stride
        name = gguf.TENSOR_NAMES[T.A_GEN_WAV_UP_CONV].format(bid=b)
        convt(r, name, 2, Hp, Hp)
        r.add(tn(T.A_GEN_WAV_UP_DWCONV, b), r.normal((Hp, 1, 7), 1.0 / np.sqrt(7)))
        r.add(tn(T.A_GEN_WAV_UP_DWCONV, b, ".bias"), r.normal((Hp,), 0.01))
        r.const(tn(T.A_GEN_WAV_UP_NORM, b), Hp)
        r.const(tn(T.A_GEN_WAV_UP_NORM, b, ".bias"), Hp, 0.0)
        r.mat(tn(T.A_GEN_WAV_UP_PW1, b), cfg["wav_up_ff"], Hp)
        r.add(tn(T.A_GEN_WAV_UP_PW1, b, ".bias"), r.normal((cfg["wav_up_ff"],), 0.01))
        r.mat(tn(T.A_GEN_WAV_UP_PW2, b), Hp, cfg["wav_up_ff"])
        r.add(tn(T.A_GEN_WAV_UP_PW2, b, ".bias"), r.normal((Hp,), 0.01))
        r.add(tn(T.A_GEN_WAV_UP_GAMMA, b, ""), np.full(Hp, 0.1, dtype=np.float32))
    conv(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_ENTRY], 3, Hp, cfg["dac_entry"])
    c_in = cfg["dac_entry"]
    for b, (stride, c) in enumerate(zip(DAC_STRIDES, cfg["dac_ch"])):
        snake(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_UP_SNAKE].format(bid=b), c_in)
        convt(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_UP_CONV].format(bid=b), 2 * stride, c_in, c)
        for x in range(3):                      # wav_dac_n_res, dilations 1, 3, 9
            snake(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_RES_ACT1].format(bid=b, xid=x), c)
            conv(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_RES_CONV1].format(bid=b, xid=x), cfg["dac_kernel"], c, c)
            snake(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_RES_ACT2].format(bid=b, xid=x), c)
            conv(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_RES_CONV2].format(bid=b, xid=x), 1, c, c,
                 std=0.3 / np.sqrt(c))
        c_in = c
    snake(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_POST_SNAKE], c_in)
    conv(r, gguf.TENSOR_NAMES[T.A_GEN_WAV_DAC_POST_CONV], 7, c_in, 1, std=0.1 / np.sqrt(7 * c_in))

    gguf_files.write_and_close(w)


def write_pair(model_path, mmproj_path, preset_cfg, seed):
    """Writes the talker to model_path and the qwen3tts_gen projector to mmproj_path."""
    gguf_files.write_atomically(model_path, lambda p, c: build_model(p, c, seed), preset_cfg)
    gguf_files.write_atomically(mmproj_path, lambda p, c: build_mmproj(p, c, seed), preset_cfg)
