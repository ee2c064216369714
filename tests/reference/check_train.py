#!/usr/bin/python3
"""End-to-end training test: `acrobat train` against the same training in PyTorch.

  check_train.py --acrobat BIN --model treelstm [--set H=16] [--limit 100] [--batch 10] [--epochs 2]
                 [--optimizer adam|sgd] [--lr 0.01] [--momentum 0.9] [--weight-decay 0] [--clip 0]
                 [--sparse-embeddings] [--engine batched] [--seed 0] --workdir DIR

Writes the oracle's initial weights, runs `acrobat train` from them on the first --limit SST
training trees and reads its checkpoint; trains the oracle model (tests/reference/models.py) from the
same weights in float32 with torch.optim (Adam or SGD with momentum, torch.nn.utils.clip_grad_norm_),
on the same batches in the same order: acrobat shuffles each epoch with std::mt19937_64 seeded by
--seed (Fisher-Yates from the end, draw % i), reproduced here bit for bit. The batch's loss is the
mean of the instances' summed node losses. Every trained param must agree with PyTorch's:
  |acrobat - torch| <= rtol * (|torch| + scale),  scale = the largest |torch| of the param,
rtol 1e-4 for SGD; Adam divides by the root of the second moment, which turns float rounding in a
tiny gradient into a step of up to lr, so its check is rtol 1e-3. Exit 0 when everything agrees.

--sparse-embeddings: the tables (TABLES: the indexed params) take lazy updates: only their rows with
a non-zero gradient step. With Adam, torch.optim.Adam steps every param and the other rows of a table
get their values and moments back as they were before the step (as SparseAdam leaves them; SparseAdam
itself adds eps to sqrt(v) before its bias correction, torch.optim.Adam and acrobat after, which
moves the step of a tiny gradient by more than the check allows); with SGD, the rows keep momentum
per row, b = momentum b + g, p -= lr b (DyNet's sparse updates; torch.optim.SGD keeps a sparse
gradient's momentum for every row it ever saw, which is the dense update).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import registry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MASK = (1 << 64) - 1
TABLES = {"treelstm": ["emb"]}  # each model's indexed params


class MT19937_64:
    """std::mt19937_64 (the C++ standard's 64-bit Mersenne Twister)."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def epoch_orders(n, epochs, seed):
    """The instance order of each epoch as acrobat's train_epoch draws it (Fisher-Yates from the
    end, draw % i)."""
    rng = MT19937_64(seed)
    out = []
    for _ in range(epochs):
        order = list(range(n))
        for i in range(n, 1, -1):
            j = rng() % i
            order[i - 1], order[j] = order[j], order[i - 1]
        out.append(order)
    return out


def self_check():
    # The standard's required value: the 10000th output of a default-constructed mt19937_64.
    g = MT19937_64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042, "MT19937_64 differs from std::mt19937_64"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True)
    ap.add_argument("--model", default="treelstm", choices=["treelstm"])
    ap.add_argument("--set", action="append", default=[], metavar="K=V")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "sst", "train.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--sparse-embeddings", action="store_true")
    ap.add_argument("--engine", default="batched")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args(argv)

    self_check()
    torch.set_num_threads(1)
    sets = registry.parse_sets(args.set)
    spec, dims, trees, model, init_path = registry.setup_run(args.model, sets, args.data, args.vocab, args.limit,
                                                             args.workdir)

    out_path = os.path.join(args.workdir, "trained.safetensors")
    cmd = [args.acrobat, "train", os.path.join(ROOT, "models", args.model + ".acr"), "--params", init_path,
           "--input", "sst:" + args.data, "--vocab", args.vocab, "--limit", str(args.limit),
           "--batch", str(args.batch), "--epochs", str(args.epochs), "--optimizer", args.optimizer,
           "--lr", repr(args.lr), "--momentum", repr(args.momentum), "--weight-decay", repr(args.weight_decay),
           "--clip", repr(args.clip), "--engine", args.engine, "--seed", str(args.seed), "--out", out_path, "--quiet"]
    if args.sparse_embeddings:
        cmd.append("--sparse-embeddings")
    for k, v in sets.items():
        cmd += ["--set", "%s=%d" % (k, v)]
    result = registry.acrobat_tensors(cmd, out_path, "check_train.py")
    if result is None:
        return 1
    got, _ = result

    params = [getattr(model, n) for n in model.PARAM_ORDER]
    tables = [getattr(model, n) for n in TABLES[args.model]] if args.sparse_embeddings else []
    dense = [p for p in params if all(p is not t for t in tables)]
    lazy_sgd = args.optimizer == "sgd" and tables
    if args.optimizer == "adam":
        opts = [torch.optim.Adam(params, lr=args.lr, weight_decay=args.weight_decay)]
    else:
        opts = [torch.optim.SGD(dense, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)]
        buffers = [torch.zeros_like(t) for t in tables]
    for order in epoch_orders(len(trees), args.epochs, args.seed):
        for b0 in range(0, len(order), args.batch):
            part = [trees[i] for i in order[b0:b0 + args.batch]]
            for opt in opts:
                opt.zero_grad()
            for t in tables:
                t.grad = None
            rows = model.tables()
            loss = sum(model.loss(t, rows) for t in part) / len(part)
            loss.backward()
            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(params, args.clip)
            # Per table: its rows with a non-zero gradient, and what the others hold before the step.
            live = [(t.grad.reshape(t.shape[0], -1) != 0).any(dim=1) for t in tables]
            kept = []
            if not lazy_sgd:
                for t, rows_live in zip(tables, live):
                    state = opts[0].state.get(t, {})
                    kept.append([(x, x.detach().clone()) for x in [t] + [state[k] for k in ("exp_avg", "exp_avg_sq")
                                                                          if k in state]])
            for opt in opts:
                opt.step()
            with torch.no_grad():
                for (t, rows_live), saved in zip(zip(tables, live), kept):
                    for x, before in saved:
                        x.reshape(t.shape[0], -1)[~rows_live] = before.reshape(t.shape[0], -1)[~rows_live]
            if lazy_sgd:
                with torch.no_grad():
                    for t, b, rows_live in zip(tables, buffers, live):
                        g = t.grad.reshape(t.shape[0], -1)
                        b_rows = b.reshape(t.shape[0], -1)
                        b_rows[rows_live] = args.momentum * b_rows[rows_live] + g[rows_live]
                        t.reshape(t.shape[0], -1)[rows_live] -= args.lr * b_rows[rows_live]

    rtol = 1e-3 if args.optimizer == "adam" else 1e-4
    trained = {name: getattr(model, name) for name in model.PARAM_ORDER}
    problems, worst = registry.compare_params(model.PARAM_ORDER, trained, got, rtol, 1.0)
    for p in problems:
        print("check_train.py: MISMATCH " + p, file=sys.stderr)
    print("check_train.py: %s %s, %s%s lr %g, %d trees x %d epochs in batches of %d: %s (worst scaled error %.2g, "
          "rtol %g)" % (args.model, dims, args.optimizer, " (sparse embeddings)" if tables else "", args.lr,
                        len(trees), args.epochs, args.batch,
                        "FAIL" if problems else "ok", worst, rtol), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
