"""Oracle for models/stackrnn.acr: a shift-reduce parser with a stack RNN over SST sentences.

Instance: the sentence's word ids (the tree's leaves, left to right; acrobat input sst-tokens).
State: a stack of phrases (h, c), the buffer of unread words, an action state s (from 0).
Each step takes one action a (0 SHIFT, 1 REDUCE):
  * buffer empty, one phrase on the stack: done;
  * buffer empty, >= 2 phrases: REDUCE (forced);
  * < 2 phrases, words left: SHIFT (forced);
  * otherwise a = argmax([top.h, second.h, emb[buffer head], s] @ W_act + b_act) (first index on a
    tie), a decision with margin |logit0 - logit1| (recorded in self.margins);
SHIFT pushes leaf(w): (i, o, u) = split(emb[w] @ W_leaf + b_leaf), c = σ(i)·tanh(u),
h = σ(o)·tanh(c). REDUCE pops r (top) and l (second) and pushes the Tree-LSTM node
(i, fl, fr, o, u) = split([hl, hr] @ U_node + b_node), c = σ(i)·tanh(u) + σ(fl)·cl + σ(fr)·cr,
h = σ(o)·tanh(c). After every action s = tanh(act[a] + top.h @ W_sx + s @ W_ss).
Output: (log_softmax([h_final, s_final] @ W_out + b_out), [actions in order]).
"""

import torch
import torch.nn.functional as F
from torch import nn

import models
import sst

NAME = "stackrnn"
DIMS = {"H": 256, "E": None, "V": 21702, "C": 5}  # E follows H unless set; V = vocabulary size
INPUT_KIND = "sst-tokens"

SHIFT, REDUCE = 0, 1


class Model(nn.Module):
    PARAM_ORDER = ["emb", "W_leaf", "b_leaf", "U_node", "b_node", "W_act", "b_act", "act", "W_sx", "W_ss",
                   "W_out", "b_out"]

    def __init__(self, H=256, E=None, V=21702, C=5):
        super().__init__()
        E = H if E is None else E
        self.H, self.E, self.V, self.C = H, E, V, C
        shapes = {"emb": (V, E), "W_leaf": (E, 3 * H), "b_leaf": (3 * H,), "U_node": (2 * H, 5 * H),
                  "b_node": (5 * H,), "W_act": (3 * H + E, 2), "b_act": (2,), "act": (2, H), "W_sx": (H, H),
                  "W_ss": (H, H), "W_out": (2 * H, C), "b_out": (C,)}
        for n in self.PARAM_ORDER:
            setattr(self, n, nn.Parameter(torch.empty(*shapes[n])))
        self.margins = []  # margin of every argmax decision (the harness empties it per instance)
        self.rows = None  # tables() while loss() runs

    def word(self, w):
        # The embedding row: a separate tensor of tables() while a loss is differentiated (one [V, E]
        # gradient instead of one per lookup).
        return self.emb[w : w + 1] if self.rows is None else self.rows[w].unsqueeze(0)

    def leaf(self, w):
        i, o, u = torch.split(self.word(w) @ self.W_leaf + self.b_leaf, self.H, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def node(self, l, r):
        (hl, cl), (hr, cr) = l, r
        i, fl, fr, o, u = torch.split(torch.cat([hl, hr], dim=1) @ self.U_node + self.b_node, self.H, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(self, words):
        stack, buf, pos = [], list(words), 0
        s = torch.zeros(1, self.H, dtype=self.emb.dtype)
        actions = []
        while True:
            if pos == len(buf):
                if len(stack) < 2:
                    break
                a = REDUCE
            elif len(stack) < 2:
                a = SHIFT
            else:
                feats = torch.cat([stack[-1][0], stack[-2][0], self.word(buf[pos]), s], dim=1)
                logits = (feats @ self.W_act + self.b_act)[0]
                a = SHIFT if logits[0] >= logits[1] else REDUCE
                self.margins.append(abs(float(logits[0]) - float(logits[1])))
            if a == SHIFT:
                stack.append(self.leaf(buf[pos]))
                pos += 1
            else:
                r = stack.pop()
                l = stack.pop()
                stack.append(self.node(l, r))
            actions.append(a)
            s = torch.tanh(self.act[a : a + 1] + stack[-1][0] @ self.W_sx + s @ self.W_ss)
        h = stack[0][0] if stack else torch.zeros(1, self.H, dtype=self.emb.dtype)
        return F.log_softmax(torch.cat([h, s], dim=1) @ self.W_out + self.b_out, dim=1), actions

    def tables(self):
        return torch.unbind(self.emb)

    def loss(self, words, rows=None):
        """The training loss (acrobat's `loss` entry): the cross-entropy of the prediction against
        the sentence's label (words: models.LabelledWords), the actions as taken."""
        self.rows = rows
        try:
            return -self.forward(words)[0][0, words.label]
        finally:
            self.rows = None


def init_params(model, seed=0):
    """torch.manual_seed(seed), parameters drawn in PARAM_ORDER: emb ~ N(0, 0.5), act ~ N(0, 0.5),
    W_act ~ U(-0.5, 0.5) (large, so that decisions depend on the features and are rarely near ties),
    other matrices U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the first dim, biases U(-0.1, 0.1)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for n in model.PARAM_ORDER:
            p = getattr(model, n)
            if n == "W_act":
                p.uniform_(-0.5, 0.5)
            else:
                models.init_tensor(p, embedding=n in ("emb", "act"))
    return model


def load_instances(path, vocab_path, limit, dims):
    vocab, V = sst.load_vocab(vocab_path)
    if V != dims["V"]:
        raise ValueError("vocabulary %s has %d words but V = %d" % (vocab_path, V, dims["V"]))
    return [models.LabelledWords([leaf.wid for leaf in sst.index_tree(t, vocab).leaves()], t.label)
            for t in sst.load_trees(path, limit)]
