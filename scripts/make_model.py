#!/usr/bin/env python3
"""Write a synthetic GGUF model (llama, mamba, mamba2, rwkv7, lfm2, qwen35, granitehybrid,
nemotron_h, falcon-h1, qwen2vl, qwen3vl or gemma3; the embedding models bert, nomic-bert,
jina-bert-v2 and qwen3-embedding, the reranker bert-rerank, and t5 and t5encoder) for tests and
benchmarks.

The weights are seeded random numbers (numpy default_rng). The decoders' vocabulary is a
made-up sentencepiece (SPM, tokenizer.ggml.model = "llama") one, the same for each of them:
<unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then deterministic text pieces. The
embedding, reranking and T5 models get the tokenizer llama.cpp's converter writes for their
family, with its special tokens and keys (model_archs.py's VOCAB_WORDPIECE, VOCAB_T5,
VOCAB_XLMR, VOCAB_QWEN2), made up the same way. The same arguments give a byte-identical file. The
model means nothing; it only loads and runs in llama.cpp (checked against Debian's llama.cpp
0.7.0). The per-architecture hyperparameters, tensors and presets are in model_archs.py.

    make_model.py OUT.gguf [--arch ARCH] [--preset tiny|bench|real] [--n-embd N] [--n-layer N]
                  [--n-ff N] [--n-head N] [--n-head-kv N] [--n-vocab N] [--n-ctx-train N]
                  [--d-state N] [--attn-every N] [--n-swa N] [--seed N] [--type f32|f16]

Architectures (--arch; a flag that an architecture does not read is an error):
  llama   (default) attention + SwiGLU. --arch llama writes the same bytes as before --arch
          existed.
  mamba   Mamba-1, pure recurrent: d_inner 2 n_embd, conv kernel 4, dt_rank n_embd/16,
          state --d-state.
  mamba2  Mamba-2, pure recurrent: d_inner 2 n_embd in heads of 64, one group, state --d-state.
  rwkv7   RWKV-7, pure recurrent: token shift and a wkv state of heads of --d-state (a multiple
          of 64: ggml's CPU wkv7 kernel walks a head in blocks of up to 64 floats), squared-ReLU
          channel mix, layer norms with biases.
  lfm2    hybrid: every --attn-every-th layer GQA attention, the others gated short
          convolutions (L_cache 3).
  qwen35  hybrid: every --attn-every-th layer gated full attention (partial M-RoPE), the others
          gated delta-net linear attention with n_head value heads and n_head_kv key heads
          of --d-state each.
  granitehybrid  Granite 4.0-H: every --attn-every-th layer GQA attention without rope, the
          others Mamba-2 mixers (as mamba2), SwiGLU FFN in every layer, Granite's embedding,
          residual, attention and logit scales (the stored weights undo them).
  nemotron_h  Nemotron-H: each layer one block, in pairs of a mixer and a squared-ReLU MLP (up,
          down, no gate); every --attn-every-th mixer GQA attention without rope, the others
          Mamba-2 (as mamba2). The per-layer arrays tell llama.cpp the kinds: head_count_kv and
          feed_forward_length both 0 is Mamba-2, feed_forward_length 0 alone attention.
  falcon-h1  Falcon-H1: in every layer GQA attention (rope) and a Mamba-2 mixer (as mamba2) in
          parallel on one norm, then a SwiGLU FFN. llama.cpp's graph applies none of Falcon-H1's
          multipliers (its converter folds them into the weights), so the file has none.
  qwen2vl Qwen2-VL's text model: attention with q/k/v biases, SwiGLU, M-RoPE (sections
          time/height/width over the head; llama_model_rope_type MROPE), so that libmtmd gives
          its image and audio embeddings 4 positions each (mtmd_decode_use_mrope).
  qwen3vl Qwen3-VL's text model: q/k norms, SwiGLU, interleaved M-RoPE (IMROPE); its embeddings
          input is n_embd * (1 + --deepstack) wide (make_mmproj.py --vision-projector qwen3vl
          --deepstack N pairs with it).
  gemma3  attention only: every --attn-every-th layer full, the others sliding-window
          (--n-swa tokens), sandwich norms, GELU FFN.
Embedding, reranking and encoder-decoder models (written as convert_hf_to_gguf.py writes the
real ones: keys, tensor names, biases, tokenizer and special tokens; tiny preset only; no
{arch}.vocab_size key, which the converter does not write for them):
  bert    encoder-only (bge-small / MiniLM-like): learned positions, two token types, post-norm
          layers with biases, GELU FFN, MEAN pooling (bert.pooling_type 1), WordPiece vocabulary
          with [CLS] ... [SEP] added. No KV cache: llama_decode runs it through llama.cpp's
          encoder path.
  nomic-bert  nomic-embed-text-v1.5: rotary positions (base 1000), fused qkv, SwiGLU, no
          projection biases, MEAN pooling, WordPiece.
  jina-bert-v2  jina-embeddings-v2: ALiBi (no position tensor), GeGLU from one fused up+gate
          matrix, MEAN pooling, WordPiece.
  bert-rerank  a cross-encoder like bge-reranker-base/-v2-m3 (XLMRobertaForSequenceClassification):
          arch bert with the classification head cls (dense + tanh) and cls.output (1 score),
          classifier.output_labels ["LABEL_0"], XLM-R's unigram vocabulary (<s> q </s></s> d </s>).
          Like the real ones it has NO pooling_type key (llama.cpp then defaults to NONE): ask for
          LLAMA_POOLING_TYPE_RANK; llama_get_embeddings_seq then gives the one score.
  qwen3-embedding  Qwen3-Embedding: arch qwen3 (causal decoder, GQA, q/k norms, SwiGLU, tied
          embeddings), LAST pooling (qwen3.pooling_type 3), Qwen2 byte-level BPE with
          <|endoftext|> appended. Uses the KV cache like any decoder.
  t5      flan-t5: an encoder and a decoder of --n-layer layers each, relative position buckets
          (32), RMS norms, gated-GELU FFN, untied lm_head, t5.decoder_start_token_id 0 (<pad>),
          T5's unigram vocabulary with </s> appended. llama_encode, then llama_decode from
          llama_model_decoder_start_token.
  t5encoder  the T5 encoder alone (T5EncoderModel, sentence-t5): no decoder, no lm_head, no
          pooling_type key (ask for one); llama_encode computes the embeddings.

Presets (explicit flags override them; every decoder's preset has n_vocab 512 for tiny, 4096 for
bench, since the SPM vocabulary needs 3 special + 256 byte tokens before any text piece):
  tiny  (default)  f32, 0.5-0.9 MB, a 256-token batch decodes in 5-15 ms on 2 threads.
                   llama:  n_embd 64, n_layer 2, n_ff 128, n_head 4.
                   mamba:  n_embd 64, n_layer 2, d_state 16.
                   mamba2: n_embd 64, n_layer 2, d_state 32 (2 heads).
                   rwkv7:  n_embd 64, n_layer 2, n_ff 128, d_state 64 (1 head).
                   lfm2:   n_embd 64, n_layer 4 (conv, attn, conv, attn), n_ff 128, 4/2 heads.
                   qwen35: n_embd 64, n_layer 4 (delta, attn, delta, attn), n_ff 128, 4/2 heads,
                           d_state 16.
                   granitehybrid: n_embd 64, n_layer 4 (mamba2, attn, mamba2, attn), n_ff 128,
                           4/2 heads, d_state 32.
                   nemotron_h: n_embd 64, n_layer 4 (mamba2, mlp, attn, mlp), n_ff 128, 4/2 heads,
                           d_state 32: 0.58 MB.
                   falcon-h1: n_embd 64, n_layer 2 (attn + mamba2 each), n_ff 128, 4/2 heads,
                           d_state 32: 0.81 MB.
                   gemma3: n_embd 64, n_layer 4 (swa, full, swa, full), n_ff 128, 4/2 heads,
                           n_swa 32.
                   qwen2vl: n_embd 64, n_layer 2, n_ff 128, 4/2 heads.
                   qwen3vl: n_embd 64, n_layer 2, n_ff 128, 4/2 heads, deepstack 1.
                   The embedding, reranking and T5 models (f32, 0.47-1.07 MB): n_embd 64,
                   n_layer 2, n_ff 128, 4 heads (qwen3-embedding 4/2), their family's context
                   length as n_ctx_train (bert, bert-rerank, t5, t5encoder 512 (bert's
                   position_embd holds 512 rows), nomic-bert 2048, jina-bert-v2 8192,
                   qwen3-embedding 32768), n_vocab 512 (qwen3-embedding 1024: the 256 byte
                   symbols first); t5 has 2 encoder and 2 decoder layers. Sizes: bert 0.54 MB,
                   nomic-bert 0.47, jina-bert-v2 0.48, bert-rerank 0.56, qwen3-embedding 0.59,
                   t5 1.07, t5encoder 0.47.
  bench            f16, 36-63 MB, 1-1.5 s to write. One 256-token batch (n_batch = n_ubatch =
                   256, or n_ubatch 64) decodes in about 260-360 ms on 2 threads with Debian's
                   CPU backend alone (measured on its zen4 build, best of 5; the llama one in
                   270-390 ms over many runs; f32 is ~5-10% slower). "state" is
                   llama_state_seq_get_size_ext(PARTIAL_ONLY) after the batch: the recurrent
                   state, or for gemma3 the sliding-window cells.
                   llama:  n_embd 512, n_layer 8, n_ff 1536, n_head 8: 63 MB.
                   mamba:  n_embd 512, n_layer 8, d_state 16: 36 MB, state 0.6 MB.
                   mamba2: n_embd 512, n_layer 12, d_state 64 (16 heads): 48 MB, state 3.3 MB.
                   lfm2:   n_embd 512, n_layer 8 (4 attn), n_ff 1536, 8/4 heads: 61 MB,
                           state 16 KB.
                   qwen35: n_embd 512, n_layer 8 (2 attn), n_ff 1536, 8/4 heads, d_state 64:
                           63 MB, state 0.86 MB.
                   rwkv7:  n_embd 512, n_layer 8, n_ff 1536, d_state 64 (8 heads): 54 MB,
                           state 1.1 MB.
                   granitehybrid: n_embd 512, n_layer 8 (2 attn), n_ff 1024, 8/4 heads,
                           d_state 64: 56 MB, state 1.7 MB.
                   gemma3: n_embd 512, n_layer 8 (2 full), n_ff 1536, 8/4 heads, n_swa 32:
                           59 MB, state 0.2 MB.
                   nemotron_h: n_embd 512, n_layer 12 (4 mamba2, 2 attn, 6 mlp), n_ff 1536,
                           8/4 heads, d_state 64: 44 MB, state 1.1 MB.
                   falcon-h1: n_embd 512, n_layer 6 (attn + mamba2 each), n_ff 1024, 8/2 heads,
                           d_state 64: 55 MB, state 1.7 MB.
                   (nemotron_h and falcon-h1: 210 and 270 ms, measured beside granitehybrid's
                   325 ms.)
                   With Debian's BLAS backend on the reference libblas3 it is ~10x slower:
                   unload BLAS, as tools/support.cpp does.
  real             mamba2 and qwen35 only: real models' proportions of recurrent state to weights
                   and per-token compute in every layer, f16, n_vocab 4096 (a real vocabulary
                   would add output compute, so snapshot shares here are upper bounds).
                   mamba2: shaped like Mamba2-370M: n_embd 1024, n_layer 48, d_state 128
                           (32 heads): 637 MB, state 51.7 MB per sequence.
                   qwen35: shaped like a small Qwen3.5: n_embd 1024, n_layer 24 (6 attn),
                           n_ff 3072, 16/8 heads, d_state 128.

Checked with Debian's libllama 0.7.0 for every decoder architecture (llama to gemma3) and preset:
loads, decodes a 256-token batch (n_ubatch 64 and 256; tiny also 1 and 7) and a next token after
it, logits finite (max |logit| about 3-4), the last logits depend on the earlier tokens.
llama_model_is_recurrent: mamba, mamba2, rwkv7; llama_model_is_hybrid: lfm2, qwen35, granitehybrid,
nemotron_h, falcon-h1.

The embedding, reranking and T5 models, checked with Debian's llama.cpp 0.7.0 tools (tiny preset,
2 threads), each on "hello world" and a second text, the two results finite, not constant, and
different:
  llama-embedding -m bert.gguf -p "hello world" (model default MEAN; also --pooling mean, cls):
    tokens [CLS] hello world [SEP]; 64 floats, max |difference| to "the quick brown fox ..." 0.19.
  nomic-bert and jina-bert-v2 likewise (default MEAN, the same WordPiece tokens): differences 0.20
    and 0.24.
  llama-embedding -m bert-rerank.gguf --pooling rank --embd-normalize -1 -p "$QUERY<TAB>$DOC"
    (the example's query/document pair, --cls-separator default "\t"): tokens <s> query </s> </s>
    document </s>, "rerank score 0: -6.547" for "what is a panda?" / "The giant panda is a bear.",
    -6.438 for an unrelated document. (With the default --embd-normalize 2 the one score prints
    as -0.000. Without --pooling the context pools NONE: one vector per token.)
  llama-embedding -m qwen3-embedding.gguf -p "hello world" (model default LAST): tokens hello,
    " world", <|endoftext|>; 64 floats, difference 0.21 (also --pooling mean).
  llama-embedding -m t5encoder.gguf --pooling mean (or cls): tokens " hello" " world" </s>;
    difference 0.44. Without --pooling: NONE, a vector per token.
  llama-completion -m t5.gguf -no-cnv -p "hello world" -n 8 --temp 0: encodes "hello world </s>",
    decodes from <pad> and prints 8 tokens of nonsense; llama-cli -st -p "hello world" too.
  (llama-embedding 0.7.0 now and then loses part or all of its stdout when that is a pipe or a
  file, still exiting 0: a script reading its output checks that it is complete and retries.)
  Through libllama: llama_model_has_encoder/has_decoder: t5 1/1, t5encoder 1/0, the BERT family
    and qwen3-embedding 0/1; llama_model_decoder_start_token: t5 0, the others -1; llama_get_memory:
    NULL for the BERT family (llama_decode takes llama.cpp's encoder path), a KV cache for
    qwen3-embedding, t5 (the decoder's self-attention) and t5encoder (allocated, unused).
    llama_model_n_cls_out 1 and llama_model_cls_label(0) "LABEL_0" for bert-rerank. An abort
    callback that returns true makes llama_decode and llama_encode return 2 on every model.
    llama.cpp aborts the process (GGML_ASSERT "encoder requires n_ubatch >= n_tokens") when a
    batch is larger than n_ubatch on the BERT family (llama_decode) or t5/t5encoder
    (llama_encode), and (GGML_ASSERT "llama_encode must be called first") on t5's llama_decode
    before any llama_encode; an aborted llama_encode leaves the previous encoder output, which
    the next llama_decode then attends to. qwen3-embedding takes a 15-token batch in n_ubatch 4.
"""

