"""make_tts.py --pipeline pockettts: a synthetic Pocket-TTS pair (pockettts backbone + pockettts_gen mmproj).

write_pair(model_path, mmproj_path, cfg, seed) writes two GGUF files, each atomically via PATH.tmp,
byte-identical for the same arguments, all weights f32 seeded numpy default_rng numbers:

  model   architecture pockettts: the flow language model's "text" backbone (pre-LayerNorm
          attention layers with biased norms, a GELU FFN, a final LayerNorm, no output head:
          llama.cpp reuses token_embd). Vocabulary: make_model.py's SPM text vocabulary (n_text
          tokens) plus the CONTROL tokens <|audio_bos|> and <|bos_before_voice|> that libmtmd's
          pocket-tts helper looks up. mtmd-helper reads the hidden state (embeddings on) and feeds
          back the flow net's embedding each frame.
  mmproj  clip.has_gen_audio_encoder, projector pockettts_gen, model_variant "english":
          GEN_CODE: the end-of-speech head (a.gen.out_eos) on the hidden state, then the
          flow-matching net (input_proj, cond_embd, two timestep embedders, AdaLN residual blocks,
          final AdaLN + proj) integrated from noise in one step (libmtmd 0.7.0 hard-codes
          flow_n_step 1), then a.gen.input_linear back to the backbone's width.
          GEN_WAV: emb_std/emb_mean, quant_out, the depthwise 16x upsample, the mimi decoder
          transformer (gen.audio n_embd/n_head/n_ff/block_count; libmtmd hard-codes its 250-frame
          context and rope theta 10000), then the SEANet decoder: conv_in, three stages
          (ELU, transposed conv, residual unit) with the strides libmtmd hard-codes (6, 5, 4), ELU,
          conv_out to one channel. 16 * 6 * 5 * 4 = 1920 samples a frame at 24 kHz (12.5 frames/s).
          The widths and kernel sizes come from the tensors. As for tts_qwen3.py, libmtmd 0.7.0
          refuses a projector file without an input encoder, so the file also carries
          make_mmproj.py's tiny whisper + ultravox audio encoder, which llama-tts never runs (the
          real file has the pockettts_spkenc voice encoder there; it is not written here).

How long a generation runs: the EOS head's weights are zero and its bias is -100, far below
libmtmd's threshold (-4), so is_eos never fires and every chunk of text ends at mtmd-helper's
budget of ceil((n_tok / 3 + 2) * 12.5) frames (n_tok: the chunk's text tokens, as mtmd-helper
counts them): "Hello world." gives 59 frames on tiny (8 tokens), 50 on bench (6 tokens; its larger
vocabulary has longer pieces). A text over 50 tokens is split at sentence punctuation into chunks,
each with its own budget (llama-tts logs "chunk N hit its budget without end-of-speech"); llama-tts
stops at 512 frames in all. A caller that wants fewer frames stops early itself (llama-tts: -n).

Measured with Debian's libmtmd 0.7.0, CPU, 1 thread (mtmd n_threads 1), on a shared 2-core machine:
  tiny   0.4 + 14.7 MB. GEN_CODE ~1.5 ms; GEN_WAV of 8 frames ~54 ms, state 135 KB.
         llama-tts -t 1: "Hello world." 59 frames in 0.55 s; a 4-sentence text 512 frames in 4.2 s.
  bench  11.6 + 54.6 MB. GEN_CODE ~5-6 ms; GEN_WAV of 8 frames ~160-175 ms, state 527 KB.
         llama-tts -t 1: 50 frames in 1.0 s; 512 frames in 10.4 s.
The audio is noise at about a quarter of full scale, a few samples a thousand clipped at +-1.
"""

import numpy as np
import gguf

import gguf_files
import make_mmproj
import make_model
from tts_qwen3 import AudioKeys, Rand, conv, tn

T = gguf.MODEL_TENSOR

SPECIALS = ["<|audio_bos|>", "<|bos_before_voice|>"]
SEANET_STRIDES = (6, 5, 4)   # decoder order; libmtmd 0.7.0 hard-codes them (ratios 4, 5, 6 reversed)
UPSAMPLE = 16                # libmtmd's mimi_downsample: frame rate -> encoder frame rate
N_LATENT = 32                # the real model's latent width (any width loads)
EPS = 1e-5

