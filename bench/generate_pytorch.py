#!/usr/bin/python3
"""The PyTorch side of the generation benchmark (`acrobat bench --generate`): the decoder-only
transformer of models/gpt.acr (tests/reference/model_gpt.py: the same weights, layout and greedy
decoding) generating for a set of instances `[prompt ids, max_new]`, in the three ways a careful
PyTorch 1.13 user writes it, all greedy, all with a KV cache, under `torch.no_grad`:

  padded   a static batch: the prompts left-padded to the batch's longest, one prefill of the whole
           batch with a causal and padding mask, then one decode step of the whole batch at a time
           until its last instance ends (Hugging Face generate's way); instances that have ended
           keep running, their tokens ignored;
  drop     the same, but after each step the instances that ended leave the batch and its caches:
           the batch's last live instances move into their slots, so a step copies the cache rows
           of the instances that move and no others;
  single   one instance at a time (a batch of one: no padding, only the causal mask).

Each instance's positions start at 0 at its first real token (as Hugging Face derives them from the
attention mask), so every strategy generates exactly the oracle's tokens (`--check` asserts it).
The caches: per layer, keys and values each in one preallocated [B, heads, T + S, 64] buffer (T the
batch's longest prompt, S its most decode steps), written in place one column per step; a step's
attention reads the filled columns as a view, masking the padding columns. A mask value is the
float32 minimum rather than -inf, so that a padding row of the prefill (which sees no key) stays
finite.

    /usr/bin/python3 bench/generate_pytorch.py --instances FILE.jsonl --params OUT.safetensors
        [--set D=128,NH=2,...] [--seed 0] [--limit 64] [--batch 16,64,128] [--threads 1,2]
        [--reps 3] [--strategies padded,drop,single] [--json OUT]
    /usr/bin/python3 bench/generate_pytorch.py --check     # the strategies against the oracle

`--params` is written from model_gpt.init_params(--seed) and read back (acrobat then reads the
same file); `--load-params FILE` reads given weights instead.

Timing: a cell is the first `--limit` instances of the file in batches of B consecutive ones
(single: once per thread count, its rows independent of B). A strategy's time is that of all the
cell's batches, from the instances' token lists to their generated tokens; prefill is each batch's
prompt through every layer and its first token, decode the rest (the steps). One warm-up on the
first batch, then `--reps` passes taken in turns with the other strategies; the median pass is
reported. single takes one pass: it is by far the slowest (each step's products read every weight
for one row), and a pass of a minute varies little. A thread count is split between PyTorch's
intra-op pool and OpenBLAS's in the way that runs fastest (tests/reference/torch_threads.py;
measured here at two threads: the drop strategy at batch 64 decoded in 3.2 s with PyTorch's pool
at 1 and OpenBLAS's at 2, 4.2 s at 2 and 1, 17.3 s with both at 2, where the pools fight for the
cores), chosen per thread count from a short run of the first 16 instances and recorded in each
row. glibc keeps freed memory in its heap (the mmap and trim thresholds raised at start-up, as
bench/ragged_pytorch.py does; `--malloc default` keeps glibc's).

Useful FLOPs (one formula for every strategy and for acrobat's rows; a multiply-add counts 2; layer
norms, softmax, biases, ReLU and residuals not counted): a token at position i (0-based) costs, per
layer, 8 D^2 (query, key and value projections and the output projection) + 4 D FF (feed-forward)
+ 4 (i + 1) D (its scores against the i + 1 keys it sees and their product with the values);
logits 2 D V for the prompt's last token and for every fed token. A prompt of n tokens:
L (n (8 D^2 + 4 D FF) + 2 D n (n + 1)) + 2 D V; a decode step feeding the token at position t:
L (8 D^2 + 4 D FF + 4 (t + 1) D) + 2 D V; an instance that generates g tokens takes g - 1 steps at
t = n .. n + g - 2. Executed FLOPs apply the same formula to the shapes a strategy runs (padded
prompts, padding columns, instances that ended but still run); `padding_share` is executed over
useful, minus 1.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import model_gpt  # noqa: E402  (the oracle: weights layout, init_params, make_data)
import models  # noqa: E402  (state_tensors, load_tensors)
import safetensors_io  # noqa: E402
from torch_threads import blas_core, cpu_name, retain_freed_memory, set_threads, splits  # noqa: E402  (threads, glibc's heap)

STRATEGIES = ("padded", "drop", "single")
ENGINE = {s: "pytorch-" + s for s in STRATEGIES}
MASKED = torch.finfo(torch.float32).min


# ---------------------------------------------------------------------------------------------
# FLOPs

def prefill_flops(d, n):
    """A prompt of n tokens through every layer, and its last token's logits."""
    D, FF, L, V = d["D"], d["FF"], d["L"], d["V"]
    return L * (n * (8 * D * D + 4 * D * FF) + 2 * D * n * (n + 1)) + 2 * D * V


