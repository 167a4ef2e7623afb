#!/usr/bin/env python3
"""Write a synthetic multimodal projector ("mmproj") GGUF for tests and benchmarks.

The projector goes next to a text model written by make_model.py: libmtmd
(mtmd_init_from_file) loads it, encodes an image or an audio clip with it and hands
the embeddings, n_embd_text wide, to the text model. The weights are seeded random
numbers (numpy default_rng), scaled so that the activations stay finite and the
output embeddings come out about unit-sized; they mean nothing. The same arguments
give a byte-identical file. Checked against Debian's libmtmd 0.7.0.

    make_mmproj.py OUT.gguf --kind vision|audio --n-embd-text N [--preset tiny|small]
                   [--seed N] [--n-embd N] [--n-ff N] [--n-layer N] [--n-head N]
                   vision: [--vision-projector gemma3|qwen2vl|qwen3vl|lfm2|internvl] [--image-size N]
                           [--patch-size N] [--merge N] [--deepstack N]
                   audio:  [--projector ultravox|qwen2a|qwen3a|voxtral|glma] [--n-mel N] [--stack N]
                           [--n-pos N] [--conv-channels N]

--n-embd-text must equal the text model's n_embd (make_model.py --n-embd), or
mtmd_init_from_file refuses the pair.

Kinds (the projector types are the simplest ones libmtmd 0.7.0 has for each):
  vision   projector type "gemma3": a SigLIP ViT (conv2d patch embedding, learned
           position embedding, pre-norm layers with biases, GELU FFN, post-norm), then
           an average pool of merge x merge patches, an RMS norm and one matrix.
           libmtmd resizes any input image to image-size x image-size (no slicing), so
           one image always gives ((image-size / patch-size) / merge)^2 tokens. For
           this type mtmd decodes the image tokens with non-causal attention and puts
           "<start_of_image>" / "<end_of_image>" text around them.
           --vision-projector qwen2vl: Qwen2-VL's tower and merger (no position
           embedding, 2-D M-RoPE in attention, two temporal patch convs, 2x2 merge, GELU
           MLP). libmtmd keeps the image's aspect (sides rounded to 2 x patch-size, 8 to
           4096 tokens): a 96x64 image gives a 6x4 token grid. On a text model with M-RoPE
           (make_model.py --arch qwen2vl or qwen35) its tokens take 4 positions each.
           --vision-projector qwen3vl: Qwen3-VL's (fused QKV, patch bias, learned position
           embedding, the same merger) plus --deepstack N (default 1) layers whose merged
           outputs are appended to each token: the output is n-embd-text * (1 + N) wide, for
           make_model.py --arch qwen3vl --deepstack N.
           --vision-projector lfm2: LFM2-VL's projector: the gemma3 kind's SigLIP tower,
           pixel unshuffle of merge x merge patches, LayerNorm, GELU MLP; libmtmd resizes
           to 64..1024 patches (a 96x64 image: 70 tokens) and tiles large images.
           --vision-projector internvl: InternVL's: a ViT with a class token and layer
           scales, pixel shuffle of merge x merge patches, LayerNorm, GELU MLP. libmtmd
           cuts an image into 1..4 image-size tiles (the grid nearest its aspect) plus a
           thumbnail when there are several, each an image chunk, all in a row: a 128x64
           image gives three 16-token chunks, which mtmd_batch_encode takes as one batch
           (its clip graph batches; gemma3's and the others' here do not).
  audio    a whisper encoder (two conv1d, stride 2 on the second, learned position
           embedding, pre-norm layers, no bias on K, GELU FFN, post-norm) and
           projector "ultravox" (default: stack `stack` frames, RMS norm, SwiGLU MLP,
           RMS norm, matrix) or "qwen2a" (average pool by 2, one matrix with bias).
           libmtmd cuts the 16 kHz PCM into 30 s chunks of 3000 mel frames (a short
           clip is padded to 30 s), i.e. 1500 encoder positions per chunk whatever the
           clip's length, so --n-pos must be at least 1500 and one chunk gives
           1500 / stack tokens (ultravox; stack must divide 1500, libmtmd 0.7.0 aborts
           with "Invalid number of output tokens" otherwise) or 750 tokens (qwen2a).
           --projector voxtral: Voxtral's projector on the same whisper encoder: libmtmd
           0.7.0 pools by 2 as for qwen2a and stacks `stack` frames, then a GELU MLP
           without biases (n_embd * stack -> n-embd-text -> n-embd-text): 750 / stack
           tokens per chunk (stack must divide 750; 50 at the preset's 15), after the text
           "[BEGIN_AUDIO]". Voxtral's text model is a plain llama one (no M-RoPE).
           --projector glma: GLM-ASR's adapter on the same whisper encoder: libmtmd 0.7.0
           LayerNorms the 1500 positions (no pooling), stacks `stack` of them, runs a GELU MLP
           with biases (n_embd * stack -> n-embd-text -> n-embd-text) and puts two learned
           embeddings ("v.boi", "v.eoi") around the result: floor(1500 / stack) + 2 tokens
           per chunk (102 at the preset's 15, 77 at 20; any stack, libmtmd's count and graph
           agree), with no text marker around them. GLM-ASR's text model is a llama one
           (no M-RoPE).
           --projector qwen3a: Qwen3-ASR's encoder instead of whisper's: three conv2d
           (kernel 3, stride 2, GELU; --conv-channels, default 16) over time x mel bins
           (default 128 here, as the real model), a matrix without bias from channels x the
           16 mel rows left to n_embd, a position embedding restarting every 100 mel
           frames (13 positions; --n-pos >= 13), pre-norm layers with biases, post-norm,
           then a GELU MLP with biases to n-embd-text. libmtmd cuts the clip into 8 s
           windows of 800 mel frames (no 30 s padding), each a chunk of its own with 13
           tokens per started second: 104 for a full window, an 18.5 s clip gives 104,
           104 and 39. For make_model.py --arch qwen3vl --deepstack 0 (the output is
           n-embd-text wide, so no deepstack inputs; interleaved M-RoPE: each audio token
           takes 4 positions).

Presets (explicit flags override them). Sizes at --n-embd-text 256. Times: one
mtmd_encode_chunk on 2 threads of Debian's CPU backend (BLAS unloaded, machine
otherwise idle; on a machine busy with other work 2-thread encodes get many times
slower):
  tiny  (default)  vision: 64x64 image, patch 8, n_embd 64, 2 layers, merge 2 -> 16
                   tokens, 0.4 MB, ~1 ms.
                   audio: 80 mel bins, n_embd 32, 1 layer, ultravox stack 15 -> 100
                   tokens per chunk, 1.5 MB, ~17 ms (attention over 1500 positions).
                   qwen3a: 128 mel bins, 16 conv channels, the same encoder sizes ->
                   104 tokens per 8 s window, 0.3 MB, ~30-60 ms a window.
  small            vision: 224x224 image, patch 14, n_embd 384, 8 layers, merge 2 -> 64
                   tokens, 58 MB, ~180 ms.
                   audio: 80 mel bins, n_embd 192, 3 layers, stack 10 -> 150 tokens,
                   11 MB, ~250 ms. (For cancelling inside an encode.)
"""

