#!/usr/bin/python3
"""Generates the PyTorch reference data for spool::nn and the tiny llama block.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/make_goldens.py
It rewrites tests/golden/nn/<case>/*.npy: one file per graph input or weight
(named as in the graph) and one `out_<name>.npy` per expected output. The
files are committed; building and testing Spool never runs Python.

Every case here is computed the way PyTorch (and Hugging Face's modelling
code, for the llama block) computes it, in float32, independently of Spool's
formulation of the same layer.
"""

import math
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn")
torch.manual_seed(20261122)


def save(case, tensors):
    folder = os.path.join(ROOT, case)
    os.makedirs(folder, exist_ok=True)
    for name, value in tensors.items():
        if isinstance(value, torch.Tensor):
            if value.dtype == torch.bfloat16:
                value = value.float()
            value = value.detach().numpy()
        np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(value))


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def case_matmul():
    a, b = randn(2, 3, 5, 4), randn(3, 4, 6)
    save("matmul", {"a": a, "b": b, "out_y": torch.matmul(a, b)})
    a, b = randn(3, 5, 4), randn(3, 4, 6)
    save("bmm", {"a": a, "b": b, "out_y": torch.bmm(a, b)})
    x, w, bias = randn(5, 8), randn(6, 8), randn(6)
    save("linear", {"x": x, "w": w, "b": bias, "out_y": F.linear(x, w, bias)})


def case_activations():
    x = randn(4, 9) * 3
    save("activations", {
        "x": x,
        "out_relu": F.relu(x),
        "out_silu": F.silu(x),
        "out_gelu_tanh": F.gelu(x, approximate="tanh"),
        "out_sigmoid": torch.sigmoid(x),
        "out_tanh": torch.tanh(x),
        "out_exp": torch.exp(x),
        "out_cos": torch.cos(x),
    })
    p = torch.rand(4, 9) * 10 + 0.01
    save("log", {"x": p, "out_y": torch.log(p)})
    gate, up = randn(3, 10), randn(3, 10)
    save("glu", {
        "gate": gate, "up": up,
        "out_swiglu": F.silu(gate) * up,
        "out_geglu": F.gelu(gate, approximate="tanh") * up,
    })


def case_softmax_norms():
    x = randn(4, 7) * 4
    save("softmax", {"x": x, "out_y": torch.softmax(x, dim=-1)})
    x3 = randn(2, 5, 3)
    save("softmax_axis1", {"x": x3, "out_y": torch.softmax(x3, dim=1)})
    x, w, b = randn(4, 16), randn(16), randn(16)
    save("layer_norm", {"x": x, "w": w, "b": b, "out_y": F.layer_norm(x, (16,), w, b, eps=1e-5)})
    # RMSNorm as Hugging Face's LlamaRMSNorm and GemmaRMSNorm compute it.
    x, w = randn(4, 16), randn(16)
    rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    save("rms_norm", {"x": x, "w": w, "out_y": rms * w, "out_gemma": rms * (1.0 + w)})


