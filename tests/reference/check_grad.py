#!/usr/bin/python3
"""End-to-end gradient test: acrobat's gradient of a model's loss against PyTorch autograd.

  check_grad.py --acrobat BIN --model NAME [--set H=64 ...] [--data FILE] [--limit 20]
                [--engine reference] [--rtol 1e-4] --workdir DIR

Writes the oracle's weights (the model's init_params, seed 0) to DIR/params.safetensors, runs
`acrobat grad models/NAME.acr` on the first --limit instances of --data (the SST test trees by
default) and reads the gradients it writes; then sums the oracle model's `loss(instance)` over the
same instances and differentiates it with torch.autograd in float64 (the exact gradient, up to
float64 rounding). Every param's gradient must agree element-wise:
  |acrobat - torch| <= rtol * (|torch| + scale),  scale = the largest |torch| of that param / 100,
so an entry that is a sum of terms of either sign is held to the precision of its terms, not of its
(possibly tiny) sum; and the summed loss to rtol. Exit status 0 when everything agrees, 1 otherwise.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import registry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True)
    ap.add_argument("--model", required=True, choices=registry.names())
    ap.add_argument("--set", action="append", default=[], metavar="K=V")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "sst", "test.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--engine", default="reference")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    sets = registry.parse_sets(args.set)
    spec, dims, instances, model, params_path = registry.setup_run(args.model, sets, args.data, args.vocab,
                                                                   args.limit, args.workdir)
    model = model.double()

    grads_path = os.path.join(args.workdir, "grads.safetensors")
    cmd = [args.acrobat, "grad", os.path.join(ROOT, "models", args.model + ".acr"), "--params", params_path,
           "--input", "%s:%s" % (spec.INPUT_KIND, args.data), "--vocab", args.vocab, "--limit", str(args.limit),
           "--out", grads_path]
    for k, v in sets.items():
        cmd += ["--set", "%s=%d" % (k, v)]
    if args.engine != "reference":
        cmd += ["--engine", args.engine]
    result = registry.acrobat_tensors(cmd, grads_path, "check_grad.py")
    if result is None:
        return 1
    got, meta = result

    rows = model.tables()
    total = sum(model.loss(inst, rows) for inst in instances)
    total.backward()
    problems = []
    loss_sum = float(meta["loss_sum"])
    if abs(loss_sum - float(total)) > args.rtol * abs(float(total)):
        problems.append("loss sum %.9g, expected %.9g" % (loss_sum, float(total)))
    if int(meta["instances"]) != len(instances):
        problems.append("%s instances, expected %d" % (meta["instances"], len(instances)))
    grads = {name: getattr(model, name).grad for name in model.PARAM_ORDER}
    found, worst = registry.compare_params(model.PARAM_ORDER, grads, got, args.rtol, 1 / 100)
    problems += found
    for p in problems:
        print("check_grad.py: MISMATCH " + p, file=sys.stderr)
    print("check_grad.py: %s %s, %d instances, loss sum %.6g: %s (worst scaled error %.2g, rtol %g)"
          % (args.model, dims, len(instances), float(total), "FAIL" if problems else "ok", worst, args.rtol),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
