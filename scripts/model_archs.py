"""The per-architecture parts of make_model.py: presets, hyperparameters and tensors.

Each builder writes its architecture's hyperparameters, then its tensors, through a Weights
object (seeded random matrices, norms of ones). numpy shapes are ggml's ne reversed: a matrix
that maps n_in -> n_out is (n_out, n_in). 2-D weights take the file's type (f32 or f16); norms,
biases, convolution kernels, the SSM's A and D, and RWKV-7's decay LoRA and token-shift
interpolations stay f32, as llama.cpp's converter keeps them.

Scales: the residual stream is about unit size (token embeddings N(0, 1)), projections that read
a normed input have std 1/sqrt(fan_in), the ones that write back into the residual stream are
smaller again by 1/sqrt(2 n_layer), and the output matrix gives logits of about N(0, 1). The
llama builder keeps its original 0.02 scales so that its files stay byte-identical.

The embedding, reranking and T5 builders (bert, nomic-bert, jina-bert-v2, bert-rerank,
qwen3-embedding, t5, t5encoder) write what llama.cpp's converter writes for the real models
(the keys of their set_gguf_parameters, the tensors of their checkpoints under llama.cpp's names,
biases exactly where the real ones have them, small and f32; LayerNorms as weight ones and bias
zeros); their tokenizers are the VOCAB_ ones (WordPiece, T5 and XLM-R unigram, Qwen2 BPE). The
BERT family is post-norm, so the residual stream is LayerNorm-ed after every block and its
writers simply read and write unit-sized activations.
"""

import numpy as np
import gguf

T = gguf.MODEL_TENSOR

# Keys that every architecture's config holds, besides its own ones listed in ARCHS.
COMMON = ("n_embd", "n_layer", "n_vocab", "n_ctx_train", "seed", "type")


class Weights:
    """Adds seeded random tensors to a GGUFWriter, in the order they are asked for."""

    def __init__(self, writer, cfg):
        self.w = writer
        self.rng = np.random.default_rng(cfg["seed"])
        self.wtype = np.float16 if cfg["type"] == "f16" else np.float32
        self.n_embd = cfg["n_embd"]

    @staticmethod
    def name(t, bid=None, suffix=".weight"):
        return gguf.TENSOR_NAMES[t].format(bid=bid) + suffix

    def add(self, t, bid, data, suffix=".weight"):
        self.w.add_tensor(self.name(t, bid, suffix), data)

    def mat(self, rows, cols, std):
        """A (rows, cols) N(0, std^2) matrix in the file's weight type."""
        return (self.rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)).astype(self.wtype)

    def f32(self, shape, std):
        """N(0, std^2) values that stay f32 (convolution kernels)."""
        return self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def ones(self, n=None):
        return np.ones(self.n_embd if n is None else n, dtype=np.float32)

    def zeros(self, shape):
        return np.zeros(shape, dtype=np.float32)


def unit(fan_in):
    return 1.0 / np.sqrt(fan_in)


def dt_bias(n):
    """Inverse softplus of time steps spread log-evenly over [0.001, 0.1], as Mamba initializes them."""
    dt = np.exp(np.linspace(np.log(1e-3), np.log(1e-1), n)).astype(np.float32)
    return (dt + np.log(-np.expm1(-dt))).astype(np.float32)


def attn_layers(cfg):
    """Per layer, whether it is a full-attention layer: the attn_every-th, 2*attn_every-th, ... one."""
    return [(i + 1) % cfg["attn_every"] == 0 for i in range(cfg["n_layer"])]


def embd_and_output(t, cfg, body, out_norm=T.OUTPUT_NORM, embd_std=1.0, out_std=None):
    """token_embd, body(), the final norm and the untied output matrix (logits ~ N(0, 1); out_std
    overrides its std, for a graph that scales the logits)."""
    n_embd, n_vocab = cfg["n_embd"], cfg["n_vocab"]
    t.add(T.TOKEN_EMBD, None, t.mat(n_vocab, n_embd, embd_std))
    body()
    t.add(out_norm, None, t.ones())
    t.add(T.OUTPUT, None, t.mat(n_vocab, n_embd, unit(n_embd) if out_std is None else out_std))


def gated_ffn(t, b, cfg, std_out):
    """gate, up and down; the graph makes it SwiGLU (llama, lfm2, qwen35, granitehybrid, falcon-h1) or
    GeGLU (gemma3)."""
    n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
    t.add(T.FFN_GATE, b, t.mat(n_ff, n_embd, unit(n_embd)))
    t.add(T.FFN_UP, b, t.mat(n_ff, n_embd, unit(n_embd)))
    t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, std_out))


# --- llama -----------------------------------------------------------------------------------

def gqa_attention(t, b, cfg, std_out, qk_norm=False):
    """Layer b's attention: q (n_head heads), k and v (n_head_kv heads) reading a normed input,
    optional q/k norms, and the output projection writing back with std_out."""
    n_embd, n_head, n_head_kv = cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    t.add(T.ATTN_Q, b, t.mat(n_head * head_dim, n_embd, unit(n_embd)))
    t.add(T.ATTN_K, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
    t.add(T.ATTN_V, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
    if qk_norm:
        t.add(T.ATTN_Q_NORM, b, t.ones(head_dim))
        t.add(T.ATTN_K_NORM, b, t.ones(head_dim))
    t.add(T.ATTN_OUT, b, t.mat(n_embd, n_head * head_dim, std_out))

def llama(w, t, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv, n_vocab = cfg["n_head"], cfg["n_head_kv"], cfg["n_vocab"]
    head_dim = n_embd // n_head
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)

    std_out = 0.02 / np.sqrt(2.0 * n_layer)   # residual-stream writers, as in GPT-2 init
    t.add(T.TOKEN_EMBD, None, t.mat(n_vocab, n_embd, 1.0))  # rms-normed right away
    for b in range(n_layer):
        t.add(T.ATTN_NORM, b, t.ones())
        t.add(T.ATTN_Q, b, t.mat(n_head * head_dim, n_embd, 0.02))
        t.add(T.ATTN_K, b, t.mat(n_head_kv * head_dim, n_embd, 0.02))
        t.add(T.ATTN_V, b, t.mat(n_head_kv * head_dim, n_embd, 0.02))
        t.add(T.ATTN_OUT, b, t.mat(n_embd, n_head * head_dim, std_out))
        t.add(T.FFN_NORM, b, t.ones())
        t.add(T.FFN_GATE, b, t.mat(n_ff, n_embd, 0.02))
        t.add(T.FFN_UP, b, t.mat(n_ff, n_embd, 0.02))
        t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, std_out))
    t.add(T.OUTPUT_NORM, None, t.ones())
    t.add(T.OUTPUT, None, t.mat(n_vocab, n_embd, 1.0 / np.sqrt(n_embd)))  # logits ~ N(0, 1)


# --- mamba (Mamba-1: selective scan, d_inner = 2 n_embd, conv kernel 4) ----------------------

def mamba(w, t, cfg):
    n_embd, n_layer, d_state = cfg["n_embd"], cfg["n_layer"], cfg["d_state"]
    d_inner, d_conv = 2 * n_embd, 4
    dt_rank = -(-n_embd // 16)
    w.add_feed_forward_length(0)   # unused, read anyway
    w.add_head_count(0)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_ssm_dt_b_c_rms(False)
    w.add_layer_norm_rms_eps(1e-5)

    std_out = unit(d_inner) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            t.add(T.SSM_IN, b, t.mat(2 * d_inner, n_embd, unit(n_embd)))   # x and the gate z
            t.add(T.SSM_CONV1D, b, t.f32((d_inner, d_conv), unit(d_conv)))
            t.add(T.SSM_CONV1D, b, t.zeros(d_inner), ".bias")
            t.add(T.SSM_X, b, t.mat(dt_rank + 2 * d_state, d_inner, unit(d_inner)))  # dt, B, C
            t.add(T.SSM_DT, b, t.mat(d_inner, dt_rank, 0.5 * unit(dt_rank)))
            t.add(T.SSM_DT, b, dt_bias(d_inner), ".bias")
            # A = -exp(A_log) with the S4D-real init A_log = log(1..d_state)
            t.add(T.SSM_A, b, -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1)), "")
            t.add(T.SSM_D, b, t.ones(d_inner), "")
            t.add(T.SSM_OUT, b, t.mat(n_embd, d_inner, std_out))
    embd_and_output(t, cfg, body)