def step_flops(d, t):
    """One decode step feeding the token at position t (t keys cached before it)."""
    D, FF, L, V = d["D"], d["FF"], d["L"], d["V"]
    return L * (8 * D * D + 4 * D * FF + 4 * (t + 1) * D) + 2 * D * V


def decode_flops(d, n, g):
    """The g - 1 steps of an instance with an n-token prompt that generates g tokens."""
    return sum(step_flops(d, t) for t in range(n, n + g - 1))


# ---------------------------------------------------------------------------------------------
# Generation

class Weights:
    """The oracle's parameters as the strategies use them, and its dims."""

    def __init__(self, model, dims):
        self.m, self.dims = model, dims
        self.D, self.NH, self.DH, self.L = model.D, model.NH, model.DH, model.L
        self.P, self.EOS = model.P, model.EOS
        self.scale = 1.0 / (self.DH ** 0.5)

    def ln(self, x, g, b):
        return F.layer_norm(x, (self.D,), g, b, eps=1e-5)

    def qkv(self, x, l):
        """[..., D] -> queries, keys, values, each [..., NH, DH]."""
        m = self.m
        y = self.ln(x, m.ln1_g[l], m.ln1_b[l]) @ m.Wqkv[l] + m.bqkv[l]
        return [z.reshape(*z.shape[:-1], self.NH, self.DH) for z in y.split(self.D, dim=-1)]

    def finish_layer(self, x, attended, l):
        """The output projection and the feed-forward half of layer l, with their residuals."""
        m = self.m
        x = x + attended @ m.Wo[l] + m.bo[l]
        return x + torch.relu(self.ln(x, m.ln2_g[l], m.ln2_b[l]) @ m.W1[l] + m.b1[l]) @ m.W2[l] + m.b2[l]

    def next_tokens(self, rows):
        """[B, D] -> [B]: the first index of the maximum, as the oracle's argmax."""
        m = self.m
        return torch.argmax(self.ln(rows, m.lnf_g, m.lnf_b) @ m.Wout, dim=-1)