import argparse
import sys

import gguf

import gguf_files
import model_archs
from model_archs import ARCHS
from model_archs import SPACE, WORDS   # WORDS: their every "▁"-prefix becomes an SPM token

DEFAULTS = dict(n_head_kv=None, n_ctx_train=2048, seed=1)

N_SPECIAL = 3                   # <unk>, <s>, </s>
N_FIXED = N_SPECIAL + 256       # plus the byte tokens
def text_pieces():
    """Yield the deterministic, distinct text pieces of the vocabulary, most useful first."""
    seen = set()

    def once(piece):
        if piece not in seen:
            seen.add(piece)
            return True
        return False

    lower = "abcdefghijklmnopqrstuvwxyz"
    upper = lower.upper()
    digits = "0123456789"
    punct = ".,!?;:'\"-()[]{}<>/\\@#$%^&*_+=~`|"
    for piece in [SPACE] + list(lower) + [SPACE + c for c in lower] + list(upper + digits + punct):
        if once(piece):
            yield piece
    for w in WORDS:
        for i in range(2, len(w) + 1):
            piece = SPACE + w[:i]
            if once(piece):
                yield piece
    for piece in [SPACE + c for c in upper + digits + punct]:
        if once(piece):
            yield piece
    # then every lowercase bigram, "▁" bigram, trigram... until the caller has enough
    n = 2
    while True:
        for idx in range(len(lower) ** n):
            s = ""
            for _ in range(n):
                idx, r = divmod(idx, len(lower))
                s = lower[r] + s
            for piece in (s, SPACE + s):
                if once(piece):
                    yield piece
        n += 1


