#!/usr/bin/python3
"""Draws all.png from `acrobat bench --all`'s all.json: per model and size, the speed-up over the
reference engine (one instance at a time) of the interpreter path and the AOT engine at batch 8
and 64 and of eager PyTorch, on a log scale with every major tick labelled (0.1, 0.2, 0.5, 1, 2,
5, ...).

    /usr/bin/python3 bench/plot_all.py all.json all.png
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402


def ticks(lo, hi):
    """The 1-2-5 steps from just below lo to just above hi."""
    out = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            out.append(m * 10.0 ** e)
    below = max(t for t in out if t < lo) if lo in out else max(t for t in out if t <= lo)
    above = min(t for t in out if t > hi) if hi in out else min(t for t in out if t >= hi)
    return [t for t in out if below <= t <= above]


def plain(v, _pos=None):
    return ("%g" % v) + "x"


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    series = [("interpreter, batch 8", "inline-depth", 8), ("interpreter, batch 64", "inline-depth", 64),
              ("AOT, batch 8", "aot", 8), ("AOT, batch 64", "aot", 64), ("PyTorch eager", "pytorch", None)]
    colours = {"interpreter, batch 8": "#9ecae1", "interpreter, batch 64": "#3182bd",
               "AOT, batch 8": "#fdae6b", "AOT, batch 64": "#e6550d", "PyTorch eager": "#969696"}
    labels, values = [], {name: [] for name, _, _ in series}
    for m in data["models"]:
        labels.append("%s\n%s" % (m["name"], m["size"]))
        rows = m["results"]
        ref = next(r["instances_per_s"] for r in rows if r["engine"] == "reference")
        for name, engine, batch in series:
            v = next((r["instances_per_s"] for r in rows
                      if r["engine"] == engine and (batch is None or r["batch"] == batch)), None)
            values[name].append(v / ref if v and ref else 0.0)
    series = [sv for sv in series if any(values[sv[0]])]  # rows the run measured
    fig, ax = plt.subplots(figsize=(max(9, 1.0 * len(labels)), 5.2))
    width = 0.8 / len(series)
    for k, (name, _, _) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, values[name], width, label=name, color=colours.get(name))
    ax.axhline(1.0, color="black", linewidth=1.0)
    ax.set_yscale("log")
    shown = [v for name, _, _ in series for v in values[name] if v > 0]
    major = ticks(min(shown + [1.0]), max(shown + [1.0]))
    ax.set_ylim(major[0], major[-1])
    ax.yaxis.set_major_locator(FixedLocator(major))
    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=9)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    for i in range(1, len(labels)):
        ax.axvline(i - 0.5, color="#eeeeee", linewidth=0.8, zorder=0)
    ax.set_ylabel("speed-up over the reference engine\n(instances/s, log scale)", fontsize=10)
    ax.set_title("acrobat: throughput relative to running instances one at a time (above 1x: faster)",
                 fontsize=11, pad=34)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(series), fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
