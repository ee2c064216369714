#!/usr/bin/python3
"""Self-checks of the oracle itself (not of acrobat).

  selfcheck.py [--data test.txt] [--vocab vocab.txt] [--limit 200] [--models treelstm,mvrnn,birnn]
               [--sizes default,large]

  1. safetensors write/read round trip is bit-exact; generate.py's weights file reads back equal.
  2. every SST line parses and prints back to the same tokens.
  3. per model and size (default dims, and large: H=512 treelstm/birnn, H=128 mvrnn):
     - order invariance: outputs are bit-identical when the instances are evaluated in file order,
       reversed, in a random permutation, and by a freshly initialised model from the same seed;
     - a one-word sentence (root is a leaf) evaluates;
     - conditioning: all outputs finite, no log-probability exactly 0 or -inf, exp() sums to 1;
     - float32 vs float64: the same model evaluated in double precision stays well inside the
       comparison tolerance (rtol 1e-4, atol 1e-5), i.e. the expected values are not dominated by
       float32 rounding that a differently-ordered implementation would not reproduce;
     - sensitivity: how much the output moves when the deepest leaf's word is replaced by <unk>
       (shows the comparison can see errors deep in the tree).
Exits 1 if any hard check fails.
"""

import argparse
import copy
import math
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import models  # noqa: E402
import safetensors_io  # noqa: E402
import sst  # noqa: E402

LARGE = {"treelstm": {"H": 512}, "mvrnn": {"H": 128}, "birnn": {"H": 512}}
RTOL, ATOL = 1e-4, 1e-5
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("  FAIL: " + msg)


def run_all(model, insts, order):
    out = [None] * len(insts)
    with torch.no_grad():
        for i in order:
            out[i] = model(insts[i])
    return out


def deepest_leaf(tree):
    best, stack = (0, None), [(tree, 1)]
    while stack:
        t, d = stack.pop()
        if t.is_leaf:
            if d > best[0]:
                best = (d, t)
        else:
            stack += [(t.left, d + 1), (t.right, d + 1)]
    return best[1]


def check_model(name, sets, trees, V):
    dims = models.resolve_dims(name, sets)
    print("%s %s" % (name, dims))
    t0 = time.perf_counter()
    model = models.init_params(models.build_model(name, V, dims), 0).eval()
    insts = [models.make_instance(name, t) for t in trees]
    n = len(insts)

    base = run_all(model, insts, range(n))
    rev = run_all(model, insts, reversed(range(n)))
    perm = list(range(n))
    random.Random(1234).shuffle(perm)
    shuf = run_all(model, insts, perm)
    fresh = run_all(models.init_params(models.build_model(name, V, dims), 0).eval(), insts, perm[::-1])
    same = all(torch.equal(a, b) and torch.equal(a, c) and torch.equal(a, d)
               for a, b, c, d in zip(base, rev, shuf, fresh))
    check(same, "%s %s: outputs depend on evaluation order" % (name, dims))
    print("  order invariance (file / reversed / shuffled / fresh model): %s"
          % ("bit-identical" if same else "DIFFERENT"))

    leaf = sst.index_tree(sst.parse_tree("(3 good)"), {})
    with torch.no_grad():
        y1 = model(models.make_instance(name, leaf))
    check(y1.shape == (1, dims["C"]) and bool(torch.isfinite(y1).all()), "%s: one-word sentence" % name)

    Y = torch.cat(base)
    finite = bool(torch.isfinite(Y).all())
    check(finite, "%s %s: non-finite outputs" % (name, dims))
    check(bool((Y < 0).all()), "%s %s: a log-probability is exactly 0 (saturated)" % (name, dims))
    psum = Y.double().exp().sum(1)
    check(bool(((psum - 1).abs() < 1e-5).all()), "%s: probabilities do not sum to 1" % name)
    logits_spread = (Y.max(1).values - Y.min(1).values)
    print("  outputs: shape %s, finite %s, log-prob range [%.4f, %.4f], per-instance spread max %.4f mean %.4f"
          % (tuple(base[0].shape), finite, Y.min().item(), Y.max().item(), logits_spread.max().item(),
             logits_spread.mean().item()))

    m64 = copy.deepcopy(model).double()
    Y64 = torch.cat(run_all(m64, insts, range(n)))
    err = (Y.double() - Y64).abs()
    ratio = (err / (ATOL + RTOL * Y64.abs())).max().item()
    check(ratio < 0.1, "%s %s: float32 rounding uses %.2f of the tolerance" % (name, dims, ratio))
    print("  float32 vs float64: max abs diff %.3g, max fraction of tolerance used %.4f" % (err.max().item(), ratio))

    # Sensitivity: replace the deepest leaf's word by <unk> (or by id 1 if it already is <unk>).
    moved = []
    with torch.no_grad():
        for t, y in zip(trees, base):
            lf = deepest_leaf(t)
            old = lf.wid
            lf.wid = 1 if old == 0 else 0
            y2 = model(models.make_instance(name, t))
            lf.wid = old
            moved.append((y2 - y).abs().max().item())
    detect = sum(m > 10 * (ATOL + RTOL * 2.0) for m in moved)
    moved.sort()
    print("  deepest-leaf word swap moves the output by: median %.3g, min %.3g; %d/%d instances move > 10x tolerance"
          % (moved[len(moved) // 2], moved[0], detect, n))
    if name == "mvrnn":
        with torch.no_grad():
            worst = max(model.rec(t)[1].abs().max().item() for t in trees)
        print("  max |P| entry over root matrices: %.3f" % worst)
    if name == "treelstm":
        with torch.no_grad():
            worst = max(model.rec(t)[1].abs().max().item() for t in trees)
        print("  max |c| at the roots: %.3f" % worst)
    print("  (%.1fs)" % (time.perf_counter() - t0))
    return base[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(REPO, "data", "sst", "test.txt"))
    ap.add_argument("--vocab", default=os.path.join(REPO, "data", "sst", "vocab.txt"))
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--models", default="treelstm,mvrnn,birnn")
    ap.add_argument("--sizes", default="default,large")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sys.setrecursionlimit(10000)

    print("safetensors:")
    safetensors_io._selfcheck()
    print("parser:")
    n = 0
    for split in ("train", "dev", "test"):
        p = os.path.join(REPO, "data", "sst", split + ".txt")
        if os.path.exists(p):
            for t in sst.load_trees(p):
                n += 1
    print("  %d trees parsed (all splits)" % n)

    vocab, V = sst.load_vocab(args.vocab)
    trees = [sst.index_tree(t, vocab) for t in sst.load_trees(args.data, args.limit)]
    unk = sum(l.wid == 0 for t in trees for l in t.leaves())
    tot = sum(len(t.leaves()) for t in trees)
    print("vocab V=%d; %d instances, %d words, %d unknown; max depth %d"
          % (V, len(trees), tot, unk, max(t.depth() for t in trees)))

    # generate.py's weights survive the safetensors round trip bit-exactly
    m = models.init_params(models.build_model("mvrnn", V, models.resolve_dims("mvrnn", {"H": 8})), 0)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "w.safetensors")
        safetensors_io.save_file(models.state_tensors(m), p)
        back, _ = safetensors_io.load_file(p)
    check(all(torch.equal(back[k], v) for k, v in models.state_tensors(m).items()), "weights round trip")

    for name in args.models.split(","):
        for size in args.sizes.split(","):
            check_model(name, {} if size == "default" else LARGE[name], trees, V)

    if failures:
        print("selfcheck: %d FAILURE(S)" % len(failures))
        return 1
    print("selfcheck: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
