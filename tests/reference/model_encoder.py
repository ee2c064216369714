"""Oracle for models/encoder.acr: one post-norm transformer encoder layer over n token vectors,
n different per instance (CoRa's encoder layer: D 512, 8 heads of 64, feed-forward 2048, ReLU).

Written from the mathematical description in plain eager PyTorch, one instance at a time, at the
instance's own length (no padding, no mask). Row-vector convention (x @ W, W stored [in, out]),
float32:

  q, k, v = split(x @ Wqkv + bqkv, 3)            (each [n, D])
  head h of each: columns [h * DH, (h + 1) * DH)
  a   = concat_h(softmax(q_h k_h^T / sqrt(DH)) v_h) @ Wo + bo
  h1  = LayerNorm(x + a; ln1_g, ln1_b)           (eps 1e-5)
  out = LayerNorm(h1 + relu(h1 @ W1 + b1) @ W2 + b2; ln2_g, ln2_b)

The pooled classifier (`classify`) and its loss (`loss`, on pairs (y, x) of a one-hot label and a
sequence):

  classify(x) = log_softmax(mean over rows of out @ Wc + bc)      ([1, C])
  loss(y, x)  = -classify(x)[label]

The same layer is torch.nn.TransformerEncoderLayer(D, NH, FF, dropout=0, batch_first=True) with
in_proj_weight = Wqkv^T, out_proj.weight = Wo^T, linear1.weight = W1^T, linear2.weight = W2^T;
`self_check` compares the two.
"""

import json
import math
import random

import torch
import torch.nn.functional as F
from torch import nn

import models
import transformer_parts

NAME = "encoder"
DIMS = {"D": 512, "NH": 8, "FF": 2048, "C": 3}
INPUT_KIND = "json"
LOSS_INPUT_KIND = "json"  # the loss entry reads lines [y, x] (make_loss_data)

PARAM_ORDER = ["Wqkv", "bqkv", "Wo", "bo", "ln1_g", "ln1_b", "W1", "b1", "W2", "b2",
               "ln2_g", "ln2_b", "Wc", "bc"]

# Lengths of the synthetic instances: the extremes first (1 and 512 tokens, two length-1
# instances side by side), then lengths drawn from 1..512 favouring short ones.
FIXED_LENGTHS = [1, 512, 1, 2, 3, 64, 65, 127, 255, 17]


def _dims(dims):
    return transformer_parts.dims(DIMS, dims, NAME)


class Model(nn.Module):
    PARAM_ORDER = PARAM_ORDER

    def __init__(self, **dims):
        super().__init__()
        d = _dims(dims)
        self.D, self.NH, self.FF, self.C = d["D"], d["NH"], d["FF"], d["C"]
        self.DH = self.D // self.NH
        D, FF = self.D, self.FF
        self.Wqkv = nn.Parameter(torch.empty(D, 3 * D))
        self.bqkv = nn.Parameter(torch.empty(3 * D))
        self.Wo = nn.Parameter(torch.empty(D, D))
        self.bo = nn.Parameter(torch.empty(D))
        self.ln1_g = nn.Parameter(torch.empty(D))
        self.ln1_b = nn.Parameter(torch.empty(D))
        self.W1 = nn.Parameter(torch.empty(D, FF))
        self.b1 = nn.Parameter(torch.empty(FF))
        self.W2 = nn.Parameter(torch.empty(FF, D))
        self.b2 = nn.Parameter(torch.empty(D))
        self.ln2_g = nn.Parameter(torch.empty(D))
        self.ln2_b = nn.Parameter(torch.empty(D))
        self.Wc = nn.Parameter(torch.empty(D, self.C))
        self.bc = nn.Parameter(torch.empty(self.C))

    def forward(self, x):
        n, D, NH, DH = x.shape[0], self.D, self.NH, self.DH
        q, k, v = (x @ self.Wqkv + self.bqkv).split(D, dim=1)
        q = q.view(n, NH, DH).transpose(0, 1)  # [NH, n, DH]
        k = k.view(n, NH, DH).transpose(0, 1)
        v = v.view(n, NH, DH).transpose(0, 1)
        p = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(DH), dim=-1)  # [NH, n, n]
        a = (p @ v).transpose(0, 1).reshape(n, D) @ self.Wo + self.bo
        h = F.layer_norm(x + a, (D,), self.ln1_g, self.ln1_b, eps=1e-5)
        f = torch.relu(h @ self.W1 + self.b1) @ self.W2 + self.b2
        return F.layer_norm(h + f, (D,), self.ln2_g, self.ln2_b, eps=1e-5)

    def classify(self, x):
        return F.log_softmax(self.forward(x).mean(dim=0, keepdim=True) @ self.Wc + self.bc, dim=-1)

    def loss(self, inst, rows=None):
        """acrobat's `loss` entry: the classifier's cross-entropy against inst.label."""
        return -self.classify(inst.x.to(self.Wc.dtype))[0, inst.label]

    def tables(self):
        return None

    def as_torch_layer(self):
        """The same weights in torch.nn.TransformerEncoderLayer (eval mode, no dropout)."""
        layer = nn.TransformerEncoderLayer(self.D, self.NH, self.FF, dropout=0.0, batch_first=True)
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(self.Wqkv.t())
            layer.self_attn.in_proj_bias.copy_(self.bqkv)
            layer.self_attn.out_proj.weight.copy_(self.Wo.t())
            layer.self_attn.out_proj.bias.copy_(self.bo)
            layer.linear1.weight.copy_(self.W1.t())
            layer.linear1.bias.copy_(self.b1)
            layer.linear2.weight.copy_(self.W2.t())
            layer.linear2.bias.copy_(self.b2)
            layer.norm1.weight.copy_(self.ln1_g)
            layer.norm1.bias.copy_(self.ln1_b)
            layer.norm2.weight.copy_(self.ln2_g)
            layer.norm2.bias.copy_(self.ln2_b)
        return layer.eval()


