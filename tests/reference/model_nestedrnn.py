"""Oracle for models/nestedrnn.acr: an RNN over a sequence of sequences (a loop inside a loop).

Instance: a list of inner sequences of token ids (List[List[int]], one JSON array per line).
Inner GRU from h = 0 over each inner sequence (x = emb[w]):
    z, r = split(x @ W_zr + h @ U_zr + b_zr)      (update, reset; pre-activation)
    n    = tanh(x @ W_n + (sigmoid(r) * h) @ U_n + b_n)
    h    = (1 - sigmoid(z)) * n + sigmoid(z) * h
Outer tanh RNN from g = 0 over the inner final states s: g = tanh(s @ Wo_x + g @ Wo_h + b_o).
Output: log_softmax(g @ W_out + b_out), [1, C].
Loss (acrobat's `loss` entry, on a line [y, seqs] with y a one-hot [1, C] label): -sum(y * output).
"""

import json
import random

import torch
import torch.nn.functional as F
from torch import nn

import models

NAME = "nestedrnn"
DIMS = {"H": 256, "E": None, "V": 1000, "C": 5}  # E follows H unless set
INPUT_KIND = "json"

# make_data: 2-8 inner sequences of 1-12 tokens each
OUTER_LEN = (2, 8)
INNER_LEN = (1, 12)


class Model(nn.Module):
    PARAM_ORDER = ["emb", "W_zr", "U_zr", "b_zr", "W_n", "U_n", "b_n", "Wo_x", "Wo_h", "b_o", "W_out", "b_out"]

    def __init__(self, H=256, E=None, V=1000, C=5):
        super().__init__()
        E = H if E is None else E
        self.H, self.E, self.V, self.C = H, E, V, C
        shapes = {"emb": (V, E), "W_zr": (E, 2 * H), "U_zr": (H, 2 * H), "b_zr": (2 * H,),
                  "W_n": (E, H), "U_n": (H, H), "b_n": (H,), "Wo_x": (H, H), "Wo_h": (H, H), "b_o": (H,),
                  "W_out": (H, C), "b_out": (C,)}
        for n in self.PARAM_ORDER:
            setattr(self, n, nn.Parameter(torch.empty(*shapes[n])))
        self.rows = None  # tables() while loss() runs

    def tables(self):
        return torch.unbind(self.emb)

    def loss(self, inst, rows=None):
        """The training loss: the cross-entropy of the output against inst.label (a LabelledSeqs)."""
        self.rows = rows
        try:
            return -self.forward(inst)[0, inst.label]
        finally:
            self.rows = None

    def inner(self, seq):
        h = torch.zeros(1, self.H, dtype=self.emb.dtype)
        for w in seq:
            x = self.emb[w : w + 1] if self.rows is None else self.rows[w].unsqueeze(0)
            z, r = torch.split(x @ self.W_zr + h @ self.U_zr + self.b_zr, self.H, dim=1)
            n = torch.tanh(x @ self.W_n + (torch.sigmoid(r) * h) @ self.U_n + self.b_n)
            u = torch.sigmoid(z)
            h = (1.0 - u) * n + u * h
        return h

    def forward(self, seqs):
        g = torch.zeros(1, self.H, dtype=self.emb.dtype)
        for seq in seqs:
            g = torch.tanh(self.inner(seq) @ self.Wo_x + g @ self.Wo_h + self.b_o)
        return F.log_softmax(g @ self.W_out + self.b_out, dim=1)


def init_params(model, seed=0):
    """torch.manual_seed(seed), parameters drawn in PARAM_ORDER: emb ~ N(0, 0.5), matrices
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the first dim, biases U(-0.1, 0.1)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for n in model.PARAM_ORDER:
            models.init_tensor(getattr(model, n), embedding=n == "emb")
    return model


def make_data(path, count, seed, dims):
    """`count` lines, each a JSON array of 2-8 arrays of 1-12 token ids in [0, V)."""
    rng = random.Random(seed)
    V = dims["V"]
    with open(path, "w") as f:
        for _ in range(count):
            seqs = [[rng.randrange(V) for _ in range(rng.randint(*INNER_LEN))]
                    for _ in range(rng.randint(*OUTER_LEN))]
            f.write(json.dumps(seqs) + "\n")


class LabelledSeqs(list):
    """An instance (the list of inner sequences forward reads) with its label (its loss)."""

    def __init__(self, seqs, label):
        super().__init__(seqs)
        self.label = label


def make_loss_data(path, count, seed, dims):
    """`count` lines [y, seqs] for the loss entry: make_data's seqs, y a one-hot [[...]] of a label
    drawn uniformly from the C classes."""
    make_data(path, count, seed, dims)
    rng = random.Random(seed + 1)
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    with open(path, "w") as f:
        for seqs in lines:
            y = [0.0] * dims["C"]
            y[rng.randrange(dims["C"])] = 1.0
            f.write(json.dumps([[y], seqs]) + "\n")


def load_loss_instances(path, vocab_path, limit, dims):
    out = []
    for k, (y, seqs) in models.json_lines(path, limit):
        out.append(LabelledSeqs(load_instances_from([(k, seqs)], path, dims)[0], y[0].index(1.0)))
    return out


def load_instances(path, vocab_path, limit, dims):
    return load_instances_from(models.json_lines(path, limit), path, dims)


def load_instances_from(lines, path, dims):
    out = []
    for k, seqs in lines:
        if not isinstance(seqs, list) or not all(isinstance(s, list) for s in seqs):
            raise ValueError("%s:%d: expected an array of arrays of token ids" % (path, k))
        for s in seqs:
            for w in s:
                if not isinstance(w, int) or not 0 <= w < dims["V"]:
                    raise ValueError("%s:%d: token %r out of range [0, %d)" % (path, k, w, dims["V"]))
        out.append(seqs)
    return out
