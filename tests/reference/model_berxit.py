"""Oracle for models/berxit.acr: an early-exit transformer encoder (BERxiT / DeeBERT style) on
ragged sequences: a sentence as token ids, embedded and positioned, every layer on its own n
tokens (no padding, no mask).

Written from the mathematical description in plain eager PyTorch, one instance at a time.
Row-vector convention (x @ W, W stored [in, out]), float32:

  x0 = emb[ids] + pos[:n]                                         ([n, D])
  for layer l (0-based):
    q, k, v = split(x @ Wqkv[l] + bqkv[l], 3); head h: columns [h * DH, (h + 1) * DH)
    a  = concat_h(softmax(q_h k_h^T / sqrt(DH)) v_h) @ Wo[l] + bo[l]
    h1 = LayerNorm(x + a; ln1_g[l], ln1_b[l])                      (eps 1e-5)
    x  = LayerNorm(h1 + GELU_tanh(h1 @ W1[l] + b1[l]) @ W2[l] + b2[l]; ln2_g[l], ln2_b[l])
    logits_l = tanh(x[0:1] @ Wp[l] + bp[l]) @ Wc[l] + bc[l]
    exit after layer l if l == L-1 or max(softmax(logits_l)) > THRESHOLD (strictly).

Output: (log_softmax(logits_exit) [1, C], number of layers run, 1..L). Decisions near the
threshold are recorded as in model_berxit_padded.py (last_margins, TIE_EPS).

`run_batched` is the PyTorch baseline a careful user writes for a batch: the active instances
padded to their longest with a key-padding mask, one batched layer at a time, the exited instances
dropped after each layer (bench/berxit_ragged.py times it).
"""

import json
import math
import os
import random

import torch
import torch.nn.functional as F
from torch import nn

import models
import transformer_parts
import sst

NAME = "berxit"
DIMS = {"D": 256, "NH": 4, "FF": 1024, "L": 4, "C": 3, "V": 21702, "P": 512}
INPUT_KIND = "sst-tokens"
LOSS_INPUT_KIND = "json"  # the loss entry reads lines [y, ids] (make_loss_data)
THRESHOLD = 0.6       # must equal the literal in models/berxit.acr
TIE_EPS = 1e-4        # decision margins below this are near-ties

PARAM_ORDER = ["emb", "pos", "Wqkv", "bqkv", "Wo", "bo", "ln1_g", "ln1_b", "W1", "b1", "W2", "b2",
               "ln2_g", "ln2_b", "Wp", "bp", "Wc", "bc"]


def _dims(dims):
    return transformer_parts.dims(DIMS, dims, NAME)


