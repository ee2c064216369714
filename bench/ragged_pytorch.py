#!/usr/bin/python3
"""The PyTorch side of the ragged-tensor benchmark (`acrobat bench --ragged`): one post-norm
transformer encoder layer in CoRa's configuration (d_model 512, 8 heads of 64, feed-forward 2048,
fp32, ReLU) over batches of variable-length sequences `[n_i, 512]`, run by PyTorch 1.13 on the CPU in
three ways:

  padded   the batch padded to its longest sequence, with `src_key_padding_mask`;
  sorted   the batch sorted by length and split into micro-batches of m consecutive instances, each
           padded to its own longest (mask only where it pads); every m in 1, 2, 4, ..., B is tried
           once and the fastest is timed and reported (CoRa's "UB" CPU baseline);
  nested   `nn.TransformerEncoder(layer, 1, enable_nested_tensor=True)` given the padded batch and
           its mask, which converts the batch to a nested tensor and runs the layer on it.

    /usr/bin/python3 bench/ragged_pytorch.py [--lengths mnli,race,...] [--batch 32,64,128]
        [--threads 1,2] [--batches 2] [--reps 3] [--strategies padded,sorted,nested] [--dense]
        [--train] [--json OUT] [--seed 0]
    /usr/bin/python3 bench/ragged_pytorch.py --check     # correctness and path self-test, seconds

Which code path each strategy takes in PyTorch 1.13 (torch/nn/modules/transformer.py; the script
checks it from the profiler's operator names in every warm-up pass and reports it as `path`):

  padded, sorted  `TransformerEncoderLayer.forward` called directly, eval mode, under
           `torch.inference_mode()`: its fast-path conditions hold (batched 3-d input, batch_first,
           ReLU, equal norm eps, no `src_mask`, even head count, no autocast, no grad), so it calls
           the fused `aten::_transformer_encoder_layer_fwd` on the DENSE padded tensor, the padding
           mask applied by `aten::_masked_softmax`. The layer never converts to nested: only
           `TransformerEncoder.forward` does, so every GEMM runs over the padded rows. (Outside
           inference mode with grad enabled the layer would take the composite slow path, same
           shapes.)
  nested   `TransformerEncoder.forward` sees a padding mask, `enable_nested_tensor`, a left-aligned
           mask and a fast-path-eligible first layer, so it calls `aten::_nested_tensor_from_mask`
           and passes a nested tensor to the layer's fused forward, then `to_padded_tensor` at the
           end. In 1.13 on the CPU this path runs, but only partly unpadded: the QKV projection,
           the output projection and the feed-forward GEMMs run over the packed rows (sum of n_i),
           while `aten::_transform_bias_rescale_qkv` pads Q, K and V back to the batch's longest
           (`to_padded_tensor`), so the attention scores and attention times V run as dense `bmm`
           over [B * heads, T_max, T_max] (softmax per instance). The executed-FLOP count below
           follows that.

Training (`--train`, `acrobat bench --ragged --train`): the training step of the same layer under a
pooled classifier, as models/encoder.acr's `loss` entry computes it: the mean of the layer's output
rows (the valid ones), a linear map to 3 classes, the cross-entropy against the instance's label,
the batch's mean loss, its backward and one Adam step (lr 1e-4; dropout 0, train mode). Labels are
seeded per batch. Two strategies:

  padded   the batch padded to its longest with `src_key_padding_mask`, the padded rows left out
           of the mean; one backward.
  sorted   sorted by length and split into micro-batches of m, each padded to its own longest, the
           gradients accumulated (each micro-batch's summed loss over B, one backward each) before
           the one Adam step; every m in 1, 2, 4, ..., B is tried once and the fastest is timed.

With grad enabled and the layer in train mode, PyTorch 1.13 takes the layer's composite path (no
fused kernel), over the padded rows. Nested tensors do not train in 1.13 on the CPU: the layer in
train mode refuses a nested input ("MultiheadAttention does not support NestedTensor outside of its
fast path"), and `layer_norm` has no NestedTensorCPU kernel; the script checks this each run and
reports it (`nested_training` in the JSON). Useful FLOPs of a step (`train_flops`): the forward's
and, for every product, its two gradients (each as many FLOPs as the product), less the gradient of
the input x that nobody needs (the QKV projection's dX).

Timing: a batch is a run of B consecutive lines of a length file, batches k = 0 .. N-1 from the start
of the file; each instance's input is a seeded random `[n_i, 512]` fp32 block (views into one seeded
pool, made before timing). A strategy's time is that of all N batches, starting from the list of
per-instance tensors (padding, mask, sorting and splitting are inside the timed region; outputs are
left padded, as PyTorch returns them); one warm-up pass, then `--reps` passes taken in turns with the
other strategies; the median is reported. Useful GFLOP/s counts only the unpadded work
(`layer_flops`), whatever a strategy executes.

The C allocator: PyTorch's CPU tensors come from glibc malloc, which serves blocks over its mmap
threshold (dynamic, at most 32 MiB) by mmap and unmaps them on free, and trims the heap's free top,
so a padded batch's large intermediates (MNLI at batch 64: QKV 48 MiB, feed-forward hidden 64 MiB;
RACE: attention scores 512 MiB) are page-faulted afresh on every call. Measured here at batch 64,
one thread, that alone cut the padded strategy from 32 to 13 useful GFLOP/s on MNLI and from 34 to
10 on RACE, and the nested one from 68 to 20 (MNLI) and 65 to 10 (RACE). By default the script
therefore re-executes itself with `MALLOC_MMAP_THRESHOLD_=4294967296` and
`MALLOC_TRIM_THRESHOLD_=68719476736` (read by glibc only at start-up), so freed memory stays in the
heap and is reused: the setting a tuned deployment would use. `--malloc default` keeps glibc's
defaults.

Peak memory: bytes the PyTorch CPU allocator holds above what was live before the pass (the
per-instance inputs are not counted), maximum over the warm-up pass, from the profiler's memory
events (`profile_memory=True`). It is the allocator's live peak, not RSS.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from torch_threads import blas_core, cpu_name, retain_freed_memory, set_threads  # noqa: E402  (threads, glibc's heap)
LENGTHS_DIR = os.path.join(ROOT, "data", "lengths")

D_MODEL, HEADS, FFN = 512, 8, 2048
STRATEGIES = ("padded", "sorted", "nested")
ENGINE = {s: "pytorch-" + s for s in STRATEGIES}

warnings.filterwarnings("ignore", message=".*nested tensors is in prototype.*")


# ---------------------------------------------------------------------------------------------
# FLOPs

def layer_flops(n, attn_len=None, d=D_MODEL, ff=FFN):
    """FLOPs of one encoder layer over one sequence of n rows, a multiply-add counted as 2:
    QKV projections 3 * 2*n*d*d, scores Q K^T 2*n*n*d, scores times V 2*n*n*d, output projection
    2*n*d*d, feed-forward 2 * 2*n*d*ff. Softmax, layer norms, biases, ReLU and residuals are not
    counted. `attn_len` (default n) is the length the attention runs over when it differs from the
    rows the projections run over (the nested path pads attention to the batch's longest)."""
    t = n if attn_len is None else attn_len
    projections = 3 * 2 * n * d * d + 2 * n * d * d + 2 * 2 * n * d * ff
    attention = 2 * t * t * d + 2 * t * t * d
    return projections + attention


def train_flops(n, d=D_MODEL):
    """FLOPs of a training step on one sequence of n rows (see the docstring): three times the
    forward's products, less the input's gradient through the QKV projection (3 * 2*n*d*d)."""
    return 3 * layer_flops(n) - 3 * 2 * n * d * d


def useful_flops(lengths, per=layer_flops):
    return sum(per(n) for n in lengths)


def executed_flops(strategy, lengths, micro=None, per=layer_flops):
    """FLOPs PyTorch executes for one batch, on the shapes it really uses (see the docstring);
    `per`: of one sequence (layer_flops, or train_flops for a training step)."""
    if strategy == "padded":
        return len(lengths) * per(max(lengths))
    if strategy == "sorted":
        s = sorted(lengths)
        return sum(len(s[i:i + micro]) * per(max(s[i:i + micro]))
                   for i in range(0, len(s), micro))
    if strategy == "nested":
        t = max(lengths)
        return sum(layer_flops(n, 0) + layer_flops(0, t) for n in lengths)
    raise ValueError(strategy)


# ---------------------------------------------------------------------------------------------
# The model and the three strategies


def make_model(seed):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model=D_MODEL, nhead=HEADS, dim_feedforward=FFN,
                                       dropout=0.0, batch_first=True, norm_first=False).eval()
    encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=True).eval()
    # TransformerEncoder deep-copies the layer: both hold the same weights.
    return layer, encoder


