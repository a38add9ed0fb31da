#!/usr/bin/python3
"""Generates small Hugging Face model folders and their expected logits.

Models: llama (f32 weights), qwen3_moe (bf16), qwen3 (f16, tied embeddings)
and gemma (bf16, tied embeddings); llama_rope_llama3 and llama_rope_yarn are
the llama with the rope_scaling of Llama 3.1 (llama3) and of yarn.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/make_model_goldens.py
It rewrites tests/golden/models/<model>/:
  config.json, model.safetensors   a Hugging Face folder (written here, no transformers needed)
  tokens.npy                       the prompt (i64)
  logits.npy                       logits of a prefill of the whole prompt, [S, vocab] f32
  decode_logits.npy                logits of the last token decoded with the KV cache of a
                                   prefill of the others, [1, vocab] f32
  bf16_logits.npy, bf16_decode_logits.npy   llama and qwen3_moe only: the same, run as
                                   PyTorch serves the model in bf16 (weights rounded to bf16,
                                   Hugging Face's bf16 rounding points), stored as f32
deepseek_v3 (multi-head latent attention with yarn RoPE, 1 dense and 2 MoE
layers), llama4 (the Scout layout: every layer MoE, L2 q/k norm, a NoPE layer,
chunked attention with chunks shorter than the prompt, temperature tuning) and
llama4_maverick (MoE every second layer, dense layers with their own FFN, no
q/k norm) are folders of the same kind, and llama4_multimodal is the Scout
layout as Meta publishes Llama 4 (model_type llama4, text_config, tensors
under language_model., vision tensors, bf16);
and tests/golden/models/blocks/<block>/*.npy for the MoE blocks of
deepseek_v3 and llama4: the input `x`, the weights under Spool's graph names
(experts stacked) and the expected `out_y`.
The PyTorch models below follow Hugging Face's LlamaForCausalLM,
Qwen3MoeForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM,
DeepseekV3ForCausalLM (modeling_deepseek_v3.py) and Llama4ForCausalLM
(modeling_llama4.py) (eager attention, float32 compute) and are written
independently of Spool's builders. The files are committed; building and
testing Spool never runs Python. Keep the prompts in sync with
tests/cli/CMakeLists.txt.
"""

import json
import math
import os
import shutil
import struct

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
LLAMA_TOKENS = [1, 17, 42, 255, 3, 99, 128, 7]
QWEN3_MOE_TOKENS = [5, 200, 31, 64, 9, 150, 2, 77]
QWEN3_TOKENS = [12, 0, 250, 33, 33, 101, 6]
GEMMA_TOKENS = [2, 45, 190, 7, 88, 13]
DEEPSEEK_V3_TOKENS = [3, 77, 140, 9, 201, 64, 18, 250]
LLAMA4_TOKENS = [4, 160, 33, 97, 210, 12, 58, 131]
LLAMA4_MAVERICK_TOKENS = [250, 6, 71, 128, 19, 203, 44, 90]


# ---- files -------------------------------------------------------------------

def write_safetensors(path, tensors, dtype):
    """The safetensors format: u64 header length, JSON header, raw data."""
    names = sorted(tensors)
    header, chunks, offset = {}, [], 0
    for name in names:
        t = tensors[name].detach().contiguous()
        if dtype == "BF16":
            data = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        elif dtype == "F16":
            data = t.to(torch.float16).numpy().astype("<f2").tobytes()
        else:
            data = t.to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def stored(tensors, dtype):
    """The values the file holds, as float32 (what a reader gets back)."""
    if dtype == "BF16":
        return {k: v.to(torch.bfloat16).float() for k, v in tensors.items()}
    if dtype == "F16":
        return {k: v.to(torch.float16).float() for k, v in tensors.items()}
    return {k: v.float() for k, v in tensors.items()}