PRESETS = {
    # backbone n_embd/n_layer/n_ff/heads/text vocab; flow net channels, AdaLN blocks, block hidden
    # width, timestep frequencies; mimi transformer width/layers/ff/heads; SEANet conv_in width (each
    # stage halves it), kernel of conv_in/conv_out, residual hidden = channels / 2.
    # tiny:  GEN_CODE ~1.5 ms, GEN_WAV of 8 frames ~54 ms (1 thread).
    "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_text=512,
                 flow_ch=320, flow_blocks=4, flow_hidden=640, flow_freqs=64,
                 tfm_embd=64, tfm_layer=1, tfm_ff=128, tfm_head=4,
                 seanet_ch=80, seanet_kernel=7),
    # bench: GEN_CODE ~5-6 ms, GEN_WAV of 8 frames ~160-175 ms (1 thread).
    "bench": dict(n_embd=256, n_layer=4, n_ff=768, n_head=4, n_text=1024,
                  flow_ch=512, flow_blocks=6, flow_hidden=1024, flow_freqs=128,
                  tfm_embd=128, tfm_layer=2, tfm_ff=256, tfm_head=4,
                  seanet_ch=192, seanet_kernel=7),
    # mimi512: bench with the mimi decoder at Mimi's widths (SEANet dimension 512 from 64 filters,
    # transformer 512 wide, ff 2048, 8 heads; 2 layers), to see its nodes' proportions: GEN_WAV of
    # 8 frames ~275 ms on the CPU (1 thread), its longest node (a product) ~13% of it.
    "mimi512": dict(n_embd=256, n_layer=4, n_ff=768, n_head=4, n_text=1024,
                    flow_ch=512, flow_blocks=6, flow_hidden=1024, flow_freqs=128,
                    tfm_embd=512, tfm_layer=2, tfm_ff=2048, tfm_head=8,
                    seanet_ch=512, seanet_kernel=7),
}


def vocab(cfg):
    tokens, scores, types = make_model.make_vocab(cfg["n_text"])
    tokens += SPECIALS
    scores += [0.0] * len(SPECIALS)
    types += [int(gguf.TokenType.CONTROL)] * len(SPECIALS)
    return tokens, scores, types


def build_model(path, cfg, seed):
    n_embd, n_layer, n_ff, n_head = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"], cfg["n_head"]
    tokens, scores, types = vocab(cfg)
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.POCKETTTS])
    w.add_name("llama-cancel synthetic pockettts backbone %dx%d seed %d" % (n_layer, n_embd, seed))
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_eps(EPS)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))

    r = Rand(w, [seed, 0])
    std_out = 1.0 / np.sqrt(n_embd * 2.0 * n_layer)
    r.add(tn(T.TOKEN_EMBD), r.normal((n_vocab, n_embd), 1.0))
    for b in range(n_layer):
        for t in (T.ATTN_NORM, T.FFN_NORM):
            r.const(tn(t, b), n_embd, 1.0)
            r.const(tn(t, b, ".bias"), n_embd, 0.0)
        r.mat(tn(T.ATTN_Q, b), n_embd, n_embd)
        r.mat(tn(T.ATTN_K, b), n_embd, n_embd)
        r.mat(tn(T.ATTN_V, b), n_embd, n_embd)
        r.mat(tn(T.ATTN_OUT, b), n_embd, n_embd, std_out)
        r.mat(tn(T.FFN_UP, b), n_ff, n_embd)
        r.mat(tn(T.FFN_DOWN, b), n_embd, n_ff, std_out)
    r.const(tn(T.OUTPUT_NORM), n_embd, 1.0)
    r.const(tn(T.OUTPUT_NORM, suffix=".bias"), n_embd, 0.0)

    make_model.add_spm_vocab(w, tokens, scores, types)
    gguf_files.write_and_close(w)


def linear(r, name, n_out, n_in, std=None, bias=True):
    r.mat(name + ".weight", n_out, n_in, std)
    if bias:
        r.add(name + ".bias", r.normal((n_out,), 0.01))