def pad(xs):
    """Pad a list of [n_i, d] tensors to [B, max n_i, d] with its key-padding mask (True = pad),
    or no mask when all lengths are equal."""
    lens = [x.shape[0] for x in xs]
    src = nn.utils.rnn.pad_sequence(xs, batch_first=True)
    if min(lens) == max(lens):
        return src, None
    mask = torch.arange(src.shape[1])[None, :] >= torch.tensor(lens)[:, None]
    return src, mask


def run_padded(model, xs, micro=None):
    layer, _ = model
    src, mask = pad(xs)
    return layer(src, src_key_padding_mask=mask)


def run_sorted(model, xs, micro):
    """Returns the micro-batches' outputs in sorted order and the sorting permutation."""
    layer, _ = model
    order = sorted(range(len(xs)), key=lambda i: xs[i].shape[0])
    outs = []
    for i in range(0, len(order), micro):
        src, mask = pad([xs[j] for j in order[i:i + micro]])
        outs.append(layer(src, src_key_padding_mask=mask))
    return outs, order


def run_nested(model, xs, micro=None):
    _, encoder = model
    src, mask = pad(xs)
    if mask is None:  # the encoder converts to nested only when given a mask
        mask = torch.zeros(src.shape[:2], dtype=torch.bool)
    return encoder(src, src_key_padding_mask=mask)