def save_folder(name, config, weights, dtype, tokens, logits, decode_logits, shards=1):
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), weights, dtype)
    else:  # as large checkpoints are published: shards and model.safetensors.index.json
        names, weight_map = sorted(weights), {}
        for i in range(shards):
            file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: weights[n] for n in names[i::shards]}
            write_safetensors(os.path.join(folder, file), part, dtype)
            weight_map.update({n: file for n in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
            f.write("\n")
    np.save(os.path.join(folder, "tokens.npy"), np.array(tokens, dtype=np.int64))
    np.save(os.path.join(folder, "logits.npy"), logits.numpy().astype(np.float32))
    np.save(os.path.join(folder, "decode_logits.npy"), decode_logits.numpy().astype(np.float32))


# ---- layers, as Hugging Face computes them ---------------------------------------

def rms_norm(x, w, eps, unit_offset=False):
    """LlamaRMSNorm, or GemmaRMSNorm (weight 1 + w) with unit_offset."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * (1.0 + w.float())).to(x.dtype) if unit_offset else w * normed.to(x.dtype)


def llama3_inv_freq(inv_freq, rs):
    """transformers' _compute_llama3_parameters."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def yarn_inv_freq(dim, base, rs):
    """transformers' _compute_yarn_parameters: the inverse frequencies and the attention factor."""
    factor, original = rs["factor"], rs["original_max_position_embeddings"]

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        if rs.get("mscale") and rs.get("mscale_all_dim"):
            attention_factor = get_mscale(factor, rs["mscale"]) / get_mscale(factor, rs["mscale_all_dim"])
        else:
            attention_factor = get_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = math.floor(correction_dim(beta_fast)), math.ceil(correction_dim(beta_slow))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation_factor = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (1.0 / pos_freqs) * extrapolation_factor
    return inv_freq, attention_factor


def rope_cos_sin(positions, dim, theta, rope_scaling=None):
    """LlamaRotaryEmbedding with the rope_scaling types Spool reads (none, llama3, yarn)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    scale = 1.0
    kind = None if rope_scaling is None else rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind == "llama3":
        inv_freq = llama3_inv_freq(inv_freq, rope_scaling)
    elif kind == "yarn":
        inv_freq, scale = yarn_inv_freq(dim, theta, rope_scaling)
    elif rope_scaling is not None:
        raise ValueError(rope_scaling)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * scale, emb.sin() * scale


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(cfg, w, prefix, h, cos, sin, past, qk_norm):
    """HF LlamaAttention / Qwen3MoeAttention (eager) on h [S, hidden]; past is (k, v) or None."""
    s, d = h.shape[0], cfg["head_dim"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    q = F.linear(h, w[prefix + "q_proj.weight"]).view(s, heads, d)
    k = F.linear(h, w[prefix + "k_proj.weight"]).view(s, kv_heads, d)
    v = F.linear(h, w[prefix + "v_proj.weight"]).view(s, kv_heads, d)
    if qk_norm:
        q = rms_norm(q, w[prefix + "q_norm.weight"], cfg["rms_norm_eps"])
        k = rms_norm(k, w[prefix + "k_norm.weight"], cfg["rms_norm_eps"])
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    if past is not None:
        k = torch.cat((past[0], k), dim=1)
        v = torch.cat((past[1], v), dim=1)
    present = (k, v)
    group = heads // kv_heads
    kr, vr = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)  # repeat_kv
    t = kr.shape[1]
    scores = torch.matmul(q, kr.transpose(1, 2)) / math.sqrt(d)
    mask = torch.ones(s, t, dtype=torch.bool).triu(diagonal=t - s + 1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    out = torch.matmul(probs, vr).transpose(0, 1).reshape(s, heads * d)
    return F.linear(out, w[prefix + "o_proj.weight"]), present


def mlp(w, prefix, x, gelu=False):
    gate = F.linear(x, w[prefix + "gate_proj.weight"])
    act = F.gelu(gate, approximate="tanh") if gelu else F.silu(gate)
    return F.linear(act * F.linear(x, w[prefix + "up_proj.weight"]), w[prefix + "down_proj.weight"])


def qwen3_moe_block(cfg, w, prefix, x):
    """HF Qwen3MoeSparseMoeBlock: softmax, top-k, renormalise, loop over the hit experts with index_add_."""
    router_logits = F.linear(x, w[prefix + "gate.weight"])
    routing = torch.softmax(router_logits, dim=1, dtype=torch.float)
    routing, selected = torch.topk(routing, cfg["num_experts_per_tok"], dim=-1)
    if cfg["norm_topk_prob"]:
        routing = routing / routing.sum(dim=-1, keepdim=True)
    routing = routing.to(x.dtype)
    out = torch.zeros_like(x)
    mask = F.one_hot(selected, num_classes=cfg["num_experts"]).permute(2, 1, 0)  # [E, k, T]
    for e in range(cfg["num_experts"]):
        idx, top_x = torch.where(mask[e])
        if top_x.numel() == 0:
            continue
        y = mlp(w, f"{prefix}experts.{e}.", x[top_x]) * routing[top_x, idx, None]
        out.index_add_(0, top_x, y)
    return out, selected, torch.softmax(router_logits, dim=1)


def forward(cfg, w, tokens, past, kind):
    """Logits [S, vocab] and the new cache for `tokens` after `past` (a list of (k, v) or None)."""
    tokens = torch.tensor(tokens, dtype=torch.int64)
    start = 0 if past is None else past[0][0].shape[1]
    cos, sin = rope_cos_sin(torch.arange(start, start + len(tokens)), cfg["head_dim"], cfg["rope_theta"],
                            cfg.get("rope_scaling"))
    gemma = kind == "gemma"
    x = F.embedding(tokens, w["model.embed_tokens.weight"])
    if gemma:  # GemmaModel: the normalizer is sqrt(hidden) in the activations' dtype
        x = x * torch.tensor(cfg["hidden_size"] ** 0.5, dtype=x.dtype)
    eps = cfg["rms_norm_eps"]
    presents, routers = [], []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps, gemma)
        a, present = attention(cfg, w, p + "self_attn.", h, cos, sin, None if past is None else past[i],
                               qk_norm=kind in ("qwen3", "qwen3_moe"))
        presents.append(present)
        x = x + a
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps, gemma)
        if kind == "qwen3_moe":
            m, selected, probs = qwen3_moe_block(cfg, w, p + "mlp.", h)
            routers.append(probs)
            x = x + m
        else:
            x = x + mlp(w, p + "mlp.", h, gelu=gemma)
    x = rms_norm(x, w["model.norm.weight"], eps, gemma)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return F.linear(x, head), presents, routers


def check_routing_margins(cfg, routers, what):
    """The top-k choice must not hinge on float rounding: the k-th and (k+1)-th probabilities differ clearly."""
    k = cfg.get("num_experts_per_tok")
    for probs in routers:
        top = torch.topk(probs, k + 1, dim=-1).values
        margin = (top[:, k - 1] - top[:, k]).min().item()
        assert margin > 1e-4, f"{what}: routing margin {margin} is too small; change the seed or tokens"


# ---- the two models ----------------------------------------------------------------

def init_weights(names_shapes, seed):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in names_shapes:
        if len(shape) == 1:  # norms
            w[name] = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            w[name] = torch.randn(shape, generator=g) / math.sqrt(shape[-1])
    return w


def llama_case():
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "rope_scaling": None,
        "max_position_embeddings": 128, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    h, f, d, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"], cfg["vocab_size"]
    hq, hkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    shapes = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                   (p + "self_attn.q_proj.weight", (hq, h)), (p + "self_attn.k_proj.weight", (hkv, h)),
                   (p + "self_attn.v_proj.weight", (hkv, h)), (p + "self_attn.o_proj.weight", (h, hq)),
                   (p + "mlp.gate_proj.weight", (f, h)), (p + "mlp.up_proj.weight", (f, h)),
                   (p + "mlp.down_proj.weight", (h, f))]
    return cfg, init_weights(shapes, 1234), "F32"


def llama_rope_llama3_case():
    """The llama with Llama 3.1's RoPE scaling over a short original context, so that
    the prompt's positions meet scaled low and blended medium frequencies."""
    cfg, w, dtype = llama_case()
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 16}
    return cfg, w, dtype


def llama_rope_yarn_case():
    """The llama with yarn scaling (interpolated high dimensions, attention factor from mscale)."""
    cfg, w, dtype = llama_case()
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                           "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0}
    cfg["max_position_embeddings"] = 128  # = factor x original: every transformers version reads the same factor
    return cfg, w, dtype


def qwen3_moe_case():
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 8,
        "num_experts_per_tok": 2, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2,
        "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
        "attention_bias": False, "rope_scaling": None, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": 2, "output_router_logits": False, "router_aux_loss_coef": 0.001,
        "max_position_embeddings": 128, "torch_dtype": "bfloat16",
    }
    h, d, v = cfg["hidden_size"], cfg["head_dim"], cfg["vocab_size"]
    fm, e = cfg["moe_intermediate_size"], cfg["num_experts"]
    hq, hkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    shapes = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                   (p + "self_attn.q_proj.weight", (hq, h)), (p + "self_attn.k_proj.weight", (hkv, h)),
                   (p + "self_attn.v_proj.weight", (hkv, h)), (p + "self_attn.o_proj.weight", (h, hq)),
                   (p + "self_attn.q_norm.weight", (d,)), (p + "self_attn.k_norm.weight", (d,)),
                   (p + "mlp.gate.weight", (e, h))]
        for x in range(e):
            q = f"{p}mlp.experts.{x}."
            shapes += [(q + "gate_proj.weight", (fm, h)), (q + "up_proj.weight", (fm, h)),
                       (q + "down_proj.weight", (h, fm))]
    return cfg, init_weights(shapes, 5678), "BF16"


