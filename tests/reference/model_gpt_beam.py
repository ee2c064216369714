"""Oracle for models/gpt.acr's `beam` entry: beam search over the decoder of model_gpt.py.

Written from the description of the search, in plain eager PyTorch, one instance and one
hypothesis at a time (each hypothesis keeps its own copy of the layers' caches):

  A hypothesis is a summed log-probability s and its tokens; its rank is s / len(tokens).
  The prompt's last row gives log_softmax(LNf(x) @ Wout); its BEAM largest entries (the largest
  first, ties by index) start BEAM hypotheses of one token each, ranked.
  Each step, in rank order: a finished hypothesis (its last token EOS) stays as it is; a live one
  feeds its last token at the next position and is replaced by its BEAM continuations (in the order
  of their log-probabilities), each scored s + log p(token). Every one of these, in that order, is
  placed in a new ranking after the entries that rank at least as high, which keeps the BEAM best.
  The search stops when every kept hypothesis is finished or they have max_new tokens; the output
  is the first one's tokens.

Scores are summed in float64 from the float32 log-probabilities, as acrobat's host floats. Margins
(tests/reference/README.md, "Decisions"), the decisions the output depends on: per expansion, the
gap between the BEAM-th log-probability and the next (which tokens continue); per step, the gap
between the BEAM-th rank and the next (which hypotheses are kept); at the end, between the first
and the second (which one is the output). The order among the kept ones matters only for exact
ties.
"""

import torch
import torch.nn.functional as F

import model_gpt

NAME = "gpt_beam"
SOURCE = "gpt"
ENTRY = "beam"
DIMS = dict(model_gpt.DIMS, BEAM=4)
INPUT_KIND = "json"

init_params = model_gpt.init_params
make_data = model_gpt.make_data


class Model(model_gpt.Model):
    def __init__(self, **dims):
        dims = dict(dims)
        self.BEAM = dims.pop("BEAM", DIMS["BEAM"])
        super().__init__(**dims)

    def log_probs(self, row):
        return F.log_softmax(F.layer_norm(row, (self.D,), self.lnf_g, self.lnf_b, eps=1e-5) @ self.Wout, dim=-1)[0]

    def continuations(self, lp, score, tokens, caches):
        """The BEAM hypotheses extending (score, tokens) by lp's largest entries, largest first."""
        order = sorted(range(lp.numel()), key=lambda j: (-float(lp[j]), j))
        if lp.numel() > self.BEAM:
            self.margins.append(float(lp[order[self.BEAM - 1]] - lp[order[self.BEAM]]))
        out = []
        for w in order[:self.BEAM]:
            out.append((score + float(lp[w]), tokens + [w], None if w == self.EOS else caches))
        return out

    def rank(self, candidates):
        """The BEAM best of `candidates` by score per token, stable (the first met ranks first)."""
        keyed = sorted(enumerate(candidates), key=lambda ic: (-ic[1][0] / len(ic[1][1]), ic[0]))
        if len(keyed) > self.BEAM:
            kept, next_best = keyed[self.BEAM - 1][1], keyed[self.BEAM][1]
            self.margins.append(kept[0] / len(kept[1]) - next_best[0] / len(next_best[1]))
        return [c for _, c in keyed[:self.BEAM]]

    def forward(self, instance):
        prompt, max_new = instance
        n = len(prompt)
        x, caches = self.prefill(prompt)
        hyps = self.rank(self.continuations(self.log_probs(x[n - 1:n]), 0.0, [], caches))
        generated = 1
        while generated < max_new and any(h[2] is not None for h in hyps):
            candidates = []
            for score, tokens, caches in hyps:
                if caches is None:
                    candidates.append((score, tokens, None))
                    continue
                t = caches[0][0].shape[0]
                x = self.tok[tokens[-1]:tokens[-1] + 1] + self.pos[t:t + 1]
                grown = []
                for l in range(self.L):
                    x, c = self.layer(x, l, caches[l])
                    grown.append(c)
                candidates.extend(self.continuations(self.log_probs(x), score, tokens, grown))
            hyps = self.rank(candidates)
            generated += 1
        first, second = hyps[0], hyps[1]
        self.margins.append(first[0] / len(first[1]) - second[0] / len(second[1]))
        return hyps[0][1]


def load_instances(path, vocab_path, limit, dims):
    return model_gpt.load_instances(path, vocab_path, limit, {k: v for k, v in dims.items() if k != "BEAM"})