class Model(nn.Module):
    PARAM_ORDER = PARAM_ORDER

    def __init__(self, **dims):
        super().__init__()
        d = _dims(dims)
        self.D, self.NH, self.FF, self.L, self.C, self.V, self.P = (d[k] for k in ("D", "NH", "FF", "L", "C", "V", "P"))
        self.DH = self.D // self.NH
        D, FF, L, C = self.D, self.FF, self.L, self.C
        # Shapes as acrobat declares them (indexed params get their count in front; [1, n] -> [n]).
        self.emb = nn.Parameter(torch.empty(self.V, D))
        self.pos = nn.Parameter(torch.empty(self.P, D))
        self.Wqkv = nn.Parameter(torch.empty(L, D, 3 * D))
        self.bqkv = nn.Parameter(torch.empty(L, 3 * D))
        self.Wo = nn.Parameter(torch.empty(L, D, D))
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

    def embed(self, ids):
        return self.emb[torch.tensor(ids, dtype=torch.long)] + self.pos[:len(ids)]

    def layer(self, x, l):
        n, D, NH, DH = x.shape[0], self.D, self.NH, self.DH
        q, k, v = (x @ self.Wqkv[l] + self.bqkv[l]).split(D, dim=1)
        q = q.view(n, NH, DH).transpose(0, 1)
        k = k.view(n, NH, DH).transpose(0, 1)
        v = v.view(n, NH, DH).transpose(0, 1)
        p = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(DH), dim=-1)
        a = (p @ v).transpose(0, 1).reshape(n, D) @ self.Wo[l] + self.bo[l]
        h = F.layer_norm(x + a, (D,), self.ln1_g[l], self.ln1_b[l], eps=1e-5)
        f = F.gelu(h @ self.W1[l] + self.b1[l], approximate="tanh") @ self.W2[l] + self.b2[l]
        return F.layer_norm(h + f, (D,), self.ln2_g[l], self.ln2_b[l], eps=1e-5)

    def exit_logits(self, y, l):
        return torch.tanh(y[0:1] @ self.Wp[l] + self.bp[l]) @ self.Wc[l] + self.bc[l]

    def forward(self, ids):
        x = self.embed(ids)
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

    def tables(self):
        return None  # emb is indexed by a tensor of ids: autograd gives its rows

    def loss(self, inst, rows=None):
        """The training loss (acrobat's `loss` entry): the cross-entropy of the exit classifier's
        prediction against inst.label (a LabelledIds), the exit as taken."""
        return -self.forward(inst)[0][0, inst.label]

    # ---- the hand-batched PyTorch baseline ----

    def batched_layer(self, x, mask, l):
        """Layer l on a padded batch x [B, T, D] with key-padding mask [B, T] (True = padding)."""
        B, T, D, NH, DH = x.shape[0], x.shape[1], self.D, self.NH, self.DH
        q, k, v = (x @ self.Wqkv[l] + self.bqkv[l]).split(D, dim=2)
        q = q.view(B, T, NH, DH).transpose(1, 2)  # [B, NH, T, DH]
        k = k.view(B, T, NH, DH).transpose(1, 2)
        v = v.view(B, T, NH, DH).transpose(1, 2)
        s = q @ k.transpose(2, 3) / math.sqrt(DH)
        s = s.masked_fill(mask[:, None, None, :], float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, D) @ self.Wo[l] + self.bo[l]
        h = F.layer_norm(x + a, (D,), self.ln1_g[l], self.ln1_b[l], eps=1e-5)
        f = F.gelu(h @ self.W1[l] + self.b1[l], approximate="tanh") @ self.W2[l] + self.b2[l]
        return F.layer_norm(h + f, (D,), self.ln2_g[l], self.ln2_b[l], eps=1e-5)

    def run_batched(self, batch):
        """The batch's outputs, in order: the active instances padded to their longest, a layer at a
        time, and the instances that exit dropped (and the rest re-padded to their longest)."""
        out = [None] * len(batch)
        active = list(range(len(batch)))
        xs = [self.embed(ids) for ids in batch]
        for l in range(self.L):
            x = nn.utils.rnn.pad_sequence([xs[i] for i in active], batch_first=True)
            lens = torch.tensor([xs[i].shape[0] for i in active])
            mask = torch.arange(x.shape[1])[None, :] >= lens[:, None]
            y = self.batched_layer(x, mask, l)
            logits = torch.tanh(y[:, 0] @ self.Wp[l] + self.bp[l]) @ self.Wc[l] + self.bc[l]  # [B, C]
            done = torch.ones(len(active), dtype=torch.bool) if l == self.L - 1 else \
                torch.softmax(logits, dim=-1).max(dim=-1).values > THRESHOLD
            still = []
            for j, i in enumerate(active):
                if done[j]:
                    out[i] = (F.log_softmax(logits[j:j + 1], dim=-1), l + 1)
                else:
                    xs[i] = y[j, :xs[i].shape[0]]
                    still.append(i)
            active = still
            if not active:
                break
        return out


# Classifier weight scale by layer: later layers are more confident, so exits spread over layers.
def _wc_gain(l, L):
    return 1.0 + 5.0 * (l + 1) / L