def build_mmproj(path, cfg, seed):
    E, C, H = cfg["n_embd"], cfg["flow_ch"], cfg["flow_hidden"]
    D = cfg["tfm_embd"]
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name("llama-cancel synthetic pockettts_gen seed %d" % seed)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_clip_has_gen_audio_encoder(True)
    w.add_clip_gen_audio_projector_type(gguf.VisionProjectorType.POCKETTTS_GEN)
    w.add_gen_audio_model_variant("english")
    w.add_gen_audio_projection_dim(E)
    w.add_gen_audio_embedding_length(D)
    w.add_gen_audio_feed_forward_length(cfg["tfm_ff"])
    w.add_gen_audio_block_count(cfg["tfm_layer"])
    w.add_gen_audio_head_count(cfg["tfm_head"])
    w.add_gen_audio_attention_layernorm_eps(EPS)

    # see tts_qwen3.py: an input encoder libmtmd 0.7.0 wants in the file, never run by llama-tts
    make_mmproj.build_audio(AudioKeys(w), make_mmproj.Weights(seed), dict(
        make_mmproj.PRESETS[("audio", "tiny")], n_embd_text=E, projector="ultravox"))

    r = Rand(w, [seed, 1])
    name = gguf.TENSOR_NAMES
    # --- GEN_CODE: EOS head (never fires, see the docstring) and the flow net ---
    r.add(name[T.A_GEN_OUT_EOS] + ".weight", np.zeros((1, E), dtype=np.float32))
    r.const(name[T.A_GEN_OUT_EOS] + ".bias", 1, -100.0)
    linear(r, name[T.A_GEN_FLOW_INPUT_PROJ], C, N_LATENT)
    linear(r, name[T.A_GEN_FLOW_COND_EMBD], C, E)
    F = cfg["flow_freqs"]
    freqs = np.exp(-np.log(10000.0) * np.arange(F, dtype=np.float64) / F).astype(np.float32)
    for i in range(2):
        r.add(name[T.A_GEN_FLOW_TIME_FREQS].format(bid=i), freqs)
        linear(r, name[T.A_GEN_FLOW_TIME_UP].format(bid=i), C, 2 * F)
        linear(r, name[T.A_GEN_FLOW_TIME_DOWN].format(bid=i), C, C)
        r.const(name[T.A_GEN_FLOW_TIME_NORM].format(bid=i), C, 1.0)
    gain = 1.0 / np.sqrt(2.0 * cfg["flow_blocks"])
    for b in range(cfg["flow_blocks"]):
        r.const(name[T.A_GEN_FLOW_BLK_NORM].format(bid=b) + ".weight", C, 1.0)
        r.const(name[T.A_GEN_FLOW_BLK_NORM].format(bid=b) + ".bias", C, 0.0)
        linear(r, name[T.A_GEN_FLOW_BLK_UP].format(bid=b), H, C)
        linear(r, name[T.A_GEN_FLOW_BLK_DOWN].format(bid=b), C, H, gain / np.sqrt(H))
        # shift, scale, gate; small so that the modulation stays near identity
        linear(r, name[T.A_GEN_FLOW_BLK_ADA].format(bid=b), 3 * C, C, 0.1 / np.sqrt(C))
    linear(r, name[T.A_GEN_FLOW_FINAL_ADA], 2 * C, C, 0.1 / np.sqrt(C))
    linear(r, name[T.A_GEN_FLOW_FINAL_PROJ], N_LATENT, C)
    # latent -> backbone input, ggml ne [N_LATENT, E]
    r.mat(name[T.A_GEN_INPUT_LINEAR] + ".weight", E, N_LATENT)
    r.const(name[T.A_GEN_EMB_MEAN], N_LATENT, 0.0)
    r.const(name[T.A_GEN_EMB_STD], N_LATENT, 1.0)

    # --- GEN_WAV: quant_out, upsample, mimi decoder transformer, SEANet decoder ---
    r.mat(name[T.A_GEN_WAV_QUANT_OUT] + ".weight", D, N_LATENT)
    # depthwise transposed conv, ggml ne [2 * UPSAMPLE, 1, D]
    r.add(name[T.A_GEN_WAV_UPSAMPLE] + ".weight", r.normal((D, 1, 2 * UPSAMPLE), 1.0 / np.sqrt(2.0)))
    p = "a.gen.wav.tfm.blk.%d."
    for b in range(cfg["tfm_layer"]):
        for ln in ("ln1", "ln2"):
            r.const(p % b + ln + ".weight", D, 1.0)
            r.const(p % b + ln + ".bias", D, 0.0)
        for a in ("attn_q", "attn_k", "attn_v", "attn_out"):
            r.mat(p % b + a + ".weight", D, D)
        r.mat(p % b + "ffn_up.weight", cfg["tfm_ff"], D)
        r.mat(p % b + "ffn_down.weight", D, cfg["tfm_ff"])
        r.const(p % b + "ls1.weight", D, 0.1)   # layer scales
        r.const(p % b + "ls2.weight", D, 0.1)
    K, ch = cfg["seanet_kernel"], cfg["seanet_ch"]
    conv(r, name[T.A_GEN_WAV_SEANET_CONV_IN], K, D, ch)
    for i, s in enumerate(SEANET_STRIDES):
        # transposed conv ch -> ch / 2, kernel 2 * stride, ggml ne [2s, ch / 2, ch]
        n_out = ch // 2
        sc = name[T.A_GEN_WAV_SEANET_SCALE_CONV].format(bid=i)
        r.add(sc + ".weight", r.normal((ch, n_out, 2 * s), 1.0 / np.sqrt(2.0 * ch)))
        r.add(sc + ".bias", r.normal((n_out,), 0.01))
        ch = n_out
        conv(r, name[T.A_GEN_WAV_SEANET_RES_CONV1].format(bid=i), 3, ch, ch // 2)
        conv(r, name[T.A_GEN_WAV_SEANET_RES_CONV2].format(bid=i), 1, ch // 2, ch,
             std=0.5 / np.sqrt(ch // 2))
    conv(r, name[T.A_GEN_WAV_SEANET_CONV_OUT], K, ch, 1, std=0.5 / np.sqrt(K * ch))

    gguf_files.write_and_close(w)


def write_pair(model_path, mmproj_path, preset_cfg, seed):
    """Writes the pockettts backbone to model_path and the pockettts_gen projector to mmproj_path."""
    gguf_files.write_atomically(model_path, lambda p, c: build_model(p, c, seed), preset_cfg)
    gguf_files.write_atomically(mmproj_path, lambda p, c: build_mmproj(p, c, seed), preset_cfg)
