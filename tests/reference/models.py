"""Plain eager PyTorch implementations of the acrobat test models (the oracle).

Written from the model descriptions only, independently of acrobat. Row-vector convention:
activations are [1, n] rows, a linear map is x @ W with W stored [in, out]. All float32.

  treelstm  binary Tree-LSTM over the SST parse tree
  mvrnn     matrix-vector RNN (Socher et al. 2012) over the SST parse tree
  birnn     bidirectional tanh RNN over the sentence's words

Each model: forward(instance) -> [1, C] log-probabilities, where the instance is an SST Tree with
`wid` set on its leaves (sst.index_tree) for treelstm/mvrnn and a list of word ids for birnn
(see make_instance). Parameters are registered in the order of PARAM_ORDER, which is also the
order in which init_params draws them from the global torch RNG.
"""

import json
import math

import torch
import torch.nn.functional as F
from torch import nn


def node_loss_sum(tree, cell, scores):
    """The loss of the tree models: at every node the cross-entropy of log_softmax(scores(vector))
    against the node's sentiment label, summed over the nodes. cell(t, kids) is a node's (vector, ...)
    from its children's (kids None at a leaf)."""
    terms = []

    def rec(t):
        out = cell(t, None if t.is_leaf else (rec(t.left), rec(t.right)))
        terms.append(-F.log_softmax(scores(out[0]), dim=1)[0, t.label])
        return out

    rec(tree)
    return torch.stack(terms).sum()


