"""Oracle for models/berxit_padded.acr: an early-exit transformer encoder (BERxiT / DeeBERT style).

Written from the mathematical description, in plain eager PyTorch, one instance at a time.
Row-vector convention (x @ W, W stored [in, out]), float32.

Instance: a sequence of S token vectors x [S, D] of which the first n are tokens and the rest
padding. acrobat receives (x, mask) with mask [1, S] = 0 for the first n positions and -10000
after; the oracle instead cuts the sequence to its n tokens (exp(-10000 + s) is exactly 0 in
float32, so both are the same function) and uses standard batched-head attention with the full
[D, D] projection matrices assembled from acrobat's per-head parameter layout:

  for layer l (0-based), head h, i = l * NH + h:
    Wqkv[i] = [Wq_l[:, h*DH:(h+1)*DH] | Wk_l[...] | Wv_l[...]]   ([D, 3*DH]; bqkv likewise)
    Wo[i]   = Wo_l[h*DH:(h+1)*DH, :]                              ([DH, D])
  a  = MultiHead(x) = concat_h(softmax(Q_h K_h^T / sqrt(DH)) V_h) @ Wo_l + bo_l
  h1 = LayerNorm(x + a; ln1_g, ln1_b)            (eps 1e-5)
  y  = LayerNorm(h1 + GELU_tanh(h1 @ W1 + b1) @ W2 + b2; ln2_g, ln2_b)
  logits_l = tanh(y[0:1] @ Wp_l + bp_l) @ Wc_l + bc_l
  exit after layer l if l == L-1 or max(softmax(logits_l)) > THRESHOLD (strictly).

Output: (log_softmax(logits_exit) [1, C], number of layers run, 1..L).

Exit decisions near the threshold: forward() records, per evaluated decision, the margin
|p_max - THRESHOLD| in self.last_margins (the last layer takes no decision). The check treats
an instance whose smallest margin is below TIE_EPS as a near-tie: it is reported by name and
excluded from the exit-layer and value comparison (never silently compared); all others must
have identical exit layers and values within rtol 1e-4 / atol 1e-5.
"""

import json
import math
import random

import torch
import torch.nn.functional as F
from torch import nn

import models
import transformer_parts

NAME = "berxit_padded"
DIMS = {"D": 256, "NH": 4, "FF": 1024, "S": 64, "L": 4, "C": 3}
INPUT_KIND = "json"
THRESHOLD = 0.6       # must equal the literal in models/berxit_padded.acr
TIE_EPS = 1e-4        # decision margins below this are near-ties (see the module docstring)
MASK_NEG = -10000.0   # the additive mask value written into the input file

PARAM_ORDER = ["Wqkv", "bqkv", "Wo", "bo", "ln1_g", "ln1_b", "W1", "b1", "W2", "b2",
               "ln2_g", "ln2_b", "Wp", "bp", "Wc", "bc"]


def _dims(dims):
    return transformer_parts.dims(DIMS, dims, NAME)


