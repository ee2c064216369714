"""Oracle for models/translate.acr: an encoder-decoder transformer that translates a source
sentence greedily, with a cache of the decoder's keys and values and the source's keys and values
per decoder layer computed once.

Written from the mathematical description in plain eager PyTorch, one instance at a time.
Row-vector convention (x @ W, W stored [in, out]), float32, pre-norm layers, ReLU, eps 1e-5,
attention scale 1 / sqrt(DH) head by head (head h: columns [h * DH, (h + 1) * DH)):

  encoder: x = emb[source] + pos[0:n]; per layer l (no mask):
      q, k, v = split(LN(x) @ e_Wqkv_l + e_bqkv_l, 3); x = x + attn(q, k, v) @ e_Wo_l + e_bo_l
      x = x + relu(LN(x) @ e_W1_l + e_b1_l) @ e_W2_l + e_b2_l
    s = LN(x; e_lnf); per decoder layer l: mk_l, mv_l = split(s @ c_Wkv_l + c_bkv_l, 2)
  decoder, the token at position t (BOS at 0): x = emb[token] + pos[t]; per layer l:
      q, k, v = split(LN(x) @ d_Wqkv_l + d_bqkv_l, 3); the layer's cache gains k, v
      x = x + attn(q, cache keys, cache values) @ d_Wo_l + d_bo_l
      x = x + attn(LN(x) @ c_Wq_l + c_bq_l, mk_l, mv_l) @ c_Wo_l + c_bo_l
      x = x + relu(LN(x) @ d_W1_l + d_b1_l) @ d_W2_l + d_b2_l
    next token = argmax(LN(x; d_lnf) @ Wout) (the first index of the maximum)
Generation stops after EOS or max_new tokens; the output is the generated tokens. Every argmax
records its margin (tests/reference/README.md, "Decisions").
"""


import torch
import torch.nn.functional as F
from torch import nn

import transformer_parts

NAME = "translate"
DIMS = {"V": 4096, "D": 512, "NH": 8, "FF": 2048, "LE": 3, "LD": 3, "P": 1024, "BOS": 1, "EOS": 2}
INPUT_KIND = "json"

ENCODER = ["e_ln1_g", "e_ln1_b", "e_Wqkv", "e_bqkv", "e_Wo", "e_bo", "e_ln2_g", "e_ln2_b", "e_W1", "e_b1",
           "e_W2", "e_b2"]
DECODER = ["d_ln1_g", "d_ln1_b", "d_Wqkv", "d_bqkv", "d_Wo", "d_bo", "c_ln_g", "c_ln_b", "c_Wq", "c_bq",
           "c_Wkv", "c_bkv", "c_Wo", "c_bo", "d_ln2_g", "d_ln2_b", "d_W1", "d_b1", "d_W2", "d_b2"]
PARAM_ORDER = ["emb", "pos"] + ENCODER + ["e_lnf_g", "e_lnf_b"] + DECODER + ["d_lnf_g", "d_lnf_b", "Wout"]


def _dims(dims):
    return transformer_parts.dims(DIMS, dims, NAME)


def _shape(name, d):
    D, FF, V, P = d["D"], d["FF"], d["V"], d["P"]
    L = d["LE"] if name.startswith("e_") else d["LD"]
    per_layer = {"ln1_g": (D,), "ln1_b": (D,), "ln2_g": (D,), "ln2_b": (D,), "ln_g": (D,), "ln_b": (D,),
                 "Wqkv": (D, 3 * D), "bqkv": (3 * D,), "Wo": (D, D), "bo": (D,), "Wq": (D, D), "bq": (D,),
                 "Wkv": (D, 2 * D), "bkv": (2 * D,), "W1": (D, FF), "b1": (FF,), "W2": (FF, D), "b2": (D,)}
    fixed = {"emb": (V, D), "pos": (P, D), "e_lnf_g": (D,), "e_lnf_b": (D,), "d_lnf_g": (D,),
             "d_lnf_b": (D,), "Wout": (D, V)}
    if name in fixed:
        return fixed[name]
    return (L,) + per_layer[name[2:]]


