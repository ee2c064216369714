#!/usr/bin/python3
"""Writes the weights and the expected outputs of one oracle model.

  generate.py --model NAME [--set H=512 ...] --data FILE [--vocab vocab.txt] [--make-data]
              [--data-seed 1] [--limit 200] [--seed 0] --params OUT.safetensors --expected OUT.json

NAME is a built-in model (treelstm, mvrnn, birnn) or any tests/reference/model_NAME.py (see
registry.py for the interface). With --make-data the model's make_data first writes --limit
synthetic instances to --data from --data-seed (models without make_data read an existing file).

The weights are initialised from --seed (the model's init_params), written as F32 safetensors,
read back, and the expected outputs are computed from the read-back weights with eager PyTorch
(float32, one thread, one instance at a time, in file order). Expected JSON:
  {"model": ..., "dims": {...}, "seed": ..., "instances": N,
   "outputs": [<one JSON value per instance, as acrobat --output writes it>, ...],
   "margins": [smallest decision margin per instance, or null], "decisions": [count per instance]}
("margins"/"decisions" only for models that record decisions; see README, "Decisions").
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import models  # noqa: E402
import registry  # noqa: E402
import safetensors_io  # noqa: E402

output_entry = registry.default_output_entry  # kept for callers of generate.output_entry


# The safetensors naming and its checks are the built-in models' (models.py), for every model.
state_tensors = models.state_tensors
load_tensors = models.load_tensors


def load_instances(model_name, data, vocab_path, limit, overrides=None):
    """(instances, dims) of a model on a data file; dims resolved from `overrides` ({K: V})."""
    spec = registry.get(model_name)
    dims = registry.resolve_dims(spec, overrides or {}, vocab_path)
    return spec.load_instances(data, vocab_path, limit, dims), dims


def evaluate(model, instances, spec=None):
    """Runs the model on every instance (no_grad). Returns (outputs as JSON values, margins,
    decisions): margins[i] is the smallest margin recorded by instance i (None when it took no
    decision), decisions[i] how many it recorded; both None when the model records none."""
    entry = spec.output_entry if spec is not None else registry.default_output_entry
    # `margins`: emptied here before each instance; `last_margins`: reset by the model's forward.
    own = hasattr(model, "margins")
    records = own or hasattr(model, "last_margins")
    outputs, margins, decisions = [], [], []
    with torch.no_grad():
        for inst in instances:
            if own:
                model.margins = []
            outputs.append(entry(model(inst)))
            if records:
                ms = [float(m) for m in (model.margins if own else model.last_margins)]
                margins.append(min(ms) if ms else None)
                decisions.append(len(ms))
    return outputs, (margins if records else None), (decisions if records else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=registry.names())
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="override a dim (repeatable)")
    ap.add_argument("--data", required=True, help="the input file acrobat reads (SST, tokens or JSON lines)")
    ap.add_argument("--vocab", default=None, help="vocabulary (models with an sst input kind)")
    ap.add_argument("--make-data", action="store_true", help="write --data first with the model's make_data")
    ap.add_argument("--data-seed", type=int, default=1, help="seed for --make-data")
    ap.add_argument("--limit", type=int, default=200, help="first N instances (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", required=True, help="output .safetensors")
    ap.add_argument("--expected", required=True, help="output .json")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        spec = registry.get(args.model)
        dims = registry.resolve_dims(spec, registry.parse_sets(args.set), args.vocab)
        if spec.reads_vocab and not args.vocab:
            raise ValueError("model %s reads SST input: --vocab is required" % args.model)
        if args.make_data:
            if spec.make_data is None:
                raise ValueError("model %s has no make_data" % args.model)
            if args.limit <= 0:
                raise ValueError("--make-data needs --limit > 0 (the number of instances)")
            spec.make_data(args.data, args.limit, args.data_seed, dict(dims))
        instances = spec.load_instances(args.data, args.vocab, args.limit, dict(dims))
    except (ValueError, OSError) as e:
        print("generate.py: error: %s" % e, file=sys.stderr)
        return 2

    model = spec.init_params(spec.Model(**dims), args.seed)
    meta = {"model": args.model, "dims": json.dumps(dims), "seed": str(args.seed),
            "generator": "tests/reference/generate.py"}
    safetensors_io.save_file(state_tensors(model), args.params, meta)

    # Compute from the weights as written, so the expectations match the file exactly.
    tensors, _ = safetensors_io.load_file(args.params)
    model = load_tensors(spec.Model(**dims), tensors)
    model.eval()
    t1 = time.perf_counter()
    outputs, margins, decisions = evaluate(model, instances, spec)
    t2 = time.perf_counter()

    result = {"model": args.model, "dims": dims, "seed": args.seed,
              "data": os.path.basename(args.data), "instances": len(outputs), "outputs": outputs}
    if margins is not None:
        result["margins"] = margins
        result["decisions"] = decisions
    tmp = args.expected + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
        f.write("\n")
    os.replace(tmp, args.expected)
    extra = ""
    if margins is not None:
        known = [m for m in margins if m is not None]
        extra = ", %d decisions, smallest margin %s" % (sum(decisions), "%.3g" % min(known) if known else "-")
    print("generate.py: %s dims=%s: %d instances%s, forward %.2fs, total %.2fs -> %s, %s"
          % (args.model, json.dumps(dims), len(outputs), extra, t2 - t1, time.perf_counter() - t0,
             args.params, args.expected), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