def dense_shapes(cfg, qk_norm):
    h, f, d, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"], cfg["vocab_size"]
    hq, hkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    shapes = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,))]
    if not cfg["tie_word_embeddings"]:
        shapes.append(("lm_head.weight", (v, h)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                   (p + "self_attn.q_proj.weight", (hq, h)), (p + "self_attn.k_proj.weight", (hkv, h)),
                   (p + "self_attn.v_proj.weight", (hkv, h)), (p + "self_attn.o_proj.weight", (h, hq)),
                   (p + "mlp.gate_proj.weight", (f, h)), (p + "mlp.up_proj.weight", (f, h)),
                   (p + "mlp.down_proj.weight", (h, f))]
        if qk_norm:
            shapes += [(p + "self_attn.q_norm.weight", (d,)), (p + "self_attn.k_norm.weight", (d,))]
    return shapes


def qwen3_case():
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "num_hidden_layers": 2, "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "attention_bias": False, "rope_scaling": None, "use_sliding_window": False,
        "sliding_window": None, "max_window_layers": 2, "max_position_embeddings": 128, "torch_dtype": "float16",
    }
    return cfg, init_weights(dense_shapes(cfg, qk_norm=True), 4321), "F16"


def gemma_case():
    cfg = {
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 2,
        "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": True,
        "attention_bias": False, "rope_scaling": None, "max_position_embeddings": 128, "pad_token_id": 0,
        "torch_dtype": "bfloat16",
    }
    weights = init_weights(dense_shapes(cfg, qk_norm=False), 8765)
    for name in weights:  # Gemma's norm weights are offsets from 1
        if weights[name].dim() == 1:
            weights[name] = weights[name] - 1.0
    return cfg, weights, "BF16"


# ---- DeepSeek-V3 (modeling_deepseek_v3.py) ---------------------------------------------

