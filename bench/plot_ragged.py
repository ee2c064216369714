#!/usr/bin/python3
"""Draws ragged.png from `acrobat bench --ragged`'s ragged.json: per cell (data set, batch size),
one panel per thread count, acrobat's useful GFLOP/s as a ratio to PyTorch's best strategy in the
cell (padded, sorted micro-batches or nested), for the AOT engine and the interpreter.

    /usr/bin/python3 bench/plot_ragged.py ragged.json ragged.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        rows = json.load(f)["results"]
    threads = sorted({r["threads"] for r in rows})
    cells = []
    for r in rows:
        key = (r["dataset"], r["batch"])
        if key not in cells:
            cells.append(key)
    fig, axes = plt.subplots(len(threads), 1, figsize=(max(8, 0.5 * len(cells)), 3.5 * len(threads)),
                             squeeze=False)
    for ax, t in zip(axes[:, 0], threads):
        for k, (engine, label) in enumerate((("aot", "acrobat AOT"), ("interpreter", "acrobat interpreter"))):
            xs, ys = [], []
            for i, (d, b) in enumerate(cells):
                here = [r for r in rows if r["dataset"] == d and r["batch"] == b and r["threads"] == t]
                best = max((r["useful_gflops"] for r in here if r["engine"].startswith("pytorch")), default=0)
                mine = next((r["useful_gflops"] for r in here if r["engine"] == engine), None)
                if best and mine:
                    xs.append(i + (k - 0.5) * 0.4)
                    ys.append(mine / best)
            ax.bar(xs, ys, 0.4, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(cells)))
        ax.set_xticklabels(["%s\n%d" % c for c in cells], fontsize=7)
        ax.set_ylabel("useful GFLOP/s / PyTorch best")
        ax.set_title("%d thread%s" % (t, "" if t == 1 else "s"))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