class Batch:
    """One batch being generated: its caches, its live slots, what they have generated and the
    FLOPs its shapes execute."""

    def __init__(self, w, instances):
        self.w = w
        self.B = len(instances)
        self.lens = [len(p) for p, _ in instances]
        self.budgets = [mx for _, mx in instances]
        self.T = max(self.lens)
        cols = self.T + max(self.budgets) - 1
        shape = (self.B, w.NH, cols, w.DH)
        self.K = [torch.empty(shape) for _ in range(w.L)]
        self.Vc = [torch.empty(shape) for _ in range(w.L)]
        pads = torch.tensor([self.T - n for n in self.lens])
        self.key_masked = torch.arange(cols)[None, :] < pads[:, None]  # [B, cols]: padding columns
        self.padded = self.T != min(self.lens)
        self.out = [[] for _ in instances]
        self.slot_of = list(range(self.B))  # slot -> instance
        self.live = self.B                  # slots 0 .. live - 1 run
        self.done = [False] * self.B        # per instance
        self.positions = torch.tensor(self.lens)  # per slot: the position of the token fed next
        self.steps = 0
        self.rows = 0                       # the decode batch summed over the steps
        self.executed = self.B * prefill_flops(w.dims, self.T)

    def prefill(self, instances):
        """Every prompt through every layer; returns the first tokens [B]."""
        w, B, T = self.w, self.B, self.T
        ids = torch.zeros(B, T, dtype=torch.long)
        positions = torch.zeros(B, T, dtype=torch.long)
        for i, (p, _) in enumerate(instances):
            ids[i, T - len(p):] = torch.tensor(p)
            positions[i, T - len(p):] = torch.arange(len(p))
        x = w.m.tok[ids] + w.m.pos[positions]  # [B, T, D]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]  # [1, 1, T, T]: the future
        if self.padded:
            mask = mask | self.key_masked[:, None, None, :T]
        for l in range(w.L):
            q, k, v = (z.transpose(1, 2) for z in w.qkv(x, l))  # [B, NH, T, DH]
            self.K[l][:, :, :T] = k
            self.Vc[l][:, :, :T] = v
            s = (q @ k.transpose(-1, -2) * w.scale).masked_fill(mask, MASKED)
            x = w.finish_layer(x, (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, w.D), l)
        return w.next_tokens(x[:, T - 1])

    def record(self, tokens):
        """Appends the live slots' tokens to the instances still running; returns the slots whose
        instance ended with them."""
        ended = []
        for slot in range(self.live):
            i = self.slot_of[slot]
            if self.done[i]:
                continue
            self.out[i].append(tokens[slot])
            if tokens[slot] == self.w.EOS or len(self.out[i]) == self.budgets[i]:
                self.done[i] = True
                ended.append(slot)
        return ended

    def step(self, tokens):
        """One decode step of the live slots (tokens [live]); returns their next tokens."""
        w, m, t = self.w, self.live, self.T + self.steps
        x = w.m.tok[tokens] + w.m.pos[self.positions[:m].clamp(max=w.P - 1)]  # [m, D]; an ended
        # instance of the padded strategy may run past the last position
        mask = self.key_masked[:m, None, None, :t + 1] if self.padded else None
        for l in range(w.L):
            q, k, v = w.qkv(x, l)  # [m, NH, DH]
            self.K[l][:m, :, t] = k
            self.Vc[l][:m, :, t] = v
            s = q[:, :, None, :] @ self.K[l][:m, :, :t + 1].transpose(-1, -2) * w.scale  # [m, NH, 1, t + 1]
            if mask is not None:
                s = s.masked_fill(mask, MASKED)
            x = w.finish_layer(x, (torch.softmax(s, dim=-1) @ self.Vc[l][:m, :, :t + 1]).reshape(m, w.D), l)
        self.steps += 1
        self.rows += m
        self.executed += m * step_flops(w.dims, t)
        self.positions[:m] += 1
        return w.next_tokens(x)

    def drop(self, ended, tokens):
        """Removes the slots in `ended` from the batch: the last live slots move into them (their
        cache rows, mask, position, token). Returns the live slots' tokens."""
        gone = set(ended)
        live = self.live - len(gone)
        movers = [s for s in range(live, self.live) if s not in gone]
        holes = [s for s in sorted(gone) if s < live]
        cols = self.T + self.steps
        for src, dst in zip(movers, holes):
            for l in range(self.w.L):
                self.K[l][dst, :, :cols] = self.K[l][src, :, :cols]
                self.Vc[l][dst, :, :cols] = self.Vc[l][src, :, :cols]
            self.key_masked[dst] = self.key_masked[src]
            self.positions[dst] = self.positions[src]
            tokens[dst] = tokens[src]
            self.slot_of[dst] = self.slot_of[src]
        self.live = live
        self.padded = self.padded and bool(self.key_masked[:live, :self.T].any())
        return tokens[:live]


