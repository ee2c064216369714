"""What the transformer oracles share (model_encoder, model_berxit, model_berxit_padded, model_gpt,
model_translate): their dims' check, multi-head attention, the initialisation of the generation
models and their synthetic instances."""

import json
import math
import random

import torch

import models


def dims(defaults, given, name):
    """The model's dims: `defaults` with `given` over them. The acrobat models hard-code the
    attention scale 1/sqrt(64) = 0.125, so D / NH must be 64."""
    d = dict(defaults)
    d.update(given or {})
    if d["D"] % d["NH"] != 0 or d["D"] // d["NH"] != 64:
        raise ValueError("%s needs D / NH = 64 (the model's attention scale is 0.125)" % name)
    return d


def attention(q, k, v, NH, causal=False):
    """Query rows q [m, D] against keys and values [t, D], head by head (head h: columns
    [h * DH, (h + 1) * DH)), scale 1/sqrt(DH); causal: query i, the last m positions' i-th, sees
    keys 0..t - m + i."""
    m, t, D = q.shape[0], k.shape[0], q.shape[1]
    DH = D // NH
    qh = q.view(m, NH, DH).transpose(0, 1)
    kh = k.view(t, NH, DH).transpose(0, 1)
    vh = v.view(t, NH, DH).transpose(0, 1)
    s = qh @ kh.transpose(1, 2) * (1.0 / math.sqrt(DH))
    if causal:
        mask = torch.arange(t)[None, :] > (torch.arange(m)[:, None] + (t - m))
        s = s.masked_fill(mask[None], float("-inf"))
    return (torch.softmax(s, dim=-1) @ vh).transpose(0, 1).reshape(m, D)


def init_generation(model, seed, embeddings):
    """torch.manual_seed(seed), parameters drawn in model.PARAM_ORDER: the `embeddings` (token and
    position tables) N(0, 1) * 0.5; layer-norm gains (a name whose last part, after any e_/d_/c_,
    holds "ln" and ends in _g) 1 + U(-0.1, 0.1), other layer-norm and bias vectors U(-0.1, 0.1);
    per-layer matrices U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = rows; the output projection
    Wout U(-3/sqrt(D), 3/sqrt(D)) (confident choices, so that near ties are rare)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name in model.PARAM_ORDER:
            p = getattr(model, name)
            base = name[2:] if name[:2] in ("e_", "d_", "c_") else name
            if name in embeddings:
                p.normal_(0.0, 0.5)
            elif "ln" in base and base.endswith("_g"):
                p.uniform_(-0.1, 0.1)
                p += 1.0
            elif name == "Wout":
                bound = 3.0 / math.sqrt(p.shape[0])
                p.uniform_(-bound, bound)
            elif p.dim() == 3:
                bound = 1.0 / math.sqrt(p.shape[1])
                p.uniform_(-bound, bound)
            else:
                p.uniform_(-0.1, 0.1)
    return model


# Generation instances: inputs of 1 to 512 tokens and budgets of 1 to 256 new tokens, the extremes
# first, then lengths favouring short ones.
FIXED = [(1, 1), (512, 8), (1, 256), (2, 3), (3, 40), (64, 17), (65, 2), (127, 31), (255, 5), (17, 64)]


def write_generation_data(path, count, seed, V, avoid=None):
    """`count` lines [token ids, max_new], ids uniform in [0, V) (without `avoid`, an end token
    only generation may give)."""
    rng = random.Random(seed)
    shape = FIXED[:count]
    while len(shape) < count:
        shape.append((min(512, max(1, int(rng.expovariate(1.0 / 40.0)) + 1)),
                      min(256, max(1, int(rng.expovariate(1.0 / 24.0)) + 1))))
    with open(path, "w") as f:
        for n, max_new in shape:
            if avoid is None:
                ids = [rng.randrange(V) for _ in range(n)]
            else:
                ids = [w if w < avoid else w + 1 for w in (rng.randrange(V - 1) for _ in range(n))]
            f.write(json.dumps([ids, max_new]) + "\n")


def check_generation(path, lineno, inst, V, P, fits):
    """(ids, max_new) from the line's [ids, max_new, ...]; `fits(n, max_new)`: whether the
    instance's positions fit P."""
    if not (isinstance(inst, list) and len(inst) >= 2 and isinstance(inst[0], list) and inst[0]
            and isinstance(inst[1], int) and inst[1] >= 1):
        raise ValueError("%s:%d: expected [token ids, max_new >= 1]" % (path, lineno))
    if any(not isinstance(w, int) or not 0 <= w < V for w in inst[0]):
        raise ValueError("%s:%d: a token id out of range [0, %d)" % (path, lineno, V))
    if not fits(len(inst[0]), inst[1]):
        raise ValueError("%s:%d: more positions than P = %d" % (path, lineno, P))
    return inst[0], inst[1]


def load_generation(path, limit, V, P, fits):
    """(ids, max_new) per line (check_generation)."""
    out = []
    for lineno, inst in models.json_lines(path, limit):
        if not (isinstance(inst, list) and len(inst) == 2):
            raise ValueError("%s:%d: expected [token ids, max_new >= 1]" % (path, lineno))
        out.append(check_generation(path, lineno, inst, V, P, fits))
    return out
