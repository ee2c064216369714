#!/usr/bin/python3
"""The compiler's ablation study on one model: `acrobat bench --ablation` (each analysis switched off
in turn, and all of them) for the interpreter path and the AOT path, one and two threads, batch 8
and 64, at each hidden size; plus compile times and cached load times. Writes a markdown report and
the raw JSON of every bench run.

    /usr/bin/python3 bench/ablation.py [--model models/treelstm.acr] [--sizes 256,512] [--reps 3]
        [--out bench/results/ablation-treelstm]

All rows of one size are measured in one process, their repetitions taken in turns, next to the
sgemm yardstick; the report gives throughput relative to the reference engine and useful GFLOP/s as
a share of the yardstick, which is what stays comparable on a shared, noisy machine.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACROBAT = os.path.join(ROOT, "build", "tools", "acrobat")

def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def bench(model, data, size, reps, json_path, cache):
    cmd = [ACROBAT, "bench", model, "--input", data, "--set", f"H={size}", "--batch", "8,64",
           "--engine", "batched,aot", "--threads", "1,2", "--schedulers", "inline-depth",
           "--reps", str(reps), "--pytorch-limit", "0", "--ablation", "--json", json_path]
    run(cmd, env=dict(os.environ, ACROBAT_CACHE_DIR=cache))
    with open(json_path) as f:
        return json.load(f)


def compile_times(model, size):
    """Cold compile (empty cache), then a cached compile, then a cached load by `acrobat run`."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, ACROBAT_CACHE_DIR=cache)
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "m.so")
            t0 = time.monotonic()
            cold = run([ACROBAT, "compile", model, "--set", f"H={size}", "-o", obj], env).stdout
            cold_wall = time.monotonic() - t0
            t0 = time.monotonic()
            run([ACROBAT, "compile", model, "--set", f"H={size}", "-o", obj], env)
            warm_wall = time.monotonic() - t0
        m = re.search(r"parse\+check\+analyses ([0-9.]+) s, C\+\+ generation ([0-9.]+) s, "
                      r"system compiler ([0-9.]+) s", cold)
        lines = re.search(r"([0-9]+) lines of C\+\+", cold).group(1)
        data = os.path.join(ROOT, "data", "sst", "test.txt")
        kind = "sst-tokens" if "birnn" in model else "sst"
        load = run([ACROBAT, "run", model, "--set", f"H={size}", "--input", f"{kind}:{data}",
                    "--limit", "1", "--engine", "aot", "--threads", "1", "--show", "0"], env).stderr
        loaded = re.search(r"from the cache, loaded in ([0-9.]+) s", load).group(1)
    return {"analyses": float(m.group(1)), "generate": float(m.group(2)),
            "compiler": float(m.group(3)), "cold_wall": cold_wall, "cached_wall": warm_wall,
            "cached_load": float(loaded), "lines": int(lines)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/treelstm.acr")
    ap.add_argument("--input", default=None, help="KIND:FILE (default: the SST test set)")
    ap.add_argument("--sizes", default="256,512")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    model = os.path.join(ROOT, args.model) if not os.path.isabs(args.model) else args.model
    name = os.path.splitext(os.path.basename(model))[0]
    kind = "sst-tokens" if name == "birnn" else "sst"
    data = args.input or f"{kind}:{os.path.join(ROOT, 'data', 'sst', 'test.txt')}"
    out = args.out or os.path.join(ROOT, "bench", "results", f"ablation-{name}")
    os.makedirs(out, exist_ok=True)
    cache = os.path.join(out, "cache")
    sizes = [int(s) for s in args.sizes.split(",")]

    rows, runs = [], {}
    for size in sizes:
        print(f"ablation: H={size}", file=sys.stderr, flush=True)
        j = bench(model, data, size, args.reps, os.path.join(out, f"H{size}.json"), cache)
        runs[size] = j
        ref = next(r for r in j["results"] if r["engine"] == "reference")
        for r in j["results"]:
            if r["engine"] == "reference":
                continue
            rows.append({
                "H": size, "analyses": r["analyses"],
                "engine": "interpreter" if r["engine"] == "inline-depth" else r["engine"],
                "threads": r["threads"], "batch": r["batch"],
                "speedup": r["instances_per_s"] / ref["instances_per_s"],
                "inst_s": r["instances_per_s"],
                "sgemm_pct": 100 * r["useful_gflops"] / j["sgemm_gflops"],
                "overhead_pct": 100 * (r["overhead_fraction"] or 0),
                "mean_batch": r["mean_batch_size"],
            })
    times = {size: compile_times(model, size) for size in sizes}

    lines = [f"# Ablation: {args.model}", "",
             f"`/usr/bin/python3 bench/ablation.py --model {args.model} --sizes {args.sizes} "
             f"--reps {args.reps}`, on the 2210 SST test sentences. Each cell is the median of "
             f"{args.reps} repetitions; each size is one `acrobat bench --ablation` process, whose "
             "rows take their repetitions in turns after a warm-up run, with one reference row and "
             "the sgemm yardstick (OpenBLAS 1024^3, one thread) sampled between repetitions.", "",
             "Speed-up over the reference engine (one instance at a time) / useful GFLOP/s as % of "
             "the yardstick / host overhead (host program + graph + scheduling as a share of wall "
             "time):", ""]
    for size in sizes:
        j = runs[size]
        lines += [f"## H = {size}", "",
                  "| analyses | engine | threads | batch | vs reference | % sgemm | overhead | "
                  "mean batch |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["H"] != size:
                continue
            lines.append(f"| {r['analyses']} | {r['engine']} | {r['threads']} | {r['batch']} | "
                         f"{r['speedup']:.2f}x | {r['sgemm_pct']:.1f}% | {r['overhead_pct']:.1f}% | "
                         f"{r['mean_batch']:.1f} |")
        ref = next(r for r in j["results"] if r["engine"] == "reference")
        lines += ["", f"Reference engine: {ref['instances_per_s']:.0f} instances/s; yardstick "
                  f"{j['sgemm_gflops']:.0f} GFLOP/s (samples {min(j['sgemm_gflops_samples']):.0f}-"
                  f"{max(j['sgemm_gflops_samples']):.0f}).", ""]
    lines += ["## Compile times", "",
              "| H | parse + check + analyses | C++ generation | system compiler | lines of C++ | "
              "`acrobat compile`, empty cache | `acrobat compile`, cached | cached load (`run`) |",
              "|---|---|---|---|---|---|---|---|"]
    for size, t in times.items():
        lines.append(f"| {size} | {t['analyses']:.3f} s | {t['generate']:.3f} s | "
                     f"{t['compiler']:.2f} s | {t['lines']} | {t['cold_wall']:.2f} s | "
                     f"{t['cached_wall']:.2f} s | {t['cached_load']:.3f} s |")
    lines.append("")
    report = os.path.join(out, "README.md")
    with open(report, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out, "rows.json"), "w") as f:
        json.dump({"rows": rows, "compile_times": times}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