import argparse
import sys

import numpy as np
import gguf

import gguf_files

PRESETS = {
    ("vision", "tiny"): dict(n_embd=64, n_ff=128, n_layer=2, n_head=4,
                             image_size=64, patch_size=8, merge=2),
    ("vision", "small"): dict(n_embd=384, n_ff=1536, n_layer=8, n_head=6,
                              image_size=224, patch_size=14, merge=2),
    ("audio", "tiny"): dict(n_embd=32, n_ff=64, n_layer=1, n_head=2,
                            n_mel=80, stack=15, n_pos=1500),
    ("audio", "small"): dict(n_embd=192, n_ff=768, n_layer=3, n_head=4,
                             n_mel=80, stack=10, n_pos=1500),
}
VISION_KEYS = ("image_size", "patch_size", "merge", "vision_projector", "deepstack")
AUDIO_KEYS = ("n_mel", "stack", "n_pos", "projector", "conv_channels")
# What --projector qwen3a changes in the audio presets before explicit flags: Qwen3-ASR's 128 mel
# bins, and the channels of its conv2d stack (downsample_hidden_size; 480 in the real model).
QWEN3A_PRESET = dict(n_mel=128, conv_channels=16)
COMMON_KEYS = ("n_embd", "n_ff", "n_layer", "n_head")

