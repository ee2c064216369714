#!/usr/bin/python3
"""Draws ragged.png from `acrobat bench --ragged`'s ragged.json: acrobat's useful GFLOP/s as a ratio
to PyTorch's best strategy in the cell (padded, sorted micro-batches or nested), for the AOT engine
and the interpreter; of the forward, or (`--train`'s JSON) of training steps. One panel per data set
(and thread count), its batch sizes along the x axis; the dense control of the data set (as many
instances of its mean length) beside each ragged cell, in lighter colours.

    /usr/bin/python3 bench/plot_ragged.py ragged.json ragged.png
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

ENGINES = (("aot", "AOT"), ("interpreter", "interpreter"))
COLOURS = {("aot", False): "#e6550d", ("interpreter", False): "#3182bd",
           ("aot", True): "#fdae6b", ("interpreter", True): "#9ecae1"}


def base(r):
    d = r["dataset"]
    return d[:-len("-dense")] if r.get("dense") and d.endswith("-dense") else d


def ratio(rows, dataset, dense, batch, threads, engine):
    here = [r for r in rows if base(r) == dataset and bool(r.get("dense")) == dense and r["batch"] == batch
            and r["threads"] == threads]
    best = max((r["useful_gflops"] for r in here if r["engine"].startswith("pytorch")), default=0)
    mine = next((r["useful_gflops"] for r in here if r["engine"] == engine), None)
    return mine / best if best and mine else None


def main(src, dst):
    with open(src) as f:
        doc = json.load(f)
    rows = doc["results"]
    training = doc.get("benchmark") == "ragged-encoder-training"
    threads = sorted({r["threads"] for r in rows})
    datasets, batches = [], sorted({r["batch"] for r in rows})
    for r in rows:
        if base(r) not in datasets:
            datasets.append(base(r))
    has_dense = any(r.get("dense") for r in rows)
    panels = [(d, t) for t in threads for d in datasets]
    if not panels:
        sys.exit("plot_ragged.py: %s holds no results" % src)
    cols = min(4, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(max(9.0, 3.4 * cols), 2.9 * nrows + 0.9), squeeze=False,
                             sharey=True)
    kinds = [False, True] if has_dense else [False]
    bars = [(e, dense) for dense in kinds for e, _ in ENGINES]
    width = 0.8 / len(bars)
    top = 0.0
    for n, (d, t) in enumerate(panels):
        ax = axes[n // cols][n % cols]
        for k, (engine, dense) in enumerate(bars):
            xs, ys = [], []
            for i, b in enumerate(batches):
                v = ratio(rows, d, dense, b, t, engine)
                if v is not None:
                    xs.append(i + (k - (len(bars) - 1) / 2) * width)
                    ys.append(v)
                    top = max(top, v)
            ax.bar(xs, ys, width, color=COLOURS[(engine, dense)])
        ax.axhline(1.0, color="black", linewidth=1.0)
        ax.set_xticks(range(len(batches)))
        ax.set_xticklabels([str(b) for b in batches], fontsize=9)
        ax.tick_params(axis="y", labelsize=9)
        ax.grid(axis="y", color="#dddddd", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.set_title(d if len(threads) == 1 else "%s, %d thread%s" % (d, t, "" if t == 1 else "s"), fontsize=10)
        if n % cols == 0:
            ax.set_ylabel("acrobat / PyTorch's best\n(useful GFLOP/s)", fontsize=9)
        if n // cols == nrows - 1 or n + cols >= len(panels):
            ax.set_xlabel("batch size", fontsize=9)
    for n in range(len(panels), nrows * cols):
        axes[n // cols][n % cols].set_visible(False)
    axes[0][0].set_ylim(0, max(1.2, math.ceil(top * 10 + 0.5) / 10))
    handles = [Patch(color=COLOURS[(e, dense)], label="acrobat %s%s" % (label, ", dense control" if dense else ""))
               for dense in kinds for e, label in ENGINES]
    title = ("Encoder layer %s on ragged batches: acrobat against PyTorch's best strategy per cell (above 1: faster)"
             % ("training steps" if training else "forward"))
    if len(threads) == 1:
        title += ", %d thread%s" % (threads[0], "" if threads[0] == 1 else "s")
    fig.suptitle(title, fontsize=11)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.95), ncol=len(handles), fontsize=9,
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