RUN = {"padded": run_padded, "sorted": run_sorted, "nested": run_nested}


# ---------------------------------------------------------------------------------------------
# Training: the layer under a pooled classifier

CLASSES = 3
LEARNING_RATE = 1e-4


def make_training(seed):
    """(layer, classifier, Adam over both): the layer in train mode without dropout."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model=D_MODEL, nhead=HEADS, dim_feedforward=FFN,
                                       dropout=0.0, batch_first=True, norm_first=False).train()
    head = nn.Linear(D_MODEL, CLASSES)
    opt = torch.optim.Adam(list(layer.parameters()) + list(head.parameters()), lr=LEARNING_RATE)
    return layer, head, opt


def pooled_loss(model, xs, labels, scale):
    """scale times the summed cross-entropy of the classifier on the mean of each instance's rows."""
    layer, head, _ = model
    src, mask = pad(xs)
    out = layer(src, src_key_padding_mask=mask)
    if mask is not None:
        out = out.masked_fill(mask[:, :, None], 0.0)
    lens = torch.tensor([x.shape[0] for x in xs], dtype=out.dtype)
    pooled = out.sum(dim=1) / lens[:, None]
    return nn.functional.cross_entropy(head(pooled), labels, reduction="sum") * scale


def accumulate(strategy, model, xs, labels, micro=None):
    """The gradient of the batch's mean loss in the params' .grad (padded: one backward; sorted:
    one per micro-batch of m, accumulated)."""
    model[2].zero_grad(set_to_none=True)
    scale = 1.0 / len(xs)
    if strategy == "padded":
        pooled_loss(model, xs, labels, scale).backward()
        return
    order = sorted(range(len(xs)), key=lambda i: xs[i].shape[0])
    for i in range(0, len(order), micro):
        idx = order[i:i + micro]
        pooled_loss(model, [xs[j] for j in idx], labels[idx], scale).backward()


def train_step(strategy, model, batch, micro=None):
    xs, labels = batch
    accumulate(strategy, model, xs, labels, micro)
    model[2].step()


