#!/usr/bin/python3
"""Training throughput of the binary Tree-LSTM (DyNet treenn-bulk's cell and loss: leaf i, o, u from
W x + b, internal gates from U [h1; h2] with a forget gate per child, a softmax cross-entropy at
every node) on SST training trees, three ways side by side in one run:

  acrobat            `acrobat train models/treelstm.acr` (batched gradients of the `loss` entry,
                     Adam), engine --engine (default aot)
  PyTorch eager      tests/reference/models.py's TreeLSTM, one tree at a time (a tree's nodes in
                     recursion order), the batch's mean loss, one backward and one Adam step per batch
  PyTorch by height  the same cell hand-batched across the batch by node height: all leaves in one
                     product, then every node of height 1, 2, ... in one product per height (the
                     level-by-level batching a careful user writes), the loss of every node in one
                     product at the end

With --sparse-embeddings the embedding table takes lazy updates: acrobat with `train
--sparse-embeddings`, PyTorch by height with its lookup's gradient sparse (F.embedding(sparse=True))
stepped by torch.optim.SparseAdam and the other params by Adam; PyTorch eager keeps the dense Adam.

With --rounds R, acrobat and PyTorch by height run R times each, alternating, and each figure is
the median over all their epochs, so that a slow phase of a shared host weighs on both sides.

Same initial weights (the oracle's, seed 0), same trees (the first --limit of data/sst/train.txt),
the same batches in the same order (acrobat's std::mt19937_64 shuffle, reproduced by
tests/reference/check_train.py), the same optimiser (torch.optim.Adam, lr 1e-3). Every figure is
trees per second over whole epochs (forward, backward and update), the median of --epochs epochs;
PyTorch's and OpenBLAS's threads together are held to the row's threads: with one, one each; with
more, the fastest split of them between the two pools (torch_threads.splits; one epoch of each
timed first). Before timing, the script checks that the level-batched loss equals the eager one on
the first batch (1e-4).

    /usr/bin/python3 bench/train_treelstm.py [--acrobat build/tools/acrobat] [--hidden 256,512]
        [--batch 25,64] [--threads 1,2] [--limit 1000] [--eager-limit 200] [--epochs 3] [--rounds 1]
        [--engine aot] [--sparse-embeddings] [--out bench/results/train]

Writes train.json and train.md (the table) in --out.
"""

import argparse
import json
import os
import statistics
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
from treelstm_by_height import LevelPlan, level_batched_loss  # noqa: E402
from check_train import epoch_orders  # noqa: E402
from torch_threads import blas_core, cpu_flags, cpu_name, set_threads, splits  # noqa: E402


def eager_loss(m, trees):
    rows = m.tables()
    return sum(m.loss(t, rows) for t in trees) / len(trees)


def pytorch_rates(model_state, make_model, trees, batch, split, epochs, way, lr, sparse=False):
    """Trees/s of each epoch of PyTorch training `way` ('eager' or 'height') with threads `split`
    (PyTorch's intra-op threads, OpenBLAS's); `sparse` (by height): the embedding by SparseAdam."""
    set_threads(*split)
    m = make_model()
    with torch.no_grad():
        for name in m.PARAM_ORDER:
            getattr(m, name).copy_(model_state[name])
    sparse = sparse and way == "height"
    params = [getattr(m, n) for n in m.PARAM_ORDER if not (sparse and n == "emb")]
    opts = [torch.optim.Adam(params, lr=lr)] + ([torch.optim.SparseAdam([m.emb], lr=lr)] if sparse else [])
    rates = []
    for order in epoch_orders(len(trees), epochs, 0):
        start = time.perf_counter()
        for b0 in range(0, len(order), batch):
            part = [trees[i] for i in order[b0:b0 + batch]]
            for opt in opts:
                opt.zero_grad()
            loss = (eager_loss(m, part) if way == "eager"
                    else level_batched_loss(m, LevelPlan(part), len(part), sparse))
            loss.backward()
            for opt in opts:
                opt.step()
        rates.append(len(order) / (time.perf_counter() - start))
    return rates


