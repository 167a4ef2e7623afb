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


# Per architecture: the gguf arch, the builder, the config keys it reads beyond COMMON, presets.
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
}
