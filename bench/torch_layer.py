#!/usr/bin/python3
"""acrobat as a layer of a PyTorch model against the same model all in PyTorch, side by side: a
Tree-LSTM encoder (acrobat.torch.Module over models/treelstm.acr's cell) under a torch linear
classifier, trained with torch.optim.Adam on SST training trees, one step per batch (forward,
loss, backward, update), against tests/reference/models.py's Tree-LSTM run eagerly tree by tree
(PyTorch's autograd over the recursion) with the same weights, batches and optimiser.

  /usr/bin/python3 bench/torch_layer.py [--hidden 64] [--batch 25] [--steps 10] [--engine aot] [--threads 1]

Prints the median step time of each and their ratio; both use --threads threads (torch's intra-op
threads for PyTorch, the kernels' for acrobat). The acrobat step includes copying the Parameters
into the model (forward) and the gradients out (backward)."""

import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import acrobat  # noqa: E402
import acrobat.torch  # noqa: E402
import registry  # noqa: E402
from torch_threads import set_threads  # noqa: E402  (threads and OpenBLAS core, as every baseline)

TRAIN = os.path.join(ROOT, "data", "sst", "train.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
ENCODE = "\ndef encode(t: Tree) -> f32[1, H] { let (h, _) = cell(t); h }\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--engine", default="aot", choices=["batched", "aot"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workdir", default="/tmp/acrobat-torch-layer")
    a = ap.parse_args()
    set_threads(a.threads)
    n = a.batch * (a.steps + 1)
    os.makedirs(a.workdir, exist_ok=True)
    spec, dims, _, ref, path = registry.setup_run("treelstm", {"H": a.hidden}, TRAIN, VOCAB, n, a.workdir)
    trees = spec.load_instances(TRAIN, VOCAB, n, dims)
    labels = torch.tensor([t.label for t in trees])
    with open(os.path.join(ROOT, "models", "treelstm.acr")) as f:
        text = f.read() + ENCODE
    m = acrobat.loads(text, name="treelstm+encode", dims={"H": a.hidden}, engine=a.engine, threads=a.threads,
                      params=path)
    values = m.read_values("sst:" + TRAIN, entry="encode", vocab=VOCAB, limit=n)
    layer = acrobat.torch.Module(m, entry="encode")
    head = torch.nn.Linear(a.hidden, 5)
    ref_head = copy.deepcopy(head)
    opt = torch.optim.Adam([*layer.parameters(), *head.parameters()], lr=1e-3)
    ref_opt = torch.optim.Adam([*ref.parameters(), *ref_head.parameters()], lr=1e-3)

    def acrobat_step(b):
        loss = F.cross_entropy(head(layer(values[b])[:, 0]), labels[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

    def torch_step(b):
        h = torch.stack([ref.rec(t)[0] for t in trees[b]])
        loss = F.cross_entropy(ref_head(h[:, 0]), labels[b])
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()

    medians = {}
    for name, step in (("acrobat.torch.Module (%s)" % a.engine, acrobat_step), ("PyTorch eager", torch_step)):
        step(slice(0, a.batch))  # warm-up (the AOT engine compiles here)
        times = []
        for k in range(1, a.steps + 1):
            t0 = time.perf_counter()
            step(slice(a.batch * k, a.batch * (k + 1)))
            times.append(time.perf_counter() - t0)
        medians[name] = statistics.median(times)
        print("%-30s H %d, %d trees a step, %d thread(s): median step %.1f ms"
              % (name, a.hidden, a.batch, a.threads, 1e3 * medians[name]))
    (an, at), (tn, tt) = medians.items()
    print("PyTorch eager / acrobat: %.1fx" % (tt / at))


if __name__ == "__main__":
    main()