# --- mamba2 (SSD: scalar A per head, head size 64 or less, one group) --------------------------

def mamba2_heads(cfg):
    d_inner = 2 * cfg["n_embd"]
    head_dim = min(64, d_inner)
    return d_inner, head_dim, d_inner // head_dim


MAMBA2_D_CONV, MAMBA2_N_GROUP = 4, 1


def mamba2_ssm_keys(w, cfg):
    """The Mamba-2 mixer's hyperparameters (mamba2, granitehybrid, nemotron_h, falcon-h1)."""
    d_inner, _, n_head = mamba2_heads(cfg)
    w.add_ssm_conv_kernel(MAMBA2_D_CONV)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(cfg["d_state"])
    w.add_ssm_time_step_rank(n_head)
    w.add_ssm_group_count(MAMBA2_N_GROUP)


def mamba2_mixer(t, b, cfg, std_out):
    """Layer b's Mamba-2 mixer tensors, in_proj to out_proj (mamba2, granitehybrid, nemotron_h,
    falcon-h1)."""
    n_embd, d_state = cfg["n_embd"], cfg["d_state"]
    d_inner, _, n_head = mamba2_heads(cfg)
    d_conv, n_group = MAMBA2_D_CONV, MAMBA2_N_GROUP
    conv_dim = d_inner + 2 * n_group * d_state
    # z, then x B C (through the convolution), then dt
    t.add(T.SSM_IN, b, t.mat(d_inner + conv_dim + n_head, n_embd, unit(n_embd)))
    t.add(T.SSM_CONV1D, b, t.f32((conv_dim, d_conv), unit(d_conv)))
    t.add(T.SSM_CONV1D, b, t.zeros(conv_dim), ".bias")
    t.add(T.SSM_DT, b, dt_bias(n_head), ".bias")
    t.add(T.SSM_A, b, -np.linspace(1, 16, n_head, dtype=np.float32).reshape(n_head, 1), "")
    t.add(T.SSM_D, b, t.ones(n_head).reshape(n_head, 1), "")
    t.add(T.SSM_NORM, b, t.ones(d_inner).reshape(n_group, d_inner // n_group))
    t.add(T.SSM_OUT, b, t.mat(n_embd, d_inner, std_out))


def mamba2(w, t, cfg):
    n_layer = cfg["n_layer"]
    d_inner, _, _ = mamba2_heads(cfg)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    mamba2_ssm_keys(w, cfg)
    w.add_layer_norm_rms_eps(1e-5)

    std_out = unit(d_inner) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            mamba2_mixer(t, b, cfg, std_out)
    embd_and_output(t, cfg, body)


# --- lfm2 (hybrid: gated short-convolution layers and GQA attention layers) --------------------

def lfm2(w, t, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    l_cache = 3
    is_attn = attn_layers(cfg)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv([n_head_kv if a else 0 for a in is_attn])   # 0 marks a conv layer
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_shortconv_l_cache(l_cache)

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            if is_attn[b]:
                gqa_attention(t, b, cfg, std_out, qk_norm=True)
            else:
                t.add(T.SHORTCONV_INPROJ, b, t.mat(3 * n_embd, n_embd, unit(n_embd)))   # B, C, x
                t.add(T.SHORTCONV_CONV, b, t.f32((n_embd, l_cache), unit(l_cache)))
                t.add(T.SHORTCONV_OUTPROJ, b, t.mat(n_embd, n_embd, std_out))
            t.add(T.FFN_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
    # LFM2's final norm is stored as token_embd_norm
    embd_and_output(t, cfg, body, out_norm=T.TOKEN_EMBD_NORM)


# --- qwen35 (hybrid: gated delta-net linear attention and gated full attention) -----------------

def qwen35(w, t, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv, d_state = cfg["n_head"], cfg["n_head_kv"], cfg["d_state"]
    head_dim = n_embd // n_head
    # linear attention: n_head value heads and n_head_kv key heads, each d_state wide
    n_v_heads, n_k_heads = n_head, n_head_kv
    key_dim, value_dim = d_state * n_k_heads, d_state * n_v_heads
    d_conv = 4
    n_rot = head_dim // 4                    # partial rotary, like Qwen3.5's 0.25
    is_attn = attn_layers(cfg)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(n_rot)
    # interleaved M-RoPE sections (text, height, width, extra); for text they sum to n_rot / 2
    half = n_rot // 2
    w.add_rope_dimension_sections([half - 2 * (half // 3), half // 3, half // 3, 0])
    w.add_rope_freq_base(10000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(value_dim)
    w.add_ssm_state_size(d_state)
    w.add_ssm_group_count(n_k_heads)
    w.add_ssm_time_step_rank(n_v_heads)
    w.add_full_attention_interval(cfg["attn_every"])

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            if is_attn[b]:
                t.add(T.ATTN_Q, b, t.mat(2 * n_head * head_dim, n_embd, unit(n_embd)))   # query and gate
                t.add(T.ATTN_K, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
                t.add(T.ATTN_V, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
                t.add(T.ATTN_Q_NORM, b, t.ones(head_dim))
                t.add(T.ATTN_K_NORM, b, t.ones(head_dim))
                t.add(T.ATTN_OUT, b, t.mat(n_embd, n_head * head_dim, std_out))
            else:
                t.add(T.ATTN_QKV, b, t.mat(2 * key_dim + value_dim, n_embd, unit(n_embd)))
                t.add(T.ATTN_GATE, b, t.mat(value_dim, n_embd, unit(n_embd)))
                t.add(T.SSM_CONV1D, b, t.f32((2 * key_dim + value_dim, d_conv), unit(d_conv)))
                t.add(T.SSM_DT, b, t.ones(n_v_heads), ".bias")
                t.add(T.SSM_A, b, -np.linspace(1, 8, n_v_heads, dtype=np.float32), "")   # -exp(A_log)
                t.add(T.SSM_BETA, b, t.mat(n_v_heads, n_embd, unit(n_embd)))
                t.add(T.SSM_ALPHA, b, t.mat(n_v_heads, n_embd, unit(n_embd)))
                t.add(T.SSM_NORM, b, t.ones(d_state))
                t.add(T.SSM_OUT, b, t.mat(n_embd, value_dim, std_out))
            t.add(T.ATTN_POST_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
    embd_and_output(t, cfg, body)


# --- gemma3 (sliding-window and full attention layers, sandwich norms, GELU FFN) ----------------

def gemma3(w, t, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(1000000.0)          # full layers; sliding ones use 10000
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(cfg["n_swa"])
    w.add_sliding_window_pattern(cfg["attn_every"])   # every attn_every-th layer is full

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            gqa_attention(t, b, cfg, std_out, qk_norm=True)
            t.add(T.ATTN_POST_NORM, b, t.ones())
            t.add(T.FFN_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
            t.add(T.FFN_POST_NORM, b, t.ones())
    # gemma scales the embeddings by sqrt(n_embd): store them 1/sqrt(n_embd) smaller
    embd_and_output(t, cfg, body, embd_std=unit(n_embd))


# --- qwen2vl (Qwen2-VL's text model: attention with q/k/v biases, SwiGLU, M-RoPE) ---------------

def mrope_sections(n_rot):
    """M-RoPE sections (time, height, width, extra) over n_rot / 2 frequency pairs, time the largest
    (Qwen2-VL: [16, 24, 24, 0] of 64)."""
    half = n_rot // 2
    return [half - 2 * (half // 3), half // 3, half // 3, 0]


def qwen2vl(w, t, cfg):
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_dimension_sections(mrope_sections(head_dim))
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            t.add(T.ATTN_Q, b, t.mat(n_head * head_dim, n_embd, unit(n_embd)))
            t.add(T.ATTN_Q, b, t.f32((n_head * head_dim,), 0.02), ".bias")
            t.add(T.ATTN_K, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
            t.add(T.ATTN_K, b, t.f32((n_head_kv * head_dim,), 0.02), ".bias")
            t.add(T.ATTN_V, b, t.mat(n_head_kv * head_dim, n_embd, unit(n_embd)))
            t.add(T.ATTN_V, b, t.f32((n_head_kv * head_dim,), 0.02), ".bias")
            t.add(T.ATTN_OUT, b, t.mat(n_embd, n_head * head_dim, std_out))
            t.add(T.FFN_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
    embd_and_output(t, cfg, body)


# --- qwen3vl (Qwen3-VL's text model: q/k norms, SwiGLU, interleaved M-RoPE, deepstack inputs) --

def qwen3vl(w, t, cfg):
    """Qwen3's layers with interleaved M-RoPE (llama_model_rope_type IMROPE). The vision projector's
    deepstack outputs come with each image embedding: llama_model_n_embd_inp is
    n_embd * (1 + deepstack), and the text model adds the extra parts to its first layers' inputs."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_dimension_sections(mrope_sections(head_dim))
    w.add_rope_freq_base(5000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_num_deepstack_layers(cfg["deepstack"])

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            gqa_attention(t, b, cfg, std_out, qk_norm=True)
            t.add(T.FFN_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
    embd_and_output(t, cfg, body)


# --- granitehybrid (IBM Granite 4.0-H: Mamba-2 layers and GQA attention layers, Granite's scales) --

# Granite's multipliers (muP), as Granite 4.0-H has them: the graph scales the token embeddings by
# embedding_scale, every layer's mixer and FFN output by residual_scale before the residual add, and
# divides the logits by logit_scale; attention_scale replaces 1/sqrt(head_dim) (here 1/head_dim).
GRANITE_EMBEDDING_SCALE, GRANITE_RESIDUAL_SCALE, GRANITE_LOGIT_SCALE = 12.0, 0.22, 6.0


def granitehybrid(w, t, cfg):
    """Every attn_every-th layer GQA attention without rope (Granite 4.0-H's NoPE: the file says
    rope.scaling.finetuned = false, which llama.cpp's granite graphs read as "no rope"), the others
    Mamba-2 mixers (d_inner 2 n_embd in heads of 64, one group, as mamba2); SwiGLU FFN in every layer.
    The stored weights undo Granite's multipliers, so that the residual stream stays about unit size."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    d_inner, _, _ = mamba2_heads(cfg)
    is_attn = attn_layers(cfg)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv([n_head_kv if a else 0 for a in is_attn])   # 0 marks a Mamba-2 layer
    w.add_rope_scaling_finetuned(False)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_embedding_scale(GRANITE_EMBEDDING_SCALE)
    w.add_residual_scale(GRANITE_RESIDUAL_SCALE)
    w.add_attention_scale(1.0 / head_dim)
    w.add_logit_scale(GRANITE_LOGIT_SCALE)
    mamba2_ssm_keys(w, cfg)

    # residual-stream writers, before the graph's residual_scale
    res = np.sqrt(2.0 * n_layer) * GRANITE_RESIDUAL_SCALE

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())
            if is_attn[b]:
                gqa_attention(t, b, cfg, unit(n_embd) / res)
            else:
                mamba2_mixer(t, b, cfg, unit(d_inner) / res)
            t.add(T.FFN_NORM, b, t.ones())
            gated_ffn(t, b, cfg, unit(n_ff) / res)
    embd_and_output(t, cfg, body, embd_std=1.0 / GRANITE_EMBEDDING_SCALE,
                    out_std=GRANITE_LOGIT_SCALE * unit(n_embd))


# --- nemotron_h (NVIDIA Nemotron-H: Mamba-2 layers, attention-only layers, MLP-only layers) -------

def nemotron_h_layers(cfg):
    """Per layer its kind, in the letters of Nemotron-H's hybrid_override_pattern: "M" Mamba-2, "*"
    attention, "-" MLP. The layers come in pairs, a mixer then an MLP, and every attn_every-th mixer
    is attention: n_layer 4, attn_every 2 gives M-*-."""
    return ["-" if i % 2 else "*" if (i // 2 + 1) % cfg["attn_every"] == 0 else "M"
            for i in range(cfg["n_layer"])]


def nemotron_h(w, t, cfg):
    """Each layer one block behind its own norm and residual add: a Mamba-2 mixer (as mamba2), GQA
    attention without rope, or a squared-ReLU MLP (up, down, no gate). llama.cpp tells them apart by
    the per-layer arrays: n_head_kv(il) == 0 and n_ff(il) == 0 is Mamba-2, n_ff(il) == 0 alone is
    attention, the rest are MLPs."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    d_inner, _, _ = mamba2_heads(cfg)
    kinds = nemotron_h_layers(cfg)
    w.add_feed_forward_length([n_ff if k == "-" else 0 for k in kinds])
    w.add_head_count(n_head)
    w.add_head_count_kv([n_head_kv if k == "*" else 0 for k in kinds])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_layer_norm_eps(1e-5)   # unused by the graph (RMS norms only), but 0.7.0 requires it
    mamba2_ssm_keys(w, cfg)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())   # every block's input norm
            if kinds[b] == "M":
                mamba2_mixer(t, b, cfg, unit(d_inner) / np.sqrt(2.0 * n_layer))
            elif kinds[b] == "*":
                gqa_attention(t, b, cfg, unit(n_embd) / np.sqrt(2.0 * n_layer))
            else:
                t.add(T.FFN_UP, b, t.mat(n_ff, n_embd, unit(n_embd)))
                t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, unit(n_ff) / np.sqrt(2.0 * n_layer)))
    embd_and_output(t, cfg, body)


# --- falcon-h1 (TII Falcon-H1: attention and a Mamba-2 mixer in parallel in every layer, SwiGLU) --

def falcon_h1(w, t, cfg):
    """Every layer: one norm, then GQA attention (rope) and a Mamba-2 mixer (as mamba2) side by side,
    their sum added to the residual stream, then a SwiGLU FFN. Falcon-H1's muP multipliers (embedding,
    attention in/out, key, SSM in/out, MLP, lm_head) are folded into the weights by llama.cpp's
    converter: the graph reads no multiplier keys, and the file writes none."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    d_inner, _, _ = mamba2_heads(cfg)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(100000000000.0)   # Falcon-H1's rope_theta 1e11
    w.add_layer_norm_rms_eps(1e-5)
    mamba2_ssm_keys(w, cfg)

    # attention and the mixer write into the residual stream together, the FFN after them
    res = np.sqrt(3.0 * n_layer)

    def body():
        for b in range(n_layer):
            t.add(T.ATTN_NORM, b, t.ones())   # read by both the attention and the mixer
            gqa_attention(t, b, cfg, unit(n_embd) / res)
            mamba2_mixer(t, b, cfg, unit(d_inner) / res)
            t.add(T.FFN_PRE_NORM, b, t.ones(), "")   # llama.cpp looks it up without ".weight"
            gated_ffn(t, b, cfg, unit(n_ff) / res)
    embd_and_output(t, cfg, body)


# --- rwkv7 (RWKV-7: token shift, wkv7 state with a per-channel decay and an in-context learning
#     rate, squared-ReLU channel mix; layer norms with biases) --------------------------------------

def rwkv7_lora_rank(n_embd, exponent, multiplier):
    """RWKV-7's default low-rank sizes: n_embd^exponent * multiplier, in multiples of 32, at least 32."""
    return max(1, round(n_embd ** exponent * multiplier / 32)) * 32


def rwkv7(w, t, cfg):
    """Pure recurrent: per layer a token-shift state (the time mix's and the channel mix's previous
    token, 2 n_embd) and a wkv state of n_embd / d_state heads of d_state x d_state."""
    n_embd, n_layer, n_ff, head_size = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"], cfg["d_state"]
    n_vocab = cfg["n_vocab"]
    n_decay = rwkv7_lora_rank(n_embd, 0.5, 1.8)
    n_iclr = rwkv7_lora_rank(n_embd, 0.5, 1.8)
    n_vres = rwkv7_lora_rank(n_embd, 0.5, 1.3)
    n_gate = rwkv7_lora_rank(n_embd, 0.8, 0.6)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(0)   # unused, read anyway
    w.add_layer_norm_eps(1e-5)
    w.add_wkv_head_size(head_size)
    w.add_decay_lora_rank(n_decay)
    w.add_iclr_lora_rank(n_iclr)
    w.add_value_residual_mix_lora_rank(n_vres)
    w.add_gate_lora_rank(n_gate)
    w.add_token_shift_count(2)

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)

    def layer_norm(t_norm, b):
        t.add(t_norm, b, t.ones())
        t.add(t_norm, b, t.zeros(n_embd), ".bias")

    def lerp(shape):
        """Token-shift interpolation weights in [0, 1) (f32, as llama.cpp's converter keeps them)."""
        return t.rng.random(shape, dtype=np.float32)

    def lora(b, t1, t2, rank, std2):
        """x -> t2 . f(t1 . x): t1 reads the normed input, t2 writes rank -> n_embd."""
        t.add(t1, b, t.mat(rank, n_embd, unit(n_embd)))
        t.add(t2, b, t.mat(n_embd, rank, std2))

    t.add(T.TOKEN_EMBD, None, t.mat(n_vocab, n_embd, 1.0))
    layer_norm(T.TOKEN_EMBD_NORM, None)   # RWKV's ln0, right after the embeddings
    for b in range(n_layer):
        layer_norm(T.ATTN_NORM, b)
        layer_norm(T.ATTN_NORM_2, b)
        # decay exp(-0.607 sigmoid(w0 + w2 tanh(w1 x))): w0 spreads it over about [0.59, 0.998],
        # long memory to short, like mamba's time steps; w1 and w2 stay f32, as llama.cpp's
        # converter keeps them
        t.add(T.TIME_MIX_W0, b, np.linspace(-6, 2, n_embd, dtype=np.float32))
        t.add(T.TIME_MIX_W1, b, t.f32((n_decay, n_embd), unit(n_embd)))
        t.add(T.TIME_MIX_W2, b, t.f32((n_embd, n_decay), unit(n_decay)))
        # in-context learning rate sigmoid(a0 + a2 a1 x)
        t.add(T.TIME_MIX_A0, b, t.zeros(n_embd))
        lora(b, T.TIME_MIX_A1, T.TIME_MIX_A2, n_iclr, unit(n_iclr))
        # the mix with the first layer's values, sigmoid(v0 + v2 v1 x); layer 0's are unused and
        # llama.cpp wants them of the iclr rank
        t.add(T.TIME_MIX_V0, b, t.zeros(n_embd))
        n_v = n_iclr if b == 0 else n_vres
        lora(b, T.TIME_MIX_V1, T.TIME_MIX_V2, n_v, unit(n_v))
        # output gate g2 sigmoid(g1 x)
        lora(b, T.TIME_MIX_G1, T.TIME_MIX_G2, n_gate, unit(n_gate))
        # r, w, k, v, a, g each interpolate between the token and the previous one
        t.add(T.TIME_MIX_LERP_FUSED, b, lerp((6, 1, 1, n_embd)))
        t.add(T.TIME_MIX_K_K, b, np.full(n_embd, 0.85, dtype=np.float32))
        t.add(T.TIME_MIX_K_A, b, t.ones())
        t.add(T.TIME_MIX_R_K, b, t.f32((n_embd,), unit(head_size)))
        t.add(T.TIME_MIX_KEY, b, t.mat(n_embd, n_embd, unit(n_embd)))
        t.add(T.TIME_MIX_VALUE, b, t.mat(n_embd, n_embd, unit(n_embd)))
        t.add(T.TIME_MIX_RECEPTANCE, b, t.mat(n_embd, n_embd, unit(n_embd)))
        layer_norm(T.TIME_MIX_LN, b)   # a group norm over the heads
        t.add(T.TIME_MIX_OUTPUT, b, t.mat(n_embd, n_embd, std_out))
        t.add(T.CHANNEL_MIX_LERP_K, b, lerp((1, 1, n_embd)))
        t.add(T.CHANNEL_MIX_KEY, b, t.mat(n_ff, n_embd, unit(n_embd)))
        t.add(T.CHANNEL_MIX_VALUE, b, t.mat(n_embd, n_ff, unit(n_ff) / np.sqrt(2.0 * n_layer)))
    layer_norm(T.OUTPUT_NORM, None)
    t.add(T.OUTPUT, None, t.mat(n_vocab, n_embd, unit(n_embd)))


# --- vocabularies of the embedding, reranking and T5 models ---------------------------------------
#
# make_model.py's SPM vocabulary (tokenizer.ggml.model "llama") serves the decoders above. The
# embedding, reranking and T5 models get the tokenizer llama.cpp's converter (convert_hf_to_gguf.py,
# as Debian ships it with llama.cpp 0.7.0) writes for their family, with the keys it writes
# (gguf.SpecialVocab reading the model's tokenizer.json, tokenizer_config.json and config.json):
#
#   VOCAB_WORDPIECE  BERT's WordPiece ("bert", llama.cpp's WPM): [PAD] [UNK] [CLS] [SEP] [MASK], then
#                the pieces in the converter's "phantom space" form: a word start as "▁" + piece, a
#                continuation ("##ing") without its "##". Uncased (normalizer.lowercase). The keys of
#                bge-small-en-v1.5, nomic-embed-text-v1.5 and jina-embeddings-v2 (all BertTokenizer).
#   VOCAB_T5     T5's sentencepiece unigram ("t5", llama.cpp's UGM) as flan-t5 has it: <pad> 0, </s> 1,
#                <unk> 2, scored pieces, and a few "[PADn]" tokens where config's vocab_size is larger
#                than the sentencepiece model (as t5's 32128 against 32100); </s> appended.
#   VOCAB_XLMR   XLM-RoBERTa's sentencepiece unigram ("t5") in the converter's realigned order, as
#                bge-reranker-base / -v2-m3 have it: <s> 0, <pad> 1, </s> 2, <unk> 3, scored pieces,
#                <mask> last; <s> A </s> (</s> B </s>) added.
#   VOCAB_QWEN2  Qwen2/Qwen3's byte-level BPE ("gpt2", pre "qwen2") with merges, as Qwen3-Embedding
#                has it: the 256 byte symbols, merged pieces, <|endoftext|> <|im_start|> <|im_end|>;
#                <|endoftext|> appended (the token whose hidden state LAST pooling returns).
#
# Each holds every single character a real one holds for ASCII text (WordPiece: every lowercase
# letter, digit and punctuation mark as a word start, letters and digits as continuations; unigram:
# every printable ASCII character; BPE: all 256 bytes), so English text tokenizes without <unk>,
# and the words of WORDS are one token each. The same n_vocab gives the same tokens. They carry no
# tokenizer.ggml.precompiled_charsmap (T5's and XLM-R's NFKC rules; without one llama.cpp leaves
# the text as it is, which for ASCII is what the charsmap does) and no chat template
# (Qwen3-Embedding's is for chat, not for embeddings).

TT = gguf.TokenType
SPACE = "\u2581"                # sentencepiece's word-start mark "▁"

# Common English words; every vocabulary makes each a single token.
WORDS = ("hello world the of and to in is it that for on with as was this be at by "
         "from or an are not but have one all can will if more when up out so no what "
         "about there which their time only new some could these two may first then do "
         "any like my now over such our man me even most made after also did many before "
         "must through back years where much your way well down should because each just "
         "those people how too little state good very make would still own see men work "
         "long get here between both life being under never day same another know while "
         "last might us great old year off come since against go came right used take "
         "three").split()

LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
PUNCT = ".,!?;:'\"-()[]{}<>/\\@#$%^&*_+=~`|"
# Continuation pieces of English words (WordPiece "##..." pieces).
SUFFIXES = "s es ed ing er ers ly est ion tion ions ment ness able ful less al ive ous ity".split()


def _lower_ngrams():
    """Every lowercase bigram, then every trigram, ... ("aa", "ab", ...)."""
    n = 2
    while True:
        for idx in range(len(LOWER) ** n):
            s = ""
            for _ in range(n):
                idx, r = divmod(idx, len(LOWER))
                s = LOWER[r] + s
            yield s
        n += 1


def _distinct(*iterables):
    """The items of the iterables in order, each once."""
    seen = set()
    for it in iterables:
        for x in it:
            if x not in seen:
                seen.add(x)
                yield x


def _take(what, pieces, n):
    """The first n of pieces (an iterator), or an error naming `what` when there are fewer."""
    out = []
    for p in pieces:
        if len(out) == n:
            break
        out.append(p)
    if len(out) < n:
        raise ValueError("%s: at most %d text pieces, asked for %d" % (what, len(out), n))
    return out


class Vocab:
    """A vocabulary: its name, the fewest and most tokens it can have (None: no limit), and
    add(writer, n_vocab), which writes its tokenizer keys."""

    def __init__(self, name, min_vocab, add, max_vocab=None):
        self.name, self.min_vocab, self.add, self.max_vocab = name, min_vocab, add, max_vocab


# --- WordPiece (BERT) ---------------------------------------------------------------------------

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BERT_PAD, BERT_UNK, BERT_CLS, BERT_SEP, BERT_MASK = range(5)


def wordpiece_pieces():
    """WordPiece's pieces in phantom-space form ("▁" + word start, continuation bare)."""
    starts = [SPACE + c for c in LOWER + DIGITS + PUNCT]
    conts = list(LOWER + DIGITS)
    words = [SPACE + w for w in WORDS]
    return _distinct(starts, conts, words, SUFFIXES, _lower_ngrams())


def add_wordpiece(w, n_vocab):
    """bge-small-en-v1.5's keys: tokenizer.json's TemplateProcessing "[CLS] $A [SEP]" makes [CLS]
    the BOS and [SEP] the EOS, both added (the pair template's [SEP] between A and B is then no
    extra separator: add_sep false); BertNormalizer lowercase; two token types (sentence A, B)."""
    n_text = n_vocab - len(BERT_SPECIALS)
    tokens = list(BERT_SPECIALS) + _take("WordPiece vocabulary", wordpiece_pieces(), n_text)
    types = [int(TT.CONTROL)] * len(BERT_SPECIALS) + [int(TT.NORMAL)] * n_text
    w.add_token_type_count(2)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("jina-v2-en")   # what the converter's pre-tokenizer hash names bge's and jina's
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(BERT_CLS)
    w.add_eos_token_id(BERT_SEP)
    w.add_unk_token_id(BERT_UNK)
    w.add_sep_token_id(BERT_SEP)
    w.add_pad_token_id(BERT_PAD)
    w.add_mask_token_id(BERT_MASK)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_sep_token(False)
    w.add_normalizer_lowercase(True)


VOCAB_WORDPIECE = Vocab("wordpiece", len(BERT_SPECIALS) + len(LOWER + DIGITS + PUNCT) + len(LOWER + DIGITS),
                  add_wordpiece)


# --- sentencepiece unigram (T5, XLM-RoBERTa) ------------------------------------------------------

ASCII = LOWER + LOWER.upper() + DIGITS + PUNCT    # the printable characters but " "


def unigram_pieces():
    """Unigram pieces, most probable first: "▁", the printable ASCII characters, "▁" + each, the
    words, the suffixes, then lowercase n-grams (bare and "▁"-started)."""
    chars = ASCII
    return _distinct([SPACE], chars, [SPACE + c for c in chars], [SPACE + x for x in WORDS],
                     SUFFIXES, (p for g in _lower_ngrams() for p in (g, SPACE + g)))


def unigram_scores(n):
    """Log-probabilities falling with rank, from -3 to about -10: a whole word (one piece) beats
    spelling it out in characters, as in a trained model."""
    return [-3.0 - 7.0 * i / max(1, n - 1) for i in range(n)]


def _add_unigram(w, tokens, scores, types):
    """The unigram keys every sentencepiece-unigram family gets from the converter (t5 and
    xlm-roberta): add_dummy_prefix and remove_extra_whitespaces as sentencepiece sets them."""
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(True)


T5_PAD, T5_EOS, T5_UNK = 0, 1, 2
T5_N_UNUSED = 4     # the "[PADn]" tokens past the sentencepiece model, up to config's vocab_size


def add_t5(w, n_vocab):
    """flan-t5's keys: no BOS; </s> appended by tokenizer.json's TemplateProcessing "$A </s>" (and
    "$A </s> $B </s>": no separator beyond it); the decoder starts from <pad> (the arch's
    decoder_start_token_id, written by the model builder)."""
    n_text = n_vocab - 3 - T5_N_UNUSED
    pieces = _take("T5 vocabulary", unigram_pieces(), n_text)
    tokens = ["<pad>", "</s>", "<unk>"] + pieces
    tokens += ["[PAD%d]" % i for i in range(len(tokens), n_vocab)]
    scores = [0.0, 0.0, 0.0] + unigram_scores(n_text) + [-10000.0] * T5_N_UNUSED
    types = [int(TT.CONTROL), int(TT.CONTROL), int(TT.UNKNOWN)] + [int(TT.NORMAL)] * n_text + \
        [int(TT.UNUSED)] * T5_N_UNUSED
    _add_unigram(w, tokens, scores, types)
    w.add_remove_extra_whitespaces(True)
    w.add_eos_token_id(T5_EOS)
    w.add_unk_token_id(T5_UNK)
    w.add_pad_token_id(T5_PAD)
    w.add_add_eos_token(True)
    w.add_add_sep_token(False)


VOCAB_T5 = Vocab("t5", 3 + T5_N_UNUSED + 1 + 2 * len(ASCII), add_t5)

XLMR_BOS, XLMR_PAD, XLMR_EOS, XLMR_UNK = 0, 1, 2, 3


def add_xlmr(w, n_vocab):
    """bge-reranker's keys (XLMRobertaForSequenceClassification): RobertaProcessing adds <s> and
    </s> around a text and </s></s> between query and document (add_bos, add_eos and add_sep all
    true); <s> is the CLS token RANK pooling reads, </s> the separator. One token type."""
    n_text = n_vocab - 5
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + _take("XLM-R vocabulary", unigram_pieces(), n_text) + \
        ["<mask>"]
    scores = [0.0] * 4 + unigram_scores(n_text) + [0.0]
    types = [int(TT.CONTROL)] * 3 + [int(TT.UNKNOWN)] + [int(TT.NORMAL)] * n_text + [int(TT.CONTROL)]
    _add_unigram(w, tokens, scores, types)
    w.add_token_type_count(1)
    w.add_remove_extra_whitespaces(True)
    w.add_bos_token_id(XLMR_BOS)
    w.add_eos_token_id(XLMR_EOS)
    w.add_unk_token_id(XLMR_UNK)
    w.add_sep_token_id(XLMR_EOS)
    w.add_pad_token_id(XLMR_PAD)
    w.add_mask_token_id(n_vocab - 1)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_sep_token(True)


VOCAB_XLMR = Vocab("xlm-roberta", 5 + 1 + 2 * len(ASCII), add_xlmr)


# --- byte-level BPE (Qwen2 / Qwen3) ---------------------------------------------------------------

def byte_symbols():
    """GPT-2's byte-level alphabet: byte b's symbol, in the order its vocabularies list them (the
    printable bytes as themselves, then the others mapped to U+0100 and up)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]   # in bs order: the vocabulary's first 256 tokens


QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
G = "\u0120"    # the byte-level symbol of " " ("Ġ")


def bpe_merges():
    """Merges, best first: for each word " word" then "word", one merge per character (" w" + "o",
    " wo" + "r", ...), so a word after a space always merges whole (no other merge has a
    space-started left side); then every lowercase letter pair. Yields (left, right) pairs."""
    def chains(prefix):
        for word in WORDS:
            s = prefix + word
            for i in range(2, len(s) + 1):
                yield (s[:i - 1], s[i - 1])
    pairs = [(a, b) for a in LOWER for b in LOWER]
    return _distinct(chains(G), chains(""), pairs)


def add_qwen2(w, n_vocab):
    """Qwen3-Embedding's keys: tokenizer.json's TemplateProcessing "$A <|endoftext|>" makes
    <|endoftext|> the EOS and appends it (and <|im_end|>, tokenizer_config's eos, the EOT);
    config.json's bos_token_id is <|endoftext|> too, never added; <|endoftext|> pads."""
    n_merges = n_vocab - 256 - len(QWEN_SPECIALS)
    merges = _take("BPE vocabulary", bpe_merges(), n_merges)
    tokens = byte_symbols() + [a + b for a, b in merges] + list(QWEN_SPECIALS)
    types = [int(TT.NORMAL)] * (256 + n_merges) + [int(TT.CONTROL)] * len(QWEN_SPECIALS)
    eot = 256 + n_merges
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["%s %s" % m for m in merges])
    w.add_eos_token_id(eot)
    w.add_pad_token_id(eot)
    w.add_eot_token_id(eot + 2)
    w.add_bos_token_id(eot)
    w.add_add_bos_token(False)
    w.add_add_eos_token(True)


VOCAB_QWEN2 = Vocab("qwen2", 256 + len(QWEN_SPECIALS) + 1, add_qwen2,
              max_vocab=256 + sum(1 for _ in bpe_merges()) + len(QWEN_SPECIALS))


# --- encoder-only embedding models (BERT family): bidirectional attention, post-norm layers -------
#
# llama.cpp runs them without a KV cache (llama_model_has_encoder is false; llama_decode computes
# the whole batch, its pooled or per-token embeddings out): a sequence must fit in one ubatch.

def layer_norm(t, tensor, bid, n=None):
    """A LayerNorm (weight and bias), as BERT-family models have every norm."""
    t.add(tensor, bid, t.ones(n))
    t.add(tensor, bid, t.zeros(t.n_embd if n is None else n), ".bias")


def bias(t, n):
    """A linear layer's bias: small, f32 (real BERT-family projections have them)."""
    return t.f32((n,), 0.02)


def bert_input(t, cfg, n_types, positions):
    """Token embeddings, the token-type embeddings (llama.cpp adds type 0's row), learned absolute
    positions (BERT) or none (rotary or ALiBi models), then the embedding LayerNorm."""
    n_embd, n_vocab = cfg["n_embd"], cfg["n_vocab"]
    t.add(T.TOKEN_EMBD, None, t.mat(n_vocab, n_embd, 1.0))
    t.add(T.TOKEN_TYPES, None, t.mat(n_types, n_embd, 1.0))
    if positions:
        t.add(T.POS_EMBD, None, t.mat(cfg["n_ctx_train"], n_embd, 1.0))
    layer_norm(t, T.TOKEN_EMBD_NORM, None)


def encoder_keys(w, cfg, eps, pooling):
    """What the converter writes for every BERT-family encoder besides the common keys: non-causal
    attention and the sentence-transformers pooling (none where the model has no Pooling module)."""
    w.add_feed_forward_length(cfg["n_ff"])
    w.add_head_count(cfg["n_head"])
    w.add_layer_norm_eps(eps)
    w.add_causal_attention(False)
    if pooling is not None:
        w.add_pooling_type(pooling)


def bert_layers(t, cfg):
    """BERT's post-norm layers: q, k, v, output with biases, LayerNorm after the attention's
    residual add, GELU FFN (up, down, biases), LayerNorm after the FFN's residual add."""
    n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
    for b in range(cfg["n_layer"]):
        for tq in (T.ATTN_Q, T.ATTN_K, T.ATTN_V):
            t.add(tq, b, t.mat(n_embd, n_embd, unit(n_embd)))
            t.add(tq, b, bias(t, n_embd), ".bias")
        t.add(T.ATTN_OUT, b, t.mat(n_embd, n_embd, unit(n_embd)))
        t.add(T.ATTN_OUT, b, bias(t, n_embd), ".bias")
        layer_norm(t, T.ATTN_OUT_NORM, b)
        t.add(T.FFN_UP, b, t.mat(n_ff, n_embd, unit(n_embd)))
        t.add(T.FFN_UP, b, bias(t, n_ff), ".bias")
        t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, unit(n_ff)))
        t.add(T.FFN_DOWN, b, bias(t, n_embd), ".bias")
        layer_norm(t, T.LAYER_OUT_NORM, b)


def bert(w, t, cfg):
    """BERT as a BertModel sentence-transformers checkpoint converts (bge-small-en-v1.5,
    all-MiniLM-L6-v2): learned positions, two token types, q/k/v separate, and the pooling of its
    Pooling module, here MEAN (all-MiniLM's; bge's is CLS). The converter drops the pooler (dense +
    tanh on [CLS]), as for every BertModel."""
    encoder_keys(w, cfg, 1e-12, gguf.PoolingType.MEAN)
    bert_input(t, cfg, n_types=2, positions=True)
    bert_layers(t, cfg)


# XLMRobertaForSequenceClassification's config: one label, which the converter keeps
RERANK_LABELS = ["LABEL_0"]


def bert_rerank(w, t, cfg):
    """A cross-encoder reranker as bge-reranker-base / bge-reranker-v2-m3
    (XLMRobertaForSequenceClassification) convert: arch bert with XLM-R's layers (as BERT, one
    token type, positions past XLM-R's two reserved rows), then the classification head on the
    first token: cls (dense, then tanh) and cls.output (one score), both with biases; the one label
    as classifier.output_labels. The converter writes no pooling type for it (the model has no
    sentence-transformers Pooling module): the caller asks for LLAMA_POOLING_TYPE_RANK (llama-server
    --rerank, llama-embedding --pooling rank), and llama_get_embeddings_seq then holds the score."""
    n_embd = cfg["n_embd"]
    encoder_keys(w, cfg, 1e-5, None)
    w.add_classifier_output_labels(RERANK_LABELS)
    bert_input(t, cfg, n_types=1, positions=True)
    bert_layers(t, cfg)
    t.add(T.CLS, None, t.mat(n_embd, n_embd, unit(n_embd)))
    t.add(T.CLS, None, bias(t, n_embd), ".bias")
    # the score: a sum of n_embd tanh outputs, a few units either way like a trained reranker's logit
    t.add(T.CLS_OUT, None, t.mat(len(RERANK_LABELS), n_embd, 1.0))
    t.add(T.CLS_OUT, None, bias(t, len(RERANK_LABELS)), ".bias")


def nomic_bert(w, t, cfg):
    """nomic-embed-text-v1.5: BERT's post-norm layers without any projection bias, fused qkv,
    rotary positions (base 1000) instead of learned ones, SwiGLU FFN (up, gate, down); MEAN
    pooling."""
    n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
    encoder_keys(w, cfg, 1e-12, gguf.PoolingType.MEAN)
    w.add_rope_freq_base(1000.0)
    bert_input(t, cfg, n_types=2, positions=False)
    for b in range(cfg["n_layer"]):
        t.add(T.ATTN_QKV, b, t.mat(3 * n_embd, n_embd, unit(n_embd)))
        t.add(T.ATTN_OUT, b, t.mat(n_embd, n_embd, unit(n_embd)))
        layer_norm(t, T.ATTN_OUT_NORM, b)
        t.add(T.FFN_UP, b, t.mat(n_ff, n_embd, unit(n_embd)))
        t.add(T.FFN_GATE, b, t.mat(n_ff, n_embd, unit(n_embd)))
        t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, unit(n_ff)))
        layer_norm(t, T.LAYER_OUT_NORM, b)


def jina_bert_v2(w, t, cfg):
    """jina-embeddings-v2 (small/base-en): BERT's post-norm layers with ALiBi instead of positions
    (llama.cpp sets the ALiBi bias itself; the file has no key for it), q/k/v with biases, GeGLU
    FFN from one fused up-and-gate matrix (mlp.gated_layers, 2 n_ff rows, no bias; llama.cpp tells
    it by its height) and a down projection with bias; MEAN pooling."""
    n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
    encoder_keys(w, cfg, 1e-12, gguf.PoolingType.MEAN)
    bert_input(t, cfg, n_types=2, positions=False)
    for b in range(cfg["n_layer"]):
        for tq in (T.ATTN_Q, T.ATTN_K, T.ATTN_V):
            t.add(tq, b, t.mat(n_embd, n_embd, unit(n_embd)))
            t.add(tq, b, bias(t, n_embd), ".bias")
        t.add(T.ATTN_OUT, b, t.mat(n_embd, n_embd, unit(n_embd)))
        t.add(T.ATTN_OUT, b, bias(t, n_embd), ".bias")
        layer_norm(t, T.ATTN_OUT_NORM, b)
        t.add(T.FFN_UP, b, t.mat(2 * n_ff, n_embd, unit(n_embd)))
        t.add(T.FFN_DOWN, b, t.mat(n_embd, n_ff, unit(n_ff)))
        t.add(T.FFN_DOWN, b, bias(t, n_embd), ".bias")
        layer_norm(t, T.LAYER_OUT_NORM, b)


# --- qwen3-embedding (a causal decoder whose last token's hidden state is the embedding) --------

def qwen3_embedding(w, t, cfg):
    """Qwen3-Embedding as the converter writes it (arch qwen3): Qwen3's layers (GQA with q/k norms,
    SwiGLU), LAST pooling from its sentence-transformers config, tied embeddings (no output
    matrix: llama.cpp reuses token_embd). The attention stays causal and uses the KV cache like any
    decoder; the tokenizer appends <|endoftext|>, whose hidden state LAST pooling returns."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    n_head, n_head_kv = cfg["n_head"], cfg["n_head_kv"]
    head_dim = n_embd // n_head
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_pooling_type(gguf.PoolingType.LAST)

    std_out = unit(n_embd) / np.sqrt(2.0 * n_layer)
    t.add(T.TOKEN_EMBD, None, t.mat(cfg["n_vocab"], n_embd, 1.0))
    for b in range(n_layer):
        t.add(T.ATTN_NORM, b, t.ones())
        gqa_attention(t, b, cfg, std_out, qk_norm=True)
        t.add(T.FFN_NORM, b, t.ones())
        gated_ffn(t, b, cfg, unit(n_ff) / np.sqrt(2.0 * n_layer))
    t.add(T.OUTPUT_NORM, None, t.ones())


# --- t5 / t5encoder (flan-t5: relative position buckets, RMS norms, gated-GELU FFN) --------------

T5_REL_BUCKETS = 32
T5_DECODER_START = 0    # <pad>, as every T5 config has decoder_start_token_id


def t5_keys(w, cfg):
    """The converter's T5 keys (T5Model and T5EncoderModel alike): d_kv as key/value length, the
    layer-norm epsilon as both norm epsilons, the relative-attention bucket count."""
    head_dim = cfg["n_embd"] // cfg["n_head"]
    w.add_feed_forward_length(cfg["n_ff"])
    w.add_head_count(cfg["n_head"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_eps(1e-6)
    w.add_relative_attn_buckets_count(T5_REL_BUCKETS)
    w.add_layer_norm_rms_eps(1e-6)


def t5_attention(t, b, cfg, q, k, v, o, rel_b, std_out):
    """One T5 attention: no biases and no 1/sqrt(d_kv) in the graph (T5 folds it into q's init,
    and so does this), the relative position bias (buckets x heads) in the first layer only: the
    others reuse it, as llama.cpp's graph does when a layer has none."""
    n_embd, n_head = cfg["n_embd"], cfg["n_head"]
    head_dim = n_embd // n_head
    t.add(q, b, t.mat(n_embd, n_embd, unit(n_embd) * unit(head_dim)))
    t.add(k, b, t.mat(n_embd, n_embd, unit(n_embd)))
    t.add(v, b, t.mat(n_embd, n_embd, unit(n_embd)))
    t.add(o, b, t.mat(n_embd, n_embd, std_out))
    if rel_b is not None and b == 0:
        t.add(rel_b, b, t.f32((T5_REL_BUCKETS, n_head), 0.5))


def t5_ffn(t, b, cfg, gate, up, down, std_out):
    """flan-t5's gated-GELU FFN: wi_0 (gate), wi_1 (up), wo (down). (t5 v1.0 has ReLU and wi alone;
    llama.cpp picks the activation by whether the gate is there.)"""
    n_embd, n_ff = cfg["n_embd"], cfg["n_ff"]
    t.add(gate, b, t.mat(n_ff, n_embd, unit(n_embd)))
    t.add(up, b, t.mat(n_ff, n_embd, unit(n_embd)))
    t.add(down, b, t.mat(n_embd, n_ff, std_out))


def t5_encoder(t, cfg):
    n_layer = cfg["n_layer"]
    std_out = unit(cfg["n_embd"]) / np.sqrt(2.0 * n_layer)
    for b in range(n_layer):
        t.add(T.ENC_ATTN_NORM, b, t.ones())
        t5_attention(t, b, cfg, T.ENC_ATTN_Q, T.ENC_ATTN_K, T.ENC_ATTN_V, T.ENC_ATTN_OUT,
                     T.ENC_ATTN_REL_B, std_out)
        t.add(T.ENC_FFN_NORM, b, t.ones())
        t5_ffn(t, b, cfg, T.ENC_FFN_GATE, T.ENC_FFN_UP, T.ENC_FFN_DOWN,
               unit(cfg["n_ff"]) / np.sqrt(2.0 * n_layer))
    t.add(T.ENC_OUTPUT_NORM, None, t.ones())


def t5(w, t, cfg):
    """flan-t5 (T5ForConditionalGeneration): n_layer encoder layers (bidirectional self-attention,
    FFN) and as many decoder layers (causal self-attention, cross-attention on the encoder's
    output, FFN), RMS norms before each part, shared token embeddings, an untied lm_head. llama.cpp
    runs the encoder in llama_encode and the decoder in llama_decode, which starts from
    decoder_start_token_id."""
    n_embd, n_layer, n_ff = cfg["n_embd"], cfg["n_layer"], cfg["n_ff"]
    t5_keys(w, cfg)
    w.add_decoder_block_count(n_layer)
    w.add_decoder_start_token_id(T5_DECODER_START)

    # self-attention, cross-attention and FFN all write into the decoder's residual stream
    std_dec = unit(n_embd) / np.sqrt(3.0 * n_layer)
    t.add(T.TOKEN_EMBD, None, t.mat(cfg["n_vocab"], n_embd, 1.0))
    t5_encoder(t, cfg)
    for b in range(n_layer):
        t.add(T.DEC_ATTN_NORM, b, t.ones())
        t5_attention(t, b, cfg, T.DEC_ATTN_Q, T.DEC_ATTN_K, T.DEC_ATTN_V, T.DEC_ATTN_OUT,
                     T.DEC_ATTN_REL_B, std_dec)
        t.add(T.DEC_CROSS_ATTN_NORM, b, t.ones())
        t5_attention(t, b, cfg, T.DEC_CROSS_ATTN_Q, T.DEC_CROSS_ATTN_K, T.DEC_CROSS_ATTN_V,
                     T.DEC_CROSS_ATTN_OUT, None, std_dec)   # cross-attention has no position bias
        t.add(T.DEC_FFN_NORM, b, t.ones())
        t5_ffn(t, b, cfg, T.DEC_FFN_GATE, T.DEC_FFN_UP, T.DEC_FFN_DOWN,
               unit(n_ff) / np.sqrt(3.0 * n_layer))
    t.add(T.DEC_OUTPUT_NORM, None, t.ones())
    t.add(T.OUTPUT, None, t.mat(cfg["n_vocab"], n_embd, unit(n_embd)))


def t5encoder(w, t, cfg):
    """A T5 encoder alone (T5EncoderModel, as sentence-t5 converts): t5's encoder layers, no
    decoder, no lm_head. The converter writes no pooling type for it (sentence-t5's MEAN pooling
    and its Dense projection are dropped): ask for the pooling, llama_encode computes it."""
    t5_keys(w, cfg)
    t.add(T.TOKEN_EMBD, None, t.mat(cfg["n_vocab"], cfg["n_embd"], 1.0))
    t5_encoder(t, cfg)


# Per architecture: the gguf arch, the builder, the config keys it reads beyond COMMON, presets, and
# the vocabulary (the VOCAB_ ones above) where it is not make_model.py's SPM one.
ARCHS = {
    "llama": dict(
        arch=gguf.MODEL_ARCH.LLAMA, build=llama, keys=("n_ff", "n_head", "n_head_kv"),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_vocab=4096, type="f16"),
        }),
    "mamba": dict(
        arch=gguf.MODEL_ARCH.MAMBA, build=mamba, keys=("d_state",),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, d_state=16, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, d_state=16, n_vocab=4096, type="f16"),
        }),
    "mamba2": dict(
        arch=gguf.MODEL_ARCH.MAMBA2, build=mamba2, keys=("d_state",),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, d_state=32, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=12, d_state=64, n_vocab=4096, type="f16"),
            "real": dict(n_embd=1024, n_layer=48, d_state=128, n_vocab=4096, type="f16"),
        }),
    "lfm2": dict(
        arch=gguf.MODEL_ARCH.LFM2, build=lfm2, keys=("n_ff", "n_head", "n_head_kv", "attn_every"),
        presets={
            "tiny": dict(n_embd=64, n_layer=4, n_ff=128, n_head=4, n_head_kv=2, attn_every=2,
                         n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_head_kv=4, attn_every=2,
                          n_vocab=4096, type="f16"),
        }),
    "qwen35": dict(
        arch=gguf.MODEL_ARCH.QWEN35, build=qwen35,
        keys=("n_ff", "n_head", "n_head_kv", "d_state", "attn_every"),
        presets={
            "tiny": dict(n_embd=64, n_layer=4, n_ff=128, n_head=4, n_head_kv=2, d_state=16,
                         attn_every=2, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_head_kv=4, d_state=64,
                          attn_every=4, n_vocab=4096, type="f16"),
            "real": dict(n_embd=1024, n_layer=24, n_ff=3072, n_head=16, n_head_kv=8, d_state=128,
                         attn_every=4, n_vocab=4096, type="f16"),
        }),
    "qwen2vl": dict(
        arch=gguf.MODEL_ARCH.QWEN2VL, build=qwen2vl, keys=("n_ff", "n_head", "n_head_kv"),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_head_kv=4, n_vocab=4096, type="f16"),
        }),
    "qwen3vl": dict(
        arch=gguf.MODEL_ARCH.QWEN3VL, build=qwen3vl, keys=("n_ff", "n_head", "n_head_kv", "deepstack"),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2, deepstack=1, n_vocab=512,
                         type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_head_kv=4, deepstack=1, n_vocab=4096,
                          type="f16"),
        }),
    "gemma3": dict(
        arch=gguf.MODEL_ARCH.GEMMA3, build=gemma3,
        keys=("n_ff", "n_head", "n_head_kv", "n_swa", "attn_every"),
        presets={
            "tiny": dict(n_embd=64, n_layer=4, n_ff=128, n_head=4, n_head_kv=2, n_swa=32,
                         attn_every=2, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, n_head=8, n_head_kv=4, n_swa=32,
                          attn_every=4, n_vocab=4096, type="f16"),
        }),
    "granitehybrid": dict(
        arch=gguf.MODEL_ARCH.GRANITE_HYBRID, build=granitehybrid,
        keys=("n_ff", "n_head", "n_head_kv", "d_state", "attn_every"),
        presets={
            "tiny": dict(n_embd=64, n_layer=4, n_ff=128, n_head=4, n_head_kv=2, d_state=32,
                         attn_every=2, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1024, n_head=8, n_head_kv=4, d_state=64,
                          attn_every=4, n_vocab=4096, type="f16"),
        }),
    "nemotron_h": dict(
        arch=gguf.MODEL_ARCH.NEMOTRON_H, build=nemotron_h,
        keys=("n_ff", "n_head", "n_head_kv", "d_state", "attn_every"),
        presets={
            "tiny": dict(n_embd=64, n_layer=4, n_ff=128, n_head=4, n_head_kv=2, d_state=32,
                         attn_every=2, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=12, n_ff=1536, n_head=8, n_head_kv=4, d_state=64,
                          attn_every=3, n_vocab=4096, type="f16"),
        }),
    "falcon-h1": dict(
        arch=gguf.MODEL_ARCH.FALCON_H1, build=falcon_h1,
        keys=("n_ff", "n_head", "n_head_kv", "d_state"),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2, d_state=32,
                         n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=6, n_ff=1024, n_head=8, n_head_kv=2, d_state=64,
                          n_vocab=4096, type="f16"),
        }),
    "rwkv7": dict(
        arch=gguf.MODEL_ARCH.RWKV7, build=rwkv7, keys=("n_ff", "d_state"),
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, d_state=64, n_vocab=512, type="f32"),
            "bench": dict(n_embd=512, n_layer=8, n_ff=1536, d_state=64, n_vocab=4096, type="f16"),
        }),
    # Embedding, reranking and encoder-decoder models: the tokenizer their converter writes
    # (VOCAB_...), n_ctx_train their family's context length.
    "bert": dict(
        arch=gguf.MODEL_ARCH.BERT, build=bert, keys=("n_ff", "n_head"), vocab=VOCAB_WORDPIECE,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=512, type="f32"),
        }),
    "nomic-bert": dict(
        arch=gguf.MODEL_ARCH.NOMIC_BERT, build=nomic_bert, keys=("n_ff", "n_head"), vocab=VOCAB_WORDPIECE,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=2048, type="f32"),
        }),
    "jina-bert-v2": dict(
        arch=gguf.MODEL_ARCH.JINA_BERT_V2, build=jina_bert_v2, keys=("n_ff", "n_head"),
        vocab=VOCAB_WORDPIECE,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=8192, type="f32"),
        }),
    "bert-rerank": dict(
        arch=gguf.MODEL_ARCH.BERT, build=bert_rerank, keys=("n_ff", "n_head"), vocab=VOCAB_XLMR,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=512, type="f32"),
        }),
    "qwen3-embedding": dict(
        arch=gguf.MODEL_ARCH.QWEN3, build=qwen3_embedding, keys=("n_ff", "n_head", "n_head_kv"),
        vocab=VOCAB_QWEN2,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2, n_vocab=1024,
                         n_ctx_train=32768, type="f32"),
        }),
    "t5": dict(
        arch=gguf.MODEL_ARCH.T5, build=t5, keys=("n_ff", "n_head"), vocab=VOCAB_T5,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=512, type="f32"),
        }),
    "t5encoder": dict(
        arch=gguf.MODEL_ARCH.T5ENCODER, build=t5encoder, keys=("n_ff", "n_head"), vocab=VOCAB_T5,
        presets={
            "tiny": dict(n_embd=64, n_layer=2, n_ff=128, n_head=4, n_vocab=512, n_ctx_train=512, type="f32"),
        }),
}