def make_vocab(n_vocab):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256
    scores = [0.0] * N_FIXED
    pieces = text_pieces()
    for i in range(n_vocab - N_FIXED):
        tokens.append(next(pieces))
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(i))  # like SPM log-probabilities: earlier pieces win merges
    return tokens, scores, [int(t) for t in types]


def add_spm_vocab(w, tokens, scores, types, eos=2, add_bos=True, space_prefix=True):
    """The vocabulary's keys: an SPM ("llama") tokenizer with <unk> 0 and <s> 1, end of
    generation `eos` (</s>, 2, in make_vocab's), never an added </s>."""
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(space_prefix)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Write a synthetic GGUF model with seeded random weights and an SPM vocabulary.")
    p.add_argument("out", metavar="OUT.gguf", help="output file (written atomically via OUT.tmp)")
    p.add_argument("--arch", choices=list(ARCHS), default="llama", help="architecture (default llama)")
    p.add_argument("--preset", choices=("tiny", "bench", "real"), default="tiny",
                   help="size preset (default tiny); explicit flags override it")
    p.add_argument("--n-embd", type=int)
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-ff", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--n-head-kv", type=int, help="default: n-head (no GQA), or the preset's")
    p.add_argument("--n-vocab", type=int, help="SPM: at least %d (specials + byte tokens + 1); the other "
                   "vocabularies: their specials and every single character" % (N_FIXED + 1))
    p.add_argument("--n-ctx-train", type=int)
    p.add_argument("--d-state", type=int, help="SSM state size (mamba, mamba2, granitehybrid, nemotron_h, falcon-h1; qwen35: delta-net head size; rwkv7: wkv head size)")
    p.add_argument("--attn-every", type=int,
                   help="every N-th layer is full attention, the others recurrent (lfm2, qwen35, "
                        "granitehybrid) or sliding-window (gemma3); nemotron_h: every N-th mixer")
    p.add_argument("--n-swa", type=int, help="sliding window (gemma3)")
    p.add_argument("--deepstack", type=int,
                   help="qwen3vl: deepstack layers of the vision projector it pairs with (n_embd_inp = n_embd * (1 + N))")
    p.add_argument("--seed", type=int)
    p.add_argument("--type", choices=["f32", "f16"], help="type of the 2-D weights (norms stay f32)")
    a = p.parse_args(argv)

    spec = ARCHS[a.arch]
    keys = model_archs.COMMON + spec["keys"]
    if a.preset not in spec["presets"]:
        p.error("--preset %s: --arch %s has the presets %s" % (a.preset, a.arch, ", ".join(spec["presets"])))
    cfg = dict(DEFAULTS, **spec["presets"][a.preset])
    for k in keys:
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    for k in vars(a):
        if k not in keys and k not in ("out", "arch", "preset") and getattr(a, k) is not None:
            p.error("--%s does not apply to --arch %s" % (k.replace("_", "-"), a.arch))
    if "n_head_kv" in keys and cfg.get("n_head_kv") is None:
        cfg["n_head_kv"] = cfg["n_head"]
    cfg = {k: cfg[k] for k in keys}
    cfg["arch"] = a.arch

    def need(ok, msg):
        if not ok:
            p.error(msg)
    for k in keys:
        if k not in ("seed", "type", "deepstack"):
            need(cfg[k] >= 1, "--%s must be >= 1" % k.replace("_", "-"))
    need(cfg["seed"] >= 0, "--seed must be >= 0")
    min_vocab = spec["vocab"].min_vocab if "vocab" in spec else N_FIXED + 1
    need(cfg["n_vocab"] >= min_vocab, "--n-vocab must be at least %d" % min_vocab)
    max_vocab = spec["vocab"].max_vocab if "vocab" in spec else None
    need(max_vocab is None or cfg["n_vocab"] <= max_vocab, "--n-vocab must be at most %s (the %s "
         "vocabulary's merges)" % (max_vocab, spec.get("vocab") and spec["vocab"].name))
    if "n_head" in keys:
        need(cfg["n_embd"] % cfg["n_head"] == 0, "--n-embd must be a multiple of --n-head")
        need((cfg["n_embd"] // cfg["n_head"]) % 2 == 0, "the head size n-embd/n-head must be even (rope)")
        if "n_head_kv" in keys:
            need(cfg["n_head"] % cfg["n_head_kv"] == 0, "--n-head must be a multiple of --n-head-kv")
    if a.arch in ("mamba2", "granitehybrid", "nemotron_h", "falcon-h1"):
        need(cfg["n_embd"] % 32 == 0, "--n-embd must be a multiple of 32 (mamba2 heads)")
    if a.arch == "rwkv7":
        # ggml's CPU wkv7 kernel steps over a head in SIMD blocks of up to 64 floats
        need(cfg["d_state"] % 64 == 0, "--d-state (the wkv head size) must be a multiple of 64 (rwkv7)")
        need(cfg["n_embd"] % cfg["d_state"] == 0, "--n-embd must be a multiple of --d-state (rwkv7 heads)")
    if a.arch == "qwen35":
        need((cfg["n_embd"] // cfg["n_head"]) % 8 == 0, "the head size n-embd/n-head must be a multiple of 8 (qwen35 rope)")
    if "attn_every" in keys:
        need(cfg["n_layer"] >= cfg["attn_every"], "--n-layer must be at least --attn-every "
             "(the model needs both kinds of layers)")
        need(cfg["attn_every"] >= 2, "--attn-every must be >= 2 (the model needs both kinds of layers)")
    if a.arch == "nemotron_h":
        # layers 0, 2, 4, ... are the mixers: the attn_every-th of them is layer 2 attn_every - 2
        need(cfg["n_layer"] >= 2 * cfg["attn_every"] - 1, "--n-layer must be at least 2 --attn-every - 1 "
             "(nemotron_h: a mixer and an MLP per pair of layers, every --attn-every-th mixer attention)")
    return a.out, cfg


def build(path, cfg):
    spec = ARCHS[cfg["arch"]]
    ftype = gguf.LlamaFileType.MOSTLY_F16 if cfg["type"] == "f16" else gguf.LlamaFileType.ALL_F32

    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[spec["arch"]])
    arch_tag = "" if cfg["arch"] == "llama" else cfg["arch"] + " "
    w.add_name("llama-cancel synthetic %s%dx%d seed %d" % (arch_tag, cfg["n_layer"], cfg["n_embd"], cfg["seed"]))
    w.add_context_length(cfg["n_ctx_train"])
    w.add_embedding_length(cfg["n_embd"])
    w.add_block_count(cfg["n_layer"])
    # The architecture's hyperparameters and tensors. The writer keeps keys in the order they
    # are added and writes every tensor after them, so the vocabulary keys can come later.
    spec["build"](w, model_archs.Weights(w, cfg), cfg)
    if "vocab" in spec:
        # the converter writes no {arch}.vocab_size for these families
        w.add_file_type(int(ftype))
        spec["vocab"].add(w, cfg["n_vocab"])
    else:
        w.add_vocab_size(cfg["n_vocab"])
        w.add_file_type(int(ftype))
        tokens, scores, types = make_vocab(cfg["n_vocab"])
        add_spm_vocab(w, tokens, scores, types)
    gguf_files.write_and_close(w)


if __name__ == "__main__":
    sys.exit(gguf_files.main(parse_args, build))
