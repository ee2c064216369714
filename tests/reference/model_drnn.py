"""PyTorch oracle for models/drnn.acr: a doubly recurrent tree decoder (Alvarez-Melis & Jaakkola,
2017) that grows a tree from a seed vector, deciding per node from its state whether it has a
first child and a next sibling (depth and width bounded). Written from that description.

Decisions are sigmoid(h @ v) > 0.5; every decision's margin |p - 0.5| is recorded in
`self.margins` by forward(), for the near-tie policy of tests/reference/README.md.
"""

import json
import math
import random

import torch

import models

NAME = "drnn"
DIMS = {"H": 256, "DEPTH": 6, "WIDTH": 4}
INPUT_KIND = "json"


class Model(torch.nn.Module):
    PARAM_ORDER = ["Wa", "Wf", "b", "v_child", "v_sibling", "Wo"]

    def __init__(self, H=256, DEPTH=6, WIDTH=4):
        super().__init__()
        self.H, self.DEPTH, self.WIDTH = H, DEPTH, WIDTH
        self.Wa = torch.nn.Parameter(torch.empty(H, H))
        self.Wf = torch.nn.Parameter(torch.empty(H, H))
        self.b = torch.nn.Parameter(torch.empty(1, H))
        self.v_child = torch.nn.Parameter(torch.empty(H, 1))
        self.v_sibling = torch.nn.Parameter(torch.empty(H, 1))
        self.Wo = torch.nn.Parameter(torch.empty(H, H))
        self.margins = []

    def grow(self, parent, previous, depth, width):
        h = torch.tanh(parent @ self.Wa + previous @ self.Wf + self.b)
        has_child = False
        if depth < self.DEPTH:
            p = float(torch.sigmoid(h @ self.v_child)[0, 0])
            self.margins.append(abs(p - 0.5))
            has_child = p > 0.5
        has_sibling = False
        if width + 1 < self.WIDTH:
            p = float(torch.sigmoid(h @ self.v_sibling)[0, 0])
            self.margins.append(abs(p - 0.5))
            has_sibling = p > 0.5
        zeros = torch.zeros(1, self.H)
        below, below_count = (self.grow(h, zeros, depth + 1, 0) if has_child else (zeros, 0))
        after, after_count = (self.grow(parent, h, depth, width + 1) if has_sibling else (zeros, 0))
        return torch.tanh(h @ self.Wo) + below + after, 1 + below_count + after_count

    def forward(self, seed):
        self.margins = []
        with torch.no_grad():
            return self.grow(seed, torch.zeros(1, self.H), 0, 0)


def init_params(model, seed):
    """Matrices ~ U(-1/sqrt(H), 1/sqrt(H)) (a larger scale amplifies float32 rounding along deep
    trees), Wo at a quarter of that (the output sums every node's); the decision vectors ~ N(0, 64/H), so
    that decision logits are far from 0 (near ties rare) while each decision stays about even."""
    torch.manual_seed(seed)
    H = model.H
    bound = 1.0 / math.sqrt(H)
    with torch.no_grad():
        model.Wa.uniform_(-bound, bound)
        model.Wf.uniform_(-bound, bound)
        model.b.uniform_(-0.1, 0.1)
        model.v_child.normal_(0.0, 8.0 / math.sqrt(H))
        model.v_sibling.normal_(0.0, 8.0 / math.sqrt(H))
        model.Wo.uniform_(-0.25 * bound, 0.25 * bound)
    return model


def make_data(path, count, seed, dims):
    """`count` seed vectors [1, H] ~ N(0, 1), rounded to 4 decimals, one JSON tensor per line."""
    H = dict(DIMS, **(dims or {}))["H"]
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(count):
            data = [round(rng.gauss(0.0, 1.0), 4) for _ in range(H)]
            f.write(json.dumps({"shape": [1, H], "data": data}) + "\n")


def load_instances(path, vocab_path, limit, dims):
    H = dict(DIMS, **(dims or {}))["H"]
    out = []
    for lineno, t in models.json_lines(path, limit):
        if t["shape"] != [1, H]:
            raise ValueError("%s:%d: expected shape [1, %d], found %s" % (path, lineno, H, t["shape"]))
        out.append(torch.tensor(t["data"], dtype=torch.float32).reshape(1, H))
    return out
