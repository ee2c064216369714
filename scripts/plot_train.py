#!/usr/bin/python3
"""Draws the curves of an `acrobat train --log` file: on the left the mean loss of each batch (and
its running mean over 50 batches), epochs marked; on the right, per epoch, the training loss, the
dev loss and the dev accuracy (and the test accuracy after the last epoch, when the log has it).

  plot_train.py LOG.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def accuracy_range(values):
    """0..100 clipped around the data, at least 20 points wide, so that noise stays small."""
    lo, hi = min(values), max(values)
    mid, half = (lo + hi) / 2, max(10.0, (hi - lo) / 2 + 2.5)
    lo, hi = mid - half, mid + half
    if lo < 0:
        lo, hi = 0.0, hi - lo
    if hi > 100:
        lo, hi = max(0.0, lo - (hi - 100)), 100.0
    return lo, hi


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        log = json.load(f)
    losses = log.get("batch_losses", [])
    epochs = log.get("epochs", [])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))

    w = 50
    if len(losses) >= w:  # many batches: faint, under their running mean
        ax1.plot(range(1, len(losses) + 1), losses, lw=0.5, alpha=0.35, color="C0", label="batch")
    else:
        ax1.plot(range(1, len(losses) + 1), losses, ".-", lw=1.0, color="C0", label="batch")
    if len(losses) >= w:
        run = [sum(losses[i - w:i]) / w for i in range(w, len(losses) + 1)]
        ax1.plot(range(w, len(losses) + 1), run, lw=1.5, color="C1", label="running mean of %d" % w)
    if epochs and len(losses) % len(epochs) == 0:  # the same number of steps in every epoch
        per = len(losses) // len(epochs)
        for e in range(1, len(epochs)):
            ax1.axvline(e * per + 0.5, color="#bbbbbb", lw=0.8, ls="--", zorder=0)
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlim(0, max(1, len(losses)) + 1)
    ax1.set_xlabel("step (batch of %s; dashed: end of an epoch)" % log.get("batch"))
    ax1.set_ylabel("mean loss per instance")
    ax1.set_title("%s, %s: loss of each batch" % (log.get("model", "").split("/")[-1],
                                                   log.get("optimizer", {}).get("kind")))
    ax1.grid(color="#eeeeee")
    ax1.legend(loc="upper right")

    xs = [e["epoch"] for e in epochs]
    lines = ax2.plot(xs, [e["train_loss"] for e in epochs], "o-", color="C0", label="train loss (during the epoch)")
    dev_loss = [(e["epoch"], e["dev_loss"]) for e in epochs if "dev_loss" in e]
    if dev_loss:
        lines += ax2.plot([x for x, _ in dev_loss], [y for _, y in dev_loss], "o--", color="C1",
                          label="dev loss (after the epoch)")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("mean loss per instance")
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    if xs:
        ax2.set_xlim(min(xs) - 0.3, max(xs) + 0.3)
    ax2.set_ylim(bottom=0)
    ax2.grid(color="#eeeeee")
    ax2.set_title("per epoch")
    dev_acc = [(e["epoch"], 100 * e["dev_accuracy"]) for e in epochs if "dev_accuracy" in e]
    test_acc = log.get("test", {}).get("test_accuracy")
    if dev_acc:
        ax3 = ax2.twinx()
        lines += ax3.plot([x for x, _ in dev_acc], [y for _, y in dev_acc], "s-", color="C2", label="dev accuracy")
        shown = [y for _, y in dev_acc]
        if test_acc is not None and xs:
            lines += ax3.plot([max(xs)], [100 * test_acc], "*", ms=12, color="C3",
                              label="test accuracy %.1f%%" % (100 * test_acc))
            shown.append(100 * test_acc)
        ax3.set_ylim(*accuracy_range(shown))
        ax3.set_ylabel("accuracy (%)")
    ax2.legend(lines, [ln.get_label() for ln in lines], loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
               fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
