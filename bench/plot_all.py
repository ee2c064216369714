#!/usr/bin/python3
"""Draws all.png from `acrobat bench --all`'s all.json: per model and size, the speed-up over the
reference engine (one instance at a time) of the interpreter path and the AOT engine at batch 8
and 64 and of eager PyTorch, on a log scale.

    /usr/bin/python3 bench/plot_all.py all.json all.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    series = [("interpreter, batch 8", "inline-depth", 8), ("interpreter, batch 64", "inline-depth", 64),
              ("AOT, batch 8", "aot", 8), ("AOT, batch 64", "aot", 64), ("PyTorch eager", "pytorch", None)]
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
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(labels)), 5))
    width = 0.8 / len(series)
    for k, (name, _, _) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, values[name], width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("speed-up over the reference engine (log scale)")
    ax.set_title("acrobat: throughput relative to running instances one at a time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
