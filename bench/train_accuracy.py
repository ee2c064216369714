#!/usr/bin/python3
"""SST test accuracy of a model trained by `acrobat train` against the same model trained by
PyTorch: the same initial weights (the oracle's, seed 0), the same training instances in the same
order (acrobat's std::mt19937_64 shuffle, reproduced), the same batches, loss (the batch's mean)
and optimiser (torch.optim.Adam), the same epochs. Accuracy: 5 classes, the argmax of the scores
against the root's label, on data/sst/test.txt. Two models:

  treelstm  the Tree-LSTM on sst: trees, its loss the cross-entropy at every node. PyTorch trains it
            hand-batched by node height (bench/treelstm_by_height.py, the same function as
            tests/reference/models.py's TreeLSTM, checked equal on the first batch).
  berxit    the ragged early-exit encoder (models/berxit.acr, C = 5) on sst-tokens: sentences, its
            loss (`sst_loss`) the cross-entropy of the exit's prediction against the root's label,
            the exit as taken. PyTorch trains it as tests/reference/model_berxit.py's run_batched
            (a batch padded to its longest with a key-padding mask, the exited instances dropped
            after each layer; checked equal to the instance-by-instance loss on the first batch).

    /usr/bin/python3 bench/train_accuracy.py [--model treelstm] [--acrobat build/tools/acrobat]
        [--hidden 64] [--layers 4] [--epochs 5] [--batch 25] [--lr 1e-3] [--engine aot] [--limit 0]
        [--out bench/results/train]

Writes accuracy-H<hidden>.json and .md (treelstm) or accuracy-berxit-L<layers>.json and .md in --out.
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
import sst  # noqa: E402
from check_train import epoch_orders  # noqa: E402
from torch_threads import set_threads  # noqa: E402


class TreeLstm:
    """models/treelstm.acr at H = --hidden on sst: trees."""

    def __init__(self, args, workdir):
        from treelstm_by_height import LevelPlan, level_batched_loss, level_batched_scores
        self.plan, self.batched_loss, self.scores = LevelPlan, level_batched_loss, level_batched_scores
        self.spec, _, self.train, self.model, self.init_path = registry.setup_run(
            "treelstm", {"H": args.hidden}, args.train, args.vocab, args.limit, workdir)
        self.test = self.spec.load_instances(args.test, args.vocab, 0, {"H": args.hidden})
        self.sets = ["H=%d" % args.hidden]
        self.file = "accuracy-H%d" % args.hidden
        self.title = "Tree-LSTM H=%d, %d training trees" % (args.hidden, len(self.train))
        self.pytorch = "PyTorch, by height (1 thread)"

    def acrobat_args(self, args):
        return [os.path.join(ROOT, "models", "treelstm.acr"), "--set", ",".join(self.sets),
                "--input", "sst:" + args.train, "--test", "sst:" + args.test]

    def eager_loss(self, part):
        return sum(self.model.loss(t) for t in part) / len(part)

    def loss(self, part):
        return self.batched_loss(self.model, self.plan(part), len(part))

    def accuracy(self, batch=256):
        right = 0
        with torch.no_grad():
            for b0 in range(0, len(self.test), batch):
                part = self.test[b0:b0 + batch]
                plan = self.plan(part)
                best = self.scores(self.model, plan)[plan.roots].argmax(dim=1)
                right += sum(int(best[i]) == t.label for i, t in enumerate(part))
        return right / len(self.test)


class Berxit:
    """models/berxit.acr with C = 5 and L = --layers on sst-tokens: sentences and their roots' labels."""

    def __init__(self, args, workdir):
        import model_berxit
        self.labelled = model_berxit.LabelledIds
        self.sets = ["C=5", "L=%d" % args.layers]
        dims = {"C": 5, "L": args.layers}
        self.spec, self.dims, ids, self.model, self.init_path = registry.setup_run(
            "berxit", dims, args.train, args.vocab, args.limit, workdir)
        self.train = self.with_labels(ids, args.train)
        self.test = self.with_labels(self.spec.load_instances(args.test, args.vocab, 0, dict(self.dims)), args.test)
        self.file = "accuracy-berxit-L%d" % args.layers
        self.title = "BERxiT (D 256, L %d, ragged, early exits) on %d training sentences" % (args.layers, len(self.train))
        self.pytorch = "PyTorch, padded batches with a key-padding mask (1 thread)"

    def with_labels(self, ids, path):
        labels = [t.label for t in sst.load_trees(path, len(ids))]
        return [self.labelled(words, label) for words, label in zip(ids, labels)]

    def acrobat_args(self, args):
        return [os.path.join(ROOT, "models", "berxit.acr"), "--set", ",".join(self.sets), "--loss", "sst_loss",
                "--predict", "predict", "--input", "sst-tokens:" + args.train, "--test", "sst-tokens:" + args.test]

    def eager_loss(self, part):
        return sum(self.model.loss(inst) for inst in part) / len(part)

    def loss(self, part):
        out = self.model.run_batched(part)
        return -sum(out[i][0][0, inst.label] for i, inst in enumerate(part)) / len(part)

    def accuracy(self, batch=256):
        right = 0
        with torch.no_grad():
            for b0 in range(0, len(self.test), batch):
                part = self.test[b0:b0 + batch]
                out = self.model.run_batched(part)
                right += sum(int(out[i][0].argmax()) == inst.label for i, inst in enumerate(part))
        return right / len(self.test)


