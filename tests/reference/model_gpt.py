"""Oracle for models/gpt.acr: a decoder-only transformer that prefills a prompt and generates
greedily with a KV cache until its end token or its own budget of new tokens.

Written from the mathematical description in plain eager PyTorch, one instance at a time.
Row-vector convention (x @ W, W stored [in, out]), float32, pre-norm layers:

  x   = tok[prompt] + pos[0:n]                                   (n prompt tokens)
  per layer l:
    q, k, v = split(LN1_l(x) @ Wqkv_l + bqkv_l, 3)
    head h: columns [h * DH, (h + 1) * DH); scores q_h k_h^T / sqrt(DH), causal (row i sees
    keys 0..i), softmax, times v_h
    x = x + concat_h(...) @ Wo_l + bo_l
    x = x + relu(LN2_l(x) @ W1_l + b1_l) @ W2_l + b2_l
  next token = argmax(LNf(x[last]) @ Wout)                        (the first index of the maximum)
Each generated token is fed at the next position with the layers' keys and values of every
earlier position kept (the cache); generation stops after the end token EOS or max_new tokens.
Output: the generated tokens (EOS included when it came). Every argmax records its margin (the
gap between the largest logit and the runner-up; tests/reference/README.md, "Decisions").

The loss (acrobat's `loss` entry): a sequence of token ids through the layers at once (causal), and
the summed negative log-likelihood of each next token under log_softmax(LNf(x) @ Wout) of the
position before it.
"""

import json
import random

import torch
import torch.nn.functional as F
from torch import nn

import models
import transformer_parts

NAME = "gpt"
DIMS = {"V": 4096, "D": 512, "NH": 8, "FF": 2048, "L": 6, "P": 1024, "EOS": 2}
INPUT_KIND = "json"
LOSS_INPUT_KIND = "json"

PARAM_ORDER = ["tok", "pos", "ln1_g", "ln1_b", "Wqkv", "bqkv", "Wo", "bo", "ln2_g", "ln2_b", "W1", "b1",
               "W2", "b2", "lnf_g", "lnf_b", "Wout"]


def _dims(dims):
    return transformer_parts.dims(DIMS, dims, NAME)