def rope_tables(seq, dim, theta, offset=0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    t = torch.arange(offset, offset + seq, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(q, k, v, causal):
    heads, kv_heads, s, t, d = q.shape[0], k.shape[0], q.shape[1], k.shape[1], q.shape[2]
    k = k.repeat_interleave(heads // kv_heads, dim=0)  # HF repeat_kv: head h reads kv head h // group
    v = v.repeat_interleave(heads // kv_heads, dim=0)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        mask = torch.ones(s, t, dtype=torch.bool).triu(diagonal=t - s + 1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def case_rope_attention():
    x = randn(2, 6, 8)
    cos, sin = rope_tables(6, 8, 10000.0)
    save("rope", {"x": x, "out_y": x * cos + rotate_half(x) * sin, "out_cos": cos, "out_sin": sin})
    cos, sin = rope_tables(5, 8, 500000.0, offset=7)
    save("rope_tables_offset", {"out_cos": cos, "out_sin": sin})
    q, k, v = randn(4, 6, 8), randn(2, 6, 8), randn(2, 6, 8)
    save("attention_causal_gqa", {"q": q, "k": k, "v": v, "out_y": attention(q, k, v, True)})
    q, k, v = randn(4, 3, 8), randn(2, 5, 8), randn(2, 5, 8)
    save("attention_causal_cache", {"q": q, "k": k, "v": v, "out_y": attention(q, k, v, True)})
    save("attention_full", {"q": q, "k": k, "v": v, "out_y": attention(q, k, v, False)})


def case_indexing():
    ids = torch.tensor([[3, 0, 9], [9, 4, 4]], dtype=torch.int64)
    table = randn(10, 4)
    save("embedding", {"ids": ids, "table": table, "out_y": F.embedding(ids, table)})
    x = randn(3, 8)
    values, indices = torch.topk(x, 3, dim=-1)
    save("topk", {"x": x, "out_values": values, "out_indices": indices})
    x, mask = randn(3, 4), torch.rand(3, 4) > 0.5
    save("masked_fill", {"x": x, "mask": mask, "out_y": x.masked_fill(mask, -1e4)})
    a, b, cond = randn(3, 4), randn(1, 4), torch.rand(3, 1) > 0.5
    save("where", {"a": a, "b": b, "cond": cond, "out_y": torch.where(cond, a, b)})
    x = randn(5, 6) * 100
    z = torch.randint(-2, 3, (4, 5)).float()  # some exact zeros
    save("cast", {
        "x": x,
        "z": z,
        "out_bf16": x.to(torch.bfloat16),
        "out_f16": x.to(torch.float16),
        "out_i32": x.to(torch.int32),
        "out_bool": z.to(torch.bool),
    })
    p, q, r = randn(2, 3), randn(2, 1), randn(2, 4)
    save("concat", {"p": p, "q": q, "r": r, "out_y": torch.cat((p, q, r), dim=1)})
    x = randn(4, 6)
    c0, c1, c2 = torch.chunk(x, 3, dim=1)
    s0, s1 = torch.split(x, [1, 3], dim=0)
    save("chunk_split", {"x": x, "out_c0": c0, "out_c1": c1, "out_c2": c2, "out_s0": s0, "out_s1": s1})


class TinyLlamaBlock:
    """One LlamaDecoderLayer as Hugging Face computes it (no cache, causal)."""

    hidden, heads, kv_heads, head_dim, ffn, eps, theta = 64, 4, 2, 16, 128, 1e-5, 10000.0

    def __init__(self):
        h, d, f = self.hidden, self.head_dim, self.ffn
        scale = lambda fan_in: 1.0 / math.sqrt(fan_in)
        self.w = {
            "layer.input_layernorm.weight": 1.0 + 0.1 * randn(h),
            "layer.self_attn.q_proj.weight": randn(self.heads * d, h) * scale(h),
            "layer.self_attn.k_proj.weight": randn(self.kv_heads * d, h) * scale(h),
            "layer.self_attn.v_proj.weight": randn(self.kv_heads * d, h) * scale(h),
            "layer.self_attn.o_proj.weight": randn(h, self.heads * d) * scale(self.heads * d),
            "layer.post_attention_layernorm.weight": 1.0 + 0.1 * randn(h),
            "layer.mlp.gate_proj.weight": randn(f, h) * scale(h),
            "layer.mlp.up_proj.weight": randn(f, h) * scale(h),
            "layer.mlp.down_proj.weight": randn(h, f) * scale(f),
        }

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def __call__(self, x):
        w, s, d = self.w, x.shape[0], self.head_dim
        cos, sin = rope_tables(s, d, self.theta)
        h = self.rms(x, w["layer.input_layernorm.weight"])
        q = F.linear(h, w["layer.self_attn.q_proj.weight"]).view(s, self.heads, d).transpose(0, 1)
        k = F.linear(h, w["layer.self_attn.k_proj.weight"]).view(s, self.kv_heads, d).transpose(0, 1)
        v = F.linear(h, w["layer.self_attn.v_proj.weight"]).view(s, self.kv_heads, d).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        a = attention(q, k, v, True).transpose(0, 1).reshape(s, self.heads * d)
        x = x + F.linear(a, w["layer.self_attn.o_proj.weight"])
        h = self.rms(x, w["layer.post_attention_layernorm.weight"])
        mlp = F.silu(F.linear(h, w["layer.mlp.gate_proj.weight"])) * F.linear(h, w["layer.mlp.up_proj.weight"])
        return x + F.linear(mlp, w["layer.mlp.down_proj.weight"])


def case_llama_block():
    block = TinyLlamaBlock()
    x = randn(8, block.hidden)
    save("llama_block", {"x": x, **block.w, "out_y": block(x)})


if __name__ == "__main__":
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    with torch.no_grad():
        case_matmul()
        case_activations()
        case_softmax_norms()
        case_rope_attention()
        case_indexing()
        case_llama_block()
    print("wrote", sum(len(files) for _, _, files in os.walk(ROOT)), "files under", ROOT)
