#!/usr/bin/python3
"""Draws generate.png from `acrobat bench --generate`'s generate.json: generated tokens/s of acrobat's
AOT engine and interpreter and of PyTorch's padded and drop-finished batches, one panel per thread
count, the batch sizes along the x axis; PyTorch one instance at a time (the same at every batch
size) as a dashed line.

    /usr/bin/python3 bench/plot_generate.py generate.json generate.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BARS = (("aot", "acrobat AOT", "#e6550d"), ("interpreter", "acrobat interpreter", "#fdae6b"),
        ("pytorch-padded", "PyTorch padded", "#9ecae1"), ("pytorch-drop", "PyTorch drop finished", "#3182bd"))


def main(src, dst):
    with open(src) as f:
        doc = json.load(f)
    rows = doc["results"]
    threads = sorted({r["threads"] for r in rows})
    batches = sorted({r["batch"] for r in rows if r["engine"] != "pytorch-single"})
    fig, axes = plt.subplots(1, len(threads), figsize=(max(8.0, 4.2 * len(threads) + 1.0), 4.0), squeeze=False, sharey=True)
    width = 0.8 / len(BARS)
    for ax, t in zip(axes[0], threads):
        for k, (engine, label, colour) in enumerate(BARS):
            xs, ys = [], []
            for i, b in enumerate(batches):
                r = next((r for r in rows if r["engine"] == engine and r["threads"] == t and r["batch"] == b), None)
                if r:
                    xs.append(i + (k - (len(BARS) - 1) / 2) * width)
                    ys.append(r["tokens_per_s"])
            ax.bar(xs, ys, width, color=colour, label=label)
        single = next((r for r in rows if r["engine"] == "pytorch-single" and r["threads"] == t), None)
        if single:
            ax.axhline(single["tokens_per_s"], color="#555555", linestyle="--", linewidth=1,
                       label="PyTorch one at a time")
        ax.set_xticks(range(len(batches)))
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_xlabel("batch size")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("generated tokens/s")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    d = doc.get("dims", {})
    fig.suptitle(f"greedy generation, gpt D {d.get('D')} L {d.get('L')} V {d.get('V')}: {doc.get('instances')} "
                 f"instances, prompts {doc.get('prompts')}, budgets {doc.get('budgets')}", fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 0.94))
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
