#!/usr/bin/env python3
"""Write a synthetic llama-architecture GGUF model for tests and benchmarks.

The weights are seeded random numbers (numpy default_rng), the vocabulary is a
made-up sentencepiece (SPM, tokenizer.ggml.model = "llama") one: <unk>, <s>, </s>,
the 256 byte tokens <0x00>..<0xFF>, then deterministic text pieces. The same
arguments give a byte-identical file. The model means nothing; it only loads and
decodes in llama.cpp (checked against Debian's llama.cpp 0.7.0).

    make_model.py OUT.gguf [--preset tiny|bench] [--n-embd N] [--n-layer N] [--n-ff N]
                  [--n-head N] [--n-head-kv N] [--n-vocab N] [--n-ctx-train N]
                  [--seed N] [--type f32|f16]

Presets (explicit flags override them):
  tiny  (default)  n_embd 64, n_layer 2, n_ff 128, n_head 4, n_vocab 512, f32: about 0.5 MB,
                   loads and decodes in milliseconds. n_vocab is 512, not 256, since the
                   SPM vocabulary needs 3 special + 256 byte tokens before any text piece.
  bench            n_embd 512, n_layer 8, n_ff 1536, n_head 8, n_vocab 4096, f16: 63 MB,
                   about 1.5 s to write. One 256-token batch (n_batch = n_ubatch = 256)
                   decodes in about 270-390 ms on 2 threads with Debian's CPU backend alone
                   (measured on its zen4 build; f32 is ~5-10% slower, 6 layers 200-290 ms).
                   With Debian's BLAS backend on the reference libblas3 it is ~10x slower:
                   unload BLAS, as tools/support.cpp does.
"""

import argparse
import sys

import numpy as np
import gguf

import gguf_files

PRESETS = {
    "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, type="f32"),
    "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_vocab=4096, type="f16"),
}
DEFAULTS = dict(n_head_kv=None, n_ctx_train=2048, seed=1)

N_SPECIAL = 3                   # <unk>, <s>, </s>
N_FIXED = N_SPECIAL + 256       # plus the byte tokens
SPACE = "\u2581"                # sentencepiece's word-start mark "▁"

# Words whose every "▁"-prefix becomes a token, so that SPM merges them whole.
WORDS = ("hello world the of and to in is it that for on with as was this be at by "
         "from or an are not but have one all can will if more when up out so no what "
         "about there which their time only new some could these two may first then do "
         "any like my now over such our man me even most made after also did many before "
         "must through back years where much your way well down should because each just "
         "those people how too little state good very make would still own see men work "
         "long get here between both life being under never day same another know while "
         "last might us great old year off come since against go came right used take "
         "three").split()


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


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Write a synthetic llama GGUF model with seeded random weights and an SPM vocabulary.")
    p.add_argument("out", metavar="OUT.gguf", help="output file (written atomically via OUT.tmp)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                   help="size preset (default tiny); explicit flags override it")
    p.add_argument("--n-embd", type=int)
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-ff", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--n-head-kv", type=int, help="default: n-head (no GQA)")
    p.add_argument("--n-vocab", type=int, help="at least %d (specials + byte tokens + 1)" % (N_FIXED + 1))
    p.add_argument("--n-ctx-train", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--type", choices=["f32", "f16"], help="type of the 2-D weights (norms stay f32)")
    a = p.parse_args(argv)

    cfg = dict(DEFAULTS, **PRESETS[a.preset])
    for k in list(cfg) + ["n_head_kv"]:
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    if cfg["n_head_kv"] is None:
        cfg["n_head_kv"] = cfg["n_head"]

    def need(ok, msg):
        if not ok:
            p.error(msg)
    for k in ("n_embd", "n_layer", "n_ff", "n_head", "n_head_kv", "n_ctx_train"):
        need(cfg[k] >= 1, "--%s must be >= 1" % k.replace("_", "-"))
    need(cfg["seed"] >= 0, "--seed must be >= 0")
    need(cfg["n_embd"] % cfg["n_head"] == 0, "--n-embd must be a multiple of --n-head")
    need((cfg["n_embd"] // cfg["n_head"]) % 2 == 0, "the head size n-embd/n-head must be even (rope)")
    need(cfg["n_head"] % cfg["n_head_kv"] == 0, "--n-head must be a multiple of --n-head-kv")
    need(cfg["n_vocab"] > N_FIXED, "--n-vocab must be at least %d" % (N_FIXED + 1))
    return a.out, cfg


def build(path, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv, n_vocab = cfg["n_head"], cfg["n_head_kv"], cfg["n_vocab"]
    head_dim = n_embd // n_head
    wtype = np.float16 if cfg["type"] == "f16" else np.float32
    ftype = gguf.LlamaFileType.MOSTLY_F16 if cfg["type"] == "f16" else gguf.LlamaFileType.ALL_F32

    arch = gguf.MODEL_ARCH.LLAMA
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name("llama-cancel synthetic %dx%d seed %d" % (n_layer, n_embd, cfg["seed"]))
    w.add_context_length(cfg["n_ctx_train"])
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(ftype))

    tokens, scores, types = make_vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)

    # numpy shapes are ggml's ne reversed: a matrix that maps n_in -> n_out is (n_out, n_in).
    rng = np.random.default_rng(cfg["seed"])
    std_out = 0.02 / np.sqrt(2.0 * n_layer)   # residual-stream writers, as in GPT-2 init

    def name(t, bid=None):
        return gguf.TENSOR_NAMES[t].format(bid=bid) + ".weight"

    def mat(rows, cols, std):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)).astype(wtype)

    def ones():
        return np.ones(n_embd, dtype=np.float32)

    T = gguf.MODEL_TENSOR
    w.add_tensor(name(T.TOKEN_EMBD), mat(n_vocab, n_embd, 1.0))  # rms-normed right away
    for b in range(n_layer):
        w.add_tensor(name(T.ATTN_NORM, b), ones())
        w.add_tensor(name(T.ATTN_Q, b), mat(n_head * head_dim, n_embd, 0.02))
        w.add_tensor(name(T.ATTN_K, b), mat(n_head_kv * head_dim, n_embd, 0.02))
        w.add_tensor(name(T.ATTN_V, b), mat(n_head_kv * head_dim, n_embd, 0.02))
        w.add_tensor(name(T.ATTN_OUT, b), mat(n_embd, n_head * head_dim, std_out))
        w.add_tensor(name(T.FFN_NORM, b), ones())
        w.add_tensor(name(T.FFN_GATE, b), mat(n_ff, n_embd, 0.02))
        w.add_tensor(name(T.FFN_UP, b), mat(n_ff, n_embd, 0.02))
        w.add_tensor(name(T.FFN_DOWN, b), mat(n_embd, n_ff, std_out))
    w.add_tensor(name(T.OUTPUT_NORM), ones())
    w.add_tensor(name(T.OUTPUT), mat(n_vocab, n_embd, 1.0 / np.sqrt(n_embd)))  # logits ~ N(0, 1)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    sys.exit(gguf_files.main(parse_args, build))