class TreeLSTM(nn.Module):
    PARAM_ORDER = ["emb", "W_leaf", "b_leaf", "U_node", "b_node", "W_out", "b_out"]

    def __init__(self, V, H=256, E=None, C=5):
        super().__init__()
        E = H if E is None else E
        self.V, self.H, self.E, self.C = V, H, E, C
        self.emb = nn.Parameter(torch.empty(V, E))
        self.W_leaf = nn.Parameter(torch.empty(E, 3 * H))
        self.b_leaf = nn.Parameter(torch.empty(3 * H))
        self.U_node = nn.Parameter(torch.empty(2, H, 5 * H))  # [0]: the left child's, [1]: the right's
        self.b_node = nn.Parameter(torch.empty(5 * H))
        self.W_out = nn.Parameter(torch.empty(H, C))
        self.b_out = nn.Parameter(torch.empty(C))

    def leaf(self, wid, rows=None):
        # rows: the embedding's rows as separate tensors (torch.unbind), so that differentiating
        # many lookups builds one [V, E] gradient instead of one per lookup.
        x = self.emb[wid : wid + 1] if rows is None else rows[wid].unsqueeze(0)  # [1, E]
        i, o, u = torch.split(x @ self.W_leaf + self.b_leaf, self.H, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c

    def node(self, left, right):
        hl, cl = left
        hr, cr = right
        gates = hl @ self.U_node[0] + hr @ self.U_node[1] + self.b_node
        i, fl, fr, o, u = torch.split(gates, self.H, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c

    def rec(self, tree):
        if tree.is_leaf:
            return self.leaf(tree.wid)
        return self.node(self.rec(tree.left), self.rec(tree.right))

    def forward(self, tree):
        h, _ = self.rec(tree)
        return F.log_softmax(h @ self.W_out + self.b_out, dim=1)

    def tables(self):
        return torch.unbind(self.emb)

    def loss(self, tree, rows=None):
        """The training loss (acrobat's `loss` entry): node_loss_sum. `rows`: tables()."""
        return node_loss_sum(tree, lambda t, kids: self.leaf(t.wid, rows) if kids is None else self.node(*kids),
                             lambda h: h @ self.W_out + self.b_out)


class MVRNN(nn.Module):
    PARAM_ORDER = ["emb", "wmat", "W", "b", "WM", "W_out", "b_out"]

    def __init__(self, V, H=64, VM=512, C=5):
        super().__init__()
        self.V, self.H, self.VM, self.C = V, H, VM, C
        self.emb = nn.Parameter(torch.empty(V, H))
        self.wmat = nn.Parameter(torch.empty(VM, H, H))
        self.W = nn.Parameter(torch.empty(2 * H, H))
        self.b = nn.Parameter(torch.empty(H))
        self.WM = nn.Parameter(torch.empty(H, 2 * H))
        self.W_out = nn.Parameter(torch.empty(H, C))
        self.b_out = nn.Parameter(torch.empty(C))

    def leaf(self, wid, rows=None):
        # rows: (emb rows, wmat matrices) as separate tensors (tables()), as for TreeLSTM.leaf.
        if rows is not None:
            return rows[0][wid].unsqueeze(0), rows[1][wid % self.VM]
        return self.emb[wid : wid + 1], self.wmat[wid % self.VM]  # [1, H], [H, H]

    def node(self, left, right):
        a, A = left
        b, B = right
        p = torch.tanh(torch.cat([a @ B, b @ A], dim=1) @ self.W + self.b)  # [1, H]
        P = self.WM @ torch.cat([A, B], dim=0)  # [H, 2H] @ [2H, H] -> [H, H]
        return p, P

    def rec(self, tree):
        if tree.is_leaf:
            return self.leaf(tree.wid)
        return self.node(self.rec(tree.left), self.rec(tree.right))

    def forward(self, tree):
        p, _ = self.rec(tree)
        return F.log_softmax(p @ self.W_out + self.b_out, dim=1)

    def tables(self):
        return torch.unbind(self.emb), torch.unbind(self.wmat)

    def loss(self, tree, rows=None):
        """The training loss (acrobat's `loss` entry): node_loss_sum. `rows`: tables()."""
        return node_loss_sum(tree, lambda t, kids: self.leaf(t.wid, rows) if kids is None else self.node(*kids),
                             lambda p: p @ self.W_out + self.b_out)


class BiRNN(nn.Module):
    PARAM_ORDER = ["emb", "Wf_x", "Wf_h", "b_f", "Wb_x", "Wb_h", "b_b", "W_out", "b_out"]

    def __init__(self, V, H=256, E=None, C=5):
        super().__init__()
        E = H if E is None else E
        self.V, self.H, self.E, self.C = V, H, E, C
        self.emb = nn.Parameter(torch.empty(V, E))
        self.Wf_x = nn.Parameter(torch.empty(E, H))
        self.Wf_h = nn.Parameter(torch.empty(H, H))
        self.b_f = nn.Parameter(torch.empty(H))
        self.Wb_x = nn.Parameter(torch.empty(E, H))
        self.Wb_h = nn.Parameter(torch.empty(H, H))
        self.b_b = nn.Parameter(torch.empty(H))
        self.W_out = nn.Parameter(torch.empty(2 * H, C))
        self.b_out = nn.Parameter(torch.empty(C))

    def run(self, wids, W_x, W_h, b, rows=None):
        h = torch.zeros(1, self.H, dtype=self.emb.dtype)
        for w in wids:
            x = self.emb[w : w + 1] if rows is None else rows[w].unsqueeze(0)
            h = torch.tanh(x @ W_x + h @ W_h + b)
        return h

    def forward(self, wids, rows=None):
        hf = self.run(wids, self.Wf_x, self.Wf_h, self.b_f, rows)
        hb = self.run(list(reversed(wids)), self.Wb_x, self.Wb_h, self.b_b, rows)
        return F.log_softmax(torch.cat([hf, hb], dim=1) @ self.W_out + self.b_out, dim=1)

    def tables(self):
        return torch.unbind(self.emb)

    def loss(self, words, rows=None):
        """The training loss (acrobat's `loss` entry): the cross-entropy of the prediction against
        the sentence's label (words: LabelledWords). `rows`: tables()."""
        return -self.forward(words, rows)[0, words.label]


# name -> (class, default dims). E defaults to H when not set explicitly.
MODELS = {
    "treelstm": (TreeLSTM, {"H": 256, "E": None, "C": 5}),
    "mvrnn": (MVRNN, {"H": 64, "VM": 512, "C": 5}),
    "birnn": (BiRNN, {"H": 256, "E": None, "C": 5}),
}

# acrobat's --input kind for each model
INPUT_KIND = {"treelstm": "sst", "mvrnn": "sst", "birnn": "sst-tokens"}


def parse_sets(sets):
    """['H=512', 'E=128,C=5'] -> {'H': 512, 'E': 128, 'C': 5}."""
    out = {}
    for s in sets or []:
        for item in s.split(","):
            item = item.strip()
            if not item:
                continue
            k, sep, v = item.partition("=")
            if not sep:
                raise ValueError("--set expects KEY=VALUE, got %r" % item)
            out[k.strip()] = int(v)
    return out


def resolve_dims(name, overrides):
    """Default dims of `name` updated with `overrides`; derived E = H unless E was set."""
    if name not in MODELS:
        raise ValueError("unknown model %r (expected one of %s)" % (name, ", ".join(MODELS)))
    dims = dict(MODELS[name][1])
    for k, v in overrides.items():
        if k not in dims:
            raise ValueError("model %s has no dim %r (dims: %s)" % (name, k, ", ".join(dims)))
        if v <= 0:
            raise ValueError("dim %s must be positive, got %d" % (k, v))
        dims[k] = v
    if "E" in dims and dims["E"] is None:
        dims["E"] = dims["H"]
    return dims


def build_model(name, V, dims):
    cls = MODELS[name][0]
    return cls(V, **dims)


def init_tensor(p, embedding=False):
    """The default draw of one parameter from the global torch RNG (under torch.no_grad()): an
    embedding table ~ N(0, 0.5), a bias (1-D) ~ U(-0.1, 0.1), a matrix ~ U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) with fan_in its first dim (each matrix's, for a stack of them). The model
    modules share it."""
    if embedding:
        p.normal_(0.0, 0.5)
    elif p.dim() == 1:
        p.uniform_(-0.1, 0.1)
    else:
        bound = 1.0 / math.sqrt(p.shape[-2])
        p.uniform_(-bound, bound)


def json_lines(path, limit):
    """(line number, parsed value) for each non-blank line of a JSON-lines file, at most `limit`
    of them (0: all). For the model modules' load_instances."""
    count = 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if limit and count >= limit:
                return
            count += 1
            yield lineno, json.loads(line)


def init_params(model, seed=0):
    """Deterministic initialisation from torch.manual_seed(seed), drawing parameters in
    PARAM_ORDER with init_tensor (emb as an embedding). MV-RNN: wmat[i] = I + U(-0.05, 0.05) and
    WM = 0.5 * [I, I] + U(-0.01, 0.01)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name in model.PARAM_ORDER:
            p = getattr(model, name)
            if isinstance(model, MVRNN) and name == "wmat":
                p.uniform_(-0.05, 0.05)
                p += torch.eye(model.H)  # broadcast over the VM matrices
            elif isinstance(model, MVRNN) and name == "WM":
                p.uniform_(-0.01, 0.01)
                eye = torch.eye(model.H)
                p += 0.5 * torch.cat([eye, eye], dim=1)
            else:
                init_tensor(p, embedding=name == "emb")
    return model


def state_tensors(model):
    """{param name: float32 tensor} in the safetensors naming."""
    return {n: getattr(model, n).detach().clone().contiguous() for n in model.PARAM_ORDER}


def load_tensors(model, tensors):
    """Copies tensors (e.g. read from safetensors) into the model, checking names and shapes."""
    missing = [n for n in model.PARAM_ORDER if n not in tensors]
    extra = [n for n in tensors if n not in model.PARAM_ORDER]
    if missing or extra:
        raise ValueError("parameter mismatch: missing %s, unexpected %s" % (missing, extra))
    with torch.no_grad():
        for n in model.PARAM_ORDER:
            p = getattr(model, n)
            t = tensors[n]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError("%s: shape %s, expected %s" % (n, tuple(t.shape), tuple(p.shape)))
            p.copy_(t.to(p.dtype))
    return model


class LabelledWords(list):
    """A sentence's word ids (the list birnn's forward reads) with the root's label (its loss)."""

    def __init__(self, wids, label):
        super().__init__(wids)
        self.label = label


def make_instance(name, tree):
    """The model input for one (indexed) SST tree: the tree itself, or its leaf ids (and its label)
    for birnn."""
    if name == "birnn":
        return LabelledWords([leaf.wid for leaf in tree.leaves()], tree.label)
    return tree