def generate_batch(w, instances, drop):
    """Generates for one batch: (its Batch, prefill seconds, decode seconds)."""
    t0 = time.perf_counter()
    b = Batch(w, instances)
    tokens = b.prefill(instances)
    ended = b.record(tokens.tolist())
    t1 = time.perf_counter()
    while b.live > 0 and not all(b.done):
        if drop and ended:
            tokens = b.drop(ended, tokens)
        tokens = b.step(tokens)
        ended = b.record(tokens.tolist())
    return b, t1 - t0, time.perf_counter() - t1


def run_strategy(w, instances, strategy, batch):
    """One pass of a strategy over the instances in batches of `batch` (single: of one)."""
    size = 1 if strategy == "single" else batch
    r = {"outputs": [], "prefill_seconds": 0.0, "decode_seconds": 0.0, "steps": 0, "rows": 0, "executed": 0}
    for k in range(0, len(instances), size):
        b, pre, dec = generate_batch(w, instances[k:k + size], strategy == "drop")
        r["outputs"].extend(b.out)
        r["prefill_seconds"] += pre
        r["decode_seconds"] += dec
        r["steps"] += b.steps
        r["rows"] += b.rows
        r["executed"] += b.executed
    r["seconds"] = r["prefill_seconds"] + r["decode_seconds"]
    return r


def useful_flops(d, instances, outputs):
    """(prefill, decode) useful FLOPs of the instances given what they generated."""
    pre = sum(prefill_flops(d, len(p)) for p, _ in instances)
    dec = sum(decode_flops(d, len(p), len(o)) for (p, _), o in zip(instances, outputs))
    return pre, dec


# ---------------------------------------------------------------------------------------------
# Timing

def fastest_split(w, instances, threads):
    """With more than one thread, the split of them between PyTorch's pool and OpenBLAS's that
    generates fastest for the first 16 instances (drop, batch 16) after a warm-up; both pools fight
    for the cores when both have every thread (torch_threads.splits)."""
    options = splits(threads)
    if len(options) == 1:
        return options[0]
    part = instances[:16]
    times = {}
    for split in options:
        set_threads(*split)
        run_strategy(w, part[:4], "drop", 4)
        times[split] = run_strategy(w, part, "drop", 16)["seconds"]
    return min(times, key=times.get)