def deepseek_route(scores, bias, n_group, topk_group, k, norm_topk_prob, scaling):
    """HF DeepseekV3TopkRouter's choice from sigmoid scores [T, E]: bias-corrected group-limited
    top-k, weights from the uncorrected scores, renormalised (norm_topk_prob) and scaled. Returns the
    experts [T, k], their weights, and the smallest margins of the group and the expert choices."""
    t, e = scores.shape
    choice = scores + bias
    group_scores = choice.view(t, n_group, e // n_group).topk(2, dim=-1)[0].sum(dim=-1)
    ranked = group_scores.sort(dim=-1, descending=True).values
    group_margin = (ranked[:, topk_group - 1] - ranked[:, topk_group]).min().item()
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(t, n_group, e // n_group).reshape(t, e)
    choice = choice.masked_fill(~score_mask.bool(), 0.0)
    ranked = choice.sort(dim=-1, descending=True).values
    expert_margin = (ranked[:, k - 1] - ranked[:, k]).min().item()
    topk_indices = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
    topk_weights = scores.gather(1, topk_indices)
    if norm_topk_prob:
        topk_weights = topk_weights / (topk_weights.sum(dim=-1, keepdim=True) + 1e-20)
    return topk_indices, topk_weights * scaling, group_margin, expert_margin


def routed_sum(x, topk_indices, topk_weights, e, expert):
    """The routed experts' outputs summed by index_add, as HF DeepseekV3MoE.moe does: expert(ex, rows)."""
    routed = torch.zeros_like(x)
    mask = F.one_hot(topk_indices, num_classes=e).permute(2, 0, 1)  # [E, T, k]
    for ex in range(e):
        tokens, slots = torch.where(mask[ex])
        if tokens.numel() == 0:
            continue
        routed.index_add_(0, tokens, expert(ex, x[tokens]) * topk_weights[tokens, slots, None].to(x.dtype))
    return routed


def deepseek_moe(cfg, w, prefix, x, margins):
    """HF DeepseekV3MoE: sigmoid scores, bias-corrected group-limited top-k, renormalised and scaled
    weights, routed experts by index_add, plus the shared experts. Records the choice margins."""
    e = cfg["n_routed_experts"]
    scores = F.linear(x.float(), w[prefix + "gate.weight"].float()).sigmoid()
    topk_indices, topk_weights, group_margin, expert_margin = deepseek_route(
        scores, w[prefix + "gate.e_score_correction_bias"], cfg["n_group"], cfg["topk_group"],
        cfg["num_experts_per_tok"], cfg["norm_topk_prob"], cfg["routed_scaling_factor"])
    margins += [group_margin, expert_margin]
    routed = routed_sum(x, topk_indices, topk_weights, e, lambda ex, rows: mlp(w, f"{prefix}experts.{ex}.", rows))
    return routed + mlp(w, prefix + "shared_experts.", x)


def deepseek_rms(x, weight, eps=1e-6):
    """DeepseekV3RMSNorm (its default eps, as the attention's latent norms use it)."""
    return rms_norm(x, weight, eps)


def deinterleave_rope(x, cos, sin):
    """apply_rotary_pos_emb_interleave: pairs (x[2i], x[2i+1]) regrouped as evens then odds, then rotate-half."""
    *lead, d = x.shape
    x = x.view(*lead, d // 2, 2).transpose(-1, -2).reshape(*lead, d)
    return x * cos + rotate_half(x) * sin


def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def deepseek_attention(cfg, w, prefix, h, cos, sin, past):
    """HF DeepseekV3Attention (eager): MLA with the keys and values expanded per head, as Hugging Face
    computes and caches them."""
    s, heads = h.shape[0], cfg["num_attention_heads"]
    dn, dr, dv, r = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    q = F.linear(deepseek_rms(F.linear(h, w[prefix + "q_a_proj.weight"]), w[prefix + "q_a_layernorm.weight"]),
                 w[prefix + "q_b_proj.weight"])
    q = q.view(s, heads, dn + dr).transpose(0, 1)
    q_pass, q_rot = torch.split(q, [dn, dr], dim=-1)
    compressed = F.linear(h, w[prefix + "kv_a_proj_with_mqa.weight"])
    k_pass, k_rot = torch.split(compressed, [r, dr], dim=-1)
    k_pass = F.linear(deepseek_rms(k_pass, w[prefix + "kv_a_layernorm.weight"]), w[prefix + "kv_b_proj.weight"])
    k_pass = k_pass.view(s, heads, dn + dv).transpose(0, 1)
    k_pass, v = torch.split(k_pass, [dn, dv], dim=-1)
    k_rot = k_rot.view(1, s, dr)
    q_rot, k_rot = deinterleave_rope(q_rot, cos, sin), deinterleave_rope(k_rot, cos, sin)
    k_rot = k_rot.expand(heads, s, dr)
    q = torch.cat((q_pass, q_rot), dim=-1)
    k = torch.cat((k_pass, k_rot), dim=-1)
    if past is not None:
        k = torch.cat((past[0], k), dim=1)
        v = torch.cat((past[1], v), dim=1)
    scaling = (dn + dr) ** -0.5
    rs = cfg.get("rope_scaling")
    if rs is not None and rs.get("mscale_all_dim", 0):
        mscale = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
        scaling = scaling * mscale * mscale
    t = k.shape[1]
    scores = torch.matmul(q, k.transpose(1, 2)) * scaling
    mask = torch.ones(s, t, dtype=torch.bool).triu(diagonal=t - s + 1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    out = torch.matmul(probs, v).transpose(0, 1).reshape(s, heads * dv)
    return F.linear(out, w[prefix + "o_proj.weight"]), (k, v)


def deepseek_forward(cfg, w, tokens, past, margins):
    tokens = torch.tensor(tokens, dtype=torch.int64)
    start = 0 if past is None else past[0][0].shape[1]
    cos, sin = rope_cos_sin(torch.arange(start, start + len(tokens)), cfg["qk_rope_head_dim"], cfg["rope_theta"],
                            cfg.get("rope_scaling"))
    x = F.embedding(tokens, w["model.embed_tokens.weight"])
    eps = cfg["rms_norm_eps"]
    presents = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a, present = deepseek_attention(cfg, w, p + "self_attn.", rms_norm(x, w[p + "input_layernorm.weight"], eps),
                                        cos, sin, None if past is None else past[i])
        presents.append(present)
        x = x + a
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        moe = i >= cfg["first_k_dense_replace"] and i % cfg["moe_layer_freq"] == 0
        x = x + (deepseek_moe(cfg, w, p + "mlp.", h, margins) if moe else mlp(w, p + "mlp.", h))
    x = rms_norm(x, w["model.norm.weight"], eps)
    return F.linear(x, w["lm_head.weight"]), presents


def deepseek_v3_case():
    cfg = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 48, "kv_lora_rank": 32,
        "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24, "head_dim": 8,
        "n_routed_experts": 16, "n_shared_experts": 1, "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "rope_interleave": True,
        "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "attention_bias": False, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                                                  "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                                                  "mscale_all_dim": 0.707},
        "max_position_embeddings": 128, "num_nextn_predict_layers": 1, "aux_loss_alpha": 0.001, "seq_aux": True,
        "ep_size": 1, "torch_dtype": "float32", "bos_token_id": 0, "eos_token_id": 1,
    }
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    heads, dn, dr, dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    qr, kr, e, fm = cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    shapes = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                   (a + "q_a_proj.weight", (qr, h)), (a + "q_a_layernorm.weight", (qr,)),
                   (a + "q_b_proj.weight", (heads * (dn + dr), qr)),
                   (a + "kv_a_proj_with_mqa.weight", (kr + dr, h)), (a + "kv_a_layernorm.weight", (kr,)),
                   (a + "kv_b_proj.weight", (heads * (dn + dv), kr)), (a + "o_proj.weight", (h, heads * dv))]
        if i < cfg["first_k_dense_replace"]:
            f = cfg["intermediate_size"]
            shapes += [(p + "mlp.gate_proj.weight", (f, h)), (p + "mlp.up_proj.weight", (f, h)),
                       (p + "mlp.down_proj.weight", (h, f))]
            continue
        shapes += [(p + "mlp.gate.weight", (e, h))]
        for q in [f"{p}mlp.experts.{x}." for x in range(e)] + [p + "mlp.shared_experts."]:
            shapes += [(q + "gate_proj.weight", (fm, h)), (q + "up_proj.weight", (fm, h)),
                       (q + "down_proj.weight", (h, fm))]
    w = init_weights(shapes, 2025)
    g = torch.Generator().manual_seed(2026)
    for i in range(cfg["first_k_dense_replace"], cfg["num_hidden_layers"]):
        # e_score_correction_bias: small and positive, so that the masked (0.0) experts never win.
        w[f"model.layers.{i}.mlp.gate.e_score_correction_bias"] = 0.05 * torch.rand(e, generator=g)
    # The multi-token-prediction layer (num_nextn_predict_layers 1) is in the checkpoint, and the causal LM
    # skips it: one of its tensors is enough to prove a reader ignores it.
    w[f"model.layers.{cfg['num_hidden_layers']}.eh_proj.weight"] = torch.randn(h, 2 * h, generator=g)
    return cfg, w


def make_deepseek_v3():
    cfg, weights = deepseek_v3_case()
    tokens = DEEPSEEK_V3_TOKENS
    w = stored(weights, "F32")
    margins = []
    logits, _ = deepseek_forward(cfg, w, tokens, None, margins)
    _, cache = deepseek_forward(cfg, w, tokens[:-1], None, margins)
    decode_logits, _ = deepseek_forward(cfg, w, tokens[-1:], cache, margins)
    assert min(margins) > 1e-4, f"deepseek_v3: routing margin {min(margins)} is too small; change the seed or tokens"
    gap = (decode_logits[0] - logits[-1]).abs().max().item()
    assert gap < 1e-4, f"deepseek_v3: decode with the cache differs from the prefill by {gap}"
    save_folder("deepseek_v3", cfg, weights, "F32", tokens, logits, decode_logits, shards=3)
    print(f"deepseek_v3: {len(weights)} tensors, logits {tuple(logits.shape)}, decode gap {gap:.2e}, "
          f"routing margin {min(margins):.3g}")


# ---- Llama 4 (modeling_llama4.py) ----------------------------------------------------------

def llama4_freqs(positions, dim, theta, rope_scaling):
    """Llama4TextRotaryEmbedding: the angles of each pair (llama3 scaling as Scout's config has it)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if rope_scaling is not None:
        assert rope_scaling["rope_type"] == "llama3", rope_scaling
        inv_freq = llama3_inv_freq(inv_freq, rope_scaling)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    return torch.polar(torch.ones_like(freqs), freqs)  # [S, dim/2] complex


def apply_rotary_emb(x, freqs_cis):
    """Interleaved pairs as complex numbers, in float32 (x [S, heads, D])."""
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis[:, None, :]).flatten(2).type_as(x)


def l2_norm(x, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)


def llama4_layer_lists(cfg):
    n = cfg["num_hidden_layers"]
    rope = cfg.get("no_rope_layers") or [int((i + 1) % cfg.get("no_rope_layer_interval", 4) != 0) for i in range(n)]
    step = cfg.get("interleave_moe_layer_step", 1)
    moe = cfg.get("moe_layers")
    moe = moe if moe is not None else list(range(step - 1, n, step))
    return rope, moe


def llama4_attention(cfg, w, prefix, h, freqs_cis, positions, past, use_rope):
    s, d = h.shape[0], cfg["head_dim"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    q = F.linear(h, w[prefix + "q_proj.weight"]).view(s, heads, d)
    k = F.linear(h, w[prefix + "k_proj.weight"]).view(s, kv_heads, d)
    v = F.linear(h, w[prefix + "v_proj.weight"]).view(s, kv_heads, d).transpose(0, 1)
    if use_rope:
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        if cfg["use_qk_norm"]:
            q, k = l2_norm(q, cfg["rms_norm_eps"]), l2_norm(k, cfg["rms_norm_eps"])
    elif cfg["attn_temperature_tuning"]:
        scales = torch.log1p(torch.floor((positions.float() + 1.0) / cfg["floor_scale"])) * cfg["attn_scale"] + 1.0
        q = (q * scales.view(s, 1, 1)).to(q.dtype)
    q, k = q.transpose(0, 1), k.transpose(0, 1)
    if past is not None:
        k = torch.cat((past[0], k), dim=1)
        v = torch.cat((past[1], v), dim=1)
    group = heads // kv_heads
    kr, vr = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
    t = kr.shape[1]
    scores = torch.matmul(q, kr.transpose(1, 2)) * d ** -0.5
    key_pos = torch.arange(t)[None, :]
    query_pos = positions[:, None]
    allowed = key_pos <= query_pos
    chunk = cfg.get("attention_chunk_size")
    if use_rope and chunk:  # layer_types: "chunked_attention" on RoPE layers
        allowed = allowed & (key_pos // chunk == query_pos // chunk)
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, vr).transpose(0, 1).reshape(s, heads * d)
    return F.linear(out, w[prefix + "o_proj.weight"]), (k, v)


def llama4_moe(cfg, w, prefix, x, margins):
    """HF Llama4TextMoe (see llama4_block)."""
    e, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    logits = F.linear(x, w[prefix + "router.weight"])
    ranked = logits.sort(dim=-1, descending=True).values
    margins.append((ranked[:, k - 1] - ranked[:, k]).min().item())
    top_value, top_index = torch.topk(logits, k, dim=1)
    scores = torch.full_like(logits, float("-inf")).scatter_(1, top_index, top_value).transpose(0, 1)
    scores = torch.sigmoid(scores.float()).to(x.dtype)
    routed_in = x.repeat(e, 1) * scores.reshape(-1, 1)
    gu = torch.bmm(routed_in.view(e, -1, x.shape[1]), w[prefix + "experts.gate_up_proj"])
    gate, up = gu.chunk(2, dim=-1)
    routed_out = torch.bmm(up * F.silu(gate), w[prefix + "experts.down_proj"])
    return mlp(w, prefix + "shared_expert.", x) + routed_out.reshape(e, -1, x.shape[1]).sum(dim=0)


def llama4_forward(cfg, w, tokens, past, margins, overrides=None):
    cfg = dict(cfg, **(overrides or {}))
    tokens = torch.tensor(tokens, dtype=torch.int64)
    start = 0 if past is None else past[0][0].shape[1]
    positions = torch.arange(start, start + len(tokens))
    freqs_cis = llama4_freqs(positions, cfg["head_dim"], cfg["rope_theta"], cfg.get("rope_scaling"))
    rope, moe = llama4_layer_lists(cfg)
    x = F.embedding(tokens, w["model.embed_tokens.weight"])
    eps = cfg["rms_norm_eps"]
    presents = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a, present = llama4_attention(cfg, w, p + "self_attn.", rms_norm(x, w[p + "input_layernorm.weight"], eps),
                                      freqs_cis, positions, None if past is None else past[i], bool(rope[i]))
        presents.append(present)
        x = x + a
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        f = p + "feed_forward."
        x = x + (llama4_moe(cfg, w, f, h, margins) if i in moe else mlp(w, f, h))
    x = rms_norm(x, w["model.norm.weight"], eps)
    return F.linear(x, w["lm_head.weight"]), presents


def llama4_config(**changes):
    cfg = {
        "architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "hidden_act": "silu",
        "hidden_size": 64, "intermediate_size": 32, "intermediate_size_mlp": 96, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "moe_layers": [0, 1, 2, 3],
        "no_rope_layers": [1, 1, 1, 0], "use_qk_norm": True, "attention_chunk_size": 3,
        "attn_temperature_tuning": True, "floor_scale": 2, "attn_scale": 0.1, "vocab_size": 256,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False, "attention_bias": False,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 16},
        "max_position_embeddings": 128, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0,
        "output_router_logits": False, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0,
    }
    cfg.update(changes)
    return cfg


def llama4_weights(cfg, seed):
    h, d, v = cfg["hidden_size"], cfg["head_dim"], cfg["vocab_size"]
    f, fd, e = cfg["intermediate_size"], cfg["intermediate_size_mlp"], cfg["num_local_experts"]
    hq, hkv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    _, moe = llama4_layer_lists(cfg)
    shapes = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                   (p + "self_attn.q_proj.weight", (hq, h)), (p + "self_attn.k_proj.weight", (hkv, h)),
                   (p + "self_attn.v_proj.weight", (hkv, h)), (p + "self_attn.o_proj.weight", (h, hq))]
        q = p + "feed_forward."
        if i in moe:
            shapes += [(q + "router.weight", (e, h)), (q + "shared_expert.gate_proj.weight", (f, h)),
                       (q + "shared_expert.up_proj.weight", (f, h)), (q + "shared_expert.down_proj.weight", (h, f))]
        else:
            shapes += [(q + "gate_proj.weight", (fd, h)), (q + "up_proj.weight", (fd, h)),
                       (q + "down_proj.weight", (h, fd))]
    w = init_weights(shapes, seed)
    g = torch.Generator().manual_seed(seed + 1)
    for i in moe:  # the fused experts: [E, hidden, 2 ffn] and [E, ffn, hidden]
        q = f"model.layers.{i}.feed_forward.experts."
        w[q + "gate_up_proj"] = torch.randn(e, h, 2 * f, generator=g) / math.sqrt(h)
        w[q + "down_proj"] = torch.randn(e, f, h, generator=g) / math.sqrt(f)
    return w


def make_llama4(name, cfg, seed, tokens, multimodal=False):
    """multimodal: the folder as Meta publishes Llama 4 (Llama4ForConditionalGeneration, model_type llama4):
    the text config under text_config, the text model's tensors under language_model., and vision tensors
    that the text model does not read; bf16 weights, as published."""
    weights = llama4_weights(cfg, seed)
    dtype = "BF16" if multimodal else "F32"
    w = stored(weights, dtype)
    margins = []
    logits, _ = llama4_forward(cfg, w, tokens, None, margins)
    # Each feature must change these logits, or the test would pass without it.
    features = {"chunked attention": {"attention_chunk_size": None},
                "temperature tuning": {"attn_temperature_tuning": False},
                "NoPE layers": {"no_rope_layers": [1] * cfg["num_hidden_layers"]}}
    if cfg["use_qk_norm"]:
        features["L2 q/k norm"] = {"use_qk_norm": False}
    for feature, override in features.items():
        other, _ = llama4_forward(cfg, w, tokens, None, [], override)
        change = (other - logits).abs().max().item() / logits.abs().max().item()
        assert change > 1e-2, f"{name}: {feature} changes the logits by only {change:.3g} of their scale"
        print(f"{name}: {feature} changes the logits by {change:.3g} of their scale")
    _, cache = llama4_forward(cfg, w, tokens[:-1], None, margins)
    decode_logits, _ = llama4_forward(cfg, w, tokens[-1:], cache, margins)
    assert min(margins) > 1e-4, f"{name}: routing margin {min(margins)} is too small; change the seed or tokens"
    gap = (decode_logits[0] - logits[-1]).abs().max().item()
    assert gap < 1e-4, f"{name}: decode with the cache differs from the prefill by {gap}"
    if multimodal:
        g = torch.Generator().manual_seed(seed + 2)
        weights = {"language_model." + k: v for k, v in weights.items()}
        weights["vision_model.patch_embedding.linear.weight"] = torch.randn(16, 12, generator=g)
        weights["multi_modal_projector.linear_1.weight"] = torch.randn(cfg["hidden_size"], 16, generator=g)
        cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": cfg,
               "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 16, "patch_size": 2},
               "boi_token_index": 200080, "eoi_token_index": 200081, "image_token_index": 200092,
               "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    save_folder(name, cfg, weights, dtype, tokens, logits, decode_logits)
    print(f"{name}: {len(weights)} tensors, logits {tuple(logits.shape)}, decode gap {gap:.2e}")


# ---- MoE blocks of deepseek_v3 and llama4 -------------------------------------------

def save_block(name, tensors):
    folder = os.path.join(ROOT, "blocks", name)
    os.makedirs(folder, exist_ok=True)
    for key, value in tensors.items():
        np.save(os.path.join(folder, key + ".npy"), value.detach().numpy().astype(np.float32))


def deepseek_v3_block():
    """HF DeepseekV3MoE (router, group-limited top-k, routed scaling, shared experts), with
    positive selection scores so that masking with 0.0 (HF) and -inf (DeepSeek's inference code) agree."""
    t, h, f, e, n_group, topk_group, k, scaling = 6, 32, 16, 16, 4, 2, 4, 2.5
    g = torch.Generator().manual_seed(2468)
    x = torch.randn(t, h, generator=g)
    gate = torch.randn(e, h, generator=g) / math.sqrt(h)
    bias = 0.05 * torch.rand(e, generator=g)
    experts = {p: torch.randn(e, *shape, generator=g) / math.sqrt(shape[-1])
               for p, shape in (("gate_proj", (f, h)), ("up_proj", (f, h)), ("down_proj", (h, f)))}
    shared = {p: torch.randn(*shape, generator=g) / math.sqrt(shape[-1])
              for p, shape in (("gate_proj", (f, h)), ("up_proj", (f, h)), ("down_proj", (h, f)))}

    scores = F.linear(x, gate).sigmoid()
    topk_indices, topk_weights, group_margin, expert_margin = deepseek_route(
        scores, bias, n_group, topk_group, k, True, scaling)
    assert group_margin > 1e-4, "group choice too close"
    assert expert_margin > 1e-4, "expert choice too close"

    def expert(ex, rows):
        w = {p: experts[p][ex] for p in experts}
        return F.linear(F.silu(F.linear(rows, w["gate_proj"])) * F.linear(rows, w["up_proj"]), w["down_proj"])

    routed = routed_sum(x, topk_indices, topk_weights, e, expert)
    out = routed + F.linear(F.silu(F.linear(x, shared["gate_proj"])) * F.linear(x, shared["up_proj"]),
                            shared["down_proj"])
    tensors = {"x": x, "mlp.gate.weight": gate, "mlp.gate.e_score_correction_bias": bias, "out_y": out}
    tensors.update({f"mlp.experts.{p}.weight": v for p, v in experts.items()})
    tensors.update({f"mlp.shared_experts.{p}.weight": v for p, v in shared.items()})
    save_block("deepseek_v3_moe", tensors)


def llama4_block():
    """HF Llama4TextMoe: top-1 router, sigmoid score scaling the input of every expert (all experts run,
    the unrouted ones on zeros), fused gate_up experts with chunked SwiGLU, plus the shared expert."""
    t, h, f, e, k = 6, 32, 16, 4, 1
    g = torch.Generator().manual_seed(1357)
    x = torch.randn(t, h, generator=g)
    router = torch.randn(e, h, generator=g) / math.sqrt(h)
    gate_up = torch.randn(e, h, 2 * f, generator=g) / math.sqrt(h)
    down = torch.randn(e, f, h, generator=g) / math.sqrt(f)
    shared = {p: torch.randn(*shape, generator=g) / math.sqrt(shape[-1])
              for p, shape in (("gate_proj", (f, h)), ("up_proj", (f, h)), ("down_proj", (h, f)))}

    logits = F.linear(x, router)
    ranked = logits.sort(dim=-1, descending=True).values
    assert (ranked[:, k - 1] - ranked[:, k]).min() > 1e-4, "expert choice too close"
    top_value, top_index = torch.topk(logits, k, dim=1)
    scores = torch.full_like(logits, float("-inf")).scatter_(1, top_index, top_value).transpose(0, 1)
    scores = torch.sigmoid(scores.float())
    routed_in = x.repeat(e, 1) * scores.reshape(-1, 1)
    gu = torch.bmm(routed_in.view(e, -1, h), gate_up)
    gate, up = gu.chunk(2, dim=-1)
    routed_out = torch.bmm(up * F.silu(gate), down)
    out = F.linear(F.silu(F.linear(x, shared["gate_proj"])) * F.linear(x, shared["up_proj"]), shared["down_proj"])
    out = out + routed_out.reshape(e, -1, h).sum(dim=0)
    tensors = {"x": x, "feed_forward.router.weight": router, "feed_forward.experts.gate_up_proj": gate_up,
               "feed_forward.experts.down_proj": down, "out_y": out}
    tensors.update({f"feed_forward.shared_expert.{p}.weight": v for p, v in shared.items()})
    save_block("llama4_moe", tensors)


def make(name, case, tokens, kind=None):
    kind = kind or name
    cfg, weights, dtype = case()
    w = stored(weights, dtype)  # compute with exactly the values the file holds
    logits, _, routers = forward(cfg, w, tokens, None, kind)
    if cfg.get("rope_scaling"):  # the scaling must matter for these tokens, or the test proves nothing
        plain = dict(cfg, rope_scaling=None)
        change = (forward(plain, w, tokens, None, kind)[0] - logits).abs().max().item() / logits.abs().max().item()
        assert change > 1e-2, f"{name}: RoPE scaling changes the logits by only {change:.3g} of their scale"
        print(f"{name}: RoPE scaling changes the logits by {change:.3g} of their scale")
    check_routing_margins(cfg, routers, name + " prefill")
    _, cache, _ = forward(cfg, w, tokens[:-1], None, kind)
    decode_logits, _, routers = forward(cfg, w, tokens[-1:], cache, kind)
    check_routing_margins(cfg, routers, name + " decode")
    gap = (decode_logits[0] - logits[-1]).abs().max().item()
    assert gap < 1e-4, f"{name}: decode with the cache differs from the prefill by {gap}"
    save_folder(name, cfg, weights, dtype, tokens, logits, decode_logits)
    print(f"{name}: {len(weights)} tensors ({dtype}), logits {tuple(logits.shape)}, decode gap {gap:.2e}")
    if name in ("llama", "qwen3_moe"):
        wb = {k: v.to(torch.bfloat16) for k, v in w.items()}
        logits16, _, _ = forward(cfg, wb, tokens, None, name)
        _, cache16, _ = forward(cfg, wb, tokens[:-1], None, name)
        decode16, _, _ = forward(cfg, wb, tokens[-1:], cache16, name)
        folder = os.path.join(ROOT, name)
        np.save(os.path.join(folder, "bf16_logits.npy"), logits16.float().numpy())
        np.save(os.path.join(folder, "bf16_decode_logits.npy"), decode16.float().numpy())
        gap = (logits16.float() - logits).abs().max().item() / logits.abs().max().item()
        print(f"{name}: bf16 logits differ from f32 by {gap:.3g} of their scale")


if __name__ == "__main__":
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    torch.set_num_threads(1)
    with torch.no_grad():
        make("llama", llama_case, LLAMA_TOKENS)
        make("qwen3_moe", qwen3_moe_case, QWEN3_MOE_TOKENS)
        make("qwen3", qwen3_case, QWEN3_TOKENS)
        make("gemma", gemma_case, GEMMA_TOKENS)
        make("llama_rope_llama3", llama_rope_llama3_case, LLAMA_TOKENS, kind="llama")
        make("llama_rope_yarn", llama_rope_yarn_case, LLAMA_TOKENS, kind="llama")
        make_deepseek_v3()
        make_llama4("llama4", llama4_config(), 4444, LLAMA4_TOKENS)
        # Maverick's layout: MoE every second layer (moe_layers from interleave_moe_layer_step), the
        # dense layers with intermediate_size_mlp, no q/k norm, NoPE layers from the default interval.
        make_llama4("llama4_maverick",
                    llama4_config(num_local_experts=8, interleave_moe_layer_step=2, moe_layers=None,
                                  no_rope_layers=None, use_qk_norm=False, rope_scaling=None),
                    5555, LLAMA4_MAVERICK_TOKENS)
        make_llama4("llama4_multimodal", llama4_config(torch_dtype="bfloat16"), 6666, LLAMA4_TOKENS, multimodal=True)
        deepseek_v3_block()
        llama4_block()