def init_params(model, seed):
    """torch.manual_seed(seed), parameters drawn in PARAM_ORDER: emb and pos N(0, 1) * 0.5;
    matrices (per layer) U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = rows; biases U(-0.1, 0.1);
    layer-norm gains 1 + U(-0.1, 0.1), shifts U(-0.1, 0.1); Wc[l] additionally scaled by
    1 + 5 (l + 1) / L."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name in PARAM_ORDER:
            p = getattr(model, name)
            if name in ("emb", "pos"):
                p.normal_(0.0, 0.5)
            elif name.startswith("ln") and name.endswith("_g"):
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


# Lengths of the synthetic instances: the extremes first (1 and P = 512 tokens, two length-1
# instances side by side), then lengths drawn from 1..512 favouring short ones.
FIXED_LENGTHS = [1, 512, 1, 2, 3, 64, 65, 127, 255, 17]


def _balanced(words, lo, hi):
    """A balanced binary PTB tree over words[lo:hi] (its leaves, left to right)."""
    if hi - lo == 1:
        return "(2 %s)" % words[lo]
    mid = (lo + hi) // 2
    return "(2 %s %s)" % (_balanced(words, lo, mid), _balanced(words, mid, hi))


def make_data(path, count, seed, dims):
    """`count` sentences as PTB trees (what sst-tokens reads): FIXED_LENGTHS, then lengths from
    1..P, words drawn from data/sst/vocab.txt (the repository's, beside this module), balanced trees
    so that no tree is deep."""
    d = _dims(dims)
    vocab_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "sst", "vocab.txt")
    words = [w for w in sst.load_vocab(vocab_path)[0] if w != "<unk>" and "(" not in w and ")" not in w]
    rng = random.Random(seed)
    lengths = FIXED_LENGTHS[:count]
    while len(lengths) < count:
        lengths.append(min(d["P"], max(1, int(rng.expovariate(1.0 / 40.0)) + 1)))
    with open(path, "w", encoding="utf-8") as f:
        for n in lengths:
            f.write(_balanced([rng.choice(words) for _ in range(n)], 0, n) + "\n")


class LabelledIds(list):
    """An instance (the token ids forward reads) with its label (its loss)."""

    def __init__(self, ids, label):
        super().__init__(ids)
        self.label = label


def make_loss_data(path, count, seed, dims):
    """`count` lines [y, ids] for the loss entry: ids of the lengths make_data gives (FIXED_LENGTHS,
    then drawn from 1..P), each id uniform in [0, V); y a one-hot [[...]] of a label drawn uniformly
    from the C classes."""
    d = _dims(dims)
    rng = random.Random(seed)
    lengths = FIXED_LENGTHS[:count]
    while len(lengths) < count:
        lengths.append(min(d["P"], max(1, int(rng.expovariate(1.0 / 40.0)) + 1)))
    with open(path, "w") as f:
        for n in lengths:
            y = [0.0] * d["C"]
            y[rng.randrange(d["C"])] = 1.0
            f.write(json.dumps([[y], [rng.randrange(d["V"]) for _ in range(n)]]) + "\n")


def load_loss_instances(path, vocab_path, limit, dims):
    d = _dims(dims)
    out = []
    for k, line in models.json_lines(path, limit):
        if not (isinstance(line, list) and len(line) == 2 and isinstance(line[1], list)):
            raise ValueError("%s:%d: expected [y, ids]" % (path, k))
        y, ids = line
        for w in ids:
            if not isinstance(w, int) or not 0 <= w < d["V"]:
                raise ValueError("%s:%d: token %r out of range [0, %d)" % (path, k, w, d["V"]))
        out.append(LabelledIds(ids, y[0].index(1.0)))
    return out


def load_instances(path, vocab_path, limit, dims):
    """The leaves' word ids of each SST tree (what acrobat's sst-tokens input gives)."""
    vocab, V = sst.load_vocab(vocab_path)
    if V != dims["V"]:
        raise ValueError("vocabulary %s has %d words but V = %d" % (vocab_path, V, dims["V"]))
    return [[leaf.wid for leaf in sst.index_tree(t, vocab).leaves()] for t in sst.load_trees(path, limit)]
