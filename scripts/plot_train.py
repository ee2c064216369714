#!/usr/bin/python3
"""Draws the curves of an `acrobat train --log` file: the mean loss of each batch (and its running
mean over 50 batches) and, per epoch, the training loss and the dev accuracy.

  plot_train.py LOG.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        log = json.load(f)
    losses = log.get("batch_losses", [])
    epochs = log.get("epochs", [])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(range(1, len(losses) + 1), losses, lw=0.5, alpha=0.4, label="batch")
    w = 50
    if len(losses) >= w:
        run = [sum(losses[i - w:i]) / w for i in range(w, len(losses) + 1)]
        ax1.plot(range(w, len(losses) + 1), run, lw=1.5, label="running mean of %d" % w)
    ax1.set_xlabel("step (batch of %s)" % log.get("batch"))
    ax1.set_ylabel("mean loss per instance")
    ax1.set_title("%s, %s" % (log.get("model", "").split("/")[-1], log.get("optimizer", {}).get("kind")))
    ax1.legend()
    xs = [e["epoch"] for e in epochs]
    ax2.plot(xs, [e["train_loss"] for e in epochs], "o-", label="train loss")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("loss")
    if any("dev_accuracy" in e for e in epochs):
        ax3 = ax2.twinx()
        ax3.plot(xs, [100 * e.get("dev_accuracy", 0) for e in epochs], "s-", color="C2", label="dev accuracy")
        ax3.set_ylabel("dev accuracy (%)")
        ax3.legend(loc="lower right")
    ax2.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