def nested_training_refusal():
    """Why 1.13 does not train on nested tensors here: the errors of the two ways in (None if one
    works)."""
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                       batch_first=True).train()
    xs = [torch.randn(n, 16, requires_grad=True) for n in (3, 5)]
    reasons = []
    try:
        layer(torch.nested.nested_tensor(xs))
    except (RuntimeError, AssertionError, NotImplementedError) as e:
        reasons.append("the layer in train mode: " + str(e).split("\n")[0].split(". ")[0])
    try:
        nn.functional.layer_norm(torch.nested.nested_tensor(xs), (16,))
    except (RuntimeError, NotImplementedError) as e:
        reasons.append("layer_norm: " + str(e).split("\n")[0].split(". ")[0])
    return "; ".join(reasons) if len(reasons) == 2 else None


def per_instance(strategy, out, lengths):
    """Each instance's [n_i, d] output, in the batch's order, padded rows dropped."""
    if strategy == "sorted":
        outs, order = out
        rows = [o[k] for o in outs for k in range(o.shape[0])]
        res = [None] * len(lengths)
        for r, i in zip(rows, order):
            res[i] = r[:lengths[i]]
        return res
    return [out[i, :n] for i, n in enumerate(lengths)]


def path_of(op_names):
    """Which path a pass took, from the aten operators the profiler saw."""
    fused = "aten::_transformer_encoder_layer_fwd" in op_names
    nested = "aten::_nested_tensor_from_mask" in op_names
    if fused and nested:
        return "nested"
    if fused:
        return "dense-fused"
    return "dense-composite"


EXPECTED_PATH = {"padded": "dense-fused", "sorted": "dense-fused", "nested": "nested"}


# ---------------------------------------------------------------------------------------------
# Timing

def make_inputs(lengths, seed):
    """Seeded random [n_i, 512] inputs: views into one seeded pool (so a long sweep stays small)."""
    g = torch.Generator().manual_seed(seed)
    pool_rows = max(8192, 2 * max(lengths))
    pool = torch.randn(pool_rows, D_MODEL, generator=g)
    starts = torch.randint(0, pool_rows - max(lengths) + 1, (len(lengths),), generator=g).tolist()
    return [pool[s:s + n] for s, n in zip(starts, lengths)]


def timed_pass(strategy, model, batches, micro, train=False):
    """One pass over the batches: the layer's forward, or with `train` (batches of (xs, labels)) a
    training step each."""
    t0 = time.perf_counter()
    for b in batches:
        if train:
            train_step(strategy, model, b, micro)
        else:
            out = RUN[strategy](model, b, micro)
            del out
    return time.perf_counter() - t0