class Model(nn.Module):
    PARAM_ORDER = PARAM_ORDER

    def __init__(self, **dims):
        super().__init__()
        d = _dims(dims)
        self.d = d
        self.D, self.NH, self.DH = d["D"], d["NH"], d["D"] // d["NH"]
        for name in PARAM_ORDER:
            setattr(self, name, nn.Parameter(torch.empty(*_shape(name, d))))
        self.margins = []

    def ln(self, x, g, b):
        return F.layer_norm(x, (self.D,), g, b, eps=1e-5)

    def attention(self, q, k, v):
        return transformer_parts.attention(q, k, v, self.NH)

    def encode(self, source):
        n = len(source)
        x = self.emb[torch.tensor(source)] + self.pos[0:n]
        for l in range(self.d["LE"]):
            q, k, v = (self.ln(x, self.e_ln1_g[l], self.e_ln1_b[l]) @ self.e_Wqkv[l] + self.e_bqkv[l]).split(self.D, 1)
            x = x + self.attention(q, k, v) @ self.e_Wo[l] + self.e_bo[l]
            x = x + torch.relu(self.ln(x, self.e_ln2_g[l], self.e_ln2_b[l]) @ self.e_W1[l] + self.e_b1[l]) @ self.e_W2[l] + self.e_b2[l]
        return self.ln(x, self.e_lnf_g, self.e_lnf_b)

    def step(self, token, t, caches, memory):
        x = self.emb[token:token + 1] + self.pos[t:t + 1]
        for l in range(self.d["LD"]):
            q, k, v = (self.ln(x, self.d_ln1_g[l], self.d_ln1_b[l]) @ self.d_Wqkv[l] + self.d_bqkv[l]).split(self.D, 1)
            if caches[l] is not None:
                k, v = torch.cat([caches[l][0], k]), torch.cat([caches[l][1], v])
            caches[l] = (k, v)
            x = x + self.attention(q, k, v) @ self.d_Wo[l] + self.d_bo[l]
            cq = self.ln(x, self.c_ln_g[l], self.c_ln_b[l]) @ self.c_Wq[l] + self.c_bq[l]
            x = x + self.attention(cq, memory[l][0], memory[l][1]) @ self.c_Wo[l] + self.c_bo[l]
            x = x + torch.relu(self.ln(x, self.d_ln2_g[l], self.d_ln2_b[l]) @ self.d_W1[l] + self.d_b1[l]) @ self.d_W2[l] + self.d_b2[l]
        logits = (self.ln(x, self.d_lnf_g, self.d_lnf_b) @ self.Wout)[0]
        top = torch.topk(logits, 2).values
        self.margins.append(float(top[0] - top[1]))
        return int(torch.argmax(logits))

    def forward(self, instance):
        source, max_new = instance
        s = self.encode(source)
        memory = [(s @ self.c_Wkv[l] + self.c_bkv[l]).split(self.D, 1) for l in range(self.d["LD"])]
        caches = [None] * self.d["LD"]
        token = self.step(self.d["BOS"], 0, caches, memory)
        out = [token]
        while token != self.d["EOS"] and len(out) < max_new:
            token = self.step(token, len(out), caches, memory)
            out.append(token)
        return out


def init_params(model, seed):
    """transformer_parts.init_generation with emb and pos the embeddings."""
    return transformer_parts.init_generation(model, seed, ("emb", "pos"))


def make_data(path, count, seed, dims):
    """`count` lines [source, max_new] (transformer_parts.FIXED first)."""
    transformer_parts.write_generation_data(path, count, seed, _dims(dims)["V"])


def load_instances(path, vocab_path, limit, dims):
    """(source, max_new) per line; vocab_path is unused."""
    d = _dims(dims)
    return transformer_parts.load_generation(path, limit, d["V"], d["P"], lambda n, new: n <= d["P"] and new <= d["P"])