def measure(w, instances, jobs, threads, reps):
    """Every (strategy, batch) job at one thread count: a warm-up on its first batch, then `reps`
    passes in turns (single: one pass); one row per job from its median pass."""
    split = fastest_split(w, instances, threads)
    set_threads(*split)
    for s, b in jobs:
        run_strategy(w, instances[:1 if s == "single" else b], s, b)
    passes = {job: [] for job in jobs}
    for rep in range(reps):
        for job in jobs:
            if job[0] != "single" or rep == 0:
                passes[job].append(run_strategy(w, instances, *job))
    rows, reference = [], None
    for (s, b), ps in passes.items():
        ps.sort(key=lambda r: r["seconds"])
        r = ps[(len(ps) - 1) // 2]
        reference = reference or r["outputs"]
        pre, dec = useful_flops(w.dims, instances, r["outputs"])
        tokens = sum(len(o) for o in r["outputs"])
        rows.append({
            "engine": ENGINE[s],
            "batch": 1 if s == "single" else b,
            "threads": threads,
            "torch_threads": split[0],
            "blas_threads": split[1],
            "instances": len(instances),
            "prompt_tokens": sum(len(p) for p, _ in instances),
            "tokens": tokens,
            "seconds": r["seconds"],
            "prefill_seconds": r["prefill_seconds"],
            "decode_seconds": r["decode_seconds"],
            "seconds_reps": [p["seconds"] for p in ps],
            "tokens_per_s": tokens / r["seconds"],
            "useful_gflop": (pre + dec) / 1e9,
            "prefill_useful_gflop": pre / 1e9,
            "decode_useful_gflop": dec / 1e9,
            "useful_gflops": (pre + dec) / r["seconds"] / 1e9,
            "prefill_useful_gflops": pre / r["prefill_seconds"] / 1e9,
            "decode_useful_gflops": dec / r["decode_seconds"] / 1e9 if r["decode_seconds"] > 0 else 0.0,
            "executed_gflop": r["executed"] / 1e9,
            "padding_share": r["executed"] / (pre + dec) - 1,
            "steps": r["steps"],
            "mean_decode_batch": r["rows"] / r["steps"] if r["steps"] else 0.0,
            "agrees": r["outputs"] == reference,
        })
    return rows, reference


def sweep(args, quiet=False):
    d, w, instances = setup(args)
    jobs = [(s, b) for b in args.batch for s in args.strategies if s != "single"]
    if "single" in args.strategies:
        jobs.append(("single", 1))
    if not quiet:
        print(f"PyTorch {torch.__version__}, {cpu_name()}; gpt {json.dumps(d)}; {len(instances)} instances, "
              f"{sum(len(p) for p, _ in instances)} prompt tokens; median of {args.reps}; malloc {args.malloc}",
              flush=True)
        print(f"{'strategy':<15} {'batch':>5} {'thr':>3} {'tokens/s':>9} {'GFLOP/s':>8} {'prefill s':>9} "
              f"{'decode s':>9} {'padding':>8} {'decode batch':>12}", flush=True)
    results, outputs = [], None
    with torch.no_grad():
        for threads in args.threads:
            rows, ref = measure(w, instances, jobs, threads, args.reps)
            outputs = outputs or ref
            for r in rows:
                r["agrees"] = r["agrees"] and ref == outputs
                if not quiet:
                    print(f"{r['engine']:<15} {r['batch']:>5} {threads:>3} {r['tokens_per_s']:>9.1f} "
                          f"{r['useful_gflops']:>8.1f} {r['prefill_seconds']:>9.3f} {r['decode_seconds']:>9.3f} "
                          f"{100 * r['padding_share']:>7.1f}% {r['mean_decode_batch']:>12.1f}"
                          f"{'' if r['agrees'] else '  (TOKENS DIFFER)'}", flush=True)
            results.extend(rows)
    if args.json:
        doc = {
            "benchmark": "generate",
            "torch_version": torch.__version__,
            "cpu": cpu_name(),
            "openblas_core": blas_core(),
            "dims": d,
            "instances": len(instances),
            "reps": args.reps,
            "seed": args.seed,
            "malloc": args.malloc,
            "flops": "prompt of n: L (n (8 D^2 + 4 D FF) + 2 D n (n + 1)) + 2 D V; decode step at position "
                     "t: L (8 D^2 + 4 D FF + 4 (t + 1) D) + 2 D V (norms, softmax, biases not counted)",
            "outputs": outputs,
            "results": results,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return results


def setup(args):
    """(dims, Weights, instances): the weights written to --params from --seed and read back, or
    read from --load-params."""
    d = model_gpt._dims(models.parse_sets(args.set))
    path = args.load_params
    if not path:
        path = args.params
        model = model_gpt.init_params(model_gpt.Model(**d), args.seed)
        safetensors_io.save_file(models.state_tensors(model), path,
                                 {"model": "gpt", "dims": json.dumps(d), "seed": str(args.seed)})
    tensors, _ = safetensors_io.load_file(path)
    model = models.load_tensors(model_gpt.Model(**d), tensors).eval()
    instances = model_gpt.load_instances(args.instances, None, args.limit, d)
    return d, Weights(model, d), instances


# ---------------------------------------------------------------------------------------------
# Self-test

def check(args):
    """Each strategy, at several batch sizes, against the oracle's forward one instance at a time:
    the same tokens, exactly; the FLOP accounting; and a tiny sweep through the whole pipeline, JSON
    included. Returns a process exit code."""
    set_threads(1)
    failures = []
    cases = [("small", {"D": 128, "NH": 2, "FF": 256, "L": 2, "V": 64}, 24, [1, 5, 24]),
             ("full", {}, 6, [6])]
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        for name, sets, count, batches in cases:
            d = model_gpt._dims(sets)
            data = os.path.join(tmp, name + ".jsonl")
            model_gpt.make_data(data, count, 1, d)
            instances = model_gpt.load_instances(data, None, 0, d)
            model = model_gpt.init_params(model_gpt.Model(**d), args.seed).eval()
            expected = [model(inst) for inst in instances]
            w = Weights(model, d)
            ended_early = sum(1 for (_, mx), o in zip(instances, expected) if len(o) < mx)
            for s in STRATEGIES:
                for b in ([1] if s == "single" else batches):
                    r = run_strategy(w, instances, s, b)
                    bad = [i for i, (o, e) in enumerate(zip(r["outputs"], expected)) if o != e]
                    if bad:
                        failures.append(f"{name}: {s} at batch {b}: instances {bad} differ from the oracle")
                    pre, dec = useful_flops(d, instances, r["outputs"])
                    if s == "single" and r["executed"] != pre + dec:
                        failures.append(f"{name}: single executes {r['executed']} FLOPs, useful {pre + dec}")
                    if r["executed"] < pre + dec:
                        failures.append(f"{name}: {s} at batch {b} executes fewer FLOPs than useful")
                    if s == "drop" and b > 1 and r["rows"] >= run_strategy(w, instances, "padded", b)["rows"]:
                        failures.append(f"{name}: drop at batch {b} runs as many rows as padded")
            print(f"check: {name} dims {json.dumps(d)}: {count} instances ({ended_early} ended by EOS), "
                  f"every strategy at batch {','.join(map(str, batches))}")

        # The pipeline end to end on tiny sizes.
        d = {"D": 128, "NH": 2, "FF": 256, "L": 2, "V": 64}
        data = os.path.join(tmp, "tiny.jsonl")
        model_gpt.make_data(data, 8, 2, d)
        out = os.path.join(tmp, "out.json")
        sub = parse_args(["--instances", data, "--params", os.path.join(tmp, "p.safetensors"),
                          "--set", ",".join(f"{k}={v}" for k, v in d.items()), "--batch", "4",
                          "--threads", "1", "--reps", "1", "--json", out, "--seed", str(args.seed)])
        sweep(sub, quiet=True)
        with open(out) as f:
            doc = json.load(f)
        rows = doc["results"]
        if len(rows) != 3 or any(r["tokens_per_s"] <= 0 or not r["agrees"] for r in rows):
            failures.append(f"pipeline: {len(rows)} rows, expected 3 that agree with positive tokens/s")
        if len(doc["outputs"]) != 8:
            failures.append("pipeline: the outputs are missing")

    for f in failures:
        print("check FAILED:", f, file=sys.stderr)
    if not failures:
        print("check passed: padded, drop and single generate the oracle's tokens")
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------

def int_list(s):
    return [int(x) for x in s.split(",") if x]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--instances", help="JSON lines [prompt ids, max_new] (what acrobat reads)")
    p.add_argument("--params", help="write the weights here (from --seed), then read them back")
    p.add_argument("--load-params", default="", help="read the weights from this file instead")
    p.add_argument("--set", action="append", default=[], metavar="K=V", help="dims, comma-separated")
    p.add_argument("--limit", type=int, default=0, help="the first N instances (0: all)")
    p.add_argument("--batch", type=int_list, default=[16, 64, 128])
    p.add_argument("--threads", type=int_list, default=[1, 2])
    p.add_argument("--reps", type=int, default=3, help="median of this many passes (default 3)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--json", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--malloc", choices=("retain", "default"), default="retain",
                   help="retain: keep freed memory in glibc's heap (default); default: glibc as is")
    p.add_argument("--check", action="store_true", help="the strategies against the oracle, then exit")
    args = p.parse_args(argv)
    args.strategies = [s for s in args.strategies.split(",") if s]
    for s in args.strategies:
        if s not in STRATEGIES:
            p.error(f"unknown strategy {s!r} (padded, drop, single)")
    if not args.check:
        if not args.instances or not (args.params or args.load_params):
            p.error("--instances and --params (or --load-params) are required")
        if args.reps < 1 or not args.batch or not args.threads or min(args.batch + args.threads) < 1:
            p.error("--reps, --batch and --threads need positive values")
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