def profiled_pass(strategy, model, batches, micro, train=False):
    """The warm-up pass under the profiler: the path taken and the allocator's peak above start."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        timed_pass(strategy, model, batches, micro, train)
    events = list(prof.profiler.kineto_results.events())
    names = {e.name() for e in events}
    mem = sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_us())
    live = peak = 0
    for e in mem:
        live += e.nbytes()
        peak = max(peak, live)
    return path_of(names), peak


def micro_sizes(b):
    m, out = 1, []
    while m < b:
        out.append(m)
        m *= 2
    return out + [b]


def bench_cell(model, name, lengths_all, batch, threads, args, dense_len=None):
    """All strategies on one (dataset, batch size, thread count): one row per strategy."""
    nb = min(args.batches, len(lengths_all) // batch)
    if nb == 0:
        return []
    lens = lengths_all[:nb * batch]
    if dense_len is not None:
        lens = [dense_len] * len(lens)
    batch_lens = [lens[k * batch:(k + 1) * batch] for k in range(nb)]
    batches = [make_inputs(bl, args.seed + k) for k, bl in enumerate(batch_lens)]
    train = args.train
    per = train_flops if train else layer_flops
    if train:
        batches = [(xs, torch.randint(0, CLASSES, (len(xs),), generator=torch.Generator().manual_seed(args.seed + k)))
                   for k, xs in enumerate(batches)]
    useful = sum(useful_flops(bl, per) for bl in batch_lens)

    # The sorted strategy's micro-batch size: one pass each (after one warm-up at m = B / 2).
    micro = {}
    search = {}
    if "sorted" in args.strategies:
        timed_pass("sorted", model, batches, max(1, batch // 2), train)
        for m in micro_sizes(batch):
            search[m] = timed_pass("sorted", model, batches, m, train)
        micro["sorted"] = min(search, key=search.get)

    info = {s: profiled_pass(s, model, batches, micro.get(s), train) for s in args.strategies}
    times = {s: [] for s in args.strategies}
    for _ in range(args.reps):
        for s in args.strategies:
            times[s].append(timed_pass(s, model, batches, micro.get(s), train))

    rows = []
    for s in args.strategies:
        secs = statistics.median(times[s])
        executed = sum(executed_flops(s, bl, micro.get(s), per) for bl in batch_lens)
        path, peak = info[s]
        row = {
            "engine": ENGINE[s],
            "dataset": name + ("-dense" if dense_len is not None else ""),
            "dense": dense_len is not None,
            "batch": batch,
            "threads": threads,
            "batches": nb,
            "instances": len(lens),
            "tokens": sum(lens),
            "max_length": max(lens),
            "useful_gflop": useful / 1e9,
            "executed_gflop": executed / 1e9,
            "useful_gflops": useful / secs / 1e9,
            "padding_share": (executed - useful) / useful,
            "seconds": secs,
            "seconds_reps": times[s],
            "instances_per_s": len(lens) / secs,
            "peak_bytes": peak,
            "path": path,
            "path_expected": path == ("dense-composite" if train else EXPECTED_PATH[s]),
        }
        if s == "sorted":
            row["micro_batch"] = micro[s]
            row["micro_batch_seconds"] = {str(m): t for m, t in search.items()}
        if dense_len is not None:
            row["dense_length"] = dense_len
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Output

def print_header():
    print(f"{'dataset':<14} {'batch':>5} {'thr':>3}  {'strategy':<15} {'useful GFLOP/s':>14} "
          f"{'padding':>8} {'micro':>5} {'peak MiB':>9} {'seconds':>8}  path", flush=True)


def print_rows(rows):
    best = max((r["useful_gflops"] for r in rows), default=0)
    for r in rows:
        mark = " *" if r["useful_gflops"] == best and len(rows) > 1 else ""
        path = r["path"] + ("" if r["path_expected"] else " (UNEXPECTED)")
        print(f"{r['dataset']:<14} {r['batch']:>5} {r['threads']:>3}  {r['engine']:<15} "
              f"{r['useful_gflops']:>12.1f}{mark:<2} {100 * r['padding_share']:>7.1f}% "
              f"{r.get('micro_batch', '-'):>5} {r['peak_bytes'] / 2**20:>9.1f} "
              f"{r['seconds']:>8.3f}  {path}", flush=True)


def read_lengths(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def resolve_lengths(spec):
    if not spec:
        files = sorted(f for f in os.listdir(LENGTHS_DIR) if f.endswith(".txt"))
        return [os.path.join(LENGTHS_DIR, f) for f in files]
    out = []
    for item in spec.split(","):
        if os.path.exists(item):
            out.append(item)
        else:
            out.append(os.path.join(LENGTHS_DIR, item if item.endswith(".txt") else item + ".txt"))
    return out


def int_list(s):
    return [int(x) for x in s.split(",") if x]


# ---------------------------------------------------------------------------------------------
# Self-test

def check(args):
    """The three strategies (sorted at every micro-batch size) against each instance run alone
    through the layer's composite (non-fused) path, to 1e-4 relative; the paths taken; and a tiny
    sweep through the whole pipeline, JSON included. Returns a process exit code."""
    set_threads(1)
    model = make_model(args.seed)
    layer = model[0]
    lengths = [1, 7, 3, 16, 5, 1, 12, 9]
    xs = make_inputs(lengths, args.seed)
    failures = []

    # Reference: grad enabled and weights requiring grad, so the layer's fast path is not taken.
    with torch.enable_grad():
        ref = [layer(x[None], src_key_padding_mask=None)[0].detach() for x in xs]

    def compare(what, outs):
        for i, (o, r) in enumerate(zip(outs, ref)):
            err = ((o - r).abs() / (1 + r.abs())).max().item()
            if o.shape != r.shape or not err <= 1e-4:
                failures.append(f"{what}: instance {i} (length {lengths[i]}) differs, {err:.2e}")

    with torch.inference_mode():
        compare("padded", per_instance("padded", run_padded(model, xs), lengths))
        for m in micro_sizes(len(xs)):
            compare(f"sorted m={m}", per_instance("sorted", run_sorted(model, xs, m), lengths))
        compare("nested", per_instance("nested", run_nested(model, xs), lengths))
        for s in STRATEGIES:
            path, peak = profiled_pass(s, model, [xs], 2 if s == "sorted" else None)
            print(f"check: {s:<6} path {path}, peak {peak / 2**20:.2f} MiB")
            if path != EXPECTED_PATH[s]:
                failures.append(f"{s}: took path {path}, expected {EXPECTED_PATH[s]}")

    # Training: the gradient of the batch's mean loss, padded and sorted at every m, equals the sum of
    # the instances' run alone (relative to each param's largest entry).
    tmodel = make_training(args.seed)
    labels = torch.randint(0, CLASSES, (len(xs),), generator=torch.Generator().manual_seed(args.seed))
    params = list(tmodel[0].parameters()) + list(tmodel[1].parameters())
    tmodel[2].zero_grad(set_to_none=True)
    for i, x in enumerate(xs):
        pooled_loss(tmodel, [x], labels[i:i + 1], 1.0 / len(xs)).backward()
    alone = [p.grad.detach().clone() for p in params]

    def compare_grads(what):
        for k, (p, r) in enumerate(zip(params, alone)):
            err = ((p.grad - r).abs().max() / r.abs().max().clamp_min(1e-12)).item()
            if not err <= 1e-4:
                failures.append(f"{what}: gradient of param {k} differs, {err:.2e}")

    accumulate("padded", tmodel, xs, labels)
    compare_grads("training, padded")
    for m in micro_sizes(len(xs)):
        accumulate("sorted", tmodel, xs, labels, m)
        compare_grads(f"training, sorted m={m}")
    refusal = nested_training_refusal()
    print(f"check: nested tensors do not train: {refusal}")
    if refusal is None:
        failures.append("nested tensors train in this PyTorch: the training sweep needs a nested strategy")

    # FLOP accounting: no padding when all lengths are equal; sorted at m = 1 executes the useful work.
    eq = [9] * 4
    for s in STRATEGIES:
        if executed_flops(s, eq, 2) != useful_flops(eq):
            failures.append(f"flops: {s} pads a dense batch")
    if executed_flops("sorted", lengths, 1) != useful_flops(lengths):
        failures.append("flops: sorted at m = 1 pads")

    # The pipeline end to end on tiny sizes.
    with tempfile.TemporaryDirectory() as tmp:
        lf = os.path.join(tmp, "tiny.txt")
        with open(lf, "w") as f:
            f.write("\n".join(str(n) for n in lengths * 2) + "\n")
        out = os.path.join(tmp, "out.json")

        def tiny_sweep(mode):  # the sweep on the tiny file, forward (with dense cells) or training
            sweep(parse_args(["--lengths", lf, "--batch", "4", "--threads", "1", "--batches", "2", "--reps", "1",
                              mode, "--json", out, "--seed", str(args.seed)]), quiet=True)
            with open(out) as f:
                return json.load(f)

        rows = tiny_sweep("--dense")["results"]
        if len(rows) != 6 or any(r["useful_gflops"] <= 0 for r in rows):
            failures.append(f"pipeline: {len(rows)} rows, expected 6 with positive GFLOP/s")
        if any(not r["path_expected"] for r in rows):
            failures.append("pipeline: a strategy took an unexpected path")
        doc = tiny_sweep("--train")
        rows = doc["results"]
        if len(rows) != 2 or any(r["useful_gflops"] <= 0 or not r["path_expected"] for r in rows):
            failures.append(f"training pipeline: {len(rows)} rows, expected 2 on the composite path")
        if doc["benchmark"] != "ragged-encoder-training" or not doc["nested_training"]:
            failures.append("training pipeline: the JSON does not say what it measured")

    for f in failures:
        print("check FAILED:", f, file=sys.stderr)
    if not failures:
        print(f"check passed: {len(STRATEGIES)} strategies and the training step's gradient (padded, "
              f"sorted), sorted at m = {','.join(map(str, micro_sizes(len(xs))))}, lengths {lengths}, "
              "agree to 1e-4")
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------

def sweep(args, quiet=False):
    files = resolve_lengths(args.lengths)
    model = make_training(args.seed) if args.train else make_model(args.seed)
    refusal = nested_training_refusal() if args.train else None
    results = []
    if not quiet:
        print(f"PyTorch {torch.__version__}, {cpu_name()}; encoder layer d_model {D_MODEL}, "
              f"{HEADS} heads, feed-forward {FFN}, fp32; "
              f"{'training step (pooled classifier, Adam); ' if args.train else ''}"
              f"{args.batches} batch(es) per cell, median of {args.reps}; malloc {args.malloc}", flush=True)
        if args.train:
            print("nested tensors do not train here: " + (refusal or "(they do: the script needs a nested "
                                                                     "training strategy)"), flush=True)
        print_header()
    with torch.inference_mode(not args.train):
        for threads in args.threads:
            set_threads(threads)
            for path in files:
                name = os.path.splitext(os.path.basename(path))[0]
                lengths = read_lengths(path)
                for batch in args.batch:
                    cells = [None]
                    if args.dense:
                        cells.append(max(1, round(statistics.mean(lengths))))
                    for dense_len in cells:
                        rows = bench_cell(model, name, lengths, batch, threads, args, dense_len)
                        if not quiet:
                            print_rows(rows)
                        results.extend(rows)
    if not quiet:
        bad = [r for r in results if not r["path_expected"]]
        for r in bad:
            print(f"warning: {r['engine']} on {r['dataset']} took path {r['path']}",
                  file=sys.stderr)
    if args.json:
        doc = {
            "benchmark": "ragged-encoder-training" if args.train else "ragged-encoder-layer",
            "torch_version": torch.__version__,
            "cpu": cpu_name(),
            "openblas_core": blas_core(),
            "model": {"d_model": D_MODEL, "heads": HEADS, "ffn": FFN, "dtype": "float32",
                      "norm": "post", "activation": "relu"},
            "flops": "per instance of length n: QKV 3*2*n*d*d + QK^T 2*n*n*d + AV 2*n*n*d + "
                     "out 2*n*d*d + FFN 2*2*n*d*ff (softmax, norms, biases not counted)" +
                     ("; a training step: 3 times that, less QKV's input gradient 3*2*n*d*d" if args.train else ""),
            "nested_training": refusal,
            "peak_bytes": "PyTorch CPU allocator live peak above the pass's start, warm-up pass, "
                          "profiler memory events",
            "batches": args.batches,
            "reps": args.reps,
            "seed": args.seed,
            "malloc": args.malloc,
            "results": results,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return results


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="",
                   help="length files or names in data/lengths, comma-separated (default: all)")
    p.add_argument("--batch", type=int_list, default=[32, 64, 128])
    p.add_argument("--threads", type=int_list, default=[1, 2])
    p.add_argument("--batches", type=int, default=2,
                   help="consecutive batches of each file to time (default 2)")
    p.add_argument("--reps", type=int, default=3, help="median of this many passes (default 3)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--dense", action="store_true",
                   help="add a control row per cell: every instance the file's mean length")
    p.add_argument("--train", action="store_true",
                   help="the training step under a pooled classifier (padded and sorted; nested "
                        "tensors do not train in 1.13)")
    p.add_argument("--json", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--malloc", choices=("retain", "default"), default="retain",
                   help="retain: keep freed memory in glibc's heap (default); default: glibc as is")
    p.add_argument("--check", action="store_true",
                   help="correctness and path self-test on tiny sizes, then exit")
    args = p.parse_args(argv)
    args.strategies = [s for s in args.strategies.split(",") if s and not (args.train and s == "nested")]
    for s in args.strategies:
        if s not in STRATEGIES:
            p.error(f"unknown strategy {s!r} (padded, sorted, nested)")
    if args.batches < 1 or args.reps < 1 or not args.batch or not args.threads:
        p.error("--batches, --reps, --batch and --threads need positive values")
    return args


def main():
    args = parse_args()
    if args.malloc == "retain":
        retain_freed_memory(__file__)
    if args.check:
        sys.exit(check(args))
    sweep(args)


if __name__ == "__main__":
    main()
