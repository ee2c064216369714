#!/usr/bin/python3
"""Ragged against padded BERxiT on real sentence lengths: the SST test sentences (their own token
counts, 1 to 56), the same weights and the same exits, three ways:

  acrobat ragged   models/berxit.acr: token ids in, every layer on [n, D], no padding, no mask
  acrobat padded   models/berxit_padded.acr: the same sentences embedded and padded to S = 64 with an
                   additive mask (the layout a static-shape early-exit model takes)
  PyTorch batched  tests/reference/model_berxit.py's run_batched: a batch padded to its longest
                   active sentence with a key-padding mask, a layer at a time, the exited
                   instances dropped after each layer (what a careful user writes), one thread
                   (PyTorch's and OpenBLAS's)

    /usr/bin/python3 bench/berxit_ragged.py [--acrobat build/tools/acrobat] [--batch 64]
        [--threads 1] [--limit 2210] [--set D=768 --set NH=12 --set FF=3072 --set L=12]
        [--reps 3] [--json OUT]

The weights come from the oracle (model_berxit.init_params, --seed) and are converted to the
padded model's per-head layout (Wqkv[l * NH + h] = the head's columns of q, k and v; Wo[l * NH + h]
= the head's rows of Wo). Before timing, the script checks that all three give the same exits and
outputs (1e-4). acrobat's figures are `acrobat bench` rows (a warm-up run, then the median of
--reps); PyTorch's the median of --reps passes after a warm-up pass.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import torch  # noqa: E402

import model_berxit  # noqa: E402
import models  # noqa: E402
import registry  # noqa: E402
import safetensors_io  # noqa: E402
from torch_threads import set_threads  # noqa: E402

S = 64  # the padded model's sequence length: SST's longest sentence has 56 tokens
MASK_NEG = -10000.0


def padded_params(m):
    """The oracle's weights in models/berxit_padded.acr's layout."""
    L, NH, DH, D = m.L, m.NH, m.DH, m.D
    out = {}
    with torch.no_grad():
        wqkv, bqkv, wo = [], [], []
        for l in range(L):
            for h in range(NH):
                cols = [slice(j * D + h * DH, j * D + (h + 1) * DH) for j in range(3)]
                wqkv.append(torch.cat([m.Wqkv[l][:, c] for c in cols], dim=1))
                bqkv.append(torch.cat([m.bqkv[l][c] for c in cols]))
                wo.append(m.Wo[l][h * DH:(h + 1) * DH, :])
        out["Wqkv"], out["bqkv"], out["Wo"] = torch.stack(wqkv), torch.stack(bqkv), torch.stack(wo)
        for name in ("bo", "ln1_g", "ln1_b", "W1", "b1", "W2", "b2", "ln2_g", "ln2_b", "Wp", "bp", "Wc", "bc"):
            out[name] = getattr(m, name).detach().clone()
    return {k: v.contiguous() for k, v in out.items()}


def padded_instances(m, sentences, path):
    """The padded model's input file: [x [S, D], mask [1, S]] per sentence."""
    with open(path, "w") as f, torch.no_grad():
        for ids in sentences:
            n = len(ids)
            x = torch.zeros(S, m.D)
            x[:n] = m.embed(ids)
            mask = [0.0] * n + [MASK_NEG] * (S - n)
            f.write(json.dumps([{"shape": [S, m.D], "data": x.reshape(-1).tolist()},
                                {"shape": [1, S], "data": mask}]) + "\n")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("berxit_ragged.py: %s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def acrobat_outputs(acrobat, model, params, inp, sets, batch, limit, out):
    run([acrobat, "run", model, "--params", params, "--input", inp, "--batch", str(batch), "--engine", "aot",
         "--limit", str(limit), "--output", out] + sum((["--set", s] for s in sets), []))
    with open(out) as f:
        return json.load(f)["outputs"]


def acrobat_rate(acrobat, model, params, inp, sets, batch, limit, threads, reps, json_out):
    run([acrobat, "bench", model, "--params", params, "--input", inp, "--batch", str(batch), "--engine", "aot",
         "--limit", str(limit),
         "--threads", str(threads), "--schedulers", "inline-depth", "--pytorch-limit", "0", "--reps", str(reps),
         "--json", json_out] + sum((["--set", s] for s in sets), []))
    with open(json_out) as f:
        rows = json.load(f)["results"]
    return next(r["instances_per_s"] for r in rows if r["engine"] == "aot")


def same(a, b, what):
    """acrobat's and PyTorch's outputs: the same exit layer, values to 1e-4."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x[1] != y[1]:
            sys.exit("berxit_ragged.py: %s: instance %d exits after layer %d against %d" % (what, i, x[1], y[1]))
        for u, v in zip(x[0]["data"], y[0]["data"]):
            if abs(u - v) > 1e-4 * abs(v) + 1e-5:
                sys.exit("berxit_ragged.py: %s: instance %d differs (%g against %g)" % (what, i, u, v))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "sst", "test.txt"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "data", "sst", "vocab.txt"))
    ap.add_argument("--set", action="append", default=[], metavar="K=V")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=2210)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    set_threads(args.threads)

    spec = registry.get("berxit")
    dims = registry.resolve_dims(spec, registry.parse_sets(args.set), args.vocab)
    m = model_berxit.init_params(model_berxit.Model(**dims), args.seed).eval()
    sentences = spec.load_instances(args.data, args.vocab, args.limit, dims)
    ragged_sets = ["%s=%d" % (k, dims[k]) for k in ("D", "NH", "FF", "L")]
    padded_sets = ragged_sets + ["S=%d" % S]

    with tempfile.TemporaryDirectory() as tmp:
        rp, pp = os.path.join(tmp, "ragged.safetensors"), os.path.join(tmp, "padded.safetensors")
        safetensors_io.save_file(models.state_tensors(m), rp)
        safetensors_io.save_file(padded_params(m), pp)
        pin = os.path.join(tmp, "padded.jsonl")
        padded_instances(m, sentences, pin)
        rin = "sst-tokens:" + args.data

        # The same function three ways.
        n = len(sentences)
        ragged_out = acrobat_outputs(args.acrobat, os.path.join(ROOT, "models", "berxit.acr"), rp, rin,
                                     ragged_sets, args.batch, n, os.path.join(tmp, "r.json"))
        padded_out = acrobat_outputs(args.acrobat, os.path.join(ROOT, "models", "berxit_padded.acr"), pp,
                                     "json:" + pin, padded_sets, args.batch, n, os.path.join(tmp, "p.json"))
        with torch.no_grad():
            torch_out = []
            for k in range(0, len(sentences), args.batch):
                torch_out += [registry.default_output_entry(list(o))
                              for o in m.run_batched(sentences[k:k + args.batch])]
        same(ragged_out, torch_out, "acrobat ragged against PyTorch batched")
        same(padded_out, torch_out, "acrobat padded against PyTorch batched")

        rows = {}
        rows["acrobat-ragged"] = acrobat_rate(args.acrobat, os.path.join(ROOT, "models", "berxit.acr"), rp, rin,
                                              ragged_sets, args.batch, n, args.threads, args.reps,
                                              os.path.join(tmp, "rb.json"))
        rows["acrobat-padded"] = acrobat_rate(args.acrobat, os.path.join(ROOT, "models", "berxit_padded.acr"), pp,
                                              "json:" + pin, padded_sets, args.batch, n, args.threads, args.reps,
                                              os.path.join(tmp, "pb.json"))
    times = []
    with torch.no_grad():
        for rep in range(args.reps + 1):
            t0 = time.perf_counter()
            for k in range(0, len(sentences), args.batch):
                m.run_batched(sentences[k:k + args.batch])
            if rep:
                times.append(time.perf_counter() - t0)
    rows["pytorch-batched"] = len(sentences) / statistics.median(times)

    exits = [o[1] for o in ragged_out]
    print("BERxiT %s on %d SST test sentences (%d..%d tokens), batch %d, %d thread(s); exits per layer %s"
          % (" ".join(ragged_sets), len(sentences), min(map(len, sentences)), max(map(len, sentences)),
             args.batch, args.threads, [exits.count(l + 1) for l in range(dims["L"])]))
    for name, ips in rows.items():
        print("%-16s %10.1f instances/s   ragged is %.2fx" % (name, ips, rows["acrobat-ragged"] / ips))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dims": {k: dims[k] for k in ("D", "NH", "FF", "L")}, "batch": args.batch,
                       "threads": args.threads, "instances": len(sentences), "instances_per_s": rows,
                       "exits_per_layer": [exits.count(l + 1) for l in range(dims["L"])]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
