#!/usr/bin/python3
"""Writes the weights and the expected outputs of one oracle model.

  generate.py --model treelstm|mvrnn|birnn [--set H=512 ...] --data test.txt --vocab vocab.txt
              [--limit 200] [--seed 0] --params OUT.safetensors --expected OUT.json

The weights are initialised from --seed (see models.init_params), written as F32 safetensors,
read back, and the expected outputs are computed from the read-back weights with eager PyTorch
(float32, one thread, one instance at a time, in file order). Expected JSON:
  {"model": ..., "dims": {...}, "seed": ..., "instances": N,
   "outputs": [{"shape": [1, 5], "data": [5 floats]}, ...]}
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import models  # noqa: E402
import safetensors_io  # noqa: E402
import sst  # noqa: E402


def load_instances(model_name, data, vocab_path, limit):
    vocab, V = sst.load_vocab(vocab_path)
    trees = [sst.index_tree(t, vocab) for t in sst.load_trees(data, limit)]
    return [models.make_instance(model_name, t) for t in trees], V


def output_entry(y):
    y = y.detach().to(torch.float32).contiguous()
    # float(x) of a float32 is exact in a double; json writes the shortest repr that round-trips.
    return {"shape": list(y.shape), "data": [float(v) for v in y.reshape(-1).tolist()]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=sorted(models.MODELS))
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="override a dim (repeatable)")
    ap.add_argument("--data", required=True, help="SST file, one tree per line")
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--limit", type=int, default=200, help="first N instances (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", required=True, help="output .safetensors")
    ap.add_argument("--expected", required=True, help="output .json")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        dims = models.resolve_dims(args.model, models.parse_sets(args.set))
        instances, V = load_instances(args.model, args.data, args.vocab, args.limit)
    except (ValueError, OSError) as e:
        print("generate.py: error: %s" % e, file=sys.stderr)
        return 2

    model = models.init_params(models.build_model(args.model, V, dims), args.seed)
    meta = {"model": args.model, "dims": json.dumps(dict(dims, V=V)), "seed": str(args.seed),
            "generator": "tests/reference/generate.py"}
    safetensors_io.save_file(models.state_tensors(model), args.params, meta)

    # Compute from the weights as written, so the expectations match the file exactly.
    tensors, _ = safetensors_io.load_file(args.params)
    model = models.load_tensors(models.build_model(args.model, V, dims), tensors)
    model.eval()
    t1 = time.perf_counter()
    outputs = []
    with torch.no_grad():
        for inst in instances:
            outputs.append(output_entry(model(inst)))
    t2 = time.perf_counter()

    result = {"model": args.model, "dims": dict(dims, V=V), "seed": args.seed,
              "data": os.path.basename(args.data), "instances": len(outputs), "outputs": outputs}
    tmp = args.expected + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
        f.write("\n")
    os.replace(tmp, args.expected)
    print("generate.py: %s dims=%s: %d instances, forward %.2fs, total %.2fs -> %s, %s"
          % (args.model, json.dumps(result["dims"]), len(outputs), t2 - t1, time.perf_counter() - t0,
             args.params, args.expected), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