WHISPER_N_POS = 1500    # libmtmd: 30 s chunks, 100 mel frames/s, conv stride 2
QWEN3A_N_POS = 13       # qwen3a: one conv sub-chunk of 100 mel frames gives 13 positions
EPS = 1e-6


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Write a synthetic libmtmd projector (mmproj) GGUF with seeded random weights.")
    p.add_argument("out", metavar="OUT.gguf", help="output file (written atomically via OUT.tmp)")
    p.add_argument("--kind", choices=["vision", "audio"], required=True)
    p.add_argument("--n-embd-text", type=int, required=True,
                   help="output width: the text model's n_embd")
    p.add_argument("--preset", choices=["tiny", "small"], default="tiny",
                   help="size preset (default tiny); explicit flags override it")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--n-embd", type=int, help="encoder width")
    p.add_argument("--n-ff", type=int, help="encoder FFN width")
    p.add_argument("--n-layer", type=int, help="encoder layers")
    p.add_argument("--n-head", type=int, help="encoder attention heads")
    g = p.add_argument_group("vision")
    g.add_argument("--image-size", type=int, help="square input size the image is resized to")
    g.add_argument("--patch-size", type=int)
    g.add_argument("--deepstack", type=int,
                   help="qwen3vl: layers whose output also goes to the text model (the last N; default 1)")
    g.add_argument("--vision-projector", choices=["gemma3", "qwen2vl", "qwen3vl", "lfm2", "internvl"],
                   help="default gemma3; qwen2vl merges 2x2 patches (--merge does not apply)")
    g.add_argument("--merge", type=int,
                   help="average-pool merge x merge patches into one token (gemma3 scale factor)")
    g = p.add_argument_group("audio")
    g.add_argument("--projector", choices=["ultravox", "qwen2a", "qwen3a", "voxtral", "glma"],
                   help="default ultravox")
    g.add_argument("--n-mel", type=int, help="mel bins")
    g.add_argument("--stack", type=int, help="ultravox, voxtral, glma: frames stacked into one token")
    g.add_argument("--n-pos", type=int, help="rows of the position embedding (>= %d; qwen3a: >= %d)"
                   % (WHISPER_N_POS, QWEN3A_N_POS))
    g.add_argument("--conv-channels", type=int,
                   help="qwen3a: channels of the three conv2d layers (default %d)" % QWEN3A_PRESET["conv_channels"])
    a = p.parse_args(argv)

    cfg = dict(PRESETS[(a.kind, a.preset)], seed=a.seed, kind=a.kind, n_embd_text=a.n_embd_text)
    if a.kind == "audio":
        cfg["projector"] = a.projector or "ultravox"
        if cfg["projector"] == "qwen3a":
            cfg.update(QWEN3A_PRESET)
    else:
        cfg["vision_projector"] = "gemma3"
        cfg["deepstack"] = 1
    for k in COMMON_KEYS + (VISION_KEYS if a.kind == "vision" else AUDIO_KEYS):
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    other = AUDIO_KEYS if a.kind == "vision" else VISION_KEYS
    for k in other:
        if getattr(a, k) is not None:
            p.error("--%s does not apply to --kind %s" % (k.replace("_", "-"), a.kind))

    def need(ok, msg):
        if not ok:
            p.error(msg)
    need(cfg["seed"] >= 0, "--seed must be >= 0")
    need(cfg["n_embd_text"] >= 1, "--n-embd-text must be >= 1")
    for k in COMMON_KEYS:
        need(cfg[k] >= 1, "--%s must be >= 1" % k.replace("_", "-"))
    need(cfg["n_embd"] % cfg["n_head"] == 0, "--n-embd must be a multiple of --n-head")
    # libmtmd swaps ffn_up/ffn_down of legacy files when ffn_down's input width equals
    # n_embd; keep the two widths apart so that the check cannot misfire
    need(cfg["n_ff"] != cfg["n_embd"], "--n-ff must differ from --n-embd")
    if a.kind == "vision":
        for k in ("image_size", "patch_size", "merge"):
            need(cfg[k] >= 1, "--%s must be >= 1" % k.replace("_", "-"))
        need(cfg["image_size"] % cfg["patch_size"] == 0, "--image-size must be a multiple of --patch-size")
        side = cfg["image_size"] // cfg["patch_size"]
        need(side % cfg["merge"] == 0, "image-size / patch-size must be a multiple of --merge")
        need(a.deepstack is None or cfg["vision_projector"] == "qwen3vl",
             "--deepstack applies to --vision-projector qwen3vl only")
        if cfg["vision_projector"] == "qwen3vl":
            need(0 <= cfg["deepstack"] <= cfg["n_layer"], "--deepstack must be in [0, n-layer]")
        if cfg["vision_projector"] in ("qwen2vl", "qwen3vl"):
            need(a.merge is None, "--merge does not apply to --vision-projector qwen2vl/qwen3vl (2x2, fixed)")
            need((cfg["n_embd"] // cfg["n_head"]) % 8 == 0,
                 "qwen2vl: the head size n-embd/n-head must be a multiple of 8 (4 M-RoPE sections)")
    else:
        for k in ("n_mel", "stack", "n_pos"):
            need(cfg[k] >= 1, "--%s must be >= 1" % k.replace("_", "-"))
        need(a.conv_channels is None or cfg["projector"] == "qwen3a", "--conv-channels applies to --projector qwen3a only")
        need(a.stack is None or cfg["projector"] != "qwen3a", "--stack does not apply to --projector qwen3a")
        if cfg["projector"] == "qwen3a":
            need(cfg["conv_channels"] >= 1, "--conv-channels must be >= 1")
            need(cfg["n_pos"] >= QWEN3A_N_POS, "--n-pos must be >= %d" % QWEN3A_N_POS)
        else:
            need(cfg["n_pos"] >= WHISPER_N_POS, "--n-pos must be >= %d" % WHISPER_N_POS)
        # libmtmd 0.7.0 counts floor(1500 / stack) tokens but its graph makes
        # ceil(1500 / stack) and aborts ("Invalid number of output tokens") if they differ
        # (glma's count and graph agree for any stack: floor(1500 / stack) + 2 tokens)
        need(cfg["projector"] != "ultravox" or WHISPER_N_POS % cfg["stack"] == 0,
             "--stack must divide %d" % WHISPER_N_POS)
        # voxtral: the whisper positions pooled by 2, then stacked (libmtmd counts
        # floor(ceil(3000 / stack) / 4)); exact when stack divides 750
        need(cfg["projector"] != "voxtral" or (WHISPER_N_POS // 2) % cfg["stack"] == 0,
             "--stack must divide %d for --projector voxtral" % (WHISPER_N_POS // 2))
    return a.out, cfg


class Weights:
    """Seeded random tensors. numpy shapes are ggml's ne reversed: a matrix that maps
    n_in -> n_out is (n_out, n_in)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def normal(self, shape, std, dtype=np.float32):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(dtype)

    def linear(self, n_out, n_in, gain=1.0):
        return self.normal((n_out, n_in), gain / np.sqrt(n_in))

    def bias(self, n, std=0.02):
        return self.normal((n,), std)

    @staticmethod
    def ones(n):
        return np.ones(n, dtype=np.float32)

    @staticmethod
    def zeros(*shape):
        return np.zeros(shape, dtype=np.float32)


def add_encoder_layers(w, W, prefix, cfg, k_bias):
    """Pre-norm transformer layers as libmtmd's build_vit reads them."""
    d, f = cfg["n_embd"], cfg["n_ff"]
    # residual writers are scaled down so the residual stream grows slowly with depth
    gain_out = 1.0 / np.sqrt(2.0 * cfg["n_layer"])
    for b in range(cfg["n_layer"]):
        blk = "%s.blk.%d." % (prefix, b)
        w.add_tensor(blk + "ln1.weight", W.ones(d))
        w.add_tensor(blk + "ln1.bias", W.zeros(d))
        w.add_tensor(blk + "attn_q.weight", W.linear(d, d))
        w.add_tensor(blk + "attn_q.bias", W.bias(d))
        w.add_tensor(blk + "attn_k.weight", W.linear(d, d))
        if k_bias:
            w.add_tensor(blk + "attn_k.bias", W.bias(d))
        w.add_tensor(blk + "attn_v.weight", W.linear(d, d))
        w.add_tensor(blk + "attn_v.bias", W.bias(d))
        w.add_tensor(blk + "attn_out.weight", W.linear(d, d, gain_out))
        w.add_tensor(blk + "attn_out.bias", W.bias(d))
        w.add_tensor(blk + "ln2.weight", W.ones(d))
        w.add_tensor(blk + "ln2.bias", W.zeros(d))
        w.add_tensor(blk + "ffn_up.weight", W.linear(f, d))
        w.add_tensor(blk + "ffn_up.bias", W.bias(f))
        w.add_tensor(blk + "ffn_down.weight", W.linear(d, f, gain_out))
        w.add_tensor(blk + "ffn_down.bias", W.bias(d))
    w.add_tensor(prefix + ".post_ln.weight", W.ones(d))
    w.add_tensor(prefix + ".post_ln.bias", W.zeros(d))


def add_vision_keys(w, cfg, projector_type):
    """The keys every vision tower here shares (libmtmd reads them for each projector type)."""
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type(projector_type)
    w.add_vision_projection_dim(cfg["n_embd_text"])
    w.add_vision_image_size(cfg["image_size"])
    w.add_vision_patch_size(cfg["patch_size"])
    w.add_vision_embedding_length(cfg["n_embd"])
    w.add_vision_feed_forward_length(cfg["n_ff"])
    w.add_vision_block_count(cfg["n_layer"])
    w.add_vision_head_count(cfg["n_head"])
    w.add_vision_attention_layernorm_eps(EPS)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_vision_use_gelu(True)


def build_vision(w, W, cfg):
    d, p, n_text = cfg["n_embd"], cfg["patch_size"], cfg["n_embd_text"]
    n_patches = (cfg["image_size"] // p) ** 2

    add_vision_keys(w, cfg, gguf.VisionProjectorType.GEMMA3)
    w.add_vision_projector_scale_factor(cfg["merge"])

    # conv2d kernel, ggml ne [p, p, 3, n_embd]; pixels are normalised to [-1, 1]
    w.add_tensor("v.patch_embd.weight", W.normal((d, 3, p, p), 1.0 / np.sqrt(3 * p * p)))
    w.add_tensor("v.patch_embd.bias", W.bias(d))
    w.add_tensor("v.position_embd.weight", W.normal((n_patches, d), 0.5))
    add_encoder_layers(w, W, "v", cfg, k_bias=True)
    # gemma3 projector: rms_norm * soft_emb_norm, then x @ input_projection (stored
    # transposed: ggml ne [n_embd_text, n_embd])
    w.add_tensor("mm.soft_emb_norm.weight", W.ones(d))
    w.add_tensor("mm.input_projection.weight", W.normal((d, n_text), 1.0 / np.sqrt(d)))


def build_vision_qwen2vl(w, W, cfg):
    """Qwen2-VL's vision tower: two conv2d patch embeddings (the two frames of a temporal patch;
    a still image goes through both), no position embedding (2-D M-RoPE inside attention),
    pre-norm layers with biases, GELU FFN, a LayerNorm, then the merger: 2x2 neighbouring patches
    concatenated and sent through a GELU MLP to the text model's width. libmtmd resizes an image
    to a multiple of 2 * patch-size on each side (aspect kept, 8 to 4096 tokens), so one image
    gives (w / 2p) x (h / 2p) tokens on a grid that the text model's M-RoPE positions follow."""
    d, p, n_text = cfg["n_embd"], cfg["patch_size"], cfg["n_embd_text"]

    add_vision_keys(w, cfg, gguf.VisionProjectorType.QWEN2VL)

    # two conv2d kernels (ggml ne [p, p, 3, n_embd]); their sums are added, hence the 1/sqrt(2)
    k_std = 1.0 / np.sqrt(2 * 3 * p * p)
    w.add_tensor("v.patch_embd.weight", W.normal((d, 3, p, p), k_std))
    w.add_tensor("v.patch_embd.weight.1", W.normal((d, 3, p, p), k_std))
    add_encoder_layers(w, W, "v", cfg, k_bias=True)
    hidden = 4 * d
    w.add_tensor("mm.0.weight", W.linear(hidden, 4 * d))
    w.add_tensor("mm.0.bias", W.bias(hidden))
    w.add_tensor("mm.2.weight", W.linear(n_text, hidden))
    w.add_tensor("mm.2.bias", W.bias(n_text))


def build_vision_qwen3vl(w, W, cfg):
    """Qwen3-VL's tower: the two temporal patch convs with a bias, a learned position embedding
    (resized by libmtmd to the image's patch grid), layers with one fused QKV matrix, 2-D M-RoPE
    in attention, GELU FFN, then the 2x2 merger MLP. The last `deepstack` layers also feed a
    merger of their own ("deepstack"), whose outputs are appended to each token's embedding: the
    projection is n_embd_text * (1 + deepstack) wide (make_model.py --arch qwen3vl --deepstack N)."""
    d, p, n_text, n_ds = cfg["n_embd"], cfg["patch_size"], cfg["n_embd_text"], cfg["deepstack"]
    n_patches = (cfg["image_size"] // p) ** 2
    is_ds = [b >= cfg["n_layer"] - n_ds for b in range(cfg["n_layer"])]

    add_vision_keys(w, cfg, gguf.VisionProjectorType.QWEN3VL)
    w.add_vision_spatial_merge_size(2)
    w.add_vision_is_deepstack_layers(is_ds)

    k_std = 1.0 / np.sqrt(2 * 3 * p * p)
    w.add_tensor("v.patch_embd.weight", W.normal((d, 3, p, p), k_std))
    w.add_tensor("v.patch_embd.weight.1", W.normal((d, 3, p, p), k_std))
    w.add_tensor("v.patch_embd.bias", W.bias(d))
    w.add_tensor("v.position_embd.weight", W.normal((n_patches, d), 0.5))
    f = cfg["n_ff"]
    gain_out = 1.0 / np.sqrt(2.0 * cfg["n_layer"])
    for b in range(cfg["n_layer"]):
        blk = "v.blk.%d." % b
        w.add_tensor(blk + "ln1.weight", W.ones(d))
        w.add_tensor(blk + "ln1.bias", W.zeros(d))
        w.add_tensor(blk + "attn_qkv.weight", W.linear(3 * d, d))
        w.add_tensor(blk + "attn_qkv.bias", W.bias(3 * d))
        w.add_tensor(blk + "attn_out.weight", W.linear(d, d, gain_out))
        w.add_tensor(blk + "attn_out.bias", W.bias(d))
        w.add_tensor(blk + "ln2.weight", W.ones(d))
        w.add_tensor(blk + "ln2.bias", W.zeros(d))
        w.add_tensor(blk + "ffn_up.weight", W.linear(f, d))
        w.add_tensor(blk + "ffn_up.bias", W.bias(f))
        w.add_tensor(blk + "ffn_down.weight", W.linear(d, f, gain_out))
        w.add_tensor(blk + "ffn_down.bias", W.bias(d))
    w.add_tensor("v.post_ln.weight", W.ones(d))
    w.add_tensor("v.post_ln.bias", W.zeros(d))
    hidden = 4 * d
    w.add_tensor("mm.0.weight", W.linear(hidden, 4 * d))
    w.add_tensor("mm.0.bias", W.bias(hidden))
    w.add_tensor("mm.2.weight", W.linear(n_text, hidden))
    w.add_tensor("mm.2.bias", W.bias(n_text))
    for b in range(cfg["n_layer"]):
        if is_ds[b]:
            ds = "v.deepstack.%d." % b
            w.add_tensor(ds + "norm.weight", W.ones(4 * d))
            w.add_tensor(ds + "norm.bias", W.zeros(4 * d))
            w.add_tensor(ds + "fc1.weight", W.linear(hidden, 4 * d))
            w.add_tensor(ds + "fc1.bias", W.bias(hidden))
            w.add_tensor(ds + "fc2.weight", W.linear(n_text, hidden))
            w.add_tensor(ds + "fc2.bias", W.bias(n_text))


def build_vision_lfm2(w, W, cfg):
    """LFM2-VL's projector: the SigLIP tower of build_vision (its position embedding resized by
    libmtmd to the image's patch grid), then a pixel unshuffle of merge x merge patches, a
    LayerNorm and a GELU MLP to the text model's width. libmtmd's LFM2 preprocessor resizes an
    image to 64..1024 patches (aspect kept) and cuts a large one into tiles plus a thumbnail,
    each a chunk of its own with text between them."""
    d, p, n_text, m = cfg["n_embd"], cfg["patch_size"], cfg["n_embd_text"], cfg["merge"]
    n_patches = (cfg["image_size"] // p) ** 2

    add_vision_keys(w, cfg, gguf.VisionProjectorType.LFM2)
    w.add_vision_projector_scale_factor(m)

    w.add_tensor("v.patch_embd.weight", W.normal((d, 3, p, p), 1.0 / np.sqrt(3 * p * p)))
    w.add_tensor("v.patch_embd.bias", W.bias(d))
    w.add_tensor("v.position_embd.weight", W.normal((n_patches, d), 0.5))
    add_encoder_layers(w, W, "v", cfg, k_bias=True)
    d_in = d * m * m
    w.add_tensor("mm.input_norm.weight", W.ones(d_in))
    w.add_tensor("mm.input_norm.bias", W.zeros(d_in))
    w.add_tensor("mm.1.weight", W.linear(n_text, d_in))
    w.add_tensor("mm.1.bias", W.bias(n_text))
    w.add_tensor("mm.2.weight", W.linear(n_text, n_text))
    w.add_tensor("mm.2.bias", W.bias(n_text))


def build_vision_internvl(w, W, cfg):
    """InternVL's projector: a ViT with a class token (learned position embedding over the CLS and
    the patches, layer scales ls1/ls2), the CLS dropped, a pixel shuffle of merge x merge patches,
    then LayerNorm and a GELU MLP to the text model's width. libmtmd cuts an image into
    image-size tiles on the grid of 1..max_tiles tiles that fits its aspect best and, with more
    than one tile, adds a thumbnail: a 128x64 image at image-size 64 gives two tiles and the
    thumbnail, three image chunks of the same size one after the other, between "<img>" and
    "</img>". Its clip graph supports batching (mtmd_batch_encode of such chunks)."""
    d, p, n_text, m = cfg["n_embd"], cfg["patch_size"], cfg["n_embd_text"], cfg["merge"]
    n_patches = (cfg["image_size"] // p) ** 2

    add_vision_keys(w, cfg, gguf.VisionProjectorType.INTERNVL)
    w.add_vision_projector_scale_factor(m)
    w.add_vision_preproc_min_tiles(1)
    w.add_vision_preproc_max_tiles(4)

    w.add_tensor("v.patch_embd.weight", W.normal((d, 3, p, p), 1.0 / np.sqrt(3 * p * p)))
    w.add_tensor("v.patch_embd.bias", W.bias(d))
    w.add_tensor("v.class_embd", W.normal((1, d), 0.5))
    w.add_tensor("v.position_embd.weight", W.normal((n_patches + 1, d), 0.5))
    add_encoder_layers(w, W, "v", cfg, k_bias=True)
    for b in range(cfg["n_layer"]):
        w.add_tensor("v.blk.%d.ls1.weight" % b, W.ones(d))
        w.add_tensor("v.blk.%d.ls2.weight" % b, W.ones(d))
    d_in = d * m * m
    w.add_tensor("mm.model.mlp.0.weight", W.ones(d_in))
    w.add_tensor("mm.model.mlp.0.bias", W.zeros(d_in))
    w.add_tensor("mm.model.mlp.1.weight", W.linear(n_text, d_in))
    w.add_tensor("mm.model.mlp.1.bias", W.bias(n_text))
    w.add_tensor("mm.model.mlp.3.weight", W.linear(n_text, n_text))
    w.add_tensor("mm.model.mlp.3.bias", W.bias(n_text))


def build_audio(w, W, cfg):
    d, n_mel, n_text = cfg["n_embd"], cfg["n_mel"], cfg["n_embd_text"]

    w.add_clip_has_audio_encoder(True)
    w.add_clip_projector_type(cfg["projector"])
    w.add_audio_projection_dim(n_text)
    w.add_audio_embedding_length(d)
    w.add_audio_feed_forward_length(cfg["n_ff"])
    w.add_audio_block_count(cfg["n_layer"])
    w.add_audio_head_count(cfg["n_head"])
    w.add_audio_attention_layernorm_eps(EPS)
    w.add_audio_num_mel_bins(n_mel)
    if cfg["projector"] in ("ultravox", "voxtral", "glma"):
        w.add_audio_stack_factor(cfg["stack"])

    # conv1d kernels, ggml ne [3, in, out], f16 as upstream's converter writes them;
    # biases are ne [1, out] (one value per channel, broadcast over time)
    w.add_tensor("a.conv1d.1.weight", W.normal((d, n_mel, 3), 1.0 / np.sqrt(3 * n_mel), np.float16))
    w.add_tensor("a.conv1d.1.bias", W.normal((d, 1), 0.02))
    w.add_tensor("a.conv1d.2.weight", W.normal((d, d, 3), 1.0 / np.sqrt(3 * d), np.float16))
    w.add_tensor("a.conv1d.2.bias", W.normal((d, 1), 0.02))
    w.add_tensor("a.position_embd.weight", W.normal((cfg["n_pos"], d), 0.5))
    add_encoder_layers(w, W, "a", cfg, k_bias=False)   # whisper: no bias on K (libmtmd asserts it)

    if cfg["projector"] == "ultravox":
        s = cfg["stack"]
        hidden = n_text
        w.add_tensor("mm.a.norm_pre.weight", W.ones(d * s))
        w.add_tensor("mm.a.mlp.1.weight", W.linear(2 * hidden, d * s))   # SwiGLU: 2 halves
        w.add_tensor("mm.a.norm_mid.weight", W.ones(hidden))
        w.add_tensor("mm.a.mlp.2.weight", W.linear(n_text, hidden))
    elif cfg["projector"] == "voxtral":
        # Voxtral's projector: the pooled positions stacked `stack` at a time, then a GELU MLP
        # without biases
        s = cfg["stack"]
        w.add_tensor("mm.a.mlp.1.weight", W.linear(n_text, d * s))
        w.add_tensor("mm.a.mlp.2.weight", W.linear(n_text, n_text))
    elif cfg["projector"] == "glma":
        # GLM-ASR's adapter: LayerNorm of each position, `stack` positions stacked, a GELU MLP
        # with biases, then the begin and end embeddings (ggml ne [n_text, 1]) concatenated
        # around the tokens
        s = cfg["stack"]
        w.add_tensor("mm.a.norm_pre.weight", W.ones(d))
        w.add_tensor("mm.a.norm_pre.bias", W.zeros(d))
        w.add_tensor("mm.a.mlp.1.weight", W.linear(n_text, d * s))
        w.add_tensor("mm.a.mlp.1.bias", W.bias(n_text))
        w.add_tensor("mm.a.mlp.2.weight", W.linear(n_text, n_text))
        w.add_tensor("mm.a.mlp.2.bias", W.bias(n_text))
        w.add_tensor("v.boi", W.normal((1, n_text), 1.0))
        w.add_tensor("v.eoi", W.normal((1, n_text), 1.0))
    else:
        w.add_tensor("mm.a.fc.weight", W.linear(n_text, d))
        w.add_tensor("mm.a.fc.bias", W.bias(n_text))


def conv2d_out_len(n):
    """Length of a side after three conv2d layers of kernel 3, stride 2, padding 1."""
    for _ in range(3):
        n = (n - 1) // 2 + 1
    return n


def build_audio_qwen3a(w, W, cfg):
    """Qwen3-ASR's audio encoder (libmtmd projector type "qwen3a"): three conv2d layers (kernel 3,
    stride 2, padding 1, GELU) over the mel spectrogram as a one-channel image (time x mel bins),
    the channels and remaining mel rows flattened and mapped to n_embd by one matrix without bias
    (conv_out), a position embedding that restarts at every 100-frame sub-chunk (13 positions each),
    pre-norm layers with biases (K too), GELU FFN, post-norm, then a GELU MLP with biases
    (n_embd -> n_embd -> n_embd_text). libmtmd cuts the clip into 8 s windows of up to 8 sub-chunks
    (800 mel frames, the last window padded to whole sub-chunks); each window is a chunk of its own
    and one encode: 104 tokens for a full window."""
    d, n_mel, n_text, c = cfg["n_embd"], cfg["n_mel"], cfg["n_embd_text"], cfg["conv_channels"]

    w.add_clip_has_audio_encoder(True)
    w.add_clip_projector_type(gguf.VisionProjectorType.QWEN3A)
    w.add_audio_projection_dim(n_text)
    w.add_audio_embedding_length(d)
    w.add_audio_feed_forward_length(cfg["n_ff"])
    w.add_audio_block_count(cfg["n_layer"])
    w.add_audio_head_count(cfg["n_head"])
    w.add_audio_attention_layernorm_eps(EPS)
    w.add_audio_num_mel_bins(n_mel)

    # conv2d kernels, ggml ne [3, 3, in, out] (f16); biases ne [1, 1, out] (one value per channel)
    n_in = 1
    for i in (1, 2, 3):
        w.add_tensor("a.conv2d.%d.weight" % i, W.normal((c, n_in, 3, 3), 1.0 / np.sqrt(9 * n_in), np.float16))
        w.add_tensor("a.conv2d.%d.bias" % i, W.normal((c, 1, 1), 0.02))
        n_in = c
    w.add_tensor("a.conv_out.weight", W.linear(d, c * conv2d_out_len(n_mel)))
    w.add_tensor("a.position_embd.weight", W.normal((cfg["n_pos"], d), 0.5))
    add_encoder_layers(w, W, "a", cfg, k_bias=True)
    w.add_tensor("mm.a.mlp.1.weight", W.linear(d, d))
    w.add_tensor("mm.a.mlp.1.bias", W.bias(d))
    w.add_tensor("mm.a.mlp.2.weight", W.linear(n_text, d))
    w.add_tensor("mm.a.mlp.2.bias", W.bias(n_text))


def build(path, cfg):
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name("llama-cancel synthetic %s mmproj %dx%d seed %d"
               % (cfg["kind"], cfg["n_layer"], cfg["n_embd"], cfg["seed"]))
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    W = Weights(cfg["seed"])
    if cfg["kind"] == "vision" and cfg["vision_projector"] == "qwen2vl":
        build_vision_qwen2vl(w, W, cfg)
    elif cfg["kind"] == "vision" and cfg["vision_projector"] == "qwen3vl":
        build_vision_qwen3vl(w, W, cfg)
    elif cfg["kind"] == "vision" and cfg["vision_projector"] == "lfm2":
        build_vision_lfm2(w, W, cfg)
    elif cfg["kind"] == "vision" and cfg["vision_projector"] == "internvl":
        build_vision_internvl(w, W, cfg)
    elif cfg["kind"] == "vision":
        build_vision(w, W, cfg)
    elif cfg["projector"] == "qwen3a":
        build_audio_qwen3a(w, W, cfg)
    else:
        build_audio(w, W, cfg)
    gguf_files.write_and_close(w)


if __name__ == "__main__":
    sys.exit(gguf_files.main(parse_args, build))