def fastest_split(model_state, make_model, trees, batch, threads, way, lr):
    """The split of `threads` between PyTorch's and OpenBLAS's pools (torch_threads.splits) under
    which one epoch of `way` runs fastest; with one thread, (1, 1) untimed."""
    options = splits(threads)
    if len(options) == 1:
        return options[0]
    rates = [pytorch_rates(model_state, make_model, trees, batch, s, 1, way, lr)[0] for s in options]
    return options[rates.index(max(rates))]


def acrobat_rates(args, init_path, hidden, batch, threads, workdir):
    log = os.path.join(workdir, "log.json")
    cmd = [args.acrobat, "train", os.path.join(ROOT, "models", "treelstm.acr"), "--set", "H=%d" % hidden,
           "--params", init_path, "--input", "sst:" + args.data, "--limit", str(args.limit), "--batch", str(batch),
           "--epochs", str(args.epochs), "--optimizer", "adam", "--lr", repr(args.lr), "--engine", args.engine,
           "--threads", str(threads), "--seed", "0", "--log", log, "--quiet"]
    if args.sparse_embeddings:
        cmd.append("--sparse-embeddings")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("train_treelstm.py: %s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    with open(log) as f:
        return [e["instances_per_s"] for e in json.load(f)["epochs"]], " ".join(cmd[1:])


def split_text(split):
    """A PyTorch thread split as the table shows it: PyTorch's threads/OpenBLAS's."""
    return "%d/%d" % tuple(split)


def cpu_model():
    """The CPU as the table names it: model name, family, and whether it has AVX-512."""
    try:
        with open("/proc/cpuinfo") as f:
            family = next((l.split(":", 1)[1].strip() for l in f if l.startswith("cpu family")), "?")
    except OSError:
        family = "?"
    return "%s, family %s, %s" % (cpu_name(), family, "avx512f" if "avx512f" in cpu_flags() else "no avx512f")


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "sst", "train.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--hidden", default="256,512")
    ap.add_argument("--batch", default="25,64")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--limit", type=int, default=1000, help="training trees for acrobat and by-height")
    ap.add_argument("--eager-limit", type=int, default=200, help="training trees for PyTorch eager")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of acrobat and PyTorch by height, alternating (eager runs once)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--engine", default="aot")
    ap.add_argument("--sparse-embeddings", action="store_true", help="lazy updates of the embedding table")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "train"))
    args = ap.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for hidden in ints(args.hidden):
            spec, dims, trees, model, init_path = registry.setup_run("treelstm", {"H": hidden}, args.data, args.vocab,
                                                                     args.limit, os.path.join(workdir, "h%d" % hidden))
            state = {n: getattr(model, n).detach().clone() for n in model.PARAM_ORDER}
            first = trees[:max(ints(args.batch))]
            torch.set_num_threads(1)
            a, b = eager_loss(model, first), level_batched_loss(model, LevelPlan(first), len(first))
            if abs(a.item() - b.item()) > 1e-4 * abs(a.item()):
                sys.exit("train_treelstm.py: the level-batched loss %r differs from the eager %r" % (b.item(), a.item()))
            nodes = sum(t.size() for t in trees) / len(trees)
            for batch in ints(args.batch):
                for threads in ints(args.threads):
                    # Rounds of acrobat then PyTorch by height, so that a slow phase of the host
                    # falls on both sides alike; the medians over every round's epochs.
                    # PyTorch with more than one thread: in its fastest split between its pool and
                    # OpenBLAS's, found by timing one epoch of each.
                    make = lambda: spec.Model(**dims)  # noqa: E731
                    eager_trees = trees[:args.eager_limit]
                    height_split = fastest_split(state, make, trees, batch, threads, "height", args.lr)
                    eager_split = fastest_split(state, make, eager_trees, batch, threads, "eager", args.lr)
                    acro, height = [], []
                    for _ in range(args.rounds):
                        a, command = acrobat_rates(args, init_path, hidden, batch, threads, workdir)
                        acro += a
                        height += pytorch_rates(state, make, trees, batch, height_split, args.epochs, "height", args.lr,
                                                args.sparse_embeddings)
                    eager = pytorch_rates(state, make, eager_trees, batch, eager_split, args.epochs, "eager", args.lr)
                    row = {"H": hidden, "batch": batch, "threads": threads, "nodes_per_tree": nodes,
                           "acrobat": statistics.median(acro), "pytorch_height": statistics.median(height),
                           "pytorch_eager": statistics.median(eager), "acrobat_epochs": acro,
                           "pytorch_height_epochs": height, "pytorch_eager_epochs": eager,
                           "pytorch_height_split": list(height_split), "pytorch_eager_split": list(eager_split),
                           "command": command}
                    row["vs_height"] = row["acrobat"] / row["pytorch_height"]
                    row["vs_eager"] = row["acrobat"] / row["pytorch_eager"]
                    rows.append(row)
                    print("H %d batch %d threads %d: acrobat %.1f trees/s, PyTorch by height %.1f (%.2fx, threads %s), "
                          "eager %.1f (%.2fx, threads %s)" % (
                              hidden, batch, threads, row["acrobat"], row["pytorch_height"], row["vs_height"],
                              split_text(height_split), row["pytorch_eager"], row["vs_eager"], split_text(eager_split)),
                          flush=True)

    os.makedirs(args.out, exist_ok=True)
    meta = {"cpu": cpu_model(), "torch": torch.__version__, "openblas_core": blas_core(),
            "engine": args.engine, "limit": args.limit,
            "eager_limit": args.eager_limit, "epochs": args.epochs, "rounds": args.rounds,
            "optimizer": "adam (sparse embeddings: acrobat and PyTorch by height)" if args.sparse_embeddings else "adam",
            "lr": args.lr,
            "command": " ".join(["bench/train_treelstm.py"] + (argv if argv is not None else sys.argv[1:]))}
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = ["# Tree-LSTM training throughput (trees/s, forward + backward + Adam step)", "",
             "CPU: %s. PyTorch %s, its sgemm on OpenBLAS's %s core. Command: `/usr/bin/python3 %s`." % (
                 meta["cpu"], meta["torch"], meta["openblas_core"], meta["command"]),
             "acrobat engine %s on the first %d SST training trees; PyTorch by height on the same trees, eager on the "
             "first %d. Median of %d epochs%s.%s" % (
                 args.engine, args.limit, args.eager_limit, args.epochs * args.rounds,
                 " (%d rounds of %d, acrobat and PyTorch by height alternating)" % (args.rounds, args.epochs)
                 if args.rounds > 1 else "",
                 " The embedding table takes lazy updates (--sparse-embeddings): acrobat's `train --sparse-embeddings`, "
                 "PyTorch by height F.embedding(sparse=True) with SparseAdam; PyTorch eager the dense Adam."
                 if args.sparse_embeddings else ""), "",
             "PyTorch with more than one thread runs in the fastest split of them between its own pool and "
             "OpenBLAS's (one epoch of each timed first), shown as PyTorch's/OpenBLAS's threads.", "",
             "| H | batch | threads | acrobat | PyTorch by height | PyTorch eager | vs by height | vs eager |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %d | %d | %d | %.1f | %.1f (%s) | %.1f (%s) | %.2fx | %.2fx |" % (
            r["H"], r["batch"], r["threads"], r["acrobat"], r["pytorch_height"], split_text(r["pytorch_height_split"]),
            r["pytorch_eager"], split_text(r["pytorch_eager_split"]), r["vs_height"], r["vs_eager"]))
    with open(os.path.join(args.out, "train.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s/train.json and train.md" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