def init_params(model, seed):
    """torch.manual_seed(seed), parameters drawn in PARAM_ORDER: matrices U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) with fan_in = rows; biases U(-0.1, 0.1); layer-norm gains 1 + U(-0.1, 0.1)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name in PARAM_ORDER:
            p = getattr(model, name)
            if p.dim() == 2:
                bound = 1.0 / math.sqrt(p.shape[0])
                p.uniform_(-bound, bound)
            else:
                p.uniform_(-0.1, 0.1)
                if name.startswith("ln") and name.endswith("_g"):
                    p += 1.0
    return model


def lengths(count, seed):
    rng = random.Random(seed)
    out = FIXED_LENGTHS[:count]
    while len(out) < count:
        out.append(min(512, max(1, int(rng.expovariate(1.0 / 48.0)) + 1)))
    return out


def random_rows(rng, n, D):
    """x {"shape": [n, D]} as JSON, entries N(0, 1) rounded to 4 decimals."""
    return {"shape": [n, D], "data": [round(rng.gauss(0.0, 1.0), 4) for _ in range(n * D)]}


def rows_tensor(xs, path, lineno, D):
    """A JSON x as a float32 [n, D] tensor, its shape checked."""
    shape = xs["shape"]
    if len(shape) != 2 or shape[1] != D or shape[0] < 1:
        raise ValueError("%s:%d: expected a shape [n, %d] with n >= 1, found %s" % (path, lineno, D, shape))
    return torch.tensor(xs["data"], dtype=torch.float32).view(shape[0], D)


def make_data(path, count, seed, dims):
    """`count` instances, one JSON line each: x (random_rows) with n from `lengths`."""
    D = _dims(dims)["D"]
    rng = random.Random(seed)
    with open(path, "w") as f:
        for n in lengths(count, seed):
            f.write(json.dumps(random_rows(rng, n, D)))
            f.write("\n")


def load_instances(path, vocab_path, limit, dims):
    """x [n, D] float32 per line; vocab_path is unused. limit 0 = all."""
    D = _dims(dims)["D"]
    return [rows_tensor(xs, path, lineno, D) for lineno, xs in models.json_lines(path, limit)]


def self_check(seed=0):
    """The explicit layer equals torch.nn.TransformerEncoderLayer on the same weights."""
    torch.manual_seed(seed)
    m = init_params(Model(), seed)
    layer = m.as_torch_layer()
    with torch.no_grad():
        for n in (1, 7, 50):
            x = torch.randn(n, m.D)
            a = m(x)
            b = layer(x.unsqueeze(0)).squeeze(0)
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (n, float((a - b).abs().max()))
    return True


class LabelledRows:
    """A loss instance: the rows x [n, D] and the index of its one-hot label."""

    def __init__(self, x, label):
        self.x, self.label = x, label


def make_loss_data(path, count, seed, dims):
    """`count` lines [y, x] for the loss entry: x as make_data writes it (random_rows, lengths from
    `lengths`), y a one-hot [[...]] of a label drawn uniformly from the C classes."""
    d = _dims(dims)
    rng = random.Random(seed)
    with open(path, "w") as f:
        for n in lengths(count, seed):
            y = [0.0] * d["C"]
            y[rng.randrange(d["C"])] = 1.0
            f.write(json.dumps([[y], random_rows(rng, n, d["D"])]) + "\n")


def load_loss_instances(path, vocab_path, limit, dims):
    D = _dims(dims)["D"]
    out = []
    for lineno, line in models.json_lines(path, limit):
        if not (isinstance(line, list) and len(line) == 2 and isinstance(line[1], dict)):
            raise ValueError("%s:%d: expected [y, x]" % (path, lineno))
        y, xs = line
        out.append(LabelledRows(rows_tensor(xs, path, lineno, D), y[0].index(1.0)))
    return out
