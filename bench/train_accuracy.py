#!/usr/bin/python3
"""SST test accuracy of the Tree-LSTM trained by `acrobat train` against the same model trained by
PyTorch: the same initial weights (the oracle's, seed 0), the same training trees in the same order
(acrobat's std::mt19937_64 shuffle, reproduced), the same batches, loss (the cross-entropy at every
node, the batch's mean) and optimiser (torch.optim.Adam), the same epochs. PyTorch trains the model
hand-batched by node height (bench/treelstm_by_height.py, the same function as
tests/reference/models.py's TreeLSTM, checked equal on the first batch). Accuracy: 5 classes, the
argmax of the root's scores against the root's label, on data/sst/test.txt.

    /usr/bin/python3 bench/train_accuracy.py [--acrobat build/tools/acrobat] [--hidden 64]
        [--epochs 5] [--batch 25] [--lr 1e-3] [--engine aot] [--limit 0] [--out bench/results/train]

Writes accuracy-H<hidden>.json and .md in --out.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import registry  # noqa: E402
from check_train import epoch_orders  # noqa: E402
from torch_threads import set_threads  # noqa: E402
from treelstm_by_height import LevelPlan, level_batched_loss, level_batched_scores  # noqa: E402


def root_accuracy(m, trees, batch=256):
    right = 0
    with torch.no_grad():
        for b0 in range(0, len(trees), batch):
            part = trees[b0:b0 + batch]
            plan = LevelPlan(part)
            best = level_batched_scores(m, plan)[plan.roots].argmax(dim=1)
            right += sum(int(best[i]) == t.label for i, t in enumerate(part))
    return right / len(trees)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--train", default=os.path.join(ROOT, "data", "sst", "train.txt"))
    ap.add_argument("--test", default=os.path.join(ROOT, "data", "sst", "test.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--engine", default="aot")
    ap.add_argument("--limit", type=int, default=0, help="training trees (0: all)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "train"))
    args = ap.parse_args(argv)

    set_threads(1)
    with tempfile.TemporaryDirectory() as workdir:
        spec, dims, trees, model, init_path = registry.setup_run("treelstm", {"H": args.hidden}, args.train,
                                                                 args.vocab, args.limit, workdir)
        test = spec.load_instances(args.test, args.vocab, 0, dict(dims))
        first = trees[:args.batch]
        a = sum(model.loss(t) for t in first) / len(first)
        b = level_batched_loss(model, LevelPlan(first), len(first))
        if abs(a.item() - b.item()) > 1e-4 * abs(a.item()):
            sys.exit("train_accuracy.py: the level-batched loss %r differs from the eager %r" % (b.item(), a.item()))
        before = root_accuracy(model, test)

        log = os.path.join(workdir, "log.json")
        cmd = [args.acrobat, "train", os.path.join(ROOT, "models", "treelstm.acr"), "--set", "H=%d" % args.hidden,
               "--params", init_path, "--input", "sst:" + args.train, "--test", "sst:" + args.test,
               "--vocab", args.vocab, "--batch", str(args.batch), "--epochs", str(args.epochs),
               "--optimizer", "adam", "--lr", repr(args.lr), "--engine", args.engine, "--threads", "1",
               "--seed", "0", "--log", log, "--quiet"]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        start = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("train_accuracy.py: %s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
        acrobat_seconds = time.perf_counter() - start
        with open(log) as f:
            acrobat_log = json.load(f)
        acrobat_acc = acrobat_log["test"]["test_accuracy"]

        params = [getattr(model, n) for n in model.PARAM_ORDER]
        opt = torch.optim.Adam(params, lr=args.lr)
        start = time.perf_counter()
        for order in epoch_orders(len(trees), args.epochs, 0):
            for b0 in range(0, len(order), args.batch):
                part = [trees[i] for i in order[b0:b0 + args.batch]]
                opt.zero_grad()
                level_batched_loss(model, LevelPlan(part), len(part)).backward()
                opt.step()
        torch_seconds = time.perf_counter() - start
        torch_acc = root_accuracy(model, test)

    result = {"hidden": args.hidden, "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
              "train_trees": len(trees), "test_trees": len(test), "accuracy_before": before,
              "acrobat_accuracy": acrobat_acc, "pytorch_accuracy": torch_acc,
              "difference_points": 100 * (acrobat_acc - torch_acc), "acrobat_seconds": acrobat_seconds,
              "pytorch_seconds": torch_seconds, "acrobat_train_loss": [e["train_loss"] for e in acrobat_log["epochs"]],
              "command": "bench/train_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "accuracy-H%d.json" % args.hidden), "w") as f:
        json.dump(result, f, indent=1)
    text = ("# SST test accuracy after training, acrobat against PyTorch\n\n"
            "Tree-LSTM H=%d, %d training trees, %d epochs of Adam (lr %g) in batches of %d, the same initial weights "
            "and order. Command: `/usr/bin/python3 %s`.\n\n"
            "| | test accuracy (5 classes, root) | training time |\n|---|---|---|\n"
            "| before training | %.2f%% | |\n| acrobat train (%s engine, 1 thread) | %.2f%% | %.1f s (whole command) |\n"
            "| PyTorch, by height (1 thread) | %.2f%% | %.1f s |\n\ndifference: %+.2f points\n" % (
                args.hidden, len(trees), args.epochs, args.lr, args.batch, result["command"], 100 * before,
                args.engine, 100 * acrobat_acc, acrobat_seconds, 100 * torch_acc, torch_seconds,
                result["difference_points"]))
    with open(os.path.join(args.out, "accuracy-H%d.md" % args.hidden), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
