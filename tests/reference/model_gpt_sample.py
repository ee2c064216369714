"""Oracle for models/gpt.acr's `sampled` entry: the decoder of model_gpt.py generating by drawing
each token instead of taking the likeliest.

An instance is [prompt, max_new, seed]. The token drawn when the budget has r tokens left (this one
included: r = max_new for the first) comes from softmax(LNf(x) @ Wout) by acrobat's `sample` rule,
written here from its description (docs/language.md): u in [0, 1) from splitmix64 of seed + r (its top
53 bits), the weights exp(logit_j - max) in float64, and the first index whose cumulative weight,
left to right, exceeds u times their sum. Margins (tests/reference/README.md, "Decisions"), in the
units of the logits: the smallest change of the logits (the largest change of any one) that moves
a cumulative share C on either side of the drawn index onto u. A change d of the logits moves C by
sum_j p_j d_j (1[j in C] - C), at most 2 C (1 - C) max|d_j|, so a gap g between C and u needs
max|d_j| >= g / (2 C (1 - C)).
"""

import json
import math
import random

import torch.nn.functional as F

import model_gpt
import models
import transformer_parts

NAME = "gpt_sample"
SOURCE = "gpt"
ENTRY = "sampled"
DIMS = model_gpt.DIMS
INPUT_KIND = "json"

init_params = model_gpt.init_params

MASK = (1 << 64) - 1


def uniform(seed):
    """splitmix64's first output for `seed` (an int64, as unsigned), as a double in [0, 1)."""
    z = (seed + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return (z >> 11) * 2.0 ** -53


class Model(model_gpt.Model):
    def draw(self, row, seed):
        logits = (F.layer_norm(row, (self.D,), self.lnf_g, self.lnf_b, eps=1e-5) @ self.Wout)[0]
        values = [float(v) for v in logits.tolist()]
        top = max(values)
        weights = [math.exp(v - top) for v in values]
        total = sum(weights)
        target = uniform(seed) * total
        def needed(c):  # the logit change that moves share c onto u
            share = c / total
            spread = 2 * share * (1 - share)
            return abs(c - target) / total / spread if spread > 0 else math.inf

        cumulative = 0.0
        for k, w in enumerate(weights):
            before = cumulative
            cumulative += w
            if cumulative > target:
                self.margins.append(min(needed(before), needed(cumulative)))
                return k
        return len(weights) - 1

    def forward(self, instance):
        prompt, max_new, seed = instance
        return self.generate(prompt, max_new, lambda row, left: self.draw(row, seed + left))


def make_data(path, count, seed, dims):
    """model_gpt's instances, each with a seed in [0, 2^40) after it."""
    model_gpt.make_data(path, count, seed, dims)
    rng = random.Random(seed + 1)
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    with open(path, "w") as f:
        for prompt, max_new in lines:
            f.write(json.dumps([prompt, max_new, rng.randrange(1 << 40)]) + "\n")


def load_instances(path, vocab_path, limit, dims):
    """(prompt, max_new, seed) per line; the prompt and its budget as model_gpt's."""
    d = transformer_parts.dims(DIMS, dims, NAME)
    out = []
    for lineno, inst in models.json_lines(path, limit):
        if not (isinstance(inst, list) and len(inst) == 3 and isinstance(inst[2], int)):
            raise ValueError("%s:%d: expected [token ids, max_new, seed]" % (path, lineno))
        prompt, max_new = transformer_parts.check_generation(path, lineno, inst, d["V"], d["P"],
                                                             lambda n, new: n + new <= d["P"])
        out.append((prompt, max_new, inst[2]))
    return out