class Model(nn.Module):
    PARAM_ORDER = PARAM_ORDER

    def __init__(self, **dims):
        super().__init__()
        d = _dims(dims)
        self.D, self.NH, self.FF, self.S, self.L, self.C = (d[k] for k in ("D", "NH", "FF", "S", "L", "C"))
        self.DH = self.D // self.NH
        D, NH, DH, FF, L, C = self.D, self.NH, self.DH, self.FF, self.L, self.C
        # Shapes as acrobat declares them (indexed params get their count in front; [1, n] -> [n]).
        self.Wqkv = nn.Parameter(torch.empty(L * NH, D, 3 * DH))
        self.bqkv = nn.Parameter(torch.empty(L * NH, 3 * DH))
        self.Wo = nn.Parameter(torch.empty(L * NH, DH, D))
        self.bo = nn.Parameter(torch.empty(L, D))
        self.ln1_g = nn.Parameter(torch.empty(L, D))
        self.ln1_b = nn.Parameter(torch.empty(L, D))
        self.W1 = nn.Parameter(torch.empty(L, D, FF))
        self.b1 = nn.Parameter(torch.empty(L, FF))
        self.W2 = nn.Parameter(torch.empty(L, FF, D))
        self.b2 = nn.Parameter(torch.empty(L, D))
        self.ln2_g = nn.Parameter(torch.empty(L, D))
        self.ln2_b = nn.Parameter(torch.empty(L, D))
        self.Wp = nn.Parameter(torch.empty(L, D, D))
        self.bp = nn.Parameter(torch.empty(L, D))
        self.Wc = nn.Parameter(torch.empty(L, D, C))
        self.bc = nn.Parameter(torch.empty(L, C))
        self.last_margins = []

    def _proj(self, l):
        """Full-width Wq, Wk, Wv [D, D], their biases [D], Wo [D, D] of layer l."""
        NH, DH = self.NH, self.DH
        W = self.Wqkv[l * NH:(l + 1) * NH]          # [NH, D, 3DH]
        b = self.bqkv[l * NH:(l + 1) * NH]          # [NH, 3DH]
        Ws = [torch.cat([W[h, :, j * DH:(j + 1) * DH] for h in range(NH)], dim=1) for j in range(3)]
        bs = [torch.cat([b[h, j * DH:(j + 1) * DH] for h in range(NH)]) for j in range(3)]
        Wo = self.Wo[l * NH:(l + 1) * NH].reshape(NH * DH, self.D)  # heads stacked by rows
        return Ws, bs, Wo

    def attention(self, x, l):
        n = x.shape[0]
        NH, DH = self.NH, self.DH
        (Wq, Wk, Wv), (bq, bk, bv), Wo = self._proj(l)
        q = (x @ Wq + bq).view(n, NH, DH).transpose(0, 1)   # [NH, n, DH]
        k = (x @ Wk + bk).view(n, NH, DH).transpose(0, 1)
        v = (x @ Wv + bv).view(n, NH, DH).transpose(0, 1)
        p = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(DH), dim=-1)   # [NH, n, n]
        ctx = (p @ v).transpose(0, 1).reshape(n, NH * DH)
        return ctx @ Wo + self.bo[l]

    def layer(self, x, l):
        D = self.D
        h = F.layer_norm(x + self.attention(x, l), (D,), self.ln1_g[l], self.ln1_b[l], eps=1e-5)
        f = F.gelu(h @ self.W1[l] + self.b1[l], approximate="tanh") @ self.W2[l] + self.b2[l]
        return F.layer_norm(h + f, (D,), self.ln2_g[l], self.ln2_b[l], eps=1e-5)

    def exit_logits(self, y, l):
        return torch.tanh(y[0:1] @ self.Wp[l] + self.bp[l]) @ self.Wc[l] + self.bc[l]

    def forward(self, instance):
        x, n = instance
        x = x[:n]                        # the padding is masked out in acrobat: drop it here
        self.last_margins = []
        for l in range(self.L):
            x = self.layer(x, l)
            logits = self.exit_logits(x, l)
            if l == self.L - 1:
                break
            pmax = float(torch.softmax(logits, dim=-1).max())
            self.last_margins.append(abs(pmax - THRESHOLD))
            if pmax > THRESHOLD:
                break
        return F.log_softmax(logits, dim=-1), l + 1

    def exit_probs(self, instance):
        """max softmax probability of every layer's classifier (running all L layers)."""
        x, n = instance
        x = x[:n]
        out = []
        for l in range(self.L):
            x = self.layer(x, l)
            out.append(float(torch.softmax(self.exit_logits(x, l), dim=-1).max()))
        return out


# Classifier weight scale by layer: later layers are more confident, so exits spread over layers.
def _wc_gain(l, L):
    return 1.0 + 5.0 * (l + 1) / L


def init_params(model, seed):
    """torch.manual_seed(seed), parameters drawn in PARAM_ORDER. Matrices (per layer/head)
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = rows; biases U(-0.1, 0.1); layer-norm gains
    1 + U(-0.1, 0.1), shifts U(-0.1, 0.1); Wc[l] additionally scaled by 1 + 5 (l + 1) / L."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name in PARAM_ORDER:
            p = getattr(model, name)
            if name.startswith("ln") and name.endswith("_g"):
                p.uniform_(-0.1, 0.1)
                p += 1.0
            elif p.dim() == 2:
                p.uniform_(-0.1, 0.1)
            else:
                bound = 1.0 / math.sqrt(p.shape[1])
                p.uniform_(-bound, bound)
        for l in range(model.L):
            model.Wc[l] *= _wc_gain(l, model.L)
    return model


def make_data(path, count, seed, dims):
    """`count` instances, one JSON line each: [x {"shape": [S, D]}, mask {"shape": [1, S]}].
    Lengths n ~ U{max(1, S/4) .. S}; x ~ N(0, 1) rounded to 4 decimals, padding rows included
    (the mask must hide them); mask = 0 for the first n positions, -10000 after."""
    d = _dims(dims)
    S, D = d["S"], d["D"]
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(count):
            n = rng.randint(max(1, S // 4), S)
            x = [round(rng.gauss(0.0, 1.0), 4) for _ in range(S * D)]
            mask = [0.0] * n + [MASK_NEG] * (S - n)
            f.write(json.dumps([{"shape": [S, D], "data": x}, {"shape": [1, S], "data": mask}]))
            f.write("\n")


def load_instances(path, vocab_path, limit, dims):
    """(x [S, D] float32 tensor, n tokens) per line; vocab_path is unused. limit 0 = all."""
    d = _dims(dims)
    S, D = d["S"], d["D"]
    out = []
    for lineno, (xs, ms) in models.json_lines(path, limit):
        if xs["shape"] != [S, D] or ms["shape"] != [1, S]:
            raise ValueError("%s:%d: expected shapes [%d, %d] and [1, %d], found %s and %s"
                             % (path, lineno, S, D, S, xs["shape"], ms["shape"]))
        mask = ms["data"]
        n = sum(1 for v in mask if v == 0.0)
        if mask != [0.0] * n + [MASK_NEG] * (S - n) or n == 0:
            raise ValueError("%s:%d: the mask is not n zeros (n >= 1) then %g" % (path, lineno, MASK_NEG))
        out.append((torch.tensor(xs["data"], dtype=torch.float32).view(S, D), n))
    return out