class Model(nn.Module):
    PARAM_ORDER = PARAM_ORDER

    def __init__(self, **dims):
        super().__init__()
        d = _dims(dims)
        self.V, self.D, self.NH, self.FF, self.L, self.P, self.EOS = (d[k] for k in ("V", "D", "NH", "FF", "L", "P", "EOS"))
        self.DH = self.D // self.NH
        V, D, FF, L, P = self.V, self.D, self.FF, self.L, self.P
        shapes = {"tok": (V, D), "pos": (P, D), "ln1_g": (L, D), "ln1_b": (L, D), "Wqkv": (L, D, 3 * D),
                  "bqkv": (L, 3 * D), "Wo": (L, D, D), "bo": (L, D), "ln2_g": (L, D), "ln2_b": (L, D),
                  "W1": (L, D, FF), "b1": (L, FF), "W2": (L, FF, D), "b2": (L, D), "lnf_g": (D,),
                  "lnf_b": (D,), "Wout": (D, V)}
        for name in PARAM_ORDER:
            setattr(self, name, nn.Parameter(torch.empty(*shapes[name])))
        self.margins = []

    def layer(self, x, l, cache):
        """Layer l on the new rows x [m, D]; cache (k, v) of earlier positions or None; returns the
        rows and the cache with the new rows' keys and values after the old."""
        D = self.D
        q, k, v = (F.layer_norm(x, (D,), self.ln1_g[l], self.ln1_b[l], eps=1e-5) @ self.Wqkv[l]
                   + self.bqkv[l]).split(D, dim=1)
        if cache is not None:
            k, v = torch.cat([cache[0], k]), torch.cat([cache[1], v])
        x = x + transformer_parts.attention(q, k, v, self.NH, causal=True) @ self.Wo[l] + self.bo[l]
        h = F.layer_norm(x, (D,), self.ln2_g[l], self.ln2_b[l], eps=1e-5)
        return x + torch.relu(h @ self.W1[l] + self.b1[l]) @ self.W2[l] + self.b2[l], (k, v)

    def next_token(self, row):
        logits = (F.layer_norm(row, (self.D,), self.lnf_g, self.lnf_b, eps=1e-5) @ self.Wout)[0]
        top = torch.topk(logits, 2).values if logits.numel() > 1 else None
        if top is not None:
            self.margins.append(float(top[0] - top[1]))
        return int(torch.argmax(logits))  # the first index of the maximum, as acrobat's argmax

    def prefill(self, prompt):
        """The prompt's rows after every layer and the layers' caches (k, v)."""
        x = self.tok[torch.tensor(prompt)] + self.pos[0:len(prompt)]
        caches = []
        for l in range(self.L):
            x, c = self.layer(x, l, None)
            caches.append(c)
        return x, caches

    def generate(self, prompt, max_new, pick):
        """The tokens generated after `prompt`, each chosen by pick(last row [1, D], tokens the
        budget has left with this one), until EOS or max_new tokens."""
        n = len(prompt)
        x, caches = self.prefill(prompt)
        token = pick(x[n - 1:n], max_new)
        out = [token]
        while token != self.EOS and len(out) < max_new:
            t = caches[0][0].shape[0]
            x = self.tok[token:token + 1] + self.pos[t:t + 1]
            for l in range(self.L):
                x, caches[l] = self.layer(x, l, caches[l])
            token = pick(x, max_new - len(out))
            out.append(token)
        return out

    def forward(self, instance):
        prompt, max_new = instance
        return self.generate(prompt, max_new, lambda row, left: self.next_token(row))

    def loss(self, ids, rows=None):
        n = len(ids)
        x = self.tok[torch.tensor(ids)] + self.pos[0:n]
        for l in range(self.L):
            x, _ = self.layer(x, l, None)
        lp = F.log_softmax(F.layer_norm(x, (self.D,), self.lnf_g, self.lnf_b, eps=1e-5) @ self.Wout, dim=-1)
        return -lp[torch.arange(n - 1), torch.tensor(ids[1:], dtype=torch.long)].sum()

    def tables(self):
        return None  # tok is indexed by a tensor of ids: autograd gives its rows


def init_params(model, seed):
    """transformer_parts.init_generation with tok and pos the embeddings."""
    return transformer_parts.init_generation(model, seed, ("tok", "pos"))


def make_data(path, count, seed, dims):
    """`count` lines [prompt, max_new] (transformer_parts.FIXED first), the prompts' ids without
    EOS, so that only generation can end an instance early."""
    d = _dims(dims)
    transformer_parts.write_generation_data(path, count, seed, d["V"], avoid=d["EOS"])


# Sequences of the loss: the extremes first (two tokens; one: a loss of 0; 512), then lengths from 1
# to 512 favouring short ones.
LOSS_LENGTHS = [2, 1, 512, 3, 64, 17, 130, 5]


def make_loss_data(path, count, seed, dims):
    """`count` lines, each a list of token ids uniform in [0, V)."""
    d = _dims(dims)
    rng = random.Random(seed)
    lengths = LOSS_LENGTHS[:count]
    while len(lengths) < count:
        lengths.append(min(512, max(1, int(rng.expovariate(1.0 / 40.0)) + 1)))
    with open(path, "w") as f:
        for n in lengths:
            f.write(json.dumps([rng.randrange(d["V"]) for _ in range(n)]) + "\n")


def load_loss_instances(path, vocab_path, limit, dims):
    d = _dims(dims)
    out = []
    for lineno, ids in models.json_lines(path, limit):
        if not (isinstance(ids, list) and ids and all(isinstance(w, int) and 0 <= w < d["V"] for w in ids)):
            raise ValueError("%s:%d: expected a non-empty list of token ids in [0, %d)" % (path, lineno, d["V"]))
        out.append(ids)
    return out


def load_instances(path, vocab_path, limit, dims):
    """(prompt, max_new) per line; vocab_path is unused. The prompt and the tokens fed after it
    must fit the P positions."""
    d = _dims(dims)
    return transformer_parts.load_generation(path, limit, d["V"], d["P"], lambda n, new: n + new <= d["P"])