MODELS = {"treelstm": TreeLstm, "berxit": Berxit}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), default="treelstm")
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--train", default=os.path.join(ROOT, "data", "sst", "train.txt"))
    ap.add_argument("--test", default=os.path.join(ROOT, "data", "sst", "test.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--hidden", type=int, default=64, help="treelstm: H")
    ap.add_argument("--layers", type=int, default=4, help="berxit: L")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--engine", default="aot")
    ap.add_argument("--limit", type=int, default=0, help="training instances (0: all)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "train"))
    args = ap.parse_args(argv)

    set_threads(1)
    with tempfile.TemporaryDirectory() as workdir:
        m = MODELS[args.model](args, workdir)
        first = m.train[:args.batch]
        a, b = m.eager_loss(first), m.loss(first)
        if abs(a.item() - b.item()) > 1e-4 * abs(a.item()):
            sys.exit("train_accuracy.py: the batched loss %r differs from the eager %r" % (b.item(), a.item()))
        before = m.accuracy()

        log = os.path.join(workdir, "log.json")
        cmd = [args.acrobat, "train"] + m.acrobat_args(args) + [
            "--params", m.init_path, "--vocab", args.vocab, "--batch", str(args.batch), "--epochs", str(args.epochs),
            "--optimizer", "adam", "--lr", repr(args.lr), "--engine", args.engine, "--threads", "1", "--seed", "0",
            "--log", log, "--quiet"]
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

        params = [getattr(m.model, n) for n in m.model.PARAM_ORDER]
        opt = torch.optim.Adam(params, lr=args.lr)
        start = time.perf_counter()
        for order in epoch_orders(len(m.train), args.epochs, 0):
            for b0 in range(0, len(order), args.batch):
                opt.zero_grad()
                m.loss([m.train[i] for i in order[b0:b0 + args.batch]]).backward()
                opt.step()
        torch_seconds = time.perf_counter() - start
        torch_acc = m.accuracy()

    result = {"model": args.model, "sets": m.sets, "epochs": args.epochs, "batch": args.batch, "lr": args.lr,
              "train_instances": len(m.train), "test_instances": len(m.test), "accuracy_before": before,
              "acrobat_accuracy": acrobat_acc, "pytorch_accuracy": torch_acc,
              "difference_points": 100 * (acrobat_acc - torch_acc), "acrobat_seconds": acrobat_seconds,
              "pytorch_seconds": torch_seconds, "acrobat_train_loss": [e["train_loss"] for e in acrobat_log["epochs"]],
              "command": "bench/train_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, m.file + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    text = ("# SST test accuracy after training, acrobat against PyTorch\n\n"
            "%s, %d epochs of Adam (lr %g) in batches of %d, the same initial weights "
            "and order. Command: `/usr/bin/python3 %s`.\n\n"
            "| | test accuracy (5 classes, root) | training time |\n|---|---|---|\n"
            "| before training | %.2f%% | |\n| acrobat train (%s engine, 1 thread) | %.2f%% | %.1f s (whole command) |\n"
            "| %s | %.2f%% | %.1f s |\n\ndifference: %+.2f points\n" % (
                m.title, args.epochs, args.lr, args.batch, result["command"], 100 * before,
                args.engine, 100 * acrobat_acc, acrobat_seconds, m.pytorch, 100 * torch_acc, torch_seconds,
                result["difference_points"]))
    with open(os.path.join(args.out, m.file + ".md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
