#!/usr/bin/python3
"""Eager PyTorch baseline timing: per-instance inference, one thread, under torch.no_grad().

  bench_eager.py --model NAME [--set H=512 ...] --data FILE [--vocab vocab.txt]
                 [--limit 200] [--reps 3] [--warmup 1] [--seed 0] [--params W.safetensors]

NAME is any model of registry.py; --data is the file acrobat reads (for models with make_data,
the file acrobat was given). Parsing, vocabulary lookup and weight initialisation are outside the timed region; each rep runs
model(instance) for every instance in file order (as a dynamic-batching-free baseline: the Python
recursion/loop issues one small op at a time). Prints one JSON object:
  {"instances_per_s": median over reps, "reps_instances_per_s": [...], "seconds": [...], ...}
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import registry  # noqa: E402
import safetensors_io  # noqa: E402
from generate import load_tensors  # noqa: E402
from torch_threads import set_threads  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=registry.names())
    ap.add_argument("--set", action="append", default=[], metavar="K=V")
    ap.add_argument("--data", required=True)
    ap.add_argument("--vocab", default=None)
    ap.add_argument("--limit", type=int, default=200, help="first N instances (0 = all)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed passes first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", help="load weights from this safetensors file instead of --seed")
    args = ap.parse_args(argv)

    set_threads(1)
    try:
        spec = registry.get(args.model)
        dims = registry.resolve_dims(spec, registry.parse_sets(args.set), args.vocab)
        instances = spec.load_instances(args.data, args.vocab, args.limit, dict(dims))
    except (ValueError, OSError) as e:
        print("bench_eager.py: error: %s" % e, file=sys.stderr)
        return 2
    model = spec.Model(**dims)
    if args.params:
        load_tensors(model, safetensors_io.load_file(args.params)[0])
    else:
        spec.init_params(model, args.seed)
    model.eval()

    secs = []
    with torch.no_grad():
        for rep in range(args.warmup + args.reps):
            t0 = time.perf_counter()
            for inst in instances:
                model(inst)
            dt = time.perf_counter() - t0
            if rep >= args.warmup:
                secs.append(dt)
    rates = [len(instances) / s for s in secs]
    print(json.dumps({
        "model": args.model, "dims": dims, "instances": len(instances),
        "instances_per_s": statistics.median(rates), "reps_instances_per_s": rates, "seconds": secs,
        "reps": args.reps, "warmup": args.warmup, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "mode": "eager, per instance, no_grad",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
